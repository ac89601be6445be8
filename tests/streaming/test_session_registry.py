"""The session core's registry (one Redis key family for both planes), the compat claim on top
of it, and the session manager's socket and fork path, on the tests' Redis."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streaming import services, status
from streaming.sessions import registry, runtime

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def r(redis_db):
    """The host's Redis accessor on the tests' Redis, empty."""
    return redis_db


def rec(sid: str, plane: str, fp: str = "ab" * 32, **extra) -> dict:
    return {"id": sid, "plane": plane, "pid": os.getpid(), "client": "Deck",
            "client_id": fp[:12], "fingerprint": fp, "mode": "1280x720@60", "width": 1280,
            "height": 720, "fps": 60, "app": "desktop", "app_title": "Desktop",
            "t_start": time.time(), **extra}  # fmt: skip


def test_ids_are_short_random_hex_and_do_not_repeat():
    ids = {registry.new_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    assert registry.client_id("ABCDEF0123456789" * 4) == "abcdef012345"


def test_live_records_of_both_planes_and_dead_ones_dropped(r):
    registry.put(rec("aaaa0001", "compat"))
    registry.put(rec("aaaa0002", "native"))
    assert [x["id"] for x in registry.live()] == ["aaaa0001", "aaaa0002"]
    assert [x["id"] for x in registry.live("native")] == ["aaaa0002"]
    # A session whose process is gone is not live, and its record goes.
    dead = subprocess.Popen(["true"])
    dead.wait()
    registry.put(rec("aaaa0003", "native", pid=dead.pid))
    # A heartbeat older than STALE_S: not live either (a hung or frozen session).
    r.hset(registry.LIVE, "aaaa0004",
           json.dumps({**rec("aaaa0004", "native"), "beat": time.time() - 60}))  # fmt: skip
    assert {x["id"] for x in registry.live()} == {"aaaa0001", "aaaa0002"}
    assert set(r.hkeys(registry.LIVE)) == {b"aaaa0001", b"aaaa0002"}
    registry.remove("aaaa0001")
    assert registry.get("aaaa0001") is None and registry.get("aaaa0002")["plane"] == "native"


def test_stop_requests_reach_only_the_sessions_asked(r):
    registry.put(rec("bbbb0001", "compat", fp="11" * 32))
    registry.put(rec("bbbb0002", "native", fp="22" * 32))
    registry.put(rec("bbbb0003", "native", fp="33" * 32))
    assert registry.stop_clients(["22" * 32], "unpaired") == 1
    assert registry.pop("bbbb0002") == [{"op": "stop", "reason": "unpaired", "deliberate": True}]
    assert registry.pop("bbbb0001") == [] and registry.pop("bbbb0003") == []
    assert registry.stop_clients(None, "api", plane="native") == 2
    assert registry.pop("bbbb0001") == []
    assert [m["reason"] for m in registry.pop("bbbb0003")] == ["api"]
    # wait_s: the call returns once the sessions are gone, not before.
    t0 = time.monotonic()
    assert registry.stop([registry.get("bbbb0001")], "api", wait_s=0.5) == 1
    assert time.monotonic() - t0 >= 0.45


def test_compat_claims_take_port_slots_and_status_reads_both_planes(r, monkeypatch):
    monkeypatch.setattr(status, "_lifecycle_games", lambda *a: [])
    first = {k: v for k, v in rec("cccc0001", "compat").items() if k not in ("plane", "pid")}
    assert services.claim(first) == 0
    assert services.current()["id"] == "cccc0001" and services.current()["state"] == "starting"
    assert services.current("ab" * 32)["port_slot"] == 0 and services.current("cd" * 32) is None
    registry.put(rec("cccc0003", "native", fp="44" * 32))
    snap = services.runtime_status()
    assert snap["session"] == {"width": 1280, "height": 720, "fps": 60}
    games = {(g["plane"], g["session_id"], g["client"]) for g in snap["games"]}
    assert games == {("compat", "cccc0001", "Deck"), ("native", "cccc0003", "Deck")}
    services.release("cccc0001")
    assert services.current() is None and services.claim({**first, "id": "cccc0002"}) == 0


def test_the_manager_forks_a_session_per_request_and_stops_cleanly(tmp_path):
    env = {**os.environ, "HOST_STATE_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE":
           "hostmgmt.settings", "REDIS_URL": f"unix://{tmp_path}/none.sock"}  # fmt: skip
    (tmp_path / "logs").mkdir()
    manager = subprocess.Popen([sys.executable, "-m", "streaming.sessions.manager"], cwd=ROOT,
                               env=env, stderr=subprocess.PIPE)  # fmt: skip
    path = tmp_path / "sessions" / "manager.sock"
    try:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        os.environ["HOST_STATE_DIR"], saved = str(tmp_path), os.environ.get("HOST_STATE_DIR")
        try:
            # The forked compat session answers the /launch itself: it cannot reach Redis to
            # take its place, so the answer is its failure, not a silence or a hang.
            answer = runtime.spawn("compat", {"id": "dddd0001", "arm": "x"}, timeout_s=30)
            with pytest.raises(ValueError):
                runtime.spawn("webrtc", {}, timeout_s=1)
        finally:
            if saved is None:
                del os.environ["HOST_STATE_DIR"]
            else:
                os.environ["HOST_STATE_DIR"] = saved
        assert answer == {"status": 500, "message": "Streaming engine error"}, answer
        # A request that is not one: the connection is closed, the manager lives on.
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(path))
            s.sendall(b'{"plane": "native"}\n')
            assert s.recv(100) == b""
        assert manager.poll() is None
    finally:
        manager.send_signal(signal.SIGTERM)
        assert manager.wait(20) == 0
    assert not path.exists()


def test_spawn_waits_for_a_manager_that_is_starting_then_gives_up(tmp_path, monkeypatch):
    """The manager imports both planes before it listens: a launch arriving meanwhile waits
    for the socket (up to MANAGER_WAIT_S) instead of a 503; none ever listening is a 503."""
    path = tmp_path / "manager.sock"
    monkeypatch.setattr(runtime, "socket_path", lambda: path)
    answered = []

    def late_manager():
        time.sleep(1.0)  # still importing
        with socket.socket(socket.AF_UNIX) as srv:
            srv.bind(str(path))
            srv.listen(1)
            conn, _ = srv.accept()
            with conn:
                assert b'"plane": "compat"' in conn.recv(65536)
                conn.sendall(b'{"pid": 4242}\n')
                answered.append(True)

    thread = threading.Thread(target=late_manager)
    thread.start()
    t0 = time.monotonic()
    assert runtime.spawn("compat", {"id": "x"}, timeout_s=5, manager_wait_s=10) == {"pid": 4242}
    thread.join(5)
    assert answered and time.monotonic() - t0 >= 0.9
    path.unlink()
    # Nobody listens within the wait: 503 after it, not at once and not forever.
    t0 = time.monotonic()
    with pytest.raises(runtime.SpawnError) as err:
        runtime.spawn("compat", {"id": "x"}, timeout_s=5, manager_wait_s=0.5)
    assert err.value.status == 503 and 0.45 <= time.monotonic() - t0 < 3


def test_a_held_answer_is_the_first_line_whatever_the_session_starts_before_it(tmp_path):
    """A compat session answers once armed; what it started meanwhile (an app that prints)
    writes to stderr, never into the requester's line, and a session that dies before
    answering still answers its failure."""
    script = (
        "import subprocess, sys\n"
        "from streaming.sessions.process import held_answer, reply\n"
        "with held_answer({'status': 500}) as answer:\n"
        "    subprocess.run(['echo', 'an app talking'], check=True)\n"
        "    print('the session talking', flush=True)\n"
        "    if sys.argv[1] == 'ok':\n"
        "        reply({'status': 200}, answer)\n"
        "    else:\n"
        "        raise SystemExit(3)\n"
    )
    for how, want in (("ok", {"status": 200}), ("dies", {"status": 500})):
        out = subprocess.run([sys.executable, "-c", script, how], cwd=ROOT, capture_output=True,
                             text=True, timeout=60)  # fmt: skip
        assert json.loads(out.stdout.splitlines()[0]) == want, out
        assert len(out.stdout.splitlines()) == 1, out.stdout
        assert "an app talking" in out.stderr and "the session talking" in out.stderr
