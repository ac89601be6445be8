"""Cover images of catalog apps: uploads saved as PNG under `covers/` in the state dir.

A key becomes exactly one file name (percent-escaped, `.png` added) inside the covers dir, and
the bytes stored are OpenCV's re-encoding of what decoded as an image, never the upload itself.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from urllib.parse import quote, urlsplit

from common.files import atomic_write
from library import catalog, conf, fetch, imaging

MAX_KEY = 200


class CoverError(ValueError):
    """A bad upload; the message is safe to show the caller."""


def check_key(key: object) -> str:
    if not isinstance(key, str) or not key.strip():
        raise CoverError("key is required")
    if len(key) > MAX_KEY:
        raise CoverError(f"key longer than {MAX_KEY} characters")
    if "\x00" in key or key.startswith(("/", "\\")) or ".." in key.replace("\\", "/").split("/"):
        raise CoverError("key must not contain NUL, '..' segments or start with '/'")
    return key


def cover_path(key: str) -> Path:
    folder = conf.covers_dir()
    path = folder / (quote(key, safe="-_.() ") + ".png")
    if path.parent != folder or path.name.startswith("."):
        raise CoverError("key does not name a file in the covers directory")
    return path


def _download(url: object) -> bytes:
    if not isinstance(url, str) or not url:
        raise CoverError("url must be a string")
    allowed, given = urlsplit(conf.cover_url_prefix()), urlsplit(url)
    if (given.scheme, given.netloc.lower()) != (allowed.scheme, allowed.netloc.lower()):
        raise CoverError(f"url must be on {allowed.scheme}://{allowed.netloc}")
    try:
        return fetch.get(url, conf.art_fetch_timeout_s(), conf.MAX_DOWNLOAD)
    except fetch.FetchError as exc:
        raise CoverError(f"could not download the image: {exc}") from None


def _decode(data: object) -> bytes:
    if not isinstance(data, str) or not data:
        raise CoverError("send `url` or base64 `data`")
    if data.startswith("data:") and "," in data:
        data = data.split(",", 1)[1]
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise CoverError("data is not valid base64") from None


def upload(key: object, url: object = None, data: object = None) -> Path:
    key = check_key(key)
    path = cover_path(key)
    raw = _download(url) if url else _decode(data)
    try:
        png = imaging.to_png(raw)
    except imaging.NotAnImage:
        raise CoverError("the upload is not an image") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, png, mode=0o644)
    return path


def cover_for_index(index: int) -> bytes | None:
    apps = catalog.build_apps(catalog.load_document())
    if not 0 <= index < len(apps):
        return None
    return catalog.cover_png(apps[index])
