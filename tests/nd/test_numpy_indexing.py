"""NumPy's advanced indexing (integer arrays, lists, boolean masks, mixed with slices,
integers, ``None``, bool scalars and ``...``) on B2ndArray, read and written, against NumPy
on the same data; reads decode only the chunks the selection touches."""

import itertools
import tracemalloc
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import b2store
from b2store.frame import sources
from b2store.nd import fancy
from b2store.nd.array import B2ndArray

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 reads what is written here")

DATA = np.arange(5 * 6 * 7, dtype="<i4").reshape(5, 6, 7)
GEOMETRY = {"chunks": (2, 4, 3), "blocks": (1, 2, 2)}  # many small chunks, partial at edges


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("fancy") / "a.b2nd"
    b2store.asarray(DATA, path, **GEOMETRY)
    return b2store.open(path)


CASES = {
    "list": [0, 4, 2],
    "list with repeats and negatives": [-1, 0, 0, -5],
    "int array": np.array([3, 1]),
    "2-d int array": np.array([[0, 1], [4, 2]]),
    "empty list": [],
    "array on axis 1": (slice(None), np.array([5, 0, 3])),
    "array on the last axis": (..., [6, 0]),
    "two arrays broadcast": (np.array([[0], [4]]), slice(None), np.array([1, 6, 2])),
    "adjacent arrays in place": (slice(1, 4), [0, 5], [6, 0]),
    "arrays apart go first": ([0, 4], slice(None, None, -2), [6, 0]),
    "integer apart from array": (0, slice(None), [1, 2]),
    "integer beside array": (slice(None), 2, [1, 2]),
    "negative step and array": (slice(None, None, -1), [5, 1], slice(6, 0, -3)),
    "newaxis and array": (None, [1, 2], None, 3),
    "bool scalar and array": (True, [1, 2], 0),
    "false and array": (False, [1]),
    "false beside arrays": (slice(None), False, [[1], [2]]),
    "tuple in tuple": ((0, 1),),
    "full-shape mask": DATA % 3 == 0,
    "mask of the first two axes": DATA[:, :, 0] % 4 == 1,
    "per-axis mask": (slice(None), np.array([True, False, True, True, False, True])),
    "mask and array": (np.array([True, False, True, False, True]), slice(None), [6, 0, 3]),
    "mask and integer": (2, DATA[0] % 2 == 0),
    "empty mask": np.zeros(5, bool),
    "ellipsis and mask": (..., np.arange(7) > 4),
    # An Ellipsis between index arrays (or an integer) separates them even where it stands
    # for no axis: NumPy moves their dimensions first (read (5, 3) where NumPy gives (3, 5)).
    "empty ellipsis between array and integer": (slice(None), np.array([0, 0, 0]), ..., 0),
    "empty ellipsis between integer and array": (0, slice(None), ..., [1, 2]),
    "ellipsis between arrays": (np.array([1, 2]), ..., np.array([0, 1])),
    # NumPy checks no index where the arrays broadcast to no point (a False among them).
    "out of range beside false": (np.array([[0], [5]]), False),
    "out of range broadcast to nothing": (np.array([9]), np.zeros((0, 1), np.intp)),
    "indices from both ends": (slice(None), [-1, 0, -6, 5]),
    "indices from the end only": (slice(None), slice(None), [-1, -3]),
}


@pytest.mark.parametrize("key", CASES.values(), ids=CASES.keys())
def test_reads_as_numpy(stored, key):
    expected = DATA[key]
    got = stored[key]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


REFUSED = {
    "out of range": ([0, 5], "index 5 is out of bounds for axis 0 with size 5"),
    "negative out of range": ((0, [-7]), "index -7 is out of bounds for axis 1 with size 6"),
    "wrong mask length": (np.ones(4, bool), "boolean index did not match"),
    "wrong mask shape": (np.ones((5, 5), bool), "boolean index did not match"),
    "arrays that do not broadcast": (([0, 1], [0, 1, 2]), "could not be broadcast"),
    "float array": (np.array([1.0]), "integer .or boolean. type"),
    "too many indices": (([0], [0], [0], [0]), "too many indices"),
    "out of range beside an empty slice": (
        ([5], slice(0, 0)),
        "index 5 is out of bounds for axis 0 with size 5",
    ),
    "out of range in a broadcast array": (
        (np.array([[0], [1]]), slice(None), np.array([[6, 7]])),
        "index 7 is out of bounds for axis 2 with size 7",
    ),
    "out of range, and arrays that do not broadcast": (([5, 0], [0, 1, 2]), "could not be"),
    "a float among index arrays": (([0], np.array([0.5])), "integer .or boolean. type"),
}


