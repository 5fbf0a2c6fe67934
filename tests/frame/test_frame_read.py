"""Reading frames: headers and trailers of every corpus frame, and every schunk case bit-exact."""

import os
from pathlib import Path

import numpy as np
import pytest
from helpers import case_id, corpus_cases, corpus_dir, recipe

from b2store.errors import FormatError
from b2store.frame.header import FrameHeader
from b2store.frame.schunk import SChunk
from b2store.frame.trailer import TRAILER_TAIL_LEN, read_trailer, trailer_bytes, trailer_span

FRAME_KINDS = {"schunk", "b2nd", "caterva"}
ALL_FRAMES = [("compat", c) for c in corpus_cases("compat", FRAME_KINDS)] + [
    ("generated", c) for c in corpus_cases("generated", FRAME_KINDS)
]
SCHUNKS = [("compat", c) for c in corpus_cases("compat", {"schunk"})] + [
    ("generated", c) for c in corpus_cases("generated", {"schunk"})
]


def ids(value):
    return case_id(value) if isinstance(value, dict) else value


def frame_file(folder: str, case: dict) -> Path:
    path = corpus_dir(folder) / case["path"]
    return path / "chunks.b2frame" if path.is_dir() else path


@pytest.mark.parametrize("folder,case", ALL_FRAMES, ids=ids)
def test_header_and_trailer_round_trip(folder, case):
    data = frame_file(folder, case).read_bytes()
    header = FrameHeader.from_bytes(data)
    frame = memoryview(data)[: header.frame_len]
    start, length = trailer_span(
        bytes(frame[-TRAILER_TAIL_LEN:]), header.frame_len, header.header_len
    )
    vlmeta = read_trailer(frame[start:])
    if header.nfields == 14:
        # What b2store writes back is byte for byte what c-blosc2 wrote.
        assert header.to_bytes() == bytes(frame[: header.header_len])
        assert trailer_bytes(vlmeta) == bytes(frame[start:])
    else:
        assert case.get("legacy_header")


@pytest.mark.parametrize("folder,case", SCHUNKS, ids=ids)
def test_schunk_cases_read_bit_exact(folder, case):
    root = corpus_dir(folder)
    if isinstance(case.get("expected"), dict):
        expected = recipe(case["expected"])
    else:
        expected = np.load(root / (case.get("expected_npy") or case["expected"])).view(np.uint8)
    with SChunk.open(root / case["path"]) as schunk:
        assert schunk.contiguous == case.get("contiguous", True)
        data = np.concatenate([schunk.decompress_chunk(i) for i in range(schunk.nchunks)])
        assert schunk.nbytes == len(data)
    np.testing.assert_array_equal(data, expected.reshape(-1))


def test_sparse_and_contiguous_frames_read_alike():
    root = corpus_dir("generated")
    with SChunk.open(root / "f8_2d_sframe.b2nd") as sparse:
        assert not sparse.contiguous and sparse.nchunks == 3
        assert sparse.meta.keys() == {"b2nd"}
        chunks = [bytes(sparse.get_chunk(i)) for i in range(3)]
    assert chunks[0] == (root / "f8_2d_sframe.b2nd" / "00000000.chunk").read_bytes()


def test_frames_from_bytes_and_with_trailing_garbage(tmp_path):
    data = (corpus_dir("generated") / "schunk_u2.b2frame").read_bytes()
    with SChunk.open(data) as in_memory:
        first = in_memory.decompress_chunk(0)
    path = tmp_path / "padded.b2frame"
    path.write_bytes(data + b"\xcd" * 100)
    with SChunk.open(path) as padded:
        np.testing.assert_array_equal(padded.decompress_chunk(0), first)
        assert padded.nchunks == 6


