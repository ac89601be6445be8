"""The health gate of a version on probation after an update: it passes (journal `done`,
`update.applied` once) only when the children stayed up for the grace period and /health
answered; anything else fails it and stops the host for the launcher to roll back."""

from __future__ import annotations

import pytest

from common import update_journal
from common.version import VERSION
from supervisor import launcher, main
from tests.support.events import emitted


class FakeChild:
    def __init__(self, name, alive=True, restarts=0, critical=True):
        self.name, self._alive, self.restarts, self.critical = name, alive, restarts, critical

    def alive(self):
        return self._alive


@pytest.fixture
def probation(redis_db, monkeypatch):
    path = update_journal.updates_dir() / update_journal.JOURNAL_FILE
    update_journal.save({"id": "job9", "state": "switched", "from": "v2026.1001.0-x",
                         "to": VERSION, "log": []})  # fmt: skip
    monkeypatch.setenv(launcher.PROBATION_ENV, "job9")
    sup = main.Supervisor()
    sup._announced = True
    sup.children = [FakeChild("daphne"), FakeChild("plugins", alive=False, critical=False)]
    monkeypatch.setattr(sup, "_health_ok", lambda: True)
    yield sup
    path.unlink(missing_ok=True)


def test_the_gate_passes_after_the_grace_period_and_announces_once(probation):
    until = probation._open_gate()
    assert until is not None
    assert probation._gate(until + 3600) is False  # still in the grace period
    assert probation._gate(0) is True and probation._gate_failed is None
    journal = update_journal.load()
    assert journal["state"] == "done" and journal["announced"]
    sent = emitted("update.applied")
    assert [(e["from"], e["to"]) for e in sent] == [("v2026.1001.0-x", VERSION)]


def test_a_child_that_exits_during_the_grace_period_fails_the_gate(probation):
    probation.children.append(FakeChild("celery", restarts=1))
    assert probation._gate(probation._open_gate()) is True
    assert "celery exited" in probation._gate_failed and probation._stop
    journal = update_journal.load()
    assert journal["state"] == "switched" and journal["log"][-1]["state"] == "failed"
    assert emitted("update.applied") == []


def test_no_health_answer_fails_the_gate(probation, monkeypatch):
    monkeypatch.setattr(probation, "_health_ok", lambda: False)
    assert probation._gate(0) is True and "/api/v1/health" in probation._gate_failed


def test_a_web_api_that_never_answered_fails_at_once(probation):
    probation._announced = False
    assert probation._open_gate() is None and "did not answer" in probation._gate_failed


def test_no_gate_without_probation(probation, monkeypatch):
    monkeypatch.delenv(launcher.PROBATION_ENV)
    assert probation._open_gate() is None and probation._gate_failed is None
