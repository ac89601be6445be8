"""What a native session runs inside its display: Desktop, a catalog app (apps.json, the same
entries the compat plane launches) or a library title.

Why here and not in the compat runner: the compat session task is being reshaped by another
engineer; this module reuses its building blocks read-only (`streaming.apprun` for the process
group and the HOST_* environment, `hooks.prep` for the `do`/`undo` steps, persisted so a crash
still undoes them at the next host start) in the same order: prep `do`, the app in its own
session, and at the end SIGTERM/SIGKILL of the group, then `undo` newest first.

Keys the page sends: `desktop`, `app:<catalog id>`, or a library id (`steam:570`, `custom:3`).

The launched title goes to `streaming.game.lifecycle` through the compat session's own glue
(`streaming.session_play.GameLink`, plane `native`): `game.running` / `game.exited`, the session
settings at the session's end (keep, on_quit, always with its grace window) and a reconnect
taking over the game that waits out its grace instead of starting a second copy.
"""

from __future__ import annotations

import logging
import os
import shlex
from dataclasses import dataclass, field
from types import SimpleNamespace

log = logging.getLogger("streaming.native")

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
    except Exception:  # noqa: BLE001 - the picker still offers Desktop
        log.exception("catalog listing for /play failed")
    try:
        from library import services as library

        out += [
            {"id": e["id"], "title": e["title"]}
            for e in library.list_library()
            if _library_cmd(e.get("launch"))
        ][:MAX_LISTED]
    except Exception:  # noqa: BLE001
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


class AppRun:
    """The chosen app running in one session's display (nothing for Desktop), and its game in
    the lifecycle layer (`session_id`: the peer's pid, as in the session's events)."""

    def __init__(self, choice: Choice, session_id: int, client_name: str):
        from streaming.session_play import GameLink

        self.choice = choice
        self.prep_key = f"native-session-{session_id}"
        self.proc = None
        self.prepped = False
        c = choice
        self.app = SimpleNamespace(id=c.key, name=c.title, env=c.env, raw=c.raw,
                                   exit_timeout=c.exit_timeout)  # fmt: skip
        self.game = GameLink(session_id, client_name, plane="native")
        self.resumed = False

    def start(self, display: dict, extra_env: dict, client: dict, mode: tuple,
              map_timeout: float = 30.0) -> None:  # fmt: skip
        """Prep `do`, then the command in the session's display (`machine.acquire`'s answer):
        onto its output of the headless compositor (`sway`, as the compat plane does), else
        in its own process group with DISPLAY (and WAYLAND_DISPLAY on `wlr`) set.
        session_display.DisplayLaunchError when the app cannot be put on the output."""
        from hooks import prep
        from streaming import session_display
        from streaming.apprun import AppProcess, app_vars, session_env

        c = self.choice
        if not c.cmd and not c.prep:
            return
        # A game of this app waiting out its grace window (this device reconnecting): take it.
        if c.cmd and self.game.resume(self.app):
            self.resumed = True
            return
        x_display = session_display.app_x_display(display)
        wayland = display.get("wayland_display") or ""
        env = session_env(os.environ, x_display=x_display, app=self.app, client=client,
                          mode=mode, wayland=wayland)  # fmt: skip
        env.update(extra_env)
        if c.prep:
            self.prepped = True
            prep.run_do(self.prep_key, c.prep, env)
        if not c.cmd:
            return
        if display.get("backend") == "sway":
            own = {**app_vars(self.app, client, mode), **extra_env}
            self.proc = session_display.launch_in_compositor(
                display, c.cmd, own, c.working_dir, c.exit_timeout, map_timeout
            )
        else:
            self.proc = AppProcess(c.cmd, env, c.working_dir, c.exit_timeout)
        self.game.launched(self.app, self.proc.pgid, self.prep_key if c.prep else None)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def exited(self) -> bool:
        """The session must end for its game: `session_on_game_exit` and the game exited, or
        (a title the lifecycle layer does not track) the launched command exited."""
        if self.game.game_exit is not None:
            return True
        if self.resumed:  # its watcher may live in another process: read the record
            from streaming.game import registry
            from streaming.game import settings as game_settings

            rec = registry.get(self.game.key or "")
            gone = rec is None or rec.get("state") == registry.EXITED
            return gone and game_settings.load().session_on_game_exit
        return self.proc is not None and self.proc.exited() and not self.game.watching()

    def end(self, reason: str = "api", deliberate: bool = True) -> bool:
        """Apply the session's end to the game (session_play.CLOSE_REASONS close it, else the
        session settings); unless it lives on (kept, grace), SIGTERM the group (SIGKILL after
        the entry's exit timeout), then the owed undos. True when the game lives on."""
        from hooks import prep

        lives_on = self.game.finish(reason, deliberate)
        if self.proc is not None:
            if lives_on:
                self.proc.proc.poll()  # the game lives on in its own group; reap only
            else:
                self.proc.terminate()
        if self.prepped and not lives_on:
            prep.run_undo(self.prep_key)  # a no-op when the lifecycle layer already ran them
        return lives_on
