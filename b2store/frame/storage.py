"""Where a frame's bytes live: one contiguous frame (bytes in memory or a file) or a sparse
frame (a directory holding ``chunks.b2frame`` and one ``%08X.chunk`` file per chunk).

Both answer the same questions (the header, the trailer, the offsets index, the bytes of
chunk i), so that :class:`~b2store.frame.schunk.SChunk` does not care which it reads.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

import numpy as np

from ..chunk.header import ChunkHeader
from ..constants import EXTENDED_HEADER_LENGTH, MIN_HEADER_LENGTH
from ..errors import B2StoreError, FormatError
from .header import FrameHeader

__all__ = [
    "FrameSource",
    "MemoryFrame",
    "FileFrame",
    "SparseFrame",
    "open_source",
    "INDEX_NAME",
    "WriterLockedError",
    "partial_chunk",
]


class WriterLockedError(B2StoreError):
    """Another writer has the frame open: two writers would corrupt it."""


INDEX_NAME = "chunks.b2frame"
LOCK_NAME = ".b2store-lock"
_PEEK = 128


class FrameSource:
    """Random access to one frame's bytes."""

    contiguous = True

    def read(self, offset: int, size: int) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def frame_len(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def read_chunk_at(self, offset: int, limit: int) -> bytes:
        """The chunk starting at absolute ``offset`` that must end by ``limit``."""
        if offset + MIN_HEADER_LENGTH > limit:
            raise FormatError("chunk offset", f"a chunk header before byte {limit}", offset)
        head = self.read(offset, min(EXTENDED_HEADER_LENGTH, limit - offset))
        cbytes = int.from_bytes(head[12:16], "little", signed=True)
        if not MIN_HEADER_LENGTH <= cbytes <= limit - offset:
            raise FormatError(
                "chunk cbytes",
                f"a chunk inside the chunks section (to {limit})",
                cbytes,
                offset + 12,
            )
        return self.read(offset, cbytes)

    def close(self) -> None:
        pass


class MemoryFrame(FrameSource):
    def __init__(self, data, writable: bool = False):
        if writable:
            self._buf = bytearray(data)
            self._data = memoryview(self._buf)
        else:
            self._buf = None
            self._data = memoryview(data).cast("B")
        self.writable = writable

    def write(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end > len(self._buf):
            self._data.release()
            self._buf.extend(bytes(end - len(self._buf)))
            self._data = memoryview(self._buf)
        self._data[offset:end] = data

    def set_frame_len(self, frame_len: int) -> None:
        if frame_len < len(self._buf):
            self._data.release()
            del self._buf[frame_len:]
            self._data = memoryview(self._buf)

    def getvalue(self) -> bytes:
        return bytes(self._data)

    @property
    def frame_len(self) -> int:
        return len(self._data)

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or offset + size > len(self._data):
            raise FormatError(
                "frame",
                f"bytes {offset}..{offset + size} inside the frame",
                f"a frame of {len(self._data)} bytes",
            )
        return bytes(self._data[offset : offset + size])


class FileFrame(FrameSource):
    """A contiguous frame in a file, read with positional reads (no shared file position)."""

    def __init__(self, path, frame_len: int | None = None, writable: bool = False):
        self.path = Path(path)
        self.writable = writable
        self._fd = -1  # so that close() works even if opening fails
        self._fd = _lock(self.path) if writable else os.open(self.path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size
        self._frame_len = frame_len if frame_len is not None else self._size

    def write(self, offset: int, data: bytes) -> None:
        written = os.pwrite(self._fd, data, offset)
        if written != len(data):
            raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")

    def set_frame_len(self, frame_len: int) -> None:
        """Make ``frame_len`` the end; bytes past it were never part of a committed frame."""
        self._frame_len = frame_len
        os.ftruncate(self._fd, frame_len)

    def sync(self) -> None:
        os.fsync(self._fd)

    @property
    def frame_len(self) -> int:
        return self._frame_len

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or offset + size > self._frame_len:
            raise FormatError(
                "frame",
                f"bytes {offset}..{offset + size} inside the frame",
                f"a frame of {self._frame_len} bytes",
            )
        data = os.pread(self._fd, size, offset)
        if len(data) != size:
            raise FormatError("frame", f"{size} bytes at {offset}", f"{len(data)} (truncated file)")
        return data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self):
        self.close()


class SparseFrame(FileFrame):
    """``chunks.b2frame`` (header, offsets index, trailer) plus one file per chunk."""

    contiguous = False

    def __init__(self, directory, writable: bool = False):
        self.directory = Path(directory)
        self._lock_fd = -1
        if writable:
            # The index file is replaced on every change, so the lock lives in a sidecar.
            self._lock_fd = _lock(self.directory / LOCK_NAME)
        super().__init__(self.directory / INDEX_NAME)
        self.writable = writable

    def write_chunk_file(self, chunk_id: int, chunk: bytes) -> None:
        """Write a chunk file whole or not at all (a temporary file, then a rename)."""
        _atomic_write(self.chunk_path(chunk_id), chunk)

    def remove_chunk_file(self, chunk_id: int) -> None:
        self.chunk_path(chunk_id).unlink(missing_ok=True)

    def replace_index(self, frame: bytes) -> None:
        """Swap in a new ``chunks.b2frame`` in one rename; readers see the old or the new."""
        _atomic_write(self.path, frame)
        fd = os.open(self.path, os.O_RDONLY)
        os.close(self._fd)
        self._fd = fd
        self._frame_len = self._size = len(frame)

    def close(self) -> None:
        super().close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def chunk_path(self, chunk_id: int) -> Path:
        if not 0 <= chunk_id <= 0xFFFFFFFF:
            raise FormatError("chunk id", "0..0xFFFFFFFF in a sparse frame", chunk_id)
        return self.directory / f"{chunk_id:08X}.chunk"

    def read_chunk_file_range(self, chunk_id: int, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset`` of a chunk file (for reading single blocks)."""
        path = self.chunk_path(chunk_id)
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read(size)
        except FileNotFoundError:
            raise FormatError(
                "chunk file", f"{path.name} in {self.directory}", "no such file"
            ) from None
        if len(data) != size:
            raise FormatError(
                "chunk file", f"{size} bytes at {offset} of {path.name}", f"{len(data)} bytes"
            )
        return data

    def read_chunk_file(self, chunk_id: int) -> bytes:
        path = self.chunk_path(chunk_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise FormatError(
                "chunk file", f"{path.name} in {self.directory}", "no such file"
            ) from None
        if len(data) < MIN_HEADER_LENGTH:
            raise FormatError("chunk file", "a whole chunk", f"{len(data)} bytes", 0)
        ChunkHeader.from_bytes(data)  # its cbytes must fit the file
        return data


def _lock(path: Path) -> int:
    """Open ``path`` for writing and hold an exclusive lock on it, or refuse at once."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        # One writer at a time, across processes and within one (each open is its own).
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise WriterLockedError(f"{path} is open for writing by another writer") from None
    return fd


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


def local_path(urlpath) -> Path:
    return Path(os.fspath(urlpath).removeprefix("file://")).expanduser()


def open_source(urlpath, writable: bool = False) -> tuple[FrameSource, FrameHeader]:
    """The source and header of the frame at ``urlpath`` (a file, a directory, or bytes)."""
    if isinstance(urlpath, (bytes, bytearray, memoryview)):
        source: FrameSource = MemoryFrame(urlpath, writable=writable)
    else:
        path = local_path(urlpath)
        if path.is_dir():
            source = SparseFrame(path, writable=writable)
        elif path.exists():
            source = FileFrame(path, writable=writable)
        else:
            raise FileNotFoundError(f"no frame at {path}")
    try:
        header_len, frame_len = FrameHeader.peek_len(source.read(0, min(24, source.frame_len)))
        if frame_len > source.frame_len:
            raise FormatError(
                "frame_len", f"at most the {source.frame_len} bytes there are", frame_len, 16
            )
        if isinstance(source, MemoryFrame):
            if writable:
                source.set_frame_len(frame_len)
            else:
                source = MemoryFrame(source._data[:frame_len])
        elif isinstance(source, FileFrame):
            source._frame_len = frame_len  # trailing bytes after a frame are not ours
        header = FrameHeader.from_bytes(source.read(0, min(header_len, frame_len)))
    except BaseException:
        source.close()
        raise
    return source, header


def partial_chunk(read, limit: int | None, blocks) -> np.ndarray | None:
    """The sparse copy of a chunk described by
    :meth:`~b2store.frame.schunk.SChunk.get_chunk_blocks`, or None when the chunk has no block
    starts to go by (special, memcpyed, VL blocks: read it whole)."""
    head = read(0, MIN_HEADER_LENGTH)
    cbytes = int.from_bytes(head[12:16], "little", signed=True)
    if cbytes < MIN_HEADER_LENGTH or (limit is not None and cbytes > limit):
        raise FormatError(
            "chunk cbytes", f"a chunk inside the chunks section (to {limit})", cbytes, 12
        )
    prefix_len = min(cbytes, EXTENDED_HEADER_LENGTH)
    # np.zeros maps fresh zero pages: untouched parts of a large chunk cost nothing.
    buf = np.zeros(cbytes, np.uint8)
    buf[:prefix_len] = np.frombuffer(read(0, prefix_len), np.uint8)
    header = ChunkHeader.from_bytes(buf)
    if header.special or header.memcpyed or header.vl_blocks or not header.nbytes:
        return None
    nblocks = header.nblocks
    starts_at = header.header_size
    starts_end = starts_at + 4 * nblocks
    if starts_end > cbytes:
        return None  # let the whole-chunk decoder report it
    buf[starts_at:starts_end] = np.frombuffer(read(starts_at, 4 * nblocks), np.uint8)
    if header.use_dict and starts_end + 4 <= cbytes:
        dsize = int.from_bytes(read(starts_end, 4), "little", signed=True)
        if 0 < dsize <= cbytes - starts_end - 4:
            buf[starts_end : starts_end + 4 + dsize] = np.frombuffer(
                read(starts_end, 4 + dsize), np.uint8
            )
    bstarts = buf[starts_at:starts_end].view("<i4").astype(np.int64)
    ends = np.append(np.unique(bstarts), cbytes)
    for j in sorted(set(blocks)):
        start = int(bstarts[j])
        if not starts_end <= start < cbytes:
            return None
        end = int(ends[np.searchsorted(ends, start, side="right")])
        buf[start:end] = np.frombuffer(read(start, end - start), np.uint8)
    return buf
