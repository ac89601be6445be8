"""Fixtures for the protocol-layer tests: the real client library, when installed."""

from __future__ import annotations

import pytest

from tests.compat import mcc
from tests.streaming.conftest import stream_host  # noqa: F401 - fixtures


@pytest.fixture
def mcc_lib():
    return mcc
