"""The chunk header: one table of field offsets, read into a frozen dataclass and written back.

Bytes 0..15 are common to Blosc1 and Blosc2; bytes 16..31 (the extended header) are present
exactly when both shuffle bits of ``flags`` are set, whatever the version byte says.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from functools import cached_property

from ..constants import (
    EXTENDED_HEADER_LENGTH,
    FRAME_MAGIC,
    MAX_BLOCKSIZE,
    MAX_FILTERS,
    MAX_TYPESIZE,
    MIN_HEADER_LENGTH,
    Codec,
    CodecFormat,
    Filter,
    SpecialValue,
)
from ..errors import FormatError, UnsupportedError

__all__ = ["ChunkHeader", "ChunkInfo", "FLAGS", "BLOSC2_FLAGS"]

# The header layout, field by field (spec: chunk-format.rst): bytes 0..15 are
# version, versionlz, flags, typesize, nbytes, blocksize, cbytes; bytes 16..31 are
# filters[6], udcodec, compcode_meta, filters_meta[6], blosc2_flags2, blosc2_flags.
_BASE = struct.Struct("<BBBBiii")
_EXTENDED = struct.Struct("<6BBB6BBB")


class FLAGS:
    """Bits of header byte 2."""

    SHUFFLE = 0x01
    MEMCPYED = 0x02
    BITSHUFFLE = 0x04
    DELTA = 0x08  # only meaningful with a 16-byte header
    DONT_SPLIT = 0x10
    EXTENDED = SHUFFLE | BITSHUFFLE


class BLOSC2_FLAGS:
    """Bits of header byte 31."""

    USE_DICT = 0x01
    BIG_ENDIAN = 0x02  # the writer was big-endian; header integers are LE all the same
    LAZY = 0x08  # in-memory lazy chunks only
    INSTR_CODEC = 0x80  # instrumentation records instead of data


VL_BLOCKS = 0x01  # bit 0 of blosc2_flags2
_FORMAT_CODEC = {
    CodecFormat.BLOSCLZ: Codec.BLOSCLZ,
    CodecFormat.LZ4: Codec.LZ4,
    CodecFormat.ZLIB: Codec.ZLIB,
    CodecFormat.ZSTD: Codec.ZSTD,
}
# c-blosc1 never split a block of more than 16-byte items or of fewer than 128 items, with
# or without the dont_split flag (which writers before 1.11 never set).
_BLOSC1_MAX_SPLITS = 16
_BLOSC1_MIN_ITEMS = 128
LAST_BLOSC1_VERSION = 2
LAST_KNOWN_VERSION = 6
# Versions above LAST_KNOWN_VERSION are read as c-blosc2 reads them (while they add no unknown
# flags); but the format has reached 6 in fifteen years, so a first byte past this is not a
# chunk from a newer writer: it is text (32..126), a frame (0x9e) or other bytes.
MAX_PLAUSIBLE_VERSION = 15


def _enum_or_int(enum_type, value: int):
    try:
        return enum_type(value)
    except ValueError:
        return value


@dataclass(frozen=True)
class ChunkHeader:
    """The raw fields of a chunk header, as stored.

    ``filters`` and ``filters_meta`` are the six extended-header slots (zeros for a 16-byte
    header); :attr:`pipeline` gives the filters a decoder must undo.
    """

    version: int
    versionlz: int
    flags: int
    typesize: int
    nbytes: int
    blocksize: int
    cbytes: int
    filters: tuple[int, ...] = (0,) * MAX_FILTERS
    udcodec: int = 0
    compcode_meta: int = 0
    filters_meta: tuple[int, ...] = (0,) * MAX_FILTERS
    blosc2_flags2: int = 0
    blosc2_flags: int = 0

    # --- reading and writing ---------------------------------------------------------------

    @classmethod
    def from_bytes(cls, buf, *, available: int | None = None) -> ChunkHeader:
        """Parse and check the header at the start of ``buf`` (at least 16 bytes).

        ``available`` is how many bytes the chunk has where it is stored, when ``buf`` holds
        only its first bytes (default: ``len(buf)``); ``cbytes`` must not exceed it.
        """
        mv = memoryview(buf).cast("B")
        try:
            if len(mv) >= EXTENDED_HEADER_LENGTH:
                # Headers are immutable, and parsing one (with its derived fields) costs more
                # than a small read: a chunk read again (another open of the file, a zarr
                # chunk decoded twice) reuses it. The key holds every byte a header can span.
                key = mv[:EXTENDED_HEADER_LENGTH].tobytes()
                return _parsed(key, len(mv) if available is None else available)
            return cls._parse(mv, available)
        except FormatError as exc:
            exc.of_chunk = True  # (the frame's reader names the chunk: decoder.in_chunk)
            raise

    @classmethod
    def _parse(cls, mv, available: int | None) -> ChunkHeader:
        if mv[1 : 1 + len(FRAME_MAGIC)] == FRAME_MAGIC:
            # HDF5's Blosc2 filter and PyTables store each HDF5 chunk as a whole frame.
            raise FormatError(
                "chunk header", "a Blosc chunk", "a Blosc2 frame: open it with b2store.open", 0
            )
        if len(mv) < MIN_HEADER_LENGTH:
            raise FormatError(
                "chunk header", f"at least {MIN_HEADER_LENGTH} bytes", f"{len(mv)} bytes", 0
            )
        version, versionlz, flags, typesize, nbytes, blocksize, cbytes = _BASE.unpack_from(mv)
        extended = flags & FLAGS.EXTENDED == FLAGS.EXTENDED
        if extended:
            if len(mv) < EXTENDED_HEADER_LENGTH:
                raise FormatError(
                    "extended chunk header",
                    f"{EXTENDED_HEADER_LENGTH} bytes (both shuffle bits are set)",
                    f"{len(mv)} bytes",
                    0,
                )
            ext = _EXTENDED.unpack_from(mv, MIN_HEADER_LENGTH)
            header = cls(
                version,
                versionlz,
                flags,
                typesize,
                nbytes,
                blocksize,
                cbytes,
                filters=tuple(ext[0:6]),
                udcodec=ext[6],
                compcode_meta=ext[7],
                filters_meta=tuple(ext[8:14]),
                blosc2_flags2=ext[14],
                blosc2_flags=ext[15],
            )
        else:
            header = cls(version, versionlz, flags, typesize, nbytes, blocksize, cbytes)
        header._check(len(mv) if available is None else available)
        return header

    def to_bytes(self) -> bytes:
        """The header as stored: 16 bytes, or 32 when both shuffle bits are set."""
        base = _BASE.pack(
            self.version,
            self.versionlz,
            self.flags,
            self.typesize,
            self.nbytes,
            self.blocksize,
            self.cbytes,
        )
        if not self.extended:
            return base
        return base + _EXTENDED.pack(
            *self.filters,
            self.udcodec,
            self.compcode_meta,
            *self.filters_meta,
            self.blosc2_flags2,
            self.blosc2_flags,
        )

    def _check(self, buflen: int) -> None:
        if not 0 < self.version <= MAX_PLAUSIBLE_VERSION:
            raise FormatError(
                "version",
                f"a chunk format version from 1 to {LAST_KNOWN_VERSION} (is this a Blosc chunk?)",
                self.version,
                0,
            )
        if self.codec_format in (5, CodecFormat.IN_SCHUNK):
            # 5 was never assigned; 7 ("codec in super-chunk") only ever lives in memory.
            raise FormatError(
                "flags", "a codec format of 0-4 or 6 in bits 5-7", self.codec_format, 2
            )
        if self.typesize == 0:
            raise FormatError("typesize", "1..255", 0, 3)
        if self.nbytes < 0:
            raise FormatError("nbytes", "a size >= 0", self.nbytes, 4)
        if self.cbytes < self.header_size:
            raise FormatError(
                "cbytes", f"at least the {self.header_size}-byte header", self.cbytes, 12
            )
        if self.cbytes > buflen:
            raise FormatError(
                "cbytes",
                f"at most the {buflen} bytes available (truncated chunk?)",
                self.cbytes,
                12,
            )
        if self.extended:
            if self.blosc2_flags & BLOSC2_FLAGS.INSTR_CODEC:
                raise UnsupportedError("instrumented chunk (blosc2_flags bit 7)", self.blosc2_flags)
            special = (self.blosc2_flags >> 4) & 7
            if special > SpecialValue.UNINIT:
                raise FormatError("blosc2_flags", "a special value 0..4 in bits 4-6", special, 31)
            if self.vl_blocks and (special or self.memcpyed):
                raise FormatError(
                    "blosc2_flags2",
                    "no VL blocks in a memcpyed or special chunk",
                    hex(self.blosc2_flags2),
                    30,
                )
            if special:
                self._check_special_size(SpecialValue(special))
        if self.blocksize <= 0 and (self.nbytes > 0 and not self.special):
            raise FormatError("blocksize", "a size > 0", self.blocksize, 8)
        # A special chunk decodes no block: c-blosc2 writes its blocksize as the chunk's size,
        # past the largest block for a chunk over 512 MiB (python-blosc2's zeros of 1 GiB
        # chunks), and fills the value whatever it says.
        if self.blocksize > MAX_BLOCKSIZE and not self.special:
            raise FormatError("blocksize", f"at most {MAX_BLOCKSIZE}", self.blocksize, 8)
        if self.version > LAST_KNOWN_VERSION and (
            not self.extended or self.blosc2_flags2 & ~VL_BLOCKS
        ):
            # A plausible header from a newer writer: c-blosc2 reads newer versions only while
            # they add no unknown flags.
            raise UnsupportedError("chunk format version", self.version)

    def _check_special_size(self, special: SpecialValue) -> None:
        """A special chunk is its header alone, plus one item for a repeated value (what
        c-blosc2 writes and checks). A special flag on a chunk whose cbytes says it holds
        streams is a lie: believed, it would turn the chunk's data into the special value."""
        value_size = self.cbytes - EXTENDED_HEADER_LENGTH
        if special != SpecialValue.VALUE:
            if value_size:
                raise FormatError(
                    "cbytes",
                    f"exactly the {EXTENDED_HEADER_LENGTH}-byte header for a special "
                    f"{special.name.lower()} chunk (blosc2_flags 0x{self.blosc2_flags:02x} at "
                    "offset 31)",
                    self.cbytes,
                    12,
                )
            return
        # The header's typesize byte says 1 for items wider than it can hold (c-blosc2 caps
        # it), so the value may then be any wider size; otherwise it is one item. Such a
        # chunk is only ever built as c-blosc2's repeatval and b2store's special_chunk build
        # it: flags 0x05 (no codec, memcpy or split bits) and no filters, which a real
        # chunk of streams with the flag set on it hardly ever has.
        wide = (
            self.typesize == 1
            and value_size > MAX_TYPESIZE
            and self.flags == FLAGS.EXTENDED
            and not any(self.filters)
        )
        if value_size != self.typesize and not wide:
            raise FormatError(
                "cbytes",
                f"the {EXTENDED_HEADER_LENGTH}-byte header plus one {self.typesize}-byte value "
                f"for a special repeated-value chunk (blosc2_flags 0x{self.blosc2_flags:02x} at "
                "offset 31)",
                self.cbytes,
                12,
            )
        if self.nbytes % value_size:
            raise FormatError(
                "nbytes",
                f"a multiple of the value size {value_size} (a special repeated-value chunk)",
                self.nbytes,
                4,
            )

    # --- what the fields mean ----------------------------------------------------------------

    @cached_property
    def extended(self) -> bool:
        return self.flags & FLAGS.EXTENDED == FLAGS.EXTENDED

    @cached_property
    def header_size(self) -> int:
        return EXTENDED_HEADER_LENGTH if self.extended else MIN_HEADER_LENGTH

    @cached_property
    def memcpyed(self) -> bool:
        return bool(self.flags & FLAGS.MEMCPYED)

    @cached_property
    def dont_split(self) -> bool:
        return bool(self.flags & FLAGS.DONT_SPLIT)

    @cached_property
    def vl_blocks(self) -> bool:
        return self.extended and bool(self.blosc2_flags2 & VL_BLOCKS)

    @property
    def use_dict(self) -> bool:
        return self.extended and bool(self.blosc2_flags & BLOSC2_FLAGS.USE_DICT)

    @property
    def big_endian(self) -> bool:
        return self.extended and bool(self.blosc2_flags & BLOSC2_FLAGS.BIG_ENDIAN)

    @cached_property
    def special(self) -> SpecialValue:
        if not self.extended:
            return SpecialValue.NOT_SPECIAL
        return SpecialValue((self.blosc2_flags >> 4) & 7)

    @property
    def codec_format(self) -> int:
        return self.flags >> 5

    @property
    def codec(self) -> Codec | int:
        """The compressor, as a :class:`Codec` where b2store knows the id."""
        fmt = self.codec_format
        if fmt == CodecFormat.USER:
            return _enum_or_int(Codec, self.udcodec)
        if fmt == CodecFormat.LZ4 and self.extended and self.udcodec == Codec.LZ4HC:
            # The two share a bitstream; c-blosc2 3.x records which one wrote it in byte 22.
            return Codec.LZ4HC
        if fmt == CodecFormat.SNAPPY:
            return 3  # the retired snappy compcode
        return _FORMAT_CODEC.get(fmt, fmt)

    @property
    def pipeline(self) -> tuple[int, ...]:
        """The six filter slots a decoder undoes, last slot first."""
        if not self.extended:
            # A 16-byte header carries its filters as flag bits (c-blosc2 flags_to_filters).
            slots = [0] * MAX_FILTERS
            if self.flags & FLAGS.SHUFFLE:
                slots[5] = Filter.SHUFFLE
            elif self.flags & FLAGS.BITSHUFFLE:
                slots[5] = Filter.BITSHUFFLE
            if self.flags & FLAGS.DELTA:
                slots[4] = Filter.DELTA
            return tuple(slots)
        if self.version == 3:
            # The 2.0 alpha had five filter slots; the sixth byte meant something else.
            return self.filters[:5] + (0,)
        return self.filters

    @property
    def pipeline_meta(self) -> tuple[int, ...]:
        if self.extended and self.version == 3:
            return self.filters_meta[:5] + (0,)
        return self.filters_meta

    @cached_property
    def effective_blocksize(self) -> int:
        """Block size in bytes; a header blocksize beyond nbytes means one short block."""
        if self.vl_blocks:
            raise AttributeError("VL-block chunks have no fixed block size")
        return min(self.blocksize, self.nbytes) if self.nbytes else 0

    @cached_property
    def nblocks(self) -> int:
        if self.vl_blocks:
            return self.blocksize
        bs = self.effective_blocksize
        return -(-self.nbytes // bs) if bs else 0

    def splits(self, bsize: int) -> bool:
        """Whether a block of ``bsize`` bytes is stored as ``typesize`` streams."""
        if self.vl_blocks or self.dont_split and self.version > LAST_BLOSC1_VERSION:
            return False
        if bsize != self.effective_blocksize or self.typesize == 1:
            return False  # a short last block is never split
        if self.version <= LAST_BLOSC1_VERSION:
            return (
                not self.dont_split
                and self.typesize <= _BLOSC1_MAX_SPLITS
                and bsize // self.typesize >= _BLOSC1_MIN_ITEMS
            )
        return True

    def info(self) -> ChunkInfo:
        special = self.special
        regular = not self.memcpyed and not special and self.nbytes > 0
        return ChunkInfo(
            version=self.version,
            versionlz=self.versionlz,
            nbytes=self.nbytes,
            cbytes=self.cbytes,
            blocksize=self.blocksize,
            typesize=self.typesize,
            codec=self.codec,
            clevel=None,
            filters=tuple(_enum_or_int(Filter, f) for f in self.pipeline),
            filters_meta=self.pipeline_meta,
            split=regular and not self.vl_blocks and self.splits(self.effective_blocksize),
            memcpyed=self.memcpyed,
            special=special,
            use_dict=self.use_dict,
            vl_blocks=self.vl_blocks,
            nblocks=self.nblocks if not special else 0,
            header_size=self.header_size,
            compcode_meta=self.compcode_meta,
            big_endian=self.big_endian,
        )


@dataclass(frozen=True)
class ChunkInfo:
    """Everything a chunk header says, in the spec's terms (see :func:`b2store.chunk_info`).

    ``clevel`` is ``None``: a chunk does not record it (a frame header does). ``blocksize``
    is the number of blocks for a VL-block chunk, as stored. ``split`` says whether full
    blocks are stored as one stream per byte of the type.
    """

    version: int
    versionlz: int
    nbytes: int
    cbytes: int
    blocksize: int
    typesize: int
    codec: Codec | int
    clevel: int | None
    filters: tuple
    filters_meta: tuple[int, ...]
    split: bool
    memcpyed: bool
    special: SpecialValue
    use_dict: bool
    vl_blocks: bool
    nblocks: int
    header_size: int
    compcode_meta: int
    big_endian: bool


@functools.lru_cache(maxsize=256)
def _parsed(head: bytes, available: int) -> ChunkHeader:
    return ChunkHeader._parse(memoryview(head), available)
