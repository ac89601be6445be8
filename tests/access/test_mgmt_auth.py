"""Management API (/api/v1) authentication, in process."""

from __future__ import annotations

import pytest
from django.test import Client, RequestFactory, override_settings
from django.urls import resolve

from access import mgmt, tokens
from tests.access.v1_routes import v1_routes

pytestmark = pytest.mark.django_db

ADMIN_TOKEN = "1" * 64
PLUGIN_TOKEN = "2" * 64


@pytest.fixture(autouse=True)
def token_env(monkeypatch):
    monkeypatch.setenv("HOST_MGMT_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("HOST_PLUGIN_TOKEN", PLUGIN_TOKEN)
    tokens._cache.clear()


def get(path, auth=None):
    headers = {"HTTP_AUTHORIZATION": auth} if auth is not None else {}
    return Client().get(path, **headers)


def test_health_needs_no_token():
    r = get("/api/v1/health")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


@pytest.mark.parametrize(
    "auth",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        f"Basic {ADMIN_TOKEN}",
        f"Token {ADMIN_TOKEN}",
        f"Bearer {ADMIN_TOKEN[:-1]}",
        f"Bearer {ADMIN_TOKEN}0",
        f"Bearer {'3' * 64}",
        f"Bearer HOST_MGMT_TOKEN={ADMIN_TOKEN}",  # the token file's content pasted whole
        "Bearer \u00e9" + "1" * 63,
    ],
)
def test_bad_credentials_get_401_with_error_body(auth):
    r = get("/api/v1/host", auth)
    assert r.status_code == 401
    body = r.json()
    assert set(body) == {"error"}
    assert ADMIN_TOKEN not in r.content.decode()
    assert r["WWW-Authenticate"].startswith("Bearer")


def test_admin_and_plugin_tokens_read_host():
    assert get("/api/v1/host", f"Bearer {ADMIN_TOKEN}").status_code == 200
    assert get("/api/v1/host", f"bearer {PLUGIN_TOKEN}").status_code == 200


def test_unknown_route_is_401_without_token_and_404_with_it():
    assert get("/api/v1/no-such-route").status_code == 401
    r = get("/api/v1/no-such-route", f"Bearer {ADMIN_TOKEN}")
    assert r.status_code == 404
    assert r.json() == {"error": "not found"}


@override_settings(HOST_NO_MGMT_TOKEN=True)
def test_tokenless_host_answers_without_auth():
    assert get("/api/v1/host").status_code == 200


def test_every_v1_route_is_classified_for_the_plugin_token():
    """A new route must be put in one table; until then the plugin token is refused there."""
    routes = v1_routes()
    allowed, denied = set(mgmt.PLUGIN_ALLOWED), set(mgmt.PLUGIN_DENIED)
    assert not allowed & denied
    assert allowed | denied == set(routes), "classify new routes in access/mgmt.py"
    for route, methods in mgmt.PLUGIN_ALLOWED.items():
        assert methods <= routes[route], f"{route}: allows a method its view lacks"


def test_an_unclassified_route_is_refused_to_the_plugin_token():
    assert not mgmt.plugin_allowed("api/v1/some/new/route", "GET")
    assert not mgmt.plugin_allowed(None, "GET")
    assert not mgmt.plugin_allowed("api/v1/library", "DELETE")
    assert mgmt.plugin_allowed("api/v1/library", "HEAD")


@pytest.mark.parametrize(
    "path, method, denied",
    [
        ("/api/v1/hooks", "GET", True),
        ("/api/v1/hooks", "PUT", True),
        ("/api/v1/update/status", "GET", True),
        ("/api/v1/update/check", "POST", True),
        ("/api/v1/update/apply", "POST", True),
        ("/api/v1/native/pending/7/approve", "POST", True),
        ("/api/v1/native/pair/arm", "POST", True),
        ("/api/v1/clients/" + "a" * 64, "DELETE", True),
        ("/api/v1/clients", "GET", True),
        ("/api/v1/host/restart", "POST", True),
        ("/api/v1/host/config", "PUT", True),
        ("/api/v1/host/config", "GET", True),
        ("/api/v1/host/compat", "PUT", True),
        ("/api/v1/display/settings", "PUT", True),
        ("/api/v1/gpus/preference", "PUT", True),
        ("/api/v1/session/settings", "PUT", True),
        ("/api/v1/logs", "GET", True),
        ("/api/v1/library/custom/abc", "GET", True),
        ("/api/v1/library/custom/abc", "PUT", False),
        ("/api/v1/events", "GET", False),
        ("/api/v1/status", "GET", False),
        ("/api/v1/library", "GET", False),
        ("/api/v1/host", "GET", False),
        ("/api/v1/session", "DELETE", False),
        ("/api/v1/game/end", "POST", False),
    ],
)
def test_plugin_token_reach(path, method, denied):
    request = RequestFactory().generic(method, path)
    request.resolver_match = resolve(path)
    assert mgmt.plugin_denied(request) is denied


