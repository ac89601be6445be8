"""The cleanup after an apply passes its health gate, with real directories: staged trees in
`<root>.releases/` other than the running one and the one before it go, and backups other than
this apply's; the checkout is never touched, and nothing goes while a job has not finished."""

from __future__ import annotations

import pytest

from common import update_cleanup, update_journal
from common.version import VERSION
from supervisor import launcher, main
from tests.supervisor.test_update_gate import FakeChild


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A checkout, four entries in its releases dir, three backups, and the journal of an
    apply from the `v1` tree to `v2` on probation."""
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path / "state"))
    root = tmp_path / "host"
    (root / "common").mkdir(parents=True)
    (root / "manage.py").write_text("checkout\n")
    releases = update_journal.releases_dir(root)
    for name in ("v0", "v1", "v2", "v3.partial"):
        (releases / name / "pkg").mkdir(parents=True)
        (releases / name / "pkg" / "f.py").write_text(name)
    (releases / "to-checkout").symlink_to(root)  # a link that must not take the checkout along
    updates = update_journal.updates_dir()
    for name in ("backup-old", "backup-older.partial", "backup-job2"):
        (updates / name / "files").mkdir(parents=True)
    update_journal.set_active_tree(releases / "v2")
    journal = {"id": "job2", "state": "switched", "from": "v2026.1001.0-x", "to": VERSION,
               "root": str(root), "staged": str(releases / "v2"),
               "from_tree": str(releases / "v1"), "backup": str(updates / "backup-job2"),
               "log": []}  # fmt: skip
    update_journal.save(journal)
    return root, releases, updates


def _names(where) -> set[str]:
    return {p.name for p in where.iterdir()}


def test_the_gate_passing_removes_old_trees_and_backups(layout, redis_db, monkeypatch):
    root, releases, updates = layout
    monkeypatch.setenv(launcher.PROBATION_ENV, "job2")
    sup = main.Supervisor()
    sup._announced = True
    sup.children = [FakeChild("daphne")]
    monkeypatch.setattr(sup, "_health_ok", lambda: True)
    assert sup._gate(0) is True and sup._gate_failed is None
    assert _names(releases) == {"v1", "v2"}  # running, and the tree before it
    assert {p.name for p in updates.glob("backup-*")} == {"backup-job2"}
    assert (root / "manage.py").read_text() == "checkout\n"  # the checkout, untouched
    assert (releases / "v2" / "pkg" / "f.py").read_text() == "v2"
    journal = update_journal.load()
    assert journal["state"] == "done" and journal["log"][-1]["step"] == "cleanup"
    assert "v0" in journal["log"][-1]["detail"] and "backup-old" in journal["log"][-1]["detail"]
    assert update_cleanup.prune() == []  # the next start finds nothing more to do


def test_a_start_after_a_kill_before_the_cleanup_does_it(layout):
    root, releases, updates = layout
    (updates / "wheels").mkdir()
    (updates / "wheels" / "x-1-py3-none-any.whl").write_bytes(b"PK")
    journal = update_journal.load()
    journal["state"] = "done"
    update_journal.save(journal)
    main.Supervisor._cleanup()  # what the supervisor's start runs
    assert _names(releases) == {"v1", "v2"}
    assert not (updates / "wheels").exists()  # each tree's venv is its own: no longer read
    assert (root / "manage.py").exists()


def test_the_checkout_running_before_keeps_only_the_new_tree(layout):
    root, releases, _ = layout
    journal = update_journal.load()
    journal.update(state="done", from_tree=str(root))  # applied from the checkout itself
    update_journal.save(journal)
    update_cleanup.prune()
    assert _names(releases) == {"v2"}
    assert (root / "manage.py").read_text() == "checkout\n"


@pytest.mark.parametrize("state", ["running", "staged", "switched", "failed", "rolled_back"])
def test_nothing_goes_unless_the_apply_is_done(layout, state):
    _, releases, updates = layout
    journal = update_journal.load()
    journal["state"] = state
    update_journal.save(journal)
    assert update_cleanup.prune() == []
    assert _names(releases) == {"v0", "v1", "v2", "v3.partial", "to-checkout"}
    assert len(list(updates.glob("backup-*"))) == 3
