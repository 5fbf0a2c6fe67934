"""Frame backends: remote frames read by byte ranges, frames inside larger files, any range
reader, and recipes that reopen."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from http_server import serve_directory

import b2store
from b2store import FormatError
from b2store.frame.contiguous import RangeBackend
from b2store.frame.sources import END_BYTES

pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")


@pytest.fixture
def big_array(tmp_path):
    data = np.random.default_rng(3).normal(size=(400, 500)).astype("<f8")
    b2store.asarray(data, tmp_path / "big.b2nd", chunks=(100, 250), blocks=(20, 50)).close()
    return tmp_path, data


def test_http_frames_are_read_by_ranges(big_array):
    root, data = big_array
    size = (root / "big.b2nd").stat().st_size
    with serve_directory(root) as (url, served):
        arr = b2store.open(f"{url}/big.b2nd")
        assert arr.shape == data.shape and arr.chunks == (100, 250)
        opening = served.bytes
        # Opening reads the header, the trailer and the offsets index: the few kB at each
        # end of the frame, in one request each (each is a round trip), never whole chunks.
        gets = [rng for method, _, rng in served.requests if method == "GET"]
        assert len(gets) == 2 and all(rng.startswith("bytes=") for rng in gets)
        assert opening <= 2 * END_BYTES < size / 10
        served.reset()
        assert arr[321, 123] == data[321, 123]
        # One element: the chunk's header, its block starts and a block or two.
        assert 0 < served.bytes < 2 * 20 * 50 * 8 + 4096
        assert all(rng and rng.startswith("bytes=") for _, _, rng in served.requests)
        served.reset()
        np.testing.assert_array_equal(arr[:], data)
        assert served.bytes <= size
        remote_copy = pickle.loads(pickle.dumps(arr))  # reopens by URL
        np.testing.assert_array_equal(remote_copy[10:20, ::7], data[10:20, ::7])
        with pytest.raises(ValueError, match="read-only"):
            b2store.open(f"{url}/big.b2nd", mode="a")


def test_http_frames_cross_processes(big_array):
    root, data = big_array
    child = textwrap.dedent("""
        import pickle, sys
        arr = pickle.loads(sys.stdin.buffer.read())
        sys.stdout.write(repr(float(arr[7, 8])))
    """)
    with serve_directory(root) as (url, _):
        arr = b2store.open(f"{url}/big.b2nd")
        out = subprocess.run(
            [sys.executable, "-c", child], input=pickle.dumps(arr), capture_output=True, check=True
        )
    assert float(out.stdout) == data[7, 8]


def test_missing_remote_file_is_file_not_found(big_array):
    root, _ = big_array
    with serve_directory(root) as (url, _), pytest.raises(FileNotFoundError, match="nothing.b2nd"):
        b2store.open(f"{url}/nothing.b2nd")


def test_a_frame_inside_a_larger_file(tmp_path):
    data = np.arange(5000, dtype="<i4")
    frame = b2store.asarray(data).schunk.to_cframe()
    path = tmp_path / "container.bin"
    path.write_bytes(b"x" * 1234 + frame + b"trailing bytes of something else")
    with b2store.open(path, offset=1234) as arr:
        np.testing.assert_array_equal(arr[:], data)
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(arr))[::9], data[::9])
    with pytest.raises(ValueError, match="can only be read"):
        b2store.open(path, mode="a", offset=1234)
    with pytest.raises(FormatError, match="not a Blosc2 file .*; frame magic"):
        b2store.open(path, offset=1000)  # not a frame there


def test_any_range_reader(tmp_path):
    data = np.linspace(0, 1, 3000).reshape(30, 100)
    frame = b2store.asarray(data, chunks=(10, 100), blocks=(5, 20)).schunk.to_cframe()
    calls = []

    def read_range(start, stop):
        calls.append((start, stop))
        return frame[start:stop]

    with b2store.open(RangeBackend(read_range, len(frame), name="ranges")) as arr:
        np.testing.assert_array_equal(arr[3:27, 40:60], data[3:27, 40:60])
        assert arr.schunk.urlpath == "ranges"
    assert calls and all(0 <= a < b <= len(frame) for a, b in calls)


def test_chunk_spans_point_at_the_stored_bytes(tmp_path):
    data = np.arange(4000, dtype="<i8").reshape(40, 100)
    data[20:] = 0  # two of the four chunks are zeros: special, no bytes stored
    for contiguous in (True, False):
        path = tmp_path / f"spans{contiguous}.b2nd"
        b2store.asarray(data, path, chunks=(10, 100), contiguous=contiguous).close()
        with b2store.open(path) as arr:
            for i in range(arr.schunk.nchunks):
                span = arr.schunk.chunk_span(i)
                if i >= 2:
                    assert span is None
                    continue
                name, offset, length = span
                with open(name, "rb") as fh:
                    fh.seek(offset)
                    assert fh.read(length) == arr.schunk.get_chunk(i)


def test_a_reader_of_a_replaced_file_keeps_its_files_size(tmp_path):
    # A writer that rewrites an array replaces the file by rename; a reader that has it open
    # keeps reading the old file, and must take the old file's size with it, never the new
    # path's (its bytes would be read against a size they do not have).
    from b2store.frame.factory import open_backend

    path = tmp_path / "a.b2nd"
    b2store.asarray(np.arange(100, dtype="<i4"), urlpath=path).close()
    old_size = path.stat().st_size
    backend, _header = open_backend(path)
    try:
        b2store.asarray(np.random.default_rng(0).random(50_000), urlpath=path, mode="w").close()
        assert path.stat().st_size > old_size
        assert backend.refresh()
        assert backend.frame_len == old_size
    finally:
        backend.close()
