"""Reed-Solomon erasure coding over GF(2^8), wire-compatible with nanors.

Moonlight clients (moonlight-common-c) recover lost video shards with nanors, so our parity
must come from the same code: GF(2^8) with the polynomial 0x11D and nanors' systematic
Cauchy-style parity matrix, where parity row ``j`` and data column ``i`` hold
``inv((P + i) ^ j)`` (``P`` = parity count). Any ``D`` of the ``D + P`` shards then rebuild the
data. The audio stream overrides that matrix with a fixed 2x4 one; :class:`ReedSolomon` takes a
custom matrix for that case.

Everything is vectorised with numpy: a 256x256 multiplication table gives, per data shard, a
256-row table of "this byte times each parity coefficient" (the P products packed into uint64
words); one word-gather per data shard then yields that shard's contribution to all P parity
shards, XOR-accumulated. A 1080p60 stream
produces thousands of shards per second; a per-byte Python loop would not keep up.

Pure functions and classes: no sockets, no Django.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

POLYNOMIAL = 0x11D
# nanors' limit: data + parity shards per block.
MAX_SHARDS = 255


def _build_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    exp = np.zeros(512, dtype=np.uint8)
    log = np.zeros(256, dtype=np.int32)
    x = 1
    for power in range(255):
        exp[power] = x
        log[x] = power
        x <<= 1
        if x & 0x100:
            x ^= POLYNOMIAL
    exp[255:510] = exp[0:255]
    # MUL[a, b] = a*b in GF(2^8); row 0 and column 0 stay zero.
    la = log[1:, None] + log[None, 1:]
    mul = np.zeros((256, 256), dtype=np.uint8)
    mul[1:, 1:] = exp[la]
    inv = np.zeros(256, dtype=np.uint8)
    inv[1:] = exp[(255 - log[1:]) % 255]
    return exp, log, mul, inv


EXP, LOG, MUL, INV = _build_tables()


def gf_mul(a: int, b: int) -> int:
    return int(MUL[a, b])


def _product_tables(matrix: np.ndarray) -> np.ndarray:
    """For each column i: a 256 x W table of uint64 words whose row x holds the R bytes of
    ``matrix[:, i] * x``, zero-padded to W = ceil(R / 8) words (R is ``matrix.shape[0]``).

    Why words: a gather of one 8-byte element per input byte is several times faster than
    numpy's gather of an R-byte row (R = 2..9 for a frame's FEC block), and XOR does not care
    how the bytes are grouped; the padding bytes stay zero and are cut off at the end."""
    m = np.asarray(matrix, dtype=np.uint8)
    rows = m.shape[0]
    width = -(-rows // 8) * 8
    tables = np.zeros((m.shape[1], 256, width), dtype=np.uint8)
    tables[:, :, :rows] = np.transpose(MUL[m], (1, 2, 0))
    return tables.view(np.uint64)


def _apply_tables(tables: np.ndarray, shards: np.ndarray, rows: int) -> np.ndarray:
    # For every byte of every input shard, its `rows` products at once (one or a few uint64
    # words), XOR-accumulated over the shards; then back to bytes, one row each.
    words = tables.shape[2]
    if words == 1:
        # Up to 8 parity rows (a 1080p frame's block: 7): one gather for the whole block, the
        # shard's byte plus 256 x its column (at most 255 x 256 + 255: uint16 indexes, which
        # numpy gathers without the intp copy `take` makes), then one XOR reduction. Half the
        # CPU of a gather per shard, which cost 3 % of a 1080p60 stream's encoder CPU.
        index = shards + _column_offsets(tables.shape[0])
        acc = np.bitwise_xor.reduce(tables.reshape(-1)[index], axis=0)
    else:  # wider rows: one gather per shard (one (D, B, words) gather is slower there)
        acc = np.zeros((shards.shape[1], words), dtype=np.uint64)
        for col in range(tables.shape[0]):
            acc ^= np.take(tables[col], shards[col], axis=0)
    out_t = acc.view(np.uint8).reshape(shards.shape[1], words * 8)
    return np.ascontiguousarray(out_t[:, :rows].T)


@lru_cache(maxsize=256)
def _column_offsets(columns: int) -> np.ndarray:
    return (np.arange(columns, dtype=np.uint16) * 256)[:, None]


def gf_matmul(matrix: np.ndarray, shards: np.ndarray) -> np.ndarray:
    """``matrix`` (R x K coefficients) times ``shards`` (K x B bytes) over GF(2^8) -> R x B."""
    matrix = np.asarray(matrix, dtype=np.uint8)
    return _apply_tables(_product_tables(matrix), np.asarray(shards, dtype=np.uint8),
                         matrix.shape[0])  # fmt: skip


def gf_invert(matrix: np.ndarray) -> np.ndarray:
    """Invert a square matrix over GF(2^8) by Gauss-Jordan elimination (rows are numpy ops)."""
    n = matrix.shape[0]
    work = np.concatenate([np.asarray(matrix, dtype=np.uint8), np.eye(n, dtype=np.uint8)], axis=1)
    for col in range(n):
        pivot_rows = np.nonzero(work[col:, col])[0]
        if pivot_rows.size == 0:
            raise ValueError("matrix is singular over GF(2^8)")
        pivot = col + int(pivot_rows[0])
        if pivot != col:
            work[[col, pivot]] = work[[pivot, col]]
        work[col] = MUL[INV[work[col, col]], work[col]]
        factors = work[:, col].copy()
        factors[col] = 0
        rows = np.nonzero(factors)[0]
        if rows.size:
            work[rows] ^= MUL[factors[rows][:, None], work[col][None, :]]
    return work[:, n:]


@lru_cache(maxsize=512)
def nanors_parity_matrix(data_shards: int, parity_shards: int) -> np.ndarray:
    """nanors' parity rows: coefficient (j, i) = inv((P + i) ^ j). Read-only, cached."""
    i = np.arange(data_shards)[None, :]
    j = np.arange(parity_shards)[:, None]
    m = INV[(parity_shards + i) ^ j].astype(np.uint8)
    m.setflags(write=False)
    return m


