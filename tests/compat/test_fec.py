"""Reed-Solomon over GF(2^8): hand-derived vectors, recovery, and the client's own nanors."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from compat import fec


def test_field_uses_polynomial_0x11d():
    # 2 * 0x80 overflows: x^8 = x^4 + x^3 + x^2 + 1 -> 0x1D (reference B.12).
    assert fec.gf_mul(2, 0x80) == 0x1D
    assert fec.gf_mul(0x53, 1) == 0x53
    assert fec.gf_mul(0, 0x53) == 0


def test_every_nonzero_element_has_an_inverse():
    a = np.arange(1, 256)
    assert np.all(fec.MUL[a, fec.INV[a]] == 1)


def test_parity_matrix_matches_the_reference_rows():
    # D=4, P=2: coefficient (j, i) = inv((P + i) ^ j); the reference lists these rows.
    m = fec.nanors_parity_matrix(4, 2)
    assert m.tolist() == [[0x8E, 0xF4, 0x47, 0xA7], [0xF4, 0x8E, 0xA7, 0x47]]


def test_parity_of_a_one_byte_shard_by_hand():
    # parity_0 = 8e*1 ^ f4*0 ^ 47*0 ^ a7*2 = 0x8e ^ mul(a7, 2); a7<<1 = 0x14e -> ^0x11d = 0x53
    data = np.array([[1], [0], [0], [2]], dtype=np.uint8)
    parity = fec.ReedSolomon(4, 2).encode(data)
    assert parity[0, 0] == 0x8E ^ 0x53


@pytest.mark.parametrize(
    "d,p,lost", [(4, 2, [0, 3]), (10, 3, [1, 5, 9]), (200, 40, list(range(0, 200, 5))), (7, 2, [6])]
)
def test_lost_data_shards_are_recovered(d, p, lost):
    rng = np.random.default_rng(d)
    data = rng.integers(0, 256, (d, 1408), dtype=np.uint8)
    rs = fec.ReedSolomon(d, p)
    parity = rs.encode(data)
    shards = [data[i].tobytes() for i in range(d)] + [parity[j].tobytes() for j in range(p)]
    for i in lost:
        shards[i] = None
    # Lose some parity too when there is slack.
    for j in range(p - len(lost)):
        shards[d + j] = None
    assert np.array_equal(rs.decode(shards), data)


def test_too_many_losses_is_an_error():
    rs = fec.ReedSolomon(4, 2)
    data = np.zeros((4, 8), dtype=np.uint8)
    parity = rs.encode(data)
    shards = [None, None, None, data[3].tobytes(), parity[0].tobytes(), parity[1].tobytes()]
    with pytest.raises(ValueError):
        rs.decode(shards)


def test_shard_count_limits():
    with pytest.raises(ValueError):
        fec.ReedSolomon(250, 10)
    with pytest.raises(ValueError):
        fec.ReedSolomon(0, 2)


def _nanors(mcc_lib):
    lib = ctypes.CDLL(str(mcc_lib.LIB_PATH))
    lib.reed_solomon_init()
    lib.reed_solomon_new_def.restype = ctypes.c_void_p
    lib.reed_solomon_new_def.argtypes = [ctypes.c_int, ctypes.c_int]
    ptrs = ctypes.POINTER(ctypes.c_void_p)
    lib.reed_solomon_encode_def.argtypes = [ctypes.c_void_p, ptrs, ctypes.c_int, ctypes.c_int]
    lib.reed_solomon_decode_def.argtypes = [
        ctypes.c_void_p,
        ptrs,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_int,
    ]
    lib.reed_solomon_release_def.argtypes = [ctypes.c_void_p]
    return lib


@pytest.mark.parametrize("d,p", [(1, 2), (4, 2), (29, 6), (212, 43)])
def test_parity_is_identical_to_the_clients_nanors(mcc_lib, d, p):
    lib = _nanors(mcc_lib)
    size = 1408
    data = np.random.default_rng(p).integers(0, 256, (d, size), dtype=np.uint8)
    bufs = [ctypes.create_string_buffer(data[i].tobytes(), size) for i in range(d)]
    bufs += [ctypes.create_string_buffer(size) for _ in range(p)]
    arr = (ctypes.c_void_p * (d + p))(*[ctypes.addressof(b) for b in bufs])
    rs = lib.reed_solomon_new_def(d, p)
    assert lib.reed_solomon_encode_def(rs, arr, d + p, size) == 0
    lib.reed_solomon_release_def(rs)
    theirs = np.stack([np.frombuffer(bufs[d + j].raw, dtype=np.uint8) for j in range(p)])
    assert np.array_equal(fec.ReedSolomon(d, p).encode(data), theirs)


def test_clients_nanors_recovers_from_our_parity(mcc_lib):
    lib = _nanors(mcc_lib)
    d, p, size = 12, 3, 1408
    data = np.random.default_rng(7).integers(0, 256, (d, size), dtype=np.uint8)
    parity = fec.ReedSolomon(d, p).encode(data)
    lost = {0, 4, 11}
    shards = [data[i] for i in range(d)] + [parity[j] for j in range(p)]
    bufs = [
        ctypes.create_string_buffer(b"" if i in lost else s.tobytes(), size)
        for i, s in enumerate(shards)
    ]
    marks = bytes(1 if i in lost else 0 for i in range(d + p))
    arr = (ctypes.c_void_p * (d + p))(*[ctypes.addressof(b) for b in bufs])
    rs = lib.reed_solomon_new_def(d, p)
    assert lib.reed_solomon_decode_def(rs, arr, marks, d + p, size) == 0
    lib.reed_solomon_release_def(rs)
    for i in lost:
        assert bufs[i].raw == data[i].tobytes()