@pytest.mark.parametrize("key, message", REFUSED.values(), ids=REFUSED.keys())
def test_what_numpy_refuses_is_refused_the_same(stored, key, message):
    with pytest.raises(IndexError, match=message):
        DATA[key]
    with pytest.raises(IndexError, match=message):
        stored[key]


# --- random keys ------------------------------------------------------------------------

_SOMETIMES = [False] * 7 + [True]


@st.composite
def advanced_keys(draw):
    """A key with at least one index array or mask among slices (negative steps, empty ones)
    and integers, taking all of DATA's axes or fewer (or one too many); with an Ellipsis
    (standing for no axis as often as for some, anywhere, between index arrays too), and
    np.newaxis and bool scalars among the parts: what moves NumPy's broadcast dimensions."""
    ellipsis = draw(st.sampled_from([True, True, False]))
    # (All of the axes taken, most often: an Ellipsis then stands for none.)
    taking = draw(st.sampled_from([3, 3, 3, 3, 2, 1] if ellipsis else [3, 3, 2, 1, 4]))
    parts, axis = [], 0
    while axis < taking:
        n = DATA.shape[min(axis, 2)]
        kind = draw(st.sampled_from(["slice", "slice", "int", "array", "array", "list", "mask"]))
        if kind == "slice":
            bound = st.none() | st.integers(-n - 1, n + 1)
            parts.append(slice(draw(bound), draw(bound), draw(st.none() | st.sampled_from(
                [1, 2, 3, -1, -2, -3]))))  # fmt: skip
        elif kind == "int":
            parts.append(draw(st.integers(-n, n - 1)))
        elif kind in ("array", "list"):
            shape = draw(st.sampled_from([(3,), (1,), (2, 1), (0,), (2, 3), (1, 3)]))
            high = n if draw(st.sampled_from(_SOMETIMES)) else n - 1  # (out of range, at times)
            values = draw(st.lists(st.integers(-n, high), min_size=6, max_size=6))
            index = np.array(values[: int(np.prod(shape))], np.intp).reshape(shape)
            parts.append(index.tolist() if kind == "list" and index.ndim == 1 else index)
        else:
            ndim = draw(st.integers(1, min(2, max(1, taking - axis))))
            shape = DATA.shape[min(axis, 2) : min(axis, 2) + ndim] or (n,)
            bits = draw(st.lists(st.booleans(), min_size=42, max_size=42))
            parts.append(np.array(bits[: int(np.prod(shape))]).reshape(shape))
            axis += len(shape) - 1
        axis += 1
    if not any(isinstance(k, (np.ndarray, list)) for k in parts):
        parts[draw(st.integers(0, len(parts) - 1))] = np.array([0, -1])
    # An Ellipsis or a None between two advanced parts (arrays, masks, integers) is where
    # NumPy's placement of the broadcast dimensions turns: drawn there more often.
    if ellipsis:
        parts.insert(draw(st.sampled_from(_places(parts))), Ellipsis)
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        extra = draw(st.sampled_from([None, None, True, False, np.True_]))
        parts.insert(draw(st.sampled_from(_places(parts))), extra)
    return tuple(parts)


def _places(parts) -> list[int]:
    """Where a part may go into ``parts``: anywhere, and thrice as often between two
    advanced parts."""
    advanced = [not isinstance(k, slice) and k is not Ellipsis and k is not None for k in parts]
    between = [i for i in range(1, len(parts)) if advanced[i - 1] and advanced[i]]
    return list(range(len(parts) + 1)) + between * 3


def _numpy(op):
    try:
        return op(), None
    except IndexError as exc:
        return None, exc


