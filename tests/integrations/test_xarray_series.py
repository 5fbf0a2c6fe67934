"""Series of files: python-blosc2's frames store no variable name, so the b2nd engine names
their array ``data`` whatever the file is called (or ``variable_name=``), and
``xr.open_mfdataset`` combines them into one variable, as it combines netCDF files; a name
``to_b2nd`` stored is kept."""

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("dask")
blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the files read here")

from b2store import to_b2nd  # noqa: E402


def parts(n=3, shape=(4, 5, 6)):
    return [np.random.default_rng(i).normal(size=shape) for i in range(n)]


def write_parts(tmp_path, arrays, **vlmeta):
    for i, x in enumerate(arrays):
        arr = blosc2.asarray(x, urlpath=str(tmp_path / f"part{i}.b2nd"), mode="w")
        for key, value in vlmeta.items():
            arr.vlmeta[key] = value
    return str(tmp_path / "part*.b2nd")


def test_open_mfdataset_concatenates_python_blosc2_files_along_time(tmp_path):
    arrays = parts()
    pattern = write_parts(tmp_path, arrays, _ARRAY_DIMENSIONS=["time", "lat", "lon"])
    with xr.open_mfdataset(
        pattern, engine="b2nd", combine="nested", concat_dim="time", parallel=True
    ) as ds:
        assert list(ds.data_vars) == ["data"]
        assert ds.data.shape == (12, 5, 6) and ds.data.chunks[0] == (4, 4, 4)
        total = ds.data.sum("time").values
    np.testing.assert_allclose(total, np.concatenate(arrays).sum(axis=0), rtol=1e-12)


def test_open_mfdataset_stacks_plain_python_blosc2_files_on_a_new_dimension(tmp_path):
    arrays = parts(shape=(3, 7))
    pattern = write_parts(tmp_path, arrays)  # no name, no dimensions: nothing but the data
    with xr.open_mfdataset(
        pattern, engine="b2nd", combine="nested", concat_dim="time", parallel=True
    ) as ds:
        assert list(ds.data_vars) == ["data"] and ds.data.dims == ("time", "dim_0", "dim_1")
        np.testing.assert_array_equal(ds.data.values, np.stack(arrays))
        np.testing.assert_allclose(ds.data.sum("time").values, np.sum(arrays, axis=0))


def test_variable_name_passes_through_open_mfdataset(tmp_path):
    arrays = parts()
    pattern = write_parts(tmp_path, arrays, _ARRAY_DIMENSIONS=["time", "lat", "lon"])
    with xr.open_mfdataset(
        pattern, engine="b2nd", combine="nested", concat_dim="time", variable_name="sst"
    ) as ds:
        assert list(ds.data_vars) == ["sst"]
        np.testing.assert_array_equal(ds.sst.values, np.concatenate(arrays))


def test_a_stored_name_is_kept(tmp_path):
    path = to_b2nd(xr.Dataset({"tas": ("x", np.arange(3.0))}), tmp_path / "anything.b2nd")
    assert list(xr.open_dataset(path, engine="b2nd").data_vars) == ["tas"]
    # variable_name names only arrays that store no name
    ds = xr.open_dataset(path, engine="b2nd", variable_name="other")
    assert list(ds.data_vars) == ["tas"]


def test_variable_name_is_checked(tmp_path):
    (path,) = [write_parts(tmp_path, parts(1)).replace("*", "0")]
    for bad in ("", "a/b", 3):
        with pytest.raises(ValueError, match="variable_name"):
            xr.open_dataset(path, engine="b2nd", variable_name=bad)
    tree = to_b2nd(xr.Dataset({"a": ("x", [1.0]), "b": ("x", [2.0])}), tmp_path / "t.b2d")
    with pytest.raises(ValueError, match="tree"):
        xr.open_dataset(tree, engine="b2nd", variable_name="c")
