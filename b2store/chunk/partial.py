"""Partial chunk reads: which byte ranges of a chunk some of its blocks need, and decoding just
those blocks from the fetched pieces.

A read takes three steps, each a range request where the chunk lives remotely::

    head = read(0, HEADER_BYTES)                  # or the whole chunk if it is shorter
    prefix = head + read(len(head), prefix_length(head))   # header + block starts (+ dict size)
    plan = plan_blocks(prefix, blocks)            # None: read the chunk whole
    pieces = [read(start, stop) for start, stop in plan.ranges]
    decode_blocks(plan, prefix, pieces, out)

DELTA codes every block against block 0, so a plan for a DELTA chunk always includes block 0.
Everything a whole-chunk decode checks is checked for the bytes that are read; a block's
streams must also end where the next stored block starts.
"""

from __future__ import annotations

import functools
import mmap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..constants import EXTENDED_HEADER_LENGTH, MAX_BUFFERSIZE, Filter
from ..errors import FormatError
from . import native
from .decoder import (
    ChunkDecoder,
    as_uint8,
    block_bounds,
    block_starts,
    out_size_error,
    stream_split,
)
from .filters import Pipeline
from .header import ChunkHeader
from .plugins import uses_plugins

__all__ = [
    "HEADER_BYTES",
    "BlockPlan",
    "ChunkLayout",
    "prefix_length",
    "read_layout",
    "plan_blocks",
    "decode_blocks",
    "decode_direct",
    "zeroed",
    "checked_piece",
]

# Read this many bytes of a chunk first (fewer if the chunk is shorter): the longest header.
HEADER_BYTES = EXTENDED_HEADER_LENGTH


# Past this size a zeroed buffer is mapped fresh rather than allocated and cleared.
_MAP_ABOVE = 1 << 20


def zeroed(nbytes: int) -> np.ndarray:
    """``nbytes`` zero bytes whose untouched pages cost nothing: a sparse copy of a large
    chunk writes only its prefix and the blocks read. (``np.zeros`` does not promise that:
    once large buffers have been freed, glibc serves them from its heap and clears them,
    6 MB at a time for one element.)"""
    if nbytes < _MAP_ABOVE:
        return np.zeros(nbytes, np.uint8)
    return np.frombuffer(mmap.mmap(-1, nbytes), np.uint8)


def _header(head, size: int | None = None) -> ChunkHeader:
    """The header in ``head``; ``cbytes`` is checked against ``size`` when it is known."""
    return ChunkHeader.from_bytes(head, available=MAX_BUFFERSIZE + 32 if size is None else size)


def _whole(header: ChunkHeader) -> bool:
    """Chunks with no block starts to go by: read them whole."""
    return bool(header.special or header.memcpyed or header.vl_blocks or not header.nbytes)


def prefix_length(head) -> int:
    """How many bytes from the chunk's start :func:`plan_blocks` needs.

    Parameters
    ----------
    head
        The chunk's first :data:`HEADER_BYTES` bytes (all of it if shorter).

    Returns
    -------
    int
        The header, the block starts, and 4 more (the dictionary's size) when the chunk has a
        dictionary; just the header for a chunk read whole (special, memcpyed, VL blocks).
        Never more than ``cbytes``.
    """
    header = _header(head)
    if _whole(header):
        return min(header.header_size, header.cbytes)
    n = header.header_size + 4 * header.nblocks + (4 if header.use_dict else 0)
    return min(n, header.cbytes)


