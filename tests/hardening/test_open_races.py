"""Opening a contiguous frame while another process commits to it, each interleaving made
to happen at once (test_concurrency.py runs the real processes): the reader must read again
and open a committed state, never raise a FormatError for a file that is not damaged."""

from __future__ import annotations

import numpy as np
import pytest

import b2store
from b2store.frame.contiguous import ContiguousFrame
from b2store.frame.schunk import SChunk
from b2store.frame.sources import FileSource
from b2store.frame.state import read_header


def frame(path):
    s = SChunk.create(path, typesize=4, chunksize=400)
    s.append_data(np.zeros(100, "<i4"))
    s.close()
    return path


def commit(path, v):
    with b2store.open(path, mode="a") as w:
        w.append_data(np.full(100, v, "<i4"))


def test_a_commit_between_the_size_and_the_header_read(tmp_path):
    # Before: the size was taken again, then the header read again, and a commit in between
    # gave a header longer than the size: FormatError "frame_len".
    path = frame(tmp_path / "f.b2frame")
    source = FileSource(path)  # its size: before the commits below
    commit(path, 1)
    backend = ContiguousFrame(source)
    real_refresh, commits = backend.refresh, []

    def refresh_then_commit():
        done = real_refresh()
        if not commits:  # a writer commits right after the reader took the size
            commits.append(commit(path, 2))
        return done

    backend.refresh = refresh_then_commit
    s = SChunk(backend, read_header(backend))
    assert commits and s.nchunks == 3  # the newest commit, read whole
    assert [int(s.decompress_chunk(i).view("<i4")[0]) for i in range(3)] == [0, 1, 2]


@pytest.mark.parametrize("torn_at", [24, 33, 50], ids=lambda n: f"new-from-{n}")
def test_a_header_torn_by_a_writer_is_read_again(tmp_path, torn_at):
    # pread beside pwrite is not atomic: a header read while a writer writes it can hold
    # the old bytes up to some point and the new ones after it.
    path = frame(tmp_path / "f.b2frame")
    old = path.read_bytes()[:200]
    commit(path, 1)
    new = path.read_bytes()[:200]
    source = FileSource(path)
    real_read, served = source.read, []

    def read(offset, size):
        data = real_read(offset, size)
        if offset == 0 and size > 24 and not served:
            served.append(size)
            return new[:torn_at] + old[torn_at:size]  # the torn read, once
        return data

    source.read = read
    backend = ContiguousFrame(source)
    s = SChunk(backend, read_header(backend))
    assert served and s.nchunks == 2
    assert int(s.decompress_chunk(1).view("<i4")[0]) == 1


def test_a_damaged_header_is_still_an_error_at_once(tmp_path, monkeypatch):
    # A header that fails the same way twice is the file's fault: no retries hide it.
    path = frame(tmp_path / "f.b2frame")
    data = bytearray(path.read_bytes())
    data[16:24] = (len(data) + 1000).to_bytes(8, "big")  # frame_len past the end
    path.write_bytes(bytes(data))
    reads = []
    real = FileSource.read
    monkeypatch.setattr(FileSource, "read", lambda self, o, n: reads.append(o) or real(self, o, n))
    with pytest.raises(b2store.FormatError, match="frame_len"):
        b2store.open(path)
    assert len(reads) < 10
