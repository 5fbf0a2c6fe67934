"""xarray's own CF round-trip tests (``xarray.tests.test_backends.CFEncodedBase``) run with
``to_b2nd`` as the writer and the ``b2nd`` engine as the reader: ``_Unsigned``, mask and scale,
and the CF linkage (``grid_mapping``, ``bounds``, ``cell_measures``, ``formula_terms``,
``coordinates``) kept in a variable's ``.encoding`` come back as xarray's netCDF4 and zarr
engines return them."""

import contextlib
import tempfile
from pathlib import Path

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
