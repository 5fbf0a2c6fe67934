"""Where a frame's bytes come from: memory, a local file, an fsspec URL, or any range reader.

A source answers ``read(offset, size)`` and knows its ``size``. It never shares an open file
between copies: it pickles as the recipe to reopen it (a path or URL and its options), and it
opens its file lazily in whichever process uses it. Reads are positional, so many threads can
read one source at once.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .. import _files
from ..errors import FormatError
from . import ranges, remote
from .ranges import ObjectReplaced

__all__ = [
    "ByteSource",
    "MemorySource",
    "FileSource",
    "FsspecSource",
    "ObjectReplaced",
    "RangeSource",
    "is_url",
    "local_path",
]


def is_url(urlpath) -> bool:
    """True for ``scheme://...`` strings other than ``file://`` (those are local paths)."""
    return isinstance(urlpath, str) and "://" in urlpath and not urlpath.startswith("file://")


def local_path(urlpath) -> Path:
    return Path(os.fspath(urlpath).removeprefix("file://")).expanduser()


class ByteSource:
    """Random read access to a run of bytes (``offset`` shifts every read, for a frame that
    starts inside a larger file, such as a member of a ``.b2z`` zip)."""

    name: str = "<bytes>"

    def read(self, offset: int, size: int) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError

    def read_pieces_into(self, pieces) -> None:
        """Fill each ``out`` of ``pieces`` (``(offset, out)`` pairs, ascending offsets; ``out``
        a writable uint8 array) with the bytes from its ``offset``."""
        for offset, out in pieces:
            out[:] = np.frombuffer(self.read(offset, len(out)), np.uint8)

    @property
    def size(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        pass

    def _check(self, offset: int, size: int, limit: int) -> None:
        if offset < 0 or size < 0 or offset + size > limit:
            raise FormatError(
                "frame", f"bytes {offset}..{offset + size} inside the frame", f"{limit} bytes"
            )


class MemorySource(ByteSource):
    """Bytes held in memory (pickled with their content)."""

    def __init__(self, data):
        self._data = bytes(data)

    def read(self, offset: int, size: int) -> bytes:
        self._check(offset, size, len(self._data))
        return self._data[offset : offset + size]

    @property
    def size(self) -> int:
        return len(self._data)

    def __reduce__(self):
        return MemorySource, (self._data,)


class FileSource(ByteSource):
    """A local file read with ``os.pread``; the descriptor is opened on first use in each
    process and is never part of a pickle or a copy."""

    def __init__(self, path, offset: int = 0, size: int | None = None):
        self.path = local_path(path)
        self.name = str(self.path)
        self.offset = offset
        self._size = size
        self._fd = -1
        self._lock = threading.Lock()
        if size is None:
            self._size = self.path.stat().st_size - offset
            if self._size < 0:
                raise FormatError("offset", f"inside {self.name}", offset)

    @classmethod
    def opened(cls, path) -> FileSource:
        """The file at ``path`` opened now, its size read from the open descriptor: a file
        replaced by rename meanwhile cannot pair one file's size with another's bytes."""
        fd = _files.open_regular(local_path(path))
        try:
            source = cls(path, size=os.fstat(fd).st_size)
        except BaseException:
            os.close(fd)
            raise
        source._fd = fd
        return source

    def _descriptor(self) -> int:
        if self._fd < 0:
            # Never blocks: a FIFO or a device where a frame should be is refused.
            self._fd = _files.open_regular(self.path)
        return self._fd

    def read(self, offset: int, size: int) -> bytes:
        if offset + size > self._size >= 0 and offset >= 0:
            # Another writer (another process, or another handle) may have appended since
            # the size was taken: ask the open file once. A file replaced by rename keeps its
            # old size here, as it must: this descriptor still reads the old file.
            with self._lock:
                self._size = os.fstat(self._descriptor()).st_size - self.offset
        self._check(offset, size, self._size)
        # The lock keeps close() from freeing a descriptor number a read is still using
        # (another file could get that number and be read instead).
        with self._lock:
            data = os.pread(self._descriptor(), size, self.offset + offset)
        if len(data) != size:
            raise FormatError("frame", f"{size} bytes at {offset}", f"{len(data)} (truncated file)")
        return data

    def read_pieces_into(self, pieces) -> None:
        # As read, into each ``out``: no bytes object, no copy (the few blocks of a cut
        # chunk); one size check and one hold of the lock for all of them.
        if not hasattr(os, "preadv"):  # pragma: no cover - platforms without it (older macOS)
            return super().read_pieces_into(pieces)
        if not pieces:
            return
        last, tail = pieces[-1]
        end = last + len(tail)
        if end > self._size >= 0:
            with self._lock:
                self._size = os.fstat(self._descriptor()).st_size - self.offset
        for offset, out in pieces:
            self._check(offset, len(out), self._size)
        base = self.offset
        with self._lock:
            fd = self._descriptor()
            for offset, out in pieces:
                got = os.preadv(fd, [out], base + offset)
                if got != len(out):
                    raise FormatError(
                        "frame", f"{len(out)} bytes at {offset}", f"{got} (truncated file)"
                    )

    @property
    def size(self) -> int:
        return self._size

    def duplicate_fd(self) -> int:
        """A new descriptor of the same open file, for the caller to read from and close:
        close() may free this one's number while the caller still reads."""
        with self._lock:
            return os.dup(self._descriptor())

    def set_size(self, size: int) -> None:
        """The file grew or shrank under a writer of this process: read up to ``size``."""
        self._size = size - self.offset

    def file_size(self) -> int:
        """The size of the file this source reads, asked of its open descriptor: a file
        replaced by rename since keeps its old size here, paired with its old bytes."""
        with self._lock:
            return os.fstat(self._descriptor()).st_size

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __reduce__(self):
        return FileSource, (self.path, self.offset)

    def __del__(self):
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)


