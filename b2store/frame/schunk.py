"""A super-chunk: the chunks of one frame, with its metalayers and vlmeta, read by index.

Chunk i is found through the offsets index (itself a Blosc2 chunk of int64): an offset into
the chunks section of a contiguous frame, a chunk-file id in a sparse frame, or a special
value (zeros, NaN, uninitialized) for which no bytes are stored.
"""

from __future__ import annotations

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
from ..constants import MIN_HEADER_LENGTH, Codec, Filter, SpecialValue
from ..errors import FormatError
from . import writer
from .header import FrameHeader
from .mappings import MetaView, VLMetaView
from .storage import (
    FileFrame,
    FrameSource,
    MemoryFrame,
    SparseFrame,
    local_path,
    open_source,
    partial_chunk,
)
from .trailer import MIN_TRAILER_LEN, TRAILER_TAIL_LEN, read_trailer, trailer_bytes, trailer_span

__all__ = ["SChunk"]


def _special_kind(offset: int) -> int:
    # A special offset has its top bit set and the special value in the top byte's low bits.
    return (offset >> 56) & 0x7F


class SChunk:
    """The chunks of a Blosc2 frame (contiguous or sparse).

    Use :meth:`open` (or :func:`b2store.open`) to read one. ``meta`` maps the fixed
    metalayers' names to their raw content; ``vlmeta`` maps the variable-length ones to
    their decoded values.
    """

    def __init__(self, source: FrameSource, header: FrameHeader):
        self._source = source
        self.header = header
        frame_len = source.frame_len
        if frame_len < header.header_len + MIN_TRAILER_LEN:
            raise FormatError("frame_len", "room for the header and a trailer", frame_len, 16)
        tail = source.read(frame_len - TRAILER_TAIL_LEN, TRAILER_TAIL_LEN)
        trailer_start, trailer_len = trailer_span(tail, frame_len, header.header_len)
        self._trailer = source.read(trailer_start, trailer_len)
        self._trailer_start = trailer_start
        self._raw_vlmeta = read_trailer(memoryview(self._trailer))
        self.offsets = self._read_offsets()
        # Where the next invisible write goes (contiguous frames: past everything).
        self._end = frame_len
        self._stored_bytes = header.cbytes
        self._next_id = 0
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
    def open(cls, urlpath, mode: str = "r") -> SChunk:
        """Open the frame at ``urlpath`` (a file, a sparse-frame directory, or bytes):
        ``mode="r"`` to read, ``"a"`` to change it too (one writer at a time)."""
        if mode not in ("r", "a"):
            raise ValueError(
                f"mode must be 'r' or 'a' here (use SChunk.create for 'w'), not {mode!r}"
            )
        source, header = open_source(urlpath, writable=mode == "a")
        try:
            return cls(source, header)
        except BaseException:
            source.close()
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
            return cls(MemoryFrame(frame, writable=True), header)
        path = local_path(urlpath)
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        if contiguous:
            path.write_bytes(frame)
            return cls(FileFrame(path, writable=True), header)
        path.mkdir(parents=True)
        (path / "chunks.b2frame").write_bytes(frame)
        return cls(SparseFrame(path, writable=True), header)

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> SChunk:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- the index -----------------------------------------------------------------------

    def _chunks_end(self) -> int:
        return self.header.header_len + self.header.cbytes

    def _read_offsets(self) -> np.ndarray:
        h = self.header
        if h.nbytes == 0 or h.chunksize == -1:  # c-blosc2: no bytes, no chunks
            return np.zeros(0, np.int64)
        at = h.header_len if not self._source.contiguous else self._chunks_end()
        index = self._source.read_chunk_at(at, self._trailer_start)
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
        return self._source.contiguous

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

    def get_chunk(self, i: int) -> bytes:
        """The stored bytes of chunk ``i`` (a 32-byte special chunk for special offsets)."""
        i = self._index(i)
        offset = int(self.offsets[i])
        if offset < 0:
            kind = _special_kind(offset)
            if kind not in (SpecialValue.ZERO, SpecialValue.NAN, SpecialValue.UNINIT):
                raise FormatError(
                    f"offsets[{i}]",
                    "a special offset for zeros, NaN or uninit",
                    hex(offset & (2**64 - 1)),
                )
            nbytes = self._chunk_nbytes(i)
            if nbytes % self.typesize:
                raise FormatError(
                    f"chunk {i} nbytes", f"whole items of typesize {self.typesize}", nbytes
                )
            return special_chunk(SpecialValue(kind), nbytes, self.typesize)
        if isinstance(self._source, SparseFrame):
            return self._source.read_chunk_file(offset)
        start = self.header.header_len + offset
        if not self.header.header_len <= start < self._chunks_end():
            raise FormatError(
                f"offsets[{i}]", f"an offset in [0, cbytes={self.header.cbytes})", offset
            )
        return self._source.read_chunk_at(start, self._chunks_end())

    def get_chunk_blocks(self, i: int, blocks):
        """Chunk ``i`` with only what decoding ``blocks`` needs read from storage: the header,
        the block starts, the dictionary and those blocks' streams; the rest is zeros (which
        a decoder reads as runs of zeros, never as data of the blocks asked for)."""
        i = self._index(i)
        entry = int(self.offsets[i])
        if entry < 0:
            return self.get_chunk(i)
        if isinstance(self._source, SparseFrame):

            def read(offset: int, size: int) -> bytes:
                return self._source.read_chunk_file_range(entry, offset, size)

            limit = None
        else:
            base = self.header.header_len + entry
            if not self.header.header_len <= base < self._chunks_end():
                raise FormatError(f"offsets[{i}]", "an offset inside the chunks section", entry)
            limit = self._chunks_end() - base

            def read(offset: int, size: int) -> bytes:
                return self._source.read(base + offset, size)

        partial = partial_chunk(read, limit, blocks)
        return self.get_chunk(i) if partial is None else partial

    def decompress_chunk(self, i: int, out=None) -> np.ndarray:
        """Chunk ``i`` decoded: a 1-d uint8 array (or written into ``out``)."""
        return decode_chunk(self.get_chunk(i), out=out)

    # --- changing the frame -------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return getattr(self._source, "writable", False)

    def _check_writable(self) -> None:
        if not self.writable:
            raise PermissionError("the frame is open for reading; open it with mode='a'")

    def append_data(self, data) -> int:
        """Compress ``data`` with the frame's parameters and append it as a chunk."""
        return self.append_chunk(encode_chunk(data, **self._cparams))

    def append_chunk(self, chunk) -> int:
        """Append a compressed chunk; returns the new number of chunks."""
        return self.insert_chunk(self.nchunks, chunk, _op="append")

    def insert_chunk(self, i: int, chunk, *, _op: str = "insert") -> int:
        """Insert a compressed chunk before chunk ``i``; returns the new number of chunks."""
        self._check_writable()
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
        self._check_writable()
        offsets, nbytes, chunksize = list(self.offsets), self.nbytes, self.chunksize
        for chunk in chunks:
            chunk, n = _checked(chunk)
            chunksize = writer.chunksize_after(
                chunksize, len(offsets), nbytes, "append", len(offsets), n
            )
            offsets.append(self._store(chunk, chunksize))
            nbytes += n
        self._publish(np.array(offsets, np.int64), nbytes, chunksize)
        return self.nchunks

    def update_chunks(self, updates: Mapping[int, bytes]) -> None:
        """Replace several chunks ({index: chunk}), published at once."""
        self._check_writable()
        offsets, nbytes, chunksize, gone = self.offsets.copy(), self.nbytes, self.chunksize, []
        for i, chunk in updates.items():
            i = self._index(i)
            chunk, n = _checked(chunk)
            old_nbytes, old_stored = self._stored_sizes(i)
            nbytes += n - old_nbytes
            chunksize = writer.chunksize_after(chunksize, len(offsets), self.nbytes, "update", i, n)
            gone.append(int(offsets[i]))
            self._stored_bytes -= old_stored
            offsets[i] = self._store(chunk, chunksize)
        self._publish(offsets, nbytes, chunksize)
        for entry in gone:
            self._forget(entry)

    def _stored_sizes(self, i: int) -> tuple[int, int]:
        """``(nbytes, bytes stored)`` of chunk ``i``, from its header alone."""
        entry = int(self.offsets[i])
        if entry < 0:
            return self._chunk_nbytes(i), 0
        if isinstance(self._source, SparseFrame):
            head = self._source.read_chunk_file_range(entry, 0, MIN_HEADER_LENGTH)
        else:
            head = self._source.read(self.header.header_len + entry, MIN_HEADER_LENGTH)
        nbytes, _, cbytes = struct.unpack_from("<iii", head, 4)
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
        self._check_writable()
        entries = np.asarray(entries, np.int64)
        for i, chunk in (replace or {}).items():
            entries[i] = self._store(_checked(chunk)[0], self.chunksize)
        gone = set(int(e) for e in self.offsets if e >= 0) - set(int(e) for e in entries if e >= 0)
        chunksize = self.chunksize if len(entries) else -1
        self._publish(entries, nbytes, chunksize, metalayers=metalayers)
        for entry in gone:
            self._forget(entry)

    def update_chunk(self, i: int, chunk) -> int:
        """Replace chunk ``i``; returns the number of chunks."""
        self.update_chunks({i: chunk})
        return self.nchunks

    def delete_chunk(self, i: int) -> int:
        """Remove chunk ``i``; returns the new number of chunks."""
        self._check_writable()
        i = self._index(i)
        old_nbytes, old_stored = self._stored_sizes(i)
        old = int(self.offsets[i])
        self._stored_bytes -= old_stored
        offsets = np.delete(self.offsets, i)
        chunksize = self.chunksize if len(offsets) else -1
        self._publish(offsets, self.nbytes - old_nbytes, chunksize)
        self._forget(old)
        return self.nchunks

    def _store(self, chunk: bytes, chunksize: int) -> int:
        """Write a chunk where no reader looks yet; returns its index entry."""
        kind = writer.special_kind_of(chunk)
        if kind and chunksize > 0:
            return writer.special_offset(kind)  # no bytes: the index entry says it all
        if isinstance(self._source, SparseFrame):
            ids = self.offsets[self.offsets >= 0]
            # Past every id in use, and every id handed out since (a batch not yet published).
            new_id = max(int(ids.max()) + 1 if len(ids) else 0, self._next_id)
            self._next_id = new_id + 1
            self._source.write_chunk_file(new_id, chunk)
            self._stored_bytes += len(chunk)
            return new_id
        at = self._end
        self._source.write(at, chunk)
        self._end = at + len(chunk)
        return at - self.header.header_len

    def _forget(self, entry: int) -> None:
        # A sparse frame's replaced or deleted chunk file goes once the index no longer has it.
        if isinstance(self._source, SparseFrame) and entry >= 0 and entry not in self.offsets:
            self._source.remove_chunk_file(entry)

    def _publish(
        self,
        offsets: np.ndarray,
        nbytes: int,
        chunksize: int,
        vlmeta: dict[str, bytes] | None = None,
        index: bool = True,
        metalayers: dict[str, bytes] | None = None,
    ) -> None:
        """Make a change visible in one write (see :mod:`b2store.frame.writer`); new
        metalayers, of the same sizes, go in the same write."""
        vlmeta = self._raw_vlmeta if vlmeta is None else vlmeta
        h = self.header
        if metalayers is not None:
            h = h.with_fields(metalayers=metalayers)
            if len(h.to_bytes()) != self.header.header_len:
                raise ValueError("metalayers can only change in place, keeping their sizes")
        trailer = trailer_bytes(vlmeta)
        index_bytes = writer.encode_index(offsets) if index else b""
        if isinstance(self._source, SparseFrame):
            frame_len = h.header_len + len(index_bytes) + len(trailer)
            # A sparse frame's cbytes is the size of its chunk files (c-blosc2 reads 0 as
            # "no chunks").
            new = writer.published_header(
                h,
                nbytes=nbytes,
                cbytes=self._stored_bytes,
                chunksize=chunksize,
                frame_len=frame_len,
                has_vlmeta=bool(vlmeta),
            )
            self._source.replace_index(new.to_bytes() + index_bytes + trailer)
            trailer_at = frame_len - len(trailer)
        else:
            at = self._end
            cbytes = (at if index else h.header_len + h.cbytes) - h.header_len
            self._source.write(at, index_bytes + trailer)
            trailer_at = at + len(index_bytes)
            frame_len = trailer_at + len(trailer)
            new = writer.published_header(
                h,
                nbytes=nbytes,
                cbytes=cbytes,
                chunksize=chunksize,
                frame_len=frame_len,
                has_vlmeta=bool(vlmeta),
            )
            commit = new.to_bytes() if metalayers is not None else writer.fixed_header_bytes(new)
            self._source.write(0, commit)  # the commit point
            self._source.set_frame_len(frame_len)
            self._end = frame_len
        self.header, self.offsets = new, np.asarray(offsets, np.int64)
        self._raw_vlmeta, self._trailer_start = dict(vlmeta), trailer_at

    def _set_vlmeta(self, vlmeta: dict[str, bytes]) -> None:
        self._check_writable()
        # Only the trailer changes; the index stays where it is.
        self._publish(
            self.offsets,
            self.nbytes,
            self.chunksize,
            vlmeta,
            index=isinstance(self._source, SparseFrame),
        )

    def _set_meta(self, name: str, content: bytes) -> None:
        self._check_writable()
        old = self.header.metalayers.get(name)
        if old is None or len(old) != len(content):
            raise ValueError(
                f"metalayer {name!r} can only be updated in place, with content of "
                f"the same size ({None if old is None else len(old)} bytes)"
            )
        metalayers = dict(self.header.metalayers)
        metalayers[name] = bytes(content)
        new = self.header.with_fields(metalayers=metalayers)
        data = new.to_bytes()
        if isinstance(self._source, SparseFrame):
            index_and_trailer = self._source.read(
                self.header.header_len, self._source.frame_len - self.header.header_len
            )
            self._source.replace_index(data + index_and_trailer)
        else:
            self._source.write(0, data)  # same length: one write of the whole header
        self.header = new

    def to_cframe(self) -> bytes:
        """The whole frame as one contiguous frame's bytes."""
        if self.contiguous:
            return self._source.read(0, self._source.frame_len)
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
        chunks = [out._store(self.get_chunk(i), self.chunksize) for i in range(self.nchunks)]
        out._publish(np.array(chunks, np.int64), self.nbytes, self.chunksize, self._raw_vlmeta)
        return out._source.getvalue()

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


def _checked(chunk) -> tuple[bytes, int]:
    """A chunk's bytes (exactly cbytes of them) and its nbytes, after checking its header."""
    data = bytes(memoryview(chunk).cast("B"))
    header = ChunkHeader.from_bytes(data)
    return data[: header.cbytes], header.nbytes
