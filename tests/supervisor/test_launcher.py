"""Which tree `manage.py runhost` runs after a switch: the new tree on probation as a real child
process, rolled back (previous tree, database restored) when it exits before passing its health
gate or when an earlier probation was killed; exec'd directly once it passed."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from common import update_journal
from supervisor import launcher

STUB = """
import json, os, sys
from pathlib import Path
state = Path(os.environ["HOST_STATE_DIR"])
(state / "child-env").write_text(os.environ.get("HOST_UPDATE_PROBATION", ""))
(state / "child-checkout").write_text(os.environ.get("HOST_CHECKOUT_ROOT", ""))
behaviour = (Path(__file__).parent / "behaviour").read_text()
if behaviour == "restart-after-newer-switch":
    path = state / "updates" / "journal.json"
    journal = json.loads(path.read_text())
    journal.update(id="job2", state="switched", to="v3", probation_started=False)
    path.write_text(json.dumps(journal))
    sys.exit(75)
if behaviour == "pass":
    path = state / "updates" / "journal.json"
    journal = json.loads(path.read_text())
    journal["state"] = "done"
    path.write_text(json.dumps(journal))
    sys.exit(0)
with open(state / "db.sqlite3", "ab"):
    pass
import sqlite3
conn = sqlite3.connect(state / "db.sqlite3")
conn.execute("delete from t")  # the failing version's damage
conn.commit()
sys.exit(7)
"""


@pytest.fixture
def rig(tmp_path, monkeypatch):
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("HOST_STATE_DIR", str(state))
    monkeypatch.delenv(launcher.PROBATION_ENV, raising=False)
    monkeypatch.delenv(update_journal.CHECKOUT_ENV, raising=False)
    moved = []
    monkeypatch.setattr(launcher.os, "chdir", moved.append)  # the exec's, not this process's
    conn = sqlite3.connect(state / "db.sqlite3")
    conn.execute("create table t (v text)")
    conn.execute("insert into t values ('kept')")
    conn.commit()
    conn.close()
    backup = tmp_path / "backup"
    (backup / "files").mkdir(parents=True)
    sqlite3.connect(state / "db.sqlite3").backup(sqlite3.connect(backup / "db.sqlite3"))
    new = tmp_path / "new"
    (new / ".venv" / "bin").mkdir(parents=True)
    (new / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (new / "manage.py").write_text(STUB)
    journal = {"id": "job1", "state": "switched", "from": "v1", "to": "v2",
               "staged": str(new), "backup": str(backup), "log": []}  # fmt: skip
    update_journal.save(journal)
    update_journal.set_active_tree(new)
    return state, new


def _rows(state: Path) -> list:
    conn = sqlite3.connect(state / "db.sqlite3")
    try:
        return conn.execute("select v from t").fetchall()
    finally:
        conn.close()


def test_a_new_version_that_exits_before_its_gate_is_rolled_back(rig):
    state, new = rig
    (new / "behaviour").write_text("crash")
    launcher.follow(["manage.py", "runhost"])  # returns: the checkout runs again
    journal = update_journal.load()
    assert journal["state"] == "rolled_back" and "exited with 7" in journal["error"]
    assert update_journal.active_tree() is None
    assert _rows(state) == [("kept",)]  # the backup is back
    assert (state / "child-env").read_text() == "job1"
    # The new tree learns where the checkout is: its own applies stage beside it.
    assert (state / "child-checkout").read_text() == str(launcher.THIS_TREE)


def test_the_backup_is_taken_at_the_restart_before_the_new_version_runs(rig, tmp_path):
    state, new = rig
    (new / "behaviour").write_text("crash")
    conn = sqlite3.connect(state / "db.sqlite3")
    conn.execute("insert into t values ('written before the restart')")
    conn.commit()
    conn.close()
    launcher.follow(["manage.py", "runhost"])
    journal = update_journal.load()
    assert ("backup", "done") in [(e["step"], e["state"]) for e in journal["log"]]
    assert journal["state"] == "rolled_back"
    assert _rows(state) == [("kept",), ("written before the restart",)]


def test_a_backup_that_fails_leaves_the_previous_version_and_its_data(rig, tmp_path):
    """No backup (here: its folder cannot be made, as on a full or broken disk): the new tree
    is never started, the checkout runs again, the job says why."""
    state, new = rig
    (new / "behaviour").write_text("crash")
    (tmp_path / "not-a-folder").write_text("")
    journal = update_journal.load()
    journal["backup"] = str(tmp_path / "not-a-folder" / "backup-job1")
    update_journal.save(journal)
    launcher.follow(["manage.py", "runhost"])  # returns: the checkout runs
    journal = update_journal.load()
    assert journal["state"] == "failed", journal
    assert "backup failed" in journal["error"] and "not started" in journal["error"]
    assert update_journal.active_tree() is None
    assert not journal.get("probation_started")
    assert not (state / "child-env").exists()  # the new version never ran
    assert _rows(state) == [("kept",)]


def test_a_new_version_that_passes_its_gate_keeps_running(rig):
    state, new = rig
    (new / "behaviour").write_text("pass")
    with pytest.raises(SystemExit) as exited:
        launcher.follow(["manage.py", "runhost"])
    assert exited.value.code == 0
    assert update_journal.load()["state"] == "done"
    assert update_journal.active_tree() == new


def test_a_probation_killed_earlier_is_rolled_back_at_the_next_start(rig):
    state, new = rig
    journal = update_journal.load()
    journal["probation_started"] = True
    update_journal.save(journal)
    conn = sqlite3.connect(state / "db.sqlite3")
    conn.execute("delete from t")
    conn.commit()
    conn.close()
    launcher.follow(["manage.py", "runhost"])
    assert update_journal.load()["state"] == "rolled_back"
    assert update_journal.active_tree() is None and _rows(state) == [("kept",)]
    assert not (state / "child-env").exists()  # the new version was not started again


def test_after_a_passed_gate_later_starts_exec_the_new_tree(rig, monkeypatch):
    state, new = rig
    journal = update_journal.load()
    journal["state"] = "done"
    journal["checkout_mark"] = update_journal.checkout_mark(launcher.THIS_TREE)
    update_journal.save(journal)
    calls = []
    monkeypatch.setattr(launcher.os, "execve", lambda path, argv, env: calls.append(argv))
    moved = []
    monkeypatch.setattr(launcher.os, "chdir", moved.append)
    launcher.follow(["manage.py", "runhost", "--no-mgmt-token"])
    assert calls == [[str(new / ".venv/bin/python"), str(new / "manage.py"), "runhost",
                      "--no-mgmt-token"]]  # fmt: skip
    # In the new tree: its children started as `python -m daphne ...` import from there.
    assert moved == [new]


def test_a_checkout_updated_by_hand_since_wins_over_the_applied_tree(rig, monkeypatch):
    journal = update_journal.load()
    journal["state"] = "done"
    journal["checkout_mark"] = "an older version file"
    update_journal.save(journal)
    monkeypatch.setattr(launcher.os, "execve", lambda *a: pytest.fail("ran the applied tree"))
    launcher.follow(["manage.py", "runhost"])
    assert update_journal.active_tree() is None


def test_a_tree_on_probation_runs_itself(rig, monkeypatch):
    monkeypatch.setenv(launcher.PROBATION_ENV, "job1")
    launcher.follow(["manage.py", "runhost"])
    assert update_journal.load()["state"] == "switched"


def test_no_apply_runs_the_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(launcher.os, "execve", lambda *a: pytest.fail("exec without an apply"))
    launcher.follow(["manage.py", "runhost"])
    assert json.dumps(update_journal.load()) == "null"


def test_a_rollback_returns_to_the_applied_tree_that_ran_before(rig, tmp_path, monkeypatch):
    """An apply from an applied release (v2 -> v3) that fails: v2 runs again on its own data,
    never the checkout's older code on data v2 migrated."""
    state, new = rig
    (new / "behaviour").write_text("crash")
    previous = tmp_path / "previous"
    previous.mkdir()
    (previous / "manage.py").write_text("")
    journal = update_journal.load()
    journal.update(root=str(launcher.THIS_TREE), from_tree=str(previous))
    update_journal.save(journal)
    calls = []
    monkeypatch.setattr(launcher.os, "execve", lambda path, argv, env: calls.append(argv))
    monkeypatch.setattr(launcher, "_runnable", lambda tree: (tree / "manage.py").is_file())
    launcher.follow(["manage.py", "runhost"])
    assert update_journal.load()["state"] == "rolled_back"
    assert update_journal.active_tree() == previous
    assert calls and calls[0][1] == str(previous / "manage.py")  # it runs again
    assert _rows(state) == [("kept",)]


