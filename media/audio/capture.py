"""Per-session audio capture: a private PulseAudio null sink and its monitor as 48 kHz PCM.

The session's app is started with `app_env()` (PULSE_SERVER + PULSE_SINK), so what it plays
lands in its own null sink and nowhere else; we record that sink's monitor with `parec`
through a pipe. PyAV's wheel has no `pulse` input, and parec is the tested path (recipes §1).

A host with no sound server (a headless box, a container) gets a user-mode PulseAudio started
for the session in a private runtime directory, with anonymous auth on its own socket so no
cookie lands in the user's home. It is stopped with the session; a server that was already
running is used as it is and left alone.

Latency: a null sink renders in 2 s chunks until a client asks for less, so a fresh parec
would get its first bytes after 2 s. After parec connects we suspend and resume the sink,
which makes it pick up parec's 20 ms request at once (first bytes in ~0.1 s).

Channels: the sink has the session's layout (`media.audio.layouts`: stereo, 5.1 or 7.1 in the
client's order, with that PulseAudio channel map), and parec records it with the same count
and map, so block column i is the client's channel i. A sound server that runs but refuses a
surround sink raises `SinkRefused` (the launch is refused with its reason); a stereo sink it
refuses stays `AudioUnavailable` (the session streams silence, as without a server).
"""

from __future__ import annotations

import logging
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from media.audio import layouts

log = logging.getLogger("media.audio")

RATE = 48_000
CHANNELS = 2  # the default layout: stereo
_NAME_OK = re.compile(r"[^A-Za-z0-9_.-]")


class AudioUnavailable(RuntimeError):
    """No sound server could be reached or started; the session streams without audio."""


class SinkRefused(RuntimeError):
    """The sound server runs but would not make the session's surround sink."""


def sink_name(values: Mapping[str, Any], session_id: str | int | None = None) -> str:
    """The session's sink name: `virtual_sink`, else `audio_sink`, else "session", made safe.

    The session id is appended so two sessions never share (and never unload) one sink.
    """
    base = values.get("virtual_sink") or values.get("audio_sink") or "session"
    name = _NAME_OK.sub("_", str(base))[:48] or "session"
    if session_id is not None:
        name = f"{name}_{_NAME_OK.sub('_', str(session_id))[:15]}"
    return name


def audio_enabled(values: Mapping[str, Any]) -> bool:
    """`stream_audio` (default true); false means no sink, no capture, no sound server."""
    v = values.get("stream_audio", True)
    if isinstance(v, str):
        return v.strip().lower() not in ("false", "no", "off", "0", "disable", "disabled")
    return v is None or bool(v)


def availability() -> tuple[bool, str]:
    """(usable, reason) for preflight: can sessions on this host have sound at all?"""
    if shutil.which("pactl") is None or shutil.which("parec") is None:
        return False, "pulseaudio-utils (pactl, parec) is not installed"
    if shutil.which("pulseaudio") is None and not SoundServer()._answers():
        return False, "no sound server runs and pulseaudio is not installed"
    return True, "ok"


