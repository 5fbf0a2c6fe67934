"""String variables end to end: NumPy's StringDType and object strings with missing values,
written by ``to_b2nd`` and through ``to_zarr(B2ndStore(...))``, read back by the ``b2nd``
engine and python-blosc2, compared with what xarray's Zarr engine (on a plain directory) and
h5netcdf return for the same Dataset."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
zarr = pytest.importorskip("zarr")
blosc2 = pytest.importorskip("blosc2")

import b2store  # noqa: E402
from b2store import UnsupportedError  # noqa: E402
from b2store.integrations.zarr.store import B2ndStore  # noqa: E402

SD = getattr(np.dtypes, "StringDType", None)
needs_sd = pytest.mark.skipif(SD is None, reason="NumPy 2's StringDType")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # zarr's unstable-dtype notes

LAYOUTS = (".b2nd", ".b2d", ".b2z")


def _decoded_stringdtype():
    """What xarray's own CF decoder makes of a StringDType variable read with that dtype in
    its encoding, which the engine's decoding is: StringDType where xarray keeps it (2026.9),
    object where it converts it "for backwards compatibility" (2026.2, the oldest release
    b2store admits). (zarr's engine there hands back StringDType arrays under an object
    variable: loaded, they show StringDType; the values are the same.)"""
    if SD is None:
        return None
    var = xr.Variable("t", np.array(["a"], dtype=SD()), encoding={"dtype": SD()})
    return xr.conventions.decode_cf_variable("x", var).dtype


DECODED_SD = _decoded_stringdtype()
KEEPS_SD = DECODED_SD is not None and DECODED_SD.kind == "T"


def _b2nd(ds, tmp_path, suffix=".b2d", **kwargs):
    # (mode "w": a test may write several Datasets to the one name in turn)
    path = b2store.to_b2nd(ds, tmp_path / ("s" + suffix), mode="w", **kwargs)
    with xr.open_dataset(path, engine="b2nd") as out:
        return out.load(), path


def _zarr(ds, tmp_path):
    path = tmp_path / "ref.zarr"
    ds.to_zarr(path, consolidated=False, mode="w")
    with xr.open_dataset(path, engine="zarr", consolidated=False) as out:
        return out.load()


def _zarr_if_it_writes(ds, tmp_path):
    """:func:`_zarr`, or None where zarr cannot store the Dataset: zarr 3.1 refuses a
    StringDType with an ``na_object`` ("Zarr data type resolution ... failed")."""
    try:
        return _zarr(ds, tmp_path)
    except ValueError as exc:
        if "data type resolution" not in str(exc):
            raise
        return None


def _blosc2_values(path, name="x"):
    """What python-blosc2 reads of variable ``name`` of what to_b2nd wrote at ``path``."""
    path = str(path)
    if path.endswith(".b2nd"):
        return blosc2.open(path)[:]
    if path.endswith(".b2d"):
        return blosc2.open(f"{path}/{name}.b2nd")[:]
    with blosc2.TreeStore(path, mode="r") as tree:
        return tree[f"/{name}"][:]


def test_a_pandas_string_column_with_nan_reads_back_as_xarrays_zarr_engine_gives(tmp_path):
    df = pd.DataFrame({"station": ["oslo", np.nan, "bergen"], "t": [1.5, 2.5, 3.5]})
    ds = df.to_xarray()
    assert ds.station.dtype == object and pd.isnull(ds.station.values[1])  # pandas 3's form
    ref = _zarr(ds, tmp_path)
    for suffix in (".b2d", ".b2z"):
        got, path = _b2nd(ds, tmp_path, suffix)
        assert got.station.values.tolist() == ref.station.values.tolist() == ["oslo", "", "bergen"]
        assert got.station.dtype == np.dtype("<U6")
        np.testing.assert_array_equal(got.t.values, ds.t.values)
        np.testing.assert_array_equal(_blosc2_values(path, "station"), ["oslo", "", "bergen"])


@needs_sd
@pytest.mark.parametrize("suffix", LAYOUTS)
@pytest.mark.parametrize(
    "values, na_object",
    [
        (["ab", "cdef", "\U0001f600x", ""], None),  # beyond the BMP: one code point each
        (["ab", None, ""], (None,)),
        (["ab", "cdef"], ("",)),
    ],
    ids=["plain", "na-none", "na-empty"],
)
def test_stringdtype_variables_read_back_as_xarrays_zarr_engine_gives(
    tmp_path, suffix, values, na_object
):
    dtype = SD() if na_object is None else SD(na_object=na_object[0])
    ds = xr.Dataset({"x": ("t", np.array(values, dtype=dtype))})
    width = max(len(v or "") for v in values)
    ref = _zarr_if_it_writes(ds, tmp_path)
    got, path = _b2nd(ds, tmp_path, suffix)
    want = ["" if v is None else v for v in values]
    assert got.x.values.tolist() == want
    # StringDType() comes back as xarray decodes it (as one, as from Zarr, where xarray
    # keeps it); with an na_object, fixed-width strings
    assert got.x.dtype == (DECODED_SD if na_object is None else np.dtype(f"<U{width}"))
    if ref is not None:
        assert ref.x.values.tolist() == want
        if KEEPS_SD or na_object is not None:
            assert got.x.dtype == ref.x.dtype
    np.testing.assert_array_equal(_blosc2_values(path), np.array(want, dtype=f"<U{width}"))


@needs_sd
@pytest.mark.parametrize("na_object, word", [(np.nan, "nan"), (pd.NA, "<NA>")])
def test_stringdtype_nan_missing_values_are_empty_strings_not_a_word(tmp_path, na_object, word):
    """The one difference from xarray's writers, documented: they write a NaN or pandas NA
    na_object as the word 'nan' or '<NA>' (their null test is ``== None``); b2nd writes the
    empty string they write for every other missing value."""
    ds = xr.Dataset({"x": ("t", np.array(["ab", na_object], dtype=SD(na_object=na_object)))})
    ref = _zarr_if_it_writes(ds, tmp_path)
    if ref is not None:
        assert ref.x.values.tolist() == ["ab", word]
    got, _ = _b2nd(ds, tmp_path)
    assert got.x.values.tolist() == ["ab", ""]


@needs_sd
@pytest.mark.parametrize("suffix", LAYOUTS)
def test_stringdtype_variables_and_coordinates_as_xarrays_zarr_v3_test_has_them(tmp_path, suffix):
    """xarray's own test of StringDType through Zarr v3: data, a scalar, a dimension and a
    non-dimension coordinate, all StringDType, identical once read back (a single frame
    holds its coordinates in its vlmeta)."""
    data = np.array(["a", "bb", "ccc"], dtype=SD())
    ds = xr.Dataset(
        {"data": ("dim", data.copy())},
        coords={"dim": ("dim", data.copy()), "nondim": ("dim", data.copy())},
    )
    if suffix != ".b2nd":
        ds["scalar"] = xr.Variable((), np.array("a", dtype=SD()))
    got, _ = _b2nd(ds, tmp_path, suffix)
    xr.testing.assert_identical(got, ds)
    for name in ds.variables:
        assert got[name].dtype == DECODED_SD, name
    assert got.sel(dim="bb").data.item() == "bb"


@needs_sd
@pytest.mark.parametrize("suffix", (".b2nd", ".b2d"))
def test_empty_stringdtype_variables_stay_strings(tmp_path, suffix):
    """xarray's encoder types an empty object array as float64; an empty StringDType says
    it holds strings: read back as Zarr gives them (StringDType, else ``<U1``)."""
    for dtype, want in [(SD(), DECODED_SD), (SD(na_object=None), np.dtype("<U1"))]:
        ds = xr.Dataset({"x": ("t", np.array([], dtype=dtype))})
        got, _ = _b2nd(ds, tmp_path, suffix)
        assert got.x.dtype == want
        assert got.x.shape == (0,)
        ref = _zarr_if_it_writes(ds, tmp_path)
        if ref is not None and (KEEPS_SD or want.kind != "O"):
            assert got.x.dtype == ref.x.dtype


@needs_sd
def test_stringdtype_reads_through_dask_and_writes_again(tmp_path):
    ds = xr.Dataset({"x": ("t", np.array(["ab", "😀", "c"], dtype=SD()))})
    path = b2store.to_b2nd(ds, tmp_path / "s.b2d")
    with xr.open_dataset(path, engine="b2nd", chunks={"t": 2}) as lazy:
        assert hasattr(lazy.x.data, "dask") and lazy.x.dtype == DECODED_SD
        assert lazy.x.compute().values.tolist() == ["ab", "😀", "c"]
        # what crosses to a dask worker: the recipe, and the conversion with it
        copy = pickle.loads(pickle.dumps(lazy))
        assert copy.x.dtype == DECODED_SD and copy.x[::-1].values.tolist()[0] == "c"
        again, _ = _b2nd(lazy, tmp_path, ".b2z")  # its encoding dtype is no obstacle
    xr.testing.assert_identical(again, ds)
    # where xarray decodes StringDType as object, the lazy Dataset written again holds object
    # strings, which read back fixed-width as any object strings do
    assert again.x.dtype == (SD() if KEEPS_SD else np.dtype("<U2"))


@needs_sd
def test_stringdtype_opened_from_zarr_is_written_by_to_b2nd(tmp_path):
    ds = xr.Dataset({"x": ("t", np.array(["ab", "cdef"], dtype=SD()))})
    ref = _zarr(ds, tmp_path)
    if KEEPS_SD:
        assert ref.x.encoding["dtype"] == SD()
    got, _ = _b2nd(ref, tmp_path, ".b2nd")
    xr.testing.assert_identical(got, ds)


@pytest.mark.parametrize(
    "values, want",
    [
        (["a", None, "ccc"], ["a", "", "ccc"]),
        ([b"ab", b"cdef", np.nan], [b"ab", b"cdef", b""]),
        # one-byte strings stay whole: never joined as netCDF characters
        ([b"a", np.nan, b"c"], [b"a", b"", b"c"]),
        (["", np.nan], ["", ""]),  # an empty string and a missing one are alike then
    ],
    ids=["str-none", "bytes-nan", "bytes-one", "empty-and-missing"],
)
def test_object_strings_with_missing_values_read_back_as_h5netcdf_gives(tmp_path, values, want):
    ds = xr.Dataset({"x": ("t", np.array(values, dtype=object))})
    ref_path = tmp_path / "ref.nc"
    ds.to_netcdf(ref_path, engine="h5netcdf")
    with xr.open_dataset(ref_path, engine="h5netcdf") as ref:
        assert ref.x.values.tolist() == want
    for suffix in LAYOUTS:
        got, path = _b2nd(ds, tmp_path, suffix)
        assert got.x.values.tolist() == want
        assert got.x.shape == (len(values),)
        np.testing.assert_array_equal(_blosc2_values(path), np.array(want))


@pytest.mark.parametrize(
    "values, fill",
    [(["", np.nan, "c"], "X"), ([b"a", np.nan, b""], b"X"), (["a", np.nan, "c"], "")],
)
def test_a_string_fill_value_keeps_missing_values_missing(tmp_path, values, fill):
    ds = xr.Dataset({"x": ("t", np.array(values, dtype=object))})
    got, path = _b2nd(ds, tmp_path, ".b2nd", encoding={"x": {"_FillValue": fill}})
    assert pd.isnull(got.x.values[1]) and got.x.values[[0, 2]].tolist() == values[::2]
    assert got.x.encoding["_FillValue"] == fill
    stored = blosc2.open(str(path))
    assert stored[1] == fill and stored.vlmeta["_FillValue"] == fill


@pytest.mark.parametrize("values, fill", [(["a", np.nan, "X"], "X"), ([b"", np.nan], b"")])
def test_a_string_equal_to_the_fill_value_is_refused(tmp_path, values, fill):
    ds = xr.Dataset({"x": ("t", np.array(values, dtype=object))})
    with pytest.raises(ValueError, match=r"variable 'x' holds the string .* its _FillValue"):
        b2store.to_b2nd(ds, tmp_path / "s.b2nd", encoding={"x": {"_FillValue": fill}})
    assert not (tmp_path / "s.b2nd").exists()


def test_a_fill_value_of_the_other_kind_is_refused(tmp_path):
    ds = xr.Dataset({"x": ("t", np.array(["a", np.nan], dtype=object))})
    with pytest.raises(ValueError, match=r"_FillValue b'X' of variable 'x' is bytes"):
        b2store.to_b2nd(ds, tmp_path / "s.b2nd", encoding={"x": {"_FillValue": b"X"}})


def test_mixed_objects_are_refused_naming_the_variable_as_xarrays_writers_do(tmp_path):
    ds = xr.Dataset({"x": ("t", np.array(["a", 1, 2.5], dtype=object))})
    with pytest.raises(ValueError, match="unable to infer dtype on variable"):
        ds.to_zarr(tmp_path / "ref.zarr")
    with pytest.raises(ValueError, match="unable to infer dtype on variable 'x'.*mixed"):
        b2store.to_b2nd(ds, tmp_path / "s.b2d")
    both = xr.Dataset({"y": ("t", np.array(["a", b"b"], dtype=object))})
    with pytest.raises(TypeError, match="variable 'y' holds both str and bytes"):
        b2store.to_b2nd(both, tmp_path / "s.b2d")
    assert not (tmp_path / "s.b2d").exists()


def test_numbers_with_missing_values_in_object_arrays_are_floats(tmp_path):
    ds = xr.Dataset({"x": ("t", np.array([1.0, np.nan, 3.0], dtype=object))})
    got, _ = _b2nd(ds, tmp_path)
    assert got.x.dtype == np.float64
    np.testing.assert_array_equal(got.x.values, _zarr(ds, tmp_path).x.values)


@needs_sd
def test_a_narrower_encoding_dtype_than_the_strings_is_refused(tmp_path):
    ds = xr.Dataset({"x": ("t", np.array(["ab", "cdef"], dtype=SD()))})
    with pytest.raises(ValueError, match=r"narrower than its strings \(4 characters\)"):
        b2store.to_b2nd(ds, tmp_path / "s.b2nd", encoding={"x": {"dtype": "U2"}})


def test_dask_object_strings_are_written_with_xarrays_warning(tmp_path):
    pytest.importorskip("dask")
    ds = xr.Dataset({"x": ("t", np.array(["a", np.nan, "cc", "d"], dtype=object))}).chunk(t=2)
    with pytest.warns(xr.SerializationWarning, match="dtype=object"):
        got, _ = _b2nd(ds, tmp_path)
    assert got.x.values.tolist() == ["a", "", "cc", "d"]


# --- through the Zarr store ---------------------------------------------------------------------


def _through_store(ds, tmp_path):
    path = tmp_path / "s.b2d"
    ds.to_zarr(B2ndStore(path, mode="w"), consolidated=False)
    with xr.open_zarr(B2ndStore(path), consolidated=False) as out:
        return out.load(), path


@needs_sd
@pytest.mark.parametrize(
    "values", [np.array(["ab", None], dtype=object), np.array(["ab", "c"], dtype=object)]
)
def test_variable_length_strings_are_refused_by_the_store_with_advice(tmp_path, values):
    """xarray writes StringDType and object strings as Zarr's variable-length "string", which
    a frame of fixed-size items cannot hold; the advice given works."""
    for data in (values, np.array(["ab", "c"], dtype=SD())):
        ds = xr.Dataset({"x": ("t", data)})
        with pytest.raises(UnsupportedError, match=r"array 'x'.*b2store.to_b2nd") as exc:
            ds.to_zarr(B2ndStore(tmp_path / "s.b2d", mode="w"), consolidated=False)
        assert exc.value.feature == "dtype"
        assert not list((tmp_path / "s.b2d").glob("*.b2nd"))  # no frame for x
    ds = xr.Dataset({"x": ("t", values)})
    ds["x"] = ds.x.fillna("").astype(str)
    got, path = _through_store(ds, tmp_path)
    assert got.x.values.tolist() == [v or "" for v in values.tolist()]
    sd = xr.Dataset({"x": ("t", np.array(["ab", "\U0001f600"], dtype=SD()))})
    sd["x"] = sd.x.astype("U2")
    got, path = _through_store(sd, tmp_path)
    assert got.x.values.tolist() == ["ab", "\U0001f600"]
    np.testing.assert_array_equal(blosc2.open(str(path / "x.b2nd"))[:], ["ab", "\U0001f600"])


@needs_sd
def test_stringdtype_with_nulls_goes_through_the_store_as_xarray_writes_it(tmp_path):
    """xarray turns a StringDType with an ``na_object`` into fixed-width strings (nulls as
    '') before Zarr sees it: the store holds them, read back as a plain Zarr store gives."""
    ds = xr.Dataset({"x": ("t", np.array(["ab", None, "c"], dtype=SD(na_object=None)))})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _zarr_if_it_writes(ds, tmp_path)
    if ref is None:
        pytest.skip("this zarr release refuses a StringDType with an na_object itself")
    got, path = _through_store(ds, tmp_path)
    assert got.x.values.tolist() == ref.x.values.tolist() == ["ab", "", "c"]
    np.testing.assert_array_equal(blosc2.open(str(path / "x.b2nd"))[:], ["ab", "", "c"])
    with xr.open_dataset(path, engine="b2nd") as out:
        assert out.x.values.tolist() == ["ab", "", "c"]


def test_one_byte_coordinates_stay_whole_in_a_single_frame(tmp_path):
    """A frame's embedded coordinate of one-byte strings is read whole too, while a
    python-blosc2 file's ``S1`` array keeps being joined as characters
    (test_xarray_backend.py::test_drop_variables_and_concat_characters)."""
    ds = xr.Dataset({"v": ("k", np.array([b"x", b"y"]))}, {"code": ("k", np.array([b"a", b"b"]))})
    got, _ = _b2nd(ds, tmp_path, ".b2nd")
    xr.testing.assert_identical(got, ds)
