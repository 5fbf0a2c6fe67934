"""Stream codecs: decode one compressed stream into a buffer of known size.

Each decoder takes the payload and a writable uint8 array of exactly the size the stream must
inflate to, and raises :class:`FormatError` unless the payload inflates to exactly that, and
is exactly one stream of its codec: cut short or followed by other bytes, it is refused (a
zlib stream's trailing bytes excepted, which c-blosc2 ignores too).
BloscLZ is b2store's own Cython decoder; LZ4, zlib and Zstd use the lz4, zlib and zstandard
packages.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import lz4.block
import numpy as np
import zstandard

try:
    # c-blosc2 deflates with zlib-ng, whose output differs from zlib's; with the zlib-ng
    # package (a dependency), b2store writes the same zlib streams c-blosc2 writes.
    from zlib_ng import zlib_ng as _zlib_ng
except ImportError:  # pragma: no cover - a platform without its wheel: the system zlib
    _zlib_ng = None

from ..constants import Codec, CodecFormat
from ..errors import FormatError, UnsupportedError
from . import _blosclz
from .jpeg2000 import J2K_CODECS, j2k_decoder
from .plugins import PLUGIN_CODECS, check_inflated, plugin_decoder

__all__ = ["StreamDecoder", "stream_decoder", "check_inflatable"]

StreamDecoder = Callable[[memoryview, np.ndarray], None]


def _bad(what: str, expected: str, found) -> FormatError:
    return FormatError(what, expected, found)


def _blosclz_decoder(dictionary: bytes | None) -> StreamDecoder:
    if dictionary is not None:
        raise FormatError("blosc2_flags", "no dictionary with BloscLZ", "USE_DICT set", 31)

    def decode(payload: memoryview, target: np.ndarray) -> None:
        check_inflated("BloscLZ stream", _blosclz.decompress(payload, target), len(target))

    return decode


def _lz4_decoder(dictionary: bytes | None) -> StreamDecoder:
    extra = {"dict": dictionary} if dictionary is not None else {}

    def decode(payload: memoryview, target: np.ndarray) -> None:
        try:
            out = lz4.block.decompress(payload, uncompressed_size=len(target), **extra)
        except lz4.block.LZ4BlockError as exc:
            raise _bad(
                "LZ4 stream", f"a valid block inflating to {len(target)} bytes", exc
            ) from None
        check_inflated("LZ4 stream", len(out), len(target))
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
        if len(out) != size or surplus:
            raise _bad(
                "zlib stream",
                f"to inflate to exactly {size} bytes",
                f"{len(out)} bytes{' or more' if surplus else ''}",
            )
        if not d.eof:
            # Cut before its end: its last bytes check what it inflated, and c-blosc2's
            # uncompress refuses it. (Bytes after the end it ignores, and so does this.)
            raise _bad(
                "zlib stream",
                f"a whole stream, its Adler-32 checksum included, in its {len(payload)} bytes",
                "one cut short",
            )
        target[:] = np.frombuffer(out, np.uint8)

    return decode


def _zstd_decoder(dictionary: bytes | None) -> StreamDecoder:
    try:
        if dictionary is not None:
            dictionary = zstandard.ZstdCompressionDict(dictionary)
            dctx = zstandard.ZstdDecompressor(dict_data=dictionary)
        else:
            dctx = zstandard.ZstdDecompressor()
    except zstandard.ZstdError as exc:
        raise FormatError("dict", "a valid Zstd dictionary", exc) from None

    def decode(payload: memoryview, target: np.ndarray) -> None:
        size = len(target)
        try:
            declared = zstandard.frame_content_size(payload)
            if declared not in (-1, size):
                # Refuse before zstandard allocates what a hostile frame header asks for.
                raise _bad("Zstd frame content size", f"{size} (the stream's size)", declared)
            # One frame, ending where the stream ends, as the C block loop reads it too.
            out = dctx.decompress(payload, max_output_size=size, allow_extra_data=False)
        except zstandard.ZstdError as exc:
            raise _bad(
                "Zstd stream", f"one frame inflating to {size} bytes, nothing after it", exc
            ) from None
        check_inflated("Zstd stream", len(out), size)
        target[:] = np.frombuffer(out, np.uint8)

    return decode


# The most a payload of n bytes can inflate to, per codec format: LZ4 and BloscLZ spend at
# least one byte per 255 bytes of match, deflate one per 1032 (plus framing). Zstd frames
# declare their content size, which is checked instead.
_INFLATE_RATIO = {CodecFormat.BLOSCLZ: 256, CodecFormat.LZ4: 256, CodecFormat.ZLIB: 1040}
_ZSTD_MAX_RATIO = 1 << 17


def check_inflatable(codec_format: int, udcodec: int, payload, size: int, where: str) -> None:
    """Refuse a stream that cannot inflate to ``size`` bytes, before anything is allocated."""
    if codec_format == CodecFormat.USER:
        codec_format = {
            Codec.BLOSCLZ: CodecFormat.BLOSCLZ,
            Codec.LZ4: CodecFormat.LZ4,
            Codec.LZ4HC: CodecFormat.LZ4,
            Codec.ZLIB: CodecFormat.ZLIB,
            Codec.ZSTD: CodecFormat.ZSTD,
        }.get(udcodec, codec_format)
    n = len(payload)
    if codec_format == CodecFormat.ZSTD:
        try:
            declared = zstandard.frame_content_size(payload)
        except zstandard.ZstdError as exc:
            raise FormatError(f"Zstd frame of {where}", "a valid frame header", exc) from None
        if declared == -1:
            declared = size if size <= _ZSTD_MAX_RATIO * n else -1
        if declared != size:
            raise FormatError(f"Zstd frame content size of {where}", str(size), declared)
        return
    ratio = _INFLATE_RATIO.get(codec_format)
    if ratio is not None and size > ratio * (n + 1):
        raise FormatError(
            f"csize of {where}",
            f"enough bytes to inflate to {size}",
            f"{n} bytes of {CodecFormat(codec_format).name}",
        )


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


def stream_decoder(
    codec_format: int, udcodec: int, meta: int = 0, typesize: int = 1, blockshape=None
) -> Callable[[bytes | None], StreamDecoder]:
    """The factory of a chunk's stream decoder, from the flags' codec format (and byte 22).

    Raises at once for a codec b2store does not have; call the factory with the chunk's
    dictionary (or None) to get the decoder. The plugin codecs (NDLZ, ZFP) need the b2nd
    ``blockshape``, the codec ``meta`` (byte 23) and the ``typesize``.
    """
    if codec_format == CodecFormat.USER:
        # A built-in id here is legal (c-blosc2 maps unknown formats through byte 22).
        if udcodec in _BY_CODEC:
            return _BY_CODEC[udcodec]
        if udcodec in PLUGIN_CODECS:
            return plugin_decoder(udcodec, meta, typesize, blockshape)
        if udcodec in J2K_CODECS:
            return j2k_decoder(udcodec, meta, typesize)
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


# --- encoding ---------------------------------------------------------------------------------

StreamEncoder = Callable[[np.ndarray], "bytes | None"]

# c-blosc2's Zstd levels for clevel 1..9: 2*clevel - 1, and the maximum for 9. (Its code
# means to give 8 the maximum - 2, but tests the level after doubling, so 8 gets 15.)
ZSTD_LEVELS = {1: 1, 2: 3, 3: 5, 4: 7, 5: 9, 6: 11, 7: 13, 8: 15, 9: 22}
# The level c-blosc2 builds its Zstd dictionaries' compression tables at, whatever clevel.
ZSTD_DICT_LEVEL = 1


def stream_encoder(codec: Codec, clevel: int, dictionary: bytes | None = None) -> StreamEncoder:
    """A function compressing one stream; it returns None when the result would not be
    smaller than the stream (the caller then stores it raw), as c-blosc2's codecs do."""
    if codec == Codec.BLOSCLZ:

        def encode(stream: np.ndarray) -> bytes | None:
            out = np.empty(len(stream), np.uint8)
            n = _blosclz.compress(stream, out, clevel)
            return out[:n].tobytes() if 0 < n < len(stream) else None

        return encode
    if codec in (Codec.LZ4, Codec.LZ4HC):
        if codec == Codec.LZ4:
            # c-blosc2 trades ratio for speed at low levels through LZ4's acceleration.
            opts = {"mode": "fast", "acceleration": 10 - clevel}
        else:
            opts = {"mode": "high_compression", "compression": clevel}
        if dictionary is not None:
            opts["dict"] = dictionary

        def encode(stream: np.ndarray) -> bytes | None:
            out = lz4.block.compress(stream, store_size=False, **opts)
            return out if len(out) < len(stream) else None

        return encode
    if codec == Codec.ZLIB:
        deflate = _zlib_ng.compress if _zlib_ng is not None else zlib.compress

        def encode(stream: np.ndarray) -> bytes | None:
            out = deflate(stream, clevel)
            return out if len(out) < len(stream) else None

        return encode
    if codec == Codec.ZSTD:
        if dictionary is not None:
            cctx = zstandard.ZstdCompressor(
                level=ZSTD_DICT_LEVEL, dict_data=zstandard.ZstdCompressionDict(dictionary)
            )
        else:
            cctx = zstandard.ZstdCompressor(level=ZSTD_LEVELS[clevel])

        def encode(stream: np.ndarray) -> bytes | None:
            out = cctx.compress(stream)
            return out if len(out) < len(stream) else None

        return encode
    raise UnsupportedError("codec for encoding", getattr(codec, "name", codec))


def train_dictionary(
    codec: Codec, samples: np.ndarray, nsamples: int, sample_size: int, maxsize: int
) -> bytes | None:
    """A dictionary from ``nsamples`` samples of ``sample_size`` bytes at the start of
    ``samples`` (the filtered chunk), as c-blosc2 builds them; None if training fails."""
    if codec in (Codec.LZ4, Codec.LZ4HC):
        # LZ4 has no training: the samples themselves are the dictionary.
        return samples[: min(nsamples * sample_size, maxsize)].tobytes()
    pieces = [samples[i * sample_size : (i + 1) * sample_size].tobytes() for i in range(nsamples)]
    try:
        # ZDICT_trainFromBuffer's own settings: fastCover with d=8, 4 steps, level 3.
        trained = zstandard.train_dictionary(maxsize, pieces, d=8, steps=4, level=3)
    except zstandard.ZstdError:
        return None
    return trained.as_bytes()
