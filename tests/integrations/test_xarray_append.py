"""to_b2nd writing into what it wrote before, as to_zarr does: appends along a dimension
(mode="a", append_dim=...), overwrites and new variables (mode="a"), region writes
(mode="r+", region=...), into single frames, .b2d and .b2z trees; what is read back (by the
b2nd engine and by python-blosc2) equals xr.concat of the parts, and the stored encoding is
kept; xarray's refusals are b2store's."""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 checks what b2store writes")
da = pytest.importorskip("dask.array")

from helpers import WRITE_LAYOUTS as LAYOUTS  # noqa: E402

import b2store  # noqa: E402
from b2store import journal  # noqa: E402
from b2store.integrations.xarray.to_b2nd import to_b2nd  # noqa: E402


def day(k: int, n: int = 2, single: bool = False) -> xr.Dataset:
    """``n`` days from day ``k``: a 2-d field, a 1-d series and a time coordinate."""
    time = pd.date_range("2001-01-01", periods=n, freq="D") + pd.Timedelta(days=k)
    rows = np.arange(k, k + n, dtype="f4")[:, None] * 10 + np.arange(5, dtype="f4")
    ds = xr.Dataset(
        {"sst": (("time", "x"), rows, {"units": "K"}), "n": ("time", np.arange(k, k + n))},
        {"time": time, "x": [10, 20, 30, 40, 50]},
        attrs={"title": "days"},
    )
    return ds.drop_vars("n") if single else ds


def frames(path: Path) -> dict:
    """Each frame python-blosc2 reads at ``path`` (a file, or a tree's members)."""
    if path.is_file() and path.suffix == ".b2nd":
        return {"": blosc2.open(str(path))[...]}
    if path.suffix == ".b2nd":  # a sparse frame
        return {"": blosc2.open(str(path))[...]}
    store = blosc2.TreeStore(str(path), mode="r")
    return {k: store[k][...] for k in store.keys() if hasattr(store[k], "shape")}


def ours(path: Path) -> dict:
    tree = b2store.open_tree(str(path))
    out = {}
    for key, ref in tree.arrays().items():
        with ref.open() as a:
            out["" if tree.kind == "frame" else key] = a[...]
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dask", [False, True], ids=["numpy", "dask"])
def test_appended_days_read_as_the_concatenation(tmp_path, layout, dask):
    name, kwargs = LAYOUTS[layout]
    single = layout in ("frame", "sparse")
    path = tmp_path / name
    parts = [day(0, 5, single), day(5, 3, single), day(8, 1, single), day(9, 4, single)]
    if dask:
        parts = [p.chunk({"time": 2}) for p in parts]
    to_b2nd(parts[0], path, encoding={"sst": {"chunks": (2, 3), "blocks": (1, 3)}}, **kwargs)
    for part in parts[1:]:
        to_b2nd(part, path, mode="a", append_dim="time")
    want = xr.concat([p.compute() for p in parts], "time")
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), want)
        # the stored encoding stays: the first write's chunks, blocks, time units
        assert got.sst.encoding["chunks"] == (2, 3)
        assert got.sst.encoding["blocks"] == (1, 3)
        assert got.time.encoding["units"] == "days since 2001-01-01 00:00:00"
    # python-blosc2 reads every frame, equal bit for bit to what b2store reads
    theirs, mine = frames(path), ours(path)
    assert set(theirs) == set(mine) and theirs
    for key in mine:
        assert theirs[key].dtype == mine[key].dtype
        assert theirs[key].tobytes() == mine[key].tobytes(), key
    if not single:
        np.testing.assert_array_equal(theirs["/sst"], want.sst.values)
        np.testing.assert_array_equal(theirs["/time"], np.arange(13))  # days since the start
    assert not journal.pending(path) if path.is_dir() else True
    # nothing left beside the target
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_an_append_writes_after_what_is_there(tmp_path):
    # The chunks stored before are not rewritten: only the edge chunk the new days start in
    # is written anew (after the end), the header moves; the bytes before stay as they were.
    path = tmp_path / "t.b2nd"
    to_b2nd(day(0, 6, True), path, encoding={"sst": {"chunks": (4, 5)}})
    before = path.read_bytes()
    with b2store.open(str(path)) as a:
        header_len = a.schunk.header.header_len
        chunks_end = header_len + a.schunk.header.cbytes
        first = a.schunk.offsets[0]
    to_b2nd(day(6, 1, True), path, mode="a", append_dim="time")
    after = path.read_bytes()
    assert after[header_len:chunks_end] == before[header_len:chunks_end]
    with b2store.open(str(path)) as a:
        assert a.schunk.offsets[0] == first  # the full chunk is the same stored chunk
        assert a.shape == (7, 5)


