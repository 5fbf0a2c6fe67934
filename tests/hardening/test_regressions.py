"""Every input the fuzzers found, kept: each must now be refused with a B2StoreError (or read),
quickly and within the memory its header justifies."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import numpy as np
import pytest
from hardening.fuzz_targets import run_one

import b2store
from b2store import FormatError, LimitError, SChunk
from b2store.frame.trailer import read_trailer


def test_an_empty_trailer_is_a_format_error():
    # vlmeta target: read_trailer(b"") raised IndexError.
    with pytest.raises(FormatError, match="trailer"):
        read_trailer(memoryview(b""))


def test_a_directory_without_an_index_is_a_format_error(tmp_path):
    # sframe target: a sparse frame without chunks.b2frame raised FileNotFoundError.
    (tmp_path / "x.b2nd").mkdir()
    (tmp_path / "x.b2nd" / "00000000.chunk").write_bytes(b"junk")
    with pytest.raises(FormatError, match="chunks.b2frame"):
        b2store.open(tmp_path / "x.b2nd")
    (tmp_path / "y.b2nd").mkdir()
    (tmp_path / "y.b2nd" / "chunks.b2frame").mkdir()  # the index is a directory
    with pytest.raises(FormatError, match="chunks.b2frame"):
        b2store.open(tmp_path / "y.b2nd")


def test_a_40_byte_nan_chunk_of_906_mb_is_bounded_by_the_codecs_limit():
    # codec target, a timeout (10 s): 40 bytes whose header says 906 MB of NaN, under the
    # 1 GiB default, so filling it was "justified"; a codec whose max_buffer_size is lower
    # refuses it before allocating, and the library's limit does the same.
    from b2store.integrations.numcodecs.codec import Blosc2

    data = base64.b64decode("BAE1BADoAzYA6AMAKAAAADEAAAAAAAEAAAAAAAAAACQAAAAAAOgAAQA=")
    # As found it is also a lying special chunk (NaN with 8 bytes past the header), now
    # refused as such at once; the same header made honest (cbytes 32) is the limit's case.
    with pytest.raises(FormatError, match="cbytes at offset 12: expected exactly the 32-byte"):
        b2store.chunk_info(data)
    data = data[:12] + (32).to_bytes(4, "little") + data[16:32]
    assert b2store.chunk_info(data).nbytes == 906225664
    codec = Blosc2()
    codec.max_buffer_size = 4 << 20
    start = time.monotonic()
    with pytest.raises(LimitError, match=r"Blosc2\.max_buffer_size"):
        codec.decode(data)
    with pytest.raises(LimitError, match=r"Limits\.max_chunk_nbytes"):
        b2store.decode_chunk(data, max_nbytes=906225663)
    assert time.monotonic() - start < 1.0


def test_a_sparse_frame_created_then_killed_is_never_half_written(tmp_path):
    # The sframe kill test's rare failure: a writer killed inside SChunk.create left a
    # directory whose chunks.b2frame was partly written. Creation now renames a complete
    # frame into place; what a crash leaves beside it is a dot-named temporary.
    path = tmp_path / "x.b2frame"
    s = SChunk.create(path, contiguous=False, typesize=4)
    s.append_data(np.arange(10, dtype="<i4"))
    s.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.b2frame"]
    s = SChunk.create(path, contiguous=False, typesize=4)  # replaces it whole
    assert s.nchunks == 0


FINDINGS = Path(__file__).parent / "findings"


def test_a_chunk_with_fewer_blocks_than_the_array_says_is_a_format_error():
    # cframe target: partial.plan_blocks raised IndexError("block 1 of 1") for a chunk whose
    # header holds fewer blocks than the b2nd geometry asks for.
    data = (FINDINGS / "cframe-fewer-blocks.b2nd").read_bytes()
    run_one("cframe", data)
    with b2store.open(data) as a, pytest.raises(FormatError, match="blocks"):
        a[...]


def test_an_empty_array_numpy_cannot_shape_is_a_format_error():
    # sframe target: shape (12, 0, 1801439850948198650) has no items, but numpy cannot make
    # an array of that shape (ValueError: array is too big).
    run_one("sframe", (FINDINGS / "sframe-huge-empty-shape.files").read_bytes())
    from b2store.nd.meta import B2ndMeta

    with pytest.raises(FormatError, match="shape"):
        B2ndMeta(
            shape=(12, 0, 1801439850948198650),
            chunkshape=(6, 10, 50),
            blockshape=(3, 5, 10),
            dtype=np.dtype("V4"),
        )


def test_a_zip_member_name_that_is_not_utf8_is_a_format_error(tmp_path):
    # b2z target: a central-directory name flagged UTF-8 (bit 11) that is not raised
    # UnicodeDecodeError.
    path = tmp_path / "t.b2z"
    path.write_bytes((FINDINGS / "b2z-bad-utf8-name.b2z").read_bytes())
    with pytest.raises(FormatError, match="member name"):
        b2store.open_tree(path).arrays()
    run_one("b2z", path.read_bytes())


@pytest.mark.parametrize("data", [b"PK\x05\x06", b"PK\x05\x06" + bytes(13), b"xPK\x05\x06\x00"])
def test_a_zip_shorter_than_its_end_record_is_a_format_error(tmp_path, data):
    # b2z and zarrstore targets: a file of 17 bytes holding the end-record signature made
    # struct.unpack_from read past it (struct.error).
    path = tmp_path / "t.b2z"
    path.write_bytes(data)
    with pytest.raises(FormatError, match=r"\.b2z end of central directory: expected a zip file"):
        b2store.open_tree(path)
    path.write_bytes((FINDINGS / "b2z-short-end-record.b2z").read_bytes())
    run_one("b2z", path.read_bytes())
