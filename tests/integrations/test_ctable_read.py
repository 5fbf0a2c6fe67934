"""python-blosc2's CTable read by b2store (open_table, to_pandas, the xarray engine), compared
with python-blosc2's own reading; tables that lie, or hold what b2store does not read,
refused naming the field."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from http_server import serve_directory

import b2store
from b2store import FormatError, UnsupportedError
from b2store.table.rows import LiveRows

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the tables under test")
pd = pytest.importorskip("pandas")
xr = pytest.importorskip("xarray")

SUFFIXES = [".b2d", ".b2z"]


def _mixed(path):
    """Every kind b2store reads: mask and sentinel nulls, fixed and utf8 text, timestamps,
    deleted rows, and the table's attributes."""
    Row = dataclasses.make_dataclass(
        "Row",
        [
            ("a", int, blosc2.field(blosc2.int64())),
            ("b", float, blosc2.field(blosc2.float64(nullable=True))),
            ("s", str, blosc2.field(blosc2.string(max_length=8))),
            ("m", int, blosc2.field(blosc2.int32(nullable=True, null_storage="mask"))),
            ("u", str, blosc2.field(blosc2.utf8(nullable=True))),
            ("k", int, blosc2.field(blosc2.int16(null_value=-1))),
            ("t", object, blosc2.field(blosc2.timestamp(unit="ms", null_value=-(2**63)))),
            ("f", bool, blosc2.field(blosc2.bool())),
        ],
    )
    t = blosc2.CTable(Row, urlpath=path, mode="w")
    t.extend(
        [
            (
                i,
                None if i % 7 == 0 else i * 0.5,
                f"s{i}",
                None if i % 5 == 0 else i,
                None if i % 3 == 0 else "hé" * (i % 4),
                -1 if i % 11 == 0 else i,
                None if i % 13 == 0 else np.datetime64(1000 * i, "ms"),
                i % 2 == 0,
            )
            for i in range(300)
        ]
    )
    t.delete([1, 2, 150, 299])
    t.vlmeta["title"] = "my table"
    t.close()


def _masked(path):
    """python-blosc2's tests/ctable/test_null_persistence.py make_table: 50 rows in room
    for 100, nulls at 3, 7 and 41 of a mask column, saved."""
    Row = dataclasses.make_dataclass(
        "MaskRow",
        [
            ("a", int, blosc2.field(blosc2.int64(null_storage="mask"))),
            ("b", float, blosc2.field(blosc2.float64())),
            ("c", str, blosc2.field(blosc2.string(max_length=8, null_storage="mask"))),
        ],
    )
    t = blosc2.CTable(Row, expected_size=100)
    t.extend([(i, float(i), f"s{i}") for i in range(50)])
    mask = t._ensure_null_mask("a")
    for pos in (3, 7, 41):
        mask[pos] = False
    t.save(path)


def _persistent(path):
    """python-blosc2's tests/ctable/test_table_persistency.py Row, with rows deleted."""
    Row = dataclasses.make_dataclass(
        "Row",
        [
            ("id", int, blosc2.field(blosc2.int64(ge=0))),
            ("score", float, blosc2.field(blosc2.float64(ge=0, le=100), default=0.0)),
            ("active", bool, blosc2.field(blosc2.bool(), default=True)),
        ],
    )
    t = blosc2.CTable(Row, urlpath=path, mode="w")
    t.extend([(i, float(i % 100), i % 3 == 0) for i in range(40)])
    t.delete(list(range(0, 40, 4)))
    t.close()


MAKERS = {"mixed": _mixed, "masked": _masked, "persistent": _persistent}


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctables")
    out = {}
    for name, make in MAKERS.items():
        for suffix in SUFFIXES:
            path = str(root / f"{name}{suffix}")
            make(path)
            out[name, suffix] = path
    return root, out


