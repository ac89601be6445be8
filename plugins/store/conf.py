"""The store's constants and its few operator knobs (environment variables, read when used)."""

from __future__ import annotations

import re
from pathlib import Path

from common import statedir
from common.env import env_int, env_str

# The built-in source: the project's own catalog, its entries the only `verified` tier.
# GAP: no catalog is published at this address yet (a placeholder under `.invalid`, so it can
# never resolve to someone else's server); it shows `stale` with an error until one is.
# HOST_STORE_BUILTIN_URL / HOST_STORE_BUILTIN_KEY point it at a real one (ops and tests).
BUILTIN_NAME = "hostmgmt"
BUILTIN_URL = "https://plugins.hostmgmt.invalid/v1/catalog.json"
BUILTIN_KEY = "ed25519:b3qARrkiI1TbaXJ0uWZgSRKB3cUijCDToV473iCxDAI="

SOURCE_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")
MAX_SOURCES = 32
MAX_URL = 500

CATALOG_MAX_BYTES = 1024 * 1024  # catalog.json
SIGNATURE_MAX_BYTES = 1024  # catalog.json.sig
WHEEL_MAX_BYTES = 50 * 1024 * 1024
MAX_ENTRIES = 500  # per catalog
FETCH_TIMEOUT_S = 15.0  # connect and each read
CACHE_S = 6 * 3600  # a catalog older than this is refetched on read
RETRY_S = 300  # a failed fetch is not retried on read before this (refresh forces it)

JOB_TIMEOUT_S = 300
JOBS_KEPT = 20
JOB_LOG_LINES = 200
LOCK_KEY = "plugins:store:job-lock"
COUNTER_KEY = "plugins:store:job-counter"


def builtin_url() -> str:
    return env_str("HOST_STORE_BUILTIN_URL") or BUILTIN_URL


def builtin_key() -> str:
    return env_str("HOST_STORE_BUILTIN_KEY") or BUILTIN_KEY


def ca_file() -> str:
    """HOST_STORE_CA_FILE: a PEM bundle trusted in addition to the system's CAs (a private
    catalog server, and the tests' own CA)."""
    return env_str("HOST_STORE_CA_FILE")


def health_wait_s() -> int:
    """How long a freshly installed plugin has to show as running in the runner."""
    return env_int("HOST_STORE_HEALTH_S", 15)


def store_dir() -> Path:
    path = statedir.state_path("plugins", "store")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def sub_dir(name: str) -> Path:
    path = store_dir() / name
    path.mkdir(mode=0o700, exist_ok=True)
    return path
