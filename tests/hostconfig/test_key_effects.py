"""Each acting configuration key changes what the host does (registered in
hostconfig/effects.py; tests/hostconfig/test_key_guard.py keeps the registry whole)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from hostconfig import store
from hostconfig.schema import KEYS
from tests.media.test_input_packets import button, key, pad, rel
from tests.media.test_machine import fake_card

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def _start(state: Path, env: dict | None = None, code: str = "") -> subprocess.CompletedProcess:
    """A fresh host process's settings (what the supervisor and its children start with)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HOST_PORT", "HOST_BIND", "HOST_LOG_LEVEL", "DJANGO_SETTINGS_MODULE")
    }
    clean.update(HOST_STATE_DIR=str(state), DJANGO_SETTINGS_MODULE="hostmgmt.settings")
    clean.update(env or {})
    script = "import django; django.setup()\nfrom django.conf import settings\n" + (
        code or "print(settings.HOST_PORT, settings.HOST_BIND, settings.PORTS.mgmt)"
    )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=clean, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_port_and_bind_address_come_from_host_conf_and_the_environment_wins(tmp_path):
    default = _start(tmp_path)
    assert default.returncode == 0, default.stderr
    assert default.stdout.split()[:2] == ["47989", "127.0.0.1"]
    (tmp_path / "host.conf").write_text("port = 50100\nbind_address = 0.0.0.0\n")
    from_file = _start(tmp_path)
    assert from_file.returncode == 0, from_file.stderr
    base, bind, mgmt = from_file.stdout.split()
    assert (base, bind) == ("50100", "0.0.0.0") and int(mgmt) > 50100
    env = _start(tmp_path, {"HOST_PORT": "50200", "HOST_BIND": "127.0.0.1"})
    assert env.stdout.split()[:2] == ["50200", "127.0.0.1"]  # the environment wins
    for bad, rule in (("port = 80", "port: must be 1029 to 65374"), ("bind_address = nope",
                      "bind_address: 'nope' is not an IP address")):  # fmt: skip
        (tmp_path / "host.conf").write_text(bad + "\n")
        r = _start(tmp_path)
        assert r.returncode != 0 and rule in r.stderr, r.stderr[-2000:]
    # Through manage.py (runhost and every child): one line naming the key, nothing started.
    clean = {k: v for k, v in os.environ.items() if k not in ("HOST_PORT", "HOST_BIND")}
    clean["HOST_STATE_DIR"] = str(tmp_path)
    r = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=clean, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr[-2000:]
    assert r.stderr.strip() == (
        "error: host config key bind_address: 'nope' is not an IP address (value from host.conf)"
    )


def test_min_log_level_holds_back_lower_levels_from_the_next_start(tmp_path):
    code = (
        "import logging\nlogging.getLogger('probe').info('INFO-LINE')\n"
        "logging.getLogger('probe').error('ERROR-LINE')\n"
        "logging.getLogger('django.request').error('REQUEST-LINE')\n"
    )
    (tmp_path / "host.conf").write_text("min_log_level = error\n")
    r = _start(tmp_path, code=code)
    assert r.returncode == 0, r.stderr
    assert "ERROR-LINE" in r.stderr and "INFO-LINE" not in r.stderr
    (tmp_path / "host.conf").write_text("min_log_level = none\n")
    r = _start(tmp_path, code=code)
    assert "ERROR-LINE" not in r.stderr and "REQUEST-LINE" not in r.stderr
    r = _start(tmp_path, {"HOST_LOG_LEVEL": "INFO"}, code=code)
    assert "INFO-LINE" in r.stderr  # the environment wins
    (tmp_path / "host.conf").write_text("min_log_level = loud\n")
    r = _start(tmp_path, code=code)
    assert r.returncode != 0 and "min_log_level: must be one of" in r.stderr


