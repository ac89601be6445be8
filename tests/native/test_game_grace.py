"""Keep, grace and reconnect on the native plane, end to end (headless Chromium on /play).

A catalog app whose launcher starts a child "game" and exits is played with the session
settings (`PUT /api/v1/session/settings`) set for the case; then the player's peer vanishes,
without Stop, so the session settings decide (not a deliberate end).

- `always` + `disconnect_grace_seconds`: the page drops its connection (the host sees it at
  once, `client.disconnected` reason `quit`); the game keeps running in state `grace` (no
  `game.exited`); the same device back inside the window takes the waiting game over (same
  pid, the launcher not run again, no second `game.running`) and plays on; it drops again
  and nobody comes back: the game is closed when the window ends (`game.exited` reason
  `terminated`, `disconnect_grace_seconds` after `session.ended`) and none of the app's
  processes is left.
- `keep`: the tab is closed; the host notices only when ICE consent expires (~30 s,
  `client.disconnected` reason `timeout`); the game runs on, detached from any session.

The grace window is the API's minimum, 10 s (mgmt-api-records §1.3: 10-86400, others are
refused). Events come from one live stream held open through each test (`LiveEvents`: in
order, each once). About 19 s and 42 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.native.browserkit import page_wait, self_paired, wait_for
from tests.native.helpers import LiveEvents, pids_named

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NAME = "grace player"
APP = "Native Grace"
GAME = "nativegracegame"  # the child's argv[0]: the detect hint
GRACE = 10  # seconds: the smallest disconnect_grace_seconds the API accepts
MARK = "NATIVE_GRACE_TEST_MARK"  # in the entry's env: every process of the app carries it
KINDS = "game.*,session.*,client.*"
PLAYING = "() => window.nativePlayer.state === 'playing'"


def game_pids() -> list[int]:
    return pids_named(GAME)


def marked(mark: str) -> list[int]:
    """Live (not zombie) processes whose environment carries this test's mark."""
    needle = f"{MARK}={mark}\0".encode()
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            env = Path(f"/proc/{p}/environ").read_bytes() + b"\0"
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state != "Z":
            found.append(int(p))
    return found


class App:
    def __init__(self, tmp_path: Path):
        self.mark = str(tmp_path)
        self.launches = tmp_path / "launches"  # one line per run of the launcher

    def launched(self) -> int:
        return len(self.launches.read_text().splitlines()) if self.launches.exists() else 0


@pytest.fixture
def grace_app(live_host, admin_auth, tmp_path):
    app = App(tmp_path)
    (tmp_path / "launcher.sh").write_text(
        f"#!/bin/bash\necho $$ >> {app.launches}\n( exec -a {GAME} sleep 300 ) &\nexit 0\n"
    )
    entry = {
        "index": -1,
        "name": APP,
        "cmd": f"exec bash {tmp_path}/launcher.sh",
        "exit-timeout": 2,
        "detect": {"process_name": GAME},
        "env": {MARK: app.mark},
    }
    with live_host.client(auth=admin_auth) as admin:
        r = admin.post("/api/apps", json=entry)
        assert r.status_code == 200 and r.json()["status"] is True, r.text
        try:
            yield app
        finally:
            apps = admin.get("/api/apps").json()["apps"]
            index = next(i for i, a in enumerate(apps) if a["name"] == APP)
            admin.delete(f"/api/apps/{index}")
            for pid in marked(app.mark) + game_pids():  # never leave the game behind
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def session_settings(live_host):
    """PUT the session settings for the test; the host's own ones are restored afterwards."""
    path = live_host.state_dir / "session-settings.json"
    saved = path.read_text() if path.exists() else None
    api = live_host.mgmt()

    def put(**body):
        r = api.put("/api/v1/session/settings", json=body)
        assert r.status_code == 200, r.text
        assert r.json()["settings"] == {"version": 1, "session_on_game_exit": True, **body}
        return r.json()["settings"]

    try:
        yield put
    finally:
        if saved is None:
            path.unlink(missing_ok=True)  # as it was: never configured (the defaults)
        else:
            assert api.put("/api/v1/session/settings", json=json.loads(saved)).status_code == 200
        api.close()


def my_games(api, exited: bool = False) -> list[dict]:
    """This test's rows of `/api/v1/status` `games`; exited rows (the lifecycle layer lists
    them for 5 s, an earlier test's too) only when asked."""
    rows = api.get("/api/v1/status").json()["games"]
    return [g for g in rows if g["client"] == NAME and (exited or g["state"] != "exited")]


