"""Fixtures for in-process tests of the platform: a clean config file and login buckets."""

from __future__ import annotations

import base64

import pytest

from hostmgmt.auth import throttle
from hostmgmt.config import store


@pytest.fixture(autouse=True)
def clean_platform_state():
    path = store.config_path()
    saved = path.read_bytes() if path.exists() else None
    throttle.reset()
    yield
    throttle.reset()
    if saved is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(saved)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def admin_user(db):
    from hostmgmt.auth import credentials

    credentials.set_credentials("admin", "s3cret")
    return ("admin", "s3cret")
