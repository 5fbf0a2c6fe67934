"""Writing sparse frames and ``.b2d`` trees into an S3 bucket (moto's server on localhost,
tests/s3server.py), counting the requests: an object store has no rename, no append and no
lock, so chunk objects go first and the index last, in one PUT; a killed writer leaves the
old frame; two writers cannot overwrite each other's index silently (conditional writes).
What is written is read back by b2store from the bucket and by python-blosc2 from a copy.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

pytest.importorskip("s3fs", reason="s3:// URLs are written by fsspec's s3fs (the test-s3 extra)")
pytest.importorskip("moto.server", reason="the local S3 API is moto's server (the test-s3 extra)")
blosc2 = pytest.importorskip("blosc2")
xr = pytest.importorskip("xarray")


import b2store  # noqa: E402
from b2store.frame.remote_sparse import conditional_writes  # noqa: E402

INDEX = "chunks.b2frame"


def _keys(s3, bucket: str, prefix: str) -> list[str]:
    listed = s3.client().list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return sorted(o["Key"][len(prefix) :] for o in listed)


def _download(s3, bucket: str, prefix: str, to) -> None:
    """The objects under ``prefix`` as files under ``to`` (python-blosc2 reads files)."""
    for key in _keys(s3, bucket, prefix):
        path = to / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(s3.client().get_object(Bucket=bucket, Key=prefix + key)["Body"].read())


def _writes(s3) -> list[str]:
    """The keys PUT since the last reset, in order."""
    return [r.path.split("/", 2)[-1] for r in s3.counted("PUT")]


def test_a_sparse_frame_goes_up_chunks_first_and_its_index_last(s3, tmp_path):
    data = np.random.default_rng(1).random((40, 30, 20)).astype("f4")
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/s.b2nd"
    s3.reset()
    arr = b2store.asarray(
        data,
        url,
        contiguous=False,
        chunks=(10, 30, 20),
        blocks=(5, 10, 20),
        vlmeta={"units": "K"},
        storage_options=s3.storage_options,
    )
    puts = _writes(s3)
    # Four chunk objects (PUT at once), then the index once (with the vlmeta: not twice).
    assert sorted(puts[:-1]) == [f"s.b2nd/{i:08X}.chunk" for i in range(4)]
    assert puts[-1] == f"s.b2nd/{INDEX}"
    np.testing.assert_array_equal(arr[...], data)
    _download(s3, bucket, "s.b2nd/", tmp_path / "down.b2nd")
    theirs = blosc2.open(str(tmp_path / "down.b2nd"))
    np.testing.assert_array_equal(theirs[...], data)
    assert theirs.vlmeta["units"] == "K" and not theirs.schunk.contiguous


def test_a_sparse_frame_by_python_blosc2_reads_from_a_bucket(s3, tmp_path):
    data = np.random.default_rng(2).normal(size=(400, 300))
    local = tmp_path / "theirs.b2nd"
    made = blosc2.asarray(data, urlpath=str(local), contiguous=False, mode="w",
                          chunks=(100, 300), blocks=(10, 300))  # fmt: skip
    made.vlmeta["_ARRAY_DIMENSIONS"] = ["y", "x"]
    del made
    bucket = s3.new_bucket()
    for p in sorted(local.iterdir()):
        s3.put(bucket, f"theirs.b2nd/{p.name}", p.read_bytes())
    url = f"s3://{bucket}/theirs.b2nd"
    s3.reset()
    arr = b2store.open(url, storage_options=s3.storage_options)
    gets = s3.counted("GET")
    assert len(gets) <= 2  # the listing that finds a prefix, and the index
    assert not arr.schunk.contiguous and arr.schunk.remote
    s3.reset()
    np.testing.assert_array_equal(arr[100:300], data[100:300])
    whole = [r for r in s3.counted("GET")]
    # Two chunks, each one GET of its whole object.
    assert sorted(r.path.rsplit("/", 1)[-1] for r in whole) == ["00000001.chunk", "00000002.chunk"]
    s3.reset()
    assert arr[321, 17] == data[321, 17]
    one_block = 10 * 300 * 8
    assert sum(r.sent for r in s3.counted("GET")) <= 1.1 * one_block + 4096
    with xr.open_dataset(url, engine="b2nd", storage_options=s3.storage_options) as ds:
        np.testing.assert_array_equal(ds["data"].values, data)


def test_changes_to_a_sparse_frame_in_a_bucket(s3, tmp_path):
    """``mode="a"``: a changed chunk goes up under a new id, then the index; the chunk it
    replaces goes after. A reader holding the older index moves to the new one."""
    data = np.arange(60 * 50, dtype="i8").reshape(60, 50)
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/c.b2nd"
    options = s3.storage_options
    b2store.asarray(data, url, contiguous=False, chunks=(20, 50), storage_options=options)
    reader = b2store.open(url, storage_options=options)
    np.testing.assert_array_equal(reader[...], data)
    writer = b2store.open(url, mode="a", storage_options=options)
    s3.reset()
    writer[25, :] = -1
    assert _writes(s3) == ["c.b2nd/00000003.chunk", f"c.b2nd/{INDEX}"]
    assert _keys(s3, bucket, "c.b2nd/") == [f"{i:08X}.chunk" for i in (0, 2, 3)] + [INDEX]
    expected = data.copy()
    expected[25, :] = -1
    np.testing.assert_array_equal(reader[...], expected)  # (chunk 1 was gone: index reread)
    np.testing.assert_array_equal(b2store.open(url, storage_options=options)[...], expected)
    _download(s3, bucket, "c.b2nd/", tmp_path / "down.b2nd")
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "down.b2nd"))[...], expected)
    b2store.asarray(data, f"s3://{bucket}/one.b2nd", storage_options=options)
    with pytest.raises(ValueError, match="read-only"):  # one object: written only whole
        b2store.open(f"s3://{bucket}/one.b2nd", mode="a", storage_options=options)


def test_a_new_frame_over_an_old_one_and_mode_x(s3):
    """A new frame replaces an old one in its index's PUT: its chunks take ids past the old
    ones (a reader of the old index never finds a new chunk under an old id), and the old
    chunk objects go after. ``mode="x"`` refuses, writing nothing."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/r.b2nd"
    options = s3.storage_options
    b2store.asarray(np.arange(30.0), url, contiguous=False, chunks=(10,), storage_options=options)
    s3.reset()
    with pytest.raises(FileExistsError, match="r.b2nd"):
        b2store.asarray(np.ones(3), url, contiguous=False, mode="x", storage_options=options)
    assert _writes(s3) == []
    new = b2store.asarray(-np.arange(20.0), url, contiguous=False, chunks=(10,), mode="w",
                          storage_options=options)  # fmt: skip
    puts = _writes(s3)
    assert sorted(puts[:-1]) == ["r.b2nd/00000003.chunk", "r.b2nd/00000004.chunk"]
    assert puts[-1] == f"r.b2nd/{INDEX}"
    assert _keys(s3, bucket, "r.b2nd/") == ["00000003.chunk", "00000004.chunk", INDEX]
    np.testing.assert_array_equal(new[...], -np.arange(20.0))
    np.testing.assert_array_equal(b2store.open(url, storage_options=options)[...], -np.arange(20.0))


