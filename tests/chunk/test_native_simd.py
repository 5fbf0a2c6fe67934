"""The AVX2 and SSE2 filter kernels give exactly what the scalar loops give."""

import numpy as np
import pytest

from b2store import _shuffle
from b2store.chunk import _delta

LEVELS = [lvl for lvl in (1, 2) if lvl <= _shuffle.simd_level()]
# Item counts around the vector widths (16 and 32 items, 128 and 256 groups of 8).
COUNTS = [0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1000, 2049, 4103]


@pytest.fixture
def at_level():
    before = _shuffle.simd_level()

    def use(level: int) -> None:
        _shuffle.set_simd_level(level)
        assert _shuffle.simd_level() == level

    yield use
    _shuffle.set_simd_level(before)


def _run(kernel, src: np.ndarray, es: int) -> np.ndarray:
    dst = np.full(len(src), 0xA5, np.uint8)
    kernel(src, dst, es)
    return dst


def _reference_shuffle(src: np.ndarray, es: int) -> np.ndarray:
    n = len(src) // es
    body = src[: n * es].reshape(n, es).T.ravel()
    return np.concatenate([body, src[n * es :]])


@pytest.mark.skipif(not LEVELS, reason="no SIMD path on this CPU/build to compare")
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("es", range(1, 33))
def test_simd_kernels_match_scalar(at_level, level, es):
    rng = np.random.default_rng(1000 * level + es)
    for count in COUNTS:
        # Odd byte lengths too: a tail shorter than one item.
        size = count * es + (count % es if es > 1 else 0)
        src = rng.integers(0, 256, size, dtype=np.uint8)
        at_level(0)
        expected = {k: _run(getattr(_shuffle, k), src, es) for k in _KERNELS}
        at_level(level)
        for k in _KERNELS:
            got = _run(getattr(_shuffle, k), src, es)
            assert np.array_equal(got, expected[k]), (k, es, count)
        assert np.array_equal(expected["shuffle"], _reference_shuffle(src, es))
        assert np.array_equal(_run(_shuffle.unshuffle, expected["shuffle"], es), src)
        assert np.array_equal(_run(_shuffle.bitunshuffle, expected["bitshuffle"], es), src)


_KERNELS = ("shuffle", "unshuffle", "bitshuffle", "bitunshuffle")


@pytest.mark.skipif(not LEVELS, reason="no SIMD path on this CPU/build to compare")
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("buggy", [False, True])
@pytest.mark.parametrize("es", [1, 2, 3, 4, 8, 16])
def test_bytedelta_vectors_match_scalar(at_level, level, buggy, es):
    # The running sums carry from one 16-byte vector to the next, and the flawed variant
    # restarts at the last multiple of 16 of each channel: lengths around both.
    rng = np.random.default_rng(77 + es)
    for count in COUNTS:
        size = count * es + (count % es if es > 1 else 0)
        src = rng.integers(0, 256, size, dtype=np.uint8)
        at_level(0)
        enc = np.full(size, 0xA5, np.uint8)
        _delta.bytedelta_encode(src, enc, es, buggy)
        dec = np.full(size, 0xA5, np.uint8)
        _delta.bytedelta_decode(enc, dec, es, buggy)
        assert np.array_equal(dec, src)
        at_level(level)
        got = np.full(size, 0x5A, np.uint8)
        _delta.bytedelta_encode(src, got, es, buggy)
        assert np.array_equal(got, enc), (es, count)
        _delta.bytedelta_decode(enc, got, es, buggy)
        assert np.array_equal(got, src), (es, count)
        # In place, as a filter pipeline may run it.
        inplace = enc.copy()
        _delta.bytedelta_decode(inplace, inplace, es, buggy)
        assert np.array_equal(inplace, src), (es, count)


def test_set_simd_level_clamps(at_level):
    best = _shuffle.simd_level()
    assert _shuffle.set_simd_level(99) == best
    assert _shuffle.simd_level() == best
    _shuffle.set_simd_level(-3)
    assert _shuffle.simd_level() == 0


@pytest.mark.parametrize("n", [1, 2, 31, 32, 33, 64, 100, 4097])
def test_is_run_finds_the_first_differing_byte(n):
    for value in (0, 7, 255):
        buf = np.full(n, value, np.uint8)
        assert _shuffle.is_run(buf)
        for pos in {0, n // 2, n - 1}:
            if n > 1 and pos > 0:
                other = buf.copy()
                other[pos] ^= 1
                assert not _shuffle.is_run(other), (n, value, pos)
