"""Limits through every way a user opens a file: ``open_tree`` (and its array references),
``B2ndStore`` (reads and writes), the ``b2nd`` xarray engine (Datasets, DataTrees, groups);
at the limit a file opens, one past it the file is refused with ``LimitError`` before its
chunks are allocated, and the limit survives pickling (a reopened object keeps it)."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

import b2store
from b2store import LimitError, Limits
from b2store.tree import open_tree

zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")
from b2store.integrations.zarr.store import B2ndStore  # noqa: E402

DATA = np.arange(4096, dtype="f8")
CHUNK_NBYTES = 1024 * 8  # chunks=(1024,) of float64
AT = Limits(max_chunk_nbytes=CHUNK_NBYTES)
PAST = Limits(max_chunk_nbytes=CHUNK_NBYTES - 1)


def write_frame(path, chunks=(1024,)):
    """The frame at ``path``, replacing what is there (the tests write one frame again)."""
    vlmeta = {"_ARRAY_DIMENSIONS": ["t"]}
    b2store.asarray(DATA, path, chunks=chunks, blocks=(256,), vlmeta=vlmeta, mode="w")


@pytest.fixture
def frame(tmp_path):
    path = tmp_path / "x.b2nd"
    write_frame(path)
    return path


@pytest.fixture
def directory(tmp_path):
    d = tmp_path / "dir"
    (d / "grp").mkdir(parents=True)
    write_frame(d / "x.b2nd")
    write_frame(d / "grp" / "y.b2nd")
    return d


@pytest.fixture
def b2z(directory, tmp_path):
    """The directory as a ``.b2z``: members stored, as python-blosc2 writes them."""
    path = tmp_path / "t.b2z"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name in ("x.b2nd", "grp/y.b2nd"):
            z.write(directory / name, name)
    return path


@pytest.fixture(params=["frame", "dir", "b2z"])
def tree_path(request):
    return request.getfixturevalue({"frame": "frame", "dir": "directory"}.get(request.param, "b2z"))


# --- open_tree ---------------------------------------------------------------------------------


def test_open_tree_passes_its_limits_to_every_array(tree_path):
    for ref in open_tree(tree_path, limits=AT).arrays().values():
        assert ref.limits == AT
        np.testing.assert_array_equal(ref.open()[:], DATA)
    refs = open_tree(tree_path, limits=PAST).arrays()
    assert refs
    for ref in refs.values():
        with pytest.raises(LimitError, match="max_chunk_nbytes"):
            ref.open()
        with pytest.raises(LimitError, match="max_chunk_nbytes"):
            ref.shape  # noqa: B018 - the summary opens the array too


def test_open_tree_checks_the_limits_type(directory):
    with pytest.raises(TypeError, match="Limits"):
        open_tree(directory, limits={"max_chunk_nbytes": 1})


def test_a_tree_past_its_member_limit_is_refused(directory, b2z):
    # dir: "/", "/grp", "/x", "/grp/y" (4 members); b2z: 2 zip entries, 4 members listed
    for path in (directory, b2z):
        assert len(open_tree(path, limits=Limits(max_tree_members=4)).arrays()) == 2
        with pytest.raises(LimitError, match="max_tree_members"):
            open_tree(path, limits=Limits(max_tree_members=3))
    # the zip's entry count is checked from its end record, before its directory is read
    with pytest.raises(LimitError, match="zip entries"):
        open_tree(b2z, limits=Limits(max_tree_members=1))


def test_a_pickled_tree_and_its_references_keep_their_limits(directory):
    tree = pickle.loads(pickle.dumps(open_tree(directory, limits=PAST)))
    assert tree.limits == PAST
    ref = pickle.loads(pickle.dumps(tree.arrays()["/x"]))
    assert ref.limits == PAST
    with pytest.raises(LimitError, match="max_chunk_nbytes"):
        ref.open()


def test_blosc2_trees_with_embedded_arrays_obey_the_limits(tmp_path):
    blosc2 = pytest.importorskip("blosc2")
    for ext in ("b2d", "b2z"):
        path = tmp_path / f"s.{ext}"
        # threshold: arrays below it are embedded in embed.b2e, others are files of their own
        with blosc2.DictStore(str(path), mode="w", threshold=40_000) as store:
            store["/small"] = blosc2.asarray(DATA, chunks=(1024,), blocks=(256,))
            store["/grp/big"] = blosc2.asarray(np.arange(65536.0), chunks=(1024,), blocks=(256,))
        refs = open_tree(path, limits=AT).arrays()
        assert refs["/small"].embedded is not None and refs["/grp/big"].embedded is None
        np.testing.assert_array_equal(refs["/small"].open()[:], DATA)
        np.testing.assert_array_equal(refs["/grp/big"].open()[:], np.arange(65536.0))
        for ref in open_tree(path, limits=PAST).arrays().values():
            with pytest.raises(LimitError, match="max_chunk_nbytes"):
                ref.open()
        # an embedded value is read whole: its length is bounded like a chunk
        small = open_tree(path, limits=Limits(max_chunk_nbytes=100)).arrays()["/small"]
        with pytest.raises(LimitError, match="embedded value length"):
            small.open()


# --- B2ndStore ---------------------------------------------------------------------------------


def test_b2nd_store_reads_at_the_limit_and_refuses_past_it(frame, directory, b2z):
    np.testing.assert_array_equal(zarr.open_array(B2ndStore(frame, limits=AT))[:], DATA)
    with pytest.raises(LimitError, match="max_chunk_nbytes"):
        zarr.open_array(B2ndStore(frame, limits=PAST))
    for path in (directory, b2z):
        group = zarr.open_group(B2ndStore(path, limits=AT), mode="r")
        np.testing.assert_array_equal(group["grp/y"][:], DATA)
        with pytest.raises(LimitError, match="max_chunk_nbytes"):
            zarr.open_group(B2ndStore(path, limits=PAST), mode="r")["grp/y"]
    with pytest.raises(LimitError, match="max_chunk_nbytes"):
        zarr.open_group(B2ndStore(frame, group=True, limits=PAST), mode="r")


def test_b2nd_store_writes_open_frames_with_its_limits(frame):
    store = B2ndStore(frame, mode="a", limits=PAST)
    with pytest.raises(LimitError, match="max_chunk_nbytes"):
        store._ensure_writer().array("")  # the writer's handle, what every chunk write uses
    store = B2ndStore(frame, mode="a", limits=AT)
    arr = zarr.open_array(store, mode="r+")
    arr[:3] = -1
    np.testing.assert_array_equal(b2store.open(frame)[:4], [-1, -1, -1, 3])


def test_b2nd_store_checks_the_limits_type(frame):
    with pytest.raises(TypeError, match="Limits"):
        B2ndStore(frame, limits=CHUNK_NBYTES)


def test_a_pickled_b2nd_store_keeps_its_limits(frame):
    for store in (B2ndStore(frame, limits=PAST), B2ndStore(frame, limits=PAST).with_read_only()):
        again = pickle.loads(pickle.dumps(store))
        assert again.limits == PAST
        with pytest.raises(LimitError, match="max_chunk_nbytes"):
            asyncio.run(again.get("zarr.json", zarr.core.buffer.default_buffer_prototype()))
    assert pickle.loads(pickle.dumps(B2ndStore(frame))).limits is None


# --- the xarray engine -------------------------------------------------------------------------


def test_open_dataset_takes_limits_as_a_backend_keyword(frame, directory, b2z):
    ds = xr.open_dataset(frame, engine="b2nd", limits=AT)
    np.testing.assert_array_equal(ds["data"].values, DATA)
    with pytest.raises(LimitError, match="max_chunk_nbytes"):
        xr.open_dataset(frame, engine="b2nd", limits=PAST)
    for path in (directory, b2z):
        ds = xr.open_dataset(path, engine="b2nd", group="grp", limits=AT)
        np.testing.assert_array_equal(ds["y"].values, DATA)
        with pytest.raises(LimitError, match="max_chunk_nbytes"):
            xr.open_dataset(path, engine="b2nd", group="grp", limits=PAST)


def test_open_datatree_and_groups_take_limits(directory, b2z):
    for path in (directory, b2z):
        tree = xr.open_datatree(path, engine="b2nd", limits=AT)
        np.testing.assert_array_equal(tree["grp/y"].values, DATA)
        with pytest.raises(LimitError, match="max_chunk_nbytes"):
            xr.open_datatree(path, engine="b2nd", limits=PAST)
        groups = xr.open_groups(path, engine="b2nd", limits=AT)
        assert set(groups) == {"/", "/grp"}
        with pytest.raises(LimitError, match="max_chunk_nbytes"):
            xr.open_groups(path, engine="b2nd", limits=PAST)
        with pytest.raises(LimitError, match="max_tree_members"):
            xr.open_datatree(path, engine="b2nd", limits=Limits(max_tree_members=3))


def test_a_pickled_dataset_reopens_with_its_limits(frame, directory):
    """Opened at the limit, pickled, then the file is rewritten with chunks twice the limit:
    the unpickled Dataset reopens it with the limit it was opened with, and refuses it."""
    single = xr.open_dataset(frame, engine="b2nd", limits=AT)
    tree = xr.open_dataset(directory, engine="b2nd", group="grp", limits=AT)
    control = xr.open_dataset(frame, engine="b2nd")
    blobs = [pickle.dumps(ds) for ds in (single, tree, control)]
    for ds in (single, tree, control):
        ds.close()
    write_frame(frame, chunks=(2048,))
    write_frame(directory / "grp" / "y.b2nd", chunks=(2048,))
    single, tree, control = (pickle.loads(b) for b in blobs)
    with pytest.raises(LimitError, match="max_chunk_nbytes"):
        single["data"].values  # noqa: B018
    with pytest.raises(LimitError, match="max_chunk_nbytes"):
        tree["y"].values  # noqa: B018
    np.testing.assert_array_equal(control["data"].values, DATA)  # default limits: it reads


def test_limits_survive_into_another_process(frame, directory):
    """What a dask worker does: unpickle the objects in a fresh interpreter and read. The
    files were rewritten meanwhile with chunks past the limit: each object refuses them."""
    objects = {
        "array": b2store.open(frame, limits=AT),
        "ref": open_tree(directory, limits=AT).arrays()["/grp/y"],
        "store": B2ndStore(frame, limits=AT),
        "dataset": xr.open_dataset(frame, engine="b2nd", limits=AT),
    }
    blob = pickle.dumps(objects)
    objects["dataset"].close()
    objects["array"].schunk.close()
    write_frame(frame, chunks=(2048,))
    write_frame(directory / "grp" / "y.b2nd", chunks=(2048,))
    code = """
