"""The fleet's management API in process, against real TLS members on loopback
(tests/fleet/fake_member.py): the fleet token's reach, token minting, joins and refresh."""

from __future__ import annotations

import json
import logging
import time

import pytest
from django.test import Client, RequestFactory
from django.urls import resolve

from access import fleet_tokens, mgmt, tokens
from fleet import member_tokens, member_view, refresh
from fleet.models import Member
from tests.access.v1_routes import sample_path, v1_routes
from tests.fleet import fake_member

pytestmark = pytest.mark.django_db

ADMIN_TOKEN = "1" * 64
PLUGIN_TOKEN = "2" * 64
MEMBER_TOKEN = "ab" * 32


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("HOST_MGMT_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("HOST_PLUGIN_TOKEN", PLUGIN_TOKEN)
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "state").mkdir()
    tokens._cache.clear()


@pytest.fixture
def member(tmp_path):
    m = fake_member.start(tmp_path, MEMBER_TOKEN)
    yield m
    m.stop()


def call(method, path, token=ADMIN_TOKEN, body=None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    data = json.dumps(body) if body is not None else None
    return Client().generic(method, path, data or "", content_type="application/json", **headers)


def join_body(member, **over):
    return {"url": member.url, "token": MEMBER_TOKEN, "fingerprint": member.fingerprint, **over}


# --- the fleet token's reach on the member ------------------------------------------------


def test_every_fleet_allowed_route_exists_with_its_methods():
    routes = v1_routes()
    for route, methods in mgmt.FLEET_ALLOWED.items():
        assert route in routes, f"{route}: not a route"
        assert methods <= routes[route], f"{route}: allows a method its view lacks"


def test_an_unclassified_route_is_refused_to_the_fleet_token():
    assert not mgmt.fleet_allowed("api/v1/some/new/route", "GET")
    assert not mgmt.fleet_allowed(None, "GET")
    assert not mgmt.fleet_allowed("api/v1/library", "POST")
    assert mgmt.fleet_allowed("api/v1/library", "HEAD")


@pytest.mark.parametrize(
    "route, method", sorted((r, m) for r, ms in v1_routes().items() for m in ms)
)
def test_the_fleet_token_reaches_exactly_its_allow_list(route, method):
    """Every route and method of the URL map: outside FLEET_ALLOWED a 403 with the fleet
    body, before the view runs (so writes here change nothing)."""
    token = fleet_tokens.mint("fleet-a")
    path = sample_path(route)
    allowed = mgmt.fleet_allowed(mgmt.V1_ROUTE_PREFIX + route, method)
    if allowed and route == "events":
        return  # the event stream is checked in test_fleet_e2e (it streams)
    if allowed and method != "GET":
        request = RequestFactory().generic(method, path)
        request.resolver_match = resolve(path)
        assert mgmt.scope_refusal(request, mgmt.MgmtPrincipal("fleet")) is None
        return  # ending sessions needs the session manager; the verdict is what is tested
    r = call(method, path, token, body={} if method != "GET" else None)
    if allowed:
        assert r.status_code not in (401, 403), (route, method, r.content)
    else:
        assert r.status_code == 403, (route, method, r.status_code)
        assert r.json() == {"error": mgmt.FLEET_FORBIDDEN}


def test_whoami_names_each_role():
    fleet = fleet_tokens.mint("f")
    assert call("GET", "/api/v1/fleet/whoami").json()["role"] == "admin"
    assert call("GET", "/api/v1/fleet/whoami", PLUGIN_TOKEN).json()["role"] == "plugin"
    body = call("GET", "/api/v1/fleet/whoami", fleet).json()
    assert body["role"] == "fleet"
    assert "DELETE /api/v1/session" in body["reach"]
    assert not any("host/config" in r for r in body["reach"])
    assert call("GET", "/api/v1/fleet/whoami", "3" * 64).status_code == 401


def test_fleet_tokens_are_minted_listed_and_revoked_by_the_admin_only():
    r = call("POST", "/api/v1/fleet/tokens", body={"name": "hall"})
    assert r.status_code == 201
    token = r.json()["token"]
    assert r.json()["name"] == "hall"
    listing = call("GET", "/api/v1/fleet/tokens").json()
    assert [t["name"] for t in listing] == ["hall"]
    assert token not in json.dumps(listing)
    assert call("GET", "/api/v1/host", token).status_code == 200
    for who in (PLUGIN_TOKEN, token):
        assert call("POST", "/api/v1/fleet/tokens", who, {"name": "x"}).status_code == 403
        assert call("GET", "/api/v1/fleet/tokens", who).status_code == 403
        assert call("DELETE", "/api/v1/fleet/tokens/hall", who).status_code == 403
    assert call("POST", "/api/v1/fleet/tokens", body={"name": "hall"}).status_code == 409
    bad = call("POST", "/api/v1/fleet/tokens", body={"name": "a\u0000b"})
    assert bad.status_code == 400 and "name" in bad.json()["error"]
    assert call("DELETE", "/api/v1/fleet/tokens/hall").status_code == 204
    assert call("GET", "/api/v1/host", token).status_code == 401  # revoked at once
    assert call("DELETE", "/api/v1/fleet/tokens/hall").status_code == 404


# --- joining members -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # the refresh pool writes from its own threads
def test_join_refresh_and_remove(member, caplog):
    caplog.set_level(logging.DEBUG)
    r = call("POST", "/api/v1/fleet/members", body=join_body(member))
    assert r.status_code == 201, r.content
    shown = r.json()
    assert shown["url"] == member.url and shown["fingerprint"] == member.fingerprint
    assert MEMBER_TOKEN not in r.content.decode()
    assert member_tokens.get(shown["id"]) == MEMBER_TOKEN
    assert call("POST", "/api/v1/fleet/members", body=join_body(member)).status_code == 409

    runner = refresh.Refresher(pool_size=2, request_timeout_s=2)
    for f in runner.run():
        f.result(10)
    got = call("GET", f"/api/v1/fleet/members/{shown['id']}").json()
    assert got["reachable"] is True and got["error"] == ""
    assert got["name"] == "member-a" and got["version"] == "9.9.9"
    assert got["live_sessions"] == 1
    assert got["titles"] == [
        {"id": "desktop", "name": "Desktop"},
        {"id": "steam:570", "name": "Dota 2"},
    ]
    assert got["gpus"][0]["id"] == "10de-2684-0" and got["gpu_selected"] == "10de-2684-0"
    assert got["displays"] == {"total": 2, "active": 1, "lingering": 0, "pinned": 1}
    assert got["refresh_ms"] is not None and got["refreshed_at"]
    # What placement reads of the refreshed view: titles, a free slot, a GPU encoder.
    capacity = member_view.read(Member.objects.get(pk=shown["id"]).view)
    assert capacity.titles == {"desktop": "Desktop", "steam:570": "Dota 2"}
    assert capacity.free_slots == 1 and capacity.gpu_encoder is True

    member.name = "evil\x1b[31m" + "n" * 100  # renamed, with control characters
    for f in runner.run():
        f.result(10)
    got = call("GET", "/api/v1/fleet/members").json()[0]
    assert got["name"] == "evil[31m" + "n" * 56
    assert got["previous_name"] == "member-a"

    member.token = "cd" * 32  # the member revoked ours
    for f in runner.run():
        f.result(10)
    got = call("GET", "/api/v1/fleet/members").json()[0]
    assert not got["reachable"] and "refused the token (401" in got["error"]
    runner.close()

    listing = call("GET", "/api/v1/fleet/members").content.decode()
    assert MEMBER_TOKEN not in listing and MEMBER_TOKEN not in caplog.text
    assert call("DELETE", f"/api/v1/fleet/members/{shown['id']}").status_code == 204
    assert member_tokens.get(shown["id"]) is None
    assert not Member.objects.exists()
    assert call("DELETE", f"/api/v1/fleet/members/{shown['id']}").status_code == 404


def test_a_wrong_fingerprint_is_refused_before_any_request(member):
    r = call("POST", "/api/v1/fleet/members", body=join_body(member, fingerprint="c" * 64))
    assert r.status_code == 422
    assert "fingerprint" in r.json()["error"] and "nothing was sent" in r.json()["error"]
    assert member.seen == []
    assert not Member.objects.exists()


@pytest.mark.parametrize(
    "role, token, words",
    [
        ("admin", MEMBER_TOKEN, "over-scoped"),
        ("plugin", MEMBER_TOKEN, "under-scoped"),
        ("fleet", "cd" * 32, "refused the token"),
    ],
)
def test_tokens_that_are_not_a_fleet_token_are_refused(member, role, token, words):
    member.role = role
    r = call("POST", "/api/v1/fleet/members", body=join_body(member, token=token))
    assert r.status_code == 422, r.content
    assert words in r.json()["error"]
    assert token not in r.content.decode()
    assert not Member.objects.exists()
    assert member_tokens.get(1) is None


def test_an_unreachable_or_slow_member_is_a_gateway_error(member, monkeypatch):
    from fleet import membership

    monkeypatch.setattr(membership, "JOIN_TIMEOUT_S", 0.5)
    member.delay_s = 2
    r = call("POST", "/api/v1/fleet/members", body=join_body(member))
    assert r.status_code == 504 and "timed out" in r.json()["error"]
    member.stop()
    r = call("POST", "/api/v1/fleet/members", body=join_body(member))
    assert r.status_code == 502 and "could not be asked" in r.json()["error"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"url": "http://127.0.0.1:1", "token": MEMBER_TOKEN, "fingerprint": "a" * 64}, "url"),
        ({"url": "https://h:1/x", "token": MEMBER_TOKEN, "fingerprint": "a" * 64}, "url"),
        ({"url": "https://h:1", "token": "x" * 64, "fingerprint": "a" * 64}, "token"),
        ({"url": "https://h:1", "token": MEMBER_TOKEN, "fingerprint": "zz"}, "fingerprint"),
        ({"url": "https://h:1", "token": MEMBER_TOKEN, "fingerprint": "a" * 64, "x": 1}, "x"),
        ({"url": ["x"], "token": None, "fingerprint": 5}, "url"),
    ],
)
def test_bad_fields_are_400_naming_the_field(body, field):
    r = call("POST", "/api/v1/fleet/members", body=body)
    assert r.status_code == 400
    assert field in {f["field"] for f in r.json()["fields"]}
    assert MEMBER_TOKEN not in r.content.decode()


