"""Installed-store scanners. Each module has `ID`, `LABEL`, `scan()` and `signature()`.

`signature()` is a list of (path, mtime, size) of the files the store writes; the worker's
poller compares it between rounds to rescan only a store whose files changed.
"""

from __future__ import annotations

from library.scanners import heroic, lutris, steam

SCANNERS = {m.ID: m for m in (steam, heroic, lutris)}
