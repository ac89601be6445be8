"""Config values can never create keys: the value rule and the file reader, in-process.

A value is one line of `host.conf`. These tests hold both sides: every door refuses a character
that any reader could take as a line break (or any other non-printable one), and the reader takes
`\\n` alone as the end of a line, so a hand-edited file with such bytes loses only its bad line.
"""

from __future__ import annotations

import hashlib
import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from access import api_tokens
from hostconfig import store
from hostconfig.schema import KEYS, key
from streaming import preflight

pytestmark = pytest.mark.django_db

# Every character `str.splitlines()` ends a line at.
BREAKS = ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
BREAK_IDS = [f"U+{ord(c):04X}" for c in BREAKS]
# What an attacker appends after the break: a full-admin token whose plaintext they know.
PLAINTEXT = "ab" * 32
INJECTED = f'api_tokens = ["evil {hashlib.sha256(f"{PLAINTEXT}:s".encode()).hexdigest()} s *"]'


def free_string_keys() -> list[str]:
    """Every key an API may set to free text, pattern keys by one example each."""
    names = [n for n, s in KEYS.items() if s.type in ("str", "url", "list") and not s.file_only]
    return names + ["webhook_url_0", "nvenc_preset"]


def valid_prefix(name: str) -> str:
    spec = key(name)
    if spec.type == "url":
        return "https://hooks.example/x"
    if spec.item == "cidr":
        return "10.0.0.0/8"
    if spec.item == "origin":
        return "https://a.example"
    return "den"


def write_file(state, text: str) -> None:
    (state / "host.conf").write_bytes(text.encode("utf-8"))


# -- the value rule -------------------------------------------------------------------------------
OTHER_UNPRINTABLE = ["\t", "\x00", "\x7f", "\x9b", "\u200b", "\u00a0"]


@pytest.mark.parametrize(
    "ch", BREAKS + OTHER_UNPRINTABLE, ids=[f"U+{ord(c):04X}" for c in BREAKS + OTHER_UNPRINTABLE]
)
def test_every_free_string_key_refuses_a_line_break_or_control_character(ch):
    for name in free_string_keys():
        with pytest.raises(ValueError, match="printable"):
            key(name).parse(f"{valid_prefix(name)}{ch}{INJECTED}")
        with pytest.raises(ValueError, match="printable"):
            key(name).parse(f"{valid_prefix(name)}{ch}")  # a trailing break is no exception
    with pytest.raises(ValueError, match="printable"):
        key("csrf_allowed_origins").parse(["https://a.example", f"https://b.example{ch}"])
    with pytest.raises(store.ConfigError) as err:
        store.validate({"sunshine_name": f"den{ch}{INJECTED}", "rate_cap_pct": 60})
    assert list(err.value.fields) == ["sunshine_name"]


def test_printable_text_of_any_script_is_still_a_value():
    assert key("sunshine_name").parse("Wohnzimmer-PC ✓ 客厅") == "Wohnzimmer-PC ✓ 客厅"
    assert key("sunshine_name").parse("[den] pc") == "[den] pc"


def test_json_values_refuse_escaped_breaks_too():
    with pytest.raises(ValueError, match="printable"):
        key("api_tokens").parse('["ci\\u2028x h s *"]')
    assert key("api_tokens").parse('["ci h s *"]') == ["ci h s *"]


def test_the_store_never_writes_an_unprintable_value(state):
    write_file(state, "rate_cap_pct = 60\n")
    for ch in BREAKS:
        with pytest.raises(store.ConfigError):
            store.write({"sunshine_name": f"den{ch}{INJECTED}"})
    with pytest.raises(store.ConfigError):
        store.write({f"x\n{INJECTED}\ny": "1"})
    assert (state / "host.conf").read_text() == "rate_cap_pct = 60\n"


