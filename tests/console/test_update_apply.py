"""The apply steps before the switch, with real files: a bounded download checked against the
signed sha256, staging beside the running tree, the room check for the backup, database backup
and restore, and recovery after a kill. The running tree is never touched."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from common import update_backup, update_journal
from console import update_apply
from supervisor import launcher

VERSION = "v2099.101.0-stable"
REQS = b"Django==5.2.19\n"
# The staged tree's manage.py: `migrate` (the dry run on a copy of the database) succeeds.
NEW_MANAGE = b"# new\nimport sys\nsys.exit(0)\n"


def _archive(files: dict[str, bytes], prefix: str = "host-x/", extra=None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
        for info in extra or []:
            tar.addfile(info)
    return buf.getvalue()


@pytest.fixture
def server():
    served = {"body": b"", "cut": None}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            body = served["body"]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: served["cut"]])  # a cut: the connection drops early

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    yield served, f"http://127.0.0.1:{httpd.server_port}/host.tar.gz"
    httpd.shutdown()


@pytest.fixture
def root(tmp_path):
    tree = tmp_path / "host"
    tree.mkdir()
    (tree / "manage.py").write_text("running\n")
    (tree / "requirements.txt").write_text("Django==5.2.19\n")
    # A stand-in for the running venv: its python (this one) and an empty site-packages.
    (tree / ".venv" / "bin").mkdir(parents=True)
    (tree / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (
        tree
        / ".venv"
        / "lib"
        / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        / "site-packages"
    ).mkdir(parents=True)
    yield tree
    (update_apply.updates_dir() / update_apply.JOURNAL_FILE).unlink(missing_ok=True)


def _manifest(body: bytes, url: str, **over) -> dict:
    source = {"commit": "a" * 40, "url": url, "sha256": hashlib.sha256(body).hexdigest(),
              "size": len(body)}  # fmt: skip
    source.update(over)
    return {"version": VERSION, "serial": 2, "artifacts": {"source": source}}


def _steps(journal: dict) -> list[tuple[str, str]]:
    return [(e["step"], e["state"]) for e in journal["log"]]


def test_prepare_stages_beside_the_running_tree(server, root):
    served, url = server
    served["body"] = _archive(
        {"manage.py": NEW_MANAGE, "bin/run.sh": b"#!/bin/sh\n", "requirements.txt": REQS}
    )
    journal = update_apply.prepare(_manifest(served["body"], url), root)
    staged = update_apply.releases_dir(root) / VERSION
    assert journal["state"] == "staged" and Path(journal["staged"]) == staged
    assert (staged / "manage.py").read_bytes() == NEW_MANAGE
    assert (staged / "bin/run.sh").stat().st_mode & 0o111
    assert (staged / ".venv" / "pyvenv.cfg").is_file()  # its own
    assert not (staged / ".venv").is_symlink()
    assert (root / "manage.py").read_text() == "running\n"
    assert not Path(journal["backup"]).exists()  # the launcher's, at the restart
    assert _steps(journal)[:2] == [("download", "started"), ("download", "done")]
    assert update_apply.load_journal()["state"] == "staged"
    assert not list(update_apply.updates_dir().glob("*.tar.gz*"))


@pytest.mark.parametrize(
    ("over", "cut", "reason"),
    [
        ({"sha256": "0" * 64}, None, "sha256 does not match"),
        ({"size": 10}, None, "larger than"),
        ({}, 20, "truncated"),
    ],
)
def test_bad_download_fails_and_leaves_nothing(server, root, over, cut, reason):
    served, url = server
    served["body"] = _archive({"manage.py": b"new\n"})
    served["cut"] = cut
    with pytest.raises(update_apply.ApplyError, match=reason):
        update_apply.prepare(_manifest(served["body"], url, **over), root)
    journal = update_apply.load_journal()
    assert journal["state"] == "failed" and reason in journal["error"]
    assert not update_apply.releases_dir(root).joinpath(VERSION).exists()
    assert not Path(journal["backup"]).exists()
    assert (root / "manage.py").read_text() == "running\n"


def test_report_only_manifest_cannot_be_applied(root):
    with pytest.raises(update_apply.ApplyError, match="report-only"):
        update_apply.prepare({"version": VERSION, "serial": 1}, root)


@pytest.mark.parametrize(
    "bad",
    [
        {"../evil": b"x"},
        {"a/../../evil": b"x"},
    ],
)
def test_stage_refuses_paths_outside_the_tree(tmp_path, bad):
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(_archive(bad))
    with pytest.raises(update_apply.ApplyError, match="outside"):
        update_apply.stage(archive, tmp_path / "rel" / VERSION)
    assert not (tmp_path / "rel" / VERSION).exists()
    assert not (tmp_path / "rel" / f"{VERSION}.partial").exists()
    assert not (tmp_path / "evil").exists()


def test_stage_refuses_links(tmp_path):
    link = tarfile.TarInfo("host-x/link")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(_archive({"manage.py": b"x"}, extra=[link]))
    with pytest.raises(update_apply.ApplyError, match="not a file or folder"):
        update_apply.stage(archive, tmp_path / VERSION)
    assert not (tmp_path / VERSION).exists()


def test_stage_refuses_a_truncated_archive(tmp_path):
    archive = tmp_path / "a.tar.gz"
    whole = _archive({"manage.py": os.urandom(100000)})
    archive.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(update_apply.ApplyError, match="tar.gz"):
        update_apply.stage(archive, tmp_path / VERSION)
    assert not (tmp_path / VERSION).exists()


def test_disk_full_mid_stage_leaves_no_partial_tree(tmp_path, monkeypatch):
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(_archive({"a": b"1", "b": b"2"}))
    real = update_apply.shutil.copyfileobj
    calls = []

    def full(src, dst, length=0):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, length)

    monkeypatch.setattr(update_apply.shutil, "copyfileobj", full)
    with pytest.raises(update_apply.ApplyError, match="No space left"):
        update_apply.stage(archive, tmp_path / VERSION)
    assert not (tmp_path / VERSION).exists()
    assert not (tmp_path / f"{VERSION}.partial").exists()


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB file system (tmpfs): writes past it fail with ENOSPC from the kernel."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_real_full_disk_mid_stage_leaves_no_partial_tree(tmp_path, small_disk):
    archive = tmp_path / "a.tar.gz"
    big = os.urandom(700 * 1024)  # two of these do not fit on the 1 MiB disk
    archive.write_bytes(_archive({"a": big, "b": big, "c": b"3"}))
    with pytest.raises(update_apply.ApplyError, match="No space left"):
        update_apply.stage(archive, small_disk / VERSION)
    assert list(small_disk.iterdir()) == []  # neither the tree nor its partial
    free = os.statvfs(small_disk)
    assert free.f_bfree * free.f_frsize > 900 * 1024  # what it wrote is given back


def test_a_backup_on_a_real_full_disk_fails_and_leaves_nothing(tmp_path, small_disk):
    where = tmp_path / "state"
    where.mkdir()
    with contextlib.closing(sqlite3.connect(where / "db.sqlite3")) as conn, conn:
        conn.execute("create table t (v blob)")
        conn.executemany("insert into t values (?)", [(os.urandom(4096),) for _ in range(400)])
    with pytest.raises(update_backup.BackupError, match="No space left|database or disk is full"):
        update_backup.backup_state(where, small_disk / "backup-job")
    assert list(small_disk.iterdir()) == []


def test_backup_and_restore_bring_back_the_database_and_files(tmp_path):
    where = tmp_path / "state"
    where.mkdir()
    db = where / "db.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("create table t (v text)")
        conn.execute("insert into t values ('before')")
    conn.close()
    (where / "host.conf").write_text("a=1\n")
    (where / "events-seq").write_text("100")
    (where / "events-seq.lock").write_text("")
    update_backup.backup_state(where, tmp_path / "backup")
    assert sorted(p.name for p in (tmp_path / "backup" / "files").iterdir()) == ["host.conf"]
    with sqlite3.connect(db) as conn:  # a failing migration's damage
        conn.execute("delete from t")
        conn.execute("create table added (x)")
    conn.close()
    (where / "host.conf").write_text("a=2\n")
    (where / "events-seq").write_text("150")
    update_backup.restore_state(tmp_path / "backup", where)
    conn = sqlite3.connect(db)
    assert conn.execute("select v from t").fetchall() == [("before",)]
    assert conn.execute("select name from sqlite_master where name='added'").fetchall() == []
    conn.close()
    assert (where / "host.conf").read_text() == "a=1\n"
    assert (where / "events-seq").read_text() == "150"  # the bus's floor only rises


@pytest.mark.parametrize("step", [*update_apply.STEPS, "staged"])
def test_recover_after_a_kill_at_each_step_removes_the_leftovers(root, step):
    manifest = _manifest(b"x", "http://127.0.0.1:9/x")
    journal = update_apply.new_journal(manifest, root)
    staged = Path(journal["staged"])
    staged.with_name(staged.name + ".partial").mkdir(parents=True)
    Path(journal["backup"] + ".partial").mkdir(parents=True)
    journal["log"] = []
    if step == "staged":  # killed after the last step, before the switch
        staged.mkdir(parents=True)
        journal["state"] = "staged"
    update_apply._record(journal, step, "started")  # the kill comes here
    settled = update_apply.recover()
    assert settled["state"] == "failed" and step in settled["error"]
    assert (
        json.loads((update_apply.updates_dir() / "journal.json").read_text())["state"] == "failed"
    )
    assert not staged.with_name(staged.name + ".partial").exists() and not staged.exists()
    assert not Path(journal["backup"] + ".partial").exists()
    assert (root / "manage.py").read_text() == "running\n"
    assert update_apply.recover() is None  # settled once


def test_the_event_floor_is_never_restored():
    from hooks.events import SEQ_FILE

    assert SEQ_FILE in update_backup.NOT_RESTORED


def test_no_room_for_the_backup_fails_before_the_switch(server, root, monkeypatch):
    served, url = server
    served["body"] = _archive({"manage.py": b"new\n", "requirements.txt": REQS})
    need = update_backup.room_needed(update_apply.state_dir())
    real = update_apply.shutil.disk_usage

    def nearly_full(path):
        return real(path)._replace(free=need - 1)

    monkeypatch.setattr(update_apply.shutil, "disk_usage", nearly_full)
    with pytest.raises(update_apply.ApplyError, match="not enough free space"):
        update_apply.prepare(_manifest(served["body"], url), root)
    journal = update_apply.load_journal()
    assert journal["state"] == "failed" and journal["step"] == "room"
    assert not update_apply.releases_dir(root).joinpath(VERSION).exists()
    assert update_journal.active_tree() is None


CRASHING_TREE = """
import os, sqlite3, sys
if sys.argv[1] == "migrate":
    sys.exit(0)
