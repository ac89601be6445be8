"""Host telemetry: a rolling window of CPU %, GPU % and RAM used, sampled by the supervisor.

A supervisor periodic job (`Housekeeping`) calls `Sampler.tick()` every `INTERVAL_S`; the window is
written to `telemetry.json` in the state dir (rename, no fsync: losing it costs a minute of
samples) so the web processes can serve it. GPU load comes from NVML when the NVIDIA library is
present, else from the kernel's DRM `gpu_busy_percent` (amdgpu); with neither, the GPU series
stays empty rather than reporting an invented 0.
"""

from __future__ import annotations

import ctypes
import glob
import json
import logging
import time
from collections import deque

import psutil

from common.files import atomic_write
from common.statedir import state_path

log = logging.getLogger(__name__)

INTERVAL_S = 2.0
WINDOW = 60  # samples: two minutes
FILE_NAME = "telemetry.json"
# A window nobody refreshed for this long is from a stopped host: serve it as empty.
STALE_S = 30.0


class _Nvml:
    """The few NVML calls needed, through ctypes: no Python binding to install."""

    class _Util(ctypes.Structure):
        _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit failed")
        count = ctypes.c_uint()
        if self.lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0 or count.value == 0:
            raise OSError("no NVIDIA device")
        self.handles = []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            if self.lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) == 0:
                self.handles.append(handle)

    def busy_pct(self) -> float | None:
        values = []
        for handle in self.handles:
            util = self._Util()
            if self.lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) == 0:
                values.append(float(util.gpu))
        return max(values) if values else None


def _drm_files() -> list[str]:
    return sorted(glob.glob("/sys/class/drm/card[0-9]*/device/gpu_busy_percent"))


class GpuProbe:
    """The busiest GPU's load in percent, or None when this host exposes no GPU load."""

    def __init__(self):
        self.nvml = None
        try:
            self.nvml = _Nvml()
        except (OSError, AttributeError):
            self.nvml = None
        self.drm = _drm_files()

    def busy_pct(self) -> float | None:
        if self.nvml is not None:
            try:
                value = self.nvml.busy_pct()
            except OSError:
                value = None
            if value is not None:
                return value
        values = []
        for path in self.drm:
            try:
                with open(path) as fh:
                    values.append(float(fh.read().strip()))
            except (OSError, ValueError):
                continue
        return max(values) if values else None


class Sampler:
    def __init__(self, window: int = WINDOW, gpu: GpuProbe | None = None):
        self.cpu: deque[float] = deque(maxlen=window)
        self.gpu: deque[float] = deque(maxlen=window)
        self.ram: deque[float] = deque(maxlen=window)
        self.gpu_probe = gpu if gpu is not None else GpuProbe()
        psutil.cpu_percent(interval=None)  # the first call only primes the counters

    def tick(self) -> None:
        self.cpu.append(round(psutil.cpu_percent(interval=None), 1))
        mem = psutil.virtual_memory()
        self.ram.append(round((mem.total - mem.available) / (1024 * 1024), 1))
        busy = self.gpu_probe.busy_pct()
        if busy is not None:
            self.gpu.append(round(busy, 1))

    def snapshot(self) -> dict:
        return {
            "host_cpu_pct": list(self.cpu),
            "host_gpu_pct": list(self.gpu),
            "host_ram_used_mb": list(self.ram),
            "window_s": int(INTERVAL_S * (self.cpu.maxlen or WINDOW)),
            "interval_s": INTERVAL_S,
            "updated_unix_ms": int(time.time() * 1000),
        }

    def publish(self) -> None:
        atomic_write(state_path(FILE_NAME), json.dumps(self.snapshot()), durable=False)


def empty() -> dict:
    return {
        "host_cpu_pct": [],
        "host_gpu_pct": [],
        "host_ram_used_mb": [],
        "window_s": int(INTERVAL_S * WINDOW),
    }


def read() -> dict:
    """The latest published window (empty when no sampler runs), the spec's telemetry record."""
    try:
        with open(state_path(FILE_NAME)) as fh:
            data = json.load(fh)
    except (FileNotFoundError, ValueError, OSError):
        return empty()
    if not isinstance(data, dict):
        return empty()
    if time.time() * 1000 - float(data.get("updated_unix_ms", 0)) > STALE_S * 1000:
        return empty()
    out = empty()
    for key in ("host_cpu_pct", "host_gpu_pct", "host_ram_used_mb"):
        values = data.get(key)
        if isinstance(values, list):
            out[key] = [float(v) for v in values if isinstance(v, int | float)]
    return out


class Housekeeping:
    """The supervisor's periodic telemetry job: one sample, then publish the window.

    The first run only makes the sampler (which primes the CPU counters), so the first sample
    covers a whole interval; a host where it cannot be made runs without telemetry rather
    than failing every two seconds."""

    def __init__(self):
        self.sampler: Sampler | None = None
        self.unavailable = False

    def __call__(self) -> None:
        if self.unavailable:
            return
        if self.sampler is None:
            try:
                self.sampler = Sampler()
            except Exception:  # no telemetry is better than no host
                log.exception("telemetry sampler unavailable")
                self.unavailable = True
            return
        self.sampler.tick()
        self.sampler.publish()
