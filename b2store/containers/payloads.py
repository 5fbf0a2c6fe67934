"""The items of python-blosc2's variable-length containers: a chunk's blocks decoded and
split, each block's msgpack payload decoded strictly, and what python-blosc2 refuses by
default refused here too."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..chunk.decoder import ChunkDecoder, in_chunk
from ..constants import Filter
from ..errors import B2StoreError, FormatError, UnsupportedError
from ..frame.schunk import SChunk
from ..frame.vlmeta_codec import refused_ext, unpack_payload
from ..limits import LimitError

__all__ = ["UnsafePayloadError", "chunk_block", "chunk_blocks", "decode_item", "check_meta"]


class UnsafePayloadError(UnsupportedError):
    """An item holds a value python-blosc2 4.14.1 refuses to rebuild by default (its
    ``deserialize="safe"``): an embedded container (a cframe), a reference (``ref``,
    ``c2array``, ``remote_array``), a lazy expression or UDF, or an unknown msgpack ext."""

    def __init__(self, kind: str, where: str):
        self.feature = "python-blosc2 payload"
        self.ident = kind
        self.where = where
        B2StoreError.__init__(
            self,
            f"{where} holds a {kind}, which python-blosc2 4.14.1 refuses by default "
            "(deserialize='safe'); b2store never rebuilds one (it would mean opening other "
            "files or URLs, or evaluating code). Read it with python-blosc2's "
            "deserialize='full' if you trust the file",
        )


def chunk_blocks(schunk: SChunk, i: int, *, vl: bool) -> list[memoryview]:
    """Chunk ``i`` of ``schunk`` decoded, as the payloads of its blocks: one per
    variable-length block (``vl``: chunk format version 6, as python-blosc2's ``vlcompress``
    writes a batch), or the whole chunk as one payload (``vl`` False: an ObjectArray's item,
    written by ``compress2``). A chunk of the other kind is a FormatError."""
    chunk = schunk.get_chunk(i)
    label = f"chunk {i}"
    try:
        decoder = ChunkDecoder(chunk)
        header = decoder.header
        if header.vl_blocks != vl:
            expected = "variable-length blocks" if vl else "fixed-size blocks"
            found = "variable-length blocks" if header.vl_blocks else "fixed-size blocks"
            if header.special:
                found = "a special (repeated-value) chunk"
            raise FormatError("blosc2_flags2", f"a chunk of {expected}", found, 31)
        limit = schunk.limits.max_chunk_nbytes
        if header.nbytes > limit:
            raise LimitError("nbytes", "max_chunk_nbytes", limit, header.nbytes, 4)
        dest = np.empty(header.nbytes, np.uint8)
        decoder.decode_into(dest)
    except LimitError:
        raise
    except FormatError as exc:
        named = in_chunk(exc, label)
        if named is exc:
            named = FormatError(f"{exc.field} of {label}", exc.expected, exc.found, exc.offset)
        raise named from None
    view = memoryview(dest)
    if not vl:
        return [view]
    spans = [decoder.block_span(j) for j in range(decoder.nblocks)]
    return [view[start : start + size] for start, size in spans]


def chunk_block(schunk: SChunk, i: int, j: int) -> memoryview | None:
    """Variable-length block ``j`` of chunk ``i`` decoded alone (one block of a batch), or
    None where the whole chunk must be decoded instead (:func:`chunk_blocks`, which also
    names what is wrong with a chunk): not a chunk of variable-length blocks, fewer blocks,
    or DELTA in its filters (which codes every block against block 0)."""
    chunk = schunk.get_chunk(i)
    try:
        decoder = ChunkDecoder(chunk)
        header = decoder.header
        if not header.vl_blocks or header.special or j >= decoder.nblocks:
            return None
        if Filter.DELTA in header.pipeline:
            return None
        _, size = decoder.block_span(j)
        if size > schunk.limits.max_chunk_nbytes:
            return None
        dest = np.empty(size, np.uint8)
        decoder.decode_block(j, dest)
    except FormatError:
        return None  # the whole chunk's decoding names it
    return memoryview(dest)


def decode_item(payload, where: str, schunk: SChunk) -> object:
    """One msgpack payload decoded as python-blosc2's safe mode decodes it; ``where`` names
    the item in errors (``"BatchArray batch 3 block 0"``)."""
    value, kept = unpack_payload(payload, where, schunk.limits)
    if kept:
        raise UnsafePayloadError(refused_ext(kept[0]) or "msgpack ext", where)
    return value


def check_meta(meta: object, name: str, fields: Mapping[str, tuple]) -> dict:
    """A container's metalayer ``name`` checked: a map with a known ``version`` (1, the only
    one python-blosc2 4.14.1 writes) and, for each of ``fields``, one of the values it lists
    (``int`` there: any positive int). Anything else is refused, naming the field."""
    if not isinstance(meta, dict):
        raise FormatError(f"metalayer {name!r}", "a msgpack map", type(meta).__name__)
    version = meta.get("version")
    if version != 1:
        raise UnsupportedError(f"{name} metalayer version", _ident(version))
    for field, allowed in fields.items():
        value = meta.get(field)
        if int in allowed and type(value) is int and value > 0:
            continue
        if any(
            value is a or (type(value) is type(a) and value == a) for a in allowed if a is not int
        ):
            continue
        raise UnsupportedError(f"{name} {field}", _ident(value))
    return meta


def _ident(value: object) -> int | str:
    return value if type(value) in (int, str) else repr(value)[:80]  # type: ignore[return-value]
