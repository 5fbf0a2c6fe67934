"""Reading b2nd arrays: every corpus array bit-exact, numpy basic indexing on arrays
python-blosc2 writes, and reads that decode only the blocks a selection touches."""

import os

import numpy as np
import pytest
from helpers import box_chunks, case_id, corpus_cases, corpus_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import b2store
from b2store.chunk import partial
from b2store.chunk.decoder import ChunkDecoder
from b2store.errors import FormatError
from b2store.nd import array as nd_array
from b2store.nd import chunks as nd_chunks
from b2store.nd import read_chunks
from b2store.nd.geometry import blocks_touched

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
    if case.get("oracle_error") and "LazyArray" in case["oracle_error"]:
        # The LazyArray files hold no data of their own: refused, the expression never run.
        with pytest.raises(b2store.UnsupportedError, match="python-blosc2 Lazy(Expr|UDF)"):
            b2store.open(root / case["path"])
        return
    dtype = case.get("expected_dtype") if case["kind"] == "caterva" else None
    if case["kind"] == "caterva" and dtype is None:
        dtype = "<f8"  # corpus README: the generated caterva case holds <f8 items
    arr = b2store.open(root / case["path"], dtype=dtype)
    assert isinstance(arr, b2store.B2ndArray)
    expected_file = case.get("expected_npy") or case.get("expected")
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
    """Blocks decoded one by one (by the C block loop straight from their bytes, or by a
    ChunkDecoder), and chunks decoded whole (alone, or in a run)."""

    def __init__(self, monkeypatch):
        self.blocks = 0
        self.whole = 0
        block, whole = ChunkDecoder.decode_block, ChunkDecoder.decode_into
        direct = partial.decode_direct
        one_pass, self.inside = nd_chunks.decode_chunk, False

        def decode_block(dec, *a, **k):
            self.blocks += 1
            return block(dec, *a, **k)

        def decode_into(dec, *a, **k):
            self.whole += not self.inside
            return whole(dec, *a, **k)

        def decode_chunk(*a, **k):  # a whole chunk, in one C pass or through a ChunkDecoder
            self.whole += 1
            self.inside = True
            try:
                return one_pass(*a, **k)
            finally:
                self.inside = False

        def decode_direct(*a, **k):
            done = direct(*a, **k)
            self.blocks += len(done or ())
            return done

        whole_small = nd_chunks.decode_small_chunk

        def small_chunk(*a, **k):  # a small chunk in one C pass, then scattered
            done = whole_small(*a, **k)
            self.whole += done
            return done

        one_run = read_chunks._run

        def run(*a, **k):  # small chunks read whole, a run of them in one C call
            placed = one_run(*a, **k)
            self.whole += placed
            return placed

        monkeypatch.setattr(read_chunks, "_run", run)
        kernels = read_chunks._read_chunks
        counter = self

        class Parts:  # a few blocks of a cut chunk, in one C call
            decode_run = staticmethod(kernels.decode_run)

            @staticmethod
            def decode_part(src, blocks, *a, **k):
                done = kernels.decode_part(src, blocks, *a, **k)
                counter.blocks += len(blocks) if done else 0
                return done

            @staticmethod
            def read_box(fd, offsets, stored, base, lo, hi, shape, chunks, blocks, *rest):
                n = kernels.read_box(fd, offsets, stored, base, lo, hi, shape, chunks, blocks,
                                     *rest)  # fmt: skip
                left = set(rest[-1][:n].tolist())
                for number, touched, whole in box_chunks(lo, hi, shape, chunks, blocks):
                    if number not in left:  # (decoded whole, or only the blocks it needs)
                        counter.whole += whole
                        counter.blocks += 0 if whole else touched
                return n

            @staticmethod
            def read_parts(*args):  # a few blocks of each of many chunks, read in C
                which, lows, extents, chunks, blocks, done = (args[i] for i in (3, 5, 6, 7, 8, 13))
                before = done.copy()
                placed = kernels.read_parts(*args)
                for j in which:
                    if done[j] and not before[j]:
                        region = [(lo, lo + e) for lo, e in zip(lows[j], extents[j])]
                        counter.blocks += len(blocks_touched(region, chunks, blocks))
                return placed

        monkeypatch.setattr(read_chunks, "_read_chunks", Parts)
        monkeypatch.setattr(nd_chunks, "decode_small_chunk", small_chunk)
        monkeypatch.setattr(nd_array, "decode_small_chunk", small_chunk)
        monkeypatch.setattr(ChunkDecoder, "decode_block", decode_block)
        monkeypatch.setattr(ChunkDecoder, "decode_into", decode_into)
        monkeypatch.setattr(partial, "decode_direct", decode_direct)
        monkeypatch.setattr(nd_chunks, "decode_chunk", decode_chunk)


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


