"""Live stream statistics: the one module the streaming engine writes latency and network
feedback into, and the admin API reads from.

The engine runs in another process than the web server, so each writer keeps its window in
memory and publishes it at most once per `FLUSH_S` to a small JSON file in the state dir
(rename, no fsync: it is a live view, not a record). Readers get an empty window when nothing
was published recently: no session, no numbers, never invented ones.

Engine use:
    stats.record_latency(capture_ms=1.2, encode_ms=3.4)      # per frame
    stats.record_network(rtt_ms=4.0, loss_pct=0.0, bitrate_kbps=20000, target_kbps=20000)
    stats.reset()                                            # at session end
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque

from hostmgmt.lib.files import atomic_write
from hostmgmt.lib.statedir import state_path

LATENCY_WINDOW = 600  # frames (10 s at 60 fps)
NETWORK_WINDOW = 120  # feedback samples (about two minutes at one per second)
FLUSH_S = 1.0
STALE_S = 10.0
NETWORK_FIELDS = ("rtt_ms", "loss_pct", "bitrate_kbps", "target_kbps")
LATENCY_FILE = "stream-latency.json"
NETWORK_FILE = "stream-network.json"

_lock = threading.Lock()
_capture: deque[float] = deque(maxlen=LATENCY_WINDOW)
_encode: deque[float] = deque(maxlen=LATENCY_WINDOW)
_network: deque[dict] = deque(maxlen=NETWORK_WINDOW)
_flushed = {"latency": 0.0, "network": 0.0}


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


def _finite(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def record_latency(capture_ms: float, encode_ms: float) -> None:
    """One frame's capture and encode time in milliseconds."""
    capture, encode = _finite(capture_ms), _finite(encode_ms)
    if capture is None or encode is None:
        return
    with _lock:
        _capture.append(capture)
        _encode.append(encode)
        due = time.monotonic() - _flushed["latency"] >= FLUSH_S
    if due:
        flush()


def record_network(**sample) -> None:
    """One adaptive-bitrate feedback sample; known fields are `NETWORK_FIELDS`."""
    clean = {k: _finite(sample.get(k)) for k in NETWORK_FIELDS}
    clean = {k: v for k, v in clean.items() if v is not None}
    if not clean:
        return
    clean["ts_ms"] = int(time.time() * 1000)
    with _lock:
        _network.append(clean)
        due = time.monotonic() - _flushed["network"] >= FLUSH_S
    if due:
        flush()


def flush() -> None:
    """Publish this process's windows now (the engine calls it at session end too)."""
    now = time.time()
    with _lock:
        latency = {"capture_ms": list(_capture), "encode_ms": list(_encode), "updated_unix": now}
        network = {"samples": list(_network), "updated_unix": now}
        _flushed["latency"] = _flushed["network"] = time.monotonic()
    _write(LATENCY_FILE, latency)
    _write(NETWORK_FILE, network)


def reset() -> None:
    """Forget the windows (session end): readers see empty windows at once."""
    with _lock:
        _capture.clear()
        _encode.clear()
        _network.clear()
    for name in (LATENCY_FILE, NETWORK_FILE):
        try:
            os.unlink(state_path(name))
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


def latency() -> dict:
    data = _read(LATENCY_FILE) or {}
    return {
        "capture_ms": summary(data.get("capture_ms") or []),
        "encode_ms": summary(data.get("encode_ms") or []),
    }


def network() -> dict:
    data = _read(NETWORK_FILE) or {}
    samples = [s for s in data.get("samples") or [] if isinstance(s, dict)]
    out = {"window_s": NETWORK_WINDOW, "samples": samples}
    for field in NETWORK_FIELDS:
        out[field] = summary([s[field] for s in samples if field in s])
    return out
