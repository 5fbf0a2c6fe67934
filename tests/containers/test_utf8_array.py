"""UTF8Array: the strings of a python-blosc2 4.14 CTable utf8 column (offsets + UTF-8 bytes in
two b2nd arrays) read as python-blosc2 reads them; offsets or bytes that lie are FormatErrors
naming the row."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import b2store
from b2store.containers import STRING_DTYPE, UTF8Array
from b2store.errors import FormatError

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the files under test")

VALUES = ["a", "", "héllo", "x" * 300, "日本", "\U0001f600 emoji"] * 7


@dataclass
class Row:
    name: str = blosc2.field(blosc2.utf8())
    x: int = blosc2.field(blosc2.int64())


def test_ctable_utf8_column_reads_as_pyblosc2(tmp_path):
    path = tmp_path / "t.b2d"
    table = blosc2.CTable(
        Row, new_data={"name": VALUES, "x": list(range(len(VALUES)))}, urlpath=str(path), mode="w"
    )
    expected = table["name"][:]
    table.close()  # its pending rows written
    offsets = b2store.open(path / "_cols" / "name.b2nd")
    data = b2store.open(path / "_cols" / "name.utf8.b2nd")
    arr = UTF8Array(offsets, data)
    assert len(arr) == len(VALUES)
    got = arr[:]
    assert got.dtype == STRING_DTYPE and got.tolist() == list(expected) == VALUES
    assert arr[3] == VALUES[3] and arr[-1] == VALUES[-1]
    assert arr[5:20:4].tolist() == VALUES[5:20:4]
    assert arr[[7, 2, 2]].tolist() == [VALUES[7], VALUES[2], VALUES[2]]
    assert list(arr) == VALUES


def _utf8(offsets, data) -> UTF8Array:
    return UTF8Array(
        b2store.asarray(np.asarray(offsets, np.int64)),
        b2store.asarray(np.frombuffer(data, np.uint8)),
    )


@pytest.mark.parametrize(
    ("offsets", "data", "message"),
    [
        ([0, 3, 2], b"abcd", r"never go back.*offsets\[1:3\] = \[3, 2\]"),
        ([0, 3, 9], b"abcd", r"expected offsets that never go back, within the 4 data bytes"),
        ([1, 3], b"abcd", r"UTF8Array offsets\[0\]: expected 0, found 1"),
        ([0, 1, 3], b"a\xff\xfe", r"UTF8Array row 1: expected UTF-8 text, found invalid"),
    ],
)  # fmt: skip
def test_lying_offsets_and_bytes_refused(offsets, data, message):
    with pytest.raises(FormatError, match=message):
        _utf8(offsets, data)[:]


def test_wrong_companion_arrays_refused():
    ints = b2store.asarray(np.zeros(3, np.int32))
    data = b2store.asarray(np.zeros(3, np.uint8))
    with pytest.raises(
        FormatError, match="UTF8Array offsets: expected a 1-d int64 array, found 1-d int32"
    ):
        UTF8Array(ints, data)


class _Opener:
    """A picklable way back to the column, as a reader would give one."""

    def __init__(self, root):
        self.root = root

    def __call__(self) -> UTF8Array:
        cols = self.root / "_cols"
        return UTF8Array(b2store.open(cols / "name.b2nd"), b2store.open(cols / "name.utf8.b2nd"))


def test_utf8_column_as_a_lazy_xarray_string_variable(tmp_path):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("dask")
    from b2store.integrations.xarray.utf8 import utf8_variable

    path = tmp_path / "t.b2d"
    table = blosc2.CTable(
        Row, new_data={"name": VALUES, "x": list(range(len(VALUES)))}, urlpath=str(path), mode="w"
    )
    table.close()
    opener = _Opener(path)
    var = utf8_variable(opener, opener(), "row", attrs={"kind": "utf8"})
    ds = xr.Dataset({"name": var})
    assert ds["name"].dtype == STRING_DTYPE and ds["name"].attrs == {"kind": "utf8"}
    assert ds["name"][[1, 3]].values.tolist() == [VALUES[1], VALUES[3]]
    assert ds["name"][4].item() == VALUES[4]
    chunked = ds.chunk({"row": 10})
    assert chunked["name"].data.numblocks == (5,)
    assert chunked["name"].values.tolist() == VALUES
    assert ds["name"].isel(row=slice(5, 12)).values.tolist() == VALUES[5:12]
