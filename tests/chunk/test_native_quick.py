"""The one-pass C decode of common chunks (``_chunk_plan.Plan``, ``native.quick_decode``): which
chunks take it, that they decode as python-blosc2 decodes them, and that every other chunk
(or a damaged one) is left to the general decoder, which decodes it or names the field."""

from __future__ import annotations

import blosc2
import numpy as np
import pytest

import b2store
from b2store.chunk import _chunk_plan, native
from b2store.chunk.decoder import stream_split
from b2store.chunk.header import LAST_BLOSC1_VERSION, ChunkHeader
from b2store.errors import FormatError

CODECS = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]


def _chunk(data, codec="lz4", filters=("shuffle",), **kw) -> bytes:
    ids = [blosc2.Filter[f.upper()] for f in filters] or [blosc2.Filter.NOFILTER]
    return blosc2.compress2(
        data, typesize=data.itemsize, codec=blosc2.Codec[codec.upper()], clevel=5, filters=ids, **kw
    )


def _walk(dtype, n):
    rng = np.random.default_rng(11)
    return (np.cumsum(rng.integers(-3, 4, n)) + 1000).astype(dtype)


@pytest.mark.usefixtures("native_on")
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "filters",
    [("shuffle",), ("bitshuffle",), (), ("shuffle", "shuffle"), ("shuffle", "bytedelta"),
     ("bitshuffle", "bytedelta"), ("bytedelta",), ("delta", "shuffle"), ("shuffle", "delta"),
     ("delta",), ("delta", "bitshuffle")],
)  # fmt: skip
@pytest.mark.parametrize("dtype", ["<f8", "<i4", "<u2", "u1", "<c16"])
def test_common_chunks_take_the_quick_path(codec, filters, dtype):
    data = _walk(dtype, 70_001)  # a short last block
    chunk = _chunk(data, codec, filters, blocksize=32768)
    plan = _chunk_plan.Plan(chunk)  # some are stored raw (memcpyed): those too
    assert plan.ok and plan.nbytes == data.nbytes and plan.nblocks > 2
    assert native.quick_decode(chunk, None, 1, 1 << 40) is not None
    for nthreads in (1, 2):
        got = b2store.decode_chunk(chunk, nthreads=nthreads)
        assert got.tobytes() == blosc2.decompress2(chunk)
    out = np.empty(data.nbytes, np.uint8)
    assert np.shares_memory(b2store.decode_chunk(chunk, out=out), out)
    assert out.tobytes() == data.tobytes()


@pytest.mark.usefixtures("native_on")
@pytest.mark.parametrize("dtype", ["<f8", "<i2"])
def test_flawed_bytedelta_takes_the_quick_path(dtype):
    # Filter 34 (the SIMD builds' bytedelta, which restarts its running sum in each
    # channel): python-blosc2 writes it no more, but reads it, as the one pass must.
    data = _walk(dtype, 70_001)
    chunk = b2store.encode_chunk(data, codec="lz4", filters=["shuffle", "bytedelta_buggy"])
    assert _chunk_plan.Plan(chunk).ok
    for nthreads in (1, 2):
        got = b2store.decode_chunk(chunk, nthreads=nthreads).tobytes()
        assert got == data.tobytes() == blosc2.decompress2(chunk)


