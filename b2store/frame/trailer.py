"""The frame trailer: the variable-length metalayers (vlmeta) and the trailer length.

Modern trailers are ``[1, [index, names, values], trailer_len, fingerprint]``; vlmeta values
are Blosc2 chunks (compressed msgpack), their offsets relative to the trailer start. The
2.0-beta trailers held one unnamed "usermeta" chunk instead.
"""

from __future__ import annotations

import struct

from ..errors import FormatError
from .header import _read_bin32, _read_name

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
    if tail[0] != 0xCE:
        raise FormatError("trailer_len marker", "0xce", hex(tail[0]), at)
    length = struct.unpack_from(">I", tail, 1)[0]
    if not MIN_TRAILER_LEN <= length <= frame_len - header_len:
        raise FormatError(
            "trailer_len", f"{MIN_TRAILER_LEN}..{frame_len - header_len}", length, at + 1
        )
    return frame_len - length, length


def read_trailer(trailer: memoryview) -> dict[str, bytes]:
    """The vlmetalayers of a trailer (name -> stored chunk bytes), in order."""
    end = len(trailer) - TRAILER_TAIL_LEN
    if end < 2 or trailer[0] != 0x94:
        raise FormatError("trailer", "a msgpack array of 4 (0x94)", hex(trailer[0]), 0)
    if trailer[2] == 0xC6:
        # 2.0 betas: one unnamed usermeta chunk.
        return {LEGACY_USERMETA: _read_bin32(trailer, 2, end, "usermeta")}
    if end < 10 or trailer[2] != 0x93 or trailer[3] != 0xCD or trailer[6] != 0xDE:
        raise FormatError("vlmeta index", "93 cd .. .. de", bytes(trailer[2:7]).hex(" "), 2)
    count = struct.unpack_from(">H", trailer, 7)[0]
    if count > MAX_VLMETALAYERS:
        raise FormatError("vlmeta count", f"at most {MAX_VLMETALAYERS}", count, 7)
    pos, values = 9, {}
    for k in range(count):
        name, pos = _read_name(trailer, pos, end, f"vlmetalayer {k} name")
        if pos + 5 > end or trailer[pos] != 0xD2:
            raise FormatError(f"vlmetalayer {name!r} offset", "0xd2 and an int32", "end", pos)
        offset = struct.unpack_from(">i", trailer, pos + 1)[0]
        pos += 5
        values[name] = _read_bin32(trailer, offset, end, f"vlmetalayer {name!r}")
    return values


def trailer_bytes(vlmeta: dict[str, bytes]) -> bytes:
    """A trailer holding these vlmetalayers (values already compressed), as c-blosc2 writes."""
    if len(vlmeta) > MAX_VLMETALAYERS:
        raise ValueError(f"at most {MAX_VLMETALAYERS} vlmetalayers")
    names = [n.encode() for n in vlmeta]
    for n in names:
        if len(n) > 31:
            raise ValueError(f"vlmetalayer names are at most 31 bytes: {n!r}")
    index_len = 6 + sum(1 + len(n) + 5 for n in names)  # from the 0xcd byte on
    values_at = 3 + index_len + 3
    index = bytearray(
        b"\x94\x01\x93\xcd" + struct.pack(">H", index_len) + b"\xde" + struct.pack(">H", len(names))
    )
    values = bytearray(b"\xdc" + struct.pack(">H", len(names)))
    for name, content in zip(names, vlmeta.values()):
        offset = values_at + len(values) - 3
        index += bytes([0xA0 + len(name)]) + name + b"\xd2" + struct.pack(">i", offset)
        values += b"\xc6" + struct.pack(">I", len(content)) + bytes(content)
    body = bytes(index) + bytes(values)
    length = len(body) + TRAILER_TAIL_LEN
    return body + b"\xce" + struct.pack(">I", length) + b"\xd8\x00" + bytes(16)
