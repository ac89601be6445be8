"""A cheap "has the database changed?" check, so read routes keep what they derived from it.

SQLite's `PRAGMA data_version` changes on a connection whenever another connection (any
thread, any process: daphne, Celery, the planes) has committed since that connection last
asked, and the connection's own `total_changes` counts its own writes. Together they move on
every write, however it is made (ORM save, queryset update, raw SQL, a migration), so a
value cached under them is never older than the database. The check is one PRAGMA that
touches no table, where the routes ran one to four queries and built model objects.

The versions are per connection, so the cache is per thread (Django keeps one connection per
thread: `CONN_MAX_AGE` is None). Nothing is cached inside a transaction (its changes could
still roll back) or on another database engine.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from django.db import connection

_local = threading.local()
_serial = itertools.count()


def version() -> tuple[int, int, int] | None:
    """(connection serial, data_version, total_changes), or None when nothing may be cached."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return None
    connection.ensure_connection()
    raw = connection.connection
    if getattr(_local, "raw", None) is not raw:  # a new connection: its versions start over
        _local.raw, _local.serial, _local.cache = raw, next(_serial), {}
    data_version = raw.execute("PRAGMA data_version").fetchone()[0]
    return (_local.serial, data_version, raw.total_changes)


def cached(name: str, compute: Callable[[], Any]) -> Any:
    """`compute()`, reused on this thread until the database changes. Callers must not mutate
    what they get. The value is stored under the version read before computing, so a write
    that lands during `compute` only costs one more recompute."""
    current = version()
    if current is None:
        return compute()
    entry = _local.cache.get(name)
    if entry is not None and entry[0] == current:
        return entry[1]
    value = compute()
    _local.cache[name] = (current, value)
    return value
