"""Realtime scheduling for the few threads that pace a stream's packets.

A session's sender (the WebRTC peer's event loop, the pipes that feed it) does little work per
frame but must do it on time: under a CPU hog at normal priority it gets its fair share only
after every busy process on its core has had theirs, and frames leave hundreds of milliseconds
late however the queue is managed. Round-robin realtime scheduling (SCHED_RR) lets it run as
soon as it is ready, the way PipeWire runs its audio threads on every desktop.

Who may have it, in order:
1. the process itself, where RLIMIT_RTPRIO allows (a user in an `audio`/`realtime` group with
   limits set, or a service given CAP_SYS_NICE);
2. RealtimeKit (`rtkit-daemon`, on the system bus of GNOME and KDE desktops, which PipeWire
   uses), which grants realtime priority to a thread of a process that has capped its
   RLIMIT_RTTIME;
3. nobody: the thread stays at normal priority, and the reason is logged once per process.

Safety: SCHED_RESET_ON_FORK, so no child (the encoder, a game) or later thread inherits it,
and RLIMIT_RTTIME capped, so a thread that runs RTTIME_US without blocking gets SIGXCPU; the
handler puts every promoted thread back to normal priority and says so. Only the encoder does
heavy work, and it is never promoted.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import threading

from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
from jeepney.wrappers import DBusErrorResponse, Properties, unwrap_msg

log = logging.getLogger(__name__)

# Below PipeWire's audio threads (RealtimeKit caps clients at 20; PipeWire asks for its max):
# sound keeps precedence over video pacing.
PRIORITY = 10
# CPU a promoted thread may use without blocking: SIGXCPU at the soft limit (handled: back to
# normal priority), SIGKILL at the hard one. RealtimeKit refuses a hard limit over its own
# RTTimeUSecMax (200 ms by default).
RTTIME_SOFT_US = 100_000
RTTIME_HARD_US = 200_000
RTKIT = DBusAddress(
    "/org/freedesktop/RealtimeKit1",
    bus_name="org.freedesktop.RealtimeKit1",
    interface="org.freedesktop.RealtimeKit1",
)
DBUS_TIMEOUT_S = 2.0

_lock = threading.Lock()  # the refusal's log-once flag; never taken in a signal handler
_promoted: set[int] = set()
_prepared = False
_refusal_logged = False


# The policy a demoted thread goes back to: the process's own at `prepare` when it is not a
# realtime one (SCHED_OTHER, SCHED_BATCH or SCHED_IDLE as its parent set it), else SCHED_OTHER.
_normal = (os.SCHED_OTHER, 0)


def prepare() -> None:
    """Cap RLIMIT_RTTIME and handle SIGXCPU; from the main thread, before any `promote`
    (Python sets signal handlers there only)."""
    global _prepared, _normal
    policy = os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK
    if policy not in (os.SCHED_RR, os.SCHED_FIFO):
        _normal = (policy, os.sched_getparam(0).sched_priority)
    _cap_rttime()
    signal.signal(signal.SIGXCPU, _on_sigxcpu)
    _prepared = True


def promote(role: str, bus_address: str | None = None) -> str | None:
    """Give the calling thread SCHED_RR at PRIORITY. None when it has it, else the reason it
    stays at normal priority (logged once per process). `bus_address`: the system bus where
    RealtimeKit answers (default: the standard system bus)."""
    if not _prepared:
        reason = "the process did not cap RLIMIT_RTTIME and handle SIGXCPU first"
        _refused(role, reason)
        return reason
    tid = threading.get_native_id()
    try:
        os.sched_setscheduler(tid, os.SCHED_RR | os.SCHED_RESET_ON_FORK, os.sched_param(PRIORITY))
        how = "the process's own RLIMIT_RTPRIO"
    except PermissionError:
        reason = _ask_rtkit(tid, bus_address)
        if reason is not None:
            _refused(role, reason)
            return reason
        how = "RealtimeKit"
    _promoted.add(tid)
    log.info("%s runs at realtime priority %d (SCHED_RR, through %s)", role, PRIORITY, how)
    return None


def promoted() -> set[int]:
    return set(_promoted)


def demote_all(why: str) -> None:
    """Every promoted thread back to normal priority (`_normal`). No lock: it runs in the
    SIGXCPU handler, which may interrupt any code of its thread; each set operation is atomic
    under the GIL."""
    tids = list(_promoted)
    _promoted.difference_update(tids)
    for tid in tids:
        try:
            os.sched_setscheduler(tid, _normal[0], os.sched_param(_normal[1]))
        except OSError:  # an ended thread
            pass
    if tids:
        log.warning("media threads back at normal priority: %s", why)


def _cap_rttime() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_RTTIME)
    inf = resource.RLIM_INFINITY
    new_hard = RTTIME_HARD_US if hard == inf else min(hard, RTTIME_HARD_US)
    new_soft = min(RTTIME_SOFT_US, new_hard) if soft == inf else min(soft, new_hard)
    if (new_soft, new_hard) != (soft, hard):
        resource.setrlimit(resource.RLIMIT_RTTIME, (new_soft, new_hard))


def _ask_rtkit(tid: int, bus_address: str | None) -> str | None:
    """None when RealtimeKit gave `tid` realtime priority, else why not."""
    try:
        conn = open_dbus_connection(bus_address or "SYSTEM", auth_timeout=DBUS_TIMEOUT_S)
    except (OSError, ValueError) as exc:
        return (
            "RLIMIT_RTPRIO is 0 and RealtimeKit cannot be reached: no system D-Bus "
            f"({exc.__class__.__name__}: {exc})"
        )
    try:
        with conn:
            try:
                ceiling = unwrap_msg(
                    conn.send_and_get_reply(
                        Properties(RTKIT).get("MaxRealtimePriority"), timeout=DBUS_TIMEOUT_S
                    )
                )[0][1]
                priority = min(PRIORITY, int(ceiling))
                call = new_method_call(
                    RTKIT, "MakeThreadRealtimeWithPID", "ttu", (os.getpid(), tid, priority)
                )
                unwrap_msg(conn.send_and_get_reply(call, timeout=DBUS_TIMEOUT_S))
            except DBusErrorResponse as exc:
                detail = exc.data[0] if exc.data else exc.name
                return f"RLIMIT_RTPRIO is 0 and RealtimeKit refused: {detail} ({exc.name})"
            except TimeoutError:
                return f"RLIMIT_RTPRIO is 0 and RealtimeKit did not answer in {DBUS_TIMEOUT_S:g} s"
    except OSError as exc:
        return f"RLIMIT_RTPRIO is 0 and the system bus connection failed: {exc}"
    return None


def _refused(role: str, reason: str) -> None:
    global _refusal_logged
    with _lock:
        first, _refusal_logged = not _refusal_logged, True
    if first:
        log.warning("%s runs at normal priority: %s", role, reason)


def _on_sigxcpu(signum, frame) -> None:
    demote_all(f"one ran {RTTIME_SOFT_US // 1000} ms of CPU without blocking (SIGXCPU)")
