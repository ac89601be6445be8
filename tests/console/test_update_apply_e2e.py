"""A real apply on a real host: a release built from this tree's HEAD with a version bump,
signed by scripts/sign_release.py with a test key pinned through HOST_UPDATE_PUBLIC_KEY and
served on loopback. The host stages it, switches, restarts on probation, passes the health gate
and emits `update.applied` once; a release that damages the database and crashes at start is
rolled back, the database restored from the backup; one whose migration fails is refused before
the switch."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.support.livehost import ROOT, start_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

OLD_VERSION = "v2026.1126.0-dev"  # common/version.py at HEAD is checked below
NEW_VERSION = "v2099.101.0-test"
SCRIPT = "scripts/sign_release.py"


def _git(where: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(where), *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


def _export_head(dest: Path) -> None:
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


SLOW = {"on": False}


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def copyfile(self, source, outputfile):
        if not SLOW["on"]:
            return super().copyfile(source, outputfile)
        while chunk := source.read(4096):  # a slow mirror: the apply sits in `download`
            outputfile.write(chunk)
            time.sleep(0.05)


@pytest.fixture
def rig(tmp_path):
    """The running checkout (HEAD with the tests' venv), a release source with a version bump
    (optionally broken), a signing key, and a loopback release server."""
    host_tree = tmp_path / "host"
    _export_head(host_tree)
    (host_tree / ".venv").symlink_to((ROOT / ".venv").resolve())
    out = tmp_path / "out"
    out.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(out)))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    key = tmp_path / "key.pem"
    python = str(ROOT / ".venv" / "bin" / "python")
    pub = subprocess.run(
        [python, str(ROOT / SCRIPT), "keygen", str(key)], check=True, capture_output=True, text=True
    ).stdout.strip()

    def release(extra_patch=None, version=NEW_VERSION, serial=5):
        src = tmp_path / f"release-src-{version}"
        _export_head(src)
        version_py = src / "common" / "version.py"
        text = version_py.read_text()
        assert f'VERSION = "{OLD_VERSION}"' in text
        version_py.write_text(text.replace(OLD_VERSION, version))
        if extra_patch:
            extra_patch(src)
        _git(src, "init", "-q")
        _git(src, "add", "-A")
        _git(src, "commit", "-q", "-m", "release")
        base = f"http://127.0.0.1:{server.server_port}/"
        subprocess.run(
            [python, str(src / SCRIPT), "build", str(key), version, str(serial), base, str(out)],
            check=True, capture_output=True,
        )  # fmt: skip

    env = {
        "HOST_UPDATE_PUBLIC_KEY": pub,
        "HOST_UPDATE_MANIFEST_URL": f"http://127.0.0.1:{server.server_port}/manifest.json",
        "HOST_UPDATE_GRACE_S": "5",
    }
    yield host_tree, release, env
    server.shutdown()


def test_bad_downloads_fail_and_the_running_version_keeps_its_data(rig):
    """The archive served is not the one the manifest signed: one byte changed, cut short, or
    longer. Each apply fails at download or verify; the host never restarts."""
    host_tree, release, env = rig
    release()
    archive = host_tree.parent / "out" / f"host-{NEW_VERSION}.tar.gz"
    good = archive.read_bytes()
    tampered = [
        (good[:100] + bytes([good[100] ^ 1]) + good[101:], "sha256 does not match"),
        (good[: len(good) // 2], "truncated"),
        (good + b"x" * 10, "larger than"),
    ]
    host = start_host(tree=host_tree, env=env)
    try:
        with host.mgmt() as c:
            assert c.post("/api/v1/library/custom", json={"title": "Kept Game"}).status_code == 201
            assert c.post("/api/v1/update/check").json()["available"]
            for body, reason in tampered:
                archive.write_bytes(body)
                r = c.post("/api/v1/update/apply", json={})
                assert r.status_code == 202, r.text
                job = _wait_job(host, {"failed", "done", "rolled_back"}, timeout=120)["job"]
                assert job["state"] == "failed" and reason in job["error"], job
            status = c.get("/api/v1/update/status").json()
            assert status["current_version"] == OLD_VERSION
            assert "Kept Game" in json.dumps(c.get("/api/v1/library").json())
        assert not (host_tree.parent / "host.releases" / NEW_VERSION).exists()
        assert host.log_tail(400).count("Console: https://") == 1  # never restarted
    finally:
        assert host.stop() == 0, host.log_tail(120)


def _status(host) -> dict | None:
    try:
        with host.mgmt() as c:
            r = c.get("/api/v1/update/status")
            return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, OSError):
        return None


def _wait_status(host, holds, what: str, timeout: float) -> dict:
    """The update status once `holds(status, job)` is true; fails at once if the host exits."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if host.proc.poll() is not None:
            raise AssertionError(f"host exited {host.proc.returncode}:\n{host.log_tail()}")
        status = _status(host)
        if status and status.get("job"):
            last = status
            if holds(status, status["job"]):
                return status
        time.sleep(1)
    raise AssertionError(
        f"{what} did not reach its state: {json.dumps(last)}\n{host.log_tail(120)}"
    )


def _wait_job(host, states: set[str], timeout: float = 400) -> dict:
    """The status once the apply to NEW_VERSION is in one of `states`, and the host runs the
    version that state means (the new one when done, the old one otherwise)."""
    return _wait_status(
        host,
        lambda status, job: (
            job["state"] in states
            and status["current_version"]
            == (NEW_VERSION if job["state"] == "done" else OLD_VERSION)
        ),
        f"the job ({sorted(states)})",
        timeout,
    )


def _applied_events(host) -> list[dict]:
    seen = []
    with host.mgmt() as c:
        try:
            with c.stream("GET", "/api/v1/events?since=0&kinds=update.*",
                          timeout=httpx.Timeout(4, read=4)) as r:  # fmt: skip
                for line in r.iter_lines():
                    if line.startswith("data:"):
                        event = json.loads(line[5:])
                        if event["kind"] == "update.applied":
                            seen.append(event)
        except httpx.ReadTimeout:
            pass
    return seen


def _wait_ports_free(host, timeout: float = 60) -> None:
    """Until the killed run's processes (stopping on their own) no longer hold its ports."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = False
        for port in (host.base_port, host.mgmt_port):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                busy = True
            except OSError:
                pass
        if not busy:
            return
        time.sleep(0.5)
    raise AssertionError("the killed host's ports stayed busy")


def _apply(host) -> None:
    with host.mgmt() as c:
        r = c.post("/api/v1/update/check")
        deadline = time.monotonic() + 40
        while r.status_code == 429 and time.monotonic() < deadline:  # one check per 30 s
            time.sleep(float(r.headers.get("Retry-After", "2")))
            r = c.post("/api/v1/update/check")
        assert r.status_code == 200 and r.json()["available"], r.text
        r = c.post("/api/v1/update/apply", json={})
        assert r.status_code == 202, r.text


def _restart(host) -> None:
    with host.mgmt() as c:
        assert c.post("/api/v1/host/restart").status_code in (200, 202)
    time.sleep(3)
    host.wait_ready(timeout=200)


def test_apply_restarts_into_the_new_version_and_announces_it_once(rig):
    """OLD -> NEW (restart, `update.applied` once, cleanup), then NEW -> THIRD, and a FOURTH
    that crashes at start rolled back to THIRD with the data intact."""
    host_tree, release, env = rig
    release()
    host = start_host(tree=host_tree, env=env)
    try:
        with host.mgmt() as c:
            assert c.post("/api/v1/library/custom", json={"title": "Kept Game"}).status_code == 201
        _apply(host)
        status = _wait_job(host, {"done", "rolled_back", "failed"})
        assert status["job"]["state"] == "done", json.dumps(status["job"])
        assert status["current_version"] == NEW_VERSION
        host.wait_ready(timeout=200)
        events = _applied_events(host)
        assert [(e["from"], e["to"]) for e in events] == [(OLD_VERSION, NEW_VERSION)]
        _restart(host)
        assert _status(host)["current_version"] == NEW_VERSION, host.log_tail(120)
        assert len(_applied_events(host)) <= 1  # never again (the ring may not survive)
        journal = json.loads((host.state_dir / "updates" / "journal.json").read_text())
        assert journal["state"] == "done" and journal["announced"]
        # The cleanup after the gate: the stage and this apply's backup stay (nothing older).
        releases = host_tree.parent / "host.releases"
        assert [p.name for p in releases.iterdir()] == [NEW_VERSION]
        backups = list((host.state_dir / "updates").glob("backup-*"))
        assert [p.name for p in backups] == [Path(journal["backup"]).name]
        assert journal["from_tree"] == str(host_tree.resolve())
        # The backup came after the switch, once the old version had stopped, before the start.
        steps = [(e["step"], e["state"]) for e in journal["log"]]
        assert (
            steps.index(("switch", "done"))
            < steps.index(("backup", "done"))
            < steps.index(("restart", "started"))
        ), steps
        venv = host_tree.parent / "host.releases" / NEW_VERSION / ".venv"
        assert venv.is_dir() and not venv.is_symlink()  # its own, not the checkout's

        # The applied release applies the next one (from a tree the launcher runs as its
        # child); a fourth that crashes at start rolls back to the third, never to the
        # checkout's older code on data the third migrated.
        release(version=THIRD_VERSION, serial=6)
        _apply(host)
        status = _settled(host, THIRD_VERSION, {"done", "failed", "rolled_back"})
        assert status["job"]["state"] == "done", json.dumps(status["job"])
        host.wait_ready(timeout=200)
        assert _status(host)["current_version"] == THIRD_VERSION
        assert (releases / THIRD_VERSION).is_dir()  # beside the checkout, not inside NEW's
        assert not (releases / f"{NEW_VERSION}.releases").exists()
        release(_crash_at_start, version=FOURTH_VERSION, serial=7)
        _apply(host)
        status = _settled(host, FOURTH_VERSION, {"done", "failed", "rolled_back"})
        assert status["job"]["state"] == "rolled_back", json.dumps(status["job"])
        host.wait_ready(timeout=200)
        assert _status(host)["current_version"] == THIRD_VERSION
        with host.mgmt() as c:
            assert "Kept Game" in json.dumps(c.get("/api/v1/library").json())
        active = (host.state_dir / "updates" / "active-tree").read_text().strip()
        assert active == str(releases / THIRD_VERSION)
    finally:
        assert host.stop() == 0, host.log_tail(120)


THIRD_VERSION = "v2099.102.0-test"
FOURTH_VERSION = "v2099.103.0-test"


def _settled(host, version: str, states: set[str], timeout: float = 400) -> dict:
    """The update status once the job for `version` is in one of `states`."""
    return _wait_status(
        host,
        lambda _status, job: job.get("to") == version and job.get("state") in states,
        f"{version} ({sorted(states)})",
        timeout,
    )


def _crash_at_start(src: Path) -> None:
    """The new version damages the data (as a bad migration would), then dies at start (not
    in the migration dry run before the switch: that runs `manage.py migrate`)."""
    settings_py = src / "hostmgmt" / "settings.py"
    settings_py.write_text(
        settings_py.read_text() + "\nimport sys as _sys\nif 'runhost' in _sys.argv:\n"
        "    import sqlite3 as _sq\n    _c = _sq.connect(STATE_DIR / DB_FILE)\n"
        "    _c.execute('delete from library_customentry')\n    _c.commit()\n    _c.close()\n"
        "    raise SystemExit(9)\n"
    )


FAILING_MIGRATION = """
from django.db import migrations


def fail(apps, schema_editor):
    apps.get_model("library", "CustomEntry").objects.all().delete()
    raise RuntimeError("this migration fails")


class Migration(migrations.Migration):
    atomic = False  # its damage stays: only the backup brings the data back
    dependencies = [("library", "0002_scanner_progress")]
    operations = [migrations.RunPython(fail)]
"""


def _failing_migration(src: Path) -> None:
    (src / "library" / "migrations" / "0003_fails.py").write_text(FAILING_MIGRATION)


def _child_dies_in_grace(src: Path) -> None:
    """Starts, answers /health, but a critical child exits: the health gate fails."""
    manager = src / "streaming" / "sessions" / "manager.py"
    manager.write_text(manager.read_text().replace("    sys.exit(main())", "    sys.exit(5)"))


@pytest.mark.parametrize(
    ("patch", "reason"),
    [
        (_crash_at_start, "exited with 9"),
        (_child_dies_in_grace, "exited with 3"),
    ],
)
def test_a_release_that_fails_to_start_is_rolled_back_with_the_data_intact(rig, patch, reason):
    host_tree, release, env = rig
    release(patch)
    host = start_host(tree=host_tree, env=env)
    try:
        with host.mgmt() as c:
            r = c.post("/api/v1/library/custom", json={"title": "Kept Game"})
            assert r.status_code == 201, r.text
        _apply(host)
        status = _wait_job(host, {"rolled_back", "failed", "done"})
        assert status["job"]["state"] == "rolled_back", json.dumps(status["job"])
        assert reason in status["job"]["error"], status["job"]
        host.wait_ready(timeout=200)
        assert _status(host)["current_version"] == OLD_VERSION
        with host.mgmt() as c:
            names = json.dumps(c.get("/api/v1/library").json())
        assert "Kept Game" in names
        assert _applied_events(host) == []
    finally:
        assert host.stop() == 0, host.log_tail(120)


def test_a_release_whose_migration_fails_is_refused_before_the_switch(rig):
    """The dry run of its migrations on a copy of the database fails: the job fails with the
    migration's last lines, the host never restarts, the data and the running version stay."""
    host_tree, release, env = rig
    release(_failing_migration)
    host = start_host(tree=host_tree, env=env)
    try:
        with host.mgmt() as c:
            assert c.post("/api/v1/library/custom", json={"title": "Kept Game"}).status_code == 201
        _apply(host)
        job = _wait_job(host, {"rolled_back", "failed", "done"})["job"]
        assert job["state"] == "failed", json.dumps(job)
        assert "migrations fail" in job["error"] and "this migration fails" in job["error"], job
        assert _status(host)["current_version"] == OLD_VERSION
        with host.mgmt() as c:
            assert "Kept Game" in json.dumps(c.get("/api/v1/library").json())
        assert host.log_tail(400).count("Console: https://") == 1  # never restarted
        assert not (host_tree.parent / "host.releases" / NEW_VERSION).exists()
        assert not list((host.state_dir / "updates").glob("migrate-check-*"))
    finally:
        assert host.stop() == 0, host.log_tail(120)


def test_a_kill_during_the_download_is_settled_at_the_next_start(rig):
    host_tree, release, env = rig
    release()
    host = start_host(tree=host_tree, env=env)
    journal_path = host.state_dir / "updates" / "journal.json"
    SLOW["on"] = True
    try:
        with host.mgmt() as c:
            assert c.post("/api/v1/library/custom", json={"title": "Kept Game"}).status_code == 201
        _apply(host)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if '"step": "download"' in journal_path.read_text():
                break
            time.sleep(0.1)
        host.proc.kill()  # kill -9 of the supervisor mid-download
        host.proc.wait()
    finally:
        SLOW["on"] = False
        host.stop()
    _wait_ports_free(host)
    again = start_host(tree=host_tree, env=env, state_dir=host.state_dir, base_port=host.base_port)
    try:
        job = _status(again)["job"]
        assert job["state"] == "failed" and "interrupted during download" in job["error"], job
        assert _status(again)["current_version"] == OLD_VERSION
        assert not list(host.state_dir.joinpath("updates").glob("*.tar.gz*"))
        with again.mgmt() as c:
            assert "Kept Game" in json.dumps(c.get("/api/v1/library").json())
    finally:
        assert again.stop() == 0, again.log_tail(120)


def test_a_kill_during_probation_rolls_back_at_the_next_start(rig):
    host_tree, release, env = rig
    release()
    host = start_host(tree=host_tree, env=env)
    journal_path = host.state_dir / "updates" / "journal.json"
    try:
        with host.mgmt() as c:
            assert c.post("/api/v1/library/custom", json={"title": "Kept Game"}).status_code == 201
        _apply(host)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # the new version is starting on probation
            try:
                if json.loads(journal_path.read_text()).get("probation_started"):
                    break
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.2)
        else:
            raise AssertionError(f"no probation:\n{host.log_tail(120)}")
        host.proc.kill()  # kill -9 of the launcher; the new version dies with it
        host.proc.wait()
    finally:
        host.stop()
    _wait_ports_free(host)
    again = start_host(tree=host_tree, env=env, state_dir=host.state_dir, base_port=host.base_port)
    try:
        journal = json.loads(journal_path.read_text())
        assert journal["state"] == "rolled_back", journal
        assert _status(again)["current_version"] == OLD_VERSION
        with again.mgmt() as c:
            assert "Kept Game" in json.dumps(c.get("/api/v1/library").json())
    finally:
        assert again.stop() == 0, again.log_tail(120)