def test_launch_takes_the_stream_keys_from_the_config(state):
    from compat.launchconfig import make_launch

    arm = {"rikey": "00" * 16, "rikeyid": 1}
    before = make_launch(arm)
    assert before.big_buffers is True and before.codec == "libx264"
    store.write(
        {
            "busy_poll_us": "100",
            "rate_cap_pct": "60",
            "dscp_qos": "false",
            "fec_percentage": "40",
            "ping_timeout": "2000",
            "encoder": "nvenc",
            "enet_4mib_buffer": "false",
        }
    )
    launch = make_launch(arm)
    assert launch.busy_poll_us == 100 and launch.rate_cap_pct == 60
    assert launch.dscp_qos is False and before.dscp_qos is True
    assert launch.fec_percentage == 40 and launch.control_timeout_s == 2.0
    assert launch.codec == "h264_nvenc" and launch.big_buffers is False


def test_enet_4mib_buffer_grows_both_socket_buffers_or_leaves_them():
    from compat.engine.stream import grow_buffers

    plain = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    grown = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        grow_buffers(grown)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            assert grown.getsockopt(socket.SOL_SOCKET, opt) > plain.getsockopt(
                socket.SOL_SOCKET, opt
            )
    finally:
        plain.close()
        grown.close()


def test_max_fps_caps_the_frame_rate_a_client_asks_for(state):
    from streaming.session_play import capped_fps

    assert capped_fps(120) == 120
    store.write({"max_fps": "30"})
    assert capped_fps(120) == 30 and capped_fps(24) == 24


def test_external_ip_is_in_the_server_facts(state):
    from compat.nvhttp_backend import NvhttpBackend

    assert NvhttpBackend().server_facts()["external_ip"] == ""
    store.write({"external_ip": "203.0.113.7"})
    assert NvhttpBackend().server_facts()["external_ip"] == "203.0.113.7"


def test_origin_keys_decide_who_may_reach_the_console(state):
    from access import origin

    assert origin.allowed("192.168.1.5") and not origin.allowed("8.8.8.8")  # default lan
    store.write({"origin_web_ui_allowed": "pc"})
    assert not origin.allowed("192.168.1.5") and origin.allowed("127.0.0.1")
    store.write({"origin_web_ui_allowed": "wan"})
    assert origin.allowed("8.8.8.8")
    assert "https://console.example" not in origin.allowed_origins()
    store.write({"csrf_allowed_origins": "https://console.example"})
    assert "https://console.example" in origin.allowed_origins()


def test_sunshine_name_is_the_host_name_clients_see(state):
    from access import identity

    store.write({"sunshine_name": "den-pc"})
    assert identity.host_name() == "den-pc"


def test_locale_is_what_config_locale_answers(state):
    assert APIClient().get("/api/configLocale").json()["locale"] == "en"
    store.write({"locale": "de"})
    assert APIClient().get("/api/configLocale").json()["locale"] == "de"


def test_nvenc_tuning_preset_is_the_host_default_preset(state):
    from games import profiles

    ask = {"bitrate_kbps": 1000, "codec": "h264"}
    assert profiles.effective_stream_params("x", None, ask)["encoder_preset"] == -1
    store.write({"nvenc_tuning_preset": "2"})
    assert profiles.effective_stream_params("x", None, ask)["encoder_preset"] == 2


def test_adapter_name_pins_the_selected_gpu(state, tmp_path):
    from media import gpus

    root = tmp_path / "sys"
    fake_card(root, 0, "10de", "2c05", driver="nvidia", pci="0000:01:00.0")
    fake_card(root, 1, "10de", "2684", driver="nvidia", pci="0000:02:00.0")
    nvml = {
        "0000:01:00.0": {"name": "NVIDIA Small", "vram_mb": 8000, "device": 0x2C05},
        "0000:02:00.0": {"name": "NVIDIA Big", "vram_mb": 24000, "device": 0x2684},
    }
    assert gpus.gpu_state([], root, nvml)["selected"]["name"] == "NVIDIA Big"
    store.write({"adapter_name": "small"})
    assert gpus.gpu_state([], root, nvml)["selected"]["name"] == "NVIDIA Small"


def test_compositor_is_the_default_of_the_compositor_list(state, monkeypatch):
    from displays import compositors

    monkeypatch.setenv("XDG_CURRENT_DESKTOP", "")
    monkeypatch.setattr(compositors, "_on_path", lambda bins: True)  # every one installed
    first = compositors.compositors(store.get("compositor"))
    store.write({"compositor": "hyprland"})
    chosen = compositors.compositors(store.get("compositor"))
    assert [c["id"] for c in chosen if c["default"]] == ["hyprland"]
    assert [c["id"] for c in first if c["default"]] != ["hyprland"]


