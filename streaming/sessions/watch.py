"""Why a session ends, one vocabulary for both planes, and the checks that find it while the
session runs (`Watch.tick`), so a new cause is added once and both planes end with the same
word (`session.ended` `reason`, the control list's `stop` reasons, the title's close decision).

**Concurrency: the flow is synchronous.** Every check is blocking I/O (Redis, the pairing
store, /proc, the display's compositor, the games registry), the compat plane is threaded from
its engine up, and a session is its own process, so threads cost nothing shared. The native
plane is the one with an event loop that must not block: it runs each tick in a worker thread
(`asyncio.to_thread(watch.tick, ...)`), once a second, as it did its separate checks before.
An async flow would instead make the threaded plane run a loop only to call blocking code.

A plane's loop calls `tick` (compat every 0.1 s, for a quick stop; native once a second); the
control list is read on every tick, the heartbeat once a second, the checks every
`check_every_s`. What
stays the plane's: its transport ending (compat's stream stopped; native's peer connection
closed) and a client's graceful stop under `keep` (compat waits for a /resume).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import redis

from streaming import session_display
from streaming.sessions import registry

log = logging.getLogger("streaming.sessions")

# Every `session.ended` reason, whichever plane. One word per cause; docs/streaming-sessions.md
# ("How it ends") says which display and title policy each gets.
END_REASONS = frozenset({
    "client",  # the client left: Moonlight stopped its stream, the browser closed or vanished
    "timeout",  # compat: the client went silent past `ping_timeout` (ENet)
    "protocol_error",  # compat: the client broke the control protocol
    "no_video_ping",  # compat: the client never pinged the video port
    "encryption_required",  # compat: the client would not encrypt and the host requires it
    "refused",  # compat: the client asked for a stream the host does not make (a codec it did
    #             not offer, HDR, 4:4:4, a size or rate outside its limits); `error` says why
    "arm_timeout",  # answered, but the client never connected (compat: its control stream;
    #                 native: the DTLS proof) within the plane's connect timeout
    "encoder_failed",  # no encoder opened, or the one open failed with nothing to hand over to
    "display_lost",  # the session's X server or compositor died (`error` says which)
    "app_exited",  # the title (or the game the lifecycle layer follows) exited
    "cancel",  # the player quit the title: Moonlight's /cancel, the page's Stop
    "api",  # an operator ended it: DELETE /api/v1/session, the console
    "app_closed",  # POST /api/apps/close
    "unpaired",  # the device was unpaired or disabled
    "host_shutdown",  # SIGTERM (host stop) or the session manager gone
    "released",  # it gave its place up: compat's /launch claim is another's; a browser that
    #              did not prove the offer's certificate (nothing was started)
    "launch_failed",  # the start failed (display refused, app did not start, ports busy);
    #                   `error` says why and the client was told
    "error",  # the session's own code failed (`error` says how)
    "expired",  # compat: the /launch claim expired before the session process took it
    "session_lost",  # the session process was killed outright; `lifecycle.recover_lost`
})  # fmt: skip

# Ends that leave the display to its linger countdown (the client may come back); the others
# are deliberate (operator, /cancel, unpair, the app or display gone) and skip the linger.
CLIENT_REASONS = frozenset({"client", "timeout", "protocol_error", "no_video_ping",
                            "arm_timeout", "host_shutdown"})  # fmt: skip

# Ends where the title is closed whatever the session settings say: the player quit the app
# (/cancel), the host closed it (DELETE /session, /api/apps/close), the client lost its
# rights (unpair/disable), the host goes down (nothing may outlive it), or the title's
# display died under it (`display_lost`: nothing can show it or resume it, and a title that
# does not die with its X server would otherwise be kept running blind).
CLOSE_REASONS = frozenset({"cancel", "api", "app_closed", "unpaired", "host_shutdown",
                           "released", "display_lost"})  # fmt: skip

# `client.disconnected` `reason` (quit | timeout | error) for an end reason, or for the reason
# compat's stream stopped with; anything else is `quit`. The native plane says `timeout` or
# `error` itself for a peer connection that went silent or failed.
DISCONNECTED = {"timeout": "timeout", "arm_timeout": "timeout", "protocol_error": "error",
                "no_video_ping": "error", "encoder_failed": "error", "display_lost": "error",
                "launch_failed": "error", "refused": "error", "error": "error"}  # fmt: skip

# What a Redis outage raises (redis-py's errors; a socket error where one escapes them).
REDIS_DOWN = (redis.RedisError, OSError)

# Set by the session process's SIGTERM handler (host stop, or the session manager dying).
SHUTDOWN = threading.Event()


def disconnect_reason(reason: str) -> str:
    return DISCONNECTED.get(reason, "quit")


@contextlib.contextmanager
def beating(publish: Callable[[], object], session_id: str) -> Iterator[None]:
    """The heartbeat, once a second, while a session starts: on a loaded machine its steps
    can outlast its record's (and compat's slot claim's) TTL, and another launch must never
    be given its place."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(1.0):
            try:
                publish()
            except Exception:  # Redis hiccup: the next beat tries again
                log.warning("session %s: heartbeat failed during start", session_id,
                            exc_info=True)  # fmt: skip

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


