"""Chunk and block geometry of a b2nd array, and the item layout inside a decoded chunk.

An array of ``shape`` is cut into chunks of ``chunkshape`` (a grid of
``ceil(shape / chunkshape)`` chunks, numbered in C order), and every chunk into blocks of
``blockshape``. A chunk is stored padded to ``extchunkshape`` (each dimension rounded up to a
multiple of the block dimension), so every chunk of an array has the same number of items,
edge chunks included. Inside a decoded chunk the blocks follow each other in C order over
the block grid ``extchunkshape / blockshape``, and each block holds its
``prod(blockshape)`` items in C order. Items outside the array (edge chunks) or outside
``chunkshape`` (the rounding to blocks) are padding: readers ignore them, writers write zeros.

A dimension of length 0 may have a chunk and block dimension of 0 (python-blosc2 writes
``chunks = blocks = shape`` for such arrays); such an array has no chunk at all. A 0-d array
has one chunk of one item.

Dtypes with a subarray shape (``np.dtype(("<i4", (2,)))``) follow NumPy's convention: the
item's dimensions trail the array's.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np

from ..errors import FormatError

__all__ = [
    "extchunkshape",
    "blocks_per_chunk",
    "chunk_nitems",
    "block_nitems",
    "chunk_grid",
    "nchunks",
    "chunk_coords",
    "chunk_region",
    "item_position",
    "chunk_to_array",
    "array_to_chunk",
    "blocks_touched",
]


def _dims(name: str, values: Sequence[int]) -> tuple[int, ...]:
    dims = tuple(int(v) for v in values)
    if any(d < 0 for d in dims):
        raise ValueError(f"{name} {dims} has a negative dimension")
    return dims


def _pair(chunkshape: Sequence[int], blockshape: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    # Every small read asks these of the same few shapes: checked once per pair of shapes.
    try:
        return _checked_pair(chunkshape, blockshape)
    except TypeError:  # lists or arrays: not hashable
        return _checked_pair(tuple(chunkshape), tuple(blockshape))


@functools.lru_cache(maxsize=256)
def _checked_pair(chunkshape, blockshape) -> tuple[tuple[int, ...], ...]:
    chunks = _dims("chunkshape", chunkshape)
    blocks = _dims("blockshape", blockshape)
    if len(chunks) != len(blocks):
        raise ValueError(f"chunkshape {chunks} and blockshape {blocks} differ in length")
    for c, b in zip(chunks, blocks):
        if b > c or (b == 0 and c != 0):
            raise ValueError(f"blockshape {blocks} does not fit chunkshape {chunks}")
    return chunks, blocks


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b) if b else 0


@functools.lru_cache(maxsize=256)
def _block_grid(chunks: tuple[int, ...], blocks: tuple[int, ...]) -> tuple[int, ...]:
    # Small reads ask for the block grid of the same few (checked) shapes again and again.
    return tuple(_ceil_div(c, b) for c, b in zip(chunks, blocks))


def extchunkshape(chunkshape: Sequence[int], blockshape: Sequence[int]) -> tuple[int, ...]:
    """Each chunk dimension rounded up to a multiple of the block dimension.

    >>> extchunkshape((4, 5), (2, 3))
    (4, 6)
    """
    chunks, blocks = _pair(chunkshape, blockshape)
    return tuple(_ceil_div(c, b) * b for c, b in zip(chunks, blocks))


def blocks_per_chunk(chunkshape: Sequence[int], blockshape: Sequence[int]) -> tuple[int, ...]:
    """The block grid of one chunk: ``extchunkshape / blockshape`` per dimension.

    >>> blocks_per_chunk((4, 5), (2, 3))
    (2, 2)
    """
    return _block_grid(*_pair(chunkshape, blockshape))


def chunk_nitems(chunkshape: Sequence[int], blockshape: Sequence[int]) -> int:
    """Items in one decoded chunk, padding included: ``prod(extchunkshape)`` (1 for 0-d).

    >>> chunk_nitems((4, 5), (2, 3))
    24
    """
    return math.prod(extchunkshape(chunkshape, blockshape))


def block_nitems(blockshape: Sequence[int]) -> int:
    """Items in one block: ``prod(blockshape)`` (1 for 0-d)."""
    return math.prod(_dims("blockshape", blockshape))


def chunk_grid(shape: Sequence[int], chunkshape: Sequence[int]) -> tuple[int, ...]:
    """Chunks per dimension: ``ceil(shape / chunkshape)`` (0 where the shape is 0).

    >>> chunk_grid((10, 7), (4, 5))
    (3, 2)
    """
    shp = _dims("shape", shape)
    chunks = _dims("chunkshape", chunkshape)
    if len(shp) != len(chunks):
        raise ValueError(f"shape {shp} and chunkshape {chunks} differ in length")
    if any(c == 0 and s != 0 for s, c in zip(shp, chunks)):
        raise ValueError(f"chunkshape {chunks} has a 0 where shape {shp} has not")
    return tuple(_ceil_div(s, c) for s, c in zip(shp, chunks))


def nchunks(shape: Sequence[int], chunkshape: Sequence[int]) -> int:
    """Number of chunks of the array: ``prod(chunk_grid)`` (1 for 0-d, 0 if a dimension is 0)."""
    return math.prod(chunk_grid(shape, chunkshape))


def chunk_coords(nchunk: int, shape: Sequence[int], chunkshape: Sequence[int]) -> tuple[int, ...]:
    """Grid coordinates of chunk number ``nchunk`` (chunks are numbered in C order).

    >>> chunk_coords(3, (10, 7), (4, 5))
    (1, 1)
    """
    grid = chunk_grid(shape, chunkshape)
    if not 0 <= nchunk < math.prod(grid):
        raise IndexError(f"chunk {nchunk} out of range for a grid of {grid}")
    coords = []
    for g in reversed(grid):
        nchunk, c = divmod(nchunk, g)
        coords.append(c)
    return tuple(reversed(coords))


def chunk_region(
    coords: Sequence[int], shape: Sequence[int], chunkshape: Sequence[int]
) -> tuple[slice, ...]:
    """The part of the array chunk ``coords`` holds, clipped to the shape.

    >>> chunk_region((2, 1), (10, 7), (4, 5))
    (slice(8, 10, None), slice(5, 7, None))
    """
    grid = chunk_grid(shape, chunkshape)
    if len(coords) != len(grid) or not all(0 <= c < g for c, g in zip(coords, grid)):
        raise IndexError(f"chunk {tuple(coords)} out of range for a grid of {grid}")
    return tuple(slice(c * n, min((c + 1) * n, s)) for c, n, s in zip(coords, chunkshape, shape))


def c_index(coords: Sequence[int], dims: Sequence[int]) -> int:
    """The C-order (row-major) position of ``coords`` in a grid of ``dims``: a chunk's number."""
    index = 0
    for c, d in zip(coords, dims):
        index = index * d + c
    return index


