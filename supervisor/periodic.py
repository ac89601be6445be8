"""Every piece of periodic work the host does: one registry (`jobs()`), one runner (`Runner`),
run by the supervisor.

Why the supervisor and not Celery beat: the supervisor is the one process that is always up
while the host is (it restarts the others), and it needs no broker: display countdowns, game
grace windows, telemetry and log rotation go on while Redis or a worker is down or restarting.
Beat would be a second scheduler inside a worker, and a poller thread started from a worker
signal ran once per worker (twice: the hooks worker fires the same signal).

Each job runs on its own thread, so a slow one (a manifest download, a stat of a big store on
a slow disk) never delays another or the supervisor's watch over its children. A job waits
`interval_s` after the end of its previous run; an exception is logged and the job goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from console import logfile, telemetry, update_auto, updater
from displays import reaper
from fleet import refresh as fleet_refresh
from fleet.relay import relays as fleet_relays
from games import lifecycle
from hooks import events
from library import conf as library_conf
from library.poller import StorePoller

log = logging.getLogger("supervisor.periodic")


@dataclass(frozen=True)
class Job:
    name: str
    interval_s: float  # 0 or less: the job is off
    run: Callable[[], object]
    first_s: float | None = None  # delay before the first run; None: one interval


def jobs() -> list[Job]:
    """The registry. Intervals that come from the environment are read here, at host start."""
    return [
        # Events kept on disk by processes that died while Redis was away (hooks/outbox.py).
        Job("events-spool", 2.0, events.recover_spools, first_s=0),
        # Virtual display countdowns (kept displays whose deadline passed).
        Job("display-countdowns", reaper.TICK_S, reaper.tick, first_s=0),
        # Grace windows of games whose session is gone; games of a dead worker.
        Job("game-lifecycle", lifecycle.TICK_S, lifecycle.tick, first_s=0),
        # The console's CPU/GPU/RAM window (telemetry.json).
        Job("telemetry", telemetry.INTERVAL_S, telemetry.Housekeeping(), first_s=0),
        # host.log above its size limit moves to host.log.1 (one process rotates: this one).
        Job("log-rotation", telemetry.INTERVAL_S, logfile.rotate_if_needed),
        # One relay per fleet member, started and stopped as members come and go: here
        # because the supervisor exists once per host (fleet/relay.py, docs/fleet.md).
        Job("fleet-relays", 2.0, fleet_relays.sync, first_s=0),
        # Store files and apps.json hand edits; a change enqueues a rescan.
        Job("library-poll", library_conf.poll_interval_s(), StorePoller(), first_s=0),
        # The fleet's members: their state from their own APIs (fleet/refresh.py).
        Job("fleet-refresh", fleet_refresh.interval_s(), fleet_refresh.tick, first_s=1.0),
        # The signed release manifest (every 6 h, counted from the last check across restarts).
        Job(
            "update-check",
            updater.CHECK_INTERVAL_S,
            updater.scheduled_check,
            first_s=updater.next_check_in(),
        ),
        # `update_auto`: the announced release applied once no session ran for N minutes.
        Job("update-auto", update_auto.TICK_S, update_auto.AutoApply()),
    ]


class Runner:
    """Runs the registry's jobs until `stop()`."""

    def __init__(self, registry: list[Job]):
        names = [job.name for job in registry]
        if len(set(names)) != len(names):
            raise ValueError(f"periodic job names must be unique: {names}")
        self.jobs = [job for job in registry if job.interval_s > 0]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for job in self.jobs:
            thread = threading.Thread(
                target=self._loop, args=(job,), name=f"periodic-{job.name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop every job and wait (at most `timeout_s` in all) for runs in progress."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        late = [t.name for t in self._threads if t.is_alive()]
        if late:
            log.warning("periodic jobs still running at stop: %s", ", ".join(late))

    def _loop(self, job: Job) -> None:
        delay = job.interval_s if job.first_s is None else max(0.0, job.first_s)
        while not self._stop.wait(delay):
            try:
                job.run()
            except Exception:  # one failed run must not end the job
                log.exception("periodic job %s failed", job.name)
            delay = job.interval_s