# Test rig only, appended to the running tree's copy of common/update_journal.py (never to the
# release, never to the repository): holds an apply at one journal write, named in the state
# dir's `test-update-pause` as `before|after <step> <state>`, so a kill lands there.
PAUSE_PATCH = """

_unpaused_record = record


def record(journal, step, state, detail=""):
    try:
        pause = (state_dir() / "test-update-pause").read_text().strip()
    except OSError:
        pause = ""
    if pause == f"before {step} {state}":
        time.sleep(600)
    _unpaused_record(journal, step, state, detail)
    if pause == f"after {step} {state}":
        time.sleep(600)
"""

# Where each kill lands, and what shows the host is held there: the step's work is complete
# but the journal still says `started` (the next start must remove what it made), or, for the
# switch, the journal says `switched` and `active-tree` is not written yet.
KILL_POINTS = [
    ("stage", "before stage done", lambda staged, j: staged.is_dir()),
    ("environment", "before environment done", lambda staged, j: (staged / ".venv").is_dir()),
    ("migrate", "before migrate done", lambda staged, j: j["log"][-1]["step"] == "migrate"),
    ("switch", "after switch done", lambda staged, j: j.get("state") == "switched"),
]


def _kill_when(host, check, what: str) -> None:
    journal_path = host.state_dir / "updates" / "journal.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            journal = json.loads(journal_path.read_text())
        except (FileNotFoundError, ValueError):
            journal = {}
        if journal.get("state") in ("running", "staged", "switched") and check(journal):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"never held at {what}:\n{host.log_tail(80)}")
    host.proc.kill()  # kill -9 of the supervisor; its children die with it
    host.proc.wait()
    host.stop()