def _post(path, **headers):
    return Client().post(path, data="{}", **headers)


@override_settings(HOST_NO_MGMT_TOKEN=True)
@pytest.mark.parametrize(
    "headers",
    [
        {"content_type": "text/plain"},
        {"content_type": "application/x-www-form-urlencoded"},
        {"content_type": "multipart/form-data; boundary=x"},
        {"content_type": "text/plain", "HTTP_AUTHORIZATION": "Basic YWRtaW46eA=="},
        {"content_type": "application/json", "HTTP_ORIGIN": "https://evil.example"},
        {"content_type": "application/json", "HTTP_ORIGIN": "null"},
        {"content_type": "application/json", "HTTP_SEC_FETCH_SITE": "cross-site"},
        {"content_type": "application/json", "HTTP_SEC_FETCH_SITE": "same-site"},
        {"content_type": "text/plain", "HTTP_REFERER": "https://testserver/"},
    ],
)
def test_tokenless_host_refuses_simple_or_cross_site_writes(headers):
    r = _post("/api/v1/game/end", **headers)
    assert r.status_code == 403
    assert set(r.json()) == {"error"}


@override_settings(HOST_NO_MGMT_TOKEN=True)
@pytest.mark.parametrize(
    "headers",
    [
        {"content_type": "application/json"},
        {"content_type": "application/merge-patch+json"},
        {"content_type": "text/plain", "HTTP_X_REQUESTED_WITH": "script"},
        {"content_type": "text/plain", "HTTP_SEC_FETCH_SITE": "same-origin"},
        {"content_type": "text/plain", "HTTP_ORIGIN": "https://localhost"},
        {"content_type": "text/plain", "HTTP_ORIGIN": "https://testserver"},
    ],
)
def test_tokenless_host_takes_same_origin_or_non_simple_writes(headers):
    # passes the guard and reaches the view (which parses the body or answers 409)
    assert _post("/api/v1/game/end", **headers).status_code in (400, 409, 415)


@override_settings(HOST_NO_MGMT_TOKEN=True)
def test_tokenless_guard_spares_reads_and_real_tokens():
    assert get("/api/v1/host").status_code == 200
    r = _post(
        "/api/v1/game/end", content_type="text/plain", HTTP_AUTHORIZATION=f"Bearer {ADMIN_TOKEN}"
    )
    assert r.status_code in (400, 409, 415)


@pytest.mark.parametrize(
    "path, method, plugin_id, denied",
    [
        ("/api/v1/plugins/alpha", "PUT", "alpha", False),
        ("/api/v1/plugins/alpha", "DELETE", "alpha", False),
        ("/api/v1/plugins/alpha", "HEAD", "alpha", True),  # no GET on one registration
        ("/api/v1/plugins/alpha/ui-credential", "GET", "alpha", False),
        ("/api/v1/plugins/alpha/ui-credential", "DELETE", "alpha", True),
        ("/api/v1/plugins/alpha", "PUT", "beta", True),
        ("/api/v1/plugins/alpha", "DELETE", "beta", True),
        ("/api/v1/plugins/alpha/ui-credential", "GET", "beta", True),
        ("/api/v1/plugins/alpha", "PUT", None, True),  # the shared plugin token
        ("/api/v1/plugins/alpha/ui-credential", "GET", None, True),
        ("/api/v1/plugins", "GET", None, False),
        ("/api/v1/plugins", "GET", "beta", False),
        ("/api/v1/store/runtime", "GET", "alpha", True),
        ("/api/v1/store/runtime", "POST", "alpha", True),
        ("/api/v1/hooks", "GET", "alpha", True),
        ("/api/v1/library", "GET", "alpha", False),
    ],
)
def test_a_plugins_own_token_reaches_its_own_id_only(path, method, plugin_id, denied):
    request = RequestFactory().generic(method, path)
    request.resolver_match = resolve(path)
    principal = mgmt.MgmtPrincipal("plugin", plugin_id=plugin_id)
    assert mgmt.plugin_denied(request, principal) is denied
