"""Keys read once when a host process starts (settings): the environment wins, then
`host.conf`, then the schema default.

The environment wins so the supervisor can hand its children the values it resolved (and a
test or a unit file can pin them) without editing the file. A file value that breaks its rule
stops the start with an error naming the key and the rule, before anything listens: never a
host half-started on a default the operator did not choose.
"""

from __future__ import annotations

import logging

from django.core.exceptions import ImproperlyConfigured

# `min_log_level` -> a logging level; `none` is above CRITICAL, so nothing is logged.
LOG_LEVELS = {
    "verbose": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.CRITICAL,
    "none": logging.CRITICAL + 10,
}


def from_file(name: str):
    """The typed `host.conf` value of `name`, else its default; ImproperlyConfigured (naming
    the key, the file and the rule) for a value that breaks the rule or is refused."""
    from hostmgmt.config import store

    try:
        return store.effective(name)
    except store.ConfigError as exc:
        detail = "; ".join(f"{k}: {v}" for k, v in exc.fields.items())
        raise ImproperlyConfigured(f"host config key {detail}") from None


def log_level(env: str | None) -> int | str:
    """The root level: HOST_LOG_LEVEL when set, else `min_log_level` from the file."""
    if env:
        return env.upper()
    return LOG_LEVELS[from_file("min_log_level")]
