"""Live stream statistics: the one module the streaming engine writes latency and network
feedback into, and the admin API reads from.

Each session runs in its own process, so each writer keeps its session's windows in memory and
publishes them at most once per `FLUSH_S` to small JSON files of its own in the state dir
(`stream-latency-<session id>.json`, `stream-network-<session id>.json`; rename, no fsync: a live
view, not a record). Readers merge every session's fresh files, or read one session's; a file
not refreshed for `STALE_S` is no session's. One session's end removes its own files only, so
another session's figures stay. No session, no numbers, never invented ones.

Engine use (`SessionCore` passes its id):
    stats.record_latency(capture_ms=1.2, encode_ms=3.4, session="0a1b2c3d")     # per frame
    stats.record_network(rtt_ms=4.0, loss_pct=0.0, bitrate_kbps=20000, target_kbps=20000,
                         session="0a1b2c3d")
    stats.reset("0a1b2c3d")                                                     # at its end
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import deque

from common.files import atomic_write
from common.statedir import state_dir, state_path

LATENCY_WINDOW = 600  # frames (10 s at 60 fps)
NETWORK_WINDOW = 120  # feedback samples (about two minutes at one per second)
FLUSH_S = 1.0
STALE_S = 10.0
NETWORK_FIELDS = ("rtt_ms", "loss_pct", "bitrate_kbps", "target_kbps")
LATENCY = "stream-latency"
NETWORK = "stream-network"
# A window's file: `<kind>.json` for a writer that names no session, else `<kind>-<id>.json`.
_FILE_RE = re.compile(r"(stream-latency|stream-network)(?:-([0-9a-f]{8}))?\.json")


class _Window:
    """One session's windows in its writer process."""

    def __init__(self):
        self.capture: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.encode: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.network: deque[dict] = deque(maxlen=NETWORK_WINDOW)
        self.flushed = {"latency": 0.0, "network": 0.0}


_lock = threading.Lock()
_windows: dict[str, _Window] = {}


_ID_RE = re.compile(r"[0-9a-f]{8}")


def file_name(kind: str, session: str = "") -> str:
    """The window file's name; a session id is 8 hex digits (it names a file: nothing else)."""
    if session and not _ID_RE.fullmatch(session):
        raise ValueError(f"not a session id: {session!r}")
    return f"{kind}-{session}.json" if session else f"{kind}.json"


def _window(session: str) -> _Window:
    with _lock:
        return _windows.setdefault(session, _Window())


def _write(name: str, data: dict) -> None:
    atomic_write(state_path(name), json.dumps(data), durable=False)


def _read(name: str) -> dict | None:
    try:
        with open(state_path(name)) as fh:
            data = json.load(fh)
    except (FileNotFoundError, ValueError, OSError):
        return None
    if not isinstance(data, dict):
        return None
    if time.time() - float(data.get("updated_unix", 0) or 0) > STALE_S:
        return None
    return data


def _published(kind: str, session: str | None) -> list[tuple[str, dict]]:
    """(session id or "", window) of every fresh file of `kind`, or of one session's."""
    if session is not None:
        data = _read(file_name(kind, session))
        return [(session, data)] if data else []
    try:
        names = sorted(os.listdir(state_dir()))
    except OSError:
        return []
    out = []
    for name in names:
        m = _FILE_RE.fullmatch(name)
        if m and m.group(1) == kind and (data := _read(name)):
            out.append((m.group(2) or "", data))
    return out


def _finite(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def record_latency(capture_ms: float, encode_ms: float, session: str = "") -> None:
    """One frame's capture and encode time in milliseconds, for this session's window."""
    capture, encode = _finite(capture_ms), _finite(encode_ms)
    if capture is None or encode is None:
        return
    w = _window(session)
    with _lock:
        w.capture.append(capture)
        w.encode.append(encode)
        due = time.monotonic() - w.flushed["latency"] >= FLUSH_S
    if due:
        flush(session)


def record_network(session: str = "", **sample) -> None:
    """One adaptive-bitrate feedback sample; known fields are `NETWORK_FIELDS`."""
    clean = {k: _finite(sample.get(k)) for k in NETWORK_FIELDS}
    clean = {k: v for k, v in clean.items() if v is not None}
    if not clean:
        return
    clean["ts_ms"] = int(time.time() * 1000)
    w = _window(session)
    with _lock:
        w.network.append(clean)
        due = time.monotonic() - w.flushed["network"] >= FLUSH_S
    if due:
        flush(session)


def flush(session: str | None = None) -> None:
    """Publish this process's windows now (one session's, or every one it holds)."""
    now = time.time()
    with _lock:
        todo = [(sid, w) for sid, w in _windows.items() if session is None or sid == session]
        snaps = []
        for sid, w in todo:
            snaps.append((sid, {"capture_ms": list(w.capture), "encode_ms": list(w.encode),
                                "updated_unix": now},
                          {"samples": list(w.network), "updated_unix": now}))  # fmt: skip
            w.flushed["latency"] = w.flushed["network"] = time.monotonic()
    for sid, latency_doc, network_doc in snaps:
        _write(file_name(LATENCY, sid), latency_doc)
        _write(file_name(NETWORK, sid), network_doc)


def reset(session: str = "") -> None:
    """Forget one session's windows (its end): readers see its figures gone at once, and
    every other session's as they were."""
    with _lock:
        _windows.pop(session, None)
    for kind in (LATENCY, NETWORK):
        try:
            os.unlink(state_path(file_name(kind, session)))
        except FileNotFoundError:
            pass


def summary(values: list[float]) -> dict:
    """`{min, max, avg, samples}`; the three numbers are null when there are no samples."""
    values = [v for v in (_finite(x) for x in values) if v is not None]
    if not values:
        return {"min": None, "max": None, "avg": None, "samples": 0}
    return {
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "avg": round(sum(values) / len(values), 3),
        "samples": len(values),
    }


def latency(session: str | None = None) -> dict:
    """Capture and encode summaries over every live session's window merged, or one's."""
    capture, encode = [], []
    for _sid, data in _published(LATENCY, session):
        capture += data.get("capture_ms") or []
        encode += data.get("encode_ms") or []
    return {"capture_ms": summary(capture), "encode_ms": summary(encode)}


def network(session: str | None = None) -> dict:
    """Feedback samples of every live session (each names its `session_id`, oldest first),
    or of one session, with a summary per field."""
    samples = []
    for sid, data in _published(NETWORK, session):
        samples += [{**s, "session_id": sid} for s in data.get("samples") or []
                    if isinstance(s, dict)]  # fmt: skip
    samples.sort(key=lambda s: s.get("ts_ms") or 0)
    out = {"window_s": NETWORK_WINDOW, "samples": samples}
    for field in NETWORK_FIELDS:
        out[field] = summary([s[field] for s in samples if field in s])
    return out
