"""The steps of an update apply that come before the switch, each recorded in a journal, and the
recovery a start runs after a kill (docs/updates.md, "Apply").

Built: download (bounded by the manifest's size), sha256 check, staging of the archive beside
the running tree, backup and restore of the database (sqlite3 backup API) and the state files.
Not built: the staged tree's environment, its migrations, the switch, the restart and the health
gate; so nothing here ever changes which tree runs, and `recover()` only has the steps before a
switch to undo.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import logging
import os
import shutil
import sqlite3
import tarfile
import time
import urllib.request
from pathlib import Path, PurePosixPath

from common.errors import DomainError
from common.files import atomic_write
from common.statedir import DB_FILE, state_dir
from common.version import VERSION
from hooks import event_kinds, events
from streaming import services as streaming_services

log = logging.getLogger(__name__)

JOURNAL_FILE = "journal.json"
CHUNK = 64 * 1024
FETCH_TIMEOUT_S = 30
# A state file larger than this is not copied into a backup (logs, caches: not state).
MAX_STATE_FILE_BYTES = 16 * 1024 * 1024
STEPS = ("download", "verify", "stage", "backup")


NOT_BUILT_REASON = (
    "this host cannot apply updates yet: it downloads, verifies, stages and backs up a release, "
    "but switching to the staged tree, building its environment, the restart through the "
    "supervisor and the health gate with automatic rollback are not built "
    "(docs/updates.md); apply it with `git pull && make run`"
)


class ApplyError(RuntimeError):
    """A step failed; the message says which and why. The running tree is untouched."""


class ApplyRefused(DomainError):
    status = 409


def refusal(force: bool) -> ApplyRefused:
    """Why `POST /api/v1/update/apply` does not apply: a live session (unless forced) first,
    so the operator sees that reason whatever else holds; then what is not built."""
    live = streaming_services.live_records()
    if live and not force:
        return ApplyRefused(
            f"{len(live)} session(s) live; an update never interrupts play: apply when idle, "
            "or pass force: true"
        )
    return ApplyRefused(NOT_BUILT_REASON)


def updates_dir() -> Path:
    path = state_dir() / "updates"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def releases_dir(root: Path) -> Path:
    """Where staged trees live: beside the running checkout, never inside it."""
    return root.parent / f"{root.name}.releases"


# -- the journal ------------------------------------------------------------------------------
def load_journal() -> dict | None:
    try:
        data = json.loads((updates_dir() / JOURNAL_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _save(journal: dict) -> None:
    atomic_write(updates_dir() / JOURNAL_FILE, json.dumps(journal))


def _record(journal: dict, step: str, state: str, detail: str = "") -> None:
    """Write the step's state before moving on: after a kill the journal says where it was."""
    journal["step"] = step
    journal["log"].append({"at": int(time.time()), "step": step, "state": state, "detail": detail})
    _save(journal)


def new_journal(manifest: dict, root: Path) -> dict:
    source = manifest["artifacts"]["source"]
    job_id = f"{int(time.time())}-{source['sha256'][:12]}"
    staged = releases_dir(root) / manifest["version"]
    return {
        "id": job_id,
        "state": "running",
        "step": None,
        "from": VERSION,
        "to": manifest["version"],
        "root": str(root),
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


def backup_database(db: Path, dest: Path) -> None:
    """A consistent copy of the live database (sqlite3 backup API: other writers may run)."""
    source = sqlite3.connect(db)
    try:
        with contextlib.closing(sqlite3.connect(dest)) as target:
            source.backup(target)
    finally:
        source.close()


def restore_database(backup: Path, db: Path) -> None:
    """The backup's content into the database file, page by page (the host is stopped)."""
    with (
        contextlib.closing(sqlite3.connect(backup)) as source,
        contextlib.closing(sqlite3.connect(db)) as target,
    ):
        source.backup(target)


def _state_files(where: Path) -> list[Path]:
    skip = {DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm", f"{DB_FILE}-journal"}
    return sorted(
        p
        for p in where.iterdir()
        if p.name not in skip
        and p.is_file()
        and not p.is_symlink()
        and p.stat().st_size <= MAX_STATE_FILE_BYTES
    )


def backup_state(where: Path, dest: Path) -> None:
    """The database and the state dir's top-level files into `dest` (complete or absent)."""
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        (partial / "files").mkdir(parents=True, mode=0o700)
        if (where / DB_FILE).exists():
            backup_database(where / DB_FILE, partial / DB_FILE)
        for path in _state_files(where):
            shutil.copy2(path, partial / "files" / path.name)
        os.replace(partial, dest)
    except (OSError, sqlite3.Error) as exc:
        raise ApplyError(f"backup failed: {exc}") from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def restore_state(backup: Path, where: Path) -> None:
    """Put back what `backup_state` saved: the database and every saved file."""
    if (backup / DB_FILE).exists():
        restore_database(backup / DB_FILE, where / DB_FILE)
    for path in sorted((backup / "files").iterdir()):
        atomic_write(where / path.name, path.read_bytes(), mode=path.stat().st_mode & 0o777)


# -- running the steps, and recovering after a kill -------------------------------------------
def prepare(manifest: dict, root: Path) -> dict:
    """Download, verify, stage and back up; the journal ends `staged` or `failed` (with the
    reason). The running tree is never touched."""
    if "artifacts" not in manifest:
        raise ApplyError("the manifest names no release archive (a report-only manifest)")
    journal = new_journal(manifest, root)
    source = journal["artifact"]
    archive = updates_dir() / f"{journal['id']}.tar.gz"
    staged = Path(journal["staged"])
    steps = {
        "download": lambda: download(source["url"], source["size"], archive),
        "verify": lambda: verify(archive, source["sha256"]),
        "stage": lambda: stage(archive, staged),
        "backup": lambda: backup_state(state_dir(), Path(journal["backup"])),
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
    _record(journal, "backup", "done", "staged; switching is not built, so it stops here")
    return journal


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
    """At start: a job a kill interrupted before any switch is failed and its leftovers
    removed; the running tree was never changed. Returns the journal it settled, if any."""
    journal = load_journal()
    if not journal or journal.get("state") != "running":
        return None
    _fail(journal, f"interrupted during {journal.get('step') or 'start'} (the host stopped)")
    return journal