def _kernel_read_bytes() -> int:
    """The bytes the kernel counts this process as having read (``rchar``): every read and
    pread, from Python or from compiled code."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_one_element_reads_a_small_part_of_the_chunk(tmp_path, monkeypatch, contiguous, compiled):
    from b2store.frame import sources

    if compiled and not read_chunks.available():
        pytest.skip("the compiled reader is not built here")
    if compiled and not os.path.exists("/proc/self/io"):
        pytest.skip("the compiled reader's bytes are counted by the kernel: Linux's /proc")
    data = np.random.default_rng(2).normal(size=(400, 300))
    arr = b2store.open(write(tmp_path, data, (200, 300), (20, 30), contiguous=contiguous))
    chunk_size = len(arr.schunk.get_chunk(0))
    read = {"bytes": 0, "small": []}
    plain, small = sources.FileSource.read, read_chunks.read_small

    def counting(self, offset, size):
        read["bytes"] += size
        return plain(self, offset, size)

    def spied(*args):
        read["small"].append(small(*args))
        return read["small"][-1]

    # Every byte Python reads from a local file, frame or chunk file, goes through
    # FileSource.read; the compiled reader's are counted by the kernel.
    monkeypatch.setattr(sources.FileSource, "read", counting)
    monkeypatch.setattr(read_chunks, "read_small", spied)
    if not compiled:
        monkeypatch.setattr(read_chunks, "available", lambda: False)
    before = _kernel_read_bytes() if compiled else 0
    assert arr[321, 123] == data[321, 123]
    got = _kernel_read_bytes() - before if compiled else read["bytes"]
    # The header, the block starts and the block asked for (block 0 too for Python's).
    assert 0 < got < chunk_size / 20
    # A local frame's read is the compiled call's; a directory's is Python's.
    assert read["small"] == ([True] if compiled and contiguous else [False] if compiled else [])


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
    for bad, match in [
        ((6, 0), "index 6 is out of bounds for axis 0 with size 6"),
        ((0, -11), "index -11 is out of bounds for axis 1 with size 10"),
        ((1, 2, 3), "too many indices"),
        ((..., ...), "a single ellipsis"),
        (("a",), "not str"),
        ((1.5,), "not float"),
    ]:
        with pytest.raises(IndexError, match=match):
            arr[bad]
    assert isinstance(b2store.open(corpus_dir("generated") / "schunk_u2.b2frame"), b2store.SChunk)


WIDE_DTYPES = ["|V300", [("a", "<f8"), ("b", "|S300")], "|S256"]


@pytest.mark.parametrize("dtype", WIDE_DTYPES, ids=str)
def test_items_over_255_bytes_with_frame_typesize_1(tmp_path, dtype):
    """NDArray.to_cframe (and hdf5plugin, PyTables) store such frames' typesize as 1; the
    C readers refuse them, b2store reads the dtype's item size."""
    from b2store.frame.header import FrameHeader

    dtype = np.dtype(dtype)
    rng = np.random.default_rng(3)
    data = np.frombuffer(rng.integers(0, 256, 50 * dtype.itemsize, np.uint8).tobytes(), dtype)
    written = blosc2.asarray(data, chunks=(20,), blocks=(5,))
    cframe = written.to_cframe()
    assert FrameHeader.from_bytes(cframe).typesize == 1  # what is being read
    arr = b2store.open(cframe)
    assert arr.dtype == written.dtype  # python-blosc2 names plain V300 "[('f0', 'V300')]"
    data = data.view(arr.dtype)
    np.testing.assert_array_equal(arr[...], data)
    np.testing.assert_array_equal(arr[17:33], data[17:33])
    # Changed in place (chunks re-encoded as c-blosc2 would: typesize 1), read back.
    path = tmp_path / "wide.b2nd"
    path.write_bytes(cframe)
    arr = b2store.open(path, mode="a")
    arr[3:25] = data[::-1][3:25]
    arr.schunk.close()
    expected = data.copy()
    expected[3:25] = data[::-1][3:25]
    reread = b2store.open(path)
    np.testing.assert_array_equal(reread[...], expected)
    reread.schunk.close()


def _with_typesize(cframe: bytes, typesize: int) -> bytes:
    # The frame header's typesize: an msgpack int32 (0xd2) at offset 47.
    data = bytearray(cframe)
    assert data[47] == 0xD2
    data[48:52] = typesize.to_bytes(4, "big")
    return bytes(data)


