"""What a session encodes, on every plane: the codecs the host offers a client, and per codec
the encoders it tries in order with the encoder keys set in the config file.

The offer is the `hevc_mode` / `av1_mode` keys (or the client's profile) over the encoder
probe. A GameStream client picks from it (`compat.codecs` carries it on the wire); for a
browser the host picks (`pick`), from the offer and what the browser's WebCodecs decodes.

``hevc_mode`` / ``av1_mode`` (0..3, the reference's meaning): 1 never offers the codec; 2 offers
Main (8-bit); 3 also Main10; 0 (auto) offers it when a GPU encoder for it opened. Auto counts GPU
encoders only: software HEVC/AV1 (libx265, SVT-AV1) holds neither 1080p60 nor H.264's latency on
a desktop CPU (bench/codecs.py); modes 2 and 3 offer them in software too. Every capture source
is 8-bit SDR, so Main10 is never encoded (a GameStream client asking for HDR is refused).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from games.profiles import client_profile
from hostconfig import store
from media import encoder_options, encoders, gpus
from streaming.sessions import admission

log = logging.getLogger("streaming.sessions")

MODE_AUTO, MODE_OFF, MODE_MAIN, MODE_MAIN10 = 0, 1, 2, 3
H264_ONLY = ("h264",)
# The host's pick for a browser, best first: the smallest stream for the picture.
BROWSER_PREFERENCE = ("av1", "hevc", "h264")


def _mode(value, default: int = MODE_AUTO) -> int:
    return (
        value
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3
        else default
    )


def decide(hevc_mode, av1_mode, gpu_codecs, any_codecs) -> tuple[str, ...]:
    """The codecs offered for these modes (H.264 always, first), given which codecs a GPU
    encoder opened for (`gpu_codecs`) and which any encoder, software included, opened for."""
    codecs = ["h264"]
    for codec, mode in (("hevc", _mode(hevc_mode)), ("av1", _mode(av1_mode))):
        if mode == MODE_OFF:
            continue
        pool = gpu_codecs if mode == MODE_AUTO else any_codecs
        if codec in pool:
            codecs.append(codec)
    return tuple(codecs)


def probed_codecs(table: dict[str, dict[str, bool]]) -> tuple[set[str], set[str]]:
    """(codecs a GPU encoder opened for, codecs any encoder opened for) from the probe table
    (`media.encoders.available()`: backend -> codec -> opens)."""
    gpu, anywhere = set(), set()
    for backend, codecs in table.items():
        for codec, ok in codecs.items():
            if ok:
                anywhere.add(codec)
                if backend != "software":
                    gpu.add(codec)
    return gpu, anywhere


def offered(client_name: str = "") -> tuple[str, ...]:
    """The codecs offered to this client: the host's (or its profile's) modes over the probe.
    A pinned `encoder` counts only that backend's codecs as GPU ones."""
    values = store.values()
    profile = client_profile(client_name, values) if client_name else {}
    table = encoders.available()
    gpu, anywhere = probed_codecs(table)
    pinned = values.get("encoder")
    if pinned not in (None, "", "auto"):
        gpu = (
            {c for c, ok in table.get(pinned, {}).items() if ok} if pinned != "software" else set()
        )
    return decide(
        profile.get("hevc_mode", values.get("hevc_mode", MODE_AUTO)),
        profile.get("av1_mode", values.get("av1_mode", MODE_AUTO)),
        gpu,
        anywhere,
    )


def offered_or_h264(client_name: str = "") -> tuple[str, ...]:
    """`offered`, or H.264 alone when the probe or the config cannot be read (H.264 always
    streams, in software at worst)."""
    try:
        return offered(client_name)
    except Exception:  # a broken probe or config must not stop a stream
        log.exception("codec offer failed; offering H.264 only")
        return H264_ONLY


def pick(offer: tuple[str, ...], decodes: tuple[str, ...] | list[str]) -> str:
    """The codec a browser gets: the best of `BROWSER_PREFERENCE` both offered and decoded;
    H.264 when none is (every browser's WebRTC and WebCodecs decode it)."""
    return next((c for c in BROWSER_PREFERENCE if c in offer and c in decodes), "h264")


class Refused(Exception):
    """The `encoder` key names a backend that cannot encode here: the session refuses to stream
    rather than encode in software (the offer's `status` and the /launch answer say why)."""

    status = 503


def check_pin() -> None:
    """Refused when the configured `encoder` cannot encode on this machine (set through a config
    API that is refused at write; hand-edited into the file, or the GPU or driver went away)."""
    try:
        why = encoders.pin_problem(store.get("encoder"))
    except Exception:  # a broken probe or config: `plan` streams in software, as before
        log.exception("encoder setting not checked")
        return
    if why:
        raise Refused(f"The configured encoder cannot be used: {why}")


@dataclass(frozen=True)
class Plan:
    """Per codec, the encoders a stream tries in order (`media.encoders.choose`: the `encoder`
    key, the GPU preference, the probe; the codec's software encoder last), and the encoder keys
    set in the config file (`media.encoder_options`), plus `gpu_index` for NVENC."""

    encoders: dict[str, list[str]] = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    threads: int = 0  # a software encoder's threads (`software_threads`); 0: its own choice

    def first(self, codec: str) -> str:
        """The encoder a `codec` stream opens first (what GET /gpus shows until it reports)."""
        return (self.encoders.get(codec) or [encoders.CANDIDATES["software"][codec]])[0]


def software_threads(sessions: int, cores: int | None = None) -> int:
    """Threads for a software encoder on a host that streams up to `sessions` at once: the
    cores shared out between them, at least one; 0 (the encoder's own choice, every core)
    when one session at a time is all the host streams.

    Left to itself libx264 runs a slice thread per core in every session: two sessions on two
    cores ran four encoder threads, each frame waiting for both of its slices, and spent about
    15 % more CPU per frame than one thread each (bench/concurrent_sessions.py)."""
    if sessions <= 1:
        return 0
    return max(1, (cores or os.cpu_count() or 1) // sessions)


def plan(codecs: tuple[str, ...] | list[str]) -> Plan:
    """The plan for `codecs`. A backend pinned by the `encoder` key is tried first even for a
    codec the probe did not see it open, so its failure is logged before software takes over;
    a pinned backend that cannot encode here at all is Refused (`check_pin`). A plan that
    cannot be made is the software encoders on their defaults."""
    check_pin()
    try:
        key = (store.get("encoder") or "auto").strip().lower()
        vendor = gpus.preferred_vendor()
        order = {c: encoders.choose(c, key, vendor) for c in codecs}
        for codec, names in order.items():
            usable = key in encoders.HARDWARE_ORDER and key not in encoders.UNAVAILABLE
            pinned = encoders.CANDIDATES[key][codec] if usable else None
            if pinned and pinned not in names:
                names.insert(0, pinned)
        raw = store.read_raw()
        values = store.values()
        config = {k: values[k] for k in raw if k in values and encoder_options.reached_by(k)}
        index = gpus.nvenc_gpu_index()
        if index is not None:
            config["gpu_index"] = index
        return Plan(order, config, software_threads(admission.max_sessions()))
    except Exception:  # a broken probe or config streams in software
        log.exception("encoder plan failed; encoding in software on the defaults")
        return Plan()


def where(encoder: str) -> dict:
    """Where `encoder` runs (`media.gpus.encoder_for`: backend and GPU id); software when the
    GPU probe fails."""
    try:
        return gpus.encoder_for(encoder)
    except Exception:  # a GPU probe failure must not stop a stream
        log.warning("encoder GPU unknown for %s", encoder, exc_info=True)
        return dict(gpus.SOFTWARE)