def test_a_restart_after_a_newer_switch_starts_the_launcher_over(rig, monkeypatch):
    """The applied tree, running as the launcher's child, is asked to restart for a newer
    apply (exit 75): the launcher starts over so the newer tree runs on probation, and the
    newer job is not rolled back for its predecessor's exit."""
    state, new = rig
    (new / "behaviour").write_text("restart-after-newer-switch")
    again = []

    def execve(path, argv, env):
        again.append(env)
        raise SystemExit(0)

    monkeypatch.setattr(launcher.os, "execve", execve)
    with pytest.raises(SystemExit):
        launcher.follow(["manage.py", "runhost"])
    journal = update_journal.load()
    assert journal["id"] == "job2" and journal["state"] == "switched", journal
    assert again and launcher.PROBATION_ENV not in again[0]


def test_the_stage_goes_beside_the_checkout_when_an_applied_tree_runs(tmp_path, monkeypatch):
    from console import update_apply

    checkout = tmp_path / "host"
    checkout.mkdir()
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv(update_journal.CHECKOUT_ENV, str(checkout))
    running = tmp_path / "host.releases" / "v2"
    manifest = {"version": "v3", "artifacts": {"source": {"sha256": "a" * 64}}}
    journal = update_apply.new_journal(manifest, running)
    assert journal["staged"] == str(tmp_path / "host.releases" / "v3")
    assert journal["root"] == str(checkout)
