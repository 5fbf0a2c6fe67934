"""``to_b2nd``'s refusals of a write into a stored Dataset name the way out (issue 39): the
argument or mode that does what the user likely meant, not only what went wrong. Each
message is asserted whole; xarray's own words (which its backend tests match) stay first."""

from __future__ import annotations

import re

import numpy as np
import pytest

xr = pytest.importorskip("xarray")

import b2store  # noqa: E402
from b2store import to_b2nd  # noqa: E402


def _days(start: int, n: int) -> xr.Dataset:
    t = np.arange(start, start + n)
    return xr.Dataset(
        {"sst": (("time", "x"), np.ones((n, 4)) * t[:, None])}, {"time": t, "x": np.arange(4)}
    )


def _raises(message: str, exc=ValueError):
    return pytest.raises(exc, match=f"^{re.escape(message)}$")


def test_a_variable_added_to_a_single_frame_names_append_dim_mode_w_and_trees(tmp_path):
    # What a user meant by mode="a" on a .b2nd frame is most often an append along time.
    path = tmp_path / "sst.b2nd"
    to_b2nd(_days(0, 3), path)
    with _raises(
        "a single .b2nd frame holds one data variable and its coordinates (['sst']): "
        "['sst2'] cannot be added to it. To append along a dimension pass append_dim= one of "
        "['time', 'x']; to replace the frame, mode='w'; to keep several variables, write the "
        "Dataset to a .b2d or .b2z tree"
    ):
        to_b2nd(_days(3, 2).rename(sst="sst2"), path, mode="a")
    to_b2nd(_days(3, 2), path, append_dim="time")  # the first way out named
    with xr.open_dataset(path, engine="b2nd") as back:
        np.testing.assert_array_equal(back.time.values, np.arange(5))


def test_each_refusal_of_an_append_names_its_way_out(tmp_path):
    path = tmp_path / "sst.b2d"
    to_b2nd(_days(0, 3), path)
    nxt = _days(3, 2)
    with _raises(
        "append_dim='day' does not match any existing dataset dimensions "
        "{'time': 3, 'x': 4}: append along one of them"
    ):
        to_b2nd(nxt, path, append_dim="day")
    with _raises(
        "variable 'sst' already exists, but encoding was provided: values written into it "
        "are encoded as stored, so leave 'sst' out of encoding (or pass mode='w' to write "
        "the Dataset anew with it)"
    ):
        to_b2nd(nxt, path, append_dim="time", encoding={"sst": {"clevel": 1}})
    with _raises(
        "Mismatched dtypes for variable sst between the b2nd store on disk (float64) and the "
        "dataset to append (<U3): cast the values to float64 (.astype), or pass mode='w' to "
        "write the Dataset anew"
    ):
        to_b2nd(nxt.assign(sst=nxt.sst.astype("U3")), path, append_dim="time")
    with _raises(
        "variables ['sst'] are stored along append_dim='time' but are not in the dataset to "
        "append: they would be left shorter than the dimension; append them too"
    ):
        to_b2nd(nxt.drop_vars("sst"), path, append_dim="time")
    with _raises(
        "region dimension 'y' is not a stored dimension: region= takes the stored ones, "
        "['time', 'x']"
    ):
        to_b2nd(xr.Dataset({"v": ("y", [1.0])}), path, mode="a", region={"y": slice(0, 1)})
    plain = tmp_path / "plain.b2d"  # a dimension without a coordinate
    to_b2nd(xr.Dataset({"v": ("y", [1.0, 2.0])}), plain)
    with _raises(
        "region='auto' needs a stored coordinate 'y' to find the region: give it as "
        "region={'y': slice(start, stop)}"
    ):
        to_b2nd(xr.Dataset({"v": ("y", [1.0])}, {"y": [5]}), plain, mode="r+", region="auto")


def test_a_datatree_written_into_a_stored_dataset_names_the_way_out(tmp_path):
    path = tmp_path / "sst.b2d"
    to_b2nd(_days(0, 3), path)
    tree = xr.DataTree.from_dict({"/": _days(3, 2)})
    with _raises(
        "to_b2nd(mode='a') writes into a stored Dataset from a Dataset or DataArray, not "
        "DataTree: write each group's Dataset into its own path, or pass mode='w' to replace "
        "what is stored",
        TypeError,
    ):
        to_b2nd(tree, path, mode="a")


def test_nothing_to_write_into_names_the_way_out(tmp_path):
    path = tmp_path / "none.b2d"
    with _raises(
        f"{path}: nothing to write into (mode='r+' writes into a stored Dataset only); write "
        "it first (mode='w-', the default)",
        FileNotFoundError,
    ):
        to_b2nd(_days(0, 3), path, mode="r+")
    with _raises(
        f"{path}: nothing to write a region into; write the Dataset first (mode='w-', the default)",
        FileNotFoundError,
    ):
        to_b2nd(_days(0, 3), path, mode="a", region={"time": slice(0, 3)})
    with _raises(
        f"storage_options are for a URL path (s3://...), not a local path: drop them for {path}"
    ):
        to_b2nd(_days(0, 3), path, storage_options={"anon": True})
    with _raises(
        "storage_options are for a URL urlpath (s3://...), not a local path: drop them for "
        f"{tmp_path / 'a.b2nd'}"
    ):
        b2store.asarray(np.arange(3), tmp_path / "a.b2nd", storage_options={"anon": True})
    with _raises(
        "storage_options are for a URL urlpath (s3://...), not a local path: drop them for "
        "an array in memory"
    ):
        b2store.zeros(3, storage_options={"anon": True})
