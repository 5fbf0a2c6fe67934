"""B2ndStore's ``fill_value``: an array whose CF ``_FillValue`` is NaN (written by ``to_b2nd``,
or by python-blosc2 with that vlmeta) is served with the Zarr fill value NaN, as xarray's own
``to_zarr`` writes it, while its attributes keep ``_FillValue`` in the form xarray's zarr
engine writes for Zarr v3; chunks never written still read as b2store and python-blosc2 read
them, and a chunk zarr deletes as all-fill reads back as the fill value."""

from __future__ import annotations

import asyncio
import math
import warnings

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")
blosc2 = pytest.importorskip("blosc2")

import b2store  # noqa: E402
from b2store import B2ndStore, to_b2nd  # noqa: E402


async def _listed(store) -> list[str]:
    return [key async for key in store.list()]


def _dataset() -> xr.Dataset:
    f = np.array([[1.0, np.nan, 3.0]] * 4, np.float32)
    return xr.Dataset(
        {"f": (("t", "x"), f, {"units": "m"}), "n": (("t",), np.arange(4, dtype="i2"))},
        coords={"x": [1, 2, 3]},
    )


def test_to_b2nd_tree_serves_xarrays_zarr_fill(tmp_path):
    ds = _dataset()
    to_b2nd(ds, tmp_path / "t.b2d", mode="w")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Consolidated metadata", UserWarning)
        ds.to_zarr(tmp_path / "ref.zarr", zarr_format=3, mode="w")
    ref = zarr.open_group(str(tmp_path / "ref.zarr"), mode="r")
    ours = zarr.open_group(B2ndStore(tmp_path / "t.b2d"), mode="r")
    assert math.isnan(ours["f"].fill_value) and math.isnan(ref["f"].fill_value)
    assert ours["f"].attrs["_FillValue"] == ref["f"].attrs["_FillValue"] == "AAAAAAAA+H8="
    assert ours["n"].fill_value == 0  # no _FillValue: the dtype's zero
    got = xr.open_zarr(B2ndStore(tmp_path / "t.b2d")).load()
    xr.testing.assert_identical(got, xr.open_dataset(tmp_path / "t.b2d", engine="b2nd").load())


def test_python_blosc2_array_with_a_nan_fill(tmp_path):
    path = str(tmp_path / "e.b2nd")
    arr = blosc2.uninit((4, 3), dtype=np.float32, urlpath=path, mode="w", chunks=(2, 3))
    arr[0:2] = np.nan
    arr.vlmeta["_FillValue"] = np.nan
    z = zarr.open_array(B2ndStore(path), mode="r")
    assert math.isnan(z.fill_value)
    # The chunk never written reads as b2store reads it (zeros; c-blosc2 writes nothing into
    # python-blosc2's output there), not as the fill value.
    np.testing.assert_array_equal(z[:], b2store.open(path)[:])
    np.testing.assert_array_equal(z[2:], np.zeros((2, 3), np.float32))
    store = B2ndStore(path)  # and the store's keys agree: the chunk is there, not missing
    assert asyncio.run(store.exists("c/1/0")) and asyncio.run(store.getsize("c/1/0")) == 32
    assert "c/1/0" in asyncio.run(_listed(store))
    # python-blosc2 names no dimensions: the group view names them as the b2nd engine does
    got = xr.open_zarr(B2ndStore(path, group=True)).load()
    xr.testing.assert_identical(got, xr.open_dataset(path, engine="b2nd").load())
    assert got.data.dims == ("dim_0", "dim_1")


def test_a_chunk_zarr_deletes_reads_back_as_the_served_fill(tmp_path):
    to_b2nd(_dataset(), tmp_path / "t.b2d", mode="w")
    z = zarr.open_group(B2ndStore(tmp_path / "t.b2d", mode="a"), mode="r+")["f"]
    z[:] = np.nan  # all fill: zarr deletes the chunk, the store keeps a chunk of NaN
    np.testing.assert_array_equal(z[:], np.full((4, 3), np.nan, np.float32))
    with xr.open_dataset(tmp_path / "t.b2d", engine="b2nd") as ds:
        np.testing.assert_array_equal(ds["f"].values, np.full((4, 3), np.nan, np.float32))


@pytest.mark.parametrize("fill", [0.0, -1.0])
def test_a_clients_fill_value_is_read_back_as_given(tmp_path, fill):
    store = B2ndStore(tmp_path / "c.b2d", mode="w")
    z = zarr.create_array(store, name="a", shape=(4,), chunks=(2,), dtype="<f8", fill_value=fill)
    z.attrs["_FillValue"] = "AAAAAAAA+H8="  # xarray's v3 form of NaN
    z[:2] = 5.0
    again = zarr.open_group(B2ndStore(tmp_path / "c.b2d"), mode="r")["a"]
    assert again.fill_value == fill
    np.testing.assert_array_equal(again[:], [5.0, 5.0, fill, fill])


@pytest.mark.parametrize(
    ("dtype", "fill", "served"),
    [("i2", -9999, -9999), ("u1", 255, 255), ("i1", 300, 0), ("f4", 0.1, 0.0), ("i4", 1.5, 0)],
)
def test_a_fill_the_dtype_cannot_hold_is_not_served(tmp_path, dtype, fill, served):
    path = str(tmp_path / "a.b2nd")
    b2store.asarray(np.zeros(3, dtype), urlpath=path, vlmeta={"_FillValue": fill}, mode="w")
    assert zarr.open_array(B2ndStore(path), mode="r").fill_value == served
