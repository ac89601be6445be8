"""A full or read-only state directory, on a real 256 KiB tmpfs (mounted here, unmounted in a
finally): writes fail with the documented status and error body and leave the previous files
intact; the log file handler drops and counts lines instead of failing the process."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
from pathlib import Path

import pytest

from common.errors import InsufficientStorage, Unavailable
from common.files import StateWriteError, atomic_write, storage_refusal
from common.loghandler import DiskSafeFileHandler


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def tiny_fs(tmp_path):
    where = tmp_path / "tiny"
    where.mkdir()
    if os.geteuid() != 0 or not _mount(
        "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(where)
    ):
        pytest.skip("needs root to mount a small tmpfs")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(where: Path) -> None:
    """Take every free block: a filler file grows until the disk says ENOSPC."""
    with open(where / ".filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    # tmpfs may still take a tiny file in a spare block: fill small ones too
    for i in range(64):
        try:
            (where / f".f{i}").write_bytes(b"\0" * 512)
        except OSError:
            break


def _temps(where: Path) -> list[str]:
    return [n for n in os.listdir(where) if n.endswith(".tmp")]


def test_a_full_disk_refuses_the_write_and_keeps_the_previous_file(tiny_fs):
    target = tiny_fs / "hooks.json"
    atomic_write(target, '{"hooks": []}\n')
    _fill(tiny_fs)
    with pytest.raises(StateWriteError) as caught:
        atomic_write(target, json.dumps({"hooks": [{"on": "x", "run": "y" * 20000}]}))
    assert str(caught.value) == "cannot write hooks.json: no space left on the device"
    assert target.read_text() == '{"hooks": []}\n'
    assert _temps(tiny_fs) == []
    refusal = storage_refusal(caught.value)
    assert isinstance(refusal, InsufficientStorage) and refusal.status == 507


def test_a_read_only_disk_refuses_the_write_and_keeps_the_previous_file(tiny_fs):
    target = tiny_fs / "apps.json"
    atomic_write(target, '{"apps": []}\n')
    assert _mount("-o", "remount,ro", str(tiny_fs))
    with pytest.raises(StateWriteError) as caught:
        atomic_write(target, '{"apps": [{"name": "x"}]}\n')
    assert "read-only" in str(caught.value)
    assert target.read_text() == '{"apps": []}\n'
    refusal = storage_refusal(caught.value)
    assert isinstance(refusal, Unavailable) and refusal.status == 503 and refusal.retry_after


def test_the_apis_answer_507_with_their_error_body_on_a_full_state_dir(
    tiny_fs, monkeypatch, settings, db
):
    from rest_framework.test import APIClient

    from access import credentials

    monkeypatch.setenv("HOST_STATE_DIR", str(tiny_fs))
    settings.HOST_NO_MGMT_TOKEN = True
    credentials.set_credentials("admin", "pw-for-tests")
    v1 = APIClient(HTTP_X_REQUESTED_WITH="tests")
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION="Basic YWRtaW46cHctZm9yLXRlc3Rz")
    hooks = {"hooks": [{"on": "stream.*", "run": "true"}]}
    r = v1.put("/api/v1/hooks", hooks, format="json")
    assert r.status_code == 200, r.content
    assert (
        v1.put("/api/v1/host/config", {"audio_video": {"max_fps": 60}}, format="json").status_code
        == 200
    )
    assert admin.get("/api/apps").status_code == 200  # writes the default apps.json
    names = ("hooks.json", "host.conf", "host.env", "apps.json")
    before = {n: (tiny_fs / n).read_bytes() for n in names}
    _fill(tiny_fs)

    big = {"hooks": [{"on": "game.*", "run": "x" * 3000}] * 20}
    r = v1.put("/api/v1/hooks", big, format="json")
    assert r.status_code == 507, r.content
    assert set(r.json()) == {"error"} and "state directory is full" in r.json()["error"]
    r = v1.put("/api/v1/host/config", {"audio_video": {"max_fps": 30}}, format="json")
    assert r.status_code == 507 and "host.conf" in r.json()["error"], r.content
    r = admin.post("/api/config", {"rate_cap_pct": 70}, format="json")
    assert r.status_code == 507
    assert r.json()["status"] is False and r.json()["status_code"] == 507 and r.json()["error"]
    r = admin.post("/api/apps", {"index": -1, "name": "New " + "x" * 200}, "json")
    assert r.status_code == 507 and r.json()["status_code"] == 507, r.content
    after = {n: (tiny_fs / n).read_bytes() for n in before}
    assert after == before
    assert _temps(tiny_fs) == []


def test_the_log_handler_drops_and_counts_lines_on_a_full_disk_then_resumes(tiny_fs, capsys):
    path = tiny_fs / "host.log"
    handler = DiskSafeFileHandler(str(path))
    logger = logging.getLogger("test.diskfull")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.warning("before the disk filled")
        _fill(tiny_fs)
        for i in range(500):
            logger.warning("line %d %s", i, "x" * 200)  # never raises into the caller
        size = path.stat().st_size
        for i in range(200):
            logger.warning("more %d %s", i, "x" * 200)
        assert path.stat().st_size == size  # stopped growing
        assert handler.dropped >= 200
        err = capsys.readouterr().err
        assert err.count("log lines are dropped") == 1, err
        assert "Traceback" not in err
        for name in os.listdir(tiny_fs):  # free the space
            if name.startswith(".f"):
                os.unlink(tiny_fs / name)
        logger.warning("after the space came back")
        text = path.read_text(errors="replace")
        assert "log line(s) dropped: the disk refused them]" in text
        assert text.rstrip().endswith("after the space came back")
        assert handler.dropped == 0
    finally:
        logger.removeHandler(handler)
        handler.close()


def test_a_full_disk_under_the_database_is_507_and_the_rows_stay(tiny_fs):
    import sqlite3

    db = sqlite3.connect(tiny_fs / "db.sqlite3")
    db.execute("CREATE TABLE paired (name TEXT)")
    db.execute("INSERT INTO paired VALUES ('before')")
    db.commit()
    _fill(tiny_fs)
    with pytest.raises(sqlite3.OperationalError) as caught:
        for _ in range(200):
            db.execute("INSERT INTO paired VALUES (?)", ("x" * 4000,))
        db.commit()
    db.rollback()
    refusal = storage_refusal(caught.value)
    assert isinstance(refusal, InsufficientStorage), caught.value
    assert [r[0] for r in db.execute("SELECT name FROM paired")] == ["before"]
    db.close()
