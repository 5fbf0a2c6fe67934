"""A frame's committed state, read from any layout: its header read and checked beside writers
(:func:`read_header`), then its trailer and offsets index (:func:`read_state`), held as one
:class:`State` that readers take whole.

The small things every part of the frame layer shares live here, below all of them: the
layouts, the factory that picks one, :class:`~b2store.frame.schunk.SChunk` and its parts
import this module, and it imports none of them (only the header, trailer and sniffing
modules, through the :class:`~b2store.frame.backend.Backend` interface they answer).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..chunk.decoder import decode_chunk
from ..constants import EXTENDED_HEADER_LENGTH, MIN_HEADER_LENGTH
from ..errors import FormatError
from ..limits import Limits, resolve
from .backend import Backend
from .header import FrameHeader
from .sniff import FRAME_PREFIX_LENGTH, NotBlosc2Error
from .trailer import MIN_TRAILER_LEN, TRAILER_TAIL_LEN, read_trailer, trailer_span

__all__ = ["State", "READ_TRIES", "read_header", "read_state"]

# A read that failed because writers kept replacing what it named is tried this many times,
# each from a newer committed state.
READ_TRIES = 64


class State(NamedTuple):
    """One committed state of a frame, swapped whole: a reader takes it once and so never
    pairs a new header with an old index (or vlmeta) while a writer publishes."""

    header: FrameHeader
    offsets: np.ndarray
    raw_vlmeta: dict
    trailer_start: int


def read_header(backend: Backend, limits: Limits | None = None) -> FrameHeader:
    """Read and check the header; the frame ends where the header says (bytes after a frame
    are not ours). ``header_len`` and ``nbytes`` are checked against ``limits``.

    Beside a writer in another process the bytes read may be torn (read while its header
    was being written): a header that fails its checks is read again while the bytes on
    storage differ from the ones that failed, up to ``READ_TRIES`` times; bytes that fail
    twice the same are the file's own fault."""
    limits = resolve(limits)
    for _ in range(READ_TRIES):
        spans: list[tuple[int, bytes]] = []
        try:
            return _read_header(backend, limits, spans)
        except FormatError:
            if not backend.refresh() or all(
                backend.read(0, len(raw)) == raw
                for _, raw in spans
                if len(raw) <= backend.frame_len
            ):
                raise
    raise FormatError(
        "frame header", "one that stays the same while it is read", "writers kept replacing it"
    )


def _read_header(backend: Backend, limits: Limits, spans: list) -> FrameHeader:
    """:func:`read_header`'s one try; ``spans`` gets the bytes read, to compare."""
    available = backend.frame_len
    spans.append((0, backend.read(0, min(24, available))))
    try:
        header_len, frame_len = FrameHeader.peek_len(spans[-1][1])
    except NotBlosc2Error as exc:
        head = backend.read(0, min(FRAME_PREFIX_LENGTH, available))
        raise exc.named(backend.name, head, available) from None
    limits.check("max_metalayer_nbytes", header_len, "header_len", 10)
    if header_len > available and backend.refresh():
        available = backend.frame_len
    if header_len > available:  # (a file cut inside its header)
        raise FormatError("frame_len", f"at most the {available} bytes there are", frame_len, 16)
    spans.append((0, backend.read(0, header_len)))
    header = FrameHeader.from_bytes(spans[-1][1])
    if header.frame_len > available and backend.refresh():
        # The file grew since its size was taken: a writer published meanwhile. Its size is
        # taken again after the header was read, never before: a writer stores everything
        # a header names before it writes the header, so the file now holds all of it (a
        # size taken first could predate a commit the header then read is from).
        available = backend.frame_len
    if header.frame_len > available:
        raise FormatError(
            "frame_len", f"at most the {available} bytes there are", header.frame_len, 16
        )
    limits.check("max_frame_nbytes", header.nbytes, "nbytes", 25)
    backend.adopt(header)
    return header


def read_state(backend: Backend, header: FrameHeader, limits: Limits | None = None) -> State:
    """The state ``header`` names: its trailer and offsets index, read from storage (once:
    :class:`~b2store.frame.schunk.SChunk` reads again where a writer replaced them)."""
    frame_len = backend.frame_len
    if frame_len < header.header_len + MIN_TRAILER_LEN:
        raise FormatError("frame_len", "room for the header and a trailer", frame_len, 16)
    tail = backend.read(frame_len - TRAILER_TAIL_LEN, TRAILER_TAIL_LEN)
    trailer_start, trailer_len = trailer_span(tail, frame_len, header.header_len)
    raw_vlmeta = read_trailer(memoryview(backend.read(trailer_start, trailer_len)))
    offsets = _read_offsets(backend, header, trailer_start, resolve(limits))
    offsets.flags.writeable = False
    return State(header, offsets, raw_vlmeta, trailer_start)


def _read_offsets(backend: Backend, h: FrameHeader, trailer_start: int, limits: Limits):
    if h.nbytes == 0 or h.chunksize == -1:  # c-blosc2: no bytes, no chunks
        return np.zeros(0, np.int64)
    if h.chunksize > 0:
        limits.check("max_nchunks", -(-h.nbytes // h.chunksize), "nchunks", 25)
    at = backend.index_at(h)
    index = _read_chunk_at(backend, at, trailer_start)
    max_index = min(limits.max_chunk_nbytes, 8 * limits.max_nchunks)
    # The error names the bound that is the tighter one, so raising it lets the index in.
    name = "max_chunk_nbytes" if max_index == limits.max_chunk_nbytes else "max_nchunks"
    offsets = decode_chunk(index, max_nbytes=max_index, limit_name=name)
    if len(offsets) % 8:
        raise FormatError("offsets index", "a whole number of int64", f"{len(offsets)} bytes", at)
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


def _read_chunk_at(backend: Backend, offset: int, limit: int) -> bytes:
    """The chunk at frame offset ``offset`` (the index), which must end by ``limit``."""
    if offset + MIN_HEADER_LENGTH > limit:
        raise FormatError("chunk offset", f"a chunk header before byte {limit}", offset)
    head = backend.read(offset, min(EXTENDED_HEADER_LENGTH, limit - offset))
    cbytes = int.from_bytes(head[12:16], "little", signed=True)
    if not MIN_HEADER_LENGTH <= cbytes <= limit - offset:
        raise FormatError(
            "chunk cbytes",
            f"a chunk inside the chunks section (to {limit})",
            cbytes,
            offset + 12,
        )
    return backend.read(offset, cbytes)
