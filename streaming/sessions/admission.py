"""Admission: one count of places for both planes, bounded by `max_sessions`.

Why one place: a compat /launch and a native offer come in through different processes
(the nvhttp listener, daphne), and both must see the other's sessions before they take the
last place. Every admission runs under one short Redis lock (`LOCK_KEY`), so two launches at
the same instant never both take it.

What holds a place (counted once each, whatever shows it):
* a compat session: its port slot claim (`SLOT_PREFIX:<k>` = session id, kept alive by its
  heartbeat, so a crashed session frees its slot within `SLOT_TTL_S`) and its registry record;
* a native session process: from its handover (`hold_native`, pid -> fingerprint) for as
  long as the process lives, admitted but not yet proven included, and its registry record;
* a native offer between its admission and its process's handover (`RESERVED_KEY`,
  token -> deadline), so an offer still being answered is not invisible to the next one.

A native device that reconnects to its own live session needs no place (its new peer ends
the old session once DTLS proves the device). The refusal is the same text on both planes:
"The host is already streaming to N clients (max_sessions = M)", status 503.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time

from django.conf import settings

from common import procs, redis_client
from common.ports import MAX_SLOTS, slot_udp_held
from hostconfig import store
from streaming.sessions import registry

log = logging.getLogger("streaming.sessions")

LOCK_KEY = f"{registry.PREFIX}:admission-lock"
SLOT_PREFIX = f"{registry.PREFIX}:compat-slot"
NATIVE_KEY = f"{registry.PREFIX}:native-places"
RESERVED_KEY = f"{registry.PREFIX}:native-reserved"
SLOT_TTL_S = 15
LOCK_TTL_S = 5.0  # a holder that dies mid-admission frees the lock after this
LOCK_WAIT_S = 5.0
DEFAULT_MAX, MIN_MAX, MAX_MAX = 2, 1, MAX_SLOTS


ALREADY_RUNNING = "An app is already running on this host"


class Refused(Exception):
    """No place (503), or the client's own compat session runs (400, as GameStream has it)."""

    def __init__(self, message: str, status: int = 503):
        super().__init__(message)
        self.message, self.status = message, status


def slot_key(slot: int) -> str:
    return f"{SLOT_PREFIX}:{slot}"


def max_sessions() -> int:
    """The `max_sessions` key, read at each admission (an edit counts from the next one)."""
    try:
        value = int(store.get("max_sessions"))
    except Exception:  # an unreadable config admits as the default does
        return DEFAULT_MAX
    return min(max(value, MIN_MAX), MAX_MAX)


def refusal(taken: int, limit: int) -> str:
    return f"The host is already streaming to {taken} clients (max_sessions = {limit})"


@contextlib.contextmanager
def _locked():
    lock = redis_client.client().lock(LOCK_KEY, timeout=LOCK_TTL_S, sleep=0.005,
                                      blocking_timeout=LOCK_WAIT_S)  # fmt: skip
    if not lock.acquire():
        raise Refused("The host is busy admitting another session; try again")
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # expired meanwhile: nothing left to release
            lock.release()


def places() -> set[str]:
    """Every place taken now, one name each: `c:<id>` a compat session, `p:<pid>` a native
    process, `r:<token>` a native offer not yet handed over. Dead holders are dropped."""
    r = redis_client.client()
    taken: set[str] = set()
    for rec in registry.live():
        if rec.get("plane") == "compat":
            taken.add(f"c:{rec['id']}")
        else:
            taken.add(f"p:{rec.get('pid')}")
    owners = r.mget([slot_key(k) for k in range(MAX_SLOTS)])
    taken |= {f"c:{owner.decode()}" for owner in owners if owner is not None}
    for pid, _fp in r.hgetall(NATIVE_KEY).items():
        if procs.alive(int(pid)):
            taken.add(f"p:{int(pid)}")
        else:
            r.hdel(NATIVE_KEY, pid)
    now = time.time()
    for token, deadline in r.hgetall(RESERVED_KEY).items():
        if float(deadline) > now:
            taken.add(f"r:{token.decode()}")
        else:
            r.hdel(RESERVED_KEY, token)
    return taken


def _check(limit: int | None = None) -> None:
    limit = max_sessions() if limit is None else limit
    taken = len(places())
    if taken >= limit:
        raise Refused(refusal(taken, limit))