def alive(api, sid: str) -> bool:
    """The session is live: its game row names it (a session id is no pid; the registry
    entry goes when the session's process has handed everything back)."""
    games = api.get("/api/v1/status").json()["games"]
    return any(g.get("session_id") == sid for g in games)


def record(live_host) -> dict:
    """The lifecycle layer's record of this test's game (the newest one not exited)."""
    records = json.loads((live_host.state_dir / "games.json").read_text()).values()
    mine = [r for r in records if r.get("title") == APP and r.get("state") != "exited"]
    assert len(mine) == 1, mine
    return mine[0]


def mine(ev: dict) -> bool:
    return ev["kind"].startswith("game.") and ev["game"]["title"] == APP


def session_event(kind: str, sid: int | None = None, after: int | None = None):
    """`until` for LiveEvents: the first `kind` event of session `sid` (any, if None) with a
    seq above `after`."""

    def find(evs):
        for e in evs:
            if e["kind"] == kind and sid in (None, e["session"]["id"]) and e["seq"] > (after or 0):
                return e
        return None

    return find


def vanish(player) -> None:
    """The player's connection drops without Stop: the page closes its RTCPeerConnection
    (DTLS close_notify) without sending `{"t": "stop"}`, and forgets it, so it neither
    reconnects by itself nor says anything more. The host sees it at once."""
    player.page.evaluate(
        "() => { const s = window.nativePlayer, pc = s.pc; s.pc = null; s.dc = null; pc.close(); }"
    )


def kill_browser(started_after: float) -> None:
    """SIGKILL the Chromium this test launched (every process of it started after
    `started_after` under this test process): no pagehide, no DTLS close, just silence."""
    victims = []
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if p.create_time() >= started_after - 1 and "chromium" in p.name():
                victims.append(p)
    assert victims, "no browser process of this test found"
    for p in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(victims, timeout=5)


def come_back(player) -> None:
    """The same device (the page's stored DTLS certificate) presses Start again with the same
    app: a new offer, a new peer process (paired now, no PIN)."""
    fp = player.fingerprint
    player.page.evaluate("() => { window.nativePlayer.host = {}; }")  # the old session's figures
    player.start(PLAYING)
    assert player.fingerprint == fp


