"""What every store scanner returns, and the helpers they share.

Scanners read local files only. A missing store is an empty result; a file that cannot be read
or parsed is skipped with a log line, so one bad manifest never empties the listing.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from library.conf import MAX_TITLE

log = logging.getLogger("library.scanners")

ART_KINDS = ("portrait", "hero", "logo", "header")
MAX_STORE_FILE = 64 * 1024 * 1024


@dataclass
class ScannedTitle:
    """One installed title as a scanner found it."""

    id: str  # store-qualified, e.g. `steam:570`
    store: str
    title: str
    install_dir: str = ""
    art: dict = field(default_factory=dict)
    launch: dict | None = None
    detect: dict = field(default_factory=dict)
    platform: str = "PC"

    def entry(self) -> dict:
        """The shared-listing form (GameEntry): never detect hints."""
        out = {"id": self.id, "store": self.store, "title": self.title, "art": dict(self.art)}
        if self.launch:
            out["launch"] = dict(self.launch)
        out["platform"] = self.platform
        return out


def clean_title(raw: object) -> str:
    """Titles come from hand-editable files: strings only, no control chars, bounded length."""
    if not isinstance(raw, str):
        return ""
    text = "".join(ch for ch in raw if ch >= " " and ch != "\x7f").strip()
    return text[:MAX_TITLE]


def read_text(path: Path) -> str | None:
    """A store file as text; non-UTF-8 bytes become U+FFFD rather than failing the file."""
    try:
        if path.stat().st_size > MAX_STORE_FILE:
            log.warning("skipping %s: larger than %d bytes", path, MAX_STORE_FILE)
            return None
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        log.warning("skipping %s: %s", path, exc)
        return None


def stat_sig(paths: list[Path]) -> list[tuple[str, int, int]]:
    """(path, mtime_ns, size) of each existing path: the cheap change detector of the poller."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        out.append((str(p), st.st_mtime_ns, st.st_size))
    return out


def unique_dirs(paths: list[Path]) -> list[Path]:
    seen: set[str] = set()
    out: list[Path] = []
    for p in paths:
        try:
            real = os.path.realpath(p)
        except (OSError, ValueError):
            continue
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        out.append(Path(real))
    return out
