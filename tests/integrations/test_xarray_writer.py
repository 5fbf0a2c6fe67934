"""to_b2nd writes Datasets and DataTrees that read back identical through the b2nd engine and
open in python-blosc2: single frames (contiguous and sparse), .b2d and .b2z trees; CF and
storage encodings per variable; dask data written chunk by chunk."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 checks what b2store writes")
da = pytest.importorskip("dask.array")

from helpers import WRITE_LAYOUTS as LAYOUTS  # noqa: E402

from b2store.integrations.xarray.to_b2nd import to_b2nd  # noqa: E402

DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8", "c8", "c16", "?", "U3", "S2"]


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    dtype = np.dtype(dtype)
    if dtype.kind == "U":
        return np.array([f"s{i % 97}" for i in range(n)], dtype).reshape(shape)
    if dtype.kind == "S":
        return np.array([b"%02d" % (i % 97) for i in range(n)], dtype).reshape(shape)
    if dtype.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dtype.kind == "c":
        return (rng.normal(size=n) + 1j * rng.normal(size=n)).astype(dtype).reshape(shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True).reshape(shape)
    return rng.normal(size=n).astype(dtype).reshape(shape)


def climate(nt=10, ny=6, nx=8):
    time = pd.date_range("2001-01-01", periods=nt, freq="6h")
    return xr.Dataset(
        {
            "tas": (
                ("time", "lat", "lon"),
                values((nt, ny, nx), "f4"),
                {"units": "K", "standard_name": "air_temperature"},
            )
        },
        coords={
            "time": time,
            "lat": ("lat", np.linspace(-50, 50, ny), {"units": "degrees_north"}),
            "lon": ("lon", np.arange(nx) * 45.0, {"units": "degrees_east"}),
            "height": ((), 2.0, {"units": "m"}),
            "site": ("lat", [f"st{i}" for i in range(ny)]),
        },
        attrs={"title": "test run", "version": np.int16(3), "weights": np.array([0.5, 0.25])},
    )


def write_and_read(ds, tmp_path, layout, **kwargs):
    name, options = LAYOUTS[layout]
    path = to_b2nd(ds, tmp_path / name, **options, **kwargs)
    back = xr.open_dataset(path, engine="b2nd")
    return path, back


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_dataset_with_coordinates_and_attributes_round_trips(tmp_path, layout):
    ds = climate()
    path, back = write_and_read(ds, tmp_path, layout)
    xr.testing.assert_identical(back.load(), ds)
    assert back.attrs["version"].dtype == np.int16
    assert back.tas.dtype == np.float32 and back.time.dtype.kind == "M"
    back.close()


@pytest.mark.parametrize("layout", ["frame", "b2z"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_round_trip(tmp_path, layout, dtype):
    ds = xr.Dataset({"v": (("a", "b"), values((5, 7), dtype))})
    _, back = write_and_read(ds, tmp_path, layout)
    xr.testing.assert_identical(back.load(), ds)


@pytest.mark.parametrize("layout", ["sparse", "b2d"])
@pytest.mark.parametrize("shape", [(), (7,), (5, 6), (3, 4, 5), (2, 3, 4, 5), (0, 3)])
def test_dimensions_round_trip(tmp_path, layout, shape):
    dims = ("w", "x", "y", "z")[: len(shape)]
    ds = xr.Dataset({"v": (dims, values(shape, "f8"), {"note": "n-d"})})
    _, back = write_and_read(ds, tmp_path, layout)
    xr.testing.assert_identical(back.load(), ds)


def test_many_variables_and_times_in_a_tree(tmp_path):
    ds = climate()
    ds["flag"] = ds.tas > 0.5
    ds["lag"] = ("time", pd.to_timedelta(np.arange(10), "h"))
    ds["count"] = (("lat", "lon"), values((6, 8), "i4"))
    ds["name"] = ("lon", np.array([f"x{i}" for i in range(8)], dtype=object))
    path, back = write_and_read(ds, tmp_path, "b2d")
    xr.testing.assert_identical(back.load(), ds)
    # Times are stored CF-encoded (integers and units) where python-blosc2 sees them.
    ts = blosc2.open(str(path))
    time = ts["/time"]
    assert time.dtype.kind == "i" and "since" in time.vlmeta["units"]
    tas = ts["/tas"]  # python-blosc2's vlmeta needs its array alive
    assert tas.vlmeta["_ARRAY_DIMENSIONS"] == ["time", "lat", "lon"]
    assert ts.vlmeta["title"] == "test run"
    np.testing.assert_array_equal(ts["/count"][:], ds["count"].values)


def test_cf_packing_of_integers(tmp_path):
    data = np.linspace(250.0, 310.0, 60).reshape(6, 10)
    data[2, 3] = np.nan
    ds = xr.Dataset({"t": (("y", "x"), data)})
    encoding = {
        "t": {"dtype": "i2", "scale_factor": 0.01, "add_offset": 280.0, "_FillValue": -32768}
    }
    path = to_b2nd(ds, tmp_path / "t.b2nd", encoding=encoding)
    raw = blosc2.open(str(path))
    assert raw.dtype == np.int16 and raw.vlmeta["scale_factor"] == 0.01
    assert raw[2, 3] == -32768
    back = xr.open_dataset(path, engine="b2nd")
    np.testing.assert_allclose(back.t.values, data, atol=0.006)
    assert np.isnan(back.t.values[2, 3])


def test_time_units_and_calendar_from_encoding(tmp_path):
    time = pd.date_range("2010-01-01", periods=4, freq="D")
    ds = xr.Dataset({"v": ("time", [1.0, 2.0, 3.0, 4.0])}, {"time": time})
    enc = {"time": {"units": "hours since 2010-01-01", "calendar": "standard", "dtype": "i4"}}
    path = to_b2nd(ds, tmp_path / "v.b2nd", encoding=enc)
    # A single frame keeps its (small) coordinates in its _xarray vlmeta.
    arr = blosc2.open(str(path))
    coords = arr.vlmeta["_xarray"]["coords"]
    np.testing.assert_array_equal(coords["time"]["data"], [0, 24, 48, 72])
    assert coords["time"]["attrs"]["units"] == "hours since 2010-01-01"
    xr.testing.assert_identical(xr.open_dataset(path, engine="b2nd").load(), ds)


def test_default_coding_is_zstd_clevel_1_with_python_blosc2s_shapes(tmp_path):
    # to_b2nd's one departure from python-blosc2's defaults: Zstd at clevel 1, not 5. The chunk
    # and block shapes stay python-blosc2's, and a level asked for, here or kept in a variable's
    # encoding, still wins.
    ds = xr.Dataset(
        {
            "a": (("t", "y", "x"), values((20, 60, 70), "f4")),
            "b": (("t", "y", "x"), values((20, 60, 70), "f4", seed=1)),
        }
    )
    path = Path(to_b2nd(ds, tmp_path / "d.b2d", encoding={"b": {"clevel": 5}}))
    a, b = (blosc2.open(str(path / f"{v}.b2nd")) for v in "ab")
    assert (a.schunk.cparams.codec, a.schunk.cparams.clevel) == (blosc2.Codec.ZSTD, 1)
    assert a.schunk.cparams.filters[-1] == blosc2.Filter.SHUFFLE
    assert b.schunk.cparams.clevel == 5
    ref = blosc2.asarray(ds.a.values)
    assert (a.chunks, a.blocks) == (ref.chunks, ref.blocks)
    np.testing.assert_array_equal(a[:], ds.a.values)
    back = xr.open_dataset(path, engine="b2nd")
    assert back.a.encoding["clevel"] == 1 and back.b.encoding["clevel"] == 5
    again = Path(to_b2nd(back, tmp_path / "again.b2d"))
    assert blosc2.open(str(again / "b.b2nd")).schunk.cparams.clevel == 5


def test_storage_encoding_per_variable(tmp_path):
    ds = xr.Dataset(
        {
            "a": (("y", "x"), values((40, 30), "f8")),
            "b": (("y", "x"), values((40, 30), "i4")),
        }
    )
    encoding = {
        "a": {"codec": "lz4", "clevel": 7, "filters": ["bitshuffle"], "chunks": (10, 15)},
        "b": {"chunks": (20, 30), "blocks": (5, 10), "codec": "zlib", "clevel": 1},
    }
    path = Path(to_b2nd(ds, tmp_path / "s.b2d", encoding=encoding))
    a = blosc2.open(str(path / "a.b2nd"))
    b = blosc2.open(str(path / "b.b2nd"))
    assert a.chunks == (10, 15) and b.chunks == (20, 30) and b.blocks == (5, 10)
    assert a.schunk.cparams.codec == blosc2.Codec.LZ4 and a.schunk.cparams.clevel == 7
    assert blosc2.Filter.BITSHUFFLE in a.schunk.cparams.filters
    assert b.schunk.cparams.codec == blosc2.Codec.ZLIB
    np.testing.assert_array_equal(a[:], ds.a.values)
    back = xr.open_dataset(path, engine="b2nd")
    assert back.a.encoding["codec"] == "lz4" and back.b.encoding["blocks"] == (5, 10)
    # Rewriting what the engine opened keeps its storage choices.
    again = to_b2nd(back, tmp_path / "again.b2d")
    assert blosc2.open(f"{again}/b.b2nd").blocks == (5, 10)


def test_dask_variables_are_written_chunk_by_chunk(tmp_path):
    computed = []

    def record(block):
        if block.size:  # dask calls it once on an empty block to learn the output type
            computed.append(block.shape)
        return block

    full = values((64, 40), "f8")
    lazy = da.from_array(full, chunks=(16, 20)).map_blocks(record, dtype="f8")
    ds = xr.Dataset({"v": (("y", "x"), lazy)})
    path = to_b2nd(ds, tmp_path / "v.b2nd")
    # Each dask block computed once, none larger than a chunk: never the whole array.
    assert sorted(computed) == [(16, 20)] * 8
    arr = blosc2.open(str(path))
    assert arr.chunks == (16, 20)
    np.testing.assert_array_equal(arr[:], full)
    back = xr.open_dataset(path, engine="b2nd", chunks={})
    assert back.v.chunks == lazy.chunks


def test_dask_chunks_that_do_not_fit_are_regrouped(tmp_path):
    full = values((50, 9), "i8")
    lazy = da.from_array(full, chunks=((10, 25, 15), (9,)))
    ds = xr.Dataset({"v": (("y", "x"), lazy)})
    path = to_b2nd(ds, tmp_path / "v.b2nd", encoding={"v": {"chunks": (20, 9)}})
    np.testing.assert_array_equal(blosc2.open(str(path))[:], full)


def test_datatree_round_trips(tmp_path):
    tree = xr.DataTree.from_dict(
        {
            "/": xr.Dataset(attrs={"institution": "here"}),
            "/model": climate(4, 3, 2),
            "/model/diag": xr.Dataset({"score": ("run", [0.1, 0.2])}, attrs={"n": 2}),
            "/empty": xr.Dataset(),
        }
    )
    for name in ("tree.b2d", "tree.b2z"):
        path = to_b2nd(tree, tmp_path / name)
        back = xr.open_datatree(path, engine="b2nd")
        xr.testing.assert_identical(back.load(), tree)
        ts = blosc2.open(str(path), mode="r")
        assert "/model/diag/score" in ts.keys()
        assert ts.get_subtree("/model/diag").vlmeta["n"] == 2


def test_b2z_members_are_stored_and_embed_last(tmp_path):
    import zipfile

    path = to_b2nd(climate(), tmp_path / "c.b2z")
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    assert all(i.compress_type == zipfile.ZIP_STORED for i in infos)
    assert infos[-1].filename == "embed.b2e"
    assert {"tas.b2nd", "time.b2nd", "__vlmeta__.b2f"} <= {i.filename for i in infos}


def test_data_array_and_layout_choice(tmp_path):
    arr = xr.DataArray(values((3, 4), "f8"), dims=("y", "x"), name="z", attrs={"u": "m"})
    path = to_b2nd(arr, tmp_path / "noext")
    assert (tmp_path / "noext").is_file()
    xr.testing.assert_identical(xr.open_dataarray(path, engine="b2nd").load(), arr)
    two = xr.Dataset({"a": ("x", [1, 2]), "b": ("x", [3, 4])})
    assert to_b2nd(two, tmp_path / "auto") and (tmp_path / "auto" / "embed.b2e").is_file()
    with pytest.raises(ValueError, match="one data variable"):
        to_b2nd(two, tmp_path / "two.b2nd")


def test_modes_and_bad_input(tmp_path):
    ds = xr.Dataset({"a": ("x", [1, 2])})
    path = to_b2nd(ds, tmp_path / "a.b2nd")
    with pytest.raises(FileExistsError, match=r"exists and mode='w-' does not replace it"):
        to_b2nd(ds, path, mode="w-")
    to_b2nd(ds * 2, path, mode="w")  # replaces
    np.testing.assert_array_equal(xr.open_dataset(path, engine="b2nd").a.values, [2, 4])
    with pytest.raises(ValueError, match="mode must be"):
        to_b2nd(ds, path, mode="append")
    to_b2nd(ds * 3, path, mode="a")  # writes over the stored values, as to_zarr(mode="a")
    np.testing.assert_array_equal(xr.open_dataset(path, engine="b2nd").a.values, [3, 6])
    with pytest.raises(ValueError, match="unexpected encoding"):
        to_b2nd(ds, tmp_path / "b.b2nd", encoding={"a": {"compressor": "zstd"}})
    with pytest.raises(ValueError, match="not in the dataset"):
        to_b2nd(ds, tmp_path / "b.b2nd", encoding={"nope": {}})
    with pytest.raises(ValueError, match="cannot name"):
        to_b2nd(xr.Dataset({"a/b": ("x", [1])}), tmp_path / "c.b2d")
    with pytest.raises(TypeError, match="cannot be stored"):
        to_b2nd(xr.Dataset({"a": ("x", [1], {"when": object()})}), tmp_path / "d.b2nd")
    assert not (tmp_path / "d.b2nd").exists()
    # Nothing half-written is left beside the target.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.b2nd", "c.b2d"] or sorted(
        p.name for p in tmp_path.iterdir()
    ) == ["a.b2nd"]


def test_long_attribute_names_survive(tmp_path):
    name = "an_attribute_name_longer_than_31_bytes"
    ds = xr.Dataset({"a": ("x", [1, 2], {name: 1})}, attrs={name: "root"})
    for suffix in (".b2nd", ".b2d"):
        back = xr.open_dataset(to_b2nd(ds, tmp_path / f"l{suffix}"), engine="b2nd")
        xr.testing.assert_identical(back.load(), ds)


@pytest.mark.parametrize("contiguous", [True, False])
def test_zero_size_frame_opens_in_python_blosc2(tmp_path, contiguous):
    # A frame without chunks keeps its trailer where c-blosc2 looks: its vlmeta are seen.
    ds = xr.Dataset({"v": (("t", "x"), np.zeros((0, 3), "f4"), {"units": "K"})})
    path = to_b2nd(ds, tmp_path / "v.b2nd", contiguous=contiguous)
    arr = blosc2.open(str(path))
    assert arr.shape == (0, 3) and arr.dtype == np.float32
    assert arr.vlmeta["_ARRAY_DIMENSIONS"] == ["t", "x"]
    assert arr.vlmeta["units"] == "K"


# --- what xarray's backend test classes expect of a writer (test_xarray_backend_classes.py) ----


@pytest.mark.parametrize("layout", ["t.b2nd", "t.b2d", "t.b2z"])
@pytest.mark.parametrize("via", ["encoding", "kwarg"])
@pytest.mark.parametrize("on", ["x", "y"])  # the data variable, its coordinate
def test_fill_value_none_writes_no_fill_value(tmp_path, layout, via, on):
    """``_FillValue: None`` asks for no fill value (xarray's netCDF and Zarr writers store
    none); it was refused as a key that 'does not apply'."""
    ds = xr.Dataset({"x": ("y", [np.pi, -np.pi])}, {"y": [1.5, 2.5]})
    kwargs = {}
    if via == "encoding":
        ds[on].encoding["_FillValue"] = None
    else:
        kwargs["encoding"] = {on: {"_FillValue": None}}
    got = xr.open_dataset(to_b2nd(ds, tmp_path / layout, **kwargs), engine="b2nd")
    assert "_FillValue" not in got[on].encoding and "_FillValue" not in got[on].attrs
    raw = xr.open_dataset(tmp_path / layout, engine="b2nd", decode_cf=False)
    assert "_FillValue" not in raw[on].attrs
    xr.testing.assert_identical(got.load(), ds)


@pytest.mark.parametrize("entry", ["foo", 3, [1, 2]])
def test_encoding_entry_that_is_no_mapping(tmp_path, entry):
    ds = xr.Dataset({"x": ("y", np.arange(3.0))})
    with pytest.raises(ValueError, match=r"encoding for 'x' must be castable to a dictionary"):
        to_b2nd(ds, tmp_path / "t.b2d", encoding={"x": entry})


@pytest.mark.parametrize(
    "name, error, match",
    [
        (0, TypeError, r"Invalid name 0 .*must be either a string or None"),
        ((4, 5), TypeError, r"Invalid name \(4, 5\) .*must be either a string or None"),
        (True, TypeError, r"Invalid name True .*must be either a string or None"),
        ("", ValueError, r"Invalid name '' .*string must be length 1 or greater"),
    ],
)
@pytest.mark.parametrize("layout", ["t.b2nd", "t.b2d"])
def test_variable_names_refused_as_xarray_refuses_them(tmp_path, name, error, match, layout):
    """A name that is no string is a TypeError, an empty one a ValueError, worded as
    xarray's writers word them (their backend tests match the words)."""
    ds = xr.Dataset({name: xr.DataArray(np.zeros((2, 2)))})
    with pytest.raises(error, match=match):
        to_b2nd(ds, tmp_path / layout)
    assert not (tmp_path / layout).exists()


