"""Fixtures for in-process pairing tests: tokens, admin credentials, a clean config file."""

from __future__ import annotations

import pytest

from access import tokens

MGMT_TOKEN = "a" * 64


@pytest.fixture
def clean_config(restore_config):
    yield


@pytest.fixture
def mgmt_headers(monkeypatch):
    monkeypatch.setenv("HOST_MGMT_TOKEN", MGMT_TOKEN)
    tokens._cache.clear()
    yield {"HTTP_AUTHORIZATION": f"Bearer {MGMT_TOKEN}"}
    tokens._cache.clear()
