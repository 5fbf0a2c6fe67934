"""The frame header: its fixed fields (one offset table), the fixed metalayers, and the
older 2.0-beta layouts (11, 12 or 13 fields) that current c-blosc2 no longer reads.

All integers are msgpack with fixed-width markers, big-endian, at fixed offsets: c-blosc2
reads and rewrites them in place, so b2store does too.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from ..chunk.params import (
    ChunkParams,
    parse_blocksize,
    parse_clevel,
    parse_codec,
    parse_filters,
    parse_typesize,
)
from ..constants import FRAME_MAGIC, MAX_BLOCKSIZE, MAX_FILTERS
from ..errors import FormatError, UnsupportedError
from . import wire
from .sniff import NotBlosc2Error, looks_like

__all__ = ["FrameHeader", "MAGIC", "HEADER_FIXED_LEN", "MAX_METALAYERS"]

# The fixstr "b2frame\0" at bytes 1..9 of every frame (b2store.constants holds it once).
MAGIC = FRAME_MAGIC
# The 14-field header (every c-blosc2 since 2.0.0-rc1) has 87 fixed bytes.
HEADER_FIXED_LEN = 87
MAX_METALAYERS = 16
MAX_METALAYER_NAME = 31
# frame_type byte
CONTIGUOUS, SPARSE = 0, 1
# general_flags bits
VERSION_MASK = 0x0F
OFFSETS_64BIT = 0x10
VARIABLE_CHUNKS = 0x40
VL_BLOCKS = 0x80
LAST_FRAME_VERSION = 3
# Chunk offsets are int64, so no frame is longer (frame_len itself is a uint64).
MAX_FRAME_LEN = 2**63 - 1


@dataclass(frozen=True)
class _Layout:
    """Where each fixed field sits: the offset of its msgpack item, and the item."""

    nfields: int
    fields: dict[str, tuple[int, wire.Item]]
    filters_at: int | None  # offset of the 16-byte filter pipeline extension, if any
    metalayers_at: int


_MODERN = _Layout(
    nfields=14,
    fields={
        "header_len": (10, wire.INT32),
        "frame_len": (15, wire.UINT64),
        "nbytes": (29, wire.INT64),
        "cbytes": (38, wire.INT64),
        "typesize": (47, wire.INT32),
        "blocksize": (52, wire.INT32),
        "chunksize": (57, wire.INT32),
        "nthreads_comp": (62, wire.INT16),
        "nthreads_decomp": (65, wire.INT16),
    },
    filters_at=69,
    metalayers_at=HEADER_FIXED_LEN,
)
# 2.0.0 betas: no blocksize (an int32 item, 5 bytes), so every field after it sits 5 bytes
# earlier.
_BLOCKSIZE_AT = _MODERN.fields["blocksize"][0]
_BETA = {
    name: (at - 5 if at > _BLOCKSIZE_AT else at, item)
    for name, (at, item) in _MODERN.fields.items()
    if name != "blocksize"
}
_LAYOUTS = {
    wire.FIXARRAY + 14: _MODERN,
    wire.FIXARRAY + 13: _Layout(13, _BETA, filters_at=64, metalayers_at=82),
    wire.FIXARRAY + 12: _Layout(12, _BETA, filters_at=None, metalayers_at=64),
    wire.FIXARRAY + 11: _Layout(11, _BETA, filters_at=None, metalayers_at=64),
}
# ChunkParams's fields a header records, and the header's names for them.
_PARAMS_FIELDS = (
    ("codec", "compcode"),
    ("clevel", "clevel"),
    ("typesize", "typesize"),
    ("filters", "filters"),
    ("filters_meta", "filters_meta"),
    ("splitmode", "splitmode"),
    ("blocksize", "blocksize"),
    ("codec_meta", "compcode_meta"),
)
# The flags: a fixstr of 4 bytes (general, frame type, codec, other) at 24.
_FLAGS_AT = 24
_HAS_VLMETA_AT = {14: 68, 13: 63, 12: 63, 11: 63}


def _check_lengths(layout: _Layout, header_len: int, frame_len: int) -> None:
    """Refuse lengths no frame has, before anything is read by them (a negative header_len
    would reach a read as a negative size)."""
    if frame_len > MAX_FRAME_LEN:
        raise FormatError("frame_len", f"at most {MAX_FRAME_LEN} (an int64)", frame_len, 16)
    fixed = layout.metalayers_at
    if not fixed <= header_len <= frame_len:
        raise FormatError("header_len", f"{fixed}..frame_len={frame_len}", header_len, 11)


def _frame_start(mv) -> bool:
    """Whether ``mv`` begins as a frame does (all of it, when shorter than the magic): a
    header array marker, then the magic. A frame cut short still begins like one."""
    if not len(mv) or mv[0] not in _LAYOUTS:
        return False
    seen = bytes(mv[1 : 1 + len(MAGIC)])
    return seen == MAGIC[: len(seen)]


def _need(buf, end: int, what: str, at: int) -> None:
    if len(buf) < end:
        raise FormatError(what, f"{end} bytes of frame header", f"{len(buf)} bytes", at)


@dataclass(frozen=True)
class FrameHeader:
    """The fixed fields of a frame header, and its metalayers (name -> content bytes)."""

    header_len: int
    frame_len: int
    general_flags: int
    frame_type: int
    codec_flags: int
    other_flags: int
    nbytes: int
    cbytes: int
    typesize: int
    blocksize: int
    chunksize: int
    nthreads_comp: int = 1
    nthreads_decomp: int = 1
    has_vlmeta: bool = False
    filters: tuple[int, ...] = (0,) * MAX_FILTERS
    udcodec: int = 0
    compcode_meta: int = 0
    filters_meta: tuple[int, ...] = (0,) * MAX_FILTERS
    other_flags2: int = 0
    metalayers: dict[str, bytes] = field(default_factory=dict, compare=False)
    nfields: int = 14

    # --- reading -----------------------------------------------------------------------------

    @classmethod
    def peek_len(cls, buf) -> tuple[int, int]:
        """``(header_len, frame_len)`` from the first bytes of a frame (24 suffice)."""
        mv = memoryview(buf)
        if not _frame_start(mv):
            # Not a damaged frame but another kind of file: say so before any field.
            raise NotBlosc2Error(
                looks_like(bytes(mv)), "frame magic", repr(MAGIC), bytes(mv[1:10]), 1
            )
        _need(mv, 24, "frame header", 0)
        layout = cls._layout(mv)
        header_len = cls._read(mv, layout, "header_len")
        frame_len = cls._read(mv, layout, "frame_len")
        _check_lengths(layout, header_len, frame_len)
        return header_len, frame_len

    @staticmethod
    def _layout(mv) -> _Layout:
        if bytes(mv[1:10]) != MAGIC:
            raise FormatError("frame magic", repr(MAGIC), bytes(mv[1:10]), 1)
        layout = _LAYOUTS.get(mv[0])
        if layout is None:
            raise FormatError("frame header", "a msgpack array of 11 to 14 fields", hex(mv[0]), 0)
        return layout

    @staticmethod
    def _read(mv, layout: _Layout, name: str) -> int:
        at, item = layout.fields[name]
        return wire.read(mv, at, item, name)

    @classmethod
    def from_bytes(cls, buf) -> FrameHeader:
        """Parse and check a whole header (``header_len`` bytes, or more)."""
        if type(buf) is bytes and len(buf) <= _PARSED_MAX and cls is FrameHeader:
            # Headers are immutable (their metalayers dict is replaced, never changed in
            # place), so a file opened again, as dask tasks and xarray reads do, reuses one.
            return _parsed(buf)
        return cls._parse(buf)

    @classmethod
    def _parse(cls, buf) -> FrameHeader:
        mv = memoryview(buf).cast("B")
        _need(mv, 24, "frame header", 0)
        layout = cls._layout(mv)
        _need(mv, layout.metalayers_at, "frame header", 0)
        values = {name: cls._read(mv, layout, name) for name in layout.fields}
        values.setdefault("blocksize", 0)
        if mv[_FLAGS_AT] != wire.FIXSTR + 4:
            raise FormatError(
                "flags marker", "0xa4 (a 4-byte string)", hex(mv[_FLAGS_AT]), _FLAGS_AT
            )
        general_flags, frame_type, codec_flags, other_flags = mv[_FLAGS_AT + 1 : _FLAGS_AT + 5]
        vl_at = _HAS_VLMETA_AT[layout.nfields]
        if mv[vl_at] not in (wire.FALSE, wire.TRUE):
            raise FormatError("has_vlmeta", "a msgpack bool", hex(mv[vl_at]), vl_at)
        extra = {}
        if layout.nfields == 14:
            ext = bytes(mv[71:87])
            extra = dict(
                filters=tuple(ext[0:6]),
                udcodec=ext[6],
                compcode_meta=ext[7],
                filters_meta=tuple(ext[8:14]),
                other_flags2=ext[14],
            )
        elif layout.nfields == 13:
            frame_type = 0  # byte 26 held filter flags then; sparse frames came later
        header = cls(
            general_flags=general_flags,
            frame_type=frame_type,
            codec_flags=codec_flags,
            other_flags=other_flags,
            has_vlmeta=mv[vl_at] == 0xC3,
            nfields=layout.nfields,
            **values,
            **extra,
        )
        header._check(len(mv))
        _need(mv, header.header_len, "frame header", 0)
        metalayers = _read_metalayers(mv, layout.metalayers_at, header.header_len)
        object.__setattr__(header, "metalayers", metalayers)
        return header

    def _check(self, available: int) -> None:
        version = self.general_flags & VERSION_MASK
        if self.nfields == 14 and not 1 <= version <= LAST_FRAME_VERSION:
            raise UnsupportedError("frame format version", version)
        _check_lengths(_LAYOUTS[0x90 + self.nfields], self.header_len, self.frame_len)
        if self.frame_type not in (CONTIGUOUS, SPARSE):
            raise UnsupportedError("frame type", self.frame_type)
        if self.nbytes < 0 or self.cbytes < 0:
            raise FormatError("nbytes/cbytes", "sizes >= 0", (self.nbytes, self.cbytes), 30)
        if self.frame_type == CONTIGUOUS and self.header_len + self.cbytes > self.frame_len:
            raise FormatError(
                "cbytes", f"chunks inside the frame (frame_len {self.frame_len})", self.cbytes, 39
            )
        if self.typesize < 1:
            raise FormatError("typesize", "a size >= 1", self.typesize, 48)
        if self.chunksize < -1:
            raise FormatError(
                "chunksize", "-1 (no chunk yet), 0 (variable) or a size", self.chunksize, 58
            )

    # --- what the fields mean --------------------------------------------------------------------

    @property
    def version(self) -> int:
        return self.general_flags & VERSION_MASK

    @property
    def contiguous(self) -> bool:
        return self.frame_type == CONTIGUOUS

    @property
    def compcode(self) -> int:
        code = self.codec_flags & 0x0F
        # Codes past the nibble's built-ins are in the udcodec byte.
        return self.udcodec if code >= 6 and self.nfields == 14 else code

    @property
    def clevel(self) -> int:
        return self.codec_flags >> 4

    @property
    def splitmode(self) -> int:
        return (self.other_flags & 0x03) + 1

    @property
    def use_dict(self) -> bool:
        return bool(self.other_flags2 & 0x01)

    def params(self, blockshape=None) -> ChunkParams:
        """The parameters the header gives new chunks (the stored ones each say their own,
        in their own header). Values no chunk can be written with (a codec or filter id
        c-blosc2 does not know, a clevel past 9, a blocksize out of range) are a
        :class:`FormatError` naming the field: python-blosc2 reads such a frame, and so do
        b2store's readers, which never ask for these; the writers that do refuse it."""
        values = {field: getattr(self, name) for field, name in _PARAMS_FIELDS}
        try:
            return ChunkParams(**values, blockshape=blockshape)
        except (ValueError, TypeError, UnsupportedError):
            pass
        udcodec = self.nfields == 14 and self.codec_flags & 0x0F >= 6
        known = "ids c-blosc2 knows"
        for name, at, parse, expected in (
            ("codec", 77 if udcodec else 27, parse_codec, f"a codec of the {known}"),
            ("clevel", 27, parse_clevel, "0..9"),
            ("typesize", 48, parse_typesize, f"1..{MAX_BLOCKSIZE}"),
            ("filters", 71, lambda f: parse_filters(f, self.filters_meta), f"filter {known}"),
            ("blocksize", 53, parse_blocksize, f"0..{MAX_BLOCKSIZE}"),
        ):
            try:
                parse(values[name])
            except (ValueError, TypeError, UnsupportedError):
                raise FormatError(
                    name, f"{expected} (what new chunks are written with)", values[name], at
                ) from None
        return ChunkParams(**values, blockshape=blockshape)  # (the error names its field)

    def with_fields(self, **changes) -> FrameHeader:
        new = replace(self, **changes)
        object.__setattr__(new, "metalayers", changes.get("metalayers", self.metalayers))
        return new

    # --- writing -----------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The 14-field header with its metalayers, as c-blosc2 writes it."""
        if self.nfields != 14:
            raise UnsupportedError("writing a frame header of", f"{self.nfields} fields")
        meta_block = _metalayers_bytes(self.metalayers, HEADER_FIXED_LEN)
        header_len = HEADER_FIXED_LEN + len(meta_block)
        out = bytearray(HEADER_FIXED_LEN)
        out[0] = wire.FIXARRAY + 14
        out[1:10] = MAGIC
        values = {f.name: getattr(self, f.name) for f in self.__dataclass_fields__.values()}
        values["header_len"] = header_len
        for name, (at, item) in _MODERN.fields.items():
            wire.write(out, at, item, values[name])
        out[_FLAGS_AT] = wire.FIXSTR + 4
        out[_FLAGS_AT + 1 : _FLAGS_AT + 5] = bytes(
            [self.general_flags, self.frame_type, self.codec_flags, self.other_flags]
        )
        out[68] = wire.TRUE if self.has_vlmeta else wire.FALSE
        # The filter pipeline: a fixext16 whose ext type c-blosc2 sets to MAX_FILTERS.
        wire.write(out, 69, wire.FIXEXT16, MAX_FILTERS)
        out[71:77] = bytes(self.filters)
        out[77], out[78] = self.udcodec, self.compcode_meta
        out[79:85] = bytes(self.filters_meta)
        out[85], out[86] = self.other_flags2, 0
        return bytes(out) + meta_block


