"""The supervisor's periodic work: one registry, one runner; intervals kept from before."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from console import updater
from supervisor import periodic


def _wait_for(predicate, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.01)
    return predicate()


def test_registry_holds_every_periodic_job_with_its_interval(monkeypatch):
    monkeypatch.setenv("HOST_LIBRARY_POLL_S", "15")
    jobs = {job.name: job for job in periodic.jobs()}
    assert {name: job.interval_s for name, job in jobs.items()} == {
        "events-spool": 2.0,
        "fleet-relays": 2.0,
        "display-countdowns": 1.0,
        "game-lifecycle": 1.0,
        "telemetry": 2.0,
        "log-rotation": 2.0,
        "library-poll": 15,
        "fleet-refresh": 10.0,
        "update-check": 6 * 3600,
        "update-auto": 60.0,
    }
    assert all(callable(job.run) for job in jobs.values())
    # What runs at once at host start: countdowns and grace windows that ran out while the
    # host was down, the telemetry counters' priming, the start rescan and the store
    # signatures' baseline, the events a process kept on disk before it died while Redis was
    # away, the fleet members' event relays.
    assert {n for n, j in jobs.items() if j.first_s == 0} == {
        "events-spool", "display-countdowns", "game-lifecycle", "telemetry", "library-poll",
        "fleet-relays",
    }  # fmt: skip


def test_no_other_scheduler_is_left():
    from hostmgmt.celery import app
    from supervisor import main

    assert not app.conf.beat_schedule
    argv = [arg for child in main.Supervisor().child_specs() for arg in child.argv]
    assert "--beat" not in argv and "-B" not in argv


def test_no_worker_starts_work_of_its_own():
    """The host runs two workers: work started from a worker signal would run twice."""
    from celery import signals

    import library.tasks  # noqa: F401 - every task module is loaded in a worker

    for name in ("worker_init", "worker_process_init", "worker_ready", "celeryd_after_setup"):
        receivers = [ref() for _, ref in getattr(signals, name).receivers]
        ours = [r for r in receivers if not getattr(r, "__module__", "").startswith("celery.")]
        assert ours == [], name  # Celery's own Django fixup is all there is


def test_runner_runs_each_job_on_its_interval_and_stops():
    fast, slow, off = [], [], []
    started = time.monotonic()
    runner = periodic.Runner(
        [
            periodic.Job("fast", 0.05, lambda: fast.append(time.monotonic()), first_s=0),
            periodic.Job("slow", 0.3, lambda: slow.append(time.monotonic())),
            periodic.Job("off", 0, lambda: off.append(1), first_s=0),
        ]
    )
    runner.start()
    try:
        assert _wait_for(lambda: len(slow) >= 2)
    finally:
        runner.stop()
    assert fast[0] - started < 0.2  # first_s=0: at once
    assert slow[0] - started >= 0.3  # no first_s: one interval first
    assert len(fast) >= 8 and off == []
    done = (len(fast), len(slow))
    time.sleep(0.2)
    assert (len(fast), len(slow)) == done  # nothing runs after stop()


def test_a_failing_or_slow_job_does_not_hold_back_the_others(caplog):
    gate = threading.Event()
    ticks, failures = [], []

    def fails():
        failures.append(1)
        raise RuntimeError("boom")

    runner = periodic.Runner(
        [
            periodic.Job("stuck", 0.05, lambda: gate.wait(5), first_s=0),
            periodic.Job("fails", 0.05, fails, first_s=0),
            periodic.Job("ticks", 0.05, lambda: ticks.append(1), first_s=0),
        ]
    )
    with caplog.at_level(logging.ERROR, logger="supervisor.periodic"):
        runner.start()
        try:
            assert _wait_for(lambda: len(ticks) >= 5 and len(failures) >= 3)
        finally:
            gate.set()
            runner.stop()
    assert any("periodic job fails failed" in r.getMessage() for r in caplog.records)


def test_job_names_are_unique():
    with pytest.raises(ValueError, match="unique"):
        periodic.Runner([periodic.Job("a", 1, print), periodic.Job("a", 2, print)])


def test_update_check_is_due_six_hours_after_the_last_one(tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    now = 1_800_000_000.0
    assert updater.next_check_in(now) == 6 * 3600  # never checked: one interval from now
    state = tmp_path / updater.STATE_FILE
    state.write_text(json.dumps({"last_checked_unix": now - 3600}))
    assert updater.next_check_in(now) == 5 * 3600  # a restart does not reset the clock
    state.write_text(json.dumps({"last_checked_unix": now - 7 * 3600}))
    assert updater.next_check_in(now) == 0  # overdue: check at once
    state.write_text(json.dumps({"last_checked_unix": now + 9 * 3600}))
    assert updater.next_check_in(now) == 6 * 3600  # a clock that went back: one interval