def test_two_writers_cannot_overwrite_each_others_index(s3):
    """Writer A stores its chunks; meanwhile B appends and publishes; A's index PUT, made
    from the index it read, is refused (If-Match its ETag): A gets ConflictError, B's chunk
    stays, and A's chunk objects are removed."""
    import fsspec

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/w.b2frame"
    options = s3.storage_options
    fs, _ = fsspec.core.url_to_fs(url, **options)
    assert conditional_writes(fs)  # (every admitted stack: pyproject.toml's remote extra)
    a = b2store.SChunk.create(url, contiguous=False, typesize=8, storage_options=options)
    a.append_data(np.full(100, 5.0))  # (not zeros: a chunk of zeros stores no object)
    b = b2store.SChunk.open(url, mode="a", storage_options=options)

    def chunks():
        yield _encoded(a, np.ones(100))
        b.append_data(np.full(100, 2.0))  # B publishes while A is between chunks
        yield _encoded(a, np.full(100, 3.0))

    with pytest.raises(b2store.ConflictError, match="w.b2frame"):
        a.extend_chunks(chunks())
    reader = b2store.SChunk.open(url, storage_options=options)
    assert reader.nchunks == 2
    np.testing.assert_array_equal(np.frombuffer(reader.decompress_chunk(0), "f8"), 5.0)
    np.testing.assert_array_equal(np.frombuffer(reader.decompress_chunk(1), "f8"), 2.0)
    assert _keys(s3, bucket, "w.b2frame/") == ["00000000.chunk", "00000002.chunk", INDEX]


