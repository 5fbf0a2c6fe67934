"""Writes through b2store's Zarr codec pipeline: the same stored bytes as zarr's own pipeline
(every Blosc codec and shuffle it serves, Zarr v2 and v3, LocalStore and MemoryStore), whole,
partial, edge, scalar, orthogonal and fill-only writes, ``write_empty_chunks`` honoured, a
damaged chunk under a partial write refused with b2store's FormatError, concurrent writers
of separate chunks as safe as with zarr's pipeline."""

import os
import sys
import threading

import numcodecs
import numpy as np
import pytest

zarr = pytest.importorskip("zarr", reason="the zarr extra is not installed")

from zarr.codecs import BloscCodec, ZstdCodec  # noqa: E402

import b2store  # noqa: E402
from b2store.integrations.numcodecs.codec import Blosc2  # noqa: E402
from b2store.integrations.zarr import pipeline_writes  # noqa: E402
from b2store.integrations.zarr.codecs import Blosc2Codec  # noqa: E402

# zarr's Zarr v2 codec encodes synchronously from zarr 3.4 on; before, b2store's pipeline
# leaves v2 writes to zarr's (its encoder is async only).
SYNC_V2 = hasattr(zarr.codecs._v2.V2Codec, "_encode_sync")
OURS = "b2store.integrations.zarr.pipeline.B2storeCodecPipeline"
DEFAULT = "zarr.core.codec_pipeline.BatchedCodecPipeline"


def values(shape=(45, 71), dtype="f4"):
    y, x = np.mgrid[: shape[0], : shape[1]]
    return np.round(np.sin(x / 7) * np.cos(y / 5) * 100 + y).astype(dtype)


@pytest.fixture
def written(monkeypatch):
    """The chunks b2store's writer merged and encoded."""
    seen = []
    real = pipeline_writes.Writer._one

    def spy(self, info, *args):
        seen.append(info[0].path)
        return real(self, info, *args)

    monkeypatch.setattr(pipeline_writes.Writer, "_one", spy)
    return seen


def writes(arr, expected):
    """Writes of every kind, applied to the array and to ``expected`` alike."""
    arr[:] = expected
    for key, value in [
        (np.s_[3:9, 2:30], 1),  # partial chunks, a scalar
        (np.s_[11, :], np.arange(71)),  # a row: an integer axis dropped
        (np.s_[20:30, 16:32], 0),  # whole chunks of the fill value: deleted
        (np.s_[40:, 60:], 5),  # the edge chunks
        (np.s_[:, 13], np.arange(45) * 2),
        (np.s_[0:20:7, 1::9], 3),  # steps
    ]:
        arr[key] = value
        expected[key] = value
    arr.oindex[[1, 5, 44], 3:7] = 7
    expected[np.ix_([1, 5, 44], range(3, 7))] = 7
    arr.vindex[[0, 17, 44], [1, 2, 70]] = 9
    expected[[0, 17, 44], [1, 2, 70]] = 9


def stored(where) -> dict:
    if isinstance(where, zarr.storage.MemoryStore):
        return {k: v.to_bytes() for k, v in where._store_dict.items()}
    found = {}
    for root, _dirs, files in os.walk(where):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, where)] = f.read()
    return found


def both(tmp_path, store="local", shape=(45, 71), dtype="f4", **create):
    """The same writes through zarr's pipeline and b2store's: both stores' contents."""
    found = []
    for which in (DEFAULT, OURS):
        if store == "local":
            where = tmp_path / which.rsplit(".", 1)[-1]
        else:
            where = zarr.storage.MemoryStore()
        expected = values(shape, dtype)
        with zarr.config.set({"codec_pipeline.path": which}):
            arr = zarr.create_array(where, shape=shape, chunks=(10, 16), dtype=dtype, **create)
            writes(arr, expected)
            np.testing.assert_array_equal(arr[:], expected)
        found.append(stored(where))
    assert found[0].keys() == found[1].keys()
    for key in found[0]:
        assert found[0][key] == found[1][key], key
    return found[1]


@pytest.mark.parametrize("cname", ["lz4", "zstd", "blosclz", "zlib"])
@pytest.mark.parametrize("shuffle", ["noshuffle", "shuffle", "bitshuffle"])
def test_v3_blosc_writes_zarrs_bytes(tmp_path, written, cname, shuffle):
    both(tmp_path, compressors=BloscCodec(cname=cname, shuffle=shuffle))
    assert written


@pytest.mark.parametrize("cname", ["lz4", "zstd", "blosclz", "zlib"])
@pytest.mark.parametrize("shuffle", [0, 1, 2])
def test_v2_blosc_writes_zarrs_bytes(tmp_path, written, cname, shuffle):
    both(tmp_path, zarr_format=2, compressors=numcodecs.Blosc(cname=cname, shuffle=shuffle))
    assert bool(written) == SYNC_V2


