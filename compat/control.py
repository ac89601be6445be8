"""GameStream control-stream messages and their AES-GCM framing (MCC ControlStream.c).

Every message on the ENet control channel is encrypted (clients announce
``x-nv-general.useReliableUdp:13``). One ENet packet carries::

    u16 LE 0x0001 | u16 LE length (= 4 + 16 + len(ciphertext)) | u32 LE seq | tag(16) | ciphertext

and the plaintext is ``u16 LE type | u16 LE payload length | payload``. The key is the
launch's ``rikey``. With control-v2 (encryption bit 0x01 negotiated) the 12-byte IV is the seq
(LE) in bytes 0-3, zeros, then ``'C'``/``'H'`` (client/host originated) and ``'C'`` (control).
Without v2 the IV is 16 bytes holding only the low byte of seq. Each direction counts its own
seq from 0. The sender's direction letter in the IV means a message replayed back at its sender
fails authentication.

Bytes in, bytes out; the ENet transport lives in :mod:`compat.enet_transport`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

ENCRYPTED_HEADER_TYPE = 0x0001
TAG_SIZE = 16

# client -> host (MCC packetTypesGen7Enc and Sunshine extensions)
IDR_REQUEST = 0x0302  # also the first "start A" message
START_B = 0x0307
INVALIDATE_REF_FRAMES = 0x0301
LOSS_STATS = 0x0201
FRAME_STATS = 0x0204
INPUT_DATA = 0x0206
PERIODIC_PING = 0x0200
LTR_FRAME_ACK = 0x0350
FRAME_FEC_STATUS = 0x5502  # client->host; the same number host->client is "set RGB LED"

# host -> client
RUMBLE = 0x010B
TERMINATION = 0x0109
HDR_MODE = 0x010E
RUMBLE_TRIGGERS = 0x5500
SET_MOTION_EVENT = 0x5501
SET_RGB_LED = 0x5502
ADAPTIVE_TRIGGERS = 0x5503

# HRESULT the host sends in TERMINATION: "server closed the session" (graceful).
TERMINATION_GRACEFUL = 0x80030023
TERMINATION_ERROR = 0x80004005  # E_FAIL: an unexpected host-side error

MAX_PLAINTEXT = 0xFFFF - 4 - TAG_SIZE - 4


class ControlError(Exception):
    """Malformed, unauthenticated or unencrypted message: the session should stop."""


def _iv(seq: int, origin: bytes, v2: bool) -> bytes:
    if v2:
        return struct.pack("<I", seq & 0xFFFFFFFF) + b"\x00" * 6 + origin + b"C"
    return bytes([seq & 0xFF]) + b"\x00" * 15


def encode_message(msg_type: int, payload: bytes = b"") -> bytes:
    if len(payload) > MAX_PLAINTEXT:
        raise ValueError("control payload too large")
    return struct.pack("<HH", msg_type, len(payload)) + payload


def decode_message(plaintext: bytes) -> tuple[int, bytes]:
    if len(plaintext) < 4:
        raise ControlError("runt control message")
    msg_type, length = struct.unpack_from("<HH", plaintext)
    if length != len(plaintext) - 4:
        raise ControlError("control payload length mismatch")
    return msg_type, plaintext[4:]


def seal(
    key: bytes, seq: int, msg_type: int, payload: bytes, origin: bytes, v2: bool = True
) -> bytes:
    """One encrypted ENet payload from ``origin`` (b'H' host, b'C' client)."""
    sealed = AESGCM(key).encrypt(_iv(seq, origin, v2), encode_message(msg_type, payload), None)
    ciphertext, tag = sealed[:-TAG_SIZE], sealed[-TAG_SIZE:]
    header = struct.pack("<HHI", ENCRYPTED_HEADER_TYPE, 4 + TAG_SIZE + len(ciphertext), seq)
    return header + tag + ciphertext


def open_sealed(
    key: bytes, packet: bytes, origin: bytes, v2: bool = True
) -> tuple[int, int, bytes]:
    """Decrypt an ENet payload sent by ``origin`` -> (seq, type, payload). Raises ControlError."""
    if len(packet) < 8 + TAG_SIZE + 4:
        raise ControlError("runt encrypted control packet")
    header_type, length, seq = struct.unpack_from("<HHI", packet)
    if header_type != ENCRYPTED_HEADER_TYPE:
        raise ControlError("unencrypted control message on an encrypted stream")
    if length != len(packet) - 4:
        raise ControlError("encrypted control length mismatch")
    tag, ciphertext = packet[8 : 8 + TAG_SIZE], packet[8 + TAG_SIZE :]
    try:
        plaintext = AESGCM(key).decrypt(_iv(seq, origin, v2), ciphertext + tag, None)
    except InvalidTag:
        raise ControlError("control message failed authentication")
    msg_type, payload = decode_message(plaintext)
    if msg_type == ENCRYPTED_HEADER_TYPE:
        raise ControlError("nested encrypted header")
    return seq, msg_type, payload


class ControlCipher:
    """Host end of one session's control stream: seals outgoing, opens incoming messages."""

    def __init__(self, key: bytes, v2: bool = True):
        if len(key) != 16:
            raise ValueError("rikey must be 16 bytes")
        self.key = key
        self.v2 = v2
        self.send_seq = 0
        self.last_recv_seq: int | None = None

    def seal(self, msg_type: int, payload: bytes = b"") -> bytes:
        packet = seal(self.key, self.send_seq, msg_type, payload, b"H", self.v2)
        self.send_seq = (self.send_seq + 1) & 0xFFFFFFFF
        return packet

    def open(self, packet: bytes) -> tuple[int, bytes]:
        seq, msg_type, payload = open_sealed(self.key, packet, b"C", self.v2)
        self.last_recv_seq = seq
        return msg_type, payload

    def termination(self, hresult: int = TERMINATION_GRACEFUL) -> bytes:
        return self.seal(TERMINATION, termination_payload(hresult))


