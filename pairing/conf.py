"""Settings of the pairing app, read from the environment with working defaults."""

from __future__ import annotations

from common.env import env_int


def pin_timeout_s() -> int:
    """How long a knocking client waits for the operator's PIN."""
    return env_int("HOST_PAIRING_PIN_TIMEOUT", 60)


def step_timeout_s() -> int:
    """How long the host waits for the client's next handshake step after the PIN."""
    return env_int("HOST_PAIRING_STEP_TIMEOUT", 30)
