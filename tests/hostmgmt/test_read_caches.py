"""The read routes' change checks: what they reuse, and what makes them look again."""

from __future__ import annotations

import os
import threading

import pytest

from common import filecache


def test_filecache_parses_once_per_version_and_sees_a_same_size_edit(tmp_path):
    path = tmp_path / "f.json"
    calls = []

    def parse(raw: bytes):
        calls.append(raw)
        return raw.decode()

    path.write_text("aaaa")
    past = path.stat().st_mtime_ns - 10**9  # settled: older than SETTLE_NS
    os.utime(path, ns=(past, past))
    assert filecache.parsed(path, parse) == "aaaa"
    assert filecache.parsed(path, parse) == "aaaa"
    assert len(calls) == 1
    path.write_text("bbbb")  # same size, in place: the mtime moves
    os.utime(path, ns=(past + 1, past + 1))
    assert filecache.parsed(path, parse) == "bbbb"
    tmp = tmp_path / "g.json"
    tmp.write_text("cccc")
    os.utime(tmp, ns=(past + 1, past + 1))  # same size and mtime, new inode
    tmp.replace(path)
    assert filecache.parsed(path, parse) == "cccc"
    assert len(calls) == 3


def test_filecache_reads_a_file_changed_within_one_clock_tick_every_time(tmp_path):
    """Same inode, size and mtime, other bytes (two writes in one tick of the file clock):
    a file that has not settled yet is never served from the cache."""
    path = tmp_path / "young"
    path.write_text("one")
    st = path.stat()
    assert filecache.parsed(path, bytes.decode) == "one"
    path.write_text("two")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # looks exactly like the first
    assert filecache.parsed(path, bytes.decode) == "two"
    path.unlink()
    assert filecache.parsed(path, bytes.decode, missing={}) == {}


def test_filecache_bad_version_reads_missing_until_fixed(tmp_path):
    import json

    path = tmp_path / "p.json"
    path.write_text("{not json")
    assert filecache.parsed(path, json.loads, missing="none") == "none"
    path.write_text('{"ok": 1}')
    assert filecache.parsed(path, json.loads, missing="none") == {"ok": 1}


def test_state_dir_follows_the_variable(tmp_path, monkeypatch):
    from common.statedir import state_dir

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path / "a"))
    assert state_dir() == (tmp_path / "a").resolve()
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path / "b"))
    assert state_dir() == (tmp_path / "b").resolve()


@pytest.mark.django_db(transaction=True)
def test_dbversion_moves_on_own_writes_and_on_other_connections():
    from django.db import connection

    from common import dbversion
    from pairing.models import PinRequest

    computed = []

    def count():
        computed.append(1)
        return PinRequest.objects.count()

    assert dbversion.cached("t.count", count) == dbversion.cached("t.count", count)
    assert len(computed) == 1
    PinRequest.objects.create(key_hex="", expires_at="2999-01-01T00:00:00Z")  # own write
    assert dbversion.cached("t.count", count) == 1
    assert len(computed) == 2

    # Another connection (another thread here; another process is the same to SQLite).
    def other():
        PinRequest.objects.all().delete()
        connection.close()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert dbversion.cached("t.count", count) == 0
    assert len(computed) == 3


@pytest.mark.django_db
def test_dbversion_caches_nothing_inside_a_transaction():
    from common import dbversion

    assert dbversion.version() is None  # the test runs in one
    calls = []
    dbversion.cached("t.tx", lambda: calls.append(1))
    dbversion.cached("t.tx", lambda: calls.append(1))
    assert len(calls) == 2


def test_bearer_chain_keeps_every_check_but_session_csrf_auth_messages():
    from django.conf import settings

    from hostmgmt.sync_dispatch import BEARER_SKIPPED, bearer_wsgi_handler, is_bearer_v1

    handler = bearer_wsgi_handler()
    assert (
        settings.MIDDLEWARE and "django.middleware.csrf.CsrfViewMiddleware" in settings.MIDDLEWARE
    )
    kept = [m for m in settings.MIDDLEWARE if m not in BEARER_SKIPPED]
    assert "hostmgmt.middleware.SecurityHeadersMiddleware" in kept
    assert "hostmgmt.middleware.OriginClassMiddleware" in kept
    assert handler._middleware_chain is not None

    def scope(path, auth):
        return {"path": path, "headers": [(b"authorization", auth)] if auth else []}

    assert is_bearer_v1(scope("/api/v1/host", b"Bearer abc"))
    assert is_bearer_v1(scope("/api/v1/host", b"bearer abc"))
    assert not is_bearer_v1(scope("/api/v1/host", b"Basic abc"))
    assert not is_bearer_v1(scope("/api/v1/host", None))
    assert not is_bearer_v1(scope("/api/config", b"Bearer abc"))


def test_bearer_chain_answers_with_the_security_headers_and_refuses_a_wrong_token(client, settings):
    """Through the reduced chain: headers set, a wrong token is a 401, a right one a 200."""
    import io

    from django.core import signals
    from django.db import close_old_connections

    from access import tokens
    from hostmgmt.sync_dispatch import _environ, bearer_wsgi_handler

    handler = bearer_wsgi_handler()
    token = tokens.ensure_token(tokens.MGMT)

    def get(path: str, auth: str):
        out = {}

        def start_response(status, headers, exc_info=None):
            out["status"] = int(status.split()[0])
            out["headers"] = dict(headers)

        scope = {"method": "GET", "path": path, "headers": [
            (b"host", b"127.0.0.1"), (b"authorization", auth.encode())]}  # fmt: skip
        # As Django's test client does: the test's connection must outlive the request.
        signals.request_started.disconnect(close_old_connections)
        try:
            b"".join(handler(_environ(scope, io.BytesIO()), start_response))
        finally:
            signals.request_started.connect(close_old_connections)
        return out

    ok = get("/api/v1/health", f"Bearer {token}")
    assert ok["status"] == 200
    assert ok["headers"]["X-Frame-Options"] == "DENY"
    assert "Strict-Transport-Security" in ok["headers"]
    assert "Set-Cookie" not in ok["headers"]
    wrong = get("/api/v1/host", "Bearer " + "0" * 64)  # refused before the view runs
    assert wrong["status"] == 401 and wrong["headers"]["X-Frame-Options"] == "DENY"
