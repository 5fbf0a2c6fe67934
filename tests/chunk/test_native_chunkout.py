"""``_encode_blocks.ChunkOut``: blocks compressed into slots of the chunk's own bytes, then packed
behind the header and block starts, with no chunk-sized copy."""

from __future__ import annotations

import numpy as np
import pytest

from b2store import _encode_blocks


def test_blocks_are_packed_behind_the_prefix():
    slot, sizes = 10, np.array([3, 10, 0, 7], np.int64)
    out = _encode_blocks.ChunkOut(4 + len(sizes) * slot)
    with memoryview(out) as mv:
        view = np.frombuffer(mv, np.uint8)
        for j, n in enumerate(sizes):
            view[4 + j * slot : 4 + j * slot + n] = j + 1
            view[4 + j * slot + n : 4 + (j + 1) * slot] = 0xEE  # slack never copied
        del view
    chunk = out.finish(b"HEAD", sizes, slot)
    assert isinstance(chunk, bytes)
    assert chunk == b"HEAD" + b"\x01" * 3 + b"\x02" * 10 + b"\x04" * 7


def test_handed_over_once_and_never_while_written():
    out = _encode_blocks.ChunkOut(16)
    mv = memoryview(out)
    with pytest.raises(BufferError):
        out.finish(b"", np.zeros(0, np.int64), 0)
    mv.release()
    assert out.finish(b"ab", np.zeros(0, np.int64), 0) == b"ab"
    with pytest.raises(BufferError):
        out.finish(b"", np.zeros(0, np.int64), 0)
    with pytest.raises(BufferError):
        memoryview(out)


@pytest.mark.parametrize(
    "prefix, sizes, slot",
    [(b"", [5], 4), (b"", [-1], 4), (b"xx", [4, 4, 4, 4], 4), (b"", [1], -1)],
)
def test_bad_layouts_are_refused(prefix, sizes, slot):
    out = _encode_blocks.ChunkOut(16)
    with pytest.raises(ValueError):
        out.finish(prefix, np.array(sizes, np.int64), slot)


def test_raw_chunk_in_the_same_bytes():
    out = _encode_blocks.ChunkOut(16)
    items = np.arange(10, dtype=np.uint8)
    chunk = out.raw(b"HDR", items)
    assert chunk == b"HDR" + items.tobytes()
    with pytest.raises(BufferError):
        out.raw(b"", items)
    with pytest.raises(ValueError):
        _encode_blocks.ChunkOut(4).raw(b"HDR", items)


def test_incompressible_chunks_are_stored_raw_as_python_blosc2_stores_them():
    import blosc2

    import b2store

    data = np.random.default_rng(3).integers(0, 256, 800_000, dtype=np.uint8).view(np.int64)
    for codec in ("blosclz", "lz4", "zstd"):
        ours = b2store.encode_chunk(data, codec=codec, clevel=5, filters=["bitshuffle"])
        theirs = blosc2.compress2(
            data, typesize=8, codec=blosc2.Codec[codec.upper()], clevel=5,
            filters=[blosc2.Filter.BITSHUFFLE],
        )  # fmt: skip
        assert b2store.chunk_info(ours).memcpyed
        assert ours == theirs, codec


def test_slot_zero_means_packed_already():
    sizes = np.array([3, 5, 0, 2], np.int64)
    out = _encode_blocks.ChunkOut(2 + 12)
    with memoryview(out) as mv:
        mv[2:12] = b"aaabbbbbcc"
    assert out.finish(b"HH", sizes, 0) == b"HHaaabbbbbcc"
    with pytest.raises(ValueError):
        _encode_blocks.ChunkOut(8).finish(b"HH", np.array([4, 4], np.int64), 0)


@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_one_or_more_threads_write_the_same_chunk(nthreads):
    import b2store

    rng = np.random.default_rng(9)
    data = (np.cumsum(rng.integers(-3, 4, 300_001)) + 1000).astype("<i4")
    for codec in ("blosclz", "lz4", "zstd"):
        chunks = {
            b2store.encode_chunk(data, codec=codec, blocksize=65536, nthreads=t)
            for t in (1, nthreads)
        }
        assert len(chunks) == 1, codec
        assert b2store.decode_chunk(chunks.pop()).tobytes() == data.tobytes()
