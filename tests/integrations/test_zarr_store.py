"""B2ndStore, reading: frames, trees and the corpus through zarr (and xarray), equal to the
expected arrays and to python-blosc2; synthesized metadata; pickling; getsize; listing."""

from __future__ import annotations

import json
import pickle
import threading

import numpy as np
import pytest
from helpers import case_id, corpus_cases, corpus_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import b2store

zarr = pytest.importorskip("zarr")
blosc2 = pytest.importorskip("blosc2")

from zarr.core.buffer import default_buffer_prototype  # noqa: E402
from zarr.core.sync import sync  # noqa: E402

from b2store.integrations.zarr.store import B2ndStore  # noqa: E402

# Under zarr's default codec pipeline and its fused one (tests/integrations/conftest.py).
pytestmark = pytest.mark.usefixtures("zarr_pipeline")

ARRAYS = [("compat", c) for c in corpus_cases("compat", {"b2nd", "caterva"})] + [
    ("generated", c) for c in corpus_cases("generated", {"b2nd", "caterva"})
]
PROTO = default_buffer_prototype()


def ids(v):
    return case_id(v) if isinstance(v, dict) else v


@pytest.mark.parametrize("folder,case", ARRAYS, ids=ids)
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_corpus_arrays_through_zarr(folder, case):
    root = corpus_dir(folder)
    path = root / case["path"]
    dtype = case.get("expected_dtype") if case["kind"] == "caterva" else None
    if case["kind"] == "caterva" and dtype is None:
        dtype = "<f8"  # corpus README: the generated caterva case holds <f8 items
    if case.get("must_raise"):
        with pytest.raises(b2store.FormatError, match="dtype.*typesize"):
            zarr.open_array(B2ndStore(path))[...]
        return
    if "LazyArray" in case.get("oracle_error", ""):
        # python-blosc2's saved expressions hold no data of their own: refused, never zeros
        with pytest.raises(b2store.UnsupportedError, match="python-blosc2 Lazy(Expr|UDF)"):
            zarr.open_array(B2ndStore(path))[...]
        return
    z = zarr.open_array(B2ndStore(path, dtype=dtype))
    got = z[...]
    expected_file = case.get("expected_npy") or case.get("expected")
    if expected_file is not None:
        expected = np.load(root / expected_file)
        assert got.shape == expected.shape
        if case.get("check_values", True):
            np.testing.assert_array_equal(got, expected.astype(got.dtype))
    if case.get("oracle_error") or case["kind"] == "caterva":
        return  # python-blosc2 refuses it, or stores no dtype for it
    ref = blosc2.open(str(path))
    if case.get("check_values", True):
        whole = ref[...]
        np.testing.assert_array_equal(got, whole)
        if ref.ndim:
            # Against python-blosc2's whole read: its own sliced reads of DELTA chunks
            # (i8_1d_zlib_delta) return other blocks' values.
            sel = tuple(slice(n // 3, n // 3 + max(1, n // 4)) for n in ref.shape)
            np.testing.assert_array_equal(z[sel], whole[sel])
    assert z.chunks == tuple(max(c, 1) for c in ref.chunks)


def test_uninit_chunks_are_missing_keys(tmp_path):
    from b2store.chunk.encoder import special_chunk

    path = tmp_path / "u.b2nd"
    b2store.asarray(np.arange(40.0), path, chunks=(10,), blocks=(5,))
    with b2store.open(path, mode="a") as arr:
        uninit = special_chunk(b2store.SpecialValue.UNINIT, 80, 8)
        arr.schunk.update_chunks({1: uninit, 3: uninit})
    store = B2ndStore(path)
    assert _alist(store.list()) == ["zarr.json", "c/0", "c/2"]
    assert sync(store.get("c/1", PROTO)) is None
    assert not sync(store.exists("c/1")) and sync(store.exists("c/2"))
    with pytest.raises(FileNotFoundError, match="c/3"):
        sync(store.getsize("c/3"))
    z = zarr.open_array(store)
    np.testing.assert_array_equal(z[20:30], np.arange(20.0, 30.0))
    np.testing.assert_array_equal(z[10:20], np.zeros(10))  # the fill value


async def _aiter(agen):
    return [k async for k in agen]


def _alist(agen):
    return sync(_aiter(agen))


def _write_frame(tmp_path, name="temp.b2nd", **kwargs):
    data = np.arange(100 * 120, dtype="<f4").reshape(100, 120)
    arr = blosc2.asarray(
        data, urlpath=str(tmp_path / name), mode="w", chunks=(40, 50), blocks=(10, 25), **kwargs
    )
    arr.vlmeta["_ARRAY_DIMENSIONS"] = ["y", "x"]
    arr.vlmeta["units"] = "K"
    return tmp_path / name, data


def test_synthesized_metadata(tmp_path):
    path, data = _write_frame(tmp_path)
    store = B2ndStore(path)
    doc = json.loads(sync(store.get("zarr.json", PROTO)).to_bytes())
    assert doc["node_type"] == "array" and doc["shape"] == [100, 120]
    assert doc["chunk_grid"]["configuration"]["chunk_shape"] == [40, 50]
    assert doc["data_type"] == "float32" and doc["fill_value"] == 0.0
    assert doc["dimension_names"] == ["y", "x"] and doc["attributes"] == {"units": "K"}
    (codec,) = doc["codecs"]
    assert codec["name"] == "b2nd" and codec["configuration"]["blockshape"] == [10, 25]
    z = zarr.open_array(store)
    np.testing.assert_array_equal(z[...], data)
    assert z.metadata.dimension_names == ("y", "x")


def test_unsafe_vlmeta_is_skipped_with_a_warning(tmp_path):
    path, _ = _write_frame(tmp_path)
    arr = blosc2.open(str(path), mode="a")
    arr.vlmeta["raw"] = b"\x00\x01"
    arr.vlmeta["bad"] = float("nan")
    with pytest.warns(UserWarning, match="not JSON-safe"):
        z = zarr.open_array(B2ndStore(path))
    assert dict(z.attrs) == {"units": "K"}


def test_chunks_are_served_as_stored(tmp_path):
    path, _ = _write_frame(tmp_path)
    ref = blosc2.open(str(path))
    store = B2ndStore(path)
    for n, (i, j) in enumerate(np.ndindex(3, 3)):
        key = f"c/{i}/{j}"
        stored = ref.schunk.get_chunk(n)
        assert sync(store.get(key, PROTO)).to_bytes() == stored
        assert sync(store.getsize(key)) == len(stored)
    from zarr.abc.store import RangeByteRequest, SuffixByteRequest

    stored = ref.schunk.get_chunk(4)
    assert sync(store.get("c/1/1", PROTO, RangeByteRequest(3, 20))).to_bytes() == stored[3:20]
    assert sync(store.get("c/1/1", PROTO, SuffixByteRequest(5))).to_bytes() == stored[-5:]
    assert sync(store.get("c/3/0", PROTO)) is None  # outside the grid
    assert sync(store.get("c/1", PROTO)) is None  # wrong rank
    assert sync(store.get("nothing", PROTO)) is None


def test_group_view_and_xarray(tmp_path):
    xr = pytest.importorskip("xarray")
    path, data = _write_frame(tmp_path)
    store = B2ndStore(path, group=True)
    g = zarr.open_group(store, mode="r")
    # python-blosc2's frame stores no name: the array is "data", as the b2nd engine names it
    assert list(g.array_keys()) == ["data"]
    ds = xr.open_zarr(store)
    np.testing.assert_array_equal(ds["data"].values, data)
    assert ds["data"].dims == ("y", "x") and ds["data"].attrs["units"] == "K"
    xr.testing.assert_identical(ds.load(), xr.open_dataset(path, engine="b2nd").load())


@pytest.mark.parametrize("ext", ["b2d", "b2z"])
def test_trees_are_groups(tmp_path, ext):
    path = tmp_path / f"t.{ext}"
    temp = np.arange(60.0).reshape(6, 10)
    with blosc2.TreeStore(str(path), mode="w") as ts:
        a = blosc2.asarray(temp, chunks=(4, 5), blocks=(2, 3))
        a.vlmeta["_ARRAY_DIMENSIONS"] = ["y", "x"]
        ts["/temp"] = a
        ts["/grp/lon"] = np.arange(10.0)
        ts.vlmeta["title"] = "root"
        ts["/grp"].vlmeta["gattr"] = 3
    store = B2ndStore(path)
    root_doc = json.loads(sync(store.get("zarr.json", PROTO)).to_bytes())
    assert set(root_doc["consolidated_metadata"]["metadata"]) == {"temp", "grp", "grp/lon"}
    g = zarr.open_group(store, mode="r")
    assert dict(g.attrs) == {"title": "root"} and dict(g["grp"].attrs) == {"gattr": 3}
    np.testing.assert_array_equal(g["temp"][...], temp)
    np.testing.assert_array_equal(g["grp/lon"][2:5], [2.0, 3.0, 4.0])
    assert sorted(_alist(store.list_dir(""))) == ["grp", "temp", "zarr.json"]
    assert sorted(_alist(store.list_dir("grp"))) == ["lon", "zarr.json"]


def test_pickle_and_read_only(tmp_path):
    path, data = _write_frame(tmp_path)
    store = B2ndStore(path)
    again = pickle.loads(pickle.dumps(store))
    assert again == store
    np.testing.assert_array_equal(zarr.open_array(again)[5], data[5])
    assert store.read_only
    writable = store.with_read_only(False)
    assert not writable.read_only and writable.path == store.path
    with pytest.raises(ValueError, match="read-only"):
        sync(store.set("c/0/0", PROTO.buffer.from_bytes(b"x")))


def test_zarr_array_pickles_with_the_store(tmp_path):
    path, data = _write_frame(tmp_path)
    z = zarr.open_array(B2ndStore(path))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(z))[7:9, 3], data[7:9, 3])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_selections_equal_numpy(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("h") / "a.b2nd"
    shape = tuple(data.draw(st.lists(st.integers(1, 30), min_size=1, max_size=3)))
    chunks = tuple(data.draw(st.integers(1, n)) for n in shape)
    blocks = tuple(data.draw(st.integers(1, c)) for c in chunks)
    values = np.arange(np.prod(shape), dtype="<i4").reshape(shape)
    blosc2.asarray(values, urlpath=str(path), mode="w", chunks=chunks, blocks=blocks)
    z = zarr.open_array(B2ndStore(path))
    key = []
    for n in shape:
        kind = data.draw(st.sampled_from(["int", "slice", "step"]))
        if kind == "int":
            key.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            a, b = sorted(data.draw(st.lists(st.integers(0, n), min_size=2, max_size=2)))
            key.append(slice(a, b))
        else:
            key.append(slice(data.draw(st.integers(0, n)), None, data.draw(st.integers(1, 5))))
    key = tuple(key)
    np.testing.assert_array_equal(z[key], values[key])
    idx = sorted(set(data.draw(st.lists(st.integers(0, shape[0] - 1), min_size=1, max_size=4))))
    np.testing.assert_array_equal(z.oindex[(idx,)], values[idx])


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/fd"), reason="needs /proc")
def test_opening_a_tree_holds_no_descriptor_per_array(tmp_path):
    import os

    path = tmp_path / "many.b2d"
    with blosc2.TreeStore(str(path), mode="w") as ts:
        for i in range(40):
            ts[f"/v{i}"] = np.arange(4.0) + i
    fds = lambda: len(os.listdir("/proc/self/fd"))  # noqa: E731
    store = B2ndStore(path)
    zarr.open_group(store, mode="r")  # consolidated metadata of all 40 arrays
    before = fds()
    group = zarr.open_group(store, mode="r")
    assert fds() - before < 5
    np.testing.assert_array_equal(group["v7"][...], np.arange(4.0) + 7)
    assert fds() - before < 6  # the array read stays open, the others do not


@pytest.mark.parametrize("workers", [1, None], ids=["one-worker", "default"])
def test_zarrs_thread_pool_size_decides_where_chunks_decode(
    tmp_path, monkeypatch, workers, zarr_pipeline
):
    """With zarr's pool at one worker, a local store decodes its chunks on zarr's loop (no
    hop to the worker and back); otherwise in the pool, where chunks decode in parallel.
    zarr's fused pipeline reads through the store's sync methods in threads of its own,
    never on the loop. Either way the reads equal the data."""
    data = np.random.default_rng(3).normal(size=(64, 48))
    path = tmp_path / "a.b2nd"
    blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(16, 24), blocks=(4, 24))
    threads = set()
    decode_into = B2ndStore._decode_into

    def spy(self, *args):
        threads.add(threading.current_thread().name)
        return decode_into(self, *args)

    monkeypatch.setattr(B2ndStore, "_decode_into", spy)
    with zarr.config.set({"threading.max_workers": workers}):
        z = zarr.open_array(B2ndStore(path))
        np.testing.assert_array_equal(z[...], data)
        np.testing.assert_array_equal(z[5:40, 3:30], data[5:40, 3:30])
    if zarr_pipeline == "b2store":
        assert threads == set()  # (b2store's pipeline reads one box: no chunk decoded alone)
    elif zarr_pipeline == "fused":
        assert threads and "zarr_io" not in threads, threads
    else:
        assert threads and (threads == {"zarr_io"}) == (workers == 1), threads


