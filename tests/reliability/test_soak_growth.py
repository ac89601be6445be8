"""bench/soak.py's growth report names the files a process opened between two samples."""

from __future__ import annotations

import os

from bench import soak


def _proc(pid: int, files: list[str], sockets: int) -> dict:
    return {"pid": pid, "rss_mb": 100.0, "fds": len(files) + sockets, "sockets": sockets,
            "files": sorted(files)}  # fmt: skip


def test_growth_names_the_files_added_and_closed_not_sockets():
    db, wal = "/s/db.sqlite3", "/s/db.sqlite3-wal"
    rows = [
        {"procs": {"daphne": _proc(7, [db], 3)}},
        {"procs": {"daphne": _proc(7, [db, "/s/host.log"], 5)}},  # the baseline
        {"procs": {"daphne": _proc(7, [db, db, wal], 9)}},
    ]
    g = soak.growth(rows)["daphne"]
    assert g["file_fd_growth"] == 1 and g["fd_growth"] == 5
    assert g["files_added"] == [db, wal]  # a second connection to the same file counts
    assert g["files_closed"] == ["/s/host.log"]


def test_fd_targets_reads_this_process(tmp_path):
    path = tmp_path / "opened"
    with open(path, "w"):
        sockets, files = soak._fd_targets(os.getpid())
    assert str(path) in files and all(not f.startswith("socket:") for f in files)
    assert sockets >= 0