def test_dask_days_are_computed_a_few_chunks_at_a_time(tmp_path, monkeypatch):
    import dask

    path = tmp_path / "t.b2d"
    to_b2nd(day(0, 4), path, encoding={"sst": {"chunks": (2, 5)}})
    big = day(4, 40).chunk({"time": 2})
    seen = []
    real = dask.compute

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(sum(np.asarray(o).nbytes for o in out))
        return out

    monkeypatch.setattr(dask, "compute", counting)
    to_b2nd(big, path, mode="a", append_dim="time")
    monkeypatch.undo()
    batch = max(1, os.cpu_count() or 1)
    assert len(seen) > 1 and max(seen) <= batch * 2 * 5 * 8  # a batch of (2, 5) chunks
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), xr.concat([day(0, 4), big.compute()], "time"))


def test_cf_encoding_of_the_stored_variables_is_used(tmp_path):
    # Packed values, a fill value and the stored time units: the appended values are
    # encoded with them (not with what xarray would choose for the new part alone).
    path = tmp_path / "t.b2d"
    first = day(0, 3)
    first["sst"][1, 1] = np.nan
    enc = {
        "sst": {"dtype": "i2", "scale_factor": 0.5, "add_offset": 100.0, "_FillValue": -1},
        "time": {"units": "hours since 2001-01-01", "dtype": "i8"},
    }
    to_b2nd(first, path, encoding=enc)
    second = day(3, 2)
    second["sst"][0, 0] = np.nan
    second["time"] = second.time + pd.Timedelta(hours=6)  # not a whole day: hours needed
    to_b2nd(second, path, mode="a", append_dim="time")
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_allclose(got.load(), xr.concat([first, second], "time"))
        assert got.time.encoding["units"] == "hours since 2001-01-01"
        assert got.sst.encoding["dtype"] == np.dtype("i2")
        assert got.sst.encoding["scale_factor"] == 0.5
    raw = blosc2.TreeStore(str(path), mode="r")
    assert raw["/time"][...].tolist() == [0, 24, 48, 78, 102]
    assert raw["/sst"][...][3, 0] == -1  # the stored fill value


def test_new_variables_are_added_and_stored_ones_overwritten(tmp_path):
    path = tmp_path / "t.b2d"
    ds = day(0, 3)
    to_b2nd(ds, path)
    extra = xr.Dataset({"wind": (("time", "x"), np.ones((3, 5), "f8"))}, ds.coords)
    to_b2nd(extra, path, mode="a")
    ds2 = ds.copy(deep=True)
    ds2["n"][:] = -7
    to_b2nd(ds2[["n"]], path, mode="a")
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), xr.merge([ds2, extra]))


def test_mode_a_minus_keeps_what_does_not_lie_along_append_dim(tmp_path):
    path = tmp_path / "t.b2d"
    to_b2nd(day(0, 3), path)
    nxt = day(3, 2).assign_coords(x=[-1, -2, -3, -4, -5])
    to_b2nd(nxt, path, mode="a-", append_dim="time")
    with xr.open_dataset(path, engine="b2nd") as got:
        np.testing.assert_array_equal(got.x.values, [10, 20, 30, 40, 50])
        assert got.sizes["time"] == 5
    to_b2nd(day(5, 1).assign_coords(x=[-1, -2, -3, -4, -5]), path, mode="a", append_dim="time")
    with xr.open_dataset(path, engine="b2nd") as got:
        np.testing.assert_array_equal(got.x.values, [-1, -2, -3, -4, -5])  # "a" overwrites


