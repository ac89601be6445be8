"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from common.errors import STORAGE_RETRY_AFTER_S, InsufficientStorage, Unavailable

# The errors a full or read-only state directory gives (docs/host-state.md, "Disk").
DISK_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


class StateWriteError(OSError):
    """A write into the state directory failed; the previous file is intact. The message
    names the file and the reason, never the data (it may hold secrets)."""

    def __init__(self, path: Path, exc: OSError):
        reason = DISK_ERRNOS.get(exc.errno) or exc.strerror or type(exc).__name__
        super().__init__(exc.errno, f"cannot write {path.name}: {reason}")
        self.path = path

    def __str__(self) -> str:
        return self.strerror


def disk_full(exc: BaseException) -> bool:
    """A full disk or quota (507 Insufficient Storage) rather than a read-only one (503)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


_SQLITE_FULL = ("database or disk is full", "disk quota")
_SQLITE_READ_ONLY = ("readonly database", "read-only", "unable to open database")


def storage_refusal(exc: BaseException):
    """The API answer for a write the state directory refused (a file via atomic_write, or
    the SQLite database): 507 when it is full, 503 (`Retry-After`) when it is read-only or
    not writable; None for any other error. docs/host-state.md, "Disk"."""
    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
        if isinstance(exc, StateWriteError):
            reason = str(exc)
        elif exc.filename:
            reason = f"cannot write {Path(exc.filename).name}: {DISK_ERRNOS[exc.errno]}"
        else:
            reason = DISK_ERRNOS[exc.errno]
        full = disk_full(exc)
    elif type(exc).__name__ == "OperationalError":  # django.db / sqlite3, not imported here
        text = str(exc).lower()
        full = any(m in text for m in _SQLITE_FULL)
        if not full and not any(m in text for m in _SQLITE_READ_ONLY):
            return None
        reason = "cannot write the database: " + (
            "no space left on the device" if full else "the file system is read-only"
        )
    else:
        return None
    if full:
        return InsufficientStorage(
            f"the host's state directory is full ({reason}); nothing changed"
        )
    return Unavailable(
        f"the host's state directory is not writable ({reason}); nothing changed",
        retry_after=STORAGE_RETRY_AFTER_S,
    )


def _temp_prefix(target: Path, pid: int) -> str:
    return f".{target.name}.{pid}."


def _sweep_orphans(target: Path) -> None:
    """Remove the temp files of writers of `target` that died mid-write (kill -9, power cut):
    the writer's pid is in the name, so a live writer's file is never touched."""
    head = f".{target.name}."
    try:
        names = [n for n in os.listdir(target.parent) if n.startswith(head) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid = name[len(head) :].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # that writer is alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            os.unlink(target.parent / name)
        except OSError:
            pass


def atomic_write(
    path: str | os.PathLike, data: bytes | str, mode: int = 0o600, durable: bool = True
) -> None:
    """Write `data` to `path` via temp file + fsync + rename, then fsync the directory.

    On any failure the previous file is left untouched and the temp file is removed; a full
    or read-only directory raises StateWriteError (an OSError naming the file and reason);
    other OSErrors (a missing directory) propagate as they are.
    `durable=False` skips both fsyncs: for snapshots rewritten every few seconds, where a
    reader must never see half a file but losing the last one in a power cut does not matter.
    """
    target = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    _sweep_orphans(target)
    try:
        fd, tmp = tempfile.mkstemp(
            dir=target.parent, prefix=_temp_prefix(target, os.getpid()), suffix=".tmp"
        )
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:
            raise StateWriteError(target, exc) from exc
        raise
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
            raise StateWriteError(target, exc) from exc
        raise
    if not durable:
        return
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
