"""Whole small chunks read a run at a time (nd/read_chunks.py, frame/chunk_bounds.py,
nd/_read_chunks.pyx): the same items as one chunk at a time, few reads, and every chunk the C
loop does not take (special, damaged, sharing its bytes, not all in the read) read the general
way."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from helpers import box_chunks, other_blosc_blocks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import b2store
from b2store.chunk import native
from b2store.chunk.header import ChunkHeader
from b2store.constants import SpecialValue
from b2store.errors import FormatError
from b2store.frame import chunk_bounds, sources
from b2store.nd import read_chunks
from b2store.nd.geometry import blocks_touched

pytestmark = pytest.mark.skipif(not read_chunks.available(), reason="the extensions are not built")


@pytest.fixture(autouse=True)
def _runs_and_parts(request, monkeypatch):
    """The reads here go through the runs and parts paths: a box of a few chunks of a
    local frame would otherwise be read by read_box, in one call (the tests that read
    boxes that way ask for ``box_reads``)."""
    if "box_reads" not in request.fixturenames:
        monkeypatch.setattr(read_chunks, "BOX_CHUNKS", 0)


@pytest.fixture
def box_reads(monkeypatch):
    """Per read_box call: the chunks it placed and those it left."""
    calls = []
    kernels = read_chunks._read_chunks
    read_box = kernels.read_box

    class Counting:
        decode_run = staticmethod(kernels.decode_run)
        decode_part = staticmethod(kernels.decode_part)
        read_parts = staticmethod(kernels.read_parts)

        @staticmethod
        def read_box(fd, offsets, stored, base, lo, hi, shape, chunks, blocks, *rest):
            n = read_box(fd, offsets, stored, base, lo, hi, shape, chunks, blocks, *rest)
            left = rest[-1][:n].tolist()
            numbers = [number for number, _, _ in box_chunks(lo, hi, shape, chunks, blocks)]
            calls.append(([k for k in numbers if k not in left], left))
            return n

    monkeypatch.setattr(read_chunks, "_read_chunks", Counting)
    return calls


@pytest.fixture
def runs_done(monkeypatch):
    """How many chunks the C loop placed, read by read."""
    placed = []
    one_run = read_chunks._run

    def run(*a, **k):
        n = one_run(*a, **k)
        placed.append(n)
        return n

    monkeypatch.setattr(read_chunks, "_run", run)
    return placed


def _grid_data(shape, dtype="<i4"):
    return np.arange(np.prod(shape), dtype=dtype).reshape(shape) * 7 % 1009


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize(
    "shape,chunks,blocks",
    [
        ((1000,), (64,), (16,)),
        ((95, 70), (10, 20), (10, 20)),  # blocks are the chunks
        ((95, 70), (10, 20), (4, 7)),  # padded blocks, edge chunks
        ((9, 17, 23), (4, 5, 6), (2, 5, 3)),
        ((5, 6, 7, 8), (2, 3, 4, 5), (1, 2, 4, 2)),
    ],
)
def test_whole_reads_of_small_chunks_match_numpy(
    tmp_path, runs_done, nthreads, shape, chunks, blocks
):
    data = _grid_data(shape)
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=chunks, blocks=blocks)
    native.set_nthreads(nthreads)
    try:
        np.testing.assert_array_equal(arr[...], data)
        nchunks = arr.schunk.nchunks
        assert sum(runs_done) == nchunks
        # A selection cutting the edges: the inner chunks in runs, the others one by one.
        key = tuple(slice(1, n - 1) for n in shape)
        np.testing.assert_array_equal(arr[key], data[key])
        key = tuple(slice(None, None, 2) for _ in shape)
        np.testing.assert_array_equal(arr[key], data[key])
    finally:
        native.set_nthreads(None)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_selection_reads_what_numpy_does(tmp_path, data):
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.integers(1, 12)) for _ in range(ndim))
    chunks = tuple(data.draw(st.integers(1, n)) for n in shape)
    blocks = tuple(data.draw(st.integers(1, c)) for c in chunks)
    values = _grid_data(shape, "<f8")
    path = tmp_path / f"h{abs(hash((shape, chunks, blocks)))}.b2nd"
    arr = b2store.asarray(values, path, chunks=chunks, blocks=blocks, mode="w")
    key = []
    for n in shape:
        lo = data.draw(st.integers(0, n - 1))
        hi = data.draw(st.integers(lo + 1, n))
        key.append(slice(lo, hi, data.draw(st.sampled_from([1, 1, 2]))))
    key = tuple(key)
    np.testing.assert_array_equal(arr[key], values[key])


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_few_chunk_planners_agree_with_the_numpy_ones(data):
    # split_whole and stored_runs plan a few chunks in Python lists and many with NumPy
    # (one costs 35 us less on a small box): both plan the same, down to the order.
    from b2store.nd.indexing import normalize
    from b2store.nd.indexing import split_whole as split

    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.integers(1, 14)) for _ in range(ndim))
    chunks = tuple(data.draw(st.integers(1, n)) for n in shape)
    blocks = tuple(data.draw(st.integers(1, c)) for c in chunks)
    key = []
    for n in shape:
        lo = data.draw(st.integers(0, n - 1))
        hi = data.draw(st.integers(lo + 1, n))
        key.append(slice(lo, hi, data.draw(st.sampled_from([1, 1, 1, 2]))))
    dims = normalize(tuple(key), shape)[0]
    few = split(dims, chunks, blocks, shape)
    import b2store.nd.indexing as indexing

    kept = indexing._FEW_COMBINATIONS
    indexing._FEW_COMBINATIONS = 0
    try:
        many = split(dims, chunks, blocks, shape)
    finally:
        indexing._FEW_COMBINATIONS = kept
    for k in (0, 1):  # the chunks decoded whole, then those of which a few blocks are read
        assert (few[k] is None) == (many[k] is None)
        if few[k] is not None:
            for a, b in zip(few[k], many[k]):
                np.testing.assert_array_equal(a, b)
    assert list(few[2]) == list(many[2])

    # Runs: chunks at random offsets of a section, some special, some sharing bytes.
    section = data.draw(st.integers(1, 5000))
    entries = np.array(
        data.draw(st.lists(st.integers(-3, section + 2), min_size=1, max_size=40)), np.int64
    )
    inside = entries[(entries >= 0) & (entries < section)]
    stored = np.append(np.unique(inside), np.int64(section))
    max_bytes = data.draw(st.integers(1, 3000))
    planned = [
        list(chunk_bounds.plan_runs(entries, stored, section, max_bytes)),
        list(chunk_bounds.plan_few_runs(entries, stored, section, max_bytes)),
    ]
    assert len(planned[0]) == len(planned[1])
    for a, b in zip(*planned):
        assert a[:2] == b[:2]
        for x, y in zip(a[2:], b[2:]):
            np.testing.assert_array_equal(x, y)


def test_a_whole_read_takes_a_read_per_run_not_two_per_chunk(tmp_path, monkeypatch):
    data = _grid_data((400, 300))
    b2store.asarray(data, tmp_path / "a.b2nd", chunks=(20, 30), blocks=(10, 30)).close()
    arr = b2store.open(tmp_path / "a.b2nd")
    reads = []
    plain = sources.FileSource.read

    def read(self, offset, size):
        reads.append(size)
        return plain(self, offset, size)

    monkeypatch.setattr(sources.FileSource, "read", read)
    np.testing.assert_array_equal(arr[:], data)
    assert arr.schunk.nchunks == 200
    # One read of the chunks (about 100 kB), not 400.
    assert len(reads) == 1 and reads[0] < arr.schunk.cbytes
    reads.clear()
    monkeypatch.setattr(chunk_bounds, "RUN_BYTES", 8 << 10)
    monkeypatch.setattr(chunk_bounds.ChunkBounds.stored_runs, "__defaults__", (8 << 10, None))
    np.testing.assert_array_equal(arr[:], data)
    assert 1 < len(reads) < 40 and max(reads) <= 8 << 10


def test_special_chunks_among_stored_ones(tmp_path, runs_done):
    data = _grid_data((60, 40)).astype("<f8")
    data[20:40] = 0  # two rows of chunks of zeros: special chunks, no bytes stored
    data[40:60, :20] = 2.5  # one repeated value
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(20, 20), blocks=(10, 20))
    offsets = arr.schunk.committed().offsets
    assert (offsets < 0).sum() >= 2
    np.testing.assert_array_equal(arr[:], data)
    # The repeated value is stored as a 40-byte special chunk: it too is read alone.
    headers = [ChunkHeader.from_bytes(arr.schunk.get_chunk(i)) for i in range(len(offsets))]
    special = [h.special != SpecialValue.NOT_SPECIAL for h in headers]
    assert sum(special) == 3 and (offsets < 0).sum() == 2
    assert sum(runs_done) == len(offsets) - 3


def test_a_damaged_chunk_in_a_run_is_reported_by_name(tmp_path):
    data = np.random.default_rng(0).normal(size=(60, 60))
    path = tmp_path / "a.b2nd"
    arr = b2store.asarray(data, path, chunks=(20, 20), blocks=(10, 20))
    assert arr.schunk.nchunks == 9
    _name, at, cbytes = arr.schunk.chunk_span(4)
    arr.close()
    raw = bytearray(path.read_bytes())
    raw[at + cbytes - 8 : at + cbytes] = b"\xff" * 8  # the end of its last stream
    path.write_bytes(bytes(raw))
    arr = b2store.open(path)
    with pytest.raises(FormatError, match="chunk 4|stream|block"):
        arr[:]
    # The chunks around it read.
    np.testing.assert_array_equal(arr[:20], data[:20])


def _kernel_read_bytes() -> int:
    """The bytes the kernel counts this process as having read (Linux's ``rchar``)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


@pytest.mark.parametrize(
    "shape,chunks,blocks",
    [
        ((90, 80), (30, 80), (5, 80)),  # blocks of whole rows: boxes read straight into out
        ((90, 80), (30, 40), (7, 9)),  # padded blocks, cut along both dimensions
        ((12, 30, 20), (4, 30, 20), (1, 10, 20)),
    ],
)
def test_chunks_stored_raw_are_read_in_part_in_c(tmp_path, shape, chunks, blocks):
    # Data that does not compress is stored raw (no block starts): each block lies at its
    # place after the header, so a small read reads that block alone, in C.
    from b2store.chunk.decoder import chunk_info

    data = np.random.default_rng(7).integers(0, 2**32, shape, dtype="<u4")
    # (clevel 0: stored raw whatever the data, padded blocks' zeros too)
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=chunks, blocks=blocks, clevel=0)
    assert all(chunk_info(arr.schunk.get_chunk(i)).memcpyed for i in range(arr.schunk.nchunks))
    done = []
    small = read_chunks.read_small

    def spied(*args):
        done.append(small(*args))
        return done[-1]

    rng = np.random.default_rng(8)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(read_chunks, "read_small", spied)
        for _ in range(30):
            at = tuple(int(rng.integers(0, n)) for n in shape)
            assert arr[at] == data[at]
            lo = [int(rng.integers(0, n)) for n in shape]
            key = tuple(slice(a, a + int(rng.integers(1, 9))) for a in lo)
            np.testing.assert_array_equal(arr[key], data[key])
        assert done and all(done)
    np.testing.assert_array_equal(arr[5:40], data[5:40])  # boxes over chunks
    np.testing.assert_array_equal(arr[:], data)
    if os.path.exists("/proc/self/io"):
        at = (shape[0] - 1, *(n // 2 for n in shape[1:]))
        before = _kernel_read_bytes()
        assert arr[at] == data[at]
        chunk_bytes = math.prod(chunks) * 4
        assert _kernel_read_bytes() - before < chunk_bytes / 2


def test_a_raw_chunk_whose_header_lies_is_read_by_python_which_names_it(tmp_path):
    # A raw chunk's cbytes that is not its items and header: the C read leaves the chunk,
    # and the Python path says what is wrong, as it would have without the C read.
    data = np.random.default_rng(9).integers(0, 2**32, (60, 60), dtype="<u4")
    path = tmp_path / "a.b2nd"
    arr = b2store.asarray(data, path, chunks=(20, 60), blocks=(5, 60))
    _name, at, cbytes = arr.schunk.chunk_span(1)
    arr.close()
    raw = bytearray(path.read_bytes())
    raw[at + 12 : at + 16] = (cbytes - 4).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    arr = b2store.open(path)
    for key in [(25, 3), (slice(21, 23), slice(0, 60)), slice(20, 40), slice(None)]:
        with pytest.raises(FormatError, match="cbytes"):
            arr[key]
    np.testing.assert_array_equal(arr[:20], data[:20])
    np.testing.assert_array_equal(arr[40:], data[40:])


def test_chunks_that_share_their_bytes(tmp_path, runs_done):
    data = _grid_data((40, 30))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(10, 30), blocks=(5, 30))
    schunk = arr.schunk
    state = schunk.committed()
    offsets = state.offsets.copy()
    offsets[2] = offsets[0]  # chunk 2 names chunk 0's bytes, as a frame may
    schunk._state = state._replace(offsets=offsets)
    expected = data.copy()
    expected[20:30] = data[0:10]
    np.testing.assert_array_equal(arr[:], expected)
    assert sum(runs_done) == 4


def test_a_chunk_with_more_room_than_a_run_is_read_alone(tmp_path, monkeypatch, runs_done):
    data = _grid_data((40, 30))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(10, 30), blocks=(5, 30))
    state = arr.schunk.committed()
    sizes = np.diff(np.append(np.sort(state.offsets), state.header.cbytes))
    smaller = int(sizes.min()) - 1
    monkeypatch.setattr(chunk_bounds.ChunkBounds.stored_runs, "__defaults__", (smaller, None))
    np.testing.assert_array_equal(arr[:], data)
    assert sum(runs_done) == 0  # every chunk read the general way


