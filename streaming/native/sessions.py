"""Native sessions: one peer process per browser, started on demand by the offer endpoint.

Why a dedicated process and not the Celery worker the design names: a WebRTC session lives for
hours and the prefork worker also runs library scans and the compat engine (another engineer
is reshaping that task right now); a process per session is simpler to bound and kill, and its
death is the session's end. The offer goes in on stdin, the answer comes back on stdout; the
registry (fingerprint -> pid, display, mode) lives in Redis so every daphne process and the
API can find and end a session. # GAP: the Celery/Redis handoff of the design is not used.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings

from hostmgmt.lib.errors import DomainError

log = logging.getLogger("streaming.native")

REGISTRY = "native:sessions"  # hash: fingerprint -> JSON record
# Peers answered but not yet proven by DTLS: pid -> fingerprint. Bounded, because an offer
# that claims a paired fingerprint gets a peer process for up to the connect timeout before
# the handshake can refuse it.
CONNECTING = "native:connecting"
MAX_CONNECTING = 8
MAX_CONNECTING_PER_DEVICE = 2
ANSWER_TIMEOUT_S = 20
ROOT = Path(__file__).resolve().parents[2]


class SessionError(DomainError):
    def __init__(self, status: int, message: str):
        super().__init__(message, status=status)


def _redis():
    from hostmgmt.redis_client import client as redis_client

    return redis_client()


def registry() -> dict[str, dict]:
    out = {}
    for fp, raw in _redis().hgetall(REGISTRY).items():
        rec = json.loads(raw)
        if _alive(rec.get("pid")):
            out[fp.decode()] = rec
        else:
            _redis().hdel(REGISTRY, fp)
    return out


def register(fingerprint: str, record: dict) -> None:
    _redis().hset(REGISTRY, fingerprint, json.dumps(record))


def unregister(fingerprint: str, pid: int) -> None:
    raw = _redis().hget(REGISTRY, fingerprint)
    if raw and json.loads(raw).get("pid") == pid:
        _redis().hdel(REGISTRY, fingerprint)


def connecting() -> dict[int, str]:
    """Live peers still waiting for their DTLS proof: pid -> claimed fingerprint."""
    out = {}
    for pid, fp in _redis().hgetall(CONNECTING).items():
        if _alive(int(pid)):
            out[int(pid)] = fp.decode()
        else:
            _redis().hdel(CONNECTING, pid)
    return out


def proven(pid: int) -> None:
    """The peer's DTLS proof is in (or it gave up): it no longer counts as connecting."""
    _redis().hdel(CONNECTING, pid)


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end(fingerprints: list[str] | None, sig: int = signal.SIGTERM, wait_s: float = 0) -> int:
    """SIGTERM the peer processes of these devices (None: all): a deliberate end, the game is
    closed. SIGUSR1 (a reconnect replacing the session): the peer vanished, the session
    settings decide. The peer also polls its own authorization every second, so a session
    whose process is out of reach still ends. `wait_s`: wait that long for them to exit."""
    pids = []
    targets = [(fp, rec["pid"]) for fp, rec in registry().items()]
    if sig == signal.SIGTERM:  # the host ends them: peers still proving their device too
        targets += [(fp, pid) for pid, fp in connecting().items()]
    for fp, pid in targets:
        if fingerprints is None or fp in fingerprints:
            try:
                os.kill(pid, sig)
                pids.append(pid)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + wait_s
    while pids and time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return len(pids)


def _reap(proc: subprocess.Popen) -> None:
    threading.Thread(target=proc.wait, daemon=True, name=f"native-reap-{proc.pid}").start()


def start(offer: dict) -> dict:
    """Start a peer process for a device that claims a paired fingerprint and return its answer
    {sdp, type, mode}. The claim is not proven yet: the peer ends this device's previous
    session (a reconnect) and starts anything only after DTLS proves it (`peer.py`); until
    then it counts against `MAX_CONNECTING` (host-wide) and `MAX_CONNECTING_PER_DEVICE` (429)."""
    waiting = list(connecting().values())
    if len(waiting) >= MAX_CONNECTING:
        raise SessionError(429, "too many sessions are connecting; try again in a few seconds")
    if waiting.count(offer["fingerprint"]) >= MAX_CONNECTING_PER_DEVICE:
        raise SessionError(429, "this device is already connecting; try again in a few seconds")
    log_file = open(Path(settings.LOG_FILE).parent / "native-peer.log", "ab")  # noqa: SIM115 - the child owns it
    env = dict(os.environ, NATIVE_PARENT_PID=str(os.getpid()))
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming.native.peer"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log_file,
    )
    log_file.close()
    _reap(proc)
    _redis().hset(CONNECTING, proc.pid, offer["fingerprint"])
    try:
        proc.stdin.write(json.dumps(offer).encode() + b"\n")
        proc.stdin.close()
        line = _read_line(proc, ANSWER_TIMEOUT_S)
    except (OSError, SessionError):
        proc.kill()
        raise
    finally:
        proc.stdout.close()
    try:
        answer = json.loads(line)
    except ValueError:
        proc.kill()
        raise SessionError(500, "the session process gave no answer") from None
    if "error" in answer:
        raise SessionError(answer.get("status", 500), answer["error"])
    return answer


def _read_line(proc: subprocess.Popen, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SessionError(504, "the session did not start in time")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                raise SessionError(500, "the session process exited before answering")
            buf += chunk
    return buf.split(b"\n", 1)[0]


def runtime_status() -> dict:
    """The native part of `GET /api/v1/status`, for streaming.services.runtime_status to merge:
    {"active_sessions", "video_streaming", "audio_streaming", "sessions": [...]}.

    `DELETE /api/v1/session` ends every native session with `end(None)` (SIGTERM: the peer
    ends the app, runs its undo steps, releases display and sink, writes the history record
    and emits the closing events)."""
    try:
        live = registry()
    except Exception:  # noqa: BLE001 - no Redis: report nothing rather than fail the status
        return {
            "active_sessions": 0,
            "video_streaming": False,
            "audio_streaming": False,
            "sessions": [],
        }
    rows = [
        {
            "client": r["name"],
            "fingerprint": fp,
            "session_id": r["pid"],  # the lifecycle layer's session id for its game
            "mode": r["mode"],
            "app": r["app"],
            "app_title": r.get("app_title", ""),
            "audio_sink": r.get("audio_sink"),
            "plane": "native",
            "started_unix": r["started_unix"],
        }
        for fp, r in live.items()
    ]
    return {
        "active_sessions": len(rows),
        "video_streaming": bool(rows),
        "audio_streaming": bool(rows),
        "sessions": rows,
    }
