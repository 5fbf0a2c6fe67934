"""Large chunks read in one compiled call per thread, straight into the output
(nd/read_chunks.py ``read_box`` with threads, ``_read_chunks._straight_to``): the same items as
NumPy for every layout and selection, every chunk the call does not take (special, DELTA,
stored raw, damaged) read the general way, and no Python per chunk."""

from __future__ import annotations

import os

import numpy as np
import pytest

import b2store
from b2store.chunk import native
from b2store.errors import FormatError
from b2store.nd import array as nd_array
from b2store.nd import read_chunks

pytestmark = pytest.mark.skipif(not read_chunks.available(), reason="the extensions are not built")


@pytest.fixture(autouse=True)
def _large(monkeypatch):
    """Chunks of more than 1 kB are large here (2 MiB otherwise): the tests stay small."""
    monkeypatch.setattr(read_chunks, "MAX_CHUNK_BYTES", 1024)
    yield
    native.set_nthreads(None)


@pytest.fixture
def calls(monkeypatch):
    """Per ``_read_chunks.read_box`` call: how many chunks it left; and the chunks read one
    by one in Python (``B2ndArray._read_chunk``)."""
    kernels = read_chunks._read_chunks
    seen: dict = {"box": [], "python": []}

    class Counting:
        def __getattr__(self, name):
            return getattr(kernels, name)

        @staticmethod
        def read_box(*args, **kwargs):
            n = kernels.read_box(*args, **kwargs)
            seen["box"].append(n)
            return n

    chunk_alone = nd_array.B2ndArray._read_chunk

    def read_chunk(self, nchunk, *args, **kwargs):
        seen["python"].append(nchunk)
        return chunk_alone(self, nchunk, *args, **kwargs)

    monkeypatch.setattr(read_chunks, "_read_chunks", Counting())
    monkeypatch.setattr(nd_array.B2ndArray, "_read_chunk", read_chunk)
    return seen


def _field(shape, dtype="<f4"):
    """Values that differ everywhere and still compress (random ones are stored raw)."""
    return (np.arange(np.prod(shape), dtype="<f8").reshape(shape) * 0.25).astype(dtype)


# (shape, chunks, blocks): blocks of whole trailing rows (python-blosc2's defaults are), the
# last chunk cut short; blocks of 1 row or more; 1-d and 2-d; its end not on a block's end.
STRAIGHT = [
    ((9, 40, 30), (4, 40, 30), (1, 20, 30)),
    ((10, 40, 30), (4, 40, 30), (2, 40, 30)),
    ((9, 40, 30), (4, 40, 30), (2, 40, 30)),
    ((10, 4, 5, 6), (3, 4, 5, 6), (1, 1, 5, 6)),
    ((50, 64), (8, 64), (2, 64)),
    ((3000,), (512,), (64,)),
]


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("shape,chunks,blocks", STRAIGHT)
def test_large_chunks_are_read_in_one_call_per_thread(
    tmp_path, calls, nthreads, shape, chunks, blocks
):
    data = _field(shape)
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=chunks, blocks=blocks)
    native.set_nthreads(nthreads)
    firsts = [slice(None), slice(1, None), slice(None, -1), slice(2, shape[0] - 2)]
    for first in firsts:
        key = (first,) + (slice(None),) * (len(shape) - 1)
        calls["box"].clear()
        np.testing.assert_array_equal(arr[key], data[key])
        # Every chunk placed by the compiled call, by one thread or two.
        assert 1 <= len(calls["box"]) <= nthreads and sum(calls["box"]) == 0, key
    assert not calls["python"]
    np.testing.assert_array_equal(np.asarray(arr), data)  # (read again: the same)


@pytest.mark.parametrize(
    "shape,chunks,blocks,key",
    [
        ((9, 40, 30), (4, 40, 30), (1, 20, 30), (slice(None), slice(0, 39))),  # rows cut
        ((9, 40, 30), (4, 40, 30), (1, 8, 30), (slice(None), slice(None), slice(3, 9))),
        ((9, 40, 30), (4, 20, 30), (1, 20, 30), (slice(None),)),  # chunks not full rows
        ((9, 40, 30), (4, 40, 30), (1, 40, 15), (slice(None),)),  # blocks not full rows
        ((9, 40, 30), (4, 40, 30), (1, 15, 30), (slice(None),)),  # padded blocks
    ],
)
def test_other_layouts_and_boxes_read_as_before(tmp_path, calls, shape, chunks, blocks, key):
    data = _field(shape)
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=chunks, blocks=blocks)
    native.set_nthreads(2)
    np.testing.assert_array_equal(arr[key], data[key])
    assert not calls["box"] and calls["python"]  # chunk by chunk, as large chunks were


def test_a_read_of_one_chunk_keeps_threads_over_its_blocks(tmp_path, calls):
    data = _field((9, 40, 30))  # (160 blocks a chunk: more than a small read's)
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(4, 40, 30), blocks=(1, 1, 30))
    native.set_nthreads(2)
    np.testing.assert_array_equal(arr[4:8], data[4:8])
    assert not calls["box"] and calls["python"] == [1]


