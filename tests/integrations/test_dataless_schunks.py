"""A python-blosc2 Proxy of a super-chunk (no b2nd metalayer, metalayer ``proxy-source``) is
refused as python-blosc2 4.14.1's ``deserialize="safe"`` refuses it, by every entry point, and
never read as the zeros of its unfetched chunks; ``info`` still describes it."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import b2store
from b2store.cli import main
from b2store.nd.carriers import DatalessObjectError

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the files under test")
xr = pytest.importorskip("xarray")

WORDS = r"a python-blosc2 Proxy cache of '[^']*src.b2frame': it holds only the chunks"


@pytest.fixture
def proxy(tmp_path):
    data = np.arange(100, dtype=np.int64)
    source = blosc2.SChunk(chunksize=80, data=data, urlpath=str(tmp_path / "src.b2frame"), mode="w")
    path = tmp_path / "px.b2frame"
    blosc2.Proxy(source, urlpath=str(path), mode="w")
    with pytest.raises(blosc2.UnsafeDeserializationError, match="proxy"):
        blosc2.open(str(path))  # python-blosc2 refuses it by default
    return path


def test_open_refuses_a_super_chunk_proxy(proxy):
    with pytest.raises(DatalessObjectError, match=WORDS) as e:
        b2store.open(proxy)
    assert e.value.ident == "proxy"


def test_xarray_and_cli_refuse_it(proxy, capsys):
    with pytest.raises(DatalessObjectError, match=WORDS):
        xr.open_dataset(proxy, engine="b2nd")
    assert main(["verify", str(proxy)]) != 0
    assert "Proxy cache" in capsys.readouterr().out
    assert main(["info", str(proxy)]) == 0
    assert "python-blosc2 proxy (not served as an array)" in capsys.readouterr().out


def test_tree_member_refused_by_xarray_and_zarr(proxy, tmp_path):
    tree = tmp_path / "t.b2d"
    with blosc2.DictStore(str(tree), mode="w", threshold=1) as store:
        store["/a"] = blosc2.asarray(np.arange(4.0))
    shutil.copy(proxy, tree / "px.b2f")
    with pytest.raises(DatalessObjectError, match=WORDS):
        xr.open_dataset(tree, engine="b2nd")
    zarr = pytest.importorskip("zarr")
    from b2store.integrations.zarr.store import B2ndStore

    with pytest.raises(DatalessObjectError, match=WORDS):
        zarr.open_group(B2ndStore(str(tree)), mode="r")
