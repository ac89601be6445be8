"""The plugin runner with real plugin processes in a real plugin venv: the environment a plugin
gets (its own token, no host secret), restart with backoff (a plugin that exits at once is not
spun), the log rate limit, rescan on request, and stopping with the runtime switch."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time

import pytest

from access import plugin_tokens
from common import procs, statedir
from plugins import env, runner, runner_control, wheel

pytestmark = pytest.mark.timeout(180)

PLUGINS = {
    # dumps the part of its environment the test reads (what the runner adds and what it must
    # keep out), then lives; the whole environment overran the log's line cap when the test
    # ran with a longer one (under make with arguments)
    "envdump": "import json, os, sys, time\n"
    "def main():\n"
    "    keep = ('HOST_', 'MY_', 'SSL_CERT_FILE')\n"
    "    print(json.dumps({k: v for k, v in os.environ.items() if k.startswith(keep)}),\n"
    "          flush=True)\n"
    "    time.sleep(600)\n",
    # exits at once
    "crasher": "def main():\n    return 7\n",
    # floods its log
    "flood": "import sys, time\n"
    "def main():\n"
    "    for i in range(20000):\n"
    "        sys.stdout.write(f'line {i}\\n')\n"
    "    sys.stdout.flush()\n"
    "    time.sleep(600)\n",
}


def _build(tmp_path, pid: str, code: str):
    src = tmp_path / f"src-{pid}"
    pkg = src / f"p_{pid}"
    pkg.mkdir(parents=True)
    (src / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [project]
            name = "host-plugin-{pid}"
            version = "1.0"
            [project.entry-points."hostmgmt.plugins"]
            {pid} = "p_{pid}:main"
            """
        )
    )
    (pkg / "__init__.py").write_text(code)
    return wheel.build_wheel(src, tmp_path / "out")


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runner")
    old = os.environ.get("HOST_STATE_DIR")
    os.environ["HOST_STATE_DIR"] = str(tmp / "state")
    python = env.ensure_env()
    wheels = [str(_build(tmp, pid, code)) for pid, code in PLUGINS.items()]
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index"]
    subprocess.run([*pip, *wheels], check=True, capture_output=True, timeout=120)
    yield tmp
    if old is None:
        os.environ.pop("HOST_STATE_DIR", None)
    else:
        os.environ["HOST_STATE_DIR"] = old


def _sandbox():
    """The runner's real sandbox (bubblewrap): the runner refuses to run plugins without one."""
    sandbox, why = runner.make_sandbox([statedir.state_dir()])
    assert sandbox is not None, f"plugin confinement needs bubblewrap (bwrap): {why}"
    return sandbox


def _until(predicate, timeout=15.0, tick=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if tick:
            tick()
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_runner_runs_restarts_throttles_and_stops(state, monkeypatch, caplog):
    monkeypatch.setenv("HOST_MGMT_TOKEN", "a" * 64)
    monkeypatch.setenv("MY_API_SECRET", "do-not-leak")
    monkeypatch.setattr(runner, "LOG_BURST", 50)
    r = runner.Runner("https://127.0.0.1:1/api/v1", "/tmp/ca.pem", sandbox=_sandbox())
    runner_control.set_runtime_enabled(True)
    caplog.set_level(logging.INFO)
    try:
        r.tick()
        assert set(r.plugins) == {"envdump", "crasher", "flood"}
        # the environment: its own token and id, the host's CA, no host secret
        dump = _until(
            lambda: r.plugins["envdump"].tail and r.plugins["envdump"].tail[0], tick=r.tick
        )
        assert "HOST_PLUGIN_ID" in dump and "envdump" in dump
        seen = [rec for rec in caplog.records if rec.name == "plugin.envdump"]

        got = json.loads(seen[0].getMessage())
        assert got["HOST_PLUGIN_TOKEN"] == plugin_tokens.ensure("envdump")
        assert got["HOST_PLUGIN_TOKEN"] != plugin_tokens.ensure("flood")
        assert got["HOST_MGMT_URL"] == "https://127.0.0.1:1/api/v1"
        # the certificate is bound read-only at a fixed path inside the sandbox
        assert got["SSL_CERT_FILE"] == got["HOST_CA_FILE"] == runner.SANDBOX_CA
        assert "HOST_MGMT_TOKEN" not in got and "MY_API_SECRET" not in got
        assert "HOST_STATE_DIR" not in got
        # the token never reaches the host's log in clear
        assert got["HOST_PLUGIN_TOKEN"] not in "\n".join(r.plugins["envdump"].tail)

        # a plugin that exits at once: backed off 1, 2, 4 s..., never spun
        t0 = time.monotonic()
        _until(lambda: r.plugins["crasher"].restarts >= 2, timeout=10, tick=r.tick)
        elapsed = time.monotonic() - t0
        assert elapsed >= 2.5, elapsed  # 1 s + 2 s of backoff before the second restart
        assert r.plugins["crasher"].last_exit == 7
        assert r.plugins["crasher"].restarts <= 3

        # the flooding plugin: most lines dropped and counted, the runner keeps ticking
        _until(lambda: r.plugins["flood"].gate.dropped_total > 10000, tick=r.tick)
        logged = [rec for rec in caplog.records if rec.name == "plugin.flood"]
        assert len(logged) < 500
        status = runner_control.status()
        assert status["flood"]["log_dropped"] > 10000 and status["envdump"]["running"]

        # kill -9: restarted with a new pid
        old_pid = r.plugins["envdump"].proc.pid
        os.kill(old_pid, 9)
        _until(
            lambda: r.plugins["envdump"].alive() and r.plugins["envdump"].proc.pid != old_pid,
            timeout=10,
            tick=r.tick,
        )
        assert runner_control.status()["envdump"]["restarts"] == 1

        # runtime off: every plugin process is gone
        pids = [p.proc.pid for p in r.plugins.values() if p.proc is not None]
        runner_control.set_runtime_enabled(False)
        r.tick()
        assert r.plugins == {}
        for pid in pids:
            assert not procs.alive(pid)
        assert runner_control.status() == {}
    finally:
        runner_control.set_runtime_enabled(False)
        r.stop_all()


def test_rescan_picks_up_an_uninstall(state):
    r = runner.Runner("https://127.0.0.1:1/api/v1", "/tmp/ca.pem", sandbox=_sandbox())
    runner_control.set_runtime_enabled(True)
    try:
        r.tick()
        assert "crasher" in r.plugins
        python = env.env_python()
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "uninstall", "-y", "-q",
             "host-plugin-crasher"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        r.tick()
        assert "crasher" in r.plugins  # no rescan asked for yet
        runner_control.request_rescan()
        r.tick()
        assert "crasher" not in r.plugins
        assert "crasher" not in plugin_tokens._read()
    finally:
        runner_control.set_runtime_enabled(False)
        r.stop_all()
