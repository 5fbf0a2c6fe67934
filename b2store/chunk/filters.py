"""The filter pipeline of a chunk: which filters run, with which element sizes, in what order.

The byte loops are in :mod:`b2store._shuffle`; this module applies the format's rules around
them (element sizes from ``filters_meta``, the Blosc1 leftover rules, the DELTA reference
block) and checks every size before a kernel sees it.
"""

from __future__ import annotations

import numpy as np

from .. import _shuffle
from ..constants import Filter
from ..errors import FormatError, UnsupportedError
from .header import LAST_BLOSC1_VERSION, ChunkHeader

__all__ = ["Pipeline", "delta_word_width"]

# Filters with nothing to undo on decompression (lossy truncations).
_NOT_UNDONE = frozenset({Filter.NOFILTER, Filter.TRUNC_PREC, Filter.INT_TRUNC})
_DECODABLE = frozenset(
    {Filter.SHUFFLE, Filter.BITSHUFFLE, Filter.DELTA, Filter.BYTEDELTA, Filter.BYTEDELTA_BUGGY}
)
# Ids below this are reserved for c-blosc2's own filters; an unknown one there is corruption,
# while a higher one is a registered or user plugin this package does not have.
_FIRST_PLUGIN_ID = 32


def delta_word_width(typesize: int) -> int:
    """The word width DELTA XORs in: the typesize if 1, 2, 4 or 8, else 8 or 1."""
    if typesize in (1, 2, 4, 8):
        return typesize
    return 8 if typesize % 8 == 0 else 1


class Pipeline:
    """The filters to undo for one chunk, last slot first, ready to run block by block."""

    def __init__(self, header: ChunkHeader):
        self.typesize = header.typesize
        self.blosc1 = header.version <= LAST_BLOSC1_VERSION
        steps = []
        for slot in range(5, -1, -1):
            fid, meta = header.pipeline[slot], header.pipeline_meta[slot]
            if fid in _NOT_UNDONE:
                continue
            if fid not in _DECODABLE:
                if fid < _FIRST_PLUGIN_ID:
                    raise FormatError("filters", "a known filter id", fid, 16 + slot)
                raise UnsupportedError("filter", fid)
            steps.append((fid, meta))
        self.steps = tuple(steps)
        self.has_delta = any(fid == Filter.DELTA for fid, _ in steps)

    def __bool__(self) -> bool:
        return bool(self.steps)

    def undo(self, data: np.ndarray, dest: np.ndarray, spare: np.ndarray, first_block,
             block_index: int) -> None:
        """Undo every filter of ``data`` (one block, clobbered) into ``dest``.

        ``spare`` is scratch of at least the block's size; ``first_block`` is the chunk's
        decoded block 0 (DELTA's reference), unused when there is no DELTA.
        """
        size = len(data)
        cur, other = data, spare[:size]
        for k, (fid, meta) in enumerate(self.steps):
            if fid == Filter.DELTA:
                self._undo_delta(cur, first_block, block_index)
                continue
            target = dest if k == len(self.steps) - 1 else other
            self._undo_one(fid, meta, cur, target)
            cur, other = target, cur
        if cur is not dest:
            dest[:] = cur

    def _undo_one(self, fid: int, meta: int, src: np.ndarray, dst: np.ndarray) -> None:
        ts = self.typesize
        if fid == Filter.SHUFFLE:
            # filters_meta, when set, overrides the element size (python-blosc2 groups UCS4
            # units of `U` strings this way).
            _shuffle.unshuffle(src, dst, meta or ts)
        elif fid == Filter.BITSHUFFLE:
            if self.blosc1:
                self._blosc1_bitunshuffle(src, dst)
            else:
                _shuffle.bitunshuffle(src, dst, ts)
        else:
            _shuffle.bytedelta_decode(src, dst, meta or ts, fid == Filter.BYTEDELTA_BUGGY)

    def _blosc1_bitunshuffle(self, src: np.ndarray, dst: np.ndarray) -> None:
        # c-blosc1 bit-shuffled a block only when its item count was a multiple of 8, and
        # then copied the bytes past the last whole item as they were.
        ts = self.typesize
        nitems = len(src) // ts
        if nitems % 8:
            dst[:] = src
            return
        body = nitems * ts
        _shuffle.bitunshuffle(src[:body], dst[:body], ts)
        dst[body:] = src[body:]

    def _undo_delta(self, buf: np.ndarray, first_block, block_index: int) -> None:
        width = delta_word_width(self.typesize)
        if block_index == 0:
            _shuffle.delta_decode_first(buf, width)
            return
        body = len(buf) // width * width
        if first_block is None or len(first_block) < body:
            raise FormatError(
                "blocks", "a DELTA reference block at least as long as every other block",
                f"block {block_index} of {len(buf)} bytes", None,
            )  # fmt: skip
        _shuffle.xor_into(buf[:body], first_block[:body], buf[:body])
