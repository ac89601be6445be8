"""The auth matrix: every route family against every kind of credential, on the real host.

Each row is a read-only route; each column a credential. The expected status is derived from
the rules of the two APIs, so a route that forgets its base view or scope shows up here.
"""

from __future__ import annotations

import pytest

from access import mgmt
from tests.access.v1_routes import sample_path, v1_routes
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER

pytestmark = pytest.mark.e2e

# (path, rule): rule is "open", "v1", "v1-plugin-denied" or an admin scope ("admin" = Basic/`*`).
ROUTES = [
    ("/api/v1/health", "open"),
    ("/api/v1/host", "v1"),
    ("/api/v1/host/config", "v1-plugin-denied"),
    ("/api/v1/gpus", "v1-plugin-denied"),
    ("/api/v1/display/state", "v1-plugin-denied"),
    ("/api/v1/clients", "v1-plugin-denied"),
    ("/api/v1/library", "v1"),
    ("/api/v1/status", "v1"),
    ("/api/v1/hooks", "v1-plugin-denied"),
    ("/api/v1/update/status", "v1-plugin-denied"),
    ("/api/health", "open"),
    ("/api/configLocale", "open"),
    ("/api/config", "config:get"),
    ("/api/apps", "apps:get"),
    ("/api/clients/list", "clients:list"),
    ("/api/logs", "logs:get"),
    ("/api/sessions", "logs:get"),
    ("/api/tokens", "tokens:manage"),
]

CREDENTIALS = ["none", "wrong", "plugin", "mgmt", "basic", "scoped-with", "scoped-without"]


def expected(rule: str, cred: str) -> int:
    if rule == "open":
        return 200
    if rule.startswith("v1"):
        if cred == "mgmt":
            return 200
        if cred == "plugin":
            return 403 if rule == "v1-plugin-denied" else 200
        return 401
    # admin API: scoped tokens and Basic only; management tokens are not admin credentials
    if cred == "basic":
        return 200
    if cred == "scoped-with":
        return 200
    if cred == "scoped-without":
        return 403
    return 401


@pytest.fixture(scope="module")
def scoped_tokens(live_host):
    """Mint, per scope, a token holding it and a token holding a different scope."""
    from tests.support.livehost import read_token  # noqa: F401 - keeps the import graph explicit

    minted: dict[str, tuple[str, str]] = {}
    names = []
    with live_host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as c:
        for _, rule in ROUTES:
            if rule in ("open",) or rule.startswith("v1") or rule in minted:
                continue
            other = "display:reset" if rule != "display:reset" else "logs:get"
            with_name, without_name = (
                f"m-{rule.replace(':', '-')}-y",
                f"m-{rule.replace(':', '-')}-n",
            )
            r1 = c.post("/api/tokens", json={"name": with_name, "scopes": [rule]})
            r2 = c.post("/api/tokens", json={"name": without_name, "scopes": [other]})
            assert r1.status_code == 200 and r2.status_code == 200, (r1.text, r2.text)
            minted[rule] = (r1.json()["token"], r2.json()["token"])
            names += [with_name, without_name]
    yield minted
    with live_host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as c:
        for name in names:
            c.delete(f"/api/tokens/{name}")


def headers_for(cred: str, rule: str, live_host, scoped_tokens) -> tuple[dict, tuple | None]:
    if cred == "none":
        return {}, None
    if cred == "wrong":
        return {"Authorization": "Bearer " + "0" * 64}, None
    if cred == "plugin":
        return {"Authorization": f"Bearer {live_host.plugin_token}"}, None
    if cred == "mgmt":
        return {"Authorization": f"Bearer {live_host.mgmt_token}"}, None
    if cred == "basic":
        return {}, (ADMIN_USER, ADMIN_PASSWORD)
    pair = scoped_tokens.get(rule) or next(iter(scoped_tokens.values()))
    token = pair[0] if cred == "scoped-with" else pair[1]
    return {"Authorization": f"Bearer {token}"}, None


@pytest.mark.parametrize("path, rule", ROUTES)
def test_route_answers_each_credential_as_documented(live_host, scoped_tokens, path, rule):
    results = {}
    with live_host.client() as c:
        for cred in CREDENTIALS:
            headers, auth = headers_for(cred, rule, live_host, scoped_tokens)
            r = c.get(path, headers=headers, auth=auth)
            results[cred] = r.status_code
            if r.status_code == 401:
                assert "WWW-Authenticate" in r.headers
            if r.status_code in (401, 403) and path.startswith("/api/v1/"):
                assert set(r.json()) == {"error"}
            elif r.status_code in (401, 403):
                assert r.json()["status"] is False
    want = {cred: expected(rule, cred) for cred in CREDENTIALS}
    if rule.startswith("v1"):
        # scoped admin-API tokens are not management credentials
        want["scoped-with"] = want["scoped-without"] = 401
    assert results == want


