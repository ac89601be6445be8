"""GameStream video packetizer: one encoded access unit -> the UDP datagrams Moonlight expects.

Layout (moonlight-common-c ``Video.h``, ``RtpVideoQueue.c``, ``VideoDepacketizer.c``):

* The frame payload is an 8-byte frame header (``0x01``, host latency, frame type,
  last-payload length) followed by the Annex-B bitstream.
* It is cut into chunks of ``packet_size - 16`` bytes. Every datagram is exactly
  ``packet_size + 16`` bytes: 12-byte RTP header (``0x90``: version 2 + extension flag) and 4
  reserved bytes, the 16-byte NV header, then the chunk (the last one zero-padded; H.264
  decoders ignore trailing zeros).
* Chunks are grouped into at most 4 FEC blocks. Each block carries its own Reed-Solomon parity
  (nanors code, :mod:`compat.fec`) computed over whole datagrams, so the client can
  rebuild a lost datagram from any ``data_shards`` of the block's packets. RTP sequence numbers
  run on across blocks and frames, parity after its block's data.
* The client recovers only ``streamPacketIndex``, ``flags``, ``extraFlags`` and the payload from
  parity (it rewrites the RTP header, ``frameIndex`` and ``multiFecBlocks`` itself), so those
  fields are final before parity is computed, and the rest is stamped onto every shard after.

Optional video encryption (negotiated bit 0x02) wraps each datagram as
``IV(12) || u32 LE frameIndex || GCM tag(16) || AES-128-GCM(datagram)``. The host's DESCRIBE does
not advertise it by default (see :mod:`compat.rtsp`), so clients leave it off.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from compat import fec

FLAG_CONTAINS_PIC_DATA = 0x1
FLAG_EOF = 0x2
FLAG_SOF = 0x4
MULTI_FEC_FLAGS = 0x10

FRAME_TYPE_P = 1
FRAME_TYPE_IDR = 2

RTP_HEADER_SIZE = 16  # 12-byte RTP header + 4 reserved bytes (extension flag 0x10)
NV_HEADER_SIZE = 16
FRAME_HEADER_SIZE = 8
MAX_FEC_BLOCKS = 4
MAX_SHARDS_PER_BLOCK = 1023  # the 10-bit shard index / data-shard count of fecInfo
ENCRYPTION_OVERHEAD = 32  # IV(12) + frame index(4) + tag(16)


def frame_header(frame_type: int, payload_len: int, chunk: int, latency_01ms: int = 0) -> bytes:
    """The 8-byte short frame header (type 0x01) that precedes the bitstream."""
    last = (payload_len + FRAME_HEADER_SIZE) % chunk or chunk
    return struct.pack("<BHBHH", 0x01, min(latency_01ms, 0xFFFF), frame_type, last, 0)


def fec_layout(
    data_shards: int, fec_percentage: int, min_parity: int
) -> list[tuple[int, int, int]]:
    """Split a frame's data shards into FEC blocks: [(data, parity, percentage_on_wire), ...].

    Mirrors the host side of moonlight-common-c's expectations: blocks hold at most
    255*100/(100+pct) shards so data + parity fit nanors' 255; a frame that would need more
    than 4 blocks is sent without FEC (pct 0). When a block's parity falls below
    ``min_parity`` it is raised and the percentage restated so that the client's
    ``ceil(data * pct / 100)`` yields the same count.
    """
    if data_shards <= 0:
        raise ValueError("a frame needs at least one data shard")
    pct = max(0, min(int(fec_percentage), 255))
    per_block = (fec.MAX_SHARDS * 100) // (100 + pct) if pct else MAX_SHARDS_PER_BLOCK
    blocks = -(-data_shards // per_block)
    if blocks > MAX_FEC_BLOCKS:
        pct = 0
        blocks = -(-data_shards // MAX_SHARDS_PER_BLOCK)
        if blocks > MAX_FEC_BLOCKS:
            raise ValueError(f"frame of {data_shards} shards exceeds 4 blocks of 1023")
    # Spread the shards evenly; the first blocks take the remainder.
    base, extra = divmod(data_shards, blocks)
    layout = []
    for b in range(blocks):
        d = base + (1 if b < extra else 0)
        if pct == 0:
            layout.append((d, 0, 0))
            continue
        parity = -(-d * pct // 100)
        block_pct = pct
        if parity < min_parity:
            parity = min_parity
            block_pct = (100 * parity) // d
        parity = min(parity, fec.MAX_SHARDS - d)
        if block_pct > 255:  # an 8-bit field: tiny frames with a high minimum
            block_pct = 255
            parity = -(-d * block_pct // 100)
        layout.append((d, parity, block_pct))
    return layout


@dataclass
class VideoPacketizer:
    """Stateful per-session packetizer: RTP sequence numbers and frame indexes run on.

    ``packet_size`` is the ANNOUNCE's ``x-nv-video[0].packetSize`` (1392; the client already
    subtracted 32 when it asked for encryption).
    """

    packet_size: int = 1392
    fec_percentage: int = 20
    min_required_fec_packets: int = 2
    encryption_key: bytes | None = None

    def __post_init__(self) -> None:
        if not 64 <= self.packet_size <= 4096 or self.packet_size % 16:
            raise ValueError("packet_size must be a multiple of 16 in 64..4096")
        self.block_size = self.packet_size + RTP_HEADER_SIZE
        self.chunk_size = self.packet_size - NV_HEADER_SIZE
        self.sequence = 0  # unwrapped; the wire carries the low 16 bits
        self.frame_index = 1  # the client starts counting at 1
        self.first_block_data = 0
        self._aead = AESGCM(self.encryption_key) if self.encryption_key else None
        self._iv_counter = 0
        self.encrypt_cpu_s = 0.0  # process CPU spent in `_encrypt`, summed (engine figures)

    def packetize(
        self,
        bitstream: bytes,
        frame_type: int = FRAME_TYPE_P,
        rtp_timestamp: int = 0,
        latency_01ms: int = 0,
    ) -> np.ndarray:
        """Packetize one access unit; returns datagrams as rows of a uint8 array, send order.

        Each row supports the buffer protocol, so ``sock.sendto(rows[i], addr)`` sends it.
        """
        header = frame_header(frame_type, len(bitstream), self.chunk_size, latency_01ms)
        payload_len = FRAME_HEADER_SIZE + len(bitstream)
        n_data = -(-payload_len // self.chunk_size)
        layout = fec_layout(n_data, self.fec_percentage, self.min_required_fec_packets)
        self.first_block_data = layout[0][0]  # rows 0.. of the last frame that are data shards

        flat = np.zeros(n_data * self.chunk_size, dtype=np.uint8)
        flat[:FRAME_HEADER_SIZE] = np.frombuffer(header, dtype=np.uint8)
        flat[FRAME_HEADER_SIZE:payload_len] = np.frombuffer(bitstream, dtype=np.uint8)
        chunks = flat.reshape(n_data, self.chunk_size)

        total = sum(d + p for d, p, _ in layout)
        out = np.zeros((total, self.block_size), dtype=np.uint8)
        last_block = len(layout) - 1
        src = 0
        row = 0
        for block_index, (d, p, pct) in enumerate(layout):
            seqs = self.sequence + np.arange(d + p, dtype=np.uint64)
            block = out[row : row + d + p]
            data = block[:d]
            data[:, 32:] = chunks[src : src + d]
            # Fields the client recovers from parity: final before encoding.
            data[:, 16:20] = (
                ((seqs[:d] << 8) & 0xFFFFFFFF).astype("<u4").view(np.uint8).reshape(d, 4)
            )
            flags = np.full(d, FLAG_CONTAINS_PIC_DATA, dtype=np.uint8)
            flags[0] |= FLAG_SOF
            flags[-1] |= FLAG_EOF
            data[:, 24] = flags
            data[:, 26] = MULTI_FEC_FLAGS
            if p:
                block[d:] = fec.codec(d, p).encode(data)
            # Fields the client rewrites itself: stamped on every shard of the block.
            block[:, 0] = 0x90
            block[:, 1] = 0
            block[:, 2:4] = (seqs & 0xFFFF).astype(">u2").view(np.uint8).reshape(-1, 2)
            block[:, 4:8] = np.frombuffer(struct.pack(">I", rtp_timestamp & 0xFFFFFFFF), np.uint8)
            block[:, 8:16] = 0
            block[:, 20:24] = np.frombuffer(struct.pack("<I", self.frame_index), np.uint8)
            block[:, 27] = (block_index << 4) | (last_block << 6)
            shard = np.arange(d + p, dtype=np.uint32)
            fec_info = (shard << 12) | np.uint32(d << 22) | np.uint32(pct << 4)
            block[:, 28:32] = fec_info.astype("<u4").view(np.uint8).reshape(-1, 4)
            self.sequence += d + p
            src += d
            row += d + p
        frame_index = self.frame_index
        self.frame_index = (self.frame_index + 1) & 0xFFFFFFFF
        if self._aead is None:
            return out
        start = time.process_time()
        sealed = self._encrypt(out, frame_index)
        self.encrypt_cpu_s += time.process_time() - start
        return sealed

    def _encrypt(self, packets: np.ndarray, frame_index: int) -> np.ndarray:
        enc = np.empty((packets.shape[0], packets.shape[1] + ENCRYPTION_OVERHEAD), dtype=np.uint8)
        prefix = struct.pack("<I", frame_index)
        for i in range(packets.shape[0]):
            iv = struct.pack("<Q", self._iv_counter) + b"\x00\x00\x00V"
            self._iv_counter += 1
            sealed = self._aead.encrypt(iv, packets[i].tobytes(), None)
            # cryptography appends the tag; the wire wants it before the ciphertext.
            enc[i] = np.frombuffer(iv + prefix + sealed[-16:] + sealed[:-16], dtype=np.uint8)
        return enc


def decrypt_packet(key: bytes, datagram: bytes) -> tuple[int, bytes]:
    """Client side of video encryption (for tests): -> (frame index, plaintext datagram)."""
    iv, frame_index, tag, body = datagram[:12], datagram[12:16], datagram[16:32], datagram[32:]
    return struct.unpack("<I", frame_index)[0], AESGCM(key).decrypt(iv, body + tag, None)