def test_stored_runs_names_only_chunks_of_the_chunks_section(tmp_path):
    data = _grid_data((40, 30))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(10, 30), blocks=(5, 30))
    schunk = arr.schunk
    state = schunk.committed()
    offsets = state.offsets.copy()
    offsets[1] = state.header.cbytes + 5  # past the chunks section
    offsets[3] = -(1 << 62)  # not a chunk's offset, nor a special one's
    state = state._replace(offsets=offsets)
    got = list(schunk.stored_runs(np.arange(4, dtype=np.int64), state))
    named = sorted(int(i) for _, which, _, _ in got for i in which)
    assert named == [0, 2]
    with pytest.raises(FormatError, match="offsets"):
        schunk._state = state
        arr[:]


def test_a_sparse_frame_reads_each_chunk_alone(tmp_path, runs_done):
    data = _grid_data((40, 30))
    arr = b2store.asarray(
        data, tmp_path / "s.b2nd", chunks=(10, 30), blocks=(5, 30), contiguous=False
    )
    assert not arr.schunk.contiguous
    np.testing.assert_array_equal(arr[:], data)
    assert sum(runs_done) == 0


@pytest.mark.parametrize("filters", [["delta", "shuffle"], ["shuffle", "delta"]])
def test_delta_chunks_are_read_in_runs(tmp_path, runs_done, filters):
    # The C loop decodes a DELTA chunk's block 0 before its others (each is XORed with it).
    data = _grid_data((60, 50), "<i8")
    arr = b2store.asarray(
        data, tmp_path / "a.b2nd", chunks=(20, 25), blocks=(4, 25), filters=filters,
        filters_meta=[0, 0],
    )  # fmt: skip
    np.testing.assert_array_equal(arr[...], data)
    assert sum(runs_done) == arr.schunk.nchunks == 6


