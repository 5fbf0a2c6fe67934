"""Bad input never crashes, hangs, over-allocates or returns garbage: decoding raises FormatError
(UnsupportedError for valid plugin ids) with a message naming the field, offset and values.

The fuzz tests hold any bytes to that contract: mutated real chunks, random streams behind
plausible headers, and random bytes.
"""

import struct
import time
import tracemalloc

import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import b2store
from b2store import Codec, Filter, FormatError, UnsupportedError
from b2store.chunk.decoder import ChunkDecoder
from b2store.constants import MAX_BLOCKSIZE

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the seed chunks")
numcodecs = pytest.importorskip("numcodecs", reason="numcodecs writes the Blosc1 seed chunks")
I32 = struct.Struct("<i")
FE, UE = FormatError, UnsupportedError


# --- chunks by hand ------------------------------------------------------------------------


def header(
    version=5,
    flags=0x15,
    typesize=1,
    nbytes=64,
    blocksize=32,
    cbytes=0,
    filters=(),
    udcodec=0,
    flags2=0,
    bflags=0,
) -> bytes:
    """flags 0x15: BloscLZ, dont_split, extended header (both shuffle bits)."""
    base = struct.pack("<BBBBiii", version, 1, flags, typesize, nbytes, blocksize, cbytes)
    ext = bytes([*(*filters, *[0] * 6)[:6], udcodec, 0, 0, 0, 0, 0, 0, 0, flags2, bflags])
    return base + ext if flags & 5 == 5 else base


def i32(buf: bytes, offset: int, value: int, fmt: str = "<i") -> bytes:
    return buf[:offset] + struct.pack(fmt, value) + buf[offset + struct.calcsize(fmt) :]


def u8(buf: bytes, offset: int, value: int) -> bytes:
    return i32(buf, offset, value, "B")


def chunk(blocks, dictionary=None, **fields) -> bytes:
    """Header, block starts, optional dict, then each block's streams; cbytes filled in."""
    head = header(**fields)
    extra = b"" if dictionary is None else I32.pack(len(dictionary)) + dictionary
    pos, starts = len(head) + 4 * len(blocks) + len(extra), []
    for block in blocks:
        starts.append(pos)
        pos += len(block)
    return i32(head + b"".join(map(I32.pack, starts)) + extra + b"".join(blocks), 12, pos)


def raw(data: bytes) -> bytes:
    return I32.pack(len(data)) + data


def run(value: int, token: int = 1) -> bytes:
    return I32.pack(-value) + bytes([token])


def special(kind, nbytes=64, typesize=4, value=b"") -> bytes:
    """As c-blosc2 writes them: zstd flags, the repeated value (if any) after the header."""
    return (
        header(
            flags=0x85,
            typesize=typesize,
            nbytes=nbytes,
            blocksize=nbytes,
            udcodec=5,
            cbytes=32 + len(value),
            bflags=kind << 4,
        )
        + value
    )


def vl_chunk(blocks, compress=bytes, flags=0x15, filters=()) -> bytes:
    """A VL-block chunk (version 6): each block is ``i32 block_nbytes`` + compressed bytes."""
    return chunk(
        [raw(b)[:4] + compress(b) for b in blocks],
        version=6,
        flags=flags,
        flags2=1,
        nbytes=sum(map(len, blocks)),
        blocksize=len(blocks),
        filters=filters,
    )


