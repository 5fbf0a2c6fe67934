"""Chunk/block geometry: the item layout inside a decoded chunk, checked against python-blosc2."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from b2store.errors import FormatError
from b2store.nd.geometry import (
    array_to_chunk,
    block_nitems,
    blocks_per_chunk,
    blocks_touched,
    chunk_coords,
    chunk_grid,
    chunk_nitems,
    chunk_region,
    chunk_to_array,
    extchunkshape,
    item_position,
    nchunks,
)

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the reference chunks")

P = 0  # padding, as python-blosc2 writes it

# notes 5.2: 10x7 int32 arange, chunks (4, 5), blocks (2, 3)
EXAMPLE = np.arange(70, dtype="<i4").reshape(10, 7)
EXAMPLE_CHUNK0 = [
    0,
    1,
    2,
    7,
    8,
    9,
    3,
    4,
    P,
    10,
    11,
    P,
    14,
    15,
    16,
    21,
    22,
    23,
    17,
    18,
    P,
    24,
    25,
    P,
]


def test_notes_example():
    chunks, blocks = (4, 5), (2, 3)
    assert extchunkshape(chunks, blocks) == (4, 6)
    assert blocks_per_chunk(chunks, blocks) == (2, 2)
    assert chunk_nitems(chunks, blocks) == 24 and block_nitems(blocks) == 6
    assert chunk_grid((10, 7), chunks) == (3, 2) and nchunks((10, 7), chunks) == 6
    assert array_to_chunk(EXAMPLE[:4, :5], chunks, blocks).tolist() == EXAMPLE_CHUNK0
    back = chunk_to_array(np.array(EXAMPLE_CHUNK0, dtype="<i4"), chunks, blocks, "<i4")
    assert back.shape == (4, 6)
    assert np.array_equal(back[:, :5], EXAMPLE[:4, :5]) and not back[:, 5].any()


def test_notes_example_against_python_blosc2():
    chunks, blocks = (4, 5), (2, 3)
    array = blosc2.asarray(EXAMPLE, chunks=chunks, blocks=blocks)
    schunk = array.schunk
    assert schunk.nchunks == 6
    raw0 = np.frombuffer(schunk.decompress_chunk(0), dtype="<i4")
    assert raw0.tolist() == EXAMPLE_CHUNK0
    for n in range(schunk.nchunks):
        raw = np.frombuffer(schunk.decompress_chunk(n), dtype="<i4")
        region = chunk_region(chunk_coords(n, (10, 7), chunks), (10, 7), chunks)
        assert np.array_equal(raw, array_to_chunk(EXAMPLE[region], chunks, blocks))
        # every item is where item_position says
        for index in itertools.product(*(range(s.start, s.stop) for s in region)):
            assert item_position(index, (10, 7), chunks, blocks)[0] == n
            assert raw[item_position(index, (10, 7), chunks, blocks)[1]] == EXAMPLE[index]


def test_zero_dimensional():
    assert extchunkshape((), ()) == () and blocks_per_chunk((), ()) == ()
    assert chunk_nitems((), ()) == 1 and block_nitems(()) == 1
    assert chunk_grid((), ()) == () and nchunks((), ()) == 1
    assert chunk_coords(0, (), ()) == () and chunk_region((), (), ()) == ()
    assert item_position((), (), (), ()) == (0, 0)
    buf = array_to_chunk(np.array(2.5), (), ())
    assert buf.shape == (1,) and buf[0] == 2.5
    back = chunk_to_array(buf, (), (), "<f8")
    assert back.shape == () and back == 2.5
    assert blocks_touched((), (), ()) == [0]
    array = blosc2.asarray(np.array(2.5))
    assert array.schunk.nchunks == 1
    assert chunk_to_array(array.schunk.decompress_chunk(0), (), (), "<f8") == 2.5


def test_zeros_in_shape():
    assert chunk_grid((0, 5), (0, 5)) == (0, 1) and nchunks((0, 5), (0, 5)) == 0
    assert chunk_grid((0, 5), (2, 3)) == (0, 2) and nchunks((5, 0), (2, 3)) == 0
    assert extchunkshape((0, 5), (0, 5)) == (0, 5) and chunk_nitems((0, 5), (0, 5)) == 0
    assert blocks_per_chunk((0, 5), (0, 5)) == (0, 1)
    buf = array_to_chunk(np.zeros((0, 5), dtype="<i4"), (0, 5), (0, 5))
    assert buf.shape == (0,) and buf.dtype == np.dtype("<i4")
    assert chunk_to_array(buf, (0, 5), (0, 5), "<i4").shape == (0, 5)
    assert chunk_to_array(b"", (0, 5), (0, 5), "<i4").shape == (0, 5)
    assert blocks_touched([(0, 0), (0, 5)], (0, 5), (0, 5)) == []
    assert blocks_touched([(0, 0), (0, 3)], (2, 3), (1, 2)) == []
    assert blosc2.zeros((0, 5), dtype="<i4").schunk.nchunks == 0
    with pytest.raises(IndexError, match="chunk 0 out of range"):
        chunk_coords(0, (0, 5), (0, 5))


def test_bad_arguments():
    with pytest.raises(ValueError, match="differ in length"):
        extchunkshape((4, 5), (2,))
    with pytest.raises(ValueError, match=re.escape("blockshape (5,) does not fit chunkshape (4,)")):
        extchunkshape((4,), (5,))  # block larger than chunk
    with pytest.raises(ValueError, match=re.escape("blockshape (0,) does not fit chunkshape (4,)")):
        extchunkshape((4,), (0,))
    with pytest.raises(ValueError, match=re.escape("chunkshape (0,) has a 0")):
        chunk_grid((4,), (0,))
    with pytest.raises(ValueError, match=re.escape("shape (5, 5) does not fit chunkshape (4, 5)")):
        array_to_chunk(np.zeros((5, 5)), (4, 5), (2, 3))
    with pytest.raises(ValueError, match=re.escape("selection (0, 6) outside a chunk")):
        blocks_touched([(0, 6)], (5,), (2,))
    with pytest.raises(ValueError, match=re.escape("selection (3, 2) outside a chunk")):
        blocks_touched([(3, 2)], (5,), (2,))
    with pytest.raises(IndexError, match="chunk 6 out of range"):
        chunk_coords(6, (10, 7), (4, 5))
    with pytest.raises(IndexError, match=re.escape("index (10, 0) out of range")):
        item_position((10, 0), (10, 7), (4, 5), (2, 3))
    # a decoded chunk of the wrong size
    with pytest.raises(FormatError, match="chunk nbytes: expected 24 items .* found 92") as err:
        chunk_to_array(np.zeros(23, dtype="<i4"), (4, 5), (2, 3), "<i4")
    assert err.value.field == "chunk nbytes"
    with pytest.raises(FormatError, match="chunk nbytes: expected 24 items .* found 95"):
        chunk_to_array(np.zeros(95, dtype=np.uint8), (4, 5), (2, 3), "<i4")


def test_buffer_kinds():
    buf = array_to_chunk(EXAMPLE[:4, :5], (4, 5), (2, 3))
    for raw in (buf, buf.view(np.uint8), buf.tobytes(), bytearray(buf.tobytes()), memoryview(buf)):
        got = chunk_to_array(raw, (4, 5), (2, 3), "<i4")
        assert got.dtype == np.dtype("<i4") and np.array_equal(got[:, :5], EXAMPLE[:4, :5])
    big = chunk_to_array(buf.view(np.uint8), (4, 5), (2, 3), ">i4")
    assert big.dtype == np.dtype(">i4") and big[0, 1] == 1 << 24


@pytest.mark.parametrize(
    "dtype",
    [
        "<f8",
        ">i4",
        "|u1",
        "|b1",
        "<U5",
        "|S3",
        "<M8[s]",
        "<c16",
        [("a", "<i4"), ("b", "<f8", (2,)), ("c", "S3")],
        [("n", [("x", "<f4"), ("y", ">i2")])],
    ],
    ids=str,
)
def test_dtypes_against_python_blosc2(dtype):
    dtype = np.dtype(dtype)
    shape, chunks, blocks = (9, 7), (4, 5), (3, 2)
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, 63 * dtype.itemsize, dtype=np.uint8)
    x = np.frombuffer((raw % 2 if dtype.kind == "b" else raw).tobytes(), dtype).reshape(shape)
    if dtype.kind == "U":
        x = np.array([f"s{i}" for i in range(63)], dtype).reshape(shape)
    array = blosc2.asarray(x, chunks=chunks, blocks=blocks)
    for n in range(array.schunk.nchunks):
        raw = array.schunk.decompress_chunk(n)
        region = chunk_region(chunk_coords(n, shape, chunks), shape, chunks)
        mine = array_to_chunk(x[region], chunks, blocks)
        assert mine.dtype == dtype and mine.tobytes() == raw
        got = chunk_to_array(raw, chunks, blocks, array.dtype)
        inner = tuple(slice(0, s.stop - s.start) for s in region)
        assert got[inner].tobytes() == x[region].tobytes()


def test_subarray_dtype():
    """An item with a shape: its dimensions trail the array's, as NumPy does."""
    dtype = np.dtype(("<i4", (2,)))
    x = np.arange(5 * 3 * 2, dtype="<i4").reshape(5, 3, 2)
    buf = array_to_chunk(x[:4], (4, 3), (3, 2))
    assert buf.dtype == np.dtype("<i4") and buf.shape == (6 * 4 * 2,)
    got = chunk_to_array(buf, (4, 3), (3, 2), dtype)
    assert got.shape == (6, 4, 2) and np.array_equal(got[:4, :3], x[:4])
    array = blosc2.zeros((5, 3), dtype=dtype, chunks=(4, 3), blocks=(3, 2))
    assert len(array.schunk.decompress_chunk(0)) == buf.nbytes


