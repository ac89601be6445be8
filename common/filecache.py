"""Parse a small file once per version of it: read routes must not re-read and re-parse the
same bytes on every request.

A version is (inode, mtime_ns, size): our writers replace files by rename (`atomic_write`),
a hand edit in place changes the mtime or the size. A file younger than SETTLE_NS is parsed
on every read, so two writes inside one tick of the file clock are never taken for one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_entries: dict[tuple[str, Any], tuple[tuple, Any]] = {}
_MISSING = ("missing",)
SETTLE_NS = 100_000_000


def parsed(path: Path, parse: Callable[[bytes], Any], missing: Any = None) -> Any:
    """`parse(bytes)` of the file at `path`, or `missing` when it cannot be read. Callers must
    not mutate what they get (it is shared until the file changes). `parse` may raise
    ValueError: that version of the file reads as `missing` until it changes."""
    key = (str(path), parse)
    try:
        st = path.stat()
        version: tuple = (st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError:
        return missing
    # File times tick coarsely (a few ms) and a freed inode number is soon reused, so two
    # writes within one tick can look alike. As git does for "racily clean" files, a file
    # changed in the last SETTLE_NS is read every time and kept only once it has settled.
    settled = time.time_ns() - st.st_mtime_ns > SETTLE_NS
    cached = _entries.get(key)
    if settled and cached is not None and cached[0] == version:
        return missing if cached[1] is _MISSING else cached[1]
    try:
        value = parse(path.read_bytes())
    except (OSError, ValueError):
        value = _MISSING
    if not settled:
        return missing if value is _MISSING else value
    with _lock:
        if len(_entries) > 256:
            _entries.clear()
        _entries[key] = (version, value)
    return missing if value is _MISSING else value
