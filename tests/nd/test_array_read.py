"""Reading b2nd arrays: every corpus array bit-exact, numpy basic indexing on arrays
python-blosc2 writes, and reads that decode only the blocks a selection touches."""

import numpy as np
import pytest
from helpers import case_id, corpus_cases, corpus_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import b2store
from b2store.chunk.decoder import ChunkDecoder
from b2store.errors import FormatError

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the arrays read here")

ARRAYS = [("compat", c) for c in corpus_cases("compat", {"b2nd", "caterva"})] + [
    ("generated", c) for c in corpus_cases("generated", {"b2nd", "caterva"})
]


def ids(v):
    return case_id(v) if isinstance(v, dict) else v


@pytest.mark.parametrize("folder,case", ARRAYS, ids=ids)
def test_corpus_arrays(folder, case):
    root = corpus_dir(folder)
    if case.get("must_raise"):
        with pytest.raises(FormatError, match="dtype.*typesize|typesize.*dtype"):
            b2store.open(root / case["path"])
        return
    dtype = case.get("expected_dtype") if case["kind"] == "caterva" else None
    if case["kind"] == "caterva" and dtype is None:
        dtype = "<f8"  # corpus README: the generated caterva case holds <f8 items
    arr = b2store.open(root / case["path"], dtype=dtype)
    assert isinstance(arr, b2store.B2ndArray)
    expected_file = case.get("expected_npy") or case.get("expected")
    if expected_file is None:
        # The LazyArray files: their data chunk reads; the expression is never run.
        assert arr[...].shape == arr.shape
        assert isinstance(arr.vlmeta["_LazyArray"], dict)
        return
    expected = np.load(root / expected_file)
    got = np.asarray(arr)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    if case.get("check_values", True):
        np.testing.assert_array_equal(got, expected)
    if "shape" in case and case["kind"] == "b2nd":
        assert list(arr.shape) == case["shape"] and list(arr.chunks) == case["chunks"]
        assert list(arr.blocks) == case["blocks"]
    if case.get("vlmeta"):
        assert dict(arr.vlmeta) == case["vlmeta"]


def write(tmp_path, data, chunks, blocks, contiguous=True, **cparams):
    path = tmp_path / ("a.b2nd" if contiguous else "s.b2nd")
    blosc2.asarray(
        data,
        chunks=chunks,
        blocks=blocks,
        urlpath=str(path),
        mode="w",
        contiguous=contiguous,
        cparams=cparams or None,
    )
    return path


def keys_for(shape, draw):
    key = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "step", "neg", "all"]))
        if kind == "int" and n:
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            a, b = sorted(draw(st.lists(st.integers(-n - 2, n + 2), min_size=2, max_size=2)))
            key.append(slice(a, b))
        elif kind == "step":
            key.append(slice(draw(st.integers(0, max(n, 1))), None, draw(st.integers(1, 7))))
        elif kind == "neg":
            key.append(slice(None, None, -draw(st.integers(1, 4))))
        else:
            key.append(slice(None))
    if len(key) > 1 and draw(st.booleans()):
        key = [key[0], Ellipsis]
    return tuple(key)


@st.composite
def arrays_and_keys(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 23)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, n + 3)) for n in shape)
    blocks = tuple(draw(st.integers(1, c)) for c in chunks)
    dtype = draw(st.sampled_from(["<f8", "<i2", "|u1", ">i4", "<c8"]))
    return shape, chunks, blocks, dtype, keys_for(shape, draw)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    case=arrays_and_keys(),
    filters=st.sampled_from(
        [
            [blosc2.Filter.SHUFFLE],
            [blosc2.Filter.DELTA, blosc2.Filter.SHUFFLE],
            [blosc2.Filter.BITSHUFFLE],
        ]
    ),
)
def test_basic_indexing_matches_numpy(tmp_path_factory, case, filters):
    shape, chunks, blocks, dtype, key = case
    data = (np.arange(np.prod(shape)) * 7 % 251).astype(dtype).reshape(shape)
    path = write(
        tmp_path_factory.mktemp("a"),
        data,
        chunks,
        blocks,
        filters=filters,
        filters_meta=[0] * len(filters),
    )
    arr = b2store.open(path)
    np.testing.assert_array_equal(arr[key], data[key])


