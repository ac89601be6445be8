"""Fixtures of this folder's tests that live with the tests of another app."""

from __future__ import annotations

from tests.hostmgmt.conftest import admin_user, basic, clean_platform_state  # noqa: F401 - fixtures
from tests.support.state_api import admin, read_only_dir, state, v1  # noqa: F401 - fixtures