# How a read goes (see b2store.nd.fancy): its box at once; in tiles of a chunk each (where
# the key's axes cut so, point by point otherwise); or point by point.
READ_WAYS = {
    "box": (B2ndArray, "_fancy_budget", lambda self, plan: 1 << 62),
    "tiles": (B2ndArray, "_fancy_budget", lambda self, plan: 0),
    "points": (fancy.FancyPlan, "tiles", lambda self, itemsize, chunks, budget: None),
}


def _read_as_numpy(arr, key, way) -> None:
    expected, refused = _numpy(lambda: DATA[key])
    with mock.patch.object(*READ_WAYS[way]):
        if refused is not None:
            with pytest.raises(IndexError) as err:
                arr[key]
            assert str(err.value) == str(refused), key
            return
        got = arr[key]
    assert got.shape == expected.shape and got.dtype == expected.dtype, key
    np.testing.assert_array_equal(got, expected)


def _arranged(key: tuple):
    """``key``; then with its Ellipsis (or one) at each other place, and the same again with
    its first part a reversed slice: where an Ellipsis stands for no axis between index
    arrays (or integers) after a slice, NumPy moves their dimensions first."""
    yield key
    parts = [k for k in key if k is not Ellipsis]
    firsts = [parts]
    if parts and isinstance(parts[0], (int, list, np.ndarray)):
        firsts.append([slice(None, None, -1), *parts[1:]])
    for first in firsts:
        for at in range(len(first) + 1):
            moved = (*first[:at], Ellipsis, *first[at:])
            if len(moved) != len(key) or any(a is not b for a, b in zip(moved, key)):
                yield moved


def _reads_as_numpy(arr, key) -> None:
    for way in READ_WAYS:
        for moved in _arranged(key):
            _read_as_numpy(arr, moved, way)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=advanced_keys())
def test_any_advanced_key_reads_as_numpy_or_raises(key):
    _reads_as_numpy(_STORED[0], key)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=advanced_keys())
def test_many_advanced_keys_read_as_numpy_or_raise(key):
    _reads_as_numpy(_STORED[0], key)


def _arrangements():
    """Every key of up to four parts among a reversed slice, an integer, an index array,
    None and an Ellipsis, with an index array and at most three of DATA's axes taken."""
    taking = ("slice", "int", "array")
    for n in range(1, 5):
        for kinds in itertools.product((*taking, "none", "ellipsis"), repeat=n):
            if "array" in kinds and kinds.count("ellipsis") < 2:
                if sum(k in taking for k in kinds) <= 3:
                    yield kinds


_PARTS = {"slice": slice(None, None, -2), "int": -1, "none": None, "ellipsis": Ellipsis}


@pytest.mark.parametrize("way", sorted(READ_WAYS))
def test_every_arrangement_of_a_key_reads_as_numpy(stored, way):
    # Random keys may miss an arrangement (an Ellipsis standing for no axis between an index
    # array and an integer, dropped from the key, went unseen once): every one of them,
    # each way a read goes.
    keys = [
        tuple(np.array([-1, 1]) if k == "array" else _PARTS[k] for k in kinds)
        for kinds in _arrangements()
    ]
    assert len(keys) == 326
    for key in keys:
        _read_as_numpy(stored, key, way)


def _write_as_numpy(path, key, value) -> None:
    b2store.asarray(DATA, path, **GEOMETRY)
    expected = DATA.copy()
    _, refused = _numpy(lambda: expected.__setitem__(key, value))
    arr = b2store.open(path, mode="a")
    if refused is not None:
        with pytest.raises(IndexError) as err:
            arr[key] = value
        assert str(err.value) == str(refused), key
    else:
        arr[key] = value
    np.testing.assert_array_equal(b2store.open(path)[...], expected)
    np.testing.assert_array_equal(blosc2.open(str(path))[...], expected)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=advanced_keys(), value=st.integers(-100, -1))
def test_any_advanced_key_writes_as_numpy_or_raises(tmp_path_factory, key, value):
    _write_as_numpy(tmp_path_factory.mktemp("w") / "a.b2nd", key, value)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=advanced_keys(), value=st.integers(-100, -1))
def test_many_advanced_keys_write_as_numpy_or_raise(tmp_path_factory, key, value):
    _write_as_numpy(tmp_path_factory.mktemp("w") / "a.b2nd", key, value)