@pytest.mark.parametrize(
    "dtype,typesize",
    [("|V300", 4), ("|V300", 2), ("|S200", 1), ("<f8", 1), ("<f8", 4)],
    ids=str,
)
def test_typesize_mismatches_are_still_refused(dtype, typesize):
    data = np.zeros(50, dtype)
    data.view(np.uint8)[...] = np.arange(data.nbytes) % 251
    cframe = blosc2.asarray(data, chunks=(20,), blocks=(5,)).to_cframe()
    with pytest.raises(FormatError, match="typesize"):
        b2store.open(_with_typesize(cframe, typesize))


@pytest.mark.parametrize(
    "dtype",
    ["<f8", ">i4", "<u2", "?", "<c16", "<M8[s]", "<U3", "|S5", [("a", "<i2"), ("b", "<f4")]],
)
def test_one_element_is_numpys_scalar(tmp_path, dtype):
    """``arr[i, j]`` (the one-element path) gives what numpy's indexing gives, value and
    type, in every chunk kind: stored, all zeros (special) and an edge chunk."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, 30 * 20 * dtype.itemsize, np.uint8).tobytes()
    data = np.frombuffer(raw, dtype).reshape(30, 20).copy()
    if dtype.kind == "M":
        data = data.view("<i8").__mod__(10**9).view(dtype)
    data[:10, :8] = np.zeros((), dtype)  # chunk (0, 0) all zeros: a special chunk
    arr = b2store.open(write(tmp_path, data, (10, 8), (5, 4)))
    for i, j in [(0, 0), (3, 7), (12, 9), (29, 19), (-1, -20), (25, 17)]:
        got, want = arr[i, j], data[i, j]
        assert type(got) is type(want) and got.dtype == want.dtype
        assert got.tobytes() == want.tobytes()
    for bad, match in [((30, 0), "index 30 .* size 30"), ((0, -21), "index -21 .* size 20")]:
        with pytest.raises(IndexError, match=match):
            arr[bad]


def test_small_reads_decode_only_their_blocks(tmp_path, monkeypatch):
    """A read inside one chunk (a slab's row, a corner of a chunk) decodes only the blocks
    it touches, in every dimension, edge chunks included, and hands back an array of its
    own rather than a view into the chunk-sized buffer the blocks were decoded into."""
    data = np.random.default_rng(3).normal(size=(50, 20, 30))
    arr = b2store.open(write(tmp_path, data, (20, 20, 30), (5, 8, 30)))
    counter = Counter(monkeypatch)
    cases = [  # key, blocks it touches
        ((7,), 3),  # one row of a slab: 20 / 8 -> 3 blocks along axis 1
        ((7, 3), 1),
        ((7, slice(3, 15)), 2),
        ((slice(41, 47), -1, slice(None)), 2),  # the last chunk, partial, its last block
        ((slice(45, None), slice(18, 20), 4), 1),
        ((np.int64(7),), 3),  # not a Python int: the general path, same blocks
    ]
    for key, blocks in cases:
        before = counter.blocks
        got = arr[key]
        np.testing.assert_array_equal(got, data[key])
        assert counter.blocks - before == blocks, key
        assert counter.whole == 0
        assert got.base is None or got.base.nbytes == got.nbytes, key


def test_a_python_blosc2_array_of_1_gib_zero_chunks_reads_a_few_items_cheaply(tmp_path):
    """python-blosc2's zeros of 1 GiB chunks store special chunks whose header blocksize is the
    chunk's size, past the largest block (they were refused: "blocksize ... at most
    536866816"); a read of three items fills the blocks it touches, not the 1 GiB chunk."""
    import subprocess
    import sys

    blosc2 = pytest.importorskip("blosc2")
    path = tmp_path / "z.b2nd"
    blosc2.zeros((2**28,), dtype="f8", chunks=(2**27,), urlpath=str(path), mode="w")
    # Measured in a fresh interpreter: this process's peak may be past 1 GiB already.
    child = (
        "import resource, sys, b2store\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "with b2store.open(sys.argv[1]) as arr:\n"
        "    assert arr[:3].tolist() == [0.0] * 3\n"
        "    assert arr[2**27 - 1 : 2**27 + 2].tolist() == [0.0] * 3\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    grown = int(done.stdout.split()[-1])
    assert grown < 256 << 20, f"peak RSS grew {grown >> 20} MiB"


@pytest.mark.parametrize("value", [0.0, 7.5, float("nan")])
def test_special_chunks_fill_only_the_selection_and_equal_numpy(value):
    blosc2 = pytest.importorskip("blosc2")
    src = blosc2.full((1000, 1000), value, chunks=(500, 1000), blocks=(10, 1000))
    arr = b2store.open(src.schunk.to_cframe())
    full = np.full((1000, 1000), value)
    np.testing.assert_array_equal(arr[3:7, 5:9], full[3:7, 5:9])
    np.testing.assert_array_equal(arr[495:505:3, ::7], full[495:505:3, ::7])
    np.testing.assert_array_equal(arr[:], full)
