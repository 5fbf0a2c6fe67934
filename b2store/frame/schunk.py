"""A super-chunk: the chunks of one frame, with its metalayers and vlmeta, read by index.

Chunk i is found through the offsets index (itself a Blosc2 chunk of int64): an offset into
the chunks section of a contiguous frame, a chunk-file id in a sparse frame, or a special
value (zeros, NaN, uninitialized) for which no bytes are stored. Where the bytes live is the
backend's business (:mod:`b2store.frame.backends`); this module never asks which kind it has.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import struct
from collections.abc import Iterator, Mapping, MutableMapping

import numpy as np

from ..chunk.decoder import decode_chunk
from ..chunk.encoder import (
    encode_chunk,
    resolve_codec,
    resolve_filters,
    resolve_splitmode,
    special_chunk,
)
from ..chunk.header import ChunkHeader
from ..constants import EXTENDED_HEADER_LENGTH, MIN_HEADER_LENGTH, Codec, Filter, SpecialValue
from ..errors import B2StoreError, FormatError
from . import writer
from .backends import (
    INDEX_NAME,
    Backend,
    ContiguousFrame,
    SparseFrame,
    open_backend,
    read_header,
)
from .header import FrameHeader
from .mappings import MetaView, VLMetaView
from .sources import FileSource, MemorySource, local_path
from .trailer import MIN_TRAILER_LEN, TRAILER_TAIL_LEN, read_trailer, trailer_bytes, trailer_span

__all__ = ["SChunk", "FrameClosedError"]


class FrameClosedError(B2StoreError, ValueError):
    """The frame was closed: open it again to read or change it."""


def _special_kind(offset: int) -> int:
    # A special offset has its top bit set and the special value in the top byte's low bits.
    return (offset >> 56) & 0x7F


class SChunk:
    """The chunks of a Blosc2 frame (contiguous or sparse).

    Use :meth:`open` (or :func:`b2store.open`) to read one. ``meta`` maps the fixed
    metalayers' names to their raw content; ``vlmeta`` maps the variable-length ones to
    their decoded values. Close it with :meth:`close` or a ``with`` block; copies and pickles
    reopen the frame by its path (or carry its bytes when it lives in memory).
    """

    def __init__(self, backend: Backend, header: FrameHeader):
        self._backend = backend
        self._closed = False
        backend.adopt(header)
        self._load(header)

    def _load(self, header: FrameHeader) -> None:
        """Take the frame's state from storage: the header given, the trailer, the index."""
        backend = self._backend
        self.header = header
        frame_len = backend.frame_len
        if frame_len < header.header_len + MIN_TRAILER_LEN:
            raise FormatError("frame_len", "room for the header and a trailer", frame_len, 16)
        tail = backend.read(frame_len - TRAILER_TAIL_LEN, TRAILER_TAIL_LEN)
        trailer_start, trailer_len = trailer_span(tail, frame_len, header.header_len)
        self._trailer_start = trailer_start
        self._raw_vlmeta = read_trailer(memoryview(backend.read(trailer_start, trailer_len)))
        self.offsets = self._read_offsets()
        self._stored_bytes = header.cbytes
        self._cparams = {
            "typesize": header.typesize,
            "codec": self.codec,
            "clevel": header.clevel,
            "filters": header.filters,
            "filters_meta": header.filters_meta,
            "splitmode": header.splitmode,
            "blocksize": header.blocksize,
        }

    @classmethod
    def open(
        cls, urlpath, mode: str = "r", *, offset: int = 0, storage_options: dict | None = None
    ) -> SChunk:
        """Open the frame at ``urlpath``: a file, a sparse-frame directory, an fsspec URL
        (read by byte ranges), the frame's bytes, or a backend. ``mode="r"`` reads; ``"a"``
        allows changes too. ``offset`` opens a frame that starts inside a larger file."""
        if mode not in ("r", "a"):
            raise ValueError(
                f"mode must be 'r' or 'a' here (use SChunk.create for 'w'), not {mode!r}"
            )
        backend, header = open_backend(
            urlpath, writable=mode == "a", offset=offset, storage_options=storage_options
        )
        try:
            return cls(backend, header)
        except BaseException:
            backend.close()
            raise

    @classmethod
    def create(
        cls,
        urlpath=None,
        *,
        contiguous: bool = True,
        typesize: int = 1,
        chunksize: int = -1,
        codec="zstd",
        clevel: int = 5,
        filters=None,
        filters_meta=None,
        splitmode="auto",
        blocksize: int = 0,
        meta: Mapping[str, bytes] | None = None,
    ) -> SChunk:
        """A new empty frame, in memory (``urlpath=None``) or replacing what is at
        ``urlpath``: a contiguous file, or a sparse-frame directory with ``contiguous=False``.

        The compression parameters are stored in the header and used by :meth:`append_data`.
        """
        codec = resolve_codec(codec)
        if filters is None:
            slots, metas = (0, 0, 0, 0, 0, int(Filter.SHUFFLE)), (0,) * 6
        else:
            slots, metas = resolve_filters(filters, filters_meta)
        header, frame = writer.empty_frame(
            contiguous=contiguous or urlpath is None,
            typesize=typesize,
            codec=codec,
            clevel=clevel,
            filters=slots,
            filters_meta=metas,
            splitmode=resolve_splitmode(splitmode),
            blocksize=blocksize,
            chunksize=chunksize,
            metalayers={k: bytes(v) for k, v in (meta or {}).items()},
        )
        if urlpath is None:
            return cls(ContiguousFrame(MemorySource(frame), writable=True), header)
        path = local_path(urlpath)
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        if contiguous:
            path.write_bytes(frame)
            return cls(ContiguousFrame(FileSource(path), writable=True), header)
        path.mkdir(parents=True)
        (path / INDEX_NAME).write_bytes(frame)
        return cls(SparseFrame(path, writable=True), header)

    # --- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Release the frame's files; reading or changing it afterwards raises."""
        self._closed = True
        self._backend.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> SChunk:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise FrameClosedError(f"{self._backend.name}: the frame is closed")

    def __reduce__(self):
        # The backend pickles as the recipe to reopen it; the state is read again there.
        self._check_open()
        return _reopen, (self._backend.reopen(),)

    def __dask_tokenize__(self):
        if isinstance(self._backend, ContiguousFrame) and self._backend.name == "<bytes>":
            return ("b2store.SChunk", hashlib.sha1(self._backend.getvalue()).hexdigest())
        # The fixed header changes with every published change (sizes, frame_len).
        return ("b2store.SChunk", self._backend.name, self.header.to_bytes()[:87].hex())

    @property
    def urlpath(self) -> str:
        """Where the frame lives (a path, a URL, or ``<bytes>`` for a frame in memory)."""
        return self._backend.name

    # --- the index -----------------------------------------------------------------------

    def _chunks_end(self) -> int:
        return self.header.header_len + self.header.cbytes

    def _read_chunk_at(self, offset: int, limit: int) -> bytes:
        """The chunk at frame offset ``offset``, which must end by ``limit``."""
        if offset + MIN_HEADER_LENGTH > limit:
            raise FormatError("chunk offset", f"a chunk header before byte {limit}", offset)
        head = self._backend.read(offset, min(EXTENDED_HEADER_LENGTH, limit - offset))
        cbytes = int.from_bytes(head[12:16], "little", signed=True)
        if not MIN_HEADER_LENGTH <= cbytes <= limit - offset:
            raise FormatError(
                "chunk cbytes",
                f"a chunk inside the chunks section (to {limit})",
                cbytes,
                offset + 12,
            )
        return self._backend.read(offset, cbytes)

    def _read_offsets(self) -> np.ndarray:
        h = self.header
        if h.nbytes == 0 or h.chunksize == -1:  # c-blosc2: no bytes, no chunks
            return np.zeros(0, np.int64)
        at = self._backend.index_at(h)
        index = self._read_chunk_at(at, self._trailer_start)
        offsets = decode_chunk(index)
        if len(offsets) % 8:
            raise FormatError(
                "offsets index", "a whole number of int64", f"{len(offsets)} bytes", at
            )
        offsets = offsets.view("<i8").astype(np.int64)
        if h.chunksize > 0:
            nchunks = -(-h.nbytes // h.chunksize)
            if nchunks > len(offsets):
                raise FormatError(
                    "offsets index",
                    f"{nchunks} offsets (nbytes {h.nbytes} / chunksize {h.chunksize})",
                    len(offsets),
                    at,
                )
            offsets = offsets[:nchunks]
        return offsets

    # --- what the header says ----------------------------------------------------------------

    @property
    def nchunks(self) -> int:
        return len(self.offsets)

    @property
    def chunksize(self) -> int:
        return self.header.chunksize

    @property
    def typesize(self) -> int:
        return self.header.typesize

    @property
    def nbytes(self) -> int:
        return self.header.nbytes

    @property
    def cbytes(self) -> int:
        return self.header.cbytes

    @property
    def blocksize(self) -> int:
        return self.header.blocksize

    @property
    def contiguous(self) -> bool:
        return self._backend.contiguous

    @property
    def codec(self) -> Codec | int:
        try:
            return Codec(self.header.compcode)
        except ValueError:
            return self.header.compcode

    @property
    def clevel(self) -> int:
        return self.header.clevel

    @property
    def filters(self) -> tuple[int, ...]:
        return self.header.filters

    @property
    def filters_meta(self) -> tuple[int, ...]:
        return self.header.filters_meta

    @property
    def meta(self) -> MutableMapping[str, bytes]:
        """The fixed metalayers (raw content); an update must keep the content's size."""
        return MetaView(self)

    @property
    def vlmeta(self) -> MutableMapping[str, object]:
        """The variable-length metalayers, decoded (msgpack only, never unpickled)."""
        return VLMetaView(self)

    # --- chunks ----------------------------------------------------------------------------

    def _chunk_nbytes(self, i: int) -> int:
        h = self.header
        if h.chunksize <= 0:
            raise FormatError(
                f"offsets[{i}]",
                "no special offsets with variable-size chunks",
                hex(int(self.offsets[i]) & (2**64 - 1)),
            )
        last = h.nbytes % h.chunksize
        return last if i == self.nchunks - 1 and last else h.chunksize

    def _special(self, i: int, entry: int) -> bytes:
        """The 32-byte special chunk that a special index entry stands for."""
        kind = _special_kind(entry)
        if kind not in (SpecialValue.ZERO, SpecialValue.NAN, SpecialValue.UNINIT):
            raise FormatError(
                f"offsets[{i}]",
                "a special offset for zeros, NaN or uninit",
                hex(entry & (2**64 - 1)),
            )
        nbytes = self._chunk_nbytes(i)
        if nbytes % self.typesize:
            raise FormatError(
                f"chunk {i} nbytes", f"whole items of typesize {self.typesize}", nbytes
            )
        return special_chunk(SpecialValue(kind), nbytes, self.typesize)

    def get_chunk(self, i: int) -> bytes:
        """The stored bytes of chunk ``i`` (a 32-byte special chunk for special offsets)."""
        self._check_open()
        i = self._index(i)
        header, entry = self.header, int(self.offsets[i])
        if entry < 0:
            return self._special(i, entry)
        return self._backend.read_chunk(entry, header, f"offsets[{i}]")

    def chunk_span(self, i: int) -> tuple[str, int, int] | None:
        """Where chunk ``i``'s bytes are stored: (file path or URL, byte offset, length), or
        None for a special chunk, which stores no bytes (see :meth:`get_chunk`)."""
        self._check_open()
        i = self._index(i)
        entry = int(self.offsets[i])
        if entry < 0:
            self._special(i, entry)  # a bad special entry is reported here too
            return None
        return self._backend.chunk_span(entry, self.header, f"offsets[{i}]")

    def get_chunk_blocks(self, i: int, blocks):
        """Chunk ``i`` with only what decoding ``blocks`` needs read from storage: the header,
        the block starts, the dictionary and those blocks' streams; the rest is zeros (which
        a decoder reads as runs of zeros, never as data of the blocks asked for)."""
        self._check_open()
        i = self._index(i)
        header, entry = self.header, int(self.offsets[i])
        if entry < 0:
            return self._special(i, entry)
        read, limit = self._backend.chunk_reader(entry, header, f"offsets[{i}]")
        partial = _partial_chunk(read, limit, blocks)
        return (
            self._backend.read_chunk(entry, header, f"offsets[{i}]") if partial is None else partial
        )

    def decompress_chunk(self, i: int, out=None) -> np.ndarray:
        """Chunk ``i`` decoded: a 1-d uint8 array (or written into ``out``)."""
        return decode_chunk(self.get_chunk(i), out=out)

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
                self._load(read_header(self._backend))
            yield

    def append_data(self, data) -> int:
        """Compress ``data`` with the frame's parameters and append it as a chunk."""
        return self.append_chunk(encode_chunk(data, **self._cparams))

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
            chunksize = writer.chunksize_after(
                self.chunksize, self.nchunks, self.nbytes, _op, i, nbytes
            )
            entry = self._store(chunk, chunksize)
            offsets = np.insert(self.offsets, i, entry)
            self._publish(offsets, self.nbytes + nbytes, chunksize)
            return self.nchunks

    def extend_chunks(self, chunks) -> int:
        """Append many compressed chunks, published at once; returns the number of chunks."""
        with self._changing():
            offsets, nbytes, chunksize = list(self.offsets), self.nbytes, self.chunksize
            for chunk in chunks:
                chunk, n = _checked(chunk)
                chunksize = writer.chunksize_after(
                    chunksize, len(offsets), nbytes, "append", len(offsets), n
                )
                offsets.append(self._store(chunk, chunksize, pending=offsets))
                nbytes += n
            self._publish(np.array(offsets, np.int64), nbytes, chunksize)
            return self.nchunks

    def update_chunks(self, updates: Mapping[int, bytes]) -> None:
        """Replace several chunks ({index: chunk}), published at once."""
        with self._changing():
            offsets, nbytes, chunksize = self.offsets.copy(), self.nbytes, self.chunksize
            gone = []
            for i, chunk in updates.items():
                i = self._index(i)
                chunk, n = _checked(chunk)
                old_nbytes, old_stored = self._stored_sizes(i)
                nbytes += n - old_nbytes
                chunksize = writer.chunksize_after(
                    chunksize, len(offsets), self.nbytes, "update", i, n
                )
                gone.append(int(offsets[i]))
                self._stored_bytes -= old_stored
                offsets[i] = self._store(chunk, chunksize)
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
        replace: Mapping[int, bytes] | None = None,
    ) -> None:
        """Publish a new chunk order at once: ``entries`` are existing index entries (or
        special offsets), ``replace`` new chunks for some positions, ``metalayers`` same-size
        replacements (b2nd resize uses this)."""
        with self._changing():
            entries = np.asarray(entries, np.int64)
            for i, chunk in (replace or {}).items():
                entries[i] = self._store(_checked(chunk)[0], self.chunksize, pending=entries)
            chunksize = self.chunksize if len(entries) else -1
            old = [int(e) for e in self.offsets]
            self._publish(entries, nbytes, chunksize, metalayers=metalayers)
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
        kind = writer.special_kind_of(chunk)
        if kind and chunksize > 0:
            return writer.special_offset(kind)  # no bytes: the index entry says it all
        self._stored_bytes += len(chunk)
        in_use = np.concatenate([self.offsets, np.asarray(pending, np.int64)])
        return self._backend.store(chunk, self.header, in_use)

    def _forget(self, entries) -> None:
        # Stored chunks the published index no longer names (a sparse frame's files go; a
        # contiguous frame keeps them as orphan bytes, which c-blosc2 allows).
        live = set(int(e) for e in self.offsets)
        self._backend.discard([e for e in entries if e >= 0 and e not in live])

    def _publish(
        self,
        offsets: np.ndarray,
        nbytes: int,
        chunksize: int,
        vlmeta: dict[str, bytes] | None = None,
        index: bool = True,
        metalayers: dict[str, bytes] | None = None,
    ) -> None:
        """Make a change visible in one step (see :mod:`b2store.frame.writer`); new
        metalayers, of the same sizes, go in the same step."""
        vlmeta = self._raw_vlmeta if vlmeta is None else vlmeta
        h = self.header
        if metalayers is not None:
            h = h.with_fields(metalayers=metalayers)
            if len(h.to_bytes()) != self.header.header_len:
                raise ValueError("metalayers can only change in place, keeping their sizes")
        h = writer.published_header(
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
            writer.encode_index(offsets) if index and nbytes else None,
            trailer_bytes(vlmeta),
            stored_bytes=self._stored_bytes,
            full_header=metalayers is not None,
        )
        self.header, self.offsets = new, np.asarray(offsets, np.int64)
        self._raw_vlmeta, self._trailer_start = dict(vlmeta), trailer_at

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
            self.header = new

    def to_cframe(self) -> bytes:
        """The whole frame as one contiguous frame's bytes."""
        self._check_open()
        if self.contiguous:
            return self._backend.read(0, self._backend.frame_len)
        out = SChunk.create(
            None,
            typesize=self.typesize,
            codec=self.codec,
            clevel=self.clevel,
            filters=self.filters,
            filters_meta=self.filters_meta,
            blocksize=self.blocksize,
            meta=self.header.metalayers,
            chunksize=self.chunksize if self.nchunks else -1,
        )
        chunks: list[int] = []
        for i in range(self.nchunks):
            chunks.append(out._store(self.get_chunk(i), self.chunksize, pending=chunks))
        out._publish(np.array(chunks, np.int64), self.nbytes, self.chunksize, self._raw_vlmeta)
        return out._backend.getvalue()

    def _index(self, i: int) -> int:
        n = self.nchunks
        if not -n <= i < n:
            raise IndexError(f"chunk {i} out of range for {n} chunks")
        return i % n

    def __len__(self) -> int:
        return self.nchunks

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(self.nchunks):
            yield self.decompress_chunk(i)

    def __repr__(self) -> str:
        kind = "contiguous" if self.contiguous else "sparse"
        return (
            f"SChunk({kind}, nchunks={self.nchunks}, chunksize={self.chunksize}, "
            f"typesize={self.typesize}, nbytes={self.nbytes}, cbytes={self.cbytes})"
        )


def _reopen(backend: Backend) -> SChunk:
    return SChunk(backend, read_header(backend))


def _partial_chunk(read, limit: int | None, blocks) -> np.ndarray | None:
    """The sparse copy of a chunk that :meth:`SChunk.get_chunk_blocks` describes, or None
    when the chunk has no block starts to go by (special, memcpyed, VL blocks: read it
    whole)."""
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
            piece = read(starts_end, 4 + dsize)
            buf[starts_end : starts_end + 4 + dsize] = np.frombuffer(piece, np.uint8)
    bstarts = buf[starts_at:starts_end].view("<i4").astype(np.int64)
    ends = np.append(np.unique(bstarts), cbytes)
    for j in sorted(set(blocks)):
        start = int(bstarts[j])
        if not starts_end <= start < cbytes:
            return None
        end = int(ends[np.searchsorted(ends, start, side="right")])
        buf[start:end] = np.frombuffer(read(start, end - start), np.uint8)
    return buf


def _checked(chunk) -> tuple[bytes, int]:
    """A chunk's bytes (exactly cbytes of them) and its nbytes, after checking its header."""
    data = bytes(memoryview(chunk).cast("B"))
    header = ChunkHeader.from_bytes(data)
    return data[: header.cbytes], header.nbytes
