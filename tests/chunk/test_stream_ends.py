"""Every stream decoder reads exactly the bytes its block's stream declares.

A stream cut short, or followed by bytes that are not its, is a FormatError naming the block,
on the C block loop and the Python one alike. Where c-blosc2 leaves bytes after a stream that
ends itself (zlib, NDLZ), b2store leaves them too and reads the same values. python-blosc2 is
the oracle of each case: its ``decompress2`` for bare chunks, its arrays for the plugins (ZFP
in test_zfp.py, JPEG 2000 in test_jpeg2000.py).
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
import zstandard
from helpers import blosc2_file_with_chunk, restream

import b2store
from b2store import FormatError
from b2store.chunk import native

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")

CODECS = {"blosclz": "BloscLZ", "lz4": "LZ4", "lz4hc": "LZ4", "zlib": "zlib", "zstd": "Zstd"}
CUT = {
    "1 byte": lambda s: s[:-1],
    "4 bytes": lambda s: s[:-4],
    "half": lambda s: s[: len(s) // 2],
}
AFTER = {
    "a zero byte": lambda s: s + b"\0",
    "8 bytes of 0xff": lambda s: s + b"\xff" * 8,
    "its own first 16 bytes": lambda s: s + s[:16],
}
DATA = (np.cumsum(np.random.default_rng(1).integers(-3, 4, 64 * 1024)) + 1000).astype("<i4")


@pytest.fixture(params=["c loop", "python loop"])
def loop(request, monkeypatch):
    """The test body on the C block loop (where a stream it refuses goes to the Python loop,
    which names the field), then on the Python loop alone."""
    if request.param == "c loop":
        request.getfixturevalue("native_on")
    else:
        monkeypatch.setattr(native, "enabled", lambda: False)
    return request.param


def _chunk(codec: str, **kw) -> bytes:
    return blosc2.compress2(
        DATA, typesize=4, codec=blosc2.Codec[codec.upper()], clevel=5, blocksize=32768,
        splitmode=blosc2.SplitMode.NEVER_SPLIT, nthreads=1, **kw,
    )  # fmt: skip


def _stream_error(codec: str) -> str:
    return rf"{CODECS[codec]} stream of block 1 at offset \d+: expected "


@pytest.mark.parametrize("cut", CUT)
@pytest.mark.parametrize("codec", CODECS)
def test_a_stream_cut_short_is_refused_as_python_blosc2_refuses_it(loop, codec, cut):
    bad = restream(_chunk(codec), 1, CUT[cut])
    with pytest.raises(ValueError, match="Error while decompressing"):
        blosc2.decompress2(bad)
    with pytest.raises(FormatError, match=_stream_error(codec)):
        b2store.decode_chunk(bad)


def test_a_zlib_stream_cut_into_its_checksum_is_refused(loop):
    # The deflate data whole, the Adler-32 after it cut: every item inflates, unchecked.
    # (b2store served it: the Python loop did not ask for the stream's end.)
    bad = restream(_chunk("zlib"), 1, lambda s: s[:-2])
    with pytest.raises(ValueError, match="Error while decompressing"):
        blosc2.decompress2(bad)
    with pytest.raises(FormatError, match=r"zlib stream of block 1 .*checksum.*cut short"):
        b2store.decode_chunk(bad)


@pytest.mark.parametrize("after", AFTER)
@pytest.mark.parametrize("codec", CODECS)
def test_bytes_after_a_stream_are_refused_or_ignored_as_python_blosc2_does(loop, codec, after):
    bad = restream(_chunk(codec), 1, AFTER[after])
    if codec == "zlib":
        # c-blosc2's uncompress stops at the stream's end and leaves what follows.
        assert bytes(blosc2.decompress2(bad)) == DATA.tobytes()
        assert b2store.decode_chunk(bad).tobytes() == DATA.tobytes()
        return
    with pytest.raises(ValueError, match="Error while decompressing"):
        blosc2.decompress2(bad)
    with pytest.raises(FormatError, match=_stream_error(codec)):
        b2store.decode_chunk(bad)


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_with_a_dictionary_too(loop, codec):
    good = _chunk(codec, use_dict=True)
    assert good[31] & 1, "python-blosc2 wrote no dictionary"
    for change in (lambda s: s[:-1], lambda s: s + b"\0"):
        bad = restream(good, 1, change)
        with pytest.raises(ValueError, match="Error while decompressing"):
            blosc2.decompress2(bad)
        with pytest.raises(FormatError, match=_stream_error(codec)):
            b2store.decode_chunk(bad)


ZSTD_NOTHING = {
    "a skippable frame": struct.pack("<II", 0x184D2A50, 3) + b"xyz",
    "an empty frame": zstandard.ZstdCompressor().compress(b""),
}


@pytest.mark.parametrize("frame", ZSTD_NOTHING)
def test_a_zstd_frame_after_the_stream_is_refused_though_it_adds_nothing(native_on, frame):
    """c-blosc2's ZSTD_decompressDCtx reads on through frames that add no bytes (so did
    b2store's C loop); no writer puts any there, and b2store reads one frame a stream."""
    bad = restream(_chunk("zstd"), 1, lambda s: s + ZSTD_NOTHING[frame])
    assert bytes(blosc2.decompress2(bad)) == DATA.tobytes()
    assert native.quick_decode(bad, None, 1, 1 << 30) is None  # the C pass leaves it
    with pytest.raises(FormatError, match=_stream_error("zstd") + "one frame .*nothing after"):
        b2store.decode_chunk(bad)


