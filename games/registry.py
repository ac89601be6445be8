"""The host's launched games, kept in `<state>/games.json` so no process owns them alone.

The engine's worker launches a title and watches it; the API process ends waiting games
(`POST /game/end`); the supervisor expires grace windows. A worker restart must not forget a
game that waits out its reconnect window, so the records live in the state dir: read and
rewritten whole under an exclusive `flock` (`.games.lock`), written with `atomic_write`, so a
reader never sees half a file and two writers never lose each other's change. The file holds
a handful of small records; a read-modify-write costs well under a millisecond.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from common import filecache
from common.files import atomic_write
from common.statedir import ensure_state_dir, state_path

log = logging.getLogger("games")

FILE = "games.json"
LOCK = ".games.lock"
# An exited record stays this long so /status shows `exited` before it drops off.
EXITED_KEEP_S = 5.0

LAUNCHING, RUNNING, GRACE, EXITED = "launching", "running", "grace", "exited"


@contextmanager
def _locked() -> Iterator[None]:
    ensure_state_dir()
    fd = os.open(state_path(LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops the lock


def _read() -> dict[str, dict]:
    try:
        data = json.loads(state_path(FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.error("games registry unreadable (%s); starting empty", exc)
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def _write(records: dict[str, dict]) -> None:
    atomic_write(state_path(FILE), json.dumps(records, indent=1, sort_keys=True))


def _purge(records: dict[str, dict], now: float) -> bool:
    gone = [
        k
        for k, r in records.items()
        if r.get("state") == EXITED and now - float(r.get("exited_at") or 0) > EXITED_KEEP_S
    ]
    for k in gone:
        del records[k]
    return bool(gone)


def all_records() -> dict[str, dict]:
    """A snapshot (no lock needed: the file is replaced atomically)."""
    return _read()


def get(key: str) -> dict | None:
    return _read().get(key)


def put(key: str, record: dict) -> None:
    with _locked():
        records = _read()
        _purge(records, time.time())
        records[key] = record
        _write(records)


def update(fn: Callable[[dict[str, dict]], object]) -> object:
    """Run `fn(records)` under the lock; the records are written back if it changed them.

    `fn` mutates the dict it is given and returns whatever the caller needs from the same
    atomic step (a claim, a list of records to act on).
    """
    with _locked():
        records = _read()
        before = json.dumps(records, sort_keys=True)
        purged = _purge(records, time.time())
        result = fn(records)
        if purged or json.dumps(records, sort_keys=True) != before:
            _write(records)
        return result


def clear() -> None:
    """Forget every record (tests; a host whose games file must be reset by hand)."""
    with _locked():
        _write({})


def game_ref(r: dict) -> dict:
    """GameRef of an event payload (app~, title*, store~, client*, plane*), plus `session_id`
    (the live session the game was launched or resumed in) when it has one."""
    ref = {}
    if r.get("app_id"):
        ref["app"] = r["app_id"]
    ref["title"] = r.get("title", "")
    if r.get("store"):
        ref["store"] = r["store"]
    ref["client"] = r.get("client", "")
    ref["plane"] = r.get("plane", "compat")
    if r.get("session_id") is not None:
        ref["session_id"] = r["session_id"]
    return ref


def _parse_records(raw: bytes) -> dict[str, dict]:
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def active_games() -> list[dict]:
    """ActiveGame records (mgmt-api-records §1.3) for `GET /status`, grace ones included.
    The file is parsed once per version of it (writes replace it: a new inode)."""
    now = time.time()
    out = []
    records = filecache.parsed(state_path(FILE), _parse_records, {})
    for r in sorted(records.values(), key=lambda r: r.get("started_at", 0)):
        game: dict = {}
        if r.get("session_id") is not None and r.get("state") != GRACE:
            game["session_id"] = r["session_id"]
        game["client"] = r.get("client", "")
        if r.get("app_id"):
            game["app_id"] = r["app_id"]
        game["title"] = r.get("title", "")
        if r.get("store"):
            game["store"] = r["store"]
        game["plane"] = r.get("plane", "compat")
        game["state"] = r.get("state", LAUNCHING)
        if game["state"] == GRACE:
            game["grace_remaining_s"] = max(0, int(round(r.get("grace_deadline", now) - now)))
        out.append(game)
    return out
