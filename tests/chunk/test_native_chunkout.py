"""``_encode_blocks.ChunkOut``: blocks compressed into slots of the chunk's own bytes, then packed
behind the header and block starts (both written in C), with no chunk-sized copy."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same_bytes

from b2store.chunk import _encode_blocks

HEADER = bytes(range(32))  # cbytes (bytes 12-15) is filled in by finish_blocks


def _prefix(sizes, total: int) -> bytes:
    starts = 32 + 4 * len(sizes) + np.concatenate(([0], np.cumsum(sizes[:-1]))).astype(int)
    header = HEADER[:12] + total.to_bytes(4, "little") + HEADER[16:]
    return header + np.asarray(starts[: len(sizes)], "<i4").tobytes()


def test_blocks_are_packed_behind_the_header_and_block_starts():
    slot, sizes = 10, np.array([3, 10, 0, 7], np.int64)
    p = 32 + 4 * len(sizes)
    out = _encode_blocks.ChunkOut(p + len(sizes) * slot)
    with memoryview(out) as mv:
        view = np.frombuffer(mv, np.uint8)
        for j, n in enumerate(sizes):
            view[p + j * slot : p + j * slot + n] = j + 1
            view[p + j * slot + n : p + (j + 1) * slot] = 0xEE  # slack never copied
        del view
    chunk = out.finish_blocks(HEADER, sizes, slot)
    assert isinstance(chunk, bytes)
    body = b"\x01" * 3 + b"\x02" * 10 + b"\x04" * 7
    assert chunk == _prefix(sizes, p + len(body)) + body


def test_handed_over_once_and_never_while_written():
    out = _encode_blocks.ChunkOut(48)
    mv = memoryview(out)
    none = np.zeros(0, np.int64)
    with pytest.raises(BufferError, match="the chunk was handed over, or is still being written"):
        out.finish_blocks(HEADER, none, 0)
    mv.release()
    assert out.finish_blocks(HEADER, none, 0) == _prefix(none, 32)
    with pytest.raises(BufferError, match="the chunk was handed over"):
        out.finish_blocks(HEADER, none, 0)
    with pytest.raises(BufferError, match="the chunk was handed over"):
        memoryview(out)


@pytest.mark.parametrize(
    "header, sizes, slot, match",
    [(HEADER, [5], 4, "block 0 of 5 bytes in a slot of 4"),
     (HEADER, [-1], 4, "block 0 of -1 bytes in a slot of 4"),
     (HEADER, [4, 4, 4, 4], 4, "blocks past the chunk's room"),
     (HEADER, [1], -1, "blocks past the chunk's room"),
     (HEADER[:16], [1], 4, "a header of 32 bytes, not 16")],
)  # fmt: skip
def test_bad_layouts_are_refused(header, sizes, slot, match):
    out = _encode_blocks.ChunkOut(48)
    with pytest.raises(ValueError, match=match):
        out.finish_blocks(header, np.array(sizes, np.int64), slot)


def test_raw_chunk_in_the_same_bytes():
    out = _encode_blocks.ChunkOut(16)
    items = np.arange(10, dtype=np.uint8)
    chunk = out.raw(b"HDR", items)
    assert chunk == b"HDR" + items.tobytes()
    with pytest.raises(BufferError, match="the chunk was handed over"):
        out.raw(b"", items)
    with pytest.raises(ValueError, match="the items do not fit the chunk's room"):
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
        assert_same_bytes(ours, theirs, codec)


def test_slot_zero_means_packed_already():
    sizes = np.array([3, 5, 0, 2], np.int64)
    out = _encode_blocks.ChunkOut(48 + 10)
    with memoryview(out) as mv:
        mv[48:58] = b"aaabbbbbcc"
    assert out.finish_blocks(HEADER, sizes, 0) == _prefix(sizes, 58) + b"aaabbbbbcc"
    with pytest.raises(ValueError, match="blocks past the chunk's room"):
        _encode_blocks.ChunkOut(44).finish_blocks(HEADER, np.array([4, 4], np.int64), 0)


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
