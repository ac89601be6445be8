"""Devices waiting for the operator, and the armed self-pairing PIN, kept in the host's Redis.

Why Redis: the offer arrives in whichever daphne process took the request, the operator approves
through another request, and the peer processes read the same state; Redis is the one store they
all share that already expires keys on its own. No Django here, so the rules are testable with a
plain Redis.

Rules (mgmt-api-records §1.7): one entry per DTLS fingerprint, 10 min TTL, 32 entries at most,
4 per source IP; a re-knock refreshes the entry and keeps its id. Deny is not a blocklist.
The armed PIN is one-use and closes after `MAX_WRONG_PINS` wrong PINs, counted host-wide.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass

import redis

KEY = "native:pending"  # hash: fingerprint -> entry JSON
SEQ = "native:pending:seq"
ARM = "native:pair:arm"
ARM_CLOSED = "native:pair:closed"  # the last window was closed by wrong PINs
DENIED = "native:denied:"  # + fingerprint: the device's next knock learns it was denied
CLAIMED = "native:claimed:"  # + fingerprint: an approve/deny is deciding it right now
CLAIM_S = 30

TTL_S = 600
MAX_PENDING = 32
MAX_PER_IP = 4
DENIED_NOTICE_S = 120
MAX_WRONG_PINS = 5  # per armed window, host-wide: then the window closes
CLOSED_NOTICE_S = 120  # at least this long, later PINs are told the window was closed


def _keys(raw) -> list[str]:
    return [k.decode() if isinstance(k, bytes) else k for k in raw]


@dataclass
class PinCheck:
    """The result of a PIN offered against the armed window.

    outcome: `paired` (right PIN, window consumed), `wrong` (`left` more wrong PINs close
    it), `closed-now` (this wrong PIN closed it), `closed` (already closed by wrong PINs),
    `not-armed`, `elsewhere` (bound to another device: neither checked nor counted).
    """

    outcome: str
    left: int = 0


class QueueFull(Exception):
    """The pending list is at a cap; the message names which one."""


@dataclass
class Pending:
    id: int
    fingerprint: str
    name: str
    ip: str
    first_seen: float
    last_seen: float

    def record(self, now: float | None = None) -> dict:
        age = int((now or time.time()) - self.first_seen)
        return {"id": self.id, "name": self.name, "fingerprint": self.fingerprint, "age_secs": age}


class PendingQueue:
    def __init__(self, client: redis.Redis, clock=time.time):
        self.r = client
        self.clock = clock

    def _load(self, pipe) -> dict[str, Pending]:
        now = self.clock()
        out = {}
        for fp, raw in pipe.hgetall(KEY).items():
            entry = Pending(**json.loads(raw))
            if now - entry.last_seen < TTL_S:
                out[fp.decode() if isinstance(fp, bytes) else fp] = entry
        return out

    def entries(self) -> list[Pending]:
        return sorted(self._load(self.r).values(), key=lambda e: e.id)

    def knock(self, fingerprint: str, name: str, ip: str) -> tuple[Pending, bool]:
        """Add or refresh the device; (entry, True) the first time it is seen. Raises QueueFull."""
        result: list = []

        def txn(pipe):
            result.clear()
            entries = self._load(pipe)
            now = self.clock()
            held = pipe.get(CLAIMED + fingerprint)
            if held is not None:  # being approved or denied: wait, do not queue it again
                result.extend([Pending(int(held), fingerprint, name, ip, now, now), False])
                return
            old = entries.get(fingerprint)
            if old is None:
                if len(entries) >= MAX_PENDING:
                    raise QueueFull(
                        f"too many devices are waiting for approval ({MAX_PENDING} max, "
                        f"{TTL_S // 60} min each); ask the operator to approve or deny some"
                    )
                same_ip = sum(1 for e in entries.values() if e.ip == ip)
                if same_ip >= MAX_PER_IP:
                    raise QueueFull(
                        f"too many devices from {ip} are waiting for approval "
                        f"({MAX_PER_IP} per address, {TTL_S // 60} min each)"
                    )
                entry = Pending(int(pipe.incr(SEQ)), fingerprint, name, ip, now, now)
            else:
                entry = old
                entry.last_seen, entry.ip = now, ip
                entry.name = name or entry.name
            stale = [fp for fp in _keys(pipe.hkeys(KEY)) if fp not in entries]
            pipe.multi()
            if stale:
                pipe.hdel(KEY, *stale)
            pipe.hset(KEY, fingerprint, json.dumps(asdict(entry)))
            pipe.expire(KEY, TTL_S)
            result.extend([entry, old is None])

        self.r.transaction(txn, KEY)
        return result[0], result[1]

    def take(self, pending_id: int) -> Pending | None:
        """Remove and return the live entry with this id (None: unknown or expired)."""
        for fp, entry in self._load(self.r).items():
            if entry.id == pending_id:
                if self.r.hdel(KEY, fp):
                    return entry
                return None  # someone else took it first
        return None

    def claim(self, pending_id: int) -> Pending | None:
        """Like `take`, for a decision (approve/deny) that must not race the device's re-knock:
        the claim mark is set before the entry leaves the queue, and `knock` (which watches
        the queue) reads it, so a re-knock in between cannot queue the device again. The
        caller records its decision, then calls `release`."""
        for fp, entry in self._load(self.r).items():
            if entry.id == pending_id:
                self.r.set(CLAIMED + fp, entry.id, ex=CLAIM_S)
                if self.r.hdel(KEY, fp):
                    return entry
                self.release(fp)
                return None  # someone else took it first
        return None

    def release(self, fingerprint: str) -> None:
        self.r.delete(CLAIMED + fingerprint)

    def drop(self, fingerprint: str) -> None:
        self.r.hdel(KEY, fingerprint)

    # -- the denied notice ---------------------------------------------------------------------
    def mark_denied(self, fingerprint: str) -> None:
        self.r.set(DENIED + fingerprint, "1", ex=DENIED_NOTICE_S)

    def denied(self, fingerprint: str) -> bool:
        return bool(self.r.exists(DENIED + fingerprint))

    def pop_denied(self, fingerprint: str) -> bool:
        return bool(self.r.delete(DENIED + fingerprint))

    # -- armed PIN ---------------------------------------------------------------------------
    def arm(self, ttl_s: int, fingerprint: str | None) -> dict:
        pin = f"{secrets.randbelow(10_000):04d}"
        state = {
            "pin": pin,
            "fingerprint": fingerprint,
            "expires_at": self.clock() + ttl_s,
            "wrong": 0,
        }
        pipe = self.r.pipeline()
        pipe.set(ARM, json.dumps(state), ex=ttl_s)
        pipe.delete(ARM_CLOSED)
        pipe.execute()
        return state

    def armed(self) -> dict | None:
        raw = self.r.get(ARM)
        if not raw:
            return None
        state = json.loads(raw)
        return state if state["expires_at"] > self.clock() else None

    def closed_by_wrong_pins(self) -> bool:
        """The last window was closed by `MAX_WRONG_PINS` wrong PINs (and not re-armed since)."""
        return bool(self.r.exists(ARM_CLOSED))

    def disarm(self) -> None:
        self.r.delete(ARM, ARM_CLOSED)

    def consume_pin(self, pin: str, fingerprint: str) -> PinCheck:
        """Check `pin` against the armed window for this device and count a wrong one.

        Why a watched transaction: offers arrive in several daphne processes at once, and the
        count must cap the guesses per window at `MAX_WRONG_PINS` host-wide; a concurrent
        change of the window makes the check run again on the new state. The right PIN
        closes the window (one use); the `MAX_WRONG_PINS`th wrong one closes it too and
        leaves a mark so later offers (the right PIN included) learn why. A window bound to
        another fingerprint refuses without counting or being consumed: that device cannot
        learn anything about the PIN, and must not be able to close the window.
        """
        result: list[PinCheck] = []

        def txn(pipe):
            result.clear()
            raw = pipe.get(ARM)
            state = json.loads(raw) if raw else None
            if state is None or state["expires_at"] <= self.clock():
                closed = pipe.exists(ARM_CLOSED)
                result.append(PinCheck("closed" if closed else "not-armed"))
                return
            if state["fingerprint"] and state["fingerprint"] != fingerprint:
                result.append(PinCheck("elsewhere"))
                return
            given = pin.strip().encode()
            if secrets.compare_digest(given, state["pin"].encode()):
                pipe.multi()
                pipe.delete(ARM, ARM_CLOSED)
                result.append(PinCheck("paired"))
                return
            wrong = int(state.get("wrong", 0)) + 1
            pipe.multi()
            if wrong >= MAX_WRONG_PINS:
                left_s = max(1, int(state["expires_at"] - self.clock()))
                pipe.delete(ARM)
                pipe.set(ARM_CLOSED, json.dumps({"wrong": wrong}), ex=max(left_s, CLOSED_NOTICE_S))
                result.append(PinCheck("closed-now"))
            else:
                pipe.set(ARM, json.dumps({**state, "wrong": wrong}), keepttl=True)
                result.append(PinCheck("wrong", MAX_WRONG_PINS - wrong))

        self.r.transaction(txn, ARM, ARM_CLOSED)
        return result[0]
