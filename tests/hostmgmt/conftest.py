"""Fixtures for in-process tests of the platform: a clean config file and login buckets."""

from __future__ import annotations

import pytest

from tests.conftest import basic  # noqa: F401 - re-exported for the platform tests


@pytest.fixture(autouse=True)
def clean_platform_state(restore_config):
    yield


@pytest.fixture
def admin_user(db):
    from access import credentials

    credentials.set_credentials("admin", "s3cret")
    return ("admin", "s3cret")