@dataclass(frozen=True)
class BlockPlan:
    """What to fetch of one chunk to decode some of its blocks.

    Attributes
    ----------
    header
        The chunk header.
    blocks
        The blocks :func:`decode_blocks` writes, ascending (block 0 added for DELTA).
    ranges
        ``(start, stop)`` byte ranges of the chunk to fetch after the prefix, ascending and
        merged where they touch: the dictionary (if any), then the blocks' bytes.
    prefix_length
        The bytes from the chunk's start the plan was made from.
    """

    header: ChunkHeader
    blocks: tuple[int, ...]
    ranges: tuple[tuple[int, int], ...]
    prefix_length: int

    @property
    def nbytes(self) -> int:
        """Size of the decoded chunk (the ``out`` of :func:`decode_blocks`)."""
        return self.header.nbytes

    @property
    def fetch_size(self) -> int:
        """Bytes the ranges add up to."""
        return sum(stop - start for start, stop in self.ranges)

    def block_span(self, j: int) -> tuple[int, int]:
        """Where block ``j`` lands in the decoded chunk: ``(offset, size)``."""
        bs = self.header.effective_blocksize
        return j * bs, min(bs, self.header.nbytes - j * bs)


@dataclass(frozen=True, eq=False)
class ChunkLayout:
    """Where a chunk's blocks lie, from its prefix, parsed and checked once: a reader that
    keeps it plans any number of partial reads of the chunk without reading or parsing the
    prefix again.

    Attributes
    ----------
    header
        The chunk header.
    bstarts, ends
        Where each block's bytes start and end in the chunk (int64 arrays).
    dict_range
        ``(start, stop)`` of the dictionary's bytes, or None.
    prefix_length
        The bytes from the chunk's start the layout was read from.
    prefix
        Those bytes (what a partial read of the chunk starts from).
    """

    header: ChunkHeader
    bstarts: np.ndarray
    ends: np.ndarray
    dict_range: tuple[int, int] | None
    prefix_length: int
    prefix: bytes

    @cached_property
    def pipeline(self) -> Pipeline:
        return Pipeline.for_header(self.header)

    @cached_property
    def has_delta(self) -> bool:
        # From the header alone: a plugin filter's pipeline needs the b2nd block shape.
        return Filter.DELTA in self.header.pipeline

    @cached_property
    def direct_split(self) -> bool | None:
        """Whether the blocks' streams are split, for :func:`decode_direct`; None when the C
        loop cannot take the chunk from its header (a dictionary, a plugin, a split only the
        bytes tell). Kept: a small read asked it of the header each time (2 of its ~120
        Python calls were these, 9 more the plugin check's)."""
        if self.dict_range is not None or uses_plugins(self.header):
            return None
        return stream_split(self.header)

    def wanted(self, blocks: Iterable[int]) -> list[int]:
        """``blocks`` sorted, without repeats, block 0 first where DELTA needs it."""
        nblocks = len(self.bstarts)
        wanted = sorted({int(j) for j in blocks})
        if wanted and not 0 <= wanted[0] <= wanted[-1] < nblocks:
            raise IndexError(f"block {wanted[0] if wanted[0] < 0 else wanted[-1]} of {nblocks}")
        if wanted and wanted[0] != 0 and self.has_delta:
            wanted.insert(0, 0)
        return wanted

    def groups(self, wanted: Sequence[int], gap: int = 0) -> list[tuple[int, int, list[int]]]:
        """The byte ranges ``wanted`` blocks need, ascending and merged where they touch, or
        are at most ``gap`` bytes apart: ``(start, stop, blocks stored there)``."""
        groups: list[tuple[int, int, list[int]]] = []
        spans = sorted((int(self.bstarts[j]), int(self.ends[j]), j) for j in wanted)
        for start, stop, j in spans:
            if groups and start <= groups[-1][1] + gap:
                lo, hi, members = groups[-1]
                groups[-1] = (lo, max(stop, hi), members + [j])
            else:
                groups.append((start, stop, [j]))
        return groups

    def plan(self, blocks: Iterable[int]) -> BlockPlan:
        """The :class:`BlockPlan` for ``blocks`` (IndexError for a block outside the chunk)."""
        wanted = self.wanted(blocks)
        ranges = [] if self.dict_range is None else [self.dict_range]
        ranges += [(start, stop) for start, stop, _ in self.groups(wanted)]
        return BlockPlan(self.header, tuple(wanted), tuple(ranges), self.prefix_length)


