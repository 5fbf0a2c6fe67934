"""The frame trailer: the variable-length metalayers (vlmeta) and the trailer length.

Modern trailers are ``[1, [index, names, values], trailer_len, fingerprint]``; vlmeta values
are Blosc2 chunks (compressed msgpack), their offsets relative to the trailer start. The
2.0-beta trailers held one unnamed "usermeta" chunk instead.
"""

from __future__ import annotations

from ..errors import FormatError
from . import wire
from .header import named_values_bytes, read_named_index

__all__ = ["read_trailer", "trailer_bytes", "TRAILER_TAIL_LEN", "MAX_VLMETALAYERS"]

# The closing `ce u32 trailer_len` and the 18-byte fingerprint extension.
TRAILER_TAIL_LEN = 23
MIN_TRAILER_LEN = 25
MAX_VLMETALAYERS = 8192
LEGACY_USERMETA = "__usermeta__"


def trailer_span(tail: bytes, frame_len: int, header_len: int) -> tuple[int, int]:
    """``(start, length)`` of the trailer, from the last 23 bytes of the frame (``tail``)."""
    if frame_len < header_len + MIN_TRAILER_LEN or len(tail) != TRAILER_TAIL_LEN:
        raise FormatError(
            "frame_len", f"room for a header ({header_len}) and a trailer", frame_len, 16
        )
    at = frame_len - TRAILER_TAIL_LEN
    length = wire.read(tail, 0, wire.UINT32, "trailer_len", base=at)
    if not MIN_TRAILER_LEN <= length <= frame_len - header_len:
        raise FormatError(
            "trailer_len", f"{MIN_TRAILER_LEN}..{frame_len - header_len}", length, at + 1
        )
    return frame_len - length, length


def read_trailer(trailer: memoryview) -> dict[str, bytes]:
    """The vlmetalayers of a trailer (name -> stored chunk bytes), in order."""
    end = len(trailer) - TRAILER_TAIL_LEN
    if end < 2 or trailer[0] != wire.FIXARRAY + 4:
        found = hex(trailer[0]) if len(trailer) else "no bytes"
        raise FormatError("trailer", "a msgpack array of 4 (0x94)", found, 0)
    if trailer[2] == wire.BIN32.marker:
        # 2.0 betas: one unnamed usermeta chunk.
        return {LEGACY_USERMETA: wire.read_bin32(trailer, 2, end, "usermeta")}
    cur = wire.Cursor(trailer, 2, end, name="trailer")
    return read_named_index(cur, "vlmeta", MAX_VLMETALAYERS, "vlmetalayer")


def trailer_bytes(vlmeta: dict[str, bytes]) -> bytes:
    """A trailer holding these vlmetalayers (values already compressed), as c-blosc2 writes."""
    # 94 01 93 cd <index_len, counted from the 0xcd byte to the values> de <count>, entries
    head_len = 3 + wire.UINT16.size + wire.MAP16.size
    entries, array = named_values_bytes(vlmeta, MAX_VLMETALAYERS, "vlmetalayer", head_len)
    head = (
        bytes([wire.FIXARRAY + 4, 1, wire.FIXARRAY + 3])
        + wire.pack(wire.UINT16, head_len - 3 + len(entries))
        + wire.pack(wire.MAP16, len(vlmeta))
    )
    body = head + entries + array
    length = len(body) + TRAILER_TAIL_LEN
    # The fingerprint: a fixext16 of type 0, all zeros (c-blosc2 computes none).
    return body + wire.pack(wire.UINT32, length) + wire.pack(wire.FIXEXT16, 0) + bytes(16)
