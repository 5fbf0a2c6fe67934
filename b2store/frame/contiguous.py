"""The contiguous frame layout: a whole frame in one run of bytes (a file, memory, a URL, any
range reader), read by offsets and, in memory or in a local file, changed by appending past
its end and rewriting its fixed header (:mod:`b2store.frame.publishing`).

It answers the :class:`~b2store.frame.backend.Backend` interface; which layout a path, URL
or bytes is, :mod:`b2store.frame.factory` decides.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable

import numpy as np

from .. import _files
from .._sync import sync_mode
from ..constants import MIN_HEADER_LENGTH
from ..errors import B2StoreError, FormatError
from .b2lock import Sidecar, sidecar_path
from .backend import Backend, check_span
from .header import HEADER_FIXED_LEN, FrameHeader
from .lock import LOCK_TIMEOUT, WriteLock
from .sources import ByteSource, FileSource, FsspecSource, MemorySource, RangeSource
from .trailer import TRAILER_TAIL_LEN, trailer_span

__all__ = ["ContiguousFrame", "RangeBackend"]


class ContiguousFrame(Backend):
    """A whole frame in one run of bytes. Writable when in memory or in a local file."""

    contiguous = True

    def __init__(
        self,
        source: ByteSource,
        frame_len: int | None = None,
        writable: bool = False,
        lock_timeout: float = LOCK_TIMEOUT,
        locking: bool | None = None,
    ):
        self._source = source
        self._locking = locking
        if isinstance(source, FileSource) and source.offset == 0:
            # (a frame inside a larger file, a .b2z member, has none: python-blosc2 refuses
            # locking for zip stores)
            self.sidecar = Sidecar(
                sidecar_path(source.path, sparse=False), locking, writable, lock_timeout
            )
        self.name = source.name
        self.remote = isinstance(source, FsspecSource)
        self.writable = writable
        self._frame_len = source.size if frame_len is None else frame_len
        self._end = self._frame_len  # where the next unpublished write goes
        self._buf = None
        self._wfd = -1
        self._lock = None
        self._sync = sync_mode() if writable else "none"
        self._dirty = False  # written and not synced ("close" mode)
        self._held = None
        self._in_tree = False
        if writable:
            if isinstance(source, MemorySource):
                self._buf = bytearray(source.read(0, source.size))
                self._mlock = threading.RLock()
            elif isinstance(source, FileSource) and source.offset == 0:
                # Inside a tree no link is written through: refused now, before any byte,
                # and the file opened for writing with O_NOFOLLOW (one planted since).
                self._in_tree = _files.check_write(source.path) is not None
                self._lock = WriteLock(source.path, lock_timeout)
            else:
                raise ValueError(
                    f"{source.name}: only local files and memory frames can be changed"
                )
            self._seen = self.committed_head()

    # --- reading ---------------------------------------------------------------------------
    @property
    def frame_len(self) -> int:
        return self._frame_len

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset + size > self._frame_len:
            raise FormatError(
                "frame",
                f"bytes {offset}..{offset + size} inside the frame",
                f"a frame of {self._frame_len} bytes",
            )
        if self._buf is not None:
            return bytes(self._buf[offset : offset + size])
        return self._source.read(offset, size)

    def read_pieces_into(self, pieces) -> None:
        """:meth:`read` into each ``out`` (a writable uint8 array) of ``pieces``, pairs of
        ``(offset, out)`` in ascending offsets."""
        for offset, out in pieces:
            if offset < 0 or offset + len(out) > self._frame_len:
                raise FormatError(
                    "frame",
                    f"bytes {offset}..{offset + len(out)} inside the frame",
                    f"a frame of {self._frame_len} bytes",
                )
        if self._buf is not None:
            for offset, out in pieces:
                out[:] = np.frombuffer(self._buf, np.uint8, len(out), offset)
        else:
            self._source.read_pieces_into(pieces)

    def index_at(self, header: FrameHeader) -> int:
        return header.header_len + header.cbytes

    def duplicate_fd(self) -> int | None:
        """A duplicate of the descriptor of the file this frame is read from, for the
        caller to close; None when it is not read from a local file."""
        if self._buf is not None or not isinstance(self._source, FileSource):
            return None
        return self._source.duplicate_fd()

    def file_offset(self) -> int:
        """Where the frame starts in the file :meth:`duplicate_fd` reads."""
        return self._source.offset

    def chunk_reader(self, entry: int, header: FrameHeader, field: str = "chunk offset"):
        base = header.header_len + entry
        chunks_end = header.header_len + header.cbytes
        if not header.header_len <= base < chunks_end:
            raise FormatError(field, f"an offset in [0, cbytes={header.cbytes})", entry)
        limit = chunks_end - base
        return _ChunkBytes(self, base, limit), limit

    def chunk_span(
        self, entry: int, header: FrameHeader, field: str = "chunk offset"
    ) -> tuple[str, int, int]:
        read, limit = self.chunk_reader(entry, header, field)
        cbytes = int.from_bytes(read(0, MIN_HEADER_LENGTH)[12:16], "little", signed=True)
        if not MIN_HEADER_LENGTH <= cbytes <= limit:
            raise FormatError(
                "chunk cbytes",
                f"a chunk inside the chunks section ({limit})",
                cbytes,
                header.header_len + entry + 12,
            )
        shift = getattr(self._source, "offset", 0)
        return self.name, shift + header.header_len + entry, cbytes

    # --- writing ---------------------------------------------------------------------------
    def committed_head(self) -> bytes:
        """The whole header on storage (fixed part and metalayers): another writer's change
        of a metalayer in place leaves the fixed part as it was."""
        if self._buf is not None:
            head = bytes(self._buf[:HEADER_FIXED_LEN])
            header_len = _header_len(head)
            return bytes(self._buf[:header_len]) if header_len else head
        with open(_files.open_regular(self._source.path), "rb") as fh:
            head = fh.read(HEADER_FIXED_LEN)
            header_len = _header_len(head)
            return head + fh.read(header_len - len(head)) if header_len else head

    def _write(self, offset: int, data: bytes) -> None:
        if self._buf is not None:
            end = offset + len(data)
            if end > len(self._buf):
                self._buf.extend(bytes(end - len(self._buf)))
            self._buf[offset:end] = data
            return
        if self._wfd < 0:
            self._wfd = _files.open_writable(self._source.path, nofollow=self._in_tree)
        # A short write (a full disk, a file-size limit) is written on from where it stopped:
        # the next write fails with the errno that says why (ENOSPC, EFBIG).
        view, at = memoryview(data), 0
        while at < len(view):
            try:
                written = os.pwrite(self._wfd, view[at:], offset + at)
            except OSError as exc:
                # pwrite names no file: the public writers then name the user's path
                named = _files.naming(exc, self.name)
                if named is exc:
                    raise
                raise named from exc
            if written <= 0:
                raise OSError(errno.ENOSPC, f"no byte written of {len(view) - at}", self.name)
            at += written

    def _set_len(self, frame_len: int) -> None:
        """Make ``frame_len`` the end: bytes past it were never part of a committed frame."""
        self._frame_len = self._end = frame_len
        if self._buf is not None:
            del self._buf[frame_len:]
        else:
            os.ftruncate(self._wfd, frame_len)
            self._source.set_size(frame_len)

    @contextlib.contextmanager
    def locked(self):
        if not self.writable:
            raise PermissionError(f"{self.name} is open for reading; open it with mode='a'")
        if self._lock is None:  # memory: one handle, threads only
            with self._mlock:
                yield False
            return
        with self._lock.hold(), self.sidecar.hold_exclusive() as moved:
            # (python-blosc2's sidecar after b2store's own lock, never before: its writers
            # take no b2store lock, so no two writers can each wait for the other)
            changed = moved or self.committed_head() != self._seen
            if changed:  # another writer published: the file may have grown
                self._source.set_size(self._source.file_size())
                self._frame_len = self._end = self._source.size
            yield changed

    def moved(self, header: FrameHeader) -> bool:
        source = self._source
        if self._buf is not None or not isinstance(source, FileSource) or source.offset:
            return False
        try:
            now = FrameHeader.from_bytes(source.read(0, header.header_len))
        except B2StoreError:
            return True  # (torn by a writer, or another header's length)
        return now != header or now.metalayers != header.metalayers

    def refresh(self) -> bool:
        source = self._source
        if not isinstance(source, FileSource) or source.offset:
            return False
        if self.writable and self._end != self._frame_len:
            return False  # chunks stored and not yet published: keep where they end
        source.set_size(source.file_size())
        self._frame_len = self._end = source.size
        return True

    def adopt(self, header: FrameHeader) -> None:
        """Take ``header`` (just read from storage) as the state this handle knows."""
        self._frame_len = self._end = header.frame_len
        if self.writable:
            self._seen = header.to_bytes()

    def store(self, chunk: bytes, header: FrameHeader, in_use) -> int:
        at = self._end
        self._write(at, chunk)
        self._end = at + len(chunk)
        return at - header.header_len

    def publish(self, header, index, trailer, *, stored_bytes, full_header):
        if header.nbytes == 0:
            return self._publish_empty(header, trailer, full_header)
        at = self._end
        cbytes = (
            at if index is not None else header.header_len + header.cbytes
        ) - header.header_len
        self._write(at, (index or b"") + trailer)
        trailer_at = at + len(index or b"")
        new = header.with_fields(cbytes=cbytes, frame_len=trailer_at + len(trailer))
        self._commit(new, full_header)
        return new, trailer_at

    def _commit(self, new: FrameHeader, full_header: bool) -> None:
        data = new.to_bytes()
        if self._held is not None:
            # Held back (see :meth:`hold_commit`): everything else is written (and synced,
            # under the "commit" setting); the caller writes these bytes, with other frames'
            # under its journal.
            if self._wfd >= 0 and self._sync == "commit":
                os.fsync(self._wfd)
            self._held.append((data if full_header else data[:HEADER_FIXED_LEN], new.frame_len))
            self._end = new.frame_len
            self._dirty = self._sync == "close"
            return
        syncing = self._wfd >= 0 and self._sync == "commit"
        if syncing:
            # The new bytes reach the disk before the header that names them: the kernel may
            # write a file's dirty pages back in any order, so without this a power cut could
            # keep the new header and lose the index it points to (a kill cannot: the kernel
            # holds every write a process made).
            os.fsync(self._wfd)
        # The commit point: one write of the fixed header (or the whole, same-size header).
        self._write(0, data if full_header else data[:HEADER_FIXED_LEN])
        if syncing:
            os.fsync(self._wfd)
        self._dirty = self._sync == "close"
        self._set_len(new.frame_len)
        self._seen = data

    def _publish_empty(self, header, trailer, full_header):
        """A frame with no data keeps its trailer right after the header: that is where
        c-blosc2 looks when there is no index. Rewriting it there in place could tear it,
        so the old trailer is first parked at the end (b2store finds a trailer from the
        frame's end), then the new one goes in place, then the new length is committed. A
        crash at any point leaves a frame that b2store reads whole."""
        if self._held is not None:
            raise ValueError(f"{self.name}: an empty frame's commit takes two writes: none held")
        old_len = self._trailer_len(header.header_len)
        old_trailer = self.read(self._frame_len - old_len, old_len)
        at = self._end
        if at < header.header_len + len(trailer):
            at = header.header_len + len(trailer)  # park it past where the new one will go
        self._write(at, old_trailer)
        parked = header.with_fields(cbytes=at - header.header_len, frame_len=at + len(old_trailer))
        self._commit(parked, full_header=False)
        self._write(header.header_len, trailer)
        new = header.with_fields(cbytes=0, frame_len=header.header_len + len(trailer))
        self._commit(new, full_header)
        return new, header.header_len

    def _trailer_len(self, header_len: int) -> int:
        # The trailer's own length sits in its last bytes (see frame/trailer.py).
        tail = self.read(self._frame_len - TRAILER_TAIL_LEN, TRAILER_TAIL_LEN)
        return trailer_span(tail, self._frame_len, header_len)[1]

    @contextlib.contextmanager
    def hold_commit(self):
        """Within: a change is written whole (chunks, index, trailer, synced) but its commit,
        the header write, is held back: the list yielded receives ``(header bytes, frame
        length)`` of each, for the caller to write (:mod:`b2store.journal` commits several
        frames at once that way). Only for a change made on a file, under the writer lock."""
        if self._buf is not None or self._lock is None:
            raise ValueError(f"{self.name}: only a local file frame's commit can be held back")
        self._held = []
        try:
            yield self._held
        finally:
            self._held = None

    def rewrite_header(self, data: bytes) -> None:
        self._write(0, data)
        if self._wfd >= 0 and self._sync == "commit":
            os.fsync(self._wfd)
        self._dirty = self._sync == "close"
        self._seen = data

    def getvalue(self) -> bytes:
        return self.read(0, self._frame_len)

    def close(self) -> None:
        self._source.close()
        if self._lock is not None:
            self._lock.close()
        if self._wfd >= 0:
            try:
                if self._dirty:  # "close" mode: what this handle wrote, now on disk
                    os.fsync(self._wfd)
            finally:
                os.close(self._wfd)
                self._wfd = -1
                self._dirty = False

    def __reduce__(self):
        # The recipe, never the descriptor: a copy opens the file again.
        if self._buf is not None:
            return _reopen_memory, (bytes(self._buf[: self._frame_len]), self.writable)
        return ContiguousFrame, (self._source, None, self.writable, LOCK_TIMEOUT, self._locking)

    def reopen(self, writable: bool | None = None) -> Backend:
        writable = self.writable if writable is None else writable
        if self._buf is not None:
            return _reopen_memory(bytes(self._buf[: self._frame_len]), writable)
        return ContiguousFrame(
            self._source, self._frame_len, writable=writable, locking=self._locking
        )


class _ChunkBytes:
    """``read(offset, size)`` of one chunk's bytes in a contiguous frame, none past the
    chunks section; ``read.pieces_into([(offset, out), ...])`` fills each ``out`` without a
    copy."""

    __slots__ = ("frame", "base", "limit")

    def __init__(self, frame: ContiguousFrame, base: int, limit: int):
        self.frame, self.base, self.limit = frame, base, limit

    def _check(self, offset: int, size: int) -> None:
        check_span(offset, size, self.limit, "chunk", "the chunks section", self.base, left=True)

    def __call__(self, offset: int, size: int) -> bytes:
        self._check(offset, size)
        return self.frame.read(self.base + offset, size)

    def pieces_into(self, pieces) -> None:
        """Each ``out`` of ``pieces`` (``(offset, out)``, ascending) filled from ``offset``."""
        base = self.base
        for offset, out in pieces:
            self._check(offset, len(out))
        self.frame.read_pieces_into([(base + offset, out) for offset, out in pieces])


def _reopen_memory(data: bytes, writable: bool) -> ContiguousFrame:
    return ContiguousFrame(MemorySource(data), writable=writable)


def RangeBackend(
    read_range: Callable[[int, int], bytes], size: int, *, name: str = "<range>"
) -> ContiguousFrame:
    """A read-only contiguous frame over any ``read_range(start, stop) -> bytes`` callable
    (a zarr store, an object-store client...). It pickles when the callable does."""
    return ContiguousFrame(RangeSource(read_range, size, name=name))


def _header_len(head: bytes) -> int:
    """``header_len`` from a frame's first bytes, or 0 when they are not a frame header."""
    try:
        return FrameHeader.peek_len(head[:24])[0]
    except B2StoreError:
        return 0
