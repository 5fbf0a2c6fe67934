"""BatchArray, ListArray and ObjectArray frames written by python-blosc2 4.14 (with the
parameter lists of its own tests: tests/test_batch_array.py, test_list_array.py,
test_objectarray.py) read by b2store as python-blosc2 reads them: contiguous and sparse
frames, in memory, and from a URL; payloads python-blosc2 refuses by default refused here."""

from __future__ import annotations

import numpy as np
import pytest
from http_server import serve_directory

import b2store
from b2store.containers import BatchArray, ListArray, ObjectArray, UnsafePayloadError
from b2store.errors import UnsupportedError

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the files under test")

# python-blosc2's tests/test_batch_array.py BATCHES
BATCHES = [
    [b"bytes\x00payload", "plain text", 42],
    [{"nested": [1, 2]}, None, {"tail": True}],
    [(1, 2, "three"), 3.5, True],
]
# python-blosc2's tests/test_objectarray.py VALUES, and the ext types its msgpack writes
VALUES = [
    b"bytes\x00payload",
    "plain text",
    42,
    3.5,
    True,
    None,
    [1, "two", b"three"],
    (1, 2, "three"),
    {"nested": [1, 2], "tuple": (3, 4)},
    1 + 2j,
    {1, "a", (2, 3)},
    np.arange(6, dtype=np.int32).reshape(2, 3),
    np.array([(1, 2.5)], dtype=[("a", "<i4"), ("b", "<f8")]),
    [],
    (),
]
# python-blosc2's tests' cparams variants (test_*_use_dict_and_non_zstd), and the defaults
CPARAMS = [
    None,
    {"codec": blosc2.Codec.LZ4, "clevel": 5},
    {"codec": blosc2.Codec.LZ4HC, "clevel": 1, "use_dict": True},
    {"codec": blosc2.Codec.ZSTD, "clevel": 0},
    {"codec": blosc2.Codec.ZSTD, "clevel": 5, "use_dict": False},
]
# python-blosc2's tests/test_list_array.py ROWS
ROWS = [[1, 2, 3], [], [4], None, [5, 6]]


