"""``b2store info``: any Blosc input, recognised by content, described in full (and as JSON)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error, run_b2store
from helpers import CORPUS, case_id, corpus_cases

import b2store

blosc2 = pytest.importorskip("blosc2")

GENERATED = corpus_cases("generated", {"b2nd", "schunk", "chunk", "caterva"})


def info_json(path) -> dict:
    result = run_b2store("info", "--json", path)
    assert result.code == 0, result
    return json.loads(result.out)


@pytest.mark.parametrize("case", GENERATED, ids=case_id)
def test_every_generated_corpus_file_is_described(case, cli):
    path = CORPUS / "generated" / case["path"]
    result = cli("info", "--json", path)
    assert result.code == 0, result
    info = json.loads(result.out)
    if case["kind"] == "chunk":
        assert info["kind"] == "chunk"
        assert info["nbytes"] == case["nbytes"]
        return
    assert info["kind"] == ("sparse frame" if path.is_dir() else "contiguous frame")
    if case["kind"] in ("b2nd", "caterva"):
        assert info["type"] == "b2nd array"
        assert info["shape"] == case["shape"]
        assert info["chunks"] == case["chunks"]
        assert info["blocks"] == case["blocks"]
        if case["kind"] == "b2nd" and case["dtype"].startswith("["):
            assert info["dtype"] == case["dtype"]  # structured: the numpy description
        elif case["kind"] == "b2nd":
            assert np.dtype(info["dtype"]) == np.dtype(case["dtype"])
    else:
        assert info["type"] == "super-chunk"
    assert set(info["vlmeta"]) == set(case.get("vlmeta", {}))
    with b2store.open(path, dtype="<f8" if case["kind"] == "caterva" else None) as obj:
        schunk = obj.schunk if hasattr(obj, "schunk") else obj
        assert info["chunk_stats"]["count"] == schunk.nchunks
        assert info["nbytes"] == schunk.nbytes


def test_python_blosc2_frame_in_text_and_json(tmp_path):
    path = tmp_path / "temp.b2nd"
    data = np.linspace(250, 300, 120 * 90, dtype="f4").reshape(120, 90)
    arr = blosc2.asarray(
        data,
        urlpath=str(path),
        mode="w",
        chunks=(40, 90),
        blocks=(10, 45),
        cparams={"codec": blosc2.Codec.LZ4, "clevel": 7, "filters": [blosc2.Filter.BITSHUFFLE]},
    )
    arr.vlmeta["units"] = "K"
    del arr
    info = info_json(path)
    assert info["shape"] == [120, 90] and info["dtype"] == "<f4"
    assert info["chunks"] == [40, 90] and info["blocks"] == [10, 45]
    assert info["codec"] == "lz4" and info["clevel"] == 7
    assert [f["name"] for f in info["filters"]] == ["bitshuffle"]
    assert info["vlmeta"] == {"units": "K"}
    assert list(info["metalayers"]) == ["b2nd"]
    opened = blosc2.open(str(path))  # held: its schunk dies with it
    ref = opened.schunk
    assert info["nbytes"] == int(ref.nbytes) and info["cbytes"] == int(ref.cbytes)
    assert info["chunk_stats"]["count"] == int(ref.nchunks) == 3
    assert info["chunk_stats"]["special"] == {}
    text = run_b2store("info", path)
    assert text.code == 0, text
    assert "(120, 90)" in text.out and "lz4" in text.out and "bitshuffle" in text.out
    assert "units = 'K'" in text.out


def test_per_chunk_statistics_count_special_chunks(tmp_path):
    # Chunk 1 of 4 is all zeros: python-blosc2 stores it as a zeros special chunk.
    data = np.arange(4000, dtype="i8")
    data[1000:2000] = 0
    path = tmp_path / "z.b2nd"
    blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(1000,), blocks=(250,))
    opened = blosc2.open(str(path))  # held: its schunk dies with it
    ref = opened.schunk
    info = info_json(path)
    assert info["chunk_stats"]["count"] == 4
    assert info["chunk_stats"]["special"] == {"zero": 1}
    listed = run_b2store("info", "--json", "--chunks", path)
    chunk_list = json.loads(listed.out)["chunk_list"]
    assert [c["special"] for c in chunk_list] == [None, "zero", None, None]
    raw = path.read_bytes()
    for rec in chunk_list:
        if rec["special"] is None:
            # The offset reported is where python-blosc2's chunk bytes sit in the file.
            chunk = ref.get_chunk(rec["chunk"])
            assert raw.find(chunk) == rec["offset"]
            assert rec["cbytes"] == len(chunk)


def test_sparse_frame_and_trees_written_by_python_blosc2(tmp_path):
    sparse = tmp_path / "sparse.b2nd"
    blosc2.asarray(
        np.arange(100.0).reshape(10, 10), urlpath=str(sparse), contiguous=False, mode="w"
    )
    assert info_json(sparse)["kind"] == "sparse frame"
    for suffix in (".b2d", ".b2z"):
        tree = tmp_path / f"t{suffix}"
        with blosc2.TreeStore(str(tree), mode="w") as ts:
            ts["/temp"] = np.arange(12.0).reshape(3, 4)
            ts["/grp/lon"] = np.arange(5, dtype="i4")
            ts.vlmeta["title"] = "demo"
        info = info_json(tree)
        assert set(info["arrays"]) == {"/temp", "/grp/lon"}
        assert info["arrays"]["/temp"]["shape"] == [3, 4]
        assert info["arrays"]["/grp/lon"]["dtype"] == "<i4"
        assert info["groups"]["/"] == {"title": "demo"}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_store_with_b2store_codecs(tmp_path, zarr_format):
    zarr = pytest.importorskip("zarr")
    from b2store.integrations.zarr.codecs import Blosc2Codec

    codec = b2store.Blosc2(cname="lz4") if zarr_format == 2 else Blosc2Codec(cname="lz4")
    path = tmp_path / "z.zarr"
    z = zarr.create_array(
        str(path),
        shape=(100, 60),
        chunks=(50, 30),
        dtype="f4",
        compressors=[codec],
        zarr_format=zarr_format,
    )
    z[:50] = np.arange(3000, dtype="f4").reshape(50, 60)
    info = info_json(path)
    (arr,) = info["arrays"].values()
    assert arr["zarr_format"] == zarr_format
    assert arr["shape"] == [100, 60] and arr["chunks"] == [50, 30]
    assert any("blosc2" in json.dumps(c) for c in arr["codecs"])
    assert arr["chunk_stats"]["count"] == 4
    assert arr["chunk_stats"]["not_written"] == 2
    assert arr["chunk_stats"]["chunk_format_versions"] == [5]


def test_user_errors_are_one_line(tmp_path):
    assert_user_error(run_b2store("info", tmp_path / "missing.b2nd"), "no such file")
    text = tmp_path / "notes.txt"
    text.write_text("this is not a Blosc file at all, just some words\n")
    assert_user_error(run_b2store("info", text), "not a Blosc2 file (text: 'this is not")
    npy = tmp_path / "a.npy"
    np.save(npy, np.arange(3))
    assert_user_error(run_b2store("info", npy), "not a Blosc input")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_user_error(run_b2store("info", empty), "no Blosc2 frames")
    assert_user_error(run_b2store("info", "--bogus", text), "--bogus")
    assert_user_error(run_b2store("frobnicate"), "frobnicate")


def test_corrupt_frame_header_is_one_line(tmp_path):
    path = tmp_path / "x.b2nd"
    blosc2.asarray(np.arange(1000.0), urlpath=str(path), mode="w")
    raw = bytearray(path.read_bytes())
    raw[16:24] = b"\xff" * 8  # inside the header: frame_len and friends
    path.write_bytes(bytes(raw))
    assert_user_error(run_b2store("info", path))


def test_version():
    result = run_b2store("--version")
    assert result.code == 0
    assert result.out.strip() == f"b2store {b2store.__version__}"


def test_python_blosc2_chunk(tmp_path):
    data = np.arange(10000, dtype="<i4")
    chunk = blosc2.compress2(data, codec=blosc2.Codec.ZSTD, clevel=3, typesize=4)
    path = tmp_path / "c.bin"
    path.write_bytes(chunk)
    info = info_json(path)
    assert info["kind"] == "chunk" and info["codec"] == "zstd"
    assert info["nbytes"] == data.nbytes and info["cbytes"] == len(chunk)
    assert info["typesize"] == 4


def test_info_shows_a_plugin_codecs_meta(tmp_path):
    pytest.importorskip("zfpy", reason="ZFP needs the zfp extra (zfpy)")
    from b2store.cli.info import format_info
    from b2store.cli.inspection import describe

    x = np.cumsum(np.ones((16, 16)), axis=1)
    b2store.asarray(x, tmp_path / "z.b2nd", codec="zfp_prec", codec_meta=20).close()
    info = describe(tmp_path / "z.b2nd")
    assert info["codec"] == "zfp_prec" and info["codec_meta"] == 20
    assert "zfp_prec (codec_meta 20)" in format_info(info)
