"""Catalogs: fetched from each source over HTTPS, verified against the source's key, checked
entry by entry, cached per source under `<state>/plugins/store/cache/` and merged.

The document (docs/plugin-store.md, "Catalog format"): `catalog.json` is
`{"format": 1, "serial": n, "expires": "<ISO 8601>", "plugins": [entry, ...]}`; a signed source
also serves `catalog.json.sig` at the same URL plus `.sig` (base64 of the Ed25519 signature over
the exact bytes of catalog.json), and its catalog must carry `serial` and `expires`.

Replays: a correctly signed catalog can be served again by anyone who kept a copy, to un-block an
entry or offer an older version. So each signed source keeps a floor with its cache record: the
serial and sha256 of the last catalog it accepted. A catalog with a lower serial, or the same
serial with other bytes, or past its `expires`, is refused; the floor is forgotten with the
record when the source's URL or key changes (what the old pair vouched for means nothing for the
new one). Entries are offered only until their catalog's `expires`.

What a failure leaves:
- unreachable, an HTTP error or a body over the cap, a replayed or an expired catalog: the last
  verified copy stays offered (until it expires itself), marked `stale`, with the `error`;
- a signature that does not verify, or a document out of shape: nothing of that source is
  offered (the server is serving something its key does not vouch for) until a good fetch;
- single entries out of shape are left out and counted in `error`; the rest is offered.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from urllib.parse import urljoin

from common.files import atomic_write
from hooks import ssrf
from plugins import env
from plugins.store import conf, netfetch, signing
from plugins.store.sources import Source

VERSION = re.compile(r"[0-9A-Za-z.+!-]{1,32}")
SHA256 = re.compile(r"[0-9a-f]{64}")
ICON = re.compile(r"[a-z0-9-]{1,48}")
PLATFORM = "linux"
_TEXT = {"title": 64, "description": 500, "author": 64, "homepage": 500, "license": 64,
         "min_host": 32, "reviewed_at": 32, "blocked": 200}  # fmt: skip


class BadCatalog(ValueError):
    pass


class Refused(Exception):
    """A correctly signed catalog that is not newer than the floor, or expired."""


def _clean_text(value, limit: int) -> str | None:
    if not isinstance(value, str):
        return None
    text = "".join(c for c in value if c.isprintable()).strip()
    return text if len(text) <= limit else None


def parse_entry(raw, catalog_url: str, allow_loopback: bool) -> dict:
    """One catalog entry, checked; raises BadCatalog naming the first problem."""
    if not isinstance(raw, dict):
        raise BadCatalog("an entry is not an object")
    pid, pkg = raw.get("id"), raw.get("pkg")
    if not isinstance(pid, str) or not env.PLUGIN_ID.fullmatch(pid):
        raise BadCatalog("id out of shape")
    if not isinstance(pkg, str) or not env.DIST_NAME.fullmatch(pkg):
        raise BadCatalog(f"{pid}: pkg must be {env.DIST_PREFIX}<name> in lowercase")
    version = raw.get("version")
    if not isinstance(version, str) or not VERSION.fullmatch(version):
        raise BadCatalog(f"{pid}: version out of shape")
    wheel = raw.get("wheel")
    if not isinstance(wheel, dict):
        raise BadCatalog(f"{pid}: wheel must be an object")
    sha = wheel.get("sha256")
    if not isinstance(sha, str) or not SHA256.fullmatch(sha):
        raise BadCatalog(f"{pid}: wheel.sha256 must be 64 lowercase hex digits")
    url = wheel.get("url")
    if not isinstance(url, str) or not url or len(url) > conf.MAX_URL:
        raise BadCatalog(f"{pid}: wheel.url missing or too long")
    url = urljoin(catalog_url, url)
    try:
        netfetch.check_url(url, allow_loopback=allow_loopback)
    except ssrf.UrlRefused as exc:
        raise BadCatalog(f"{pid}: wheel.url {exc}") from None
    out = {"id": pid, "pkg": pkg, "version": version, "wheel_url": url, "sha256": sha}
    for key, limit in _TEXT.items():
        value = _clean_text(raw.get(key, ""), limit)
        if value is None:
            raise BadCatalog(f"{pid}: {key} must be text of at most {limit} characters")
        out[key] = value
    if not out["title"]:
        raise BadCatalog(f"{pid}: title is required")
    icon = raw.get("icon", "")
    out["icon"] = icon if isinstance(icon, str) and ICON.fullmatch(icon) else ""
    platforms = raw.get("platforms", [PLATFORM])
    if not isinstance(platforms, list) or not all(
        isinstance(p, str) and len(p) <= 32 for p in platforms
    ):
        raise BadCatalog(f"{pid}: platforms must be a list of names")
    out["platforms"] = platforms[:16]
    return out


def parse_document(body: bytes, source: Source) -> tuple[list[dict], int]:
    """(entries, how many were left out); raises BadCatalog for the whole document."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadCatalog("catalog is not JSON") from None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != 1
        or not isinstance(doc.get("plugins"), list)
    ):
        raise BadCatalog('catalog must be {"format": 1, "plugins": [...]}')
    if len(doc["plugins"]) > conf.MAX_ENTRIES:
        raise BadCatalog(f"catalog has more than {conf.MAX_ENTRIES} entries")
    entries, seen, dropped = [], set(), 0
    for raw in doc["plugins"]:
        try:
            entry = parse_entry(raw, source.url, source.loopback)
        except BadCatalog:
            dropped += 1
            continue
        if entry["id"] in seen:
            dropped += 1
            continue
        seen.add(entry["id"])
        entries.append(entry)
    return entries, dropped


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def validity(body: bytes) -> tuple[int, int]:
    """(serial, expires as unix seconds) of a signed catalog; raises BadCatalog."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadCatalog("catalog is not JSON") from None
    serial = doc.get("serial") if isinstance(doc, dict) else None
    if isinstance(serial, bool) or not isinstance(serial, int) or not 0 < serial < 2**63:
        raise BadCatalog("a signed catalog needs a serial: a positive integer")
    expires = doc.get("expires")
    try:
        ok = isinstance(expires, str) and len(expires) <= 40
        when = datetime.fromisoformat(expires) if ok else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise BadCatalog("a signed catalog needs expires: an ISO 8601 time with its zone")
    return serial, int(when.timestamp())


def _check_floor(serial: int, digest: str, expires: int, old: dict, now: int) -> None:
    """Refused unless this signed catalog is newer than the floor (or is the very catalog
    accepted last) and not expired."""
    if expires <= now:
        raise Refused(f"the catalog (serial {serial}) expired at {_iso(expires)}")
    floor = old.get("serial")
    if not isinstance(floor, int):
        return
    if serial < floor:
        raise Refused(f"the catalog's serial {serial} is lower than the {floor} already "
                      f"accepted; refused as a replay")  # fmt: skip
    if serial == floor and digest != old.get("sha256"):
        raise Refused(f"the catalog's serial {serial} was accepted with other content; "
                      f"refused")  # fmt: skip


# -- the cache ------------------------------------------------------------------------------
def _cache_path(name: str):
    return conf.sub_dir("cache") / f"{name}.json"


def _read_raw(source: Source) -> dict:
    """The stored record of this source (empty when never fetched, or when its URL or key
    changed since: a new key must not vouch for entries the old one verified, nor inherit its
    floor)."""
    try:
        data = json.loads(_cache_path(source.name).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("url") != source.url:
        return {}
    if data.get("public_key") != source.public_key:
        return {}
    return data


def _expired(record: dict, now: float) -> bool:
    expires = record.get("expires")
    return isinstance(expires, int) and expires <= now


def read_cache(source: Source) -> dict:
    """What was last fetched for this source, its entries withheld once its catalog expired."""
    data = _read_raw(source)
    if data.get("entries") and _expired(data, time.time()):
        why = [f"the catalog offered expired at {_iso(data['expires'])}", data.get("error")]
        data = {**data, "entries": None, "error": "; ".join(w for w in why if w)}
    return data


def forget(name: str) -> None:
    _cache_path(name).unlink(missing_ok=True)


@contextmanager
def _locked(name: str):
    """One writer of a source's record at a time across processes, so two racing fetches
    cannot lower its floor."""
    with open(conf.sub_dir("cache") / f".{name}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def fetch(source: Source) -> dict:
    """Fetch, verify and cache one source's catalog now; returns the cache record."""
    now = int(time.time())
    accepted, keep, clear = None, None, None
    try:
        body = netfetch.get(source.url, conf.CATALOG_MAX_BYTES, allow_loopback=source.loopback)
        if source.signed:
            sig = netfetch.get(
                source.url + ".sig", conf.SIGNATURE_MAX_BYTES, allow_loopback=source.loopback
            )
            if not signing.verify(source.public_key, body, sig):
                raise BadCatalog("the catalog's signature does not verify with the source's key")
        entries, dropped = parse_document(body, source)
        serial, expires = validity(body) if source.signed else (None, None)
        accepted = (entries, dropped, serial, expires, hashlib.sha256(body).hexdigest())
    except netfetch.FetchError as exc:
        keep = str(exc)  # unreachable or refused: the last verified copy stays offered, stale
    except BadCatalog as exc:
        clear = str(exc)
    with _locked(source.name):
        old = _read_raw(source)
        floor = {k: old[k] for k in ("serial", "sha256", "expires") if k in old}
        record = {"url": source.url, "public_key": source.public_key, "checked_at": now, **floor}
        if accepted is not None and source.signed:
            _entries, _dropped, serial, expires, digest = accepted
            try:
                _check_floor(serial, digest, expires, old, now)
            except Refused as exc:
                accepted, keep = None, str(exc)
        if accepted is not None:
            entries, dropped, serial, expires, digest = accepted
            error = f"{dropped} entries out of shape were left out" if dropped else ""
            record.update(entries=entries, fetched_at=now, error=error)
            if source.signed:
                record.update(serial=serial, sha256=digest, expires=expires)
        elif keep is not None:
            record.update(entries=old.get("entries"), fetched_at=old.get("fetched_at"), error=keep,
                          kept=True)  # fmt: skip
        else:
            record.update(entries=None, fetched_at=None, error=clear)
        atomic_write(_cache_path(source.name), json.dumps(record), durable=False)
    return read_cache(source)


def current(source: Source, *, force: bool = False) -> dict:
    """The cache record, refetched when forced, never fetched, expired or older than 6 h (a
    failed fetch is retried on read only after RETRY_S, so a dead source does not slow every
    read)."""
    record = _read_raw(source)
    now = time.time()
    if force or not record:
        return fetch(source)
    fresh = (
        record.get("fetched_at")
        and now - record["fetched_at"] < conf.CACHE_S
        and not _expired(record, now)
    )
    if not fresh and now - record.get("checked_at", 0) >= conf.RETRY_S:
        return fetch(source)
    return read_cache(source)


def is_stale(record: dict) -> bool:
    """The entries offered are not from the last check, or are older than 6 h, or none."""
    fetched = record.get("fetched_at")
    if not fetched or record.get("kept") or _expired(record, time.time()):
        return True
    return fetched != record.get("checked_at") or time.time() - fetched >= conf.CACHE_S
