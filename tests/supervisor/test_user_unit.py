"""The systemd user unit: what it runs, how it quotes, where it goes, and who may install it."""

from __future__ import annotations

import io
import os
import stat
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from supervisor import user_unit


def _fields(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out.setdefault(k, []).append(v)
    return out


def test_the_unit_runs_runhost_with_the_graphical_session():
    text = user_unit.render("/opt/h/.venv/bin/python", "/opt/h/manage.py", "/opt/h")
    f = _fields(text)
    assert f["ExecStart"] == ['"/opt/h/.venv/bin/python" "/opt/h/manage.py" runhost']
    # bare: systemd does not unquote WorkingDirectory= (tests/hostmgmt/test_user_unit_verify.py)
    assert f["WorkingDirectory"] == ["/opt/h"]
    assert f["PartOf"] == f["After"] == f["WantedBy"] == ["graphical-session.target"]
    assert f["KillMode"] == ["mixed"] and int(f["TimeoutStopSec"][0]) > 15
    assert "Environment" not in f


def test_paths_are_written_the_way_systemd_reads_them():
    text = user_unit.render("/home/a b/%x/python", '/h/a b/%x$y"q\\z/manage.py', "/h/a b/%x$y")
    f = _fields(text)
    assert f["ExecStart"] == ['"/home/a b/%%x/python" "/h/a b/%%x$$y\\"q\\\\z/manage.py" runhost']
    assert f["WorkingDirectory"] == ["/h/a b/%%x$y"]


@pytest.mark.parametrize("python", ['/a"b/python', "/a\\b/python", "/a$b/python"])
def test_a_python_path_systemd_cannot_run_is_refused_with_the_reason(python):
    with pytest.raises(user_unit.UnitError, match="does not accept"):
        user_unit.render(python, "/m.py", "/w")


@pytest.mark.parametrize("workdir", ["relative/dir", "/w ", "/w\\"])
def test_a_working_directory_systemd_would_misread_is_refused(workdir):
    with pytest.raises(user_unit.UnitError):
        user_unit.render("/p/python", "/m.py", workdir)


@pytest.mark.parametrize("bad", ["/a\nExecStartPre=/bin/evil", "/a\rb", "/a\u2028b", "/a\x00b"])
def test_a_path_that_could_start_a_new_line_is_refused(bad):
    with pytest.raises(user_unit.UnitError):
        user_unit.render(bad, "/m.py", "/w")


def test_install_carries_settings_but_never_a_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    environ = {
        "HOST_STATE_DIR": "/srv/host state",
        "HOST_PORT": "48000",
        "REDIS_URL": "redis://:hunter2@127.0.0.1/0",
        "HOST_MGMT_TOKEN": "a" * 64,
        "PATH": "/usr/bin",
    }
    path = user_unit.install(tmp_path, tmp_path / "repo", environ)
    assert path == tmp_path / "cfg" / "systemd" / "user" / "hostmgmt.service"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    text = path.read_text()
    assert _fields(text)["Environment"] == ['"HOST_PORT=48000"', '"HOST_STATE_DIR=/srv/host state"']
    assert "hunter2" not in text and "a" * 64 not in text and "PATH=" not in text
    assert f'"{sys.executable}" "{tmp_path / "repo" / "manage.py"}" runhost' in text
    # a second install replaces the file whole
    user_unit.install(tmp_path, tmp_path / "repo", {})
    assert "Environment" not in path.read_text()
    assert [p.name for p in path.parent.iterdir()] == ["hostmgmt.service"]


def test_print_writes_nothing_and_shows_the_unit(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    out = io.StringIO()
    call_command("install_user_service", "--print", stdout=out)
    assert "ExecStart=" in out.getvalue() and "runhost" in out.getvalue()
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is for root")
def test_root_is_refused_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(CommandError, match="desktop user"):
        call_command("install_user_service")
    assert not list(tmp_path.iterdir())
