"""``b2store dump``: values printed as numpy prints them, with ``--slice`` parsed (never
evaluated)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_user_error, run_b2store

from b2store.cli.arguments import UsageError, parse_slice

blosc2 = pytest.importorskip("blosc2")


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("0, 10:20, ::4", (0, slice(10, 20), slice(None, None, 4))),
        ("...", (Ellipsis,)),
        ("..., -1", (Ellipsis, -1)),
        ("-3:", (slice(-3, None),)),
        ("::-2", (slice(None, None, -2),)),
        ("1,", (1,)),
        (" +2 : 5 ", (slice(2, 5),)),
    ],
)
def test_parse_slice(text, key):
    assert parse_slice(text) == key


@pytest.mark.parametrize(
    "text",
    ["__import__('os').system('x')", "1:2:3:4", "a", "1.5", "::0", "[1, 2]", "1 2", "None"],
)
def test_parse_slice_refuses_anything_else(text):
    with pytest.raises(UsageError, match="bad --slice"):
        parse_slice(text)


def test_dump_prints_numpy_values_of_a_python_blosc2_frame(tmp_path):
    data = np.arange(4 * 30 * 20, dtype="i4").reshape(4, 30, 20)
    path = tmp_path / "cube.b2nd"
    blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(2, 16, 16))
    result = run_b2store("dump", path, "--slice", "0, 10:20, ::4")
    assert result.code == 0, result
    header, body = result.out.split("\n", 1)
    assert "shape (10, 5)" in header and "int32" in header
    assert body.strip() == str(data[0, 10:20, ::4])


def test_dump_of_a_tree_array_and_a_chunk(tmp_path):
    tree = tmp_path / "t.b2d"
    with blosc2.TreeStore(str(tree), mode="w") as ts:
        ts["/grp/lon"] = np.arange(0, 360, 30.0)
        ts["/temp"] = np.ones((2, 2))
    result = run_b2store("dump", tree, "--array", "/grp/lon", "--slice", "::-3")
    assert result.code == 0, result
    assert result.out.splitlines()[-1] == str(np.arange(0, 360, 30.0)[::-3])
    chunk = tmp_path / "c.bin"
    values = np.linspace(0, 1, 11)
    chunk.write_bytes(blosc2.compress2(values, typesize=8))
    result = run_b2store("dump", chunk, "--dtype", "<f8")
    assert result.code == 0, result
    assert result.out.split("\n", 1)[1].strip() == str(values)


def test_dump_errors(tmp_path):
    path = tmp_path / "x.b2nd"
    blosc2.asarray(np.arange(10), urlpath=str(path), mode="w")
    assert_user_error(run_b2store("dump", path, "--slice", "open('x')"), "bad --slice")
    assert_user_error(run_b2store("dump", path, "--slice", "0, 1"), "bad --slice")
    assert_user_error(run_b2store("dump", path, "--slice", "20"), "out of bounds")
    assert_user_error(run_b2store("dump", path, "--array", "nope"), "no array")


def _random_case(rng):
    """An array of a drawn shape and dtype, and a key of ints, slices (any step) and at
    most one Ellipsis, as ``--slice`` gives them."""
    shape = tuple(int(rng.choice([1, 2, 6, 7, 13, 40, 1200])) for _ in range(rng.integers(1, 5)))
    while np.prod(shape) > 200_000:
        shape = shape[1:]
    kind = rng.choice(["f8", "f4", "i8", "u1", "?", "c16", "U5", "M8[s]", "rec"])
    x = rng.standard_normal(int(np.prod(shape))) * 10.0 ** rng.integers(-5, 8)
    if kind == "U5":
        a = np.array([str(v)[:5] for v in x])
    elif kind == "M8[s]":
        a = x.astype("i8").astype("M8[s]")
    elif kind == "rec":
        a = np.zeros(x.size, [("a", "i4"), ("b", "f8")])
        a["a"], a["b"] = np.arange(x.size), x
    elif kind == "?":
        a = x > 0
    else:
        a = x.astype(kind)
    a = a.reshape(shape)
    key = []
    for n in shape:
        pick = rng.random()
        if pick < 0.15:
            key.append(int(rng.integers(-n, n)))
        elif pick < 0.55:
            key.append(slice(None))
        else:
            start = None if rng.random() < 0.5 else int(rng.integers(-n, n))
            stop = None if rng.random() < 0.5 else int(rng.integers(-n, n + 1))
            key.append(slice(start, stop, int(rng.choice([1, 2, 3, -1, -2]))))
    if rng.random() < 0.3:
        at = int(rng.integers(0, len(key) + 1))
        key = key[:at] + [Ellipsis] + key[at + int(rng.integers(0, len(key) - at + 1)) :]
    return a, tuple(key)


class _Recorded:
    """An array as dump sees it (shape, dtype, basic indexing), counting the items read."""

    def __init__(self, a):
        self.shape, self.dtype, self._a, self.reads = a.shape, a.dtype, a, []

    def __getitem__(self, key):
        self.reads.append(np.asarray(self._a[key]).size)
        return self._a[key]


@pytest.mark.parametrize("options", [{}, {"edgeitems": 2}, {"threshold": 40, "linewidth": 50}])
def test_dump_prints_what_numpy_prints_reading_only_the_corners(options):
    """``printed`` (the corners numpy shows, read box by box) gives numpy's own text for the
    whole selection: 120 drawn arrays and keys per set of print options."""
    from b2store.cli.arguments import selection_shape
    from b2store.cli.dump import printed

    rng = np.random.default_rng(35)
    checked = 0
    while checked < 120:
        a, key = _random_case(rng)
        try:
            want = np.asarray(a[key])
        except IndexError:
            continue
        recorded = _Recorded(a)
        with np.printoptions(**options):
            text, dtype = printed(recorded, key, selection_shape(a.shape, key))
            assert text == str(want), (a.shape, a.dtype, key)
        assert dtype == want.dtype
        if want.size > options.get("threshold", 1000):  # the corners, never the whole
            assert sum(recorded.reads) <= (2 * options.get("edgeitems", 3)) ** want.ndim
        checked += 1


def test_dump_of_a_large_array_prints_as_numpy_prints_it(tmp_path, cli):
    data = np.arange(50 * 60 * 70, dtype="f4").reshape(50, 60, 70) / 7
    path = tmp_path / "cube.b2nd"
    blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(16, 16, 16))
    for sel in ("...", "::-3, 5, 1::2", "-1:0:-2"):
        result = cli("dump", path, f"--slice={sel}")
        assert result.code == 0, result
        key = parse_slice(sel)
        assert result.out.split("\n", 1)[1].rstrip("\n") == str(data[key])