def test_the_fused_pipeline_goes_through_the_sync_methods(tmp_path, monkeypatch, zarr_pipeline):
    """Under zarr's fused pipeline a local store's chunks are read, written and deleted by
    its ``*_sync`` methods (no event loop per chunk); under the default one by the async
    methods. Both ways the values are the data, for the b2nd codec and zarr's default."""
    import contextvars

    from b2store.integrations.zarr.b2nd import B2ndCodec

    calls = []
    # Set while an async method runs: the sync methods it calls (asyncio.to_thread carries
    # the context to the worker) are its own, not zarr's calls.
    in_async = contextvars.ContextVar("in_async", default=False)
    for name in ("get", "set", "delete", "b2nd_decode_into"):
        for method in (name, f"{name}_sync"):
            original = getattr(B2ndStore, method)
            if method.endswith("_sync"):

                def spy(self, key, *args, _original=original, _method=method, **kwargs):
                    if not in_async.get():
                        calls.append((_method, key))
                    return _original(self, key, *args, **kwargs)

            else:

                async def spy(self, key, *args, _original=original, _method=method, **kwargs):
                    calls.append((_method, key))
                    token = in_async.set(True)
                    try:
                        return await _original(self, key, *args, **kwargs)
                    finally:
                        in_async.reset(token)

            monkeypatch.setattr(B2ndStore, method, spy)
    data = np.arange(60 * 50, dtype="<f8").reshape(60, 50)
    store = B2ndStore(tmp_path / "t.b2d", mode="w")
    for name, serializer in [("b", B2ndCodec()), ("d", "auto")]:
        z = zarr.create_array(
            store, name=name, shape=data.shape, chunks=(20, 25), dtype="<f8", serializer=serializer
        )
        # (b2store's pipeline serves neither, b2nd then zstd and zarr's defaults: zarr's)
        kind = "batched" if zarr_pipeline == "b2store" else zarr_pipeline
        assert type(z._async_array.codec_pipeline).__name__.lower().startswith(kind)
        z[...] = data
        z[5:15, 30:40] = -1.0  # a partial chunk: read, merge, write
        z[40:60, :25] = 0.0  # an all-fill chunk: deleted
    expected = data.copy()
    expected[5:15, 30:40] = -1.0
    expected[40:60, :25] = 0.0
    for name in ("b", "d"):
        z = zarr.open_array(store, path=name, mode="r")
        np.testing.assert_array_equal(z[...], expected)
        np.testing.assert_array_equal(z[7, 28:45], expected[7, 28:45])
    used = {method for method, key in calls if "/c/" in key}  # what zarr called for chunks
    if zarr_pipeline == "fused":
        assert used == {"get_sync", "set_sync", "delete_sync", "b2nd_decode_into_sync"}, used
    elif zarr_pipeline == "b2store":
        # Written through zarr's pipeline; read (by a read-only copy of the store, which has
        # no writer) as one box by b2store's engine, no chunk decoded alone.
        assert used == {"get", "set", "delete"}, used
    else:
        assert used == {"get", "set", "delete", "b2nd_decode_into"}, used
