"""Fixtures of the hooks tests: a real Redis for the bus, a test CA and receivers, and one host
of our own (hooks.json, the on-connect env hook and the shortened keep-alive are global to a
host, so the shared live host stays untouched)."""

from __future__ import annotations

import ipaddress
import os
import sys
import tempfile
from pathlib import Path

import pytest

from tests.hooks import helpers


@pytest.fixture
def bus(redis_db, tmp_path, monkeypatch):
    """The event bus on a clean Redis and a fresh state dir (seq file included)."""
    from hooks import events, hook_config

    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    hook_config._cache.invalidate()
    yield events
    hook_config._cache.invalidate()


@pytest.fixture(scope="session")
def tls_material():
    return helpers.make_ca_and_cert(Path(tempfile.mkdtemp(prefix="hooks-ca-")))


@pytest.fixture
def receiver_tls(tls_material):
    """TLS material for a webhook receiver on an address the host may post to. The host
    refuses loopback webhooks (spec) and has no switch to allow them, so a machine with no
    other IPv4 address skips the delivery tests."""
    if ipaddress.ip_address(tls_material.ip).is_loopback:
        pytest.skip("no non-loopback IPv4 address here to run a webhook receiver on")
    return tls_material


@pytest.fixture(scope="session")
def hooks_host(tls_material):
    """Our own real host: runhost, daphne TLS, Redis, Celery (both workers)."""
    from tests.support.livehost import start_host

    out = Path(tempfile.mkdtemp(prefix="hooks-e2e-out-"))
    env = {
        "HOST_SSE_KEEPALIVE_S": "0.5",
        "HOST_WEBHOOK_CA_BUNDLE": str(tls_material.ca_path),
        "HOST_STREAM_WEBHOOK_BACKOFF_S": "0.2",
        "HOST_ON_CONNECT_CMD": f"cat > {out}/on-connect.json; env > {out}/on-connect.env",
    }
    host = start_host(env=env)
    host.out_dir = out
    try:
        yield host
    finally:
        code = host.stop()
        if code != 0:
            print(host.log_tail(), file=sys.stderr)


@pytest.fixture(scope="session")
def emitter(hooks_host):
    em = helpers.Emitter(hooks_host)
    yield em
    em.close()


@pytest.fixture
def emit_in(emitter):
    """Emit events from a separate process of the host (as a Celery worker or plane would)."""

    def run(kind: str, payload: dict | None = None, count: int = 1) -> None:
        emitter.emit(kind, payload or {}, count)

    return run


os.environ.setdefault("HOST_LOG_LEVEL", "WARNING")
