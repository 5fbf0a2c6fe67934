"""The chunks ``dump`` and ``verify`` decode, checked before anything is allocated: each one's
decoded size against what its frame says (and the limits), as the frame's readers check it,
so that a small file whose chunk claims a gigabyte is refused, never allocated, and the two
commands call the same chunks bad.

A bare chunk or a super-chunk is dumped as its decoded bytes (:class:`LazyBytes`): only the
chunks a selection lies in are decoded, and of a special chunk (zeros, NaN, a repeated value)
only the bytes asked for are made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from ..chunk.decoder import ChunkDecoder
from ..errors import FormatError
from ..frame.block_reads import check_value_item
from ..limits import DEFAULT_LIMITS, LimitError

__all__ = [
    "LazyBytes",
    "checked_decoder",
    "check_within",
    "expected_nbytes",
    "schunk_bytes",
    "chunk_bytes",
]


def expected_nbytes(header, i: int, nchunks: int) -> int | None:
    """Chunk ``i``'s decoded size as its frame's header says it (all but the last
    ``chunksize``, the last what is left of ``nbytes``); None for chunks of varying size."""
    if header.chunksize <= 0:
        return None
    last = header.nbytes - header.chunksize * (nchunks - 1)
    return header.chunksize if i < nchunks - 1 else last


def checked_decoder(
    chunk, expected: int | None, limit: int, i: int, blockshape=None, typesize: int = 1
) -> ChunkDecoder:
    """Chunk ``i``'s decoder, its header and layout checked as a decode checks them, its
    ``nbytes`` checked against ``expected`` (what the frame says) and ``limit``, and a
    repeated-value chunk's value against the frame's ``typesize`` (as the readers check it);
    nothing is decoded or allocated here. ``blockshape``: a b2nd array's, which c-blosc2's
    plugin codecs and filters need."""
    decoder = ChunkDecoder(chunk, blockshape=blockshape)
    nbytes = decoder.header.nbytes
    if expected is not None and nbytes != expected:
        raise FormatError(f"chunk {i} nbytes", expected, nbytes)
    if nbytes > limit:
        raise LimitError("nbytes", "max_chunk_nbytes", limit, nbytes, 4)
    check_value_item(decoder.header, typesize, i)
    return decoder


def _value_item(decoder: ChunkDecoder) -> int:
    """The bytes a special chunk's value repeats in (a piece of it starts on one)."""
    h = decoder.header
    return max(1, h.cbytes - h.header_size, h.typesize)


def _decoded_part(decoder: ChunkDecoder, lo: int, hi: int) -> np.ndarray:
    """Bytes ``lo:hi`` of a checked chunk: of a special one only those (from the value's
    item they start in), of any other the whole chunk decoded once."""
    if decoder.special:
        item = _value_item(decoder)
        start = lo - lo % item
        piece = np.empty(-(-(hi - start) // item) * item, np.uint8)
        decoder.fill_special(piece)
        return piece[lo - start : hi - start]
    whole = np.empty(decoder.header.nbytes, np.uint8)
    decoder.decode_into(whole)
    return whole[lo:hi]


def chunk_bytes(data: bytes) -> Callable[[int, int], np.ndarray]:
    """``read(lo, hi)``: decoded bytes of the bare chunk ``data``, checked on the first read
    (a chunk that is not special is then decoded once, and kept)."""
    kept: list = []

    def read(lo: int, hi: int) -> np.ndarray:
        if not kept:
            kept.append(checked_decoder(data, None, DEFAULT_LIMITS.max_chunk_nbytes, 0))
        decoder = kept[0]
        if decoder.special:
            return _decoded_part(decoder, lo, hi)
        if len(kept) == 1:
            kept.append(_decoded_part(decoder, 0, decoder.header.nbytes))
        return kept[1][lo:hi]

    return read


def check_within(header, i: int, start: int, nbytes: int) -> None:
    """Chunk ``i`` of a frame of chunks of varying size (``chunksize`` 0), decoding to
    ``nbytes`` from byte ``start``, must end within the frame's ``nbytes``."""
    if start + nbytes > header.nbytes:
        raise FormatError(
            f"chunk {i} nbytes",
            f"at most the {header.nbytes - start} bytes the frame has left of its "
            f"nbytes={header.nbytes}",
            nbytes,
        )


def _spans(schunk, lo: int, hi: int) -> Iterator[tuple[int, int, ChunkDecoder]]:
    """``(start, nbytes, decoder)`` of each chunk of ``schunk`` that bytes ``lo:hi`` lie
    in, each checked as :func:`checked_decoder` checks it; of chunks of varying size, those
    before ``lo`` too (where each starts is the sum of those before it)."""
    header, n = schunk.header, schunk.nchunks
    limit, size = schunk.limits.max_chunk_nbytes, header.chunksize
    first, start = (lo // size, lo - lo % size) if size > 0 else (0, 0)
    for i in range(first, n):
        if start >= hi:
            return
        expected = expected_nbytes(header, i, n)
        decoder = checked_decoder(
            schunk.get_chunk(i), expected, limit, i, schunk.blockshape, header.typesize
        )
        nbytes = decoder.header.nbytes
        if expected is None:
            check_within(header, i, start, nbytes)
        yield start, nbytes, decoder
        start += nbytes


def schunk_bytes(schunk, lo: int, hi: int) -> np.ndarray:
    """Decoded bytes ``lo:hi`` of a super-chunk: only the chunks they lie in are decoded,
    each checked first (:func:`checked_decoder`), of a special chunk only the bytes asked
    for. Memory: the bytes asked for and one chunk decoded, never what a chunk claims."""
    out = np.empty(hi - lo, np.uint8)
    done = lo
    for start, nbytes, decoder in _spans(schunk, lo, hi):
        a, b = max(lo, start), min(hi, start + nbytes)
        if a < b:
            out[a - lo : b - lo] = _decoded_part(decoder, a - start, b - start)
            done = max(done, b)
    if done < hi:  # (the chunks end before the frame's nbytes does)
        raise FormatError("nbytes", f"chunks holding the frame's {schunk.nbytes} bytes", done)
    return out


class LazyBytes:
    """The decoded bytes of a chunk or a super-chunk as a 1-d array of ``dtype`` that reads
    only the bytes an index selects, when indexed (numpy basic indexing)."""

    def __init__(self, nbytes: int, dtype: np.dtype, read: Callable[[int, int], np.ndarray]):
        # (the caller checked that ``nbytes`` is whole items of ``dtype``)
        self.dtype = dtype
        self.shape = (nbytes // dtype.itemsize,)
        self._read = read

    def __getitem__(self, key):
        key = key[0] if isinstance(key, tuple) and len(key) == 1 else key
        if key is Ellipsis:
            key = slice(None)
        n = self.shape[0]
        if isinstance(key, int | np.integer):
            if not -n <= key < n:
                raise IndexError(f"index {key} is out of bounds for size {n}")
            return self[int(key) % n : int(key) % n + 1][0]
        if not isinstance(key, slice):
            raise IndexError(f"only a slice or an integer indexes this data, not {key!r}")
        items = range(*key.indices(n))
        if not items:
            return np.empty(0, self.dtype)
        lo, hi = min(items[0], items[-1]), max(items[0], items[-1]) + 1
        size = self.dtype.itemsize
        data = np.asarray(self._read(lo * size, hi * size)).view(self.dtype)
        return data[items[0] - lo :: items.step][: len(items)]
