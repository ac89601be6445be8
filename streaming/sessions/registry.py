"""The live sessions of both planes: one Redis key family, one id scheme.

Why Redis: a session runs in its own process (`streaming.sessions.manager`), while the API
(daphne), the compat listener (/serverinfo, /resume, /cancel) and the pairing services read
and end sessions from theirs. Keys:

* `hostmgmt:sessions:live` (hash): session id -> the record, rewritten by the session's
  heartbeat every second. A record whose process is gone, or whose heartbeat is older than
  `STALE_S`, is dropped on read (a crashed session never looks live).
* `hostmgmt:sessions:ctl:<id>` (list): requests to that session (`stop`, `resume`), polled by
  the session process, so every plane ends a session the same way.

Record keys (both planes): id, plane, pid, state, client (name), client_id (certificate
fingerprint prefix), fingerprint, mode, width, height, fps, app, app_title, t_start, beat;
planes add their own (compat: arm, encoder, codec...; native: ws_token, ws_sock, slot...).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import signal
import time

from common import procs, redis_client

log = logging.getLogger("streaming.sessions")

PREFIX = "hostmgmt:sessions"
LIVE = f"{PREFIX}:live"
STALE_S = 15.0
CTL_TTL_S = 60
CLIENT_ID_LEN = 12  # `client_id`: the certificate fingerprint's first 12 hex digits


def new_id() -> str:
    """A session id: 8 random hex digits (never a pid or a clock reading, so ids neither
    repeat after a restart nor tell anything about the host)."""
    return secrets.token_hex(4)


ID_RE = re.compile(r"[0-9a-f]{8}")


def valid_id(value) -> bool:
    """A well-formed session id (what `new_id` makes); the APIs answer 400 for anything else."""
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None


def client_id(fingerprint: str) -> str:
    return (fingerprint or "").lower()[:CLIENT_ID_LEN]


def ctl_key(session_id: str) -> str:
    return f"{PREFIX}:ctl:{session_id}"


def put(record: dict) -> None:
    """Write (or refresh) a session's record; stamps the heartbeat."""
    redis_client.client().hset(LIVE, str(record["id"]), json.dumps({**record, "beat": time.time()}))


def remove(session_id: str) -> None:
    r = redis_client.client()
    r.hdel(LIVE, str(session_id))
    r.delete(ctl_key(str(session_id)))


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return True  # not spawned yet (a compat claim): the heartbeat age decides
    return procs.alive(pid)


def live(plane: str | None = None) -> list[dict]:
    """Live records, oldest first; dead ones are removed on the way."""
    r = redis_client.client()
    out = []
    now = time.time()
    for key, raw in r.hgetall(LIVE).items():
        try:
            rec = json.loads(raw)
        except ValueError:
            rec = None
        if (not isinstance(rec, dict) or now - float(rec.get("beat") or 0) > STALE_S
                or not _alive(rec.get("pid"))):  # fmt: skip
            r.hdel(LIVE, key)
            continue
        if plane is None or rec.get("plane") == plane:
            out.append(rec)
    return sorted(out, key=lambda rec: rec.get("t_start") or 0)


def records_of(pid: int) -> list[dict]:
    """The records a session process left (dead or alive: `live` would drop a dead one)."""
    out = []
    for raw in redis_client.client().hvals(LIVE):
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("pid") == pid:
            out.append(rec)
    return out


def get(session_id: str) -> dict | None:
    return next((rec for rec in live() if rec["id"] == str(session_id)), None)


# -- requests to a session -------------------------------------------------------------------
def push(session_id: str, message: dict) -> None:
    r = redis_client.client()
    key = ctl_key(str(session_id))
    r.rpush(key, json.dumps(message))
    r.expire(key, CTL_TTL_S)


def pop(session_id: str) -> list[dict]:
    """The requests waiting for this session (its own poll)."""
    r = redis_client.client()
    out = []
    while (raw := r.lpop(ctl_key(str(session_id)))) is not None:
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if isinstance(msg, dict):
            out.append(msg)
    return out


def stop(records: list[dict], reason: str, deliberate: bool = True, wait_s: float = 0.0) -> int:
    """Ask these sessions to end (each ends itself: app, undo steps, display, record); wait
    up to `wait_s` for their records to go. Returns how many were asked."""
    ids = [rec["id"] for rec in records]
    for sid in ids:
        push(sid, {"op": "stop", "reason": reason, "deliberate": deliberate})
    deadline = time.monotonic() + wait_s
    while ids and time.monotonic() < deadline:
        left = {rec["id"] for rec in live()}
        if not left & set(ids):
            break
        time.sleep(0.05)
    return len(ids)


def stop_clients(fingerprints: list[str] | None, reason: str, deliberate: bool = True,
                 wait_s: float = 0.0, plane: str | None = None) -> int:  # fmt: skip
    """End the sessions of these devices (None: every session)."""
    wanted = None if fingerprints is None else {f.lower() for f in fingerprints}
    records = [rec for rec in live(plane)
               if wanted is None or (rec.get("fingerprint") or "").lower() in wanted]  # fmt: skip
    return stop(records, reason, deliberate, wait_s)


# -- admitted, not yet proven --------------------------------------------------------------
CONNECTING_KEY = f"{PREFIX}:connecting"


def connecting() -> dict[int, str]:
    """Session processes admitted but not yet proven (a native peer before its DTLS proof):
    pid -> claimed fingerprint. They have started nothing, so they are not live sessions."""
    out = {}
    for pid, fp in redis_client.client().hgetall(CONNECTING_KEY).items():
        if procs.alive(int(pid)):
            out[int(pid)] = fp.decode()
        else:
            redis_client.client().hdel(CONNECTING_KEY, pid)
    return out


def connecting_add(pid: int, fingerprint: str) -> None:
    redis_client.client().hset(CONNECTING_KEY, pid, fingerprint)


def proven(pid: int) -> None:
    """The peer's DTLS proof is in (or it gave up): it no longer counts as connecting."""
    redis_client.client().hdel(CONNECTING_KEY, pid)


def end_connecting(fingerprints: list[str] | None, wait_s: float = 0) -> int:
    """SIGTERM the unproven peers of these devices (None: all): they have started nothing
    yet, so there is nothing to hand back."""
    pids = []
    for pid, fp in connecting().items():
        if fingerprints is None or fp in fingerprints:
            try:
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + wait_s
    while pids and time.monotonic() < deadline and any(procs.alive(p) for p in pids):
        time.sleep(0.05)
    return len(pids)
