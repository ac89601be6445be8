"""Heroic (Epic via legendary, GOG, Amazon via nile): its per-runner JSON files.

Titles and art come from `store_cache/<runner>_library.json`; what is installed comes from each
runner's `installed.json`, or the cache's own `is_installed` flag. An install counts only while
its directory exists.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from library import conf
from library.scanners.base import ScannedTitle, clean_title, read_text, stat_sig, unique_dirs

log = logging.getLogger("library.scanners.heroic")

ID = "heroic"
LABEL = "Heroic (Epic / GOG / Amazon)"
# runner -> (library cache file, list key, installed.json relative path)
RUNNERS = {
    "legendary": (
        "store_cache/legendary_library.json",
        "library",
        "legendaryConfig/legendary/installed.json",
    ),
    "gog": ("store_cache/gog_library.json", "games", "gog_store/installed.json"),
    "nile": ("store_cache/nile_library.json", "library", "nile_config/nile/installed.json"),
}
_ART = {"art_square": "portrait", "art_cover": "header", "art_logo": "logo"}


def roots() -> list[Path]:
    return unique_dirs(conf.heroic_roots())


def _load(path: Path):
    if not path.is_file():
        return None
    text = read_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        log.warning("skipping %s: %s", path, exc)
        return None


def _installed(root: Path, runner: str) -> dict[str, dict]:
    """app_name -> {install_path, title?} from the runner's installed.json."""
    data = _load(root / RUNNERS[runner][2])
    items: list = []
    if isinstance(data, dict) and runner == "legendary":
        items = [dict(v, app_name=k) for k, v in data.items() if isinstance(v, dict)]
    elif isinstance(data, dict) and isinstance(data.get("installed"), list):
        items = data["installed"]
    elif isinstance(data, list):
        items = data
    out = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        name = item.get("app_name") or item.get("appName") or item.get("id")
        path = item.get("install_path") or item.get("path")
        if isinstance(name, str) and name and isinstance(path, str):
            out[name] = {"install_path": path, "title": item.get("title")}
    return out


def _art(entry: dict) -> dict:
    art = {}
    for key, kind in _ART.items():
        value = entry.get(key)
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            art[kind] = value
    hero = entry.get("art_background") or entry.get("art_cover")
    if isinstance(hero, str) and hero.startswith(("http://", "https://")):
        art["hero"] = hero
    return art


def _safe_name(name: object) -> bool:
    return isinstance(name, str) and 0 < len(name) <= 200 and all(c >= " " for c in name)


def scan() -> list[ScannedTitle]:
    titles: dict[str, ScannedTitle] = {}
    for root in roots():
        for runner, (cache_file, list_key, _installed_file) in RUNNERS.items():
            installed = _installed(root, runner)
            cache = _load(root / cache_file)
            entries = cache.get(list_key) if isinstance(cache, dict) else None
            by_name: dict[str, dict] = {}
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and _safe_name(entry.get("app_name")):
                    by_name[entry["app_name"]] = entry
            names = set(installed)
            for name, entry in by_name.items():
                if entry.get("is_installed") is True:
                    names.add(name)
            for name in sorted(n for n in names if _safe_name(n)):
                entry = by_name.get(name, {})
                info = installed.get(name, {})
                install = info.get("install_path")
                if not install and isinstance(entry.get("install"), dict):
                    install = entry["install"].get("install_path")
                if not isinstance(install, str) or not install or not os.path.isdir(install):
                    continue
                title = clean_title(entry.get("title")) or clean_title(info.get("title"))
                if not title:
                    continue
                tid = f"heroic:{runner}:{name}"
                titles.setdefault(
                    tid,
                    ScannedTitle(
                        id=tid,
                        store=ID,
                        title=title,
                        install_dir=install,
                        art=_art(entry),
                        launch={"kind": "heroic", "value": f"{runner}:{name}"},
                        detect={"install_dir": install},
                    ),
                )
    return list(titles.values())


def signature() -> list:
    paths: list[Path] = []
    for root in roots():
        for cache_file, _key, installed_file in RUNNERS.values():
            paths += [root / cache_file, root / installed_file]
    return stat_sig(paths)
