"""CTables b2store writes (b2store.to_table), opened by python-blosc2 4.14 as CTables with the
same rows, dtypes, nulls and strings; appends both ways."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import b2store
from b2store import UnsupportedError

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 reads the tables under test")
pd = pytest.importorskip("pandas")
xr = pytest.importorskip("xarray")

SUFFIXES = [".b2d", ".b2z"]


def _frame():
    return pd.DataFrame(
        {
            "a": np.arange(6, dtype="int64"),
            "b": [0.5, np.nan, 1.5, 2.0, 3.0, -1.0],
            "n": pd.array([1, None, 3, 4, None, 6], dtype="Int32"),
            "bo": pd.array([True, None, False, True, True, False], dtype="boolean"),
            "s": ["x", None, "héllo", "", "zz", "日本"],
            "t": np.array(
                ["2020-01-01", "NaT", "2021-05-05", "2022-01-01", "2023-01-01", "2024-02-29"],
                dtype="datetime64[ms]",
            ),
            "c": np.arange(6) * (1 + 1j),
            "u8": np.arange(6, dtype="uint8"),
            "f4": np.linspace(0, 1, 6, dtype="float32"),
        }
    )


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_python_blosc2_opens_what_b2store_writes(tmp_path, suffix):
    path = str(tmp_path / f"w{suffix}")
    df = _frame()
    b2store.to_table(df, path, attrs={"title": "T"})
    table = blosc2.open(path)
    assert isinstance(table, blosc2.CTable) and table.nrows == 6
    assert table.vlmeta["title"] == "T"
    ref = table.to_pandas()
    assert ref.dtypes.astype(str).to_dict() == {
        "a": "int64",
        "b": "float64",
        "n": "Int32",
        "bo": "boolean",
        "s": "str",
        "t": "datetime64[ms]",
        "c": "complex128",
        "u8": "uint8",
        "f4": "float32",
    }
    pd.testing.assert_frame_equal(ref, df, check_dtype=False)
    with b2store.open_table(path) as t:
        pd.testing.assert_frame_equal(t.to_pandas(), ref)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_python_blosc2_appends_to_a_b2store_table(tmp_path, suffix):
    path = str(tmp_path / f"w{suffix}")
    b2store.to_table(_frame(), path)
    table = blosc2.open(path, mode="a")
    table.append((9, 9.5, None, None, "app", np.datetime64("2024-01-01", "ms"), 2j, 7, 0.25))
    table.delete([0])
    table.close()
    ref = blosc2.open(path).to_pandas()
    assert ref["a"].tolist() == [1, 2, 3, 4, 5, 9]
    with b2store.open_table(path) as t:
        pd.testing.assert_frame_equal(t.to_pandas(), ref)


def _pyblosc2_table(path):
    Row = dataclasses.make_dataclass(
        "Row",
        [
            ("a", int, blosc2.field(blosc2.int64())),
            ("k", int, blosc2.field(blosc2.int16(null_value=-1))),
            ("m", float, blosc2.field(blosc2.float64(nullable=True, null_storage="mask"))),
            ("u", str, blosc2.field(blosc2.utf8(nullable=True))),
            ("s", str, blosc2.field(blosc2.string(max_length=4))),
        ],
    )
    t = blosc2.CTable(Row, urlpath=path, mode="w")
    t.extend([(i, i, None if i % 3 == 0 else i / 2, f"r{i}", f"s{i}") for i in range(20)])
    t.delete([0, 5, 19])
    t.vlmeta["owner"] = "py"
    t.close()


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_b2store_appends_to_a_python_blosc2_table(tmp_path, suffix):
    path = str(tmp_path / f"p{suffix}")
    _pyblosc2_table(path)
    before = blosc2.open(path).to_pandas()
    new = pd.DataFrame(
        {
            "s": ["n1", "n2"],
            "a": [100, 101],
            "k": pd.array([None, 7], dtype="Int16"),
            "m": [None, 2.5],
            "u": [None, "new"],
        }
    )
    b2store.to_table(new, path, mode="a", attrs={"extra": 1})
    table = blosc2.open(path)
    after = table.to_pandas()
    assert table.vlmeta["owner"] == "py" and table.vlmeta["extra"] == 1
    assert len(after) == len(before) + 2
    pd.testing.assert_frame_equal(after.iloc[: len(before)], before, check_dtype=False)
    tail = after.iloc[len(before) :].reset_index(drop=True)
    assert tail["a"].tolist() == [100, 101] and tail["s"].tolist() == ["n1", "n2"]
    assert tail["k"].isna().tolist() == [True, False] and tail["k"][1] == 7
    assert np.isnan(tail["m"][0]) and tail["m"][1] == 2.5
    assert pd.isna(tail["u"][0]) and tail["u"][1] == "new"
    # the schema is the table's: a sentinel column keeps its sentinel
    assert blosc2.open(path)._schema.columns_by_name["k"].spec.null_value == -1
    with b2store.open_table(path) as t:
        pd.testing.assert_frame_equal(t.to_pandas(), after)


def test_a_dataset_is_written_as_a_table(tmp_path):
    path = str(tmp_path / "d.b2z")
    ds = xr.Dataset(
        {"x": ("obs", np.arange(4.0)), "name": ("obs", np.array(["ab", "c", "de", "f"]))},
        attrs={"source": "test"},
    )
    b2store.to_table(ds, path)
    table = blosc2.open(path)
    assert table._schema.columns_by_name["name"].spec.to_metadata_dict() == {
        "kind": "string",
        "max_length": 2,
    }
    assert table["name"][:].tolist() == ["ab", "c", "de", "f"]
    back = xr.open_dataset(path, engine="b2nd")
    assert back.attrs == {"source": "test"}
    np.testing.assert_array_equal(back["x"].values, ds["x"].values)
    assert back["name"].dtype == np.dtype("<U2")


def test_what_a_table_cannot_hold_is_refused(tmp_path):
    path = str(tmp_path / "e.b2z")
    with pytest.raises(TypeError, match=r"column 'o': a CTable text column holds str .*not int"):
        b2store.to_table(pd.DataFrame({"o": pd.Series(["a", 1], dtype=object)}), path)
    with pytest.raises(UnsupportedError, match="CTable column 'c' of dtype 'category'"):
        b2store.to_table(pd.DataFrame({"c": pd.Categorical(["a", "b"])}), path)
    with pytest.raises(ValueError, match="all 1-d along one dimension"):
        b2store.to_table(xr.Dataset({"v": (("y", "x"), np.zeros((2, 2)))}), path)
    with pytest.raises(ValueError, match="mode must be 'w' .* not 'r'"):
        b2store.to_table({"a": np.arange(2)}, path, mode="r")
    b2store.to_table({"a": np.arange(2)}, path)
    with pytest.raises(ValueError, match=r"the rows appended have the columns \['b'\]"):
        b2store.to_table({"b": np.arange(2)}, path, mode="a")
    with pytest.raises(ValueError, match="column 'a' of the table is not nullable"):
        b2store.to_table({"a": pd.array([None], dtype="Int64")}, path, mode="a")
    with pytest.raises(b2store.FormatError, match="column 'a' rows appended: expected values"):
        b2store.to_table({"a": np.array([0.5])}, path, mode="a")
    with b2store.open_table(path) as t:  # refused appends left the table as it was
        assert t.read("a").tolist() == [0, 1]


def test_appends_from_threads_lose_no_row(tmp_path):
    import threading

    path = str(tmp_path / "c.b2d")
    b2store.to_table({"a": np.arange(1)}, path)
    errors = []

    def add(i):
        try:
            b2store.to_table({"a": np.array([i])}, path, mode="a")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(1, 7)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert sorted(blosc2.open(path)["a"][:].tolist()) == list(range(7))


def test_an_empty_table_both_ways(tmp_path):
    path = str(tmp_path / "e.b2z")
    b2store.to_table({"a": np.zeros(0, "i8"), "s": np.zeros(0, dtype=object)}, path)
    assert blosc2.open(path).nrows == 0
    with b2store.open_table(path) as t:
        pd.testing.assert_frame_equal(t.to_pandas(), blosc2.open(path).to_pandas())
    other = str(tmp_path / "p.b2d")
    Row = dataclasses.make_dataclass("Row", [("i", int, blosc2.field(blosc2.int64()))])
    blosc2.CTable(Row, urlpath=other, mode="w").close()
    assert xr.open_dataset(other, engine="b2nd").sizes == {"row": 0}
    b2store.to_table({"i": np.arange(2)}, other, mode="a")
    assert blosc2.open(other)["i"][:].tolist() == [0, 1]
