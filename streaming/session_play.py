"""What makes a session playable beside the stream: launch limits and the game. (Its sound is
`streaming.sessions.sound`.) The work itself lives in the groundwork modules
(docs/playable.md), so this is only the glue and the decisions that belong to a session:

* **Launch limits** (`launch_limits`): the client profile's bitrate ceiling and the entry's
  encoder preset, through `profiles.effective_stream_params` (pure: nothing to restore).
* **The game** (`GameLink`): the launched title is handed to the lifecycle layer, which emits
  `game.running` / `game.exited` and owns the close path. At the session's end the reason
  decides (`streaming.sessions.watch.CLOSE_REASONS`): the host or the player quitting the
  title (`/cancel`, `DELETE /session`, `/api/apps/close`, unpair, host shutdown) closes it
  (`terminated`); any other end (a vanished or idle client) is left to the session settings
  (`keep`, `on_quit`, `always` with its grace window).
"""

from __future__ import annotations

import logging
import os
import threading

from games import closer, lifecycle, profiles, registry
from games import session_settings as game_settings
from hostconfig import store

log = logging.getLogger("streaming.sessions")


def capped_fps(fps: int) -> int:
    """The frame rate a client asked for at launch, capped by `max_fps` (unset: no cap); both
    planes ask it before they choose the display mode."""
    try:
        cap = store.get("max_fps")
    except Exception:  # a broken config must not stop a stream
        cap = None
    return min(fps, cap) if isinstance(cap, int) and cap > 0 else fps


UNCAPPED = 1 << 30


# -- launch limits ---------------------------------------------------------------------------
def launch_limits(client_name: str, app) -> dict:
    """`max_bitrate_kbps` (0 = none), `encoder_preset`, `latency_mode`, `profile`, `applied`.

    The client's own bitrate arrives later (RTSP ANNOUNCE), so the ceiling is computed once
    here against an uncapped ask and applied by the engine to whatever the client asks."""
    try:
        out = profiles.effective_stream_params(
            client_name, app, {"bitrate_kbps": UNCAPPED, "codec": "h264"}
        )
    except Exception:  # a broken config must not stop a launch
        log.exception("client profile lookup failed; host defaults apply")
        return {"max_bitrate_kbps": 0, "encoder_preset": -1, "profile": None, "applied": []}
    cap = out["bitrate_kbps"]
    return {
        "max_bitrate_kbps": int(cap) if isinstance(cap, int) and cap < UNCAPPED else 0,
        "encoder_preset": out["encoder_preset"],
        "latency_mode": out.get("latency_mode"),
        "profile": out["profile"],
        "applied": out["applied"],
    }


# -- the game --------------------------------------------------------------------------------
def user_stop_ends() -> bool:
    """The client ended its stream gracefully (`client.disconnected` `quit`, a user stop):
    the session settings, read now, decide. `keep` never ends the game, so the session
    waits for a /resume or /cancel; `on_quit` and `always` end the game on a user stop at
    once, so the session ends now. (`disconnect_grace_seconds` is for a vanished client
    under `always` only: `timeout`/`error` ends, handled by the lifecycle layer.)"""
    try:
        policy = game_settings.load().game_on_session_end
    except Exception:  # a broken settings file must not end a stream
        log.exception("session settings unreadable; keeping the app for a /resume")
        return False
    return policy in (game_settings.ON_QUIT, game_settings.ALWAYS)


_links: dict = {}
_links_lock = threading.Lock()
_registered = [False]


def _on_game_exit(session_id, reason: str) -> None:
    """lifecycle's callback (watcher thread): the session's game exited, end the session."""
    with _links_lock:
        link = _links.get(session_id)
    if link is not None:
        rec = (registry.get(link.key) if link.key else None) or {}
        link.game_seen = bool(rec.get("game"))  # found, not only followed through the group
        link.game_exit = reason


class GameLink:
    """One session's title in `games.lifecycle`."""

    def __init__(self, session_id, client_name: str, plane: str = "compat"):
        self.session_id = session_id
        self.client_name = client_name
        self.plane = plane  # the native plane's sessions use this link too
        self.key: str | None = None
        self.resumed = False
        self.game_exit: str | None = None  # set when session_on_game_exit ends the session
        self.game_seen = False  # with game_exit: the game's own process had been found
        self._lc = lifecycle
        with _links_lock:
            _links[session_id] = self
            if not _registered[0]:
                lifecycle.on_game_exit(_on_game_exit)
                _registered[0] = True

    def resume(self, app) -> bool:
        """A game of this app waits out its grace window: this session takes it over."""
        try:
            self.resumed = self._lc.resume_game(self.session_id, str(app.id), self.client_name)
        except Exception:
            log.exception("resuming a waiting game failed")
            self.resumed = False
        if self.resumed:
            for key, r in registry.all_records().items():
                if r.get("session_id") == self.session_id:
                    self.key = key
            log.info("session %s took over the waiting game %s", self.session_id, self.key)
        return self.resumed

    def launched(self, app, pgid: int, prep_key: str | None) -> None:
        """Right after the title's command started (its own process group)."""
        raw = app.raw or {}
        steam = raw.get("steam-appid") or raw.get("steam_appid")
        launch = raw.get("launch")
        if isinstance(launch, dict) and launch.get("kind") == "steam_appid":
            steam = steam or launch.get("value")
        try:
            self.key = self._lc.game_launched(
                self.session_id,
                str(app.id),
                app.name,
                store=raw.get("store"),
                client=self.client_name,
                plane=self.plane,
                detect=raw.get("detect") if isinstance(raw.get("detect"), dict) else None,
                steam_appid=steam,
                pgid=pgid,
                exit_timeout=app.exit_timeout,
                prep_key=prep_key,
            )
        except Exception:  # the stream goes on; the app group is still ended by the session
            log.exception("game lifecycle: %s not recorded", app.name)

    def watching(self) -> bool:
        """True while the lifecycle layer knows the title (found, or still looking)."""
        if self.key is None:
            return False
        return registry.get(self.key) is not None

    def seen_game(self) -> tuple[bool, bool] | None:
        """The game the lifecycle layer found for this title and has not yet reported gone, as
        (alive, in process group of the launched command); None when there is none."""
        if self.key is None:
            return None
        rec = registry.get(self.key) or {}
        game = rec.get("game") or {}
        if rec.get("state") == registry.EXITED or not game.get("pid"):
            return None
        found = closer.verified(game)
        if found is None:
            return (False, False)
        try:
            inside = os.getpgid(found.pid) == rec.get("pgid")
        except ProcessLookupError:
            return (False, False)
        return (True, inside)

    def finish(self, close: bool, deliberate: bool) -> bool:
        """Apply the session's end to its title (`close`: an end reason of
        `watch.CLOSE_REASONS`, closed whatever the session settings say); True when the title
        lives on (kept/grace)."""
        with _links_lock:
            _links.pop(self.session_id, None)
        if self.key is None:
            return False
        try:
            if close:
                self._lc.close_game(session_id=self.session_id)
                deliberate = True
            counts = self._lc.session_ended(self.session_id, deliberate)
        except Exception:
            log.exception("game lifecycle at session end failed; ending the app group")
            return False
        return bool(counts.get("kept") or counts.get("grace"))
