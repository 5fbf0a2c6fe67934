"""Every chunk, shuffled and bitshuffled case of the reference corpus decodes bit-exact."""

import numpy as np
import pytest
from helpers import case_id, corpus_cases, corpus_dir, recipe

import b2store
from b2store import _shuffle

COMPAT = corpus_cases("compat", {"chunk", "shuffled", "bitshuffled"})
GENERATED = corpus_cases("generated", {"chunk"})

# c-blosc's test_bitshuffle_leftovers.c, which wrote these files, fills the bytes past the last
# whole int32 with `i & 0xff` (i the byte index), not with more of the arange the manifest's
# recipe describes. Blosc1's rule recovers them; c-blosc2 leaves garbage there.
TAIL_IS_BYTE_INDEX = {
    "compat__blosc-1.18.0-lz4-bitshuffle4-memcpy",
    "compat__blosc-1.18.0-lz4-bitshuffle8-nomemcpy",
}


@pytest.mark.parametrize("case", COMPAT, ids=case_id)
def test_compat_case(case):
    root = corpus_dir("compat")
    data = (root / case["path"]).read_bytes()
    if "expected_npy" in case:
        expected = np.load(root / case["expected_npy"]).view(np.uint8).reshape(-1)
    else:
        expected = recipe(case["expected"]).copy()
    if case["name"] in TAIL_IS_BYTE_INDEX:
        tail = len(expected) // 4 * 4
        expected[tail:] = np.arange(tail, len(expected)) & 0xFF
    src = np.frombuffer(data, np.uint8)
    if case["kind"] == "chunk":
        got = b2store.decode_chunk(data)
    else:
        got = np.empty_like(src)
        kernel = _shuffle.unshuffle if case["kind"] == "shuffled" else _shuffle.bitunshuffle
        kernel(src, got, case["typesize"])
    assert len(got) == len(expected)
    n = case.get("compare_bytes", len(expected))
    np.testing.assert_array_equal(got[:n], expected[:n])


@pytest.mark.parametrize("case", GENERATED, ids=case_id)
def test_generated_chunk(case):
    root = corpus_dir("generated")
    data = (root / case["path"]).read_bytes()
    expected = np.load(root / case["expected"]).view(np.uint8).reshape(-1)
    info = b2store.chunk_info(data)
    assert info.nbytes == case["nbytes"] == len(expected)
    assert info.version == (2 if case["producer"] == "numcodecs" else 5)
    np.testing.assert_array_equal(b2store.decode_chunk(data), expected)


@pytest.mark.parametrize("case", corpus_cases("compat", {"chunk"}), ids=case_id)
def test_compat_chunk_decodes_into_out(case):
    data = (corpus_dir("compat") / case["path"]).read_bytes()
    out = bytearray(b2store.chunk_info(data).nbytes)
    view = b2store.decode_chunk(data, out=out)
    assert np.shares_memory(view, np.frombuffer(out, np.uint8))
    np.testing.assert_array_equal(np.frombuffer(out, np.uint8), b2store.decode_chunk(data))


def test_compat_headers_say_what_the_notes_say():
    root = corpus_dir("compat")
    info = b2store.chunk_info((root / "compat__blosc-1.3.0-zlib.cdata").read_bytes())
    assert (info.version, info.codec, info.typesize, info.blocksize) == (
        2,
        b2store.Codec.ZLIB,
        4,
        2097152,
    )
    assert info.split and info.header_size == 16 and info.filters[5] == b2store.Filter.SHUFFLE
    info = b2store.chunk_info((root / "compat__blosc-1.14.0-zstd.cdata").read_bytes())
    assert not info.split  # flags 0x91: dont_split set
    info = b2store.chunk_info(
        (root / "compat__blosc-2.0.0-lz4-bitshuffle8-nomemcpy.cdata").read_bytes()
    )
    assert info.version == 4 and info.header_size == 16
    assert info.filters[5] == b2store.Filter.BITSHUFFLE
    info = b2store.chunk_info((root / "compat__blosc-zstd-3.0.0.cdata").read_bytes())
    assert info.version == 5 and info.header_size == 32 and info.codec == b2store.Codec.ZSTD
