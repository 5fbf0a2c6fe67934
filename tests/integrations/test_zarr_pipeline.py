"""b2store's Zarr codec pipeline reads what zarr's own pipeline reads, item for item: every
Blosc codec, shuffle and Zarr format it serves, whole, partial, edge and missing chunks, in
one thread and two; bad chunks raise the FormatError b2store's decoder raises; the arrays it
does not serve get zarr's own pipeline, unchanged."""

import os
import sys

import numpy as np
import pytest

zarr = pytest.importorskip("zarr", reason="the zarr extra is not installed")

from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, TransposeCodec  # noqa: E402
from zarr.core.codec_pipeline import BatchedCodecPipeline  # noqa: E402

import b2store  # noqa: E402
from b2store.chunk import native  # noqa: E402
from b2store.integrations.numcodecs.codec import Blosc2  # noqa: E402
from b2store.integrations.zarr.codecs import Blosc2Codec  # noqa: E402
from b2store.integrations.zarr.pipeline import B2storeCodecPipeline  # noqa: E402
from b2store.integrations.zarr.pipeline_reads import Reader  # noqa: E402

OURS = "b2store.integrations.zarr.pipeline.B2storeCodecPipeline"
DEFAULT = "zarr.core.codec_pipeline.BatchedCodecPipeline"

# Keys read and compared: whole, boxes across chunks, edges, integers (dropped axes), steps,
# orthogonal and vectorized (zarr's own placement), a negative index, a single item.
KEYS = [
    np.s_[:],
    np.s_[3:41, 5:70],
    np.s_[40:, 60:],
    np.s_[7],
    np.s_[:, 13],
    np.s_[9, 33],
    np.s_[::3, 1::7],
    np.s_[-5:, :-3],
    np.s_[0:0, :],
]


def data(shape=(45, 71), dtype="f4"):
    y, x = np.mgrid[: shape[0], : shape[1]]
    return (np.sin(x / 7) * np.cos(y / 5) * 100 + y).astype(dtype)


def compressible():
    """``data()`` rounded to whole numbers: chunks every zarr compresses. zarr 3.1.6's
    BloscCodec hands numcodecs the chunk as bytes (typesize 1, so its shuffle moves nothing),
    and stores ``data()``'s chunks raw (memcpyed): no blocks to damage, none for the kernels."""
    return np.round(data())


def opened(path, which, threads=None):
    settings = {"codec_pipeline.path": which}
    if threads is not None:
        settings["threading.max_workers"] = threads
    with zarr.config.set(settings):
        arr = zarr.open_array(path, mode="r")
        return arr, type(arr._async_array.codec_pipeline)


def read_all(path, which, threads=None):
    settings = {"codec_pipeline.path": which}
    if threads is not None:
        settings["threading.max_workers"] = threads
    with zarr.config.set(settings):
        arr = zarr.open_array(path, mode="r")
        out = [arr[key] for key in KEYS]
        out.append(arr.oindex[[0, 17, 44], 2:50])
        out.append(arr.vindex[[0, 17, 44], [1, 2, 70]])
        return out, type(arr._async_array.codec_pipeline)


def assert_same_as_zarr(path, expected, threads=None):
    ours, kind = read_all(path, OURS, threads)
    theirs, _ = read_all(path, DEFAULT)
    assert kind is B2storeCodecPipeline
    for key, mine, zarrs in zip(KEYS, ours, theirs, strict=False):
        np.testing.assert_array_equal(mine, zarrs)
        np.testing.assert_array_equal(mine, expected[key])
    np.testing.assert_array_equal(ours[-2], theirs[-2])
    np.testing.assert_array_equal(ours[-1], theirs[-1])


@pytest.mark.parametrize("cname", ["lz4", "zstd", "blosclz", "zlib"])
@pytest.mark.parametrize("shuffle", ["shuffle", "bitshuffle", "noshuffle"])
def test_v3_blosc_reads_as_zarr_does(tmp_path, cname, shuffle):
    expected = data()
    arr = zarr.create_array(
        tmp_path,
        shape=expected.shape,
        chunks=(10, 16),
        dtype="f4",
        compressors=BloscCodec(cname=cname, shuffle=shuffle, clevel=5),
    )
    arr[:] = expected
    assert_same_as_zarr(tmp_path, expected)