import pickle, sys, zarr
from b2store import LimitError
o = pickle.loads(sys.stdin.buffer.read())
print(o["array"].schunk.limits.max_chunk_nbytes, o["ref"].limits.max_chunk_nbytes)
for read in (lambda: o["ref"].open(), lambda: zarr.open_array(o["store"]),
             lambda: o["dataset"]["data"].values):
    try:
        read()
        print("read")
    except LimitError:
        print("LimitError")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], input=blob, capture_output=True, check=True, timeout=120
    ).stdout.decode()
    assert out.split() == [str(CHUNK_NBYTES)] * 2 + ["LimitError"] * 3


# --- refused before anything large is allocated ------------------------------------------------


def test_every_entry_point_refuses_a_large_chunk_before_allocating_it(tmp_path):
    """A 64 MiB chunk of zeros is a few hundred bytes on disk; with a 32 MiB limit every
    entry point refuses it having allocated under 4 MiB (import costs paid first)."""
    d = tmp_path / "big"
    d.mkdir()
    path = d / "z.b2nd"
    b2store.zeros((1 << 23,), "f8", urlpath=path, chunks=(1 << 23,), blocks=(1 << 16,))
    assert path.stat().st_size < 4096
    limits = Limits(max_chunk_nbytes=32 << 20)
    opens = {
        "open_tree": lambda: open_tree(d, limits=limits).arrays()["/z"].open(),
        "B2ndStore": lambda: zarr.open_array(B2ndStore(path, limits=limits)),
        "open_dataset": lambda: xr.open_dataset(path, engine="b2nd", limits=limits),
        "open_datatree": lambda: xr.open_datatree(d, engine="b2nd", limits=limits),
    }
    for name, fn in opens.items():
        with pytest.raises(LimitError, match="max_chunk_nbytes"):
            fn()  # warm up: imports, caches
        tracemalloc.start()
        try:
            with pytest.raises(LimitError, match="max_chunk_nbytes"):
                fn()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 << 20, (name, peak)
    # and at a limit that admits it, it opens (the chunk is allocated only when read)
    assert b2store.open(path, limits=Limits(max_chunk_nbytes=64 << 20)).shape == (1 << 23,)


def test_stores_and_openers_with_other_limits_are_not_equal(frame):
    # zarr and dask may take equal stores (and xarray equal openers) for the same thing
    assert B2ndStore(frame, limits=AT) == B2ndStore(frame, limits=AT)
    assert B2ndStore(frame, limits=AT) != B2ndStore(frame, limits=PAST)
    assert B2ndStore(frame) != B2ndStore(frame, limits=AT)
    from b2store.integrations.xarray.lazy import FrameRecipe

    assert FrameRecipe(frame, limits=AT) == FrameRecipe(frame, limits=AT)
    assert FrameRecipe(frame, limits=AT) != FrameRecipe(frame, limits=PAST)
