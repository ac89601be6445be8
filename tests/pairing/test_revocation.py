"""Unpairing or disabling a client ends its live session, through `pairing.signals` and the
session code's subscriber (`streaming/revocations.py`), on both planes; and `pairing` itself
imports no session code.

The sessions here are stand-ins kept to their interface with the host: a native peer is a real
child process in the native registry (Redis), a compat session is the state record in Redis
plus a thread that answers stop requests the way the session task does.
"""

from __future__ import annotations

import ast
import json
import os
import threading
import time
from pathlib import Path

import pytest
from django.test import Client

from pairing import services
from pairing.models import PLANE_NATIVE, PairedClient
from pairing.signals import client_revoked
from streaming import services as sessions_state
from streaming.sessions import registry
from tests.support.certs import identity

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def redis_host(redis_db):
    """The host's clients (bus and native plane) on the tests' Redis."""
    return redis_db


def native_client(fp: str) -> PairedClient:
    return PairedClient.objects.create(fingerprint=fp, cert_pem="", name="tv", plane=PLANE_NATIVE)


class LiveSession(threading.Thread):
    """A live session of `plane` for `fingerprint` in the one registry, answering requests on
    its control list as a session process does: record a stop, leave the registry."""

    def __init__(self, plane: str, fingerprint: str):
        super().__init__(daemon=True)
        self.record = {"id": registry.new_id(), "fingerprint": fingerprint, "client": "tv",
                       "app_id": 1, "plane": plane, "pid": os.getpid()}  # fmt: skip
        if plane == "compat":
            assert sessions_state.claim(self.record) == 0  # the first port slot
        else:
            registry.put(self.record)
        self.stops: list[dict] = []
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.05):
            registry.put(self.record)  # the heartbeat
            for req in registry.pop(self.record["id"]):
                if req["op"] == "stop":
                    self.stops.append(req)
                    sessions_state.release(self.record["id"])
                    self.done.set()


@pytest.fixture
def live_session(redis_host):
    started: list[LiveSession] = []

    def start(plane: str, fingerprint: str) -> LiveSession:
        session = LiveSession(plane, fingerprint)
        session.start()
        started.append(session)
        return session

    yield start
    for session in started:
        session.done.set()
        session.join(2)


def test_unpairing_a_native_device_ends_its_session_at_once(live_session, mgmt_headers):
    fp = "ab" * 32
    native_client(fp)
    session = live_session("native", fp)
    r = Client().delete(f"/api/v1/native/clients/{fp.upper()}", **mgmt_headers)
    assert r.status_code == 204
    session.join(5)
    assert [(s["reason"], s["deliberate"]) for s in session.stops] == [("unpaired", True)]
    assert registry.live("native") == []


def test_another_devices_session_goes_on(live_session, mgmt_headers):
    mine, other = "ab" * 32, "cd" * 32
    native_client(mine)
    native_client(other)
    session = live_session("native", mine)
    assert Client().delete(f"/api/v1/native/clients/{other}", **mgmt_headers).status_code == 204
    time.sleep(0.3)
    assert session.stops == [] and [r["id"] for r in registry.live()] == [session.record["id"]]


def test_unpairing_a_compat_client_stops_its_session(live_session, admin_headers):
    client = services.store_client(identity(0)[1], "moonlight")
    task = live_session("compat", client.fingerprint)
    r = Client().post(
        "/api/clients/unpair",
        json.dumps({"uuid": client.uuid}),
        content_type="application/json",
        **admin_headers,
    )
    assert r.json()["status"] is True
    task.join(5)
    assert [(s["reason"], s["deliberate"]) for s in task.stops] == [("unpaired", True)]
    assert sessions_state.current() is None


def test_disabling_a_compat_client_stops_its_session(live_session):
    client = services.store_client(identity(1)[1], "moonlight")
    task = live_session("compat", client.fingerprint)
    assert services.set_enabled(client.uuid, False)
    task.join(5)
    assert [s["reason"] for s in task.stops] == ["unpaired"]


def test_unpairing_someone_else_leaves_the_session_running(live_session):
    mine = services.store_client(identity(0)[1], "mine")
    other = services.store_client(identity(1)[1], "other")
    task = live_session("compat", mine.fingerprint)
    assert services.unpair_fingerprint(other.fingerprint)
    time.sleep(0.3)
    assert task.stops == [] and sessions_state.current()["id"] == task.record["id"]


def test_a_failing_subscriber_does_not_undo_the_unpair():
    client = services.store_client(identity(2)[1], "tv")
    heard = []

    def broken(sender, fingerprints, **kwargs):
        heard.append(fingerprints)
        raise RuntimeError("session code is down")

    client_revoked.connect(broken, dispatch_uid="test-broken")
    try:
        assert services.unpair_fingerprint(client.fingerprint.upper())
    finally:
        client_revoked.disconnect(dispatch_uid="test-broken")
    assert heard == [[client.fingerprint]]
    assert not PairedClient.objects.filter(pk=client.pk).exists()


# Protocol helpers (Django-free GameStream code) pairing may use, and the compat plane's
# nvhttp host adapter, which the issue moves out of `pairing` into the compat protocol app.
ALLOWED = {"pairing.crypto", "common.names"}
NOT_PAIRING = {"nvhttp_backend.py"}


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, function-level imports included."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def test_pairing_imports_no_session_code():
    """`pairing` announces revocations and never reaches into `streaming` (the old
    `pairing.services` -> `streaming` -> `pairing` circle)."""
    found = {}
    for path in sorted((ROOT / "pairing").rglob("*.py")):
        if path.name in NOT_PAIRING:
            continue
        wrong = {
            m
            for m in imports_of(path)
            if (m == "streaming" or m.startswith("streaming."))
            and not any(m == a or m.startswith(a + ".") for a in ALLOWED)
            and not any(a.startswith(m + ".") for a in ALLOWED)  # the packages above them
        }
        if wrong:
            found[str(path.relative_to(ROOT))] = sorted(wrong)
    assert found == {}


def test_the_import_check_catches_a_lazy_import(tmp_path):
    """The check above sees an import inside a function too (a lazy import)."""
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from streaming import services\n")
    assert "streaming.services" in imports_of(sample)
