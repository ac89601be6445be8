"""GameStream audio packets: RTP-wrapped Opus, optional AES-CBC, and the 4+2 audio FEC.

Per moonlight-common-c ``AudioStream.c`` / ``RtpAudioQueue.c``:

* Data packet: RTP ``0x80``, payload type 97, sequence (BE, from 0), timestamp (BE, from 0,
  advancing by the packet duration in **milliseconds**), SSRC 0, then the Opus packet.
* Encryption (when the ANNOUNCE asks for it): AES-128-CBC with PKCS#7, key = ``rikey``,
  IV = u32 BE ``(rikeyid + seq)`` then 12 zero bytes. The client decrypts every packet, so
  hosts must implement it.
* FEC: blocks of 4 data packets starting at seq = 0 mod 4; after the 4th, two parity packets
  (payload type 127, seq = last data seq + 1 and + 2; they do not consume data sequence
  numbers, the next data packet still uses last + 1) carry a 12-byte header (shard index, 97,
  BE base seq, BE base timestamp, SSRC) and Reed-Solomon parity over the 4 (possibly encrypted)
  payloads, with the client's fixed matrix ``77 40 38 0e / c7 a7 0d 6c``. That only works if
  all 4 payloads have one size, hence CBR Opus; a block with mixed sizes is sent without parity.

The session's sound comes from :mod:`media.audiofeed`; :class:`OpusSilence` is what
the engine sends without it (no sound server, `stream_audio = false`).
"""

from __future__ import annotations

import struct

import numpy as np
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from compat import fec
from media.audio import layouts

PT_AUDIO = 97
PT_FEC = 127
DATA_SHARDS = 4
FEC_SHARDS = 2
AUDIO_FEC_MATRIX = np.array([[0x77, 0x40, 0x38, 0x0E], [0xC7, 0xA7, 0x0D, 0x6C]], dtype=np.uint8)

_rs = fec.ReedSolomon(DATA_SHARDS, FEC_SHARDS, AUDIO_FEC_MATRIX)


def audio_iv(rikeyid: int, seq: int) -> bytes:
    return struct.pack(">I", (rikeyid + seq) & 0xFFFFFFFF) + b"\x00" * 12


def encrypt_payload(key: bytes, rikeyid: int, seq: int, payload: bytes) -> bytes:
    return CbcSealer(key).seal(audio_iv(rikeyid, seq), payload)


class CbcSealer:
    """AES-128-CBC with PKCS#7 for one key, chained by hand over one reused ECB context.

    A new ``Cipher(..., CBC(iv))`` per packet (the IV changes with every sequence number) cost
    ~200 us per 5 ms packet here; CBC is ``C_i = E(P_i xor C_i-1)`` with ``C_0 = IV``, so four
    single-block ECB calls give the same bytes (tests decrypt them with a stock CBC decryptor).
    """

    def __init__(self, key: bytes):
        self._ecb = Cipher(algorithms.AES(key), modes.ECB()).encryptor()

    def seal(self, iv: bytes, payload: bytes) -> bytes:
        pad = 16 - len(payload) % 16
        data = payload + bytes([pad]) * pad
        prev = int.from_bytes(iv, "big")
        out = []
        for i in range(0, len(data), 16):
            block = (int.from_bytes(data[i : i + 16], "big") ^ prev).to_bytes(16, "big")
            sealed = self._ecb.update(block)
            out.append(sealed)
            prev = int.from_bytes(sealed, "big")
        return b"".join(out)


def decrypt_payload(key: bytes, rikeyid: int, seq: int, payload: bytes) -> bytes:
    dec = Cipher(algorithms.AES(key), modes.CBC(audio_iv(rikeyid, seq))).decryptor()
    data = dec.update(payload) + dec.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(data) + unpadder.finalize()