conn = sqlite3.connect(os.path.join(os.environ["HOST_STATE_DIR"], "db.sqlite3"))
conn.execute("delete from t")  # the failing version's damage
conn.commit()
sys.exit(7)
"""


def _rows(db: Path) -> list:
    conn = sqlite3.connect(db)
    try:
        return [v for (v,) in conn.execute("select v from t order by rowid")]
    finally:
        conn.close()


@pytest.mark.parametrize("backup_at", ["prepare", "restart"])
def test_a_write_after_prepare_survives_a_rollback(server, root, tmp_path, monkeypatch, backup_at):
    """The backup comes after the running version's last write: one taken when prepare() ran
    (`prepare`, what an apply did before the launcher took it) loses a write made between
    prepare() and the restart; the launcher's (`restart`) keeps it."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("HOST_STATE_DIR", str(state))
    monkeypatch.delenv(launcher.PROBATION_ENV, raising=False)
    db = state / "db.sqlite3"
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("create table t (v text)")
        conn.execute("insert into t values ('before')")
    served, url = server
    served["body"] = _archive({"manage.py": CRASHING_TREE.encode(), "requirements.txt": REQS})
    journal = update_apply.prepare(_manifest(served["body"], url), root)
    if backup_at == "prepare":
        update_backup.backup_state(state, Path(journal["backup"]))
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:  # the host still runs
        conn.execute("insert into t values ('after prepare')")
    update_apply.switch(journal)
    staged = Path(journal["staged"])
    if backup_at == "prepare":  # the old order: the launcher restores what prepare() saved
        monkeypatch.setattr(launcher, "_backup", lambda journal: True)
    launcher.follow(["manage.py", "runhost"])  # the new tree crashes: rolled back
    assert update_journal.load()["state"] == "rolled_back"
    assert update_journal.active_tree() is None and staged.is_dir()
    expected = ["before"] if backup_at == "prepare" else ["before", "after prepare"]
    assert _rows(db) == expected