@pytest.mark.parametrize("cname", ["lz4", "zstd", "blosclz", "zlib"])
@pytest.mark.parametrize("shuffle", [0, 1, 2])
def test_v2_blosc_reads_as_zarr_does(tmp_path, cname, shuffle):
    from numcodecs import Blosc

    expected = data(dtype="i2")
    arr = zarr.create_array(
        tmp_path,
        shape=expected.shape,
        chunks=(10, 16),
        dtype="i2",
        zarr_format=2,
        compressors=Blosc(cname=cname, shuffle=shuffle),
        fill_value=0,
    )
    arr[:] = expected
    assert_same_as_zarr(tmp_path, expected)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["u1", "f8", "c8", "M8[s]"])
def test_b2store_blosc2_codecs_read_as_zarr_does(tmp_path, threads, dtype):
    expected = data(dtype="i8").astype(dtype)
    v3 = zarr.create_array(
        tmp_path / "v3",
        shape=expected.shape,
        chunks=(10, 16),
        dtype=dtype,
        serializer=BytesCodec(),
        compressors=Blosc2Codec(cname="zstd", filters=["shuffle"]),
    )
    v3[:] = expected
    v2 = zarr.create_array(
        tmp_path / "v2",
        shape=expected.shape,
        chunks=(10, 16),
        dtype=dtype,
        zarr_format=2,
        compressors=Blosc2(cname="lz4"),
        fill_value=None,
    )
    v2[:] = expected
    assert_same_as_zarr(tmp_path / "v3", expected, threads)
    assert_same_as_zarr(tmp_path / "v2", expected, threads)


def test_identity_transpose_and_a_memory_store_are_served():
    expected = np.arange(30 * 40 * 5, dtype="f4").reshape(30, 40, 5) % 77
    store = zarr.storage.MemoryStore()
    arr = zarr.create_array(
        store,
        shape=expected.shape,
        chunks=(7, 9, 5),
        dtype="f4",
        filters=TransposeCodec(order=(0, 1, 2)),
        compressors=BloscCodec(cname="lz4"),
    )
    arr[:] = expected
    with zarr.config.set({"codec_pipeline.path": OURS}):
        again = zarr.open_array(store, mode="r")
        assert type(again._async_array.codec_pipeline) is B2storeCodecPipeline
        np.testing.assert_array_equal(again[:], expected)
        np.testing.assert_array_equal(again[3:20, 8, 1:4], expected[3:20, 8, 1:4])


def test_missing_chunks_get_the_fill_value(tmp_path):
    expected = np.full((45, 71), 7.5, "f4")
    arr = zarr.create_array(
        tmp_path,
        shape=expected.shape,
        chunks=(10, 16),
        dtype="f4",
        fill_value=7.5,
        compressors=BloscCodec(cname="lz4"),
    )
    arr[12:25, 20:40] = 1.0
    expected[12:25, 20:40] = 1.0
    assert sum(len(files) for _, _, files in os.walk(tmp_path / "c")) < 20
    assert_same_as_zarr(tmp_path, expected)


def test_writes_through_the_pipeline_are_zarrs(tmp_path):
    expected = data()
    for which, path in ((OURS, tmp_path / "ours"), (DEFAULT, tmp_path / "theirs")):
        with zarr.config.set({"codec_pipeline.path": which}):
            arr = zarr.create_array(
                path,
                shape=expected.shape,
                chunks=(10, 16),
                dtype="f4",
                compressors=BloscCodec(cname="zstd"),
            )
            arr[:] = expected
            arr[3:9, 2:30] = -1
    for name in sorted(os.listdir(tmp_path / "theirs" / "c" / "0")):
        assert (tmp_path / "ours" / "c" / "0" / name).read_bytes() == (
            tmp_path / "theirs" / "c" / "0" / name
        ).read_bytes()


def damaged(tmp_path):
    expected = compressible()
    arr = zarr.create_array(
        tmp_path,
        shape=expected.shape,
        chunks=(10, 16),
        dtype="f4",
        compressors=BloscCodec(cname="lz4", shuffle="shuffle"),
    )
    arr[:] = expected
    return tmp_path / "c" / "1" / "2"


def decoder_error(raw: bytes) -> str:
    """What b2store's decoder says of a chunk, or of one that decodes to the wrong size."""
    try:
        decoded = b2store.decode_chunk(raw)
    except b2store.FormatError as error:
        return str(error)
    return f"nbytes: expected 640 (a chunk of shape (10, 16), float32), found {decoded.nbytes}"


