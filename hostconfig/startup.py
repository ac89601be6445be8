"""Keys read once when a host process starts (settings): the environment wins, then
`host.conf`, then the schema default.

The environment wins so the supervisor can hand its children the values it resolved (and a
test or a unit file can pin them) without editing the file. A file value that breaks its rule
stops the start with an error naming the key and the rule, before anything listens: never a
host half-started on a default the operator did not choose.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from hostconfig import store

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


def log_file(default: Path) -> tuple[Path, bool]:
    """The host log file: `log_path` from the file (checked now: a path this process cannot
    append to stops the start naming the key), else `default`; and whether it was chosen."""
    chosen = from_file("log_path")
    if not chosen:
        return default, False
    path = Path(chosen)
    problem = unusable_log_path(path)
    if problem:
        raise ImproperlyConfigured(f"host config key log_path: {problem} (value from host.conf)")
    return path, True


def unusable_log_path(path: Path) -> str:
    """Why the host could not append to `path` ("" when it can): the write-time check of
    `log_path` and the start-up one."""
    if not path.is_absolute():
        return "must be an absolute path"
    if path.exists():
        if not path.is_file():
            return f"{path} is not a regular file"
        if not os.access(path, os.W_OK):
            return f"{path} is not writable by the host"
        return ""
    parent = path.parent
    if not parent.is_dir():
        return f"the directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the directory {parent} is not writable by the host"
    return ""
