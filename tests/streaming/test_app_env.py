"""Launched apps and their prep steps never see the host's secrets: HOST_MGMT_TOKEN,
HOST_PLUGIN_TOKEN and any other secret-named variable of the host's environment are left out,
on both planes, by the same rule as hook commands (common/env.py). The entry's own `env`
(written by the operator for that app) is kept whatever its names.

The native plane's launch (`AppRun`) runs in-process here, with a real command; the compat
plane's runs on a host of its own started with the secrets in its environment, launched by a
paired Moonlight client.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

import pytest

from common.env import without_secrets
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.support.livehost import running_host

MGMT = "a1" * 32
PLUGIN = "b2" * 32
HOST_SECRETS = {
    "HOST_MGMT_TOKEN": MGMT,
    "HOST_PLUGIN_TOKEN": PLUGIN,
    "MY_API_SECRET": "s3cr3t-value-1",
    "DB_PASSWORD": "s3cr3t-value-2",
    "STORE_APIKEY": "s3cr3t-value-3",
    "aws_secret_access_key": "s3cr3t-value-4",
}
SECRET_VALUES = set(HOST_SECRETS.values())


def dump_env_cmd(path: Path, then_sleep: bool) -> str:
    """A shell command that writes its whole environment to `path` as JSON (then sleeps, so the
    launch sees a running title)."""
    tail = '; os.execvp("sleep", ["sleep", "300"])' if then_sleep else ""
    code = f'import json,os; open("{path}", "w").write(json.dumps(dict(os.environ))){tail}'
    return f"exec {sys.executable} -c '{code}'"


def assert_no_host_secret(env: dict) -> None:
    leaked = [k for k in HOST_SECRETS if k in env]
    assert not leaked, leaked
    assert not SECRET_VALUES & set(env.values())


def wait_json(path: Path, timeout: float = 15) -> dict:
    from tests.streaming.conftest import wait_for

    text = wait_for(lambda: path.exists() and path.read_text() or None, timeout)
    assert text, f"{path} was never written"
    return json.loads(text)


def test_the_shared_rule_strips_secret_names_and_keeps_the_rest():
    env = {**HOST_SECRETS, "PATH": "/usr/bin", "HOME": "/home/x", "XAUTHORITY": "/x", "PIN": "1"}
    assert without_secrets(env) == {"PATH": "/usr/bin", "HOME": "/home/x", "XAUTHORITY": "/x",
                                    "PIN": "1"}  # fmt: skip


@pytest.mark.django_db
def test_native_launch_and_its_prep_get_no_host_secret(tmp_path, monkeypatch):
    from streaming.sessions.apps import AppRun, Choice

    for name, value in HOST_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KEEP_ME", "visible")
    app_file, prep_file = tmp_path / "app-env.json", tmp_path / "prep-env.json"
    choice = Choice(
        "app:env-probe",
        "Env probe",
        cmd=dump_env_cmd(app_file, then_sleep=True),
        env={"GAME_API_KEY": "operator-set"},
        prep=[{"do": dump_env_cmd(prep_file, then_sleep=False)}],
        exit_timeout=1,
    )
    run = AppRun(choice, session_id=990001, client_name="env probe")
    client = {"name": "env probe", "uuid": "u", "fingerprint": "f" * 64}
    try:
        display = {"backend": "xvfb", "x_display": ":99"}  # machine.acquire's answer
        run.start(display, {"PULSE_SINK": "s"}, client, (1280, 720, 60))
        app_env, prep_env = wait_json(app_file), wait_json(prep_file)
    finally:
        run.end("api")
    for env in (app_env, prep_env):
        assert_no_host_secret(env)
        assert env["KEEP_ME"] == "visible" and env["DISPLAY"] == ":99"
        assert env["GAME_API_KEY"] == "operator-set"  # the entry's own env is the operator's


@pytest.mark.e2e
@pytest.mark.slow
def test_compat_launch_and_its_prep_get_no_host_secret(tmp_path):
    from tests.streaming.conftest import pair

    state = Path(tempfile.mkdtemp(prefix="appenv-e2e-"))
    marks = state / "marks"
    marks.mkdir()
    app_file, prep_file = marks / "app-env.json", marks / "prep-env.json"
    apps = {
        "env": {"STREAM_TEST_MARK": str(marks)},
        "apps": [
            {"name": "Desktop"},
            {
                "name": "EnvProbe",
                "cmd": dump_env_cmd(app_file, then_sleep=True),
                "prep-cmd": [{"do": dump_env_cmd(prep_file, then_sleep=False)}],
                "exit-timeout": 1,
            },
        ],
    }
    (state / "apps.json").write_text(json.dumps(apps))
    # The token files agree with the environment, so the test's own API calls authenticate.
    (state / "mgmt-token").write_text(f"HOST_MGMT_TOKEN={MGMT}\n")
    (state / "plugin-token").write_text(f"HOST_PLUGIN_TOKEN={PLUGIN}\n")
    for name in ("mgmt-token", "plugin-token"):
        (state / name).chmod(0o600)
    env = {**HOST_SECRETS, "KEEP_ME": "visible"}
    with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state, env=env) as host:
        ml = pair(host, tmp_path / "ml", pin="1593", name="Env client")
        probe = next(a.id for a in ml.apps() if a.name == "EnvProbe")
        keys = "rikey=000102030405060708090a0b0c0d0e0f&rikeyid=7&localAudioPlayMode=0"
        xml = ml.https("launch", f"appid={probe}&mode=1280x720x60&{keys}")
        assert re.search(r'status_code="200"', xml), xml
        try:
            app_env, prep_env = wait_json(app_file), wait_json(prep_file)
        finally:
            with host.mgmt() as c:
                assert c.delete("/api/v1/session").status_code == 204
    for got in (app_env, prep_env):
        assert_no_host_secret(got)
        assert got["KEEP_ME"] == "visible" and got["HOST_APP_NAME"] == "EnvProbe"
