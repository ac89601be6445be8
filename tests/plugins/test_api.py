"""The plugin routes in process, over a real Redis: documented statuses and bodies, and the
per-plugin token's reach (its own id only; the shared plugin token registers nothing)."""

from __future__ import annotations

import json
import os
import socket

import pytest
from django.test import Client

from access import mgmt, plugin_tokens, tokens
from plugins import registry, runner_control
from tests.plugins.conftest import changed

pytestmark = pytest.mark.django_db(transaction=True)  # events go out on commit

ADMIN = "1" * 64
SHARED_PLUGIN = "2" * 64
SECRET = "abcdefghijklmnop_-"
BODY = {"title": "Folder", "ui": {"port": 9000, "secret": SECRET}}


@pytest.fixture
def creds(bus, monkeypatch):
    # alpha's UI port: listened on by this process, which the runner's status names as alpha's
    # (a UI port must be the registering plugin's own: tests/plugins/test_ui_proxy_hardening.py)
    listener = socket.create_server(("127.0.0.1", 0))
    monkeypatch.setitem(BODY["ui"], "port", listener.getsockname()[1])
    runner_control.write_status({"alpha": {"pid": os.getpid(), "running": True}})
    monkeypatch.setenv("HOST_MGMT_TOKEN", ADMIN)
    monkeypatch.setenv("HOST_PLUGIN_TOKEN", SHARED_PLUGIN)
    tokens._cache.clear()
    yield {
        "admin": ADMIN,
        "shared": SHARED_PLUGIN,
        "alpha": plugin_tokens.ensure("alpha"),
        "beta": plugin_tokens.ensure("beta"),
        "bus": bus,
    }
    listener.close()


def call(method, path, token=None, body=None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    kwargs = {"data": json.dumps(body), "content_type": "application/json"} if body else {}
    return getattr(Client(), method)(path, **kwargs, **headers)


def test_a_plugin_token_reaches_only_its_own_id(creds):
    assert call("put", "/api/v1/plugins/alpha", creds["alpha"], BODY).status_code == 204
    r = call("put", "/api/v1/plugins/alpha", creds["beta"], BODY)
    assert r.status_code == 403 and r.json() == {"error": mgmt.PLUGIN_FORBIDDEN}
    assert call("delete", "/api/v1/plugins/alpha", creds["beta"]).status_code == 403
    assert call("get", "/api/v1/plugins/alpha/ui-credential", creds["beta"]).status_code == 403
    assert call("put", "/api/v1/plugins/beta", creds["shared"], BODY).status_code == 403
    own = call("get", "/api/v1/plugins/alpha/ui-credential", creds["alpha"])
    assert own.status_code == 200 and own.json() == {"port": BODY["ui"]["port"], "secret": SECRET}
    assert own["Cache-Control"] == "no-store"
    # the list is open to every plugin token, and secret-free
    for who in ("alpha", "beta", "shared", "admin"):
        r = call("get", "/api/v1/plugins", creds[who])
        assert r.status_code == 200 and SECRET not in r.content.decode()
        assert r.json() == [{"id": "alpha", "title": "Folder", "ui": {"port": BODY["ui"]["port"]}}]
    # a plugin's token keeps the plugin token's allow list, and its limits
    assert call("get", "/api/v1/status", creds["alpha"]).status_code == 200
    assert call("get", "/api/v1/hooks", creds["alpha"]).status_code == 403
    assert call("get", "/api/v1/store/runtime", creds["alpha"]).status_code == 403
    # the management token may do all
    assert call("get", "/api/v1/plugins/alpha/ui-credential", ADMIN).status_code == 200
    assert call("delete", "/api/v1/plugins/alpha", ADMIN).status_code == 204
    assert call("delete", "/api/v1/plugins/alpha", creds["alpha"]).status_code == 204
    assert changed(creds["bus"]) == ["alpha", "alpha"]


def test_tokens_are_per_plugin_persistent_and_pruned(creds):
    assert creds["alpha"] != creds["beta"]
    assert plugin_tokens.ensure("alpha") == creds["alpha"]
    assert oct(plugin_tokens.path().stat().st_mode & 0o777) == "0o600"
    plugin_tokens.prune({"beta"})
    assert call("get", "/api/v1/status", creds["alpha"]).status_code == 401
    assert call("get", "/api/v1/status", creds["beta"]).status_code == 200


def test_documented_400_bodies(creds):
    r = call(
        "put", "/api/v1/plugins/alpha", ADMIN, {"title": "x", "ui": {"port": 80, "secret": "x"}}
    )
    assert r.status_code == 400
    body = r.json()
    assert set(body) == {"error", "fields"}
    assert {f["field"] for f in body["fields"]} == {"ui.port", "ui.secret"}
    r = call("put", "/api/v1/plugins/Bad_Id", ADMIN, BODY)
    assert r.status_code == 400 and set(r.json()) == {"error"}
    assert SECRET not in r.content.decode()
    r = call("get", "/api/v1/plugins/nobody/ui-credential", ADMIN)
    assert r.status_code == 404 and set(r.json()) == {"error"}
    r = Client().put("/api/v1/plugins/alpha", HTTP_AUTHORIZATION=f"Bearer {ADMIN}")
    assert r.status_code in (400, 415)


def test_runtime_switch_persists_and_announces(creds):
    r = call("get", "/api/v1/store/runtime", ADMIN)
    assert r.status_code == 200
    assert r.json()["enabled"] is False and r.json()["running"] is False
    r = call("post", "/api/v1/store/runtime", ADMIN, {"enabled": True})
    assert r.status_code == 200 and r.json()["enabled"] is True
    assert runner_control.runtime_enabled() is True
    call("post", "/api/v1/store/runtime", ADMIN, {"enabled": True})  # no change: no event
    kinds = [e["kind"] for e in creds["bus"].ring_events()]
    assert kinds.count("store.changed") == 1
    r = call("post", "/api/v1/store/runtime", ADMIN, {"enabled": "yes please"})
    assert r.status_code == 400 and "fields" in r.json()
    assert (
        call("post", "/api/v1/store/runtime", creds["shared"], {"enabled": False}).status_code
        == 403
    )
    assert runner_control.runtime_enabled() is True


def test_registry_is_what_the_api_serves(creds):
    registry.register("gamma", {"title": "G"})
    assert [p["id"] for p in call("get", "/api/v1/plugins", ADMIN).json()] == ["gamma"]
