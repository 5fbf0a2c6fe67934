"""python-blosc2's containers in its stores (.b2z, .b2d) and alone: listed by the tree as the
frames they are (Tree.objects), opened by b2store as containers, and refused by the xarray
engine naming what they are and how to read them, never left out of a Dataset unsaid."""

from __future__ import annotations

import re

import numpy as np
import pytest

import b2store
from b2store.containers import BatchArray, ContainerNotArrayError, ObjectArray
from b2store.errors import UnsupportedError
from b2store.tree import open_tree

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the files under test")
xr = pytest.importorskip("xarray")

BATCHES = [[b"bytes\x00payload", "plain text", 42], [{"nested": [1, 2]}, None, {"tail": True}]]


def _store(path, threshold=1):
    with blosc2.DictStore(str(path), mode="w", threshold=threshold) as store:
        batches = blosc2.BatchArray()
        batches.extend(BATCHES)
        store["/batch"] = batches
        objects = blosc2.ObjectArray()
        objects.extend([{"a": 1}, "x"])
        store["/grp/obj"] = objects
        store["/arr"] = blosc2.asarray(np.arange(10.0))


@pytest.mark.parametrize("suffix", [".b2z", ".b2d"])
def test_tree_lists_and_opens_containers(tmp_path, suffix):
    path = tmp_path / f"s{suffix}"
    _store(path)
    tree = open_tree(path)
    assert sorted(tree.arrays()) == ["/arr"]
    assert sorted(tree.objects()) == ["/batch", "/grp/obj"]
    with tree.objects()["/batch"].open_object() as got:
        assert isinstance(got, BatchArray) and got[:] == BATCHES
    with tree.objects()["/grp/obj"].open_object() as got:
        assert isinstance(got, ObjectArray) and got[:] == [{"a": 1}, "x"]
    with pytest.raises(ContainerNotArrayError, match="/batch is a python-blosc2 BatchArray"):
        tree.objects()["/batch"].open()


@pytest.mark.parametrize("suffix", [".b2z", ".b2d"])
@pytest.mark.parametrize("opener", ["open_dataset", "open_datatree"])
def test_xarray_refuses_a_tree_holding_a_container(tmp_path, suffix, opener):
    path = tmp_path / f"s{suffix}"
    _store(path)
    with pytest.raises(ContainerNotArrayError) as e:
        getattr(xr, opener)(path, engine="b2nd")
    message = str(e.value)
    assert isinstance(e.value, UnsupportedError)
    assert "/batch is a python-blosc2 BatchArray (items of variable length), not an" in message
    # the way it names works, and reads the container
    how = re.search(r"read it with b2store: (b2store\.open\(.*\))\[i\] gives item i", message)
    with eval(how.group(1), {"b2store": b2store}) as got:
        assert got[:] == BATCHES


def test_xarray_refuses_a_container_frame(tmp_path):
    path = tmp_path / "o.b2frame"
    objects = blosc2.ObjectArray(urlpath=str(path), mode="w")
    objects.append("x")
    message = (
        f"{path} is a python-blosc2 ObjectArray (items of variable length), not an "
        f"n-dimensional array, so it is no variable or array here; read it with b2store: "
        f"b2store.open({str(path)!r})[i] gives item i"
    )
    with pytest.raises(ContainerNotArrayError, match=re.escape(message)):
        xr.open_dataset(path, engine="b2nd")


def test_embedded_container_refused_as_array(tmp_path):
    path = tmp_path / "e.b2z"
    _store(path, threshold=None)  # small values embedded in embed.b2e
    tree = open_tree(path)
    embedded = {**tree.arrays(), **tree.objects()}["/batch"]
    with embedded.open_object() as got:
        assert got[:] == BATCHES
    with pytest.raises(ContainerNotArrayError, match="/batch is a python-blosc2 BatchArray"):
        xr.open_dataset(path, engine="b2nd")


@pytest.mark.parametrize("suffix", [".b2z", ".b2d"])
def test_zarr_store_refuses_a_tree_holding_a_container(tmp_path, suffix):
    zarr = pytest.importorskip("zarr")
    from b2store.integrations.zarr.store import B2ndStore

    path = tmp_path / f"s{suffix}"
    _store(path)
    with pytest.raises(ContainerNotArrayError, match="/batch is a python-blosc2 BatchArray"):
        zarr.open_group(B2ndStore(str(path)), mode="r")


def test_plain_super_chunks_in_a_tree_still_pass(tmp_path):
    path = tmp_path / "s.b2d"
    with blosc2.DictStore(str(path), mode="w", threshold=1) as store:
        store["/arr"] = blosc2.asarray(np.arange(10.0))
        store["/raw"] = blosc2.SChunk(chunksize=16, data=np.arange(8, dtype=np.int32))
    assert sorted(open_tree(path).objects()) == ["/raw"]
    assert list(xr.open_dataset(path, engine="b2nd").data_vars) == ["arr"]


def test_containers_of_a_b2z_behind_a_url(tmp_path):
    from http_server import serve_directory

    _store(tmp_path / "s.b2z")
    with serve_directory(tmp_path) as (url, _):
        tree = open_tree(f"{url}/s.b2z")
        with tree.objects()["/batch"].open_object() as got:
            assert got[:] == BATCHES
        with pytest.raises(ContainerNotArrayError, match=r"offset=\d+\)\[i\] gives item i"):
            xr.open_dataset(f"{url}/s.b2z", engine="b2nd")
