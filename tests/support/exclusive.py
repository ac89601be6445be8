"""Tests that measure time alone on the machine while the suite runs on several workers.

`make test` runs the suite on pytest-xdist workers: most tests wait on hosts, browsers and
clients, and one worker left the 2-core machine half idle. A test marked `exclusive` (a frame
rate or freeze bound, the soak) measures what the host does with the machine to itself, so it
runs only while no other worker runs a test: a reader-writer lock over files that every
worker of one run shares.

Every other test holds the lock shared for its whole protocol (setup, call, teardown); an
exclusive test holds it exclusively, and keeps it while the worker's next test is exclusive
too (a module of them, with its host, runs as one block instead of waiting for the other
worker's current test before each of its tests). A writer first takes the gate, so no new
reader starts while it waits for the running ones to finish (without it, two workers that
take turns as readers could keep a writer waiting for ever). tests/conftest.py puts the
exclusive files first, so the run starts with them one after another and ends with both
workers busy.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

MARKER = "exclusive"


def marked(item) -> bool:
    return item is not None and item.get_closest_marker(MARKER) is not None


class RunLock:
    """This worker's side of the lock: shared or exclusive, or not held."""

    def __init__(self, lock_dir: Path):
        lock_dir.mkdir(parents=True, exist_ok=True)
        self._gate = open(lock_dir / "gate", "a+")  # noqa: SIM115 - held for the worker's life
        self._run = open(lock_dir / "run", "a+")  # noqa: SIM115
        self.mode: str | None = None  # "shared", "exclusive" or None

    def take(self, exclusive: bool) -> None:
        mode = "exclusive" if exclusive else "shared"
        if self.mode == mode:
            return
        self.release()
        if exclusive:
            fcntl.flock(self._gate, fcntl.LOCK_EX)
            fcntl.flock(self._run, fcntl.LOCK_EX)
        else:
            fcntl.flock(self._gate, fcntl.LOCK_SH)
            fcntl.flock(self._run, fcntl.LOCK_SH)
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        self.mode = mode

    def release(self) -> None:
        if self.mode is None:
            return
        fcntl.flock(self._run, fcntl.LOCK_UN)
        fcntl.flock(self._gate, fcntl.LOCK_UN)
        self.mode = None
