"""Refreshing the members' state (docs/fleet.md): a job of `supervisor/periodic.py` every
`HOST_FLEET_REFRESH_S` asks each member, in parallel on a bounded pool, for `/host`, `/status`,
`/gpus` and `/display/state` (and every LIBRARY_EVERY rounds `/library`), and writes the
member's row (view, reachable, error, refreshed_at, refresh_ms).

A run only hands out work and returns: a member still being asked from an earlier run is
skipped, so one slow member never delays the others or the next round. A member that fails is
asked again after an exponential backoff (`BACKOFF_MAX_S` at most). Errors written to the row
are this module's own words and the client's (`MemberError` messages carry no token or body).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from common.errors import DomainError
from fleet import member_tokens, view
from fleet.models import Member
from fleet.pinned import MAX_ANSWER_BYTES, MemberClient, MemberError

log = logging.getLogger("fleet.refresh")

REQUEST_TIMEOUT_S = 4.0
POOL_SIZE = 8
BACKOFF_MAX_S = 300.0
PATHS = ("/api/v1/host", "/api/v1/status", "/api/v1/gpus", "/api/v1/display/state")
LIBRARY_PATH = "/api/v1/library"
# The library is large (thousands of entries) and changes rarely: asked every this many rounds.
LIBRARY_EVERY = 6
LIBRARY_MAX_BYTES = 16 * 1024 * 1024


def interval_s() -> float:
    return float(settings.FLEET_REFRESH_S)


class Refresher:
    """The periodic job's state: the pool, the members in flight, each one's backoff and its
    kept connection."""

    def __init__(self, pool_size: int = POOL_SIZE, request_timeout_s: float = REQUEST_TIMEOUT_S):
        self.pool = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="fleet-refresh")
        self.request_timeout_s = request_timeout_s
        self._lock = threading.Lock()
        self._inflight: dict[int, Future] = {}
        self._failures: dict[int, int] = {}
        self._next_at: dict[int, float] = {}
        self._library_rounds: dict[int, int] = {}
        self._clients: dict[int, tuple[tuple[str, str, str], MemberClient]] = {}
        self._closed = False

    def __call__(self) -> list[Future]:
        return self.run()

    def run(self) -> list[Future]:
        """Hand each due member to the pool; the futures of this round (tests wait on them)."""
        now = time.monotonic()
        members = list(Member.objects.all())
        self._forget_removed({m.id for m in members})
        started = []
        with self._lock:
            for member in members:
                if member.id in self._inflight or self._next_at.get(member.id, 0.0) > now:
                    continue
                future = self.pool.submit(self._refresh_one, member)
                self._inflight[member.id] = future
                started.append(future)
        return started

    def backoff_s(self, member_id: int) -> float:
        failures = self._failures.get(member_id, 0)
        if failures == 0:
            return 0.0
        return min(max(interval_s(), 1.0) * 2 ** (failures - 1), BACKOFF_MAX_S)

    def close(self) -> None:
        self._closed = True
        self.pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            for _key, client in self._clients.values():
                client.close()
            self._clients.clear()

    def _forget_removed(self, present: set[int]) -> None:
        with self._lock:
            for member_id in [m for m in self._clients if m not in present]:
                self._clients.pop(member_id)[1].close()
            for table in (self._failures, self._next_at, self._library_rounds):
                for member_id in [m for m in table if m not in present]:
                    table.pop(member_id, None)

    def _client(self, member: Member) -> MemberClient:
        token = member_tokens.get(member.id)
        if token is None:
            raise DomainError("no token is kept for this member; remove it and join it again")
        key = (member.url, member.fingerprint, token)
        with self._lock:
            kept = self._clients.get(member.id)
            if kept and kept[0] == key:
                return kept[1]
            if kept:
                kept[1].close()
            client = MemberClient(member.url, member.fingerprint, token, self.request_timeout_s)
            self._clients[member.id] = (key, client)
            return client

    def _refresh_one(self, member: Member) -> None:
        started = time.monotonic()
        try:
            try:
                client = self._client(member)
                answers = []
                for path in PATHS:
                    if self._closed:
                        return  # the host is stopping: no more requests
                    answers.append(_ask(client, path))
                library = self._library(client, member)
            except (MemberError, DomainError) as exc:
                self._failed(member, str(exc), started)
                return
            answers = [a if isinstance(a, dict) else {} for a in answers]
            self._succeeded(member, view.summarise(*answers, library), started)
        except Exception:  # a bug here must not end the pool's thread or the member's turn
            log.exception("refresh of fleet member %s failed", member.id)
            self._failed(member, "internal error while refreshing (see the host log)", started)
        finally:
            with self._lock:
                self._inflight.pop(member.id, None)
            close_old_connections()

    def _library(self, client: MemberClient, member: Member) -> list[dict]:
        """The member's titles: asked every LIBRARY_EVERY rounds (and until first known),
        else the last ones kept in its view."""
        kept = (member.view or {}).get("library")
        with self._lock:
            round_no = self._library_rounds.get(member.id, 0)
            self._library_rounds[member.id] = round_no + 1
        if isinstance(kept, list) and kept and round_no % LIBRARY_EVERY:
            return kept
        return view.titles(_ask(client, LIBRARY_PATH, LIBRARY_MAX_BYTES))

    def _succeeded(self, member: Member, shown: dict, started: float) -> None:
        with self._lock:
            self._failures.pop(member.id, None)
            self._next_at.pop(member.id, None)
        reported = shown.pop("name", "")
        previous = (member.view or {}).get("previous_name")
        if member.name and reported != member.name:
            previous = member.name  # a renamed (or lying) member: the page shows both
        shown["previous_name"] = previous
        Member.objects.filter(pk=member.id).update(
            name=reported,
            view=shown,
            reachable=True,
            error="",
            refreshed_at=timezone.now(),
            refresh_ms=round((time.monotonic() - started) * 1000, 1),
        )

    def _failed(self, member: Member, reason: str, started: float) -> None:
        with self._lock:
            failures = self._failures.get(member.id, 0) + 1
            self._failures[member.id] = failures
            wait = self.backoff_s(member.id)
            self._next_at[member.id] = time.monotonic() + wait
            kept = self._clients.pop(member.id, None)
        if kept:
            kept[1].close()
        Member.objects.filter(pk=member.id).update(
            reachable=False,
            error=view.clean_text(f"{reason} (next try in {int(wait)} s)", 300),
            refreshed_at=timezone.now(),
            refresh_ms=round((time.monotonic() - started) * 1000, 1),
        )


def _ask(client: MemberClient, path: str, max_bytes: int = MAX_ANSWER_BYTES):
    answer = client.request("GET", path, max_bytes=max_bytes)
    if answer.status == 401:
        raise MemberError("the member refused the token (401: revoked?); remove and join again")
    if answer.status == 403:
        raise MemberError(f"the token may not read {path} (403: not a fleet token?)")
    if answer.status != 200:
        raise MemberError(f"GET {path} answered {answer.status}")
    return answer.json()


_default: Refresher | None = None
_default_lock = threading.Lock()


def default() -> Refresher:
    """The host's one refresher (the periodic job's)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Refresher()
        return _default


def tick() -> None:
    default().run()
