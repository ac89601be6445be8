"""What a session runs inside its display, for both planes: Desktop, a catalog app (apps.json)
or a library title, looked up by one resolver (`resolve`).

Keys: `desktop`, `app:<catalog id>`, or a library id (`steam:570`, `custom:3`). The browser's
picker sends them as they are (`choices`); Moonlight knows catalog entries by their bare id
(the compat applist), so `catalog_app` resolves `app:<id>` and keeps that bare id as the
app's id (`HOST_APP_ID`, the game's app id), as Moonlight's /launch always had it.

The launch itself (prep `do`, the app in its own session or on the compositor's output, the
game's link to `games.lifecycle`, and at the end the group and the `undo` steps) is
the session core's (`streaming.sessions.lifecycle.AppRun`).
"""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass, field
from types import SimpleNamespace

from library import catalog
from library import services as library
from streaming.sessions import lifecycle

log = logging.getLogger("streaming.sessions")

MAX_LISTED = 200
DESKTOP = "desktop"
CATALOG = "app:"  # a catalog entry's key: `app:<id>`


@dataclass
class Choice:
    key: str
    title: str
    cmd: str = ""
    env: dict = field(default_factory=dict)
    working_dir: str = ""
    prep: list = field(default_factory=list)
    exit_timeout: float = 5.0
    raw: dict = field(default_factory=dict)  # what the lifecycle layer reads: detect, store...
    # The catalog entry's run fields (games.appfields); library titles keep the defaults.
    output: str = ""
    detached: list = field(default_factory=list)
    auto_detach: bool = True
    wait_all: bool = True
    elevated: bool = False
    encoder_preset: int | None = None  # the entry's encoder-preset (launch limits)
    app_id: str = ""  # the id the app carries when it is not the key (`catalog_app`)


def _library_cmd(launch) -> str:
    """A library entry's launch record as a shell command ('' when we cannot start it)."""
    if not isinstance(launch, dict):
        return ""
    kind, value = launch.get("kind"), str(launch.get("value") or "")
    if not value:
        return ""
    if kind == "command":
        return value
    if kind == "steam_appid" and value.isdigit():
        return f"steam steam://rungameid/{value}"
    if kind == "lutris_id" and value.isdigit():
        return f"lutris lutris:rungameid/{value}"
    if kind == "heroic" and ":" in value:
        runner, name = value.split(":", 1)
        return "xdg-open " + shlex.quote(f"heroic://launch/{runner}/{name}")
    return ""


def choices() -> list[dict]:
    """The browser's picker: Desktop, the catalog apps, then library titles that can be
    launched."""
    out = [{"id": DESKTOP, "title": "Desktop"}]
    try:
        # An entry with nothing to run or prepare is Desktop again (Sunshine's default list).
        out += [
            {"id": f"{CATALOG}{a.id}", "title": a.name}
            for a in catalog.list_apps()
            if a.cmd.strip() or a.prep
        ]
    except Exception:  # the picker still offers Desktop
        log.exception("catalog listing for /play failed")
    try:
        out += [
            {"id": e["id"], "title": e["title"]}
            for e in library.list_library()
            if _library_cmd(e.get("launch"))
        ][:MAX_LISTED]
    except Exception:
        log.exception("library listing for /play failed")
    return out


def resolve(key: str) -> Choice | None:
    """The launch recipe for a picker key; None when it names nothing."""
    if not isinstance(key, str) or not key or key == DESKTOP:
        return Choice(DESKTOP, "Desktop")
    key = key[:200]
    if key.startswith(CATALOG):
        app = catalog.find_app(key[len(CATALOG) :])
        if app is None:
            return None
        return Choice(
            key,
            app.name,
            cmd=app.cmd.strip(),
            env=dict(app.env or {}),
            working_dir=app.working_dir,
            prep=list(app.prep or []),
            exit_timeout=float(5 if app.exit_timeout is None else app.exit_timeout),
            raw=dict(app.raw or {}),
            output=app.output,
            detached=list(app.detached or []),
            auto_detach=app.auto_detach,
            wait_all=app.wait_all,
            elevated=app.elevated,
            encoder_preset=app.encoder_preset,
        )
    info = library.launch_info(key)
    if info is None:
        return None
    cmd = _library_cmd(info.get("launch"))
    if not cmd:
        return None
    raw = {"store": info.get("store"), "launch": info.get("launch"), "detect": info.get("detect")}
    return Choice(key, info["title"] or key, cmd=cmd, prep=list(info.get("prep") or []), raw=raw)


def catalog_app(app_id) -> SimpleNamespace | None:
    """Moonlight's /launch: the catalog entry `app_id` (its bare id) as the app the session
    core launches; None when it is not in the catalog."""
    choice = resolve(f"{CATALOG}{app_id}")
    if choice is None:
        return None
    choice.app_id = str(app_id)
    return app_of(choice)


def app_of(choice: Choice) -> SimpleNamespace:
    """A choice as the app the session core launches and the launch limits read (a catalog
    App's attributes)."""
    c = choice
    return SimpleNamespace(id=c.app_id or c.key, name=c.title, cmd=c.cmd, env=c.env, raw=c.raw,
                           working_dir=c.working_dir, prep=c.prep,
                           exit_timeout=c.exit_timeout, output=c.output, detached=c.detached,
                           auto_detach=c.auto_detach, wait_all=c.wait_all,
                           elevated=c.elevated, encoder_preset=c.encoder_preset)  # fmt: skip


class AppRun(lifecycle.AppRun):
    """A choice run by the session core's AppRun (plane `native`, as the browser's picker)."""

    def __init__(self, choice: Choice, session_id, client_name: str):
        super().__init__(app_of(choice), session_id, client_name, "native")
        self.choice = choice