def item_position(
    index: Sequence[int],
    shape: Sequence[int],
    chunkshape: Sequence[int],
    blockshape: Sequence[int],
) -> tuple[int, int]:
    """Where array item ``index`` is stored: ``(chunk number, item offset in the decoded chunk)``.

    >>> item_position((1, 3), (10, 7), (4, 5), (2, 3))  # block (0, 1), item (1, 0) of it
    (0, 9)
    """
    grid = chunk_grid(shape, chunkshape)
    nblocks = blocks_per_chunk(chunkshape, blockshape)
    if len(index) != len(grid) or not all(0 <= i < s for i, s in zip(index, shape)):
        raise IndexError(f"index {tuple(index)} out of range for shape {tuple(shape)}")
    chunk = [i // c for i, c in zip(index, chunkshape)]
    inner = [i % c for i, c in zip(index, chunkshape)]
    block = [r // b for r, b in zip(inner, blockshape)]
    inblock = [r % b for r, b in zip(inner, blockshape)]
    offset = c_index(block, nblocks) * block_nitems(blockshape) + c_index(inblock, blockshape)
    return c_index(chunk, grid), offset


def _interleave(ndim: int) -> list[int]:
    # Axes (nb0, ..., nb{n-1}, b0, ..., b{n-1}) -> (nb0, b0, nb1, b1, ...).
    return [axis for i in range(ndim) for axis in (i, ndim + i)]


def chunk_to_array(buf, chunkshape: Sequence[int], blockshape: Sequence[int], dtype) -> np.ndarray:
    """The items of a decoded chunk as an array of shape ``extchunkshape``.

    ``buf`` is the decoded chunk: a 1-d array of ``dtype`` items or of bytes (uint8), or any
    bytes-like object. The result includes the padding; slice ``[:chunkshape]`` (or less, for
    edge chunks) to keep the array's items. It may share memory with ``buf``.

    >>> buf = np.array([0, 1, 2, 7, 8, 9, 3, 4, 0, 10, 11, 0], dtype="<i4")
    >>> chunk_to_array(buf, (2, 5), (2, 3), "<i4")
    array([[ 0,  1,  2,  3,  4,  0],
           [ 7,  8,  9, 10, 11,  0]], dtype=int32)
    """
    chunks, blocks = _pair(chunkshape, blockshape)
    dtype = np.dtype(dtype)
    base, item_shape = (dtype.base, dtype.shape) if dtype.subdtype is not None else (dtype, ())
    ext = extchunkshape(chunks, blocks)
    nitems = math.prod(ext)
    if not isinstance(buf, np.ndarray):
        buf = np.frombuffer(buf, dtype=np.uint8)
    if buf.ndim != 1:
        raise ValueError(f"a decoded chunk is a 1-d buffer, not of shape {buf.shape}")
    if buf.nbytes != nitems * dtype.itemsize:
        raise FormatError(
            "chunk nbytes",
            f"{nitems} items of {dtype.itemsize} bytes = {nitems * dtype.itemsize}",
            buf.nbytes,
        )
    if buf.dtype != base or item_shape:
        buf = np.ascontiguousarray(buf).view(np.uint8).view(base)
    items = buf.reshape((nitems, *item_shape))
    nblocks = blocks_per_chunk(chunks, blocks)
    ndim = len(chunks)
    grid = items.reshape((*nblocks, *blocks, *item_shape))
    tail = list(range(2 * ndim, 2 * ndim + len(item_shape)))
    return grid.transpose(_interleave(ndim) + tail).reshape((*ext, *item_shape))


def array_to_chunk(
    arr: np.ndarray, chunkshape: Sequence[int], blockshape: Sequence[int]
) -> np.ndarray:
    """The decoded chunk holding ``arr``: a new 1-d array of ``arr.dtype``, zero padded.

    ``arr`` is the chunk's part of the array: ``chunkshape`` or smaller (edge chunks), in the
    chunk's first items; its dimensions beyond ``len(chunkshape)`` (a subarray dtype's) stay
    inside each item. Everything else is zero.

    >>> array_to_chunk(np.arange(10, dtype="<i4").reshape(2, 5), (2, 5), (2, 3))
    array([0, 1, 2, 5, 6, 7, 3, 4, 0, 8, 9, 0], dtype=int32)
    """
    chunks, blocks = _pair(chunkshape, blockshape)
    arr = np.asarray(arr)
    ndim = len(chunks)
    if arr.ndim < ndim or any(a > c for a, c in zip(arr.shape, chunks)):
        raise ValueError(f"an array of shape {arr.shape} does not fit chunkshape {chunks}")
    item_shape = arr.shape[ndim:]
    ext = extchunkshape(chunks, blocks)
    padded = np.zeros((*ext, *item_shape), dtype=arr.dtype)
    padded[tuple(slice(0, n) for n in arr.shape[:ndim])] = arr
    nblocks = blocks_per_chunk(chunks, blocks)
    split_shape = [d for nb, b in zip(nblocks, blocks) for d in (nb, b)] + list(item_shape)
    split = padded.reshape(split_shape)
    order = [2 * i for i in range(ndim)] + [2 * i + 1 for i in range(ndim)]
    order += list(range(2 * ndim, 2 * ndim + len(item_shape)))
    flat = split.transpose(order).reshape((-1, *item_shape))
    return np.ascontiguousarray(flat.reshape(-1))


def blocks_touched(
    chunk_slices: Sequence[tuple[int, int]],
    chunkshape: Sequence[int],
    blockshape: Sequence[int],
) -> list[int]:
    """The blocks (C-order numbers within the chunk) a selection inside one chunk needs.

    ``chunk_slices`` gives, per dimension, ``(start, stop)`` with
    ``0 <= start <= stop <= chunkshape``. An empty selection touches no block; a 0-d chunk's
    ``()`` touches its one block.

    >>> blocks_touched([(1, 3), (4, 5)], (4, 5), (2, 3))
    [1, 3]
    """
    chunks, blocks = _pair(chunkshape, blockshape)
    if len(chunk_slices) != len(chunks):
        raise ValueError(f"{len(chunk_slices)} (start, stop) pairs for a {len(chunks)}-d chunk")
    ranges = []
    for (start, stop), c, b in zip(chunk_slices, chunks, blocks):
        if not 0 <= start <= stop <= c:
            raise ValueError(f"selection ({start}, {stop}) outside a chunk dimension of {c}")
        if start == stop:
            return []
        ranges.append(range(start // b, _ceil_div(stop, b)))
    nblocks = _block_grid(chunks, blocks)
    return [c_index(coords, nblocks) for coords in itertools.product(*ranges)]