def test_every_put_of_a_sparse_frame_carries_its_condition(s3):
    """What the server received: each chunk object PUT with ``If-None-Match: *``, a new
    frame's index with ``If-None-Match: *``, each later index with ``If-Match`` the ETag of
    the index it replaces. On every admitted stack (the oldest: aiobotocore 2.16, whose
    botocore 1.35.74 is the first that sends If-Match; the two-writer tests above only see
    a refusal, which a stack sending no condition would never get)."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/c.b2nd"
    options = s3.storage_options
    data = np.random.default_rng(3).random((40, 50))
    s3.reset()
    b2store.asarray(data, url, contiguous=False, chunks=(10, 50), storage_options=options)
    chunks = [r for r in s3.counted("PUT") if r.path.endswith(".chunk")]
    index = [r for r in s3.counted("PUT") if r.path.endswith(INDEX)]
    assert len(chunks) == 4 and len(index) == 1
    assert {(r.if_none_match, r.if_match) for r in chunks + index} == {("*", None)}
    etag = s3.client().head_object(Bucket=bucket, Key=f"c.b2nd/{INDEX}")["ETag"]

    arr = b2store.open(url, mode="a", storage_options=options)
    for step in range(2):
        s3.reset()
        arr[10:20] = np.arange(500.0).reshape(10, 50) + step  # (stored: not one value)
        chunks = [r for r in s3.counted("PUT") if r.path.endswith(".chunk")]
        index = [r for r in s3.counted("PUT") if r.path.endswith(INDEX)]
        assert [(r.if_none_match, r.if_match) for r in chunks] == [("*", None)]
        assert [(r.if_none_match, r.if_match) for r in index] == [(None, etag)]
        etag = s3.client().head_object(Bucket=bucket, Key=f"c.b2nd/{INDEX}")["ETag"]


def _encoded(schunk, values) -> bytes:
    from b2store.chunk.encoder import encode_chunk

    return encode_chunk(values, schunk.params)


def test_a_killed_writer_leaves_the_old_frame(s3, tmp_path):
    """A process killed while it replaces a sparse frame (some of its chunk objects up, the
    index not yet) leaves the old frame, readable whole by b2store and python-blosc2."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/k.b2nd"
    options = s3.storage_options
    old = np.arange(64 * 40, dtype="f8").reshape(64, 40)
    b2store.asarray(old, url, contiguous=False, chunks=(1, 40), storage_options=options)
    # 64 chunks go up 16 at a time, each answered after 50 ms: the writer is killed once the
    # first ones are in, well before its last batch and its index.
    child = textwrap.dedent(f"""
        import numpy as np, b2store
        b2store.asarray(np.ones((64, 40)), {url!r}, contiguous=False, chunks=(1, 40),
                        storage_options={options!r}, mode="w")
    """)
    s3.reset()
    s3.delay = 0.05
    proc = subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len([k for k in _writes(s3) if k.endswith(".chunk")]) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the writer ended"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        s3.delay = 0.0
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert f"k.b2nd/{INDEX}" not in _writes(s3)
    np.testing.assert_array_equal(b2store.open(url, storage_options=options)[...], old)
    _download(s3, bucket, "k.b2nd/", tmp_path / "down.b2nd")
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "down.b2nd"))[...], old)


def _dataset(seed: int, names=("t", "p")) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    variables = {
        "t": (("time", "y", "x"), rng.random((6, 8, 10)).astype("f4")),
        "p": (("time", "y"), rng.random((6, 8))),
    }
    return xr.Dataset(
        {n: variables[n] for n in names},
        coords={"time": np.arange(6), "x": np.arange(10.0)},
        attrs={"title": "a tree in a bucket"},
    )


