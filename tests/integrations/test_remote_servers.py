"""HTTP servers that answer but bend HTTP, through every entry point that reads a URL:
``b2store.open``, zarr over ``B2ndStore`` (a frame and a ``.b2z`` tree) and the xarray
engine, each meeting them the same way (:mod:`b2store.frame.ranges`):

- a body that stalls is a ``RemoteError`` after the read timeout (``storage_options``), naming
  the URL and the request that timed out, and not tried again once that long has passed;
- an answer without Content-Length is read (the size from a range request's Content-Range);
- a server that ignores Range is refused at the first read of an object over 64 KiB, before
  its body is read, and a small object is read whole, everywhere;
- a range answered with other bytes than asked is refused.

Each read runs in a thread with a guard: a read that hangs fails its test, not the suite.
"""

from __future__ import annotations

import numpy as np
import pytest
from http_server import Faults, guarded, serve_directory

import b2store
from b2store.frame import ranges, remote

pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")

# Large enough that its chunks lie past the ends of the frame a remote source keeps once read,
# and past what is read whole from a server that ignores Range.
DATA = np.random.default_rng(5).random((120, 400))
SMALL = np.arange(30 * 40, dtype="<f8").reshape(30, 40)  # (a frame of under 64 KiB)
QUICK = {"read_timeout": 0.5}


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(remote, "RETRY_DELAYS", (0.01, 0.02, 0.04))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    b2store.asarray(DATA, root / "a.b2nd", chunks=(20, 40), blocks=(10, 20)).close()
    b2store.to_b2nd(xr.Dataset({"v": (("y", "x"), DATA)}), root / "ds.b2z")
    b2store.asarray(SMALL, root / "small" / "a.b2nd", chunks=(10, 40), blocks=(5, 20)).close()
    b2store.to_b2nd(xr.Dataset({"v": (("y", "x"), SMALL)}), root / "small" / "ds.b2z")
    assert (root / "a.b2nd").stat().st_size > ranges.WHOLE_ANSWER_BYTES
    assert (root / "small" / "ds.b2z").stat().st_size < ranges.WHOLE_ANSWER_BYTES
    return root


def read_open(url, options=None):
    return b2store.open(f"{url}/a.b2nd", storage_options=options)[...]


def read_zarr(url, options=None):
    store = b2store.B2ndStore(f"{url}/a.b2nd", storage_options=options)
    return zarr.open_array(store, mode="r")[...]


def read_tree(url, options=None):
    store = b2store.B2ndStore(f"{url}/ds.b2z", storage_options=options)
    return zarr.open_group(store, mode="r")["v"][...]


def read_xarray(url, options=None):
    with xr.open_dataset(f"{url}/ds.b2z", engine="b2nd", storage_options=options) as ds:
        return ds["v"].values


READERS = [read_open, read_zarr, read_tree, read_xarray]
IDS = ["open", "zarr", "b2z", "xarray"]


# --- a body that stalls --------------------------------------------------------------------------


@pytest.mark.parametrize("read", READERS, ids=IDS)
def test_a_stalled_body_is_a_remote_error_after_the_read_timeout(root, read):
    # Before: every reader waited for as long as the server kept the connection open (the
    # server here holds it until it stops; aiohttp's own limit was 300 s a request, tried
    # four times).
    with serve_directory(root, Faults(always="stall")) as (url, served):
        with pytest.raises(b2store.RemoteError) as info:
            guarded(read, url, QUICK)
    message = str(info.value)
    assert message.startswith(f"reading {url}/"), message
    assert "the range request of bytes " in message, message
    assert message.endswith("timed out: no byte for 0.5 s (read_timeout)"), message
    # Not tried again: the one try took the whole read timeout.
    assert info.value.tries == 1 and info.value.status is None
    assert [r[0] for r in served.requests].count("GET") == 1


