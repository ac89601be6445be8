"""A host of our own for the streaming tests: the stream ports are fixed per host and one
session runs at a time, so sharing `live_host` with other areas' tests would make them wait on
each other. The catalog has Desktop plus a probe app whose command records its environment,
and a prep step whose do/undo leave marks; `ping_timeout` is short so a vanished client is
noticed in 3 s instead of 10.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.console.conftest import admin, mgmt  # noqa: F401 - fixtures
from tests.support.livehost import ROOT, running_host
from tests.support.moonlight import Moonlight, post_pin

CLIENT = str(ROOT / "tests/support/client.py")


def probe_apps(marks: Path) -> dict:
    env_file = marks / "app-env.json"
    # One process from start to end (python execs sleep): the game lifecycle layer follows
    # the launched title's own process, and a short-lived helper would read as the game.
    cmd = (f"exec {sys.executable} -c 'import json,os; open(\"{env_file}\", \"w\").write("
           f"json.dumps(dict(os.environ))); os.execvp(\"sleep\", [\"sleep\", \"300\"])'"
           )  # fmt: skip
    return {
        "env": {"STREAM_TEST_MARK": str(marks)},
        "apps": [
            {"name": "Desktop"},
            {
                "name": "Probe",
                "cmd": cmd,
                "prep-cmd": [{"do": f"touch {marks}/prep-do", "undo": f"touch {marks}/prep-undo"}],
            },
        ],
    }


class WebhookSink(ThreadingHTTPServer):
    """Receives the stream webhooks. Addressed by the machine's host name: the webhook URL
    check refuses loopback literals, and the name resolves to this machine."""

    def __init__(self):
        self.bodies: list[dict] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                sink.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(("0.0.0.0", 0), Handler)
        self.url = f"http://{socket.gethostname()}:{self.server_address[1]}/hook"
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def stream_host():
    state = Path(tempfile.mkdtemp(prefix="stream-e2e-"))
    marks = state / "marks"
    marks.mkdir()
    sink = WebhookSink()
    (state / "host.conf").write_text(f"ping_timeout = 3000\nwebhook_url_1 = {sink.url}\n")
    (state / "apps.json").write_text(json.dumps(probe_apps(marks)))
    try:
        with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state) as host:
            host.marks, host.webhooks = marks, sink
            yield host
    finally:
        sink.shutdown()


def pair(host, config_dir: Path, pin: str = "2468", name: str = "Streamer") -> Moonlight:
    ml = Moonlight(host, config_dir)
    ml.start_pairing(pin)
    assert post_pin(host, (ADMIN_USER, ADMIN_PASSWORD), pin, name)["status"] is True
    ml.wait_paired()
    assert ml.error is None, ml.error
    return ml


def run_client(host, config_dir, w, h, fps, seconds, action, draw=True,
               app: str = "Desktop") -> subprocess.Popen:  # fmt: skip
    args = [sys.executable, CLIENT, str(host.base_port), str(config_dir), str(w), str(h),
            str(fps), str(seconds), action]  # fmt: skip
    if draw:
        args += [host.url, host.mgmt_token, str(host.cert_path)]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT),
                                            "CLIENT_APP": app})  # fmt: skip


def client_result(proc: subprocess.Popen, timeout: float = 90) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def events(host, kinds: str, until, timeout: float = 15) -> list[dict]:
    """Events from the SSE stream (replay from 0, then live) until `until(events)` holds."""
    seen: list[dict] = []
    deadline = time.monotonic() + timeout
    with host.mgmt() as c:
        try:
            with c.stream("GET", f"/api/v1/events?since=0&kinds={kinds}",
                          timeout=httpx.Timeout(timeout, read=timeout)) as r:  # fmt: skip
                assert r.status_code == 200
                for line in r.iter_lines():
                    if line.startswith("data:"):
                        seen.append(json.loads(line[5:]))
                    if until(seen) or time.monotonic() > deadline:
                        break
        except httpx.ReadTimeout:
            pass
    return seen


def owned_processes(state_dir: Path) -> list[str]:
    """Every live process started for this host's displays or apps (by environment)."""
    found = []
    marks = (f"HOST_DISPLAY_OWNER={state_dir}".encode(),
             f"STREAM_TEST_MARK={state_dir}/marks".encode())  # fmt: skip
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if stat != "Z" and any(m + b"\0" in env + b"\0" for m in marks):
            found.append(cmd.replace(b"\0", b" ").decode(errors="replace")[:120])
    return found


def wait_for(predicate, timeout: float = 15, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)
