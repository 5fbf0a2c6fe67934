"""One b2nd chunk: encoded and decoded as python-blosc2 does (block order, padding, edge crops),
and selections that decode only the blocks they touch."""

import ast
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import b2store.nd.array
from b2store.chunk.decoder import ChunkDecoder, decode_chunk
from b2store.errors import FormatError
from b2store.frame.schunk import SChunk
from b2store.nd.chunks import (
    cparams_for,
    decode_chunk_array,
    decode_selection,
    encode_chunk_array,
)
from b2store.nd.geometry import chunk_grid, chunk_nitems, chunk_region

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")

SHAPE, CHUNKS, BLOCKS = (23, 17), (10, 8), (4, 3)


def data(shape=SHAPE, dtype="<i4"):
    return np.arange(math.prod(shape), dtype=dtype).reshape(shape) * 3 + 1


def test_python_blosc2_chunks_decode_whole_and_cropped():
    x = data()
    arr = blosc2.asarray(x, chunks=CHUNKS, blocks=BLOCKS)
    with SChunk.open(arr.to_cframe()) as schunk:
        for n, coords in enumerate(np.ndindex(*chunk_grid(SHAPE, CHUNKS))):
            got = decode_chunk_array(schunk.get_chunk(n), CHUNKS, BLOCKS, x.dtype)
            assert got.shape == CHUNKS and got.flags.c_contiguous
            region = chunk_region(coords, SHAPE, CHUNKS)
            edge = tuple(slice(0, r.stop - r.start) for r in region)
            np.testing.assert_array_equal(got[edge], x[region])


@pytest.mark.parametrize("codec,filters", [("zstd", ["shuffle"]), ("lz4", ["delta"])])
def test_encoded_edge_chunks_are_what_python_blosc2_stores(codec, filters):
    """Padded edge chunks decode, in c-blosc2, to the bytes of python-blosc2's own chunks."""
    x = data()
    arr = blosc2.asarray(x, chunks=CHUNKS, blocks=BLOCKS)
    params = cparams_for(x.dtype, BLOCKS, codec=codec, filters=filters)
    for n, coords in enumerate(np.ndindex(*chunk_grid(SHAPE, CHUNKS))):
        region = chunk_region(coords, SHAPE, CHUNKS)
        chunk = encode_chunk_array(x[region], CHUNKS, BLOCKS, params)
        assert blosc2.decompress2(chunk) == arr.schunk.decompress_chunk(n)
        np.testing.assert_array_equal(
            decode_chunk_array(chunk, CHUNKS, BLOCKS, x.dtype)[: x[region].shape[0]][
                :, : x[region].shape[1]
            ],
            x[region],
        )


def test_constant_chunks_are_special():
    params = cparams_for(np.dtype("<f8"), (2, 2))
    # An edge chunk of zeros pads with zeros: still one value; 2.5 fills a whole chunk.
    for value, shape in ((0.0, (3, 4)), (2.5, (4, 4))):
        chunk = encode_chunk_array(np.full(shape, value), (4, 4), (2, 2), params)
        assert ChunkDecoder(chunk).special and len(chunk) <= 32 + 8
        got = decode_chunk_array(chunk, (4, 4), (2, 2), "<f8")
        np.testing.assert_array_equal(got[:3], np.full((3, 4), value))
    edge = encode_chunk_array(np.full((3, 4), 2.5), (4, 4), (2, 2), params)
    assert not ChunkDecoder(edge).special  # 2.5 and the zero padding
    np.testing.assert_array_equal(decode_chunk_array(edge, (4, 4), (2, 2), "<f8")[3], 0)


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        ("i1", -3),
        ("<i2", 300),
        ("<f4", np.nan),
        ("<f8", 2.5),
        ("<U2", "ab"),  # 8 bytes, UCS4
        ("<c16", 1 - 2j),
        ([("a", "u1"), ("b", "<i2")], (1, -2)),  # 3 bytes: compared as repeating bytes
    ],
    ids=str,
)
def test_one_value_is_special_whatever_the_item_size(dtype, value):
    dtype = np.dtype(dtype)
    params = cparams_for(dtype, (8, 8))
    x = np.empty((16, 16), dtype)
    x[...] = np.array(value, dtype)
    chunk = encode_chunk_array(x, (16, 16), (8, 8), params, dtype=dtype)
    assert ChunkDecoder(chunk).special and len(chunk) <= 32 + dtype.itemsize
    got = decode_chunk_array(chunk, (16, 16), (8, 8), dtype)
    assert got.tobytes() == x.tobytes()
    # One item in the middle differs, by a byte the first and last items do not show.
    y = x.copy()
    y.view(np.uint8).reshape(16, 16, -1)[7, 9, -1] ^= 1
    other = encode_chunk_array(y, (16, 16), (8, 8), params, dtype=dtype)
    assert not ChunkDecoder(other).special
    assert decode_chunk_array(other, (16, 16), (8, 8), dtype).tobytes() == y.tobytes()


