"""The frame-layout interface that :class:`~b2store.frame.schunk.SChunk` reads and changes
frames through, and the writer lock every writable layout takes for one change at a time.

A layout answers what an SChunk asks of storage, whatever it is: read the frame (or index
file), read a stored chunk or part of one, store a new chunk where no reader looks yet,
publish a new header/index/trailer in one step, discard what the index no longer names.
Writers take a lock for each change (not for the life of a handle), so a handle never blocks
another one that is merely open, and are served in turn (:mod:`b2store._turns`); a writer
that finds the frame changed by another writer reloads it before changing it. Layouts
pickle as the recipe to reopen them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from .. import _files, _platform, _turns
from ..constants import MIN_HEADER_LENGTH
from ..errors import FormatError, WriterLockedError
from .header import FrameHeader

__all__ = ["Backend", "WriterLockedError", "INDEX_NAME", "LOCK_NAME", "LOCK_TIMEOUT"]

INDEX_NAME = "chunks.b2frame"
LOCK_NAME = ".b2store-lock"
LOCK_TIMEOUT = 30.0


class Backend:
    """What every frame layout answers (see the module docstring)."""

    contiguous = True
    writable = False
    name = "<frame>"
    # Read by requests over a network: each read a round trip, so reads are made fewer and
    # larger (a whole chunk in one, to the next stored chunk's start).
    remote = False

    # --- reading ---------------------------------------------------------------------------
    @property
    def frame_len(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def read(self, offset: int, size: int) -> bytes:  # pragma: no cover - interface
        """``size`` bytes at ``offset`` of the frame (a sparse frame: of its index file)."""
        raise NotImplementedError

    def index_at(self, header: FrameHeader) -> int:  # pragma: no cover - interface
        """Where the offsets index chunk starts."""
        raise NotImplementedError

    def chunk_reader(
        self, entry: int, header: FrameHeader, field: str = "chunk offset"
    ) -> tuple[Callable, int | None]:
        """``(read(offset, size), limit)`` over the stored chunk with index entry ``entry``;
        ``limit`` is how many bytes it may span (None: its file's size)."""
        raise NotImplementedError  # pragma: no cover - interface

    def chunk_span(
        self, entry: int, header: FrameHeader, field: str = "chunk offset"
    ) -> tuple[str, int, int]:
        """(file name or URL, byte offset, length) of a stored chunk."""
        raise NotImplementedError  # pragma: no cover - interface

    def read_chunk(
        self, entry: int, header: FrameHeader, field: str = "chunk offset", span: int = 0
    ) -> bytes:
        """A stored chunk, whole: exactly its ``cbytes``, checked to fit where it lies.
        ``span``: bytes it takes at most (up to the next stored chunk), read at once; 0: its
        header first, then the rest."""
        read, limit = self.chunk_reader(entry, header, field)
        if span:
            span = span if limit is None else min(span, limit)
            data = read(0, span)
            head, limit = data[:MIN_HEADER_LENGTH], span
        else:
            data = head = read(0, MIN_HEADER_LENGTH)
        cbytes = int.from_bytes(head[12:16], "little", signed=True)
        if cbytes < MIN_HEADER_LENGTH or (limit is not None and cbytes > limit):
            raise FormatError("chunk cbytes", f"a chunk inside its storage ({limit})", cbytes, 12)
        return data[:cbytes] if len(data) >= cbytes else read(0, cbytes)

    # --- writing ---------------------------------------------------------------------------
    def store(self, chunk: bytes, header: FrameHeader, in_use) -> int:  # pragma: no cover
        """Write ``chunk`` where no reader looks yet; returns its index entry (``in_use``:
        the entries the index and the unpublished batch hold)."""
        raise NotImplementedError

    def publish(
        self,
        header: FrameHeader,
        index: bytes | None,
        trailer: bytes,
        *,
        stored_bytes: int,
        full_header: bool,
    ) -> tuple[FrameHeader, int]:  # pragma: no cover
        """Make a new state visible at once; returns the new header and the trailer offset.

        ``header`` carries the new nbytes/chunksize/flags; this fills in ``cbytes`` and
        ``frame_len``. ``index=None`` keeps the index where it is (only the trailer changes).
        """
        raise NotImplementedError

    def rewrite_header(self, data: bytes) -> None:  # pragma: no cover - interface
        """Replace the header with one of the same length (in-place metalayer updates)."""
        raise NotImplementedError

    def store_many(self, chunks: list[bytes], header: FrameHeader, in_use) -> list[int]:
        """:meth:`store` of each of ``chunks`` (none special); their index entries. A remote
        layout stores them side by side."""
        entries: list[int] = []
        for chunk in chunks:
            entries.append(self.store(chunk, header, [*in_use, *entries]))
        return entries

    def claim(self, entries: Iterable[int]) -> None:
        """Take chunks stored by other processes for the change under way as this change's
        own: freed if it fails (layouts whose writers store for themselves only: refused)."""
        raise NotImplementedError(f"{self.name}: chunks stored elsewhere")

    def discard(self, entries: Iterable[int], live: Iterable[int] = ()) -> None:
        """Free stored chunks the published index (whose entries are ``live``) no longer
        names."""

    def sweep_orphans(self, offsets) -> None:
        """Under the writer lock: free stored chunks that ``offsets`` (the published index)
        does not name, left by a writer killed before it published them."""

    def adopt(self, header: FrameHeader) -> None:
        """Take ``header`` (just read or just written) as the state this handle knows."""

    def moved(self, header: FrameHeader) -> bool:
        """Whether the header on storage, read again, is no longer ``header``: a writer in
        another process committed (or was committing: a header read then may be torn) since
        it was read. False where headers are never rewritten in place under a reader
        (memory, remote, a sparse frame's index file, replaced by rename)."""
        return False

    def refresh(self) -> bool:
        """A read-only handle: look at storage again (another process may have published);
        False when this layout cannot change under it (memory, remote, a zip member)."""
        return False

    @contextlib.contextmanager
    def locked(self):
        """Hold the writer lock for one change; yields True when the frame changed on disk
        since this handle last looked (another writer published: reload first)."""
        yield False  # pragma: no cover - read-only layouts are never locked

    def close(self) -> None:
        pass

    def reopen(self, writable: bool | None = None) -> Backend:  # pragma: no cover - interface
        raise NotImplementedError


class _WriteLock:
    """A lock for one change at a time, between the threads of this process, its other
    handles and other processes: an OS file lock on ``path``, taken in turn with the other
    writers of the same file (:mod:`b2store._turns`: each outermost :meth:`hold` of any
    thread queues on its own). ``nofollow``: ``path`` is inside the frame (a sparse frame's
    lock file), so a link there is refused rather than followed out of the frame (a
    contiguous frame locks itself, the path the user gave).

    A lock file of its own (``nofollow``) also keeps, in its byte 8, whether a change is
    under way: found set when the lock is taken (``unfinished``), the last holder died or
    failed mid-change and may have left files behind for this one to sweep."""

    def __init__(self, path: Path, timeout: float = LOCK_TIMEOUT, *, nofollow: bool = False):
        self.path = path
        self.timeout = timeout
        self.nofollow = nofollow
        self.unfinished = False
        self._queue = _turns.queue_path(path)
        self._depth = threading.local()  # holds of the thread that has the lock
        self._fd = -1
        self._turn: _turns.Turn | None = None

    @contextlib.contextmanager
    def hold(self):
        depth = getattr(self._depth, "n", 0)
        if depth == 0:
            self._acquire()
        self._depth.n = depth + 1
        done = False
        try:
            yield
            done = True
        finally:
            self._depth.n -= 1
            if self._depth.n == 0:
                self._release(done)

    def _acquire(self) -> None:
        fd = _files.open_lock(self.path, nofollow=self.nofollow)
        try:
            turn = _turns.take(fd, self.path, self._queue, self.timeout)
        except BaseException:
            os.close(fd)
            raise
        if self.nofollow:
            try:  # (a lock file of an older b2store has no byte 8: unknown, so unfinished)
                self.unfinished = os.pread(fd, 1, 8) != b"\0"
                os.pwrite(fd, b"\1", 8)
            except BaseException:
                self._fd, self._turn = fd, turn
                self._release(False)
                raise
        self._fd, self._turn = fd, turn

    def _release(self, done: bool) -> None:
        """Let go of the lock, then of this writer's place in the queue (the next one looks
        for the lock only once that place is gone, so it finds the lock free)."""
        fd, self._fd = self._fd, -1
        turn, self._turn = self._turn, None
        try:
            if done and self.nofollow:
                os.pwrite(fd, b"\0", 8)  # the change is over
        finally:
            try:
                _platform.unlock(fd)
                os.close(fd)
            finally:
                if turn is not None:
                    turn.leave()

    def close(self) -> None:
        """The handle closes: the queue beside the lock goes if no one waits in it."""
        _turns.tidy(self._queue)

    def next_id(self) -> int:
        """The high-water mark of chunk-file ids kept in the lock file (0 if none yet)."""
        data = os.pread(self._fd, 8, 0)
        return int.from_bytes(data, "little") if len(data) == 8 else 0

    def set_next_id(self, value: int) -> None:
        os.pwrite(self._fd, value.to_bytes(8, "little"), 0)


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _atomic_write(path: Path, data: bytes, sync: bool = True) -> None:
    _files.write_atomic(path, data, sync)
