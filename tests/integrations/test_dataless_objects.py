"""Frames python-blosc2 saves for objects that hold no data of their own (a LazyExpr, a LazyUDF,
a C2Array or RemoteArray reference, a Proxy's cache) are refused by every entry point with an
UnsupportedError naming what they are, and never read as zeros; ``info`` still describes them.
"""

from __future__ import annotations

import shutil
import zipfile

import numpy as np
import pytest

import b2store
from b2store.cli import main
from b2store.errors import UnsupportedError
from b2store.tree import open_tree

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the files under test")
b2objects = pytest.importorskip("blosc2.b2objects", reason="python-blosc2 4.x b2o carriers")


def _udf(inputs, output, offset):
    output[:] = inputs[0] * 2


def _make_files(d) -> dict[str, tuple[str, str]]:
    """name -> (path, words its error must hold), all written by python-blosc2."""
    a = blosc2.asarray(
        np.arange(100.0).reshape(10, 10),
        urlpath=str(d / "a.b2nd"),
        mode="w",
        chunks=(5, 5),
        blocks=(5, 5),
    )
    b = blosc2.asarray(np.ones((10, 10)), urlpath=str(d / "b.b2nd"), mode="w")
    files = {}
    (a + b).save(urlpath=str(d / "expr.b2nd"))
    files["lazyexpr"] = ("expr.b2nd", r"LazyExpr: a lazy expression over other arrays")
    # A plain Python function: saved in the format before "b2o" (metalayer LazyArray = 1)
    blosc2.lazyudf(_udf, (a,), dtype=a.dtype, shape=a.shape).save(urlpath=str(d / "udf.b2nd"))
    files["lazyudf-legacy"] = ("udf.b2nd", r"LazyUDF: a lazy user-defined function")
    # The same format for an expression (LazyArray = 0), as python-blosc2 3.x saved one
    old = blosc2.empty(
        (10, 10), dtype="f8", urlpath=str(d / "oldexpr.b2nd"), mode="w", meta={"LazyArray": 0}
    )
    old.schunk.vlmeta["_LazyArray"] = {"expression": "o0 * 2", "operands": {"o0": "a.b2nd"}}
    files["lazyexpr-legacy"] = ("oldexpr.b2nd", r"LazyExpr.*'o0 \* 2'")
    for kind, word in (
        ("lazyudf", "LazyUDF"),
        ("c2array", "C2Array"),
        ("remote_array", "RemoteArray"),
    ):
        carrier = b2objects.make_b2object_carrier(
            kind, (10, 10), "f8", urlpath=str(d / f"{kind}.b2nd"), mode="w"
        )
        b2objects.write_b2object_payload(carrier, {"kind": kind, "version": 1})
        files[kind] = (f"{kind}.b2nd", word)
    blosc2.Proxy(a, urlpath=str(d / "proxy.b2nd"), mode="w")
    files["proxy-empty"] = ("proxy.b2nd", r"Proxy cache of '[^']*a.b2nd'")
    part = blosc2.Proxy(a, urlpath=str(d / "proxy-part.b2nd"), mode="w")
    part[0:5, 0:5]  # one chunk fetched, three never: they would read as zeros
    files["proxy-part"] = ("proxy-part.b2nd", r"Proxy cache")
    full = blosc2.Proxy(a, urlpath=str(d / "proxy-full.b2nd"), mode="w")
    full[:]  # every chunk fetched, still only a cache (see nd/carriers.py)
    files["proxy-full"] = ("proxy-full.b2nd", r"Proxy cache")
    return {k: (str(d / p), w) for k, (p, w) in files.items()}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return _make_files(tmp_path_factory.mktemp("dataless"))


KINDS = [
    "lazyexpr",
    "lazyudf-legacy",
    "lazyexpr-legacy",
    "lazyudf",
    "c2array",
    "remote_array",
    "proxy-empty",
    "proxy-part",
    "proxy-full",
]


@pytest.mark.parametrize("kind", KINDS)
def test_open_refuses(files, kind):
    path, words = files[kind]
    with pytest.raises(UnsupportedError, match=words):
        b2store.open(path)


@pytest.mark.parametrize("kind", ["lazyexpr", "lazyudf-legacy", "proxy-part"])
def test_open_names_no_evaluation(files, kind):
    with pytest.raises(UnsupportedError, match="evaluates nothing from a file") as info:
        b2store.open(files[kind][0])
    assert files[kind][0] in str(info.value)


