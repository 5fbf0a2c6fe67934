"""The filter pipeline of a chunk: which filters run, with which element sizes, in what order.

The byte loops are in :mod:`b2store._shuffle` and :mod:`b2store.chunk._delta`; this module
applies the format's rules around them (element sizes from ``filters_meta``, the Blosc1
leftover rules, the DELTA reference block) and checks every size before a kernel sees it.
"""

from __future__ import annotations

import numpy as np

from .. import _shuffle
from ..constants import Filter
from ..errors import FormatError, UnsupportedError
from . import _delta
from .header import LAST_BLOSC1_VERSION, ChunkHeader
from .plugins import PLUGIN_FILTERS, filter_step

__all__ = ["Pipeline", "delta_word_width", "truncated_bits"]

# Filters with nothing to undo on decompression (lossy truncations).
_NOT_UNDONE = frozenset({Filter.NOFILTER, Filter.TRUNC_PREC, Filter.INT_TRUNC})
_DECODABLE = frozenset(
    {Filter.SHUFFLE, Filter.BITSHUFFLE, Filter.DELTA, Filter.BYTEDELTA, Filter.BYTEDELTA_BUGGY}
)
# Ids below this are reserved for c-blosc2's own filters; an unknown one there is corruption,
# while a higher one is a registered or user plugin this package does not have.
_FIRST_PLUGIN_ID = 32


def truncated_bits(fid: int, meta: int, typesize: int) -> int:
    """How many low bits TRUNC_PREC or INT_TRUNC clears; ValueError if c-blosc2 refuses."""
    prec = meta - 256 if meta > 127 else meta  # filters_meta is an int8 here
    if fid == Filter.TRUNC_PREC:
        if typesize not in (4, 8):
            raise ValueError(f"TRUNC_PREC needs 4- or 8-byte floats, not typesize {typesize}")
        width = 23 if typesize == 4 else 52  # mantissa bits
    else:
        if typesize not in (1, 2, 4, 8):
            raise ValueError(f"INT_TRUNC needs 1-, 2-, 4- or 8-byte integers, not {typesize}")
        width = 8 * typesize
    zeroed = width - prec if prec >= 0 else -prec
    if abs(prec) > width or zeroed >= width:
        raise ValueError(f"filters_meta {prec} would clear {zeroed} of {width} bits")
    return zeroed


def _check_encodable(fid: int, meta: int, typesize: int) -> None:
    if fid in (Filter.TRUNC_PREC, Filter.INT_TRUNC):
        truncated_bits(fid, meta, typesize)


def delta_word_width(typesize: int) -> int:
    """The word width DELTA XORs in: the typesize if 1, 2, 4 or 8, else 8 or 1."""
    if typesize in (1, 2, 4, 8):
        return typesize
    return 8 if typesize % 8 == 0 else 1


