"""Typed readers for environment settings, so every knob has one parse rule, and the one rule
for what of the host's environment a command it starts for the operator may see."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# Variable names that carry host secrets (HOST_MGMT_TOKEN, HOST_PLUGIN_TOKEN, the operator's own
# MY_API_SECRET, AWS_SECRET_ACCESS_KEY, ...). Hook commands, prep steps and launched apps of
# both planes get the host's environment without them: none of them needs a host credential.
SECRET_ENV_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE_KEY|API_?KEY", re.IGNORECASE
)


def without_secrets(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's environment) minus every secret-named variable."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if not SECRET_ENV_NAME.search(k)}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    return raw in {"1", "true", "yes", "on"}
