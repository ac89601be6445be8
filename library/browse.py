"""Host filesystem browsing for the admin UI's path pickers, and the launcher games scan."""

from __future__ import annotations

import os
import stat

from library.scanners import SCANNERS

TYPES = ("directory", "executable", "file", "any")
MAX_ENTRIES = 5000


class BrowseError(ValueError):
    """A path that cannot be listed; the message says why."""


def browse(path: str, kind: str = "any") -> dict:
    kind = kind or "any"
    if kind not in TYPES:
        raise BrowseError(f"type must be one of {', '.join(TYPES)}")
    if "\x00" in path:
        raise BrowseError("path must not contain NUL")
    path = path or "/"
    if not os.path.isabs(path):
        raise BrowseError("path must be absolute")
    real = os.path.realpath(path)
    if not os.path.exists(real):
        raise BrowseError("path does not exist")
    if not os.path.isdir(real):
        real = os.path.dirname(real)  # a file lists its folder, as the picker expects
    entries = []
    try:
        with os.scandir(real) as it:
            for item in it:
                try:
                    is_dir = item.is_dir()
                    if not is_dir and kind == "directory":
                        continue
                    if not is_dir and kind == "executable":
                        st = item.stat()
                        if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o111:
                            continue
                except OSError:
                    continue
                entries.append(
                    {
                        "name": _text(item.name),
                        "path": _text(os.path.join(real, item.name)),
                        "type": "directory" if is_dir else "file",
                    }
                )
                if len(entries) >= MAX_ENTRIES:
                    break
    except PermissionError:
        raise BrowseError("permission denied") from None
    except OSError as exc:
        raise BrowseError(f"cannot list the path: {exc.strerror}") from None
    entries.sort(key=lambda e: (e["type"] != "directory", e["name"].lower()))
    parent = os.path.dirname(real) if real != "/" else "/"
    return {"path": _text(real), "parent": _text(parent), "entries": entries}


def _text(name: str) -> str:
    """File names are bytes; undecodable ones are shown with U+FFFD instead of failing JSON."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def games_scan() -> list[dict]:
    """Installed games of every launcher ecosystem, read live from the store files."""
    out = []
    for store, scanner in SCANNERS.items():
        for title in scanner.scan():
            out.append({"name": title.title, "path": title.install_dir, "launcher": store})
    out.sort(key=lambda g: (g["name"].lower(), g["launcher"]))
    return out