# --- writes -------------------------------------------------------------------------------


@pytest.mark.parametrize("key", CASES.values(), ids=CASES.keys())
def test_writes_as_numpy_and_python_blosc2_reads_it(tmp_path, key):
    path = tmp_path / "w.b2nd"
    b2store.asarray(DATA, path, **GEOMETRY)
    expected = DATA.copy()
    value = -np.arange(expected[key].size, dtype="<i4").reshape(expected[key].shape) - 1
    expected[key] = value
    b2store.open(path, mode="a")[key] = value
    np.testing.assert_array_equal(b2store.open(path)[...], expected)
    np.testing.assert_array_equal(blosc2.open(str(path))[...], expected)


@pytest.mark.parametrize(
    "key",
    [np.array([0, 3, -1]), np.array([True, False, True, False, True]), DATA % 5 == 0],
    ids=["int array", "mask", "full-shape mask"],
)
def test_writes_what_python_blosc2_writes(tmp_path, key):
    # python-blosc2 4.14 writes a single index array or mask (a tuple of them fails there).
    ours, theirs = tmp_path / "ours.b2nd", tmp_path / "theirs.b2nd"
    b2store.asarray(DATA, ours, **GEOMETRY)
    blosc2.asarray(DATA, urlpath=str(theirs), mode="w", **GEOMETRY)
    value = -np.arange(DATA[key].size, dtype="<i4").reshape(DATA[key].shape) - 1
    b2store.open(ours, mode="a")[key] = value
    blosc2.open(str(theirs), mode="a")[key] = value
    np.testing.assert_array_equal(b2store.open(ours)[...], blosc2.open(str(theirs))[...])
    np.testing.assert_array_equal(blosc2.open(str(ours))[...], b2store.open(theirs)[...])


def test_a_repeated_point_keeps_the_last_value_as_numpy(tmp_path):
    path = tmp_path / "r.b2nd"
    b2store.asarray(DATA, path, **GEOMETRY)
    expected = DATA.copy()
    expected[[1, 1, 1], [2, 2, 2], 3] = [7, 8, 9]
    b2store.open(path, mode="a")[[1, 1, 1], [2, 2, 2], 3] = [7, 8, 9]
    np.testing.assert_array_equal(b2store.open(path)[...], expected)


def test_a_value_that_does_not_broadcast_writes_nothing(tmp_path):
    path = tmp_path / "b.b2nd"
    b2store.asarray(DATA, path, **GEOMETRY)
    with pytest.raises(ValueError, match="broadcast"):
        b2store.open(path, mode="a")[[0, 1]] = np.ones(4)
    np.testing.assert_array_equal(b2store.open(path)[...], DATA)


# --- python-blosc2's own getitem cases (its tests/ndarray/test_getitem.py), on its files ----


def _ints(n, size):
    return np.random.default_rng(12345).integers(0, n, size=size)


def _bools(shape):
    return np.random.default_rng(12345).choice([True, False], size=shape)


PYBLOSC2_CASES = [
    ((5,), (2,), (1,), _ints(5, 2)),
    ((15,), (4,), (2,), _ints(15, 3)),
    ((501,), (22,), (11,), _ints(501, 221)),
    ((501,), (22,), (11,), list(_ints(501, 221))),
    ((5,), (2,), (1,), _bools((5,))),
    ((10, 10), (5, 5), (2, 2), _bools((10, 10))),
    ((8, 8, 8), (4, 4, 4), (2, 2, 2), _bools((8, 8, 8))),
    ((6, 5, 4, 3), (3, 2, 2, 1), (1, 1, 1, 1), _bools((6, 5, 4, 3))),
    ((6, 5, 4, 3), (3, 2, 2, 1), (1, 1, 1, 1), _bools((6, 5))),
    ((6, 5, 4, 3), (3, 2, 2, 1), (1, 1, 1, 1), True),
    ((6, 5, 4, 3), (3, 2, 2, 1), (1, 1, 1, 1), False),
    ((1000,), (128,), (64,), np.array([999, 998, 997, 997, 500, 129, 128, 0, 33, 31, 31])),
    ((20,), (8,), (4,), np.array([-1, -5, 0, 3])),
]


