"""Events survive a Redis outage on a real host: an SSE subscriber stays connected while the
host's Redis is killed (kill -9) and restarted by the supervisor, wiped; three
`POST /api/v1/library/custom` made meanwhile reach it afterwards, in order, with increasing
seq and no `dropped`; a Last-Event-ID replay from before the outage has them too, and the
hook on `library.changed` fired once for each."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from tests.hooks.helpers import SSEClient

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def outage_host():
    """A host of this module's own: its Redis is killed, which a shared host must not see."""
    from tests.support.livehost import running_host

    with running_host(env={"HOST_SSE_KEEPALIVE_S": "0.5"}) as host:
        host.out_dir = Path(tempfile.mkdtemp(prefix="outage-out-"))
        yield host


def redis_pid(host) -> int:
    """The supervisor's redis-server child (it rewrites its argv, so found by name and parent)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if comm == "redis-server" and ppid == host.proc.pid:
            return int(entry)
    raise AssertionError("the host's redis-server was not found")


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_events_emitted_during_a_redis_outage_reach_subscribers_in_order(outage_host):
    host = outage_host
    fired = host.out_dir / "fired"
    fired.mkdir()
    # A file per firing: firings run side by side, so appends to one file interleave.
    run = f'f=$(mktemp {fired}/.part.XXXXXX) && cat > "$f" && mv "$f" "$f.json"'
    hook = {"on": "library.changed", "run": run}
    with host.mgmt() as c:
        assert c.put("/api/v1/hooks", json={"hooks": [hook]}).status_code == 200
    sse = SSEClient(host, "/api/v1/events?kinds=library.*,host.*")
    try:
        assert sse.status == 200
        start = sse.next(timeout=15)
        assert start.event == "host.started"
        before = int(start.id)
        old_redis = redis_pid(host)
        supervisor = host.proc.pid
        # The supervisor is held while Redis is down so the outage outlasts the POSTs; it
        # restarts Redis itself once it runs again.
        os.kill(supervisor, signal.SIGSTOP)
        try:
            os.kill(old_redis, signal.SIGKILL)
            wait_for(lambda: gone(old_redis), 10, "redis to die")
            with host.mgmt() as c:
                for i in range(3):
                    r = c.post("/api/v1/library/custom", json={"title": f"Outage {i}"})
                    assert r.status_code == 201, r.text
            spool_dir = host.state_dir / "events-spool"
            assert list(spool_dir.glob("*.spool"))  # kept on disk by daphne meanwhile
        finally:
            os.kill(supervisor, signal.SIGCONT)
        back = time.monotonic()
        got = []
        while len(got) < 3:
            frame = sse.next(timeout=30)
            assert frame.event != "dropped"
            got.append(frame)
        delivered_s = time.monotonic() - back
    finally:
        sse.close()
    assert redis_pid(host) != old_redis  # the supervisor started a new (empty) Redis
    assert [f.event for f in got] == ["library.changed"] * 3
    seqs = [int(f.id) for f in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3 and seqs[0] > before
    assert all(f.json()["source"] == "manual" for f in got)
    print(f"\nkept events reached the subscriber {delivered_s:.2f} s after the supervisor resumed")

    resume = {"Last-Event-ID": str(before)}
    again = SSEClient(host, "/api/v1/events?kinds=library.*", headers=resume)
    try:
        replay = again.events(3, timeout=15)
    finally:
        again.close()
    assert [f.event for f in replay] == ["library.changed"] * 3  # no `dropped` first
    assert [int(f.id) for f in replay] == seqs

    def fired_seqs():
        import json

        return sorted(json.loads(path.read_text())["seq"] for path in fired.glob("*.json"))

    wait_for(lambda: len(fired_seqs()) >= 3, 60, "the three hook firings")
    time.sleep(1.0)  # a repeat would come right after
    assert fired_seqs() == seqs