@pytest.mark.parametrize(
    "key",
    [(25, 3), (slice(5, 115), slice(3, 380, 7))],
    ids=["one-chunk", "many-chunks"],  # (many: their requests overlapped in threads)
)
def test_a_stall_after_opening_is_a_remote_error_too(root, key):
    faults = Faults()
    with serve_directory(root, faults) as (url, _):
        # Two seconds, not QUICK's half: the read after the stall must be answered within
        # the timeout by a server in this process, and in one CI run of the whole suite (two
        # workers, tests starting processes beside it) a request here had no byte for 0.5 s.
        arr = b2store.open(f"{url}/a.b2nd", storage_options={"read_timeout": 2})
        faults.always = "stall"
        with pytest.raises(b2store.RemoteError, match=r"no byte for 2 s \(read_timeout\)"):
            guarded(arr.__getitem__, key)
        faults.always = None
        np.testing.assert_array_equal(arr[key], DATA[key])


def test_the_read_timeout_reaches_each_client(monkeypatch):
    aiohttp = pytest.importorskip("aiohttp")
    fs, _ = remote.filesystem("http://127.0.0.1:9/a.b2nd", {"read_timeout": 7})
    assert fs.client_kwargs["timeout"] == aiohttp.ClientTimeout(
        total=None, sock_connect=7, sock_read=7
    )
    assert "read_timeout" not in fs.kwargs  # (not sent as a request option)
    assert remote.read_timeout_of(fs) == 7.0
    fs, _ = remote.filesystem("http://127.0.0.1:9/a.b2nd")
    assert fs.client_kwargs["timeout"].sock_read == remote.READ_TIMEOUT == 60
    # A timeout of the caller's own is kept.
    own = aiohttp.ClientTimeout(total=5)
    fs, _ = remote.filesystem("http://127.0.0.1:9/a.b2nd", {"client_kwargs": {"timeout": own}})
    assert fs.client_kwargs["timeout"] is own
    # In a chain, the HTTP layer's.
    fs, _ = remote.filesystem("simplecache::http://127.0.0.1:9/a.b2nd", {"read_timeout": 3})
    assert fs.fs.client_kwargs["timeout"].sock_read == 3


def test_the_read_timeout_reaches_s3():
    pytest.importorskip("s3fs", reason="s3:// URLs through fsspec's s3fs (the test-s3 extra)")
    fs, _ = remote.filesystem("s3://bucket/a.b2nd", {"read_timeout": 7, "anon": True})
    assert fs.config_kwargs == {"read_timeout": 7.0, "connect_timeout": 5.0}
    fs, _ = remote.filesystem("s3://bucket/a.b2nd", {"anon": True, "config_kwargs": {
        "read_timeout": 2}})  # fmt: skip
    assert fs.config_kwargs["read_timeout"] == 2


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("5", TypeError, "read_timeout must be a number of seconds, not '5'"),
        (True, TypeError, "read_timeout must be a number of seconds, not True"),
        (0, ValueError, "read_timeout must be a positive number of seconds, not 0"),
        (float("inf"), ValueError, "read_timeout must be a positive number of seconds, not inf"),
    ],
)
def test_a_bad_read_timeout_is_refused(value, error, message):
    with pytest.raises(error, match=f"^{message}$"):
        remote.filesystem("http://127.0.0.1:9/a.b2nd", {"read_timeout": value})


def test_a_read_timeout_with_an_obstore_store_is_refused():
    obstore = pytest.importorskip("obstore", reason="obstore stores (the test-virtual extra)")
    store = obstore.store.MemoryStore()
    with pytest.raises(ValueError, match="read_timeout does not apply to an obstore store"):
        remote.filesystem("s3://b/a.b2nd", {"store": store, "read_timeout": 5})


