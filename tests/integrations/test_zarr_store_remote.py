"""B2ndStore over HTTP: a frame and a .b2z tree read by byte ranges from a server on
localhost that counts the bytes it serves (never whole files)."""

from __future__ import annotations

import numpy as np
import pytest
from http_server import serve_directory

zarr = pytest.importorskip("zarr")
blosc2 = pytest.importorskip("blosc2")
pytest.importorskip("aiohttp")

from b2store.integrations.zarr.store import B2ndStore  # noqa: E402

# Under zarr's default codec pipeline and its fused one (tests/integrations/conftest.py).
pytestmark = pytest.mark.usefixtures("zarr_pipeline")


def test_remote_frame_reads_by_ranges(tmp_path):
    data = np.random.default_rng(0).random((400, 500))
    path = tmp_path / "big.b2nd"
    blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(100, 100), blocks=(10, 100))
    size = path.stat().st_size
    with serve_directory(tmp_path) as (url, served):
        z = zarr.open_array(B2ndStore(f"{url}/big.b2nd"))
        opened = served.bytes
        assert opened < size / 10  # header, index, trailer
        served.reset()
        np.testing.assert_array_equal(z[205, 310:320], data[205, 310:320])
        assert 0 < served.bytes < size / 25 * 0.5  # a few blocks of one chunk
        assert all(r is not None for _, _, r in served.requests)  # ranges only
        served.reset()
        np.testing.assert_array_equal(z[...], data)
        assert served.bytes <= size * 1.01  # each chunk once (plus its 16-byte header)


def test_remote_b2z_tree(tmp_path):
    path = tmp_path / "t.b2z"
    temp = np.random.default_rng(1).random((600, 800))
    with blosc2.TreeStore(str(path), mode="w") as ts:
        ts["/temp"] = blosc2.asarray(temp, chunks=(200, 400), blocks=(5, 400))
        ts["/grp/lon"] = np.arange(80.0)
        ts.vlmeta["title"] = "remote"
    with serve_directory(tmp_path) as (url, served):
        g = zarr.open_group(B2ndStore(f"{url}/t.b2z"), mode="r")
        assert dict(g.attrs) == {"title": "remote"}
        np.testing.assert_array_equal(g["temp"][33, :7], temp[33, :7])
        np.testing.assert_array_equal(g["grp/lon"][...], np.arange(80.0))
        assert served.bytes < path.stat().st_size / 20  # the central directory, a few blocks
        assert all(r is not None for method, _, r in served.requests if method == "GET")


def test_remote_store_keeps_zarrs_reads_async(tmp_path):
    # zarr's fused pipeline would wait for each request in a pool of one thread per core: a
    # remote store says it has no sync IO (as zarr's network stores do), a local one says it
    # has. Its get_sync still reads, by ranges like get.
    # (chunks past the ends of the frame a remote source keeps once read)
    data = np.random.default_rng(2).random((60, 500))
    path = tmp_path / "a.b2nd"
    blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(20, 500), blocks=(5, 500))
    local = B2ndStore(path)
    with serve_directory(tmp_path) as (url, served):
        remote = B2ndStore(f"{url}/a.b2nd")
        assert local._supports_sync_io is True and remote._supports_sync_io is False
        predicate = getattr(zarr.abc.store, "_store_supports_sync_io", None)  # zarr >= 3.4
        if predicate is not None:
            assert predicate(local) and not predicate(remote)
        z = zarr.open_array(remote)
        served.reset()
        assert remote.get_sync("c/1/0").to_bytes() == local.get_sync("c/1/0").to_bytes()
        np.testing.assert_array_equal(z[25:31, 7], data[25:31, 7])
        assert served.requests and all(r is not None for _, _, r in served.requests)
