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