FAILING_MIGRATION = """
import os, sqlite3, sys
assert sys.argv[1:] == ["migrate", "--noinput"], sys.argv
conn = sqlite3.connect(os.path.join(os.environ["HOST_STATE_DIR"], "db.sqlite3"))
conn.execute("delete from t")  # the migration's damage, on the copy
conn.commit()
print("Applying library.0003_fails...")
print("token in my environment:", os.environ.get("HOST_MGMT_TOKEN", "none"))
raise RuntimeError("this migration fails")
"""


@pytest.fixture
def state(tmp_path, monkeypatch):
    where = tmp_path / "state"
    where.mkdir()
    monkeypatch.setenv("HOST_STATE_DIR", str(where))
    with contextlib.closing(sqlite3.connect(where / "db.sqlite3")) as conn, conn:
        conn.execute("create table t (v text)")
        conn.execute("insert into t values ('kept')")
    return where


def test_a_failing_migration_is_refused_before_the_switch(server, root, state, monkeypatch):
    monkeypatch.setenv("HOST_MGMT_TOKEN", "s3cret-token-value")
    served, url = server
    served["body"] = _archive({"manage.py": FAILING_MIGRATION.encode(), "requirements.txt": REQS})
    with pytest.raises(update_apply.ApplyError, match="migrations fail") as failed:
        update_apply.prepare(_manifest(served["body"], url), root)
    journal = update_apply.load_journal()
    assert journal["state"] == "failed" and journal["step"] == "migrate"
    assert "this migration fails" in journal["error"] and "exit 1" in journal["error"]
    assert "s3cret" not in json.dumps(journal) and "s3cret" not in str(failed.value)
    assert "token in my environment: none" in journal["error"]
    assert _rows(state / "db.sqlite3") == ["kept"]  # the copy took the damage
    assert not list(update_apply.updates_dir().glob("migrate-check-*"))
    assert update_journal.active_tree() is None
    assert not update_apply.releases_dir(root).joinpath(VERSION).exists()


