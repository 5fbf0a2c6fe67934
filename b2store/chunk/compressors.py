"""Stream codecs: decode one compressed stream into a buffer of known size.

Each decoder takes the payload and a writable uint8 array of exactly the size the stream must
inflate to, and raises :class:`FormatError` unless the payload inflates to exactly that.
BloscLZ is b2store's own Cython decoder; LZ4, zlib and Zstd use the lz4, zlib and zstandard
packages.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import lz4.block
import numpy as np
import zstandard

from .. import _blosclz
from ..constants import Codec, CodecFormat
from ..errors import FormatError, UnsupportedError

__all__ = ["StreamDecoder", "stream_decoder"]

StreamDecoder = Callable[[memoryview, np.ndarray], None]


def _bad(what: str, expected: str, found) -> FormatError:
    return FormatError(what, expected, found)


def _blosclz_decoder(dictionary: bytes | None) -> StreamDecoder:
    if dictionary is not None:
        raise FormatError("blosc2_flags", "no dictionary with BloscLZ", "USE_DICT set", 31)

    def decode(payload: memoryview, target: np.ndarray) -> None:
        n = _blosclz.decompress(payload, target)
        if n != len(target):
            raise _bad("BloscLZ stream", f"to inflate to {len(target)} bytes",
                       "a corrupt stream" if n < 0 else f"{n} bytes")  # fmt: skip

    return decode


def _lz4_decoder(dictionary: bytes | None) -> StreamDecoder:
    extra = {"dict": dictionary} if dictionary is not None else {}

    def decode(payload: memoryview, target: np.ndarray) -> None:
        try:
            out = lz4.block.decompress(payload, uncompressed_size=len(target), **extra)
        except lz4.block.LZ4BlockError as exc:
            raise _bad("LZ4 stream", f"a valid block inflating to {len(target)} bytes", exc) from None
        if len(out) != len(target):
            raise _bad("LZ4 stream", f"to inflate to {len(target)} bytes", f"{len(out)} bytes")
        target[:] = np.frombuffer(out, np.uint8)

    return decode


def _zlib_decoder(dictionary: bytes | None) -> StreamDecoder:
    if dictionary is not None:
        raise FormatError("blosc2_flags", "no dictionary with zlib", "USE_DICT set", 31)

    def decode(payload: memoryview, target: np.ndarray) -> None:
        size = len(target)
        d = zlib.decompressobj()
        try:
            # max_length bounds the allocation by the block, whatever the stream claims.
            out = d.decompress(payload, size)
            surplus = b"" if d.eof else d.decompress(d.unconsumed_tail, 1)
        except zlib.error as exc:
            raise _bad("zlib stream", f"a valid stream inflating to {size} bytes", exc) from None
        if len(out) != size or surplus or (not d.eof and d.unconsumed_tail):
            raise _bad("zlib stream", f"to inflate to exactly {size} bytes",
                       f"{len(out)} bytes{' or more' if surplus else ''}")  # fmt: skip
        target[:] = np.frombuffer(out, np.uint8)

    return decode


def _zstd_decoder(dictionary: bytes | None) -> StreamDecoder:
    if dictionary is not None:
        dctx = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(dictionary))
    else:
        dctx = zstandard.ZstdDecompressor()

    def decode(payload: memoryview, target: np.ndarray) -> None:
        size = len(target)
        try:
            declared = zstandard.frame_content_size(payload)
            if declared not in (-1, size):
                # Refuse before zstandard allocates what a hostile frame header asks for.
                raise _bad("Zstd frame content size", f"{size} (the stream's size)", declared)
            out = dctx.decompress(payload, max_output_size=size)
        except zstandard.ZstdError as exc:
            raise _bad("Zstd stream", f"a valid frame inflating to {size} bytes", exc) from None
        if len(out) != size:
            raise _bad("Zstd stream", f"to inflate to {size} bytes", f"{len(out)} bytes")
        target[:] = np.frombuffer(out, np.uint8)

    return decode


_BY_FORMAT = {
    CodecFormat.BLOSCLZ: _blosclz_decoder,
    CodecFormat.LZ4: _lz4_decoder,
    CodecFormat.ZLIB: _zlib_decoder,
    CodecFormat.ZSTD: _zstd_decoder,
}
_BY_CODEC = {
    Codec.BLOSCLZ: _blosclz_decoder,
    Codec.LZ4: _lz4_decoder,
    Codec.LZ4HC: _lz4_decoder,
    Codec.ZLIB: _zlib_decoder,
    Codec.ZSTD: _zstd_decoder,
}


def stream_decoder(codec_format: int, udcodec: int) -> Callable[[bytes | None], StreamDecoder]:
    """The factory of a chunk's stream decoder, from the flags' codec format (and byte 22).

    Raises at once for a codec b2store does not have; call the factory with the chunk's
    dictionary (or None) to get the decoder.
    """
    if codec_format == CodecFormat.USER:
        # A built-in id here is legal (c-blosc2 maps unknown formats through byte 22).
        if udcodec in _BY_CODEC:
            return _BY_CODEC[udcodec]
        try:
            name = Codec(udcodec).name
        except ValueError:
            name = f"user codec {udcodec}" if udcodec >= 160 else f"codec {udcodec}"
        raise UnsupportedError("codec", f"{name} (id {udcodec})")
    if codec_format == CodecFormat.SNAPPY:
        raise UnsupportedError("codec", "snappy (codec format 2)")
    if codec_format not in _BY_FORMAT:
        raise FormatError("flags", "a codec format of 0, 1, 3, 4 or 6 in bits 5-7", codec_format, 2)
    return _BY_FORMAT[codec_format]
