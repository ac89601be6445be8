"""What a native session runs inside its display: Desktop, a catalog app (apps.json, the same
entries the compat plane launches) or a library title.

The launch itself (prep `do`, the app in its own session or on the compositor's output, the
game's link to `games.lifecycle`, and at the end the group and the `undo` steps) is
the session core's (`streaming.sessions.lifecycle.AppRun`), the same for both planes.

Keys the page sends: `desktop`, `app:<catalog id>`, or a library id (`steam:570`, `custom:3`).
"""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass, field
from types import SimpleNamespace

from streaming.sessions import lifecycle

log = logging.getLogger("native")

MAX_LISTED = 200
DESKTOP = "desktop"


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
    """The /play picker: Desktop, the catalog apps, then library titles that can be launched."""
    out = [{"id": DESKTOP, "title": "Desktop"}]
    try:
        from library import catalog

        # An entry with nothing to run or prepare is Desktop again (Sunshine's default list).
        out += [
            {"id": f"app:{a.id}", "title": a.name}
            for a in catalog.list_apps()
            if a.cmd.strip() or a.prep
        ]
    except Exception:  # the picker still offers Desktop
        log.exception("catalog listing for /play failed")
    try:
        from library import services as library

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
    if key.startswith("app:"):
        from library import catalog

        app = catalog.find_app(key[4:])
        if app is None:
            return None
        return Choice(
            key,
            app.name,
            cmd=app.cmd.strip(),
            env=dict(app.env or {}),
            working_dir=app.working_dir,
            prep=list(app.prep or []),
            exit_timeout=float(app.exit_timeout or 5),
            raw=dict(app.raw or {}),
            output=app.output,
            detached=list(app.detached or []),
            auto_detach=app.auto_detach,
            wait_all=app.wait_all,
            elevated=app.elevated,
        )
    from library import services as library

    info = library.launch_info(key)
    if info is None:
        return None
    cmd = _library_cmd(info.get("launch"))
    if not cmd:
        return None
    raw = {"store": info.get("store"), "launch": info.get("launch"), "detect": info.get("detect")}
    return Choice(key, info["title"] or key, cmd=cmd, prep=list(info.get("prep") or []), raw=raw)


def app_of(choice: Choice) -> SimpleNamespace:
    """The picker choice as the app the session core launches (a catalog App's attributes)."""
    c = choice
    return SimpleNamespace(id=c.key, name=c.title, cmd=c.cmd, env=c.env, raw=c.raw,
                           working_dir=c.working_dir, prep=c.prep,
                           exit_timeout=c.exit_timeout, output=c.output, detached=c.detached,
                           auto_detach=c.auto_detach, wait_all=c.wait_all,
                           elevated=c.elevated)  # fmt: skip


class AppRun(lifecycle.AppRun):
    """A native choice run by the session core's AppRun (plane `native`)."""

    def __init__(self, choice: Choice, session_id, client_name: str):
        super().__init__(app_of(choice), session_id, client_name, "native")
        self.choice = choice
