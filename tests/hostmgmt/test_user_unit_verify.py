"""The user unit as systemd itself reads it: `systemd-analyze verify` on the written file.

Checks offline (no running systemd needed): the unit loads, its program exists, and systemd's own
dump shows the very paths that were installed, with a space, `%`, `$`, a quote and a backslash
in the checkout's path. Starting it under a real `systemd --user` runs only where a user manager
answers (none in a container running as root).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from supervisor import user_unit

ANALYZE = shutil.which("systemd-analyze")
ODD = 'my host %i $HOME "q\\z'  # every character systemd treats specially in a unit


def analyze(unit: Path) -> tuple[int, str]:
    """`systemd-analyze verify` of `unit`: its exit code, and its diagnostics with the dump of
    the loaded unit (debug level prints the properties systemd parsed)."""
    assert ANALYZE, "systemd-analyze is missing: install Debian's systemd (scripts/system-deps.sh)"
    env = {**os.environ, "SYSTEMD_LOG_LEVEL": "debug", "SYSTEMD_PAGER": "cat"}
    done = subprocess.run(
        [ANALYZE, "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


def problems(text: str) -> str:
    """systemd's complaints about the unit, without the debug chatter around them."""
    keep = [
        line
        for line in text.splitlines()
        if user_unit.UNIT_NAME in line and "unit_file_build_name_map" not in line
    ]
    return "\n".join(keep[:20])


def dumped(text: str, prop: str) -> list[str]:
    return re.findall(rf"^\s+{prop}: (.*)$", text, re.M)


@pytest.fixture
def checkout(tmp_path) -> Path:
    repo = tmp_path / ODD
    repo.mkdir()
    (repo / "manage.py").write_text("")
    return repo


def test_the_installed_unit_loads_with_the_paths_it_was_given(tmp_path, checkout, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    state = f"/srv/{ODD}"
    path = user_unit.install(tmp_path, checkout, {"HOST_STATE_DIR": state, "HOST_PORT": "48000"})

    rc, out = analyze(path)

    assert rc == 0, problems(out)
    assert "not absolute" not in out and "will not be started" not in out
    assert dumped(out, "WorkingDirectory") == [str(checkout)]
    assert f"HOST_STATE_DIR={state}" in dumped(out, "Environment")
    command = dumped(out, "Command Line")
    assert len(command) == 1 and command[0].split(" ", 1)[0].strip('"') == sys.executable


def test_a_python_path_with_a_space_and_a_percent_runs(tmp_path, checkout):
    venv = tmp_path / "venv dir %x" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    unit = tmp_path / "unit" / user_unit.UNIT_NAME
    unit.parent.mkdir()
    unit.write_text(user_unit.render(str(venv / "python"), str(checkout / "manage.py"), "/"))

    rc, out = analyze(unit)

    assert rc == 0, problems(out)
    assert dumped(out, "Command Line")[0].startswith(f'"{venv / "python"}" ')


def test_the_quoted_working_directory_is_what_systemd_refuses(tmp_path, checkout):
    """The check can fail: the form written before (a quoted path) does not load."""
    unit = tmp_path / "unit" / user_unit.UNIT_NAME
    unit.parent.mkdir()
    text = user_unit.render(sys.executable, str(checkout / "manage.py"), "/srv/h")
    unit.write_text(text.replace("WorkingDirectory=/srv/h", 'WorkingDirectory="/srv/h"'))
    rc, out = analyze(unit)
    assert rc != 0 and "not absolute" in out


def _user_manager() -> str | None:
    """Why no user manager can be used here, or None when `systemctl --user` answers."""
    if shutil.which("systemctl") is None:
        return "systemctl is not installed"
    done = subprocess.run(
        ["systemctl", "--user", "is-system-running"], capture_output=True, text=True, timeout=10
    )
    if done.stdout.strip() not in ("running", "degraded"):
        return f"no systemd --user reachable ({(done.stdout + done.stderr).strip()[:200]})"
    return None


@pytest.mark.e2e
def test_the_unit_starts_under_a_real_user_manager(tmp_path):
    why = _user_manager()
    if why:
        pytest.skip(why)
    repo = tmp_path / "start %d here"
    repo.mkdir()
    seen = repo / "seen"
    record = f"open({str(seen)!r}, 'w').write(os.getcwd() + '|' + ' '.join(sys.argv[1:]))"
    (repo / "manage.py").write_text(f"import os, sys\n{record}\n")
    name = f"hostmgmt-test-{uuid.uuid4().hex[:8]}.service"
    unit_dir = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "systemd/user"
    unit_dir.mkdir(parents=True, exist_ok=True)
    unit = unit_dir / name
    unit.write_text(
        user_unit.render(sys.executable, str(repo / "manage.py"), str(repo)).replace(
            "Restart=on-failure", "Restart=no"
        )
    )
    try:
        subprocess.run(["systemctl", "--user", "daemon-reload"], check=True, timeout=30)
        subprocess.run(["systemctl", "--user", "start", name], check=True, timeout=30)
        deadline = time.monotonic() + 20
        while not seen.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert seen.read_text() == f"{repo}|runhost"
    finally:
        subprocess.run(["systemctl", "--user", "stop", name], timeout=30)
        unit.unlink(missing_ok=True)
        subprocess.run(["systemctl", "--user", "daemon-reload"], timeout=30)