def test_chunks_of_2_mib_are_read_in_runs_and_larger_ones_by_groups(tmp_path, runs_done):
    # read_chunks.MAX_CHUNK_BYTES: 64^3 float64 chunks read faster decoded whole in runs.
    data = np.arange(128 * 64 * 64, dtype="<f8").reshape(128, 64, 64) * 0.5
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(64, 64, 64), blocks=(16, 16, 16))
    np.testing.assert_array_equal(arr[...], data)
    assert sum(runs_done) == 2
    runs_done.clear()
    arr = b2store.asarray(data, tmp_path / "b.b2nd", chunks=(65, 64, 64), blocks=(16, 16, 16))
    np.testing.assert_array_equal(arr[...], data)
    assert sum(runs_done) == 0


def test_memory_frames_read_in_runs(runs_done):
    data = _grid_data((40, 30))
    arr = b2store.asarray(data, None, chunks=(10, 30), blocks=(5, 30))
    np.testing.assert_array_equal(arr[:], data)
    assert sum(runs_done) == 4


@pytest.mark.parametrize(
    "change,match",
    [
        (dict(ends=np.array([10**9], np.int64)), "bytes"),
        (dict(origins=np.array([[35, 0]], np.int64)), "items"),
        (dict(extents=np.array([[11, 30]], np.int64)), "items"),
        (dict(lows=np.array([[1, 0]], np.int64)), "items"),
        (dict(lows=np.array([[-1, 0]], np.int64)), "items"),
        (dict(chunk=np.empty(10, np.uint8)), "padded chunk"),
        (dict(done=np.zeros(2, np.uint8)), "differ in length"),
        (dict(which=np.array([0, 0], np.int64)), "differ in length"),
        (dict(which=np.array([1], np.int64)), "row 1 of 1"),
        (dict(which=np.array([-1], np.int64)), "row -1 of 1"),
        (dict(chunkshape=(10, 30, 1)), "dimensions|blocks"),
    ],
)
def test_decode_run_checks_its_arguments_first(change, match):
    from b2store.nd import _read_chunks

    data = _grid_data((40, 30))
    arr = b2store.asarray(data, None, chunks=(10, 30), blocks=(5, 30))
    chunk0 = arr.schunk.get_chunk(0)
    out = np.zeros((40, 30), data.dtype)
    args = dict(
        data=chunk0,
        starts=np.array([0], np.int64),
        ends=np.array([len(chunk0)], np.int64),
        which=np.array([0], np.int64),
        origins=np.array([[30, 0]], np.int64),
        lows=np.array([[0, 0]], np.int64),
        extents=np.array([[10, 30]], np.int64),
        chunkshape=(10, 30),
        blockshape=(5, 30),
        out=out,
        chunk=np.empty(1200, np.uint8),
        scratch=native._scratch(),
        done=np.zeros(1, np.uint8),
    )
    assert _read_chunks.decode_run(**args) == 1
    np.testing.assert_array_equal(out[30:], data[:10])
    out[:] = 0
    with pytest.raises(ValueError, match=match):
        _read_chunks.decode_run(**{**args, **change})
    assert not out.any()


