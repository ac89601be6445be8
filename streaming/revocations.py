"""The session code's answer to a revoked client (`pairing.signals.client_revoked`): its live
session ends now, on either plane. Registered in `StreamingConfig.ready`."""

from __future__ import annotations

from pairing.signals import client_revoked
from streaming import services


def end_revoked_sessions(sender, fingerprints: list[str] | None, **kwargs) -> None:
    """`fingerprints`: lowercase, or None when every client was unpaired at once."""
    services.end_client_sessions(fingerprints)


def subscribe() -> None:
    client_revoked.connect(end_revoked_sessions, dispatch_uid="streaming.end_revoked_sessions")
