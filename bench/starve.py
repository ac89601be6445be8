"""A CPU hog on a native session's peer process, for bench/browser_play.py's starved mode.

The peer process (aiortc: the RTP sender, SRTP, the data channel) has all its threads pinned to
one core; for a few seconds in the middle of a run, busy processes pinned to the same core take
most of it. The encoder child is pinned to the other cores, so the frames keep coming on time
and queue up in front of the starved sender (native/media.py, `MAX_BEHIND`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

HOG = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def pin(pid: int, cpus: set[int]) -> int:
    """Pin every thread of `pid` to `cpus` (sched_setaffinity on a pid moves one thread only;
    threads made later inherit their creator's mask). Returns the threads pinned."""
    tids = os.listdir(f"/proc/{pid}/task")
    for tid in tids:
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # a worker thread that just ended
            pass
    return len(tids)


class Hog:
    """`count` busy processes on `cpu`, from `start_s` to `start_s + length_s` after `begin()`.

    Each in a session of its own: with autogroup scheduling (Linux's default on desktops and
    here), the kernel shares a core between sessions first, so hogs in the bench's session
    would take half the core however many there were; one session each is a load of `count`
    against the host's session."""

    def __init__(self, cpu: int, count: int):
        self.cpu, self.count = cpu, count
        self.procs: list[subprocess.Popen] = []
        self.timers: list[threading.Timer] = []
        self.started_at = self.stopped_at = None

    def begin(self, clock, start_s: float, length_s: float) -> None:
        self.clock = clock
        self.timers = [
            threading.Timer(start_s, self._start),
            threading.Timer(start_s + length_s, self.stop),
        ]
        for t in self.timers:
            t.start()

    def _start(self) -> None:
        self.started_at = self.clock()  # spawning them takes a while; each burns at once
        self.procs = [
            subprocess.Popen([sys.executable, "-c", HOG, str(self.cpu)], start_new_session=True)
            for _ in range(self.count)
        ]

    def stop(self) -> None:
        for t in self.timers:
            t.cancel()
        now = self.clock()
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait(5)
        if self.procs and self.stopped_at is None:
            self.stopped_at = now
        self.procs = []