def test_to_b2nd_puts_a_b2d_tree_frames_first_attributes_last(s3, tmp_path):
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/d.b2d"
    options = s3.storage_options
    ds = _dataset(3)
    s3.reset()
    b2store.to_b2nd(ds, url, storage_options=options)
    puts = [k.removeprefix("d.b2d/") for k in _writes(s3)]
    frames = [k for k in puts if k.endswith(".b2nd")]
    assert sorted(frames) == ["p.b2nd", "t.b2nd", "time.b2nd", "x.b2nd"]
    assert puts[-1] == "__vlmeta__.b2f"
    assert max(puts.index(f) for f in frames) < puts.index("__vlmeta__.b2f")
    with xr.open_dataset(url, engine="b2nd", storage_options=options) as back:
        xr.testing.assert_identical(back.load(), ds)
    _download(s3, bucket, "d.b2d/", tmp_path / "down.b2d")
    with blosc2.TreeStore(str(tmp_path / "down.b2d"), mode="r") as ts:
        np.testing.assert_array_equal(ts["/t"][...], ds["t"].values)
    # A smaller Dataset replaces it: the variables it lacks go.
    smaller = _dataset(4, names=("p",))
    b2store.to_b2nd(smaller, url, storage_options=options, mode="w")
    assert "t.b2nd" not in _keys(s3, bucket, "d.b2d/")
    with xr.open_dataset(url, engine="b2nd", storage_options=options) as back:
        xr.testing.assert_identical(back.load(), smaller)
    s3.reset()
    with pytest.raises(FileExistsError, match="d.b2d"):
        b2store.to_b2nd(ds, url, mode="w-", storage_options=options)
    with pytest.raises(b2store.TargetExistsError, match=f"^{url} exists and mode='w-' does"):
        b2store.to_b2nd(ds, url, storage_options=options)  # (the default)
    assert _writes(s3) == []


def test_to_b2nd_puts_a_sparse_frame(s3, tmp_path):
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/one.b2nd"
    options = s3.storage_options
    ds = _dataset(5, names=("t",)).drop_vars(["time", "x"])
    s3.reset()
    b2store.to_b2nd(ds, url, contiguous=False, storage_options=options)
    puts = _writes(s3)
    assert puts[-1] == f"one.b2nd/{INDEX}" and all(k.endswith(".chunk") for k in puts[:-1])
    with xr.open_dataset(url, engine="b2nd", storage_options=options) as back:
        xr.testing.assert_identical(back.load(), ds)
    _download(s3, bucket, "one.b2nd/", tmp_path / "down.b2nd")
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "down.b2nd"))[...], ds["t"].values)


def test_dask_data_goes_up_chunk_by_chunk_from_its_tasks(s3):
    """A dask-backed variable to a sparse frame in a bucket: each task encodes and stores
    its chunk (a chunk of zeros stores no object), the index goes last, and dask chunks that
    are not the frame's are rechunked to them first."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/dask.b2nd"
    options = s3.storage_options
    values = np.random.default_rng(6).random((12, 20, 30)).astype("f4")
    values[4:8] = 0  # one whole chunk of zeros
    ds = xr.Dataset({"t": (("time", "y", "x"), values)}, coords={"time": np.arange(12)})
    ds = ds.chunk({"time": 4})
    s3.reset()
    b2store.to_b2nd(ds, url, contiguous=False, storage_options=options)
    puts = _writes(s3)
    assert sorted(puts[:-1]) == ["dask.b2nd/00000000.chunk", "dask.b2nd/00000002.chunk"]
    assert puts[-1] == f"dask.b2nd/{INDEX}"
    with xr.open_dataset(url, engine="b2nd", storage_options=options) as back:
        xr.testing.assert_identical(back.load(), ds.load())
    # Dask chunks along another axis than the frame's: rechunked, read back the same.
    b2store.to_b2nd(ds.chunk({"time": 5, "x": 7}), url, contiguous=False, mode="w",
                    encoding={"t": {"chunks": (4, 20, 30)}}, storage_options=options)  # fmt: skip
    with xr.open_dataset(url, engine="b2nd", storage_options=options) as back:
        xr.testing.assert_identical(back.load(), ds.load())
        assert back["t"].encoding["chunks"] == (4, 20, 30)


@pytest.mark.slow
def test_a_cluster_writes_its_chunks_straight_into_the_bucket(s3, tmp_path, monkeypatch):
    """``to_b2nd`` of a dask Dataset to a sparse frame in a bucket on a ``LocalCluster`` of
    processes: the workers store the chunks (here, storing one from this process raises),
    only their index entries come back, and the index is written last. python-blosc2 reads
    the frame (copied down) and the climatology through the engine equals NumPy's."""
    distributed = pytest.importorskip("distributed")
    from b2store.frame import remote_sparse

    def not_here(*args, **kwargs):
        raise AssertionError("a chunk was stored from the client's process")

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/cluster.b2nd"
    options = s3.storage_options
    values = np.random.default_rng(12).normal(280, 5, (24, 30, 40)).round(3)
    ds = xr.Dataset({"tas": (("time", "y", "x"), values)}, coords={"time": np.arange(24)})
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,  # fmt: skip
        distributed.Client(cluster),
    ):
        monkeypatch.setattr(remote_sparse, "put_chunk", not_here)
        s3.reset()
        b2store.to_b2nd(ds.chunk({"time": 3}), url, contiguous=False, storage_options=options)
        monkeypatch.undo()
        puts = _writes(s3)
        assert len(puts) == 9 and puts[-1] == f"cluster.b2nd/{INDEX}"
        with xr.open_dataset(url, engine="b2nd", chunks={}, storage_options=options) as back:
            np.testing.assert_allclose(
                back["tas"].mean("time").compute().values, values.mean(0), rtol=1e-12
            )
    _download(s3, bucket, "cluster.b2nd/", tmp_path / "down.b2nd")
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "down.b2nd"))[...], values)