def _reference(path):
    return blosc2.open(path).to_pandas()


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("name", list(MAKERS))
def test_to_pandas_as_python_blosc2(tables, name, suffix):
    path = tables[1][name, suffix]
    ref = _reference(path)
    with b2store.open_table(path) as t:
        assert len(t) == len(ref) and t.columns == list(ref.columns)
        df = t.to_pandas()
    pd.testing.assert_frame_equal(df, ref)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_mixed_columns_nulls_and_attrs(tables, suffix):
    path = tables[1]["mixed", suffix]
    ref = _reference(path)
    with b2store.open_table(path) as t:
        assert t.attrs == {"title": "my table"}
        assert len(t) == 296
        m = t.read("m", 0, 10)
        assert isinstance(m, np.ma.MaskedArray)
        assert m.mask.tolist() == ref["m"][:10].isna().tolist()
        rows = t[5:9]
        assert rows["a"].tolist() == ref["a"][5:9].tolist()
        assert t.read("t").dtype == np.dtype("datetime64[ms]")
        # a bool column: bool, as python-blosc2 reads it
        assert t.read("f").dtype == np.dtype(bool)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_open_dataset_is_the_table(tables, suffix):
    path = tables[1]["mixed", suffix]
    ref = _reference(path)
    ds = xr.open_dataset(path, engine="b2nd")
    assert list(ds.data_vars) == list(ref.columns)
    assert dict(ds.sizes) == {"row": len(ref)} and ds.attrs == {"title": "my table"}
    assert ds["a"].dtype == np.int64 and ds["s"].dtype == np.dtype("<U8")
    assert ds["m"].dtype == np.float64  # a nullable int: float64 with NaN, as CF decoding
    np.testing.assert_array_equal(ds["m"].values, ref["m"].astype("float64").to_numpy())
    np.testing.assert_array_equal(ds["b"].values, ref["b"].to_numpy())
    u = ds["u"].values
    assert u.dtype == object
    assert [None if v is None else v for v in u] == [None if pd.isna(v) else v for v in ref["u"]]
    np.testing.assert_array_equal(ds["t"].values, ref["t"].to_numpy())
    # a slice of rows, eagerly and through dask
    part = ds.isel(row=slice(40, 200, 3))
    dk = xr.open_dataset(path, engine="b2nd", chunks={"row": 64})
    assert dk["a"].chunks == ((64, 64, 64, 64, 40),)
    xr.testing.assert_identical(dk.isel(row=slice(40, 200, 3)).compute(), part.load())
    np.testing.assert_array_equal(part["a"].values, ref["a"][40:200:3].to_numpy())
    ds.close()


def test_open_datatree_shows_a_table_as_one_node(tables):
    tree = xr.open_datatree(tables[1]["mixed", ".b2z"], engine="b2nd")
    assert list(tree.subtree_with_keys) == [(".", tree)] or len(list(tree.subtree)) == 1
    assert "_valid_rows" not in tree.ds and "a" in tree.ds


def test_table_read_from_a_url(tables):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    root, paths = tables
    ref = _reference(paths["mixed", ".b2z"])
    with serve_directory(root) as (url, _):
        for suffix in [".b2z"]:  # (a .b2d directory cannot be listed over plain HTTP)
            with b2store.open_table(f"{url}/mixed{suffix}") as t:
                pd.testing.assert_frame_equal(t.to_pandas(), ref)
            ds = xr.open_dataset(f"{url}/mixed{suffix}", engine="b2nd", chunks={"row": 100})
            np.testing.assert_array_equal(ds["a"].values, ref["a"].to_numpy())
            assert ds.attrs == {"title": "my table"}


def test_live_rows_read_only_the_mask_chunks_a_slice_needs(tmp_path):
    flags = np.ones(1000, bool)
    flags[[5, 250, 260, 999]] = False
    valid = b2store.asarray(flags, str(tmp_path / "v.b2nd"), chunks=(100,), blocks=(50,))
    live = LiveRows(valid)
    assert len(live) == 996
    decoded = []
    real = live._flags
    live._flags = lambda i: decoded.append(i) or real(i)
    np.testing.assert_array_equal(live.positions(300, 500), np.flatnonzero(flags)[300:500])
    assert decoded == []  # chunks 3 to 5 are all live: no mask read
    np.testing.assert_array_equal(live.positions(240, 270), np.flatnonzero(flags)[240:270])
    assert decoded == [2]


# --- refused ----------------------------------------------------------------------------------


def _edit_schema(path, change):
    meta = blosc2.open(path + "/_meta.b2f", mode="a")
    schema = json.loads(meta.vlmeta["schema"])
    change(schema)
    meta.vlmeta["schema"] = json.dumps(schema)