def test_a_migration_that_hangs_is_stopped_and_refused(server, root, state, tmp_path, monkeypatch):
    monkeypatch.setattr(update_apply, "MIGRATE_TIMEOUT_S", 1.0)
    monkeypatch.setenv("HOME", str(tmp_path))
    served, url = server
    hang = b"import os, time\nopen(os.path.expanduser('~/hang.pid'), 'w').write(str(os.getpid()))\n"
    hang += b"time.sleep(60)\n"
    served["body"] = _archive({"manage.py": hang, "requirements.txt": REQS})
    with pytest.raises(update_apply.ApplyError, match="did not finish in 1 s"):
        update_apply.prepare(_manifest(served["body"], url), root)
    assert update_apply.load_journal()["step"] == "migrate"
    assert not list(update_apply.updates_dir().glob("migrate-check-*"))
    pid = int((tmp_path / "hang.pid").read_text())
    assert not Path(f"/proc/{pid}").exists()  # killed and reaped


def _waiting_journal(state_dir_path, force=False) -> dict:
    journal = {"id": "job9", "state": "staged", "from": "v1", "to": "v2", "force": force,
               "staged": str(state_dir_path / "nowhere"), "backup": str(state_dir_path / "b"),
               "log": []}  # fmt: skip
    update_apply._save(journal)
    return journal


def test_the_switch_waits_for_a_session_that_started_meanwhile(state, monkeypatch):
    """A session that began while the release was prepared keeps playing: the switch waits
    for it to end; after IDLE_WAIT_S it gives up (failed, marked for retry), and a forced
    apply never waits."""
    live = [["s1"], ["s1"], []]
    monkeypatch.setattr(update_apply.streaming_services, "live_records", lambda: live.pop(0))
    slept = []
    journal = _waiting_journal(state)
    assert update_apply.wait_for_idle(journal, sleep=slept.append)
    assert len(slept) == 2
    assert [(e["step"], e["state"]) for e in journal["log"]] == [("switch", "waiting")]

    monkeypatch.setattr(update_apply.streaming_services, "live_records", lambda: ["s1"])
    now = [0.0]
    journal = _waiting_journal(state)

    def sleep(seconds):
        now[0] += seconds

    assert not update_apply.wait_for_idle(journal, clock=lambda: now[0], sleep=sleep)
    saved = update_apply.load_journal()
    assert saved["state"] == "failed" and saved["retry"] is True
    assert "stayed live" in saved["error"] and now[0] >= update_apply.IDLE_WAIT_S

    forced = _waiting_journal(state, force=True)
    assert update_apply.wait_for_idle(forced, sleep=lambda s: pytest.fail("a forced apply waited"))
