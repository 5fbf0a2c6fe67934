"""The b2nd engine at scale: many files through open_mfdataset on a dask.distributed cluster of
processes (everything crossing a process pickles as a recipe and reopens by path), and frames
and trees read by URL through fsspec from an HTTP server."""

import functools
import http.server
import os
import threading

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("dask.array")

from b2store.integrations.xarray.to_b2nd import to_b2nd  # noqa: E402


def daily_files(directory, nfiles=4, nt=6, ny=10, nx=12):
    """One file per period, as many archives are laid out: a (time, lat, lon) field each."""
    directory.mkdir()
    paths, parts = [], []
    for k in range(nfiles):
        time = pd.date_range("2020-01-01", periods=nt, freq="D") + pd.Timedelta(days=nt * k)
        data = np.arange(nt * ny * nx, dtype="f4").reshape(nt, ny, nx) + 1000 * k
        ds = xr.Dataset(
            {"tas": (("time", "lat", "lon"), data, {"units": "K"})},
            coords={"time": time, "lat": np.linspace(-45, 45, ny), "lon": np.arange(nx) * 30.0},
        )
        paths.append(
            to_b2nd(ds, directory / f"tas_{k:02d}.b2nd", encoding={"tas": {"chunks": (2, 5, 12)}})
        )
        parts.append(ds)
    return paths, xr.concat(parts, "time")


@pytest.mark.slow
def test_open_mfdataset_on_a_cluster_of_processes(tmp_path):
    distributed = pytest.importorskip("distributed")
    paths, expected = daily_files(tmp_path / "data")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        ds = xr.open_mfdataset(
            str(tmp_path / "data" / "*.b2nd"), engine="b2nd", parallel=True, chunks={}
        )
        assert ds.tas.chunks[1:] == ((5, 5), (12,))
        climatology = ds.tas.groupby("time.dayofweek").mean().compute()
        xr.testing.assert_allclose(climatology, expected.tas.groupby("time.dayofweek").mean())
        xr.testing.assert_identical(ds.load(), expected)
        ds.close()


def test_open_mfdataset_by_coords_in_threads(tmp_path):
    paths, expected = daily_files(tmp_path / "data", nfiles=3)
    with xr.open_mfdataset(paths[::-1], engine="b2nd", chunks={}, combine="by_coords") as ds:
        assert ds.tas.chunks[0] == (2,) * 9
        xr.testing.assert_identical(ds.load(), expected)


@pytest.fixture
def http_root(tmp_path):
    """An HTTP server on localhost serving ``tmp_path`` (with range requests)."""
    served = []
    handler_class = type("Handler", (_RangeHandler,), {"served": served})
    handler = functools.partial(handler_class, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield tmp_path, f"http://127.0.0.1:{server.server_address[1]}", served
    server.shutdown()
    server.server_close()


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler with single byte ranges, as object stores serve them."""

    def log_message(self, *args):
        pass

    served: list  # bytes of file content sent, per request

    def send_head(self):
        rng = self.headers.get("Range")
        path = self.translate_path(self.path)
        if not rng or not os.path.isfile(path):
            if self.command == "GET" and os.path.isfile(path):
                self.served.append(os.path.getsize(path))
            return super().send_head()
        size = os.path.getsize(path)
        start, _, stop = rng.removeprefix("bytes=").partition("-")
        start, stop = int(start), min(int(stop) if stop else size - 1, size - 1)
        fh = open(path, "rb")  # the base class closes it after copying
        fh.seek(start)
        self.served.append(stop - start + 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{stop}/{size}")
        self.send_header("Content-Length", str(stop - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        return _Limited(fh, stop - start + 1)


class _Limited:
    def __init__(self, fh, n):
        self.fh, self.n = fh, n

    def read(self, size=-1):
        size = self.n if size < 0 else min(size, self.n)
        data = self.fh.read(size)
        self.n -= len(data)
        return data

    def close(self):
        self.fh.close()


def test_remote_frame_and_tree_by_url(http_root):
    pytest.importorskip("aiohttp")
    root, url, served = http_root
    ds = xr.Dataset(
        {"tas": (("time", "lat"), np.arange(40.0).reshape(8, 5), {"units": "K"})},
        coords={"lat": np.linspace(0, 40, 5)},
    )
    to_b2nd(ds, root / "tas.b2nd")
    remote = xr.open_dataset(f"{url}/tas.b2nd", engine="b2nd", chunks={})
    xr.testing.assert_identical(remote.load(), ds)
    # Byte ranges: one time step of a large frame reads a small part of it.
    big = xr.Dataset({"v": (("time", "y", "x"), np.random.default_rng(0).random((40, 64, 64)))})
    path = to_b2nd(big, root / "big.b2nd", encoding={"v": {"chunks": (1, 64, 64)}})
    lazy = xr.open_dataset(f"{url}/big.b2nd", engine="b2nd")
    served.clear()
    np.testing.assert_array_equal(lazy.v.isel(time=7).values, big.v.values[7])
    assert 0 < sum(served) < os.path.getsize(path) / 10
    both = ds.assign(pr=ds.tas * 2)
    to_b2nd(both, root / "both.b2z")
    remote = xr.open_dataset(f"{url}/both.b2z", engine="b2nd")
    xr.testing.assert_identical(remote.load(), both)
    # (Without engine="b2nd", xarray asks netCDF4 first, which claims every http URL.)