def test_zarr_writes_through_b2ndstore_into_a_bucket(s3, tmp_path):
    """``to_zarr(B2ndStore("s3://.../x.b2d"))``: each array a sparse frame under the tree's
    prefix (chunk by chunk, as zarr writes them), the groups' attributes small frames stored
    whole. The engine and zarr read it back from the bucket; python-blosc2 opens each array
    (copied down; its TreeStore lists contiguous members only)."""
    zarr = pytest.importorskip("zarr")
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/z.b2d"
    options = s3.storage_options
    ds = _dataset(7)
    store = b2store.B2ndStore(url, mode="w", storage_options=options)
    ds.chunk({"time": 2}).to_zarr(store, mode="w", consolidated=False, zarr_format=3)
    keys = _keys(s3, bucket, "z.b2d/")
    assert {"__vlmeta__.b2f", "t.b2nd/chunks.b2frame", "p.b2nd/chunks.b2frame"} <= set(keys)
    with xr.open_dataset(url, engine="b2nd", storage_options=options) as back:
        xr.testing.assert_identical(back.load(), ds)
    group = zarr.open_group(b2store.B2ndStore(url, storage_options=options), mode="r")
    np.testing.assert_array_equal(group["t"][2:5], ds["t"].values[2:5])
    _download(s3, bucket, "z.b2d/", tmp_path / "down.b2d")
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "down.b2d" / "t.b2nd"))[...],
                                  ds["t"].values)  # fmt: skip
    # mode="w" again: what was there goes first.
    b2store.B2ndStore(url, mode="w", storage_options=options)
    assert _keys(s3, bucket, "z.b2d/") == []


