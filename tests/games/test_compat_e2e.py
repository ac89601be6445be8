"""A real compat session on a host of its own: the session settings decide what a user's
"stop streaming" does to the launched title, and GET /gpus reports the live encode.

moonlight-python (tests/games/stop_client.py) launches a title whose launcher starts the
"game" (`stopgame`, a detect hint) and leaves, streams, then ends its stream gracefully (ENet
disconnect, no /cancel). Per mgmt-api-records §1.3: `keep` never ends the game, so the app
stays for a /resume or /cancel; `on_quit` and `always` end it on a user stop at once. The
settings are PUT between runs, with no restart, and read when the client leaves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.streaming.conftest import events, owned_processes, pair, wait_for
from tests.support.livehost import ROOT, running_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CLIENT = str(ROOT / "tests/games/stop_client.py")
LAUNCHER = "#!/bin/bash\n( exec -a stopgame sleep 300 ) &\nexit 0\n"


@pytest.fixture(scope="module")
def stop_host():
    state = Path(tempfile.mkdtemp(prefix="gamelife-e2e-"))
    marks = state / "marks"
    marks.mkdir()
    (marks / "launcher.sh").write_text(LAUNCHER)
    (state / "host.conf").write_text("ping_timeout = 3000\n")
    apps = {
        "env": {"STREAM_TEST_MARK": str(marks)},
        "apps": [
            {"name": "Desktop"},
            {
                "name": "Stopper",
                "cmd": f"exec bash {marks}/launcher.sh",
                "exit-timeout": 2,
                "detect": {"process_name": "stopgame"},
            },
        ],
    }
    (state / "apps.json").write_text(json.dumps(apps))
    with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state) as host:
        host.marks = marks
        yield host


def game_pids(host) -> list[int]:
    found = []
    mark = f"STREAM_TEST_MARK={host.marks}".encode()
    for p in os.listdir("/proc"):
        try:
            proc = Path(f"/proc/{p}")
            cmd = (proc / "cmdline").read_bytes()
            if cmd.startswith(b"stopgame\0") and mark in (proc / "environ").read_bytes():
                found.append(int(p))
        except (OSError, ValueError):
            continue
    return found


def status(host) -> dict:
    with host.mgmt() as c:
        return c.get("/api/v1/status").json()


def active_gpu(host):
    with host.mgmt() as c:
        r = c.get("/api/v1/gpus")
        assert r.status_code == 200, r.text
        return r.json()["active"]


def put_settings(host, body: dict) -> None:
    with host.mgmt() as c:
        r = c.put("/api/v1/session/settings", json=body)
        assert r.status_code == 200, r.text


class Stream:
    """The client streaming the title, until `stop()` ends its stream gracefully."""

    def __init__(self, host, cfg):
        self.proc = subprocess.Popen(
            [sys.executable, CLIENT, str(host.base_port), str(cfg), "Stopper"], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read()[-3000:]
        assert json.loads(line)["streaming"] is True

    def stop(self) -> dict:
        out, err = self.proc.communicate("\n", timeout=30)
        assert self.proc.returncode == 0, err[-3000:]
        return json.loads(out.strip().splitlines()[-1])


def test_user_stop_follows_the_session_settings_and_gpus_counts_the_live_encode(
    stop_host, tmp_path
):
    host = stop_host
    cfg = tmp_path / "ml"
    ml = pair(host, cfg, pin="1357", name="Stopper")
    assert active_gpu(host) is None  # nothing encodes yet

    # keep (the default): the user stop leaves the game and the session for a /resume.
    stream = Stream(host, cfg)
    assert wait_for(lambda: status(host)["stream"] is not None, 10)
    # The host config leaves `encoder` on auto: the engine encodes with libx264, on no GPU.
    assert active_gpu(host) == {"id": "", "name": "Software encoder (CPU)", "vendor": "other",
                                "backend": "software", "sessions": 1}  # fmt: skip
    pids = wait_for(lambda: game_pids(host), 10)
    assert len(pids) == 1
    assert stream.stop()["frames"] > 10
    assert wait_for(lambda: status(host)["stream"] is None, 10)
    assert active_gpu(host) is None  # idle: the app waits, nothing is encoded
    now = status(host)
    assert now["session"] is not None, now  # still there for a /resume or /cancel
    assert game_pids(host) == pids
    with host.mgmt() as c:
        assert c.delete("/api/v1/session").status_code == 204
    assert wait_for(lambda: not game_pids(host), 10)

    # on_quit and always: a user stop ends the game at once (no /cancel, no idle wait); the
    # display lingers as after any client disconnect.
    for policy in ("on_quit", "always"):
        put_settings(host, {"game_on_session_end": policy, "disconnect_grace_seconds": 600})
        stream = Stream(host, cfg)
        assert wait_for(lambda: game_pids(host), 10)
        assert stream.stop()["frames"] > 10
        assert wait_for(lambda: status(host)["session"] is None, 10), policy
        assert wait_for(lambda: not game_pids(host), 5), policy
        assert not [g for g in status(host)["games"] if g["state"] == "grace"]
        with host.mgmt() as c:
            displays = c.get("/api/v1/display/state").json()["displays"]
        assert [d["state"] for d in displays] == ["lingering"], displays
    put_settings(host, {})

    def done(ev):
        return sum(e["kind"] == "session.ended" for e in ev) >= 3

    seen = events(host, "client.*,game.*,session.*", done, timeout=20)
    mine = [e for e in seen if e["kind"] == "client.disconnected"
            and e["client"]["fingerprint"] == ml.fingerprint]  # fmt: skip
    assert [e["reason"] for e in mine] == ["quit"] * 3
    exits = [e["reason"] for e in seen if e["kind"] == "game.exited"]
    ends = [e["reason"] for e in seen if e["kind"] == "session.ended"]
    assert exits == ["terminated"] * 3 and ends == ["api", "client", "client"], (exits, ends)
    with host.mgmt() as c:
        assert c.post("/api/v1/display/release", json={}).json()["released"] == 1
    assert wait_for(lambda: not owned_processes(host.state_dir), 10)