BASE = chunk([raw(bytes(range(32))), run(7)])  # 2 blocks of 32; block starts 40, 76; cbytes 81
BLOSC1 = chunk([raw(bytes(range(32))), raw(bytes(32))], version=2, flags=0x10)
MEMCPY = header(flags=0x07, nbytes=64, blocksize=64, cbytes=96) + bytes(range(64))
DICT = chunk([run(1), run(2)], b"d" * 8, flags=0x95, udcodec=5, bflags=1)  # zstd, dict at 40
VL = vl_chunk([b"abcdefghij", b"0123456789abcd"])  # block starts 40, 54
BAD_ZSTD_DICT = chunk(
    [I32.pack(0)],
    b"\x37\xa4\x30\xec" + bytes(4),
    flags=0x85,
    nbytes=8,
    blocksize=8,
    udcodec=5,
    bflags=1,
)
LIES = [
    ("cbytes-past-end", i32(BASE, 12, 82), FE, r"^cbytes at offset 12: .*truncated"),
    ("cbytes-below-header", i32(BASE, 12, 31), FE, r"^cbytes at offset 12: .*32-byte header"),
    ("cbytes-below-blosc1-header", i32(BLOSC1, 12, 15), FE, r"^cbytes .*16-byte header"),
    ("header-cut", BASE[:15], FE, r"^chunk header at offset 0"),
    ("extended-header-cut", BASE[:31], FE, r"^extended chunk header at offset 0"),
    ("nbytes-negative", i32(BASE, 4, -64), FE, r"^nbytes at offset 4"),
    ("nbytes-huge", i32(BASE, 4, 2**31 - 1), FE, r"^bstarts at offset 32: .*67108864 block"),
    ("blocksize-zero", i32(BASE, 8, 0), FE, r"^blocksize at offset 8"),
    ("blocksize-negative", i32(BASE, 8, -32), FE, r"^blocksize at offset 8"),
    ("blocksize-too-big", i32(BASE, 8, MAX_BLOCKSIZE + 1), FE, r"^blocksize at offset 8"),
    (
        "blocksize-split-items",
        chunk([raw(bytes(30))] * 3, flags=5, typesize=4, blocksize=30),
        FE,
        r"^blocksize at offset 8: .*multiple of typesize 4",
    ),
    ("typesize-zero", u8(BASE, 3, 0), FE, r"^typesize at offset 3"),
    ("version-zero", u8(BASE, 0, 0), FE, r"^version at offset 0"),
    ("bstart-in-bstarts", i32(BASE, 32, 36), FE, r"^bstarts\[0\] at offset 32: .*\[40, 81\)"),
    ("bstart-in-header", i32(BASE, 36, 4), FE, r"^bstarts\[1\] at offset 36"),
    ("bstart-negative", i32(BASE, 32, -40), FE, r"^bstarts\[0\] at offset 32"),
    ("bstart-at-cbytes", i32(BASE, 36, 81), FE, r"^bstarts\[1\] at offset 36"),
    (
        "csize-past-end",
        chunk([raw(bytes(32)), I32.pack(10) + b"abc"]),
        FE,
        r"^csize of stream 0 of block 1 at offset 76: .*3 bytes left",
    ),
    (
        "csize-beyond-block",
        chunk([raw(bytes(33)), run(7)]),
        FE,
        r"^csize of stream 0 of block 0 at offset 40: .*32 bytes",
    ),
    ("csize-cut", chunk([raw(bytes(32)), b"\xf9\xff"]), FE, r"^csize of stream 0 of block 1"),
    ("run-even-token", chunk([raw(bytes(32)), run(7, token=2)]), FE, r"^csize .* odd token"),
    ("run-below-255", chunk([raw(bytes(32)), run(256)]), FE, r"^csize of stream 0 of block 1"),
    ("run-token-cut", chunk([raw(bytes(32)), I32.pack(-7)]), FE, r"^run token of stream 0 of"),
    *[(f"special-{k}", special(k), FE, r"^blosc2_flags at offset 31: .*special") for k in (5, 7)],
    ("memcpyed-cbytes", i32(MEMCPY[:-1], 12, 95), FE, r"^cbytes at offset 12: .*nbytes \+ 32"),
    ("value-nbytes", special(3, nbytes=10, value=b"abcd"), FE, r"^nbytes at offset 4: .*size 4"),
    ("value-missing", special(3), FE, r"^cbytes at offset 12"),
    ("nan-typesize-2", special(2, typesize=2), FE, r"^typesize at offset 3: expected 4 or 8"),
    ("dict-size-zero", i32(DICT, 40, 0), FE, r"^dict size at offset 40: expected 1\.\.32768"),
    (
        "dict-size-too-big",
        chunk([run(1), run(2)], bytes(32769), flags=0x95, udcodec=5, bflags=1),
        FE,
        r"^dict size at offset 40: .*found 32769",
    ),
    ("dict-past-end", i32(DICT, 40, 100), FE, r"^dict size at offset 40: .*found 100"),
    ("dict-size-cut", i32(DICT[:40], 12, 40), FE, r"^dict size at offset 40"),
    ("dict-with-blosclz", u8(DICT, 2, 0x15), FE, r"^blosc2_flags at offset 31: .*BloscLZ"),
    ("codec-format-5", u8(BASE, 2, 0xB5), FE, r"^flags at offset 2: .*codec format.*found 5"),
    ("codec-format-7", u8(BASE, 2, 0xF5), FE, r"^flags at offset 2: .*codec format.*found 7"),
    ("codec-format-2-snappy", u8(BASE, 2, 0x55), UE, r"snappy"),
    ("codec-zfp", u8(u8(BASE, 2, 0xD5), 22, 33), UE, r"ZFP_ACC \(id 33\)"),
    ("codec-user", u8(u8(BASE, 2, 0xD5), 22, 200), UE, r"user codec 200"),
    ("filter-5", u8(BASE, 21, 5), FE, r"^filters at offset 21: .*found 5"),
    ("filter-31", u8(BASE, 16, 31), FE, r"^filters at offset 16: .*found 31"),
    ("filter-37", u8(BASE, 21, 37), UE, r"unsupported filter 37"),
    ("instrumented", u8(BASE, 31, 0x80), UE, r"instrumented"),
    ("version-7-unknown-flags2", u8(u8(BASE, 0, 7), 30, 2), UE, r"version 7"),
    ("vl-special", u8(special(1), 30, 1), FE, r"^blosc2_flags2 at offset 30"),
    ("vl-sizes-vs-nbytes", i32(VL, 4, 25), FE, r"^block_nbytes at offset 40"),
    ("vl-bstarts-decrease", i32(i32(VL, 32, 54), 36, 40), FE, r"^bstarts\[1\] at offset 36"),
    # These two once leaked ValueError (from SpecialValue(6)) and zstandard.ZstdError.
    ("special-6-blocksize-0", i32(special(6), 8, 0), FE, r"^blosc2_flags at offset 31"),
    ("zstd-dict-corrupt", BAD_ZSTD_DICT, FE, r"^dict: expected a valid Zstd dictionary"),
]


