"""Cover art of library entries: Steam's own cache, then ours, then Steam's public CDN.

Only Steam ids are backed (`steam:<digits>`); every other store, an unknown kind or anything
that is not a plain appid is a 404. The id is reduced to digits and the kind to one of four
names before any path is built, so no request can name a file outside the stores or our cache.
A CDN download runs as a Celery task (timeout, no redirects, size cap); the view waits for its
result file, and a miss is remembered for `HOST_ART_MISS_TTL_S`. This module does not know
Celery: `library.tasks` wraps `fetch_from_cdn` in a task and the app registers that task's
`delay` here when it loads (`set_fetch_queue`), so the task module sits above this one.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from common.files import atomic_write
from library import conf, fetch, imaging
from library.scanners import steam
from library.scanners.base import ART_KINDS

log = logging.getLogger("library.art")

# Queues a background CDN fetch of (appid, kind); None (a process where the app did not load)
# or a queue that raises (no broker) means the fetch runs inline.
_fetch_queue: Callable[[int, str], object] | None = None


def set_fetch_queue(queue: Callable[[int, str], object] | None) -> None:
    """Register how a CDN fetch is queued (the library app passes its Celery task's `delay`)."""
    global _fetch_queue
    _fetch_queue = queue


STEAM_ID = re.compile(r"^steam:([0-9]{1,10})$")
# kind -> file names in Steam's librarycache, in preference order
LOCAL_FILES = {
    "portrait": ("library_600x900_2x.jpg", "library_600x900.jpg"),
    "hero": ("library_hero.jpg",),
    "logo": ("logo.png",),
    "header": ("library_header.jpg", "header.jpg"),
}
# kind -> suffix of the user's custom grid art (`userdata/*/config/grid/<appid><suffix>.png|jpg`)
GRID_SUFFIX = {"portrait": "p", "hero": "_hero", "logo": "_logo", "header": ""}
CDN_FILES = {
    "portrait": "library_600x900.jpg",
    "hero": "library_hero.jpg",
    "logo": "logo.png",
    "header": "header.jpg",
}


class NoArt(LookupError):
    """No art of that kind for that id."""


def parse(entry_id: str, kind: str) -> int:
    """The Steam appid an art request names; NoArt for anything else."""
    m = STEAM_ID.match(entry_id)
    if kind not in ART_KINDS or m is None:
        raise NoArt(entry_id)
    appid = int(m.group(1))
    if appid > 0xFFFFFFFF:
        raise NoArt(entry_id)
    return appid


def _read(path: Path, limit: int = conf.MAX_LOCAL_ART) -> bytes | None:
    try:
        if not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _local_candidates(appid: int, kind: str) -> list[Path]:
    out: list[Path] = []
    for root in steam.roots():
        cache = root / "appcache" / "librarycache"
        for name in LOCAL_FILES[kind]:
            out.append(cache / f"{appid}_{name}")  # older flat layout
            out.append(cache / str(appid) / name)
            sub = cache / str(appid)
            if sub.is_dir():
                out.extend(sorted(p / name for p in sub.iterdir() if p.is_dir()))
        for grid in sorted(root.glob("userdata/*/config/grid")):
            for ext in (".png", ".jpg", ".jpeg"):
                out.append(grid / f"{appid}{GRID_SUFFIX[kind]}{ext}")
    return out


def cache_path(appid: int, kind: str) -> Path:
    return conf.art_dir() / "steam" / str(appid) / f"{kind}.jpg"


def _miss_path(appid: int, kind: str) -> Path:
    return conf.art_dir() / "steam" / str(appid) / f"{kind}.miss"


def _fresh(path: Path, ttl: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime < ttl
    except OSError:
        return False


def local_jpeg(appid: int, kind: str) -> bytes | None:
    """Art already on this machine (Steam's cache, then ours) as JPEG bytes."""
    for path in [*_local_candidates(appid, kind), cache_path(appid, kind)]:
        data = _read(path)
        if data is None:
            continue
        try:
            return imaging.to_jpeg(data)
        except imaging.NotAnImage:
            log.warning("ignoring %s: not an image", path)
    return None


def get_jpeg(entry_id: str, kind: str, wait: bool = True) -> bytes:
    """JPEG bytes of one kind of art for a library id; NoArt on a miss."""
    appid = parse(entry_id, kind)
    data = local_jpeg(appid, kind)
    if data is not None:
        return data
    if appid & 0x80000000:  # non-Steam shortcut: no CDN art exists
        raise NoArt(entry_id)
    miss = _miss_path(appid, kind)
    if _fresh(miss, conf.art_miss_ttl_s()):
        raise NoArt(entry_id)
    _enqueue(appid, kind)
    if not wait:
        raise NoArt(entry_id)
    deadline = time.monotonic() + conf.art_fetch_timeout_s() + 2
    target = cache_path(appid, kind)
    while time.monotonic() < deadline:
        data = _read(target)
        if data is not None:
            return data
        if _fresh(miss, conf.art_miss_ttl_s()):
            break
        time.sleep(0.05)
    raise NoArt(entry_id)


def _enqueue(appid: int, kind: str) -> None:
    pending = conf.art_dir() / "steam" / str(appid) / f"{kind}.pending"
    pending.parent.mkdir(parents=True, exist_ok=True)
    if _fresh(pending, conf.art_fetch_timeout_s() + 5):
        return  # a fetch of the same file is already under way
    pending.touch()
    if _fetch_queue is not None:
        try:
            _fetch_queue(appid, kind)
            return
        except Exception:  # no broker (a bare manage.py process): fetch here
            log.warning("art fetch could not be queued; fetching in this process")
    fetch_from_cdn(appid, kind)


def fetch_from_cdn(appid: int, kind: str) -> bool:
    """Download one file from the CDN into our cache (or record a miss). True on success."""
    if kind not in CDN_FILES or not 0 < appid < 0x80000000:
        return False
    folder = cache_path(appid, kind).parent
    folder.mkdir(parents=True, exist_ok=True)
    url = f"{conf.art_cdn_url()}/steam/apps/{appid}/{CDN_FILES[kind]}"
    try:
        data = imaging.to_jpeg(fetch.get(url, conf.art_fetch_timeout_s(), conf.MAX_DOWNLOAD))
    except (fetch.FetchError, imaging.NotAnImage) as exc:
        log.info("no %s art for steam:%d from the CDN: %s", kind, appid, exc)
        atomic_write(_miss_path(appid, kind), b"", mode=0o644)
        ok = False
    else:
        atomic_write(cache_path(appid, kind), data, mode=0o644)
        try:
            os.unlink(_miss_path(appid, kind))
        except FileNotFoundError:
            pass
        ok = True
    try:
        os.unlink(folder / f"{kind}.pending")
    except FileNotFoundError:
        pass
    return ok
