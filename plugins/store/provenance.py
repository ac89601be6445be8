"""How each store-installed package got here (`provenance.json`: source, entry id, version,
tier, installed_at) and the wheel of its installed version kept under `wheels/<pkg>/`, which a
later upgrade rolls back to when the new version fails its health check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from common.files import atomic_write
from plugins.store import conf

FILE = "provenance.json"


def read_all() -> dict[str, dict]:
    try:
        data = json.loads((conf.store_dir() / FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(data: dict) -> None:
    atomic_write(conf.store_dir() / FILE, json.dumps(data, indent=2, sort_keys=True) + "\n")


def record(pkg: str, info: dict) -> None:
    data = read_all()
    data[pkg] = info
    _write(data)


def forget(pkg: str) -> None:
    data = read_all()
    if data.pop(pkg, None) is not None:
        _write(data)
    shutil.rmtree(conf.sub_dir("wheels") / pkg, ignore_errors=True)


def kept_wheel(pkg: str) -> Path | None:
    """The wheel of the version the store installed last (the rollback target)."""
    name = read_all().get(pkg, {}).get("wheel")
    if not name:
        return None
    path = conf.sub_dir("wheels") / pkg / name
    return path if path.is_file() else None


def keep_wheel(pkg: str, wheel: Path) -> str:
    """Keep `wheel` as the package's last good one (older ones removed); returns its name."""
    folder = conf.sub_dir("wheels") / pkg
    folder.mkdir(mode=0o700, exist_ok=True)
    target = folder / wheel.name
    if wheel.resolve() != target.resolve():
        shutil.copyfile(wheel, target)
    for other in folder.iterdir():
        if other.name != wheel.name:
            other.unlink(missing_ok=True)
    return wheel.name
