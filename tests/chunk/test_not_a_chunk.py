"""Bytes that are not a chunk (text, frames, other formats) are FormatErrors naming the version
field or the frame; UnsupportedError stays for valid chunks with features b2store lacks."""

import struct

import numpy as np
import pytest

import b2store
from b2store import FormatError, UnsupportedError

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the frames")

TEXT = b"hello, this is a text file and certainly not a Blosc chunk\n" * 4


def chunk_with(version: int, flags2: int = 0) -> bytes:
    good = bytearray(b2store.encode_chunk(np.arange(1000, dtype="<i4"), codec="lz4"))
    good[0] = version
    good[30] = flags2
    return bytes(good)


@pytest.mark.parametrize("reader", [b2store.decode_chunk, b2store.chunk_info])
@pytest.mark.parametrize(
    "data",
    [TEXT, TEXT[:20], b"\x89PNG\r\n\x1a\n" + bytes(40), b"PK\x03\x04" + bytes(60), bytes(40)],
    ids=["text", "short-text", "png", "zip", "zeros"],
)
def test_garbage_is_a_format_error_naming_the_version(reader, data):
    with pytest.raises(FormatError, match=r"^version at offset 0: expected a chunk format"):
        reader(data)


@pytest.mark.parametrize("version", [16, 104, 158, 255])
def test_implausible_versions_are_format_errors(version):
    with pytest.raises(FormatError, match=f"^version at offset 0: .*found {version}$"):
        b2store.decode_chunk(chunk_with(version))


def test_newer_plausible_versions_read_or_name_what_they_add():
    data = np.arange(1000, dtype="<i4")
    # c-blosc2 reads a newer version that adds no unknown flags; so does b2store.
    np.testing.assert_array_equal(b2store.decode_chunk(chunk_with(7)).view("<i4"), data)
    # With an unknown flag it is a valid chunk of a newer format: unsupported, not corrupt.
    with pytest.raises(UnsupportedError, match="chunk format version 7"):
        b2store.decode_chunk(chunk_with(7, flags2=0x02))
    # But a newer version with a lying header is corrupt first.
    lying = bytearray(chunk_with(7, flags2=0x02))
    lying[12:16] = struct.pack("<i", 10**6)
    with pytest.raises(FormatError, match="^cbytes"):
        b2store.decode_chunk(bytes(lying))


@pytest.mark.parametrize("contiguous", [True, False])
def test_frames_handed_to_the_chunk_decoder_say_so(contiguous, tmp_path):
    # HDF5's Blosc2 filter (hdf5plugin, PyTables) stores every HDF5 chunk as a whole frame.
    data = np.arange(5000, dtype="<f8")
    if contiguous:
        frame = blosc2.SChunk(chunksize=8000, data=data).to_cframe()
    else:
        frame = blosc2.asarray(data.reshape(50, 100), chunks=(10, 100)).to_cframe()
    for reader in (b2store.decode_chunk, b2store.chunk_info):
        with pytest.raises(FormatError, match="a Blosc2 frame: open it with b2store.open"):
            reader(frame)
    # And b2store.open reads the same bytes.
    assert b2store.open(frame) is not None
