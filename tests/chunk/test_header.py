"""The chunk header: parsing, writing back, and what each field means."""

import struct

import lz4.block
import numpy as np
import pytest

import b2store
from b2store import Codec, Filter, SpecialValue
from b2store.chunk.header import ChunkHeader


def blosc1_header(flags, typesize, nbytes, blocksize, cbytes, version=2):
    return struct.pack("<BBBBiii", version, 1, flags, typesize, nbytes, blocksize, cbytes)


def extended_header(
    nbytes,
    blocksize,
    cbytes,
    *,
    flags=0x05,
    typesize=4,
    filters=(0,) * 6,
    filters_meta=(0,) * 6,
    udcodec=0,
    flags2=0,
    blosc2_flags=0,
    version=5,
):
    return blosc1_header(flags, typesize, nbytes, blocksize, cbytes, version) + struct.pack(
        "<6BBB6BBB", *filters, udcodec, 0, *filters_meta, flags2, blosc2_flags
    )


def test_round_trip_of_both_header_sizes():
    for raw in (
        blosc1_header(0x21, 8, 1000, 1000, 1016) + bytes(1000),
        extended_header(64, 64, 96, filters=(0, 0, 0, 3, 0, 1), filters_meta=(0, 0, 0, 0, 0, 4))
        + bytes(64),
    ):
        header = ChunkHeader.from_bytes(raw)
        assert header.to_bytes() == raw[: header.header_size]


def test_extended_header_follows_the_flags_not_the_version():
    # A version-4 chunk of the 2.0 betas with a 16-byte header: flags 0x24 (lz4, bitshuffle).
    info = b2store.chunk_info(blosc1_header(0x24, 4, 128, 128, 144, version=4) + bytes(128))
    assert info.header_size == 16 and info.filters[5] == Filter.BITSHUFFLE
    # A version-2 header with both shuffle bits set is read as extended, as c-blosc2 does.
    assert b2store.chunk_info(extended_header(0, 1, 32, version=2)).header_size == 32


def test_blosc1_flags_give_the_pipeline():
    info = b2store.chunk_info(blosc1_header(0x08 | 0x01 | 0x02, 4, 16, 16, 32) + bytes(16))
    assert info.filters == (0, 0, 0, 0, Filter.DELTA, Filter.SHUFFLE)
    assert info.memcpyed and info.codec == Codec.BLOSCLZ


def test_alpha_version_3_has_five_filter_slots():
    raw = extended_header(64, 64, 96, flags=0x07, filters=(0, 0, 0, 0, 1, 2), version=3)
    info = b2store.chunk_info(raw + bytes(64))
    assert info.filters == (0, 0, 0, 0, Filter.SHUFFLE, 0)


@pytest.mark.parametrize(
    "fmt,udcodec,codec",
    [
        (0, 0, Codec.BLOSCLZ),
        (1, 1, Codec.LZ4),
        (1, 2, Codec.LZ4HC),
        (1, 0, Codec.LZ4),
        (3, 4, Codec.ZLIB),
        (4, 5, Codec.ZSTD),
        (4, 0, Codec.ZSTD),
        (6, 33, Codec.ZFP_ACC),
        (6, 200, 200),
    ],
)
def test_codec_from_format_bits_and_byte_22(fmt, udcodec, codec):
    raw = extended_header(64, 64, 96, flags=0x05 | 0x02 | fmt << 5, udcodec=udcodec)
    assert b2store.chunk_info(raw + bytes(64)).codec == codec


def test_plugin_codec_decodes_to_a_named_unsupported_error():
    raw = extended_header(64, 64, 200, flags=0x05 | 6 << 5, udcodec=33) + bytes(168)
    with pytest.raises(b2store.UnsupportedError, match="ZFP_ACC"):
        b2store.decode_chunk(raw)