@st.composite
def geometries(draw, max_ndim=4, max_len=9):
    ndim = draw(st.integers(0, max_ndim))
    chunks = tuple(draw(st.integers(1, max_len)) for _ in range(ndim))
    blocks = tuple(draw(st.integers(1, c)) for c in chunks)
    return chunks, blocks


FAST = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


@FAST
@given(data=st.data(), geometry=geometries())
def test_round_trip(data, geometry):
    chunks, blocks = geometry
    part = tuple(data.draw(st.integers(0, c)) for c in chunks)  # edge chunks are smaller
    x = np.arange(1, int(np.prod(part)) + 1, dtype="<i8").reshape(part)
    buf = array_to_chunk(x, chunks, blocks)
    assert buf.shape == (chunk_nitems(chunks, blocks),) and buf.flags.c_contiguous
    got = chunk_to_array(buf, chunks, blocks, "<i8")
    assert got.shape == extchunkshape(chunks, blocks)
    inner = tuple(slice(0, n) for n in part)
    assert np.array_equal(got[inner], x)
    padding = np.ones(got.shape, bool)
    padding[inner] = False
    assert not got[padding].any()
    # every item sits where item_position (with chunks as the shape) says
    if all(part):
        for index in itertools.islice(np.ndindex(*part), 50):
            assert buf[item_position(index, part, chunks, blocks)[1]] == x[index]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), geometry=geometries(max_ndim=4, max_len=7))