def test_zero_and_negative_zero_are_two_values():
    x = np.zeros((4, 4))
    x[2, 1] = -0.0
    chunk = encode_chunk_array(x, (4, 4), (2, 2), cparams_for(x.dtype, (2, 2)))
    assert not ChunkDecoder(chunk).special
    assert decode_chunk_array(chunk, (4, 4), (2, 2), "<f8").tobytes() == x.tobytes()


def test_subarray_dtype_and_0d():
    dtype = np.dtype(("<i4", (2,)))
    x = np.arange(24, dtype="<i4").reshape(4, 3, 2)
    params = cparams_for(dtype, (3, 2))
    chunk = encode_chunk_array(x, (4, 3), (3, 2), params, dtype=dtype)
    assert decode_chunk(chunk).nbytes == chunk_nitems((4, 3), (3, 2)) * 8
    np.testing.assert_array_equal(decode_chunk_array(chunk, (4, 3), (3, 2), dtype), x)
    out = np.empty((2, 2), dtype)
    decode_selection(chunk, (4, 3), (3, 2), dtype, [slice(1, 4, 2), slice(0, 3, 2)], out)
    np.testing.assert_array_equal(out, x[1:4:2, 0:3:2])
    scalar = encode_chunk_array(np.array(7.5), (), (), cparams_for(np.dtype("<f8"), ()))
    assert decode_chunk_array(scalar, (), (), "<f8") == 7.5
    out = np.empty((), "<f8")
    decode_selection(scalar, (), (), "<f8", [], out)
    assert out == 7.5


class Fetch:
    """A chunk fetcher that records which blocks were asked for."""

    def __init__(self, chunk: bytes):
        self.chunk, self.calls = chunk, []

    def __call__(self, blocks):
        self.calls.append(blocks)
        return self.chunk


@pytest.mark.parametrize("filters", [["shuffle"], ["delta"], ["bitshuffle"]])
def test_selection_fetches_only_the_blocks_it_touches(filters):
    x = data((40, 30))
    chunk = encode_chunk_array(x, (40, 30), (8, 6), cparams_for(x.dtype, (8, 6), filters=filters))
    fetch = Fetch(chunk)
    out = np.empty((3, 2), x.dtype)
    decode_selection(fetch, (40, 30), (8, 6), x.dtype, [slice(9, 12), slice(13, 15)], out)
    np.testing.assert_array_equal(out, x[9:12, 13:15])
    # Block (1, 2) only: adding block 0 for DELTA is the fetcher's job (SChunk plans it).
    assert fetch.calls == [[7]]
    fetch = Fetch(chunk)
    out = np.empty((40, 30), x.dtype)
    decode_selection(fetch, (40, 30), (8, 6), x.dtype, [slice(None)] * 2, out)
    np.testing.assert_array_equal(out, x)
    assert fetch.calls == [None]


def ascending(n):
    return st.tuples(st.integers(0, n), st.integers(0, n), st.integers(1, 4)).map(
        lambda t: slice(min(t[:2]), max(t[:2]), t[2])
    )


@given(sel=st.tuples(ascending(10), ascending(8)), filters=st.sampled_from([[], ["delta"]]))
def test_selections_match_numpy(sel, filters):
    x = data((10, 8), "<f8")
    chunk = encode_chunk_array(x[:9, :7], (10, 8), (4, 3), cparams_for(x.dtype, (4, 3)))
    full = x.copy()
    full[9:], full[:, 7:] = 0, 0  # the edge chunk's padding is zeros
    expected = full[sel]
    out = np.full(expected.shape, -1.0)
    decode_selection(chunk, (10, 8), (4, 3), x.dtype, list(sel), out)
    np.testing.assert_array_equal(out, expected)


def test_errors():
    x = data((8, 6))
    chunk = encode_chunk_array(x, (8, 6), (4, 3), cparams_for(x.dtype, (4, 3)))
    with pytest.raises(FormatError, match="chunk 5 nbytes"):
        decode_selection(chunk, (8, 7), (4, 3), x.dtype, [slice(0, 1)] * 2, None, label="chunk 5")
    with pytest.raises(FormatError, match="chunk nbytes"):
        decode_chunk_array(chunk, (8, 6), (4, 3), "<f8")
    with pytest.raises(ValueError, match="ascending"):
        decode_selection(chunk, (8, 6), (4, 3), x.dtype, [slice(5, 0, -1)] * 2, None)
    with pytest.raises(ValueError, match="outside"):
        decode_selection(chunk, (8, 6), (4, 3), x.dtype, [range(0, 9), range(2)], None)
    with pytest.raises(ValueError, match="does not fit"):
        encode_chunk_array(np.zeros((9, 6)), (8, 6), (4, 3), cparams_for(x.dtype, (4, 3)))


def test_array_does_not_import_create():
    """create builds arrays, so it imports array; array encodes through nd/chunks.py."""
    tree = ast.parse(open(b2store.nd.array.__file__).read())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "create" not in imported and "b2store.nd.create" not in imported
    assert "chunks" in imported