def test_legacy_2020_frame_with_usermeta():
    compat = corpus_dir("compat")
    case = [c for c in corpus_cases("compat", {"schunk"}) if c.get("legacy_header")][0]
    with SChunk.open(compat / case["path"]) as schunk:
        assert schunk.header.nfields == 13 and schunk.nchunks == 10
        np.testing.assert_array_equal(
            schunk.decompress_chunk(3).view("<i4"), np.arange(64000, dtype="<i4") * 3
        )


def test_truncated_frames_raise_format_error():
    data = (corpus_dir("generated") / "f8_2d_vlmeta.b2nd").read_bytes()
    for cut in list(range(0, 200)) + list(range(len(data) - 300, len(data))):
        # refused at once, by the first field the cut leaves short: the magic of an empty
        # input, the 24-byte fixed header, then frame_len (longer than the bytes there are)
        if cut == 0:
            match = "an empty file"
        elif cut < 24:
            match = f"^frame header at offset 0: expected 24 bytes .* found {cut} bytes$"
        else:
            match = f"^frame_len at offset 16: expected at most the {cut} bytes there are"
        with pytest.raises(FormatError, match=match):
            with SChunk.open(data[:cut]) as schunk:
                for i in range(schunk.nchunks):
                    schunk.decompress_chunk(i)


def test_corrupt_offsets_raise_format_error():
    data = bytearray((corpus_dir("generated") / "schunk_u2.b2frame").read_bytes())
    header = FrameHeader.from_bytes(data)
    with SChunk.open(bytes(data)) as schunk:
        index_at = header.header_len + header.cbytes
    # A memcpyed index of int64 offsets: point chunk 0 past the chunks section.
    assert data[index_at + 2] & 0x02, "expected a memcpyed offsets chunk"
    data[index_at + 32 : index_at + 40] = (10**9).to_bytes(8, "little")
    with SChunk.open(bytes(data)) as schunk:
        with pytest.raises(FormatError, match=r"offsets\[0\]"):
            schunk.get_chunk(0)


def test_missing_sparse_chunk_file(tmp_path):
    import shutil

    src = corpus_dir("generated") / "schunk_sframe.b2frame"
    copy = tmp_path / "s.b2frame"
    shutil.copytree(src, copy)
    os.remove(copy / "00000003.chunk")
    with SChunk.open(copy) as schunk:
        with pytest.raises(FormatError, match="00000003.chunk"):
            schunk.get_chunk(3)