def test_sink_keys_name_the_session_sink(state):
    from media.audio.capture import sink_name

    assert sink_name(store.values(), "s1") == "session_s1"
    store.write({"audio_sink": "speakers"})
    assert sink_name(store.values(), "s1") == "speakers_s1"
    store.write({"virtual_sink": "game"})
    assert sink_name(store.values(), "s1") == "game_s1"


_AUDIO_ON = {
    "host_audio_agc": True,
    "host_audio_vad": True,
    "host_audio_ducking": True,
    "host_audio_noise_gate": True,
}


def _other_value(name: str, base):
    spec = KEYS[name]
    if spec.type == "bool":
        return not base
    return spec.max if spec.max != base else spec.min


def _stages(chain) -> str:
    return repr([vars(s) if s is not None else None for s in (chain.gate, chain.agc,
                 chain.vad, chain.ducker)])  # fmt: skip


@pytest.mark.parametrize("name", [n for n in KEYS if n.startswith(("host_audio_", "host_opus_"))])
def test_audio_keys_change_the_session_chain_and_opus_settings(state, name):
    from media.audio.chain import Chain
    from media.audio.opus import OpusSettings

    base = {n: KEYS[n].default for n in KEYS if n.startswith(("host_audio_", "host_opus_"))}
    base.update(_AUDIO_ON)
    if name == "host_audio_vad":
        base["host_audio_ducking"] = False  # ducking needs the VAD and turns it on itself
    store.update(base)
    before = (_stages(Chain.from_store()), OpusSettings.from_store())
    store.update({name: _other_value(name, base[name])})
    after = (_stages(Chain.from_store()), OpusSettings.from_store())
    assert after != before, name


class Recorder:
    """A keyboard/mouse with XInput's interface that records what reached it."""

    def __init__(self):
        self.calls: list[str] = []

    def __getattr__(self, name):
        def call(*args):
            self.calls.append(name)
            return True

        return call


def test_input_switches_drop_the_kinds_turned_off(state):
    from media.input.session import SessionInput
    from native.inputs import Pads, inject

    on = SessionInput(None, device=Recorder(), gamepads=False)
    assert on.handle(key(0x41, True)) and on.handle(rel(3, 4)) and on.handle(button(1, True))
    store.write({"keyboard": "false", "mouse": "false", "controller": "false"})
    off = SessionInput(None, device=Recorder(), gamepads=False)
    for payload in (key(0x41, True), rel(3, 4), button(1, True), pad(0)):
        assert off.handle(payload) is False
    assert off.x.calls == [] and off.stats.disabled == 4
    store.write({"keyboard": "true"})
    part = SessionInput(None, device=Recorder(), gamepads=False)
    assert part.handle(key(0x41, True)) and not part.handle(rel(3, 4))
    # The native plane's data channel follows the same switches.
    x = Recorder()
    pads = Pads()
    assert inject(x, {"t": "k", "vk": 65, "d": 1}, pads)
    assert not inject(x, {"t": "r", "dx": 1, "dy": 1}, pads)
    assert not inject(x, {"t": "p", "i": 0}, pads) and x.calls == ["key"]


def test_global_prep_cmd_runs_before_every_app_unless_excluded(state, admin):
    from library import catalog

    steps = [{"do": "echo global-do", "undo": "echo global-undo"}]
    r = admin.post("/api/config", {"global_prep_cmd": json.dumps(steps)}, format="json")
    assert r.status_code == 200, r.content
    apps = catalog.build_apps(
        {
            "apps": [
                {"name": "A", "cmd": "a", "prep-cmd": [{"do": "echo own"}]},
                {"name": "B", "cmd": "b", "exclude-global-prep-cmd": True},
            ]
        }
    )
    a, b = apps
    assert [p["do"] for p in a.prep] == ["echo global-do", "echo own"]
    assert a.prep[0]["undo"] == "echo global-undo" and b.prep == []
    for bad in ('[{"undo": "x"}]', '{"do": "x"}', '[{"do": "x", "as": "root"}]', "[1]"):
        r = admin.post("/api/config", {"global_prep_cmd": bad}, format="json")
        assert r.status_code == 400 and "global_prep_cmd" in r.json()["error"], bad


