"""The update apply's journal, the switch file, and the restore of a backup: stdlib only,
because `manage.py runhost` reads them before Django loads (supervisor/launcher.py) to decide
which tree runs (docs/updates.md, "Apply").

States of a job: running (steps before the switch) -> staged -> switched (the new tree is on
probation) -> done, or failed (nothing changed: before the switch, or a backup the launcher
could not take) or rolled_back (the new tree ran: the previous tree and the backup are back).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from common import update_backup
from common.files import atomic_write
from common.statedir import state_dir

JOURNAL_FILE = "journal.json"
ACTIVE_TREE_FILE = "active-tree"


# Set by the launcher for every tree it runs: the README's clone, whichever tree runs now.
CHECKOUT_ENV = "HOST_CHECKOUT_ROOT"


def checkout_root(running: Path) -> Path:
    """The checkout (`git clone` of the README): staged trees go beside it and a rollback
    returns to it, also when the tree running now is an applied release."""
    named = os.environ.get(CHECKOUT_ENV)
    return Path(named) if named and Path(named).is_dir() else running


def releases_dir(root: Path) -> Path:
    """Where staged trees live: beside the running checkout, never inside it."""
    return root.parent / f"{root.name}.releases"


def updates_dir() -> Path:
    path = state_dir() / "updates"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def load() -> dict | None:
    try:
        data = json.loads((updates_dir() / JOURNAL_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def save(journal: dict) -> None:
    atomic_write(updates_dir() / JOURNAL_FILE, json.dumps(journal))


def record(journal: dict, step: str, state: str, detail: str = "") -> None:
    """Write the step's state before moving on: after a kill the journal says where it was."""
    journal["step"] = step
    journal.setdefault("log", []).append(
        {"at": int(time.time()), "step": step, "state": state, "detail": detail}
    )
    save(journal)


def active_tree() -> Path | None:
    """The tree `manage.py runhost` runs when it is not the checkout itself (None: the
    checkout)."""
    try:
        text = (updates_dir() / ACTIVE_TREE_FILE).read_text().strip()
    except FileNotFoundError:
        return None
    return Path(text) if text else None


def set_active_tree(tree: Path) -> None:
    atomic_write(updates_dir() / ACTIVE_TREE_FILE, str(tree))


def clear_active_tree() -> None:
    (updates_dir() / ACTIVE_TREE_FILE).unlink(missing_ok=True)


def checkout_mark(root: Path) -> str:
    """What says the checkout changed under an applied update (a `git pull` since): the digest
    of its version file."""
    try:
        return hashlib.sha256((root / "common" / "version.py").read_bytes()).hexdigest()
    except OSError:
        return ""


def _previous_tree(journal: dict) -> Path | None:
    """The applied tree that ran before this job's switch (None: the checkout did)."""
    previous = journal.get("from_tree")
    if not previous or Path(previous).resolve() == Path(journal.get("root") or "").resolve():
        return None
    tree = Path(previous)
    return tree if (tree / "manage.py").is_file() else None


def restore_previous_tree(journal: dict) -> None:
    """The switch file back to what ran before the job: an earlier applied release keeps
    running on its migrated data, never the checkout's older code on it."""
    previous = _previous_tree(journal)
    if previous is None:
        clear_active_tree()
    else:
        set_active_tree(previous)


def rollback(journal: dict, reason: str) -> None:
    """After a switch: the tree that ran before runs again, with the database and files of
    the backup."""
    restore_previous_tree(journal)
    backup = Path(journal.get("backup") or "")
    restored = "restored" if backup.is_dir() else "no backup to restore"
    if backup.is_dir():
        update_backup.restore_state(backup, state_dir())
    journal["state"] = "rolled_back"
    journal["error"] = reason
    record(journal, "rollback", "done", f"{reason}; {journal.get('from')} runs again ({restored})")
    os.sync()


def abandon(journal: dict, reason: str) -> None:
    """After a switch, before the new tree ran (its backup could not be taken): the checkout
    runs again; the data was never touched, so nothing is restored."""
    restore_previous_tree(journal)
    journal["state"] = "failed"
    journal["error"] = reason
    record(journal, "backup", "failed", f"{reason}; {journal.get('from')} runs again")
    os.sync()
