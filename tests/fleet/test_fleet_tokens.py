"""Fleet tokens on the member: minted once, kept as digests in a 0600 file, revoked at once."""

from __future__ import annotations

import json
import stat

import pytest

from access import fleet_tokens


@pytest.fixture(autouse=True)
def state(monkeypatch, tmp_path):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    return tmp_path


def test_mint_lookup_revoke(state):
    token = fleet_tokens.mint("lounge-pc")
    assert len(token) == 64
    assert fleet_tokens.lookup(token) == "lounge-pc"
    assert fleet_tokens.lookup("0" * 64) is None
    assert [i.name for i in fleet_tokens.listing()] == ["lounge-pc"]
    path = fleet_tokens.path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token not in path.read_text()  # only the digest is kept
    fleet_tokens.revoke("lounge-pc")
    assert fleet_tokens.lookup(token) is None  # at once, whatever the cache held
    assert json.loads(path.read_text()) == {}


def test_two_writes_in_one_tick_are_not_hidden_by_the_cache(state):
    a = fleet_tokens.mint("a")
    assert fleet_tokens.lookup(a) == "a"
    fleet_tokens.revoke("a")
    b = fleet_tokens.mint("a")
    assert fleet_tokens.lookup(a) is None
    assert fleet_tokens.lookup(b) == "a"


@pytest.mark.parametrize(
    "name", ["", "x" * 65, "a b", "a\nb", "-lead", "../x", "é", None, 5, "a/b"]
)
def test_bad_names_are_refused(name):
    with pytest.raises(fleet_tokens.FleetTokenError) as err:
        fleet_tokens.mint(name)
    assert err.value.status == 400


def test_a_taken_name_is_a_conflict_and_an_unknown_one_not_found():
    fleet_tokens.mint("a")
    with pytest.raises(fleet_tokens.FleetTokenError) as err:
        fleet_tokens.mint("a")
    assert err.value.status == 409
    with pytest.raises(fleet_tokens.FleetTokenError) as err:
        fleet_tokens.revoke("nope")
    assert err.value.status == 404


def test_malformed_presented_tokens_match_nothing():
    fleet_tokens.mint("a")
    for presented in ("", "zz" * 32, "A" * 64, "0" * 63):
        assert fleet_tokens.lookup(presented) is None
