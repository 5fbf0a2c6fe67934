"""B2ndStore, writing: zarr and xarray writes produce frames and .b2d trees python-blosc2
reads bit-exact; all-fill chunks become special chunks; appends, regions, threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
blosc2 = pytest.importorskip("blosc2")

from b2store.integrations.zarr.b2nd import B2ndCodec  # noqa: E402
from b2store.integrations.zarr.store import B2ndStore  # noqa: E402

# Under zarr's default codec pipeline and its fused one (tests/integrations/conftest.py).
pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.usefixtures("zarr_pipeline"),
]


@pytest.mark.parametrize("contiguous", [True, False])
def test_create_array_default_codecs(tmp_path, contiguous):
    path = tmp_path / "x.b2nd"
    data = np.arange(50 * 60, dtype="<i4").reshape(50, 60)
    z = zarr.create_array(
        store=B2ndStore(path, mode="w", contiguous=contiguous),
        shape=data.shape,
        chunks=(20, 30),
        dtype=data.dtype,
        dimension_names=["y", "x"],
        attributes={"units": "m"},
    )
    z[...] = data
    np.testing.assert_array_equal(z[...], data)  # zarr reads back what it wrote
    ref = blosc2.open(str(path))
    assert path.is_dir() == (not contiguous)
    np.testing.assert_array_equal(ref[...], data)
    assert ref.vlmeta.getall() == {"units": "m", "_ARRAY_DIMENSIONS": ["y", "x"]}
    # The block shape python-blosc2 picks for these chunks.
    assert ref.blocks == blosc2.empty(data.shape, data.dtype, chunks=(20, 30)).blocks
    again = zarr.open_array(B2ndStore(path))
    assert again.metadata.codecs[0].to_dict()["name"] == "b2nd"
    np.testing.assert_array_equal(again[...], data)


def test_b2nd_serializer_chunks_stored_as_encoded(tmp_path):
    path = tmp_path / "x.b2nd"
    z = zarr.create_array(
        store=B2ndStore(path, mode="w"),
        shape=(50, 60),
        chunks=(20, 30),
        dtype="<f8",
        serializer=B2ndCodec(blockshape=(7, 9), cname="lz4", clevel=3),
        compressors=None,
        fill_value=np.nan,
    )
    z[20:45, :] = 1.5
    ref = blosc2.open(str(path))
    want = np.full((50, 60), np.nan)
    want[20:45] = 1.5
    np.testing.assert_array_equal(ref[...], want)
    assert ref.blocks == (7, 9) and ref.schunk.cparams.codec == blosc2.Codec.LZ4
    # Chunk (0, 0) was never written (all fill): a special chunk, the header and the value.
    assert blosc2.get_cbuffer_sizes(ref.schunk.get_chunk(0))[1] == 32 + 8


def test_deleted_chunks_become_special(tmp_path):
    path = tmp_path / "x.b2nd"
    store = B2ndStore(path, mode="w")
    z = zarr.create_array(store=store, shape=(40,), chunks=(10,), dtype="<f4", fill_value=0)
    z[...] = np.arange(40, dtype="<f4") + 1
    z[10:20] = 0  # all fill: zarr deletes the chunk
    ref = blosc2.open(str(path))
    want = np.arange(40, dtype="<f4") + 1
    want[10:20] = 0
    np.testing.assert_array_equal(ref[...], want)
    flags = blosc2.get_cbuffer_sizes(ref.schunk.get_chunk(1))
    assert flags[1] == 32  # a special chunk: header only


def test_xarray_to_zarr_b2d_round_trip(tmp_path):
    xr = pytest.importorskip("xarray")
    path = tmp_path / "out.b2d"
    rng = np.random.default_rng(0)
    ds = xr.Dataset(
        {"t": (("time", "x"), rng.random((6, 8))), "p": (("x",), np.arange(8))},
        coords={"time": np.arange(6), "x": np.linspace(0, 1, 8)},
        attrs={"title": "test"},
    )
    ds["t"].attrs["units"] = "K"
    ds.to_zarr(B2ndStore(path, mode="w"))
    ts = blosc2.open(str(path))
    assert set(ts.keys()) == {"/t", "/p", "/time", "/x"}
    np.testing.assert_array_equal(ts["/t"][...], ds["t"].values)
    assert ts.vlmeta["title"] == "test"
    back = xr.open_zarr(B2ndStore(path)).load()
    xr.testing.assert_identical(back, ds)
    # append along time, then a region write
    more = ds.isel(time=slice(0, 3)).assign_coords(time=[6, 7, 8])
    more.to_zarr(B2ndStore(path, mode="a"), append_dim="time")
    back = xr.open_zarr(B2ndStore(path)).load()
    xr.testing.assert_identical(back, xr.concat([ds, more], "time", data_vars="minimal"))
    patch = back.isel(time=slice(2, 4))[["t"]] * 0 + 9
    patch.drop_vars(["x"]).to_zarr(B2ndStore(path, mode="a"), region={"time": slice(2, 4)})
    final = blosc2.open(str(path))["/t"][...]
    assert (final[2:4] == 9).all() and final.shape == (9, 8)
    np.testing.assert_array_equal(final[4:], back["t"].values[4:])


def test_threads_write_different_chunks(tmp_path):
    path = tmp_path / "x.b2nd"
    z = zarr.create_array(
        store=B2ndStore(path, mode="w"), shape=(64, 64), chunks=(8, 8), dtype="<i8"
    )
    data = np.arange(64 * 64).reshape(64, 64)

    def write(i):
        z[i * 8 : (i + 1) * 8] = data[i * 8 : (i + 1) * 8]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(8)))
    np.testing.assert_array_equal(blosc2.open(str(path))[...], data)


def _write_rows(args):
    path, i = args
    z = zarr.open_array(B2ndStore(path, mode="a"))
    for j in range(4):
        z[i * 8 : (i + 1) * 8, j * 8 : (j + 1) * 8] = i * 100 + j
    return i


def test_processes_write_different_chunks(tmp_path):
    import multiprocessing

    path = str(tmp_path / "mp.b2nd")
    zarr.create_array(
        store=B2ndStore(path, mode="w"),
        shape=(32, 32),
        chunks=(8, 8),
        dtype="<i4",
        serializer=B2ndCodec(),
        compressors=None,
    )
    # Each change takes the frame's writer lock and rereads what others published.
    with multiprocessing.get_context("fork").Pool(4) as pool:
        assert pool.map(_write_rows, [(path, i) for i in range(4)]) == [0, 1, 2, 3]
    want = np.zeros((32, 32), "<i4")
    for i in range(4):
        for j in range(4):
            want[i * 8 : (i + 1) * 8, j * 8 : (j + 1) * 8] = i * 100 + j
    np.testing.assert_array_equal(blosc2.open(path)[...], want)


def test_a_resize_by_another_writer_is_refused(tmp_path):
    # Two stores on one frame (as two processes would be): after one resizes the array,
    # the other's chunk keys would name other chunks, so its chunk writes are refused.
    from b2store.integrations.zarr.write import ConcurrentResizeError

    path = tmp_path / "x.b2nd"
    z = zarr.create_array(
        store=B2ndStore(path, mode="w"), shape=(16, 16), chunks=(8, 8), dtype="<i4"
    )
    z[:8, :8] = 1  # this store now writes through its own handle
    other = zarr.open_array(B2ndStore(path, mode="a"))
    other.resize((16, 24))
    other[:, 16:] = 3
    with pytest.raises(ConcurrentResizeError, match=r"\(16, 16\) to \(16, 24\)"):
        z[8:, 8:] = 2
    again = zarr.open_array(B2ndStore(path, mode="a"))
    again[8:, 8:16] = 2
    want = np.zeros((16, 24), "<i4")
    want[:8, :8], want[:, 16:], want[8:, 8:16] = 1, 3, 2
    np.testing.assert_array_equal(blosc2.open(str(path))[...], want)


@pytest.mark.parametrize("contiguous", [True, False])
def test_to_zarr_into_one_frame_through_the_group_view(tmp_path, contiguous):
    xr = pytest.importorskip("xarray")
    path = tmp_path / "t.b2nd"
    data = np.arange(60 * 70, dtype="f8").reshape(60, 70)
    ds = xr.Dataset({"tas": (("y", "x"), data, {"units": "K"})})
    ds.to_zarr(B2ndStore(path, mode="w", group=True, contiguous=contiguous))
    assert path.is_dir() != contiguous  # a sparse frame is a directory
    arr = blosc2.open(str(path))
    np.testing.assert_array_equal(arr[...], data)
    assert arr.vlmeta["_ARRAY_DIMENSIONS"] == ["y", "x"] and arr.vlmeta["units"] == "K"
    # Named as written, by both readers (the b2nd engine and the group view).
    xr.testing.assert_identical(xr.open_dataset(path, engine="b2nd").load(), ds)
    xr.testing.assert_identical(xr.open_zarr(B2ndStore(path, group=True)).load(), ds)
    two = ds.assign_coords(x=np.arange(70))
    with pytest.raises(ValueError, match="holds one array"):
        two.to_zarr(B2ndStore(tmp_path / "two.b2nd", mode="w", group=True))


def test_sync_methods_of_a_transcoding_store_inside_async_code(tmp_path):
    # Chunks zarr encodes with its default codecs are re-encoded by the client's pipeline (a
    # coroutine); a *_sync call made where an event loop runs must still get them.
    from zarr.core.sync import sync

    store = B2ndStore(tmp_path / "t.b2d", mode="w")
    z = zarr.create_array(store, name="x", shape=(10,), chunks=(5,), dtype="<i4")
    z[...] = np.arange(10)

    async def inside():
        chunk = store.get_sync("x/c/1")
        store.set_sync("x/c/0", chunk)
        return chunk

    assert sync(inside()) is not None
    np.testing.assert_array_equal(zarr.open_array(store, path="x")[...], [5, 6, 7, 8, 9] * 2)


@pytest.mark.parametrize(
    ("dtype", "codec"),
    [
        ("f4", {"cname": "zfp_acc", "codec_meta": 254}),  # errors of at most 10**-2
        ("u2", {"cname": "ndlz", "codec_meta": 4, "splitmode": "always"}),
    ],
    ids=["zfp_acc", "ndlz"],
)
def test_a_plugin_codecs_settings_are_the_frames(tmp_path, dtype, codec):
    # The frame keeps the b2nd codec's codec_meta and split mode: later writes through
    # b2store or python-blosc2 code with them (the frame had codec_meta 0 and "auto": ZFP_ACC
    # at 10**0 and NDLZ refused outright).
    if codec["cname"] == "zfp_acc":
        pytest.importorskip("zfpy", reason="ZFP is written through zfpy (the zfp extra)")
    import b2store

    path = tmp_path / "x.b2nd"
    rng = np.random.default_rng(5)
    data = (rng.normal(0, 1, (40, 40)) * (1 if dtype == "f4" else 900) + 2000).astype(dtype)
    z = zarr.create_array(
        store=B2ndStore(path, mode="w"),
        shape=data.shape,
        chunks=(20, 40),
        dtype=dtype,
        serializer=B2ndCodec(filters=(), **codec),
        compressors=None,
    )
    z[:20] = data[:20]
    with b2store.open(path, mode="a") as arr:
        assert arr.schunk.params.codec_meta == codec["codec_meta"]
        arr[20:] = data[20:]
        back = arr[...]
    np.testing.assert_array_equal(blosc2.open(str(path))[...], back)
    if dtype == "f4":
        assert np.abs(back - data).max() <= 1e-2
    else:
        np.testing.assert_array_equal(back, data)
