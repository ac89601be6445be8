"""Which tree `manage.py runhost` runs, decided before Django loads (docs/updates.md, "Apply").

Without an apply the checkout runs itself. After a switch this process backs up the database
and state files (the previous version no longer runs, so no write of it comes after the
backup; a backup that fails leaves the checkout running, the job failed), then the new tree
first runs on probation, as a child of this process: it passes its health gate
(supervisor.main writes `done` into the journal) or, when it exits before that (crash at
start, failed migration, failed gate, killed), this process puts the previous tree and the
backup back and starts the checkout again. A start that finds a probation an earlier run began
and never finished (the host was killed) rolls back the same way. After `done`, later starts
exec the new tree directly, until the checkout itself changes (a `git pull`): then the checkout
runs again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from common import procs, update_backup, update_journal
from common.statedir import state_dir

PROBATION_ENV = "HOST_UPDATE_PROBATION"
# The exit code of a supervisor on probation asked to restart: its launcher starts over.
RESTART_EXIT = 75
THIS_TREE = Path(__file__).resolve().parent.parent


def _say(text: str) -> None:
    sys.stderr.write(f"runhost: {text}\n")
    sys.stderr.flush()


def _runnable(tree: Path) -> bool:
    return (tree / "manage.py").is_file() and (tree / ".venv" / "bin" / "python").exists()


def _argv(tree: Path, argv: list[str]) -> list[str]:
    return [str(tree / ".venv" / "bin" / "python"), str(tree / "manage.py"), *argv[1:]]


def follow(argv: list[str]) -> None:
    """Return to run this tree; exec, or run on probation, the tree an apply switched to."""
    if os.environ.get(PROBATION_ENV):
        return  # this is the tree on probation (or its restart): it runs itself
    journal = update_journal.load()
    if journal and journal.get("state") == "switched":
        if journal.get("probation_started"):
            update_journal.rollback(
                journal, "the host stopped before the new version passed its health gate"
            )
            _say(f"update to {journal.get('to')} rolled back: {journal['error']}")
        else:
            _probation(journal, argv)
        journal = update_journal.load()  # after a rollback: the tree that ran before runs
    target = update_journal.active_tree()
    if target is None or target.resolve() == THIS_TREE:
        return
    checkout = update_journal.checkout_root(THIS_TREE)
    if journal and journal.get("checkout_mark") not in (
        None,
        update_journal.checkout_mark(checkout),
    ):
        update_journal.clear_active_tree()  # the operator updated the checkout by hand since
        _say(f"{checkout} changed since the update to {journal.get('to')}; running it")
        return
    if not _runnable(target):
        _say(f"{target} (the applied update) cannot run: it lacks manage.py or .venv; running "
             f"{THIS_TREE}")  # fmt: skip
        return
    os.chdir(target)  # children started as `python -m ...` import from the working directory
    os.execve(_argv(target, argv)[0], _argv(target, argv), _tree_env())


def _tree_env(**extra: str) -> dict[str, str]:
    """The environment of a tree this launcher runs: it learns where the checkout is (its
    own applies stage beside the checkout, not beside itself)."""
    checkout = os.environ.get(update_journal.CHECKOUT_ENV) or str(THIS_TREE)
    return {**os.environ, update_journal.CHECKOUT_ENV: checkout, **extra}


def _again(argv: list[str]) -> None:
    """Start over as a fresh `runhost` of this tree: a restart asked of a tree running as this
    process's child (another apply switched since, or the applied tree now runs directly)."""
    env = {k: v for k, v in os.environ.items() if k != PROBATION_ENV}
    os.chdir(THIS_TREE)
    os.execve(_argv(THIS_TREE, argv)[0], _argv(THIS_TREE, argv), env)


def _backup(journal: dict) -> bool:
    """The backup a rollback restores, taken here: the previous version's processes are gone
    (the supervisor's restart waited for them), so no write of theirs is missing from it. False
    when it could not be taken: the checkout runs again, the new tree never started."""
    update_journal.record(journal, "backup", "started")
    try:
        update_backup.backup_state(state_dir(), Path(journal["backup"]))
    except update_backup.BackupError as exc:
        update_journal.abandon(journal, f"{exc}; the new version was not started")
        _say(f"update to {journal.get('to')} not applied: {journal['error']}")
        return False
    update_journal.record(journal, "backup", "done")
    return True


def _probation(journal: dict, argv: list[str]) -> None:
    """Run the new tree as a child until it exits. Returns (to run this tree) only after a
    rollback the host was not asked to stop during; exits otherwise."""
    staged = Path(journal["staged"])
    if not _runnable(staged):
        update_journal.rollback(journal, f"{staged} cannot run (no manage.py or .venv)")
        _say(f"update rolled back: {journal['error']}")
        return
    if not _backup(journal):
        return
    journal["probation_started"] = True
    update_journal.record(journal, "restart", "started", f"{journal.get('to')} on probation")
    env = _tree_env(**{PROBATION_ENV: str(journal.get("id") or "1")})
    # The new version stops with this process, even after a kill -9 of it: the next start
    # then finds the probation unfinished and rolls back. Its own session: a terminal's Ctrl-C
    # reaches it once, forwarded from here.
    child = subprocess.Popen(
        _argv(staged, argv),
        env=env,
        cwd=staged,
        preexec_fn=procs.die_with_me(),
        start_new_session=True,
    )
    stopping = []

    def forward(signum, frame):
        if signum != signal.SIGHUP:
            stopping.append(signum)
        child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    code = child.wait()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    current = update_journal.load() or {}
    if code == RESTART_EXIT and not stopping and current.get("id") != journal.get("id"):
        _again(argv)  # a newer apply switched: it runs on probation as this tree's child
    if current.get("state") == "done":
        if code == RESTART_EXIT and not stopping:
            _again(argv)  # a restart of the applied tree: it runs directly from now on
        sys.exit(code)
    update_journal.rollback(
        current or journal,
        "the host was stopped before the new version passed its health gate"
        if stopping
        else f"the new version exited with {code} before passing its health gate",
    )
    _say(f"update to {journal.get('to')} rolled back: {(current or journal)['error']}")
    if stopping:
        sys.exit(0)
