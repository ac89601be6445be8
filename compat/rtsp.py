"""GameStream RTSP handshake, host side: parse requests, build replies, enforce the order.

Moonlight (moonlight-common-c ``RtspConnection.c``) opens one TCP connection per request and
reads the reply until EOF, so replies carry no Content-Length and the listener closes after
each. The reply parser needs ``RTSP/1.0 <code> <text>``, ``Name: value`` headers (exactly one
space after the colon) and CRLF line ends. Order on the wire: OPTIONS, DESCRIBE, SETUP audio,
SETUP video, SETUP control, ANNOUNCE (the client's stream parameters as SDP), PLAY.

:class:`RtspSession` holds one launch's state and answers each request with bytes, raising
nothing: a malformed or out-of-order request gets an RTSP error reply (400/404/455), which is
what keeps the listener alive on bad input. An ANNOUNCE that leaves off an encryption layer the
host requires (``encryption_required``, mode 2 of :mod:`compat.engine.encryption`) gets 403;
one asking for a stream the host does not make (a codec it did not offer, HDR, 4:4:4, an odd
picture size, a value outside ``_ANNOUNCE_FIELDS``' bounds) gets 400. Either sets ``refused``
(why) and ``refused_as`` (the session's end reason), which ends the session: the host never
streams something other than what was asked. No sockets here.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from compat.codecs import BITSTREAM_FORMATS, H264_ONLY, CodecRefused, Offer
from media.audio import layouts

MAX_REQUEST_BYTES = 64 * 1024
SESSION_ID = "DEADBEEFCAFE"

# x-ss-general.encryption* bits
ENC_CONTROL_V2 = 0x01
ENC_VIDEO = 0x02
ENC_AUDIO = 0x04

STATUS_TEXT = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Request Entity Too Large",
    455: "Method Not Valid in This State",
    501: "Not Implemented",
}


class RtspError(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class RtspRequest:
    method: str
    target: str
    headers: dict[str, str]  # keys lower-cased
    body: bytes = b""

    @property
    def cseq(self) -> str:
        return self.headers.get("cseq", "0")


_REQUEST_LINE = re.compile(r"^([A-Z]{3,16}) (\S+) RTSP/1\.0$")


def parse_request(data: bytes) -> RtspRequest:
    """Parse one complete request (head + body). Raises RtspError(400/413) on bad input."""
    if len(data) > MAX_REQUEST_BYTES:
        raise RtspError(413, "request too large")
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = data.partition(b"\n\n")
        if not sep:
            raise RtspError(400, "no end of headers")
    try:
        lines = head.decode("ascii").replace("\r\n", "\n").split("\n")
    except UnicodeDecodeError:
        raise RtspError(400, "non-ASCII request head")
    m = _REQUEST_LINE.match(lines[0].strip())
    if not m:
        raise RtspError(400, "malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or " " in name.strip():
            raise RtspError(400, f"malformed header line {line[:40]!r}")
        headers[name.strip().lower()] = value.strip()
    if "cseq" not in headers or not headers["cseq"].isdigit():
        raise RtspError(400, "missing or malformed CSeq")
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit() or int(length) > MAX_REQUEST_BYTES:
            raise RtspError(400, "bad Content-length")
        if len(body) < int(length):
            raise RtspError(400, "truncated body")
        body = body[: int(length)]
    return RtspRequest(m.group(1), m.group(2), headers, body)


def request_complete(buffer: bytes) -> bool:
    """Whether ``buffer`` holds a whole request (head plus Content-length body): read until then.

    Encrypted requests (first bit set) are complete at 24 header bytes + the stated length.
    """
    if buffer[:1] and buffer[0] & 0x80:
        return len(buffer) >= 8 and len(buffer) >= 24 + (
            struct.unpack_from(">I", buffer)[0] & 0x7FFFFFFF
        )
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return False
    m = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", buffer[:end])
    need = int(m.group(1)) if m else 0
    return len(buffer) >= end + 4 + need


def build_response(
    status: int, cseq: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> bytes:
    """A reply in the shape MCC's parser accepts (CSeq always present, so >= 1 header)."""
    lines = [f"RTSP/1.0 {status} {STATUS_TEXT.get(status, 'Error')}", f"CSeq: {cseq}"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


# ---- encrypted RTSP framing (only for sessions launched with an rtspenc:// URL) ----


def _rtsp_iv(seq: int, direction: bytes) -> bytes:
    return struct.pack("<I", seq) + b"\x00" * 6 + direction + b"R"


def seal(key: bytes, seq: int, plaintext: bytes, direction: bytes = b"H") -> bytes:
    """Frame: u32 BE (0x80000000 | len), u32 BE seq, 16-byte tag, ciphertext."""
    sealed = AESGCM(key).encrypt(_rtsp_iv(seq, direction), plaintext, None)
    header = struct.pack(">II", 0x80000000 | len(plaintext), seq)
    return header + sealed[-16:] + sealed[:-16]


def unseal(key: bytes, message: bytes, direction: bytes = b"C") -> tuple[int, bytes]:
    """Inverse of :func:`seal`; raises RtspError(400) on plaintext or a bad tag."""
    if len(message) < 24:
        raise RtspError(400, "short encrypted message")
    type_len, seq = struct.unpack(">II", message[:8])
    if not type_len & 0x80000000:
        raise RtspError(400, "plaintext message on an encrypted session")
    length = type_len & 0x7FFFFFFF
    tag, body = message[8:24], message[24:]
    if len(body) != length:
        raise RtspError(400, "encrypted length mismatch")
    try:
        return seq, AESGCM(key).decrypt(_rtsp_iv(seq, direction), body + tag, None)
    except Exception:
        raise RtspError(400, "encrypted message failed authentication")


# ---- SDP: what the host offers (DESCRIBE) and what the client asks for (ANNOUNCE) ----


# moonlight-common-c enables RFI when this attribute is anywhere in the reply (RtspConnection.c)
# and its decoder declares the capability for the negotiated codec.
REF_PIC_INVALIDATION = "a=x-nv-video[0].refPicInvalidation:1"


def describe_sdp(
    encryption_supported: int = ENC_CONTROL_V2 | ENC_AUDIO,
    encryption_requested: int = ENC_CONTROL_V2,
    feature_flags: int = 0,
    offer: Offer = H264_ONLY,
) -> bytes:
    """The host's stream offer: the codec markers of `offer` (compat.codecs) and reference-frame
    invalidation for all of them (answered with an IDR: :mod:`compat.engine.recovery`). The
    encryption bits come from the launch's policy (:mod:`compat.engine.encryption`)."""
    return (
        f"a=x-ss-general.featureFlags:{feature_flags}\n"
        f"a=x-ss-general.encryptionSupported:{encryption_supported}\n"
        f"a=x-ss-general.encryptionRequested:{encryption_requested}\n"
        f"{REF_PIC_INVALIDATION}\n"
        f"{offer.describe_lines()}"
        f"{layouts.describe_lines()}"  # the 5.1/7.1 Opus configs, normal then high quality
    ).encode("ascii")


def parse_sdp_attributes(body: bytes) -> dict[str, str]:
    """``a=<name>:<value>`` lines -> dict (MCC writes ``value \\r\\n``; the space is stripped)."""
    attrs = {}
    for raw in body.decode("ascii", "replace").splitlines():
        line = raw.rstrip("\r")
        if not line.startswith("a="):
            continue
        name, colon, value = line[2:].partition(":")
        if colon:
            attrs[name.strip()] = value.strip()
    return attrs


# (attribute, field, minimum, maximum, default; None = required)
_ANNOUNCE_FIELDS: list[tuple[str, str, int, int, int | None]] = [
    ("x-nv-video[0].clientViewportWd", "width", 64, 8192, None),
    ("x-nv-video[0].clientViewportHt", "height", 64, 8192, None),
    ("x-nv-video[0].maxFPS", "fps", 1, 480, None),
    ("x-nv-video[0].packetSize", "packet_size", 256, 4096, None),
    ("x-nv-vqos[0].bw.maximumBitrateKbps", "bitrate_kbps", 100, 1_000_000, None),
    ("x-nv-video[0].videoEncoderSlicesPerFrame", "slices_per_frame", 1, 64, None),
    ("x-nv-video[0].maxNumReferenceFrames", "max_ref_frames", 0, 16, None),
    ("x-nv-audio.surround.numChannels", "audio_channels", 1, 8, None),
    ("x-nv-audio.surround.channelMask", "audio_channel_mask", 0, 0xFFFF, None),
    ("x-nv-audio.surround.AudioQuality", "audio_high_quality", 0, 1, None),
    ("x-nv-aqos.packetDuration", "audio_packet_ms", 5, 20, 5),
    ("x-nv-general.useReliableUdp", "reliable_udp", 0, 0xFFFF, 13),
    ("x-nv-general.featureFlags", "nv_feature_flags", 0, 0xFFFFFFFF, 0),
    ("x-ml-general.featureFlags", "ml_feature_flags", 0, 0xFFFFFFFF, 0),
    ("x-ss-general.encryptionEnabled", "encryption_enabled", 0, 0x07, 0),
    ("x-nv-vqos[0].fec.minRequiredFecPackets", "min_fec_packets", 0, 64, 2),
    ("x-ml-video.configuredBitrateKbps", "configured_bitrate_kbps", 0, 1_000_000, 0),
    ("x-nv-vqos[0].bitStreamFormat", "bitstream_format", 0, 2, 0),
    ("x-nv-video[0].dynamicRangeMode", "dynamic_range", 0, 1, 0),
    ("x-ss-video[0].chromaSamplingType", "chroma_444", 0, 1, 0),
    ("x-nv-video[0].encoderCscMode", "csc_mode", 0, 0xFF, 0),
    ("x-nv-video[0].clientRefreshRateX100", "refresh_x100", 0, 100_000, 0),
]


@dataclass(frozen=True)
class StreamParams:
    """The client's ANNOUNCE, validated. Absurd values are rejected, not clamped."""

    width: int
    height: int
    fps: int
    packet_size: int
    bitrate_kbps: int
    slices_per_frame: int
    max_ref_frames: int
    audio_channels: int
    audio_channel_mask: int
    audio_high_quality: int
    audio_packet_ms: int = 5
    reliable_udp: int = 13
    nv_feature_flags: int = 0
    ml_feature_flags: int = 0
    encryption_enabled: int = 0
    min_fec_packets: int = 2
    configured_bitrate_kbps: int = 0
    bitstream_format: int = 0
    dynamic_range: int = 0
    chroma_444: int = 0
    csc_mode: int = 0
    refresh_x100: int = 0

    @property
    def codec(self) -> str:
        """h264, hevc or av1: what the client picked (checked against the offer at ANNOUNCE)."""
        return BITSTREAM_FORMATS[self.bitstream_format]

    @property
    def audio_encrypted(self) -> bool:
        return bool(self.nv_feature_flags & 0x20 or self.encryption_enabled & ENC_AUDIO)

    @property
    def video_encrypted(self) -> bool:
        return bool(self.encryption_enabled & ENC_VIDEO)

    @property
    def control_v2(self) -> bool:
        return bool(self.encryption_enabled & ENC_CONTROL_V2)

    def missing_encryption(self, required: int) -> list[str]:
        """The layers of ``required`` this ANNOUNCE leaves in clear (audio also by flag 0x20)."""
        enabled = self.encryption_enabled | (ENC_AUDIO if self.audio_encrypted else 0)
        names = ((ENC_CONTROL_V2, "control"), (ENC_VIDEO, "video"), (ENC_AUDIO, "audio"))
        return [name for bit, name in names if required & bit and not enabled & bit]


def parse_announce(body: bytes) -> StreamParams:
    """Validate the ANNOUNCE SDP. Raises RtspError(400) naming the first bad attribute."""
    attrs = parse_sdp_attributes(body)
    values: dict[str, int] = {}
    for attr, name, low, high, default in _ANNOUNCE_FIELDS:
        raw = attrs.get(attr)
        if raw is None:
            if default is None:
                raise RtspError(400, f"missing {attr}")
            values[name] = default
            continue
        try:
            value = int(raw, 0) if raw.lower().startswith("0x") else int(raw)
        except ValueError:
            raise RtspError(400, f"{attr} is not an integer")
        if not low <= value <= high:
            raise RtspError(400, f"{attr}={value} outside {low}..{high}")
        values[name] = value
    if values["packet_size"] % 16:
        raise RtspError(400, "packetSize must be a multiple of 16")
    if values["audio_channels"] not in layouts.LAYOUTS:
        raise RtspError(400, f"x-nv-audio.surround.numChannels={values['audio_channels']}: "
                        "only 2, 6 or 8 channels are streamed")  # fmt: skip
    if values["width"] * values["height"] > 8192 * 4320:
        raise RtspError(400, "resolution too large")
    # Like Sunshine: a refresh rate not within 1 % of maxFPS is discarded, not an error.
    if values["refresh_x100"] and abs(values["refresh_x100"] - values["fps"] * 100) > values["fps"]:
        values["refresh_x100"] = 0
    return StreamParams(**values)


def unservable(params: StreamParams) -> str:
    """Why the host cannot make the stream an ANNOUNCE asks for, or "" when it can. Every
    capture source is 8-bit SDR and every encoder here takes 4:2:0 (yuv420p), which needs an
    even width and height (`media.encoder.VideoEncoder`)."""
    if params.dynamic_range:
        return "HDR (dynamicRangeMode=1) was not offered: this host streams 8-bit SDR only"
    if params.chroma_444:
        return "YUV 4:4:4 (chromaSamplingType=1) was not offered: this host encodes 4:2:0 only"
    if params.width % 2 or params.height % 2:
        return (
            f"{params.width}x{params.height} cannot be encoded: 4:2:0 video needs an even "
            "width and height"
        )
    return ""


# ---- the per-launch state machine ----

STREAMS = {"audio": "audio", "video": "video", "control": "control"}


@dataclass
class RtspSession:
    """One pending launch: the ports and secrets its SETUP replies hand out."""

    video_port: int
    audio_port: int
    control_port: int
    ping_payload: str  # 16 upper-case hex chars
    connect_data: int  # u32, matched against the ENet CONNECT data
    encryption_supported: int = ENC_CONTROL_V2 | ENC_AUDIO
    encryption_requested: int = ENC_CONTROL_V2
    encryption_required: int = 0  # layers an ANNOUNCE must enable (else 403 and `refused`)
    refused: str | None = None  # why the session must end (set with an RTSP 403 or 400)
    refused_as: str = ""  # its end reason: encryption_required or refused
    setup_done: set[str] = field(default_factory=set)
    described: bool = False
    params: StreamParams | None = None
    playing: bool = False
    # Set for an rtspenc:// launch: every request must be sealed, every reply is.
    key: bytes | None = None
    # The codecs offered (compat.codecs): DESCRIBE's markers and the ANNOUNCE check.
    offer: Offer = H264_ONLY
    _reply_seq: int = 0

    def handle(self, data: bytes) -> bytes:
        """One request in, one reply out (never raises on client input)."""
        if self.key is None:
            return self._handle_plain(data)
        try:
            _, plaintext = unseal(self.key, data, b"C")
        except RtspError as e:
            return build_response(e.status, "0")  # plaintext: the client cannot be talking to us
        self._reply_seq += 1  # the host's own counter, pre-incremented (first reply: 1)
        return seal(self.key, self._reply_seq, self._handle_plain(plaintext), b"H")

    def _handle_plain(self, data: bytes) -> bytes:
        try:
            req = parse_request(data)
        except RtspError as e:
            return build_response(e.status, "0")
        try:
            return self._dispatch(req)
        except RtspError as e:
            # The reason as a text body: the client logs the status, a person reads the why
            # (e.g. "HEVC was not offered by this host").
            return build_response(
                e.status,
                req.cseq,
                {"Content-Type": "text/plain"},
                e.reason.encode("ascii", "replace"),
            )

    def _dispatch(self, req: RtspRequest) -> bytes:
        method = req.method
        if method == "OPTIONS":
            return build_response(200, req.cseq)
        if method == "DESCRIBE":
            if self.playing:
                raise RtspError(455, "already playing")
            self.described = True
            sdp = describe_sdp(
                self.encryption_supported, self.encryption_requested, offer=self.offer
            )
            return build_response(200, req.cseq, {"Content-Type": "application/sdp"}, sdp)
        if method == "SETUP":
            return self._setup(req)
        if method == "ANNOUNCE":
            if not {"video", "control"} <= self.setup_done or self.playing:
                raise RtspError(455, "ANNOUNCE before SETUP of video and control")
            try:
                params = parse_announce(req.body)
            except RtspError as e:  # a size, rate or value outside the host's limits
                self._refuse(e.status, "refused", e.reason)
            missing = params.missing_encryption(self.encryption_required)
            if missing:
                why = f"encryption required; the client left {', '.join(missing)} in clear"
                self._refuse(403, "encryption_required", why)
            try:
                self.offer.accept(params.bitstream_format)
            except CodecRefused as e:
                self._refuse(400, "refused", str(e))
            why = unservable(params)
            if why:
                self._refuse(400, "refused", why)
            self.params = params
            return build_response(200, req.cseq)
        if method == "PLAY":
            if self.params is None:
                raise RtspError(455, "PLAY before ANNOUNCE")
            self.playing = True
            return build_response(200, req.cseq)
        raise RtspError(501, f"method {method} not implemented")

    def _refuse(self, status: int, end_reason: str, why: str) -> None:
        """Answer the ANNOUNCE with `status` and `why`, and end the session with `end_reason`."""
        self.refused, self.refused_as = why, end_reason
        raise RtspError(status, why)

    def _setup(self, req: RtspRequest) -> bytes:
        if not self.described or self.playing or self.params is not None:
            raise RtspError(455, "SETUP out of order")
        m = re.search(r"streamid=(\w+)", req.target)
        stream = STREAMS.get(m.group(1)) if m else None
        if stream is None:
            raise RtspError(404, "unknown stream")
        headers = {"Session": f"{SESSION_ID};timeout = 90"}
        if stream == "audio":
            headers["Transport"] = f"server_port={self.audio_port}"
            headers["X-SS-Ping-Payload"] = self.ping_payload
        elif stream == "video":
            headers["Transport"] = f"server_port={self.video_port}"
            headers["X-SS-Ping-Payload"] = self.ping_payload
        else:
            headers["Transport"] = f"server_port={self.control_port}"
            headers["X-SS-Connect-Data"] = str(self.connect_data)
        self.setup_done.add(stream)
        return build_response(200, req.cseq, headers)
