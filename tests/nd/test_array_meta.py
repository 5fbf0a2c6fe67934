"""``arr.meta``: the fixed metalayers decoded as python-blosc2's ``schunk.meta`` decodes them,
the stored bytes through ``meta.raw``, and writes packed as python-blosc2 packs them."""

import msgpack
import numpy as np
import pytest

import b2store

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the oracle of meta's values")

USER_META = {
    "dict": {"v": 1, "name": "sst"},
    "bytes keys": {b"lorem": 4231},
    "list": [1, 2.5, "x"],
    "tuple": (1, 2),
    "bytes": b"abc",
    "int": 7,
}
# python-blosc2 4.14 packs a NumPy array set later, not one given at creation.
WITH_ARRAY = {**USER_META, "array": np.arange(3, dtype="<i2")}


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert type(a) is type(b) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert type(a) is type(b) and a == b


def test_reads_what_python_blosc2_reads(tmp_path):
    path = tmp_path / "theirs.b2nd"
    blosc2.asarray(np.arange(10), urlpath=str(path), mode="w", meta=USER_META)
    opened = blosc2.open(str(path))  # (its meta must not outlive it: python-blosc2 crashes)
    theirs = opened.schunk.meta
    with b2store.open(path) as arr:
        assert set(arr.meta) == set(theirs.keys()) == {"b2nd", *USER_META}
        for name in arr.meta:
            _same(arr.meta[name], theirs[name])
            _same(arr.schunk.meta[name], theirs[name])
        assert arr.meta["b2nd"] == [0, 1, [10], [10], [10], 0, "<i8"]
        assert arr.meta.raw("dict") == msgpack.packb(USER_META["dict"])
        assert isinstance(arr.meta.raw("b2nd"), bytes)
        assert arr.meta[:].keys() == arr.meta.getall().keys() == theirs.getall().keys()
        with pytest.raises(KeyError):
            arr.meta["absent"]


def test_python_blosc2_reads_what_meta_writes(tmp_path):
    path = tmp_path / "ours.b2nd"
    b2store.asarray(np.arange(10), path, meta=WITH_ARRAY)
    opened = blosc2.open(str(path))
    theirs = opened.schunk.meta
    with b2store.open(path) as arr:
        for name, value in WITH_ARRAY.items():
            _same(arr.meta[name], value)  # before, the packed bytes came back
            _same(theirs[name], value)


def test_setting_packs_in_place_as_python_blosc2(tmp_path):
    path = tmp_path / "set.b2nd"
    b2store.asarray(np.arange(10), path, meta={"test": {b"lorem": 1234}})
    with b2store.open(path, mode="a") as arr:
        arr.meta["test"] = {b"lorem": 4231}
        assert arr.meta["test"] == {b"lorem": 4231}
        with pytest.raises(ValueError, match="same size"):
            arr.meta["test"] = {b"lorem": 4231, b"ipsum": 1}
        with pytest.raises(ValueError, match="same size"):
            arr.meta.set_raw("test", b"\x80")
    opened = blosc2.open(str(path))  # (bound: a Meta outliving its array crashes)
    assert opened.schunk.meta["test"] == {b"lorem": 4231}
    theirs = blosc2.open(str(path), mode="a")
    theirs.schunk.meta["test"] = {b"lorem": 9999}
    del theirs
    with b2store.open(path, mode="a") as arr:
        assert arr.meta["test"] == {b"lorem": 9999}
        arr.meta.set_raw("test", msgpack.packb({b"lorem": 1111}))
        assert arr.meta.raw("test") == msgpack.packb({b"lorem": 1111})
    opened = blosc2.open(str(path))
    assert opened.schunk.meta["test"] == {b"lorem": 1111}


def test_content_that_is_not_msgpack_reads_as_its_bytes():
    # C programs may store any bytes as a metalayer: they come back as they are.
    s = b2store.SChunk.create(None, typesize=1, meta={"c": b"\x00\x01raw"})
    s.append_data(b"x" * 10)
    assert s.meta["c"] == s.meta.raw("c") == b"\x00\x01raw"