@pytest.mark.usefixtures("native_on")
def test_delta_chunks_decode_block_0_before_threads_share_the_others():
    # Every DELTA block is XORed with block 0 decoded: Plan.run refuses to start until
    # Plan.first has decoded it (threads sharing the blocks would race it), decode_to does
    # it first for one thread, and a partial plan (block 0 not read) is not taken.
    data = _walk("<i4", 400_001)
    chunk = _chunk(data, "lz4", ("delta", "shuffle"), blocksize=16384)
    plan = _chunk_plan.Plan(chunk)
    assert plan.ok and plan.delta and plan.nblocks == 98
    dest = np.zeros(data.nbytes, np.uint8)
    scratch = native._scratch()
    assert plan.run(dest, scratch) == -1 and not dest.any()
    assert plan.first(dest, scratch) == 0
    assert dest[:16384].tobytes() == data.tobytes()[:16384] and not dest[16384:].any()
    assert plan.first(dest, scratch) == -1  # once
    assert plan.run(dest, scratch) == 0
    assert dest.tobytes() == data.tobytes()
    assert not _chunk_plan.Plan(_chunk(data, "lz4", ("shuffle",))).delta
    blocks = np.array([0, 3], np.int64)
    ends = np.full(98, len(chunk), np.int64)
    assert not _chunk_plan.Plan(chunk, blocks, ends).ok
    assert native.threads_for(data.nbytes, 2) == 2
    for _ in range(40):  # two threads, again and again: no race with block 0
        assert b2store.decode_chunk(chunk, nthreads=2).tobytes() == data.tobytes()


@pytest.mark.usefixtures("native_on")
@pytest.mark.parametrize("filters", [("shuffle",), ("delta", "shuffle")])
def test_one_thread_decodes_in_one_call(filters, monkeypatch):
    # One thread's decode is Plan.run_alone (DELTA's block 0 first, inside it): no share-out
    # of the blocks, whose Python was a fifth of a 4 kB chunk's whole decode.
    data = _walk("<i4", 400_001)
    chunk = _chunk(data, "lz4", filters, blocksize=16384)
    monkeypatch.setattr(native, "_share", lambda *a: pytest.fail("the blocks were shared out"))
    for nthreads in (None, 1):
        assert b2store.decode_chunk(chunk, nthreads=nthreads).tobytes() == data.tobytes()
    plan = _chunk_plan.Plan(chunk)
    dest = np.zeros(data.nbytes, np.uint8)
    assert plan.run_alone(dest[:-1], native._scratch()) == -1 and not dest.any()
    assert plan.run_alone(dest, native._scratch()) == 0 and dest.tobytes() == data.tobytes()


def test_other_chunks_are_left_to_the_general_decoder():
    data = _walk("<i4", 50_000)
    others = {
        "dictionary": _chunk(data, "zstd", ("shuffle",), use_dict=True),
        "zeros": _chunk(np.zeros(50_000, "<i4"), "lz4"),
    }
    for name, chunk in others.items():
        assert not _chunk_plan.Plan(chunk).ok, name
        assert native.quick_decode(chunk, None, 1, 1 << 40) is None, name
        assert b2store.decode_chunk(chunk).tobytes() == data.tobytes() or name == "zeros"


