"""Blosc2 data in an S3 bucket: frames written by python-blosc2, put on a real S3 API on
localhost (moto's server, started and stopped by these tests, tests/s3server.py), read
through ``b2store.open``, the ``b2nd`` engine and ``B2ndStore`` with ``s3://`` URLs and
fsspec's ``storage_options``, counting the requests the server answers.

What object storage asks of a reader: every request is a round trip (tens of ms), so a frame
opens in two small GETs (and the size), a whole chunk is one ranged GET, and a read of a few
blocks fetches little more than those blocks' bytes.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

pytest.importorskip("s3fs", reason="s3:// URLs are read by fsspec's s3fs (the test-s3 extra)")
pytest.importorskip("moto.server", reason="the local S3 API is moto's server (the test-s3 extra)")
blosc2 = pytest.importorskip("blosc2")
xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

from http_server import guarded  # noqa: E402

import b2store  # noqa: E402
from b2store.chunk.partial import read_layout  # noqa: E402
from b2store.frame.sources import END_BYTES  # noqa: E402

SHAPE, CHUNKS, BLOCKS = (1000, 600), (100, 600), (10, 600)


@pytest.fixture(scope="module")
def field(s3, tmp_path_factory):
    """A float64 field written by python-blosc2 as one contiguous frame, put in a bucket:
    ``(url, data, local path)``."""
    data = np.random.default_rng(7).normal(280, 5, SHAPE).round(2)
    path = tmp_path_factory.mktemp("s3") / "field.b2nd"
    arr = blosc2.asarray(data, urlpath=str(path), mode="w", chunks=CHUNKS, blocks=BLOCKS)
    arr.vlmeta["_ARRAY_DIMENSIONS"] = ["y", "x"]
    del arr
    url = s3.put(s3.new_bucket(), "field.b2nd", path.read_bytes())
    return url, data, path


def _gets(s3):
    return s3.counted("GET")


def _chunk_bytes(path, nchunk: int) -> tuple[int, int, bytes]:
    """(offset in the file, cbytes, the chunk's bytes) of chunk ``nchunk``, as python-blosc2
    reads the frame."""
    arr = blosc2.open(str(path))  # (held: its schunk does not keep it alive)
    chunk = arr.schunk.get_chunk(nchunk)
    data = path.read_bytes()
    at = data.index(chunk)
    return at, len(chunk), chunk


def test_a_frame_opens_in_two_small_gets(s3, field):
    url, data, _ = field
    s3.reset()
    arr = b2store.open(url, storage_options=s3.storage_options)
    assert arr.shape == data.shape and arr.chunks == CHUNKS and arr.blocks == BLOCKS
    gets = _gets(s3)
    assert len(gets) <= 2
    assert all(g.range and g.range.startswith("bytes=") and g.sent <= END_BYTES for g in gets)
    # Beside them only the object's size (a HEAD): nothing else is asked.
    assert {r.method for r in s3.counted()} <= {"GET", "HEAD"}
    assert len(s3.counted("HEAD")) <= 1


def test_a_whole_chunk_is_one_ranged_get(s3, field):
    url, data, path = field
    arr = b2store.open(url, storage_options=s3.storage_options)
    at, cbytes, _ = _chunk_bytes(path, 4)
    s3.reset()
    np.testing.assert_array_equal(arr[400:500], data[400:500])
    gets = _gets(s3)
    assert len(gets) == 1
    assert gets[0].range == f"bytes={at}-{at + cbytes - 1}" and gets[0].sent == cbytes


def test_a_few_blocks_fetch_little_more_than_their_bytes(s3, field):
    url, data, path = field
    arr = b2store.open(url, storage_options=s3.storage_options)
    _, _, chunk = _chunk_bytes(path, 7)
    layout = read_layout(chunk)
    starts = [int(s) for s in layout.bstarts] + [len(chunk)]
    for key, blocks in [((slice(705, 706), slice(3, 9)), [0]),
                        ((slice(712, 731), slice(None)), [1, 2, 3])]:  # fmt: skip
        s3.reset()
        np.testing.assert_array_equal(arr[key], data[key])
        needed = sum(starts[b + 1] - starts[b] for b in blocks)
        fetched = sum(g.sent for g in _gets(s3))
        assert needed <= fetched <= 1.1 * needed, (key, needed, fetched)


def test_a_whole_read_fetches_each_chunk_once(s3, field):
    url, data, path = field
    arr = b2store.open(url, storage_options=s3.storage_options)
    s3.reset()
    np.testing.assert_array_equal(arr[...], data)
    assert sum(g.sent for g in _gets(s3)) <= path.stat().st_size


def test_the_engine_reads_a_bucket_lazily(s3, field):
    url, data, _ = field
    s3.reset()
    with xr.open_dataset(url, engine="b2nd", storage_options=s3.storage_options) as ds:
        assert ds["data"].dims == ("y", "x")
        opening = len(_gets(s3))
        assert opening <= 2
        np.testing.assert_array_equal(ds["data"].isel(y=555).values, data[555])
        # One time step of one chunk: its prefix and one block, not the chunk.
        assert len(_gets(s3)) - opening <= 2
    with xr.open_dataset(url, engine="b2nd", storage_options=s3.storage_options, chunks={}) as ds:
        np.testing.assert_allclose(ds["data"].mean("y").values, data.mean(0), rtol=1e-12)


def test_zarr_reads_a_bucket_through_b2ndstore(s3, field):
    from b2store.integrations.zarr.store import B2ndStore

    url, data, _ = field
    z = zarr.open_array(B2ndStore(url, storage_options=s3.storage_options), mode="r")
    np.testing.assert_array_equal(z[123:456, 17], data[123:456, 17])
    np.testing.assert_array_equal(z[...], data)


def test_an_array_from_a_bucket_pickles_as_its_recipe(s3, field):
    url, data, _ = field
    arr = b2store.open(url, storage_options=s3.storage_options)
    blob = pickle.dumps(arr)
    assert b"field.b2nd" in blob and len(blob) < 4096  # the URL and options, no bytes
    child = textwrap.dedent("""
        import pickle, sys
        arr = pickle.loads(sys.stdin.buffer.read())
        sys.stdout.write(repr(float(arr[876, 543])))
    """)
    out = subprocess.run([sys.executable, "-c", child], input=blob, capture_output=True,
                         check=True, timeout=120)  # fmt: skip
    assert float(out.stdout) == data[876, 543]


def test_a_b2z_tree_in_a_bucket(s3, tmp_path):
    temp = np.random.default_rng(1).random((300, 400))
    path = tmp_path / "t.b2z"
    with blosc2.TreeStore(str(path), mode="w") as ts:
        ts["/temp"] = blosc2.asarray(temp, chunks=(100, 400), blocks=(10, 400))
        ts["/grp/lon"] = np.arange(40.0)
        ts.vlmeta["title"] = "in a bucket"
    url = s3.put(s3.new_bucket(), "t.b2z", path.read_bytes())
    arrays = b2store.open_tree(url, storage_options=s3.storage_options).arrays()
    assert set(arrays) == {"/temp", "/grp/lon"}
    np.testing.assert_array_equal(arrays["/grp/lon"].open()[...], np.arange(40.0))
    t = arrays["/temp"].open()
    np.testing.assert_array_equal(t[55, :9], temp[55, :9])
    s3.reset()
    np.testing.assert_array_equal(t[150:160], temp[150:160])
    assert sum(g.sent for g in _gets(s3)) < path.stat().st_size / 3


@pytest.mark.slow
def test_a_time_step_of_100_chunks_overlaps_its_requests(s3, tmp_path):
    """Object stores answer in tens of ms. One time step that lies in 100 chunks (a few
    blocks of each: two requests a chunk) keeps many requests in flight at once, so with 20 ms
    added to every answer it takes under 3x its time without (one after the other it would
    add 200 x 20 ms)."""
    data = np.random.default_rng(3).random((20, 100, 1000)).astype("<f4")
    path = tmp_path / "steps.b2nd"
    blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(10, 10, 100), blocks=(1, 10, 100))
    url = s3.put(s3.new_bucket(), "steps.b2nd", path.read_bytes())

    def one_step(k: int) -> float:
        arr = b2store.open(url, storage_options=s3.storage_options)
        start = time.perf_counter()
        got = arr[k]
        took = time.perf_counter() - start
        np.testing.assert_array_equal(got, data[k])
        return took

    took = {0.0: [], 0.02: []}
    try:
        for k, delay in enumerate([0.0, 0.02, 0.0, 0.02]):
            s3.delay = delay
            s3.reset()
            took[delay].append(one_step(3 + 4 * k))
            assert len(s3.counted("GET")) >= 200  # (100 chunks: block starts and a block)
            if delay:
                assert s3.most_in_flight >= 8
    finally:
        s3.delay = 0.0
    assert min(took[0.02]) < 3 * min(took[0.0]), took


def test_a_column_of_whole_chunks_overlaps_its_requests(s3, tmp_path):
    """Whole chunks that do not lie side by side in the frame (a column of a 2-d grid) are a
    request each: read side by side, each once."""
    data = np.random.default_rng(4).random((400, 600)).astype("<f4")
    path = tmp_path / "grid.b2nd"
    blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(10, 60), blocks=(10, 60))
    url = s3.put(s3.new_bucket(), "grid.b2nd", path.read_bytes())
    arr = b2store.open(url, storage_options=s3.storage_options)
    s3.delay = 0.02
    try:
        s3.reset()
        np.testing.assert_array_equal(arr[:, 120:180], data[:, 120:180])
    finally:
        s3.delay = 0.0
    gets = s3.counted("GET")
    # One request a chunk (a chunk within the frame's first 16 kB was read on opening)
    assert 38 <= len(gets) <= 40 and len({g.range for g in gets}) == len(gets)
    assert s3.most_in_flight >= 8


def test_asarray_stores_a_frame_in_a_bucket_in_one_put(s3, tmp_path):
    """Object stores have no rename and no append: the frame goes up whole in one request,
    the same bytes as the same array written to a file, and python-blosc2 reads what is
    there (copied down)."""
    data = np.random.default_rng(8).random((300, 400))
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/w.b2nd"
    options = {"chunks": (100, 200), "vlmeta": {"units": "K"}}
    s3.reset()
    arr = b2store.asarray(data, url, storage_options=s3.storage_options, **options)
    writes = [r for r in s3.counted() if r.method in ("PUT", "POST")]
    assert len(writes) == 1 and writes[0].method == "PUT" and "uploadId" not in writes[0].path
    np.testing.assert_array_equal(arr[...], data)  # (read back from the bucket)
    assert arr.vlmeta["units"] == "K"
    stored = s3.client().get_object(Bucket=bucket, Key="w.b2nd")["Body"].read()
    b2store.asarray(data, tmp_path / "w.b2nd", **options).close()
    assert stored == (tmp_path / "w.b2nd").read_bytes()
    (tmp_path / "down.b2nd").write_bytes(stored)
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "down.b2nd"))[...], data)
    # mode="x" (the default) refuses an object that exists; "w" replaces it whole.
    with pytest.raises(
        b2store.TargetExistsError,
        match=f"^{url} exists and mode='x' does not replace it: pass mode='w' to replace it$",
    ):
        b2store.asarray(data, url, storage_options=s3.storage_options)
    with pytest.raises(FileExistsError, match="w.b2nd"):
        b2store.asarray(data, url, mode="x", storage_options=s3.storage_options)
    again = b2store.asarray(data[:7], url, storage_options=s3.storage_options, mode="w")
    assert again.shape == (7, 400)


@pytest.mark.parametrize("name", ["ds.b2nd", "ds.b2z"])
def test_to_b2nd_stores_a_frame_or_a_zip_in_one_put(s3, tmp_path, name):
    ds = xr.Dataset(
        {"t": (("y", "x"), np.random.default_rng(9).random((50, 60)))},
        {"x": np.arange(60)},
        attrs={"title": "in a bucket"},
    )
    bucket = s3.new_bucket()
    s3.reset()
    url = b2store.to_b2nd(ds, f"s3://{bucket}/{name}", storage_options=s3.storage_options)
    # One write; a frame also asks whether a sparse frame of its name is there to replace,
    # and both whether anything is there (the default mode, "w-", refuses it: 2 requests).
    writes = [(r.method, r.path) for r in s3.counted() if r.method not in ("GET", "HEAD")]
    assert writes == [("PUT", f"/{bucket}/{name}")]
    assert len(s3.counted()) <= (5 if name.endswith(".b2nd") else 3)
    with xr.open_dataset(url, engine="b2nd", storage_options=s3.storage_options) as back:
        xr.testing.assert_identical(back.load(), ds)
    # The same bytes as written to a file, which python-blosc2 reads.
    stored = s3.client().get_object(Bucket=bucket, Key=name)["Body"].read()
    local = tmp_path / name
    b2store.to_b2nd(ds, local)
    if name.endswith(".b2nd"):
        assert stored == local.read_bytes()
        np.testing.assert_array_equal(blosc2.open(str(local))[...], ds["t"].values)
    else:
        (tmp_path / "down.b2z").write_bytes(stored)
        with blosc2.TreeStore(str(tmp_path / "down.b2z"), mode="r") as ts:
            np.testing.assert_array_equal(ts["/t"][...], ds["t"].values)


def test_what_is_not_written_to_a_bucket_yet_is_refused(s3, tmp_path):
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/s.b2nd"
    options = s3.storage_options
    ds = xr.Dataset({"v": ("x", np.arange(6.0))})
    with pytest.raises(b2store.UnsupportedError, match="layout in an object store"):
        b2store.to_b2nd(ds, f"s3://{bucket}/t.nc", storage_options=options)
    with pytest.raises(b2store.UnsupportedError, match="sparse frame in a .b2z"):
        b2store.to_b2nd(ds, f"s3://{bucket}/t.b2z", contiguous=False, storage_options=options)
    with pytest.raises(b2store.UnsupportedError, match="contiguous frame changed in place"):
        b2store.SChunk.create(url, storage_options=options)
    with pytest.raises(b2store.UnsupportedError, match="write into a stored Dataset"):
        b2store.to_b2nd(ds, f"s3://{bucket}/t.b2d", mode="a", append_dim="x",
                        storage_options=options)  # fmt: skip
    with pytest.raises(FileNotFoundError, match="nothing to write into"):
        b2store.to_b2nd(ds, url, region={"x": slice(0, 6)}, storage_options=options)
    assert not s3.client().list_objects_v2(Bucket=bucket).get("Contents")  # nothing written
    b2store.to_b2nd(ds, url, storage_options=options)  # one contiguous object
    with pytest.raises(b2store.UnsupportedError, match="write into a stored Dataset"):
        b2store.to_b2nd(ds, url, mode="a", append_dim="x", storage_options=options)
    with pytest.raises(ValueError, match="storage_options are for a URL"):
        b2store.asarray(np.arange(6), tmp_path / "a.b2nd", storage_options={"anon": True})
    with pytest.raises(ValueError, match="storage_options are for a URL"):
        b2store.to_b2nd(ds, tmp_path / "a.b2nd", storage_options={"anon": True})


def test_a_b2d_tree_in_a_bucket_opens_with_the_engine(s3, tmp_path):
    """A ``.b2d`` tree is many objects (a frame per variable, each group's attributes):
    put there one by one, it opens from the bucket as from the disk."""
    ds = xr.Dataset(
        {
            "t": (("y", "x"), np.random.default_rng(10).random((50, 60))),
            "u": ("x", np.arange(60.0)),
        },
        attrs={"title": "a tree in a bucket"},
    )
    root = tmp_path / "tree.b2d"
    b2store.to_b2nd(ds, root)
    bucket = s3.new_bucket()
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) >= 3
    for p in files:
        s3.put(bucket, f"tree.b2d/{p.relative_to(root).as_posix()}", p.read_bytes())
    url = f"s3://{bucket}/tree.b2d"
    with xr.open_dataset(url, engine="b2nd", storage_options=s3.storage_options) as back:
        xr.testing.assert_identical(back.load(), ds)


def test_a_missing_object_is_file_not_found(s3):
    bucket = s3.new_bucket()
    with pytest.raises(FileNotFoundError, match="nothing.b2nd"):
        b2store.open(f"s3://{bucket}/nothing.b2nd", storage_options=s3.storage_options)


def _open(url, options):
    return b2store.open(url, storage_options=options)[...]


def _zarr(url, options):
    return zarr.open_array(b2store.B2ndStore(url, storage_options=options), mode="r")[...]


def _engine(url, options):
    with xr.open_dataset(url, engine="b2nd", storage_options=options) as ds:
        return ds["field"].values


@pytest.mark.parametrize("read", [_open, _zarr, _engine], ids=["open", "zarr", "xarray"])
@pytest.mark.parametrize("stall", ["HEAD", "headers", "body"])
def test_a_stalled_answer_is_a_remote_error_after_the_read_timeout(s3, field, stall, read):
    """A HEAD or a GET whose answer never starts, or a GET whose body stops half way: a
    RemoteError naming the URL after the read timeout. (Before: a stalled body raised
    botocore's own ReadTimeoutError; a stalled answer was tried 25 times, by botocore and by
    s3fs, 70 s with a read timeout of 1 s.)"""
    url, _, _ = field
    options = {**s3.storage_options, "read_timeout": 2}  # (moto answers slowly under load)
    s3.stall, s3.stall_key = "body" if stall == "body" else "headers", url.rsplit("/", 1)[-1]
    s3.stall_methods = ("HEAD",) if stall == "HEAD" else ("GET",)
    s3.reset()
    try:
        with pytest.raises(b2store.RemoteError) as info:
            guarded(read, url, options)
    finally:
        s3.release()
    assert s3.stalled == 1  # (not tried again: the try took the read timeout)
    assert str(info.value).startswith(f"reading {url} failed: no complete answer: the ")
    assert str(info.value).endswith("timed out: no byte for 2 s (read_timeout)")


def test_a_stall_in_a_sparse_frames_chunk_object_is_a_remote_error(s3):
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/sparse.b2nd"
    options = {**s3.storage_options, "read_timeout": 2}  # (moto answers slowly under load)
    data = np.arange(4000.0).reshape(40, 100)
    b2store.asarray(data, url, contiguous=False, chunks=(10, 100), storage_options=options)
    arr = b2store.open(url, storage_options=options)
    s3.stall, s3.stall_key = "headers", ".chunk"
    try:
        with pytest.raises(b2store.RemoteError, match=r"/sparse.b2nd/0000000\d.chunk failed: "
                           r".*timed out: no byte for 2 s \(read_timeout\)"):  # fmt: skip
            guarded(arr.__getitem__, (slice(10, 20),))
    finally:
        s3.release()
    np.testing.assert_array_equal(arr[10:20], data[10:20])


@pytest.mark.slow
def test_a_cluster_of_processes_reads_its_chunks_from_the_bucket(s3, tmp_path):
    """``open_mfdataset(..., parallel=True, chunks={})`` of frames in a bucket on a
    ``LocalCluster`` of processes: the graph holds recipes (URL, options, chunk), not bytes,
    and each worker reads its chunks from the bucket; the climatology equals NumPy's."""
    import pickle

    distributed = pytest.importorskip("distributed")
    bucket = s3.new_bucket()
    rng = np.random.default_rng(11)
    parts, urls = [], []
    for k in range(4):  # (xarray globs remote URLs for engine="zarr" only: a list it is)
        part = rng.normal(280, 5, (6, 40, 50)).round(3)
        path = tmp_path / f"m{k}.b2nd"
        arr = blosc2.asarray(part, urlpath=str(path), mode="w", chunks=(3, 20, 50),
                             blocks=(1, 20, 50))  # fmt: skip
        arr.vlmeta["_ARRAY_DIMENSIONS"] = ["time", "y", "x"]
        del arr
        parts.append(part)
        urls.append(s3.put(bucket, f"m{k}.b2nd", path.read_bytes()))
    expected = np.concatenate(parts).mean(0)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,  # fmt: skip
        distributed.Client(cluster),
    ):
        ds = xr.open_mfdataset(urls, engine="b2nd", parallel=True, chunks={}, combine="nested",
                               concat_dim="time", storage_options=s3.storage_options)  # fmt: skip
        climatology = ds["data"].mean("time")
        # Recipes (URL, options, which chunk), not data: the whole graph is smaller than
        # the data of one file (48 kB), for 16 chunks.
        nbytes = len(pickle.dumps(dict(climatology.data.__dask_graph__())))
        assert nbytes < parts[0].nbytes, nbytes
        s3.reset()
        np.testing.assert_allclose(climatology.compute().values, expected, rtol=1e-12)
        # The workers read the chunks from the bucket (nothing was sent them but the graph).
        stored = sum((tmp_path / f"m{k}.b2nd").stat().st_size for k in range(4))
        assert sum(r.sent for r in s3.counted("GET")) >= 0.9 * stored
        ds.close()