# --- a few blocks of a cut chunk (SChunk.chunk_part, _read_chunks.decode_part) -------------


def _smooth(shape):
    """Values that differ everywhere and still compress (random ones are stored raw, and a
    raw chunk has no blocks to read apart)."""
    return np.arange(np.prod(shape), dtype="<f8").reshape(shape) * 0.25


@pytest.fixture
def parts_done(monkeypatch):
    """Per cut chunk the part path decoded: how many blocks."""
    placed = []
    kernels = read_chunks._read_chunks

    class Counting:
        decode_run = staticmethod(kernels.decode_run)

        @staticmethod
        def decode_part(src, blocks, *a, **k):
            done = kernels.decode_part(src, blocks, *a, **k)
            placed.append(len(blocks) if done else 0)
            return done

        @staticmethod
        def read_parts(*args):  # many cut chunks read in C: 0 for each it leaves
            which, lows, extents, chunks, blocks, done = (args[i] for i in (3, 5, 6, 7, 8, 13))
            before = done.copy()
            n = kernels.read_parts(*args)
            for j in which:
                region = [(lo, lo + e) for lo, e in zip(lows[j], extents[j])]
                new = done[j] and not before[j]
                placed.append(len(blocks_touched(region, chunks, blocks)) if new else 0)
            return n

        @staticmethod
        def read_box(fd, offsets, stored, base, lo, hi, shape, chunks, blocks, *rest):
            # (a small read's one chunk, and a few small chunks', planned in C too)
            n = kernels.read_box(fd, offsets, stored, base, lo, hi, shape, chunks, blocks, *rest)
            left = set(rest[-1][:n].tolist())
            for number, touched, _ in box_chunks(lo, hi, shape, chunks, blocks):
                placed.append(0 if number in left else touched)
            return n

    monkeypatch.setattr(read_chunks, "_read_chunks", Counting)
    return placed


@pytest.mark.parametrize(
    "shape,chunks,blocks,key",
    [
        ((1000,), (100,), (10,), (slice(95, 312),)),
        ((60, 70), (20, 35), (5, 7), (slice(18, 23), slice(30, 41))),
        ((64, 64, 32), (32, 32, 32), (8, 8, 8), (slice(20, 40), slice(28, 35), slice(3, 9))),
        ((8, 9, 10, 11), (4, 6, 5, 11), (2, 3, 5, 4), (slice(3, 5), 4, slice(None), slice(2, 9))),
    ],
)
def test_boxes_across_chunks_decode_only_their_blocks(
    tmp_path, parts_done, shape, chunks, blocks, key
):
    data = _smooth(shape)
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=chunks, blocks=blocks)
    np.testing.assert_array_equal(arr[key], data[key])
    assert parts_done and all(parts_done)  # every cut chunk took the part path
    # Each chunk decoded only the blocks the box touches in it, at most half of them.
    per_chunk = np.prod([-(-c // b) for c, b in zip(chunks, blocks)])
    assert max(parts_done) * 2 <= per_chunk


def test_boxes_read_right_in_any_order_from_one_kept_buffer(tmp_path, parts_done):
    # The kept buffer is not cleared between chunks: each chunk's blocks must be read from
    # its own bytes, never from what an earlier chunk left there.
    rng = np.random.default_rng(4)
    data = _smooth((90, 90))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(30, 30), blocks=(5, 5))
    for _ in range(40):
        lo = rng.integers(0, 80, 2)
        hi = lo + rng.integers(1, 12, 2)
        key = (slice(lo[0], hi[0]), slice(lo[1], hi[1]))
        np.testing.assert_array_equal(arr[key], data[key])
    assert sum(parts_done) > 40


def test_boxes_from_threads_sharing_an_array(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    data = _smooth((120, 120))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(40, 40), blocks=(8, 8))
    keys = [(slice(a, a + 15), slice(b, b + 9)) for a, b in rng.integers(0, 100, (200, 2)).tolist()]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda k: arr[k], keys))
    for k, g in zip(keys, got):
        np.testing.assert_array_equal(g, data[k])


@pytest.mark.parametrize(
    "cparams",
    [
        dict(filters=["shuffle", "delta"], filters_meta=[0, 0]),  # DELTA: block 0 first
        dict(codec="lz4", filters=[], filters_meta=[]),
        dict(codec="zlib"),
    ],
    ids=["delta", "lz4-nofilter", "zlib"],
)
def test_boxes_of_other_pipelines(tmp_path, cparams):
    data = (np.arange(60 * 70) % 97).reshape(60, 70).astype("<i8")
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(20, 35), blocks=(5, 7), **cparams)
    key = (slice(18, 23), slice(30, 41))
    np.testing.assert_array_equal(arr[key], data[key])


def test_a_dictionary_chunk_takes_the_general_path(tmp_path, parts_done):
    blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the dictionary chunks")
    data = (np.arange(64 * 64) % 251).reshape(64, 64).astype("<f8")
    path = tmp_path / "d.b2nd"
    cparams = {"codec": blosc2.Codec.ZSTD, "use_dict": True}
    blosc2.asarray(
        data, urlpath=str(path), mode="w", chunks=(32, 32), blocks=(8, 8), cparams=cparams
    )
    arr = b2store.open(path)
    assert arr.schunk.nchunks == 4
    key = (slice(30, 34), slice(30, 34))
    np.testing.assert_array_equal(arr[key], data[key])