@dataclass(frozen=True)
class End:
    """A session's end: its reason (END_REASONS), whether it is deliberate (no display
    linger), the `error` for `session.ended`, and words for the client (the page's "bye")."""

    reason: str
    deliberate: bool
    error: str = ""
    detail: str = ""


class Watch:
    """One session's checks. `authorized(fingerprint)` is the plane's pairing store, asked once
    a second (None: the plane's unpair reaches it through the control list only);
    `connect_timeout_s` bounds the time from `arm` (the answer) to the client connecting."""

    def __init__(self, session_id: str, fingerprint: str, connect_timeout_s: float,
                 authorized: Callable[[str], bool] | None = None,
                 on_request: Callable[[dict], End | None] | None = None,
                 check_every_s: float = 1.0):  # fmt: skip
        self.id = session_id
        self.fingerprint = fingerprint
        self.connect_timeout_s = connect_timeout_s
        self.authorized = authorized
        self.on_request = on_request  # ops other than `stop` (compat's `resume`)
        self.parent = int(os.environ.get("SESSION_MANAGER_PID", "0") or 0)
        self.armed_at = time.monotonic()
        self.check_every_s = check_every_s  # compat checks each tick: an exit is seen at once
        self.last_check = self.last_beat = 0.0
        self.redis_down = False  # logged once per outage

    def arm(self) -> None:
        """The client was answered (a /launch, a /resume, the offer): its connect clock starts."""
        self.armed_at = time.monotonic()

    def tick(self, *, connected: bool, display: dict | None = None, app=None,
             capture_lost: str = "", encoder_failure: str = "",
             publish: Callable[[], object] | None = None) -> End | None:  # fmt: skip
        """The session's end if one is due now, else None. `publish` is the heartbeat (False:
        the session's place is no longer its own); `capture_lost` names a capture that
        stopped answering; `encoder_failure` says why the encoder failed."""
        if SHUTDOWN.is_set():
            return End("host_shutdown", False, detail="ended by the host")
        end = self.requests()
        if end is not None:
            return end
        now = time.monotonic()
        if publish is not None and now - self.last_beat >= 1.0:
            self.last_beat = now
            if self.beat(publish) is False:
                return End("released", True, detail="the session's place was taken")
        if now - self.last_check < self.check_every_s:
            return None
        self.last_check = now
        return self.check(connected, display, app, capture_lost, encoder_failure)

    def check(self, connected: bool, display: dict | None, app, capture_lost: str,
              encoder_failure: str) -> End | None:  # fmt: skip
        """The checks, the cause before its effects: the host going, the device's rights, the
        display (a title dies with it, but the display is the cause), the encoder, the title,
        then a client that never came."""
        if self.parent and os.getppid() != self.parent:
            return End("host_shutdown", False, detail="host exited")
        if self.authorized is not None and not self.authorized(self.fingerprint):
            return End("unpaired", True, detail="unpaired or disabled")
        gone = session_display.compositor_gone(display) if display else ""
        gone = gone or (f"{capture_lost} stopped answering" if capture_lost else "")
        if gone:
            return End("display_lost", True, gone, gone)
        if encoder_failure:
            return End("encoder_failed", True, encoder_failure, "the encoder failed")
        if app is not None and app.exited():
            # session_on_game_exit, or a title the lifecycle layer does not track whose
            # launched command exited (one its hints never found: through its group).
            return End("app_exited", True, detail="the app exited")
        if not connected and time.monotonic() - self.armed_at > self.connect_timeout_s:
            return End("arm_timeout", False, detail="timeout")
        return None

    # The stream needs no Redis: while it is away (killed, restarting) the session keeps
    # streaming and skips its control poll and heartbeat, logging once per outage; the next
    # heartbeat after it is back rewrites the record (and compat's slot claim).
    def requests(self) -> End | None:
        """The control list: `stop` (from another process: the API, unpair, a reconnect) ends
        the session with the reason it names; other ops go to `on_request`."""
        try:
            found = registry.pop(self.id)
        except REDIS_DOWN as exc:
            self._redis_away(exc)
            return None
        self.redis_down = False
        for req in found:
            if req.get("op") == "stop":
                deliberate = bool(req.get("deliberate", True))
                detail = "ended by the host" if deliberate else "reconnected"
                return End(req.get("reason") or "api", deliberate, detail=detail)
            if self.on_request is not None:
                end = self.on_request(req)
                if end is not None:
                    return end
        return None

    def beat(self, publish: Callable[[], object]) -> object:
        """The heartbeat; its result (a Redis outage: True, the session streams on)."""
        try:
            return publish()
        except REDIS_DOWN as exc:
            self._redis_away(exc)
            return True

    def _redis_away(self, exc: Exception) -> None:
        if not self.redis_down:
            self.redis_down = True
            log.warning("session %s: Redis unreachable (%s); streaming on without it",
                        self.id, exc.__class__.__name__)  # fmt: skip
