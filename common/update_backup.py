"""The backup an update apply restores on rollback: the database (sqlite3 backup API) and the
state dir's top-level files. Stdlib only: the launcher (supervisor/launcher.py) takes it before
Django loads, once the previous version's processes are gone, so no write of theirs comes after
it (docs/updates.md, "Apply").
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from pathlib import Path

from common.files import atomic_write
from common.statedir import DB_FILE, EVENTS_SEQ_FILE

# A state file larger than this is not copied into a backup (logs, caches: not state).
MAX_STATE_FILE_BYTES = 16 * 1024 * 1024
# Never put back: the event bus's sequence floor must only rise (a rewound one would reuse seq
# numbers consumers already saw); lock files hold nothing.
NOT_RESTORED = {EVENTS_SEQ_FILE}


class BackupError(RuntimeError):
    """The backup could not be taken (disk full, unreadable database); none exists."""


def copy_database(db: Path, dest: Path) -> None:
    """A consistent copy of the database into `dest`, page by page (sqlite3 backup API: other
    readers may run). Also how a backup is put back (the host is stopped then)."""
    source = sqlite3.connect(db)
    try:
        with contextlib.closing(sqlite3.connect(dest)) as target:
            source.backup(target)
    finally:
        source.close()


def state_files(where: Path) -> list[Path]:
    """The top-level files a backup saves: not the database (copied through sqlite), its
    journals, lock files, symlinks, or files past MAX_STATE_FILE_BYTES."""
    skip = {DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm", f"{DB_FILE}-journal", *NOT_RESTORED}
    return sorted(
        p
        for p in where.iterdir()
        if p.name not in skip
        and not p.name.endswith(".lock")
        and p.is_file()
        and not p.is_symlink()
        and p.stat().st_size <= MAX_STATE_FILE_BYTES
    )


def room_needed(where: Path) -> int:
    """Bytes an apply needs free: the database twice (the migration dry run's copy and the
    backup) and the state files once."""
    db = where / DB_FILE
    db_size = sum(p.stat().st_size for p in (db, db.with_name(f"{DB_FILE}-wal")) if p.exists())
    return 2 * db_size + sum(p.stat().st_size for p in state_files(where))


def backup_state(where: Path, dest: Path) -> None:
    """The database and the state dir's top-level files into `dest` (complete or absent)."""
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        (partial / "files").mkdir(parents=True, mode=0o700)
        if (where / DB_FILE).exists():
            copy_database(where / DB_FILE, partial / DB_FILE)
        for path in state_files(where):
            shutil.copy2(path, partial / "files" / path.name)
        shutil.rmtree(dest, ignore_errors=True)  # an interrupted earlier try's
        os.replace(partial, dest)
    except (OSError, sqlite3.Error) as exc:
        raise BackupError(f"backup failed: {exc}") from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def restore_state(backup: Path, where: Path) -> None:
    """Put back what a backup saved: the database and every saved top-level file."""
    if (backup / DB_FILE).exists():
        copy_database(backup / DB_FILE, where / DB_FILE)
    for path in sorted((backup / "files").iterdir()):
        atomic_write(where / path.name, path.read_bytes(), mode=path.stat().st_mode & 0o777)