def _read_metalayers(mv, at: int, header_len: int) -> dict[str, bytes]:
    """The fixed metalayers: ``[index_len, {name: offset}, [bin32 values]]`` whose offsets
    are absolute (from the frame's start)."""
    if header_len <= at:
        return {}
    cur = wire.Cursor(mv, at, header_len, name="header")
    return read_named_index(cur, "metalayers", MAX_METALAYERS, "metalayer")


def read_named_index(cur: wire.Cursor, field: str, most: int, what: str) -> dict[str, bytes]:
    """The index at ``cur``, ``[index_len, {name: offset}, ...]``, of at most ``most``
    entries, and the bin32 values it names: the layout of both the metalayers (``field``
    "metalayers", in the header) and the vlmetalayers ("vlmeta", in the trailer)."""
    cur.marker(f"{field} index", wire.FIXARRAY + 3)
    # The index length: implied by what follows (headers and trailers count it differently).
    cur.item(wire.UINT16, f"{field} index")
    count = cur.item(wire.MAP16, f"{field} count")
    if count > most:
        raise FormatError(f"{field} count", f"at most {most}", count, cur.pos - 2)
    return read_named_values(cur, count, what)


def read_named_values(cur: wire.Cursor, count: int, what: str) -> dict[str, bytes]:
    """``count`` index entries (a fixstr name, an int32 offset in ``cur.buf``), each naming a
    bin32 value before ``cur.end``: the layout of both metalayers and vlmetalayers."""
    values: dict[str, bytes] = {}
    for k in range(count):
        name = cur.fixstr(f"{what} {k} name")
        offset = cur.item(wire.INT32, f"{what} {name!r} offset")
        values[name] = wire.read_bin32(cur.buf, offset, cur.end, f"{what} {name!r}")
    return values


