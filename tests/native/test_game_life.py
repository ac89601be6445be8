"""A native session's game goes through the same lifecycle layer as a compat session's.

A catalog app whose launcher starts a child "game" and exits at once is played on /play (PIN
self-pairing): `game.running` goes out with plane `native` for the title, the lifecycle record
names the child (not the launcher), `/api/v1/status` lists the game once; killing the child
gives `game.exited` reason `exited` and, with `session_on_game_exit` (the default), ends the
native session. The events are read from one live stream held open from before the session to
its end, as an operator's client reads them: each arrives while it happens, in order, once.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.native.browserkit import page_wait, self_paired, wait_for
from tests.native.helpers import LiveEvents, pids_named

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NAME = "life player"
APP = "Native Launcher"
GAME = "nativefakegame"  # the child's argv[0]: the detect hint
LAUNCHER = f"#!/bin/bash\n( exec -a {GAME} sleep 300 ) &\nexit 0\n"  # the game outlives it


def game_pids() -> list[int]:
    return pids_named(GAME)


@pytest.fixture
def launcher_app(live_host, admin_auth, tmp_path):
    (tmp_path / "launcher.sh").write_text(LAUNCHER)
    app = {
        "index": -1,
        "name": APP,
        "cmd": f"exec bash {tmp_path}/launcher.sh",
        "exit-timeout": 2,
        "detect": {"process_name": GAME},
    }
    with live_host.client(auth=admin_auth) as admin:
        r = admin.post("/api/apps", json=app)
        assert r.status_code == 200 and r.json()["status"] is True, r.text
        yield
        apps = admin.get("/api/apps").json()["apps"]
        index = next(i for i, a in enumerate(apps) if a["name"] == APP)
        admin.delete(f"/api/apps/{index}")
    for pid in game_pids():  # never leave the child behind
        os.kill(pid, signal.SIGKILL)


def mine(ev: dict) -> bool:
    return ev["kind"].startswith("game.") and ev["game"]["title"] == APP


def test_native_game_running_exited_ends_session(live_host, launcher_app):
    # One live stream from before the session to its end, as an operator's client would hold
    # it: every event arrives while it happens, in order, once (LiveEvents checks the seqs).
    with (
        LiveEvents(live_host, "game.*,session.*") as live,
        self_paired(live_host, NAME, app=APP) as player,
    ):
        page, api = player.page, player.api
        player.start()

        # game.running with plane native once the child is seen; the lifecycle record names
        # the child that outlived its launcher.
        live.wait(lambda evs: any(e["kind"] == "game.running" for e in evs), what="game.running")
        running = [e for e in live.events if e["kind"] == "game.running" and mine(e)]
        assert len(running) == 1, live.events
        assert running[0]["game"]["plane"] == "native" and running[0]["game"]["client"] == NAME
        records = json.loads((live_host.state_dir / "games.json").read_text()).values()
        recs = [r for r in records if r.get("title") == APP and r.get("state") != "exited"]
        assert len(recs) == 1 and recs[0]["game"]["name"] == GAME, recs
        assert recs[0]["plane"] == "native"
        [pid] = game_pids()
        assert recs[0]["game"]["pid"] == pid
        # /api/v1/status lists the native session's game once: the lifecycle layer's record.
        games = [g for g in api.get("/api/v1/status").json()["games"] if g["client"] == NAME]
        assert len(games) == 1 and games[0]["title"] == APP, games
        assert games[0]["plane"] == "native" and games[0]["state"] == "running"

        # The player quits the game: game.exited (exited), and the session ends with it.
        os.kill(pid, signal.SIGTERM)
        page_wait(page, "() => window.nativePlayer.state === 'ended'", 15)
        live.wait(lambda evs: evs and evs[-1]["kind"] == "session.ended", what="session.ended")
        evs = live.drain()  # nothing more of ours may follow (a late duplicate, say)
        kinds = [e["kind"] for e in evs if mine(e) or e["kind"].startswith("session.")]
        assert kinds == ["game.running", "session.started", "game.exited", "session.ended"] or (
            kinds == ["session.started", "game.running", "game.exited", "session.ended"]
        ), kinds
        session_ids = {e["session"]["id"] for e in evs if e["kind"].startswith("session.")}
        assert len(session_ids) == 1, evs  # one session: started and ended
        exited = next(e for e in evs if e["kind"] == "game.exited")
        assert exited["reason"] == "exited" and exited["game"]["plane"] == "native", exited
        wait_for(
            lambda: not any(s["client"] == NAME for s in api.get("/api/v1/status").json()["games"]),
            timeout=10,
            what="the game gone from /status",
        )
