"""Fixtures the platform tests share (tests/hostmgmt/conftest.py)."""

from __future__ import annotations

from tests.hostmgmt.conftest import admin_user, basic, clean_platform_state  # noqa: F401 - fixtures