def test_layout_is_python_blosc2s(data, geometry):
    chunks, blocks = geometry
    shape = tuple(data.draw(st.integers(1, 2 * c + 1)) for c in chunks)
    x = np.arange(1, int(np.prod(shape)) + 1, dtype="<i4").reshape(shape)
    array = blosc2.asarray(x, chunks=chunks, blocks=blocks)
    schunk = array.schunk
    assert schunk.nchunks == nchunks(shape, chunks)
    for n in range(schunk.nchunks):
        raw = schunk.decompress_chunk(n)
        region = chunk_region(chunk_coords(n, shape, chunks), shape, chunks)
        assert array_to_chunk(x[region], chunks, blocks).tobytes() == raw
        got = chunk_to_array(np.frombuffer(raw, np.uint8), chunks, blocks, "<i4")
        inner = tuple(slice(0, s.stop - s.start) for s in region)
        assert np.array_equal(got[inner], x[region])


def brute_force_blocks(selection, chunks, blocks):
    nblocks = blocks_per_chunk(chunks, blocks)
    found = set()
    for index in itertools.product(*(range(a, b) for a, b in selection)):
        coords = tuple(i // b for i, b in zip(index, blocks))
        found.add(int(np.ravel_multi_index(coords, nblocks)) if coords else 0)
    return sorted(found)


@FAST
@given(data=st.data(), geometry=geometries(max_ndim=4, max_len=8))
def test_blocks_touched(data, geometry):
    chunks, blocks = geometry
    selection = []
    for c in chunks:
        start = data.draw(st.integers(0, c))
        selection.append((start, data.draw(st.integers(start, c))))
    touched = blocks_touched(selection, chunks, blocks)
    assert touched == brute_force_blocks(selection, chunks, blocks)
    # the blocks are exactly the ones holding the selected items of the decoded chunk
    part = chunks
    x = np.zeros(part, dtype=np.uint8)
    x[tuple(slice(a, b) for a, b in selection)] = 1
    per_block = array_to_chunk(x, chunks, blocks).reshape(-1, block_nitems(blocks))
    assert touched == [int(i) for i in np.flatnonzero(per_block.any(axis=1))]


def test_blocks_touched_example():
    assert blocks_touched([(0, 4), (0, 5)], (4, 5), (2, 3)) == [0, 1, 2, 3]
    assert blocks_touched([(1, 3), (4, 5)], (4, 5), (2, 3)) == [1, 3]
    assert blocks_touched([(2, 3), (0, 3)], (4, 5), (2, 3)) == [2]
    assert blocks_touched([(0, 1), (2, 4)], (4, 5), (2, 3)) == [0, 1]


def test_chunk_region_and_coords():
    shape, chunks = (10, 7), (4, 5)
    regions = [chunk_region(chunk_coords(n, shape, chunks), shape, chunks) for n in range(6)]
    assert regions[0] == (slice(0, 4), slice(0, 5))
    assert regions[5] == (slice(8, 10), slice(5, 7))
    covered = np.zeros(shape, int)
    for region in regions:
        covered[region] += 1
    assert (covered == 1).all()
