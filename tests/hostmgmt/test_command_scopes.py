"""`config:set` does not reach what runs commands or chooses files; `config:exec` does.

Tokens are minted through `manage.py mint_token` and used over the admin API as a script would.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.test import Client

from hostconfig import schema, store

pytestmark = pytest.mark.django_db

PREP = json.dumps([{"do": "touch /tmp/owned", "undo": ""}])


def mint(name: str, *scopes: str) -> dict:
    out = io.StringIO()
    argv = [a for s in scopes for a in ("--scope", s)]
    call_command("mint_token", name, *argv, stdout=out)
    return {"HTTP_AUTHORIZATION": f"Bearer {out.getvalue().strip()}"}


def post(c: Client, url: str, body: dict, auth: dict):
    return c.post(url, data=json.dumps(body), content_type="application/json", **auth)


@pytest.fixture
def apps_file(tmp_path, monkeypatch):
    path = tmp_path / "apps.json"
    monkeypatch.setenv("HOST_APPS_FILE", str(path))
    return path


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("global_prep_cmd", PREP),
        ("log_path", "/tmp/hostmgmt-scopes-test.log"),
        ("file_apps", "/tmp/a.json"),
    ],
)
def test_config_set_is_refused_keys_that_run_commands_or_choose_files(
    redis_db, admin_headers, key, value
):
    c = Client()
    setter = mint("setter", "config:set")
    before = store.config_path().read_bytes() if store.config_path().exists() else b""

    r = post(c, "/api/config", {key: value, "rate_cap_pct": 70}, setter)

    assert r.status_code == 403, r.content
    error = r.json()["error"]
    assert key in error and "config:exec" in error
    assert schema.key(key).exec_power in error  # the reason, not just "forbidden"
    after = store.config_path().read_bytes() if store.config_path().exists() else b""
    assert after == before  # nothing of the request written, not even the ordinary key
    # the same token still sets an ordinary key
    ok = post(c, "/api/config", {"rate_cap_pct": 70}, setter)
    assert ok.status_code == 200, ok.content
    assert store.get("rate_cap_pct") == 70
    # the admin password and a config:exec holder reach the key
    assert post(c, "/api/config", {key: value}, admin_headers).status_code == 200
    assert post(c, "/api/config", {key: None}, admin_headers).status_code == 200
    execer = mint("execer", "config:set", "config:exec")
    assert post(c, "/api/config", {key: value}, execer).status_code == 200


def test_config_set_may_add_an_app_but_not_its_command(redis_db, admin_headers, apps_file):
    c = Client()
    setter = mint("setter", "config:set")

    r = post(c, "/api/apps", {"index": -1, "name": "Owned", "cmd": "sh -c 'id > /tmp/x'"}, setter)
    assert r.status_code == 403, r.content
    assert "cmd runs a command" in r.json()["error"] and "config:exec" in r.json()["error"]
    assert not apps_file.exists() or "Owned" not in apps_file.read_text()

    for field, value in [
        ("detached", ["sleep 1000"]),
        ("prep-cmd", [{"do": "id", "undo": ""}]),
        ("working-dir", "/root"),
        ("output", "/tmp/out.log"),
        ("env", {"LD_PRELOAD": "/tmp/x.so"}),
    ]:
        r = post(c, "/api/apps", {"index": -1, "name": "Owned", field: value}, setter)
        assert r.status_code == 403 and field in r.json()["error"], (field, r.content)

    plain = post(c, "/api/apps", {"index": -1, "name": "Plain", "cmd": ""}, setter)
    assert plain.status_code == 200, plain.content
    names = [a["name"] for a in json.loads(apps_file.read_text())["apps"]]
    assert "Plain" in names and "Owned" not in names

    admin = post(c, "/api/apps", {"index": -1, "name": "Steam", "cmd": "steam"}, admin_headers)
    assert admin.status_code == 200, admin.content
    execer = mint("execer", "config:set", "config:exec")
    ok = post(c, "/api/apps", {"index": -1, "name": "Game", "cmd": "game"}, execer)
    assert ok.status_code == 200, ok.content


def test_a_token_manager_cannot_hand_out_config_exec(redis_db, admin_headers):
    c = Client()
    manager = mint("manager", "tokens:manage", "config:set")
    r = post(c, "/api/tokens", {"name": "x", "scopes": ["config:set", "config:exec"]}, manager)
    assert r.status_code == 403 and "config:exec" in r.json()["error"]


def test_every_key_naming_a_path_or_running_commands_is_marked():
    """The guard: a new path or command key must say why it needs config:exec (a key whose
    only accepted value is its default, `refused_all`, cannot be pointed anywhere)."""
    for name, spec in schema.KEYS.items():
        runs = spec.item in ("abspath", "prep") or name.endswith(("_cmd", "_path", "_file", "_dir"))
        assert bool(spec.exec_power) == (runs and not spec.refused_all), name
