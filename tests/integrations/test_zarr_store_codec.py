"""The Zarr v3 ``b2nd`` codec and its numcodecs twin ``B2nd``: python-blosc2's chunks decoded,
partial decode reading only the blocks a selection touches, special chunks, round trips."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import b2store

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")
blosc2 = pytest.importorskip("blosc2")

from helpers import other_blosc_blocks  # noqa: E402
from zarr.abc.store import RangeByteRequest, Store  # noqa: E402
from zarr.storage import MemoryStore, WrapperStore  # noqa: E402

from b2store.integrations.zarr.b2nd import B2ndCodec  # noqa: E402
from b2store.integrations.zarr.store import B2ndStore  # noqa: E402

# Under zarr's default codec pipeline and its fused one (tests/integrations/conftest.py).
pytestmark = pytest.mark.usefixtures("zarr_pipeline")


class CountingStore(WrapperStore):
    """Counts what reaches the wrapped store by every read path zarr and the b2nd codec take:
    async ``get``, ``get_sync`` (zarr's fused pipeline), ``get_partial_values``,
    ``get_ranges`` and ``_get_many`` (which WrapperStore would forward past ``get``: here they
    go through it), and a B2ndStore's direct decodes (``b2nd_decode_into[_sync]``, recorded
    with the blocks they decode in ``decoded``: they read inside the store, by no range).
    ``test_counting_store_counts_every_read_path`` fails when zarr adds a path it misses."""

    def __init__(self, store):
        super().__init__(store)
        self._count_lock = threading.Lock()
        self.bytes_read = 0
        self.requests = []
        self.decoded = []

    def _count(self, key, byte_range, buf):
        if buf is not None and "/c" in "/" + key:
            with self._count_lock:
                self.bytes_read += len(buf)
                self.requests.append((key, byte_range))
        return buf

    async def get(self, key, prototype=None, byte_range=None):
        return self._count(key, byte_range, await self._store.get(key, prototype, byte_range))

    def get_sync(self, key, *, prototype=None, byte_range=None):
        buf = self._store.get_sync(key, prototype=prototype, byte_range=byte_range)
        return self._count(key, byte_range, buf)

    async def get_partial_values(self, prototype, key_ranges):
        return [await self.get(key, prototype, r) for key, r in key_ranges]

    async def get_ranges(self, key, byte_ranges, *, prototype, **options):
        # zarr's Store.get_ranges reads through self.get (WrapperStore's would not).
        options = {k: v for k, v in options.items() if v is not None}
        async for group in Store.get_ranges(self, key, byte_ranges, prototype=prototype, **options):
            yield group

    async def _get_many(self, requests):
        async for item in Store._get_many(self, requests):
            yield item

    def _decoded(self, key, blocks, done):
        if done:
            with self._count_lock:
                self.decoded.append((key, None if blocks is None else list(blocks)))
        return done

    def b2nd_decode_into_sync(self, key, blocks, out, blocksize=None):
        direct = getattr(self._store, "b2nd_decode_into_sync", None)
        # False: "no such chunk here, go through get" (a wrapped store that has no shortcut).
        done = False if direct is None else direct(key, blocks, out, blocksize)
        return self._decoded(key, blocks, done)

    async def b2nd_decode_into(self, key, blocks, out, blocksize=None):
        direct = getattr(self._store, "b2nd_decode_into", None)
        done = False if direct is None else await direct(key, blocks, out, blocksize)
        return self._decoded(key, blocks, done)


def test_counting_store_counts_every_read_path():
    # Every read method WrapperStore forwards past ``get`` (it differs from zarr's Store's,
    # which reads through ``get``/``get_sync``), and every direct decode of a B2ndStore, is
    # one CountingStore counts: a read path zarr adds fails here, not silently in a count.
    def reads(cls):
        return {
            name
            for name in dir(cls)
            if ("get" in name and "size" not in name and not name.startswith("__"))
            or "decode_into" in name
        }

    forwarded = {
        n for n in reads(WrapperStore) if getattr(WrapperStore, n) is not getattr(Store, n, None)
    }
    direct = {n for n in reads(B2ndStore) if n.startswith("b2nd_")}  # the codec asks these
    assert {"get", "get_partial_values"} <= forwarded and len(direct) == 2
    assert forwarded | direct <= set(vars(CountingStore)), (forwarded | direct) - set(
        vars(CountingStore)
    )


def _zarr_over_blosc2(arr, store=None):
    """A zarr array whose chunks are python-blosc2's stored chunks, copied as they are."""
    store = store if store is not None else MemoryStore()
    z = zarr.create_array(
        store=store,
        shape=arr.shape,
        chunks=arr.chunks,
        dtype=arr.dtype,
        serializer=B2ndCodec(blockshape=arr.blocks),
        compressors=None,
        fill_value=0,
    )
    grid = [-(-s // c) for s, c in zip(arr.shape, arr.chunks)]
    proto = zarr.core.buffer.default_buffer_prototype()
    for n, coords in enumerate(np.ndindex(*grid)):
        key = "c/" + "/".join(map(str, coords)) if coords else "c"
        buf = proto.buffer.from_bytes(arr.schunk.get_chunk(n))
        zarr.core.sync.sync(store.set(key, buf))
    return z


@pytest.mark.parametrize(
    "shape,chunks,blocks,dtype",
    [
        ((100, 120), (40, 50), (10, 25), "<f4"),
        ((12, 7), (12, 7), (5, 3), "<i2"),  # blocks that do not divide the chunk
        ((33, 17, 5), (10, 8, 5), (4, 3, 2), "<u8"),
        ((1000,), (300,), (64,), ">f8"),
        ((9, 9), (4, 4), (2, 2), "<U3"),
        ((), (), (), "<i4"),
    ],
)
def test_reads_python_blosc2_chunks(shape, chunks, blocks, dtype):
    rng = np.random.default_rng(0)
    data = (rng.random(shape) * 1000).astype(dtype) if dtype[1] != "U" else None
    if data is None:
        data = rng.integers(0, 999, shape).astype(dtype)
    arr = blosc2.asarray(data, chunks=chunks, blocks=blocks)
    z = _zarr_over_blosc2(arr)
    np.testing.assert_array_equal(z[...], data)
    if data.ndim:
        sel = tuple(slice(1, max(2, n // 3)) for n in shape)
        np.testing.assert_array_equal(z[sel], data[sel])


def test_partial_decode_reads_only_touched_blocks():
    data = np.random.default_rng(1).random((200, 200))
    arr = blosc2.asarray(data, chunks=(100, 100), blocks=(10, 100))
    store = CountingStore(MemoryStore())
    z = _zarr_over_blosc2(arr, store)
    whole = len(arr.schunk.get_chunk(0))
    store.bytes_read = 0
    np.testing.assert_array_equal(z[15, 3:7], data[15, 3:7])
    # Header + block starts + block 0 (DELTA's anchor) + block 1: well under the chunk.
    assert 0 < store.bytes_read < whole / 3
    assert all(isinstance(r, RangeByteRequest) for _, r in store.requests)
    store.bytes_read = 0
    store.requests.clear()
    np.testing.assert_array_equal(z[:100, :100], data[:100, :100])
    assert store.requests == [("c/0/0", None)]  # a whole chunk: one read, no ranges


def test_partial_decode_through_b2ndstore_decodes_only_touched_blocks(tmp_path, zarr_pipeline):
    # The store's direct decode (async under zarr's default pipeline, sync under the fused
    # one) is asked for the blocks a selection touches, and no chunk bytes go through get.
    data = np.random.default_rng(1).random((200, 200))
    path = tmp_path / "x.b2nd"
    blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(100, 100), blocks=(10, 100))
    store = CountingStore(B2ndStore(path))
    z = zarr.open_array(store, mode="r")
    # (b2store's pipeline serves B2ndStore itself, not a store around it: zarr's pipeline)
    kind = "batched" if zarr_pipeline == "b2store" else zarr_pipeline
    assert type(z._async_array.codec_pipeline).__name__.lower().startswith(kind)
    np.testing.assert_array_equal(z[15, 3:7], data[15, 3:7])
    assert store.decoded == [("c/0/0", [1])] and store.requests == []
    store.decoded.clear()
    np.testing.assert_array_equal(z[:100, 100:], data[:100, 100:])
    assert store.decoded == [("c/0/1", None)] and store.requests == []


@pytest.mark.parametrize("factor", [2, 5])
@pytest.mark.parametrize("through", ["B2ndStore", "a copy of its chunks"])
def test_chunks_of_other_blosc_blocks_read_equal(tmp_path, factor, through):
    # Chunks whose Blosc blocks are several array blocks each (valid Blosc that other
    # writers may write): the codec's block numbers name other bytes there, or none, so a
    # partial decode of them must decode the chunk whole, by the store's direct decode
    # and by byte ranges alike. (It returned the spare buffer's bytes, or said "fewer".)
    x = np.arange(80 * 60, dtype="<f4").reshape(80, 60) + 1
    arr = other_blosc_blocks(x, tmp_path / "a.b2nd", (40, 30), (8, 6), factor)
    if through == "B2ndStore":
        store = CountingStore(B2ndStore(tmp_path / "a.b2nd"))
    else:
        store = CountingStore(MemoryStore())
        _zarr_over_blosc2(arr, store)
    z = zarr.open_array(store, mode="r")
    store = z.store  # (zarr opens a read-only copy of the wrapper, with lists of its own)
    for key in [
        (slice(35, 45), slice(25, 35)),
        (slice(0, 8), slice(24, 36)),
        (slice(9, 10), slice(7, 8)),
        (slice(17, 18), slice(13, 14)),
    ]:
        np.testing.assert_array_equal(z[key], x[key])
    assert store.decoded or store.requests  # read through the path named


def test_a_chunk_of_fewer_blocks_read_by_ranges_is_a_format_error():
    # A chunk of the array's block size but fewer blocks than its shape needs (a lying
    # nbytes): the ranged plan must not index past its block starts (IndexError before).
    x = np.arange(80 * 60, dtype="<f4").reshape(80, 60)
    arr = blosc2.asarray(x, chunks=(40, 30), blocks=(8, 6))
    store = MemoryStore()
    z = _zarr_over_blosc2(arr, store)
    short = blosc2.compress2(
        np.ascontiguousarray(x[:8, :6]).tobytes() * 3, typesize=4, blocksize=8 * 6 * 4
    )
    proto = zarr.core.buffer.default_buffer_prototype()
    zarr.core.sync.sync(store.set("c/0/0", proto.buffer.from_bytes(short)))
    with pytest.raises(b2store.FormatError, match="nbytes"):
        z[35:40, 25:30]


def test_special_chunks_decode_without_payload():
    data = np.zeros((40, 40), "<f8")
    data[20:, :20] = np.nan
    data[:20, 20:] = 7.5
    arr = blosc2.asarray(data, chunks=(20, 20), blocks=(5, 20))
    z = _zarr_over_blosc2(arr)
    np.testing.assert_array_equal(z[...], data)
    np.testing.assert_array_equal(z[21:23, 3], data[21:23, 3])


@pytest.mark.parametrize("blockshape", [(7, 9), None])
def test_zarr_writes_chunks_python_blosc2_reads(blockshape):
    data = np.arange(50 * 60, dtype="<i4").reshape(50, 60)
    store = MemoryStore()
    z = zarr.create_array(
        store=store,
        shape=data.shape,
        chunks=(20, 30),
        dtype=data.dtype,
        serializer=B2ndCodec(blockshape=blockshape, cname="lz4", clevel=3),
        compressors=None,
    )
    z[...] = data
    blocks = z.metadata.codecs[0]._blocks(type("S", (), {"shape": (20, 30)})(), np.dtype("<i4"))
    chunk = zarr.core.sync.sync(store.get("c/1/1", zarr.core.buffer.default_buffer_prototype()))
    ref = blosc2.asarray(data, chunks=(20, 30), blocks=blocks)
    decoded = blosc2.decompress2(chunk.to_bytes())
    assert decoded == blosc2.decompress2(ref.schunk.get_chunk(3))
    assert blosc2.get_cbuffer_sizes(chunk.to_bytes())[2] == np.prod(blocks) * 4


def test_codec_config_round_trip():
    codec = B2ndCodec(blockshape=(4, 5), cname="lz4", filters=[{"id": "bitshuffle", "meta": 0}])
    again = B2ndCodec.from_dict(codec.to_dict())
    assert again == codec
    assert codec.to_dict()["configuration"]["blockshape"] == [4, 5]
    with pytest.raises(ValueError, match="endian"):
        B2ndCodec(endian="middle")


def test_wrong_chunk_size_is_a_format_error():
    import b2store

    arr = blosc2.asarray(np.arange(100.0), chunks=(50,), blocks=(10,))
    store = MemoryStore()
    z = zarr.create_array(
        store=store,
        shape=(100,),
        chunks=(50,),
        dtype="<f8",
        serializer=B2ndCodec(blockshape=(20,)),  # lies: the padding differs
        compressors=None,
    )
    other = blosc2.asarray(np.arange(70.0), chunks=(70,), blocks=(10,))
    proto = zarr.core.buffer.default_buffer_prototype()
    zarr.core.sync.sync(store.set("c/0", proto.buffer.from_bytes(other.schunk.get_chunk(0))))
    with pytest.raises(b2store.FormatError, match="nbytes"):
        z[...]
    assert arr.shape == (100,)


# --- the numcodecs twin -----------------------------------------------------------------------


def test_numcodecs_b2nd_decodes_python_blosc2_chunks():
    data = np.arange(100 * 120, dtype="<f4").reshape(100, 120)
    arr = blosc2.asarray(data, chunks=(40, 50), blocks=(10, 25))
    codec = numcodecs.get_codec(
        {"id": "b2nd", "chunkshape": [40, 50], "blockshape": [10, 25], "dtype": "<f4"}
    )
    for n, (i, j) in enumerate(np.ndindex(3, 3)):
        got = codec.decode(arr.schunk.get_chunk(n)).reshape(40, 50)
        want = np.zeros((40, 50), "<f4")
        part = data[i * 40 : (i + 1) * 40, j * 50 : (j + 1) * 50]
        want[: part.shape[0], : part.shape[1]] = part
        np.testing.assert_array_equal(got[: part.shape[0], : part.shape[1]], part)
    out = np.empty(2000, "<f4")
    codec.decode(arr.schunk.get_chunk(0), out=out)
    np.testing.assert_array_equal(out.reshape(40, 50), data[:40, :50])


def test_numcodecs_b2nd_round_trip_and_config():
    codec = numcodecs.get_codec(
        {"id": "b2nd", "chunkshape": [6, 7], "blockshape": [4, 3], "dtype": ">i8"}
    )
    data = np.arange(42, dtype=">i8")
    enc = codec.encode(data)
    np.testing.assert_array_equal(codec.decode(enc), data)
    ref = blosc2.asarray(data.reshape(6, 7), chunks=(6, 7), blocks=(4, 3))
    assert blosc2.decompress2(enc) == blosc2.decompress2(ref.schunk.get_chunk(0))
    again = numcodecs.get_codec(codec.get_config())
    assert again.get_config() == codec.get_config()


@pytest.mark.parametrize("filters", [["shuffle"], ["delta", "shuffle"]])
def test_store_shortcut_equals_byte_ranges(tmp_path, filters):
    # B2ndStore decodes its chunks in place (the codec's shortcut); through a wrapper the
    # codec goes by byte ranges. Both equal numpy, special chunks included.
    import b2store
    from b2store.integrations.zarr.store import B2ndStore

    data = np.arange(40 * 36, dtype="<i4").reshape(40, 36) % 97
    data[:10] = 0  # a zeros special chunk row
    path = tmp_path / "x.b2nd"
    b2store.asarray(data, path, chunks=(10, 12), blocks=(5, 4), filters=filters)
    direct = zarr.open_array(B2ndStore(path))
    wrapped = zarr.open_array(WrapperStore(B2ndStore(path)))
    for sel in [
        (slice(None), slice(None)),
        (slice(12, 14), slice(13, 15)),
        (7, slice(None)),
        (slice(3, 38, 5), 30),
        ([1, 22, 39], slice(2, 30)),
    ]:
        np.testing.assert_array_equal(direct[sel], data[sel])
        np.testing.assert_array_equal(wrapped[sel], data[sel])


def test_spare_decode_buffers_are_never_handed_out_while_referred_to():
    """The b2nd codec decodes whole chunks into a spare buffer it reuses only when nothing
    refers to it any more: a chunk array someone still holds keeps its values."""
    from b2store.integrations.zarr.b2nd import _spare_buffer

    first = _spare_buffer(4096)
    first[:] = 1
    view = first[96:200].view("<f8")  # what zarr would hold: a view of the buffer
    del first
    second = _spare_buffer(4096)
    assert second.base is None and not np.shares_memory(second, view)
    second[:] = 2
    assert (view.view(np.uint8) == 1).all()
    del view, second
    third = _spare_buffer(4096)
    again = _spare_buffer(4096)
    assert third is not again  # the first is held (by ``third``): a fresh one
    held = third
    del third, again
    assert _spare_buffer(4096) is not held


def test_reads_keep_their_values_while_later_chunks_decode(tmp_path):
    """Arrays returned by zarr stay what they were while the same store reads on."""
    data = np.random.default_rng(5).normal(size=(64, 64))
    path = tmp_path / "a.b2nd"
    blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(16, 64), blocks=(4, 64))
    z = zarr.open_array(B2ndStore(path))
    kept = [z[16 * k : 16 * (k + 1)] for k in range(4)] + [z[...], z[3:60, 5:50]]
    for _ in range(3):
        z[...]
    for k in range(4):
        np.testing.assert_array_equal(kept[k], data[16 * k : 16 * (k + 1)])
    np.testing.assert_array_equal(kept[4], data)
    np.testing.assert_array_equal(kept[5], data[3:60, 5:50])