def termination_payload(hresult: int = TERMINATION_GRACEFUL) -> bytes:
    """The extended termination message: a big-endian HRESULT."""
    return struct.pack(">I", hresult)


@dataclass(frozen=True)
class RefInvalidation:
    first_frame: int
    last_frame: int


def parse_rfi(payload: bytes) -> RefInvalidation:
    """0x0301: u32 LE first frame at 0, u32 LE last frame at 8 (SS_RFI_REQUEST)."""
    if len(payload) < 12:
        raise ControlError("short RFI request")
    first = struct.unpack_from("<I", payload, 0)[0]
    last = struct.unpack_from("<I", payload, 8)[0]
    return RefInvalidation(first, last)


@dataclass(frozen=True)
class FrameFecStatus:
    frame_index: int
    highest_received_seq: int
    next_contiguous_seq: int
    missing_before_highest: int
    total_data: int
    total_parity: int
    received_data: int
    received_parity: int
    fec_percentage: int
    block_index: int
    block_count: int


_FEC_STATUS = struct.Struct(">IHHHHHHHBBB")


def parse_fec_status(payload: bytes) -> FrameFecStatus:
    """0x5502 from the client: SS_FRAME_FEC_STATUS, big-endian fields (Video.h)."""
    if len(payload) < _FEC_STATUS.size:
        raise ControlError("short FEC status")
    return FrameFecStatus(*_FEC_STATUS.unpack_from(payload))


@dataclass
class ControlEvents:
    """What one incoming message asks of the engine (the session loop acts on it)."""

    idr_requested: bool = False
    invalidation: RefInvalidation | None = None  # 0x0301, judged by compat.engine.recovery
    ping: bool = False
    input_data: bytes | None = None
    fec_status: FrameFecStatus | None = None
    ignored: bool = False


def interpret(msg_type: int, payload: bytes) -> ControlEvents:
    """Map a decrypted client message to engine actions.

    An RFI request is not an IDR request: the engine checks its range against what it sent
    (:mod:`compat.engine.recovery`) before it answers with an IDR.
    """
    ev = ControlEvents()
    if msg_type == IDR_REQUEST:
        ev.idr_requested = True
    elif msg_type == INVALIDATE_REF_FRAMES:
        ev.invalidation = parse_rfi(payload)
    elif msg_type == PERIODIC_PING:
        ev.ping = True
    elif msg_type == INPUT_DATA:
        ev.input_data = payload
    elif msg_type == FRAME_FEC_STATUS:  # loss_pct and adaptive bitrate (engine.adaptive)
        ev.fec_status = parse_fec_status(payload)
    else:  # START_B, LOSS_STATS, FRAME_STATS, LTR ACK without RFI, unknown: keep-alive only
        ev.ignored = True
    return ev
