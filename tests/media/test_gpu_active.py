"""GET /gpus `active` (ApiActiveGpu): where the live encode sessions run, from the host's state.

The session sources (the compat session's Redis record, the native registry) are replaced by
plain records here; `tests/games/test_compat_e2e.py` reads `active` from a live host while
a real compat session streams.
"""

from __future__ import annotations

import pytest

from media import encoders, gpus
from streaming import services
from streaming.sessions import registry
from tests.media.test_machine import fake_card

pytestmark = pytest.mark.django_db

NV0 = {"id": "10de-2c05-0", "name": "NVIDIA A", "vendor": "nvidia", "vram_mb": 16000}
NV1 = {"id": "10de-2c05-1", "name": "NVIDIA B", "vendor": "nvidia", "vram_mb": 24000}
AMD = {"id": "1002-73bf-0", "name": "AMD 1002:73bf", "vendor": "amd", "vram_mb": 32000}
SW = {"backend": "software", "gpu_id": ""}


def nvenc(gpu_id: str) -> dict:
    return {"backend": "nvenc", "gpu_id": gpu_id}


def test_no_live_encode_session_is_null():
    assert gpus.active_gpu([NV0], []) is None


def test_software_sessions_count_on_the_cpu_entry():
    assert gpus.active_gpu([NV0], [SW, dict(SW)]) == {
        "id": "", "name": gpus.SOFTWARE_NAME, "vendor": "other", "backend": "software",
        "sessions": 2,
    }  # fmt: skip


def test_a_gpu_encode_names_the_gpu_and_software_ones_do_not_count_on_it():
    active = gpus.active_gpu([NV0, NV1], [SW, nvenc(NV1["id"]), SW])
    assert active == {"id": NV1["id"], "name": "NVIDIA B", "vendor": "nvidia",
                      "backend": "nvenc", "sessions": 1}  # fmt: skip
    # Spread over two GPUs: the one with more sessions, with its own count.
    spread = [nvenc(NV0["id"]), nvenc(NV1["id"]), nvenc(NV0["id"])]
    assert gpus.active_gpu([NV0, NV1], spread)["id"] == NV0["id"]
    assert gpus.active_gpu([NV0, NV1], spread)["sessions"] == 2


def test_encoder_for_follows_what_the_engine_really_opens(monkeypatch, state):
    table = {"nvenc": {"h264": False}, "software": {"h264": True}}
    monkeypatch.setattr(encoders, "available", lambda: table)
    monkeypatch.delenv(gpus.ENV_PIN, raising=False)
    assert gpus.encoder_for("libx264", [NV0]) == SW
    # NVENC asked for but it does not open here (no engine): the engine falls back to x264.
    assert gpus.encoder_for("h264_nvenc", [NV0]) == SW
    table["nvenc"]["h264"] = True
    # It opens: the selected GPU when it is NVIDIA (auto = most VRAM: NV1) ...
    assert gpus.encoder_for("h264_nvenc", [NV0, NV1]) == nvenc(NV1["id"])
    # ... else the first NVIDIA GPU (an AMD card with more VRAM is selected for the session).
    assert gpus.encoder_for("h264_nvenc", [AMD, NV0]) == nvenc(NV0["id"])
    gpus.set_preference({"mode": "manual", "gpu_id": NV0["id"]}, [NV0, NV1])
    assert gpus.encoder_for("h264_nvenc", [NV0, NV1]) == nvenc(NV0["id"])


def _planes(monkeypatch, compat: list, native: dict) -> None:
    """The session registry: plain records, each tagged with its plane as the registry's are."""

    def live(plane=None):
        for rec in compat:
            rec["plane"] = "compat"
        for rec in native.values():
            rec["plane"] = "native"
        return [r for r in (*compat, *native.values()) if plane in (None, r["plane"])]

    monkeypatch.setattr(registry, "live", live)


def test_live_encoders_count_each_streaming_compat_session_and_every_native_one(monkeypatch):
    record = {"id": "0000aaaa", "state": "armed", "encoder": nvenc(NV0["id"])}
    other = {"id": "0000bbbb", "state": "streaming"}  # a second compat session, software
    peers: dict = {}
    _planes(monkeypatch, [record], peers)
    assert services.live_encoders() == []  # armed: no encoder runs before the client connects
    record["state"] = "streaming"
    assert services.live_encoders() == [nvenc(NV0["id"])]
    _planes(monkeypatch, [record, other], peers)
    assert services.live_encoders() == [nvenc(NV0["id"]), SW]  # several sessions at once
    record["state"] = "idle"  # the client stopped streaming; the app waits for /resume
    assert services.live_encoders() == [SW]
    peers.update(aa={"pid": 1}, bb={"pid": 2, "encoder": nvenc(NV1["id"])})
    assert services.live_encoders() == [SW, SW, nvenc(NV1["id"])]

    def down(plane=None):
        raise ConnectionError("no redis")

    monkeypatch.setattr(registry, "live", down)
    assert services.live_encoders() == []  # no Redis: no session can be live either


def test_gpu_state_reports_active_from_the_live_sessions(monkeypatch, state, tmp_path):
    root = tmp_path / "sys"
    fake_card(root, 0, "10de", "2c05", driver="nvidia", pci="0000:01:00.0")
    nvml = {"0000:01:00.0": {"name": "NVIDIA H100", "vram_mb": 81559, "device": 0x2C05}}
    _planes(monkeypatch, [], {})
    assert gpus.gpu_state(services.live_encoders(), root, nvml)["active"] is None
    live = {"id": "0000aaaa", "state": "streaming", "encoder": nvenc("10de-2c05-0")}
    _planes(monkeypatch, [live], {})
    assert gpus.gpu_state(services.live_encoders(), root, nvml)["active"] == {
        "id": "10de-2c05-0", "name": "NVIDIA H100", "vendor": "nvidia", "backend": "nvenc",
        "sessions": 1,
    }  # fmt: skip
