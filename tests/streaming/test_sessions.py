"""Session history through GET /api/sessions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from streaming import history
from streaming.models import SessionRecord

# restore_config: the tokens a test mints live in the config file, which comes back as found
# (the console folder these tests came from did this for every test)
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("restore_config")]

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def sessions():
    rows = []
    for i, (app, client) in enumerate(
        [("Desktop", "tv"), ("Steam", "tv"), ("Steam", "laptop"), ("Desktop", "laptop")]
    ):
        rows.append(
            history.record_session(
                t_start=T0 + timedelta(hours=i),
                t_end=T0 + timedelta(hours=i, minutes=30),
                app_name=app,
                client_name=client,
                codec="hevc",
                width=1920,
                height=1080,
                fps=60,
                avg_bitrate_kbps=20000.0,
                samples=[{"t": 0, "bitrate_kbps": 19000, "rtt_ms": 3, "encode_ms": 2}],
                not_a_field="ignored",
            )
        )
    return rows


def get(admin, query=""):
    return Client().get("/api/sessions" + query, **admin)


def test_newest_first_with_every_record_field(admin, sessions):
    body = get(admin).json()
    assert body["status"] is True
    records = body["sessions"]
    assert [r["app_name"] for r in records] == ["Desktop", "Steam", "Steam", "Desktop"]
    assert records[0]["t_start"] > records[1]["t_start"]
    expected = {
        "id",
        "session_id",
        "t_start",
        "t_end",
        "app_name",
        "client_name",
        "client_address",
        "codec",
        "width",
        "height",
        "fps",
        "avg_bitrate_kbps",
        "avg_rtt_ms",
        "avg_encode_ms",
        "dropped_frames",
        "error",
    }
    assert set(records[0]) == expected


def test_filters(admin, sessions):
    steam = get(admin, "?app=Steam").json()["sessions"]
    assert {r["app_name"] for r in steam} == {"Steam"} and len(steam) == 2
    both = get(admin, "?app=Steam&client=tv").json()["sessions"]
    assert len(both) == 1 and both[0]["client_name"] == "tv"
    assert len(get(admin, "?limit=1").json()["sessions"]) == 1


@pytest.mark.parametrize(
    "query",
    ["?app=' OR 1=1 --", "?client=x%22%3B DROP TABLE streaming_sessionrecord;--", "?app=%00"],
)
def test_sql_looking_filters_match_nothing_and_harm_nothing(admin, sessions, query):
    r = get(admin, query)
    assert r.status_code == 200
    assert r.json()["sessions"] == []
    assert SessionRecord.objects.count() == 4


@pytest.mark.parametrize("query,status", [("?limit=-1", 400), ("?limit=x", 400), ("?limit=0", 400)])
def test_bad_limits_are_400(admin, sessions, query, status):
    r = get(admin, query)
    assert r.status_code == status
    assert r.json()["status"] is False


def test_huge_limit_is_clamped(admin, sessions):
    r = get(admin, "?limit=1000000000")
    assert r.status_code == 200 and len(r.json()["sessions"]) == 4


def test_detail_has_samples_and_unknown_is_404(admin, sessions):
    c = Client()
    r = c.get(f"/api/sessions/{sessions[0].pk}", **admin)
    assert r.status_code == 200
    assert r.json()["session"]["samples"][0]["bitrate_kbps"] == 19000
    assert c.get("/api/sessions/999999", **admin).status_code == 404


def test_needs_logs_scope(admin, sessions):
    from access import api_tokens

    token = api_tokens.mint("cfg", ["config:get"])
    r = Client().get("/api/sessions", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert r.status_code == 403


def test_session_filter_lists_one_sessions_streams(admin, sessions):
    for row, sid in zip(sessions, ["0a1b2c3d", "0a1b2c3d", "ffff0000", ""], strict=True):
        SessionRecord.objects.filter(pk=row.pk).update(session_id=sid)
    mine = get(admin, "?session=0a1b2c3d").json()["sessions"]
    assert [r["app_name"] for r in mine] == ["Steam", "Desktop"]
    assert {r["session_id"] for r in mine} == {"0a1b2c3d"}
    assert get(admin, "?session=12345678").json()["sessions"] == []


@pytest.mark.parametrize("bad", ["xyz", "0A1B2C3D", "0a1b2c3d0", "%27%20or%201=1", "%00"])
def test_malformed_session_filter_is_400(admin, sessions, bad):
    r = get(admin, f"?session={bad}")
    assert r.status_code == 400 and "session" in r.json()["error"]
