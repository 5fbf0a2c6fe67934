"""How a super-chunk changes: append, insert, update, delete and reorder chunks, and update
vlmeta and fixed metalayers. Each change runs under the writer lock, starts from the state on
disk, stores new chunks where no reader looks yet and is published in one step (see
:mod:`b2store.frame.publishing` for why that never leaves a frame unreadable).
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterable, Mapping

import numpy as np

from ..chunk.encoder import encode_chunk
from ..chunk.header import ChunkHeader
from ..constants import MIN_HEADER_LENGTH
from . import publishing, remote
from .state import State, read_header
from .trailer import trailer_bytes

__all__ = ["Changes"]


class Changes:
    """The changing half of :class:`~b2store.frame.schunk.SChunk` (a mixin: it uses the
    reading half's state: ``header``, ``offsets``, ``_backend``, ``_raw_vlmeta``)."""

    # --- changing the frame -------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self._backend.writable

    @contextlib.contextmanager
    def changing(self):
        """Hold the writer lock across a read-modify-write of several calls (array writes
        use it): inside, the state is what is on disk, and no other writer publishes."""
        with self._changing():
            yield self

    @contextlib.contextmanager
    def _changing(self):
        """One change: under the writer lock, from the state on disk (another handle or
        process may have published since this one last looked)."""
        self._check_open()
        if not self.writable:
            raise PermissionError("the frame is open for reading; open it with mode='a'")
        with self._backend.locked() as changed:
            if changed:
                self._load(read_header(self._backend, self.limits))
            # Under the lock no other writer has chunks stored and unpublished: stored chunks
            # the index does not name were left by a killed writer.
            self._backend.sweep_orphans(self.offsets)
            yield

    def append_data(self, data) -> int:
        """Compress ``data`` with the frame's parameters and append it as a chunk."""
        return self.append_chunk(encode_chunk(data, self.params))

    def append_chunk(self, chunk) -> int:
        """Append a compressed chunk; returns the new number of chunks."""
        with self._changing():
            return self.insert_chunk(self.nchunks, chunk, _op="append")

    def insert_chunk(self, i: int, chunk, *, _op: str = "insert") -> int:
        """Insert a compressed chunk before chunk ``i``; returns the new number of chunks."""
        with self._changing():
            if not 0 <= i <= self.nchunks:
                raise IndexError(f"cannot insert at {i} in {self.nchunks} chunks")
            chunk, nbytes = _checked(chunk)
            chunksize = publishing.chunksize_after(
                self.chunksize, self.nchunks, self.nbytes, _op, i, nbytes
            )
            entry = self._store(chunk, chunksize)
            offsets = np.insert(self.offsets, i, entry)
            self._publish(offsets, self.nbytes + nbytes, chunksize)
            return self.nchunks

    def extend_chunks(self, chunks, vlmeta: Mapping[str, bytes] | None = None) -> int:
        """Append many compressed chunks, published at once; returns the number of chunks.
        ``vlmeta``: stored vlmeta values (see :func:`~b2store.frame.mappings.raw_value`)
        set in the same change."""
        with self._changing():
            offsets, nbytes, chunksize = list(self.offsets), self.nbytes, self.chunksize
            for chunk in chunks:
                chunk, n = _checked(chunk)
                chunksize = publishing.chunksize_after(
                    chunksize, len(offsets), nbytes, "append", len(offsets), n
                )
                offsets.append(self._store(chunk, chunksize, pending=offsets))
                nbytes += n
            raw = None if vlmeta is None else {**self._raw_vlmeta, **vlmeta}
            self._publish(np.array(offsets, np.int64), nbytes, chunksize, raw)
            return self.nchunks

    def extend_stored(
        self, stored, stored_bytes: int, vlmeta: Mapping[str, bytes] | None = None
    ) -> int:
        """Append chunks that other processes stored (:meth:`Backend.store` 's work done
        elsewhere, such as by dask workers writing a frame in an object store): ``stored``
        is ``(index entry, nbytes)`` per chunk in order, ``stored_bytes`` the bytes they
        take. Published at once with ``vlmeta`` (stored values); if that fails, the stored
        chunks are freed. Returns the number of chunks."""
        stored = [(int(entry), int(n)) for entry, n in stored]
        with self._changing():
            self._backend.claim([entry for entry, _ in stored])
            offsets, nbytes, chunksize = list(self.offsets), self.nbytes, self.chunksize
            for entry, n in stored:
                chunksize = publishing.chunksize_after(
                    chunksize, len(offsets), nbytes, "append", len(offsets), n
                )
                offsets.append(entry)
                nbytes += n
            self._stored_bytes += int(stored_bytes)
            raw = None if vlmeta is None else {**self._raw_vlmeta, **vlmeta}
            self._publish(np.array(offsets, np.int64), nbytes, chunksize, raw)
            return self.nchunks

    def update_chunks(self, updates: Mapping[int, bytes]) -> None:
        """Replace several chunks ({index: chunk}), published at once."""
        with self._changing():
            offsets, nbytes, chunksize = self.offsets.copy(), self.nbytes, self.chunksize
            items = [(self._index(i), *_checked(chunk)) for i, chunk in updates.items()]
            if self._backend.remote and len(items) > 1:
                # Each read and store a round trip: made side by side, then the index.
                sizes = remote.overlapped(self._stored_sizes, [i for i, _, _ in items])
            else:
                sizes = None
            gone, stores = [], []
            for k, (i, chunk, n) in enumerate(items):
                old_nbytes, old_stored = sizes[k] if sizes else self._stored_sizes(i)
                nbytes += n - old_nbytes
                chunksize = publishing.chunksize_after(
                    chunksize, len(offsets), self.nbytes, "update", i, n
                )
                gone.append(int(offsets[i]))
                self._stored_bytes -= old_stored
                if sizes is None:
                    offsets[i] = self._store(chunk, chunksize)
                else:
                    stores.append((i, chunk, chunksize))
            if stores:
                kept = [(i, publishing.special_kind_of(c) and cs > 0) for i, c, cs in stores]
                stored = self._backend.store_many(
                    [c for (i, c, cs), (_, special) in zip(stores, kept) if not special],
                    self.header,
                    np.concatenate([self.offsets, offsets]),
                )
                it = iter(stored)
                for (i, chunk, cs), (_, special) in zip(stores, kept):
                    offsets[i] = self._store(chunk, cs) if special else next(it)
                    if not special:
                        self._stored_bytes += len(chunk)
            self._publish(offsets, nbytes, chunksize)
            self._forget(gone)

    def _stored_sizes(self, i: int) -> tuple[int, int]:
        """``(nbytes, bytes stored)`` of chunk ``i``, from its header alone."""
        entry = int(self.offsets[i])
        if entry < 0:
            return self._chunk_nbytes(i), 0
        read, _ = self._backend.chunk_reader(entry, self.header)
        nbytes, _, cbytes = struct.unpack_from("<iii", read(0, MIN_HEADER_LENGTH), 4)
        return nbytes, cbytes

    def reindex(
        self,
        entries,
        nbytes: int,
        metalayers: dict[str, bytes] | None = None,
        replace: Mapping[int, bytes] | Iterable[tuple[int, bytes]] | None = None,
        chunksize: int | None = None,
        vlmeta: dict[str, bytes] | None = None,
    ) -> None:
        """Publish a new chunk order at once: ``entries`` are existing index entries (or
        special offsets), ``replace`` new chunks for some positions (a mapping, or pairs
        ``(position, chunk)`` stored one by one as they come: an appender holds one chunk at
        a time), ``metalayers`` same-size replacements (b2nd resize uses this), ``vlmeta``
        new raw vlmeta in the same step. ``chunksize`` is the size of every chunk when the
        caller knows it: a frame that held no chunk has none (-1), and special entries mean
        nothing without one."""
        with self._changing():
            entries = np.array(entries, np.int64)
            if chunksize is None or chunksize <= 0:
                chunksize = self.chunksize
            pairs = replace.items() if isinstance(replace, Mapping) else (replace or ())
            for i, chunk in pairs:
                entries[i] = self._store(_checked(chunk)[0], chunksize, pending=entries)
            chunksize = chunksize if len(entries) else -1
            old = [int(e) for e in self.offsets]
            self._publish(entries, nbytes, chunksize, vlmeta=vlmeta, metalayers=metalayers)
            self._forget(old)

    def update_chunk(self, i: int, chunk) -> int:
        """Replace chunk ``i``; returns the number of chunks."""
        self.update_chunks({i: chunk})
        return self.nchunks

    def delete_chunk(self, i: int) -> int:
        """Remove chunk ``i``; returns the new number of chunks."""
        with self._changing():
            i = self._index(i)
            old_nbytes, old_stored = self._stored_sizes(i)
            old = int(self.offsets[i])
            self._stored_bytes -= old_stored
            offsets = np.delete(self.offsets, i)
            chunksize = self.chunksize if len(offsets) else -1
            self._publish(offsets, self.nbytes - old_nbytes, chunksize)
            self._forget([old])
            return self.nchunks

    def _store(self, chunk: bytes, chunksize: int, pending=()) -> int:
        """Write a chunk where no reader looks yet; returns its index entry."""
        kind = publishing.special_kind_of(chunk)
        if kind and chunksize > 0:
            return publishing.special_offset(kind)  # no bytes: the index entry says it all
        self._stored_bytes += len(chunk)
        in_use = np.concatenate([self.offsets, np.asarray(pending, np.int64)])
        return self._backend.store(chunk, self.header, in_use)

    def _forget(self, entries) -> None:
        # Stored chunks the published index no longer names (a sparse frame's files go; a
        # contiguous frame keeps them as orphan bytes, which c-blosc2 allows).
        live = set(int(e) for e in self.offsets)
        self._backend.discard([e for e in entries if e >= 0 and e not in live], live)

    def _publish(
        self,
        offsets: np.ndarray,
        nbytes: int,
        chunksize: int,
        vlmeta: dict[str, bytes] | None = None,
        index: bool = True,
        metalayers: dict[str, bytes] | None = None,
    ) -> None:
        """Make a change visible in one step (see :mod:`b2store.frame.publishing`); new
        metalayers, of the same sizes, go in the same step."""
        vlmeta = self._raw_vlmeta if vlmeta is None else vlmeta
        h = self.header
        if self.layout_guard is not None:
            self.layout_guard(len(offsets), chunksize, metalayers or h.metalayers)
        if metalayers is not None:
            h = h.with_fields(metalayers=metalayers)
            if len(h.to_bytes()) != self.header.header_len:
                raise ValueError("metalayers can only change in place, keeping their sizes")
        h = publishing.published_header(
            h,
            nbytes=nbytes,
            cbytes=h.cbytes,
            chunksize=chunksize,
            frame_len=h.frame_len,
            has_vlmeta=bool(vlmeta),
        )
        new, trailer_at = self._backend.publish(
            h,
            # A frame with no data has no index: c-blosc2 reads its trailer after the header.
            publishing.encode_index(offsets) if index and nbytes else None,
            trailer_bytes(vlmeta),
            stored_bytes=self._stored_bytes,
            full_header=metalayers is not None,
        )
        offsets = np.asarray(offsets, np.int64)
        offsets.flags.writeable = False  # readers may hold it while the next change is made
        self._state = State(new, offsets, dict(vlmeta), trailer_at)

    def _set_vlmeta(self, vlmeta: dict[str, bytes]) -> None:
        with self._changing():
            # Only the trailer changes; a contiguous frame's index stays where it is.
            self._publish(
                self.offsets, self.nbytes, self.chunksize, vlmeta, index=not self.contiguous
            )

    def _set_meta(self, name: str, content: bytes) -> None:
        with self._changing():
            old = self.header.metalayers.get(name)
            if old is None or len(old) != len(content):
                raise ValueError(
                    f"metalayer {name!r} can only be updated in place, with content of "
                    f"the same size ({None if old is None else len(old)} bytes)"
                )
            metalayers = dict(self.header.metalayers)
            metalayers[name] = bytes(content)
            new = self.header.with_fields(metalayers=metalayers)
            self._backend.rewrite_header(new.to_bytes())
            self._state = self._state._replace(header=new)


def _checked(chunk) -> tuple[bytes, int]:
    """A chunk's bytes (exactly cbytes of them) and its nbytes, after checking its header."""
    # bytes are immutable: kept as they are (a copy of an 8 MB chunk costs as much as a
    # fast codec's pass); anything else is copied once, so a caller's buffer changed later
    # cannot change what is stored.
    data = chunk if type(chunk) is bytes else bytes(memoryview(chunk).cast("B"))
    header = ChunkHeader.from_bytes(data)
    return (data if len(data) == header.cbytes else data[: header.cbytes]), header.nbytes