@pytest.mark.parametrize("kind", ["special", "delta", "raw"])
def test_chunks_the_call_leaves_are_read_one_by_one(tmp_path, calls, kind):
    rng = np.random.default_rng(11)
    data = _field((9, 40, 30), "<f8")
    cparams = {}
    if kind == "special":
        data[4:8] = 0  # chunk 1: all zeros, no bytes stored
    elif kind == "delta":
        cparams = {"filters": ["shuffle", "delta"], "filters_meta": [0, 0]}
    else:
        data[4:8] = rng.integers(0, 256, (4, 40, 30, 8), dtype=np.uint8).view("<f8")[..., 0]
    arr = b2store.asarray(
        data, tmp_path / "a.b2nd", chunks=(4, 40, 30), blocks=(1, 20, 30), **cparams
    )
    native.set_nthreads(2)
    np.testing.assert_array_equal(arr[...], data)
    np.testing.assert_array_equal(arr[1:], data[1:])
    # DELTA needs block 0, which the call's reads never take: every chunk is left. A chunk
    # stored raw is read by the call, straight into the output.
    left = {"special": [1], "delta": [0, 1, 2], "raw": []}[kind]
    assert sorted(set(calls["python"])) == left


@pytest.mark.parametrize("nthreads", [1, 2])
def test_a_damaged_chunk_is_reported_as_when_read_alone(tmp_path, nthreads):
    data = _field((12, 40, 30))
    path = tmp_path / "a.b2nd"
    b2store.asarray(data, path, chunks=(4, 40, 30), blocks=(1, 20, 30)).close()
    arr = b2store.open(path)
    _name, at, cbytes = arr.schunk.chunk_span(1)
    with open(path, "r+b") as fh:
        fh.seek(at + cbytes - 40)
        fh.write(b"\xff" * 30)  # the last block's stream
    native.set_nthreads(nthreads)
    with pytest.raises(FormatError) as alone:
        arr[4:8]
    with pytest.raises(FormatError) as whole:
        arr[...]
    assert str(whole.value) == str(alone.value)
    assert str(whole.value).startswith("Zstd frame content size of stream 2 of block 7")
    np.testing.assert_array_equal(arr[8:], data[8:])  # the others still read


def test_reads_from_threads_sharing_an_array(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    data = _field((40, 40, 30))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(4, 40, 30), blocks=(1, 20, 30))
    native.set_nthreads(2)
    rng = np.random.default_rng(12)
    keys = [slice(int(a), int(a) + 13) for a in rng.integers(0, 27, 60)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda k: arr[k], keys))
    for k, g in zip(keys, got):
        np.testing.assert_array_equal(g, data[k])


def test_read_box_checks_its_shared_counters(tmp_path):
    from b2store.nd import _read_chunks

    data = _field((12, 40, 30))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(4, 40, 30), blocks=(1, 20, 30))
    fd, offsets, stored, base = arr.schunk.file_index(arr.schunk.committed())
    try:
        out = np.zeros(data.shape, data.dtype)
        args = dict(
            fd=fd, offsets=offsets, stored=stored, base=base, lo=[0, 0, 0], hi=[12, 40, 30],
            shape=data.shape, chunkshape=(4, 40, 30), blockshape=(1, 20, 30), out=out,
            room=np.empty(1 << 16, np.uint8), chunk=np.empty(4 * 40 * 30 * 4, np.uint8),
            scratch=native._scratch(),
        )  # fmt: skip
        bad = [
            (np.zeros(3, np.int64), np.zeros(3, np.int64), "shared holds 3 counters, not 2"),
            (np.array([-1, 0]), np.zeros(3, np.int64), "chunk -1 of the box taken"),
        ]
        for shared, left, match in bad:
            with pytest.raises(ValueError, match=match):
                _read_chunks.read_box(**args, left=left, shared=shared)
            assert not out.any()
        # Its "left" count must start at 0 too: a slot past the room is refused, not written.
        offsets_short = offsets[:1].copy()  # chunks 1 and 2 left
        with pytest.raises(ValueError, match="chunk left at 3 of 3"):
            _read_chunks.read_box(
                **{**args, "offsets": offsets_short},
                left=np.zeros(3, np.int64),
                shared=np.array([0, 2]),
            )
        left, shared = np.full(3, -1, np.int64), np.zeros(2, np.int64)
        assert _read_chunks.read_box(**args, left=left, shared=shared) == 0
        assert shared.tolist() == [4, 0]  # (each call takes one past the last to stop)
        np.testing.assert_array_equal(out, data)
    finally:
        os.close(fd)


def test_a_whole_large_chunk_is_decoded_in_place_not_through_a_buffer(tmp_path, calls):
    # A dask task's read of one 1 MiB chunk of 8 blocks: the small-read path decoded it into
    # a chunk-sized buffer and copied it out; the general path decodes it in place.
    data = _field((8, 256, 256))
    arr = b2store.asarray(data, tmp_path / "a.b2nd", chunks=(4, 256, 256), blocks=(1, 128, 256))
    np.testing.assert_array_equal(arr[4:8], data[4:8])
    assert calls["python"] == [1]
    calls["python"].clear()
    np.testing.assert_array_equal(arr[4:6], data[4:6])  # (part of one: the small read's)
    np.testing.assert_array_equal(arr[5, 3], data[5, 3])
    assert not calls["python"]
