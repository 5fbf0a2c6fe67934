"""Every kind of index key, read and written, against NumPy: the same result, or an error
(never a silent reinterpretation, such as a bool taken as the integer 0 or 1)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import b2store

DATA = np.arange(4 * 5 * 6, dtype="<i4").reshape(4, 5, 6)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("idx") / "a.b2nd"
    b2store.asarray(DATA, path, chunks=(3, 2, 4), blocks=(2, 2, 3))
    return b2store.open(path)


@pytest.mark.parametrize(
    "key, shape",
    [
        (True, (1, 4, 5, 6)),
        (False, (0, 4, 5, 6)),
        (np.True_, (1, 4, 5, 6)),
        (np.False_, (0, 4, 5, 6)),
        (np.array(True), (1, 4, 5, 6)),
        ((0, True), (1, 5, 6)),
        ((slice(None), 1, True), (4, 1, 6)),  # adjacent to the integer: its place
        ((0, slice(None), True), (1, 5, 6)),  # apart from the integer: in front
        ((..., False), (4, 5, 6, 0)),
        ((None, 1), (1, 5, 6)),
        ((1, None, ..., None), (1, 5, 6, 1)),
    ],
)
def test_bool_scalars_and_newaxis_are_numpys(stored, key, shape):
    # Before, a[True] was row 1 and a[False] row 0, and None was refused.
    got = stored[key]
    assert got.shape == shape == DATA[key].shape
    np.testing.assert_array_equal(got, DATA[key])


def test_a_false_key_reads_no_chunk(stored, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("a key selecting nothing read a chunk")

    monkeypatch.setattr(type(stored), "_read", fail)
    assert stored[False].shape == (0, 4, 5, 6)


@pytest.mark.parametrize(
    "key",
    [[0, 1], np.array([0, 2]), np.array([True, False, True, False]), ((0, 1),), (0, [1, 2])],
    ids=["list", "int array", "bool mask", "tuple in tuple", "list on axis 1"],
)
def test_advanced_indexing_is_numpys(stored, key):
    # Before, refused with UnsupportedError; tests/nd/test_numpy_indexing.py has the rest.
    np.testing.assert_array_equal(stored[key], DATA[key])


@pytest.mark.parametrize("key", [1.0, "a", np.float64(0), np.array(1.5), object()])
def test_what_numpy_refuses_is_an_index_error(stored, key):
    with pytest.raises(IndexError, match="valid indices|integer .or boolean. type"):
        DATA[key]
    with pytest.raises(IndexError, match="valid indices|integer .or boolean. type"):
        stored[key]


@pytest.mark.parametrize(
    "key", [4, -5, (0, 5), (..., 6), (None, 1, -6), (True, 0, slice(None), 9), (0, 6, 0)]
)
def test_an_integer_out_of_range_is_numpys_error_word_for_word(tmp_path, key):
    # Before, the message named no axis ("for axis with size 5"), where NumPy's does.
    arr = b2store.asarray(DATA, tmp_path / "a.b2nd", chunks=(3, 2, 4), blocks=(2, 2, 3))
    with pytest.raises(IndexError) as expected:
        DATA[key]
    with pytest.raises(IndexError) as got:
        arr[key]
    assert str(got.value) == str(expected.value)
    with pytest.raises(IndexError) as got:
        b2store.open(tmp_path / "a.b2nd", mode="a")[key] = 1
    assert str(got.value) == str(expected.value)


def test_setitem_with_bool_scalars(tmp_path):
    path = tmp_path / "w.b2nd"
    b2store.asarray(DATA, path, chunks=(3, 2, 4), blocks=(2, 2, 3))
    arr = b2store.open(path, mode="a")
    expected = DATA.copy()
    arr[False] = -1  # selects nothing: before, row 0 was overwritten
    np.testing.assert_array_equal(b2store.open(path)[...], expected)
    arr[1, True] = -2  # before: arr[1, 1]
    expected[1, True] = -2
    np.testing.assert_array_equal(b2store.open(path)[...], expected)
    arr[np.True_, 2, None] = np.arange(30).reshape(1, 1, 5, 6)
    expected[np.True_, 2, None] = np.arange(30).reshape(1, 1, 5, 6)
    np.testing.assert_array_equal(b2store.open(path)[...], expected)
    with pytest.raises(ValueError, match="broadcast"):
        arr[False] = np.arange(7)  # numpy checks the value even when nothing is selected


# --- the class: random keys of every kind -------------------------------------------------

SCALAR_KINDS = {
    "int": lambda n, d: d(st.integers(-n - 1, n)),
    "np.int": lambda n, d: np.int64(d(st.integers(-n, n - 1))),
    "0-d int": lambda n, d: np.array(d(st.integers(-n, n - 1))),
    "slice": lambda n, d: slice(
        d(st.none() | st.integers(-n - 2, n + 2)),
        d(st.none() | st.integers(-n - 2, n + 2)),
        d(st.none() | st.integers(-4, 4).filter(bool)),
    ),
    "ellipsis": lambda n, d: Ellipsis,
    "none": lambda n, d: None,
    "bool": lambda n, d: d(st.booleans()),
    "np.bool": lambda n, d: np.bool_(d(st.booleans())),
    "0-d bool": lambda n, d: np.array(d(st.booleans())),
    "float": lambda n, d: float(d(st.integers(0, n))),
    "str": lambda n, d: "0",
    "list": lambda n, d: [d(st.integers(0, max(n - 1, 0)))],
    "int array": lambda n, d: np.arange(min(n, 2)),
    "bool mask": lambda n, d: np.ones(n, bool),
}


@st.composite
def keys(draw):
    parts = draw(st.lists(st.sampled_from(sorted(SCALAR_KINDS)), min_size=0, max_size=5))
    key = tuple(SCALAR_KINDS[kind](DATA.shape[min(i, 2)], draw) for i, kind in enumerate(parts))
    return key[0] if len(key) == 1 and draw(st.booleans()) else key, parts


def _numpy(op):
    try:
        return op(), None
    except (IndexError, TypeError, ValueError) as exc:
        return None, exc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=keys())
def test_any_key_reads_as_numpy_or_raises(case):
    key, _ = case
    arr = _STORED[0]
    expected, refused = _numpy(lambda: DATA[key])
    try:
        got = arr[key]
    except (IndexError, TypeError) as exc:
        assert refused is not None, f"{key!r}: numpy gives {expected!r}, b2store {exc!r}"
        return
    assert refused is None, f"{key!r}: numpy raises {refused!r}, b2store gives {got!r}"
    assert type(got) is type(expected) and np.shape(got) == np.shape(expected)
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=keys(), value=st.integers(-100, -1))
def test_any_key_writes_as_numpy_or_raises(tmp_path_factory, case, value):
    key, _ = case
    path = tmp_path_factory.mktemp("w") / "a.b2nd"
    b2store.asarray(DATA, path, chunks=(3, 2, 4), blocks=(2, 2, 3))
    expected = DATA.copy()
    _, refused = _numpy(lambda: expected.__setitem__(key, value))
    try:
        b2store.open(path, mode="a")[key] = value
    except (IndexError, TypeError):
        assert refused is not None, f"{key!r}: numpy writes it, b2store refuses"
    else:
        assert refused is None, f"{key!r}: numpy raises {refused!r}, b2store wrote"
    # Whatever happened, the file holds exactly what numpy's array holds (nothing else moved).
    np.testing.assert_array_equal(b2store.open(path)[...], expected)


_STORED = []


@pytest.fixture(autouse=True, scope="module")
def _stored_for_hypothesis(stored):
    # @given tests cannot take function-scoped fixtures: the module's array, kept here.
    _STORED[:] = [stored]
    yield
    _STORED.clear()