def named_values_bytes(
    values: dict[str, bytes], limit: int, what: str, entries_at: int
) -> tuple[bytes, bytes]:
    """The index entries and the values array (the layout :func:`read_named_values` reads)
    for entries starting at offset ``entries_at``, the values array right after them."""
    if len(values) > limit:
        raise ValueError(f"at most {limit} {what}s, got {len(values)}")
    names = [n.encode() for n in values]
    for n in names:
        if len(n) > MAX_METALAYER_NAME:
            raise ValueError(f"{what} names are at most {MAX_METALAYER_NAME} bytes: {n!r}")
    values_at = entries_at + sum(1 + len(n) + wire.INT32.size for n in names)
    entries = bytearray()
    array = bytearray(wire.pack(wire.ARRAY16, len(names)))
    for name, content in zip(names, values.values()):
        entries += wire.pack_fixstr(name) + wire.pack(wire.INT32, values_at + len(array))
        array += wire.pack_bin32(content)
    return bytes(entries), bytes(array)


def _metalayers_bytes(metalayers: dict[str, bytes], at: int) -> bytes:
    """The metalayers index and values starting at absolute offset ``at`` (c-blosc2 writes
    the empty index too when there are none)."""
    # 93 cd <index_len, counted from the 0x93 byte to the values> de <count>, entries
    head_len = 1 + wire.UINT16.size + wire.MAP16.size
    entries, array = named_values_bytes(metalayers, MAX_METALAYERS, "metalayer", at + head_len)
    head = (
        bytes([wire.FIXARRAY + 3])
        + wire.pack(wire.UINT16, head_len + len(entries))
        + wire.pack(wire.MAP16, len(metalayers))
    )
    return head + entries + array


# Headers parsed recently, by their bytes (up to this long each).
_PARSED_MAX = 1 << 14
_parsed = functools.lru_cache(maxsize=64)(FrameHeader._parse)
