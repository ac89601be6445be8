"""The real client's receive path, in-process: moonlight-common-c from moonlight-python's wheel.

moonlight-python (test-only, GPL) ships ``libmoonlight-common-c.so``. Its video RTP queue
(``RtpvAddPacket``: FEC block tracking and nanors recovery) and depacketizer
(``queueRtpPacket``: frame header, NAL parsing, IDR detection) are exported, so we feed our
datagrams straight into them, exactly as ``VideoStream.c``'s receive thread does, and pull the
reassembled decode units back out. No sockets, no RTSP, no host.

The library keeps its state in globals: one :class:`VideoReceiver` at a time per process.
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import moonlight_python

LIB_PATH = Path(moonlight_python.__file__).parent / "libmoonlight-common-c.so"

RTPV_QUEUE_ENTRY_SIZE = 64  # sizeof(RTPV_QUEUE_ENTRY) is 56 on x86-64; leave slack
RTP_VIDEO_QUEUE_SIZE = 8192  # the struct is far smaller; zeroed scratch is all it needs
VIDEO_FORMAT_H264 = 0x0001
FRAME_TYPE_IDR = 1


class _StreamConfig(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_int)
        for name in [
            "width",
            "height",
            "fps",
            "bitrate",
            "packetSize",
            "streamingRemotely",
            "audioConfiguration",
            "supportedVideoFormats",
            "clientRefreshRateX100",
            "colorSpace",
            "colorRange",
            "encryptionFlags",
        ]
    ] + [("remoteInputAesKey", ctypes.c_char * 16), ("remoteInputAesIv", ctypes.c_char * 16)]


class _LEntry(ctypes.Structure):
    pass


_LEntry._fields_ = [
    ("next", ctypes.POINTER(_LEntry)),
    ("data", ctypes.c_void_p),
    ("length", ctypes.c_int),
    ("bufferType", ctypes.c_int),
]


class _DecodeUnit(ctypes.Structure):
    _fields_ = [
        ("frameNumber", ctypes.c_int),
        ("frameType", ctypes.c_int),
        ("frameHostProcessingLatency", ctypes.c_uint16),
        ("receiveTimeUs", ctypes.c_uint64),
        ("enqueueTimeUs", ctypes.c_uint64),
        ("presentationTimeUs", ctypes.c_uint64),
        ("rtpTimestamp", ctypes.c_uint32),
        ("fullLength", ctypes.c_int),
        ("bufferList", ctypes.POINTER(_LEntry)),
        ("hdrActive", ctypes.c_bool),
        ("colorspace", ctypes.c_uint8),
    ]


class VideoReceiver:
    """Feeds datagrams to the client's RTP video queue; yields (frame number, is IDR, bytes)."""

    def __init__(self, packet_size: int = 1392):
        lib = ctypes.CDLL(str(LIB_PATH))
        self.lib = lib
        self.libc = ctypes.CDLL("libc.so.6")
        self.libc.malloc.restype = ctypes.c_void_p
        self.libc.malloc.argtypes = [ctypes.c_size_t]
        self.libc.free.argtypes = [ctypes.c_void_p]
        # A GFE 7.1.431 host (8-byte frame header, multi-FEC), not Sunshine (no FEC-status queue).
        quad = (ctypes.c_int * 4).in_dll(lib, "AppVersionQuad")
        quad[:] = [7, 1, 431, 0]
        ctypes.c_int.in_dll(lib, "NegotiatedVideoFormat").value = VIDEO_FORMAT_H264
        config = _StreamConfig.in_dll(lib, "StreamConfig")
        config.packetSize = packet_size
        config.width, config.height, config.fps = 1280, 720, 60
        self.packet_size = packet_size
        lib.initializeVideoDepacketizer(ctypes.c_int(packet_size))
        self._queue = ctypes.create_string_buffer(RTP_VIDEO_QUEUE_SIZE)
        lib.RtpvInitializeQueue(self._queue)
        lib.RtpvAddPacket.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
        ]
        lib.LiPollNextVideoFrame.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.LiPollNextVideoFrame.restype = ctypes.c_bool
        lib.LiCompleteVideoFrame.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.rejected = 0

    def feed(self, datagram: bytes) -> None:
        length = len(datagram)
        size = self.packet_size + 16
        if length > size:
            raise ValueError("datagram larger than the client's receive buffer")
        buf = self.libc.malloc(size + RTPV_QUEUE_ENTRY_SIZE)
        ctypes.memset(buf, 0, size + RTPV_QUEUE_ENTRY_SIZE)
        ctypes.memmove(buf, bytes(datagram), length)
        # VideoStream.c converts the RTP fields to host order before queueing.
        raw = (ctypes.c_uint8 * 12).from_address(buf)
        seq, ts, ssrc = struct.unpack(">HII", bytes(raw[2:12]))
        raw[2:12] = struct.pack("=HII", seq, ts, ssrc)
        ret = self.lib.RtpvAddPacket(self._queue, buf, length, buf + size)
        if ret != 0:
            self.rejected += 1
            self.libc.free(buf)

    def frames(self) -> list[tuple[int, bool, bytes]]:
        out = []
        handle = ctypes.c_void_p()
        du_ptr = ctypes.POINTER(_DecodeUnit)()
        while self.lib.LiPollNextVideoFrame(ctypes.byref(handle), ctypes.byref(du_ptr)):
            du = du_ptr.contents
            parts = []
            entry = du.bufferList
            while entry:
                e = entry.contents
                parts.append(ctypes.string_at(e.data, e.length))
                entry = e.next
            out.append((du.frameNumber, du.frameType == FRAME_TYPE_IDR, b"".join(parts)))
            self.lib.LiCompleteVideoFrame(handle, 0)
        return out


