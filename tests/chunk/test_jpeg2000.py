"""The JPEG 2000 plugins' arrays (blosc2_grok, codec 37; blosc2_openhtj2k, codec 36), read
through imagecodecs' OpenJPEG where its decoding is python-blosc2's bit for bit, refused,
named, where it is not.

The arrays are in tests/fixture/jpeg2000 (python-blosc2 4.1.2 wrote them: newer releases no
longer write with these plugins), with python-blosc2's own reading of each.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import restream

import b2store

HERE = Path(__file__).resolve().parents[1] / "fixture" / "jpeg2000"
DECODED = [
    "grok_u8_two_blocks",
    "grok_u8_edge_blocks",
    "grok_u16_lossy",
    "grok_rgb_j2k",
    "grok_i16_ht",
    "htj2k_rgb_lossless",
    "htj2k_gray_lossless",
]
REFUSED = {
    "grok_rgb_irreversible_mct": r"GROK \(id 37, blosc2_grok\).*multi-component transform",
    "htj2k_gray_lossy": r"OPENHTJ2K \(id 36, blosc2_openhtj2k\).*lossy",
}


def _expected(name: str) -> np.ndarray:
    with np.load(HERE / "expected.npz") as npz:
        return npz[name]


def _first_stream(chunk: bytes) -> tuple[int, int]:
    start = struct.unpack_from("<i", chunk, 32)[0]
    return start + 4, struct.unpack_from("<i", chunk, start)[0]


@pytest.fixture
def imagecodecs():
    return pytest.importorskip("imagecodecs", reason="JPEG 2000 needs the jpeg2000 extra")


@pytest.mark.parametrize("name", DECODED)
def test_reads_as_python_blosc2_reads(imagecodecs, name):
    want = _expected(name)
    with b2store.open(HERE / f"{name}.b2nd") as arr:
        assert arr.dtype == want.dtype and arr.shape == want.shape
        assert np.array_equal(arr[...], want)
        key = tuple(slice(1, None, 3) for _ in want.shape)
        assert np.array_equal(arr[key], want[key])
        assert arr[(0,) * want.ndim] == want[(0,) * want.ndim]


def test_the_lossy_grok_array_is_lossy_and_still_python_blosc2s(imagecodecs):
    # The same values python-blosc2 reads, which are not a smooth ramp's exact values.
    with b2store.open(HERE / "grok_u16_lossy.b2nd") as arr:
        got = arr[...]
    assert np.array_equal(got, _expected("grok_u16_lossy"))
    assert len(np.unique(got)) > 100


@pytest.mark.parametrize("name,match", REFUSED.items())
def test_where_openjpeg_is_not_the_plugin_the_block_is_refused(imagecodecs, name, match):
    with b2store.open(HERE / f"{name}.b2nd") as arr:
        with pytest.raises(b2store.UnsupportedError, match=match):
            arr[...]


def test_a_jpeg2000_chunk_needs_no_block_shape(imagecodecs):
    with b2store.open(HERE / "grok_rgb_j2k.b2nd") as arr:
        chunk = arr.schunk.get_chunk(0)
    got = b2store.decode_chunk(chunk)
    assert np.array_equal(got.view(np.uint8), _expected("grok_rgb_j2k").view(np.uint8).ravel())


def test_a_header_asking_for_a_huge_image_is_refused_before_decoding(imagecodecs):
    with b2store.open(HERE / "grok_rgb_j2k.b2nd") as arr:
        chunk = bytearray(arr.schunk.get_chunk(0))
    start, _ = _first_stream(chunk)
    assert chunk[start : start + 4] == b"\xff\x4f\xff\x51"
    # SIZ's Xsiz and Ysiz (after Lsiz and Rsiz): 60,000 x 60,000 samples.
    chunk[start + 8 : start + 16] = struct.pack(">II", 60_000, 60_000)
    with pytest.raises(b2store.FormatError, match="at most 3072 samples"):
        b2store.decode_chunk(bytes(chunk))


def test_damaged_blocks_are_format_errors(imagecodecs):
    with b2store.open(HERE / "grok_u8_two_blocks.b2nd") as arr:
        chunk = bytes(arr.schunk.get_chunk(0))
    start, size = _first_stream(chunk)
    rng = np.random.default_rng(3)
    errors = 0
    for _ in range(60):
        bad = bytearray(chunk)
        for _ in range(8):
            bad[int(rng.integers(start + 100, start + size))] = int(rng.integers(256))
        try:
            out = b2store.decode_chunk(bytes(bad))
        except b2store.FormatError:
            errors += 1
            continue
        assert out.nbytes == 64 * 48  # OpenJPEG may decode a damaged image: never oversized
    cut = chunk[: start + 40]
    with pytest.raises(b2store.FormatError):
        b2store.decode_chunk(cut[:12] + len(cut).to_bytes(4, "little") + cut[16:])


def test_without_imagecodecs_the_error_names_the_plugin_and_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "imagecodecs", None)
    with b2store.open(HERE / "grok_u8_two_blocks.b2nd") as arr:
        with pytest.raises(
            b2store.UnsupportedError, match=r"GROK.*blosc2_grok.*b2store\[jpeg2000\]"
        ):
            arr[...]


def test_the_jpeg2000_plugins_are_not_written():
    with pytest.raises(b2store.UnsupportedError, match="grok"):
        b2store.asarray(np.zeros((8, 8), "u1"), codec="grok")


# --- a block's image fills its stream exactly (issue 35) --------------------------------------
# OpenJPEG ignores what follows the EOC marker, and out of its strict mode (imagecodecs' 2.5
# is strict) decodes a codestream cut short as a coarser image: the image's own lengths (the
# JP2 boxes, each tile-part's Psot) must end where the stream does, with its EOC.


def _image_case(name: str, change):
    with b2store.open(HERE / f"{name}.b2nd") as arr:
        chunk = arr.schunk.get_chunk(0)
    return restream(chunk, 0, change)


@pytest.mark.parametrize("name", ["grok_rgb_j2k", "htj2k_gray_lossless"])
def test_a_codestream_cut_short_or_followed_by_bytes_is_refused(imagecodecs, name):
    cut = _image_case(name, lambda s: s[:-52] + b"\xff\xd9")  # packets cut, EOC kept
    with pytest.raises(b2store.FormatError, match=(
        r"JPEG 2000 codestream of block 0 at offset 40: expected tile-parts \(SOT's Psot\), "
        r"then the EOC marker, filling its \d+ bytes, found a tile-part past its end"
    )):  # fmt: skip
        b2store.decode_chunk(cut)
    after = _image_case(name, lambda s: s + b"\x00\x01")  # served as it was, before
    with pytest.raises(b2store.FormatError, match=(
        r"JPEG 2000 codestream of block 0 at offset 40: expected .* filling its \d+ bytes, "
        r"found tile-parts ending at byte \d+"
    )):  # fmt: skip
        b2store.decode_chunk(after)


def test_a_jp2_file_whose_boxes_do_not_fill_the_stream_is_refused(imagecodecs):
    # blosc2_grok's JP2 files end with the codestream's box (jp2c): bytes after it, or that
    # box cut short, are not an image's.
    for change in (lambda s: s + b"\x01\x02\x03", lambda s: s[:-1]):
        with pytest.raises(b2store.FormatError, match=(
            r"JP2 box of block 0 at offset \d+: expected boxes filling the stream's \d+ bytes"
        )):  # fmt: skip
            b2store.decode_chunk(_image_case("grok_u8_two_blocks", change))
