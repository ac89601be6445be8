"""Joining members to a live fleet host the short way: Member rows written into its database
and tokens into its token file, as the members API would (which these tests do not cover)."""

from __future__ import annotations

import json
import os
import sqlite3
import ssl
from contextlib import contextmanager
from datetime import UTC, datetime

from fleet import member_tokens
from fleet.pinned import certificate_fingerprint

DESKTOP = {"id": "desktop", "name": "Desktop"}


def fingerprint_of(host) -> str:
    return certificate_fingerprint(ssl.PEM_cert_to_DER_cert(host.cert_path.read_text()))


def view(library=(DESKTOP,), sessions=0, max_sessions=2, gpu=False) -> dict:
    return {
        "version": "test",
        "sessions": sessions,
        "max_sessions": max_sessions,
        "gpus": [{"name": "GPU", "vendor": "nvidia", "encoder": gpu}],
        "library": list(library),
    }


@contextmanager
def state_of(host):
    old = os.environ.get("HOST_STATE_DIR")
    os.environ["HOST_STATE_DIR"] = str(host.state_dir)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HOST_STATE_DIR", None)
        else:
            os.environ["HOST_STATE_DIR"] = old


class Fleet:
    """The fleet host's members, written where it reads them."""

    def __init__(self, host):
        self.host = host
        self.db = host.state_dir / "db.sqlite3"

    def _sql(self, query: str, args=()):
        conn = sqlite3.connect(self.db, timeout=20)
        try:
            with conn:
                return conn.execute(query, args).lastrowid
        finally:
            conn.close()

    def add(self, url, fingerprint, name, member_view, token=None, reachable=True) -> int:
        now = datetime.now(UTC).isoformat()
        mid = self._sql(
            "INSERT INTO fleet_member (url, fingerprint, name, created_at, reachable, error,"
            " view, event_seq) VALUES (?, ?, ?, ?, ?, '', ?, 0)",
            (url, fingerprint, name, now, int(reachable), json.dumps(member_view)),
        )
        if token:
            with state_of(self.host):
                member_tokens.put(mid, token)
        return mid

    def set_view(self, mid: int, member_view: dict) -> None:
        self._sql("UPDATE fleet_member SET view = ? WHERE id = ?", (json.dumps(member_view), mid))

    def clear(self) -> None:
        self._sql("DELETE FROM fleet_member")
        with state_of(self.host):
            path = member_tokens.path()
            if path.exists():
                path.unlink()
