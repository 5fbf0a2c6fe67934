"""The interface every frame layout answers (:class:`Backend`): what
:class:`~b2store.frame.schunk.SChunk` reads and changes frames through.

A layout answers what an SChunk asks of storage, whatever it is: read the frame (or index
file), read a stored chunk or part of one, store a new chunk where no reader looks yet,
publish a new header/index/trailer in one step, discard what the index no longer names.
Writers take a lock for each change (:mod:`b2store.frame.lock`, not for the life of a
handle), so a handle never blocks another one that is merely open; a writer that finds the
frame changed by another writer reloads it before changing it. Layouts pickle as the recipe
to reopen them. This module imports no layout: the layouts (:mod:`~b2store.frame.contiguous`,
:mod:`~b2store.frame.sparse`, :mod:`~b2store.frame.remote_sparse`) import it, and
:mod:`~b2store.frame.factory` above them picks one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

from ..constants import MIN_HEADER_LENGTH
from ..errors import FormatError
from .b2lock import Sidecar
from .header import FrameHeader

__all__ = ["Backend", "INDEX_NAME", "check_span"]

# A sparse frame's index file (or object): its header, offsets index and trailer.
INDEX_NAME = "chunks.b2frame"


def check_span(
    offset: int, size: int, limit: int, field: str, inside: str, at: int | None = None, *,
    left: bool = False,
) -> None:  # fmt: skip
    """Refuse bytes ``offset..offset + size`` that end past ``limit``, the end of what
    ``inside`` holds (an index or a header pointing beyond it): a FormatError naming
    ``field``, and ``at`` (the offset it was read at) where given; ``left``: ``limit`` is what
    is left from ``at`` on."""
    if offset + size > limit:
        found = f"{limit} bytes left" if left else f"{limit} bytes"
        raise FormatError(field, f"bytes {offset}..{offset + size} inside {inside}", found, at)


class Backend:
    """What every frame layout answers (see the module docstring)."""

    contiguous = True
    writable = False
    name = "<frame>"
    # Read by requests over a network: each read a round trip, so reads are made fewer and
    # larger (a whole chunk in one, to the next stored chunk's start).
    remote = False
    # python-blosc2's lock sidecar, for a local frame (frame/b2lock.py); None: no part taken.
    sidecar: Sidecar | None = None

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
            error = FormatError("chunk cbytes", f"a chunk inside its storage ({limit})", cbytes, 12)
            error.of_chunk = True  # (its reader names the chunk: chunk.decoder.in_chunk)
            raise error
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

    def resync(self) -> bool:
        """Under the sidecar: look at storage again, writable or not (no writer of this
        handle has a change under way: it would hold the sidecar); False when this layout
        cannot change under it."""
        return self.refresh()

    @contextlib.contextmanager
    def locked(self):
        """Hold the writer lock for one change; yields True when the frame changed on disk
        since this handle last looked (another writer published: reload first)."""
        yield False  # pragma: no cover - read-only layouts are never locked

    def close(self) -> None:
        pass

    def reopen(self, writable: bool | None = None) -> Backend:  # pragma: no cover - interface
        raise NotImplementedError
