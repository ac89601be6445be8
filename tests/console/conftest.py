"""Fixtures of the console's in-process tests: a clean config file, logs and live-stat files."""

from __future__ import annotations

import base64

import pytest

from hostmgmt.auth import throttle, tokens
from hostmgmt.config import store
from hostmgmt.lib.statedir import state_path


@pytest.fixture(autouse=True)
def clean_console_state():
    path = store.config_path()
    saved = path.read_bytes() if path.exists() else None
    throttle.reset()
    yield
    throttle.reset()
    if saved is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(saved)
    for name in ("telemetry.json", "stream-latency.json", "stream-network.json"):
        state_path(name).unlink(missing_ok=True)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def admin(db):
    from hostmgmt.auth import credentials

    credentials.set_credentials("admin", "s3cret")
    return {"HTTP_AUTHORIZATION": basic("admin", "s3cret")}


@pytest.fixture
def mgmt():
    token = tokens.ensure_token(tokens.MGMT)
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


@pytest.fixture
def log_dir(tmp_path, monkeypatch):
    """A private state dir for tests that write, rotate and read the log files."""
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    (tmp_path / "logs").mkdir()
    return tmp_path / "logs"
