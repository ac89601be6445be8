"""The native plane's admission: an offer becomes a session process, bounded while unproven.

A native session runs in its own process like every session (`streaming.sessions.runtime.
spawn`, a process forked by the session manager): the offer goes
in, the SDP answer comes back. Until DTLS proves the offered fingerprint the peer is only
`connecting` (pid -> claimed fingerprint, bounded host-wide and per device); once proven it is
a live session in the one registry (`streaming.sessions.registry`), ended like any other.
Each offer first takes a place (`streaming.sessions.admission`, `max_sessions` across both
planes; 503 when none is left); its session process holds it for as long as it lives.
"""

from __future__ import annotations

import logging

from common.errors import DomainError
from streaming.sessions import admission, runtime
from streaming.sessions import registry as sessions_registry
from streaming.sessions.registry import connecting

log = logging.getLogger("native")

# Peers answered but not yet proven by DTLS are the registry's `connecting` processes. Bounded,
# because an offer that claims a paired fingerprint gets a peer process for up to the connect
# timeout before the handshake can refuse it.
MAX_CONNECTING = 8
MAX_CONNECTING_PER_DEVICE = 2
ANSWER_TIMEOUT_S = 20


class SessionError(DomainError):
    def __init__(self, status: int, message: str):
        super().__init__(message, status=status)


def registry() -> dict[str, dict]:
    """Live native sessions by device fingerprint (the WebSocket relay and GET /gpus)."""
    return {rec["fingerprint"]: rec for rec in sessions_registry.live("native")}


def start(offer: dict) -> dict:
    """Start a session process for a device that claims a paired fingerprint and return its
    answer {sdp, type, mode}. The claim is not proven yet: the peer ends this device's
    previous session (a reconnect) and starts anything only after DTLS proves it
    (`peer.py`); until then it counts against `MAX_CONNECTING` (host-wide) and
    `MAX_CONNECTING_PER_DEVICE` (429)."""
    waiting = list(connecting().values())
    if len(waiting) >= MAX_CONNECTING:
        raise SessionError(429, "too many sessions are connecting; try again in a few seconds")
    if waiting.count(offer["fingerprint"]) >= MAX_CONNECTING_PER_DEVICE:
        raise SessionError(429, "this device is already connecting; try again in a few seconds")
    try:
        token = admission.admit_native(offer["fingerprint"], hold_s=ANSWER_TIMEOUT_S + 5)
    except admission.Refused as exc:
        raise SessionError(exc.status, exc.message) from None
    try:
        answer = runtime.spawn("native", {**offer, "admission": token}, ANSWER_TIMEOUT_S)
    except runtime.SpawnError as exc:
        raise SessionError(exc.status, str(exc)) from None
    finally:  # handed over to the process by now, or never will be
        admission.drop_reservation(token)
    if "error" in answer:
        raise SessionError(answer.get("status", 500), answer["error"])
    return answer
