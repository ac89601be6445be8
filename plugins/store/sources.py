"""Catalog sources: the built-in one (first, reserved) and the operator's, kept in
`<state>/plugins/store/sources.json` (atomic writes under a file lock, so two processes
editing at once never lose one another's change)."""

from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from dataclasses import dataclass

from common.errors import Forbidden, Invalid
from common.files import atomic_write
from hooks import ssrf
from plugins.store import conf, netfetch, signing

FILE = "sources.json"


@dataclass(frozen=True)
class Source:
    name: str
    url: str
    public_key: str  # "" = unsigned
    builtin: bool = False

    @property
    def signed(self) -> bool:
        return bool(self.public_key)

    @property
    def loopback(self) -> bool:
        """The operator pointed this source at the host itself (see netfetch's rule)."""
        return not self.builtin and netfetch.is_loopback_url(self.url)


def builtin() -> Source:
    return Source(conf.BUILTIN_NAME, conf.builtin_url(), conf.builtin_key(), builtin=True)


@contextmanager
def locked():
    with open(conf.store_dir() / ".sources.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _read_user() -> list[Source]:
    try:
        data = json.loads((conf.store_dir() / FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return []
    out = []
    for row in data.get("sources", []) if isinstance(data, dict) else []:
        try:
            out.append(Source(str(row["name"]), str(row["url"]), str(row.get("public_key", ""))))
        except (KeyError, TypeError):
            continue
    return out


def all_sources() -> list[Source]:
    """The built-in source first, then the operator's sorted by name."""
    return [builtin(), *sorted(_read_user(), key=lambda s: s.name)]


def get(name: str) -> Source | None:
    return next((s for s in all_sources() if s.name == name), None)


def _write(user: list[Source]) -> None:
    rows = [{"name": s.name, "url": s.url, "public_key": s.public_key} for s in user]
    atomic_write(conf.store_dir() / FILE, json.dumps({"sources": rows}, indent=2) + "\n")


def check_name(name: str) -> None:
    if not isinstance(name, str) or not conf.SOURCE_NAME.fullmatch(name):
        raise Invalid(
            "invalid source name",
            fields={"name": "1 to 32 of a-z, 0-9 and '-', starting with a letter"},
        )


def put(name: str, url, public_key) -> bool:
    """Add or replace a source; True when it changed. Raises Invalid (400)."""
    check_name(name)
    if name == conf.BUILTIN_NAME:
        raise Invalid(
            f"'{name}' is the built-in source's reserved name", fields={"name": "reserved"}
        )
    fields = {}
    if not isinstance(url, str) or not url:
        fields["url"] = "required"
    elif len(url) > conf.MAX_URL:
        fields["url"] = f"at most {conf.MAX_URL} characters"
    else:
        try:
            netfetch.check_url(url, allow_loopback=True)
        except ssrf.UrlRefused as exc:
            fields["url"] = str(exc)
    if public_key is None:
        public_key = ""
    if not isinstance(public_key, str):
        fields["public_key"] = "must be a string"
    elif public_key.strip():
        public_key = public_key.strip()
        try:
            signing.parse_public_key(public_key)
        except signing.BadKey as exc:
            fields["public_key"] = str(exc)
    if fields:
        raise Invalid("invalid source", fields=fields)
    new = Source(name, url, public_key.strip())
    with locked():
        user = _read_user()
        old = next((s for s in user if s.name == name), None)
        if old == new:
            return False
        if old is None and len(user) + 1 >= conf.MAX_SOURCES:  # the built-in one counts
            raise Invalid(f"at most {conf.MAX_SOURCES} sources, the built-in one included")
        _write([s for s in user if s.name != name] + [new])
    return True


def delete(name: str) -> bool:
    """Remove a source; True when one was removed. The built-in one: Forbidden (403)."""
    if name == conf.BUILTIN_NAME:
        raise Forbidden("the built-in source cannot be removed")
    with locked():
        user = _read_user()
        if not any(s.name == name for s in user):
            return False
        _write([s for s in user if s.name != name])
    return True