# -- the compat plane ------------------------------------------------------------------------
def admit_compat(record: dict) -> int:
    """Take a place and the lowest free port slot for a /launch, and register the starting
    session (state `starting`, `port_slot`); returns the slot. Refused when none is left, or
    (400) when this client's own session already runs: checked under the same lock, so two
    launches by one client at the same instant start one session."""
    r = redis_client.client()
    fp = (record.get("fingerprint") or "").lower()
    with _locked():
        if any((rec.get("fingerprint") or "").lower() == fp for rec in registry.live("compat")):
            raise Refused(ALREADY_RUNNING, status=400)
        _check()
        owners = r.mget([slot_key(k) for k in range(MAX_SLOTS)])
        # A slot whose stream ports are bound is a live session's even without its claim: a
        # Redis restart wiped the claims, and its heartbeat has not taken its slot back yet.
        slot = next((k for k, owner in enumerate(owners)
                     if owner is None and not _slot_held(k)), None)  # fmt: skip
        if slot is None:  # max_sessions <= MAX_SLOTS, so only stale claims fill them all
            raise Refused(refusal(MAX_SLOTS, max_sessions()))
        r.set(slot_key(slot), str(record["id"]), ex=SLOT_TTL_S)
        registry.put({**record, "plane": "compat", "pid": 0, "state": "starting",
                      "port_slot": slot})  # fmt: skip
    return slot


def _slot_held(slot: int) -> bool:
    return slot_udp_held(settings.HOST_BIND, settings.PORTS, slot)


def owns_slot(session_id: str, slot: int) -> bool:
    owner = redis_client.client().get(slot_key(slot))
    return owner is not None and owner.decode() == str(session_id)


def keep_slot(session_id: str, slot: int) -> bool:
    """The compat heartbeat: refresh the slot claim while it is still this session's. A
    claim that is simply gone (the private Redis keeps nothing across a restart: it was
    killed and the supervisor started it again) is taken back, unless another session took
    the slot meanwhile: a live stream must not end because Redis restarted."""
    r = redis_client.client()
    if r.set(slot_key(slot), str(session_id), nx=True, ex=int(SLOT_TTL_S)):
        log.warning("session %s: took its port slot %d back (Redis lost it)", session_id, slot)
        return True
    if not owns_slot(session_id, slot):
        return False
    r.expire(slot_key(slot), SLOT_TTL_S)
    return True


def release_slot(session_id: str, slot: int | None) -> None:
    r = redis_client.client()
    slots = range(MAX_SLOTS) if slot is None else [slot]
    for k in slots:
        owner = r.get(slot_key(k))
        if owner is not None and owner.decode() == str(session_id):
            r.delete(slot_key(k))


# -- the native plane ------------------------------------------------------------------------
def _reconnecting(fingerprint: str) -> bool:
    fp = (fingerprint or "").lower()
    return any((rec.get("fingerprint") or "").lower() == fp for rec in registry.live("native"))


def admit_native(fingerprint: str, hold_s: float) -> str:
    """A place for a native offer, held for up to `hold_s` until its session process takes
    it over (`hold_native`); returns the reservation token. A device with a live native
    session of its own reconnects without one (token "")."""
    r = redis_client.client()
    with _locked():
        if _reconnecting(fingerprint):
            return ""
        _check()
        token = secrets.token_hex(8)
        r.hset(RESERVED_KEY, token, str(time.time() + hold_s))
    return token


def drop_reservation(token: str) -> None:
    if token:
        redis_client.client().hdel(RESERVED_KEY, token)


def hold_native(pid: int, fingerprint: str, token: str = "") -> None:
    """The native session process takes over its offer's place, for as long as it lives."""
    r = redis_client.client()
    pipe = r.pipeline(transaction=True)
    pipe.hset(NATIVE_KEY, pid, fingerprint)
    if token:
        pipe.hdel(RESERVED_KEY, token)
    pipe.execute()


def leave_native(pid: int) -> None:
    redis_client.client().hdel(NATIVE_KEY, pid)


# -- a session process and its place (both planes) ------------------------------------------
def take(plane: str, spec: dict, pid: int) -> bool:
    """The session process takes the place its request was admitted with, for as long as it
    lives: compat's /launch slot claim (False: it expired before the process started, and
    another launch may have it now); a native offer's reservation (`hold_native`), the process
    counted as connecting until its DTLS proof (`registry.proven`)."""
    if plane == "compat":
        return owns_slot(str(spec["id"]), int(spec.get("port_slot") or 0))
    registry.connecting_add(pid, spec["fingerprint"])
    hold_native(pid, spec["fingerprint"], str(spec.get("admission") or ""))
    return True


def leave(plane: str, session_id: str, pid: int, slot: int | None = None) -> None:
    """The place goes with the session's end (compat: its slot claim and record; native: the
    process's place: a dead pid is dropped anyway, but a reused one must not keep it)."""
    if plane == "compat":
        release_slot(session_id, slot)
        registry.remove(str(session_id))
    else:
        registry.proven(pid)  # an early exit: no longer connecting
        leave_native(pid)


def describe() -> dict:
    """What admission sees now (logs and tests): places taken and the limit."""
    return {"taken": sorted(places()), "max_sessions": max_sessions()}
