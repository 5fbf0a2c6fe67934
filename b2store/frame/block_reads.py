"""Reading parts of chunks: the blocks a selection needs, decoded straight from one read
of their bytes, with each chunk's block layout (header and block starts) read and parsed
once per committed state of the frame.
"""

from __future__ import annotations

import numpy as np

from ..chunk import partial
from ..chunk.decoder import ChunkDecoder, as_uint8
from ..constants import MAX_BUFFERSIZE, MIN_HEADER_LENGTH, SpecialValue
from ..errors import FormatError
from .state import State

__all__ = ["BlockReads", "check_value_item"]


def check_value_item(header, typesize: int, i: int) -> None:
    """A chunk of one repeated value (special VALUE) in a frame of ``typesize``-byte items
    holds one item: a value of another size would be repeated across the items' bounds (a
    3-byte value filling a frame of float32), garbage served as data. Frames of typesize 1
    hold bytes or items too wide for the header (b2nd's): their value is not checked here."""
    if typesize > 1 and header.special == SpecialValue.VALUE:
        size = header.cbytes - header.header_size
        if size != typesize:
            raise FormatError(
                f"chunk {i} cbytes",
                f"32 + the frame's typesize {typesize} for a repeated-value chunk",
                header.cbytes,
                12,
            )


# The most of a chunk's prefix read before its header says how long the prefix is.
_PREFIX_GUESS_MOST = 1 << 16

# Block layouts (a chunk's parsed block starts) kept per frame for repeated small reads.
_LAYOUTS_KEPT = 256