class ReedSolomon:
    """A (data_shards, parity_shards) erasure code with equal-sized shards.

    ``matrix`` overrides nanors' parity rows (the audio stream fixes its own 2x4 matrix).
    """

    def __init__(self, data_shards: int, parity_shards: int, matrix: np.ndarray | None = None):
        if data_shards <= 0 or parity_shards <= 0 or data_shards + parity_shards > MAX_SHARDS:
            raise ValueError(
                f"need 1..{MAX_SHARDS} shards in all, got {data_shards}+{parity_shards}"
            )
        self.data_shards = data_shards
        self.parity_shards = parity_shards
        if matrix is None:
            self.matrix = nanors_parity_matrix(data_shards, parity_shards)
        else:
            self.matrix = np.asarray(matrix, dtype=np.uint8)
            if self.matrix.shape != (parity_shards, data_shards):
                raise ValueError("parity matrix shape must be (parity_shards, data_shards)")
        self._tables: np.ndarray | None = None

    def encode(self, data: np.ndarray) -> np.ndarray:
        """Data shards (D x B uint8) -> parity shards (P x B uint8)."""
        data = np.ascontiguousarray(data, dtype=np.uint8)
        if data.ndim != 2 or data.shape[0] != self.data_shards:
            raise ValueError(f"expected {self.data_shards} data shards as a 2-D array")
        if self._tables is None:
            self._tables = _product_tables(self.matrix)  # D x 256 x words, reused per frame
        return _apply_tables(self._tables, data, self.parity_shards)

    def decode(self, shards: list[bytes | np.ndarray | None]) -> np.ndarray:
        """Rebuild the D data shards from ``shards`` (D + P entries, ``None`` = lost).

        Raises ValueError when more shards are missing than there is parity to cover.
        """
        total = self.data_shards + self.parity_shards
        if len(shards) != total:
            raise ValueError(f"expected {total} shard slots, got {len(shards)}")
        present = [s for s in shards if s is not None]
        if not present:
            raise ValueError("no shards received")
        size = len(present[0])
        d = self.data_shards
        missing = [i for i in range(d) if shards[i] is None]
        out = np.zeros((d, size), dtype=np.uint8)
        for i in range(d):
            if shards[i] is not None:
                out[i] = np.frombuffer(bytes(shards[i]), dtype=np.uint8)
        if not missing:
            return out
        parity_rows = [j for j in range(self.parity_shards) if shards[d + j] is not None]
        if len(parity_rows) < len(missing):
            raise ValueError(
                f"{len(missing)} data shards lost but only {len(parity_rows)} parity shards left"
            )
        parity_rows = parity_rows[: len(missing)]
        known = [i for i in range(d) if shards[i] is not None]
        rhs = np.stack([np.frombuffer(bytes(shards[d + j]), dtype=np.uint8) for j in parity_rows])
        rows = self.matrix[parity_rows]
        if known:
            # Remove what the surviving data shards contributed to each parity shard.
            rhs = rhs ^ gf_matmul(rows[:, known], out[known])
        out[missing] = gf_matmul(gf_invert(rows[:, missing]), rhs)
        return out


@lru_cache(maxsize=512)
def codec(data_shards: int, parity_shards: int) -> ReedSolomon:
    """A cached nanors-compatible code (the packetizer asks for the same sizes every frame)."""
    return ReedSolomon(data_shards, parity_shards)