def test_a_stream_past_its_block_is_refused_or_read_as_before(tmp_path, parts_done):
    # Block 1's first stream made to claim more bytes than its block holds: the bytes after
    # it (block 2's) are not read by a part read, so it must not be served from them.
    data = _smooth((40, 80))
    path = tmp_path / "a.b2nd"
    arr = b2store.asarray(data, path, chunks=(40, 40), blocks=(10, 40), filters=[], filters_meta=[])
    _name, at, _cbytes = arr.schunk.chunk_span(0)
    arr.close()
    raw = bytearray(path.read_bytes())
    assert not raw[at + 2] & 0x02  # not stored raw: it has blocks to read apart
    bstart1 = int.from_bytes(raw[at + 32 + 4 : at + 32 + 8], "little")
    bstart2 = int.from_bytes(raw[at + 32 + 8 : at + 32 + 12], "little")
    csize = int.from_bytes(raw[at + bstart1 : at + bstart1 + 4], "little", signed=True)
    assert 0 < csize < bstart2 - bstart1
    raw[at + bstart1 : at + bstart1 + 4] = (bstart2 - bstart1).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    arr = b2store.open(path)
    key = (slice(12, 14), slice(30, 50))  # block 1 of chunks 0 and 1
    try:
        part = arr[key]
    except FormatError as exc:
        assert "block" in str(exc) or "stream" in str(exc) or "chunk" in str(exc)
    else:
        # Served: then exactly what the general path gives.
        np.testing.assert_array_equal(
            part[:, :10], arr.schunk.decompress_chunk(0).view("<f8").reshape(40, 40)[12:14, 30:]
        )
    assert parts_done[0] == 0  # chunk 0 (read first) refused by the part path


def test_decode_part_checks_its_arguments_first():
    from b2store.nd import _read_chunks

    data = _grid_data((20, 30))
    arr = b2store.asarray(data, None, chunks=(20, 30), blocks=(5, 30))
    chunk0 = np.frombuffer(arr.schunk.get_chunk(0), np.uint8)
    layout_ends = np.full(4, len(chunk0), np.int64)
    out = np.zeros((5, 30), data.dtype)
    args = (chunk0, np.array([1], np.int64), layout_ends, (20, 30), (5, 30), [5, 0], [10, 30], out)
    with pytest.raises(ValueError, match="block 4 of 4"):
        _read_chunks.decode_part(
            chunk0, np.array([4], np.int64), *args[2:], np.empty(2400, np.uint8), native._scratch()
        )
    with pytest.raises(ValueError, match="out has"):
        _read_chunks.decode_part(
            *args[:7], np.zeros((4, 30), data.dtype), np.empty(2400, np.uint8), native._scratch()
        )
    with pytest.raises(ValueError, match="region"):
        _read_chunks.decode_part(
            *args[:5],
            [5, 0],
            [25, 30],
            np.zeros((20, 30), data.dtype),
            np.empty(2400, np.uint8),
            native._scratch(),
        )
    assert not out.any()
    assert _read_chunks.decode_part(*args, np.empty(2400, np.uint8), native._scratch())
    np.testing.assert_array_equal(out, data[5:10])
    # Ends that cut the block short: not decoded (False), nothing written.
    out[:] = 0
    short = np.zeros(4, np.int64) + 40
    assert not _read_chunks.decode_part(
        chunk0,
        np.array([1], np.int64),
        short,
        *args[3:],
        np.empty(2400, np.uint8),
        native._scratch(),
    )
    assert not out.any()


def test_chunks_cut_at_the_edges_of_a_read_are_decoded_in_runs(tmp_path, runs_done, parts_done):
    data = _grid_data((95, 70))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(10, 20), blocks=(5, 20))
    key = (slice(1, 94), slice(3, 69))
    np.testing.assert_array_equal(arr[key], data[key])
    # Every chunk touches both of its blocks but the last row's (rows 90..94 of 90..95: one
    # block of two, left to the part path).
    assert sum(runs_done) == 9 * 4 and sum(parts_done) == 4
    key = (slice(1, 94, 2), slice(3, 69))  # a step: not in runs
    runs_done.clear()
    np.testing.assert_array_equal(arr[key], data[key])
    assert sum(runs_done) == 0


@pytest.mark.parametrize("where", ["file", "memory", "sparse"])
def test_boxes_read_alike_from_every_layout(tmp_path, parts_done, where):
    data = _smooth((60, 70))
    path = None if where == "memory" else tmp_path / "a.b2nd"
    arr = b2store.asarray(data, path, chunks=(20, 35), blocks=(5, 7), contiguous=where != "sparse")
    key = (slice(18, 23), slice(30, 41))
    np.testing.assert_array_equal(arr[key], data[key])
    assert len(parts_done) == 4 and all(parts_done)


def test_read_pieces_into_reports_a_file_cut_short_under_it(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * 4)
    source = sources.FileSource(path)
    out = np.zeros(300, np.uint8)
    source.read_pieces_into([(10, out[:100]), (500, out[100:])])
    assert out.tobytes() == (bytes(range(256)) * 4)[10:110] + (bytes(range(256)) * 4)[500:700]
    with open(path, "r+b") as fh:
        fh.truncate(50)  # after its size was taken
    with pytest.raises(FormatError, match="frame: expected 100 bytes at 10, found 40"):
        source.read_pieces_into([(10, out[:100])])
    with pytest.raises(FormatError, match="frame"):
        source.read_pieces_into([(-1, out[:100])])
    with pytest.raises(FormatError, match="frame"):
        source.read_pieces_into([(0, out[:10]), (40, out[:100])])


def test_read_pieces_into_without_preadv_reads_the_same(tmp_path, monkeypatch):
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * 4)
    source = sources.FileSource(path)
    monkeypatch.delattr(sources.os, "preadv")
    out = np.zeros(300, np.uint8)
    source.read_pieces_into([(10, out[:100]), (500, out[100:])])
    assert out.tobytes() == (bytes(range(256)) * 4)[10:110] + (bytes(range(256)) * 4)[500:700]