@pytest.mark.parametrize("buf, error, match", [pytest.param(*c[1:], id=c[0]) for c in LIES])
def test_lying_header_raises_naming_the_field(buf, error, match):
    with pytest.raises(error, match=match) as exc:
        b2store.decode_chunk(buf)
    assert type(exc.value) is error
    assert error is UE or "expected" in str(exc.value) and "found" in str(exc.value)


# --- seed chunks from the real writers -----------------------------------------------------


def _seeds() -> dict[str, bytes]:
    def c2(data, codec, filters=(Filter.SHUFFLE,), meta=(0, 0), **kw) -> bytes:
        kw = {"clevel": 5, "blocksize": 1024, **kw, "filters_meta": list(meta[: len(filters)])}
        codec, filters = blosc2.Codec(int(codec)), [int(f) for f in filters]
        return bytes(blosc2.compress2(data, typesize=4, codec=codec, filters=filters, **kw))

    items = np.arange(1500, dtype="<u4") // 7 + np.arange(1500, dtype="<u4") * 7919 % 3
    data, ramp = items.view(np.uint8), (np.arange(10_000, dtype="<u4") % 977).view(np.uint8)
    seeds = {f"{c.name.lower()}-shuffle": c2(data, c) for c in Codec if c < 32} | {
        "zstd-delta-bitshuffle": c2(data, Codec.ZSTD, (Filter.DELTA, Filter.BITSHUFFLE)),
        "lz4-bytedelta": c2(data, Codec.LZ4, (Filter.SHUFFLE, Filter.BYTEDELTA), (0, 4)),
        "blosclz-split": c2(data, Codec.BLOSCLZ, splitmode=blosc2.SplitMode.ALWAYS_SPLIT),
        "zstd-no-split": c2(data, Codec.ZSTD, splitmode=blosc2.SplitMode.NEVER_SPLIT),
        "zstd-dict": c2(ramp, Codec.ZSTD, use_dict=True, blocksize=8192),
        "lz4-dict": c2(ramp, Codec.LZ4, use_dict=True, blocksize=8192),
        "memcpyed": c2(data[:500], Codec.ZSTD, clevel=0),
        "zeros": c2(np.zeros(1000, np.uint8), Codec.ZSTD),
        "vl-zstd": vl_chunk([b"hello " * 40, b"0123456789" * 20], zstandard.compress, flags=0x95),
        "vl-delta": vl_chunk([bytes(range(100))] * 2, filters=(3,)),
        "base": BASE,
        "blosc1": BLOSC1,
        "memcpy": MEMCPY,
        "dict": DICT,
        "vl": VL,  # LIES' seeds
        "zero": special(1),
        "nan": special(2),
        "value": special(3, value=b"abcd"),
    }
    for cname, shuffle in [("lz4", 1), ("zstd", 1), ("blosclz", 2), ("zlib", 0)]:
        codec = numcodecs.Blosc(cname=cname, shuffle=shuffle, blocksize=2048)
        seeds[f"numcodecs-{cname}"] = bytes(codec.encode(items))
    return seeds