class AudioPacketizer:
    """Per-session audio sequence/timestamp state. ``packetize`` returns datagrams to send."""

    def __init__(
        self,
        key: bytes | None = None,
        rikeyid: int = 0,
        packet_ms: int = 5,
        fec_enabled: bool = True,
    ):
        self.key = key
        self._sealer = CbcSealer(key) if key is not None else None
        self.rikeyid = rikeyid
        self.packet_ms = packet_ms
        self.fec_enabled = fec_enabled
        self.seq = 0
        self.timestamp = 0
        self._block: list[bytes] = []
        self._block_base = (0, 0)

    def packetize(self, opus_packet: bytes) -> list[bytes]:
        seq = self.seq & 0xFFFF
        payload = opus_packet
        if self._sealer is not None:
            payload = self._sealer.seal(audio_iv(self.rikeyid, seq), opus_packet)
        ts = self.timestamp & 0xFFFFFFFF
        out = [struct.pack(">BBHII", 0x80, PT_AUDIO, seq, ts, 0) + payload]
        if seq % DATA_SHARDS == 0:
            self._block = []
            self._block_base = (seq, ts)
        self._block.append(payload)
        if self.fec_enabled and seq % DATA_SHARDS == DATA_SHARDS - 1:
            out.extend(self._parity(seq))
        self.seq += 1
        self.timestamp += self.packet_ms
        return out

    def _parity(self, last_seq: int) -> list[bytes]:
        block = self._block
        self._block = []
        if len(block) != DATA_SHARDS or len({len(p) for p in block}) != 1:
            return []  # started mid-block or VBR sizes: the client could not use it
        shards = np.frombuffer(b"".join(block), dtype=np.uint8).reshape(DATA_SHARDS, -1)
        parity = _rs.encode(shards)
        base_seq, base_ts = self._block_base
        packets = []
        for index in range(FEC_SHARDS):
            rtp = struct.pack(">BBHII", 0x80, PT_FEC, (last_seq + 1 + index) & 0xFFFF, 0, 0)
            header = struct.pack(">BBHII", index, PT_AUDIO, base_seq, base_ts, 0)
            packets.append(rtp + header + parity[index].tobytes())
        return packets


class OpusSilence:
    """CBR Opus packets of silence at the client's packet duration, in the stream's layout:
    mono or stereo through PyAV, 5.1 and 7.1 with the multistream config the client was told
    (`layout`, a `media.audio.layouts.OpusConfig`), so its decoder reads them as it reads sound.
    """

    def __init__(self, packet_ms: int = 5, bitrate: int = 96000, channels: int = 2, layout=None):
        import av  # PyAV: imported here so the protocol package loads without it

        self.samples = 48 * packet_ms
        self.channels = layout.channels if layout is not None else channels
        self._ms = None
        self._av = av
        self._pts = 0
        if self.channels > 2:
            # heavy (numpy, ctypes libopus), like PyAV above
            from media.audio.multistream import MultistreamEncoder

            layout = layout or layouts.layout(self.channels).normal
            self._ms = MultistreamEncoder(
                layout.channels, layout.streams, layout.coupled, layout.mapping,
                bitrate=bitrate, frame_samples=self.samples, fec=False,
            )  # fmt: skip
            return
        ctx = av.CodecContext.create("libopus", "w")
        ctx.sample_rate = 48000
        ctx.layout = "stereo" if self.channels == 2 else "mono"
        ctx.format = "s16"
        ctx.bit_rate = bitrate
        ctx.options = {"frame_duration": str(packet_ms), "vbr": "off", "application": "lowdelay"}
        ctx.open()
        self._ctx = ctx

    def next_packet(self) -> bytes:
        """Encode one silent frame; returns one Opus packet (libopus emits one per frame)."""
        if self._ms is not None:
            return self._ms.encode(np.zeros((self.samples, self.channels), np.int16))
        while True:
            frame = self._av.AudioFrame.from_ndarray(
                np.zeros((1, self.samples * self.channels), np.int16),
                format="s16",
                layout=self._ctx.layout,
            )
            frame.sample_rate = 48000
            frame.pts = self._pts
            self._pts += self.samples
            packets = self._ctx.encode(frame)
            if packets:
                return bytes(packets[0])