V1_CALLS = sorted((route, method) for route, methods in v1_routes().items() for method in methods)
V1_CREDENTIALS = ["none", "wrong", "basic", "scoped", "plugin", "own-x", "own-y", "fleet", "mgmt"]


@pytest.fixture(scope="module")
def own_tokens(live_host):
    """Per-plugin tokens bound to `x` (the id `sample_path` puts in plugin routes) and `y`,
    written where the runner keeps them in the live host's state dir."""
    import os

    from access import fleet_tokens, plugin_tokens

    old = os.environ.get("HOST_STATE_DIR")
    os.environ["HOST_STATE_DIR"] = str(live_host.state_dir)
    try:
        yield {
            "own-x": plugin_tokens.ensure("x"),
            "own-y": plugin_tokens.ensure("y"),
            "fleet": fleet_tokens.mint("matrix"),
        }
        plugin_tokens.prune(set())
        fleet_tokens.revoke("matrix")
    finally:
        if old is None:
            os.environ.pop("HOST_STATE_DIR", None)
        else:
            os.environ["HOST_STATE_DIR"] = old


@pytest.mark.parametrize("route, method", V1_CALLS)
def test_every_v1_route_and_method_answers_each_credential(
    live_host, scoped_tokens, own_tokens, route, method
):
    """Every pattern of the URL map x every method x every credential, on the real host.

    The plugin token reaches exactly `PLUGIN_ALLOWED` (anything else: 403 and the v1 error
    body, before the view runs); a plugin's own token (bound to `x`) reaches that plus
    `PLUGIN_OWN` for `x`, and one bound to `y` no more than the shared token; a fleet token
    reaches exactly `FLEET_ALLOWED` (anything else: 403 with its own body); no other
    non-management credential gets past 401. The management token is sent on reads only: its
    writes restart or stop the host.
    """
    path = sample_path(route)
    allowed = mgmt.plugin_allowed(mgmt.V1_ROUTE_PREFIX + route, method)
    kwargs = {"plugin_id": "x"} if "<str:plugin_id>" in route else {}
    own_allowed = allowed or mgmt.plugin_own_allowed(
        mgmt.V1_ROUTE_PREFIX + route, method, kwargs, "x"
    )
    scoped = next(iter(scoped_tokens.values()))[0]
    creds = {
        "none": {},
        "wrong": {"Authorization": "Bearer " + "0" * 64},
        "basic": {"Authorization": "Basic " + "YWRtaW46eA=="},
        "scoped": {"Authorization": f"Bearer {scoped}"},
        "plugin": {"Authorization": f"Bearer {live_host.plugin_token}"},
        "own-x": {"Authorization": f"Bearer {own_tokens['own-x']}"},
        "own-y": {"Authorization": f"Bearer {own_tokens['own-y']}"},
        "fleet": {"Authorization": f"Bearer {own_tokens['fleet']}"},
        "mgmt": {"Authorization": f"Bearer {live_host.mgmt_token}"},
    }
    results = {}
    with live_host.client() as c:
        for cred in V1_CREDENTIALS:
            if cred == "mgmt" and method != "GET":
                continue
            body = {} if method == "GET" else {"json": {}}
            with c.stream(method, path, headers=creds[cred], **body) as r:
                results[cred] = r.status_code
                if r.status_code in (401, 403):
                    r.read()
                    assert set(r.json()) == {"error"}, (cred, r.text)
                if cred in ("plugin", "own-x", "own-y") and r.status_code == 403:
                    assert r.json() == {"error": mgmt.PLUGIN_FORBIDDEN}
                if cred == "fleet" and r.status_code == 403:
                    assert r.json() == {"error": mgmt.FLEET_FORBIDDEN}
    open_route = route == "health"
    for cred in ("none", "wrong", "basic", "scoped"):
        assert (results[cred] == 401) != open_route, (cred, results)
    for cred, reach in (("plugin", allowed), ("own-y", allowed), ("own-x", own_allowed)):
        if reach:
            assert results[cred] not in (401, 403), (cred, results)
        else:
            assert results[cred] == 403, (cred, results)
    if mgmt.fleet_allowed(mgmt.V1_ROUTE_PREFIX + route, method):
        assert results["fleet"] not in (401, 403), results
    else:
        assert results["fleet"] == 403, results
    if "mgmt" in results:
        assert results["mgmt"] not in (401, 403), results