SEEDS = _seeds()
REAL = [f"{c.name.lower()}-shuffle" for c in Codec if c < 32] + ["zstd-dict", "numcodecs-lz4"]


def test_the_seeds_decode_and_cover_the_features():
    infos = {name: b2store.chunk_info(buf) for name, buf in SEEDS.items()}
    for name, buf in SEEDS.items():
        assert len(b2store.decode_chunk(buf)) == infos[name].nbytes > 0
    assert any(i.version == 2 and i.split for i in infos.values())  # Blosc1 split streams
    assert any(i.version > 2 and i.split for i in infos.values())
    assert infos["zstd-dict"].use_dict and infos["lz4-dict"].use_dict
    assert infos["memcpyed"].memcpyed and infos["zeros"].special and infos["vl-zstd"].vl_blocks


def _format_error(buf: bytes) -> FormatError:
    try:
        out = b2store.decode_chunk(buf)
    except FormatError as exc:
        return exc
    raise AssertionError(f"{len(buf)}-byte input decoded to {len(out)} bytes: {buf.hex()}")


@pytest.mark.parametrize("name", REAL + ["numcodecs-zstd", "numcodecs-blosclz"])
def test_every_truncation_raises(name):
    full = SEEDS[name]
    for n in range(len(full)):
        exc = _format_error(full[:n])
        assert exc.field in ("chunk header", "extended chunk header", "cbytes"), (n, exc)
        if n >= 16:  # the same prefix claiming to be whole: a block start or stream now lies
            _format_error(i32(full[:n], 12, n))


def _peak_memory_of_format_error(buf: bytes) -> int:
    tracemalloc.start()
    try:
        _format_error(buf)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("blocksize", [None, MAX_BLOCKSIZE], ids=["bs-kept", "bs-max"])
@pytest.mark.parametrize("name", REAL)
def test_huge_nbytes_on_a_small_chunk_raises_before_allocating(name, blocksize):
    # With the largest blocksize 4 or 5 block starts fit; the decoder once allocated 3 GiB
    # (output + 2 scratch blocks) for that before reading the first, lying, stream.
    buf = i32(SEEDS[name], 4, 2**31 - 1)
    buf = buf if blocksize is None else i32(buf, 8, blocksize)
    assert _peak_memory_of_format_error(buf) < 16 << 20


def _decode_into(buf: bytes, fill: int) -> np.ndarray:
    return b2store.decode_chunk(buf, out=np.full(b2store.chunk_info(buf).nbytes, fill, np.uint8))


GARBAGE = {  # the decoder once left output bytes of both unwritten
    # a split block of nbytes 10 < blocksize 12: 4 streams of 2 bytes, 2 bytes never stored
    "split-tail-unstored": chunk([I32.pack(0) * 4], flags=5, typesize=4, nbytes=10, blocksize=12),
    # DELTA in a VL chunk whose block 1 is longer than its reference, block 0
    "vl-delta-longer-block": vl_chunk([bytes(range(1, 11)), bytes(range(100, 200))], filters=(3,)),
}


@pytest.mark.parametrize("buf", [pytest.param(b, id=n) for n, b in (SEEDS | GARBAGE).items()])
def test_every_output_byte_comes_from_the_chunk(buf):
    try:
        zeros, ones = _decode_into(buf, 0x00), _decode_into(buf, 0xFF)
    except FormatError:
        return
    np.testing.assert_array_equal(zeros, ones)


# --- the contract, for any bytes at all ----------------------------------------------------

LEGIT_HUGE = 1 << 24  # 50 valid bytes can decode to 2 GB (runs, specials): check the layout only


def check_contract(buf: bytes) -> None:
    """Decoded bytes, each written, or FormatError/UnsupportedError, within 2 s."""
    start = time.perf_counter()
    try:
        info = b2store.chunk_info(buf)
        out = ChunkDecoder(buf) if info.nbytes > LEGIT_HUGE else b2store.decode_chunk(buf)
    except FormatError as exc:
        assert exc.field and "expected" in str(exc)
    except UnsupportedError:
        pass
    else:
        if isinstance(out, np.ndarray):  # every byte written, nothing left from the buffer
            assert out.dtype == np.uint8 and out.shape == (info.nbytes,)
            np.testing.assert_array_equal(_decode_into(buf, 0x00), out)
            np.testing.assert_array_equal(_decode_into(buf, 0xFF), out)
    assert time.perf_counter() - start < 2.0, buf.hex()


