"""End to end on a real host, under the default `keep`: a real moonlight-python client launches
an app, stops streaming (the app stays), resumes, stops again and quits (/cancel). Each stream
leaves its own history record and its own `stream.start`/`stream.end` pair at a real HTTP
receiver, the first one as soon as the client stopped (not when the app ended); the app's own
lifetime is one `game.running`/`game.exited` pair and the session one `session.*` pair."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.streaming.conftest import (
    client_result,
    events,
    owned_processes,
    pair,
    run_client,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_stop_resume_stop_quit_leaves_two_records_and_two_webhook_pairs(stream_host, tmp_path):
    host = stream_host
    ml = pair(host, tmp_path / "ml", pin="1357", name="Recorder")
    proc = run_client(host, tmp_path / "ml", 640, 360, 30, 3, "resume", draw=False, app="Probe")
    r = client_result(proc)
    # Both streams carried video (the frame rate is not this test's concern: under the load
    # of parallel work it read 8 frames in 3 s, at 30 fps asked).
    assert r["frames"] > 0 and r["resumed_frames"] > 0, r
    assert r["idle_currentgame"] == r["desktop_id"], r  # the app stayed between the streams
    assert r["serverinfo_after"] == 0

    hooks = wait_for(lambda: len(host.webhooks.bodies) >= 4 and host.webhooks.bodies, 20)
    assert hooks, f"stream webhooks at {host.webhooks.url}: {host.webhooks.bodies}"
    assert [h["event"] for h in hooks] == ["stream.start", "stream.end"] * 2, hooks
    sid = hooks[0]["session_id"]
    assert len(sid) == 8 and {h["session_id"] for h in hooks} == {sid}
    assert {h["app_name"] for h in hooks} == {"Probe"}
    assert {h["client_name"] for h in hooks} == {"Recorder"}

    with host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as c:
        records = c.get(f"/api/sessions?session={sid}").json()["sessions"]
    assert len(records) == 2, records
    second, first = records  # newest first
    assert {x["session_id"] for x in records} == {sid}
    assert {(x["app_name"], x["client_name"]) for x in records} == {("Probe", "Recorder")}
    # The first stream's record was written when its client stopped, before the resume: not
    # when the app ended at /cancel.
    assert first["t_end"] <= second["t_start"], records
    for rec in records:
        assert rec["avg_bitrate_kbps"] > 0 and rec["avg_encode_ms"] > 0, rec
    assert hooks[1]["avg_bitrate_kbps"] == first["avg_bitrate_kbps"]
    assert hooks[3]["avg_bitrate_kbps"] == second["avg_bitrate_kbps"]
    t_end_1 = datetime.fromisoformat(hooks[1]["t_end"]).timestamp()
    assert t_end_1 <= datetime.fromisoformat(hooks[2]["t_start"]).timestamp() + 1

    def mine(e) -> bool:
        ref = e.get("client") or e.get("stream") or e.get("session") or e.get("game") or {}
        return ref.get("session_id", ref.get("id")) == sid

    kinds = "client.*,session.*,stream.*,game.*"
    seen = events(host, kinds, lambda ev: any(e["kind"] == "session.ended" for e in ev))
    order = [e["kind"] for e in seen if mine(e)]
    assert order.count("stream.started") == 2 and order.count("stream.stopped") == 2, order
    assert order.count("session.started") == 1 and order.count("session.ended") == 1, order
    assert order.count("game.running") == 1 and order.count("game.exited") == 1, order
    client_refs = [e["client"] for e in seen if e["kind"].startswith("client.") and mine(e)]
    assert len(client_refs) == 4 and {c["fingerprint"] for c in client_refs} == {ml.fingerprint}
    assert wait_for(lambda: not owned_processes(host.state_dir), 5)