def read_layout(prefix, *, size: int | None = None) -> ChunkLayout | None:
    """The :class:`ChunkLayout` of the chunk whose first :func:`prefix_length` bytes (or more)
    are ``prefix``; None when the chunk has no block starts to go by (special, memcpyed, VL
    blocks or empty): read it whole. ``size``: the chunk's stored length, when known (a
    ``cbytes`` beyond it is a FormatError)."""
    src = as_uint8(prefix, name="prefix")
    header = _header(src, size)
    if _whole(header):
        return None
    needed = prefix_length(src)
    if len(src) < needed:
        raise ValueError(f"a prefix of {needed} bytes is needed, got {len(src)}")
    # Layouts are immutable: a chunk opened again (another open of its file, a zarr chunk
    # read twice) reuses one instead of parsing and checking its block starts again. Only
    # small ones are kept, so that the kept ones stay small whatever the chunks.
    if needed > _KEPT_PREFIX_MAX:
        return _layout_of.__wrapped__(src[:needed].tobytes(), size)
    return _layout_of(src[:needed].tobytes(), size)


# The longest prefix (header and block starts: 4 bytes a block) whose layout is kept: about
# 1,000 blocks, so that 256 kept layouts (with their int64 starts and ends) stay under 6 MB.
_KEPT_PREFIX_MAX = 1 << 12


@functools.lru_cache(maxsize=256)
def _layout_of(prefix: bytes, size: int | None) -> ChunkLayout:
    src = np.frombuffer(prefix, np.uint8)
    header = _header(src, size)
    needed = len(prefix)
    bstarts, dict_range = block_starts(src, header)
    ends = block_bounds(bstarts, header.cbytes)
    bstarts.flags.writeable = ends.flags.writeable = False  # shared by every reader
    return ChunkLayout(header, bstarts, ends, dict_range, needed, prefix)


def plan_blocks(prefix, blocks: Iterable[int], *, size: int | None = None) -> BlockPlan | None:
    """The byte ranges of a chunk that decoding ``blocks`` needs.

    Parameters
    ----------
    prefix
        The chunk's first :func:`prefix_length` bytes (more is fine).
    blocks
        Block indices (any order, repeats allowed).
    size
        The stored length of the chunk, if known: a ``cbytes`` beyond it is a FormatError.

    Returns
    -------
    BlockPlan or None
        None when the chunk has no block starts to go by (special, memcpyed, VL blocks or
        empty): read it whole and decode it with :func:`b2store.decode_chunk`.

    Raises
    ------
    FormatError
        The header, block starts or dictionary size break the format.
    IndexError
        A block index outside the chunk.
    """
    layout = read_layout(prefix, size=size)
    return None if layout is None else layout.plan(blocks)


def checked_piece(piece, start: int, stop: int) -> np.ndarray:
    """The bytes read for chunk range ``start..stop``, exactly that long (FormatError when
    the read came back short: a truncated chunk)."""
    piece = as_uint8(piece, name="piece")
    if len(piece) < stop - start:
        raise FormatError(
            f"chunk bytes {start}..{stop}",
            f"{stop - start} bytes",
            f"{len(piece)} bytes (truncated chunk?)",
            start,
        )
    return piece[: stop - start]