@pytest.mark.parametrize(
    "create",
    [
        {"compressors": Blosc2Codec(cname="lz4")},
        {"compressors": Blosc2Codec(cname="zstd", filters=[("trunc_prec", 12), ("shuffle", 0)])},
        {"zarr_format": 2, "compressors": Blosc2(cname="lz4", clevel=9)},
        {"dtype": "i8", "compressors": Blosc2Codec(cname="blosclz", shuffle="bitshuffle")},
        {"dtype": "u1", "compressors": BloscCodec(cname="zstd")},
        {"dtype": "c8", "zarr_format": 2, "compressors": numcodecs.Blosc(cname="lz4")},
    ],
)
def test_blosc2_and_other_dtypes_write_zarrs_bytes(tmp_path, written, create):
    create = dict(create)
    dtype = create.pop("dtype", "f4")
    both(tmp_path, dtype=dtype, **create)
    assert bool(written) == (SYNC_V2 or create.get("zarr_format") != 2)


def test_a_memory_store_gets_zarrs_bytes(tmp_path, written):
    found = both(tmp_path, store="memory", compressors=BloscCodec(cname="lz4"))
    assert written and "c/2/1" not in found  # (a chunk of the fill value: deleted)


def test_write_empty_chunks_is_honoured(tmp_path, written):
    found = both(
        tmp_path,
        compressors=Blosc2Codec(cname="zstd"),
        config={"write_empty_chunks": True},
    )
    assert written and os.path.join("c", "2", "1") in found


def test_a_nan_fill_value_and_a_v2_array_without_one(tmp_path, written):
    both(tmp_path / "nan", fill_value=np.nan, compressors=BloscCodec(cname="lz4"))
    assert written
    written.clear()
    both(tmp_path / "none", zarr_format=2, fill_value=None, compressors=numcodecs.Blosc())
    assert bool(written) == SYNC_V2