def test_this_host_cannot_join_itself(member, monkeypatch):
    from fleet import identity

    monkeypatch.setattr(identity, "fingerprint", lambda: member.fingerprint)
    r = call("POST", "/api/v1/fleet/members", body=join_body(member))
    assert r.status_code == 400 and "itself" in r.json()["error"]
    assert member.seen == []


def test_members_routes_are_the_admins_only(member):
    fleet = fleet_tokens.mint("f")
    for who in (PLUGIN_TOKEN, fleet):
        assert call("POST", "/api/v1/fleet/members", who, join_body(member)).status_code == 403
        assert call("GET", "/api/v1/fleet/members", who).status_code == 403
        assert call("DELETE", "/api/v1/fleet/members/1", who).status_code == 403
    assert member.seen == []


# --- refresh: parallel, bounded, backoff ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_slow_member_does_not_delay_the_others_and_failures_back_off(tmp_path, member):
    slow = fake_member.start(tmp_path, MEMBER_TOKEN, seed=8, name="slow", delay_s=1.5)
    try:
        fast_id = call("POST", "/api/v1/fleet/members", body=join_body(member)).json()["id"]
        slow_id = call("POST", "/api/v1/fleet/members", body=join_body(slow)).json()["id"]
        runner = refresh.Refresher(pool_size=4, request_timeout_s=0.5)
        started = time.monotonic()
        futures = runner.run()
        futures[0].result(5)  # the fast member, asked first
        fast_done = time.monotonic() - started
        assert Member.objects.get(pk=fast_id).reachable
        assert fast_done < 1.0, fast_done
        assert slow_id in runner._inflight
        again = runner.run()  # the slow one is still in flight: not asked twice
        assert len(again) == 1 and slow_id in runner._inflight
        again[0].result(5)
        futures[1].result(10)
        slow_row = Member.objects.get(pk=slow_id)
        assert not slow_row.reachable and "timed out" in slow_row.error
        assert runner.backoff_s(slow_id) >= 1.0
        assert len(runner.run()) == 1 and slow_id not in runner._inflight  # backs off
        runner._failures[slow_id] = 30
        assert runner.backoff_s(slow_id) == refresh.BACKOFF_MAX_S
        runner.close()
    finally:
        slow.stop()
