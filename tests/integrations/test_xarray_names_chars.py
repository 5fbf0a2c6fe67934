"""What xarray's netCDF and Zarr writers do with three Datasets ``to_b2nd`` once refused or
stored otherwise: a variable named None (stored as ``__values__``, read back as None), an
``encoding=`` entry for a variable the Dataset lacks (xarray's KeyError), and strings given
``dtype: "S1"`` (netCDF's character arrays, ``_Encoding`` and ``S1`` reported back)."""

from __future__ import annotations

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("h5netcdf")

import b2store  # noqa: E402
from b2store import to_b2nd  # noqa: E402

SUFFIXES = [".b2d", ".b2z", ".b2nd"]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_variable_named_none(tmp_path, suffix):
    ds = xr.Dataset({None: (("x", "y"), [[0, 1], [2, 3]])})
    to_b2nd(ds, tmp_path / f"t{suffix}", mode="w")
    with xr.open_dataset(tmp_path / f"t{suffix}", engine="b2nd") as back:
        xr.testing.assert_identical(back.load(), ds)
    if suffix == ".b2d":  # stored under xarray's own name for it, as netCDF stores it
        assert (tmp_path / "t.b2d" / "__values__.b2nd").exists()


def test_encoding_for_a_variable_not_in_the_dataset_is_xarrays_key_error(tmp_path):
    ds = xr.Dataset({"x": ("y", np.arange(3.0))})
    with pytest.raises(KeyError) as netcdf:
        ds.to_netcdf(tmp_path / "t.nc", engine="h5netcdf", encoding={"invalid": {}})
    with pytest.raises(KeyError) as ours:
        to_b2nd(ds, tmp_path / "t.b2d", mode="w", encoding={"invalid": {}})
    assert isinstance(ours.value, ValueError)  # as before, for callers that caught that
    assert str(ours.value) == "encoding for variables not in the dataset: ['invalid']"
    assert netcdf.value.args == ("invalid",)
    assert not (tmp_path / "t.b2d").exists()


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize(
    "strings", [[b"foo", b"bar", b"baz"], ["foo", "bar", "baz"], ["ab", "cdéf"], ["a", "b"]]
)
def test_strings_as_characters_as_netcdf_stores_them(tmp_path, suffix, strings):
    ds = xr.Dataset({"v": ("t", strings)})
    encoding = {"v": {"dtype": "S1"}}
    ds.to_netcdf(tmp_path / "ref.nc", engine="h5netcdf", encoding=encoding)
    to_b2nd(ds, tmp_path / f"t{suffix}", mode="w", encoding=encoding)
    with xr.open_dataset(tmp_path / "ref.nc", engine="h5netcdf") as ref:
        with xr.open_dataset(tmp_path / f"t{suffix}", engine="b2nd") as back:
            xr.testing.assert_identical(back.load(), ds)
            assert back.v.encoding["dtype"] == ref.v.encoding["dtype"] == "S1"
            assert back.v.encoding.get("_Encoding") == ref.v.encoding.get("_Encoding")
    with xr.open_dataset(tmp_path / f"t{suffix}", engine="b2nd", decode_cf=False) as raw:
        width = max(len(s.encode() if isinstance(s, str) else s) for s in strings)
        assert raw.v.dims == ("t", f"string{width}") and raw.v.dtype == "S1"
    if suffix == ".b2d":
        assert b2store.open(str(tmp_path / "t.b2d" / "v.b2nd")).dtype == "S1"


def test_ascii_encoding_is_kept(tmp_path):
    ds = xr.Dataset({"v": ("t", ["ab", "cdef"])})
    ds.v.encoding.update({"dtype": "S1", "_Encoding": "ascii"})
    to_b2nd(ds, tmp_path / "t.b2d", mode="w")
    with xr.open_dataset(tmp_path / "t.b2d", engine="b2nd") as back:
        xr.testing.assert_identical(back.load(), ds)
        assert back.v.encoding["_Encoding"] == "ascii"


def test_a_fill_value_on_unicode_characters_is_refused_as_netcdf_refuses_it(tmp_path):
    ds = xr.Dataset({"v": ("t", ["ab", "cd"])})
    encoding = {"v": {"dtype": "S1", "_FillValue": "zz"}}
    with pytest.raises(NotImplementedError, match="_FillValue is not yet supported on unicode"):
        ds.to_netcdf(tmp_path / "ref.nc", engine="h5netcdf", encoding=encoding)
    with pytest.raises(NotImplementedError, match="_FillValue is not yet supported on unicode"):
        to_b2nd(ds, tmp_path / "t.b2d", mode="w", encoding=encoding)