class RangeSource(ByteSource):
    """Any ``read_range(start, stop) -> bytes`` callable over ``size`` bytes: a zarr store,
    an object-store client, a cache. It pickles when the callable does."""

    def __init__(
        self, read_range: Callable[[int, int], bytes], size: int, *, name: str = "<range>"
    ):
        self._read_range = read_range
        self._size = int(size)
        self.name = name

    def _fetch(self, start: int, stop: int) -> bytes:
        return self._read_range(start, stop)

    def read(self, offset: int, size: int) -> bytes:
        self._check(offset, size, self._size)
        data = bytes(self._fetch(offset, offset + size))
        if len(data) != size:
            raise FormatError("frame", f"{size} bytes at {offset}", f"{len(data)} (short read)")
        return data

    @property
    def size(self) -> int:
        return self._size

    def __reduce__(self):
        return RangeSource, (self._read_range, self._size), {"name": self.name}

    def __setstate__(self, state):
        self.name = state["name"]


# A frame is opened from its two ends: its header and metalayers at the start, its index and
# trailer at the end, each a few small reads. Remotely each read is a round trip (tens of ms on
# an object store), so the first read that lies within this many bytes of either end fetches
# them all at once and the next reads there are answered from it: opening a frame costs two
# requests (and the size). A chunk that lies there is read from it too.
END_BYTES = 16 << 10


class FsspecSource(RangeSource):
    """A file behind an fsspec URL (``http://``, ``s3://``, ``memory://`` ...), read by byte
    ranges only (:mod:`b2store.frame.ranges`), each from the version opened. Transient
    failures are tried again; every failure is an ``OSError`` naming the URL (see
    :mod:`b2store.frame.remote`). The first and last :data:`END_BYTES` are kept
    once read (not in a pickle)."""

    def __init__(self, url: str, storage_options: dict | None = None, offset: int = 0):

        self.url = url
        self.offset = offset
        self.storage_options = dict(storage_options or {})
        self._fs, self._path = remote.filesystem(url, self.storage_options)
        info = ranges.stat(url, self._fs, self._path)
        if info.get("type") == "directory":  # (a prefix of an object store: a sparse frame?)
            raise IsADirectoryError(errno.EISDIR, "a directory, not one object", url)
        # What the store calls this version of the object: a writer's conditional write of
        # it names the version it read (see remote_sparse).
        self.etag = info.get("ETag") or info.get("etag")
        size = int(info.get("size") or 0) - offset
        if size < 0:
            raise FormatError("offset", f"inside {url}", offset)
        super().__init__(self._fetch, size, name=url)
        self._ends: dict[bool, tuple[int, bytes]] = {}
        self._ends_lock = threading.Lock()

    def read(self, offset: int, size: int) -> bytes:
        self._check(offset, size, self._size)
        near = min(END_BYTES, self._size)
        if offset + size <= near:
            start, data = self._end(False, 0, near)
        elif offset >= self._size - near:
            start, data = self._end(True, self._size - near, self._size)
        else:
            return super().read(offset, size)
        return data[offset - start : offset - start + size]

    def _end(self, tail: bool, start: int, stop: int) -> tuple[int, bytes]:
        with self._ends_lock:
            kept = self._ends.get(tail)
            if kept is None:
                data = bytes(self._fetch(start, stop))
                if len(data) != stop - start:
                    raise FormatError(
                        "frame", f"{stop - start} bytes at {start}", f"{len(data)} (short read)"
                    )
                kept = self._ends[tail] = (start, data)
            return kept

    def _fetch(self, start: int, stop: int) -> bytes:
        start, stop = self.offset + start, self.offset + stop
        return ranges.read(self.url, self._fs, self._path, start, stop, etag=self.etag)

    def __reduce__(self):
        return FsspecSource, (self.url, self.storage_options, self.offset)