class BlockReads:
    """The partial-read half of :class:`~b2store.frame.schunk.SChunk` (a mixin: it uses
    the reading half's ``_reading``, ``_special``, ``_backend`` and ``_layouts``)."""

    def _layout(self, st: State, i: int, read, limit) -> partial.ChunkLayout | None:
        """Chunk ``i``'s block layout in state ``st`` (None: read it whole), its prefix read
        and parsed once per state: small reads of one chunk then cost one read each."""
        kept = self._layouts
        if kept[0] is not st:
            kept = self._layouts = (st, {})
        layouts = kept[1]
        if i in layouts:
            return layouts[i]
        span = limit if limit is not None else MAX_BUFFERSIZE
        # The header and the block starts, in one read where the frame's sizes say how many
        # blocks there are (each read of a remote frame is a round trip).
        h = st.header
        guess = partial.HEADER_BYTES
        if h.chunksize > 0 and h.blocksize > 0:
            guess += 4 * -(-h.chunksize // h.blocksize)
        head = read(0, min(guess, span, _PREFIX_GUESS_MOST))
        need = partial.prefix_length(head[: partial.HEADER_BYTES])
        prefix = head[:need] if len(head) >= need else head + read(len(head), need - len(head))
        layout = partial.read_layout(prefix, size=span)
        if len(layouts) >= _LAYOUTS_KEPT:
            layouts.clear()
        layouts[i] = layout
        return layout

    def _plan(self, st: State, i: int, blocks):
        """How to read ``blocks`` of chunk ``i``: ``(read, prefix, plan)``, where ``plan`` is
        None when the chunk must be read whole (special, memcpyed, VL blocks): ``prefix`` is
        then the whole chunk. The prefix comes from the layout kept for ``st``."""
        entry = int(st.offsets[i])
        if entry < 0:
            return None, self._special(i, entry, st), None
        read, limit = self._backend.chunk_reader(entry, st.header, f"offsets[{i}]")
        layout = self._layout(st, i, read, limit)
        if layout is None:
            cbytes = int.from_bytes(read(0, MIN_HEADER_LENGTH)[12:16], "little", signed=True)
            return read, read(0, cbytes), None
        try:
            return read, layout.prefix, layout.plan(blocks)
        except IndexError as exc:
            raise _fewer_blocks(i, exc) from None

    def chunk_part(
        self, i: int, blocks, room: np.ndarray, *, blocksize: int, state: State, max_cbytes: int
    ):
        """Chunk ``i``'s header and block starts, and the bytes of ``blocks`` (ascending),
        read into their places in ``room`` (a uint8 buffer, replaced by a larger one when it
        is too short); the other bytes of ``room`` are left as they were, not zeroed.

        Returns ``(buffer, ends)``: the ``cbytes``-long buffer and each block's end
        (:class:`~b2store.chunk._chunk_plan.Plan` reads no block's bytes past it); or None when the
        chunk has no block starts to go by or a dictionary (special, memcpyed, VL blocks),
        its Blosc blocks are not ``blocksize`` bytes (block numbers then mean other bytes),
        or it is stored in more than ``max_cbytes``: read it the general way."""
        return self._reading(
            i, lambda st, i: self._chunk_part(st, i, blocks, room, blocksize, max_cbytes), state
        )

    def _chunk_part(
        self, st: State, i: int, blocks, room: np.ndarray, blocksize: int, max_cbytes: int
    ):
        entry = int(st.offsets[i])
        if entry < 0:
            return None
        read, limit = self._backend.chunk_reader(entry, st.header, f"offsets[{i}]")
        layout = self._layout(st, i, read, limit)
        if (
            layout is None
            or layout.dict_range is not None
            or layout.header.effective_blocksize != blocksize
            or layout.header.cbytes > max_cbytes
        ):
            return None
        nblocks = len(layout.bstarts)
        if len(blocks) and not 0 <= blocks[0] <= blocks[-1] < nblocks:
            raise _fewer_blocks(i, IndexError(f"block {blocks[-1]} of {nblocks}"))
        cbytes = layout.header.cbytes
        if len(room) < cbytes:
            room = np.empty(cbytes, np.uint8)
        buf = room[:cbytes]
        buf[: layout.prefix_length] = np.frombuffer(layout.prefix, np.uint8, layout.prefix_length)
        groups = layout.groups(blocks, partial.PART_GAP)
        pieces_into = getattr(read, "pieces_into", None)
        if pieces_into is not None:  # (a contiguous frame: no copy)
            pieces_into([(start, buf[start:stop]) for start, stop, _ in groups])
        else:
            for start, stop, _ in groups:
                buf[start:stop] = partial.checked_piece(read(start, stop - start), start, stop)
        return buf, layout.ends

    def get_chunk_blocks(self, i: int, blocks, *, state: State | None = None) -> bytes | np.ndarray:
        """Chunk ``i`` with only what decoding ``blocks`` needs read from storage: the header,
        the block starts, the dictionary and those blocks' streams (block 0 too when DELTA
        needs it); the rest is zeros, which a decoder reads as runs of zeros, never as data
        of the blocks asked for."""
        return self._reading(i, lambda st, i: self._chunk_blocks(st, i, blocks), state)

    def _chunk_blocks(self, st: State, i: int, blocks) -> bytes | np.ndarray:
        read, prefix, plan = self._plan(st, i, blocks)
        if plan is None:
            return prefix  # the whole chunk
        buf = partial.zeroed(plan.header.cbytes)
        buf[: len(prefix)] = np.frombuffer(prefix, np.uint8)
        for start, stop in plan.ranges:
            buf[start:stop] = partial.checked_piece(read(start, stop - start), start, stop)
        return buf

    def decode_blocks(
        self, i: int, blocks, out, *, blocksize: int | None = None, state: State | None = None
    ):
        """Decode at least ``blocks`` of chunk ``i`` into ``out`` (laid out as the decoded
        chunk, exactly its nbytes), reading only what they need.

        Returns the blocks decoded (all of them when the chunk had to be read whole), or None
        when the chunk's Blosc blocks are not ``blocksize`` bytes (a b2nd chunk written with
        other blocks than its array's): then block numbers mean something else, and the
        caller decodes the chunk whole.
        """
        return self._reading(
            i, lambda st, i: self._decode_blocks(st, i, blocks, out, blocksize), state
        )

    def _decode_blocks(self, st: State, i: int, blocks, out, blocksize=None):
        dest = as_uint8(out, writable=True, name="out")
        entry = int(st.offsets[i])
        if entry >= 0 and self._whole_at_once(st, i, entry, blocks):
            # Most of a chunk of a remote frame: one request for all of it, not one for its
            # block starts and one for its blocks.
            decoder = ChunkDecoder(self._get_chunk(st, i), blockshape=self.blockshape)
            if blocksize is not None and decoder.header.effective_blocksize != blocksize:
                return None
            if decoder.header.nbytes != len(dest):
                raise FormatError(f"chunk {i} nbytes", str(len(dest)), decoder.header.nbytes)
            decoder.decode_into(dest)
            return list(range(decoder.nblocks))
        if entry >= 0:
            read, limit = self._backend.chunk_reader(entry, st.header, f"offsets[{i}]")
            layout = self._layout(st, i, read, limit)
            if layout is not None:
                if blocksize is not None and layout.header.effective_blocksize != blocksize:
                    return None
                if layout.header.nbytes != len(dest):
                    raise FormatError(f"chunk {i} nbytes", str(len(dest)), layout.header.nbytes)
                try:
                    done = partial.decode_direct(layout, read, blocks, dest, self.blockshape)
                except IndexError as exc:
                    raise _fewer_blocks(i, exc) from None
                if done is not None:
                    return done
        read, prefix, plan = self._plan(st, i, blocks)
        if plan is None:  # special, memcpyed or VL blocks: decoded whole
            decoder = ChunkDecoder(prefix, blockshape=self.blockshape)
            check_value_item(decoder.header, st.header.typesize, i)
            if decoder.header.nbytes != len(dest):
                raise FormatError(f"chunk {i} nbytes", str(len(dest)), decoder.header.nbytes)
            if decoder.special and blocksize:
                # The value where the blocks asked for lie, and nothing else: a read of three
                # items of a 1 GiB chunk of zeros touched 1 GiB of memory.
                for b in blocks:
                    decoder.fill_special(dest[b * blocksize : (b + 1) * blocksize])
                return list(blocks)
            decoder.decode_into(dest)
            return list(range(decoder.nblocks)) if not decoder.special else list(blocks)
        if blocksize is not None and plan.header.effective_blocksize != blocksize:
            return None
        if plan.header.nbytes != len(dest):
            raise FormatError(f"chunk {i} nbytes", str(len(dest)), plan.header.nbytes)
        pieces = [read(start, stop - start) for start, stop in plan.ranges]
        partial.decode_blocks(plan, prefix, pieces, out, self.blockshape)
        return list(plan.blocks)

    def _whole_at_once(self, st: State, i: int, entry: int, blocks) -> bool:
        """Whether chunk ``i`` of a remote frame is read whole for ``blocks``: more than
        half of its blocks, and its block starts not already kept."""
        h = st.header
        if not self._backend.remote or h.chunksize <= 0 or h.blocksize <= 0:
            return False
        kept = self._layouts
        if kept[0] is st and i in kept[1]:
            return False
        nblocks = -(-h.chunksize // h.blocksize)
        return 2 * len(set(blocks)) > nblocks and self._span(st, entry) > 0


def _fewer_blocks(i: int, exc: IndexError) -> FormatError:
    """A block asked for is past the chunk's last: the chunk has fewer than its frame says."""
    return FormatError(f"chunk {i}", f"the blocks asked for ({exc})", "fewer")
