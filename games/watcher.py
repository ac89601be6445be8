"""Watching one launched title: when does the game itself run, and when is it gone?

`GameWatcher` scans for the game (see `detect.scan`) until it shows up, reports it running,
then waits for its exit and reports that with a reason:

* `exited`: it ended on its own (the player quit, or it crashed);
* `terminated`: the host closed it through `terminate()` (`/api/apps/close`, a session end
  that ends the game): SIGTERM to its process group, SIGKILL after the exit timeout;
* `not_found`: nothing matching the hints showed up within `find_timeout` (a wrong hint);
  the engine then falls back to whatever it does for titles without detection.

Exit is seen through a pidfd, which fires when the process dies even if nobody reaps it (the
game is usually an orphan, and some PID 1s reap only every few seconds, so waiting on psutil
would report a zombie as alive). Where pidfds are missing the watcher polls /proc.

Events go to a callback, called on the watcher's thread; the engine maps them to
`game.running` / `game.exited`. The callback must not block for long.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from common import procs
from games.detect import DetectHints, Found, scan

log = logging.getLogger("games")

RUNNING, EXITED = "running", "exited"
REASON_EXITED, REASON_TERMINATED, REASON_NOT_FOUND = "exited", "terminated", "not_found"


@dataclass(frozen=True)
class GameEvent:
    state: str  # "running" | "exited"
    pid: int | None
    name: str
    reason: str | None = None  # on "exited": "exited" | "terminated" | "not_found"
    at: float = 0.0  # time.monotonic() when the watcher saw it


class GameWatcher:
    def __init__(
        self,
        hints: DetectHints,
        on_event: Callable[[GameEvent], None],
        *,
        poll_s: float = 0.05,
        find_timeout: float | None = 60.0,
        handoff_s: float = 0.1,
        exclude: frozenset[int] = frozenset(),
    ):
        self.hints = hints
        self.on_event = on_event
        self.poll_s = poll_s
        self.find_timeout = find_timeout
        self.handoff_s = handoff_s
        self.exclude = exclude
        self.game: Found | None = None
        self.events: list[GameEvent] = []
        self._stop = threading.Event()
        self._terminating = threading.Event()
        self._thread = threading.Thread(target=self._run, name="game-watcher", daemon=True)
        self._pidfd: int | None = None
        self._found = threading.Event()

    def start(self) -> GameWatcher:
        self._thread.start()
        return self

    # -- the thread -------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            found = self._find()
            if found is None:
                if not self._stop.is_set():
                    reason = REASON_TERMINATED if self._terminating.is_set() else REASON_NOT_FOUND
                    self._emit(GameEvent(EXITED, None, "", reason))
                return
            self.game = found
            self._found.set()
            self._emit(GameEvent(RUNNING, found.pid, found.name))
            while self._wait_exit(found) and not self._stop.is_set():
                successor = None if self._terminating.is_set() else self._successor(found)
                if successor is None:
                    reason = REASON_TERMINATED if self._terminating.is_set() else REASON_EXITED
                    self._emit(GameEvent(EXITED, found.pid, found.name, reason))
                    return
                # A launcher or updater that matched the hints handed over to the real game.
                found = self.game = successor
                self._emit(GameEvent(RUNNING, found.pid, found.name))
        except Exception:  # a watcher must never take the session down with it
            log.exception("game watcher failed")
        finally:
            self._found.set()
            self._close_pidfd()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def _successor(self, gone: Found) -> Found | None:
        """A newer matching process in the same session: the one `gone` started before it left.

        Only newer ones: a launcher that waits for its game is older than the game, so when the
        player quits, the launcher is never mistaken for the game. The successor may still be
        between fork and exec, so this looks for `handoff_s` (which delays `exited` as much).
        """
        self._close_pidfd()
        deadline = time.monotonic() + self.handoff_s
        while True:
            found = scan(self.hints, self.exclude | {gone.pid})
            if found is not None and found.create_time < gone.create_time:
                found = None
            if found is not None and (gone.sid is None or found.sid != gone.sid):
                found = None
            if found is not None or time.monotonic() >= deadline or self._terminating.is_set():
                break
            time.sleep(0.02)
        if found is None:
            return None
        try:
            self._pidfd = os.pidfd_open(found.pid)
        except ProcessLookupError:
            return None
        except (OSError, AttributeError):
            self._pidfd = None
        return found

    def _find(self) -> Found | None:
        if self.hints.empty:
            log.warning("no detect hints and no launched session: cannot watch this title")
            return None
        deadline = None if self.find_timeout is None else time.monotonic() + self.find_timeout
        while not self._stop.is_set() and not self._terminating.is_set():
            found = scan(self.hints, self.exclude)
            if found is not None:
                try:
                    self._pidfd = os.pidfd_open(found.pid)
                except ProcessLookupError:
                    continue  # it went away between the scan and now: scan again
                except (OSError, AttributeError):
                    self._pidfd = None
                return found
            if deadline is not None and time.monotonic() >= deadline:
                return None
            self._stop.wait(self.poll_s)
        return None

    def _wait_exit(self, found: Found) -> bool:
        """True when the game is gone; False when the watcher was stopped first."""
        while not self._stop.is_set():
            if self._pidfd is not None:
                if select.select([self._pidfd], [], [], 0.2)[0]:
                    return True
            else:
                if not procs.alive(found.pid):
                    return True
                self._stop.wait(0.01)
        return False

    def _emit(self, ev: GameEvent) -> None:
        ev = GameEvent(ev.state, ev.pid, ev.name, ev.reason, time.monotonic())
        self.events.append(ev)
        log.info("game %s: %s pid=%s reason=%s", ev.state, ev.name, ev.pid, ev.reason)
        try:
            self.on_event(ev)
        except Exception:
            log.exception("game event callback failed")

    # -- control ----------------------------------------------------------------------------
    def terminate(self, timeout: float = 5.0) -> bool:
        """Close the game as the host: SIGTERM its process group, SIGKILL after `timeout`.

        Returns True once it is gone. The watcher reports `exited` / `terminated`.
        """
        self._terminating.set()
        self._found.wait(timeout)
        game = self.game
        if game is None:
            return True
        _signal_game(game, signal.SIGTERM, self._pidfd, self.hints.session)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("game %s ignored SIGTERM for %.1fs; killing it", game.name, timeout)
            _signal_game(game, signal.SIGKILL, self._pidfd, self.hints.session)
            self._thread.join(2.0)
        return not self._thread.is_alive()

    def stop(self) -> None:
        """Stop watching (no more events); the game is left alone."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(2.0)

    def wait(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


def _signal_game(game: Found, sig: int, pidfd: int | None, launched: int | None) -> None:
    """The whole process group when it is the game's own or the launched command's (helpers
    and the launcher go too), else the game alone: a Steam game shares its group with the Steam
    client, which must live on."""
    try:
        pgid = os.getpgid(game.pid)
    except ProcessLookupError:
        return
    try:
        if pgid == game.pid or (launched is not None and pgid == launched):
            os.killpg(pgid, sig)
        elif pidfd is not None:
            signal.pidfd_send_signal(pidfd, sig)  # no risk of hitting a reused pid
        else:
            os.kill(game.pid, sig)
    except ProcessLookupError:
        pass