@pytest.mark.parametrize("store", ["local", "memory"])
@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:10],  # a truncated header
        lambda b: b[:16] + b"\xff" * (len(b) - 16),  # block starts past the end
        lambda b: b[:-40],  # a truncated stream
        lambda b: b[:4] + (12345).to_bytes(4, "little") + b[8:],  # nbytes lies
    ],
)
def test_a_bad_chunk_raises_the_decoders_format_error(tmp_path, store, damage):
    chunk = damaged(tmp_path)
    chunk.write_bytes(damage(chunk.read_bytes()))
    message = decoder_error(chunk.read_bytes())
    where = tmp_path
    if store == "memory":
        held = {}
        for root, _dirs, files in os.walk(tmp_path):
            for name in files:
                key = os.path.relpath(os.path.join(root, name), tmp_path).replace(os.sep, "/")
                with open(os.path.join(root, name), "rb") as f:
                    held[key] = zarr.core.buffer.cpu.Buffer.from_bytes(f.read())
        where = zarr.storage.MemoryStore(held)
    with zarr.config.set({"codec_pipeline.path": OURS}):
        arr = zarr.open_array(where, mode="r")
        np.testing.assert_array_equal(arr[:10, :16], compressible()[:10, :16])
        with pytest.raises(b2store.FormatError) as caught:
            arr[:]
    assert str(caught.value) == message


def test_a_chunk_of_the_wrong_size_is_refused(tmp_path):
    chunk = damaged(tmp_path)
    small = zarr.create_array(
        tmp_path / "small", shape=(5,), chunks=(5,), dtype="f4", compressors=BloscCodec()
    )
    small[:] = 1
    chunk.write_bytes((tmp_path / "small" / "c" / "0").read_bytes())
    with zarr.config.set({"codec_pipeline.path": OURS}):
        arr = zarr.open_array(tmp_path, mode="r")
        with pytest.raises(b2store.FormatError, match=r"^nbytes: expected 640 \(a chunk of "):
            arr[:]


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX's")
def test_a_fifo_chunk_is_refused_not_waited_on(tmp_path):
    chunk = damaged(tmp_path)
    chunk.unlink()
    os.mkfifo(chunk)
    with zarr.config.set({"codec_pipeline.path": OURS}):
        arr = zarr.open_array(tmp_path, mode="r")
        with pytest.raises(b2store.FormatError, match="^chunk file: expected a regular file"):
            arr[:]


def unserved(tmp_path):
    expected = data()
    yield (
        "gzip",
        zarr.create_array(
            tmp_path / "gzip",
            shape=expected.shape,
            chunks=(10, 16),
            dtype="f4",
            compressors=GzipCodec(),
        ),
    )
    yield (
        "sharding",
        zarr.create_array(
            tmp_path / "shard",
            shape=expected.shape,
            chunks=(10, 16),
            shards=(20, 32),
            dtype="f4",
            compressors=BloscCodec(),
        ),
    )
    yield (
        "big-endian",
        zarr.create_array(
            tmp_path / "big",
            shape=expected.shape,
            chunks=(10, 16),
            dtype="f4",
            serializer=BytesCodec(endian="big"),
            compressors=BloscCodec(),
        ),
    )
    yield (
        "transposed",
        zarr.create_array(
            tmp_path / "transposed",
            shape=expected.shape,
            chunks=(10, 16),
            dtype="f4",
            filters=TransposeCodec(order=(1, 0)),
            compressors=BloscCodec(),
        ),
    )
    yield (
        "two compressors",
        zarr.create_array(
            tmp_path / "two",
            shape=expected.shape,
            chunks=(10, 16),
            dtype="f4",
            compressors=[BloscCodec(), GzipCodec()],
        ),
    )
    yield (
        "F order",
        zarr.create_array(
            tmp_path / "forder",
            shape=expected.shape,
            chunks=(10, 16),
            dtype="f4",
            zarr_format=2,
            order="F",
        ),
    )


def test_arrays_it_does_not_serve_get_zarrs_own_pipeline(tmp_path):
    expected = data()
    for name, arr in unserved(tmp_path):
        arr[:] = expected
        ours, kind = read_all(arr.store_path.store.root / arr.path, OURS)
        theirs, _ = read_all(arr.store_path.store.root / arr.path, DEFAULT)
        assert kind is BatchedCodecPipeline, name
        for mine, zarrs in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(mine, zarrs)


def test_the_entry_point_names_the_class():
    from importlib.metadata import entry_points

    found = [e for e in entry_points(group="zarr.codec_pipeline") if e.name == "b2store"]
    assert [e.load() for e in found] == [B2storeCodecPipeline]


