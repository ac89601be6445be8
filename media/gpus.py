"""The machine's GPUs and which one the next session encodes on.

Enumeration reads DRM nodes under /sys/class/drm (vendor/device ids, dedicated VRAM where the
driver exposes it, as amdgpu does) and, when the NVIDIA driver is there, NVML through ctypes
for names and VRAM. The sysfs root is a parameter so tests run against a fake tree. No GPU is a
valid answer: an empty list, and sessions encode in software.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import time
from pathlib import Path

from common import filecache
from common.errors import DomainError
from common.files import atomic_write
from common.statedir import state_dir
from hostconfig import store
from media import encoders

log = logging.getLogger(__name__)

PREFERENCE_FILE = "gpu-preference.json"
ENV_PIN = "HOST_RENDER_ADAPTER"
VENDORS = {0x10DE: "nvidia", 0x1002: "amd", 0x1022: "amd", 0x8086: "intel"}
# Drivers of DRM nodes that are not hardware GPUs (firmware framebuffers, virtual KMS).
SOFTWARE_DRIVERS = {"simpledrm", "vkms", "efifb", "vesafb", "bochs-drm", "bochs", "cirrus"}


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _hex(text: str) -> int | None:
    try:
        return int(text, 16)
    except ValueError:
        return None


def _nvml() -> dict[str, dict]:
    """PCI bus id (lower case, `0000:01:00.0`) -> {name, vram_mb} from NVML, if present."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return {}
    out: dict[str, dict] = {}
    try:
        if lib.nvmlInit_v2() != 0:
            return {}
        count = ctypes.c_uint()
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return {}

        class Memory(ctypes.Structure):
            _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                        ("used", ctypes.c_ulonglong)]  # fmt: skip

        class Pci(ctypes.Structure):
            _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint),
                        ("bus", ctypes.c_uint), ("device", ctypes.c_uint),
                        ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                        ("busId", ctypes.c_char * 32)]  # fmt: skip

        for i in range(count.value):
            handle = ctypes.c_void_p()
            if lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
                continue
            name = ctypes.create_string_buffer(96)
            lib.nvmlDeviceGetName(handle, name, 96)
            mem, pci = Memory(), Pci()
            vram = 0
            if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) == 0:
                vram = mem.total // (1024 * 1024)
            if lib.nvmlDeviceGetPciInfo_v3(handle, ctypes.byref(pci)) != 0:
                continue
            bus = pci.busId.decode(errors="replace").lower()
            if bus.count(":") == 2 and len(bus.split(":")[0]) == 8:
                bus = bus[4:]  # NVML pads the domain to 8 digits; sysfs uses 4
            out[bus] = {
                "name": name.value.decode(errors="replace"),
                "vram_mb": int(vram),
                "device": pci.pciDeviceId >> 16,
            }
        lib.nvmlShutdown()
    except (AttributeError, OSError) as exc:
        log.debug("NVML unusable: %s", exc)
    return out


# GET /gpus asks per request; loading NVML (dlopen, init) and walking sysfs each time was most
# of that route's cost. The machine's list is kept and looked at again every RECHECK_S, and
# at once when the DRM card nodes change (a GPU added or removed).
RECHECK_S = 10.0
_machine: dict = {}


def _drm_cards(sysfs: str | Path) -> tuple[str, ...]:
    try:
        return tuple(sorted(p.name for p in (Path(sysfs) / "class" / "drm").iterdir()))
    except OSError:
        return ()


def machine_gpus() -> list[dict]:
    """`enumerate_gpus()` of this machine, cached (see RECHECK_S); callers must not mutate it."""
    now = time.monotonic()
    cards = _drm_cards("/sys")
    cached = _machine.get("gpus")
    if cached is not None and _machine["cards"] == cards and now - _machine["at"] < RECHECK_S:
        return cached
    gpus = enumerate_gpus()
    _machine.update(gpus=gpus, cards=cards, at=now)
    return gpus


