"""The planes a session process can run. Each plane registers itself from its AppConfig.ready
(`compat`, `native`), so the session core names no plane: a plane depends on the core, never
the other way round."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Plane:
    name: str
    main: str  # "module:function" run in the session process with the spec; its exit code
    warm: tuple[str, ...] = ()  # modules the session manager imports before it forks


_planes: dict[str, Plane] = {}


def register(name: str, main: str, warm: tuple[str, ...] = ()) -> None:
    _planes[name] = Plane(name, main, tuple(warm))


def names() -> list[str]:
    return sorted(_planes)


def warm_modules() -> list[str]:
    return [m for plane in _planes.values() for m in (plane.main.split(":")[0], *plane.warm)]


def entry(name: str) -> Callable[[dict], int] | None:
    """The plane's session body, or None for a plane nobody registered."""
    plane = _planes.get(name)
    if plane is None:
        return None
    module, func = plane.main.split(":")
    return getattr(importlib.import_module(module), func)