def test_an_output_zarr_cannot_place_in_goes_to_zarrs_pipeline(tmp_path):
    expected = data()
    arr = zarr.create_array(
        tmp_path,
        shape=expected.shape,
        chunks=(10, 16),
        dtype="f4",
        compressors=BloscCodec(cname="lz4"),
    )
    arr[:] = expected
    with zarr.config.set({"codec_pipeline.path": OURS}):
        again = zarr.open_array(tmp_path, mode="r")
        out = zarr.core.buffer.cpu.NDBuffer.from_numpy_array(np.zeros((71, 45), "f4").T)
        again.get_basic_selection(np.s_[:], out=out)
        np.testing.assert_array_equal(out.as_numpy_array(), expected)


@pytest.mark.parametrize("store", ["local", "memory"])
def test_plain_keys_are_placed_by_the_kernels_alone(tmp_path, store, monkeypatch):
    expected = compressible()
    where = tmp_path if store == "local" else zarr.storage.MemoryStore()
    arr = zarr.create_array(
        where,
        shape=expected.shape,
        chunks=(10, 16),
        dtype="f4",
        compressors=BloscCodec(cname="zstd", shuffle="bitshuffle"),
    )
    arr[:] = expected

    def refuse(*args):
        raise AssertionError("a chunk went through the general decoder")

    monkeypatch.setattr(Reader, "_place_one", refuse)
    with zarr.config.set({"codec_pipeline.path": OURS, "threading.max_workers": 2}):
        again = zarr.open_array(where, mode="r")
        for key in (np.s_[:], np.s_[3:41, 5:70], np.s_[7], np.s_[:, 13], np.s_[9, 33]):
            np.testing.assert_array_equal(again[key], expected[key])


def test_a_pickled_array_equals_its_original(tmp_path):
    import pickle

    arr = zarr.create_array(
        tmp_path, shape=(100,), chunks=(10,), dtype="i4", compressors=BloscCodec()
    )
    arr[:] = np.arange(100)
    with zarr.config.set({"codec_pipeline.path": OURS}):
        again = zarr.open_array(tmp_path, mode="r")
        copy = pickle.loads(pickle.dumps(again))
        assert type(copy._async_array.codec_pipeline) is B2storeCodecPipeline
        assert copy == again
        np.testing.assert_array_equal(copy[:], np.arange(100))


def test_random_boxes_read_as_numpy_does(tmp_path):
    rng = np.random.default_rng(37)
    for case in range(6):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(n) for n in rng.integers(1, 30, ndim))
        chunks = tuple(int(rng.integers(1, n + 3)) for n in shape)
        expected = rng.integers(-1000, 1000, shape).astype(rng.choice(["i2", "f4", "f8"]))
        arr = zarr.create_array(
            tmp_path / str(case), shape=shape, chunks=chunks, dtype=expected.dtype,
            compressors=BloscCodec(cname="lz4", shuffle="shuffle"),
        )  # fmt: skip
        arr[:] = expected
        with zarr.config.set({"codec_pipeline.path": OURS}):
            again = zarr.open_array(tmp_path / str(case), mode="r")
            for _ in range(15):
                key = []
                for n in shape:
                    if rng.random() < 0.25:
                        key.append(int(rng.integers(-n, n)))
                    else:
                        a, b = sorted(int(v) for v in rng.integers(0, n + 1, 2))
                        key.append(slice(a, b))
                key = tuple(key)
                np.testing.assert_array_equal(again[key], expected[key], err_msg=str(key))


MANY_BLOCKS = {
    # Blocks that mostly end inside a row of the chunk.
    "blosc-lz4": lambda: BloscCodec(cname="lz4", shuffle="shuffle", blocksize=1000),
    "blosc-zstd": lambda: BloscCodec(cname="zstd", shuffle="bitshuffle", blocksize=512),
    "blosc2-zstd": lambda: Blosc2Codec(cname="zstd", blocksize=1000),
    # (DELTA's blocks are decoded against block 0)
    "blosc2-delta": lambda: Blosc2Codec(cname="lz4", blocksize=1000, filters=["delta", "shuffle"]),
}