def test_writers_of_one_array_in_a_bucket_make_their_change_again(s3, monkeypatch):
    """Four threads write a row each of one array through their own stores, all from the
    same index: each waits for the others before its first index PUT, so one wins and three
    are refused (ConflictError from If-Match). Each refused writer makes its change again
    from the new index; every row lands, and the refused writers' chunk objects are gone."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    zarr = pytest.importorskip("zarr")
    from b2store.frame.remote_sparse import RemoteSparseFrame

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/many.b2nd"
    options = s3.storage_options
    assert conditional_writes(_fs(url, options))  # (every admitted stack)
    zarr.create_array(b2store.B2ndStore(url, mode="w", storage_options=options),
                      shape=(4, 50), chunks=(1, 50), dtype="i4", fill_value=-1)  # fmt: skip
    gathered, counted, tries = threading.Barrier(4, timeout=60), threading.Lock(), [0]
    publish = RemoteSparseFrame._replace_index

    def together(self, frame):
        # The first four tries wait for each other, so they are the four writers' first: a
        # writer held here tries nothing else until all four are. (Not told apart by thread,
        # as zarr runs each write in whichever thread of its pool is free, nor by the frame
        # object's id, which a frame made and dropped while opening can hand on.)
        with counted:
            tries[0] += 1
            first = tries[0] <= 4
        if first:
            gathered.wait()
        return publish(self, frame)

    monkeypatch.setattr(RemoteSparseFrame, "_replace_index", together)

    def write_row(i):
        async def write():
            store = b2store.B2ndStore(url, mode="a", storage_options=options)
            z = await zarr.api.asynchronous.open_array(store=store)
            await z.setitem(i, np.arange(50) + 100 * i)

        # Each writer in an event loop of its own, with its own pool of threads: zarr's one
        # pool may have fewer threads than there are writers to hold at once (a test that
        # set threading.max_workers to 2 made it so for the process).
        asyncio.run(write())

    s3.reset()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write_row, range(4)))
    refused = [r for r in s3.counted("PUT") if r.status == 412 and r.path.endswith(INDEX)]
    assert len(refused) >= 3
    got = b2store.open(url, storage_options=options)[...]
    np.testing.assert_array_equal(got, np.arange(50) + 100 * np.arange(4)[:, None])
    assert len(_keys(s3, bucket, "many.b2nd/")) == 4 + 1  # (the refused writers' went)


def _object_store(request, name: str, where: str) -> tuple[str, dict]:
    """A URL and options for a new sparse frame in: the local S3 server (conditional
    writes), fsspec's memory filesystem (none), an obstore in-memory store (its put
    modes)."""
    import uuid

    if where == "s3":
        s3 = request.getfixturevalue("s3")
        return f"s3://{s3.new_bucket()}/{name}", s3.storage_options
    url = f"memory://b2store-{uuid.uuid4().hex[:12]}/{name}"
    if where == "memory":
        return url, {}
    obstore = pytest.importorskip("obstore", reason="obstore stores (the test-virtual extra)")
    return url, {"store": obstore.store.MemoryStore()}


@pytest.mark.parametrize("where", ["s3", "memory", "obstore"])
def test_the_highest_chunk_id_deleted_is_never_given_again(request, where):
    """The chunk with the highest id is deleted, then other handles (as other processes:
    they know the index alone) append: no id an older index named is given again, and a
    reader still holding that index reads its chunk's own bytes, never the new chunk's.
    (Before: through fsspec's memory filesystem, which takes no If-None-Match, the next
    writer stored its chunk under the deleted id, over the object kept for such readers,
    and the reader read the new values as the old chunk's.)"""
    url, options = _object_store(request, "ids.b2frame", where)
    n = 1000

    def values(v):
        return np.arange(n, dtype="<f8") + v  # (not one value: stored, not special)

    made = b2store.SChunk.create(url, contiguous=False, typesize=8, chunksize=8 * n,
                                 storage_options=options)  # fmt: skip
    for v in (0, 10, 20):
        made.append_data(values(v))
    made.close()
    old = b2store.SChunk.open(url, storage_options=options)
    given = set(old.offsets.tolist())  # every id given so far
    with b2store.SChunk.open(url, mode="a", storage_options=options) as writer:
        writer.delete_chunk(2)  # the highest id
    for step in range(3):
        with b2store.SChunk.open(url, mode="a", storage_options=options) as writer:
            before = set(writer.offsets.tolist())
            writer.append_data(values(100 + step))
            new = set(writer.offsets.tolist()) - before
            assert len(new) == 1 and not new & given, (sorted(given), sorted(new))
            given |= new
            if step == 1:
                writer.delete_chunk(writer.nchunks - 1)  # the highest again
        np.testing.assert_array_equal(np.frombuffer(old.decompress_chunk(2), "<f8"), values(20))
    with b2store.SChunk.open(url, storage_options=options) as now:
        got = [np.frombuffer(now.decompress_chunk(i), "<f8")[0] for i in range(now.nchunks)]
    assert got == [0, 10, 100, 102]


def _fs(url, options):
    import fsspec

    return fsspec.core.url_to_fs(url, **options)[0]


@pytest.mark.slow
def test_a_cluster_writes_through_b2ndstore_into_a_bucket(s3, tmp_path):
    """``to_zarr`` of a dask Dataset on a ``LocalCluster`` of processes into a
    ``B2ndStore`` in a bucket: the store pickles to the workers, each writes its chunks
    (making its change again where another published first); read back identical."""
    distributed = pytest.importorskip("distributed")
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/cluster.b2d"
    options = s3.storage_options
    ds = _dataset(8)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None
        ) as cluster,  # fmt: skip
        distributed.Client(cluster),
    ):
        store = b2store.B2ndStore(url, mode="w", storage_options=options)
        ds.chunk({"time": 1}).to_zarr(store, mode="w", consolidated=False, zarr_format=3)
    with xr.open_dataset(url, engine="b2nd", storage_options=options) as back:
        xr.testing.assert_identical(back.load(), ds)
    _download(s3, bucket, "cluster.b2d/", tmp_path / "down.b2d")
    for name in ("t", "p"):
        theirs = blosc2.open(str(tmp_path / "down.b2d" / f"{name}.b2nd"))
        np.testing.assert_array_equal(theirs[...], ds[name].values)


