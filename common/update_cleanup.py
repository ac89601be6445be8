"""What finished applies leave behind, removed once an apply passed its health gate
(docs/updates.md, "Cleanup"): staged trees no process runs any more and backups no rollback
will use. Stdlib only, beside the journal it reads (common/update_journal.py).

The wheel cache goes too (only a stage's venv build reads it).

Kept: the tree the apply switched to (running), the tree that ran before it (its launcher may
still be the running version's parent process, with that tree's code loaded), whatever
`active-tree` names, and this apply's backup. The checkout is never touched: only entries
directly inside `<root>.releases/` and `<state>/updates/backup-*` are candidates.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

from common import update_journal

log = logging.getLogger(__name__)

LOCK_FILE = "apply.lock"  # the lock an apply's start takes (console/update_apply.start)


def _real(path: Path | str) -> str:
    return os.path.realpath(path)


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


def prune() -> list[Path]:
    """Remove old staged trees and backups when the journal's apply is `done`; nothing while
    any job is in progress or after one that did not finish (failed, rolled back). Returns the
    paths removed. Holds the apply lock: no job starts meanwhile."""
    with open(update_journal.updates_dir() / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        journal = update_journal.load()
        if not journal or journal.get("state") != "done" or not journal.get("root"):
            return []
        root = Path(journal["root"])
        releases = update_journal.releases_dir(root)
        keep = [Path(journal["staged"]), Path(journal.get("from_tree") or root)]
        active = update_journal.active_tree()
        if active is not None:
            keep.append(active)
        kept_names = {p.name for p in keep if _real(p.parent) == _real(releases)}
        checkout = _real(root)
        removed: list[Path] = []
        if releases.is_dir() and _real(releases) != checkout:
            for entry in sorted(releases.iterdir()):
                if entry.name in kept_names:
                    continue
                target = _real(entry)
                if not entry.is_symlink() and os.path.commonpath([target, checkout]) == target:
                    continue  # a folder that holds the checkout (a bind mount, say): never
                _remove(entry)  # a link goes alone, never what it points to
                removed.append(entry)
        backup = Path(journal.get("backup") or "")
        for entry in sorted(update_journal.updates_dir().glob("backup-*")):
            if entry.name != backup.name:
                _remove(entry)
                removed.append(entry)
        wheels = update_journal.updates_dir() / "wheels"
        if wheels.is_dir():  # only a stage's venv build reads it; each tree's venv is its own
            shutil.rmtree(wheels)
            removed.append(wheels)
        if removed:
            names = ", ".join(p.name for p in removed)
            update_journal.record(journal, "cleanup", "done", f"removed {names}")
            log.info("update cleanup: removed %s", names)
        return removed
