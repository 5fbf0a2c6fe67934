"""``b2store convert`` keeps each variable's CF encoding (dtype, packing, fill value, time units
and calendar) in every direction between Zarr, netCDF and Blosc2 trees, as ``to_zarr`` of the
same Dataset stores it; ``--decoded`` writes the decoded values instead."""

from __future__ import annotations

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
pytest.importorskip("zarr")
pytest.importorskip("h5netcdf")

OPENERS = {".zarr": "zarr", ".nc": "h5netcdf", ".b2d": "b2nd", ".b2z": "b2nd"}


def _packed() -> xr.Dataset:
    """An int16 variable packed with scale_factor/add_offset and _FillValue -9999, a float32
    one with NaN, a time in a noleap calendar: as ``xr.open_dataset`` gives them, decoded
    with their encoding kept."""
    raw = np.array([[1, 2, -9999], [4, -9999, 6], [7, 8, 9], [10, 11, 12]], np.int16)
    attrs = {"scale_factor": 0.5, "add_offset": 10.0, "_FillValue": np.int16(-9999)}
    noleap = {"units": "days since 1999-01-01", "calendar": "noleap"}
    ds = xr.Dataset(
        {
            "p": (("time", "x"), raw, {**attrs, "units": "K"}),
            "f": (("time", "x"), np.array([[1.0, np.nan, 3.0]] * 4, np.float32), {"units": "m"}),
        },
        coords={
            "time": ("time", np.arange(4), noleap),
            "x": [1, 2, 3],
        },
    )
    return xr.decode_cf(ds)


def _stored(path) -> dict:
    """Each variable's stored dtype and attributes, read without decoding."""
    with xr.open_dataset(path, engine=OPENERS[path.suffix], decode_cf=False) as ds:
        return {name: (v.dtype, _plain(v.attrs)) for name, v in ds.variables.items()}


def _plain(attrs: dict) -> dict:
    """Attributes compared by value (netCDF gives NumPy scalars, Zarr Python numbers; NaN
    equals NaN)."""
    out = {}
    for key, value in attrs.items():
        value = np.asarray(value).item() if np.ndim(value) == 0 else value
        out[key] = "NaN" if isinstance(value, float) and np.isnan(value) else value
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The Dataset written by ``to_zarr`` (the reference) and by every writer convert
    writes with, each converted from the Zarr store."""
    from b2store.cli.convert import convert

    tmp = tmp_path_factory.mktemp("encoding")
    _packed().to_zarr(tmp / "ref.zarr", mode="w")
    for suffix in (".nc", ".b2d", ".b2z"):
        convert(tmp / "ref.zarr", tmp / f"src{suffix}", progress=False)
    return tmp


@pytest.mark.parametrize("src", ["ref.zarr", "src.nc", "src.b2d", "src.b2z"])
@pytest.mark.parametrize("dst", [".zarr", ".nc", ".b2d", ".b2z"])
def test_every_direction_keeps_the_encoding_to_zarr_stores(sources, tmp_path, src, dst):
    from b2store.cli.convert import convert

    out = convert(sources / src, tmp_path / f"out{dst}", progress=False)
    expected = _stored(sources / "ref.zarr")
    got = _stored(tmp_path / f"out{dst}")
    assert got == expected
    assert got["p"][0] == np.int16
    assert got["p"][1]["_FillValue"] == -9999
    assert got["time"][1]["calendar"] == "noleap"
    with xr.open_dataset(out, engine=OPENERS[dst]) as ds:
        xr.testing.assert_identical(ds.load(), _packed())


@pytest.mark.parametrize("dst", [".zarr", ".nc"])
def test_decoded_writes_the_decoded_values(sources, tmp_path, dst):
    from b2store.cli import main

    out = tmp_path / f"out{dst}"
    assert main(["convert", str(sources / "src.b2d"), str(out), "--decoded", "-q"]) == 0
    stored = _stored(out)
    assert stored["p"][0] == np.float64
    assert "scale_factor" not in stored["p"][1]
    with xr.open_dataset(out, engine=OPENERS[dst]) as ds:
        xr.testing.assert_equal(ds.load(), _packed())
