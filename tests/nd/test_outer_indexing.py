"""Orthogonal (outer) indexing, ``arr.oindex[...]``: each index array along its own axis, read
and written, against NumPy's ``np.ix_`` of the same indices; reads decode no chunk between
the indices, and hold little besides their result."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import b2store
from b2store.nd.array import B2ndArray

DATA = np.arange(5 * 6 * 7, dtype="<i4").reshape(5, 6, 7)
GEOMETRY = {"chunks": (2, 4, 3), "blocks": (1, 2, 2)}  # many small chunks, partial at edges


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("outer") / "a.b2nd"
    b2store.asarray(DATA, path, **GEOMETRY)
    return path


def outer_numpy(data: np.ndarray, key: tuple):
    """``data`` indexed orthogonally by ``key``, through NumPy's ``np.ix_``: per axis the
    positions taken (an integer's one, dropped after), whatever the other axes take."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        at = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:at] + (slice(None),) * (data.ndim - len(key) + 1) + key[at + 1 :]
    key = key + (slice(None),) * (data.ndim - len(key))
    positions, drop = [], []
    for k, n in zip(key, data.shape):
        if isinstance(k, slice):
            positions.append(np.arange(n)[k])
            drop.append(slice(None))
        elif np.ndim(k) == 0:
            positions.append(np.array([int(k)]))
            drop.append(0)
        else:
            k = np.asarray(k)
            positions.append(np.flatnonzero(k) if k.dtype == bool else k.astype(np.intp))
            drop.append(slice(None))
    return positions, tuple(drop)


def read_numpy(data, key):
    positions, drop = outer_numpy(data, key)
    return data[np.ix_(*positions)][drop]


CASES = {
    "one list": [0, 4, 2],
    "repeats and negatives": (slice(None), [-1, 0, 0, -6]),
    "arrays apart, a slice between": ([4, 0, 2], slice(None, None, -2), [6, 0, 3]),
    "neighbouring arrays": (slice(1, 4), [5, 0, 1], [6, 0]),
    "three arrays": ([1, 1, 3], [5, 2], [0, 6, 6, 1]),
    "an integer between arrays": ([0, 4], 3, [1, 6]),
    "an integer beside an array": (-1, [1, 2], slice(None)),
    "integers only": (2, slice(1, None), -3),
    "NumPy integers": (np.int64(1), np.array([2, 3], np.uint8), np.array(4)),
    "a mask per axis": (np.array([True, False, True, False, True]), slice(None), DATA[0, 0] > 3),
    "an Ellipsis": (..., [6, 0]),
    "an Ellipsis between arrays": ([1, 2], ..., [0, 1]),
    "an empty list": (slice(None), []),
    "an empty array beside another": (np.array([], np.intp), [1, 2]),
    "negative steps": (slice(None, None, -1), [5, 1], slice(6, 0, -3)),
}


@pytest.mark.parametrize("key", CASES.values(), ids=CASES.keys())
def test_reads_as_numpy_ix(stored, key):
    got = b2store.open(stored).oindex[key]
    expect = read_numpy(DATA, key)
    assert got.shape == expect.shape and got.dtype == expect.dtype
    np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("key", CASES.values(), ids=CASES.keys())
def test_writes_as_numpy_ix(tmp_path, key):
    arr = b2store.asarray(DATA, tmp_path / "a.b2nd", **GEOMETRY)
    positions, drop = outer_numpy(DATA, key)
    shape = DATA[np.ix_(*positions)][drop].shape
    value = -np.arange(int(np.prod(shape)), dtype="<i4").reshape(shape) - 1
    arr.oindex[key] = value
    expect = DATA.copy()
    expect[np.ix_(*positions)] = np.expand_dims(value, [d for d, k in enumerate(drop) if k == 0])
    np.testing.assert_array_equal(b2store.open(tmp_path / "a.b2nd")[...], expect)


def test_a_value_broadcasts_to_the_outer_shape(tmp_path):
    arr = b2store.asarray(DATA, tmp_path / "a.b2nd", **GEOMETRY)
    arr.oindex[[0, 4], 2, [6, 1, 3]] = np.array([7, 8, 9])  # (2, 3) from (3,)
    expect = DATA.copy()
    expect[np.ix_([0, 4], [2], [6, 1, 3])] = np.array([7, 8, 9])
    np.testing.assert_array_equal(arr[...], expect)


REFUSED = {
    "integer out of range": ((5,), IndexError, "index 5 is out of bounds for axis 0 with size 5"),
    "negative integer out of range": (
        (0, -7),
        IndexError,
        "index -7 is out of bounds for axis 1 with size 6",
    ),
    "index out of range": (
        ([0, 1], [6]),
        IndexError,
        "index 6 is out of bounds for axis 1 with size 6",
    ),
    "a 2-d index array": (
        (slice(None), [[0, 1]]),
        IndexError,
        "outer indexing takes 1-d index arrays, not a 2-d one (axis 1)",
    ),
    "too many indices": (
        (0, 0, 0, 0),
        IndexError,
        "too many indices for array: array is 3-dimensional, but 4 were indexed",
    ),
    "floats": (([0.5],), IndexError, "arrays used as indices must be of integer (or boolean) type"),
    "a mask of another length": (
        (np.array([True, False]),),
        IndexError,
        "boolean index did not match indexed array along axis 0; size of axis is 5 but size "
        "of corresponding boolean axis is 2",
    ),
    "None": (
        (None, 0),
        IndexError,
        "outer indexing takes integers, slices, 1-d integer arrays, boolean masks and one "
        "Ellipsis, not None (axis 0)",
    ),
    "two Ellipses": ((..., 0, ...), IndexError, "an index can only have a single ellipsis"),
}


@pytest.mark.parametrize("key, error, message", REFUSED.values(), ids=REFUSED.keys())
def test_what_it_cannot_take_is_refused(tmp_path, key, error, message):
    arr = b2store.asarray(DATA, tmp_path / "a.b2nd", **GEOMETRY)
    with pytest.raises(error) as info:
        arr.oindex[key]
    assert str(info.value).startswith(message)
    with pytest.raises(error) as info:
        arr.oindex[key] = 0
    assert str(info.value).startswith(message)
    np.testing.assert_array_equal(arr[...], DATA)  # nothing written


BIG = np.random.default_rng(36).integers(0, 1000, size=(120, 160)).astype("<i8")


@pytest.mark.parametrize(
    "rows, cols",
    [
        # a box (0..41 by 1..5) smaller than a chunk: NumPy's key a[rows[:, None], cols]
        # reads it whole, chunk row 1 too
        ([3, 41, 0], [5, 1]),
        ([3, 119, 0, 41], [150, 5, 21]),
    ],
)
def test_reads_no_chunk_between_its_indices(tmp_path, monkeypatch, rows, cols):
    arr = b2store.asarray(BIG, tmp_path / "big.b2nd", chunks=(20, 20), blocks=(5, 5))
    rows, cols = np.array(rows), np.array(cols)
    boxes = []
    original = B2ndArray._read_state

    def read_state(self, dims, out, scratch, st):
        boxes.append(dims)
        return original(self, dims, out, scratch, st)

    monkeypatch.setattr(B2ndArray, "_read_state", read_state)
    np.testing.assert_array_equal(arr.oindex[rows, cols], BIG[np.ix_(rows, cols)])
    chunks = [
        (r, c)
        for dims in boxes
        for r in range(dims[0][0] // 20, dims[0][-1] // 20 + 1)
        for c in range(dims[1][0] // 20, dims[1][-1] // 20 + 1)
    ]
    # each chunk an index falls in decoded once, and no other
    assert sorted(chunks) == sorted({(r // 20, c // 20) for r in rows for c in cols})


def test_holds_little_besides_its_result(tmp_path):
    grid = (np.arange(400 * 300) % 1001 / 8).astype("<f4").reshape(400, 300)
    arr = b2store.asarray(grid, tmp_path / "g.b2nd", chunks=(50, 60), blocks=(25, 30))
    rng = np.random.default_rng(36)
    key = (rng.integers(0, 400, 200), slice(None, None, -1))
    chunk = int(np.prod(arr.chunks)) * grid.itemsize
    tracemalloc.start()
    try:
        got = arr.oindex[key]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(got, read_numpy(grid, key))
    # tiles of at most the result's size (or a chunk's), a chunk of scratch, the bytes read
    held = max(got.nbytes, chunk) + key[0].nbytes + 2 * chunk + arr.cbytes
    assert peak - got.nbytes <= held, (peak - got.nbytes, got.nbytes)


def _parts(n: int):
    return st.one_of(
        st.integers(-n, n - 1),
        st.builds(
            slice,
            st.integers(-n, n) | st.none(),
            st.integers(-n, n) | st.none(),
            st.sampled_from([None, 1, 2, -1, -3]),
        ),
        st.lists(st.integers(-n, n - 1), max_size=6),
        st.lists(st.booleans(), min_size=n, max_size=n).map(np.array),
    )


@settings(max_examples=60, deadline=None)
@given(key=st.tuples(*(_parts(n) for n in DATA.shape)))
def test_any_outer_key_reads_and_writes_as_numpy_ix(tmp_path_factory, key):
    path = tmp_path_factory.mktemp("any") / "a.b2nd"
    arr = b2store.asarray(DATA, path, **GEOMETRY)
    np.testing.assert_array_equal(arr.oindex[key], read_numpy(DATA, key))
    positions, drop = outer_numpy(DATA, key)
    shape = DATA[np.ix_(*positions)][drop].shape
    value = np.arange(int(np.prod(shape)), dtype="<i4").reshape(shape) + 1000
    arr.oindex[key] = value
    expect = DATA.copy()
    expect[np.ix_(*positions)] = np.expand_dims(value, [d for d, k in enumerate(drop) if k == 0])
    np.testing.assert_array_equal(arr[...], expect)
