"""Live sessions as the rest of the host sees them, through the one registry
(`streaming.sessions.registry`), and the compat plane's side of admission.

Compat admission (`streaming.sessions.admission`): /launch takes a place (bounded by
`max_sessions`, across both planes) and the lowest free port slot k, and writes the session's
first registry record (state `starting`, `port_slot` k) before the session process exists;
the session's heartbeat keeps the slot claim and the record alive (a crashed process's claim
expires after STATE_TTL_S). Every nvhttp request concerns the caller's own session, found by
its certificate fingerprint (`current(fingerprint)`). Requests to a session (stop, resume) go
through its registry control list.

A compat record is the session core's record (id, plane, pid, state, client, client_id,
fingerprint, mode, width, height, fps, app, app_title, t_start) plus: arm, app_id, app_name,
remote, port_slot, bitrate_kbps, packet_size, min_fec, codec, encoder {backend, gpu_id}
(GET /gpus `active`). States: starting, armed, streaming, idle, ending.
"""

from __future__ import annotations

import json
import logging
import time

from common import dbversion, redis_client
from displays.models import VirtualDisplay
from media import gpus
from streaming import status
from streaming.sessions import admission, registry

log = logging.getLogger("streaming.sessions")

RESULT_PREFIX = f"{registry.PREFIX}:result"
STATE_TTL_S = admission.SLOT_TTL_S
RESULT_TTL_S = 60


def result_key(arm: str) -> str:
    return f"{RESULT_PREFIX}:{arm}"


# -- the compat sessions ---------------------------------------------------------------------
def live_records(plane: str | None = None) -> list[dict]:
    """The registry's live records (of `plane`, or both), oldest first; none without Redis."""
    try:
        return registry.live(plane)
    except Exception as exc:  # no Redis: no session can be running either
        log.warning("session state unavailable (%s)", exc.__class__.__name__)
        return []


def compat_sessions() -> list[dict]:
    """Every live compat session's record, oldest first (none without Redis)."""
    return live_records("compat")


def current(fingerprint: str | None = None) -> dict | None:
    """The live compat session of this client (by certificate fingerprint); without one,
    the oldest live compat session."""
    live = compat_sessions()
    if fingerprint is not None:
        fp = fingerprint.lower()
        live = [rec for rec in live if (rec.get("fingerprint") or "").lower() == fp]
    return live[0] if live else None


def claim(record: dict) -> int:
    """Admit a /launch: a place and a port slot (returned), the starting session registered.
    `admission.Refused` when `max_sessions` are streaming."""
    return admission.admit_compat(record)


def owns(session_id: str, slot: int) -> bool:
    """Whether the session still holds its /launch claim (a late process finds it gone)."""
    return admission.owns_slot(session_id, slot)


def publish(core) -> bool:
    """The compat session's heartbeat (a `SessionCore`): refresh the slot claim and the
    record while the claim is still this session's."""
    if not admission.keep_slot(core.id, int(core.extra.get("port_slot", 0))):
        return False
    core.publish()
    return True


def release(session_id: str, slot: int | None = None) -> None:
    admission.release_slot(session_id, slot)
    registry.remove(str(session_id))


# -- requests to the session ---------------------------------------------------------------
def request_stop(fingerprint: str, reason: str, deliberate: bool = True,
                 wait_s: float = 0.0) -> bool:  # fmt: skip
    """Ask this client's compat session to end; True when one was running. Optionally wait."""
    state = current(fingerprint)
    if state is None:
        return False
    registry.stop([state], reason, deliberate, wait_s)
    return True


def request_resume(session_id: str, arm: dict) -> None:
    registry.push(session_id, {"op": "resume", **arm})


def report(arm: str, status: int, message: str = "") -> None:
    """The session tells the waiting /launch or /resume how arming went."""
    r = redis_client.client()
    r.rpush(result_key(arm), json.dumps({"status": status, "message": message}))
    r.expire(result_key(arm), RESULT_TTL_S)


def wait_report(arm: str, timeout_s: float) -> dict | None:
    r = redis_client.client()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        item = r.blpop([result_key(arm)], timeout=1)
        if item:
            return json.loads(item[1])
    return None


# -- what other apps look up by name ---------------------------------------------------------
def current_game(fingerprint: str | None = None) -> int:
    """The app id /serverinfo reports to this client: its own session's (0 = none)."""
    if fingerprint is None:
        return 0
    state = current(fingerprint)
    if not state:
        return 0
    try:
        return int(state.get("app_id") or 0)
    except ValueError:
        return 0


def end_client_sessions(fingerprints: list[str] | None) -> None:
    """Pairing's hook: unpair / disable / unpair-all cut the client's running sessions, on
    either plane (a native peer also re-checks its authorization every second)."""

    wanted = None if fingerprints is None else [f.lower() for f in fingerprints]
    registry.end_connecting(wanted)  # admitted, still proving their device: not live yet
    registry.stop_clients(wanted, "unpaired", deliberate=True, wait_s=5)


def end_session(session_id: str, reason: str, wait_s: float) -> bool:
    """A deliberate stop of one live session (either plane); False when none has that id."""
    record = registry.get(session_id)
    if record is None:
        return False
    registry.stop([record], reason, deliberate=True, wait_s=wait_s)
    return True


def end_all_sessions(reason: str, wait_s: float) -> None:
    """A deliberate stop of every session on both planes (DELETE /session, /api/apps/close)."""

    registry.end_connecting(None)
    registry.stop_clients(None, reason, deliberate=True, wait_s=wait_s)


def runtime_status() -> dict:
    """The sessions part of GET /api/v1/status (`streaming.status`)."""
    return status.runtime_status()


def kept_displays() -> int:
    return dbversion.cached(
        "streaming.kept_displays",
        VirtualDisplay.objects.filter(state__in=("lingering", "pinned")).count,
    )


def live_encoders() -> list[dict]:
    """One `{"backend", "gpu_id"}` per live encode session: each compat session while its
    stream sends video (state `streaming`; not while armed, idle or ending), and every
    native session (its encoder process runs for the session's life; libx264 unless its
    record says otherwise). Unreachable Redis: none (the GPU list still answers). One read
    of the registry for both planes: `GET /api/v1/gpus` is a read route."""
    records = live_records()
    compat = [r for r in records if r.get("plane") == "compat" and r.get("state") == "streaming"]
    native = [r for r in records if r.get("plane") == "native"]
    return [r.get("encoder") or dict(gpus.SOFTWARE) for r in (*compat, *native)]