def test_builtin_codec_under_user_format_decodes():
    payload = lz4.block.compress(bytes(range(64)) * 4, store_size=False)
    body = struct.pack("<i", 36) + struct.pack("<i", len(payload)) + payload
    raw = extended_header(
        256, 256, 32 + len(body), flags=0x05 | 0x10 | 6 << 5, udcodec=1, typesize=1
    )
    assert bytes(b2store.decode_chunk(raw + body)) == bytes(range(64)) * 4


def test_special_values_and_flags():
    raw = extended_header(40, 40, 32, blosc2_flags=0x10 | 0x02)
    info = b2store.chunk_info(raw)
    assert info.special == SpecialValue.ZERO and info.big_endian and info.nblocks == 0
    value = extended_header(40, 40, 36, blosc2_flags=0x30) + b"\x01\x02\x03\x04"
    assert bytes(b2store.decode_chunk(value)) == b"\x01\x02\x03\x04" * 10


def test_info_of_a_real_chunk():
    blosc2 = pytest.importorskip("blosc2")
    data = np.arange(100_000, dtype="<f8")
    chunk = blosc2.compress2(
        data,
        typesize=8,
        codec=blosc2.Codec.LZ4HC,
        clevel=5,
        filters=[blosc2.Filter.DELTA, blosc2.Filter.SHUFFLE],
        use_dict=True,
    )
    info = b2store.chunk_info(chunk)
    assert (info.version, info.nbytes, info.cbytes, info.typesize) == (5, 800_000, len(chunk), 8)
    assert info.codec == Codec.LZ4HC and info.use_dict and info.clevel is None
    assert info.filters[:2] == (Filter.DELTA, Filter.SHUFFLE)
    assert info.nblocks == -(-800_000 // info.blocksize)


def test_blocks_stored_out_of_order_decode_in_order():
    # Build a two-block memcpy-stream chunk by hand, block 1's streams stored first.
    block0, block1 = bytes(range(100)), bytes(range(100, 200))
    stream0 = struct.pack("<i", 100) + block0  # csize == neblock: stored raw
    stream1 = struct.pack("<i", 100) + block1
    start1, start0 = 32 + 8, 32 + 8 + len(stream1)
    body = struct.pack("<ii", start0, start1) + stream1 + stream0
    raw = extended_header(200, 100, 32 + len(body), flags=0x05 | 0x10, typesize=1)
    assert bytes(b2store.decode_chunk(raw + body)) == block0 + block1


def test_split_blocks_and_the_short_last_block():
    # typesize 2, blocksize 8: block 0 as two streams (split), the 4-byte last block as one.
    def raw_stream(b):
        return struct.pack("<i", len(b)) + b

    streams0 = raw_stream(b"\x00\x02\x04\x06") + raw_stream(b"\x01\x03\x05\x07")
    last = raw_stream(b"\x08\x09\x0a\x0b")
    starts = struct.pack("<ii", 40, 40 + len(streams0))
    raw = extended_header(12, 8, 40 + len(streams0) + len(last), flags=0x05, typesize=2)
    info = b2store.chunk_info(raw + starts + streams0 + last)
    assert info.split and info.nblocks == 2
    # No filters: stream bytes land as they are (the split is of the filtered block).
    assert bytes(b2store.decode_chunk(raw + starts + streams0 + last)) == (
        b"\x00\x02\x04\x06\x01\x03\x05\x07\x08\x09\x0a\x0b"
    )


def test_decode_into_out_checks_its_size_and_writability():
    chunk = blosc1_header(0x02, 1, 4, 4, 20) + b"abcd"
    with pytest.raises(b2store.FormatError, match=r"^nbytes at offset 4: expected 3 \(the bytes"):
        b2store.decode_chunk(chunk, out=bytearray(3))
    with pytest.raises(ValueError, match="writable"):
        b2store.decode_chunk(chunk, out=bytes(4))
    out = np.zeros(2, "<u2")
    b2store.decode_chunk(chunk, out=out)
    assert out.tobytes() == b"abcd"
