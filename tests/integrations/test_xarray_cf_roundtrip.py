"""Drawn CF encodings (packing, masking, ``_Unsigned``, a CRS link), written by to_b2nd and
by xarray's netCDF writer (h5netcdf), read back alike. xarray's own CF round-trip tests
(``CFEncodedBase``) run in test_xarray_backend_classes.py."""

import importlib.util
import tempfile
import warnings

import numpy as np
import pytest

xr = pytest.importorskip("xarray")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from b2store.integrations.xarray.to_b2nd import to_b2nd  # noqa: E402

HAS_H5NETCDF = importlib.util.find_spec("h5netcdf") is not None

CF_COMPARED = ("_FillValue", "_Unsigned", "scale_factor", "add_offset", "dtype", "grid_mapping")


@st.composite
def cf_encoded(draw):
    """A float variable with a drawn CF encoding (packing, masking, _Unsigned, a CRS link)."""
    values = draw(
        st.lists(st.one_of(st.floats(-200, 300, width=32), st.just(np.nan)), min_size=1, max_size=6)
    )
    enc = {}
    dtype = draw(st.sampled_from([None, "i1", "i2", "i4", "u1", "u2", "f4"]))
    if dtype:
        enc["dtype"] = dtype
        if dtype[0] in "iu" and (unsigned := draw(st.sampled_from([None, "true", "false"]))):
            enc["_Unsigned"] = unsigned
    for key, choices in (
        ("_FillValue", [None, -1, 0, 7, 255, np.nan]),
        ("scale_factor", [None, 0.5, 2.0]),
        ("add_offset", [None, 10.0]),
    ):
        if (value := draw(st.sampled_from(choices))) is not None:
            enc[key] = value
    ds = xr.Dataset(
        {"v": ("t", np.array(values, draw(st.sampled_from(["f4", "f8"]))), {}, enc)},
        {"crs": ((), 0, {"grid_mapping_name": "latitude_longitude"})},
    )
    if draw(st.booleans()):
        ds.v.encoding["grid_mapping"] = "crs"
    return ds


@pytest.mark.skipif(not HAS_H5NETCDF, reason="h5netcdf (the netCDF oracle) is not installed")
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(ds=cf_encoded())
def test_cf_encodings_round_trip_as_netcdf_does(ds):
    """Whatever xarray's netCDF writer (h5netcdf) stores, to_b2nd stores alike: the decoded
    Dataset, the CF encoding it reports and the raw (decode_cf=False) variable are identical;
    and the netCDF-opened Dataset (its .encoding full of h5netcdf's keys) writes again."""
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # xarray's SerializationWarnings, alike for both
        nc, b2 = f"{tmp}/a.nc", f"{tmp}/a.b2d"
        try:
            ds.to_netcdf(nc, engine="h5netcdf")
        except (ValueError, TypeError, OverflowError):
            return  # netCDF refuses it: nothing to compare with
        to_b2nd(ds, b2)
        ref = xr.open_dataset(nc, engine="h5netcdf", decode_coords="all").load()
        got = xr.open_dataset(b2, engine="b2nd", decode_coords="all").load()
        if "_Unsigned" in ds.v.encoding and "_FillValue" not in ds.v.encoding:
            # xarray's mask coder leaves such an _Unsigned unused and netCDF drops it (the
            # data then read back signed); to_b2nd stores it.
            assert got.v.encoding["_Unsigned"] == ds.v.encoding["_Unsigned"]
            return
        xr.testing.assert_identical(ref, got)
        for key in CF_COMPARED:
            assert (key in ref.v.encoding) == (key in got.v.encoding), key
            if key in ref.v.encoding:
                want, have = ref.v.encoding[key], got.v.encoding[key]
                assert want == have or (want != want and have != have), (key, want, have)
                assert np.asarray(want).dtype == np.asarray(have).dtype, key
        raw_ref = xr.open_dataset(nc, engine="h5netcdf", decode_cf=False).load()
        raw_got = xr.open_dataset(b2, engine="b2nd", decode_cf=False).load()
        xr.testing.assert_identical(raw_ref.v.variable, raw_got.v.variable)
        again = xr.open_dataset(to_b2nd(ref, f"{tmp}/c.b2d"), engine="b2nd", decode_coords="all")
        xr.testing.assert_identical(again.load(), ref)
