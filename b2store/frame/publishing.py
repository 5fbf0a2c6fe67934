"""Changing a frame without ever leaving it unreadable.

Every change is written where no reader looks yet, then published by one small write:
- contiguous frames: new chunks, the new offsets index and the new trailer go after the
  current end of the frame; one write of the 87 fixed header bytes then moves ``cbytes``
  (where the index is) and ``frame_len`` (where the trailer is). A process killed before
  that write leaves the old frame intact; after it, the new one. What the old index and
  trailer occupied stays as orphan bytes inside the chunks section, which c-blosc2 allows.
- sparse frames: chunk files are written under new ids (temporary file, then rename); the
  index file ``chunks.b2frame`` is then replaced by one rename; replaced or deleted chunk
  files are removed only after that.
"""

from __future__ import annotations

import numpy as np

from ..chunk.encoder import encode_chunk
from ..chunk.header import ChunkHeader
from ..chunk.params import ChunkParams
from ..chunk.tuning import header_typesize
from ..constants import Codec, Filter, SpecialValue, SplitMode
from .header import HEADER_FIXED_LEN, OFFSETS_64BIT, VARIABLE_CHUNKS, FrameHeader
from .trailer import trailer_bytes

__all__ = ["empty_frame", "encode_index", "special_offset", "chunksize_after", "SPECIAL_KINDS"]

SPECIAL_KINDS = (SpecialValue.ZERO, SpecialValue.NAN, SpecialValue.UNINIT)
FIXED_VERSION, VARIABLE_VERSION = 2, 3


def empty_frame(
    *,
    contiguous: bool,
    params: ChunkParams,
    chunksize: int,
    metalayers: dict[str, bytes],
) -> tuple[FrameHeader, bytes]:
    """A frame with no chunk yet (header and trailer, no index), as c-blosc2 starts one; its
    header records ``params`` (whose ``typesize`` is set), what new chunks are encoded with."""
    codec, typesize = params.codec, params.typesize
    # The six filter slots as a chunk of these items stores them (a BYTEDELTA meta of 0 as
    # the typesize, as python-blosc2's SChunk writes it; items past 255 bytes as bytes).
    filters, filters_meta = params.slots(header_typesize(typesize))
    header = FrameHeader(
        header_len=0,
        frame_len=0,
        general_flags=OFFSETS_64BIT | FIXED_VERSION,
        frame_type=0 if contiguous else 1,
        codec_flags=(params.clevel << 4) | min(int(codec), 6),
        other_flags=int(params.splitmode) - 1,
        nbytes=0,
        cbytes=0,
        typesize=typesize,
        blocksize=params.blocksize,
        chunksize=chunksize,
        filters=filters,
        udcodec=int(codec),
        compcode_meta=params.codec_meta,
        filters_meta=filters_meta,
        metalayers=dict(metalayers),
    )
    header_len = len(header.to_bytes())
    trailer = trailer_bytes({})
    header = header.with_fields(header_len=header_len, frame_len=header_len + len(trailer))
    return header, header.to_bytes() + trailer


def published_header(
    header: FrameHeader,
    *,
    nbytes: int,
    cbytes: int,
    chunksize: int,
    frame_len: int,
    has_vlmeta: bool,
) -> FrameHeader:
    """The header after a change: sizes, where the index and trailer now are, the version."""
    flags = header.general_flags & ~0x4F
    flags |= (VARIABLE_VERSION | VARIABLE_CHUNKS) if chunksize == 0 else FIXED_VERSION
    return header.with_fields(
        nbytes=nbytes,
        cbytes=cbytes,
        chunksize=chunksize,
        frame_len=frame_len,
        general_flags=flags | OFFSETS_64BIT,
        has_vlmeta=has_vlmeta,
    )


def fixed_header_bytes(header: FrameHeader) -> bytes:
    return header.to_bytes()[:HEADER_FIXED_LEN]


def encode_index(offsets: np.ndarray) -> bytes:
    """The offsets index chunk, with the parameters c-blosc2 uses for it."""
    return encode_chunk(
        np.ascontiguousarray(offsets, "<i8"),
        typesize=8,
        codec=Codec.BLOSCLZ,
        clevel=5,
        filters=[Filter.SHUFFLE],
        splitmode=SplitMode.NEVER_SPLIT,
        blocksize=16384,
    )


def special_offset(kind: int) -> int:
    """The index entry that stands for a special chunk with no bytes stored."""
    return int(np.int64(np.uint64((0x80 | kind) << 56)))


def special_kind_of(chunk: bytes) -> int:
    """The special value of a chunk that an index entry can stand for, else 0."""
    header = ChunkHeader.from_bytes(chunk)
    kind = header.special
    return int(kind) if kind in SPECIAL_KINDS and header.cbytes == 32 else 0


def chunksize_after(
    chunksize: int, nchunks: int, nbytes: int, op: str, i: int, chunk_nbytes: int
) -> int:
    """The frame chunksize after an operation: fixed while every chunk but the last has it
    and the last is no larger, else 0 (variable), as c-blosc2 keeps it."""
    if chunksize == 0:
        return 0
    if chunksize == -1 or nchunks == 0:
        return chunk_nbytes if op in ("append", "insert", "update") else chunksize
    last_full = nbytes == nchunks * chunksize
    last = nchunks - 1
    if op == "append":
        return chunksize if last_full and chunk_nbytes <= chunksize else 0
    if op == "insert":
        return (
            chunksize
            if chunk_nbytes == chunksize
            or (i == nchunks and last_full and chunk_nbytes <= chunksize)
            else 0
        )
    if op == "update":
        limit_ok = chunk_nbytes == chunksize or (i == last and chunk_nbytes <= chunksize)
        return chunksize if limit_ok else 0
    return chunksize  # delete keeps every chunk but the last at chunksize