@pytest.mark.parametrize("shape, chunks, blocks, key", PYBLOSC2_CASES)
def test_python_blosc2_getitem_cases(tmp_path, shape, chunks, blocks, key):
    data = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    path = tmp_path / "theirs.b2nd"
    blosc2.asarray(data, chunks=chunks, blocks=blocks, urlpath=str(path), mode="w")
    with b2store.open(path) as arr:
        got = arr[key]
    assert got.shape == data[key].shape and got.dtype == data[key].dtype
    np.testing.assert_array_equal(got, data[key])


def test_a_structured_dtype_by_index_arrays(tmp_path):
    data = np.empty((100,), dtype=[("a", np.int32), ("b", np.int32)])
    data["a"], data["b"] = np.arange(1, 101), np.arange(200, 100, -1)
    path = tmp_path / "struct.b2nd"
    blosc2.asarray(data, chunks=(44,), blocks=(33,), urlpath=str(path), mode="w")
    with b2store.open(path) as arr:
        for key in [np.arange(2, 100), np.arange(99, 1, -1), np.array([5, 1, 5, 99, 0, 44])]:
            np.testing.assert_array_equal(arr[key], data[key])


# --- what is read -------------------------------------------------------------------------


BIG = np.random.default_rng(7).integers(0, 1000, size=(120, 160)).astype("<i8")


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.b2nd"
    b2store.asarray(BIG, path, chunks=(20, 20), blocks=(5, 5))  # 6 x 8 = 48 chunks
    return path


@pytest.fixture
def spy(monkeypatch):
    """The chunks read, each with the box of it decoded (per axis the range of items)."""
    seen = []
    original = B2ndArray._read_chunk

    def read_chunk(self, nchunk, parts, out, scratch, state=None):
        seen.append((nchunk, [local for local, _ in parts]))
        return original(self, nchunk, parts, out, scratch, state)

    monkeypatch.setattr(B2ndArray, "_read_chunk", read_chunk)
    return seen


