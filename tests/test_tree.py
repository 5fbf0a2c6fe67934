"""Trees of b2nd arrays (b2store.tree): directories, python-blosc2's .b2d/.b2z stores, frames."""

from __future__ import annotations

import pickle
import struct
import zipfile

import numpy as np
import pytest

import b2store
from b2store.tree import ArrayRef, open_tree

blosc2 = pytest.importorskip("blosc2")


def _write_tree(path, **kwargs):
    """A TreeStore with a root array, a group with attributes, a nested group without."""
    temp = np.arange(60, dtype="<f4").reshape(6, 10)
    lon = np.linspace(0, 1, 7)
    deep = np.arange(12, dtype="<i2").reshape(3, 4)
    with blosc2.TreeStore(str(path), mode="w", **kwargs) as ts:
        a = blosc2.asarray(temp, chunks=(4, 5), blocks=(2, 3))
        a.vlmeta["_ARRAY_DIMENSIONS"] = ["y", "x"]
        a.vlmeta["units"] = "K"
        ts["/temp"] = a
        ts["/grp/lon"] = lon
        ts["/grp/sub/deep"] = deep
        ts.vlmeta["title"] = "root attrs"
        ts["/grp"].vlmeta["gattr"] = 3
    return {"/temp": temp, "/grp/lon": lon, "/grp/sub/deep": deep}


@pytest.mark.parametrize("ext", ["b2d", "b2z"])
def test_treestore_groups_arrays_and_attrs(tmp_path, ext):
    path = tmp_path / f"t.{ext}"
    expected = _write_tree(path)
    tree = open_tree(path)
    assert tree.kind == ext
    groups = tree.groups()
    assert set(groups) == {"/", "/grp", "/grp/sub"}
    assert dict(groups["/"]) == {"title": "root attrs"}
    assert dict(groups["/grp"]) == {"gattr": 3}
    assert dict(groups["/grp/sub"]) == {}
    arrays = tree.arrays()
    assert set(arrays) == set(expected)
    for key, want in expected.items():
        arr = arrays[key].open()
        np.testing.assert_array_equal(arr[...], want)
        assert arrays[key].shape == want.shape and arrays[key].dtype == want.dtype
    temp = arrays["/temp"].open()
    assert temp.vlmeta["_ARRAY_DIMENSIONS"] == ["y", "x"] and temp.vlmeta["units"] == "K"
    assert arrays["/temp"].chunks == (4, 5) and arrays["/temp"].blocks == (2, 3)


def test_b2z_members_read_in_place(tmp_path):
    path = tmp_path / "t.b2z"
    _write_tree(path)
    ts = blosc2.open(str(path))
    for key, ref in open_tree(path).arrays().items():
        # The same byte window python-blosc2 reads the leaf from, inside the zip.
        assert (ref.offset, ref.length) == ts.member_window(key)
        assert ref.urlpath == str(path)


@pytest.mark.parametrize("ext", ["b2d", "b2z"])
def test_refs_and_trees_pickle(tmp_path, ext, monkeypatch):
    path = tmp_path / f"t.{ext}"
    expected = _write_tree(path)
    tree = open_tree(path)
    monkeypatch.chdir(tmp_path.parent)  # recipes hold absolute paths
    ref = pickle.loads(pickle.dumps(tree.arrays()["/grp/lon"]))
    assert isinstance(ref, ArrayRef)
    np.testing.assert_array_equal(ref.open()[...], expected["/grp/lon"])
    again = pickle.loads(pickle.dumps(tree))
    assert again.arrays() == tree.arrays() and again.kind == tree.kind


@pytest.mark.parametrize("ext", ["b2d", "b2z"])
def test_dictstore_flat(tmp_path, ext):
    path = tmp_path / f"d.{ext}"
    with blosc2.DictStore(str(path), mode="w") as ds:
        ds["/a"] = np.arange(10)
        ds["/b"] = np.ones((3, 3))
    tree = open_tree(path)
    assert set(tree.arrays()) == {"/a", "/b"}
    np.testing.assert_array_equal(tree.arrays()["/b"].open()[...], np.ones((3, 3)))
    assert dict(tree.groups()["/"]) == {}