@pytest.mark.parametrize(
    "edit,field",
    [
        ((10, "d2e10000a5"), "header_len"),  # negative: once reached os.pread as a size
        ((10, "d200000010"), "header_len"),  # shorter than the fixed fields
        ((10, "d27fffffff"), "header_len"),  # longer than the frame
        ((15, "cfffffffffffffffff"), "frame_len"),  # past any int64 offset
    ],
)
def test_absurd_lengths_in_the_header_raise_format_error(tmp_path, edit, field):
    import b2store

    at, hexbytes = edit
    data = bytearray((corpus_dir("generated") / "f8_2d_vlmeta.b2nd").read_bytes())
    data[at : at + len(hexbytes) // 2] = bytes.fromhex(hexbytes)
    with pytest.raises(FormatError, match=f"^{field} at offset") as err:
        FrameHeader.peek_len(data)
    assert err.value.field == field
    path = tmp_path / "bad.b2nd"
    path.write_bytes(data)
    for source in (path, bytes(data)):
        with pytest.raises(FormatError, match=f"^{field} at offset") as err:
            b2store.open(source)
        assert err.value.field == field


def test_a_frame_opened_again_reuses_its_parsed_header_until_it_changes(tmp_path):
    """Parsed headers are kept by their bytes: the same file opened twice shares one, a
    frame changed since gets its new header, and a corrupt header is refused every time
    (failures are never kept)."""
    import b2store

    path = tmp_path / "f.b2frame"
    chunk = b2store.encode_chunk(np.arange(100, dtype="<i4"), codec="lz4")
    with SChunk.create(path) as writer:
        writer.append_chunk(chunk)
    first, second = SChunk.open(path), SChunk.open(path)
    assert first.header is second.header and first.nchunks == 1
    with SChunk.open(path, mode="a") as writer:
        writer.append_chunk(chunk)
    third = SChunk.open(path)
    assert third.header is not first.header and third.nchunks == 2
    assert first.header.nbytes == 400 and third.header.nbytes == 800
    for s in (first, second, third):
        s.close()
    raw = bytearray(path.read_bytes())
    raw[1:10] = b"not-blosc"  # the magic
    path.write_bytes(bytes(raw))
    for _ in range(2):
        with pytest.raises(FormatError, match="magic"):
            SChunk.open(path)


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_partial_reads_read_a_chunks_prefix_once_per_state(tmp_path, monkeypatch, contiguous):
    """A chunk the C loop leaves to the Python path (one with a dictionary) read block by
    block: its header and block starts are read once, after that only the dictionary and
    the block asked for. Every block decodes right."""
    import b2store
    from b2store.frame import sources

    data = np.arange(64 * 1024, dtype="<i4") % 1000
    chunk = b2store.encode_chunk(data, codec="zstd", use_dict=True, blocksize=16 * 1024)
    assert b2store.chunk_info(chunk).use_dict
    path = tmp_path / ("f.b2frame" if contiguous else "f.b2s")
    with SChunk.create(path, contiguous=contiguous) as writer:
        writer.append_chunk(chunk)
    reads = []
    plain = sources.FileSource.read

    def counting(self, offset, size):
        reads.append(size)
        return plain(self, offset, size)

    monkeypatch.setattr(sources.FileSource, "read", counting)
    s = SChunk.open(path)
    out = np.zeros(data.nbytes, np.uint8)
    blocks = b2store.chunk_info(chunk).nblocks
    s.decode_blocks(0, [1], out)
    first = len(reads)
    for j in range(2, blocks):
        before = len(reads)
        s.decode_blocks(0, [j], out)
        assert len(reads) - before == 2, (j, reads[before:])  # the dictionary, the block
    assert out.view("<i4")[4096:].tolist() == data[4096:].tolist()
    got = s.get_chunk_blocks(0, [0])
    assert b2store.decode_chunk(got).view("<i4")[:4096].tolist() == data[:4096].tolist()
    assert first > 1
    s.close()


@pytest.mark.parametrize(
    "damage, field",
    [
        (lambda size: size - 300, r"csize of stream \d+ of block \d+ of chunk {n} at offset"),
        (lambda size: size + 70000, r"cbytes of chunk {n} at offset 12"),
    ],
    ids=["a stream past the chunk's end", "cbytes past the frame"],
)
def test_an_error_in_a_chunks_bytes_names_the_chunk(tmp_path, damage, field):
    import struct

    import b2store

    zarr = pytest.importorskip("zarr")
    from b2store.integrations.zarr.store import B2ndStore

    data = np.arange(100_000, dtype="f8").reshape(100, 1000)
    path = tmp_path / "a.b2nd"
    b2store.asarray(data, urlpath=str(path), chunks=(20, 1000), blocks=(5, 1000))
    raw = bytearray(path.read_bytes())
    with b2store.open(path) as arr:
        chunk = bytes(arr.schunk.get_chunk(2))
    at = raw.find(chunk)
    struct.pack_into("<i", raw, at + 12, damage(len(chunk)))  # the chunk's cbytes
    path.write_bytes(bytes(raw))
    with b2store.open(path) as arr:
        for read in (lambda: arr[:], lambda: arr[40:60], lambda: arr.schunk.decompress_chunk(2)):
            with pytest.raises(FormatError, match=field.format(n=2)):
                read()
        np.testing.assert_array_equal(arr[:40], data[:40])  # the other chunks read
    with pytest.raises(FormatError, match=field.format(n="(c/2/0|2)")):  # (key or number)
        zarr.open_array(B2ndStore(path), mode="r")[:]