# ---- RTSP: the client's own reply parser and ANNOUNCE generator ----


class _RtspMessage(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_char),
        ("flags", ctypes.c_char),
        ("sequenceNumber", ctypes.c_int),
        ("protocol", ctypes.c_char_p),
        ("options", ctypes.c_void_p),
        ("payload", ctypes.c_void_p),
        ("payloadLength", ctypes.c_int),
        ("messageBuffer", ctypes.c_void_p),
        ("statusString", ctypes.c_char_p),
        ("statusCode", ctypes.c_int),
    ]


def parse_rtsp_response(reply: bytes, options: list[str]) -> tuple[int, int, dict, bytes]:
    """MCC's parseRtspMessage on our reply -> (status, CSeq, {option: content}, payload)."""
    lib = ctypes.CDLL(str(LIB_PATH))
    lib.getOptionContent.restype = ctypes.c_char_p
    lib.getOptionContent.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    msg = _RtspMessage()
    buf = ctypes.create_string_buffer(reply, len(reply) + 1)
    ret = lib.parseRtspMessage(ctypes.byref(msg), buf, len(reply))
    if ret != 0:
        raise ValueError(f"MCC rejected the reply: {ret}")
    found = {}
    for name in options:
        value = lib.getOptionContent(ctypes.c_void_p(msg.options), name.encode())
        if value is not None:
            found[name] = value.decode()
    payload = ctypes.string_at(msg.payload, msg.payloadLength) if msg.payload else b""
    result = (msg.statusCode, msg.sequenceNumber, found, payload)
    lib.freeMessage(ctypes.byref(msg))
    return result


def client_announce_sdp(
    width: int, height: int, fps: int, bitrate_kbps: int, packet_size: int = 1392
) -> bytes:
    """The ANNOUNCE body MCC's SdpGenerator writes for this stream configuration."""
    lib = ctypes.CDLL(str(LIB_PATH))
    quad = (ctypes.c_int * 4).in_dll(lib, "AppVersionQuad")
    quad[:] = [7, 1, 431, -1]  # a Sunshine host, as ours reports
    config = _StreamConfig.in_dll(lib, "StreamConfig")
    config.width, config.height, config.fps = width, height, fps
    config.bitrate, config.packetSize = bitrate_kbps, packet_size
    config.audioConfiguration = (0x3 << 16) | (2 << 8) | 0xCA  # MAKE_AUDIO_CONFIGURATION(2, 0x3)
    config.supportedVideoFormats = VIDEO_FORMAT_H264
    config.clientRefreshRateX100 = fps * 100
    ctypes.c_int.in_dll(lib, "NegotiatedVideoFormat").value = VIDEO_FORMAT_H264
    ctypes.c_int.in_dll(lib, "AudioPacketDuration").value = 5
    ctypes.c_int.in_dll(lib, "EncryptionFeaturesEnabled").value = 0x01
    ctypes.c_uint16.in_dll(lib, "VideoPortNumber").value = 47998
    # RemoteAddr is a sockaddr_storage: family AF_INET, port, 127.0.0.1
    remote = (ctypes.c_uint8 * 128).in_dll(lib, "RemoteAddr")
    remote[0:8] = list(struct.pack("=HH4B", 2, 0, 127, 0, 0, 1))
    length = ctypes.c_int()
    lib.getSdpPayloadForStreamConfig.restype = ctypes.c_void_p
    ptr = lib.getSdpPayloadForStreamConfig(14, ctypes.byref(length))
    if not ptr:
        raise RuntimeError("MCC produced no SDP")
    return ctypes.string_at(ptr, length.value)


# ---- audio: the client's RTP audio queue (reordering + 4+2 FEC recovery) ----

RTP_AUDIO_QUEUE_SIZE = 4096
RTPQ_RET_PACKET_READY = 0x2
RTPQ_RET_HANDLE_NOW = 0x4


class AudioReceiver:
    """Feeds audio datagrams to ``RtpaAddPacket``; collects the payloads it releases, in order."""

    def __init__(self):
        lib = ctypes.CDLL(str(LIB_PATH))
        self.lib = lib
        self.libc = ctypes.CDLL("libc.so.6")
        self.libc.free.argtypes = [ctypes.c_void_p]
        quad = (ctypes.c_int * 4).in_dll(lib, "AppVersionQuad")
        quad[:] = [7, 1, 431, -1]
        self._queue = ctypes.create_string_buffer(RTP_AUDIO_QUEUE_SIZE)
        lib.RtpaInitializeQueue(self._queue)
        lib.RtpaAddPacket.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint16]
        lib.RtpaGetQueuedPacket.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint16,
            ctypes.POINTER(ctypes.c_uint16),
        ]
        lib.RtpaGetQueuedPacket.restype = ctypes.c_void_p
        self.payloads: list[bytes | None] = []  # None = a loss the client conceals

    def feed(self, datagram: bytes) -> None:
        # AudioStream.c converts the RTP fields to host order first; the FEC header stays BE.
        seq, ts, ssrc = struct.unpack_from(">HII", datagram, 2)
        data = datagram[:2] + struct.pack("=HII", seq, ts, ssrc) + datagram[12:]
        buf = ctypes.create_string_buffer(data, len(data))
        ret = self.lib.RtpaAddPacket(self._queue, buf, len(data))
        if ret == RTPQ_RET_HANDLE_NOW:
            self.payloads.append(data[12:])
        elif ret & RTPQ_RET_PACKET_READY:
            length = ctypes.c_uint16()
            while True:
                ptr = self.lib.RtpaGetQueuedPacket(self._queue, 0, ctypes.byref(length))
                if not ptr:
                    break
                self.payloads.append(
                    ctypes.string_at(ptr + 12, length.value - 12) if length.value else None
                )
                self.libc.free(ptr)