# -- the reader -----------------------------------------------------------------------------------
@pytest.mark.parametrize("ch", BREAKS[1:], ids=BREAK_IDS[1:])
def test_a_hand_edited_break_inside_a_value_loses_only_that_line(state, ch):
    write_file(
        state,
        f"# notes\nrate_cap_pct = 60\nsunshine_name = den{ch}{INJECTED}\nbusy_poll_us = 10\n",
    )
    raw = store.read_raw()
    assert raw == {"rate_cap_pct": "60", "busy_poll_us": "10"}
    assert api_tokens.authenticate(PLAINTEXT) is None
    (problem,) = store.problems()
    assert problem.line == 3 and problem.key == "sunshine_name"
    assert f"U+{ord(ch):04X}" in problem.reason
    assert INJECTED not in str(problem)  # the report names the line, never echoes it


def test_a_bad_line_is_kept_byte_for_byte_across_writes(state):
    text = f"rate_cap_pct = 60\nsunshine_name = den\u2028{INJECTED}\nbusy_poll_us = 10\n"
    write_file(state, text)
    store.write({"dscp_qos": "false"})
    assert (state / "host.conf").read_text(encoding="utf-8") == text + "dscp_qos = false\n"
    assert store.get("rate_cap_pct") == 60 and store.get("dscp_qos") is False
    assert store.get("api_tokens") == []


def test_a_scalar_starting_with_a_bracket_is_one_line(state):
    write_file(state, "sunshine_name = [den\nrate_cap_pct = 60\n# note\nbusy_poll_us = 10\n]\n")
    assert store.read_raw() == {
        "sunshine_name": "[den",
        "rate_cap_pct": "60",
        "busy_poll_us": "10",
    }
    assert store.problems() == []
    # Writing the bracketed key again replaces that line only.
    store.write({"sunshine_name": "[pc"})
    assert store.get("rate_cap_pct") == 60 and store.get("busy_poll_us") == 10
    assert "]\n" in (state / "host.conf").read_text()


def test_an_unclosed_list_stops_at_the_next_key(state):
    write_file(
        state,
        "csrf_allowed_origins = [https://a.example,\n  https://b.example,\n"
        f"rate_cap_pct = 60\n{INJECTED}\n",
    )
    raw = store.read_raw()
    assert "csrf_allowed_origins" not in raw and raw["rate_cap_pct"] == "60"
    (problem,) = store.problems()
    assert problem.line == 1 and problem.key == "csrf_allowed_origins"
    assert "line 3" in problem.reason
    # the injected api_tokens line is a line of its own: a hand edit, and read as one
    assert "api_tokens" in raw


def test_an_unclosed_list_at_the_end_of_the_file_is_reported(state):
    write_file(state, "rate_cap_pct = 60\ntrusted_subnets = [10.0.0.0/8,\n  fd00::/64\n")
    assert store.read_raw() == {"rate_cap_pct": "60"}
    assert [p.line for p in store.problems()] == [2]
    assert store.get("trusted_subnets") == []


def test_a_list_is_cut_by_a_bad_line(state):
    write_file(state, "trusted_subnets = [10.0.0.0/8,\n  fd00::/64\x85\n]\nrate_cap_pct = 60\n")
    assert store.read_raw() == {"rate_cap_pct": "60"}
    assert [(p.line, p.key) for p in store.problems()] == [(1, "trusted_subnets"), (2, None)]


def test_list_keys_still_continue_over_lines(state):
    write_file(
        state,
        "csrf_allowed_origins = [\n  https://a.example,\n  https://[::1]:8443\n]\n"
        'api_tokens = [\n  "ci ' + "ab" * 32 + ' s1 config:get",\n  "odd ] name h s x"\n]\n'
        "rate_cap_pct = 60\n",
    )
    assert store.get("csrf_allowed_origins") == ["https://a.example", "https://[::1]:8443"]
    assert len(store.get("api_tokens")) == 2
    assert store.get("rate_cap_pct") == 60 and store.problems() == []


