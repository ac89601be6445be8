"""Which video encoders really work on this machine, probed by opening each one.

A codec being compiled into PyAV proves nothing (the wheel carries NVENC, QSV and AMF wrappers
on machines without those GPUs), so each candidate encodes one small frame. The probe runs in a
child process: x265 and SVT-AV1 print banners straight to fd 2, and a broken driver must not
take a server process down. The answer is cached per process and in the state dir, keyed by
the PyAV version and the GPU device nodes, so a new GPU or driver gets a fresh probe.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import subprocess
import sys
import threading
import time
from fractions import Fraction
from pathlib import Path

from common.files import atomic_write
from common.statedir import state_dir

log = logging.getLogger(__name__)

CACHE_FILE = "encoders.json"
PROBE_TIMEOUT_S = 30
# backend -> codec -> encoder name in FFmpeg
CANDIDATES: dict[str, dict[str, str]] = {
    "nvenc": {"h264": "h264_nvenc", "hevc": "hevc_nvenc", "av1": "av1_nvenc"},
    "qsv": {"h264": "h264_qsv", "hevc": "hevc_qsv", "av1": "av1_qsv"},
    "amf": {"h264": "h264_amf", "hevc": "hevc_amf", "av1": "av1_amf"},
    "vaapi": {"h264": "h264_vaapi", "hevc": "hevc_vaapi", "av1": "av1_vaapi"},
    "software": {"h264": "libx264", "hevc": "libx265", "av1": "libsvtav1"},
}
HARDWARE_ORDER = ("nvenc", "amf", "qsv", "vaapi")
CODEC_ORDER = ("h264", "hevc", "av1")

_lock = threading.Lock()
_cached: dict | None = None
_checked_at = 0.0
RECHECK_S = 10.0


def _fingerprint() -> str:
    try:
        import av  # heavy: PyAV loads FFmpeg; light processes read the cached answer

        version = av.__version__
    except ImportError:
        version = "none"
    nodes = sorted(glob.glob("/dev/dri/renderD*") + glob.glob("/dev/nvidia[0-9]*"))
    return hashlib.sha256(json.dumps([version, nodes]).encode()).hexdigest()[:16]


def probe_in_process() -> dict[str, dict[str, bool]]:
    """backend -> codec -> opens; run in the probe child (see module docstring)."""
    import av  # heavy: PyAV loads FFmpeg, only in the probe child

    frame = av.VideoFrame(256, 256, "yuv420p")
    for plane in frame.planes:
        plane.update(bytes(plane.buffer_size))
    result: dict[str, dict[str, bool]] = {}
    for backend, codecs in CANDIDATES.items():
        result[backend] = {}
        for codec, name in codecs.items():
            ok = False
            try:
                ctx = av.CodecContext.create(name, "w")
                ctx.width, ctx.height, ctx.pix_fmt = 256, 256, "yuv420p"
                ctx.time_base = Fraction(1, 30)
                ctx.open()
                frame.pts = 0
                ok = bool(list(ctx.encode(frame)) + list(ctx.encode(None)))
            except Exception:  # any failure means "not on this machine"
                ok = False
            result[backend][codec] = ok
    return result


def _run_probe() -> dict[str, dict[str, bool]]:
    try:
        out = subprocess.run(
            [sys.executable, "-m", "media.encoders"],
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        lines = out.stdout.decode(errors="replace").strip().splitlines()
        return json.loads(lines[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as exc:
        log.warning("encoder probe failed: %s", exc)
        return {b: dict.fromkeys(c, False) for b, c in CANDIDATES.items()}


def available() -> dict[str, dict[str, bool]]:
    """backend -> codec -> opens, from cache when this machine was probed already."""
    global _cached, _checked_at
    with _lock:
        # GET /host calls this per request; device nodes change rarely, so look at most every
        # few seconds instead of globbing /dev each time.
        now = time.monotonic()
        if _cached is not None and now - _checked_at < RECHECK_S:
            return _cached["encoders"]
        fp = _fingerprint()
        _checked_at = now
        if _cached is not None and _cached.get("fingerprint") == fp:
            return _cached["encoders"]
        path = state_dir() / CACHE_FILE
        try:
            record = json.loads(path.read_text())
            if record.get("fingerprint") != fp or not isinstance(record.get("encoders"), dict):
                record = None
        except (OSError, ValueError):
            record = None
        if record is None:
            record = {"fingerprint": fp, "encoders": _run_probe()}
            try:
                atomic_write(path, json.dumps(record), mode=0o600)
            except OSError:
                pass  # a read-only state dir only costs a re-probe
        _cached = record
        return record["encoders"]


def resolve_backend(preference: str = "auto") -> str | None:
    """The backend a session would encode on: the pinned one if it opens, else the best one."""
    table = available()
    if preference not in ("", "auto") and any(table.get(preference, {}).values()):
        return preference
    for backend in (*HARDWARE_ORDER, "software"):
        if table.get(backend, {}).get("h264"):
            return backend
    return None


def codecs(preference: str = "auto") -> list[str]:
    """The codecs (`h264`, `hevc`, `av1`) the resolved backend really produces."""
    backend = resolve_backend(preference)
    if backend is None:
        return []
    table = available()[backend]
    return [c for c in CODEC_ORDER if table.get(c)]


# GPU vendor (media.gpus) -> the backend that encodes on it.
VENDOR_BACKEND = {"nvidia": "nvenc", "amd": "amf", "intel": "qsv"}
# Not in PyAV's wheels (FFmpeg built without libva): never listed as an encoder here.
UNAVAILABLE = {"vaapi": "VAAPI encoders are not in PyAV's wheels (FFmpeg built without libva)"}


# What a GPU backend needs on the machine, to say which is missing when none of its encoders
# opened: the device nodes it encodes through, and what else it needs once they are there.
NEEDS = {
    "nvenc": ("/dev/nvidia[0-9]*", "NVIDIA GPU device", "the NVIDIA driver's NVENC"),
    "qsv": ("/dev/dri/renderD*", "GPU render node", "an Intel GPU with the oneVPL runtime"),
    "amf": ("/dev/dri/renderD*", "GPU render node", "an AMD GPU with AMD's AMF runtime"),
    "vaapi": ("/dev/dri/renderD*", "GPU render node", "a VA-API driver"),
}


def pin_problem(pin: str | None, table: dict[str, dict[str, bool]] | None = None) -> str:
    """Why the `encoder` key's backend cannot encode on this machine, naming what is missing
    (the build's encoders, the device, the driver), or "" when it can (`auto`, `software`, or a
    backend one of whose encoders opened in the probe)."""
    pin = (pin or "auto").strip().lower()
    if pin not in NEEDS:
        return ""
    table = available() if table is None else table
    if any(table.get(pin, {}).values()):
        return ""
    names = "/".join(CANDIDATES[pin].values())
    pattern, device, driver = NEEDS[pin]
    if pin in UNAVAILABLE:
        return f"{pin}: this PyAV/FFmpeg build has no {names} encoder (built without libva)"
    if not glob.glob(pattern):
        return f"{pin}: no {device} ({pattern}) on this host"
    return f"{pin}: {names} did not open here (needs {driver})"


def backend_of(encoder: str) -> str:
    """nvenc / qsv / amf / vaapi / software for an FFmpeg encoder name."""
    for backend, names in CANDIDATES.items():
        if encoder in names.values():
            return backend
    return "software"


def choose(
    codec: str,
    pin: str | None = "auto",
    preferred_vendor: str | None = None,
    table: dict[str, dict[str, bool]] | None = None,
) -> list[str]:
    """The encoders a `codec` stream tries, in order.

    The `encoder` key first: a pinned backend is the only hardware tried (`software` tries
    none). Then the GPU preference (`preferred_vendor`, the vendor of `media.gpus.select`'s
    pick) puts its backend ahead of the others. Then the probe: only encoders that opened here
    are listed. The codec's software encoder is always last, probed or not (it is the one that
    reports a real error when nothing else opens).
    """
    software = CANDIDATES["software"][codec]
    table = available() if table is None else table
    pin = (pin or "auto").strip().lower()
    if pin == "software":
        return [software]
    if pin not in ("", "auto"):
        order: list[str] = [pin] if pin in CANDIDATES else []
    else:
        order = list(HARDWARE_ORDER)
        first = VENDOR_BACKEND.get(preferred_vendor or "")
        if first in order:
            order.remove(first)
            order.insert(0, first)
    names = [CANDIDATES[b][codec] for b in order if b != "software" and table.get(b, {}).get(codec)]
    return [*names, software]


def listing(table: dict[str, dict[str, bool]] | None = None) -> dict:
    """For GET /host: the encoders that opened here per codec, and the ones this build lacks."""
    table = available() if table is None else table
    return {
        "encoders": {
            codec: [
                CANDIDATES[b][codec]
                for b in (*HARDWARE_ORDER, "software")
                if table.get(b, {}).get(codec)
            ]
            for codec in CODEC_ORDER
        },
        "encoders_unavailable": dict(UNAVAILABLE),
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(probe_in_process()) + "\n")
