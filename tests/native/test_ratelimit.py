"""Offer rate limits on the tests' Redis with a fake clock: windows and messages."""

from __future__ import annotations

import pytest

from native.ratelimit import WINDOW_S, Limited, OfferLimiter
from tests.native.helpers import FakeClock


@pytest.fixture
def limiter(redis_db):
    return OfferLimiter(redis_db, FakeClock(), per_ip=5, per_device=2)


def test_device_window_then_reset(limiter):
    limiter.hit("dev", "a")
    limiter.hit("dev", "a")
    with pytest.raises(Limited, match="this device") as exc:
        limiter.hit("dev", "a")
    assert 1 <= exc.value.retry_after <= WINDOW_S
    limiter.hit("dev", "b")  # another device has its own allowance
    limiter.clock.t += WINDOW_S
    limiter.hit("dev", "a")  # the next window starts fresh


def test_address_cap_names_the_address(limiter):
    for _ in range(5):
        limiter.hit("ip", "10.0.0.1")
    with pytest.raises(Limited, match=r"this address \(5 per 10 s\)"):
        limiter.hit("ip", "10.0.0.1")
    limiter.hit("ip", "10.0.0.2")