@pytest.mark.parametrize("layout", LAYOUTS)
def test_region_writes_in_place(tmp_path, layout):
    name, kwargs = LAYOUTS[layout]
    single = layout in ("frame", "sparse")
    path = tmp_path / name
    whole = day(0, 10, single)
    to_b2nd(whole, path, encoding={"sst": {"chunks": (3, 2)}}, **kwargs)
    patch = whole.isel(time=slice(4, 7)).drop_vars(["time"]) * 0 - 5
    patch = patch.drop_vars([v for v in patch.variables if "time" not in patch[v].dims])
    to_b2nd(patch, path, mode="r+", region={"time": slice(4, 7)})
    want = whole.copy(deep=True)
    for v in patch.data_vars:
        want[v][4:7] = -5
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), want)
    # region="auto" finds the place from the time coordinate
    auto = whole.isel(time=slice(8, 10))[["sst"]] * 0 + 1
    to_b2nd(auto.drop_vars("x"), path, mode="r+", region="auto")
    want["sst"][8:10] = 1
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), want)
        assert got.sizes["time"] == 10


def test_region_write_with_dask(tmp_path):
    path = tmp_path / "t.b2d"
    whole = day(0, 9)
    to_b2nd(whole, path, encoding={"sst": {"chunks": (2, 5)}})
    new = (whole.isel(time=slice(3, 8))[["sst"]].drop_vars(["time", "x"]) + 1).chunk({"time": 2})
    to_b2nd(new, path, region={"time": slice(3, 8)})  # mode None: "r+"
    want = whole.copy(deep=True)
    want["sst"][3:8] += 1
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), want)


def test_refusals_are_xarrays(tmp_path):
    path = tmp_path / "t.b2d"
    ds = day(0, 3)
    to_b2nd(ds, path)
    before = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    nxt = day(3, 2)
    with pytest.raises(ValueError, match="does not match any existing dataset dimensions"):
        to_b2nd(nxt, path, append_dim="notvalid")
    with pytest.raises(ValueError, match="different dimension names"):
        to_b2nd(xr.Dataset({"n": ("y", [2])}), path, mode="a")
    with pytest.raises(ValueError, match="different dimension sizes"):
        to_b2nd(nxt, path, mode="a")
    with pytest.raises(ValueError, match="Unable to update size for existing dimension"):
        to_b2nd(nxt, path, mode="a")
    with pytest.raises(ValueError, match="cannot set append_dim unless"):
        to_b2nd(nxt, path, mode="w", append_dim="time")
    with pytest.raises(ValueError, match="but encoding was provided"):
        to_b2nd(nxt, path, append_dim="time", encoding={"sst": {"clevel": 1}})
    with pytest.raises(ValueError, match="non-pre-existing variables"):
        to_b2nd(xr.Dataset({"m": ("time", [1, 2, 3])}), path, mode="r+")
    with pytest.raises(ValueError, match="at least one dimension in common"):
        to_b2nd(ds.isel(time=slice(0, 1)), path, mode="r+", region={"time": slice(0, 1)})
    with pytest.raises(ValueError, match="are stored along append_dim"):
        to_b2nd(nxt[["sst"]], path, append_dim="time")
    with pytest.raises(ValueError, match="Mismatched dtypes"):
        to_b2nd(nxt.assign(n=nxt.n.astype("U3")), path, append_dim="time")
    with pytest.raises(ValueError, match="cannot set region unless"):
        to_b2nd(nxt, path, mode="w", region={"time": slice(0, 2)})
    with pytest.raises(FileNotFoundError):
        to_b2nd(nxt, tmp_path / "none.b2d", mode="r+")
    # nothing changed, nothing left behind (but the tree's commit lock)
    after = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    assert after.pop(journal.LOCK_NAME, None) in (None, bytes(9))
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.b2d"]


def test_a_single_frame_holds_one_variable(tmp_path):
    path = tmp_path / "t.b2nd"
    to_b2nd(day(0, 2, True), path)
    with pytest.raises(ValueError, match="single .b2nd frame holds one data variable"):
        to_b2nd(day(2, 2), path, append_dim="time")


def test_mode_a_on_a_missing_path_creates_it(tmp_path):
    path = tmp_path / "t.b2d"
    to_b2nd(day(0, 2), path, mode="a", append_dim="time")
    to_b2nd(day(2, 2), path, mode="a", append_dim="time")
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), xr.concat([day(0, 2), day(2, 2)], "time"))


