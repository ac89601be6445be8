"""Fixtures of the console's in-process tests: a clean config file, logs and live-stat files."""

from __future__ import annotations

import pytest

from access import tokens
from common.statedir import state_path
from tests.conftest import basic
from tests.hostmgmt.conftest import admin_user, clean_platform_state  # noqa: F401 - fixtures


@pytest.fixture(autouse=True)
def clean_console_state(restore_config):
    yield
    for name in ("telemetry.json", "stream-latency.json", "stream-network.json"):
        state_path(name).unlink(missing_ok=True)
    for path in state_path().glob("stream-[ln]*-????????.json"):  # per-session windows
        path.unlink(missing_ok=True)


@pytest.fixture
def admin(db, redis_db):
    from access import credentials

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
