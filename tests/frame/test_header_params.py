"""The compression parameters a frame's header records (what new chunks are encoded with):
made whole from one ChunkParams by SChunk.create, checked there, and kept whole by
to_cframe, as python-blosc2 writes and reads them."""

import re

import numpy as np
import pytest

import b2store
from b2store import SChunk
from b2store.constants import MAX_BLOCKSIZE

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")


def test_to_cframe_of_a_sparse_frame_keeps_its_parameters(tmp_path):
    data = np.linspace(0, 1, 4000).reshape(40, 100)
    arr = b2store.asarray(
        data,
        tmp_path / "s.b2nd",
        contiguous=False,
        codec="lz4",
        clevel=7,
        filters=["bitshuffle"],
        splitmode="never",
        chunks=(20, 50),
        blocks=(10, 25),
    )
    frame = arr.schunk.to_cframe()
    with b2store.open(frame) as copy:
        assert copy.schunk.params == arr.schunk.params
        np.testing.assert_array_equal(copy[:], data)
    theirs = blosc2.ndarray_from_cframe(frame).schunk.cparams
    assert theirs.splitmode == blosc2.SplitMode.NEVER_SPLIT
    assert (theirs.codec, theirs.clevel) == (blosc2.Codec.LZ4, 7)


def test_a_copy_made_by_to_cframe_writes_with_the_frames_own_accuracy(tmp_path):
    # ZFP_ACC's codec_meta is its error bound (253: 10**-3); the copy lost it (0: 10**0) and
    # wrote what it was given rounded to whole units, without an error.
    pytest.importorskip("zfpy")
    data = np.linspace(0, 1, 4000).reshape(40, 100)
    arr = b2store.asarray(
        data, tmp_path / "s.b2nd", contiguous=False, codec="zfp_acc", codec_meta=253
    )
    copy = b2store.open(arr.schunk.to_cframe(), mode="a")
    copy[:] = data[::-1]
    assert np.abs(copy[:] - data[::-1]).max() < 1e-3
    theirs = blosc2.ndarray_from_cframe(copy.schunk.to_cframe()).schunk.cparams
    assert theirs.codec_meta == 253


def test_keywords_are_stored_as_python_blosc2_stores_them():
    # A BYTEDELTA meta of 0 (the typesize) is written as the typesize, as a chunk stores it
    # and as python-blosc2's SChunk writes its header.
    cparams = blosc2.CParams(
        typesize=4, filters=[blosc2.Filter.SHUFFLE, blosc2.Filter.BYTEDELTA], filters_meta=[0, 0]
    )
    theirs = blosc2.SChunk(chunksize=4000, cparams=cparams)
    theirs.append_data(np.arange(1000, dtype="<i4"))
    ours = SChunk.create(None, typesize=4, filters=["shuffle", "bytedelta"])
    assert ours.filters_meta == SChunk.open(theirs.to_cframe()).filters_meta == (0, 4, 0, 0, 0, 0)
    ours.append_data(np.arange(1000, dtype="<i4"))
    back = blosc2.schunk_from_cframe(ours.to_cframe())
    assert np.array_equal(np.frombuffer(back.decompress_chunk(0), "<i4"), np.arange(1000))


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"clevel": 12}, "clevel must be 0..9, got 12"),
        ({"typesize": 0}, f"typesize must be 1..{MAX_BLOCKSIZE}, got 0"),
        ({"blocksize": -1}, f"blocksize must be 0..{MAX_BLOCKSIZE}, got -1"),
    ],
)
def test_a_header_no_chunk_can_be_written_with_is_refused_when_made(tmp_path, bad, message):
    # (It was written, and its first append_data then failed on the header's own values.)
    path = tmp_path / "f.b2frame"
    with pytest.raises(ValueError, match=re.escape(message)):
        SChunk.create(path, **bad)
    assert not path.exists()


def test_bytedelta_on_items_wider_than_255_bytes(tmp_path):
    # Such items are stored as bytes (typesize 1 in each chunk): the header's BYTEDELTA meta
    # is resolved the same way, not to 300 (which no byte holds: a bare ValueError).
    data = np.array([b"a" * 300, b"b" * 300] * 5, "S300")
    path = tmp_path / "a.b2nd"
    arr = b2store.asarray(data, path, filters=["bytedelta"])
    assert arr.schunk.filters_meta[0] == 1
    np.testing.assert_array_equal(arr[:], data)
    arr.close()
    np.testing.assert_array_equal(blosc2.open(str(path))[:], data)
