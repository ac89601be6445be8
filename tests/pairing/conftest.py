"""Fixtures for in-process pairing tests: tokens, admin credentials, a clean config file."""

from __future__ import annotations

import base64

import pytest

from hostmgmt.auth import throttle, tokens
from hostmgmt.config import store

MGMT_TOKEN = "a" * 64


@pytest.fixture
def clean_config():
    path = store.config_path()
    saved = path.read_bytes() if path.exists() else None
    throttle.reset()
    yield
    throttle.reset()
    if saved is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(saved)


@pytest.fixture
def mgmt_headers(monkeypatch):
    monkeypatch.setenv("HOST_MGMT_TOKEN", MGMT_TOKEN)
    tokens._cache.clear()
    yield {"HTTP_AUTHORIZATION": f"Bearer {MGMT_TOKEN}"}
    tokens._cache.clear()


@pytest.fixture
def admin_headers(db, clean_config):
    from hostmgmt.auth import credentials

    credentials.set_credentials("admin", "s3cret")
    raw = base64.b64encode(b"admin:s3cret").decode()
    return {"HTTP_AUTHORIZATION": f"Basic {raw}"}