@pytest.mark.parametrize("store", ["local", "memory"])
@pytest.mark.parametrize("codec", sorted(MANY_BLOCKS))
def test_chunks_of_many_blocks_read_as_numpy_does(tmp_path, store, codec, monkeypatch):
    """Random boxes of 1-3 axes over chunks of many blocks, most blocks ending inside a row
    of the chunk, read by the kernels alone, as NumPy reads them."""
    monkeypatch.setattr(Reader, "_place_one", None)  # (the kernels alone)
    rng = np.random.default_rng(3701)
    # Chunks over 64 kB: c-blosc1 makes LZ4 blocks of 64 kB whatever blocksize asks for.
    for case, shape, chunks in [
        (0, (300, 333), (130, 150)),
        (1, (12, 40, 300), (6, 20, 170)),
        (2, (60000,), (17000,)),
    ]:
        # (compressible, or the chunks are stored raw: no blocks)
        size = int(np.prod(shape))
        expected = (np.arange(size) % 97 + rng.integers(0, 4, size)).reshape(shape).astype("f4")
        where = tmp_path / str(case) if store == "local" else zarr.storage.MemoryStore()
        serializer = {} if codec.startswith("blosc-") else {"serializer": BytesCodec()}
        arr = zarr.create_array(
            where, shape=shape, chunks=chunks, dtype="f4", compressors=MANY_BLOCKS[codec](),
            **serializer,
        )  # fmt: skip
        arr[:] = expected
        with zarr.config.set({"codec_pipeline.path": OURS, "threading.max_workers": 2}):
            again = zarr.open_array(where, mode="r")
            assert type(again._async_array.codec_pipeline) is B2storeCodecPipeline
            np.testing.assert_array_equal(again[:], expected)
            for _ in range(12):
                key = []
                for n in shape:
                    a, b = sorted(int(v) for v in rng.integers(0, n + 1, 2))
                    key.append(slice(a, b))
                key = tuple(key)
                np.testing.assert_array_equal(again[key], expected[key], err_msg=str(key))


def large_chunks(where):
    """An array of two 1.2 MB chunks (threads share a chunk's blocks from 1 MiB)."""
    rng = np.random.default_rng(3702)
    expected = (np.arange(600_000) % 251 + rng.integers(0, 3, 600_000)).astype("f4")
    expected = expected.reshape(600, 1000)
    arr = zarr.create_array(
        where, shape=expected.shape, chunks=(300, 1000), dtype="f4",
        compressors=BloscCodec(cname="zstd", clevel=1, shuffle="shuffle"),
    )  # fmt: skip
    arr[:] = expected
    return expected


@pytest.mark.parametrize("store", ["local", "memory"])
def test_fewer_large_chunks_than_threads_share_their_blocks(tmp_path, store, monkeypatch):
    """A read of fewer chunks than threads (a dask task's one chunk) has the threads share
    each chunk's blocks, decoded straight into the output where the chunk lies whole and
    in C order there, else placed from a decoded copy: as NumPy reads it, and by the kernels
    alone."""
    where = tmp_path if store == "local" else zarr.storage.MemoryStore()
    expected = large_chunks(where)
    monkeypatch.setattr(Reader, "_place_one", None)  # (the kernels alone)
    shared = []
    share = native._share
    monkeypatch.setattr(native, "_share", lambda run, n: shared.append(n) or share(run, n))
    for threads in (2, 3):
        with zarr.config.set({"codec_pipeline.path": OURS, "threading.max_workers": threads}):
            again = zarr.open_array(where, mode="r")
            for key in (np.s_[:300], np.s_[300:], np.s_[10:200, 5:700], np.s_[299:301, :],
                        np.s_[:], np.s_[100:500, 999:]):  # fmt: skip
                np.testing.assert_array_equal(again[key], expected[key], err_msg=str(key))
            # Orthogonal and vectorized keys, out of order: zarr's output selections are
            # index arrays there, and the chunk is placed through them.
            rows, cols = [200, 3, 50], [9, 2, 700]
            np.testing.assert_array_equal(again.oindex[rows, cols], expected[np.ix_(rows, cols)])
            np.testing.assert_array_equal(again.vindex[rows, cols], expected[rows, cols])
    assert max(shared) == min(2, native.cpu_count())


