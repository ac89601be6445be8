"""The apps.json run fields through a real compat session on a host of its own (a paired
Moonlight client launches; no stream is needed, the session's app runs from /launch on).

* "Launcher": its command prints to stdout and stderr and exits 0 at once, with an `output`
  file and a `detached` helper. The exit is a launcher that detached (auto-detach): the
  session stays; the file has both streams appended to what it held; the helper runs in a
  session of its own and outlives the session's end.
* "Strict": `exit 0` with `auto-detach: false`: its exit ends the session (`app_exited`).
* The admin API refuses `elevated: true` with the reason, and a relative `output`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

from common import procs
from games.appfields import ELEVATED_REASON
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.streaming.conftest import events, pair, wait_for
from tests.support.livehost import running_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KEYS = "rikey=000102030405060708090a0b0c0d0e0f&rikeyid=7&localAudioPlayMode=0"


@pytest.fixture(scope="module")
def fields_host():
    state = Path(tempfile.mkdtemp(prefix="appfields-e2e-"))
    marks = state / "marks"
    marks.mkdir()
    (marks / "app.log").write_text("before the session\n")
    pid_file = marks / "helper.pid"
    code = f'import os, time; open("{pid_file}", "w").write(str(os.getpid())); time.sleep(120)'
    helper = f"exec {sys.executable} -c '{code}'"
    apps = {
        "env": {"STREAM_TEST_MARK": str(marks)},
        "apps": [
            {"name": "Desktop"},
            {
                "name": "Launcher",
                "cmd": "echo out-$HOST_APP_NAME; echo err-line >&2; exit 0",
                "output": str(marks / "app.log"),
                "detached": [helper],
                "exit-timeout": 1,
            },
            {"name": "Strict", "cmd": "exit 0", "auto-detach": False, "exit-timeout": 1},
        ],
    }
    (state / "apps.json").write_text(json.dumps(apps))
    with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state) as host:
        host.marks = marks
        yield host


def active(host) -> int:
    """Live compat sessions (armed or streaming: the status's `session` is set)."""
    with host.mgmt() as c:
        return int(c.get("/api/v1/status").json()["session"] is not None)


def launch(host, ml, name: str) -> None:
    app_id = next(a.id for a in ml.apps() if a.name == name)
    xml = ml.https("launch", f"appid={app_id}&mode=1280x720x60&{KEYS}")
    assert re.search(r'status_code="200"', xml), xml


def end_session(host) -> None:
    with host.mgmt() as c:
        assert c.delete("/api/v1/session").status_code == 204


def test_run_fields_in_a_live_compat_session(fields_host, tmp_path):
    host = fields_host
    ml = pair(host, tmp_path / "ml", pin="2584", name="Fields")
    marks = host.marks

    launch(host, ml, "Launcher")
    pid_file = marks / "helper.pid"
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text(), 10), host.log_tail()
    helper = int(pid_file.read_text())
    try:
        assert os.getsid(helper) == helper  # a session of its own, not the app's group
        # The launcher exited at once with 0: the session goes on (under the arm timeout).
        time.sleep(3)
        assert active(host) == 1, host.log_tail()
        lines = (marks / "app.log").read_text().splitlines()
        assert lines == ["before the session", "out-Launcher", "err-line"], lines
        end_session(host)
        assert wait_for(lambda: active(host) == 0, 10)
        time.sleep(1)
        assert procs.alive(helper)  # never tracked: the session's end left it running
    finally:
        os.kill(helper, signal.SIGKILL)

    launch(host, ml, "Strict")

    def strict_ended(seen):
        return any(e["kind"] == "session.ended" and e.get("reason") == "app_exited" for e in seen)

    seen = events(host, "session.*", strict_ended, timeout=15)
    assert strict_ended(seen), seen
    assert wait_for(lambda: active(host) == 0, 10)

    with host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as c:
        r = c.post("/api/apps", json={"index": -1, "name": "Admin", "elevated": True})
        assert r.status_code == 400 and ELEVATED_REASON in r.json()["error"], r.text
        r = c.post("/api/apps", json={"index": -1, "name": "Rel", "output": "rel.log"})
        assert r.status_code == 400 and "absolute" in r.json()["error"], r.text
        r = c.post("/api/apps", json={"index": -1, "name": "Plain", "elevated": False})
        assert r.status_code == 200, r.text
        names = [a["name"] for a in c.get("/api/apps").json()["apps"]]
    assert "Plain" in names and "Admin" not in names
