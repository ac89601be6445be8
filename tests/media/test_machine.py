"""GPUs (fake sysfs tree and the real machine), capture, compositors, monitors, host info."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from displays import capture, compositors, monitors
from media import gpus

pytestmark = pytest.mark.django_db


def fake_card(
    root: Path,
    n: int,
    vendor: str,
    device: str,
    vram: int | None = None,
    driver: str = "amdgpu",
    pci: str | None = None,
) -> None:
    pci_dir = root / "devices" / "pci0000:00" / (pci or f"0000:0{n}:00.0")
    pci_dir.mkdir(parents=True, exist_ok=True)
    (pci_dir / "vendor").write_text(f"0x{vendor}\n")
    (pci_dir / "device").write_text(f"0x{device}\n")
    if vram is not None:
        (pci_dir / "mem_info_vram_total").write_text(f"{vram}\n")
    drv = root / "bus" / "pci" / "drivers" / driver
    drv.mkdir(parents=True, exist_ok=True)
    os.symlink(drv, pci_dir / "driver")
    card = root / "class" / "drm" / f"card{n}"
    card.mkdir(parents=True)
    os.symlink(pci_dir, card / "device")


@pytest.fixture
def sysfs(tmp_path):
    root = tmp_path / "sys"
    fake_card(root, 0, "8086", "46a6", driver="i915")  # integrated: no VRAM exposed
    fake_card(root, 1, "1002", "73bf", vram=16 * 1024**3)
    fake_card(root, 2, "1002", "73bf", vram=8 * 1024**3)
    fake_card(root, 3, "1234", "1111", driver="bochs-drm")  # virtual adapter: not hardware
    conn = root / "class" / "drm" / "card1-DP-1"
    conn.mkdir()
    (conn / "status").write_text("connected\n")
    (conn / "modes").write_text("2560x1440\n1920x1080\n")
    (conn / "enabled").write_text("enabled\n")
    off = root / "class" / "drm" / "card1-HDMI-A-1"
    off.mkdir()
    (off / "status").write_text("disconnected\n")
    return root


def test_gpu_probe_on_a_fake_sysfs_tree(sysfs):
    found = gpus.enumerate_gpus(sysfs, nvml={})
    assert [(g["id"], g["vendor"], g["vram_mb"]) for g in found] == [
        ("8086-46a6-0", "intel", 0),
        ("1002-73bf-0", "amd", 16384),
        ("1002-73bf-1", "amd", 8192),
    ]


def test_gpu_probe_merges_nvml(tmp_path):
    root = tmp_path / "sys"
    fake_card(root, 0, "10de", "2c05", driver="nvidia", pci="0000:01:00.0")
    nvml = {"0000:01:00.0": {"name": "NVIDIA H100", "vram_mb": 81559, "device": 0x2C05}}
    assert gpus.enumerate_gpus(root, nvml=nvml) == [
        {"id": "10de-2c05-0", "name": "NVIDIA H100", "vendor": "nvidia", "vram_mb": 81559}
    ]
    # Without nvidia-drm there is no DRM node: NVML alone still lists it.
    assert gpus.enumerate_gpus(tmp_path / "empty", nvml=nvml)[0]["id"] == "10de-2c05-0"


def test_selection_auto_manual_and_missing_fallback(sysfs, state, monkeypatch):
    monkeypatch.delenv(gpus.ENV_PIN, raising=False)
    found = gpus.enumerate_gpus(sysfs, nvml={})
    auto = gpus.select(found, gpus.load_preference())
    assert auto["id"] == "1002-73bf-0" and auto["source"] == "auto"
    gpus.set_preference({"mode": "manual", "gpu_id": "8086-46a6-0"}, found)
    assert gpus.select(found, gpus.load_preference())["source"] == "preference"
    assert json.loads((state / "gpu-preference.json").read_text())["preferred_id"] == "8086-46a6-0"
    # The preferred GPU is gone at session start: automatic choice instead of failing.
    sel = gpus.select(found[1:], gpus.load_preference())
    assert sel["id"] == "1002-73bf-0" and sel["source"] == "preference_missing"
    # `auto` keeps the stored manual pick; a render-adapter pin wins in auto.
    gpus.set_preference({"mode": "AUTO"}, found)
    assert gpus.load_preference() == {
        "mode": "auto",
        "preferred_id": "8086-46a6-0",
        "preferred_name": found[0]["name"],
    }
    monkeypatch.setenv(gpus.ENV_PIN, "8086-46a6-0")
    assert gpus.select(found, gpus.load_preference())["source"] == "env"


@pytest.mark.parametrize(
    "body",
    [
        {"mode": "turbo"},
        {"mode": "manual"},
        {"mode": "manual", "gpu_id": "ffff-0000-0"},
        {"mode": 1},
        {},
        [],
        {"mode": "auto", "extra": 1},
    ],
)
def test_gpu_preference_rejects(v1, state, body):
    r = v1.put("/api/v1/gpus/preference", body, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"] == "invalid GPU preference" and r.json()["fields"]
    assert not (state / "gpu-preference.json").exists()


def test_gpus_route_on_the_real_machine(v1):
    """A machine without a GPU is valid: an empty list and no selection, never an error."""
    body = v1.get("/api/v1/gpus").json()
    assert set(body) >= {
        "gpus",
        "mode",
        "preferred_id",
        "preferred_available",
        "selected",
        "active",
        "env_override",
        "encoder_pin",
    }
    real = gpus.enumerate_gpus()
    assert body["gpus"] == real
    if not real:
        assert body["selected"] is None
    else:
        assert body["selected"]["id"] in {g["id"] for g in real}
    assert v1.put("/api/v1/gpus/preference", {"mode": "auto"}, format="json").status_code == 200


def test_capture_methods_and_compositors(v1):
    methods = v1.get("/api/v1/capture/methods").json()
    xvfb_here = shutil.which("Xvfb") is not None
    # No DISPLAY (the fixture clears it): auto resolves to the private Xvfb, x11 says why not.
    auto = {"id": "auto", "label": "Automatic", "available": True, "resolves_to": "xvfb"}
    assert methods[0] == auto if xvfb_here else not methods[0]["available"]
    by_id = {m["id"]: m for m in methods}
    assert by_id["x11"]["available"] is False and "DISPLAY" in by_id["x11"]["reason"]
    assert by_id["xvfb"]["available"] == xvfb_here
    headless = v1.get("/api/v1/compositors/headless").json()
    ids = [h["id"] for h in headless]
    assert ids == ["auto", "sway", "mutter", "labwc", "krfb", "gamescope", "xvfb"]
    by_id = {h["id"]: h["available"] for h in headless}
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):  # no GNOME: the row says why not
        mutter = next(h for h in headless if h["id"] == "mutter")
        assert mutter["available"] is False and "DBUS_SESSION_BUS_ADDRESS" in mutter["reason"]
    assert by_id["xvfb"] == (shutil.which("Xvfb") is not None)
    assert by_id["sway"] == (shutil.which("sway") is not None)
    # Installed or not, this build drives none of these: they say so rather than claim it.
    for hid in ("labwc", "krfb", "gamescope"):
        row = next(h for h in headless if h["id"] == hid)
        assert row["available"] is False and "sway" in row["reason"], row
    assert by_id["auto"] == any(v for k, v in by_id.items() if k != "auto")
    comps = v1.get("/api/v1/compositors").json()
    assert {c["id"] for c in comps} == set(compositors.COMPOSITORS)
    assert sum(c["default"] for c in comps) <= 1


def test_monitors_from_drm_and_pin(sysfs):
    body = monitors.monitors(sysfs=sysfs, display="", pin="dp-1")
    assert body["pinned"] == "dp-1" and body["pin_supported"] is True
    assert [(m["connector"], m["mode"], m["selected"]) for m in body["monitors"]] == [
        ("DP-1", "2560x1440", True)
    ]


def test_monitors_route_reports_an_unreachable_x_server(v1, monkeypatch):
    monkeypatch.setenv("DISPLAY", ":9999")
    body = v1.get("/api/v1/display/monitors").json()
    assert body["error"] and ":9999" in body["error"] and isinstance(body["monitors"], list)


def test_host_info_codecs_are_what_opens(v1):
    from media import encoders

    body = v1.get("/api/v1/host").json()
    for name in (
        "hostname",
        "uniqueid",
        "local_ip",
        "version",
        "app_version",
        "gfe_version",
        "os",
        "os_name",
        "codecs",
        "compat",
        "ports",
    ):
        assert name in body, name
    assert body["os"].startswith("linux")
    table = encoders.available()
    assert body["codecs"] == [c for c in ("h264", "hevc", "av1") if table[body["encoder"]][c]]
    assert "h264" in body["codecs"]  # libx264 opens on any machine with the PyAV wheel
    # The encoder lists are the probe's, software last; VAAPI is named as unavailable.
    for codec, names in body["encoders"].items():
        assert names == [
            encoders.CANDIDATES[b][codec]
            for b in (*encoders.HARDWARE_ORDER, "software")
            if table[b][codec]
        ]
    assert body["encoders"]["h264"][-1] == "libx264"
    assert "PyAV" in body["encoders_unavailable"]["vaapi"]
    assert body["ports"]["mgmt"] == body["ports"]["http"] + 1


def test_capture_grab_needs_a_real_display():
    with pytest.raises(Exception):  # noqa: B017 - mss raises its own error type
        capture.grab(":9998")


def test_gpu_preference_not_persisted_is_500(v1, state, read_only_dir):
    read_only_dir(state)
    r = v1.put("/api/v1/gpus/preference", {"mode": "auto"}, format="json")
    assert r.status_code == 500 and r.json()["error"] == "GPU preference could not be persisted"
    assert not (state / "gpu-preference.json").exists()
