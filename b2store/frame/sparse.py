"""The sparse frame layout: a directory holding ``chunks.b2frame`` (header, offsets index,
trailer) and one ``%08X.chunk`` file per chunk. New chunk files are written whole (temporary
file, rename) under ids no index names yet, the index is replaced by one rename, and chunk
files the index no longer names are removed after that."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

from .. import _files
from .._sync import sync_mode, sync_path
from ..constants import MIN_HEADER_LENGTH
from ..errors import FormatError
from .b2lock import Sidecar, sidecar_path
from .backend import INDEX_NAME, Backend, check_span
from .header import FrameHeader
from .lock import LOCK_NAME, LOCK_TIMEOUT, WriteLock
from .sources import ByteSource, FileSource, local_path

__all__ = ["SparseLayout", "SparseFrame", "chunk_file_name", "whole_chunk"]

_CHUNK_FILE = re.compile(r"^[0-9A-F]{8}\.chunk$")


def _digest(data: bytes) -> bytes:
    # A writer tells whether the index file changed under it by this (see ``locked``).
    return hashlib.blake2b(data, digest_size=16).digest()


def _atomic_write(path: Path, data: bytes, sync: bool = True) -> None:
    # (one name in this module for every file a change writes: the crash tests stop there)
    _files.write_atomic(path, data, sync)


def chunk_file_name(chunk_id: int) -> str:
    """The name of chunk ``chunk_id``'s file (or object) in a sparse frame."""
    if not 0 <= chunk_id <= 0xFFFFFFFF:
        raise FormatError("chunk id", "0..0xFFFFFFFF in a sparse frame", chunk_id)
    return f"{chunk_id:08X}.chunk"


def whole_chunk(data: bytes, name: str, field: str = "chunk file") -> bytes:
    """A chunk file's (or object's) bytes checked to hold a whole chunk: exactly its cbytes."""
    if len(data) < MIN_HEADER_LENGTH:
        raise FormatError(field, "a whole chunk", f"{len(data)} bytes", 0)
    cbytes = int.from_bytes(data[12:16], "little", signed=True)
    if not MIN_HEADER_LENGTH <= cbytes <= len(data):
        error = FormatError("chunk cbytes", f"at most the {len(data)} bytes of {name}", cbytes, 12)
        error.of_chunk = True  # (its reader names the chunk: chunk.decoder.in_chunk)
        raise error
    return data[:cbytes]


class SparseLayout(Backend):
    """What both sparse layouts (a directory, :class:`SparseFrame`; an object store's prefix,
    :class:`~b2store.frame.remote_sparse.RemoteSparseFrame`) do alike: the header, offsets
    index and trailer in one index file (``chunks.b2frame``), read from ``_index`` (a
    :class:`~b2store.frame.sources.ByteSource` of ``_frame_len`` bytes) and replaced whole
    by each change (``_replace_index``); each chunk in a file or object of its own."""

    contiguous = False
    _index: ByteSource
    _frame_len: int

    @property
    def frame_len(self) -> int:
        return self._frame_len

    def read(self, offset: int, size: int) -> bytes:
        check_span(offset, size, self._frame_len, "frame", INDEX_NAME)
        return self._index.read(offset, size)

    def index_at(self, header: FrameHeader) -> int:
        return header.header_len

    def publish(self, header, index, trailer, *, stored_bytes, full_header):
        index = index or b""
        frame_len = header.header_len + len(index) + len(trailer)
        # A sparse frame's cbytes is the size of its chunk files (c-blosc2 reads 0 as
        # "no chunks").
        new = header.with_fields(cbytes=stored_bytes, frame_len=frame_len)
        self._replace_index(new.to_bytes() + index + trailer)
        return new, frame_len - len(trailer)

    def rewrite_header(self, data: bytes) -> None:
        rest = self._index.read(len(data), self._frame_len - len(data))
        self._replace_index(data + rest)

    def _replace_index(self, frame: bytes) -> None:  # pragma: no cover - interface
        """Put ``frame`` (header, index, trailer) in place of the index file at once:
        readers see the old one or the new one."""
        raise NotImplementedError