class Pipeline:
    """The filters of one chunk, ready to run block by block in either direction.

    Decoding undoes the slots last first and skips the lossy truncations; encoding runs them
    all, first slot first.
    """

    def __init__(
        self,
        filters,
        filters_meta,
        typesize: int,
        *,
        blosc1: bool = False,
        encoding: bool = False,
        blockshape=None,
    ):
        self.typesize = typesize
        self.blosc1 = blosc1
        steps = []
        # NDCELL and NDMEAN, which need the b2nd block shape: their kernels by slot.
        self.plugins: dict[int, object] = {}
        for slot, (fid, meta) in enumerate(zip(filters, filters_meta)):
            if fid == Filter.NOFILTER or (not encoding and fid in _NOT_UNDONE):
                continue
            if fid in PLUGIN_FILTERS:
                run = filter_step(fid, meta, typesize, blockshape, encoding=encoding)
                self.plugins[len(steps)] = run
                steps.append((fid, meta))
                continue
            if fid not in _DECODABLE and fid not in _NOT_UNDONE:
                if fid < _FIRST_PLUGIN_ID:
                    raise FormatError("filters", "a known filter id", fid, 16 + slot)
                raise UnsupportedError("filter", _filter_name(fid))
            if encoding:
                _check_encodable(fid, meta, typesize)
            steps.append((fid, meta))
        if not encoding:
            last = len(steps) - 1
            self.plugins = {last - k: run for k, run in self.plugins.items()}
        self.steps = tuple(steps) if encoding else tuple(reversed(steps))
        # (the steps as the C block loop takes them, made once, not per decode)
        self.int_steps = [(int(fid), int(meta)) for fid, meta in self.steps]
        self.has_delta = any(fid == Filter.DELTA for fid, _ in steps)

    @classmethod
    def for_header(cls, header: ChunkHeader, blockshape=None) -> Pipeline:
        """The pipeline a decoder undoes for the chunk with this header (``blockshape``:
        the b2nd array's, which NDCELL and NDMEAN need)."""
        return cls(
            header.pipeline,
            header.pipeline_meta,
            header.typesize,
            blosc1=header.version <= LAST_BLOSC1_VERSION,
            blockshape=blockshape,
        )

    def __bool__(self) -> bool:
        return bool(self.steps)

    def apply(
        self,
        block: np.ndarray,
        work: np.ndarray,
        spare: np.ndarray,
        first_block: np.ndarray,
        block_index: int,
    ) -> np.ndarray:
        """Run the filters over ``block`` (left intact); returns the filtered bytes.

        ``work`` and ``spare`` are scratch of at least the block's size; the result is a
        view of one of them. ``first_block`` is the chunk's *unfiltered* block 0, the
        reference DELTA codes every other block against.
        """
        size = len(block)
        bufs = (work[:size], spare[:size])
        cur = block
        for k, (fid, meta) in enumerate(self.steps):
            out = bufs[k % 2]
            if k in self.plugins:
                self.plugins[k](cur, out)
            else:
                self._apply_one(fid, meta, cur, out, first_block, block_index)
            cur = out
        return cur

    def _apply_one(self, fid, meta, src, dst, first_block, block_index) -> None:
        ts = self.typesize
        if fid == Filter.SHUFFLE:
            _shuffle.shuffle(src, dst, meta or ts)
        elif fid == Filter.BITSHUFFLE:
            _shuffle.bitshuffle(src, dst, ts)
        elif fid == Filter.DELTA:
            width = delta_word_width(ts)
            if block_index == 0:
                # Block 0 is coded against itself as it enters this stage.
                _delta.delta_encode_first(src, dst, src, width)
            else:
                body = len(src) // width * width
                _delta.xor_into(src[:body], first_block[:body], dst[:body])
                dst[body:] = src[body:]
        elif fid in (Filter.BYTEDELTA, Filter.BYTEDELTA_BUGGY):
            _delta.bytedelta_encode(src, dst, meta or ts, fid == Filter.BYTEDELTA_BUGGY)
        else:  # TRUNC_PREC, INT_TRUNC: clear low bits of every whole item
            dst[:] = src
            body = len(src) // ts * ts
            _shuffle.zero_low_bits(dst[:body], ts, truncated_bits(fid, meta, ts))

    def undo(
        self, data: np.ndarray, dest: np.ndarray, spare: np.ndarray, first_block, block_index: int
    ) -> None:
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
            if k in self.plugins:
                self.plugins[k](cur, target)
            else:
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
            _delta.bytedelta_decode(src, dst, meta or ts, fid == Filter.BYTEDELTA_BUGGY)

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
            _delta.delta_decode_first(buf, width)
            return
        body = len(buf) // width * width
        if first_block is None or len(first_block) < body:
            raise FormatError(
                "blocks",
                "a DELTA reference block at least as long as every other block",
                f"block {block_index} of {len(buf)} bytes",
                None,
            )
        _delta.xor_into(buf[:body], first_block[:body], buf[:body])


def _filter_name(fid: int) -> int | str:
    """A plugin filter as a refusal names it: its registered name and id (``NDMEAN (id
    33)``, as the codec refusal does), or the bare id of an unregistered one."""
    try:
        return f"{Filter(fid).name} (id {fid})"
    except ValueError:
        return fid
