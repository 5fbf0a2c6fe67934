"""``b2store verify``: every chunk decoded; each bad one reported with its offset; exit 1."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error, run_b2store
from helpers import CORPUS, case_id, corpus_cases

blosc2 = pytest.importorskip("blosc2")

GOOD = [c for c in corpus_cases("generated", {"b2nd", "schunk", "chunk"})]
MUST_RAISE = corpus_cases(
    "compat", {"b2nd", "schunk", "chunk"}, where=lambda c: c.get("must_raise")
)


@pytest.mark.parametrize("case", GOOD, ids=case_id)
def test_corpus_files_verify(case, cli):
    result = cli("verify", "--json", CORPUS / "generated" / case["path"])
    report = json.loads(result.out)
    if case.get("check_values") is False:
        # Uninitialized chunks decode (to undefined values): still good chunks.
        assert result.code == 0, result
    assert result.code == 0 and report["ok"] and report["problems"] == [], result
    assert report["chunks"] >= 1


@pytest.mark.parametrize("case", MUST_RAISE, ids=case_id)
def test_broken_compat_files_fail_verification(case, cli):
    result = cli("verify", CORPUS / "compat" / case["path"])
    assert result.code in (1, 2), result
    assert "Traceback" not in result.err


def _frame_with_bad_chunk(tmp_path):
    data = np.arange(40_000, dtype="f8")
    path = tmp_path / "x.b2nd"
    arr = blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(10_000,), blocks=(2_500,))
    chunk2 = arr.schunk.get_chunk(2)
    del arr
    raw = bytearray(path.read_bytes())
    at = raw.find(chunk2)  # where python-blosc2 put chunk 2
    assert at > 0
    raw[at + 32 : at + 48] = b"\xff" * 16  # its block starts
    path.write_bytes(bytes(raw))
    return path, at


def test_a_bad_chunk_is_reported_with_its_offset(tmp_path):
    path, at = _frame_with_bad_chunk(tmp_path)
    result = run_b2store("verify", path)
    assert result.code == 1, result
    bad = [line for line in result.out.splitlines() if line.startswith("BAD")]
    assert len(bad) == 1 and f"chunk 2, at byte {at}" in bad[0], result
    assert "bstarts" in bad[0]
    assert "4 chunks checked, 1 bad" in result.out
    result = run_b2store("verify", "--json", path)
    report = json.loads(result.out)
    assert result.code == 1 and report["ok"] is False and report["chunks"] == 4
    (problem,) = report["problems"]
    assert problem["chunk"] == 2 and problem["offset"] == at and "bstarts" in problem["error"]


def test_good_files_of_every_kind_verify(tmp_path):
    zarr = pytest.importorskip("zarr")
    from b2store.integrations.zarr.codecs import Blosc2Codec

    tree = tmp_path / "t.b2z"
    with blosc2.TreeStore(str(tree), mode="w") as ts:
        ts["/a"] = np.arange(1000.0)
        ts["/g/b"] = np.arange(10, dtype="u2")
    z = zarr.create_array(
        str(tmp_path / "z.zarr"), shape=(30,), chunks=(10,), dtype="i4", compressors=[Blosc2Codec()]
    )
    z[:] = np.arange(30)
    sparse = tmp_path / "s.b2nd"
    blosc2.asarray(np.arange(5000), urlpath=str(sparse), contiguous=False, mode="w", chunks=(1000,))
    for path, n in ((tree, 2), (tmp_path / "z.zarr", 3), (sparse, 5)):
        result = run_b2store("verify", path)
        assert result.code == 0, result
        assert f"{n} chunks checked, ok" in result.out


def test_bad_zarr_chunk_is_reported(tmp_path):
    zarr = pytest.importorskip("zarr")
    from b2store.integrations.zarr.codecs import Blosc2Codec

    path = tmp_path / "z.zarr"
    z = zarr.create_array(
        str(path), shape=(3000,), chunks=(1000,), dtype="f8", compressors=[Blosc2Codec()]
    )
    z[:] = np.arange(3000.0)
    key = path / "c" / "1"
    raw = bytearray(key.read_bytes())
    raw[32:36] = b"\x7f" * 4  # the first block start
    key.write_bytes(bytes(raw))
    result = run_b2store("verify", "--json", path)
    assert result.code == 1, result
    (problem,) = json.loads(result.out)["problems"]
    assert problem["chunk"] == "c/1"


def test_verify_user_errors(tmp_path):
    assert_user_error(run_b2store("verify", tmp_path / "nothing"), "no such file")


def _over_limit_vlmeta(path):
    import b2store

    b2store.asarray(np.arange(10.0), path).close()
    # Written by a handle that trusts it: the readers' default limits refuse it.
    with b2store.open(path, mode="a", limits=b2store.Limits(max_vlmeta_nbytes=1 << 30)) as s:
        s.vlmeta["big"] = bytes(b2store.Limits().max_vlmeta_nbytes + 1)
    return path


def test_what_the_readers_refuse_is_not_ok(tmp_path, cli):
    """verify decodes what the readers decode: a frame's vlmeta past the limits, and a tree
    group's attributes frame that is not a frame, were reported ok while open_tree, zarr and
    xarray refused them."""
    import xarray as xr

    import b2store

    frame = _over_limit_vlmeta(tmp_path / "v.b2nd")
    result = cli("verify", "--json", frame)
    report = json.loads(result.out)
    assert result.code == 1 and not report["ok"], result
    assert [p["chunk"] for p in report["problems"]] == ["vlmeta"]
    assert "max_vlmeta_nbytes" in report["problems"][0]["error"]

    tree = tmp_path / "t.b2d"
    b2store.to_b2nd(xr.Dataset({"a": ("x", np.arange(5.0))}, attrs={"title": "t"}), tree)
    (tree / "__vlmeta__.b2f").write_bytes(b"garbage" * 10)
    result = cli("verify", tree)
    assert result.code == 1, result
    assert "BAD group attributes" in result.out and "not a Blosc2 file" in result.out, result


def test_info_shows_a_frame_whose_vlmeta_is_refused(tmp_path, cli):
    frame = _over_limit_vlmeta(tmp_path / "v.b2nd")
    result = cli("info", frame)
    assert result.code == 0, result
    assert "shape     (10,)" in result.out  # the rest of the frame is shown
    assert "(not shown)" in result.out and "max_vlmeta_nbytes" in result.out, result
