"""Config values can never create keys, against the real host as an outsider sends it.

Each attack puts a line break (every character `str.splitlines()` ends a line at) and then an
`api_tokens` line holding a full-admin token whose plaintext the attacker knows into a free-string
key, through both APIs. Each must be a 400 that names the key, leave `host.conf` byte for byte as
it was, and the token must not authenticate afterwards.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager

import pytest

from hostconfig.schema import KEYS, key

pytestmark = pytest.mark.e2e

BREAKS = ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
BREAK_IDS = [f"U+{ord(c):04X}" for c in BREAKS]
PLAINTEXT = "cd" * 32
INJECTED = f'api_tokens = ["evil {hashlib.sha256(f"{PLAINTEXT}:s".encode()).hexdigest()} s *"]'
V1_FREE_STRINGS = ("general.host_name", "input.gamepad", "encoders.render_adapter")


def admin_free_string_keys() -> list[str]:
    """Every key the admin API may set to free text, pattern keys by one example each."""
    names = [n for n, s in KEYS.items() if s.type in ("str", "url", "list") and not s.file_only]
    return names + ["webhook_url_0", "nvenc_preset"]


def attacks(name: str, ch: str) -> list:
    """Values for `name` that are valid up to the break, as a string and (lists) as an array."""
    spec = key(name)
    prefix = {"cidr": "10.0.0.0/8", "origin": "https://a.example"}.get(spec.item, "den")
    if spec.type == "url":
        prefix = "https://hooks.example/x"
    values: list = [f"{prefix}{ch}{INJECTED}", f"{prefix}{ch}"]
    if spec.type == "list":
        values.append([prefix, f"{prefix}{ch}{INJECTED}"])
    return values


def keys_of(text: str) -> list[str]:
    """The key names of a config file as any line-based reader would see them: every kind of
    line break counts, so a key smuggled behind any of them shows up here."""
    return [ln.split("=", 1)[0].strip() for ln in text.splitlines() if "=" in ln]


@contextmanager
def kept(path):
    before = path.read_bytes() if path.exists() else None
    try:
        yield before
    finally:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(before)


@pytest.fixture
def config_writer(live_host, admin_auth):
    """An admin client holding a `config:get` + `config:set` + `config:exec` token (cheap to
    check, unlike the password hash of Basic; `config:exec` reaches the path keys), the config
    file restored afterwards; yields (client, conf path)."""
    conf = live_host.state_dir / "host.conf"
    with kept(conf), kept(live_host.state_dir / "host.env"):
        with live_host.client(auth=admin_auth) as admin:
            r = admin.post(
                "/api/tokens",
                json={
                    "name": "cfg-writer",
                    "scopes": ["config:get", "config:set", "config:exec"],
                },
            )
            assert r.status_code == 200, r.text
            token = r.json()["token"]
        headers = {"Authorization": f"Bearer {token}"}
        with live_host.client(headers=headers) as client:
            yield client, conf


def assert_no_token_minted(live_host):
    with live_host.client(headers={"Authorization": f"Bearer {PLAINTEXT}"}) as c:
        assert c.get("/api/config").status_code == 401


@pytest.mark.parametrize("ch", BREAKS, ids=BREAK_IDS)
def test_v1_free_strings_refuse_every_line_break(live_host, config_writer, ch):
    _, conf = config_writer
    before = conf.read_bytes()
    refused = []
    with live_host.mgmt() as v1:
        for dotted in V1_FREE_STRINGS:
            section, leaf = dotted.split(".")
            for value in (f"den{ch}{INJECTED}", f"den{ch}", f"{ch}den"):
                r = v1.put("/api/v1/host/config", json={section: {leaf: value}})
                fields = [f["field"] for f in r.json().get("fields", [])]
                if r.status_code != 400 or fields != [dotted] or conf.read_bytes() != before:
                    refused.append((dotted, repr(value[:8]), r.status_code, fields))
    assert refused == [], "accepted or misreported"
    assert_no_token_minted(live_host)


@pytest.mark.parametrize("ch", BREAKS, ids=BREAK_IDS)
def test_admin_free_strings_refuse_every_line_break(live_host, config_writer, ch):
    admin, conf = config_writer
    before = conf.read_bytes()
    wrong = []
    for name in admin_free_string_keys():
        for value in attacks(name, ch):
            # a good key beside the bad one: whole-update validation writes neither
            r = admin.post("/api/config", json={name: value, "rate_cap_pct": 61})
            error = r.json().get("error", "")
            if r.status_code != 400 or f"{name}:" not in error or conf.read_bytes() != before:
                wrong.append((name, repr(str(value)[:24]), r.status_code, error[:80]))
    assert wrong == [], "accepted or misreported"
    assert_no_token_minted(live_host)


def test_good_edits_add_only_their_key_and_a_bracket_swallows_nothing(live_host, config_writer):
    admin, conf = config_writer
    held = keys_of(conf.read_text(encoding="utf-8"))
    with live_host.mgmt() as v1:
        r = v1.put("/api/v1/host/config", json={"general": {"host_name": "[den ✓"}})
        assert r.status_code == 200 and r.json()["settings"]["general"]["host_name"] == "[den ✓"
        r = admin.post("/api/config", json={"rate_cap_pct": 61})
        assert r.status_code == 200, r.text
        # A host name opening with `[` must not swallow every following line as a list.
        assert admin.get("/api/config").json()["rate_cap_pct"] == 61
        r = v1.put("/api/v1/host/config", json={"general": {"host_name": "[den2"}})
        assert r.status_code == 200, r.text
        assert admin.get("/api/config").json()["rate_cap_pct"] == 61
        added = set(keys_of(conf.read_text(encoding="utf-8"))) - set(held)
        assert added == {"sunshine_name", "rate_cap_pct"}
        report = v1.get("/api/v1/diagnostics/preflight").json()
    check = next(c for c in report["checks"] if c["id"] == "host-config")
    assert check["status"] == "pass", check


def test_a_hand_edited_break_is_reported_and_every_other_key_kept(live_host, config_writer):
    admin, conf = config_writer
    text = conf.read_text(encoding="utf-8")
    conf.write_text(
        text + f"rate_cap_pct = 62\nsunshine_name = den\u2028{INJECTED}\nbusy_poll_us = 11\n",
        encoding="utf-8",
    )
    body = admin.get("/api/config").json()
    assert body["rate_cap_pct"] == 62 and body["busy_poll_us"] == 11
    assert [t["name"] for t in body["file_only"]["api_tokens"]] == ["cfg-writer"]
    assert_no_token_minted(live_host)
    with live_host.mgmt() as v1:
        report = v1.get("/api/v1/diagnostics/preflight").json()
    check = next(c for c in report["checks"] if c["id"] == "host-config")
    assert check["status"] == "warn" and "(sunshine_name)" in check["detail"], check
    assert "U+2028" in check["detail"] and "evil" not in check["detail"]


@pytest.mark.parametrize("ch", BREAKS, ids=BREAK_IDS)
def test_minting_refuses_a_name_with_a_line_break(live_host, config_writer, admin_auth, ch):
    _, conf = config_writer
    before = conf.read_bytes()
    with live_host.client(auth=admin_auth) as admin:
        r = admin.post("/api/tokens", json={"name": f"ci{ch}", "scopes": ["logs:get"]})
        assert r.status_code == 400 and "name" in r.json()["error"], r.text
        names = [t["name"] for t in admin.get("/api/tokens").json()["tokens"]]
    assert names == ["cfg-writer"] and conf.read_bytes() == before
