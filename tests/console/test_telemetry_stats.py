"""Telemetry sampler and window, live stream stats and their admin routes."""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from common.statedir import state_path
from console import telemetry
from streaming import stats


class FakeGpu:
    def __init__(self, value):
        self.value = value

    def busy_pct(self):
        return self.value


def test_sampler_window_is_bounded_and_published():
    sampler = telemetry.Sampler(window=3, gpu=FakeGpu(42.0))
    for _ in range(5):
        sampler.tick()
    sampler.publish()
    data = telemetry.read()
    assert len(data["host_cpu_pct"]) == 3
    assert data["host_gpu_pct"] == [42.0, 42.0, 42.0]
    assert all(0 <= v <= 100 for v in data["host_cpu_pct"])
    assert all(v > 0 for v in data["host_ram_used_mb"])
    assert data["window_s"] == telemetry.WINDOW * telemetry.INTERVAL_S


def test_no_gpu_source_gives_an_empty_series():
    sampler = telemetry.Sampler(window=3, gpu=FakeGpu(None))
    sampler.tick()
    sampler.publish()
    assert telemetry.read()["host_gpu_pct"] == []


def test_drm_busy_percent_is_read(tmp_path, monkeypatch):
    card = tmp_path / "gpu_busy_percent"
    card.write_text("37\n")
    monkeypatch.setattr(telemetry, "_drm_files", lambda: [str(card)])
    monkeypatch.setattr(telemetry, "_Nvml", lambda: (_ for _ in ()).throw(OSError("none")))
    assert telemetry.GpuProbe().busy_pct() == 37.0


def test_stale_or_corrupt_window_reads_empty():
    path = state_path(telemetry.FILE_NAME)
    old = {"host_cpu_pct": [1.0], "updated_unix_ms": (time.time() - 3600) * 1000}
    path.write_text(json.dumps(old))
    assert telemetry.read()["host_cpu_pct"] == []
    path.write_text("{not json")
    assert telemetry.read() == telemetry.empty()


@pytest.mark.django_db
def test_telemetry_route_shape(admin):
    sampler = telemetry.Sampler(window=4, gpu=FakeGpu(None))
    sampler.tick()
    sampler.publish()
    r = Client().get("/api/stream/telemetry", **admin)
    assert r.status_code == 200
    body = r.json()
    assert body["status"] is True and body["status_code"] == 200
    assert set(body["telemetry"]) == {
        "host_cpu_pct",
        "host_gpu_pct",
        "host_ram_used_mb",
        "window_s",
    }
    assert len(body["telemetry"]["host_cpu_pct"]) == 1


@pytest.mark.django_db
def test_latency_and_network_are_empty_without_a_stream(admin):
    stats.reset()
    c = Client()
    body = c.get("/api/stream/latency", **admin).json()
    empty = {"min": None, "max": None, "avg": None, "samples": 0}
    assert body["capture_ms"] == empty and body["encode_ms"] == empty
    net = c.get("/api/stream/network-stats", **admin).json()["network"]
    assert net["samples"] == [] and net["rtt_ms"]["samples"] == 0


@pytest.mark.django_db
def test_engine_feed_reaches_the_routes(admin):
    stats.reset()
    for capture, encode in ((1.0, 4.0), (3.0, 2.0), (2.0, float("nan"))):
        stats.record_latency(capture, encode)
    stats.record_network(rtt_ms=5, loss_pct=0.5, bitrate_kbps=20000, bogus=1)
    stats.flush()
    c = Client()
    body = c.get("/api/stream/latency", **admin).json()
    assert body["capture_ms"] == {"min": 1.0, "max": 3.0, "avg": 2.0, "samples": 2}
    assert body["encode_ms"] == {"min": 2.0, "max": 4.0, "avg": 3.0, "samples": 2}
    net = c.get("/api/stream/network-stats", **admin).json()["network"]
    assert net["rtt_ms"]["avg"] == 5.0
    assert "bogus" not in net["samples"][0]
    stats.reset()
    assert c.get("/api/stream/latency", **admin).json()["capture_ms"]["samples"] == 0