class SoundServer:
    """A PulseAudio to talk to: the running one, or one we start and own."""

    def __init__(self, runtime_dir: str | Path | None = None, *, reuse: bool = True):
        self._reuse = reuse
        self._given_dir = Path(runtime_dir) if runtime_dir else None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self.proc: subprocess.Popen | None = None
        self.env: dict[str, str] = {}

    @property
    def owned(self) -> bool:
        return self.proc is not None

    def pactl(self, *args: str, timeout: float = 5.0) -> str:
        r = subprocess.run(
            ["pactl", *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if r.returncode != 0:
            raise AudioUnavailable(f"pactl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout.strip()

    def _answers(self) -> bool:
        try:
            self.pactl("info", timeout=2.0)
            return True
        except (AudioUnavailable, subprocess.TimeoutExpired, OSError):
            return False

    def start(self, timeout: float = 5.0) -> SoundServer:
        if shutil.which("pactl") is None or shutil.which("parec") is None:
            raise AudioUnavailable("pulseaudio-utils (pactl, parec) is not installed")
        if self._reuse and self._answers():
            log.info("using the running sound server")
            return self
        if shutil.which("pulseaudio") is None:
            raise AudioUnavailable("no sound server runs and pulseaudio is not installed")
        if self._given_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="host-pulse-")
            root = Path(self._tmp.name)
        else:
            root = self._given_dir
        runtime, state = root / "run", root / "state"
        for d in (runtime, state):
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(0o700)
        self.env = {
            "XDG_RUNTIME_DIR": str(runtime),
            "PULSE_RUNTIME_PATH": str(runtime / "pulse"),
            "PULSE_STATE_PATH": str(state),
            "PULSE_COOKIE": str(state / "cookie"),
            "PULSE_SERVER": f"unix:{runtime / 'pulse' / 'native'}",
        }
        server_env = {**os.environ, **self.env}
        server_env.pop("PULSE_SERVER")  # the daemon must not try to connect to itself
        # -n: no default.pa (it loads systemd/X11 modules and writes ~/.config/pulse).
        self.proc = subprocess.Popen(
            [
                "pulseaudio",
                "--daemonize=no",
                "-n",
                "--exit-idle-time=-1",
                "--disallow-exit",
                "--use-pid-file=no",
                "--realtime=no",
                "--high-priority=no",
                "--log-target=stderr",
                "--load=module-native-protocol-unix auth-anonymous=1 auth-cookie-enabled=0",
                "--load=module-null-sink sink_name=host_default_null",
            ],
            env=server_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self._answers():
                log.info("started a user-mode PulseAudio (pid %d)", self.proc.pid)
                return self
            time.sleep(0.02)
        self.stop()
        raise AudioUnavailable("PulseAudio did not start")

    def stop(self) -> None:
        if self.proc is not None:
            _terminate(self.proc)
            self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


class VirtualSink:
    """A null sink for one session; its `.monitor` source is what the session captures."""

    def __init__(self, server: SoundServer, name: str, channels: int = CHANNELS):
        self.server = server
        self.name = name
        self.channels = channels
        self.channel_map = layouts.layout(channels).pulse_map
        self.module: str | None = None

    def load(self) -> VirtualSink:
        try:
            self.module = self.server.pactl(
                "load-module",
                "module-null-sink",
                f"sink_name={self.name}",
                f"rate={RATE}",
                f"channels={self.channels}",
                f"channel_map={self.channel_map}",
                f"sink_properties=device.description={self.name}",
            )
        except AudioUnavailable as exc:
            if self.channels == CHANNELS:
                raise
            name = layouts.layout(self.channels).name
            raise SinkRefused(f"the sound server refused a {name} sink: {exc}") from None
        return self

    def unload(self) -> None:
        if self.module is not None:
            try:
                self.server.pactl("unload-module", self.module)
            except (AudioUnavailable, subprocess.TimeoutExpired, OSError):
                pass  # the server is gone, and the sink with it
            self.module = None

    def app_env(self) -> dict[str, str]:
        """Environment for the session's app: its default sink is this one."""
        env = {"PULSE_SINK": self.name}
        for k in ("PULSE_SERVER", "PULSE_COOKIE"):
            if k in self.server.env:
                env[k] = self.server.env[k]
        return env


class MonitorCapture:
    """`parec` on a sink's monitor: int16 (frames, channels) blocks at 48 kHz."""

    def __init__(self, sink: VirtualSink, latency_ms: int = 20):
        self.sink = sink
        self.channels = sink.channels
        self.latency_ms = latency_ms
        self.proc: subprocess.Popen | None = None
        self._buf = bytearray()

    def start(self) -> MonitorCapture:
        self.proc = subprocess.Popen(
            [
                "parec",
                "-d",
                f"{self.sink.name}.monitor",
                f"--latency-msec={self.latency_ms}",
                "--raw",
                f"--rate={RATE}",
                f"--channels={self.channels}",
                f"--channel-map={self.sink.channel_map}",
                "--format=s16le",
            ],
            env={**os.environ, **self.sink.server.env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._wake_sink()
        return self

    def _wake_sink(self) -> None:
        """Suspend and resume the sink once parec is connected (see the module docstring)."""
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            outputs = self.sink.server.pactl("list", "short", "source-outputs")
            if outputs:
                break
            time.sleep(0.01)
        self.sink.server.pactl("suspend-sink", self.sink.name, "1")
        self.sink.server.pactl("suspend-sink", self.sink.name, "0")

    def read(self, frames: int, timeout: float = 1.0) -> np.ndarray | None:
        """Exactly `frames` frames, or None when parec ended or nothing came within `timeout`."""
        if self.proc is None or self.proc.stdout is None:
            return None
        want = frames * 2 * self.channels  # s16le
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while len(self._buf) < want:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, max(want - len(self._buf), 4096))
            if not chunk:
                return None
            self._buf += chunk
        data = bytes(self._buf[:want])
        del self._buf[:want]
        return np.frombuffer(data, dtype="<i2").reshape(-1, self.channels)

    def stop(self) -> None:
        if self.proc is not None:
            _terminate(self.proc)
            self.proc = None


class SessionAudio:
    """Everything one session needs: server, sink, capture. `start()` then `read()` blocks.

    Pass `server` (a started SoundServer) to share one sound server between sessions; it is
    then left running at `close()`. Without it the session finds or starts its own.
    """

    def __init__(
        self,
        values: Mapping[str, Any],
        session_id: str | int | None = None,
        *,
        server: SoundServer | None = None,
        channels: int = CHANNELS,
        **server_kw,
    ):
        self.sink_name = sink_name(values, session_id)
        self.channels = layouts.layout(channels).channels  # LayoutError for a count we lack
        self._own_server = server is None
        self.server = server or SoundServer(**server_kw)
        self.sink: VirtualSink | None = None
        self.capture: MonitorCapture | None = None

    @classmethod
    def from_config(cls, values: Mapping[str, Any], session_id=None, **kw) -> SessionAudio | None:
        """None when `stream_audio` is false: the session then has no audio at all."""
        return cls(values, session_id, **kw) if audio_enabled(values) else None

    def start(self) -> SessionAudio:
        try:
            if self._own_server:
                self.server.start()
            self.sink = VirtualSink(self.server, self.sink_name, self.channels).load()
            self.capture = MonitorCapture(self.sink).start()
        except BaseException:
            self.close()
            raise
        return self

    def app_env(self) -> dict[str, str]:
        return self.sink.app_env() if self.sink else {}

    def read(self, frames: int = 480, timeout: float = 1.0) -> np.ndarray | None:
        return self.capture.read(frames, timeout) if self.capture else None

    def close(self) -> None:
        if self.capture:
            self.capture.stop()
        if self.sink:
            self.sink.unload()
        if self._own_server:
            self.server.stop()
        self.capture = self.sink = None


def _terminate(proc: subprocess.Popen, grace: float = 2.0) -> None:
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()
