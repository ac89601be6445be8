"""The prep-step runner: order, failures, and undo owed across a crash."""

from __future__ import annotations

import pytest

from hooks import prep
from hooks.models import Delivery, PrepRun


def _steps(tmp_path, fail_second=False):
    log = tmp_path / "log"
    return log, [
        {"do": f"echo do1 >> {log}", "undo": f"echo undo1 >> {log}"},
        {
            "do": f"echo do2 >> {log}; exit {1 if fail_second else 0}",
            "undo": f"echo undo2 >> {log}",
        },
        {"do": f'echo "do3 $PF_APP_ID" >> {log}', "undo": f"echo undo3 >> {log}"},
    ]


@pytest.mark.django_db
def test_do_in_order_undo_in_reverse(tmp_path):
    log, steps = _steps(tmp_path)
    results = prep.run_do("s1", steps, prep.app_env(app_id="steam:7"))
    assert [r.outcome for r in results] == ["ok", "ok", "ok"]
    assert log.read_text().split("\n")[:3] == ["do1", "do2", "do3 steam:7"]
    prep.run_undo("s1")
    assert log.read_text().splitlines()[3:] == ["undo3", "undo2", "undo1"]
    assert not PrepRun.objects.exists()
    prep.run_undo("s1")  # nothing owed any more: nothing runs twice
    assert len(log.read_text().splitlines()) == 6
    assert Delivery.objects.filter(channel="prep").count() == 6


@pytest.mark.django_db
def test_failed_do_skips_only_its_undo(tmp_path):
    log, steps = _steps(tmp_path, fail_second=True)
    results = prep.run_do("s2", steps)
    assert [r.outcome for r in results] == ["ok", "failed", "ok"]
    prep.run_undo("s2")
    assert log.read_text().splitlines()[3:] == ["undo3", "undo1"]


@pytest.mark.django_db
def test_failed_undo_does_not_stop_the_rest(tmp_path):
    log = tmp_path / "log"
    steps = [{"do": "true", "undo": f"echo u1 >> {log}"}, {"do": "true", "undo": "exit 9"}]
    prep.run_do("s3", steps)
    results = prep.run_undo("s3")
    assert [r.outcome for r in results] == ["failed", "ok"]
    assert log.read_text() == "u1\n"


@pytest.mark.django_db
def test_undo_owed_after_a_crash_runs_at_recovery(tmp_path):
    log, steps = _steps(tmp_path)
    prep.run_do("crashed", steps)
    prep.run_do("alive", steps[:1])
    # The session dies here without its end path; what was owed is on disk, not in memory.
    assert prep.owed_sessions() == ["alive", "crashed"]
    assert prep.undo_orphans(live_sessions={"alive"}) == 1
    assert log.read_text().splitlines()[-3:] == ["undo3", "undo2", "undo1"]
    assert prep.owed_sessions() == ["alive"]


@pytest.mark.django_db
def test_step_timeout(tmp_path):
    results = prep.run_do("s4", [{"do": "sleep 30", "undo": "true"}], timeout_s=0.5)
    assert results[0].outcome == "timeout"
    assert not PrepRun.objects.exists()