class SparseFrame(SparseLayout):
    """``chunks.b2frame`` (header, offsets index, trailer) and one ``%08X.chunk`` file per
    chunk, in a local directory."""

    def __init__(
        self,
        directory,
        writable: bool = False,
        lock_timeout: float = LOCK_TIMEOUT,
        locking: bool | None = None,
    ):
        self.directory = local_path(directory)
        self._locking = locking
        self.sidecar = Sidecar(
            sidecar_path(self.directory, sparse=True), locking, writable, lock_timeout
        )
        self.name = str(self.directory)
        self.writable = writable
        if writable:  # (no link inside a tree is written through: refused before any byte)
            _files.check_write(self.directory)
        if not (self.directory / INDEX_NAME).is_file():
            raise FormatError(
                INDEX_NAME, f"a sparse frame's index file in {self.directory}", "none"
            )
        self._index = FileSource.opened(self.directory / INDEX_NAME)
        self._frame_len = self._index.size
        self._next_id = 0
        self._lock = None
        self._sync = sync_mode() if writable else "none"
        self._unsynced: set[Path] = set()  # written since the last sync ("close" mode)
        if writable:
            # The lock file is inside the frame: a link there is refused, never followed.
            self._lock = WriteLock(self.directory / LOCK_NAME, lock_timeout, nofollow=True)

    def chunk_path(self, chunk_id: int) -> Path:
        return self.directory / chunk_file_name(chunk_id)

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

    def read_chunk(
        self, entry: int, header: FrameHeader, field: str = "chunk offset", span: int = 0
    ) -> bytes:
        path = self.chunk_path(entry)  # (a file of its own, read whole: no span needed)
        try:
            data = _files.read_regular(path)
        except FileNotFoundError:
            raise FormatError(
                "chunk file", f"{path.name} in {self.directory}", "no such file"
            ) from None
        return whole_chunk(data, path.name)

    @contextlib.contextmanager
    def locked(self):
        if not self.writable:
            raise PermissionError(f"{self.name} is open for reading; open it with mode='a'")
        # (python-blosc2's sidecar after b2store's own lock: see ContiguousFrame.locked)
        with self._lock.hold(), self.sidecar.hold_exclusive() as moved:
            # The index file is replaced by rename on every change: compare the whole file
            # this handle adopted with the one on disk now. (Its fixed header is not enough:
            # a chunk replaced by one of the same size, or a vlmeta value by one of the same
            # length, leaves it unchanged, and a stale writer would then lose that change.)
            fresh = FileSource.opened(self.directory / INDEX_NAME)
            changed = moved or _digest(fresh.read(0, fresh.size)) != self._seen
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
        return self.resync()

    def resync(self) -> bool:
        # The index file was replaced by rename (or rewritten in place by c-blosc2): open it
        # again (the old one closes when no reader holds it any more).
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
        self._write_file(self.chunk_path(new_id), chunk)
        return new_id

    def _write_file(self, path: Path, data: bytes) -> None:
        """Write one file of the frame in one rename. An error names the frame the user
        opened, not the file's hidden temporary (``.00000003.chunk.PID.RANDOM.tmp``) nor a
        chunk file the user never named; the same class and errno, the original chained."""
        try:
            _atomic_write(path, data, sync=self._sync == "commit")
            if self._sync == "close":
                self._unsynced.add(path)
        except OSError as exc:
            named = _files.naming(exc, self.directory, replace=True)
            if named is exc:
                raise
            raise named from exc

    def publish(self, header, index, trailer, *, stored_bytes, full_header):
        published = super().publish(
            header, index, trailer, stored_bytes=stored_bytes, full_header=full_header
        )
        self._next_id = 0
        return published

    def _replace_index(self, frame: bytes) -> None:
        """Swap in a new ``chunks.b2frame`` in one rename; readers see the old or the new."""
        self._write_file(self.directory / INDEX_NAME, frame)
        self._seen = _digest(frame)
        old, self._index = self._index, FileSource.opened(self.directory / INDEX_NAME)
        old.close()
        self._frame_len = len(frame)

    def sweep_orphans(self, offsets) -> None:
        # Only when the last change did not finish (its writer was killed, or it failed):
        # one listing of the directory, under the writer lock, removes its chunk and index
        # temporaries (their pid is gone or is this process's, after a failure: see
        # b2store._files) and the chunk files it stored and never published (no reader
        # names them: ids only grow, see store()).
        if not self._lock.unfinished:
            return
        self._lock.unfinished = False
        entries = os.listdir(self.directory)
        if any(e[:1] == "." and e.endswith(".tmp") for e in entries):
            _files.sweep(self.directory)
        named = set(offsets[offsets >= 0].tolist())
        for entry in entries:
            if _CHUNK_FILE.match(entry) and int(entry[:8], 16) not in named:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.directory / entry)

    def discard(self, entries: Iterable[int], live: Iterable[int] = ()) -> None:
        for entry in entries:
            if entry >= 0:
                self.chunk_path(entry).unlink(missing_ok=True)

    def close(self) -> None:
        self._index.close()
        if self._lock is not None:
            self._lock.close()
        unsynced, self._unsynced = self._unsynced, set()
        for path in sorted(unsynced):  # "close" mode: what this handle wrote, now on disk
            with contextlib.suppress(FileNotFoundError):  # a chunk file dropped since
                sync_path(path)

    def __reduce__(self):
        return SparseFrame, (self.directory, self.writable, LOCK_TIMEOUT, self._locking)

    def reopen(self, writable: bool | None = None) -> Backend:
        writable = self.writable if writable is None else writable
        return SparseFrame(self.directory, writable=writable, locking=self._locking)
