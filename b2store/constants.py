"""On-disk identifiers of the Blosc2 formats, named as python-blosc2 names them, and limits."""

from __future__ import annotations

import enum

__all__ = [
    "Codec",
    "Filter",
    "SplitMode",
    "SpecialValue",
    "MAX_FILTERS",
    "MAX_BLOCKSIZE",
    "MAX_TYPESIZE",
    "MIN_HEADER_LENGTH",
    "EXTENDED_HEADER_LENGTH",
    "MAX_DICT_SIZE",
    "MAX_BUFFERSIZE",
    "CLEVEL_BLOCK_FACTOR",
    "FRAME_MAGIC",
]


class Codec(enum.IntEnum):
    """Compressor codes (``compcode``) as stored in chunk and frame headers."""

    BLOSCLZ = 0
    LZ4 = 1
    LZ4HC = 2
    ZLIB = 4
    ZSTD = 5
    # Registered plugins: valid ids that b2store does not decode.
    NDLZ = 32
    ZFP_ACC = 33
    ZFP_PREC = 34
    ZFP_RATE = 35
    OPENHTJ2K = 36
    GROK = 37
    OPENZL = 38
    J2K = 39
    HTJ2K = 40


class Filter(enum.IntEnum):
    """Filter ids as stored in the six ``filters`` slots of an extended header."""

    NOFILTER = 0
    SHUFFLE = 1
    BITSHUFFLE = 2
    DELTA = 3
    TRUNC_PREC = 4
    NDCELL = 32
    NDMEAN = 33
    # The SIMD builds of c-blosc2 wrote this id with a flawed running sum; it is still read.
    BYTEDELTA_BUGGY = 34
    BYTEDELTA = 35
    INT_TRUNC = 36


class SplitMode(enum.IntEnum):
    """Whether a block is split into one stream per byte of the type (python-blosc2's values)."""

    ALWAYS_SPLIT = 1
    NEVER_SPLIT = 2
    AUTO_SPLIT = 3
    FORWARD_COMPAT_SPLIT = 4


class SpecialValue(enum.IntEnum):
    """The value a special chunk stands for (bits 4..6 of ``blosc2_flags``)."""

    NOT_SPECIAL = 0
    ZERO = 1
    NAN = 2
    VALUE = 3
    UNINIT = 4


# Codec "format" in bits 5..7 of the chunk flags: what the stream payloads are.
class CodecFormat(enum.IntEnum):
    BLOSCLZ = 0
    LZ4 = 1
    SNAPPY = 2
    ZLIB = 3
    ZSTD = 4
    USER = 6
    IN_SCHUNK = 7


MAX_FILTERS = 6
MIN_HEADER_LENGTH = 16
EXTENDED_HEADER_LENGTH = 32
# BLOSC2_MAXBLOCKSIZE in c-blosc2: the largest block any writer may declare.
MAX_BLOCKSIZE = 536866816
MAX_TYPESIZE = 255
MAX_DICT_SIZE = 32768
# BLOSC2_MAX_BUFFERSIZE: the most one chunk holds (its header sizes are int32, and c-blosc2
# keeps room for the largest header).
MAX_BUFFERSIZE = 2**31 - 1 - EXTENDED_HEADER_LENGTH
# c-blosc2's block size factor per clevel (its compute_blocksize and python-blosc2's default
# block shapes both scale a 32 KiB block by it), indexed by clevel 0..9.
CLEVEL_BLOCK_FACTOR = (0.25, 0.5, 1, 2, 4, 4, 8, 8, 8, 8)
# A frame header starts with a msgpack fixarray byte and then this, at bytes 1..9 of any frame.
FRAME_MAGIC = b"\xa8b2frame\x00"
