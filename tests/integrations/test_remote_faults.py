"""A misbehaving HTTP server, through every entry point that reads a URL: ``b2store.open``,
zarr over ``B2ndStore`` (a frame and a ``.b2z`` tree) and the xarray engine. A transient
failure (a 5xx, a dropped connection, a body cut short) is tried again; one that lasts is a
``RemoteError`` (an ``OSError``) naming the URL and the status; a missing object is
``FileNotFoundError``; never the HTTP client's own exceptions, never wrong data."""

from __future__ import annotations

import time

import numpy as np
import pytest
from http_server import Faults, serve_directory

import b2store
from b2store.frame import remote

pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")

# Large enough that its chunks lie past the ends of the frame a remote source keeps once read.
DATA = np.random.default_rng(5).random((120, 400))


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(remote, "RETRY_DELAYS", (0.01, 0.02, 0.04))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    b2store.asarray(DATA, root / "a.b2nd", chunks=(20, 40), blocks=(10, 20)).close()
    b2store.to_b2nd(xr.Dataset({"v": (("y", "x"), DATA)}), root / "ds.b2z")
    return root


def read_open(url):
    return b2store.open(f"{url}/a.b2nd")[...]


def read_zarr(url):
    return zarr.open_array(b2store.B2ndStore(f"{url}/a.b2nd"), mode="r")[...]


def read_tree(url):
    return zarr.open_group(b2store.B2ndStore(f"{url}/ds.b2z"), mode="r")["v"][...]


def read_xarray(url):
    with xr.open_dataset(f"{url}/ds.b2z", engine="b2nd") as ds:
        return ds["v"].values


READERS = [read_open, read_zarr, read_tree, read_xarray]
IDS = ["open", "zarr", "b2z", "xarray"]


@pytest.mark.parametrize("read", READERS, ids=IDS)
@pytest.mark.parametrize("fault", ["500", "503", "truncate", "reset", "slow"])
def test_a_transient_fault_is_tried_again(root, read, fault):
    faults = Faults(plan=[fault])
    with serve_directory(root, faults) as (url, _):
        np.testing.assert_array_equal(read(url), DATA)
    assert faults.met[0] == fault and len(faults.met) > 1


@pytest.mark.parametrize("read", READERS, ids=IDS)
@pytest.mark.parametrize("fault", ["500", "truncate", "reset"])
def test_a_lasting_fault_is_a_remote_error_naming_the_url(root, read, fault):
    # Before: aiohttp's ClientResponseError / ClientPayloadError, or FileNotFoundError for
    # a 500 when the size was asked.
    status = "HTTP 500" if fault == "500" else "no complete answer"
    with serve_directory(root, Faults(always=fault)) as (url, _):
        with pytest.raises(b2store.RemoteError, match=f"reading {url}/.*{status}") as info:
            read(url)
    assert isinstance(info.value, OSError) and not isinstance(info.value, FileNotFoundError)
    assert info.value.status == (500 if fault == "500" else None)


@pytest.mark.parametrize("read", READERS, ids=IDS)
def test_a_missing_object_is_file_not_found(root, read, tmp_path):
    with serve_directory(tmp_path) as (url, served):  # an empty directory: 404 for all
        with pytest.raises(FileNotFoundError, match="127.0.0.1"):
            read(url)
    assert len(served.requests) < 10  # a 404 is not tried again and again


@pytest.mark.parametrize(
    "key",
    [(25, 3), (slice(5, 115), slice(3, 380, 7))],
    ids=["one-chunk", "many-chunks"],  # (many: their requests overlapped in threads)
)
def test_a_fault_after_opening_is_a_remote_error_too(root, key):
    faults = Faults()
    with serve_directory(root, faults) as (url, _):
        arr = b2store.open(f"{url}/a.b2nd")
        faults.always = "503"
        with pytest.raises(b2store.RemoteError, match="HTTP 503") as info:
            arr[key]
        assert info.value.tries == 4 and info.value.url == f"{url}/a.b2nd"
        faults.always = None
        faults.plan = ["500", "truncate", "reset"]  # three in a row: the fourth try reads
        np.testing.assert_array_equal(arr[key], DATA[key])


def test_overlapped_calls_raise_the_first_failure_after_the_others_end():
    done = []

    def call(k):
        if k == 3:
            raise ValueError("number 3")
        time.sleep(0.01)
        done.append(k)

    with pytest.raises(ValueError, match="number 3"):
        remote.overlapped(call, range(20))
    assert sorted(done) == [k for k in range(20) if k != 3]
    # Without a failure, the results come back in the order of the items.
    assert remote.overlapped(lambda k: k * k, range(20)) == [k * k for k in range(20)]


def test_overlapped_calls_keep_to_the_callers_bound():
    import threading

    lock, running, most = threading.Lock(), [0], [0]

    def call(k):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1

    remote.overlapped(call, range(30), at_once=3)
    assert most[0] == 3
    remote.overlapped(call, range(30))
    assert most[0] > 3


def test_retries_are_configurable(root, monkeypatch):
    monkeypatch.setattr(remote, "RETRY_DELAYS", ())
    with serve_directory(root, Faults(plan=["500", "500"])) as (url, _):
        with pytest.raises(b2store.RemoteError, match="HTTP 500"):
            read_open(url)


def test_a_refusal_is_not_tried_again(root):
    # 403 and the like are answers, not accidents: one request, a RemoteError at once.
    calls = []

    class Refused(Exception):
        status = 403

    Refused.__module__ = "aiohttp.client_exceptions"

    def refuse():
        calls.append(1)
        raise Refused("Forbidden")

    with pytest.raises(b2store.RemoteError, match="HTTP 403"):
        remote.call("https://example.invalid/x.b2nd", refuse)
    assert calls == [1]


def test_a_timeout_is_tried_again_then_a_remote_error():
    calls = []

    def slow():
        calls.append(1)
        raise TimeoutError("no answer in 5 s")

    # (a function of no filesystem b2store made: its own timeout, named as it was raised)
    match = r"no complete answer: the request \(slow\) timed out: TimeoutError: no answer in 5 s"
    with pytest.raises(b2store.RemoteError, match=match) as info:
        remote.call("https://example.invalid/x.b2nd", slow)
    assert len(calls) == 4 and info.value.status is None and info.value.tries == 4


def test_other_exceptions_pass_through_untouched():
    # A bad argument is the caller's error, not the server's: not retried, not wrapped.
    calls = []

    def bad():
        calls.append(1)
        raise ValueError("negative range")

    with pytest.raises(ValueError, match="negative range"):
        remote.call("https://example.invalid/x.b2nd", bad)
    assert calls == [1]