@pytest.mark.usefixtures("native_on")
@pytest.mark.parametrize("nthreads", [1, 2])
def test_raw_chunks_are_copied_in_c(nthreads):
    data = np.random.default_rng(1).integers(0, 256, 100_003, np.uint8)
    chunk = _chunk(data, "lz4", (), blocksize=8192)
    assert b2store.chunk_info(chunk).memcpyed
    plan = _chunk_plan.Plan(chunk)
    assert plan.ok and plan.nbytes == len(data) and plan.nblocks == -(-len(data) // 8192)
    assert b2store.decode_chunk(chunk, nthreads=nthreads).tobytes() == data.tobytes()
    # cbytes must be exactly nbytes past the header
    bad = bytearray(chunk) + b"x"
    bad[12:16] = (len(chunk) + 1).to_bytes(4, "little")
    assert not _chunk_plan.Plan(bytes(bad)).ok
    with pytest.raises(FormatError, match="cbytes"):
        b2store.decode_chunk(bytes(bad))


def test_limits_and_out_fall_back():
    data = _walk("<f8", 20_000)
    chunk = _chunk(data)
    assert native.quick_decode(chunk, None, 1, data.nbytes - 1) is None
    with pytest.raises(b2store.LimitError, match=r"Limits\.max_chunk_nbytes"):
        b2store.decode_chunk(chunk, max_nbytes=data.nbytes - 1)
    # An out of another dtype or shape is decoded into in one pass too (numcodecs hands its
    # codecs the caller's array); one that is not contiguous, writable or of plain items
    # goes through the general path.
    out = np.empty((4, data.size // 4), data.dtype)
    got = native.quick_decode(chunk, out, 1, 1 << 40)
    assert got is not None and got.dtype == np.uint8 and np.shares_memory(got, out)
    assert np.array_equal(out.reshape(-1), data)
    for other in (
        np.empty(data.size * 2, data.dtype)[::2],
        np.frombuffer(bytes(data.nbytes), data.dtype),
        np.empty(data.nbytes // 8, object),
    ):
        assert native.quick_decode(chunk, other, 1, 1 << 40) is None
    out = np.empty(data.shape, data.dtype)
    b2store.decode_chunk(chunk, out=out)
    assert np.array_equal(out, data)
    with pytest.raises(ValueError, match="bytes"):
        b2store.decode_chunk(chunk, out=np.empty(data.nbytes - 8, np.uint8))


def test_damaged_headers_and_starts_are_refused():
    data = _walk("<i4", 40_000)
    chunk = bytearray(_chunk(data, blocksize=16384))
    nblocks = -(-data.nbytes // 16384)
    cases = {
        "truncated": bytes(chunk[:-1]),
        "cbytes past the end": bytes(chunk[:12])
        + (len(chunk) + 1).to_bytes(4, "little")
        + bytes(chunk[16:]),
        "short header": bytes(chunk[:31]),
    }
    for j, value in ((0, 0), (1, len(chunk)), (nblocks - 1, 32 + 4 * nblocks - 1)):
        bad = bytearray(chunk)
        bad[32 + 4 * j : 36 + 4 * j] = value.to_bytes(4, "little")
        cases[f"bstarts[{j}] = {value}"] = bytes(bad)
    bad = bytearray(chunk)
    bad[16] = 200  # an unknown filter id
    cases["filter"] = bytes(bad)
    # each damage is refused for its own reason: the field it names (an unknown filter is a
    # valid but unimplemented feature, the rest corrupt input)
    expected = {
        "truncated": (FormatError, "^cbytes at offset 12:"),
        "cbytes past the end": (FormatError, "^cbytes at offset 12:"),
        "short header": (FormatError, "^extended chunk header at offset 0:"),
        "filter": (b2store.UnsupportedError, "unsupported filter 200"),
    }
    for name, buf in cases.items():
        assert not _chunk_plan.Plan(buf).ok, name
        j = name[len("bstarts[") : name.find("]")]
        error, match = expected.get(name, (FormatError, rf"^bstarts\[{j}\] at offset"))
        with pytest.raises(error, match=match):
            b2store.decode_chunk(buf)


def test_flipped_bytes_decode_as_the_general_path_does(monkeypatch):
    """A stream damaged past the header: the quick path refuses it at its walk or fails in
    its decode, and the general path then decodes or raises exactly as it does alone."""
    data = _walk("<f8", 30_000)
    base = _chunk(data, "lz4", ("shuffle",), blocksize=8192)
    rng = np.random.default_rng(5)
    cases = []
    for _ in range(150):
        buf = bytearray(base)
        for pos in rng.integers(32, len(buf), rng.integers(1, 3)):
            buf[pos] ^= int(rng.integers(1, 256))
        cases.append(bytes(buf))

    def outcome(buf):
        try:
            return "ok", b2store.decode_chunk(buf).tobytes()
        except FormatError as exc:
            return "error", exc.field

    quick = [outcome(c) for c in cases]
    monkeypatch.setattr(native, "quick_decode", lambda *a: None)
    general = [outcome(c) for c in cases]
    assert quick == general
    assert {o[0] for o in general} == {"ok", "error"}


def test_more_streams_than_bytes_is_refused_before_any_table():
    """A small chunk claiming 100,000 blocks of 255 streams (a 400 MB stream table if
    believed) is refused by the plan at once, and by the general decoder as before."""
    nb, ts = 100_000, 255
    head = bytes([5, 1, 0x05 | (1 << 5), ts]) + (ts * nb).to_bytes(4, "little")
    head += ts.to_bytes(4, "little") + (32 + 4 * nb + 8).to_bytes(4, "little")
    head += bytes([1, 0, 0, 0, 0, 0, 1, 0]) + bytes(8)
    starts = np.full(nb, 32 + 4 * nb, "<i4").tobytes()
    buf = head + starts + bytes(8)
    assert not _chunk_plan.Plan(buf).ok
    with pytest.raises(FormatError, match="csize of stream 2 of block 0"):
        b2store.decode_chunk(buf)


@pytest.mark.usefixtures("native_on")
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("shuffle", [0, 1, 2], ids=["noshuffle", "shuffle", "bitshuffle"])
@pytest.mark.parametrize("dtype", ["<f8", "<i4", "u1", "<c16", "V32"])
@pytest.mark.parametrize("blocksize", [32768, 256])
def test_blosc1_chunks_take_the_quick_path_when_their_header_says_how_blocks_split(
    codec, shuffle, dtype, blocksize
):
    """numcodecs' Blosc1 chunks (16-byte header) decode in one C pass when the header alone
    says whether blocks are split (the same rule as the general decoder's), as numcodecs
    decodes them, on one thread or two."""
    numcodecs = pytest.importorskip("numcodecs")
    raw = _walk("<u2", 35_001 * np.dtype(dtype).itemsize).view(np.uint8)
    data = raw[: len(raw) // np.dtype(dtype).itemsize * np.dtype(dtype).itemsize].view(dtype)
    chunk = numcodecs.Blosc(codec, 5, shuffle, blocksize=blocksize).encode(data)
    header = ChunkHeader.from_bytes(chunk)
    assert header.version <= LAST_BLOSC1_VERSION and header.header_size == 16
    plan = _chunk_plan.Plan(chunk)
    assert plan.ok == (not header.memcpyed and stream_split(header) is not None)
    assert (native.quick_decode(chunk, None, 1, 1 << 40) is not None) == plan.ok
    want = numcodecs.Blosc().decode(chunk)
    for nthreads in (1, 2):
        assert b2store.decode_chunk(chunk, nthreads=nthreads).tobytes() == bytes(want)


def test_blosc1_chunks_only_their_bytes_can_tell_are_left_to_the_general_decoder():
    """A Blosc1 header whose rule says "not split" with no flag saying so (older writers
    split by other rules): the C pass declines it and the general decoder reads the bytes
    to tell, and decodes it right; a damaged Blosc1 chunk is refused by name."""
    numcodecs = pytest.importorskip("numcodecs")
    data = _walk("<i4", 20_000)
    chunk = bytearray(numcodecs.Blosc("lz4", 5, 1, blocksize=256).encode(data))
    assert chunk[2] & 0x10  # not split (64 items a block), and flagged so
    chunk[2] &= ~0x10  # as c-blosc before 1.11 wrote it
    assert stream_split(ChunkHeader.from_bytes(chunk)) is None
    assert not _chunk_plan.Plan(bytes(chunk)).ok
    assert b2store.decode_chunk(bytes(chunk)).tobytes() == data.tobytes()
    good = numcodecs.Blosc("zstd", 5, 1).encode(data)
    assert _chunk_plan.Plan(good).ok if native.enabled() else True
    bad = bytearray(good)
    bad[16:20] = (len(good) + 5).to_bytes(4, "little")  # block 0 starts past the end
    assert not _chunk_plan.Plan(bytes(bad)).ok
    with pytest.raises(FormatError, match="bstarts"):
        b2store.decode_chunk(bytes(bad))
    with pytest.raises(FormatError, match="cbytes"):
        b2store.decode_chunk(good[:-1])
