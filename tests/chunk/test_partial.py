"""Partial chunk reads: the ranges a set of blocks needs, decoded, equal the same blocks of the
whole chunk decoded, for chunks of every codec, filter pipeline (DELTA too) and dictionary;
hostile prefixes and pieces raise FormatError."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import b2store
from b2store import FormatError, UnsupportedError
from b2store.chunk.partial import (
    HEADER_BYTES,
    decode_blocks,
    decode_direct,
    plan_blocks,
    prefix_length,
    read_layout,
)

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes chunks with threads")


class Counted:
    """A chunk read by ranges, counting the bytes read."""

    def __init__(self, chunk: bytes):
        self.chunk, self.read_bytes = chunk, 0

    def read(self, start: int, stop: int) -> bytes:
        self.read_bytes += stop - start
        return self.chunk[start:stop]


def partial_read(chunk: bytes, blocks, size=None):
    """Decode ``blocks`` of ``chunk`` the way a remote reader would; None if read whole."""
    src = Counted(chunk)
    head = src.read(0, HEADER_BYTES)
    prefix = head + src.read(len(head), prefix_length(head))
    plan = plan_blocks(prefix, blocks, size=len(chunk) if size is None else size)
    if plan is None:
        return None, None, src
    out = np.full(plan.nbytes, 0xA5, np.uint8)
    decode_blocks(plan, prefix, [src.read(a, b) for a, b in plan.ranges], out)
    return plan, out, src


def check_blocks(chunk: bytes, blocks):
    whole = b2store.decode_chunk(chunk)
    plan, out, src = partial_read(chunk, blocks)
    info = b2store.chunk_info(chunk)
    if plan is None:
        assert info.memcpyed or info.special or info.vl_blocks or not info.nbytes
        return None
    for j in plan.blocks:
        offset, size = plan.block_span(j)
        assert out[offset : offset + size].tobytes() == whole[offset : offset + size].tobytes()
    assert set(blocks) <= set(plan.blocks)
    if 0 not in blocks and blocks:
        assert (0 in plan.blocks) == (3 in info.filters)  # only DELTA adds block 0
    # Blocks not in the plan are not written.
    untouched = np.ones(plan.nbytes, bool)
    for j in plan.blocks:
        offset, size = plan.block_span(j)
        untouched[offset : offset + size] = False
    assert (out[untouched] == 0xA5).all()
    return plan, src


def sample(n: int, seed: int) -> np.ndarray:
    """Compressible with or without filters: a slow wave of int64 with a little noise."""
    rng = np.random.default_rng(seed)
    wave = (1000 * np.sin(np.arange(n) / 500)).astype("<i8")
    return wave + rng.integers(0, 4, n, dtype="<i8")


CODECS = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]
PIPELINES = [
    [],
    ["shuffle"],
    ["bitshuffle"],
    ["delta"],
    ["delta", "shuffle"],
    ["shuffle", "bytedelta"],
    ["trunc_prec", "bitshuffle"],
]


@pytest.mark.parametrize("filters", PIPELINES, ids="+".join)
@pytest.mark.parametrize(
    "codec,use_dict",
    [(c, False) for c in CODECS] + [(c, True) for c in ("lz4", "lz4hc", "zstd")],
    ids=lambda v: {True: "dict", False: "nodict"}.get(v, v) if isinstance(v, bool) else v,
)
def test_partial_equals_whole(codec, filters, use_dict):
    metas = [12 if f == "trunc_prec" else 0 for f in filters]
    chunk = b2store.encode_chunk(
        sample(60000, 1),
        codec=codec,
        clevel=6,
        filters=filters,
        filters_meta=metas,
        blocksize=16384,
        use_dict=use_dict,
    )
    nblocks = b2store.chunk_info(chunk).nblocks
    assert nblocks == 30
    for blocks in ([0], [7], [29], [3, 4, 5], [28, 2], list(range(nblocks)), []):
        result = check_blocks(chunk, blocks)
        assert result is not None
    plan, src = check_blocks(chunk, [17])
    # Read: the first bytes, the prefix, then the ranges: the dictionary and one block (and
    # block 0 for DELTA), a fraction of the chunk.
    assert src.read_bytes == plan.prefix_length + plan.fetch_size
    at = 32 + 4 * nblocks
    dsize = int.from_bytes(chunk[at : at + 4], "little") if use_dict else 0
    blocks_read = plan.fetch_size - dsize
    assert len(plan.ranges) <= use_dict + len(plan.blocks) <= 3
    assert blocks_read < len(chunk) // 5


@pytest.mark.parametrize("typesize", [1, 2, 3, 4, 8, 12, 16, 39])
@pytest.mark.parametrize("splitmode", ["always", "never"])
def test_split_and_odd_typesizes(typesize, splitmode):
    data = sample(40000, typesize).view(np.uint8)[: 40000 * 8 // typesize * typesize]
    chunk = b2store.encode_chunk(
        data,
        typesize=typesize,
        codec="lz4",
        filters=["shuffle"],
        splitmode=splitmode,
        blocksize=8192 // typesize * typesize,
    )
    nblocks = b2store.chunk_info(chunk).nblocks
    for blocks in ([0], [nblocks - 1], [1, nblocks // 2]):
        assert check_blocks(chunk, blocks) is not None


def test_chunks_python_blosc2_writes_with_threads_and_blosc1_chunks():
    from numcodecs import Blosc

    data = sample(200000, 3)
    chunks = [
        blosc2.compress2(data, typesize=8, nthreads=4, blocksize=32768, codec=blosc2.Codec.LZ4),
        blosc2.compress2(
            data,
            typesize=8,
            nthreads=4,
            blocksize=16384,
            filters=[blosc2.Filter.DELTA, blosc2.Filter.SHUFFLE],
        ),
        Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE, blocksize=16384).encode(data),
        Blosc(cname="zstd", clevel=3, shuffle=Blosc.BITSHUFFLE, blocksize=8192).encode(data),
    ]
    from pathlib import Path

    fixture = Path(__file__).parents[1] / "fixture" / "blosc1" / "splitmode_always_lz4_ts39.blosc"
    chunks.append(fixture.read_bytes())
    for chunk in chunks:
        nblocks = b2store.chunk_info(chunk).nblocks
        assert nblocks > 1 or chunk == chunks[-1]  # the fixture has one block
        for blocks in ([0], [nblocks - 1], [nblocks // 3, nblocks // 2], list(range(nblocks))):
            assert check_blocks(chunk, blocks) is not None


@pytest.mark.parametrize(
    "chunk",
    [
        b2store.encode_chunk(np.arange(100, dtype="i4"), clevel=0),  # memcpyed
        b2store.encode_chunk(np.zeros(10000, "f8")),  # zeros special
        b2store.encode_chunk(b"abc"),  # tiny: memcpyed
    ],
    ids=["memcpyed", "zeros", "tiny"],
)
def test_chunks_without_block_starts_are_read_whole(chunk):
    head = chunk[:HEADER_BYTES]
    assert prefix_length(head) <= len(chunk)
    assert plan_blocks(chunk[: prefix_length(head)], [0]) is None


def test_caller_errors():
    chunk = b2store.encode_chunk(sample(20000, 5), blocksize=16384)
    n = prefix_length(chunk[:HEADER_BYTES])
    with pytest.raises(IndexError, match="block 10 of 10"):
        plan_blocks(chunk[:n], [b2store.chunk_info(chunk).nblocks])
    with pytest.raises(ValueError, match="prefix"):
        plan_blocks(chunk[: n - 1], [0])
    plan = plan_blocks(chunk[:n], [1])
    with pytest.raises(FormatError, match=r"^nbytes at offset 4: expected 7 \(the bytes of out\)"):
        decode_blocks(plan, chunk[:n], [chunk[a:b] for a, b in plan.ranges], bytearray(7))
    with pytest.raises(FormatError, match="^cbytes"):
        plan_blocks(chunk[:n], [1], size=len(chunk) - 1)


# --- hostile prefixes and pieces -----------------------------------------------------------

BASE = b2store.encode_chunk(
    sample(30000, 9), codec="lz4", filters=["delta", "shuffle"], blocksize=16384, use_dict=True
)


def test_truncated_pieces_and_lying_streams_are_format_errors():
    n = prefix_length(BASE[:HEADER_BYTES])
    plan = plan_blocks(BASE[:n], [5])
    pieces = [BASE[a:b] for a, b in plan.ranges]
    out = np.empty(plan.nbytes, np.uint8)
    with pytest.raises(FormatError, match="truncated"):
        decode_blocks(plan, BASE[:n], pieces[:-1] + [pieces[-1][:-1]], out)
    # A stream claiming more bytes than its block has is caught within the block.
    start = plan.ranges[-1][0]
    lie = bytearray(BASE)
    lie[start : start + 4] = (10**6).to_bytes(4, "little")
    bad = bytes(lie)
    with pytest.raises(FormatError, match="csize"):
        decode_blocks(plan, bad[:n], [bad[a:b] for a, b in plan.ranges], out)


def test_lying_block_starts_and_dictionary_sizes_are_format_errors():
    info = b2store.chunk_info(BASE)
    n = prefix_length(BASE[:HEADER_BYTES])
    for offset, value, match in [
        (32 + 4 * 3, len(BASE) + 5, r"^bstarts\[3\]"),
        (32 + 4 * 3, 10, r"^bstarts\[3\]"),
        (32 + 4 * info.nblocks, 0, "^dict size"),
        (32 + 4 * info.nblocks, 10**6, "^dict size"),
        (12, 40, "^bstarts|^cbytes"),
        (8, 0, "^blocksize"),
    ]:
        lie = bytearray(BASE)
        lie[offset : offset + 4] = value.to_bytes(4, "little", signed=True)
        with pytest.raises(FormatError, match=match):
            m = prefix_length(bytes(lie[:HEADER_BYTES]))
            plan = plan_blocks(bytes(lie[: max(m, n)]), [2])
            decode_blocks(plan, bytes(lie[:n]), [lie[a:b] for a, b in plan.ranges], None)


def test_garbage_heads_are_format_errors():
    for head, match in [
        (b"hello world, not a chunk at all.", "version at offset 0: .* found 104$"),
        (bytes(32), "version at offset 0: .* found 0$"),
        (b"\x9e\xa8b2frame\x00" + bytes(22), "expected a Blosc chunk, found a Blosc2 frame"),
    ]:
        with pytest.raises(FormatError, match=match):
            prefix_length(head)


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 300), st.integers(0, 255)), min_size=1, max_size=8),
    st.lists(st.integers(0, 40), min_size=0, max_size=4),
)
def test_mutated_prefixes_never_crash(mutations, blocks):
    lie = bytearray(BASE)
    for offset, value in mutations:
        lie[offset % len(lie)] = value
    chunk = bytes(lie)
    try:
        head = chunk[:HEADER_BYTES]
        n = prefix_length(head)
        plan = plan_blocks(chunk[: max(n, len(head))], blocks, size=len(chunk))
        if plan is None:
            return
        out = np.empty(plan.nbytes, np.uint8)
        decode_blocks(plan, chunk[: plan.prefix_length], [chunk[a:b] for a, b in plan.ranges], out)
    except (FormatError, UnsupportedError, IndexError):
        pass


# --- decode_direct: the C block loop straight from one read per run of blocks -----------------


def direct_read(chunk: bytes, blocks):
    """``decode_direct`` as a frame reader uses it (the layout read once); (written, out,
    reads) or (None, None, reads) when it leaves the chunk to the plan path."""
    src = Counted(chunk)
    layout = read_layout(chunk[: prefix_length(chunk[:HEADER_BYTES])], size=len(chunk))
    if layout is None:
        return None, None, src
    out = np.full(layout.header.nbytes, 0xA5, np.uint8)
    written = decode_direct(layout, lambda a, n: src.read(a, a + n), blocks, out)
    return written, out, src


@pytest.mark.usefixtures("native_on")  # the direct path is the C loop: on in both settings
@pytest.mark.parametrize("filters", PIPELINES, ids="+".join)
@pytest.mark.parametrize("codec", CODECS)
def test_direct_equals_whole(codec, filters):
    metas = [12 if f == "trunc_prec" else 0 for f in filters]
    chunk = b2store.encode_chunk(
        sample(60000, 4),
        codec=codec,
        clevel=6,
        filters=filters,
        filters_meta=metas,
        blocksize=16384,
    )
    whole = b2store.decode_chunk(chunk)
    for blocks in ([0], [7], [29], [3, 4, 5], [28, 2], list(range(30))):
        written, out, src = direct_read(chunk, blocks)
        assert written is not None, "a chunk the C loop decodes is left to the plan path"
        assert set(blocks) <= set(written)
        assert (0 in written) == (0 in blocks or "delta" in filters)
        mask = np.zeros(len(out), bool)
        for j in written:
            mask[j * 16384 : (j + 1) * 16384] = True
        assert out[mask].tobytes() == whole[mask].tobytes()
        assert (out[~mask] == 0xA5).all()  # nothing else written
        if len(blocks) == 1 and "delta" not in filters:
            assert src.read_bytes < len(chunk) // 10  # one block's bytes, not the chunk


@pytest.mark.usefixtures("native_on")  # the direct path is the C loop: on in both settings
def test_direct_leaves_what_it_cannot_take_to_the_plan_path():
    with_dict = b2store.encode_chunk(sample(30000, 2), codec="zstd", blocksize=16384, use_dict=True)
    assert direct_read(with_dict, [3])[0] is None
    memcpyed = b2store.encode_chunk(np.arange(1000, dtype="<u1"), clevel=0)
    assert read_layout(memcpyed, size=len(memcpyed)) is None
    # A stream that lies about its size: the C walk refuses it, and the plan path names it.
    chunk = b2store.encode_chunk(sample(30000, 3), codec="lz4", blocksize=16384)
    layout = read_layout(chunk, size=len(chunk))
    lie = bytearray(chunk)
    at = int(layout.bstarts[5])
    lie[at : at + 4] = (10**6).to_bytes(4, "little")
    assert direct_read(bytes(lie), [5])[0] is None
    assert direct_read(bytes(lie), [4])[0] is not None  # block 4 alone is untouched
    # A short read is a FormatError naming the range.
    out = np.empty(layout.header.nbytes, np.uint8)
    with pytest.raises(FormatError, match="truncated"):
        decode_direct(layout, lambda a, n: chunk[a : a + n - 1], [5], out)
    with pytest.raises(IndexError, match="block 15 of 15"):
        decode_direct(layout, lambda a, n: chunk[a : a + n], [layout.bstarts.size], out)


@pytest.mark.usefixtures("native_on")  # the direct path is the C loop: on in both settings
def test_a_kept_layout_asks_its_header_once(monkeypatch):
    # A small read of an open array reuses the chunk's layout: whether the C loop takes the
    # chunk is decided once, not per read (each read asked the header and the plugins again).
    import b2store.chunk.partial as partial

    asked = []
    monkeypatch.setattr(partial, "uses_plugins", lambda h: asked.append(h) or False)
    chunk = b2store.encode_chunk(sample(30000, 4), codec="zstd", blocksize=16384)
    layout = read_layout(chunk, size=len(chunk))
    whole = b2store.decode_chunk(chunk)
    for j in (1, 5, 1):
        out = np.zeros(layout.header.nbytes, np.uint8)
        assert decode_direct(layout, lambda a, n: chunk[a : a + n], [j], out) == [j]
        span = slice(j * 16384, (j + 1) * 16384)
        assert out[span].tobytes() == whole[span].tobytes()
    assert len(asked) == 1
    # A chunk with a dictionary is still left to the plan path, every time.
    with_dict = b2store.encode_chunk(sample(30000, 2), codec="zstd", blocksize=16384, use_dict=True)
    assert direct_read(with_dict, [3])[0] is None and direct_read(with_dict, [3])[0] is None


@pytest.mark.usefixtures("native_on")  # the direct path is the C loop: on in both settings
@settings(deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30000), st.integers(0, 255)), min_size=1, max_size=8),
    st.lists(st.integers(0, 14), min_size=1, max_size=4),  # 15 blocks
)
def test_mutated_blocks_never_crash_the_direct_path(mutations, blocks):
    chunk = b2store.encode_chunk(
        sample(30000, 5), codec="lz4", filters=["shuffle"], blocksize=16384
    )
    layout = read_layout(chunk, size=len(chunk))
    lie = bytearray(chunk)
    for offset, value in mutations:
        lie[layout.prefix_length + offset % (len(lie) - layout.prefix_length)] = value
    bad = bytes(lie)
    out = np.empty(layout.header.nbytes, np.uint8)
    try:
        decode_direct(layout, lambda a, n: bad[a : a + n], blocks, out)
    except FormatError:
        pass


def test_parsed_headers_and_layouts_are_kept_only_for_what_they_were_checked_against():
    """Chunk headers and block layouts are kept by their bytes and the size they were
    checked against: the same chunk read again shares them (read-only), a shorter stored
    size is checked again, and a corrupt prefix is refused every time (failures are never
    kept)."""
    from b2store.chunk.header import ChunkHeader

    data = np.arange(40_000, dtype="<i4")
    chunk = b2store.encode_chunk(data, codec="lz4", blocksize=16_000)
    n = prefix_length(chunk[:HEADER_BYTES])
    first = read_layout(chunk[:n], size=len(chunk))
    again = read_layout(bytearray(chunk[: n + 7]), size=len(chunk))  # other bytes after
    assert again is first and first.prefix == chunk[:n]
    assert ChunkHeader.from_bytes(chunk) is ChunkHeader.from_bytes(bytes(chunk))
    with pytest.raises(ValueError, match="read-only"):
        first.bstarts[0] = 0  # shared by every reader: never changed in place
    for _ in range(2):
        with pytest.raises(FormatError, match="cbytes"):
            read_layout(chunk[:n], size=len(chunk) - 1)  # the chunk as stored is shorter
    bad = bytearray(chunk[:n])
    bad[first.header.header_size : first.header.header_size + 4] = (10**9).to_bytes(4, "little")
    for _ in range(2):
        with pytest.raises(FormatError, match="bstarts"):
            read_layout(bytes(bad), size=len(chunk))
    assert read_layout(chunk[:n], size=len(chunk)) is first


def test_layouts_of_chunks_with_many_blocks_are_not_kept(monkeypatch):
    from b2store.chunk import partial

    chunk = b2store.encode_chunk(np.arange(40_000, dtype="<i4"), codec="lz4", blocksize=16_000)
    n = prefix_length(chunk[:HEADER_BYTES])
    monkeypatch.setattr(partial, "_KEPT_PREFIX_MAX", n - 1)
    first = read_layout(chunk[:n], size=len(chunk))
    assert read_layout(chunk[:n], size=len(chunk)) is not first
    assert first.bstarts.tolist() == read_layout(chunk[:n], size=len(chunk)).bstarts.tolist()
