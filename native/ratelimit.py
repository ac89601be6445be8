"""Offer rate limits for `POST /native/offer`: per source address and per device (fingerprint).

Why: every offer that passes reaches Redis and the database, and a paired one starts a process
with a display; a script hammering the endpoint must get a cheap 429 instead. The limits sit
well above the page's own pace (one re-post every 1.5 s while pending, a reconnect every 2 s).
Why Redis: the requests land in any daphne process; fixed windows (one INCR + EXPIRE) are
enough for a flood guard. No Django here, so the rule is testable with a plain Redis.
"""

from __future__ import annotations

import time

import redis

from common.errors import TooMany

PREFIX = "native:rate:"
WINDOW_S = 10
PER_IP = 60  # offers per address per window (several browsers behind one NAT)
PER_DEVICE = 20  # offers per fingerprint per window
PER_IP_PLACE = 20  # placements per address per window (`/play/place`; the page asks every 1.5 s)


class Limited(TooMany):
    """429 with `Retry-After`: a domain error, so the offer route answers it as it is."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message, retry_after=retry_after)


class OfferLimiter:
    def __init__(self, client: redis.Redis, clock=time.time, per_ip=PER_IP, per_device=PER_DEVICE):
        self.r = client
        self.clock = clock
        self.limits = {"ip": per_ip, "dev": per_device, "place": PER_IP_PLACE}

    def hit(self, kind: str, who: str) -> None:
        """Count one offer; raises Limited once `who` is over its window's allowance."""
        now = self.clock()
        window = int(now // WINDOW_S)
        key = f"{PREFIX}{kind}:{who}:{window}"
        pipe = self.r.pipeline()
        pipe.incr(key)
        pipe.expire(key, WINDOW_S * 2)
        count = pipe.execute()[0]
        limit = self.limits[kind]
        if count > limit:
            retry = max(1, int((window + 1) * WINDOW_S - now + 0.999))
            what = "this device" if kind == "dev" else "this address"
            asked = "placements" if kind == "place" else "offers"
            raise Limited(
                f"too many {asked} from {what} ({limit} per {WINDOW_S} s); retry in {retry} s",
                retry,
            )
