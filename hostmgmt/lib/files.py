"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(
    path: str | os.PathLike, data: bytes | str, mode: int = 0o600, durable: bool = True
) -> None:
    """Write `data` to `path` via temp file + fsync + rename, then fsync the directory.

    On any failure the previous file is left untouched and the temp file is removed.
    `durable=False` skips both fsyncs: for snapshots rewritten every few seconds, where a
    reader must never see half a file but losing the last one in a power cut does not matter.
    """
    target = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if not durable:
        return
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