def enumerate_gpus(sysfs: str | Path = "/sys", nvml: dict[str, dict] | None = None) -> list[dict]:
    """Hardware GPUs as ApiGpu records: `id` = `<vendor>-<device>-<occurrence>` (hex)."""
    drm = Path(sysfs) / "class" / "drm"
    nvml = _nvml() if nvml is None else nvml
    found: list[dict] = []
    seen_devices: set[str] = set()
    try:
        cards = sorted(
            (p for p in drm.iterdir() if p.name.startswith("card") and p.name[4:].isdigit()),
            key=lambda p: int(p.name[4:]),
        )
    except OSError:
        cards = []
    for card in cards:
        device = card / "device"
        vendor, dev = _hex(_read(device / "vendor")), _hex(_read(device / "device"))
        if vendor is None or dev is None:
            continue
        driver = (
            os.path.basename(os.path.realpath(device / "driver"))
            if (device / "driver").exists()
            else ""
        )
        if driver in SOFTWARE_DRIVERS:
            continue
        bus = os.path.basename(os.path.realpath(device)).lower()
        bus = card.name if bus == "device" else bus  # a plain directory (fake trees)
        if bus in seen_devices:
            continue
        seen_devices.add(bus)
        raw_vram = _read(device / "mem_info_vram_total")
        vram = int(raw_vram) // (1024 * 1024) if raw_vram.isdigit() else 0
        info = nvml.get(bus, {})
        kind = VENDORS.get(vendor, "other")
        found.append(
            {
                "vendor_id": vendor,
                "device_id": dev,
                "name": info.get("name")
                or f"{kind.upper() if kind != 'other' else 'GPU'} {vendor:04x}:{dev:04x}",
                "vendor": kind,
                "vram_mb": info.get("vram_mb", vram),
                "bus": bus,
                "driver": driver,
            }
        )
    # NVIDIA GPUs the DRM scan missed (no nvidia-drm module loaded).
    for bus, info in sorted(nvml.items()):
        if bus not in seen_devices:
            found.append(
                {"vendor_id": 0x10DE, "device_id": info.get("device", 0), "name": info["name"],
                 "vendor": "nvidia", "vram_mb": info["vram_mb"], "bus": bus, "driver": "nvidia"}
            )  # fmt: skip
    counts: dict[tuple[int, int], int] = {}
    out = []
    for gpu in found:
        pair = (gpu["vendor_id"], gpu["device_id"])
        n = counts.get(pair, 0)
        counts[pair] = n + 1
        out.append(
            {
                "id": f"{gpu['vendor_id']:04x}-{gpu['device_id']:04x}-{n}",
                "name": gpu["name"],
                "vendor": gpu["vendor"],
                "vram_mb": gpu["vram_mb"],
            }
        )
    return out


# -- preference and selection -------------------------------------------------------------------
def _preference_path() -> Path:
    return state_dir() / PREFERENCE_FILE


def _parse_preference(raw: bytes) -> dict:
    stored = json.loads(raw)
    if isinstance(stored, dict) and stored.get("mode") in ("auto", "manual"):
        return {
            "mode": stored["mode"],
            "preferred_id": stored.get("preferred_id") or None,
            "preferred_name": stored.get("preferred_name") or None,
        }
    raise ValueError("not a GPU preference")


def load_preference() -> dict:
    """The stored preference (parsed once per version of the file: GET /gpus reads it)."""
    stored = filecache.parsed(_preference_path(), _parse_preference)
    if stored is not None:
        return dict(stored)
    return {"mode": "auto", "preferred_id": None, "preferred_name": None}


class PreferenceError(DomainError, ValueError):
    def __init__(self, status: int, message: str, fields: dict[str, str] | None = None):
        super().__init__(message, status=status, fields=fields)


def set_preference(body, gpus: list[dict] | None = None) -> dict:
    """PUT /gpus/preference: `auto` keeps the stored manual pick; `manual` needs a listed id."""
    if not isinstance(body, dict):
        raise PreferenceError(400, "invalid GPU preference", {"body": "must be a JSON object"})
    errors = {str(k): "unknown field" for k in body if k not in ("mode", "gpu_id")}
    mode = body.get("mode")
    mode = mode.strip().lower() if isinstance(mode, str) else mode
    if mode not in ("auto", "manual"):
        errors["mode"] = "must be auto or manual"
    gpus = enumerate_gpus() if gpus is None else gpus
    current = load_preference()
    record = dict(current, mode=mode)
    if mode == "manual":
        gpu_id = body.get("gpu_id")
        match = next((g for g in gpus if isinstance(gpu_id, str) and g["id"] == gpu_id), None)
        if match is None:
            errors["gpu_id"] = "required for manual; must be a listed GPU id"
        else:
            record.update(preferred_id=match["id"], preferred_name=match["name"])
    elif "gpu_id" in body and body["gpu_id"] is not None and not isinstance(body["gpu_id"], str):
        errors["gpu_id"] = "must be a string"
    if errors:
        raise PreferenceError(400, "invalid GPU preference", errors)
    try:
        atomic_write(_preference_path(), json.dumps(record) + "\n", mode=0o600)
    except OSError:
        raise PreferenceError(500, "GPU preference could not be persisted") from None
    return record


def select(gpus: list[dict], pref: dict, config_pin: str | None = None) -> dict | None:
    """The GPU the next session uses, and why (`source`)."""

    def pick(gpu: dict, source: str) -> dict:
        return {"id": gpu["id"], "name": gpu["name"], "vendor": gpu["vendor"], "source": source}

    if not gpus:
        return None
    missing = False
    if pref["mode"] == "manual" and pref.get("preferred_id"):
        match = next((g for g in gpus if g["id"] == pref["preferred_id"]), None)
        if match:
            return pick(match, "preference")
        missing = True  # absent now: fall back to automatic instead of failing
    pin = (os.environ.get(ENV_PIN) or config_pin or "").strip().lower()
    if pin:
        match = next((g for g in gpus if pin in g["name"].lower() or pin == g["id"]), None)
        if match:
            return pick(match, "preference_missing" if missing else "env")
    best = max(gpus, key=lambda g: g["vram_mb"])
    return pick(best, "preference_missing" if missing else "auto")