@pytest.fixture
def mixed_b2d(tmp_path):
    path = str(tmp_path / "t.b2d")
    _mixed(path)
    return path


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda s: s.update(version=4), UnsupportedError, "unsupported CTable schema version 4"),
        (
            lambda s: s["columns"][1].update(kind="float128"),
            UnsupportedError,
            "unsupported CTable column 'b' kind 'float128'",
        ),
        (
            lambda s: s["columns"][1].update(kind="struct"),
            UnsupportedError,
            "unsupported CTable column 'b' kind 'struct'",
        ),
        (
            lambda s: s.update(computed_columns=[]),
            UnsupportedError,
            "unsupported CTable schema key (computed columns, evaluated on read) "
            "'computed_columns'",
        ),
        (
            lambda s: s.update(n_rows=1000),
            FormatError,
            "CTable schema n_rows: expected 296 (the rows /_valid_rows keeps), found 1000",
        ),
        (
            lambda s: s["columns"][0].update(kind="float64"),
            FormatError,
            "CTable /_cols/a dtype: expected float64 (its schema's), found int64",
        ),
        (
            lambda s: s["columns"][0].update(encoding="zigzag"),
            UnsupportedError,
            "unsupported CTable column 'a' key 'encoding'",
        ),
    ],
)
def test_a_schema_b2store_does_not_understand_is_refused(mixed_b2d, change, error, message):
    _edit_schema(mixed_b2d, change)
    with pytest.raises(error) as info:
        b2store.open_table(mixed_b2d)
    assert message in str(info.value)
    with pytest.raises(error) as info:
        xr.open_dataset(mixed_b2d, engine="b2nd")
    assert message in str(info.value)


def test_an_unknown_manifest_kind_or_version_is_refused(mixed_b2d):
    meta = blosc2.open(mixed_b2d + "/_meta.b2f", mode="a")
    meta.vlmeta["version"] = 2
    with pytest.raises(UnsupportedError, match="unsupported CTable manifest version 2"):
        b2store.open_table(mixed_b2d)
    meta.vlmeta["version"] = 1
    meta.vlmeta["kind"] = "ctable2"
    with pytest.raises(FormatError, match="_meta kind: expected 'ctable', found 'ctable2'"):
        b2store.open_table(mixed_b2d)


def test_a_column_shorter_than_its_rows_is_refused(mixed_b2d):
    short = blosc2.asarray(np.ones(100, bool))
    blosc2.asarray(short[:], urlpath=mixed_b2d + "/_cols/m.notnull.b2nd", mode="w")
    with b2store.open_table(mixed_b2d) as t:
        with pytest.raises(FormatError, match="'m.notnull' length: expected at least"):
            t.to_pandas()
        assert t.read("a", 0, 10).tolist() == [0, 3, 4, 5, 6, 7, 8, 9, 10, 11]


def test_a_tree_without_valid_rows_is_no_table(tmp_path):
    b2store.asarray(np.arange(3), str(tmp_path / "x.b2nd"))
    with pytest.raises(FormatError, match="a CTable"):
        b2store.open_table(str(tmp_path))


# --- every column kind python-blosc2 4.14 writes: read as it reads it, or refused ----------

_KINDS = {
    "bytes": (bytes, lambda: blosc2.bytes(max_length=4), b"ab"),
    "complex": (complex, lambda: blosc2.complex128(null_storage="mask"), 1 + 2j),
    "uint16": (int, lambda: blosc2.uint16(null_value=7), 3),
    "timezone": (object, lambda: blosc2.timestamp(unit="s", timezone="UTC"), np.datetime64(5, "s")),
    "vlstring": (str, lambda: blosc2.vlstring(), "abc"),
    "vlstring-nullable": (str, lambda: blosc2.vlstring(nullable=True), None),
    "vlbytes": (bytes, lambda: blosc2.vlbytes(), b"abc"),
    "object": (object, lambda: blosc2.object(), {"a": 1}),
    "list": (list[int], lambda: blosc2.list(blosc2.int32()), [1, 2]),
    "list-nullable": (list[int], lambda: blosc2.list(blosc2.int32(), nullable=True), None),
    "dictionary": (str, lambda: blosc2.dictionary(), "x"),
    "dictionary-nullable": (str, lambda: blosc2.dictionary(nullable=True), None),
    "ndarray": (object, lambda: blosc2.ndarray((2,), dtype=blosc2.float32()), np.ones(2, "f4")),
    "struct": (dict, lambda: blosc2.struct({"x": blosc2.int32()}), {"x": 1}),
}
_REFUSED = ("ndarray", "struct")


def table_values(path):
    return [None if pd.isna(v) else v for v in _reference(path)["c"]]


