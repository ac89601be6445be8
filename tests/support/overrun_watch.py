"""A guard for the one hang pytest-timeout cannot end: a test whose teardown waits on a child
process that never exits (a browser stuck in the kernel, a host that ignores SIGTERM). Its
SIGALRM fires once, the wait resumes, and the run sits there until CI's time is spent with
nothing printed. The last CI run stopped printing inside `test_pair_page.py` and ran out its
5400 s, most likely that way (CI keeps no stderr to say).

When a test outlives pytest's own timeout by `GRACE_S`, the watch prints every thread's
stack and SIGKILLs the browsers under this run; if the test still has not ended after
another `GRACE_S`, every descendant of this run. The blocked wait then returns, that test
fails with the stacks on stderr, and the rest of the run goes on."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from pathlib import Path

import psutil

GRACE_S = 90.0
PERIOD_S = 5.0
BROWSERS = (b"chromium", b"chrome", b"node")  # node: Playwright's driver


def descendants(root: int) -> list[int]:
    """Every live process under `root` (none when `root` is gone); a zombie (one killed a
    moment ago, say, that its parent has not reaped yet) is dead already."""
    try:
        kids = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    live = []
    for p in kids:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                live.append(p.pid)
        except psutil.NoSuchProcess:
            continue
    return live


def is_browser(pid: int) -> bool:
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return os.path.basename(argv0) in BROWSERS


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Watch:
    """The test now running, and how far past its limit the watch has acted."""

    def __init__(self, root: int, grace_s: float = GRACE_S, clock=time.monotonic) -> None:
        self.root, self.grace_s, self.clock = root, grace_s, clock
        self._lock = threading.Lock()
        self._test: tuple[str, float, float] | None = None  # nodeid, since, limit
        self._stage = 0

    def begin(self, nodeid: str, timeout_s: float) -> None:
        """`nodeid` starts (setup, call, teardown) under pytest-timeout's `timeout_s`."""
        with self._lock:
            self._test = (nodeid, self.clock(), timeout_s + self.grace_s) if timeout_s > 0 else None
            self._stage = 0

    def end(self) -> None:
        with self._lock:
            self._test, self._stage = None, 0

    def check(self) -> list[int]:
        """Act on an overrun: browsers first, everything under `root` one grace later.
        Returns the pids it killed."""
        with self._lock:
            test, stage = self._test, self._stage
        if test is None or stage >= 2:
            return []
        nodeid, since, limit_s = test
        over = self.clock() - since - limit_s
        if over < 0 or (stage == 1 and over < self.grace_s):
            return []
        everyone = descendants(self.root)
        victims = [p for p in everyone if is_browser(p)] if stage == 0 else everyone
        print(f"\noverrun_watch: {nodeid} has run {limit_s + over:.0f} s, past pytest's "
              f"timeout; stacks follow, then SIGKILL to "
              f"{'browsers' if stage == 0 else 'every child'} {victims}",
              file=sys.stderr, flush=True)  # fmt: skip
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        _kill(victims)
        with self._lock:
            if self._test == test:
                self._stage = stage + 1
        return victims

    def run(self) -> None:
        while True:
            time.sleep(PERIOD_S)
            try:
                self.check()
            except Exception as exc:  # a guard must never break the run
                print(f"overrun_watch: {exc!r}", file=sys.stderr, flush=True)


WATCH = Watch(os.getpid())


def start() -> None:
    threading.Thread(target=WATCH.run, name="overrun-watch", daemon=True).start()