def test_appends_and_regions_into_a_sparse_frame_in_a_bucket(s3, tmp_path):
    """``to_b2nd(..., append_dim=)`` into a bucket: the first append makes a sparse frame,
    the next ones store only the chunks they touch and then the index (one PUT each, no
    chunk object replaced in place); a region write the same. Read back identical by the
    engine, and by python-blosc2 copied down."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/a.b2nd"
    options = s3.storage_options
    rng = np.random.default_rng(9)
    ds = xr.Dataset(
        {"t": (("time", "y"), rng.random((12, 10)).astype("f4"), {"units": "K"})},
        coords={"time": np.arange(12)},
        attrs={"title": "appended"},
    )
    s3.reset()
    b2store.to_b2nd(ds.isel(time=slice(0, 4)), url, append_dim="time", storage_options=options)
    assert _writes(s3)[-1] == f"a.b2nd/{INDEX}"
    for start in (4, 8):
        s3.reset()
        part = ds.isel(time=slice(start, start + 4))
        b2store.to_b2nd(part, url, append_dim="time", storage_options=options)
        puts = _writes(s3)
        assert puts[-1] == f"a.b2nd/{INDEX}" and puts.count(f"a.b2nd/{INDEX}") == 1
        assert all(k.endswith(".chunk") for k in puts[:-1]) and len(set(puts)) == len(puts)
    with xr.open_dataset(url, engine="b2nd", storage_options=options) as back:
        xr.testing.assert_identical(back.load(), ds)
    zeroed = ds.copy(deep=True)
    zeroed["t"][5:7] = 0
    b2store.to_b2nd(zeroed.isel(time=slice(5, 7)).drop_vars("time"), url,
                    region={"time": slice(5, 7)}, storage_options=options)  # fmt: skip
    with xr.open_dataset(url, engine="b2nd", storage_options=options) as back:
        xr.testing.assert_identical(back.load(), zeroed)
    _download(s3, bucket, "a.b2nd/", tmp_path / "down.b2nd")
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "down.b2nd"))[...], zeroed["t"])


def test_a_broken_sparse_frame_in_a_bucket_is_a_format_error(s3):
    """A chunk object missing or cut short, or a prefix with no index: a FormatError
    naming what is wrong, never a FileNotFoundError from the store or wrong values."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/b.b2nd"
    options = s3.storage_options
    data = np.random.default_rng(3).random((40, 30))
    b2store.asarray(data, url, contiguous=False, chunks=(10, 30), storage_options=options)
    client = s3.client()
    client.delete_object(Bucket=bucket, Key="b.b2nd/00000001.chunk")
    whole = client.get_object(Bucket=bucket, Key="b.b2nd/00000002.chunk")["Body"].read()
    client.put_object(Bucket=bucket, Key="b.b2nd/00000002.chunk", Body=whole[: len(whole) // 2])
    arr = b2store.open(url, storage_options=options)
    np.testing.assert_array_equal(arr[:10], data[:10])
    with pytest.raises(b2store.FormatError, match="chunk object.*00000001.chunk"):
        arr[10:20]
    with pytest.raises(b2store.FormatError, match="00000002.chunk"):
        arr[20:30]
    with pytest.raises(b2store.FormatError, match="00000002.chunk|cbytes"):
        arr[25, 3]  # (a few blocks of it: the block starts or the block's bytes are short)
    client.put_object(Bucket=bucket, Key="lone/00000000.chunk", Body=whole)
    with pytest.raises(b2store.FormatError, match="chunks.b2frame"):
        b2store.open(f"s3://{bucket}/lone", storage_options=options)
    # An index object larger than any the limits admit is refused before it is read.
    client.put_object(Bucket=bucket, Key="huge/chunks.b2frame", Body=bytes(200_000))
    small = b2store.Limits(max_nchunks=64, max_vlmeta_nbytes=1024, max_metalayer_nbytes=1024)
    s3.reset()
    with pytest.raises(b2store.FormatError, match="chunks.b2frame.*at most"):
        b2store.open(f"s3://{bucket}/huge", storage_options=options, limits=small)
    assert sum(r.sent for r in s3.counted("GET")) < 10_000  # (a listing, never the object)


def test_the_chunk_objects_of_a_new_frame_go_up_at_once(s3):
    """Each PUT is a round trip: the chunk objects of a new sparse frame are stored many at
    a time (with 20 ms added to every answer, 8 or more in flight), then the index."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/many.b2nd"
    data = np.random.default_rng(4).random((40, 20, 30))
    s3.reset()
    s3.delay = 0.02
    try:
        b2store.asarray(data, url, contiguous=False, chunks=(1, 20, 30),
                        storage_options=s3.storage_options)  # fmt: skip
    finally:
        s3.delay = 0.0
    puts = _writes(s3)
    assert len(puts) == 41 and puts[-1] == f"many.b2nd/{INDEX}"
    assert s3.most_in_flight >= 8
    np.testing.assert_array_equal(b2store.open(url, storage_options=s3.storage_options)[...], data)


def test_a_frame_replaced_under_a_reader_is_refused_not_misread(s3):
    """A reader keeps the index of the version it opened; every later range it reads is
    asked for that version only (If-Match its ETag). Replaced meanwhile (``asarray`` with
    ``mode="w"``): a FormatError saying so, never the new object's bytes read by the old
    index. Opened again, it reads the new one."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/r.b2nd"
    options = s3.storage_options
    data = np.random.default_rng(14).random((400, 300))
    b2store.asarray(data, url, chunks=(50, 300), storage_options=options)
    reader = b2store.open(url, storage_options=options)
    np.testing.assert_array_equal(reader[100:200], data[100:200])
    b2store.asarray(data * 2, url, chunks=(50, 300), storage_options=options, mode="w")
    with pytest.raises(b2store.FormatError, match="replaced since"):
        reader[200:300]
    with pytest.raises(b2store.FormatError, match="replaced since"):
        reader[250, 7]
    np.testing.assert_array_equal(b2store.open(url, storage_options=options)[200:300],
                                  2 * data[200:300])  # fmt: skip


def test_a_change_of_many_chunks_makes_its_requests_side_by_side(s3):
    """A write into an open array in a bucket that touches 8 chunks reads them, their sizes,
    and stores the new ones 8 at a time (each a round trip), then the index once."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/c8.b2nd"
    options = s3.storage_options
    data = np.random.default_rng(15).random((16, 20, 30))
    b2store.asarray(data, url, contiguous=False, chunks=(1, 20, 30), storage_options=options)
    arr = b2store.open(url, mode="a", storage_options=options)
    s3.reset()
    s3.delay = 0.02
    try:
        arr[4:12, 3] = -1.0
    finally:
        s3.delay = 0.0
    puts = _writes(s3)
    assert len(puts) == 9 and puts[-1] == f"c8.b2nd/{INDEX}"
    assert s3.most_in_flight >= 8
    expected = data.copy()
    expected[4:12, 3] = -1.0
    np.testing.assert_array_equal(b2store.open(url, storage_options=options)[...], expected)


def test_threads_sharing_one_remote_array_take_turns(s3):
    """Threads writing through one handle of a sparse frame in a bucket: their changes take
    turns (none loses another's chunk, nor removes another's chunk objects)."""
    from concurrent.futures import ThreadPoolExecutor

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/shared.b2nd"
    options = s3.storage_options
    arr = b2store.zeros((12, 30), "i8", url, contiguous=False, chunks=(1, 30),
                        storage_options=options)  # fmt: skip

    def write_row(i):
        arr[i] = i + 1

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(write_row, range(12)))
    expected = np.repeat(np.arange(1, 13)[:, None], 30, axis=1)
    np.testing.assert_array_equal(b2store.open(url, storage_options=options)[...], expected)
    assert len(_keys(s3, bucket, "shared.b2nd/")) == 12 + 1


def test_a_frame_of_the_other_layout_under_the_same_name_is_replaced(s3):
    """A sparse frame written where a contiguous one (one object of that name) was, and the
    other way round: the old one is removed once the new one is in place, so a reader never
    finds the old frame again under that name."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/x.b2nd"
    options = s3.storage_options
    first, second, third = (np.full((6, 8), k, "f4") for k in (1, 2, 3))
    b2store.asarray(first, url, chunks=(2, 8), storage_options=options)  # one object
    b2store.asarray(second, url, contiguous=False, chunks=(2, 8), storage_options=options, mode="w")
    assert "x.b2nd" not in [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket)
                            .get("Contents", [])]  # fmt: skip
    np.testing.assert_array_equal(b2store.open(url, storage_options=options)[...], second)
    b2store.asarray(third, url, chunks=(2, 8), storage_options=options, mode="w")
    assert _keys(s3, bucket, "x.b2nd/") == []
    np.testing.assert_array_equal(b2store.open(url, storage_options=options)[...], third)
    with pytest.raises(FileExistsError, match="x.b2nd"):
        b2store.asarray(first, url, contiguous=False, mode="x", storage_options=options)