@pytest.mark.parametrize("factor", [2, 5])
def test_chunks_whose_blosc_blocks_are_not_the_arrays_blocks(tmp_path, parts_done, factor):
    # Blosc blocks of several array blocks each: the array's block numbers name other bytes
    # there (or none: block 24 of a chunk of 5), so no read may decode "its" blocks by
    # number. Whole reads take the runs; boxes, the part path's refusal and the general
    # path's whole-chunk decode; all equal NumPy.
    from b2store.chunk.decoder import chunk_info

    x = _smooth((80, 60)).astype("<f4")
    arr = other_blosc_blocks(x, tmp_path / "a.b2nd", (40, 30), (8, 6), factor)
    assert chunk_info(arr.schunk.get_chunk(0)).blocksize == factor * 8 * 6 * 4
    np.testing.assert_array_equal(arr[...], x)  # in runs: decoded whole
    keys = [
        (slice(35, 45), slice(25, 35)),  # four chunks' corners: blocks 24 and others
        (slice(0, 8), slice(24, 36)),
        (9, 7),  # one item, in the fast path of one chunk
        (slice(17, 18), slice(13, 14)),
        (slice(79, 80), slice(0, 60, 7)),
    ]
    for key in keys:
        np.testing.assert_array_equal(arr[key], x[key])
    assert not any(parts_done)


def test_a_chunk_of_other_blosc_blocks_that_does_not_decode_names_both(tmp_path):
    # The general path decodes a chunk of other Blosc blocks whole; when that fails, the
    # error names the block size as well as what broke (a damaged chunk often shows first
    # as fewer, larger blocks: tests/hardening's cframe-fewer-blocks finding).
    x = _smooth((80, 60)).astype("<f4")
    arr = other_blosc_blocks(x, tmp_path / "a.b2nd", (40, 30), (8, 6), 5)
    chunk = bytearray(arr.schunk.get_chunk(3))
    header = ChunkHeader.from_bytes(bytes(chunk))
    first = int.from_bytes(chunk[header.header_size : header.header_size + 4], "little")
    chunk[first + 4 : first + 12] = b"\xff" * 8  # block 0's stream, past its size
    arr.close()
    arr = b2store.open(tmp_path / "a.b2nd", mode="a")
    arr.schunk.update_chunk(3, bytes(chunk))
    with pytest.raises(FormatError, match=r"chunk 3 blocksize: expected 192 bytes .*960"):
        arr[41:43, 31:33]


# --- many cut chunks read from the file in one call (_read_chunks.read_parts) ---------------------


def _open_fds() -> int:
    """The descriptors this process has open, once the garbage of earlier tests is
    collected: an object of theirs finalized during a test closes one (a count that fell
    by one failed a run), which says nothing of what the test's reads keep."""
    import gc

    gc.collect()
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("nthreads", [1, 2])
def test_a_band_across_many_chunks_is_read_from_the_file_in_c(
    tmp_path, parts_done, monkeypatch, nthreads
):
    # A band one block thick across 8x8 chunks of 2x2x2 blocks (1 MB of blocks in all):
    # each chunk a few blocks, all read, decoded and placed by read_parts (with two
    # threads, shared between them), none by the one-chunk part path.
    import threading

    data = _smooth((128, 128, 16))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(16, 16, 16), blocks=(8, 8, 8))

    def one_chunk(*args, **kwargs):
        raise AssertionError("a chunk read alone")

    threads = set()
    parts = read_chunks._parts

    def counted(*args, **kwargs):
        threads.add(threading.get_ident())
        return parts(*args, **kwargs)

    monkeypatch.setattr(read_chunks, "read_part", one_chunk)
    monkeypatch.setattr(read_chunks, "_parts", counted)
    native.set_nthreads(nthreads)
    try:
        key = (slice(None), slice(None), slice(5, 7))
        np.testing.assert_array_equal(arr[key], data[key])
        assert len(parts_done) == 64 and set(parts_done) == {4}
        assert len(threads) == nthreads
        parts_done.clear()
        key = (slice(3, 125), slice(1, 2), slice(0, 9))  # cut along every dimension
        np.testing.assert_array_equal(arr[key], data[key])
        assert len(parts_done) == 8 and all(parts_done)
    finally:
        native.set_nthreads(None)


def test_read_parts_closes_the_descriptors_it_takes(tmp_path):
    data = _smooth((60, 70))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(20, 35), blocks=(5, 7))
    key = (slice(18, 23), slice(30, 41))
    arr[key]
    before = _open_fds()
    for _ in range(50):
        np.testing.assert_array_equal(arr[key], data[key])
    assert _open_fds() <= before  # (none kept: other threads may close theirs)
    arr.close()
    with pytest.raises(Exception, match="closed"):
        arr[key]


def test_special_chunks_among_cut_ones_take_the_general_path(tmp_path, parts_done):
    data = _smooth((60, 70))
    data[:20, :35] = 0  # chunk 0 all zeros: stored as a special chunk
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(20, 35), blocks=(5, 7))
    assert arr.schunk.committed().offsets[0] < 0
    key = (slice(18, 23), slice(30, 41))
    np.testing.assert_array_equal(arr[key], data[key])
    # Chunk 0 left by read_parts (no position in the file), then by the part path, which
    # takes no special chunk either; the three others placed in C.
    assert parts_done[0] == 0 and all(parts_done[1:4])


def test_a_frame_cut_short_under_a_reader_is_reported(tmp_path, parts_done):
    data = _smooth((60, 70))
    path = tmp_path / "a.b2nd"
    arr = b2store.asarray(data, path, chunks=(20, 35), blocks=(5, 7))
    arr.close()
    arr = b2store.open(path)
    _name, at, cbytes = arr.schunk.chunk_span(3)
    with open(path, "r+b") as fh:
        fh.truncate(at + cbytes // 2)  # the last chunk's last blocks gone, after opening
    key = (slice(38, 43), slice(63, 70))  # chunk 3's last blocks: not read in C
    with pytest.raises(FormatError, match="truncated|chunk|frame"):
        arr[key]
    assert parts_done and not any(parts_done)


def test_a_chunk_larger_than_the_kept_room_is_read_the_general_way(
    tmp_path, parts_done, monkeypatch
):
    data = _smooth((60, 70))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(20, 35), blocks=(5, 7))
    monkeypatch.setattr(read_chunks, "_ROOM_MAX", 64)
    monkeypatch.setattr(read_chunks, "_local", type(read_chunks._local)())  # no room kept yet
    key = (slice(18, 23), slice(30, 41))
    np.testing.assert_array_equal(arr[key], data[key])
    assert not any(parts_done)  # neither read_parts nor the part path had the room