# --- xarray's own append cases (test_backends.py's Zarr ones), through to_b2nd -------------


def _append_data():
    test_dataset = pytest.importorskip("xarray.tests.test_dataset")
    return test_dataset.create_append_test_data(seed=0)


@pytest.mark.parametrize("suffix", [".b2d", ".b2z"])
def test_xarrays_append_cases(tmp_path, suffix):
    ds, ds_to_append, ds_with_new_var = _append_data()
    path = tmp_path / ("t" + suffix)
    to_b2nd(ds, path, mode="w")
    to_b2nd(ds_to_append, path, append_dim="time")
    combined = xr.concat([ds, ds_to_append], dim="time")
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), combined)
    to_b2nd(ds_with_new_var, path, mode="a")  # test_append_with_new_variable
    combined["new_var"] = ds_with_new_var["new_var"]
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), combined)


def test_xarrays_mode_rplus_cases(tmp_path):
    path = tmp_path / "t.b2d"
    to_b2nd(xr.Dataset({"foo": ("x", [1])}), path)
    to_b2nd(xr.Dataset({"foo": ("x", [2])}), path, mode="r+")
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), xr.Dataset({"foo": ("x", [2])}))
    with pytest.raises(ValueError, match="dataset contains non-pre-existing variables"):
        to_b2nd(xr.Dataset({"bar": ("x", [2])}), path, mode="r+")


def test_a_write_planned_on_another_shape_is_refused(tmp_path):
    # Another writer grew the array between the planning of a write and its start: the
    # write would land at the wrong place, so nothing is written.
    from b2store import _progress
    from b2store.integrations.xarray.append import ConcurrentWriteError, write_region

    path = tmp_path / "t.b2nd"
    to_b2nd(day(0, 3, True), path)
    var = xr.Variable(("time", "x"), np.zeros((1, 5), "f4"))
    with b2store.open(str(path), mode="a") as a, a.schunk.changing():
        with pytest.raises(ConcurrentWriteError, match="another writer changed"):
            write_region(a, var, (2, 0), (3, 5), (2, 5), None, _progress.bar(0, "t", False))
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), day(0, 3, True))


def test_the_stored_codec_and_filters_are_kept(tmp_path):
    # test_check_encoding_is_consistent_after_append's point, with b2nd's storage keys
    path = tmp_path / "t.b2d"
    enc = {"sst": {"codec": "lz4", "clevel": 9, "filters": ["bitshuffle"], "chunks": (2, 5)}}
    to_b2nd(day(0, 3), path, encoding=enc)
    with xr.open_dataset(path, engine="b2nd") as got:
        before = {k: got.sst.encoding[k] for k in ("codec", "clevel", "compressors")}
    to_b2nd(day(3, 3), path, append_dim="time")
    with xr.open_dataset(path, engine="b2nd") as got:
        after = {k: got.sst.encoding[k] for k in ("codec", "clevel", "compressors")}
    assert after == before and before["codec"] == "lz4"
    with b2store.open(str(path / "sst.b2nd")) as a:
        # every chunk, the appended ones too, is encoded with the stored parameters
        infos = [b2store.chunk_info(a.schunk.get_chunk(i)) for i in range(a.schunk.nchunks)]
    assert len(infos) == 3
    used = {(i.codec.name, tuple(f.name for f in i.filters if f.name != "NOFILTER")) for i in infos}
    assert used == {("LZ4", ("BITSHUFFLE",))}


@pytest.mark.parametrize("dtype", ["U", "S"])
def test_wider_strings_rewrite_the_variable_in_a_tree(tmp_path, dtype):
    # xarray's test_append_string_length_mismatch_works (Zarr v3): a b2nd item has a fixed
    # size, so the variable is written anew, whole, in the same commit as the others
    test_dataset = pytest.importorskip("xarray.tests.test_dataset")
    ds, ds_to_append = test_dataset.create_append_string_length_mismatch_test_data(dtype)
    path = tmp_path / "t.b2d"
    to_b2nd(ds, path, mode="w")
    to_b2nd(ds_to_append, path, append_dim="time")
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), xr.concat([ds, ds_to_append], dim="time"))
    # a single frame cannot: refused, named as xarray's Zarr v2 writer names it
    single = tmp_path / "t.b2nd"
    to_b2nd(ds, single)
    with pytest.raises(ValueError, match="Mismatched dtypes for variable temperature"):
        to_b2nd(ds_to_append, single, append_dim="time")