def test_line_ends_are_only_newlines(state):
    # CRLF is tolerated; a bare CR (which read_text() would have split on) makes a bad line.
    write_file(state, f"rate_cap_pct = 60\r\nsunshine_name = den\r{INJECTED}\r\nmax_fps = 90\r\n")
    assert store.read_raw() == {"rate_cap_pct": "60", "max_fps": "90"}
    assert [p.line for p in store.problems()] == [2]
    store.write({"max_fps": "120"})
    text = (state / "host.conf").read_bytes()
    assert text.startswith(b"rate_cap_pct = 60\r\n") and b"max_fps = 120\n" in text


def test_a_duplicated_key_is_written_once(state):
    write_file(state, "max_fps = 30\nrate_cap_pct = 60\nmax_fps = 90\n")
    assert store.get("max_fps") == 90  # the last one wins on read
    store.write({"max_fps": "120"})
    assert (state / "host.conf").read_text() == "max_fps = 120\nrate_cap_pct = 60\n"


def test_preflight_reports_the_bad_line(state):
    write_file(state, f"rate_cap_pct = 60\nsunshine_name = den\u2028{INJECTED}\n")
    check = preflight.host_config()
    assert check["status"] == "warn"
    assert "host.conf line 2 (sunshine_name)" in check["detail"] and "U+2028" in check["detail"]
    assert INJECTED not in check["detail"]
    write_file(state, "rate_cap_pct = 60\n")
    assert preflight.host_config()["status"] == "pass"


# -- the APIs in process --------------------------------------------------------------------------
@pytest.mark.parametrize("ch", BREAKS, ids=BREAK_IDS)
def test_v1_refuses_a_break_at_either_end_too(v1, state, ch):
    write_file(state, "max_fps = 60\n")
    for value in (f"{ch}den", f"den{ch}", f"den{ch}{INJECTED}"):
        r = v1.put("/api/v1/host/config", {"general": {"host_name": value}}, format="json")
        assert r.status_code == 400, (value, r.content)
        assert [f["field"] for f in r.json()["fields"]] == ["general.host_name"]
    assert (state / "host.conf").read_text() == "max_fps = 60\n"


@pytest.fixture
def console(state, db):
    from access import credentials

    credentials.set_credentials("admin", "s3cret")
    c = Client()
    assert c.post("/login", {"username": "admin", "password": "s3cret"}).status_code == 302
    return c


@pytest.mark.parametrize("ch", BREAKS, ids=BREAK_IDS)
def test_console_config_form_refuses_a_break(console, state, ch):
    write_file(state, "rate_cap_pct = 60\n")
    r = console.post("/config", {"sunshine_name": f"den{ch}{INJECTED}", "busy_poll_us": "10"})
    assert r.status_code == 400
    page = r.content.decode()
    assert 'id="err-sunshine_name"' in page and "printable" in page
    assert (state / "host.conf").read_text() == "rate_cap_pct = 60\n"


def test_console_config_page_lists_the_bad_lines(console, state):
    write_file(state, f"rate_cap_pct = 60\nsunshine_name = den\u2028{INJECTED}\n")
    page = console.get("/config").content.decode()
    assert 'id="file-problems"' in page and "line 2" in page and "U+2028" in page
    assert "evil" not in page


# -- minting ------------------------------------------------------------------------------------
@pytest.mark.parametrize("ch", BREAKS, ids=BREAK_IDS)
def test_mint_refuses_a_name_with_a_break(admin, state, ch):
    before = store.read_raw()
    for name in (f"ci{ch}", f"ci{ch}x"):
        r = admin.post("/api/tokens", {"name": name, "scopes": ["logs:get"]}, format="json")
        assert r.status_code == 400 and "name" in r.json()["error"], r.content
        with pytest.raises(CommandError, match="name"):
            call_command("mint_token", name, "--scope", "logs:get", stdout=io.StringIO())
    assert store.read_raw() == before and api_tokens.load() == []
