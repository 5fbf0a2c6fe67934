"""Living beside another package that registers the numcodecs id ``blosc2`` (ocf_blosc2 does;
numcodecs keeps whichever it registers last): what b2store writes by default opens with
either codec, and registering b2store's codec again gives the id back."""

from __future__ import annotations

import json

import numcodecs
import numpy as np
import pytest
from numcodecs.abc import Codec

import b2store

zarr = pytest.importorskip("zarr")


class OtherBlosc2(Codec):
    """A stand-in for ocf_blosc2's codec: the id ``blosc2``, only ``cname`` and ``clevel``
    (any other key is a TypeError, as there), decoding any chunk (there, with python-blosc2)."""

    codec_id = "blosc2"

    def __init__(self, cname="blosc2", clevel=5):
        self.cname, self.clevel = cname, clevel

    def encode(self, buf):
        raise NotImplementedError

    def decode(self, buf, out=None):
        return b2store.decode_chunk(buf, out)


@pytest.fixture
def other_holds_the_id():
    numcodecs.register_codec(OtherBlosc2)
    try:
        yield
    finally:
        numcodecs.register_codec(b2store.Blosc2)


def _write_v2(path, compressor):
    arr = zarr.create_array(
        str(path), shape=(100,), chunks=(10,), dtype="f4", zarr_format=2, compressors=compressor
    )
    arr[:] = np.arange(100, dtype="f4")
    return json.loads((path / ".zarray").read_text())["compressor"]


def test_default_settings_open_with_the_other_codec(tmp_path, other_holds_the_id):
    config = _write_v2(tmp_path / "a.zarr", b2store.Blosc2())
    assert config == {"id": "blosc2", "cname": "zstd", "clevel": 5}
    assert isinstance(numcodecs.get_codec(config), OtherBlosc2)
    np.testing.assert_array_equal(
        zarr.open_array(str(tmp_path / "a.zarr"), mode="r")[:], np.arange(100, dtype="f4")
    )


def test_registering_b2stores_codec_gives_the_id_back(tmp_path, other_holds_the_id):
    config = _write_v2(tmp_path / "b.zarr", b2store.Blosc2(filters=["bitshuffle"], typesize=4))
    with pytest.raises(TypeError, match="filters|typesize"):
        numcodecs.get_codec(config)  # the other codec takes cname and clevel only
    numcodecs.register_codec(b2store.Blosc2)
    assert isinstance(numcodecs.get_codec(config), b2store.Blosc2)
    np.testing.assert_array_equal(
        zarr.open_array(str(tmp_path / "b.zarr"), mode="r")[:], np.arange(100, dtype="f4")
    )


def test_ocf_blosc2_itself_reads_the_default_settings(tmp_path):
    # Where ocf_blosc2 is installed (it is not a test dependency: its entry point would take
    # the id from b2store for the whole run), its own codec reads b2store's default arrays.
    ocf = pytest.importorskip("ocf_blosc2", reason="ocf_blosc2 is not installed")
    config = _write_v2(tmp_path / "c.zarr", b2store.Blosc2())
    numcodecs.register_codec(ocf.Blosc2)
    try:
        assert isinstance(numcodecs.get_codec(config), ocf.Blosc2)
        got = zarr.open_array(str(tmp_path / "c.zarr"), mode="r")[:]
    finally:
        numcodecs.register_codec(b2store.Blosc2)
    np.testing.assert_array_equal(got, np.arange(100, dtype="f4"))
