"""``_scatter.scatter_blocks``: a decoded chunk's blocks copied to an array region in C, against
numpy doing the same from the chunk rebuilt as an array; and its checks."""

from __future__ import annotations

import numpy as np
import pytest

from b2store.nd import _scatter
from b2store.nd.geometry import array_to_chunk, blocks_per_chunk, blocks_touched

CASES = [
    ((10,), (4,), "<f8"),
    ((7, 9), (3, 4), "<i2"),
    ((6, 5, 8), (2, 5, 3), "<f4"),
    ((4, 4, 4, 4), (2, 3, 4, 1), "u1"),
    ((5, 6), (5, 6), "V3"),
]


def _chunk(chunkshape, blockshape, dtype, rng):
    arr = rng.integers(0, 256, (*chunkshape, np.dtype(dtype).itemsize), np.uint8)
    arr = arr.view(dtype).reshape(chunkshape)
    return arr, array_to_chunk(arr, chunkshape, blockshape).view(np.uint8)


@pytest.mark.parametrize("chunkshape, blockshape, dtype", CASES)
def test_every_region_lands_as_numpy_puts_it(chunkshape, blockshape, dtype):
    rng = np.random.default_rng(len(chunkshape))
    arr, buf = _chunk(chunkshape, blockshape, dtype, rng)
    for _ in range(40):
        lo = [int(rng.integers(0, c)) for c in chunkshape]
        hi = [int(rng.integers(a + 1, c + 1)) for a, c in zip(lo, chunkshape)]
        region = tuple(slice(a, b) for a, b in zip(lo, hi))
        wanted = blocks_touched(list(zip(lo, hi)), chunkshape, blockshape)
        # Into a contiguous array, and into a strided view of a larger one.
        out = np.zeros(arr[region].shape, arr.dtype)
        _scatter.scatter_blocks(buf, 0, np.asarray(wanted, np.int64), chunkshape, blockshape,
                           lo, hi, out)  # fmt: skip
        assert out.tobytes() == np.ascontiguousarray(arr[region]).tobytes()
        big = np.zeros(tuple(2 * n + 1 for n in out.shape), arr.dtype)
        view = big[tuple(slice(1, None, 2) for _ in out.shape)]
        _scatter.scatter_blocks(buf, 0, np.asarray(wanted, np.int64), chunkshape, blockshape,
                           lo, hi, view)  # fmt: skip
        assert view.tobytes() == out.tobytes()
        assert not any(big[tuple(slice(0, None, 2) for _ in out.shape)].tobytes())


def test_blocks_from_a_base_and_the_checks():
    chunkshape, blockshape = (8, 6), (2, 3)
    arr, buf = _chunk(chunkshape, blockshape, "<i4", np.random.default_rng(1))
    block_bytes = 2 * 3 * 4
    nblocks = int(np.prod(blocks_per_chunk(chunkshape, blockshape)))
    # Blocks 4 and 5 alone, from a buffer that starts at block 4.
    out = np.zeros((2, 6), "<i4")
    _scatter.scatter_blocks(buf[4 * block_bytes : 6 * block_bytes], 4, np.array([4, 5], np.int64),
                       chunkshape, blockshape, [4, 0], [6, 6], out)  # fmt: skip
    assert (out == arr[4:6]).all()
    args = (chunkshape, blockshape, [0, 0], [2, 6], np.zeros((2, 6), "<i4"))
    with pytest.raises(ValueError, match="not in the buffer"):
        _scatter.scatter_blocks(buf[:block_bytes], 0, np.array([1], np.int64), *args)
    with pytest.raises(ValueError, match="not in the buffer"):
        _scatter.scatter_blocks(buf, 0, np.array([nblocks], np.int64), *args)
    with pytest.raises(ValueError, match="not in the buffer"):
        _scatter.scatter_blocks(buf, 1, np.array([0], np.int64), *args)
    with pytest.raises(ValueError, match="items along"):
        _scatter.scatter_blocks(buf, 0, np.array([0], np.int64), chunkshape, blockshape, [0, 0],
                           [2, 6], np.zeros((2, 5), "<i4"))  # fmt: skip
    with pytest.raises(ValueError, match="region"):
        _scatter.scatter_blocks(buf, 0, np.array([0], np.int64), chunkshape, blockshape, [0, 0],
                           [9, 6], np.zeros((9, 6), "<i4"))  # fmt: skip
    with pytest.raises(ValueError, match="read-only"):
        _scatter.scatter_blocks(buf, 0, np.array([0], np.int64), *args[:4],
                           np.frombuffer(bytes(48), "<i4").reshape(2, 6))  # fmt: skip
