"""The fixed-width msgpack items that frame headers, trailers and the b2nd metalayer are made
of: one table of markers and payload formats, a checked reader, and writers.

c-blosc2 writes these structures with fixed-width markers at fixed places (an int32 is always
``d2`` and four bytes, even for 0) and rewrites fields in place, so they are read and written
by position, never by a generic msgpack parser (which would also choke on quirks such as a
16-d shape array whose ``0x90 + 16`` marker reads as a fixstr).

API::

    Item(name, marker, fmt)         a marker byte and a big-endian payload (struct format)
    UINT8 .. UINT64, INT8 .. INT64  the fixed-width integers (cc cd ce cf, d0 d1 d2 d3)
    ARRAY16, MAP16                  a count (dc, de)
    BIN32, STR32                    a length, then that many bytes (c6, db)
    FIXEXT16                        an ext type byte, then 16 bytes (d8)
    FIXARRAY, FIXMAP, FIXSTR        the base of the one-byte forms (90, 80, a0)
    FALSE, TRUE                     c2, c3
    INTS                            marker -> Item, for any fixed-width integer

    read(buf, at, item, field, end=None, *, base=0) -> int   the payload of ``item``
    write(out, at, item, value)                     into a bytearray, in place
    pack(item, value) -> bytes
    pack_fixstr(raw) -> bytes, pack_bin32(raw) -> bytes, pack_str32(raw) -> bytes
    Cursor(buf, pos=0, end=None, *, name="buffer")  a checked sequential reader
    read_fixstr(buf, at, end, field) -> (str, next position)
    read_bin32(buf, at, end, field) -> bytes

Every error is a :class:`~b2store.errors.FormatError` naming the field (``"<field> marker"``
for a wrong marker) and the offset in ``buf``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import FormatError

__all__ = [
    "Item",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "ARRAY16",
    "MAP16",
    "BIN32",
    "STR32",
    "FIXEXT16",
    "FIXARRAY",
    "FIXMAP",
    "FIXSTR",
    "FALSE",
    "TRUE",
    "INTS",
    "read",
    "write",
    "pack",
    "pack_fixstr",
    "pack_bin32",
    "pack_str32",
    "read_fixstr",
    "read_bin32",
    "Cursor",
]


@dataclass(frozen=True)
class Item:
    """A msgpack item of one marker byte and a fixed-width big-endian payload."""

    name: str
    marker: int
    fmt: str

    @property
    def size(self) -> int:
        """Bytes of marker and payload."""
        return 1 + struct.calcsize(self.fmt)


UINT8 = Item("uint8", 0xCC, ">B")
UINT16 = Item("uint16", 0xCD, ">H")
UINT32 = Item("uint32", 0xCE, ">I")
UINT64 = Item("uint64", 0xCF, ">Q")
INT8 = Item("int8", 0xD0, ">b")
INT16 = Item("int16", 0xD1, ">h")
INT32 = Item("int32", 0xD2, ">i")
INT64 = Item("int64", 0xD3, ">q")
ARRAY16 = Item("array16", 0xDC, ">H")
MAP16 = Item("map16", 0xDE, ">H")
BIN32 = Item("bin32", 0xC6, ">I")
STR32 = Item("str32", 0xDB, ">I")
FIXEXT16 = Item("fixext16", 0xD8, ">b")  # the payload read here is the ext type
FIXARRAY, FIXMAP, FIXSTR = 0x90, 0x80, 0xA0
FALSE, TRUE = 0xC2, 0xC3
INTS = {i.marker: i for i in (UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64)}
_BINS = {0xC4: Item("bin8", 0xC4, ">B"), 0xC5: Item("bin16", 0xC5, ">H"), 0xC6: BIN32}


def _hex(byte: int) -> str:
    return f"{byte:#04x}"


def read(buf, at: int, item: Item, field: str, end: int | None = None, *, base: int = 0) -> int:
    """The payload of ``item`` at ``at``, its marker checked and its bytes inside ``end``.

    ``base``: where ``buf`` starts in the file, for the offsets errors name.
    """
    end = len(buf) if end is None else end
    if at < 0 or at + item.size > end:
        found = f"{max(end - at, 0)} bytes"
        raise FormatError(field, f"{item.size} bytes ({item.name})", found, base + at)
    if buf[at] != item.marker:
        expected = f"{_hex(item.marker)} ({item.name})"
        raise FormatError(f"{field} marker", expected, _hex(buf[at]), base + at)
    return struct.unpack_from(item.fmt, buf, at + 1)[0]


def write(out: bytearray, at: int, item: Item, value: int) -> None:
    """Write ``item`` holding ``value`` at ``at`` of ``out``."""
    out[at] = item.marker
    struct.pack_into(item.fmt, out, at + 1, value)


def pack(item: Item, value: int) -> bytes:
    return bytes([item.marker]) + struct.pack(item.fmt, value)


def pack_fixstr(raw: bytes) -> bytes:
    if len(raw) > 31:
        raise ValueError(f"a fixstr holds at most 31 bytes, not {len(raw)}: {raw!r}")
    return bytes([FIXSTR + len(raw)]) + raw


def pack_bin32(raw: bytes) -> bytes:
    return pack(BIN32, len(raw)) + bytes(raw)


def pack_str32(raw: bytes) -> bytes:
    return pack(STR32, len(raw)) + bytes(raw)


def read_fixstr(buf, at: int, end: int, field: str) -> tuple[str, int]:
    """A fixstr (a name of at most 31 UTF-8 bytes) at ``at``, and the position after it."""
    if at >= end or not FIXSTR <= buf[at] <= FIXSTR + 31:
        raise FormatError(field, "a msgpack fixstr", _hex(buf[at]) if at < end else "end", at)
    n = buf[at] - FIXSTR
    if at + 1 + n > end:
        raise FormatError(field, f"{n} bytes of name", "end of header", at)
    raw = bytes(buf[at + 1 : at + 1 + n])
    try:
        return raw.decode("utf-8"), at + 1 + n
    except UnicodeDecodeError:
        raise FormatError(field, "UTF-8", raw, at) from None


def read_bin32(buf, at: int, end: int, field: str) -> bytes:
    """The bytes of the bin32 at ``at``, which must lie inside ``[0, end)``."""
    if not 0 <= at <= end - BIN32.size or buf[at] != BIN32.marker:
        raise FormatError(f"{field} value", f"a bin32 inside [0, {end})", at, at)
    n = struct.unpack_from(BIN32.fmt, buf, at + 1)[0]
    if at + BIN32.size + n > end:
        raise FormatError(f"{field} length", f"at most {end - at - BIN32.size} bytes", n, at + 1)
    return bytes(buf[at + BIN32.size : at + BIN32.size + n])


class Cursor:
    """A sequential reader over ``buf[pos:end]`` that raises FormatError at the end instead of
    reading on; offsets in errors are positions in ``buf``. ``name`` says what ends."""

    def __init__(self, buf, pos: int = 0, end: int | None = None, *, name: str = "buffer"):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end
        self.name = name

    def take(self, n: int, field: str) -> bytes:
        if n > self.end - self.pos:
            raise FormatError(
                field, f"{n} bytes", f"{self.end - self.pos} (the {self.name} ends)", self.pos
            )
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def byte(self, field: str) -> int:
        return self.take(1, field)[0]

    def marker(self, field: str, expected: int) -> None:
        """One byte that must be ``expected`` (a fixarray of a known size, say)."""
        found = self.byte(field)
        if found != expected:
            raise FormatError(field, f"marker {_hex(expected)}", _hex(found), self.pos - 1)

    def unpack(self, fmt: str, field: str) -> int:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), field))[0]

    def item(self, item: Item, field: str) -> int:
        """``item``'s payload; a wrong marker is the field ``"<field> marker"``."""
        self.marker(f"{field} marker", item.marker)
        return self.unpack(item.fmt, field)

    def fixint(self, field: str, limit: int) -> int:
        """A positive fixint of at most ``limit``."""
        value = self.byte(field)
        if value > 0x7F:
            raise FormatError(field, "a positive fixint (0 to 127)", _hex(value), self.pos - 1)
        if value > limit:
            raise FormatError(field, f"0 to {limit}", value, self.pos - 1)
        return value

    def fixstr(self, field: str) -> str:
        name, self.pos = read_fixstr(self.buf, self.pos, self.end, field)
        return name

    def any_int(self, field: str) -> tuple[int, int]:
        """A msgpack integer in any encoding, and its offset."""
        offset = self.pos
        first = self.byte(field)
        if first <= 0x7F:
            return first, offset
        if first >= 0xE0:
            return first - 0x100, offset
        if first in INTS:
            return self.unpack(INTS[first].fmt, field), offset
        raise FormatError(field, "a msgpack integer", _hex(first), offset)

    def array_len(self, field: str) -> int:
        """The length of a msgpack array in any encoding."""
        first = self.byte(field)
        if FIXARRAY <= first <= FIXARRAY + 15:
            return first - FIXARRAY
        if first == ARRAY16.marker:
            return self.unpack(">H", field)
        if first == 0xDD:
            return self.unpack(">I", field)
        raise FormatError(field, "a msgpack array", _hex(first), self.pos - 1)

    def bin_len(self, field: str) -> int:
        """The length of a msgpack bin in any encoding (bin8, bin16, bin32)."""
        first = self.byte(field)
        if first not in _BINS:
            raise FormatError(field, "a msgpack bin", _hex(first), self.pos - 1)
        return self.unpack(_BINS[first].fmt, f"{field} length")

    def finish(self, field: str) -> None:
        """Nothing may follow."""
        if self.pos != self.end:
            raise FormatError(
                field,
                f"{self.pos} bytes",
                f"{self.end} ({self.end - self.pos} trailing bytes)",
                self.pos,
            )
