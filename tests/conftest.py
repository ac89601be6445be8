"""Shared fixtures: the real host for end-to-end tests, and a few helpers for unit tests."""

from __future__ import annotations

import pytest

from tests.livehost import LiveHost, start_host

ADMIN_USER = "admin"
ADMIN_PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="session")
def live_host():
    """One real host for the whole session: runhost, daphne over TLS, Redis, Celery worker.

    Admin credentials are set through the first-run route, as a newcomer would.
    """
    host: LiveHost = start_host()
    try:
        with host.client() as c:
            r = c.post(
                "/api/password",
                json={
                    "newUsername": ADMIN_USER,
                    "newPassword": ADMIN_PASSWORD,
                    "confirmNewPassword": ADMIN_PASSWORD,
                },
            )
            assert r.status_code == 200, r.text
        yield host
    finally:
        code = host.stop()
        if code != 0:
            print(host.log_tail())


@pytest.fixture
def admin_auth():
    return (ADMIN_USER, ADMIN_PASSWORD)