INT32 = st.sampled_from([0, 1, -1, 16, 32, 2**31 - 1, -(2**31), MAX_BLOCKSIZE, MAX_BLOCKSIZE + 1])
INT32 |= st.integers(0, 70_000) | st.integers(-(2**31), 2**31 - 1)
MUTATIONS = st.sampled_from(["flip", "header byte", "i32", "truncate", "append", "splice"])
SEED_NAMES = st.sampled_from(sorted(SEEDS))


@st.composite
def mutated_chunks(draw) -> bytes:
    buf = bytearray(SEEDS[draw(SEED_NAMES)])
    for op in draw(st.lists(MUTATIONS, min_size=1, max_size=4)):
        n = len(buf)
        if op == "flip" and n:
            buf[draw(st.integers(0, n - 1))] ^= draw(st.integers(1, 255))
        elif op == "header byte" and n:
            buf[draw(st.integers(0, min(n, 32) - 1))] = draw(st.integers(0, 255))
        elif op == "i32" and n >= 4:  # header fields, block starts, stream sizes, anything
            offset = min(draw(st.sampled_from([4, 8, 12, 32, 36, 40]) | st.integers(0, n)), n - 4)
            buf[offset : offset + 4] = I32.pack(draw(INT32))
        elif op == "truncate":
            del buf[draw(st.integers(0, n)) :]
        elif op == "append":
            buf += draw(st.binary(min_size=1, max_size=64))
        elif op == "splice":
            other = SEEDS[draw(SEED_NAMES)]
            i, j = draw(st.integers(0, n)), draw(st.integers(0, len(other)))
            buf[i : i + draw(st.integers(0, 64))] = other[j : j + draw(st.integers(1, 256))]
    return bytes(buf)


STREAM = st.sampled_from([I32.pack(0)]) | st.builds(run, st.integers(1, 300), st.integers(0, 3))
STREAM |= st.binary(max_size=48).map(raw) | st.binary(max_size=48)


@st.composite
def plausible_chunks(draw) -> bytes:
    """Header fields near their valid ranges, block starts that fit, then random streams."""
    pick = lambda *choices: draw(st.sampled_from(choices))  # noqa: E731
    nbytes, flags2, bflags = draw(st.integers(0, 2000)), pick(0, 0, 0, 1), pick(0, 0, 0, 1, 16, 48)
    bs = draw(st.just(nbytes) | st.integers(1, 2100) | st.sampled_from([0, -1, 8]))
    low_bits = draw(st.sampled_from([5, 21, 29, 1, 4, 7]) | st.integers(0, 31))
    flags = pick(0, 1, 3, 4, 6) << 5 | low_bits  # codec format, then filter/split/memcpy bits
    nblocks = -(-nbytes // min(bs, nbytes)) if bs > 0 and nbytes else 1
    nblocks = min(max(bs if flags & 5 == 5 and flags2 else nblocks, 0), 16)  # VL: bs blocks
    blocks = draw(
        st.lists(
            st.lists(STREAM, min_size=1, max_size=4).map(b"".join),
            min_size=nblocks,
            max_size=nblocks,
        )
    )
    filters = [pick(0, 0, 1, 2, 3, 4, 34, 35, 36) for _ in range(6)]
    buf = chunk(
        blocks,
        draw(st.binary(min_size=1, max_size=40)) if bflags & 1 else None,
        version=pick(1, 2, 3, 4, 5, 6, 7, 0),
        typesize=pick(1, 2, 3, 4, 8, 16, 17, 255),
        flags=flags,
        nbytes=nbytes,
        blocksize=bs,
        filters=filters,
        flags2=flags2,
        bflags=bflags,
        udcodec=pick(0, 1, 2, 4, 5, 32),
    )
    return i32(buf, 12, len(buf) + pick(0, 0, 0, -1, 1, -40))


FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.slow
@settings(FUZZ, max_examples=4000)
@given(mutated_chunks())
def test_mutated_chunks_decode_or_raise_format_error(buf):
    check_contract(buf)


@pytest.mark.slow
@settings(FUZZ, max_examples=2000)
@given(plausible_chunks())
def test_random_streams_behind_plausible_headers(buf):
    check_contract(buf)


@pytest.mark.slow
@settings(FUZZ, max_examples=1000)
@given(st.binary(min_size=16, max_size=400))
def test_random_bytes_decode_or_raise_format_error(buf):
    check_contract(buf)
