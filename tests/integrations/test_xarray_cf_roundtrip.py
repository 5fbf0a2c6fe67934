"""xarray's own CF round-trip tests (``xarray.tests.test_backends.CFEncodedBase``) run with
``to_b2nd`` as the writer and the ``b2nd`` engine as the reader: ``_Unsigned``, mask and scale,
and the CF linkage (``grid_mapping``, ``bounds``, ``cell_measures``, ``formula_terms``,
``coordinates``) kept in a variable's ``.encoding`` come back as xarray's netCDF4 and zarr
engines return them. Then drawn CF encodings, written by to_b2nd and by xarray's netCDF
writer (h5netcdf), read back alike."""

import contextlib
import importlib.util
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
backends = pytest.importorskip(
    "xarray.tests.test_backends", reason="xarray's test suite is not installed"
)

from b2store.integrations.xarray_writer import to_b2nd  # noqa: E402

# The tests of CFEncodedBase that this file runs (the rest need netCDF-only features).
SELECTED = (
    "test_roundtrip_unsigned",
    "test_roundtrip_mask_and_scale",
    "test_grid_mapping_and_bounds_are_not_coordinates_in_file",
    "test_grid_mapping_and_bounds_are_coordinates_after_dataarray_roundtrip",
    "test_coordinate_variables_after_dataset_roundtrip",
    "test_coordinates_encoding",
)


class _B2ndCF(backends.CFEncodedBase):
    engine = "b2nd"
    # b2nd stores uint8 as netCDF4 does: run the u1 cases xarray keeps for NETCDF4.
    file_format = "NETCDF4"

    name = "t.b2d"

    @contextlib.contextmanager
    def roundtrip(self, data, save_kwargs=None, open_kwargs=None, allow_cleanup_failure=False):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / self.name
            self.save(data, path, **(save_kwargs or {}))
            with self.open(path, **(open_kwargs or {})) as ds:
                yield ds

    def save(self, dataset, path, **kwargs):
        return to_b2nd(dataset, path, **kwargs)

    @contextlib.contextmanager
    def open(self, path, **kwargs):
        with xr.open_dataset(path, engine="b2nd", **kwargs) as ds:
            yield ds


class TestB2ndCFEncoding(_B2ndCF):
    """CFEncodedBase's CF round trips through to_b2nd and the b2nd engine, in a .b2d tree."""


class TestB2ndCFEncodingFrame(_B2ndCF):
    """The same for one variable in a single .b2nd frame (its coordinates in its vlmeta)."""

    name = "t.b2nd"


# Only the selected tests run (pytest does not collect attributes set to None); a single
# frame holds one data variable, so the CF linkage tests (several) run on trees only.
for _name in dir(backends.CFEncodedBase):
    if _name.startswith("test_") and _name not in SELECTED:
        setattr(TestB2ndCFEncoding, _name, None)
    if _name.startswith("test_") and _name not in SELECTED[:2]:
        setattr(TestB2ndCFEncodingFrame, _name, None)


# --- to_b2nd against xarray's netCDF writer, on generated CF encodings --------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

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
