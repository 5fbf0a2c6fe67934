"""The JPEG 2000 plugins of python-blosc2, read only: ``blosc2_grok`` (codec 37) and
``blosc2_openhtj2k`` (codec 36).

Each stores a block as one JPEG 2000 image, no prefix: Grok a JP2 file by default (or a bare
codestream), OpenHTJ2K a bare HTJ2K codestream of the block's ``(C, X, Y)`` int32 planes. The
image's header says its shape, so no b2nd block shape is needed. They are read through
imagecodecs' OpenJPEG (the ``jpeg2000`` extra), whose decoding of these blocks was checked to
be python-blosc2's bit for bit, and refused, named, where it is not (tests/fixture/jpeg2000).
The main header is read first, so an image larger than its block is refused before OpenJPEG
allocates it, and so is an image that does not fill the block's stream exactly (cut short,
or with bytes after it).
"""

from __future__ import annotations

import numpy as np

from ..constants import Codec
from ..errors import FormatError, UnsupportedError

__all__ = ["J2K_CODECS", "j2k_check_extent", "j2k_codestream", "j2k_decoder", "j2k_header"]

J2K_CODECS = frozenset({Codec.GROK, Codec.OPENHTJ2K})
J2K_EXTRA = "pip install 'b2store[jpeg2000]'"
_SOC_SIZ = b"\xff\x4f\xff\x51"
_EOC = b"\xff\xd9"
_JP2_SIGNATURE = b"\x00\x00\x00\x0cjP  \r\n\x87\n"
_PLUGIN_PACKAGE = {Codec.GROK: "blosc2_grok", Codec.OPENHTJ2K: "blosc2_openhtj2k"}


def _imagecodecs(codec: int):
    try:
        import imagecodecs

        imagecodecs.jpeg2k_decode  # noqa: B018 - a build without OpenJPEG lacks it
    except (ImportError, AttributeError):
        exc = UnsupportedError("codec", f"{Codec(codec).name} (id {codec})")
        exc.args = (
            f"unsupported codec {Codec(codec).name} (id {codec}, {_PLUGIN_PACKAGE[codec]}'s "
            "JPEG 2000): its blocks are read through imagecodecs' OpenJPEG, which is not "
            f"installed ({J2K_EXTRA})",
        )
        raise exc from None
    return imagecodecs


def j2k_codestream(payload) -> memoryview:
    """The JPEG 2000 codestream of a block: the payload itself, or a JP2 file's ``jp2c``
    box (blosc2_grok writes JP2 files by default), whose boxes must fill the stream exactly."""
    data = memoryview(payload)
    if bytes(data[:4]) == _SOC_SIZ:
        return data
    if bytes(data[:12]) != _JP2_SIGNATURE:
        raise FormatError("JPEG 2000 stream", "a codestream or a JP2 file", bytes(data[:12]))
    pos, found = 0, None
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 4], "big")
        kind = bytes(data[pos + 4 : pos + 8])
        head = 8
        if size == 1 and pos + 16 <= len(data):
            size, head = int.from_bytes(data[pos + 8 : pos + 16], "big"), 16
        elif size == 0:
            size = len(data) - pos  # the last box runs to the end
        if pos + 8 > len(data) or size < head or pos + size > len(data):
            raise FormatError(
                "JP2 box", f"boxes filling the stream's {len(data)} bytes", f"{size} bytes", pos
            )
        if kind == b"jp2c" and found is None:
            found = data[pos + head : pos + size]
        pos += size
    if found is None:
        raise FormatError("JP2 file", "a jp2c box holding the codestream", "none")
    return found


def j2k_check_extent(codestream: memoryview) -> None:
    """Refuse a codestream that does not end where its tile-parts do, with its EOC marker:
    one cut short (OpenJPEG out of its strict mode reads it as a coarser image) or with bytes
    after it (which OpenJPEG ignores).

    The main header's marker segments lead to the first tile-part (SOT); each says its
    length (Psot; 0: the last, running to the EOC)."""
    n = len(codestream)
    pos = 2  # after SOC
    while True:
        if pos + 4 > n or codestream[pos] != 0xFF:
            raise FormatError(
                "JPEG 2000 main header", "marker segments up to a tile-part (SOT)", "none"
            )
        if codestream[pos + 1] == 0x90:
            break
        pos += 2 + int.from_bytes(codestream[pos + 2 : pos + 4], "big")
    end = pos
    while end + 2 <= n and bytes(codestream[end : end + 2]) == b"\xff\x90":
        if end + 10 > n:
            end = n + 1
            break
        psot = int.from_bytes(codestream[end + 6 : end + 10], "big")
        if psot == 0:
            end = n - 2
            break
        end += psot
    if end != n - 2 or bytes(codestream[n - 2 :]) != _EOC:
        raise FormatError(
            "JPEG 2000 codestream",
            f"tile-parts (SOT's Psot), then the EOC marker, filling its {n} bytes",
            f"tile-parts ending at byte {end}" if end <= n else "a tile-part past its end",
        )