def test_read_parts_checks_its_arguments_first(tmp_path):
    from b2store.nd import _read_chunks

    data = _smooth((20, 30))
    path = tmp_path / "a.b2nd"
    arr = b2store.asarray(data, path, chunks=(20, 30), blocks=(5, 6))
    found = arr.schunk.file_positions(np.array([0], np.int64), arr.schunk.committed())
    fd, positions, limits = found
    try:
        rows = np.array([[0, 0]], np.int64)
        args = dict(
            fd=fd, positions=positions, limits=limits, which=np.array([0], np.int64),
            origins=rows, lows=np.array([[5, 6]], np.int64),
            extents=np.array([[5, 6]], np.int64), chunkshape=(20, 30), blockshape=(5, 6),
            out=np.zeros((5, 6)), room=np.empty(1 << 16, np.uint8),
            chunk=np.empty(4800, np.uint8), scratch=native._scratch(),
            done=np.zeros(1, np.uint8),
        )  # fmt: skip
        bad = [
            (dict(which=np.array([1], np.int64)), "row 1 of 1"),
            (dict(extents=np.array([[16, 6]], np.int64)), "items 5\\+16 of 20"),
            (dict(origins=np.array([[1, 0]], np.int64)), "to 1 along dimension 0"),
            (dict(positions=np.array([-2], np.int64)), "bytes at -2"),
            (dict(limits=np.array([5, 6], np.int64)), "differ in length"),
            (dict(done=np.zeros(2, np.uint8)), "differ in length"),
            (dict(chunk=np.empty(10, np.uint8)), "a padded chunk 4800"),
        ]
        for change, match in bad:
            with pytest.raises(ValueError, match=match):
                _read_chunks.read_parts(**{**args, **change})
            assert not args["out"].any() and not args["done"].any()
        # A room too small for the chunk, a limit short of it, no position: left undone.
        for change in (
            dict(room=np.empty(100, np.uint8)),
            dict(limits=limits // 2),
            dict(positions=np.array([-1], np.int64)),
        ):
            assert _read_chunks.read_parts(**{**args, **change}) == 0
            assert not args["out"].any() and not args["done"].any()
        assert _read_chunks.read_parts(**args) == 1
        np.testing.assert_array_equal(args["out"], data[5:10, 6:12])
        assert args["done"][0] == 1
    finally:
        import os

        os.close(fd)


@pytest.mark.parametrize(
    "kind", ["common", "delta", "raw"], ids=["common", "delta-then-runs", "raw"]
)
def test_chunks_alone_in_the_frame_are_read_in_c_or_else_as_runs(
    tmp_path, runs_done, parts_done, kind
):
    # A column of a 2-d array: no two of its chunks are neighbours in the frame, so each
    # would be a run of its own; read_parts reads them whole from the file instead (those
    # stored raw too: their blocks lie at known places). The chunks it does not take (DELTA)
    # are then read as runs, one each.
    rng = np.random.default_rng(7)
    noise = rng.integers(0, 256, (90, 60, 8), dtype=np.uint8).view("<u8")[..., 0]
    data = noise if kind == "raw" else _smooth((90, 60))  # (noise is stored raw)
    cparams = {"filters": ["shuffle", "delta"], "filters_meta": [0, 0]} if kind == "delta" else {}
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(10, 20), blocks=(5, 20), **cparams)
    key = (slice(None), slice(25, 26))
    np.testing.assert_array_equal(arr[key], data[key])
    assert all(b2store.chunk_info(arr.schunk.get_chunk(i)).memcpyed == (kind == "raw")
               for i in range(0, 27, 3))  # fmt: skip
    if kind != "delta":
        assert parts_done == [2] * 9 and sum(runs_done) == 0
    else:
        assert parts_done == [0] * 9 and sum(runs_done) == 9
    runs_done.clear()
    parts_done.clear()
    key = (slice(None), slice(0, 40))  # rows of two neighbours: runs, none alone
    np.testing.assert_array_equal(arr[key], data[key])
    assert sum(runs_done) == 18 and not parts_done


# --- a box of a few chunks planned and read in one call (_read_chunks.read_box) -------------


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_boxes_of_a_few_chunks_are_read_in_one_call(tmp_path_factory, box_reads, data):
    ndim = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.integers(1, 12)) for _ in range(ndim))
    chunks = tuple(data.draw(st.integers(1, n)) for n in shape)
    blocks = tuple(data.draw(st.integers(1, c)) for c in chunks)
    values = _smooth(shape)
    path = tmp_path_factory.mktemp("box") / "a.b2nd"
    arr = b2store.asarray(values, path, chunks=chunks, blocks=blocks)
    key = []
    for n in shape:
        lo = data.draw(st.integers(0, n - 1))
        key.append(data.draw(st.sampled_from([slice(lo, data.draw(st.integers(lo + 1, n))), lo])))
    key = tuple(key)
    box_reads.clear()
    np.testing.assert_array_equal(arr[key], values[key])
    lo = [k.start if isinstance(k, slice) else k for k in key]
    hi = [k.stop if isinstance(k, slice) else k + 1 for k in key]
    touched = [n for n, _, _ in box_chunks(lo, hi, shape, chunks, blocks)]
    if 1 < len(touched) <= read_chunks.BOX_CHUNKS:  # (a read inside one chunk has its own path)
        assert box_reads, key
        placed, left = box_reads[-1]
        assert sorted(placed + left) == sorted(touched)
    arr.close()