# --- the plugins b2store's own kernels run: NDLZ, and NDCELL/NDMEAN over a codec --------------


def _plugin_file(tmp_path, data, blocks, cparams):
    path = tmp_path / "theirs.b2nd"
    theirs = blosc2.asarray(data, chunks=data.shape, blocks=blocks, urlpath=str(path), mode="w",
                            cparams={"nthreads": 1, **cparams})  # fmt: skip
    return path, theirs[...], theirs.schunk.get_chunk(0)


def _ndlz_data() -> np.ndarray:
    data = (np.add.outer(np.arange(64), np.arange(48)) // 3 % 7).astype("u1")
    data[10:20, 5:30] = np.random.default_rng(3).integers(0, 255, (10, 25))
    return data


@pytest.mark.parametrize("meta", [4, 8])
def test_ndlz_refuses_a_stream_cut_short_and_leaves_bytes_after_it_as_c_blosc2(tmp_path, meta):
    """NDLZ's stream ends with its last cell: c-blosc2 refuses one cut short (a cell
    unread) and leaves bytes after the last cell, as b2store does."""
    cparams = {"codec": blosc2.Codec.NDLZ, "codec_meta": meta, "filters": [blosc2.Filter.NOFILTER]}
    path, want, chunk = _plugin_file(tmp_path, _ndlz_data(), (32, 48), cparams)
    blosc2_file_with_chunk(path, 0, restream(chunk, 1, lambda s: s[:-1]))
    with pytest.raises(RuntimeError, match="getting the buffer"):
        blosc2.open(str(path))[...]
    with (
        b2store.open(path) as arr,
        pytest.raises(
            FormatError,
            match=r"NDLZ stream of block 1 of chunk 0 at offset \d+: expected to inflate",
        ),
    ):
        arr[...]
    blosc2_file_with_chunk(path, 0, restream(chunk, 1, lambda s: s + b"\x01\x02\x03"))
    assert np.array_equal(blosc2.open(str(path))[...], want)
    with b2store.open(path) as arr:
        assert np.array_equal(arr[...], want)


@pytest.mark.parametrize(
    "filt,codec", [(blosc2.Filter.NDCELL, "ZSTD"), (blosc2.Filter.NDMEAN, "LZ4")]
)
def test_ndcell_and_ndmean_blocks_come_from_exactly_their_streams(tmp_path, filt, codec):
    """The filters take the block the codec inflated, exactly its size: a stream cut short or
    followed by other bytes is refused before either runs (NDCELL over Zstd was served with
    bytes after its frame)."""
    data = np.cumsum(np.random.default_rng(5).normal(size=(32, 24)), axis=0).astype("f4")
    cparams = {"codec": blosc2.Codec[codec], "filters": [filt], "filters_meta": [4]}
    path, want, chunk = _plugin_file(tmp_path, data, (16, 24), cparams)
    assert int.from_bytes(chunk[4:8], "little") > int.from_bytes(chunk[12:16], "little")
    for change in (lambda s: s[:-1], lambda s: s + b"\xff" * 8):
        blosc2_file_with_chunk(path, 0, restream(chunk, 1, change))
        with pytest.raises(RuntimeError, match="getting the buffer"):
            blosc2.open(str(path))[...]
        with (
            b2store.open(path) as arr,
            pytest.raises(
                FormatError,
                match=rf"{CODECS[codec.lower()]} stream of block 1 of chunk 0 at offset",
            ),
        ):
            arr[...]
    blosc2_file_with_chunk(path, 0, chunk)
    with b2store.open(path) as arr:
        assert np.array_equal(arr[...], want)
