"""The Cython filter kernels against their NumPy references, and their own guards."""

import numpy as np
import pytest
from helpers import (
    ref_bitshuffle,
    ref_bitunshuffle,
    ref_bytedelta_decode,
    ref_bytedelta_encode,
    ref_delta_decode_first,
    ref_delta_encode_first,
    ref_shuffle,
    ref_unshuffle,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from b2store import _shuffle
from b2store.chunk import _delta

element_sizes = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 32, 255])
payloads = st.binary(min_size=0, max_size=3000).map(lambda b: np.frombuffer(b, np.uint8))


def run(kernel, src: np.ndarray, *args) -> np.ndarray:
    dst = np.full(len(src), 0xA5, np.uint8)
    kernel(src, dst, *args)
    return dst


@given(payloads, element_sizes)
def test_shuffle_matches_reference(data, es):
    out = run(_shuffle.shuffle, data, es)
    np.testing.assert_array_equal(out, ref_shuffle(data, es))
    np.testing.assert_array_equal(run(_shuffle.unshuffle, out, es), data)
    np.testing.assert_array_equal(ref_unshuffle(out, es), data)


@given(payloads, element_sizes)
def test_bitshuffle_matches_reference(data, es):
    out = run(_shuffle.bitshuffle, data, es)
    np.testing.assert_array_equal(out, ref_bitshuffle(data, es))
    np.testing.assert_array_equal(run(_shuffle.bitunshuffle, out, es), data)
    np.testing.assert_array_equal(ref_bitunshuffle(out, es), data)


def test_bitshuffle_layout_by_hand():
    # 8 one-byte items: item e has only bit (e % 8) set, so bit row k is the byte 1 << k.
    items = np.array([1 << e for e in range(8)], np.uint8)
    out = run(_shuffle.bitshuffle, items, 1)
    np.testing.assert_array_equal(out, items)
    # Two-byte items: the row of bit 0 of byte 1 holds which items have 0x0100 set.
    items16 = np.array([0x0100 if e in (0, 3) else 0 for e in range(8)], "<u2").view(np.uint8)
    out = run(_shuffle.bitshuffle, items16, 2)
    assert out[8] == 0b00001001 and out.sum() == 0b00001001


@given(payloads, st.sampled_from([1, 2, 4, 8]))
def test_delta_first_block_matches_reference(data, width):
    encoded = run(_delta.delta_encode_first, data, data, width)
    np.testing.assert_array_equal(encoded, ref_delta_encode_first(data, width))
    decoded = encoded.copy()
    _delta.delta_decode_first(decoded, width)
    np.testing.assert_array_equal(decoded, ref_delta_decode_first(encoded, width))
    np.testing.assert_array_equal(decoded, data)


@given(payloads, payloads)
def test_xor_into(a, b):
    n = min(len(a), len(b))
    out = np.empty(n, np.uint8)
    _delta.xor_into(a[:n], b, out)
    np.testing.assert_array_equal(out, a[:n] ^ b[:n])


@given(payloads, element_sizes, st.booleans())
def test_bytedelta_matches_reference(data, es, buggy):
    encoded = run(_delta.bytedelta_encode, data, es, buggy)
    np.testing.assert_array_equal(encoded, ref_bytedelta_encode(data, es, buggy))
    decoded = run(_delta.bytedelta_decode, encoded, es, buggy)
    np.testing.assert_array_equal(decoded, ref_bytedelta_decode(encoded, es, buggy))
    np.testing.assert_array_equal(decoded, data)


def test_buggy_bytedelta_restarts_at_last_multiple_of_16():
    data = np.full(40, 7, np.uint8)  # one channel of 40 bytes: restart at index 32
    enc = run(_delta.bytedelta_encode, data, 1, True)
    assert enc[0] == 7 and enc[32] == 7 and enc[1:32].sum() == 0 and enc[33:].sum() == 0


@given(st.sampled_from([1, 2, 4, 8]), st.integers(0, 64), st.binary(min_size=0, max_size=512))
def test_zero_low_bits(width, zeroed, raw):
    zeroed = min(zeroed, 8 * width)
    buf = np.frombuffer(raw[: len(raw) // width * width], np.uint8).copy()
    words = buf.view({1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}[width]).copy()
    _shuffle.zero_low_bits(buf, width, zeroed)
    mask = (2 ** (8 * width) - 1) ^ (2**zeroed - 1)
    expected = np.array([int(w) & mask for w in words], words.dtype)
    np.testing.assert_array_equal(buf.view(words.dtype), expected)


@pytest.mark.parametrize(
    "kernel",
    [
        _shuffle.shuffle,
        _shuffle.unshuffle,
        _shuffle.bitshuffle,
        _shuffle.bitunshuffle,
        _delta.bytedelta_decode,
    ],
)
def test_kernels_refuse_mismatched_buffers(kernel):
    with pytest.raises(ValueError, match="destination"):
        kernel(np.zeros(16, np.uint8), np.zeros(15, np.uint8), 4)
    with pytest.raises(ValueError, match="element size"):
        kernel(np.zeros(16, np.uint8), np.zeros(16, np.uint8), 0)


def test_kernels_refuse_read_only_destination():
    with pytest.raises(BufferError, match="not writable"):
        _shuffle.unshuffle(np.zeros(16, np.uint8), bytes(16), 4)


@settings(max_examples=20)
@given(st.integers(1, 300))
def test_large_blocks_round_trip(es):
    data = np.random.default_rng(es).integers(0, 256, 1 << 16, dtype=np.uint8)
    for fwd, inv in (
        (_shuffle.shuffle, _shuffle.unshuffle),
        (_shuffle.bitshuffle, _shuffle.bitunshuffle),
    ):
        np.testing.assert_array_equal(run(inv, run(fwd, data, es), es), data)