@pytest.mark.parametrize("kind", ["special", "delta", "raw"])
def test_chunks_read_box_leaves_are_read_the_other_ways(tmp_path, box_reads, kind):
    rng = np.random.default_rng(8)
    data = _smooth((60, 70))
    cparams = {}
    if kind == "special":
        data[:20, :35] = 0  # chunk 0: all zeros, no bytes stored
    elif kind == "delta":
        # (values that compress in blocks of 280 bytes: the smooth ones are stored raw with
        # DELTA, which a raw chunk lists but does not apply)
        data = (np.arange(60 * 70) % 4).reshape(60, 70).astype("<f8")
        cparams = {"filters": ["shuffle", "delta"], "filters_meta": [0, 0]}
    else:
        data[:20, :35] = rng.integers(0, 256, (20, 35, 8), dtype=np.uint8).view("<f8")[..., 0]
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(20, 35), blocks=(5, 7), **cparams)
    assert b2store.chunk_info(arr.schunk.get_chunk(0)).memcpyed == (kind == "raw")
    for key in [(slice(18, 23), slice(30, 41)), (slice(0, 40), slice(0, 70))]:
        box_reads.clear()
        np.testing.assert_array_equal(arr[key], data[key])
        placed, left = box_reads[0]
        expected = [n for n, _, _ in box_chunks(*zip(*[(k.start, k.stop) for k in key]),
                                                 (60, 70), (20, 35), (5, 7))]  # fmt: skip
        if kind == "delta":
            assert left == expected  # none taken: DELTA needs block 0
        elif kind == "raw":
            assert not left and sorted(placed) == sorted(expected)  # its blocks read in place
        else:
            assert 0 in left and 0 not in placed and len(placed) == len(expected) - 1


def test_a_box_with_enough_blocks_for_threads_or_of_many_chunks_is_split(tmp_path, box_reads):
    data = _smooth((128, 128, 16))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(16, 16, 16), blocks=(8, 8, 8))
    native.set_nthreads(2)
    try:
        key = (slice(0, 128), slice(0, 128), slice(5, 7))  # 64 chunks, 1 MB of blocks
        np.testing.assert_array_equal(arr[key], data[key])
        assert not box_reads  # shared between two threads instead
    finally:
        native.set_nthreads(1)
    try:
        np.testing.assert_array_equal(arr[key], data[key])
        assert len(box_reads) == 1 and len(box_reads[0][0]) == 64
        box_reads.clear()
        np.testing.assert_array_equal(arr[2:126, 3:125], data[2:126, 3:125])
        assert box_reads  # 64 chunks: still one call
        box_reads.clear()
        big = b2store.asarray(_smooth((72, 72)), tmp_path / "b.b2nd", chunks=(8, 8), blocks=(4, 4))
        np.testing.assert_array_equal(big[1:71, 1:71], _smooth((72, 72))[1:71, 1:71])
        assert not box_reads  # 81 chunks: split
    finally:
        native.set_nthreads(None)


def test_a_box_of_a_frame_cut_short_under_a_reader_is_reported(tmp_path, box_reads):
    data = _smooth((60, 70))
    path = tmp_path / "a.b2nd"
    b2store.asarray(data, path, chunks=(20, 35), blocks=(5, 7)).close()
    arr = b2store.open(path)
    _name, at, cbytes = arr.schunk.chunk_span(5)
    with open(path, "r+b") as fh:
        fh.truncate(at + cbytes // 2)
    with pytest.raises(FormatError, match="truncated|chunk|frame"):
        arr[38:60, 63:70]  # chunk 3's last blocks and chunk 5's
    assert box_reads[0] == ([3], [5])
    before = _open_fds()
    np.testing.assert_array_equal(arr[0:20, 0:35], data[0:20, 0:35])  # chunk 0: still there
    assert _open_fds() <= before  # (none kept: other threads may close theirs)


def test_read_box_checks_its_arguments_first(tmp_path):
    from b2store.nd import _read_chunks

    data = _smooth((20, 30))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(10, 15), blocks=(5, 5))
    state = arr.schunk.committed()
    fd, offsets, stored, base = arr.schunk.file_index(state)
    try:
        args = dict(
            fd=fd, offsets=offsets, stored=stored, base=base, lo=[5, 10], hi=[15, 20],
            shape=(20, 30), chunkshape=(10, 15), blockshape=(5, 5), out=np.zeros((10, 10)),
            room=np.empty(1 << 16, np.uint8), chunk=np.empty(1200, np.uint8),
            scratch=native._scratch(), left=np.zeros(4, np.int64),
        )  # fmt: skip
        bad = [
            (dict(lo=[5, 10, 0]), "a box of 3 and 2 dimensions"),
            (dict(hi=[15, 31]), r"items \[10, 31\) of 30"),
            (dict(lo=[15, 10]), r"items \[15, 15\) of 20"),
            (dict(out=np.zeros((10, 9))), "out has 9 items along 1"),
            (dict(left=np.zeros(3, np.int64)), "room for 3 chunks left, of 4"),
            (dict(stored=stored[::-1].copy()), "not ascending"),
            (dict(stored=stored[:0]), "no chunks section end"),
            (dict(chunk=np.empty(10, np.uint8)), "a padded chunk 1200"),
        ]
        for change, match in bad:
            with pytest.raises(ValueError, match=match):
                _read_chunks.read_box(**{**args, **change})
            assert not args["out"].any()
        # An index shorter than the grid: the chunks past it are left, never read.
        assert _read_chunks.read_box(**{**args, "offsets": offsets[:2].copy()}) == 2
        assert sorted(args["left"][:2]) == [2, 3]
        assert _read_chunks.read_box(**{**args, "room": np.empty(10, np.uint8)}) == 4
        assert _read_chunks.read_box(**args) == 0
        np.testing.assert_array_equal(args["out"], data[5:15, 10:20])
    finally:
        import os

        os.close(fd)


def test_boxes_read_in_one_call_from_threads_sharing_an_array(tmp_path, box_reads):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(9)
    data = _smooth((120, 120))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(40, 40), blocks=(8, 8))
    keys = [(slice(a, a + 15), slice(b, b + 9)) for a, b in rng.integers(0, 100, (300, 2)).tolist()]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda k: arr[k], keys))
    for k, g in zip(keys, got):
        np.testing.assert_array_equal(g, data[k])
    assert len(box_reads) > 50  # (the boxes across chunks; the others are inside one)