def _same(a, b) -> bool:
    """Equal as python-blosc2's tests compare, with NumPy arrays compared by value and type."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
        )
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _storage(path, contiguous):
    return blosc2.Storage(contiguous=contiguous, urlpath=str(path), mode="w")


@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("cparams", CPARAMS)
@pytest.mark.parametrize("items_per_block", [None, 1, 2])
def test_batch_array_reads_as_pyblosc2(tmp_path, contiguous, cparams, items_per_block):
    path = tmp_path / "b.b2b"
    kwargs = {"cparams": cparams} if cparams else {}
    ba = blosc2.BatchArray(
        storage=_storage(path, contiguous), items_per_block=items_per_block, **kwargs
    )
    ba.extend(BATCHES)
    ba.append([1, 2])
    ba.append(VALUES)
    expected = [batch[:] for batch in blosc2.open(str(path))]
    with b2store.open(path) as got:
        assert isinstance(got, BatchArray)
        assert len(got) == len(expected) == 5
        assert _same(list(got), expected)
        assert _same(got[1:4], expected[1:4])
        assert _same(got[-1], expected[-1])
        flat = [item for batch in expected for item in batch]
        assert len(got.items) == len(flat)
        assert _same([got.items[k] for k in range(len(flat))], flat)
        assert _same(got.items[-3:], flat[-3:])
        assert got.batch_lengths() == [3, 3, 3, 2, len(VALUES)]
        with pytest.raises(IndexError, match="BatchArray index 5 out of range"):
            got[5]


@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("cparams", CPARAMS)
def test_object_array_reads_as_pyblosc2(tmp_path, contiguous, cparams):
    path = tmp_path / "o.b2frame"
    kwargs = {"cparams": cparams} if cparams else {}
    oa = blosc2.ObjectArray(storage=_storage(path, contiguous), **kwargs)
    oa.extend(VALUES)
    oa.append("x" * 100_000)  # several blocks in one chunk
    expected = list(blosc2.open(str(path)))
    with b2store.open(path) as got:
        assert isinstance(got, ObjectArray)
        assert len(got) == len(expected)
        assert _same(list(got), expected)
        assert _same(got[2:9:3], expected[2:9:3])
        assert _same(got[-4], expected[-4])


@pytest.mark.parametrize("storage", ["vl", "batch"])
@pytest.mark.parametrize(
    ("item_spec", "rows"),
    [
        ("int64", ROWS),
        ("string", [["a", "bé"], [], None, ["x" * 40]]),
        ("float64", [[1.5, float("inf")], None, [], [-0.0]]),
    ],
)
def test_list_array_reads_as_pyblosc2(tmp_path, storage, item_spec, rows):
    path = tmp_path / "l.b2frame"
    spec = getattr(blosc2, item_spec)()
    if item_spec == "string":
        spec = blosc2.string(max_length=64)
    la = blosc2.ListArray(
        item_spec=spec, nullable=True, storage=storage, batch_rows=2, urlpath=str(path), mode="w"
    )
    la.extend(rows * 3)
    la.flush()
    del la
    reference = blosc2.open(str(path))
    expected = reference[:]
    with b2store.open(path) as got:
        assert isinstance(got, ListArray)
        assert got.spec["backend"] == storage
        assert len(got) == len(expected) == len(rows) * 3
        assert got[:] == expected
        assert list(got) == expected
        assert got[-1] == expected[-1]
        assert got[[0, 5, 2]] == reference[[0, 5, 2]]
        mask = np.arange(len(expected)) % 2 == 0
        assert got[mask] == reference[mask]


def test_list_array_not_nullable_reads_as_pyblosc2(tmp_path):
    path = tmp_path / "l.b2frame"
    la = blosc2.ListArray(item_spec=blosc2.int32(), urlpath=str(path), mode="w", batch_rows=3)
    la.extend([[i] * i for i in range(10)])
    la.flush()
    del la
    with b2store.open(path) as got:
        assert got[:] == blosc2.open(str(path))[:]


def test_containers_from_memory_and_url(tmp_path):
    ba = blosc2.BatchArray(urlpath=str(tmp_path / "b.b2b"), mode="w", items_per_block=2)
    ba.extend(BATCHES)
    oa = blosc2.ObjectArray(urlpath=str(tmp_path / "o.b2frame"), mode="w")
    oa.extend(VALUES)
    with b2store.open(ba.to_cframe()) as got:
        assert _same(list(got), BATCHES)
    with serve_directory(tmp_path) as (url, _):
        with b2store.open(f"{url}/b.b2b") as got:
            assert isinstance(got, BatchArray)
            assert _same(got.items[4], BATCHES[1][1])
            assert _same(list(got), BATCHES)
        with b2store.open(f"{url}/o.b2frame") as got:
            assert _same(list(got), list(blosc2.open(str(tmp_path / "o.b2frame"))))


def _refused_values(tmp_path):
    """(value, the kind python-blosc2's safe mode names), each a value python-blosc2 writes."""
    a = blosc2.asarray(np.arange(5), urlpath=str(tmp_path / "a.b2nd"), mode="w")
    inner = blosc2.ObjectArray()
    inner.append("x")
    return [
        (blosc2.arange(6, dtype=np.int32), "embedded cframe"),
        (inner, "embedded cframe"),
        (blosc2.Ref.from_object(a), "ref"),
        (blosc2.lazyexpr("a + a", operands={"a": a}), "lazyexpr"),
    ]


def _c2array(monkeypatch):
    """A C2Array reference, made without a server as python-blosc2's tests make one."""
    c2array_module = pytest.importorskip("blosc2.c2array")

    def fake_info(*args, **kwargs):
        return {"schunk": {"cparams": dict(blosc2.cparams_dflts)}}

    monkeypatch.setattr(c2array_module, "info", fake_info)
    return blosc2.C2Array("@public/examples/ds-1d.b2nd", urlbase="https://cat2.cloud/demo/")


def test_refused_payloads_named_as_pyblosc2_names_them(tmp_path, monkeypatch):
    cases = [*_refused_values(tmp_path), (_c2array(monkeypatch), "c2array")]
    for k, (value, kind) in enumerate(cases):
        path = str(tmp_path / f"r{k}.b2frame")
        oa = blosc2.ObjectArray(urlpath=path, mode="w")
        oa.append("fine")
        oa.append({"nested": [value]})
        ba_path = str(tmp_path / f"r{k}.b2b")
        ba = blosc2.BatchArray(urlpath=ba_path, mode="w", items_per_block=1)
        ba.append(["fine", value])
        # python-blosc2 itself refuses them by default, with the same kind
        with pytest.raises(blosc2.UnsafeDeserializationError, match=kind):
            blosc2.open(path)[1]
        with b2store.open(path) as got:
            assert got[0] == "fine"
            with pytest.raises(
                UnsafePayloadError, match=f"ObjectArray item 1 holds a {kind},"
            ) as e:
                got[1]
            assert isinstance(e.value, UnsupportedError) and e.value.ident == kind
        with b2store.open(ba_path) as got:
            with pytest.raises(
                UnsafePayloadError, match=f"BatchArray batch 0 block 1 holds a {kind},"
            ):
                got[0]


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"batcharray": {"version": 2, "serializer": "msgpack", "items_per_block": 2}},
         "unsupported batcharray metalayer version 2"),
        ({"batcharray": {"version": 1, "serializer": "pickle", "items_per_block": 2}},
         "unsupported batcharray serializer 'pickle'"),
        ({"batcharray": {"version": 1, "serializer": "arrow", "items_per_block": 2}},
         r"unsupported BatchArray serializer 'arrow \(Arrow IPC payloads"),
        ({"batcharray": {"version": 1, "serializer": "msgpack", "items_per_block": -1}},
         "unsupported batcharray items_per_block -1"),
        ({"vlarray": {"version": 3, "serializer": "msgpack"}},
         "unsupported vlarray metalayer version 3"),
        ({"listarray": {"version": 1, "kind": "list", "backend": "tape", "serializer": "msgpack"},
          "vlarray": {"version": 1, "serializer": "msgpack"}},
         "unsupported listarray backend 'tape'"),
    ],
)  # fmt: skip
def test_unknown_versions_and_serializers_refused(tmp_path, meta, message):
    path = str(tmp_path / "x.b2frame")
    blosc2.SChunk(chunksize=-1, urlpath=path, mode="w", meta=meta)
    with pytest.raises(UnsupportedError, match=message):
        b2store.open(path)


def test_cli_info_names_the_container_and_verify_reads_it(tmp_path, capsys):
    from b2store.cli import main

    path = tmp_path / "b.b2b"
    ba = blosc2.BatchArray(urlpath=str(path), mode="w", items_per_block=2)
    ba.extend(BATCHES)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "python-blosc2 BatchArray of 3 (items of variable length)" in out
    assert "chunk format version 6" in out
    assert main(["verify", str(path)]) == 0
    assert "3 chunks checked, ok" in capsys.readouterr().out


def test_a_block_of_more_items_than_a_vlmeta_value_reads(tmp_path):
    # python-blosc2 fills a block to a byte budget: 300,000 ints make one block, more objects
    # than Limits.max_vlmeta_items (131,072) allows a vlmeta value; it was a LimitError
    path = tmp_path / "big.b2b"
    ba = blosc2.BatchArray(urlpath=str(path), mode="w")
    ba.append(list(range(300_000)))
    with b2store.open(path) as got:
        assert got[0] == blosc2.open(str(path))[0][:]
