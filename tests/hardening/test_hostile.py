"""Hostile content: nothing from a file is executed or unpickled; no path leaves the tree; no
write goes through a link; a zip bomb is refused."""

from __future__ import annotations

import builtins
import marshal
import os
import pickle
import tracemalloc
import zipfile

import numpy as np
import pytest
from helpers import corpus_dir

import b2store
from b2store import FormatError
from b2store.nd.meta import dtype_from_string


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('touch PWNED')",
        "np.dtype('f8')",
        "[('a', __import__('os').getcwd())]",
        "[" * 100_000,  # a literal nested past the parser's depth
        "(" * 50_000 + ")" * 50_000,
        "[('a', 'O')]",  # Python objects: pickled data in disguise
        "{'names': ['a'], 'formats': ['O']}",
        "'O'",
    ],
)
def test_dtype_strings_are_parsed_never_evaluated(tmp_path, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FormatError, match="dtype"):
        dtype_from_string(text)
    assert not (tmp_path / "PWNED").exists()


def test_a_structured_dtype_string_reads():
    assert dtype_from_string("[('a', '<f8'), ('b', '<i4', (2,))]") == np.dtype(
        [("a", "<f8"), ("b", "<i4", (2,))]
    )


@pytest.fixture
def nothing_runs(monkeypatch):
    """eval, exec, compile, pickle and marshal are recorded and refused while the fixture is
    active; the test fails afterwards if any was called. The record, not the exception, is the
    proof: the library may catch the exception (and report a FormatError), not the record."""
    calls: list[str] = []

    def refusing(name):
        def refuse(*args, **kwargs):
            calls.append(name)
            raise RuntimeError(f"b2store called {name} on something from a file")

        return refuse

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, refusing(name))
    monkeypatch.setattr(pickle, "loads", refusing("pickle.loads"))
    monkeypatch.setattr(pickle, "load", refusing("pickle.load"))
    monkeypatch.setattr(pickle, "Unpickler", refusing("pickle.Unpickler"))
    monkeypatch.setattr(marshal, "loads", refusing("marshal.loads"))
    yield calls
    assert calls == [], f"b2store ran or unpickled something from a file: {calls}"


def test_the_record_sees_a_call_the_library_swallows(nothing_runs):
    # What a broad `except` inside the library would do with the refusal: the record stays.
    try:
        pickle.loads(b"\x80\x04K\x01.")
    except Exception:  # noqa: S110 (what the test shows such an except cannot hide)
        pass
    assert nothing_runs == ["pickle.loads"]
    nothing_runs.clear()


@pytest.mark.parametrize("name", ["lazyexpr", "lazyudf"])
def test_python_blosc2_serialized_expressions_are_never_run(nothing_runs, name):
    path = corpus_dir("compat") / f"pyb2__tests__data__legacy_{name}_v1__expr.b2nd"
    try:
        obj = b2store.open(path)
    except b2store.B2StoreError:
        return  # refused whole: nothing was run either
    with obj:
        meta = dict(obj.vlmeta)  # decoded with msgpack only: strings, bytes, numbers
        assert meta
        for value in meta.values():
            assert not callable(value)


def test_sparse_chunk_ids_name_no_other_path(tmp_path):
    from b2store.frame.sparse import SparseFrame

    s = b2store.SChunk.create(tmp_path / "s.b2frame", contiguous=False, typesize=1)
    s.append_data(b"abc" * 10)
    s.close()
    frame = SparseFrame(tmp_path / "s.b2frame")
    for bad in (-1, 2**32, 2**63 - 1):
        with pytest.raises(FormatError, match="chunk id"):
            frame.chunk_path(bad)
    # Every id maps to eight hex digits inside the directory.
    assert frame.chunk_path(0xFFFFFFFF).parent == tmp_path / "s.b2frame"
    assert frame.chunk_path(0xFFFFFFFF).name == "FFFFFFFF.chunk"


def make_frame(path) -> bytes:
    b2store.asarray(np.arange(100, dtype="<i4"), urlpath=path).close()
    return path.read_bytes()


@pytest.mark.parametrize("member", ["../evil.b2nd", "/abs.b2nd", "grp/../../evil.b2nd"])
def test_b2z_entries_outside_the_tree_are_refused(tmp_path, member):
    data = make_frame(tmp_path / "x.b2nd")
    with zipfile.ZipFile(tmp_path / "t.b2z", "w") as z:
        z.writestr("ok.b2nd", data)
        z.writestr(member, data)
    with pytest.raises(FormatError, match="member name"):
        b2store.open_tree(tmp_path / "t.b2z").arrays()


def test_b2d_embed_names_outside_the_tree_are_not_opened(tmp_path):
    # A .b2d lists its arrays by the files it holds; a name in embed.b2e is a key into that
    # one frame, never a path.
    tree = tmp_path / "t.b2d"
    tree.mkdir()
    make_frame(tree / "a.b2nd")
    make_frame(tmp_path / "secret.b2nd")
    arrays = b2store.open_tree(tree).arrays()
    assert set(arrays) == {"/a"}
    for ref in arrays.values():
        assert os.path.realpath(ref.urlpath).startswith(os.path.realpath(tree))


def test_a_b2z_zip_bomb_is_refused_without_inflating(tmp_path):
    path = tmp_path / "bomb.b2z"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("big.b2nd", bytes(256 << 20))  # 256 MiB of zeros in ~250 kB
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="stored"):
            b2store.open_tree(path).arrays()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_writes_never_follow_a_link_out_of_a_tree(tmp_path):
    zarr = pytest.importorskip("zarr")
    from b2store import B2ndStore

    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.b2nd"
    before = make_frame(victim)
    tree = tmp_path / "tree.b2d"
    tree.mkdir()
    os.symlink(victim, tree / "a.b2nd")
    store = B2ndStore(tree, mode="a")
    z = zarr.open_array(store, path="a", mode="a")
    assert list(z[:3]) == [0, 1, 2]  # reading through it is allowed
    with pytest.raises(PermissionError, match="symbolic link"):
        z[:5] = 99
    assert victim.read_bytes() == before
