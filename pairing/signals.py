"""What pairing announces to the rest of the host.

`client_revoked` is sent after a client lost the host's trust (unpaired, disabled, or every
client unpaired at once), with `fingerprints`: the lowercase fingerprints, or None for all.
The session code subscribes (`streaming/revocations.py`) and ends the revoked clients' live
sessions, so `pairing` never imports `streaming`.

Why a Django signal rather than an event on the bus (`hooks.events.emit`): the bus is for the
outside world (SSE, hooks), drops events while Redis is down and delivers them later in other
processes; a revocation must act at once, in the request that revoked, before its answer
goes out (as the unpair routes promise). A signal is synchronous, in-process and typed.
"""

from __future__ import annotations

import logging

from django.dispatch import Signal

log = logging.getLogger(__name__)

client_revoked = Signal()


def announce_revocation(fingerprints: list[str] | None) -> None:
    """Send `client_revoked`; a failing receiver is logged, never undoes the revocation."""
    wanted = None if fingerprints is None else [f.lower() for f in fingerprints]
    for receiver, result in client_revoked.send_robust(sender=None, fingerprints=wanted):
        if isinstance(result, Exception):
            log.error(
                "revocation receiver %s failed: %s",
                getattr(receiver, "__qualname__", receiver),
                result,
                exc_info=result,
            )
