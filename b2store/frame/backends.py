"""The two frame layouts behind one interface: a contiguous frame (one run of bytes: a file,
memory, a URL) and a sparse frame (a directory of ``chunks.b2frame`` plus one file per chunk).

A layout answers what :class:`~b2store.frame.schunk.SChunk` asks of storage, whatever it is:
read the frame (or index file), read a stored chunk or part of one, store a new chunk where
no reader looks yet, publish a new header/index/trailer in one step, discard what the index
no longer names. Writers take a lock for each change (not for the life of a handle), so a
handle never blocks another one that is merely open; a writer that finds the frame changed
by another writer reloads it before changing it.

Layouts pickle as the recipe to reopen them (path, URL or bytes, and the mode).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from .. import _platform
from ..constants import MIN_HEADER_LENGTH
from ..errors import B2StoreError, FormatError
from ..limits import Limits, resolve
from .header import HEADER_FIXED_LEN, FrameHeader
from .sources import ByteSource, FileSource, FsspecSource, MemorySource, is_url, local_path
from .trailer import TRAILER_TAIL_LEN, trailer_span

__all__ = [
    "Backend",
    "ContiguousFrame",
    "SparseFrame",
    "RangeBackend",
    "open_backend",
    "read_header",
    "WriterLockedError",
    "INDEX_NAME",
    "LOCK_NAME",
]

INDEX_NAME = "chunks.b2frame"
LOCK_NAME = ".b2store-lock"
LOCK_TIMEOUT = 30.0


class WriterLockedError(B2StoreError):
    """Another writer held the frame for longer than the lock timeout."""


class Backend:
    """What every frame layout answers (see the module docstring)."""

    contiguous = True
    writable = False
    name = "<frame>"

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

    def read_chunk(self, entry: int, header: FrameHeader, field: str = "chunk offset") -> bytes:
        """A stored chunk, whole: exactly its ``cbytes``, checked to fit where it lies."""
        read, limit = self.chunk_reader(entry, header, field)
        head = read(0, MIN_HEADER_LENGTH)
        cbytes = int.from_bytes(head[12:16], "little", signed=True)
        if cbytes < MIN_HEADER_LENGTH or (limit is not None and cbytes > limit):
            raise FormatError("chunk cbytes", f"a chunk inside its storage ({limit})", cbytes, 12)
        return read(0, cbytes)

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

    def discard(self, entries: Iterable[int]) -> None:
        """Free stored chunks the published index no longer names."""

    def adopt(self, header: FrameHeader) -> None:
        """Take ``header`` (just read or just written) as the state this handle knows."""

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
    """A lock for one change at a time: threads of this process, then other processes (and
    other handles of this one) through an OS file lock on ``path``."""

    def __init__(self, path: Path, timeout: float = LOCK_TIMEOUT):
        self.path = path
        self.timeout = timeout
        self._thread_lock = threading.RLock()
        self._fd = -1
        self._depth = 0

    @contextlib.contextmanager
    def hold(self):
        with self._thread_lock:
            if self._depth == 0:
                self._acquire()
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    _platform.unlock(self._fd)
                    os.close(self._fd)
                    self._fd = -1

    def _acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while not _platform.try_lock(fd):
            if time.monotonic() > deadline:
                os.close(fd)
                raise WriterLockedError(
                    f"{self.path} is locked by another writer (waited {self.timeout:.0f} s)"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        self._fd = fd

    def next_id(self) -> int:
        """The high-water mark of chunk-file ids kept in the lock file (0 if none yet)."""
        data = os.pread(self._fd, 8, 0)
        return int.from_bytes(data, "little") if len(data) == 8 else 0

    def set_next_id(self, value: int) -> None:
        os.pwrite(self._fd, value.to_bytes(8, "little"), 0)


class ContiguousFrame(Backend):
    """A whole frame in one run of bytes. Writable when in memory or in a local file."""

    contiguous = True

    def __init__(
        self,
        source: ByteSource,
        frame_len: int | None = None,
        writable: bool = False,
        lock_timeout: float = LOCK_TIMEOUT,
    ):
        self._source = source
        self.name = source.name
        self.writable = writable
        self._frame_len = source.size if frame_len is None else frame_len
        self._end = self._frame_len  # where the next unpublished write goes
        self._buf = None
        self._wfd = -1
        self._lock = None
        if writable:
            if isinstance(source, MemorySource):
                self._buf = bytearray(source.read(0, source.size))
                self._mlock = threading.RLock()
            elif isinstance(source, FileSource) and source.offset == 0:
                self._lock = _WriteLock(source.path, lock_timeout)
            else:
                raise ValueError(
                    f"{source.name}: only local files and memory frames can be changed"
                )
            self._seen = self._committed_head()

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

    def index_at(self, header: FrameHeader) -> int:
        return header.header_len + header.cbytes

    def chunk_reader(self, entry: int, header: FrameHeader, field: str = "chunk offset"):
        base = header.header_len + entry
        chunks_end = header.header_len + header.cbytes
        if not header.header_len <= base < chunks_end:
            raise FormatError(field, f"an offset in [0, cbytes={header.cbytes})", entry)
        limit = chunks_end - base

        def read(offset: int, size: int) -> bytes:
            if offset + size > limit:
                raise FormatError(
                    "chunk",
                    f"bytes {offset}..{offset + size} inside the chunks section",
                    f"{limit} bytes left",
                    base,
                )
            return self.read(base + offset, size)

        return read, limit

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
    def _committed_head(self) -> bytes:
        if self._buf is not None:
            return bytes(self._buf[:HEADER_FIXED_LEN])
        with open(self._source.path, "rb") as fh:
            return fh.read(HEADER_FIXED_LEN)

    def _write(self, offset: int, data: bytes) -> None:
        if self._buf is not None:
            end = offset + len(data)
            if end > len(self._buf):
                self._buf.extend(bytes(end - len(self._buf)))
            self._buf[offset:end] = data
            return
        if self._wfd < 0:
            self._wfd = os.open(self._source.path, os.O_RDWR)
        written = os.pwrite(self._wfd, data, offset)
        if written != len(data):
            raise OSError(f"short write to {self.name}: {written} of {len(data)} bytes")

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
        with self._lock.hold():
            changed = self._committed_head() != self._seen
            if changed:  # another writer published: the file may have grown
                self._source.set_size(os.stat(self._source.path).st_size)
                self._frame_len = self._end = self._source.size
            yield changed

    def refresh(self) -> bool:
        source = self._source
        if not isinstance(source, FileSource) or source.offset:
            return False
        if self.writable and self._end != self._frame_len:
            return False  # chunks stored and not yet published: keep where they end
        source.set_size(os.stat(source.path).st_size)
        self._frame_len = self._end = source.size
        return True

    def adopt(self, header: FrameHeader) -> None:
        """Take ``header`` (just read from storage) as the state this handle knows."""
        self._frame_len = self._end = header.frame_len
        if self.writable:
            self._seen = header.to_bytes()[:HEADER_FIXED_LEN]

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
        # The commit point: one write of the fixed header (or the whole, same-size header).
        self._write(0, data if full_header else data[:HEADER_FIXED_LEN])
        if self._wfd >= 0:
            os.fsync(self._wfd)
        self._set_len(new.frame_len)
        self._seen = data[:HEADER_FIXED_LEN]

    def _publish_empty(self, header, trailer, full_header):
        """A frame with no data keeps its trailer right after the header: that is where
        c-blosc2 looks when there is no index. Rewriting it there in place could tear it,
        so the old trailer is first parked at the end (b2store finds a trailer from the
        frame's end), then the new one goes in place, then the new length is committed. A
        crash at any point leaves a frame that b2store reads whole."""
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

    def rewrite_header(self, data: bytes) -> None:
        self._write(0, data)
        if self._wfd >= 0:
            os.fsync(self._wfd)
        self._seen = data[:HEADER_FIXED_LEN]

    def getvalue(self) -> bytes:
        return self.read(0, self._frame_len)

    def close(self) -> None:
        self._source.close()
        if self._wfd >= 0:
            os.close(self._wfd)
            self._wfd = -1

    def __reduce__(self):
        # The recipe, never the descriptor: a copy opens the file again.
        if self._buf is not None:
            return _reopen_memory, (bytes(self._buf[: self._frame_len]), self.writable)
        return ContiguousFrame, (self._source, None, self.writable)

    def reopen(self, writable: bool | None = None) -> Backend:
        writable = self.writable if writable is None else writable
        if self._buf is not None:
            return _reopen_memory(bytes(self._buf[: self._frame_len]), writable)
        return ContiguousFrame(self._source, self._frame_len, writable=writable)


def _reopen_memory(data: bytes, writable: bool) -> ContiguousFrame:
    return ContiguousFrame(MemorySource(data), writable=writable)


class SparseFrame(Backend):
    """``chunks.b2frame`` (header, offsets index, trailer) and one ``%08X.chunk`` file per
    chunk, in a local directory."""

    contiguous = False

    def __init__(self, directory, writable: bool = False, lock_timeout: float = LOCK_TIMEOUT):
        self.directory = local_path(directory)
        self.name = str(self.directory)
        self.writable = writable
        if not (self.directory / INDEX_NAME).is_file():
            raise FormatError(
                INDEX_NAME, f"a sparse frame's index file in {self.directory}", "none"
            )
        self._index = FileSource.opened(self.directory / INDEX_NAME)
        self._frame_len = self._index.size
        self._next_id = 0
        self._lock = _WriteLock(self.directory / LOCK_NAME, lock_timeout) if writable else None

    @property
    def frame_len(self) -> int:
        return self._frame_len

    def read(self, offset: int, size: int) -> bytes:
        if offset + size > self._frame_len:
            raise FormatError(
                "frame",
                f"bytes {offset}..{offset + size} inside {INDEX_NAME}",
                f"{self._frame_len} bytes",
            )
        return self._index.read(offset, size)

    def index_at(self, header: FrameHeader) -> int:
        return header.header_len

    def chunk_path(self, chunk_id: int) -> Path:
        if not 0 <= chunk_id <= 0xFFFFFFFF:
            raise FormatError("chunk id", "0..0xFFFFFFFF in a sparse frame", chunk_id)
        return self.directory / f"{chunk_id:08X}.chunk"

    def chunk_reader(self, entry: int, header: FrameHeader, field: str = "chunk offset"):
        path = self.chunk_path(entry)
        try:
            source = FileSource(path)
        except FileNotFoundError:
            raise FormatError(
                "chunk file", f"{path.name} in {self.directory}", "no such file"
            ) from None

        def read(offset: int, size: int) -> bytes:
            if offset + size > source.size:
                raise FormatError(
                    "chunk file", f"{size} bytes at {offset} of {path.name}", f"{source.size} bytes"
                )
            try:  # the file is opened on first read: a writer may have discarded it since
                return source.read(offset, size)
            except FileNotFoundError:
                raise FormatError(
                    "chunk file", f"{path.name} in {self.directory}", "no such file"
                ) from None

        return read, source.size

    def chunk_span(
        self, entry: int, header: FrameHeader, field: str = "chunk offset"
    ) -> tuple[str, int, int]:
        path = self.chunk_path(entry)
        try:
            return str(path), 0, path.stat().st_size
        except FileNotFoundError:
            raise FormatError(
                "chunk file", f"{path.name} in {self.directory}", "no such file"
            ) from None

    def read_chunk(self, entry: int, header: FrameHeader, field: str = "chunk offset") -> bytes:
        path = self.chunk_path(entry)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise FormatError(
                "chunk file", f"{path.name} in {self.directory}", "no such file"
            ) from None
        if len(data) < MIN_HEADER_LENGTH:
            raise FormatError("chunk file", "a whole chunk", f"{len(data)} bytes", 0)
        cbytes = int.from_bytes(data[12:16], "little", signed=True)
        if not MIN_HEADER_LENGTH <= cbytes <= len(data):
            raise FormatError(
                "chunk cbytes", f"at most the {len(data)} bytes of {path.name}", cbytes, 12
            )
        return data[:cbytes]

    @contextlib.contextmanager
    def locked(self):
        if not self.writable:
            raise PermissionError(f"{self.name} is open for reading; open it with mode='a'")
        with self._lock.hold():
            # The index file is replaced by rename on every change: compare the whole file
            # this handle adopted with the one on disk now. (Its fixed header is not enough:
            # a chunk replaced by one of the same size, or a vlmeta value by one of the same
            # length, leaves it unchanged, and a stale writer would then lose that change.)
            fresh = FileSource.opened(self.directory / INDEX_NAME)
            changed = _digest(fresh.read(0, fresh.size)) != self._seen
            if changed:
                self._index.close()
                self._index, self._frame_len = fresh, fresh.size
            yield changed

    def adopt(self, header: FrameHeader) -> None:
        self._frame_len = header.frame_len
        if self.writable:  # the index file the header was just read from, whole
            self._seen = _digest(self._index.read(0, self._index.size))

    def refresh(self) -> bool:
        if self.writable:
            return False
        # The index file was replaced by rename: open the new one (the old one closes when
        # no reader holds it any more).
        self._index = FileSource.opened(self.directory / INDEX_NAME)
        self._frame_len = self._index.size
        return True

    def store(self, chunk: bytes, header: FrameHeader, in_use) -> int:
        ids = [int(e) for e in in_use if e >= 0]
        # Past every id in use, every id handed out since (a batch not yet published), and
        # every id b2store ever gave out here (kept in the lock file): an id is never reused,
        # so a reader holding an older index never finds another chunk under an id it knew
        # (a discarded file is missing instead, and the reader moves to the newer index).
        new_id = max(max(ids) + 1 if ids else 0, self._next_id, self._lock.next_id())
        self._lock.set_next_id(new_id + 1)
        self._next_id = new_id + 1
        _atomic_write(self.chunk_path(new_id), chunk)
        return new_id

    def publish(self, header, index, trailer, *, stored_bytes, full_header):
        index = index or b""
        frame_len = header.header_len + len(index) + len(trailer)
        # A sparse frame's cbytes is the size of its chunk files (c-blosc2 reads 0 as
        # "no chunks").
        new = header.with_fields(cbytes=stored_bytes, frame_len=frame_len)
        self._replace_index(new.to_bytes() + index + trailer)
        self._next_id = 0
        return new, frame_len - len(trailer)

    def rewrite_header(self, data: bytes) -> None:
        rest = self._index.read(len(data), self._frame_len - len(data))
        self._replace_index(data + rest)

    def _replace_index(self, frame: bytes) -> None:
        """Swap in a new ``chunks.b2frame`` in one rename; readers see the old or the new."""
        _atomic_write(self.directory / INDEX_NAME, frame)
        self._seen = _digest(frame)
        old, self._index = self._index, FileSource.opened(self.directory / INDEX_NAME)
        old.close()
        self._frame_len = len(frame)

    def discard(self, entries: Iterable[int]) -> None:
        for entry in entries:
            if entry >= 0:
                self.chunk_path(entry).unlink(missing_ok=True)

    def close(self) -> None:
        self._index.close()

    def __reduce__(self):
        return SparseFrame, (self.directory, self.writable)

    def reopen(self, writable: bool | None = None) -> Backend:
        return SparseFrame(self.directory, writable=self.writable if writable is None else writable)


def RangeBackend(
    read_range: Callable[[int, int], bytes], size: int, *, name: str = "<range>"
) -> ContiguousFrame:
    """A read-only contiguous frame over any ``read_range(start, stop) -> bytes`` callable
    (a zarr store, an object-store client...). It pickles when the callable does."""
    from .sources import RangeSource

    return ContiguousFrame(RangeSource(read_range, size, name=name))


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def open_backend(
    urlpath,
    *,
    writable: bool = False,
    offset: int = 0,
    storage_options: dict | None = None,
    limits: Limits | None = None,
) -> tuple[Backend, FrameHeader]:
    """The layout and header of the frame at ``urlpath``: a local file or directory, an
    fsspec URL, the frame's bytes, or a :class:`Backend` already made."""
    if isinstance(urlpath, Backend):
        backend = urlpath.reopen(writable) if writable != urlpath.writable else urlpath
    elif isinstance(urlpath, (bytes, bytearray, memoryview)):
        backend = ContiguousFrame(MemorySource(memoryview(urlpath)[offset:]), writable=writable)
    elif is_url(urlpath):
        if writable:
            raise ValueError(f"{urlpath}: remote frames are read-only")
        backend = ContiguousFrame(FsspecSource(urlpath, storage_options, offset))
    else:
        path = local_path(urlpath)
        if path.is_dir():
            if offset:
                raise ValueError("offset applies to frames inside a file, not to directories")
            backend = SparseFrame(path, writable=writable)
        elif path.exists():
            backend = ContiguousFrame(FileSource(path, offset), writable=writable and not offset)
            if writable and offset:
                raise ValueError("a frame inside another file (offset) can only be read")
        else:
            raise FileNotFoundError(f"no frame at {path}")
    try:
        header = read_header(backend, limits)
    except BaseException:
        backend.close()
        raise
    return backend, header


def read_header(backend: Backend, limits: Limits | None = None) -> FrameHeader:
    """Read and check the header; the frame ends where the header says (bytes after a frame
    are not ours). ``header_len`` and ``nbytes`` are checked against ``limits``."""
    limits = resolve(limits)
    available = backend.frame_len
    header_len, frame_len = FrameHeader.peek_len(backend.read(0, min(24, available)))
    if frame_len > available and backend.refresh():
        # The file grew since its size was taken: a writer published meanwhile.
        available = backend.frame_len
        header_len, frame_len = FrameHeader.peek_len(backend.read(0, min(24, available)))
    if frame_len > available:
        raise FormatError("frame_len", f"at most the {available} bytes there are", frame_len, 16)
    limits.check("max_metalayer_nbytes", header_len, "header_len", 10)
    header = FrameHeader.from_bytes(backend.read(0, min(header_len, frame_len)))
    limits.check("max_frame_nbytes", header.nbytes, "nbytes", 25)
    backend.adopt(header)
    return header