@pytest.mark.parametrize("ext", ["b2d", "b2z"])
def test_embedded_values_are_arrays_too(tmp_path, ext):
    path = tmp_path / f"e.{ext}"
    small = np.arange(5, dtype="<i8")
    with blosc2.DictStore(str(path), mode="w", threshold=10**6) as ds:
        ds["/small"] = small
    ref = open_tree(path).arrays()["/small"]
    assert ref.embedded == "/small"
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(ref)).open()[...], small)


def test_directory_of_frames_with_sparse_and_groups(tmp_path):
    a = np.arange(20).reshape(4, 5)
    b2store.asarray(a, tmp_path / "a.b2nd")
    blosc2.asarray(a * 2, urlpath=str(tmp_path / "s.b2nd"), contiguous=False)
    (tmp_path / "grp").mkdir()
    blosc2.asarray(a * 3, urlpath=str(tmp_path / "grp" / "c.b2nd"))
    (tmp_path / "notes.txt").write_text("not an array")
    tree = open_tree(tmp_path)
    assert tree.kind == "dir"
    assert set(tree.arrays()) == {"/a", "/s", "/grp/c"}
    assert set(tree.groups()) == {"/", "/grp"}
    for key, k in (("/a", 1), ("/s", 2), ("/grp/c", 3)):
        np.testing.assert_array_equal(tree.arrays()[key].open()[...], a * k)


@pytest.mark.parametrize("contiguous", [True, False])
def test_single_frame_is_a_tree_of_one(tmp_path, contiguous):
    path = tmp_path / "temp.b2nd"
    blosc2.asarray(np.arange(7.0), urlpath=str(path), contiguous=contiguous)
    tree = open_tree(path)
    assert tree.kind == "frame"
    assert list(tree.arrays()) == ["/temp"] and list(tree.groups()) == ["/"]
    np.testing.assert_array_equal(tree.arrays()["/temp"].open()[...], np.arange(7.0))


def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tree at .*nothing.b2z"):
        open_tree(tmp_path / "nothing.b2z")


# --- hostile zips -----------------------------------------------------------------------------


def _frame_bytes() -> bytes:
    return blosc2.asarray(np.arange(100)).to_cframe()


def test_compressed_member_is_refused(tmp_path):
    path = tmp_path / "deflated.b2z"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.b2nd", _frame_bytes())
    with pytest.raises(b2store.FormatError, match="compression"):
        open_tree(path)


@pytest.mark.parametrize("name", ["../evil.b2nd", "/abs.b2nd", "a/../../x.b2nd", "a\\b.b2nd"])
def test_member_names_cannot_leave_the_tree(tmp_path, name):
    path = tmp_path / "trav.b2z"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo(name), _frame_bytes())
    with pytest.raises(b2store.FormatError, match="member name"):
        open_tree(path)


def test_overlapping_members_are_refused(tmp_path):
    # Two directory entries pointing at one local header: the overlapping-file zip bomb.
    path = tmp_path / "bomb.b2z"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("a.b2nd", _frame_bytes())
        zf.writestr("b.b2nd", _frame_bytes())
    data = bytearray(path.read_bytes())
    second = data.rfind(b"PK\x01\x02")
    struct.pack_into("<I", data, second + 42, 0)
    path.write_bytes(bytes(data))
    with pytest.raises(b2store.FormatError, match="span"):
        open_tree(path)


def test_lying_entry_count_is_refused(tmp_path):
    path = tmp_path / "count.b2z"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("a.b2nd", _frame_bytes())
    data = bytearray(path.read_bytes())
    eocd = data.rfind(b"PK\x05\x06")
    struct.pack_into("<HH", data, eocd + 8, 60000, 60000)
    path.write_bytes(bytes(data))
    with pytest.raises(b2store.FormatError, match="zip entries"):
        open_tree(path)


@pytest.mark.parametrize("cut", [1, 10, 30])
def test_truncated_zip_is_a_format_error(tmp_path, cut):
    path = tmp_path / "t.b2z"
    _write_tree(path)
    path.write_bytes(path.read_bytes()[:-cut])
    with pytest.raises(b2store.FormatError, match=r"\.b2z end of central directory"):
        open_tree(path)