def j2k_header(codestream: memoryview) -> tuple[int, bool, bool]:
    """From a codestream's main header: how many samples it decodes to, whether its COD
    asks for the multi-component transform, and whether its wavelet is the reversible 5/3."""
    if bytes(codestream[:4]) != _SOC_SIZ or len(codestream) < 42:
        raise FormatError("JPEG 2000 codestream", "SOC and SIZ markers", bytes(codestream[:4]))
    siz = bytes(codestream[4:])
    length = int.from_bytes(siz[0:2], "big")
    x, y, x0, y0 = (int.from_bytes(siz[k : k + 4], "big") for k in (4, 8, 12, 16))
    ncomp = int.from_bytes(siz[36:38], "big")
    if ncomp < 1 or length != 38 + 3 * ncomp or len(siz) < length or x <= x0 or y <= y0:
        raise FormatError("JPEG 2000 SIZ", "a consistent image size", (x, y, x0, y0, ncomp))
    samples = 0
    for k in range(ncomp):
        dx, dy = siz[38 + 3 * k + 1], siz[38 + 3 * k + 2]
        if not dx or not dy:
            raise FormatError("JPEG 2000 SIZ", "component sampling of at least 1", (dx, dy))
        samples += (-(-x // dx) + (x0 // dx)) * (-(-y // dy) + (y0 // dy))
    pos = 4 + length
    while pos + 4 <= len(codestream):
        marker = bytes(codestream[pos : pos + 2])
        seg = int.from_bytes(codestream[pos + 2 : pos + 4], "big")
        if marker == b"\xff\x52" and seg >= 12 and pos + 2 + seg <= len(codestream):
            cod = bytes(codestream[pos + 4 : pos + 2 + seg])
            return samples, cod[4] != 0, cod[9] == 1
        if marker == b"\xff\x90" or seg < 2:  # the first tile: the main header has ended
            break
        pos += 2 + seg
    raise FormatError("JPEG 2000 codestream", "a COD marker in its main header", "none")


def _j2k_decoder(codec: int, typesize: int):
    imagecodecs = _imagecodecs(codec)
    name = f"{Codec(codec).name} (id {codec}, {_PLUGIN_PACKAGE[codec]})"

    def refuse(why: str) -> UnsupportedError:
        exc = UnsupportedError("codec", f"{Codec(codec).name} (id {codec})")
        exc.args = (f"unsupported {name} block: {why}",)
        return exc

    def decode(payload: memoryview, target: np.ndarray) -> None:
        codestream = j2k_codestream(payload)
        samples, mct, reversible = j2k_header(codestream)
        j2k_check_extent(codestream)
        if samples > len(target):
            # Refused before OpenJPEG allocates what a hostile header asks for.
            raise FormatError(f"{name} image", f"at most {len(target)} samples", samples)
        # Where OpenJPEG's decoding is not the plugin's own, python-blosc2 would read other
        # values: refused. Grok's irreversible transform with MCT decodes as constants (its
        # tests turn MCT off); OpenHTJ2K's lossy blocks differ by 1-3 between decoders.
        if codec == Codec.GROK and mct and not reversible:
            raise refuse("an irreversible multi-component transform, which Grok itself (so "
                         "python-blosc2) decodes as constants, and OpenJPEG otherwise or not at "
                         "all")  # fmt: skip
        if codec == Codec.OPENHTJ2K and not reversible:
            raise refuse("a lossy (irreversible) block, which OpenJPEG decodes 1-3 apart "
                         "from OpenHTJ2K (python-blosc2)")  # fmt: skip
        try:
            image = imagecodecs.jpeg2k_decode(bytes(payload))
        except Exception as exc:  # imagecodecs raises its own Jpeg2kError (and others)
            raise FormatError(f"{name} stream", "an image OpenJPEG decodes", exc) from None
        if codec == Codec.OPENHTJ2K:
            # Components are planes (C, X, Y) of int32 in the block; OpenJPEG gives (Y, X, C).
            if image.ndim == 2:
                image = image[:, :, None]
            items = np.ascontiguousarray(image.transpose(2, 0, 1)).astype("<u4")
        else:
            if image.dtype.itemsize != typesize:
                raise FormatError(f"{name} image", f"{typesize}-byte samples", image.dtype)
            items = image.astype(image.dtype.newbyteorder("<"), copy=False)
        raw = np.ascontiguousarray(items).view(np.uint8).reshape(-1)
        if len(raw) != len(target):
            raise FormatError(f"{name} image", f"{len(target)} bytes (the block)", len(raw))
        target[:] = raw

    return decode


def j2k_decoder(codec: int, meta: int, typesize: int):
    """A factory of decoders of a JPEG 2000 plugin's streams (no dictionary)."""
    decode = _j2k_decoder(codec, typesize)

    def make(dictionary):
        if dictionary is not None:
            raise FormatError("blosc2_flags", "no dictionary with a plugin codec", "USE_DICT", 31)
        return decode

    return make
