"""B2ndStore over datasets xarray-blosc2 wrote (a directory, its ``.b2z``): ``xr.open_zarr``
gives the Dataset the ``b2nd`` engine gives, each variable named and dimensioned by
xarray-blosc2's convention (its ``dims`` and ``var``/``coord_name`` vlmeta, read by the code the
engine reads them with); its packings are refused, naming the engine that decodes them."""

from __future__ import annotations

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")
pd = pytest.importorskip("pandas")
xb2 = pytest.importorskip("xarray_blosc2")

from b2store import B2ndStore  # noqa: E402
from b2store.errors import UnsupportedError  # noqa: E402


def _dataset() -> xr.Dataset:
    rng = np.random.default_rng(3)
    return xr.Dataset(
        {
            "t2m": (("time", "lat"), rng.random((4, 3), "f4"), {"units": "K", "n": 3}),
            "q": (("time",), np.arange(4.0), {"long_name": "humidity", "ok": True}),
        },
        coords={
            "time": pd.date_range("2000-01-01", periods=4),
            "lat": [1.0, 2.0, 3.0],
            "aux": ("lat", [5, 6, 7]),
            "station": ("lat", ["a", "b", "c"]),
        },
        attrs={"title": "x", "version": 2},
    )


def _save(tmp_path, frozen: bool, **kwargs):
    root = xb2.save_dataset(_dataset(), tmp_path / "ds", **kwargs)
    return xb2.freeze_dataset(root, keep_dir=True) if frozen else root


@pytest.mark.parametrize("frozen", [False, True], ids=["directory", "b2z"])
def test_open_zarr_equals_the_b2nd_engine(tmp_path, frozen):
    path = _save(tmp_path, frozen)
    expected = xr.open_dataset(path, engine="b2nd").load()
    got = xr.open_zarr(B2ndStore(path)).load()
    xr.testing.assert_identical(got, expected)
    assert set(got.coords) == {"time", "lat", "aux", "station"}
    group = zarr.open_group(B2ndStore(path), mode="r")
    assert group["t2m"].metadata.dimension_names == ("time", "lat")
    assert dict(group["t2m"].attrs) == {"units": "K", "n": 3}  # no bookkeeping (dims, var...)
    assert group["aux"].metadata.dimension_names == ("lat",)  # _coord_aux.b2nd, by its name
    assert list(group["station"][:]) == ["a", "b", "c"]


@pytest.mark.parametrize("frozen", [False, True], ids=["directory", "b2z"])
def test_packed_datasets_are_refused_naming_the_engine(tmp_path, frozen):
    path = _save(tmp_path, frozen, lossy={"t2m": {"max_error": 0.01}})
    with pytest.raises(UnsupportedError, match=r"xarray-blosc2 lossy packing through "
                       r"B2ndStore \(the b2nd engine reads it.*'t2m'"):  # fmt: skip
        xr.open_zarr(B2ndStore(path))


def test_writing_into_the_layout_is_refused(tmp_path):
    path = _save(tmp_path, False)
    with pytest.raises(UnsupportedError, match="writing through B2ndStore into xarray-blosc2"):
        zarr.open_group(B2ndStore(path, mode="a"), mode="a")
