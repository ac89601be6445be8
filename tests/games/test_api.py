"""GET/PUT /api/v1/session/settings and POST /api/v1/game/end through the real API stack."""

from __future__ import annotations

import json
import os
import signal

import pytest
from rest_framework.test import APIClient

from common import procs
from games import lifecycle, registry
from games import session_settings as game_settings
from tests.games.conftest import game_events, wait_for

DEFAULTS = {"version": 1, "game_on_session_end": "keep", "session_on_game_exit": True,
            "disconnect_grace_seconds": 300}  # fmt: skip


@pytest.fixture
def v1(settings, state):
    settings.HOST_NO_MGMT_TOKEN = True  # loopback host without a token: no auth to set up
    # a tokenless host takes writes only with a header no cross-site page can send
    return APIClient(HTTP_X_REQUESTED_WITH="tests")


def put(v1, body):
    return v1.put("/api/v1/session/settings", body, format="json")


def test_settings_defaults_then_round_trip(v1, state):
    r = v1.get("/api/v1/session/settings")
    assert r.status_code == 200
    assert r.json() == {"settings": DEFAULTS, "configured": False,
                        "enforced": ["game_on_session_end", "session_on_game_exit",
                                     "disconnect_grace_seconds"]}  # fmt: skip
    body = {"version": 1, "game_on_session_end": "always", "session_on_game_exit": False,
            "disconnect_grace_seconds": 10}  # fmt: skip
    r = put(v1, body)
    assert r.status_code == 200 and r.json()["settings"] == body and r.json()["configured"]
    assert json.loads((state / "session-settings.json").read_text()) == body
    assert v1.get("/api/v1/session/settings").json()["settings"] == body
    assert game_settings.load().game_on_session_end == "always"  # what a session end reads
    # Omitted fields return to their defaults (whole-document PUT).
    r = put(v1, {"game_on_session_end": "on_quit"})
    assert r.json()["settings"] == {**DEFAULTS, "game_on_session_end": "on_quit"}


@pytest.mark.parametrize(
    "body, field",
    [
        ({"version": 2}, "version"),
        ({"version": "1"}, "version"),
        ({"disconnect_grace_seconds": 9}, "disconnect_grace_seconds"),
        ({"disconnect_grace_seconds": 86401}, "disconnect_grace_seconds"),
        ({"disconnect_grace_seconds": "300"}, "disconnect_grace_seconds"),
        ({"disconnect_grace_seconds": True}, "disconnect_grace_seconds"),
        ({"game_on_session_end": "never"}, "game_on_session_end"),
        ({"session_on_game_exit": "yes"}, "session_on_game_exit"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_settings_are_400_with_fields_and_nothing_written(v1, state, body, field):
    r = put(v1, body)
    assert r.status_code == 400, r.content
    assert field in [f["field"] for f in r.json()["fields"]]
    assert not (state / "session-settings.json").exists()


def test_settings_edges_are_accepted(v1):
    for grace in (10, 86400):
        assert put(v1, {"disconnect_grace_seconds": grace}).status_code == 200


def test_settings_body_must_be_an_object(v1, state):
    r = v1.put("/api/v1/session/settings", [1], format="json")
    assert r.status_code == 400
    assert not (state / "session-settings.json").exists()


def test_hand_broken_file_reads_as_defaults_per_field(v1, state):
    (state / "session-settings.json").write_text(
        '{"version": 1, "game_on_session_end": "always", "disconnect_grace_seconds": 5}'
    )
    s = v1.get("/api/v1/session/settings").json()["settings"]
    assert s["game_on_session_end"] == "always" and s["disconnect_grace_seconds"] == 300
    (state / "session-settings.json").write_text("{not json")
    assert v1.get("/api/v1/session/settings").json()["settings"] == DEFAULTS


def test_game_end_ends_a_waiting_game_and_leaves_live_ones(v1, launch):
    game_settings.save(game_settings.SessionSettings(game_on_session_end="always"))
    waiting, live = launch(), launch()
    k1 = lifecycle.game_launched(1, "custom:a", "A", client="Deck", detect=None,
                                 pgid=waiting.pgid, exit_timeout=1)  # fmt: skip
    k2 = lifecycle.game_launched(2, "custom:b", "B", client="TV", detect=None,
                                 pgid=live.pgid, exit_timeout=1)  # fmt: skip
    assert wait_for(lambda: all(registry.get(k)["state"] == "running" for k in (k1, k2)))
    # Nothing waits yet: both sessions are live.
    r = v1.post("/api/v1/game/end", {}, format="json")
    assert r.status_code == 409 and "error" in r.json()
    lifecycle.session_ended(1, deliberate=False)
    r = v1.post("/api/v1/game/end", {"app_id": "custom:nope"}, format="json")
    assert r.status_code == 409
    r = v1.post("/api/v1/game/end", {"app_id": "custom:b"}, format="json")
    assert r.status_code == 409  # its session is live
    r = v1.post("/api/v1/game/end", {}, format="json")
    assert r.status_code == 200 and r.json() == {"ended": 1}
    assert not procs.alive(waiting.game_pid()) and procs.alive(live.game_pid())
    [ev] = game_events("game.exited")
    assert ev["reason"] == "terminated" and ev["game"]["title"] == "A"
    assert v1.post("/api/v1/game/end", {}, format="json").status_code == 409
    os.kill(live.game_pid(), signal.SIGKILL)


@pytest.mark.parametrize("body", [{"app_id": 5}, {"app_id": ""}, [1]])
def test_game_end_bad_body_is_400(v1, body):
    assert v1.post("/api/v1/game/end", body, format="json").status_code == 400
