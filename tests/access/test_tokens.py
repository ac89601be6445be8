"""Management and plugin token files: creation, format, permissions and overrides."""

from __future__ import annotations

import stat

import pytest

from access import tokens
from access.secrets import is_token_shaped, parse_bearer, tokens_equal


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("HOST_MGMT_TOKEN", raising=False)
    tokens._cache.clear()
    yield tmp_path
    tokens._cache.clear()


def test_first_start_writes_a_sourceable_0600_file(state):
    token = tokens.ensure_token(tokens.MGMT)
    path = state / "mgmt-token"
    assert is_token_shaped(token)
    assert path.read_text() == f"HOST_MGMT_TOKEN={token}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_second_start_keeps_the_token(state):
    first = tokens.ensure_token(tokens.MGMT)
    assert tokens.ensure_token(tokens.MGMT) == first
    assert tokens.current_token(tokens.MGMT) == first


def test_environment_overrides_file_and_is_not_persisted(state, monkeypatch):
    tokens.ensure_token(tokens.MGMT)
    env_token = "ab" * 32
    monkeypatch.setenv("HOST_MGMT_TOKEN", env_token.upper())
    assert tokens.current_token(tokens.MGMT) == env_token
    assert env_token not in (state / "mgmt-token").read_text()


def test_malformed_environment_token_is_refused(state, monkeypatch):
    monkeypatch.setenv("HOST_MGMT_TOKEN", "short")
    with pytest.raises(tokens.TokenError):
        tokens.ensure_token(tokens.MGMT)


def test_bare_token_file_is_accepted(state):
    (state / "plugin-token").write_text("cd" * 32 + "\n")
    assert tokens.current_token(tokens.PLUGIN) == "cd" * 32


def test_edited_file_applies_without_restart(state):
    tokens.ensure_token(tokens.MGMT)
    new = "ef" * 32
    path = state / "mgmt-token"
    path.write_text(f"HOST_MGMT_TOKEN={new}\n")
    import os

    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert tokens.current_token(tokens.MGMT) == new


@pytest.mark.parametrize(
    "header, expected",
    [
        (b"Bearer abc", "abc"),
        (b"bearer abc", "abc"),
        (b"Basic abc", None),
        (b"Bearer", None),
        (b"Bearer a b", None),
        ("Bearer caf\u00e9".encode("latin-1"), None),
    ],
)
def test_parse_bearer(header, expected):
    assert parse_bearer(header) == expected


def test_tokens_equal_is_exact():
    assert tokens_equal("a" * 64, "a" * 64)
    assert not tokens_equal("a" * 64, "a" * 63 + "b")
    assert not tokens_equal("a" * 63, "a" * 64)