def test_no_try_starts_once_the_read_timeout_has_passed(monkeypatch):
    # A clock that each try moves on by 0.3 s: with a read timeout of 1 s, the tries at 0,
    # 0.31 and 0.62 s are made, and the one that would start at 0.93 + 0.04 s is too.
    now = [0.0]
    monkeypatch.setattr(remote.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(remote.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    calls = []

    def dropped():
        calls.append(now[0])
        now[0] += 0.3
        raise ConnectionResetError("dropped")

    with pytest.raises(b2store.RemoteError, match=r"ConnectionResetError: dropped \(tried 4"):
        remote.attempts("https://example.invalid/x", dropped, timeout=1.0, what="it")
    assert len(calls) == 4
    now[0], calls[:] = 0.0, []

    def dropped_late():
        calls.append(now[0])
        now[0] += 0.6
        raise ConnectionResetError("dropped")

    with pytest.raises(b2store.RemoteError, match=r"ConnectionResetError: dropped \(tried 2"):
        remote.attempts("https://example.invalid/x", dropped_late, timeout=1.0, what="it")
    assert calls == [0.0, 0.61]


# --- no Content-Length ---------------------------------------------------------------------------


@pytest.mark.parametrize("read", READERS, ids=IDS)
def test_an_answer_without_content_length_is_read(root, read):
    # Before: "not a Blosc2 file (an empty file)" through b2store.open and the engine, a
    # TypeError through B2ndStore (fsspec gave the size as None).
    with serve_directory(root, Faults(always="nolength")) as (url, served):
        np.testing.assert_array_equal(guarded(read, url), DATA)
    # Its size came from a range request's Content-Range.
    assert ("GET", served.requests[0][1], "bytes=0-0") in served.requests


@pytest.mark.parametrize("read", READERS, ids=IDS)
def test_a_server_giving_no_size_is_refused_saying_so(root, read):
    with serve_directory(root, Faults(always="nolength+norange")) as (url, _):
        with pytest.raises(b2store.RemoteError, match="HTTP 200") as info:
            guarded(read, url)
    assert str(info.value).startswith(f"reading {url}/")
    assert "the server gives no size: no Content-Length, and it answered a range with the " \
        "whole object" in str(info.value)  # fmt: skip


# --- Range ignored -------------------------------------------------------------------------------


@pytest.mark.parametrize("read", READERS, ids=IDS)
def test_a_server_ignoring_range_is_refused_the_same_everywhere(root, read):
    # Before: b2store.open and the engine tried four times, downloading the whole object
    # each time, then called it a body cut short; B2ndStore raised a FormatError.
    with serve_directory(root, Faults(always="norange")) as (url, served):
        with pytest.raises(b2store.RemoteError, match="the server ignores Range requests") as e:
            guarded(read, url)
    assert e.value.status == 200 and e.value.tries == 1
    assert str(e.value).startswith(f"reading {url}/")
    assert f"open 'simplecache::{url}/" in str(e.value)
    assert [r[0] for r in served.requests].count("GET") == 1  # refused at the first


@pytest.mark.parametrize("read", READERS, ids=IDS)
def test_a_small_object_is_read_whole_from_a_server_ignoring_range(root, read):
    with serve_directory(root, Faults(always="norange")) as (url, _):
        np.testing.assert_array_equal(guarded(read, f"{url}/small"), SMALL)


@pytest.mark.parametrize("read", READERS, ids=IDS)
def test_simplecache_reads_from_a_server_ignoring_range(root, read, tmp_path):
    # What the refusal says to do: fsspec downloads the object once and reads it locally.
    with serve_directory(root, Faults(always="norange")) as (url, _):
        options = {"simplecache": {"cache_storage": str(tmp_path)}}
        np.testing.assert_array_equal(guarded(read, f"simplecache::{url}", options), DATA)


@pytest.mark.parametrize("read", READERS, ids=IDS)
def test_a_range_of_other_bytes_is_refused(root, read):
    with serve_directory(root, Faults(always="shifted")) as (url, _):
        with pytest.raises(b2store.RemoteError, match=r"HTTP 206: bytes 0-\d+ asked, the "
                           r"answer holds bytes 1-\d+/\d+") as info:  # fmt: skip
            guarded(read, url)
    assert str(info.value).startswith(f"reading {url}/")


def test_a_whole_object_is_the_answer_to_a_range_from_0_past_its_end(root):
    # (what a sparse frame's whole chunk object is read with): a 200 then is right, at any size
    with serve_directory(root, Faults(always="norange")) as (url, _):
        fs, path = remote.filesystem(f"{url}/a.b2nd")
        data = ranges.read(f"{url}/a.b2nd", fs, path, 0, 1 << 40, exact=False)
        with pytest.raises(b2store.RemoteError, match="ignores Range"):
            ranges.read(f"{url}/a.b2nd", fs, path, 1, 1 << 40, exact=False)
    assert data == (root / "a.b2nd").read_bytes()
