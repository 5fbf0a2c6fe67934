"""B2ndStore and xarray's zarr engine: a Dataset written by ``to_b2nd`` (NaN fill values,
packed integers, times, embedded coordinates) opens through ``xr.open_zarr(B2ndStore(...))``
exactly as through the ``b2nd`` engine, without warnings; fill values written through zarr
land in vlmeta as the plain numbers python-blosc2 users see."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
blosc2 = pytest.importorskip("blosc2")

import b2store  # noqa: E402
from b2store.integrations.zarr.store import B2ndStore  # noqa: E402
from b2store.integrations.zarr.zarr_json import plain_fill_attr, zarr_fill_attr  # noqa: E402

# Under zarr's default codec pipeline and its fused one (tests/integrations/conftest.py).
pytestmark = pytest.mark.usefixtures("zarr_pipeline")


def dataset():
    rng = np.random.default_rng(1)
    time = pd.date_range("2001-01-01", periods=12, freq="6h")
    tas = rng.normal(280, 5, (12, 6, 8)).astype("f4")
    tas[0, 0, :3] = np.nan
    pr = rng.gamma(0.5, 1e-3, (12, 6, 8))
    pr[3, 2, 2] = np.nan
    return xr.Dataset(
        {
            "tas": (("time", "lat", "lon"), tas, {"units": "K"}),
            "pr": (("time", "lat", "lon"), pr, {"units": "mm"}),
        },
        coords={
            "time": time,
            "lat": ("lat", np.linspace(-50, 50, 6), {"units": "degrees_north"}),
            "lon": np.arange(8) * 45.0,
            "site": ("lat", [f"s{i}" for i in range(6)]),
        },
        attrs={"title": "equivalence"},
    )


def _open_both(path, **store_kwargs):
    with warnings.catch_warnings():
        # Any "not JSON-safe" UserWarning from the store fails the test.
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", "The data type", Warning)  # zarr's <U dtype notice
        via_engine = xr.open_dataset(path, engine="b2nd").load()
        via_zarr = xr.open_zarr(B2ndStore(path, **store_kwargs)).load()
    return via_engine, via_zarr


def test_single_frame_group_view_decodes_as_the_engine(tmp_path):
    ds = dataset()[["tas"]]
    path = b2store.to_b2nd(ds, tmp_path / "tas.b2nd")
    via_engine, via_zarr = _open_both(path, group=True)
    xr.testing.assert_identical(via_zarr, via_engine)
    xr.testing.assert_identical(via_zarr, ds)
    assert np.isnan(via_zarr.tas.values[0, 0, :3]).all()


def test_tree_decodes_as_the_engine(tmp_path):
    ds = dataset()
    encoding = {"pr": {"dtype": "i2", "scale_factor": 1e-4, "_FillValue": -32768}}
    path = b2store.to_b2nd(ds, tmp_path / "ds.b2d", encoding=encoding)
    via_engine, via_zarr = _open_both(path)
    xr.testing.assert_identical(via_zarr, via_engine)
    assert np.isnan(via_zarr.pr.values[3, 2, 2]) and np.isnan(via_zarr.tas.values[0, 0, 0])


def test_fill_value_written_through_zarr_is_plain_in_vlmeta(tmp_path):
    ds = dataset()[["tas"]]
    path = tmp_path / "out.b2d"
    ds.to_zarr(B2ndStore(path, mode="w"))
    tas = blosc2.open(str(path))["/tas"]
    fill = tas.vlmeta["_FillValue"]
    assert isinstance(fill, float) and math.isnan(fill)
    via_engine, via_zarr = _open_both(path)
    xr.testing.assert_identical(via_zarr, ds)
    xr.testing.assert_identical(via_engine, ds)


@pytest.mark.parametrize(
    "value,dtype", [(np.nan, "f4"), (-9999.0, "f8"), (1.5 - 2j, "c16"), (b"xy", "S2"), (-1, "i2")]
)
def test_fill_attr_forms_are_xarrays(value, dtype):
    from xarray.backends.zarr import FillValueCoder

    encoded = zarr_fill_attr(value, np.dtype(dtype))
    try:
        theirs = FillValueCoder.encode(value, np.dtype(dtype))
    except ValueError as exc:  # xarray before 2026.7: "Unsupported dtype complex128"
        assert dtype == "c16", exc
        pytest.skip(f"this xarray has no Zarr fill-value form for {dtype} to compare with")
    assert encoded == theirs
    back = plain_fill_attr(encoded, np.dtype(dtype))
    assert back == value or (np.isnan(back) and np.isnan(value))