def test_a_kill_at_each_step_between_download_and_probation_is_settled_at_the_next_start(rig):
    """One host, killed at stage, environment and migrate (each: the next start marks the job
    failed, removes what the step made, runs the previous version with its data), then at
    the switch (the next start runs the new version on probation, which passes its gate)."""
    host_tree, release, env = rig
    release()
    journal_file = host_tree / "common" / "update_journal.py"
    journal_file.write_text(journal_file.read_text() + PAUSE_PATCH)
    host = start_host(tree=host_tree, env=env)
    pause = host.state_dir / "test-update-pause"
    updates = host.state_dir / "updates"
    staged = host_tree.parent / "host.releases" / NEW_VERSION
    try:
        with host.mgmt() as c:
            assert c.post("/api/v1/library/custom", json={"title": "Kept Game"}).status_code == 201
            assert c.post("/api/v1/update/check").json()["available"]
        for step, point, held in KILL_POINTS:
            pause.write_text(point)
            with host.mgmt() as c:
                r = c.post("/api/v1/update/apply", json={})
                assert r.status_code == 202, (step, r.text)
            _kill_when(host, lambda j, held=held: held(staged, j), point)
            pause.unlink()
            _wait_ports_free(host)
            host = start_host(tree=host_tree, env=env, state_dir=host.state_dir,
                              base_port=host.base_port)  # fmt: skip
            if step == "switch":
                status = _wait_job(host, {"done", "rolled_back", "failed"})
                assert status["job"]["state"] == "done", (step, status["job"])
                assert status["current_version"] == NEW_VERSION
                steps = [(e["step"], e["state"]) for e in status["job"]["log"]]
                assert ("restart", "started") in steps and ("health", "done") in steps, steps
            else:
                job = _status(host)["job"]
                assert job["state"] == "failed", (step, job)
                assert f"interrupted during {step}" in job["error"], (step, job)
                assert not any(e["step"] == "restart" for e in job["log"]), (step, job)
                assert _status(host)["current_version"] == OLD_VERSION, step
                assert (
                    not staged.exists() and not staged.with_name(staged.name + ".partial").exists()
                )
                leftovers = [*updates.glob("backup-*"), *updates.glob("migrate-check-*")]
                assert not leftovers, (step, list(updates.iterdir()))
                assert not (updates / "active-tree").exists(), step
            with host.mgmt() as c:
                assert "Kept Game" in json.dumps(c.get("/api/v1/library").json()), step
    finally:
        pause.unlink(missing_ok=True)
        assert host.stop() == 0, host.log_tail(120)