@pytest.mark.parametrize("layout", ["t.b2nd", "t.b2d", "t.b2z"])
def test_dask_object_strings_warn_that_they_are_loaded(tmp_path, layout):
    pytest.importorskip("dask")
    ds = xr.Dataset({"x": ("y", np.array(["foo", "barbaz"], dtype=object))}).chunk()
    with pytest.warns(xr.SerializationWarning, match="variable x has data in the form of a dask"):
        path = to_b2nd(ds, tmp_path / layout)
    xr.testing.assert_identical(xr.open_dataset(path, engine="b2nd").load(), ds.compute())


@pytest.mark.parametrize("layout", ["t.b2nd", "t.b2d", "t.b2z"])
@pytest.mark.parametrize(
    "values, dtype",
    [
        (["abcd", "x"], "U2"),
        (["abcd", "x"], "S3"),
        ([b"abcd", b"x"], "S2"),
        ([b"abcd", b"x"], "U1"),
        (np.array(["abcd", "x"], dtype=object), "U3"),
        (np.array([b"abcd", b"x"], dtype=object), "S2"),
    ],
)
@pytest.mark.parametrize("via", ["encoding", "kwarg"])
def test_string_dtype_narrower_than_the_strings_is_refused(tmp_path, layout, values, dtype, via):
    """An encoding dtype that would cut the strings (NumPy's cast does, silently, and xarray's
    netCDF writers store the cut strings) is refused; nothing is written."""
    ds = xr.Dataset({"v": ("t", values)})
    kwargs = {"encoding": {"v": {"dtype": dtype}}} if via == "kwarg" else {}
    if via == "encoding":
        ds.v.encoding["dtype"] = dtype
    with pytest.raises(ValueError, match=rf"encoding dtype '.{dtype}' of variable 'v' is narrower"):
        to_b2nd(ds, tmp_path / layout, **kwargs)
    assert not (tmp_path / layout).exists()


@pytest.mark.parametrize(
    "values, dtype",
    [(["abcd", "x"], "S1"), (["abcd", "x"], "U4"), (["abcd", "x"], "U9")]
    + [([b"abcd", b"x"], "S4"), ([b"abcd", b"x"], "S10"), ([b"abcd", b"x"], "S1")],
)
def test_string_dtype_wide_enough_is_kept(tmp_path, values, dtype):
    ds = xr.Dataset({"v": ("t", values)})
    path = to_b2nd(ds, tmp_path / "t.b2d", encoding={"v": {"dtype": dtype}})
    xr.testing.assert_identical(xr.open_dataset(path, engine="b2nd").load(), ds)
