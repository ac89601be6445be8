"""Scoped tokens through the admin API and the mint_token command."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from access import api_tokens
from hostconfig import store

pytestmark = pytest.mark.django_db


def mint(c, auth, name, scopes):
    body = {"name": name, "scopes": scopes}
    return c.post("/api/tokens", data=body, content_type="application/json", **auth)


def bearer(token):
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def test_mint_use_list_and_revoke(admin):
    c = Client()
    r = mint(c, admin, "ci-logs", ["logs:get", "tokens:manage"])
    assert r.status_code == 200, r.content
    body = r.json()
    assert re.fullmatch(r"[0-9a-f]{64}", body["token"])
    assert body["scopes"] == ["logs:get", "tokens:manage"]
    token = body["token"]
    # the plaintext is not stored anywhere in the config file
    assert token not in store.config_path().read_text()

    listed = c.get("/api/tokens", **bearer(token))
    assert listed.status_code == 200
    assert listed.json()["tokens"] == [{"name": "ci-logs", "scopes": ["logs:get", "tokens:manage"]}]
    assert "hash" not in listed.content.decode() and token not in listed.content.decode()

    assert c.get("/api/stream/telemetry", **bearer(token)).status_code == 200
    assert c.delete("/api/tokens/ci-logs", **admin).status_code == 200
    # the very next request with the revoked token fails
    assert c.get("/api/stream/telemetry", **bearer(token)).status_code == 401


def test_scope_denial(admin):
    c = Client()
    token = mint(c, admin, "reader", ["config:get"]).json()["token"]
    assert c.get("/api/tokens", **bearer(token)).status_code == 403
    assert c.get("/api/logs", **bearer(token)).status_code == 403
    assert c.get("/api/update", **bearer(token)).status_code == 200


def test_token_manager_cannot_grant_scopes_it_lacks(admin):
    c = Client()
    manager = mint(c, admin, "manager", ["tokens:manage", "logs:get"]).json()["token"]
    r = mint(c, bearer(manager), "escalate", ["*"])
    assert r.status_code == 403
    assert "*" in r.json()["error"]
    assert mint(c, bearer(manager), "sub", ["logs:get"]).status_code == 200
    assert [t.name for t in api_tokens.load()] == ["manager", "sub"]


@pytest.mark.parametrize(
    "name,scopes",
    [
        ("dup", ["logs:get"]),
        ("bad name", ["logs:get"]),
        ("../etc", ["logs:get"]),
        ("x" * 65, ["logs:get"]),
        ("", ["logs:get"]),
        ("evil\nname", ["logs:get"]),
        ("ok", ["stream:control"]),
        ("ok", ["logs:get", "config:get x"]),
        ("ok", []),
        ("ok", "logs:get"),
        ("ok", [{"a": 1}]),
        (["list"], ["logs:get"]),
        (None, None),
    ],
)
def test_bad_mint_requests_are_400(admin, name, scopes):
    c = Client()
    assert mint(c, admin, "dup", ["logs:get"]).status_code == 200
    r = mint(c, admin, name, scopes)
    assert r.status_code == 400, r.content
    assert r.json()["status"] is False
    assert [t.name for t in api_tokens.load()] == ["dup"]


@pytest.mark.parametrize("body", ["[1]", '"x"', "{bad json", ""])
def test_malformed_bodies_are_400(admin, body):
    r = Client().post("/api/tokens", data=body, content_type="application/json", **admin)
    assert r.status_code == 400


def test_revoke_unknown_is_404_and_odd_name_400(admin):
    c = Client()
    assert c.delete("/api/tokens/nobody", **admin).status_code == 404
    assert c.delete("/api/tokens/b%20ad%00", **admin).status_code == 400


def test_unauthenticated_is_401(admin):
    assert Client().get("/api/tokens").status_code == 401


def test_mint_token_command_prints_a_working_token(admin):
    out = io.StringIO()
    call_command("mint_token", "shell-made", "--scope", "logs:get", stdout=out)
    token = out.getvalue().strip()
    assert re.fullmatch(r"[0-9a-f]{64}", token)
    assert Client().get("/api/logs", **bearer(token)).status_code == 200
    with pytest.raises(CommandError):
        call_command("mint_token", "shell-made", "--scope", "logs:get", stdout=io.StringIO())
    with pytest.raises(CommandError):
        call_command("mint_token", "other", "--scope", "nope", stdout=io.StringIO())


def test_token_manager_sees_and_revokes_only_tokens_within_its_scopes(admin):
    c = Client()
    manager = mint(c, admin, "manager", ["tokens:manage", "logs:get"]).json()["token"]
    for name, scopes in [
        ("root", ["*"]),
        ("config-writer", ["config:set"]),
        ("mixed", ["logs:get", "config:get"]),
        ("logs", ["logs:get"]),
        ("peer", ["tokens:manage"]),
    ]:
        assert mint(c, admin, name, scopes).status_code == 200
    listed = c.get("/api/tokens", **bearer(manager)).json()["tokens"]
    assert [t["name"] for t in listed] == ["manager", "logs", "peer"]
    for hidden in ("root", "config-writer", "mixed"):
        r = c.delete(f"/api/tokens/{hidden}", **bearer(manager))
        assert r.status_code == 404, hidden
        assert r.json() == {
            "status": False,
            "status_code": 404,
            "error": f"no token named {hidden!r}",
        }
    assert c.delete("/api/tokens/logs", **bearer(manager)).status_code == 200
    # nothing above the manager's reach was touched; an admin still sees and revokes them all
    names = [t["name"] for t in c.get("/api/tokens", **admin).json()["tokens"]]
    assert names == ["manager", "root", "config-writer", "mixed", "peer"]
    assert c.delete("/api/tokens/root", **admin).status_code == 200
