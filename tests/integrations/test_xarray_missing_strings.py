"""Missing values among strings (None, NaN, pandas' NA in object arrays or a StringDType):
xarray's netCDF and Zarr writers (both Zarr formats) store them as ``""`` and read ``""`` back;
``to_b2nd`` stores them so too, and now says so, naming the variable and the way to keep
them missing (a string ``_FillValue``), instead of losing the marker without a word."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")

from b2store import to_b2nd  # noqa: E402

CASES = {
    "str-none": (np.array(["a", None, "ccc"], dtype=object), ["a", "", "ccc"], "X"),
    "bytes-nan": (np.array([b"ab", np.nan, b"c"], dtype=object), [b"ab", b"", b"c"], b"X"),
    "str-pd-na": (np.array(["a", pd.NA], dtype=object), ["a", ""], "X"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_missing_strings_are_stored_as_xarrays_writers_store_them_and_it_is_said(tmp_path, case):
    values, stored, _ = CASES[case]
    ds = xr.Dataset({"s": ("x", values)})
    if not case.startswith("bytes"):  # (zarr 3 has no type for object bytes)
        pytest.importorskip("zarr")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for fmt in (2, 3):
                ds.to_zarr(tmp_path / f"ref{fmt}.zarr", zarr_format=fmt, mode="w")
                ref = xr.open_zarr(tmp_path / f"ref{fmt}.zarr").load()
                assert ref.s.values.tolist() == stored  # xarray's own: the marker is lost
    with pytest.warns(xr.SerializationWarning) as caught:
        to_b2nd(ds, tmp_path / "t.b2d", mode="w")
    (message,) = [str(w.message) for w in caught if "missing" in str(w.message)]
    assert message.startswith("variable 's' has 1 missing value(s) among its strings, stored")
    assert "encoding={'s': {'_FillValue': <a string none of its values is>}}" in message
    assert "ds['s'].fillna('')" in message
    with xr.open_dataset(tmp_path / "t.b2d", engine="b2nd") as back:
        assert back.s.values.tolist() == stored


@pytest.mark.parametrize("case", list(CASES))
def test_the_way_out_keeps_them_missing_without_a_word(tmp_path, case):
    values, _, fill = CASES[case]
    ds = xr.Dataset({"s": ("x", values)})
    with warnings.catch_warnings():
        warnings.simplefilter("error", xr.SerializationWarning)
        to_b2nd(ds, tmp_path / "t.b2d", mode="w", encoding={"s": {"_FillValue": fill}})
        to_b2nd(ds.fillna(fill[:0]), tmp_path / "u.b2d", mode="w")  # '' meant: no word
    with xr.open_dataset(tmp_path / "t.b2d", engine="b2nd") as back:
        assert pd.isnull(back.s.values[1])


@pytest.mark.parametrize(
    "values",
    [np.array(["a", "b"], dtype=object), np.array([np.nan, None], dtype=object)],
    ids=["no-missing", "all-missing-is-floats"],
)
def test_no_word_where_nothing_is_lost(tmp_path, values):
    with warnings.catch_warnings():
        warnings.simplefilter("error", xr.SerializationWarning)
        to_b2nd(xr.Dataset({"s": ("x", values)}), tmp_path / "t.b2d", mode="w")
