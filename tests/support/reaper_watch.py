"""A guard against a kernel livelock seen on the 2-core CI VM: a Chromium zygote reaping a
child spins in `shrink_dcache_parent` (`release_task` → `proc_invalidate_siblings_dcache`)
while a renderer keeps running, SIGKILL does not reach the zygote, and the run hangs until
CI's time is spent. Killing the Chromium renderers ends the spin (seen by hand). The watch
does that and says so on stderr, so a test fails with a reason instead of a hung run."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

STUCK = "shrink_dcache_parent"
PERIOD_S = 5.0
CHECKS = 3  # stuck at three checks in a row (10 s or more): not a passing reap


def _stuck_pids() -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if STUCK in (entry / "stack").read_text():
                out.add(int(entry.name))
        except OSError:
            continue
    return out


def _chromium_renderers() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"chromium") and b"--type=renderer" in cmd:
            pids.append(int(entry.name))
    return pids


def _watch() -> None:
    seen: dict[int, int] = {}
    while True:
        time.sleep(PERIOD_S)
        try:
            stuck = _stuck_pids()
            seen = {pid: seen.get(pid, 0) + 1 for pid in stuck}
            if any(n >= CHECKS for n in seen.values()):
                renderers = _chromium_renderers()
                for pid in renderers:
                    with_suppressed(os.kill, pid, signal.SIGKILL)
                print(f"reaper_watch: pids {sorted(stuck)} stuck in {STUCK}; killed Chromium "
                      f"renderers {renderers}", file=sys.stderr, flush=True)  # fmt: skip
                seen = {}
        except Exception as exc:  # a guard must never break the run
            print(f"reaper_watch: {exc!r}", file=sys.stderr, flush=True)


def with_suppressed(fn, *args) -> None:
    try:
        fn(*args)
    except OSError:
        pass


def start() -> None:
    """Start the watch once per process where /proc/<pid>/stack is readable (root)."""
    try:
        (Path("/proc/self/stack")).read_text()
    except OSError:
        return
    threading.Thread(target=_watch, name="reaper-watch", daemon=True).start()