def test_a_damaged_chunk_under_a_partial_write_is_refused(tmp_path):
    expected = values()
    with zarr.config.set({"codec_pipeline.path": OURS}):
        arr = zarr.create_array(
            tmp_path, shape=expected.shape, chunks=(10, 16), dtype="f4", compressors=Blosc2Codec()
        )
        arr[:] = expected
        chunk = tmp_path / "c" / "1" / "2"
        raw = chunk.read_bytes()[:-20]
        chunk.write_bytes(raw)
        try:
            b2store.decode_chunk(raw)
        except b2store.FormatError as error:
            message = str(error)
        with pytest.raises(b2store.FormatError) as caught:
            arr[12:14, 33:40] = 1
        assert str(caught.value) == message
        assert chunk.read_bytes() == raw  # (not written over)
        arr[10:20, 32:48] = 2  # a whole chunk is written without reading the old one
        np.testing.assert_array_equal(arr[10:20, 32:48], 2)


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX's")
def test_a_fifo_under_a_partial_write_is_refused_not_waited_on(tmp_path):
    expected = values()
    with zarr.config.set({"codec_pipeline.path": OURS}):
        arr = zarr.create_array(
            tmp_path, shape=expected.shape, chunks=(10, 16), dtype="f4", compressors=BloscCodec()
        )
        arr[:] = expected
        chunk = tmp_path / "c" / "1" / "2"
        chunk.unlink()
        os.mkfifo(chunk)
        errors = []

        def write() -> None:
            try:
                arr[12:14, 33:40] = 1
            except BaseException as exc:
                errors.append(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(30)
        if writer.is_alive():  # (zarr's own read of the chunk waits for a FIFO's writer)
            with open(chunk, "wb"):
                pass
            writer.join(30)
            pytest.fail("the write waited on the FIFO")
    assert len(errors) == 1 and isinstance(errors[0], b2store.FormatError)
    assert str(errors[0]).startswith("chunk file: expected a regular file")


def test_concurrent_writers_of_separate_chunks(tmp_path, written):
    expected = values((80, 64))
    with zarr.config.set({"codec_pipeline.path": OURS, "threading.max_workers": 2}):
        arr = zarr.create_array(
            tmp_path, shape=expected.shape, chunks=(10, 16), dtype="f4", compressors=BloscCodec()
        )
        barrier = threading.Barrier(4)

        def writer(k: int) -> None:
            barrier.wait()
            for _ in range(3):
                arr[20 * k : 20 * k + 20, :] = expected[20 * k : 20 * k + 20, :]

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        np.testing.assert_array_equal(arr[:], expected)
    assert len(written) == 4 * 3 * 8
    assert sorted(stored(tmp_path)) == sorted(
        ["zarr.json"] + [os.path.join("c", str(i), str(j)) for i in range(8) for j in range(4)]
    )  # (and no temporary left)


def test_the_fill_test_is_zarrs(tmp_path, written):
    # Chunks that start with the fill and end otherwise, hold -0.0 under a fill of 0.0, NaNs
    # under a NaN fill: kept or deleted as zarr's pipeline keeps or deletes them.
    for fill in (0.0, np.nan, 3.0):
        found = []
        for which in (DEFAULT, OURS):
            where = tmp_path / f"{fill}-{which.rsplit('.', 1)[-1]}"
            with zarr.config.set({"codec_pipeline.path": which}):
                arr = zarr.create_array(
                    where, shape=(40, 32), chunks=(10, 16), dtype="f4", fill_value=fill,
                    compressors=BloscCodec(cname="lz4"),
                )  # fmt: skip
                value = np.full((40, 32), fill, "f4")
                value[9, 15] = 1  # chunk (0, 0): the fill but for its last item
                value[10:20, :16] = -0.0  # chunk (1, 0)
                value[10:20, 16:] = np.float32(np.nan)  # chunk (1, 1)
                value[20:30, 16:] = -np.float32(np.nan)  # chunk (2, 1): another NaN
                value[30:, :16] = fill  # chunk (3, 0)
                value[31, 0] = 0.0  # chunk (3, 0) with a 0.0 or a +0.0 below the fill
                arr[:] = value
                np.testing.assert_array_equal(arr[:], value)
            found.append(stored(where))
        assert found[0] == found[1], fill
        assert os.path.join("c", "0", "0") in found[1]
    assert written


def test_a_link_in_a_chunks_place_is_replaced_not_written_through(tmp_path, written):
    outside = tmp_path / "outside"
    outside.write_bytes(b"not a chunk")
    for which in (DEFAULT, OURS):
        where = tmp_path / which.rsplit(".", 1)[-1]
        with zarr.config.set({"codec_pipeline.path": which}):
            arr = zarr.create_array(
                where, shape=(20, 32), chunks=(10, 16), dtype="f4", compressors=BloscCodec()
            )
            (where / "c" / "0").mkdir(parents=True)
            os.symlink(outside, where / "c" / "0" / "1")
            arr[:] = values((20, 32))
            np.testing.assert_array_equal(arr[:], values((20, 32)))
        assert not os.path.islink(where / "c" / "0" / "1")
        assert outside.read_bytes() == b"not a chunk"
    assert written


def test_a_failed_file_write_leaves_no_temporary(tmp_path, written):
    # A directory where a chunk's file goes: the rename fails, as with zarr's pipeline.
    for which in (DEFAULT, OURS):
        where = tmp_path / which.rsplit(".", 1)[-1]
        with zarr.config.set({"codec_pipeline.path": which}):
            arr = zarr.create_array(
                where, shape=(20, 32), chunks=(10, 16), dtype="f4", compressors=BloscCodec()
            )
            (where / "c" / "1" / "0" / "x").mkdir(parents=True)
            with pytest.raises(OSError):
                arr[:] = values((20, 32))
        assert os.listdir(where / "c" / "1" / "0") == ["x"]
        names = [n for _r, _d, files in os.walk(where) for n in files]
        assert all(n == "zarr.json" or n.isdigit() for n in names), names
    assert written


def test_a_read_only_store_is_refused_as_zarr_refuses_it(tmp_path, written):
    messages = []
    for which in (DEFAULT, OURS):
        where = tmp_path / which.rsplit(".", 1)[-1]
        zarr.create_array(where, shape=(20, 32), chunks=(10, 16), dtype="f4",
                          compressors=BloscCodec())  # fmt: skip
        with zarr.config.set({"codec_pipeline.path": which}):
            arr = zarr.open_array(zarr.storage.LocalStore(where, read_only=True))
            with pytest.raises(ValueError) as caught:
                arr[:] = 1
            messages.append(str(caught.value))
        assert not (where / "c").exists()
    assert messages[0] == messages[1]


def test_arrays_it_does_not_serve_are_written_by_zarr(tmp_path, written):
    both(tmp_path, compressors=ZstdCodec())  # (gzip stores the time: never the same bytes)
    assert written == []


def test_writers_never_wait_on_their_own_threads(tmp_path, written):
    # A codec that encodes a chunk's blocks in b2store's kernel pool and waits for them (the
    # numcodecs blosc2 codec with nthreads=2): two writers at once, run in that pool's two
    # threads, held both waiting for blocks queued behind themselves (a hang).
    from b2store.chunk import native

    native.executor(2)  # (the kernel pool at two threads, as a read would leave it)
    expected = np.arange(4 * 1024 * 1024, dtype="f4").reshape(2048, 2048) % 1000
    with zarr.config.set({"codec_pipeline.path": OURS, "threading.max_workers": 2}):
        arr = zarr.create_array(
            tmp_path, shape=expected.shape, chunks=(1024, 512), dtype="f4", zarr_format=2,
            compressors=Blosc2(cname="lz4", nthreads=2),
        )  # fmt: skip
        arr[:] = expected
        errors = []

        def writer(k: int) -> None:
            try:
                for _ in range(2):
                    arr[k * 1024 : k * 1024 + 1024, :] = -1
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(k,), daemon=True) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "the writers hung"
        assert errors == []
        np.testing.assert_array_equal(arr[:], -1)
    assert len(written) == (8 + 2 * 2 * 4 if SYNC_V2 else 0)