def test_an_index_array_reads_only_the_chunks_it_touches(big, spy):
    arr = b2store.open(big)
    rows = np.arange(0, 120, 7)
    key = (rows, rows)  # a diagonal: 6 of the 48 chunks
    np.testing.assert_array_equal(arr[key], BIG[key])
    touched = {(r // 20) * 8 + c // 20 for r, c in zip(rows, rows)}
    assert sorted(n for n, _ in spy) == sorted(touched)
    for nchunk, box in spy:  # the bounding box of the chunk's points, no more
        inside = [(r % 20, c % 20) for r, c in zip(rows, rows) if (r // 20) * 8 + c // 20 == nchunk]
        assert box[0] == range(min(r for r, _ in inside), max(r for r, _ in inside) + 1)
        assert box[1] == range(min(c for _, c in inside), max(c for _, c in inside) + 1)


def test_a_sparse_mask_reads_only_the_chunks_it_touches(big, spy):
    arr = b2store.open(big)
    mask = np.zeros(BIG.shape, bool)
    mask[3, 5] = mask[45, 150] = mask[119, 0] = mask[46, 151] = True
    np.testing.assert_array_equal(arr[mask], BIG[mask])
    assert sorted(n for n, _ in spy) == [0, 2 * 8 + 7, 5 * 8 + 0]
    assert [len(r) for r in dict(spy)[2 * 8 + 7]] == [2, 2]


def test_a_sparse_selection_reads_a_small_part_of_the_file(big, monkeypatch):
    arr = b2store.open(big)
    read = []
    original = sources.FileSource.read

    def counting(self, offset, size):
        read.append(size)
        return original(self, offset, size)

    monkeypatch.setattr(sources.FileSource, "read", counting)
    key = ([5, 60, 110], [7, 90, 150])
    np.testing.assert_array_equal(arr[key], BIG[key])
    # Three points in three chunks: a few blocks of them, not the array.
    assert 0 < sum(read) < arr.cbytes / 8


_RNG = np.random.default_rng(35)
_SMALL = _RNG.random((3, 4, 5, 6)).astype("<f4")  # (one chunk)
_GRID = (np.arange(400 * 300) % 1001 / 8).astype("<f4").reshape(400, 300)
_GRID_CHUNKS = {"chunks": (50, 60), "blocks": (25, 30)}  # 12 kB chunks
LARGE_KEYS = {
    # Issue 35's key, smaller: many indices into a small array (a result 75x the array's).
    "one index array into a small array": ("small", (_RNG.integers(-3, 3, 20_000),)),
    "half the items by a mask": ("grid", (_RNG.random(_GRID.shape) < 0.5,)),
    "an outer product": ("grid", (_RNG.integers(0, 400, 200)[:, None], _RNG.integers(0, 300, 150))),
    "an index array after an Ellipsis": ("grid", (..., _RNG.integers(0, 300, 600))),
    "rows by a mask, reversed columns": ("grid", (_RNG.random(400) < 0.3, slice(None, None, -1))),
}


@pytest.mark.parametrize("which, key", LARGE_KEYS.values(), ids=LARGE_KEYS.keys())
def test_a_key_holds_little_besides_its_result(tmp_path, which, key):
    # Before, a read held the result twice (a working copy, then NumPy's indexing of it),
    # and NumPy's check of the key a stand-in result of a byte per item; a mask's read held
    # a few integers per item. Now: its box (or tiles of it) of at most the result's size
    # (or a chunk's), and copies of the index arrays.
    data, geometry = (_SMALL, {}) if which == "small" else (_GRID, _GRID_CHUNKS)
    arr = b2store.asarray(data, tmp_path / "a.b2nd", **geometry)
    chunk = int(np.prod(arr.chunks)) * data.itemsize
    indices = sum(k.nbytes for k in key if isinstance(k, np.ndarray))
    tracemalloc.start()
    try:
        got = arr[key]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(got, data[key])
    # (Besides: the scratch of a chunk and the stored bytes read, as any read holds them.)
    held = max(got.nbytes, chunk) + indices + 2 * chunk + arr.cbytes
    assert peak - got.nbytes <= held, (peak - got.nbytes, got.nbytes)


def test_tiles_decode_each_chunk_once_and_only_those_touched(big, monkeypatch):
    arr = b2store.open(big)
    rows, cols = np.array([3, 70, 0, 119, 65]), np.array([150, 21, 39, 151])
    key = (rows[:, None], cols)  # an outer product: 3 chunk rows by 2 chunk columns
    boxes = []
    original = B2ndArray._read_state

    def read_state(self, dims, out, scratch, st):
        boxes.append(dims)
        return original(self, dims, out, scratch, st)

    monkeypatch.setattr(B2ndArray, "_read_state", read_state)
    np.testing.assert_array_equal(arr[key], BIG[key])
    chunks = [
        (r, c)
        for dims in boxes
        for r in range(dims[0][0] // 20, dims[0][-1] // 20 + 1)
        for c in range(dims[1][0] // 20, dims[1][-1] // 20 + 1)
    ]
    assert sorted(chunks) == sorted({(r // 20, c // 20) for r in rows for c in cols})
    assert len(boxes) > 1  # (the box of the whole key, 120 x 140, would exceed the result)


@pytest.mark.parametrize(
    "key, far",
    [
        ((None, np.arange(10**4) % 200, ..., np.arange(10**4) % 400, None), True),
        ((np.arange(10**4) % 200, 7, np.arange(10**4) % 400), False),  # (a point an item)
        ((np.arange(10**4) % 200,), False),  # (one array: tiles cut it, if need be)
        ((np.arange(200)[:, None], slice(None), np.arange(400)), False),  # (an outer product)
        ((slice(0, 20), np.arange(10**4) % 300, np.arange(10**4) % 400), False),  # (9 MiB)
    ],
)
def test_points_far_apart_in_a_large_box_read_point_by_point(key, far):
    # NumPy's gather of 10**4 points of 300 items each from a 92 MiB box fetches every item
    # from its own cache line; chunk by chunk, the same gather reads from a box in cache.
    assert fancy.plan(key, (200, 300, 400)).far_apart(4) is far


# --- the module's array, for @given tests (which cannot take function-scoped fixtures) ----

_STORED = []


@pytest.fixture(autouse=True, scope="module")
def _stored_for_hypothesis(stored):
    _STORED[:] = [stored]
    yield
    _STORED.clear()