def test_sparse_frames_index_like_contiguous(tmp_path):
    data = np.random.default_rng(0).normal(size=(50, 40))
    arr = b2store.open(write(tmp_path, data, (20, 15), (7, 6), contiguous=False))
    assert not arr.schunk.contiguous
    np.testing.assert_array_equal(arr[3:47:4, ::-3], data[3:47:4, ::-3])


class Counter:
    def __init__(self, monkeypatch):
        self.blocks = 0
        self.whole = 0
        block, whole = ChunkDecoder.decode_block, ChunkDecoder.decode_into

        def decode_block(dec, *a, **k):
            self.blocks += 1
            return block(dec, *a, **k)

        def decode_into(dec, *a, **k):
            self.whole += 1
            return whole(dec, *a, **k)

        monkeypatch.setattr(ChunkDecoder, "decode_block", decode_block)
        monkeypatch.setattr(ChunkDecoder, "decode_into", decode_into)


def test_one_element_decodes_one_block(tmp_path, monkeypatch):
    data = np.random.default_rng(1).normal(size=(400, 300))
    arr = b2store.open(write(tmp_path, data, (200, 300), (20, 30)))
    counter = Counter(monkeypatch)
    assert arr[123, 45] == data[123, 45]
    assert (counter.blocks, counter.whole) == (1, 0)
    np.testing.assert_array_equal(arr[0:40, 0:30], data[0:40, 0:30])
    assert (counter.blocks, counter.whole) == (3, 0)
    np.testing.assert_array_equal(arr[:], data)
    assert counter.whole == 2  # whole chunks are decoded in one go


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_one_element_reads_a_small_part_of_the_chunk(tmp_path, monkeypatch, contiguous):
    from b2store.frame import storage

    data = np.random.default_rng(2).normal(size=(400, 300))
    arr = b2store.open(write(tmp_path, data, (200, 300), (20, 30), contiguous=contiguous))
    chunk_size = len(arr.schunk.get_chunk(0))
    read = {"bytes": 0}
    plain, ranged = storage.FileFrame.read, storage.SparseFrame.read_chunk_file_range

    def counting(self, offset, size):
        read["bytes"] += size
        return plain(self, offset, size)

    def counting_range(self, chunk_id, offset, size):
        read["bytes"] += size
        return ranged(self, chunk_id, offset, size)

    monkeypatch.setattr(storage.FileFrame, "read", counting)
    monkeypatch.setattr(storage.SparseFrame, "read_chunk_file_range", counting_range)
    assert arr[321, 123] == data[321, 123]
    # The header, the block starts and two blocks (block 0 and the one asked for).
    assert 0 < read["bytes"] < chunk_size / 20


def test_delta_chunks_decode_block_zero_first(tmp_path, monkeypatch):
    data = np.cumsum(np.ones((300, 40)), axis=0)
    arr = b2store.open(
        write(
            tmp_path,
            data,
            (300, 40),
            (30, 40),
            filters=[blosc2.Filter.DELTA, blosc2.Filter.SHUFFLE],
            filters_meta=[0, 0],
        )
    )
    counter = Counter(monkeypatch)
    np.testing.assert_array_equal(arr[250:260, 3], data[250:260, 3])
    assert counter.blocks == 2  # block 0, then the block asked for


def test_properties_and_errors(tmp_path):
    data = np.arange(60, dtype="<i4").reshape(6, 10)
    arr = b2store.open(write(tmp_path, data, (4, 4), (2, 3)))
    assert (arr.shape, arr.ndim, arr.size, arr.nbytes, len(arr)) == ((6, 10), 2, 60, 240, 6)
    assert arr.chunks == (4, 4) and arr.blocks == (2, 3) and arr.dtype == np.dtype("<i4")
    assert arr.cratio == arr.nbytes / arr.cbytes and arr.info["shape"] == (6, 10)
    for bad in [(6, 0), (0, -11), (1, 2, 3), (..., ...), ("a",), (1.5,)]:
        with pytest.raises(IndexError):
            arr[bad]
    assert isinstance(b2store.open(corpus_dir("generated") / "schunk_u2.b2frame"), b2store.SChunk)