def gpu_state(live: list[dict], sysfs: str | Path = "/sys", nvml: dict | None = None) -> dict:
    """GET /gpus: the GPUs, the preference and the next pick, and `active` from `live` (one
    `{"backend", "gpu_id"}` per live encode session, `streaming.services.live_encoders`: the
    session side lives above this module, so the caller asks it)."""
    default = str(sysfs) == "/sys" and nvml is None
    gpus = machine_gpus() if default else enumerate_gpus(sysfs, nvml)
    pref = load_preference()
    encoder = store.get("encoder")
    return {
        "gpus": gpus,
        "mode": pref["mode"],
        "preferred_id": pref["preferred_id"],
        "preferred_name": pref["preferred_name"],
        "preferred_available": any(g["id"] == pref["preferred_id"] for g in gpus),
        "env_override": os.environ.get(ENV_PIN) or None,
        "encoder_pin": encoder if encoder not in (None, "", "auto") else None,
        "selected": select(gpus, pref, store.get("adapter_name")),
        "active": active_gpu(gpus, live),
    }


# -- what live sessions encode on ----------------------------------------------------------------
SOFTWARE = {"backend": "software", "gpu_id": ""}
SOFTWARE_NAME = "Software encoder (CPU)"


def encoder_for(encoder: str, gpus: list[dict] | None = None) -> dict:
    """Where a stream encoding with FFmpeg encoder `encoder` (``libx264``, ``hevc_nvenc``, ...)
    runs: `{"backend", "gpu_id"}`, recorded in the session's state (GET /gpus `active`).

    Called with the encoder that actually opened (the engine reports it), and at arm time with
    the first one it will try. A hardware encoder counts only where the host's probe saw it
    open. Its GPU: the selected one when it is of the encoder's vendor, else the first GPU of
    that vendor (NVENC is also pointed at it, `nvenc_gpu_index`)."""
    backend = encoders.backend_of(encoder)
    if backend == "software":
        return dict(SOFTWARE)
    codec = next((c for c, n in encoders.CANDIDATES[backend].items() if n == encoder), "h264")
    if not encoders.available().get(backend, {}).get(codec):
        return dict(SOFTWARE)
    vendor = {v: k for k, v in encoders.VENDOR_BACKEND.items()}.get(backend, "")
    gpus = enumerate_gpus() if gpus is None else gpus
    mine = [g for g in gpus if g["vendor"] == vendor]
    if not mine:
        return {"backend": backend, "gpu_id": ""}
    chosen = select(gpus, load_preference(), store.get("adapter_name"))
    pick = next((g for g in mine if chosen and g["id"] == chosen["id"]), mine[0])
    return {"backend": backend, "gpu_id": pick["id"]}


def preferred_vendor(gpus: list[dict] | None = None) -> str | None:
    """The vendor of the GPU the preference selects (`select`), for `encoders.choose`."""
    gpus = enumerate_gpus() if gpus is None else gpus
    chosen = select(gpus, load_preference(), store.get("adapter_name"))
    return chosen["vendor"] if chosen else None


def nvenc_gpu_index(gpus: list[dict] | None = None) -> int | None:
    """FFmpeg NVENC's `gpu` option for the selected GPU: its place among the NVIDIA GPUs (in
    order GET /gpus lists them); None when it is not an NVIDIA GPU."""
    # GAP: QSV and AMF cannot be pointed at one GPU (PyAV gives encoders no device context).
    gpus = enumerate_gpus() if gpus is None else gpus
    chosen = select(gpus, load_preference(), store.get("adapter_name"))
    nvidia = [g["id"] for g in gpus if g["vendor"] == "nvidia"]
    if not chosen or chosen["id"] not in nvidia:
        return None
    return nvidia.index(chosen["id"])


def active_gpu(gpus: list[dict], sessions: list[dict]) -> dict | None:
    """ApiActiveGpu: where live sessions encode now, with how many (`sessions`); null when
    none. Sessions on a hardware encoder name their GPU (the one with most sessions when they
    are spread); only when every live session encodes in software is it the CPU (`id` "")."""
    if not sessions:
        return None
    counts: dict[tuple[str, str], int] = {}
    for enc in sessions:
        backend = enc.get("backend") or "software"
        gpu_id = "" if backend == "software" else enc.get("gpu_id") or ""
        counts[(backend, gpu_id)] = counts.get((backend, gpu_id), 0) + 1
    (backend, gpu_id), n = max(counts.items(), key=lambda kv: (kv[0][0] != "software", kv[1]))
    if backend == "software":
        return {"id": "", "name": SOFTWARE_NAME, "vendor": "other", "backend": backend,
                "sessions": n}  # fmt: skip
    gpu = next((g for g in gpus if g["id"] == gpu_id), None)
    return {
        "id": gpu_id,
        "name": gpu["name"] if gpu else "",
        "vendor": gpu["vendor"] if gpu else "other",
        "backend": backend,
        "sessions": n,
    }
