"""An update apply up to the switch, each step recorded in the journal (common/update_journal),
the restart that follows, `update.applied`, and the recovery a start runs after a kill
(docs/updates.md, "Apply").

Here: download (bounded by the manifest's size), sha256 check, staging beside the running tree,
its environment, a check of the room the backup needs, a dry run of its migrations on a copy of
the database, the switch and the restart request. What runs after the restart (the backup,
probation, health gate, rollback) is supervisor/launcher.py's and supervisor.main's: the backup
is taken once the running version no longer writes.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.client
import logging
import os
import shutil
import sqlite3
import tarfile
import threading
import time
import urllib.request
from pathlib import Path, PurePosixPath

from common import supervisorctl, update_backup, update_journal
from common.errors import DomainError
from common.statedir import DB_FILE, state_dir
from common.version import VERSION
from console import update_run, update_venv
from console.updater import is_newer
from hooks import event_kinds, events
from streaming import services as streaming_services

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
FETCH_TIMEOUT_S = 30
STEPS = ("download", "verify", "stage", "environment", "room", "migrate")
# How long the staged tree's migrations may take on the copy of the database.
MIGRATE_TIMEOUT_S = float(os.environ.get("HOST_UPDATE_MIGRATE_TIMEOUT_S", "600"))
RUNNING_TREE = Path(__file__).resolve().parent.parent
# How long a prepared release waits for sessions that started meanwhile before its switch.
IDLE_WAIT_S = float(os.environ.get("HOST_UPDATE_IDLE_WAIT_S", str(6 * 3600)))
IDLE_POLL_S = 5.0


class ApplyError(RuntimeError):
    """A step failed; the message says which and why. The running tree is untouched."""


class ApplyRefused(DomainError):
    status = 409


# -- the journal ------------------------------------------------------------------------------
releases_dir = update_journal.releases_dir
load_journal = update_journal.load
updates_dir = update_journal.updates_dir
_save = update_journal.save
_record = update_journal.record
JOURNAL_FILE = update_journal.JOURNAL_FILE


def new_journal(manifest: dict, root: Path) -> dict:
    """`root` is the tree running now (its venv is the one the stage's is made from); the
    stage goes beside the checkout, which is `root` unless `root` is itself an applied release."""
    source = manifest["artifacts"]["source"]
    job_id = f"{int(time.time())}-{source['sha256'][:12]}"
    checkout = update_journal.checkout_root(root)
    staged = releases_dir(checkout) / manifest["version"]
    return {
        "id": job_id,
        "state": "running",
        "step": None,
        "from": VERSION,
        "to": manifest["version"],
        "root": str(checkout),
        "running": str(root),
        "staged": str(staged),
        "artifact": source,
        "backup": str(updates_dir() / f"backup-{job_id}"),
        "log": [],
    }


# -- the steps --------------------------------------------------------------------------------
def download(url: str, size: int, dest: Path) -> None:
    """The archive into `dest`, refusing more bytes than `size` and fewer (a truncated body)."""
    partial = dest.with_name(dest.name + ".partial")
    received = 0
    try:
        request = urllib.request.Request(url, headers={"User-Agent": f"streaming-host/{VERSION}"})
        with (
            urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response,
            open(partial, "wb") as fh,
        ):
            while chunk := response.read(min(CHUNK, size + 1 - received)):
                received += len(chunk)
                if received > size:
                    raise ApplyError(f"download is larger than the manifest's {size} bytes")
                fh.write(chunk)
        if received < size:
            raise ApplyError(f"download truncated: {received} of {size} bytes")
        os.replace(partial, dest)
    except http.client.HTTPException as exc:  # IncompleteRead and kin: not OSErrors
        raise ApplyError(f"download failed: {type(exc).__name__}") from None
    finally:
        partial.unlink(missing_ok=True)


def verify(archive: Path, sha256: str) -> None:
    digest = hashlib.sha256()
    with open(archive, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != sha256:
        raise ApplyError("download sha256 does not match the signed manifest")


def _member_path(name: str) -> PurePosixPath | None:
    """The member's path below the archive's top folder; None for the top folder itself.
    ApplyError for anything that could land outside the stage."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise ApplyError(f"archive member {name!r} points outside the release tree")
    return PurePosixPath(*path.parts[1:]) if len(path.parts) > 1 else None


def _clear_stage(target: Path) -> None:
    """A tree an earlier, failed or rolled back, job staged for the same version goes; the
    tree that runs never does."""
    if target.exists() and update_journal.active_tree() != target:
        shutil.rmtree(target)


def stage(archive: Path, target: Path) -> None:
    """Extract the archive (one top folder, as `git archive --prefix` makes it) into `target`
    through `<target>.partial`: `target` exists only complete. Links, devices and paths outside
    the tree are refused; a full disk leaves no partial tree behind."""
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    if target.exists():
        raise ApplyError(f"{target} already exists; remove it to stage this release again")
    try:
        partial.mkdir(parents=True)
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                relative = _member_path(member.name)
                if relative is None:
                    continue
                dest = partial / relative
                if member.isdir():
                    dest.mkdir(parents=True, exist_ok=True)
                elif member.isfile():
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    with source, open(dest, "wb") as out:
                        shutil.copyfileobj(source, out, CHUNK)
                    os.chmod(dest, 0o755 if member.mode & 0o111 else 0o644)
                else:
                    raise ApplyError(f"archive member {member.name!r} is not a file or folder")
        os.replace(partial, target)
    except (tarfile.TarError, EOFError) as exc:
        raise ApplyError(f"archive is not a readable tar.gz: {exc}") from None
    except OSError as exc:
        raise ApplyError(f"staging failed: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def environment(root: Path, staged: Path, journal: dict) -> None:
    """The new tree's own .venv (console/update_venv.py): the running one's packages, and the
    changed requirements installed through the wheel cache. The journal says how; a failure's
    reason carries the last lines of the command's output."""
    log_path = updates_dir() / f"environment-{journal['id']}.log"
    try:
        how = update_venv.build(root, staged, updates_dir() / "wheels", log_path)
    except update_venv.VenvError as exc:
        raise ApplyError(f"environment: {exc}") from None
    finally:
        log_path.unlink(missing_ok=True)
    _record(journal, "environment", "built", how)


def check_room(where: Path) -> None:
    """Free space for what the apply writes into the state dir before and at the restart (the
    launcher's backup, the migration dry run's copy): refused here, before any switch."""
    need = update_backup.room_needed(where)
    free = shutil.disk_usage(updates_dir()).free
    if free < need:
        raise ApplyError(
            f"not enough free space in {updates_dir()} for the backup: "
            f"{free // 2**20} MiB free, {need // 2**20 + 1} MiB needed"
        )


def migrate_check_dir(journal: dict) -> Path:
    return updates_dir() / f"migrate-check-{journal['id']}"


def migrate_check(staged: Path, where: Path, scratch: Path) -> None:
    """A dry run of the staged tree's migrations, with its own python, on a copy of the
    database in a state dir of its own (HOST_STATE_DIR): a release whose migration fails is
    refused before the switch, the real database untouched. The copy always goes."""
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        scratch.mkdir(mode=0o700)
        if (where / DB_FILE).exists():
            update_backup.copy_database(where / DB_FILE, scratch / DB_FILE)
        output = scratch / "migrate.log"
        # Nothing of the running host's environment (its tokens, its Redis): the settings'
        # defaults and the copy are all a migration needs.
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", str(scratch)),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOST_STATE_DIR": str(scratch),
            "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
            "PYTHONUNBUFFERED": "1",
        }
        argv = [str(staged / ".venv" / "bin" / "python"), str(staged / "manage.py"), "migrate",
                "--noinput"]  # fmt: skip
        try:
            code = update_run.run(
                argv, cwd=staged, env=env, timeout_s=MIGRATE_TIMEOUT_S, output=output
            )
        except update_run.Timeout as exc:
            raise ApplyError(f"the release's migrations {exc} on a copy of the database") from None
        if code != 0:
            raise ApplyError(
                f"the release's migrations fail on a copy of the database (exit {code}):\n"
                + update_run.tail(output)
            )
    except (OSError, sqlite3.Error) as exc:
        raise ApplyError(f"migration dry run failed: {exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# -- running the steps, and recovering after a kill -------------------------------------------
def prepare(manifest: dict, root: Path, journal: dict | None = None) -> dict:
    """Download, verify, stage, build its environment, check there is room for the backup the
    launcher takes at the restart and run the release's migrations on a copy of the database;
    the journal ends `staged` or `failed` (with the reason).
    The running tree and its data are never touched."""
    if "artifacts" not in manifest:
        raise ApplyError("the manifest names no release archive (a report-only manifest)")
    journal = journal or new_journal(manifest, root)
    source = journal["artifact"]
    archive = updates_dir() / f"{journal['id']}.tar.gz"
    staged = Path(journal["staged"])
    steps = {
        "download": lambda: download(source["url"], source["size"], archive),
        "verify": lambda: verify(archive, source["sha256"]),
        "stage": lambda: (_clear_stage(staged), stage(archive, staged)),
        "environment": lambda: environment(root, staged, journal),
        "room": lambda: check_room(state_dir()),
        "migrate": lambda: migrate_check(staged, state_dir(), migrate_check_dir(journal)),
    }
    try:
        for step in STEPS:
            _record(journal, step, "started")
            try:
                steps[step]()
            except OSError as exc:  # a network or disk fault of the step, not a crash
                raise ApplyError(f"{step} failed: {getattr(exc, 'reason', None) or exc}") from None
            _record(journal, step, "done")
    except ApplyError as exc:
        _fail(journal, str(exc))
        raise
    finally:
        archive.unlink(missing_ok=True)
    journal["state"] = "staged"
    _record(journal, STEPS[-1], "done", "staged")
    return journal


def switch(journal: dict) -> None:
    """The journal says `switched` before the switch file names the new tree: a kill between
    the two still starts the new tree on probation (supervisor/launcher.py), never without."""
    journal["state"] = "switched"
    journal["checkout_mark"] = update_journal.checkout_mark(Path(journal["root"]))
    # The tree running now: the cleanup after the gate keeps it (its launcher may stay the
    # new version's parent process).
    journal["from_tree"] = journal.get("running") or str(RUNNING_TREE)
    _record(journal, "switch", "done", f"{journal['from']} -> {journal['to']}")
    update_journal.set_active_tree(Path(journal["staged"]))


def start(force: bool, manifest: dict | None, root: Path, by: str = "api") -> dict:
    """Start an apply of `manifest` (the last accepted one) in the background; ApplyRefused
    says why not. `by`: who started it (`api`, or `auto`: console/update_auto.py), kept in the
    journal. Returns the new job's journal."""
    live = streaming_services.live_records()
    if live and not force:
        raise ApplyRefused(
            f"{len(live)} session(s) live; an update never interrupts play: apply when idle, "
            "or pass force: true"
        )
    if not manifest or not is_newer(manifest.get("version", ""), VERSION):
        raise ApplyRefused("no newer release is announced (check for updates first)")
    if "artifacts" not in manifest:
        raise ApplyRefused("the announced release names no archive (a report-only manifest)")
    if not (root / ".venv").exists() or not (root / "requirements.txt").exists():
        raise ApplyRefused(f"{root} is not a checkout with its .venv; apply needs one")
    if not os.environ.get("HOST_SUPERVISOR_PID"):
        raise ApplyRefused("not running under the supervisor (`manage.py runhost`): no restart")
    with open(updates_dir() / "apply.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = load_journal() or {}
        if current.get("state") in ("running", "staged", "switched"):
            raise ApplyRefused(f"an apply to {current.get('to')} is already in progress")
        journal = new_journal(manifest, root)
        journal["by"] = by
        journal["force"] = force
        _record(journal, "start", "done", f"{VERSION} -> {manifest['version']} (by {by})")
    threading.Thread(target=run_job, args=(manifest, root, journal), daemon=True).start()
    return journal


def run_job(manifest: dict, root: Path, journal: dict | None = None) -> None:
    """The whole apply as the API starts it: prepare, switch, then the supervisor's restart
    runs the new tree on probation (its health gate decides)."""
    try:
        journal = prepare(manifest, root, journal)
    except ApplyError:
        return  # recorded in the journal
    except Exception as exc:  # a bug must not leave a job `running`
        log.exception("update apply failed")
        journal = load_journal() or {}
        if journal.get("state") == "running":
            _fail(journal, f"internal error: {type(exc).__name__}")
        return
    if not wait_for_idle(journal):
        return  # recorded in the journal
    switch(journal)
    supervisorctl.request_restart()


def wait_for_idle(journal: dict, clock=time.monotonic, sleep=time.sleep) -> bool:
    """A session that started while the release was being prepared is not cut off by the
    restart: the switch waits for it to end (at most IDLE_WAIT_S; then the job fails, marked
    `retry`, so `update_auto` tries the release again later). A forced apply does not wait."""
    if journal.get("force"):
        return True
    deadline = clock() + IDLE_WAIT_S
    said = False
    while live := streaming_services.live_records():
        if not said:
            _record(journal, "switch", "waiting", f"{len(live)} session(s) live; waiting for idle")
            said = True
        if clock() >= deadline:
            journal["retry"] = True
            _fail(journal, f"sessions stayed live for {int(IDLE_WAIT_S)} s; nothing was switched")
            return False
        sleep(IDLE_POLL_S)
    return True


def _discard(journal: dict) -> None:
    """Remove what a job before the switch left: its stage (complete or partial) and backup."""
    staged = Path(journal["staged"])
    for path in (staged, staged.with_name(staged.name + ".partial")):
        shutil.rmtree(path, ignore_errors=True)
    backup = Path(journal["backup"])
    for path in (backup, backup.with_name(backup.name + ".partial")):
        shutil.rmtree(path, ignore_errors=True)
    (updates_dir() / f"{journal['id']}.tar.gz").unlink(missing_ok=True)
    (updates_dir() / f"{journal['id']}.tar.gz.partial").unlink(missing_ok=True)
    (updates_dir() / f"environment-{journal['id']}.log").unlink(missing_ok=True)
    shutil.rmtree(migrate_check_dir(journal), ignore_errors=True)


def _fail(journal: dict, reason: str) -> None:
    _discard(journal)
    journal["state"] = "failed"
    journal["error"] = reason
    _record(journal, journal.get("step") or "start", "failed", reason)
    log.warning("update to %s failed: %s; the running version keeps running", journal["to"], reason)


def announce_applied() -> bool:
    """`update.applied` on the first start of the version a finished apply switched to, once
    across restarts: the journal records the announcement before the event goes out (a kill
    between the two loses the event rather than repeating it)."""
    journal = load_journal()
    if not journal or journal.get("state") != "done" or journal.get("announced"):
        return False
    if journal.get("to") != VERSION:  # not (or no longer) running the version it applied
        return False
    journal["announced"] = int(time.time())
    _save(journal)
    events.emit(event_kinds.UPDATE_APPLIED, {"from": str(journal["from"]), "to": VERSION})
    return True


def recover() -> dict | None:
    """At start: a job a kill interrupted before any switch (`running`, or `staged` and not yet
    switched) is failed and its leftovers removed; the running tree was never changed. Returns
    the journal it settled, if any."""
    journal = load_journal()
    if not journal or journal.get("state") not in ("running", "staged"):
        return None
    _fail(journal, f"interrupted during {journal.get('step') or 'start'} (the host stopped)")
    return journal
