"""kerchunk references to .b2nd files: several files combined along time, opened through
zarr and xarray, equal the arrays; special chunks inlined, stored chunks pointed at."""

from __future__ import annotations

import numpy as np
import pytest

fsspec = pytest.importorskip("fsspec")
zarr = pytest.importorskip("zarr")
blosc2 = pytest.importorskip("blosc2")

from b2store.integrations.virtual import combine_refs, kerchunk_refs  # noqa: E402


def _files(tmp_path, n=3):
    parts, paths = [], []
    for k in range(n):
        data = np.random.default_rng(k).random((8, 5, 6))
        if k == 1:
            data[:4] = 0  # a zeros special chunk row
        path = tmp_path / f"t{k}.b2nd"
        arr = blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(4, 5, 3), blocks=(2, 5, 3))
        arr.vlmeta["_ARRAY_DIMENSIONS"] = ["time", "y", "x"]
        arr.vlmeta["units"] = "K"
        parts.append(data)
        paths.append(path)
    return paths, np.concatenate(parts)


def _mapper(refs):
    return fsspec.filesystem("reference", fo=refs).get_mapper("")


def test_combined_along_time_through_zarr_and_xarray(tmp_path):
    xr = pytest.importorskip("xarray")
    paths, expected = _files(tmp_path)
    refs = combine_refs(paths, name="temp")
    z = zarr.open_group(_mapper(refs), mode="r", zarr_format=2)
    np.testing.assert_array_equal(z["temp"][...], expected)
    np.testing.assert_array_equal(z["temp"][9:13, 2, 1:4], expected[9:13, 2, 1:4])
    ds = xr.open_dataset(_mapper(refs), engine="zarr", consolidated=False, zarr_format=2)
    assert ds["temp"].dims == ("time", "y", "x") and ds["temp"].attrs["units"] == "K"
    np.testing.assert_array_equal(ds["temp"].values, expected)


def test_references_point_into_the_files(tmp_path):
    paths, _ = _files(tmp_path, 2)
    refs = kerchunk_refs(paths[0])["refs"]
    ref = blosc2.open(str(paths[0]))
    url, offset, length = refs["t0/1.0.1"]
    assert url == str(paths[0])
    with open(url, "rb") as fh:
        fh.seek(offset)
        assert fh.read(length) == ref.schunk.get_chunk(3)
    inlined = combine_refs(paths, name="t")["refs"]["t/2.0.0"]  # file 1's zeros chunk
    assert isinstance(inlined, str) and inlined.startswith("base64:")


def test_mismatched_files_are_refused(tmp_path):
    a = tmp_path / "a.b2nd"
    b = tmp_path / "b.b2nd"
    blosc2.asarray(np.zeros((6, 4)), urlpath=str(a), mode="w", chunks=(4, 4), blocks=(2, 2))
    blosc2.asarray(np.zeros((6, 4)), urlpath=str(b), mode="w", chunks=(4, 4), blocks=(2, 2))
    with pytest.raises(ValueError, match="whole number of chunks"):
        combine_refs([a, b])


def test_nan_fill_value_becomes_the_v2_fill_value(tmp_path):
    import warnings

    xr = pytest.importorskip("xarray")
    import b2store

    parts = []
    for k in range(2):
        data = np.random.default_rng(k).random((4, 3)).astype("f4")
        data[k, 1] = np.nan
        ds = xr.Dataset({"v": (("time", "x"), data, {"units": "K"})})
        b2store.to_b2nd(ds, tmp_path / f"v{k}.b2nd", encoding={"v": {"chunks": (2, 3)}})
        parts.append(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing left out as not JSON-safe
        refs = combine_refs([tmp_path / "v0.b2nd", tmp_path / "v1.b2nd"], name="v")
    zarray = __import__("json").loads(refs["refs"]["v/.zarray"])
    assert zarray["fill_value"] == "NaN"
    ds = xr.open_dataset(_mapper(refs), engine="zarr", consolidated=False, zarr_format=2)
    assert "_xarray" not in ds.v.attrs and ds.v.attrs["units"] == "K"
    np.testing.assert_array_equal(ds.v.values, np.concatenate(parts))