def test_ordinary_array_with_unwritten_chunks_still_reads(tmp_path):
    """Never-written chunks of an ordinary array are its fill value, not a missing source."""
    blosc2.full((10, 10), 7.5, urlpath=str(tmp_path / "f.b2nd"), mode="w", chunks=(5, 5))
    blosc2.zeros((10, 10), urlpath=str(tmp_path / "z.b2nd"), mode="w", chunks=(5, 5))
    blosc2.empty((10, 10), urlpath=str(tmp_path / "e.b2nd"), mode="w", chunks=(5, 5))
    with b2store.open(tmp_path / "f.b2nd") as arr:
        assert (arr[...] == 7.5).all()
    with b2store.open(tmp_path / "z.b2nd") as arr:
        assert (arr[...] == 0).all()
    with b2store.open(tmp_path / "e.b2nd") as arr:
        assert arr[...].shape == (10, 10)


@pytest.mark.parametrize("kind", ["lazyexpr", "lazyudf-legacy", "c2array", "proxy-part"])
def test_zarr_store_refuses(files, kind):
    zarr = pytest.importorskip("zarr")
    from b2store.integrations.zarr.store import B2ndStore

    path, words = files[kind]
    with pytest.raises(UnsupportedError, match=words):
        node = zarr.open(B2ndStore(path), mode="r")
        node[...]


@pytest.mark.parametrize("kind", ["lazyexpr", "lazyudf", "proxy-full"])
def test_xarray_refuses(files, kind):
    xr = pytest.importorskip("xarray")
    path, words = files[kind]
    with pytest.raises(UnsupportedError, match=words):
        xr.open_dataset(path, engine="b2nd").load()


@pytest.fixture(scope="module")
def trees(files, tmp_path_factory):
    """A .b2d and a .b2z tree (python-blosc2's TreeStore) with a dataless member."""
    d = tmp_path_factory.mktemp("dataless-trees")
    out = {}
    for ext in ("b2d", "b2z"):
        with blosc2.TreeStore(str(d / f"t.{ext}"), mode="w") as ts:
            ts["/x"] = np.arange(10.0)
        out[ext] = d / f"t.{ext}"
    shutil.copy(files["lazyexpr"][0], d / "t.b2d" / "e.b2nd")
    with zipfile.ZipFile(d / "t.b2z", "a", compression=zipfile.ZIP_STORED) as z:
        z.write(files["proxy-part"][0], "e.b2nd")
    return out


@pytest.mark.parametrize("ext,words", [("b2d", "LazyExpr"), ("b2z", "Proxy cache")])
def test_tree_member_refused(trees, ext, words):
    tree = open_tree(str(trees[ext]))
    with tree.arrays()["/x"].open() as x:
        assert x[3] == 3.0
    with pytest.raises(UnsupportedError, match=words) as info:
        tree.arrays()["/e"].open()
    if ext == "b2z":  # which member of the zip
        assert "(the frame at byte " in str(info.value)


@pytest.mark.parametrize("ext,words", [("b2d", "LazyExpr"), ("b2z", "Proxy cache")])
def test_tree_member_refused_by_zarr_and_xarray(trees, ext, words):
    zarr = pytest.importorskip("zarr")
    xr = pytest.importorskip("xarray")
    from b2store.integrations.zarr.store import B2ndStore

    with pytest.raises(UnsupportedError, match=words):
        zarr.open_array(B2ndStore(str(trees[ext])), path="e", mode="r")[...]
    with pytest.raises(UnsupportedError, match=words):
        xr.open_datatree(str(trees[ext]), engine="b2nd").load()


@pytest.mark.parametrize("command", ["dump", "verify"])
@pytest.mark.parametrize("kind", ["lazyexpr", "proxy-part"])
def test_cli_refuses(files, command, kind, capsys):
    path, words = files[kind]
    assert main([command, path]) != 0
    out = capsys.readouterr()
    assert "Proxy cache" in out.err + out.out or "LazyExpr" in out.err + out.out
    assert "0." not in out.out.replace(path, "")  # no values printed


def test_cli_convert_refuses(files, tmp_path, capsys):
    assert main(["convert", files["lazyexpr"][0], str(tmp_path / "out.zarr")]) != 0
    assert "LazyExpr" in capsys.readouterr().err
    assert not (tmp_path / "out.zarr" / "c").exists()


@pytest.mark.parametrize("kind", ["lazyexpr", "proxy-part"])
def test_info_describes(files, kind, capsys):
    path, _ = files[kind]
    assert main(["info", path]) == 0
    out = capsys.readouterr().out
    assert "not served:" in out
    assert ("LazyExpr" in out) if kind == "lazyexpr" else ("Proxy cache" in out)


def test_info_describes_tree_member(trees, capsys):
    assert main(["info", str(trees["b2d"])]) == 0
    out = capsys.readouterr().out
    assert "array /e: python-blosc2 lazyexpr (not served as an array)" in out
    assert "array /x: b2nd array" in out