@pytest.mark.parametrize("store", ["local", "memory"])
def test_only_reads_past_a_mebibyte_hop_to_a_worker_thread(tmp_path, store, monkeypatch):
    """A read whose chunks decode to 1 MiB or less is decoded in zarr's event loop (its
    decode is shorter than the hop to a thread); a larger one in a worker thread, the loop
    free meanwhile."""
    import asyncio

    hops = []
    to_thread = asyncio.to_thread

    async def counted(func, *args, **kwargs):
        if getattr(func, "__self__", None).__class__ is Reader:
            hops.append(func.__name__)
        return await to_thread(func, *args, **kwargs)

    where = tmp_path if store == "local" else zarr.storage.MemoryStore()
    expected = np.arange(600_000, dtype="f4").reshape(600, 1000)
    arr = zarr.create_array(
        where, shape=expected.shape, chunks=(100, 1000), dtype="f4", compressors=BloscCodec()
    )  # (chunks of 400 kB)
    arr[:] = expected
    monkeypatch.setattr(asyncio, "to_thread", counted)
    with zarr.config.set({"codec_pipeline.path": OURS}):
        arr = zarr.open_array(where, mode="r")
        np.testing.assert_array_equal(arr[5, 7:9], expected[5, 7:9])
        np.testing.assert_array_equal(arr[150:250], expected[150:250])  # (two chunks)
        assert hops == []
        np.testing.assert_array_equal(arr[50:350], expected[50:350])  # (four)
        assert len(hops) == 1


def test_a_bad_large_chunk_raises_the_decoders_format_error(tmp_path):
    expected = large_chunks(tmp_path)
    chunk = tmp_path / "c" / "1" / "0"
    raw = chunk.read_bytes()
    chunk.write_bytes(raw[:-100])
    with pytest.raises(b2store.FormatError) as caught:
        b2store.decode_chunk(raw[:-100])
    with zarr.config.set({"codec_pipeline.path": OURS, "threading.max_workers": 2}):
        arr = zarr.open_array(tmp_path, mode="r")
        np.testing.assert_array_equal(arr[:300], expected[:300])
        with pytest.raises(b2store.FormatError) as ours:
            arr[300:]
    assert str(ours.value) == str(caught.value)
    chunk.unlink()
    with zarr.config.set({"codec_pipeline.path": OURS, "threading.max_workers": 2}):
        np.testing.assert_array_equal(zarr.open_array(tmp_path, mode="r")[300:], 0)


@pytest.mark.parametrize("store", ["local", "memory"])
def test_randomly_damaged_chunks_read_as_the_decoder_says(tmp_path, store):
    expected = compressible()
    chunk = damaged(tmp_path)
    good = chunk.read_bytes()
    rng = np.random.default_rng(3737)
    for _ in range(40):
        raw = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            raw[int(rng.integers(0, len(raw)))] = int(rng.integers(0, 256))
        if rng.random() < 0.3:
            raw = raw[: int(rng.integers(0, len(raw)))]
        raw = bytes(raw)
        chunk.write_bytes(raw)
        where = tmp_path
        if store == "memory":
            where = zarr.storage.MemoryStore()
            for root, _dirs, files in os.walk(tmp_path):
                for name in files:
                    key = os.path.relpath(os.path.join(root, name), tmp_path)
                    with open(os.path.join(root, name), "rb") as f:
                        where._store_dict[key.replace(os.sep, "/")] = (
                            zarr.core.buffer.cpu.Buffer.from_bytes(f.read())
                        )
        try:
            decoded = b2store.decode_chunk(raw)
        except b2store.FormatError as error:
            decoded, message = None, str(error)
        with zarr.config.set({"codec_pipeline.path": OURS}):
            arr = zarr.open_array(where, mode="r")
            if decoded is not None and decoded.nbytes == 640:
                got = arr[10:20, 32:48]
                np.testing.assert_array_equal(got, decoded.view("f4").reshape(10, 16))
                assert np.array_equal(arr[:10], expected[:10])
                continue
            if decoded is not None:
                message = decoder_error(raw)
            with pytest.raises(b2store.FormatError) as caught:
                arr[:]
            assert str(caught.value) == message


def test_a_v2_array_without_a_fill_value_reads_missing_chunks_as_zarr_does(tmp_path):
    from numcodecs import Blosc

    arr = zarr.create_array(
        tmp_path, shape=(45, 71), chunks=(10, 16), dtype="f4", zarr_format=2,
        compressors=Blosc(cname="zstd"), fill_value=None,
    )  # fmt: skip
    arr[:10, :10] = 1.5
    expected = np.zeros((45, 71), "f4")
    expected[:10, :10] = 1.5
    ours, kind = read_all(tmp_path, OURS)
    theirs, _ = read_all(tmp_path, DEFAULT)
    assert kind is B2storeCodecPipeline
    for key, mine, zarrs in zip(KEYS, ours, theirs, strict=False):
        np.testing.assert_array_equal(mine, zarrs)
        np.testing.assert_array_equal(mine, expected[key])