def decode_blocks(plan: BlockPlan, prefix, pieces: Sequence, out, blockshape=None) -> np.ndarray:
    """Decode the blocks of ``plan`` from the chunk's prefix and its fetched ``pieces``.

    Parameters
    ----------
    plan
        From :func:`plan_blocks` on the same prefix.
    prefix
        The chunk's first ``plan.prefix_length`` bytes (or more).
    pieces
        The bytes of ``plan.ranges``, one buffer per range, in order.
    out
        A writable contiguous buffer of ``plan.nbytes`` bytes, laid out as the decoded
        chunk; only the spans of ``plan.blocks`` are written.
    blockshape
        The b2nd array's block shape, which c-blosc2's plugin codecs and filters need.

    Returns
    -------
    numpy.ndarray
        ``out`` as a flat uint8 view.

    Raises
    ------
    FormatError
        A piece is shorter than its range (a truncated chunk), or the blocks' streams break
        the format.
    """
    dest = as_uint8(out, writable=True, name="out")
    if len(dest) != plan.nbytes:
        raise out_size_error(len(dest), plan.nbytes)
    if len(pieces) != len(plan.ranges):
        raise ValueError(f"{len(pieces)} pieces for {len(plan.ranges)} ranges")
    src = as_uint8(prefix, name="prefix")
    if len(src) < plan.prefix_length:
        raise ValueError(f"a prefix of {plan.prefix_length} bytes is needed, got {len(src)}")
    buf = zeroed(plan.header.cbytes)
    n = min(len(src), plan.header.cbytes)
    buf[:n] = src[:n]
    for (start, stop), piece in zip(plan.ranges, pieces):
        buf[start:stop] = checked_piece(piece, start, stop)
    if not plan.blocks:
        return dest
    decoder = ChunkDecoder(buf, blocks=plan.blocks, blockshape=blockshape)
    first = None
    if decoder.pipeline.has_delta:
        offset, size = plan.block_span(0)
        first = dest[offset : offset + size]
        decoder.decode_block(0, first)
    for j in plan.blocks:
        if j or first is None:
            offset, size = plan.block_span(j)
            decoder.decode_block(j, dest[offset : offset + size], first)
    return dest


# What one more range costs (a read, a walk and a decode from Python: about 25 us) buys
# about this many bytes of copying from the page cache.
_DIRECT_GAP = 128 << 10
# Where a range costs only its read (SChunk.chunk_part: the walk and decode are one C call
# for all of them), blocks this close are still read as one.
PART_GAP = 8 << 10


class _Piece:
    """One range of a chunk's bytes as the C block loop reads a chunk (the attributes
    :func:`native.walk` and :func:`native.decode` use), block starts counted from the
    range's first byte."""

    __slots__ = (
        "header",
        "src",
        "bstarts",
        "dictionary",
        "pipeline",
        "split",
        "stream_table",
        "stream_format",
    )

    def __init__(self, layout: ChunkLayout, src: np.ndarray, start: int):
        self.header, self.src, self.pipeline = layout.header, src, layout.pipeline
        self.bstarts = layout.bstarts - start
        self.dictionary = None


def decode_direct(
    layout: ChunkLayout, read, blocks: Iterable[int], out, blockshape=None
) -> list[int] | None:
    """Decode ``blocks`` of a chunk into ``out`` with the C block loop, straight from one
    ``read(start, size)`` per run of adjacent blocks: no buffer of the chunk's size, no
    second look at its prefix.

    Returns the blocks written (block 0 too for DELTA), or None when the C loop cannot take
    them (no C entry point for the codec, a dictionary, a layout only the bytes can tell, a
    stream it refuses): then :func:`plan_blocks` and :func:`decode_blocks` do, and name what
    is wrong. ``out`` is laid out as the decoded chunk (``nbytes`` long).
    """
    header = layout.header
    split = layout.direct_split
    if split is None or not native.enabled():
        return None
    dest = as_uint8(out, writable=True, name="out")
    if len(dest) != header.nbytes:
        raise out_size_error(len(dest), header.nbytes)
    wanted = layout.wanted(blocks)
    # Blocks a little apart (a box inside an n-d chunk: rows of blocks) are read as one
    # range: reading the bytes between costs less than another read, walk and decode.
    groups = layout.groups(wanted, _DIRECT_GAP)
    if layout.has_delta and wanted:
        # Block 0's run first: DELTA codes every other block against it.
        groups.sort(key=lambda g: 0 not in g[2])
    first = None
    for start, stop, members in groups:
        piece = _Piece(layout, checked_piece(read(start, stop - start), start, stop), start)
        if not native.walk(piece, split, members, layout.ends - start):
            return None
        if layout.has_delta and first is None:
            if not native.decode(piece, [0], dest, 0):
                return None
            first = dest[: min(header.effective_blocksize, header.nbytes)]
            members = [j for j in members if j]
        if members and not native.decode(piece, members, dest, 0, first):
            return None
    return wanted
