"""GameStream audio layouts: stereo, 5.1 and 7.1, their Opus multistream configs and the
``surround-params`` lines the host's RTSP DESCRIBE carries.

Channel order everywhere on the host (the sink, the capture, the encoder's input) is the
client's: FL FR C LFE RL RR, then SL SR for 7.1 (moonlight-common-c ``Limelight.h``).

What the client reads (moonlight-common-c ``RtspConnection.c`` ``parseOpusConfigurations``):

* stereo: nothing from the DESCRIBE; always 1 stream, 1 coupled, mapping 0 1, at either
  quality (high quality is only a higher bitrate);
* 6 or 8 channels: the FIRST ``a=fmtp:97 surround-params=<ch>`` line is normal quality, whose
  mapping it then ROTATES (GFE lists LFE last: ``m'[3] = m[ch-1]``, ``m'[4:] = m[3:ch-1]``);
  a SECOND line for the same channel count is high quality (no rotation), used only when the
  client sends ``AudioQuality:1``.

So the normal-quality mapping goes on the wire pre-rotated (:func:`wire_mapping`): after the
client's rotation it is exactly the mapping the host's encoder uses. Plain Python, no codec:
the sink, the encoder and the RTSP DESCRIBE all read it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Channel masks as GameStream clients send them (surroundAudioInfo's high 16 bits, the
# ANNOUNCE's channelMask): Limelight.h AUDIO_CONFIGURATION_*.
MASKS = {2: 0x3, 6: 0x3F, 8: 0x63F}
NAMES = {2: "stereo", 6: "5.1", 8: "7.1"}
# The PulseAudio channel map of a sink in the client's order.
PULSE_MAPS = {
    2: ("front-left", "front-right"),
    6: ("front-left", "front-right", "front-center", "lfe", "rear-left", "rear-right"),
    8: (
        "front-left", "front-right", "front-center", "lfe",
        "rear-left", "rear-right", "side-left", "side-right",
    ),
}  # fmt: skip


class LayoutError(ValueError):
    """A channel count or mask no GameStream layout has."""


@dataclass(frozen=True)
class OpusConfig:
    """One Opus multistream configuration: what encoder and decoder must agree on."""

    channels: int
    streams: int
    coupled: int
    mapping: tuple[int, ...]  # input channel i -> decoded stream channel mapping[i]
    bitrate: int


@dataclass(frozen=True)
class Layout:
    channels: int
    mask: int
    normal: OpusConfig
    high: OpusConfig

    @property
    def name(self) -> str:
        return NAMES[self.channels]

    @property
    def pulse_map(self) -> str:
        return ",".join(PULSE_MAPS[self.channels])

    def config(self, high_quality: bool) -> OpusConfig:
        return self.high if high_quality else self.normal


# Normal quality pairs the front, the rear and (7.1) the side speakers in coupled streams,
# then C and LFE on mono streams: mapping FL->0 FR->1 C->4 LFE->5 RL->2 RR->3 (5.1).
# High quality: one mono stream per channel.
LAYOUTS = {
    2: Layout(
        2, MASKS[2], OpusConfig(2, 1, 1, (0, 1), 96_000), OpusConfig(2, 1, 1, (0, 1), 512_000)
    ),
    6: Layout(
        6,
        MASKS[6],
        OpusConfig(6, 4, 2, (0, 1, 4, 5, 2, 3), 256_000),
        OpusConfig(6, 6, 0, tuple(range(6)), 1_536_000),
    ),
    8: Layout(
        8,
        MASKS[8],
        OpusConfig(8, 5, 3, (0, 1, 6, 7, 2, 3, 4, 5), 450_000),
        OpusConfig(8, 8, 0, tuple(range(8)), 2_048_000),
    ),
}
STEREO = LAYOUTS[2]


def layout(channels: int) -> Layout:
    try:
        return LAYOUTS[channels]
    except KeyError:
        raise LayoutError(f"{channels} audio channels: only 2, 6 or 8 are streamed") from None


def from_surround_info(info: int) -> Layout:
    """The layout of a launch's ``surroundAudioInfo`` (``mask << 16 | channels``); a mask of
    0 (a client that sends only the count) means the count's own layout."""
    channels, mask = info & 0xFFFF, info >> 16
    found = layout(channels)
    if mask not in (0, found.mask):
        raise LayoutError(
            f"channel mask {mask:#x} is not {found.name}'s ({found.mask:#x}) "
            f"for {channels} channels"
        )
    return found


def client_rotation(mapping: tuple[int, ...]) -> tuple[int, ...]:
    """What moonlight-common-c does to a normal-quality 6/8-channel mapping it reads."""
    ch = len(mapping)
    if ch not in (6, 8):
        return tuple(mapping)
    return (*mapping[:3], mapping[ch - 1], *mapping[3 : ch - 1])


def wire_mapping(mapping: tuple[int, ...]) -> tuple[int, ...]:
    """The inverse of :func:`client_rotation`: the normal-quality mapping as sent."""
    ch = len(mapping)
    if ch not in (6, 8):
        return tuple(mapping)
    return (*mapping[:3], *mapping[4:], mapping[3])


def _params(config: OpusConfig, mapping: tuple[int, ...]) -> str:
    digits = "".join(str(m) for m in mapping)
    return f"a=fmtp:97 surround-params={config.channels}{config.streams}{config.coupled}{digits}"


def describe_lines() -> str:
    """The DESCRIBE's ``surround-params`` lines: per surround layout normal, then high."""
    lines = []
    for lay in (LAYOUTS[6], LAYOUTS[8]):
        lines.append(_params(lay.normal, wire_mapping(lay.normal.mapping)))
        lines.append(_params(lay.high, lay.high.mapping))
    return "".join(f"{line}\n" for line in lines)