def _pair(tmp_path: Path, name: str, bits: int = 2048) -> tuple[Path, Path]:
    """A self-signed RSA certificate and its key, as an operator would bring them."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=9))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_file, key_file = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_cert_and_pkey_are_served_instead_of_the_generated_pair(state, admin, tmp_path):
    from cryptography import x509

    from access import identity
    from compat.nvhttp_backend import NvhttpBackend
    from supervisor.main import Supervisor

    cert, key = _pair(tmp_path, "operator")
    other_cert, other_key = _pair(tmp_path, "other")
    r = admin.post("/api/config", {"cert": str(cert), "pkey": str(key)}, format="json")
    assert r.status_code == 200, r.content
    assert identity.ensure_tls() == (cert, key)
    assert not (state / "tls-cert.pem").exists()  # nothing generated
    daphne = " ".join(" ".join(c.argv) for c in Supervisor().child_specs())
    assert f"certKey={cert}" in daphne and f"privateKey={key}" in daphne
    served = x509.load_pem_x509_certificate(NvhttpBackend().host_identity().cert_pem)
    assert served.subject.rfc4514_string() == "CN=operator"  # what pairing clients pin
    # Bad input is a 400 naming the key, and nothing is written.
    for body, words in (
        ({"cert": str(other_cert)}, "cert: does not match the key in pkey"),
        ({"pkey": "relative/key.pem"}, "pkey: must be an absolute path"),
        ({"cert": str(tmp_path / "missing.crt")}, "cert: "),
        ({"pkey": str(cert)}, "pkey: "),
        ({"pkey": None}, "cert and pkey must be set together"),
    ):
        r = admin.post("/api/config", body, format="json")
        assert r.status_code == 400 and words in r.json()["error"], (body, r.content)
    assert store.get("cert") == str(cert)
    # A pair broken after the write stops the next start with the key named.
    (state / "host.conf").write_text(f"cert = {other_cert}\npkey = {key}\n")
    with pytest.raises(identity.TlsConfigError, match="cert: does not match"):
        identity.ensure_tls()
    (state / "host.conf").write_text("")
    identity.ensure_tls()
    assert identity.cert_path() == state / "tls-cert.pem" and identity.tls_material_valid()


def test_a_busy_port_of_a_further_session_slot_is_refused_at_write(admin, state):
    """A new base port must leave room for `max_sessions` concurrent compat sessions: slot 1
    streams on the stream ports + 20 (video base + 29)."""
    from tests.support.livehost import free_base_port

    base = free_base_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as held:
        held.bind(("127.0.0.1", base + 29))
        r = admin.post("/api/config", {"port": base, "bind_address": "127.0.0.1"}, format="json")
        assert r.status_code == 400 and f"port: ports {base + 29} of base port" in r.json()["error"]
        # One session at a time needs no slot 1: the same base is accepted.
        r = admin.post("/api/config", {"port": base, "bind_address": "127.0.0.1",
                                       "max_sessions": 1}, format="json")  # fmt: skip
        assert r.status_code == 200, r.content
    assert store.read_raw()["port"] == str(base)


def test_a_busy_port_and_a_foreign_bind_address_are_refused_at_write(admin, state):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        base = held.getsockname()[1]
        if not 1029 <= base <= 65374:
            pytest.skip("the kernel gave a port outside the base port range")
        r = admin.post("/api/config", {"port": base, "bind_address": "127.0.0.1"}, format="json")
        assert r.status_code == 400 and f"port: ports {base}" in r.json()["error"], r.content
    r = admin.post("/api/config", {"bind_address": "192.0.2.1"}, format="json")
    assert r.status_code == 400
    assert "bind_address: no interface of this host has the address" in r.json()["error"]
    assert "port" not in store.read_raw() and "bind_address" not in store.read_raw()
