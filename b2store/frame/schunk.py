"""A super-chunk: the chunks of one frame, with its metalayers and vlmeta, read by index.

Chunk i is found through the offsets index (itself a Blosc2 chunk of int64): an offset into
the chunks section of a contiguous frame, a chunk-file id in a sparse frame, or a special
value (zeros, NaN, uninitialized) for which no bytes are stored.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from ..chunk.decoder import decode_chunk
from ..chunk.header import ChunkHeader
from ..constants import Codec, SpecialValue
from ..errors import FormatError
from .header import FrameHeader
from .storage import FrameSource, SparseFrame, open_source
from .trailer import MIN_TRAILER_LEN, TRAILER_TAIL_LEN, read_trailer, trailer_span

__all__ = ["SChunk"]

# A special offset has its top bit set and the special value in the top byte's low bits.
_SPECIAL_FLAG = 1 << 63


def _special_kind(offset: int) -> int:
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

    @classmethod
    def open(cls, urlpath) -> SChunk:
        """Read the frame at ``urlpath``: a file, a sparse-frame directory, or bytes."""
        source, header = open_source(urlpath)
        try:
            return cls(source, header)
        except BaseException:
            source.close()
            raise

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
        if h.nbytes == 0 and h.chunksize <= 0 or h.chunksize == -1:
            return np.zeros(0, np.int64)
        at = h.header_len if not self._source.contiguous else self._chunks_end()
        index = self._source.read_chunk_at(at, self._trailer_start)
        offsets = decode_chunk(index)
        if len(offsets) % 8:
            raise FormatError("offsets index", "a whole number of int64", f"{len(offsets)} bytes", at)
        offsets = offsets.view("<i8").astype(np.int64)
        if h.chunksize > 0:
            nchunks = -(-h.nbytes // h.chunksize)
            if nchunks > len(offsets):
                raise FormatError("offsets index", f"{nchunks} offsets (nbytes {h.nbytes} / "
                                  f"chunksize {h.chunksize})", len(offsets), at)  # fmt: skip
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
    def meta(self) -> Mapping[str, bytes]:
        return dict(self.header.metalayers)

    @property
    def vlmeta(self) -> Mapping[str, object]:
        from .vlmeta_codec import unpack_value

        return {name: unpack_value(bytes(decode_chunk(raw))) for name, raw in self._raw_vlmeta.items()}

    # --- chunks ----------------------------------------------------------------------------

    def _chunk_nbytes(self, i: int) -> int:
        h = self.header
        if h.chunksize <= 0:
            raise FormatError(f"offsets[{i}]", "no special offsets with variable-size chunks",
                              hex(int(self.offsets[i]) & (2**64 - 1)))  # fmt: skip
        last = h.nbytes % h.chunksize
        return last if i == self.nchunks - 1 and last else h.chunksize

    def get_chunk(self, i: int) -> bytes:
        """The stored bytes of chunk ``i`` (a 32-byte special chunk for special offsets)."""
        i = self._index(i)
        offset = int(self.offsets[i])
        if offset < 0:
            kind = _special_kind(offset)
            if kind not in (SpecialValue.ZERO, SpecialValue.NAN, SpecialValue.UNINIT):
                raise FormatError(f"offsets[{i}]", "a special offset for zeros, NaN or uninit",
                                  hex(offset & (2**64 - 1)))  # fmt: skip
            nbytes = self._chunk_nbytes(i)
            ts = self.typesize if self.typesize <= 255 else 1
            return ChunkHeader(5, 1, 0x05, ts, nbytes, nbytes, 32,
                               blosc2_flags=kind << 4).to_bytes()  # fmt: skip
        if isinstance(self._source, SparseFrame):
            return self._source.read_chunk_file(offset)
        start = self.header.header_len + offset
        if not self.header.header_len <= start < self._chunks_end():
            raise FormatError(f"offsets[{i}]", f"an offset in [0, cbytes={self.header.cbytes})",
                              offset)  # fmt: skip
        return self._source.read_chunk_at(start, self._chunks_end())

    def decompress_chunk(self, i: int, out=None) -> np.ndarray:
        """Chunk ``i`` decoded: a 1-d uint8 array (or written into ``out``)."""
        return decode_chunk(self.get_chunk(i), out=out)

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
        return (f"SChunk({kind}, nchunks={self.nchunks}, chunksize={self.chunksize}, "
                f"typesize={self.typesize}, nbytes={self.nbytes}, cbytes={self.cbytes})")