@pytest.mark.parametrize("kind", list(_KINDS))
def test_each_column_kind_is_read_or_refused_naming_it(tmp_path, kind):
    pytype, spec, value = _KINDS[kind]
    Row = dataclasses.make_dataclass(
        "Row", [("i", int, blosc2.field(blosc2.int64())), ("c", pytype, blosc2.field(spec()))]
    )
    path = str(tmp_path / "k.b2z")
    t = blosc2.CTable(Row, urlpath=path, mode="w")
    last = value if value is not None else ([7] if kind.startswith("list") else "x")
    t.extend([(1, value), (2, value), (3, last)])
    t.delete([1])
    t.close()
    if kind in _REFUSED:
        with pytest.raises(UnsupportedError, match=f"CTable column 'c' kind '{kind}'"):
            b2store.open_table(path)
        return
    with b2store.open_table(path) as table:
        pd.testing.assert_frame_equal(table.to_pandas(), _reference(path))
    if kind in ("object", "list", "list-nullable"):  # no xarray variable: refused, saying how
        with pytest.raises(UnsupportedError, match=r"b2store.open_table\(.*\).read\('c'\)"):
            xr.open_dataset(path, engine="b2nd")
        ds = xr.open_dataset(path, engine="b2nd", drop_variables="c")
        assert ds["i"].values.tolist() == [1, 3]
    elif kind.startswith(("vl", "dictionary")):
        ds = xr.open_dataset(path, engine="b2nd")
        assert ds["c"].values.tolist() == table_values(path)


def test_a_table_inside_a_tree_is_one_node(tmp_path):
    path = str(tmp_path / "nest.b2z")
    Row = dataclasses.make_dataclass("Row", [("a", int, blosc2.field(blosc2.int64()))])
    with blosc2.TreeStore(path, mode="w") as store:
        store["/x"] = np.arange(3)
        store["/grp/tbl"] = blosc2.CTable(Row, new_data=[(1,), (2,), (3,)])
    tree = xr.open_datatree(path, engine="b2nd")
    assert sorted(g.path for g in tree.subtree) == ["/", "/grp", "/grp/tbl"]
    assert tree["/grp/tbl"]["a"].values.tolist() == [1, 2, 3]
    ds = xr.open_dataset(path, engine="b2nd", group="grp/tbl")
    assert list(ds.data_vars) == ["a"] and ds.sizes == {"row": 3}
    with b2store.open_table(path, group="/grp/tbl") as t:
        assert t.read("a").tolist() == [1, 2, 3]


def test_valid_rows_that_are_not_bool_are_refused(mixed_b2d):
    blosc2.asarray(np.ones(300, "u1"), urlpath=mixed_b2d + "/_valid_rows.b2nd", mode="w")
    with pytest.raises(FormatError, match=r"CTable /_valid_rows: expected a 1-d bool array"):
        b2store.open_table(mixed_b2d)


def test_utf8_offsets_that_lie_are_refused(mixed_b2d):
    offsets = blosc2.open(mixed_b2d + "/_cols/u.b2nd")[:]
    offsets[10] = offsets[-1] + 100
    blosc2.asarray(offsets, urlpath=mixed_b2d + "/_cols/u.b2nd", mode="w")
    with b2store.open_table(mixed_b2d) as t:
        with pytest.raises(FormatError, match="CTable column 'u' offsets: expected increasing"):
            t.read("u")
        assert len(t.read("u", 20, 30)) == 10  # rows past the lie are read


def test_a_schema_that_is_not_json_is_refused(mixed_b2d):
    meta = blosc2.open(mixed_b2d + "/_meta.b2f", mode="a")
    meta.vlmeta["schema"] = "{not json"
    with pytest.raises(FormatError, match="_meta schema: expected a JSON text, found invalid"):
        b2store.open_table(mixed_b2d)


def test_a_table_dataset_pickles_for_dask_workers(tables):
    import pickle

    path = tables[1]["mixed", ".b2z"]
    ds = xr.open_dataset(path, engine="b2nd", chunks={"row": 100})
    again = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(again["m"].values, ds["m"].values)
    assert np.isnan(again["m"].values).sum() == _reference(path)["m"].isna().sum()


def test_dictionary_codes_out_of_range_are_refused(tmp_path):
    path = str(tmp_path / "d.b2d")
    Row = dataclasses.make_dataclass(
        "Row", [("c", str, blosc2.field(blosc2.dictionary(nullable=True)))]
    )
    t = blosc2.CTable(Row, urlpath=path, mode="w")
    t.extend([("x",), (None,), ("y",)])
    t.close()
    with b2store.open_table(path) as table:
        assert table.read("c").tolist() == ["x", None, "y"]
    blosc2.asarray(np.array([0, -1, 7], "i4"), urlpath=path + "/_cols/c.b2nd", mode="w")
    with b2store.open_table(path) as table:
        with pytest.raises(FormatError, match="CTable column 'c' code: expected one of its 2"):
            table.read("c")
    with pytest.raises(UnsupportedError, match="append to a CTable column 'c' of kind"):
        b2store.to_table({"c": np.array(["z"], dtype=object)}, path, mode="a")
