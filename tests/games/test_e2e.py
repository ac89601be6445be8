"""Across processes on a real host: the test plays the engine's worker, the host ends games.

The test process launches the game and watches it (as the session's worker does); the running
host answers `POST /api/v1/game/end` from its daphne process and expires grace windows from
its supervisor, both with nothing but the shared state file to go on.
"""

from __future__ import annotations

import json
import time

import pytest

from common import procs
from games import lifecycle, registry
from tests.games.conftest import game_events, wait_for
from tests.native.helpers import last_seq

pytestmark = pytest.mark.e2e


@pytest.fixture
def host_state(live_host, monkeypatch, redis_db):
    """The live host's state dir for this process (games.json is what the two share), while
    this process's event bus stays on the tests' own Redis: its ring then holds only what the
    test's watcher emitted, never the host's events (those are on the host's SSE stream)."""
    from hooks import events

    monkeypatch.setenv("HOST_STATE_DIR", str(live_host.state_dir))
    # Seqs pre-reserved in the tests' Redis, so our bus never persists its seq mark in the
    # host's state dir (harmless, marks only move forward, but the host's file is not ours).
    k = events.keys()
    redis_db.mset({k["seq"]: 0, k["reserved"]: 1_000_000})
    yield live_host
    lifecycle.stop_watching()
    registry.clear()


def launched(item, session_id):
    key = lifecycle.game_launched(session_id, f"custom:g{session_id}", f"Game {session_id}",
                                  client="Deck", detect={"process_name": f"game{session_id}"},
                                  pgid=item.pgid, exit_timeout=2)  # fmt: skip
    assert wait_for(lambda: (registry.get(key) or {}).get("state") == "running")
    return key


def test_game_end_over_the_live_api_and_grace_expiry_by_the_supervisor(host_state, launch):
    since = last_seq(host_state)  # the shared host has run other tests' games before this one
    with host_state.mgmt() as api:
        body = {"game_on_session_end": "always", "disconnect_grace_seconds": 600}
        r = api.put("/api/v1/session/settings", json=body)
        assert r.status_code == 200, r.text
        assert api.post("/api/v1/game/end", json={}).status_code == 409  # nothing waits

        first, second = launch(name="game1"), launch(name="game2")
        k1, k2 = launched(first, 1), launched(second, 2)
        assert api.post("/api/v1/game/end", json={}).status_code == 409  # both sessions live
        assert lifecycle.session_ended(1, deliberate=False)["grace"] == 1  # host's file read

        t0 = time.monotonic()
        r = api.post("/api/v1/game/end", json={"app_id": "custom:g1"})
        assert r.status_code == 200 and r.json() == {"ended": 1}, r.text
        assert wait_for(lambda: not procs.alive(first.game_pid()))
        took = time.monotonic() - t0
        # The host ended it, so the host announced it, once (its SSE stream); our watcher added
        # nothing: this process's bus writes to the tests' Redis, which the host never sees, so
        # its ring is exactly what our watcher emitted (its `game.running`s, no `game.exited`).
        assert wait_for(lambda: (registry.get(k1) or {}).get("reason") == "terminated")
        assert [e["game"]["title"] for e in host_events(api, "game.exited", 1, since)] == ["Game 1"]
        assert [e["game"]["title"] for e in game_events("game.running")] == ["Game 1", "Game 2"]
        assert game_events("game.exited") == []
        assert procs.alive(second.game_pid())  # its session is live
        assert api.post("/api/v1/game/end", json={}).status_code == 409
        print(f"POST /game/end → game gone: {took * 1000:.0f} ms")

        # The supervisor ends a game whose grace window ran out (deadline moved up for speed).
        lifecycle.session_ended(2, deliberate=False)
        registry.update(lambda rs: rs[k2].update(grace_deadline=time.time() + 0.3))
        assert wait_for(lambda: not procs.alive(second.game_pid()), 5.0)
        assert wait_for(lambda: (registry.get(k2) or {}).get("state") == "exited")
        assert registry.get(k2)["reason"] == "terminated"
        exited = host_events(api, "game.exited", 2, since)
        assert [(e["game"]["title"], e["reason"]) for e in exited] == [
            ("Game 1", "terminated"),
            ("Game 2", "terminated"),
        ]


def host_events(api, kind: str, count: int, since: int, timeout: float = 5.0) -> list[dict]:
    """The host's own event stream (SSE after `since`): the first `count` events of `kind`."""
    found: list[dict] = []
    deadline = time.monotonic() + timeout
    with api.stream("GET", f"/api/v1/events?since={since}&kinds={kind}", timeout=timeout) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line[5:])
                if event.get("kind") == kind:
                    found.append(event)
            if len(found) >= count or time.monotonic() > deadline:
                break
    return found
