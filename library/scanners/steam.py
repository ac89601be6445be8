"""Steam: `libraryfolders.vdf` names the library folders, `appmanifest_*.acf` the titles.

Non-Steam shortcuts come from the binary `userdata/*/config/shortcuts.vdf`.
"""

from __future__ import annotations

import logging
import re
import zlib
from pathlib import Path

import vdf

from library import conf
from library.scanners.base import (
    ART_KINDS,
    ScannedTitle,
    clean_title,
    read_text,
    stat_sig,
    unique_dirs,
)

log = logging.getLogger("library.scanners.steam")

ID = "steam"
LABEL = "Steam"
# Compatibility tools and runtimes install like games but are not something to play.
_TOOL_NAMES = re.compile(
    r"^(Proton\b|Steam Linux Runtime|Steamworks Common Redistributables|SteamVR\b)", re.I
)
_TOOL_IDS = {"228980", "1070560", "1391110", "1628350", "250820", "1493710", "2180100"}


def art_urls(appid: str) -> dict:
    return {kind: f"/api/v1/library/art/steam:{appid}/{kind}" for kind in ART_KINDS}


def roots() -> list[Path]:
    return [r for r in unique_dirs(conf.steam_roots()) if (r / "steamapps").is_dir()]


def _lower_keys(node):
    if isinstance(node, dict):
        return {str(k).lower(): _lower_keys(v) for k, v in node.items()}
    return node


def library_dirs(root_list: list[Path] | None = None) -> list[Path]:
    """Every library folder: each root plus the `path` values of its libraryfolders.vdf."""
    found: list[Path] = []
    for root in root_list if root_list is not None else roots():
        found.append(root)
        text = read_text(root / "steamapps" / "libraryfolders.vdf")
        if text is None:
            continue
        try:
            data = _lower_keys(vdf.loads(text))
        except (SyntaxError, ValueError, TypeError) as exc:
            log.warning("skipping %s/steamapps/libraryfolders.vdf: %s", root, exc)
            continue
        folders = data.get("libraryfolders", {})
        if not isinstance(folders, dict):
            continue
        for value in folders.values():
            path = value.get("path") if isinstance(value, dict) else value
            if isinstance(path, str) and path.strip():
                found.append(Path(path))
    return [d for d in unique_dirs(found) if (d / "steamapps").is_dir()]


def _manifest(path: Path, library: Path) -> ScannedTitle | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        state = _lower_keys(vdf.loads(text)).get("appstate")
    except (SyntaxError, ValueError, TypeError) as exc:
        log.warning("skipping %s: %s", path, exc)
        return None
    if not isinstance(state, dict):
        log.warning("skipping %s: no AppState block", path)
        return None
    appid = str(state.get("appid", "")).strip()
    title = clean_title(state.get("name"))
    if not appid.isdigit() or not title or len(appid) > 10:
        log.warning("skipping %s: missing appid or name", path)
        return None
    if appid in _TOOL_IDS or _TOOL_NAMES.match(title):
        return None
    installdir = state.get("installdir")
    install = ""
    if isinstance(installdir, str) and installdir and "/" not in installdir and installdir != "..":
        install = str(library / "steamapps" / "common" / installdir)
    detect = {"install_dir": install} if install else {}
    return ScannedTitle(
        id=f"steam:{appid}",
        store=ID,
        title=title,
        install_dir=install,
        art=art_urls(appid),
        launch={"kind": "steam_appid", "value": appid},
        detect=detect,
    )


def _shortcuts(root: Path) -> list[ScannedTitle]:
    out = []
    for path in sorted((root / "userdata").glob("*/config/shortcuts.vdf")):
        try:
            raw = path.read_bytes()
            data = _lower_keys(vdf.binary_loads(raw))
        except (OSError, SyntaxError, ValueError, TypeError, KeyError, IndexError) as exc:
            log.warning("skipping %s: %s", path, exc)
            continue
        items = data.get("shortcuts", {})
        for item in items.values() if isinstance(items, dict) else []:
            if not isinstance(item, dict) or item.get("ishidden") in (1, "1"):
                continue
            title = clean_title(item.get("appname"))
            exe = item.get("exe") if isinstance(item.get("exe"), str) else ""
            if not title:
                continue
            appid = item.get("appid")
            if isinstance(appid, int) and appid != 0:
                appid &= 0xFFFFFFFF
            else:
                appid = (zlib.crc32((exe + title).encode()) | 0x80000000) & 0xFFFFFFFF
            gameid = (appid << 32) | 0x02000000
            out.append(
                ScannedTitle(
                    id=f"steam:{appid}",
                    store=ID,
                    title=title,
                    install_dir=str(item.get("startdir") or "").strip('"'),
                    art=art_urls(str(appid)),
                    launch={"kind": "steam_appid", "value": str(gameid)},
                )
            )
    return out


def scan() -> list[ScannedTitle]:
    titles: dict[str, ScannedTitle] = {}
    root_list = roots()
    for library in library_dirs(root_list):
        for path in sorted((library / "steamapps").glob("appmanifest_*.acf")):
            entry = _manifest(path, library)
            if entry and entry.id not in titles:
                titles[entry.id] = entry
    for root in root_list:
        for entry in _shortcuts(root):
            titles.setdefault(entry.id, entry)
    return list(titles.values())


def signature() -> list:
    root_list = roots()
    paths: list[Path] = []
    for root in root_list:
        paths.append(root / "steamapps" / "libraryfolders.vdf")
        paths.extend(root.glob("userdata/*/config/shortcuts.vdf"))
    for library in library_dirs(root_list):
        paths.append(library / "steamapps")
        paths.extend((library / "steamapps").glob("appmanifest_*.acf"))
    return stat_sig(paths)
