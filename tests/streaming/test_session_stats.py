"""Live statistics per session: each session process publishes its own window files
(`stream-latency-<id>.json`); /api/stream/latency and /api/stream/network-stats merge every live
session's or read one with `?session=`; one session's end removes only its own figures. The
other session writes from a separate process, as session processes do."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.test import Client

from common.statedir import state_path
from streaming import stats

ROOT = Path(__file__).resolve().parents[2]
A, B = "0000000a", "0000000b"

pytestmark = [pytest.mark.django_db]


def other_session_process(session: str, capture: float, encode: float, rtt: float) -> None:
    """A session process of its own: 30 frames and one feedback sample, then it publishes."""
    code = textwrap.dedent(f"""
        import django, os
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
        django.setup()
        from streaming import stats
        for _ in range(30):
            stats.record_latency({capture}, {encode}, session="{session}")
        stats.record_network(session="{session}", rtt_ms={rtt}, bitrate_kbps=8000)
        stats.flush("{session}")
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=60)


@pytest.fixture
def two_sessions():
    other_session_process(B, 9.0, 7.0, 40.0)
    for _ in range(10):
        stats.record_latency(1.0, 3.0, session=A)
    stats.record_network(session=A, rtt_ms=2.0, bitrate_kbps=20000)
    stats.flush(A)
    yield
    stats.reset(A)
    stats.reset(B)


def get(admin, path):
    return Client().get(path, **admin).json()


def test_each_session_has_its_own_window_file(two_sessions):
    assert state_path(f"stream-latency-{A}.json").exists()
    assert state_path(f"stream-latency-{B}.json").exists()
    assert not state_path("stream-latency.json").exists()


def test_merged_and_one_session_figures(two_sessions, admin):
    merged = get(admin, "/api/stream/latency")
    assert merged["capture_ms"] == {"min": 1.0, "max": 9.0, "avg": 7.0, "samples": 40}
    one = get(admin, f"/api/stream/latency?session={B}")
    assert one["encode_ms"] == {"min": 7.0, "max": 7.0, "avg": 7.0, "samples": 30}
    net = get(admin, "/api/stream/network-stats")["network"]
    assert sorted(s["session_id"] for s in net["samples"]) == [A, B]
    assert net["rtt_ms"]["min"] == 2.0 and net["rtt_ms"]["max"] == 40.0
    mine = get(admin, f"/api/stream/network-stats?session={A}")["network"]
    assert [s["rtt_ms"] for s in mine["samples"]] == [2.0]
    nobody = get(admin, "/api/stream/latency?session=0000000c")
    assert nobody["capture_ms"]["samples"] == 0 and nobody["capture_ms"]["avg"] is None


def test_one_sessions_end_leaves_the_others_figures(two_sessions, admin):
    stats.reset(A)  # session A ends (SessionCore.finish)
    merged = get(admin, "/api/stream/latency")
    assert merged["capture_ms"] == {"min": 9.0, "max": 9.0, "avg": 9.0, "samples": 30}
    assert get(admin, f"/api/stream/latency?session={A}")["capture_ms"]["samples"] == 0
    assert [s["session_id"] for s in get(admin, "/api/stream/network-stats")["network"]["samples"]
            ] == [B]  # fmt: skip


@pytest.mark.parametrize("bad", ["../../etc/passwd", "0000000A", "abc", "%00", "0" * 9])
def test_malformed_session_is_400(admin, bad):
    for path in ("/api/stream/latency", "/api/stream/network-stats"):
        r = Client().get(f"{path}?session={bad}", **admin)
        assert r.status_code == 400 and "session" in r.json()["error"]


def test_a_writer_cannot_name_a_file_outside_its_window():
    with pytest.raises(ValueError):
        stats.file_name(stats.LATENCY, "../../x")
