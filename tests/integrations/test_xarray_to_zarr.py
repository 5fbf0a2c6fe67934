"""From Blosc2 to Zarr, netCDF and back: a Dataset the b2nd engine opened writes with xarray's
own writers (Zarr v3 and v2, h5netcdf, a B2ndStore) without touching its encoding, the values
identical and the Blosc2 compression kept where the target can store it; ``to_b2nd`` of it
keeps the frame's codec, level, filters, chunks and blocks."""

import numcodecs
import numpy as np
import pytest

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")
blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the files read here")

from b2store import B2ndStore, to_b2nd  # noqa: E402
from b2store.integrations.numcodecs.codec import Blosc2  # noqa: E402
from b2store.integrations.zarr.codecs import Blosc2Codec  # noqa: E402

CHUNKS, BLOCKS = (12, 15), (4, 5)
# A pipeline that is no codec's default: a delta before the byte shuffle.
FILTERS = [blosc2.Filter.DELTA, blosc2.Filter.SHUFFLE]


@pytest.fixture
def source(tmp_path):
    """A python-blosc2 frame (LZ4 at level 7, delta + shuffle), its dimensions named."""
    data = np.cumsum(np.arange(24 * 30, dtype="f8").reshape(24, 30) % 7, axis=1)
    path = tmp_path / "sst.b2nd"
    cparams = {"codec": blosc2.Codec.LZ4, "clevel": 7, "filters": FILTERS}
    arr = blosc2.asarray(
        data, urlpath=str(path), mode="w", chunks=CHUNKS, blocks=BLOCKS, cparams=cparams
    )
    arr.vlmeta["_ARRAY_DIMENSIONS"] = ["lat", "lon"]
    arr.vlmeta["units"] = "K"
    del arr
    return path, data


def pipeline(frame):
    return [f for f in frame.schunk.cparams.filters if f != blosc2.Filter.NOFILTER]


def opened(path):
    return xr.open_dataset(path, engine="b2nd", variable_name="sst")  # the frame stores none


def test_open_then_to_zarr_v3_keeps_the_blosc2_compression(source, tmp_path):
    path, data = source
    out = tmp_path / "sst.zarr"
    opened(path).to_zarr(out, zarr_format=3, consolidated=False)
    arr = zarr.open_group(out, mode="r")["sst"]
    assert arr.metadata.zarr_format == 3 and arr.chunks == CHUNKS
    (codec,) = arr.compressors
    assert isinstance(codec, Blosc2Codec)
    assert (codec.cname, codec.clevel) == ("lz4", 7)
    assert codec.filters == (("delta", 0), ("shuffle", 0))
    back = xr.open_zarr(out, consolidated=False)
    np.testing.assert_array_equal(back.sst.values, data)
    assert back.sst.dims == ("lat", "lon") and back.sst.attrs == {"units": "K"}


def test_open_then_to_zarr_v2_keeps_the_blosc2_compression(source, tmp_path):
    path, data = source
    out = tmp_path / "sst2.zarr"
    opened(path).to_zarr(out, zarr_format=2, consolidated=False)
    arr = zarr.open_group(out, mode="r", zarr_format=2)["sst"]
    assert arr.chunks == CHUNKS
    (codec,) = arr.compressors
    assert isinstance(codec, Blosc2)
    config = codec.get_config()
    assert (config["cname"], config["clevel"]) == ("lz4", 7)
    assert config["filters"] == ["delta", "shuffle"]
    back = xr.open_zarr(out, consolidated=False, zarr_format=2)
    np.testing.assert_array_equal(back.sst.values, data)


def test_open_then_to_netcdf_with_h5netcdf(source, tmp_path):
    pytest.importorskip("h5netcdf")
    path, data = source
    out = tmp_path / "sst.nc"
    opened(path).to_netcdf(out, engine="h5netcdf")
    back = xr.open_dataset(out, engine="h5netcdf")
    xr.testing.assert_identical(back.load(), opened(path).load())
    np.testing.assert_array_equal(back.sst.values, data)


def test_open_then_to_zarr_into_a_b2nd_store(source, tmp_path):
    path, data = source
    out = tmp_path / "copy.b2d"
    with B2ndStore(out, mode="w") as store:
        opened(path).to_zarr(store, consolidated=False)
    frame = blosc2.open(str(out / "sst.b2nd"))
    assert frame.chunks == CHUNKS
    assert frame.schunk.cparams.codec == blosc2.Codec.LZ4 and frame.schunk.cparams.clevel == 7
    assert pipeline(frame) == FILTERS
    np.testing.assert_array_equal(frame[:], data)
    back = xr.open_dataset(out, engine="b2nd")
    np.testing.assert_array_equal(back.sst.values, data)


def test_to_b2nd_of_what_the_engine_opened_keeps_its_storage(source, tmp_path):
    path, data = source
    out = to_b2nd(opened(path), tmp_path / "again.b2nd")
    frame = blosc2.open(out)
    assert frame.chunks == CHUNKS and frame.blocks == BLOCKS
    assert frame.schunk.cparams.codec == blosc2.Codec.LZ4 and frame.schunk.cparams.clevel == 7
    assert pipeline(frame) == FILTERS
    np.testing.assert_array_equal(frame[:], data)


def test_to_b2nd_of_a_zarr_v3_blosc2_array_keeps_its_pipeline(source, tmp_path):
    # The compressor to_zarr kept reads back into a frame: b2nd -> Zarr -> b2nd.
    path, data = source
    opened(path).to_zarr(tmp_path / "mid.zarr", zarr_format=3, consolidated=False)
    mid = xr.open_zarr(tmp_path / "mid.zarr", consolidated=False)
    out = to_b2nd(mid, tmp_path / "back.b2nd")
    frame = blosc2.open(out)
    assert frame.schunk.cparams.codec == blosc2.Codec.LZ4 and frame.schunk.cparams.clevel == 7
    assert pipeline(frame) == FILTERS
    np.testing.assert_array_equal(frame[:], data)


def test_the_reported_compressor_is_one_codec_in_both_zarr_forms(source):
    path, _ = source
    (spec,) = opened(path).sst.encoding["compressors"]
    v3 = Blosc2Codec.from_dict(spec)
    v2 = numcodecs.get_codec(spec)  # as Zarr v2 resolves it
    assert v3.to_dict()["configuration"]["cname"] == v2.get_config()["cname"] == "lz4"
    # The two forms must agree: a configuration whose halves differ is refused.
    with pytest.raises(ValueError, match="disagree"):
        numcodecs.get_codec({**spec, "clevel": 1})
    assert "filters" not in opened(path).sst.encoding  # Zarr's filters are codecs, not ids


def test_to_b2nd_of_a_zarr_v2_blosc2_array_keeps_its_pipeline(source, tmp_path):
    path, data = source
    opened(path).to_zarr(tmp_path / "mid2.zarr", zarr_format=2, consolidated=False)
    mid = xr.open_zarr(tmp_path / "mid2.zarr", consolidated=False, zarr_format=2)
    assert isinstance(mid.sst.encoding["compressors"][0], Blosc2)
    frame = blosc2.open(to_b2nd(mid, tmp_path / "back2.b2nd"))
    assert frame.schunk.cparams.codec == blosc2.Codec.LZ4 and frame.schunk.cparams.clevel == 7
    assert pipeline(frame) == FILTERS
    np.testing.assert_array_equal(frame[:], data)
