"""A plugin confined by the runner, on a real host: a real plugin tries to read every secret of
the host (the management token, every plugin's token, host.conf, the TLS key, the database, the
web server's and the supervisor's /proc/<pid>/environ) and writes what it got into its own data
directory; every open fails, while it still reaches the host's API with its own token. A host
started with --no-mgmt-token runs no plugin and says why."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from django.test import Client

from access import credentials, plugin_tokens
from plugins import runner, runner_control
from tests.plugins.plugin_build import install
from tests.support.livehost import running_host

PROBER = r"""
import json, os, ssl, time, urllib.request

def _api(method, path, body=None):
    ctx = ssl.create_default_context(cafile=os.environ["HOST_CA_FILE"])
    req = urllib.request.Request(
        os.environ["HOST_MGMT_URL"] + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + os.environ["HOST_PLUGIN_TOKEN"],
                 "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=20) as r:
            return r.status
    except Exception as exc:
        return repr(exc)

def main():
    data = os.environ.get("HOST_PLUGIN_DATA_DIR") or os.environ["PROBE_DIR"]
    with open(os.path.join(data, "targets.json")) as fh:
        targets = json.load(fh)
    read = {}
    for path in targets:
        try:
            with open(path, "rb") as fh:
                read[path] = "READ %d bytes" % len(fh.read())
        except OSError as exc:
            read[path] = "failed: " + type(exc).__name__
    out = {"read": read, "cwd": os.getcwd(),
           "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
           "status": _api("GET", "/status"),
           "register": _api("PUT", "/plugins/prober", {"title": "Prober"})}
    with open(os.path.join(data, "results.json.tmp"), "w") as fh:
        json.dump(out, fh)
    os.replace(os.path.join(data, "results.json.tmp"), os.path.join(data, "results.json"))
    print("prober done", flush=True)
    time.sleep(600)
"""
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]


def _until(predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not met in {timeout} s")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _prepare(tmp_path, monkeypatch) -> tuple[Path, Path]:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("HOST_STATE_DIR", str(state))
    install(tmp_path / "build", {"prober": PROBER})
    data = state / "plugins" / "data" / "prober"
    data.mkdir(mode=0o700, parents=True)
    return state, data


def test_a_confined_plugin_reads_no_host_secret_and_reaches_the_api(tmp_path, monkeypatch):
    state, data = _prepare(tmp_path, monkeypatch)
    (state / "host.conf").write_text("sunshine_name = confined\n")
    plugin_tokens.ensure("prober")  # tokens.json, as the runner would make it
    with running_host(state_dir=state, env={"PROBE_DIR": str(data)}) as host:
        tree = runner_control.process_tree(host.proc.pid)
        daphne = [p for p in tree if "daphne_main" in _cmdline(p)]
        runner_pid = [p for p in tree if "plugins.runner" in _cmdline(p)]
        assert daphne and runner_pid, [_cmdline(p) for p in tree]
        secrets = [state / name for name in ("mgmt-token", "plugin-token", "host.conf",
                   "tls-key.pem", "db.sqlite3", "django-secret")]  # fmt: skip
        secrets.append(state / "plugins" / "tokens.json")
        for path in secrets:
            assert path.exists(), path  # what the plugin tries is really there
        environs = [f"/proc/{p}/environ" for p in (host.proc.pid, daphne[0], runner_pid[0])]
        targets = [*map(str, secrets), *environs, "../../../mgmt-token", "../../tokens.json"]
        (data / "targets.json").write_text(json.dumps(targets))

        with host.mgmt() as c:
            assert c.post("/api/v1/store/runtime", json={"enabled": True}).status_code == 200
            results = data / "results.json"
            _until(results.exists, what="the plugin's results")
            got = json.loads(results.read_text())
            read = {path: how for path, how in got["read"].items() if not how.startswith("failed")}
            assert read == {}, f"a confined plugin read host secrets: {read}"
            assert set(got["read"]) == set(targets)
            # its own /proc only: none of the host's processes
            assert not {host.proc.pid, daphne[0], runner_pid[0]} & set(got["pids"]), got["pids"]
            # and the API with its own token: status, and its own registration
            assert got["status"] == 200 and got["register"] == 204, got
            runtime = c.get("/api/v1/store/runtime").json()
            assert runtime["confined"] is True, runtime
            assert runtime["confinement"] == "confined (bubblewrap)"
            c.post("/api/v1/store/runtime", json={"enabled": False})
        assert "plugin prober started" in host.log_tail(400)
        assert "NOT CONFINED" not in host.log_tail(400)


def test_a_host_without_a_management_token_runs_no_plugin(tmp_path, monkeypatch):
    state, data = _prepare(tmp_path, monkeypatch)
    (data / "targets.json").write_text("[]")
    with running_host(state_dir=state, args=["--no-mgmt-token"],
                      env={"PROBE_DIR": str(data)}) as host:  # fmt: skip
        with host.client() as c:
            assert c.post("/api/v1/store/runtime", json={"enabled": True}).status_code == 200
            runtime = _until(
                lambda: (v := c.get("/api/v1/store/runtime").json()).get("refused") and v,
                what="the runner's refusal",
            )
        assert "--no-mgmt-token" in runtime["refused"], runtime
        assert "no plugin runs" in runtime["detail"]
        time.sleep(3)  # several runner ticks: still nothing started
        assert runner_control.status() == {}
        assert not (data / "results.json").exists()
        log = host.log_tail(400)
        assert "plugin runner runs no plugin" in log and "--no-mgmt-token" in log
        assert "plugin prober started" not in log


@pytest.mark.django_db(transaction=True)
def test_the_plugins_page_says_why_no_plugin_runs(bus, restore_config):
    credentials.set_credentials("admin", "s3cret")
    operator = Client()
    operator.force_login(credentials.admin_user())
    runner_control.set_runtime_enabled(True)
    runner_control.write_status(
        {},
        refused=runner.NO_MGMT_TOKEN_REASON,
        confined=False,
        confinement="not confined: bwrap failed: no user namespaces",
    )
    text = operator.get("/plugins").content.decode()
    assert 'id="runtime-refused"' in text and "--no-mgmt-token" in text
    assert "Plugins are not confined: bwrap failed: no user namespaces" in text