def test_blosc_blocks_other_than_the_array_blocks_decode_whole():
    """A chunk written with a Blosc blocksize that is not the b2nd block's (two blocks a
    Blosc block here) cannot be decoded block by block: it is decoded whole, correctly."""
    from b2store.chunk.decoder import chunk_info
    from b2store.nd.chunks import encode_array_chunk
    from b2store.nd.geometry import array_to_chunk

    x = data((40, 30))
    params = cparams_for(x.dtype, (8, 6))
    params = params.replace(blocksize=2 * params.blocksize)
    chunk = encode_array_chunk(array_to_chunk(x, (40, 30), (8, 6)), x.dtype, params)
    assert chunk_info(chunk).blocksize == 2 * 8 * 6 * 4
    out = np.empty((3, 2), x.dtype)
    decode_selection(chunk, (40, 30), (8, 6), x.dtype, [slice(9, 12), slice(13, 15)], out)
    np.testing.assert_array_equal(out, x[9:12, 13:15])


@pytest.fixture(params=[1, 3], ids=["1thread", "3threads"])
def group_threads(request):
    """Groups decoded by this thread alone, or shared by three (each its own room)."""
    from b2store.chunk import native

    native.set_nthreads(request.param)
    yield request.param
    native.set_nthreads(None)


@pytest.mark.parametrize("nthreads", [1, 3], ids=["1thread", "3threads"])
@pytest.mark.parametrize("group_bytes", [1, 200, 700], ids=["1block", "1of2", "3blocks"])
@given(
    sel=st.tuples(ascending(40), ascending(30)),
    filters=st.sampled_from([["shuffle"], ["delta", "shuffle"], ["bitshuffle"]]),
)
def test_most_of_a_chunk_decodes_a_group_of_blocks_at_a_time(nthreads, group_bytes, sel, filters):
    """Selections over most of a chunk decode it a group of blocks at a time (each group
    copied out while in cache), by one thread or shared by several: equal to numpy, for any
    grouping, DELTA too."""
    import b2store.nd.chunks as chunks
    from b2store.chunk import native

    x = data((40, 30), "<f8")
    chunk = encode_chunk_array(x, (40, 30), (8, 3), cparams_for(x.dtype, (8, 3), filters=filters))
    expected = x[sel]
    out = np.full(expected.shape, -1.0)
    saved = chunks._GROUP_BYTES, chunks.SMALL_CHUNK_BYTES
    chunks._GROUP_BYTES = group_bytes  # (blocks of 192 bytes)
    chunks.SMALL_CHUNK_BYTES = 0  # (not decoded whole as a small chunk)
    native.set_nthreads(nthreads)
    try:
        decode_selection(chunk, (40, 30), (8, 3), x.dtype, [s for s in sel], out)
    finally:
        chunks._GROUP_BYTES, chunks.SMALL_CHUNK_BYTES = saved
        native.set_nthreads(None)
    np.testing.assert_array_equal(out, expected)


def test_threads_share_the_groups_and_their_copies(monkeypatch):
    """With threads, each decodes a group into its own room and copies it out, so more than
    one thread copies (the copy was one thread's while the others waited)."""
    import threading

    import b2store.nd.chunks as chunks
    from b2store.chunk import native

    x = data((40, 30), "<f8")
    chunk = encode_chunk_array(x, (40, 30), (8, 3), cparams_for(x.dtype, (8, 3)))
    copiers = set()
    copy = chunks.copy_blocks

    def counted(*args, **kwargs):
        copiers.add(threading.get_ident())
        threading.Event().wait(0.002)  # (so that one thread cannot take every group)
        return copy(*args, **kwargs)

    monkeypatch.setattr(chunks, "copy_blocks", counted)
    monkeypatch.setattr(chunks, "_GROUP_BYTES", 200)  # one block (192 bytes) a group
    monkeypatch.setattr(chunks, "SMALL_CHUNK_BYTES", 0)
    native.set_nthreads(2)
    try:
        out = np.empty((40, 29), x.dtype)
        decode_selection(chunk, (40, 30), (8, 3), x.dtype, [slice(None), slice(1, 30)], out)
    finally:
        native.set_nthreads(None)
    np.testing.assert_array_equal(out, x[:, 1:])
    assert len(copiers) == 2


@pytest.mark.parametrize("block", [0, 30, 49])
def test_a_broken_block_in_a_group_is_named(group_threads, monkeypatch, block):
    import b2store.nd.chunks as chunks
    from b2store.chunk.partial import read_layout

    x = data((40, 30), "<f8") + np.random.default_rng(0).normal(size=(40, 30))
    chunk = bytearray(encode_chunk_array(x, (40, 30), (8, 3), cparams_for(x.dtype, (8, 3))))
    layout = read_layout(bytes(chunk))
    at = int(layout.bstarts[block])
    chunk[at : at + 4] = (10**6).to_bytes(4, "little")  # a stream that claims too much
    monkeypatch.setattr(chunks, "_GROUP_BYTES", 600)
    monkeypatch.setattr(chunks, "SMALL_CHUNK_BYTES", 0)
    out = np.empty((40, 29), x.dtype)
    with pytest.raises(FormatError, match="csize"):
        decode_selection(bytes(chunk), (40, 30), (8, 3), x.dtype, [slice(None), slice(1, 30)], out)
