"""ZFP (c-blosc2's codecs ``ZFP_ACC``, ``ZFP_PREC``, ``ZFP_RATE``, ids 33-35): the mode a meta
byte names, and each block's stream decoded so that zfp reads exactly its bytes.

c-blosc2's plugin stores zfp's bare stream, no header, for one b2nd block, and zfpy (LLNL's
binding, the ``zfp`` extra) reads and writes exactly those. zfp has no checksum and reads its
stream without bounds: a stream shorter than its mode needs (a meta byte raised, a size
lowered, another codec's chunk relabelled) decodes into other values, reading whatever lies
past it. So the size is the check. A fixed-rate stream's size follows from the block alone
(:func:`rate_stream_size`); the others' from the decoding, which zfp's own library reports
(``zfp_decompress`` returns the bytes its bit stream consumed; zfpy drops that number, so its
library is called through ``ctypes`` for them). Where that library cannot be found, each such
stream is decoded twice with different bytes past its end, and refused if the two differ.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..constants import Codec
from ..errors import FormatError, UnsupportedError

if TYPE_CHECKING:
    import ctypes

__all__ = [
    "ZFP_CODECS",
    "check_zfp_encodable",
    "rate_stream_size",
    "zfp_decoder",
    "zfp_encoder",
    "zfp_mode",
]

ZFP_CODECS = frozenset({Codec.ZFP_ACC, Codec.ZFP_PREC, Codec.ZFP_RATE})
ZFP_EXTRA = "pip install 'b2store[zfp]'"
_ZFP_MAX_DIM = 4
_ZFP_MAX_PREC = 64
# zfp's bit stream is read and written in words of 64 bits (its default build, zfpy's and
# c-blosc2's): every stream is a whole number of them.
_WORD_BYTES = 8
_ZFP_TYPES = {4: 3, 8: 4}  # zfp_type_float, zfp_type_double
_FIRST_ZFP_WITH_SIZE_T = 0x1000  # zfp 1.0 takes a field's extents as size_t


def _zfpy():
    try:
        import zfpy
    except ImportError:
        exc = UnsupportedError("codec", "ZFP")
        exc.args = (
            "unsupported codec ZFP: its chunks are read and written through zfpy, the zfp "
            f"library's binding, which is not installed ({ZFP_EXTRA})",
        )
        raise exc from None
    return zfpy


def _int8(meta: int) -> int:
    return meta - 256 if meta > 127 else meta


def _rate_bits(meta: int, typesize: int, ndim: int) -> int:
    """The bits of every cell of a ZFP_RATE stream: ``meta`` percent of the item's bits, and
    never fewer than zfp's floor (a cell's exponent and sign), which zfp applies itself."""
    cell = 1 << (2 * ndim)
    rate = meta / 100.0 * typesize * 8
    return max(math.floor(cell * rate + 0.5), 1 + (8 if typesize == 4 else 11))


def zfp_mode(codec: int, meta: int, typesize: int, ndim: int) -> dict:
    """zfpy's keywords for the mode c-blosc2's plugin derives from its meta byte.

    ZFP_ACC: an absolute error of ``10**meta`` (meta an int8). ZFP_PREC: ``meta`` bit planes
    beyond the ones a cell of ``ndim`` dimensions needs (5, 7, 9, 11), at most 64. ZFP_RATE:
    ``meta`` percent of the item's bits, and never fewer bits per cell than zfp's floor
    (its exponent and sign), which zfp applies itself, and which is given here, because
    zfpy sizes its buffer by the rate asked and wrote past it below that floor.
    """
    if codec == Codec.ZFP_ACC:
        return {"tolerance": 10.0 ** _int8(meta)}
    if codec == Codec.ZFP_PREC:
        return {"precision": min(meta + 3 + 2 * ndim, _ZFP_MAX_PREC)}
    return {"rate": _rate_bits(meta, typesize, ndim) / (1 << (2 * ndim))}


def _cells(blockshape: Sequence[int]) -> int:
    return math.prod(-(-n // 4) for n in blockshape)


def rate_stream_size(meta: int, typesize: int, blockshape: Sequence[int]) -> int:
    """The bytes of every ZFP_RATE stream of a block: each cell of ``4**ndim`` values (edge
    cells too) takes exactly the rate's bits, and zfp flushes the stream to a whole word."""
    bits = _cells(blockshape) * _rate_bits(meta, typesize, len(blockshape))
    return -(-bits // (8 * _WORD_BYTES)) * _WORD_BYTES


def _read_bound(typesize: int, blockshape: Sequence[int], mode: dict) -> int:
    """The most bytes zfp's decoder can read for this field, whatever the stream says.

    Per cell of ``4**ndim`` values it reads one bit, the exponent, then per bit plane at most
    two bits per value and one more; in fixed rate it reads (or skips) exactly the rate's
    bits. Words are 64 bits, and one more word may be fetched ahead.
    """
    ndim = len(blockshape)
    values = 1 << (2 * ndim)
    intprec = 8 * typesize
    ebits = 8 if typesize == 4 else 11
    per_cell = 1 + ebits + intprec * (2 * values + 1)
    if "rate" in mode:
        per_cell = max(per_cell, int(mode["rate"] * values))
    return (_cells(blockshape) * per_cell + 63) // 64 * 8 + 16


def _checks(codec: int, typesize: int, blockshape: Sequence[int]) -> None:
    name = Codec(codec).name
    if typesize not in (4, 8):
        raise FormatError("typesize", f"4 or 8 (float32 or float64) for {name}", typesize, 3)
    if not 1 <= len(blockshape) <= _ZFP_MAX_DIM:
        raise FormatError("b2nd ndim", f"1 to 4 dimensions for {name}", len(blockshape))


# --- zfp's own library, for the bytes a decode consumed -----------------------------------


class _Zfp:
    """zfp's C decoder, called as c-blosc2's plugin calls it, returning what it consumed."""

    def __init__(self, lib: ctypes.CDLL):
        import ctypes

        p, size = ctypes.c_void_p, ctypes.c_size_t
        self.open_bits = _fn(lib.stream_open, p, [p, size])
        self.close_bits = _fn(lib.stream_close, None, [p])
        self.open = _fn(lib.zfp_stream_open, p, [p])
        self.close = _fn(lib.zfp_stream_close, None, [p])
        self.rewind = _fn(lib.zfp_stream_rewind, None, [p])
        self.accuracy = _fn(lib.zfp_stream_set_accuracy, ctypes.c_double, [p, ctypes.c_double])
        self.precision = _fn(lib.zfp_stream_set_precision, ctypes.c_uint, [p, ctypes.c_uint])
        self.rate = _fn(
            lib.zfp_stream_set_rate,
            ctypes.c_double,
            [p, ctypes.c_double, ctypes.c_int, ctypes.c_uint, ctypes.c_int],
        )
        self.fields = [
            _fn(getattr(lib, f"zfp_field_{n}d"), p, [p, ctypes.c_int] + [size] * n)
            for n in range(1, _ZFP_MAX_DIM + 1)
        ]
        self.free_field = _fn(lib.zfp_field_free, None, [p])
        self.decompress = _fn(lib.zfp_decompress, size, [p, p])

    def decode(self, stream: np.ndarray, mode: dict, typesize: int, out: np.ndarray) -> int:
        """Decode ``stream`` (padded past the most zfp can read) into ``out`` (the block, C
        order); the bytes zfp consumed, 0 if it failed."""
        ztype = _ZFP_TYPES[typesize]
        # (The buffers' addresses through __array_interface__: ``.ctypes.data`` costs 2 us.)
        bits = self.open_bits(stream.__array_interface__["data"][0], stream.nbytes)
        zfp = self.open(bits)
        # zfp's extents run fastest first: a C-order block's last axis is its x.
        address = out.__array_interface__["data"][0]
        field = self.fields[out.ndim - 1](address, ztype, *reversed(out.shape))
        try:
            if "tolerance" in mode:
                self.accuracy(zfp, mode["tolerance"])
            elif "precision" in mode:
                self.precision(zfp, mode["precision"])
            else:
                self.rate(zfp, mode["rate"], ztype, out.ndim, 0)  # not aligned, as c-blosc2
            self.rewind(zfp)
            return self.decompress(zfp, field)
        finally:
            self.free_field(field)
            self.close(zfp)
            self.close_bits(bits)


def _fn(fn, restype, argtypes):
    fn.restype, fn.argtypes = restype, argtypes
    return fn


def _candidates(zfpy) -> list[str]:
    """Where zfpy's zfp library may be: beside its extension as the wheels bundle it
    (auditwheel's ``zfpy.libs``, delocate's ``.dylibs``, delvewheel's ``zfpy.libs``), the one
    the process has loaded (Linux), or the system's."""
    import ctypes.util

    here = Path(zfpy.__file__).parent
    found: list[str] = []
    for folder in ("zfpy.libs", "zfpy.dylibs", ".dylibs"):
        found += sorted(str(p) for p in (here / folder).glob("*zfp*") if p.is_file())
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/maps") as maps:
                found += sorted({line.split()[-1] for line in maps if "libzfp" in line})
        except OSError:
            pass
    system = ctypes.util.find_library("zfp")
    return found + ([system] if system else [])


@functools.cache
def _library() -> _Zfp | None:
    """zfp's library, once, if it is found and decodes as zfpy does (tried on one stream of
    each mode); None otherwise, and streams are then checked by decoding them twice."""
    import ctypes

    zfpy = _zfpy()
    for path in _candidates(zfpy):
        try:
            lib = ctypes.CDLL(path)
            if ctypes.c_uint.in_dll(lib, "zfp_library_version").value < _FIRST_ZFP_WITH_SIZE_T:
                continue
            zfp = _Zfp(lib)
        except (OSError, AttributeError, ValueError):
            continue
        if _agrees_with_zfpy(zfp, zfpy):
            return zfp
    return None


def _agrees_with_zfpy(zfp: _Zfp, zfpy) -> bool:
    field = np.cos(np.arange(6 * 9, dtype="<f8")).reshape(6, 9)
    for mode in ({"tolerance": 1e-3}, {"precision": 20}, {"rate": 12.5}):
        stream = np.frombuffer(zfpy.compress_numpy(field, write_header=False, **mode), np.uint8)
        padded = np.zeros(_read_bound(8, field.shape, mode) + len(stream), np.uint8)
        padded[: len(stream)] = stream
        want = zfpy._decompress(padded, zfpy.dtype_to_ztype(field.dtype), list(field.shape), **mode)
        got = np.empty_like(field)
        if zfp.decode(padded, mode, 8, got) != len(stream) or got.tobytes() != want.tobytes():
            return False
    return True


# --- decoding and encoding ----------------------------------------------------------------


def zfp_decoder(codec: int, meta: int, typesize: int, blockshape: tuple[int, ...]):
    """A decoder of ``codec``'s streams for blocks of ``blockshape``, refusing any stream zfp
    does not consume exactly (a FormatError; the chunk decoder names the block)."""
    zfpy = _zfpy()
    _checks(codec, typesize, blockshape)
    mode = zfp_mode(codec, meta, typesize, len(blockshape))
    dtype = np.dtype("<f4" if typesize == 4 else "<f8")
    ztype = zfpy.dtype_to_ztype(dtype)
    bound = _read_bound(typesize, blockshape, mode)
    name = Codec(codec).name
    field = f"{name} stream"
    exact = rate_stream_size(meta, typesize, blockshape) if codec == Codec.ZFP_RATE else None
    nbytes = math.prod(blockshape) * typesize
    library = _library()

    def decode(payload: memoryview, target: np.ndarray) -> None:
        if len(target) != nbytes:  # zfp writes the whole block (c-blosc2 checks it too)
            raise FormatError(
                field, f"a whole block of {tuple(blockshape)} x {typesize} bytes", len(target)
            )
        n = len(payload)
        if exact is not None and n != exact:
            raise FormatError(
                field,
                f"{exact} bytes (every {name} stream of a {tuple(blockshape)} block at "
                f"codec_meta {meta})",
                f"{n} bytes",
            )
        # zfp may read past the stream: those reads land in zeros here, and are refused.
        padded = np.zeros(max(bound, n + 16), np.uint8)
        padded[:n] = np.frombuffer(payload, np.uint8)
        out = target.view(dtype).reshape(blockshape)
        if exact is None and library is not None:
            used = library.decode(padded, mode, typesize, out)
            if used == 0:
                raise FormatError(field, "a zfp stream zfp decodes", "a stream it cannot")
            if used != n:
                raise FormatError(
                    field, f"a zfp stream of exactly its {n} bytes", _consumed(used, n)
                )
            return
        # Fixed rate reads exactly its bits, which its size was checked to hold (zfpy's call
        # costs 4 us a block less than the library's through ctypes). Without the library, the
        # other modes are decoded again with other bytes past the stream, which changes
        # nothing unless zfp read them.
        try:
            zfpy._decompress(padded, ztype, list(blockshape), out=out, **mode)
            if exact is None:
                again = np.empty_like(out)
                padded[n:] = 0xFF
                zfpy._decompress(padded, ztype, list(blockshape), out=again, **mode)
        except Exception as exc:  # zfpy raises bare exceptions (RuntimeError, IndexError)
            raise FormatError(field, "a zfp stream zfp decodes", exc) from None
        if exact is None and again.tobytes() != out.tobytes():
            raise FormatError(
                field, f"a zfp stream of exactly its {n} bytes", "bytes read past its end"
            )

    return decode


def _consumed(used: int, n: int) -> str:
    if used > n:
        return f"{used} bytes read by zfp, past the stream's end"
    return f"{used} bytes read by zfp, and {n - used} bytes after them"


def check_zfp_encodable(codec: int, typesize: int, blockshape: tuple[int, ...]) -> None:
    """ValueError where c-blosc2's plugin would fail to compress with these settings."""
    name = Codec(codec).name
    if typesize not in (4, 8):
        raise ValueError(f"{name} compresses float32 or float64 items, not typesize {typesize}")
    if not 1 <= len(blockshape) <= _ZFP_MAX_DIM or min(blockshape) < 4:
        # c-blosc2's plugin fails the chunk on these.
        raise ValueError(
            f"{name} needs blocks of 1 to 4 dimensions, each at least 4 long, not {blockshape}"
        )


def zfp_encoder(codec: int, meta: int, typesize: int, blockshape: tuple[int, ...]):
    """A function compressing one block with ``codec`` (None: store it raw)."""
    zfpy = _zfpy()
    check_zfp_encodable(codec, typesize, blockshape)
    mode = zfp_mode(codec, meta, typesize, len(blockshape))
    dtype = np.dtype("<f4" if typesize == 4 else "<f8")
    nbytes = math.prod(blockshape) * typesize

    def encode(stream: np.ndarray) -> bytes | None:
        if len(stream) != nbytes:
            return None  # a split stream or a short block: c-blosc2 stores those raw
        out = zfpy.compress_numpy(
            stream.view(dtype).reshape(blockshape), write_header=False, **mode
        )
        return out if 0 < len(out) < nbytes else None

    return encode