def test_an_append_to_a_frame_python_blosc2_wrote(tmp_path):
    # python-blosc2 writes, b2store appends (the engine's names: data, dim_0, dim_1),
    # python-blosc2 reads the frame grown, its first chunks as it wrote them
    path = tmp_path / "p.b2nd"
    first = np.arange(12.0).reshape(4, 3)
    blosc2.asarray(first, urlpath=str(path), mode="w", chunks=(3, 3), blocks=(1, 3))
    more = xr.Dataset({"data": (("dim_0", "dim_1"), np.full((5, 3), -1.0))})
    to_b2nd(more, path, append_dim="dim_0")
    theirs = blosc2.open(str(path))
    assert theirs.chunks == (3, 3) and theirs.blocks == (1, 3)
    np.testing.assert_array_equal(theirs[...], np.concatenate([first, more.data.values]))
    with xr.open_dataset(path, engine="b2nd") as got:
        np.testing.assert_array_equal(got.data.values, theirs[...])


@pytest.mark.parametrize("name", ["t.b2nd", "t.b2d"])
def test_the_datasets_attributes_are_updated(tmp_path, name):
    path = tmp_path / name
    to_b2nd(day(0, 2, True).assign_attrs(n=np.int16(3)), path)
    to_b2nd(day(2, 1, True).assign_attrs(n=np.int16(4), m="new"), path, append_dim="time")
    with xr.open_dataset(path, engine="b2nd") as got:
        assert got.attrs == {"title": "days", "n": 4, "m": "new"}
        assert type(got.attrs["n"]) is np.int16


@pytest.mark.parametrize("name", ["t.b2nd", "t.b2d"])
def test_an_append_along_an_inner_dimension(tmp_path, name):
    # New chunks go between the stored ones in C order: the index is reordered, in one commit
    path = tmp_path / name
    rng = np.random.default_rng(1)
    a = xr.Dataset({"v": (("y", "x"), rng.random((5, 7)))}, {"x": np.arange(7)})
    b = xr.Dataset({"v": (("y", "x"), rng.random((5, 4)))}, {"x": np.arange(7, 11)})
    to_b2nd(a, path, encoding={"v": {"chunks": (2, 3)}})
    to_b2nd(b.chunk({"x": 3}), path, append_dim="x")
    with xr.open_dataset(path, engine="b2nd") as got:
        xr.testing.assert_identical(got.load(), xr.concat([a, b], "x"))
    key = "" if name.endswith(".b2nd") else "/v"
    np.testing.assert_array_equal(frames(path)[key], xr.concat([a, b], "x").v.values)


def test_a_variable_added_by_an_append_is_written_as_to_b2nd_writes_it(tmp_path):
    # A new variable goes through to_b2nd's own writer: a StringDType reads back as the
    # first write's would (as xarray's Zarr engine gives it), and a new coordinate is marked
    # for xarray-blosc2's reader as the first write marks its coordinates.
    blosc2 = pytest.importorskip("blosc2")
    path = tmp_path / "t.b2d"
    ds = day(0, 3)
    to_b2nd(ds, path)
    names = np.array(["ab", "cde", "f"], dtype=np.dtypes.StringDType())
    extra = xr.Dataset({"label": ("time", names)}, {"station": ("x", np.arange(5.0) * 2)})
    to_b2nd(extra, path, mode="a")
    reference = tmp_path / "ref.b2d"
    to_b2nd(xr.merge([ds, extra]), reference)
    with (
        xr.open_dataset(path, engine="b2nd") as got,
        xr.open_dataset(reference, engine="b2nd") as ref,
    ):
        xr.testing.assert_identical(got.load(), ref.load())
        assert got.label.dtype == ref.label.dtype
    # (each array held: python-blosc2's vlmeta needs its array alive)
    added, first = (blosc2.open(str(p / "station.b2nd")) for p in (path, reference))
    assert added.vlmeta["is_coord"] == first.vlmeta["is_coord"]
