"""Where a frame's bytes live: one contiguous frame (bytes in memory or a file) or a sparse
frame (a directory holding ``chunks.b2frame`` and one ``%08X.chunk`` file per chunk).

Both answer the same questions (the header, the trailer, the offsets index, the bytes of
chunk i), so that :class:`~b2store.frame.schunk.SChunk` does not care which it reads.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..chunk.header import ChunkHeader
from ..constants import EXTENDED_HEADER_LENGTH, MIN_HEADER_LENGTH
from ..errors import FormatError
from .header import FrameHeader

__all__ = ["FrameSource", "MemoryFrame", "FileFrame", "SparseFrame", "open_source",
           "INDEX_NAME"]  # fmt: skip

INDEX_NAME = "chunks.b2frame"
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
            raise FormatError("chunk cbytes", f"a chunk inside the chunks section (to {limit})",
                              cbytes, offset + 12)  # fmt: skip
        return self.read(offset, cbytes)

    def close(self) -> None:
        pass


class MemoryFrame(FrameSource):
    def __init__(self, data):
        self._data = memoryview(data).cast("B")

    @property
    def frame_len(self) -> int:
        return len(self._data)

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or offset + size > len(self._data):
            raise FormatError("frame", f"bytes {offset}..{offset + size} inside the frame",
                              f"a frame of {len(self._data)} bytes")  # fmt: skip
        return bytes(self._data[offset : offset + size])


class FileFrame(FrameSource):
    """A contiguous frame in a file, read with positional reads (no shared file position)."""

    def __init__(self, path, frame_len: int | None = None):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size
        self._frame_len = frame_len if frame_len is not None else self._size

    @property
    def frame_len(self) -> int:
        return self._frame_len

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or offset + size > self._frame_len:
            raise FormatError("frame", f"bytes {offset}..{offset + size} inside the frame",
                              f"a frame of {self._frame_len} bytes")  # fmt: skip
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

    def __init__(self, directory):
        self.directory = Path(directory)
        super().__init__(self.directory / INDEX_NAME)

    def chunk_path(self, chunk_id: int) -> Path:
        if not 0 <= chunk_id <= 0xFFFFFFFF:
            raise FormatError("chunk id", "0..0xFFFFFFFF in a sparse frame", chunk_id)
        return self.directory / f"{chunk_id:08X}.chunk"

    def read_chunk_file(self, chunk_id: int) -> bytes:
        path = self.chunk_path(chunk_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise FormatError("chunk file", f"{path.name} in {self.directory}", "no such file") from None
        if len(data) < MIN_HEADER_LENGTH:
            raise FormatError("chunk file", "a whole chunk", f"{len(data)} bytes", 0)
        ChunkHeader.from_bytes(data)  # its cbytes must fit the file
        return data


def open_source(urlpath) -> tuple[FrameSource, FrameHeader]:
    """The source and header of the frame at ``urlpath`` (a file, a directory, or bytes)."""
    if isinstance(urlpath, (bytes, bytearray, memoryview)):
        source: FrameSource = MemoryFrame(urlpath)
    else:
        path = Path(os.fspath(urlpath).removeprefix("file://"))
        if path.is_dir():
            source = SparseFrame(path)
        elif path.exists():
            source = FileFrame(path)
        else:
            raise FileNotFoundError(f"no frame at {path}")
    try:
        header_len, frame_len = FrameHeader.peek_len(source.read(0, min(24, source.frame_len)))
        if frame_len > source.frame_len:
            raise FormatError("frame_len", f"at most the {source.frame_len} bytes there are",
                              frame_len, 16)  # fmt: skip
        if isinstance(source, MemoryFrame):
            source = MemoryFrame(source._data[:frame_len])
        elif isinstance(source, FileFrame):
            source._frame_len = frame_len  # trailing bytes after a frame are not ours
        header = FrameHeader.from_bytes(source.read(0, min(header_len, frame_len)))
    except BaseException:
        source.close()
        raise
    return source, header