def test_vanished_peer_grace_reconnect_then_expiry(live_host, grace_app, session_settings):
    session_settings(game_on_session_end="always", disconnect_grace_seconds=GRACE)
    with LiveEvents(live_host, KINDS) as live, self_paired(live_host, NAME, app=APP) as player:
        api = player.api
        player.start()
        started = live.wait(session_event("session.started"), what="session.started")
        sid1 = started["session"]["id"]
        live.wait(lambda evs: [e for e in evs if mine(e)], what="game.running")
        [pid] = wait_for(game_pids, timeout=5, what="the game")
        assert grace_app.launched() == 1
        [row] = my_games(api)
        assert (row["state"], row["session_id"], row["plane"]) == ("running", sid1, "native")

        # (a) The connection drops without Stop: the session ends as vanished, the game waits.
        vanish(player)
        ended = live.wait(session_event("session.ended", sid1), what="session.ended")
        gone = live.wait(
            lambda evs: next((e for e in evs if e["kind"] == "client.disconnected"), None),
            what="client.disconnected",
        )
        assert gone["client"]["plane"] == "native" and gone["client"]["name"] == NAME, gone
        assert gone["reason"] == "quit", gone  # the browser closed it (not Stop, not silence)
        wait_for(lambda: not alive(api, sid1), timeout=10, what="the first peer process gone")
        [row] = my_games(api)
        assert row["state"] == "grace" and "session_id" not in row, row
        assert 0 < row["grace_remaining_s"] <= GRACE, row
        rec = record(live_host)
        assert rec["state"] == "grace" and rec["session_id"] is None, rec
        assert rec["game"]["pid"] == pid
        assert game_pids() == [pid]  # still running, waiting for its player
        assert [e["kind"] for e in live.events if mine(e)] == ["game.running"]

        # (b) The same device is back inside the window: it takes the waiting game over.
        come_back(player)
        back = live.wait(session_event("session.started", after=ended["seq"]), what="a new session")
        sid2 = back["session"]["id"]
        assert sid2 != sid1
        assert back["ts_ms"] - ended["ts_ms"] < GRACE * 1000, "came back too late to resume"
        [row] = my_games(api)
        assert (row["state"], row["session_id"]) == ("running", sid2), row
        assert record(live_host)["session_id"] == sid2
        assert game_pids() == [pid]  # the same game, no second copy
        assert grace_app.launched() == 1  # the launcher did not run again
        assert alive(api, sid2) and api.get("/api/v1/status").json()["active_sessions"] == 1
        # and the session goes on: the new peer streams (its figures reach the page).
        page_wait(player.page, "() => (window.nativePlayer.host.fps || 0) > 0", 10)
        page_wait(player.page, PLAYING, 1)

        # (c) The player closes the tab and nobody comes back: the page lets go of its
        # connection as it goes (pagehide), so the host knows at once, not ~30 s later when
        # ICE consent expires; the game is closed when grace ends.
        player.page.close()
        ended2 = live.wait(
            session_event("session.ended", sid2), timeout=5, what="the second session.ended"
        )
        assert my_games(api)[0]["state"] == "grace"
        exited = live.wait(
            lambda evs: next((e for e in evs if mine(e) and e["kind"] == "game.exited"), None),
            timeout=GRACE + 15,
            what="game.exited at the end of the grace window",
        )
        assert exited["reason"] == "terminated", exited
        assert exited["game"]["plane"] == "native" and exited["game"]["client"] == NAME, exited
        waited = (exited["ts_ms"] - ended2["ts_ms"]) / 1000
        print(f"grace: game.exited {waited:.2f} s after session.ended (window {GRACE} s)")
        assert GRACE - 0.5 <= waited <= GRACE + 5, waited
        wait_for(lambda: not game_pids(), timeout=5, what="the game process gone")
        wait_for(lambda: not marked(grace_app.mark), timeout=5, what="no process of the app")
        assert not alive(api, sid2) and api.get("/api/v1/status").json()["active_sessions"] == 0
        assert not my_games(api), my_games(api)
        evs = live.drain()
        assert [e["kind"] for e in evs if mine(e)] == ["game.running", "game.exited"]
        sessions = [(e["kind"], e["session"]["id"]) for e in evs if e["kind"].startswith("sess")]
        assert sessions == [
            ("session.started", sid1),
            ("session.ended", sid1),
            ("session.started", sid2),
            ("session.ended", sid2),
        ], sessions
        assert grace_app.launched() == 1


def test_vanished_peer_keep_leaves_game_running(live_host, grace_app, session_settings):
    session_settings(game_on_session_end="keep", disconnect_grace_seconds=GRACE)
    started_after = time.time()
    with LiveEvents(live_host, KINDS) as live, self_paired(live_host, NAME, app=APP) as player:
        api = player.api
        player.start()
        sid = live.wait(session_event("session.started"), what="session.started")["session"]["id"]
        live.wait(lambda evs: [e for e in evs if mine(e)], what="game.running")
        [pid] = wait_for(game_pids, timeout=5, what="the game")

        # (d) The device is gone without a word (powered off, off the network): the host gives
        # up on the peer when ICE consent expires (~30 s). The session ends, the game is kept,
        # not waiting. (Closing the tab is not this: the page says goodbye, see (c) above.)
        kill_browser(started_after)
        live.wait(session_event("session.ended", sid), timeout=60, what="session.ended")
        gone = live.wait(
            lambda evs: next((e for e in evs if e["kind"] == "client.disconnected"), None),
            what="client.disconnected",
        )
        assert gone["reason"] == "timeout", gone  # vanished, per the event's vocabulary
        wait_for(lambda: not alive(api, sid), timeout=10, what="the peer process gone")
        [row] = my_games(api)
        assert row["state"] == "running" and "session_id" not in row, row
        assert "grace_remaining_s" not in row
        rec = record(live_host)
        assert rec["session_id"] is None and not rec.get("grace_deadline"), rec
        assert rec["game"]["pid"] == pid
        # Nothing ends it: no game.exited for a while, and the game lives on its own.
        evs = live.drain(quiet=3.0)
        assert [e["kind"] for e in evs if mine(e)] == ["game.running"], evs
        assert game_pids() == [pid]
        assert my_games(api)[0]["state"] == "running"
        assert grace_app.launched() == 1
