"""c-blosc2's registered plugins: codecs and filters that work on a whole b2nd block.

ZFP (``ZFP_ACC``, ``ZFP_PREC``, ``ZFP_RATE``, ids 33-35) and NDLZ (32) compress one block as
an n-d field, and the NDCELL (32) and NDMEAN (33) filters reorder (and average) its cells. A
chunk's header does not say the block's shape: c-blosc2 takes it from the array's ``b2nd``
metalayer, so these run only where that shape is known (a b2nd array, or a codec told its
blocks), and are refused, named, elsewhere.

ZFP goes through zfpy and zfp's own library (:mod:`.zfp`). NDLZ, NDCELL and NDMEAN are
b2store's own kernels (:mod:`b2store.chunk._ndlz`, :mod:`b2store.chunk._ndcell`).

The JPEG 2000 plugins, which need no block shape, are read in :mod:`.jpeg2000`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..constants import Codec, Filter
from ..errors import FormatError, UnsupportedError
from .jpeg2000 import J2K_CODECS
from .zfp import ZFP_CODECS, check_zfp_encodable, zfp_decoder, zfp_encoder

__all__ = [
    "PLUGIN_CODECS",
    "PLUGIN_FILTERS",
    "ZFP_CODECS",
    "block_rules",
    "check_encodable",
    "check_filters_encodable",
    "check_geometry",
    "check_inflated",
    "filter_step",
    "fits_block",
    "needs_blockshape",
    "uses_plugins",
    "plugin_decoder",
    "plugin_encoder",
]

PLUGIN_CODECS = ZFP_CODECS | {Codec.NDLZ}
PLUGIN_FILTERS = frozenset({Filter.NDCELL, Filter.NDMEAN})


def uses_plugins(header) -> bool:
    """Whether a chunk's header names a plugin codec or filter (which b2store's C block
    loops do not run: those chunks are decoded block by block in Python)."""
    codec = header.codec
    return (
        codec in PLUGIN_CODECS
        or codec in J2K_CODECS
        or any(f in PLUGIN_FILTERS for f in header.pipeline)
    )


def needs_blockshape(what: str, ident: int) -> UnsupportedError:
    """The refusal of a plugin where no b2nd block shape is known."""
    exc = UnsupportedError(what, f"{_name(what, ident)} (id {ident})")
    exc.args = (
        f"unsupported {what} {_name(what, ident)} (id {ident}) here: it works on the b2nd "
        "array's blocks, and no block shape was given (open the array, or give the codec "
        "its blocks)",
    )
    return exc


def _name(what: str, ident: int) -> str:
    enum = Filter if what == "filter" else Codec
    try:
        return enum(ident).name
    except ValueError:
        return str(ident)


def check_geometry(blockshape: Sequence[int], typesize: int, nbytes: int, what: str) -> None:
    """Refuse a block whose bytes are not ``prod(blockshape) * typesize``: the plugins
    read and write exactly that many (c-blosc2 checks it too, after CVE-2024-3204)."""
    want = math.prod(blockshape) * typesize
    if not blockshape or min(blockshape) <= 0 or want != nbytes:
        raise FormatError(
            what, f"a whole block of {tuple(blockshape)} x {typesize} bytes", f"{nbytes} bytes"
        )


def check_encodable(codec: int, meta: int, typesize: int, blockshape, split=None) -> None:
    """ValueError where c-blosc2's plugin would fail to compress with these settings (the
    writers check before anything is written, constant chunks, which no codec sees, too).
    ``split``: whether blocks are split into byte streams (None: not known yet)."""
    if codec not in PLUGIN_CODECS:
        return
    blockshape = tuple(blockshape)
    if 0 in blockshape:
        # An empty array's: no chunk of it is ever coded (it cannot grow), and python-blosc2
        # writes such arrays with any plugin.
        return
    if codec == Codec.NDLZ:
        if len(blockshape) != 2 or meta not in (4, 8):
            raise ValueError(
                f"NDLZ compresses 2-d blocks with codec_meta 4 or 8, not {len(blockshape)}-d "
                f"blocks with codec_meta {meta}"
            )
        if typesize > 1 and split is False:
            raise ValueError(
                f"NDLZ codes one byte an item: items of {typesize} bytes need "
                "splitmode='always', which codes each byte of the items on its own "
                "(c-blosc2 fails the chunk otherwise)"
            )
        return
    check_zfp_encodable(codec, typesize, blockshape)


def check_filters_encodable(filters, filters_meta, typesize: int, blockshape) -> None:
    """ValueError for NDCELL or NDMEAN settings c-blosc2 fails on, or, for NDMEAN, writes
    blocks it cannot read back (its decoder places cells wrongly when the first block side
    is shorter than the cell and another side holds several cells): tried on one block of
    zeros, each way, before anything is written."""
    steps = [(f, m) for f, m in zip(filters, filters_meta) if f in PLUGIN_FILTERS]
    if not steps:
        return
    blockshape = tuple(int(n) for n in blockshape)
    nbytes = math.prod(blockshape) * typesize
    if not nbytes or nbytes > 1 << 26:
        return  # an empty array has no block to filter; one that large, the limits refuse
    from . import _ndcell

    src, mid, back = (np.zeros(nbytes, np.uint8) for _ in range(3))
    for fid, meta in steps:
        name = Filter(fid).name
        if fid == Filter.NDCELL:
            kernels = (_ndcell.ndcell_encode, _ndcell.ndcell_decode)
        else:
            kernels = (_ndcell.ndmean_encode, _ndcell.ndmean_decode)
        try:
            kernels[0](src, mid, blockshape, typesize, meta)
            kernels[1](mid, back, blockshape, typesize, meta)
        except ValueError as exc:
            raise ValueError(
                f"{name} with filters_meta {meta} on blocks {blockshape} of {typesize}-byte "
                f"items: {exc}"
            ) from None


def block_rules(
    codec: int, codec_meta: int, filters, filters_meta, maxshape: Sequence[int]
) -> tuple[list[int], list[int], int]:
    """What the plugins among these settings ask of a block inside ``maxshape`` (the array's
    shape, or its chunks'): per dimension the least and the most side, and the least number
    of items (the rules :func:`check_encodable` and :func:`check_filters_encodable` check).
    A least side above the most says that no block fits."""
    ndim = len(maxshape)
    least, most, items = [1] * ndim, [int(n) for n in maxshape], 1
    if codec in ZFP_CODECS:
        # zfp codes cells of 4 items a side: c-blosc2's plugin fails a shorter block side.
        least = [4] * ndim
    for fid, meta in zip(filters, filters_meta):
        if fid == Filter.NDCELL and meta:
            # c-blosc2's NDCELL wants a whole cell's items (cell**ndim) in the block.
            items = max(items, meta**ndim)
            least = [max(lo, min(meta, n)) for lo, n in zip(least, maxshape)]
        elif fid == Filter.NDMEAN and 0 < meta < 128 and ndim:
            # NDMEAN places its cells by the first block side: one shorter than the cell
            # is read back only if no other side holds two cells.
            if maxshape[0] >= meta:
                least[0] = max(least[0], meta)
            else:
                most[1:] = [min(hi, meta) for hi in most[1:]]
    return least, most, items


def fits_block(codec: int, codec_meta: int, filters, filters_meta, typesize: int, blockshape):
    """Whether c-blosc2's plugins among these settings code blocks of this shape (whatever
    the split mode, which is the caller's choice, not the shape's)."""
    try:
        # (the filters first: the codec's check ends in zfp's, the last word asked)
        check_filters_encodable(filters, filters_meta, typesize, blockshape)
        check_encodable(codec, codec_meta, typesize, blockshape)
    except ValueError:
        return False
    return True


# --- NDLZ ---------------------------------------------------------------------------------


# The longest 4x4 NDLZ stream in which no match can reach back 65,533 bytes.
_NDLZ_SAFE_STREAM = 65_532


def _ndlz_checks(meta: int, blockshape: Sequence[int]) -> None:
    if len(blockshape) != 2:
        raise FormatError("b2nd ndim", "2 dimensions for NDLZ", len(blockshape))
    if meta not in (4, 8):
        raise FormatError("compcode_meta", "4 or 8 (the NDLZ cell side)", meta, 23)


# NDLZ codes bytes, one per cell position: a block of wider items reaches it one byte stream
# at a time (split), each ``prod(blockshape)`` bytes.


def check_inflated(what: str, n: int, size: int) -> None:
    """Refuse a stream that decoded to ``n`` bytes (below 0: a corrupt one) for a block part
    of ``size``; every codec's stream is named so."""
    if n != size:
        raise FormatError(
            what, f"to inflate to {size} bytes", "a corrupt stream" if n < 0 else f"{n} bytes"
        )


def _ndlz_decoder(meta: int, typesize: int, blockshape: tuple[int, ...]):
    from . import _ndlz

    _ndlz_checks(meta, blockshape)
    want = math.prod(blockshape)
    decompress = _ndlz.decompress

    def decode(payload: memoryview, target: np.ndarray) -> None:
        if len(target) != want:  # (the stream is a whole block's, checked once per block)
            check_geometry(blockshape, 1, len(target), "NDLZ stream")
        n = decompress(payload, target, blockshape, meta, typesize)
        check_inflated("NDLZ stream", n, len(target))

    return decode


def _ndlz_encoder(meta: int, typesize: int, blockshape: tuple[int, ...], clevel: int):
    from . import _ndlz

    check_encodable(Codec.NDLZ, meta, typesize, blockshape)
    nbytes = math.prod(blockshape)

    def encode(stream: np.ndarray) -> bytes | None:
        if len(stream) != nbytes:
            wide = " (items of more than one byte need splitmode='always')" if typesize > 1 else ""
            raise ValueError(
                f"NDLZ codes streams of {nbytes} bytes (the {blockshape} block, one byte "
                f"an item), not {len(stream)}{wide}; c-blosc2 fails such a chunk too"
            )
        out = np.empty(nbytes, np.uint8)
        n = _ndlz.compress(stream, out, blockshape, meta, typesize, clevel)
        if not 0 < n < nbytes:
            return None
        packed = out[:n]
        if meta == 4 and n > _NDLZ_SAFE_STREAM:
            # c-blosc2's 4x4 decoder adds 3 to a 16-bit match offset, which wraps for a
            # match 65,533 or more bytes back: python-blosc2 would read other bytes than
            # these. A stream that long is checked, and stored raw if it would be misread.
            back = np.empty(nbytes, np.uint8)
            if _ndlz.decompress(packed, back, blockshape, meta, typesize) != nbytes or not (
                np.array_equal(back, stream)
            ):
                return None
        return packed.tobytes()

    return encode


# --- the factories the chunk layer calls ------------------------------------------------------


def plugin_decoder(codec: int, meta: int, typesize: int, blockshape: tuple[int, ...] | None):
    """A factory of decoders of ``codec``'s streams (taking a dictionary, always None)."""
    if blockshape is None:
        raise needs_blockshape("codec", codec)
    blockshape = tuple(int(n) for n in blockshape)
    if codec == Codec.NDLZ:
        decode = _ndlz_decoder(meta, typesize, blockshape)
    else:
        decode = zfp_decoder(codec, meta, typesize, blockshape)

    def make(dictionary):
        if dictionary is not None:
            raise FormatError("blosc2_flags", "no dictionary with a plugin codec", "USE_DICT", 31)
        return decode

    return make


def plugin_encoder(
    codec: int, meta: int, typesize: int, blockshape: tuple[int, ...] | None, clevel: int
):
    """A function compressing one block with ``codec`` (None: store it raw)."""
    if blockshape is None:
        raise needs_blockshape("codec", codec)
    blockshape = tuple(int(n) for n in blockshape)
    if codec == Codec.NDLZ:
        return _ndlz_encoder(meta, typesize, blockshape, clevel)
    return zfp_encoder(codec, meta, typesize, blockshape)


def filter_step(fid: int, meta: int, typesize: int, blockshape, *, encoding: bool):
    """The kernel running NDCELL or NDMEAN over one block (``src``, ``dst``), either way."""
    if blockshape is None:
        raise needs_blockshape("filter", fid)
    from . import _ndcell

    blockshape = tuple(int(n) for n in blockshape)
    if fid == Filter.NDCELL:
        kernel = _ndcell.ndcell_encode if encoding else _ndcell.ndcell_decode
    else:
        kernel = _ndcell.ndmean_encode if encoding else _ndcell.ndmean_decode
    name = Filter(fid).name
    want = math.prod(blockshape) * typesize

    def run(src: np.ndarray, dst: np.ndarray) -> None:
        if len(src) != want:
            if encoding:  # the caller's data: a short last block, say
                raise ValueError(
                    f"{name} filters whole blocks of {blockshape} x {typesize} bytes, not "
                    f"{len(src)} bytes (c-blosc2 fails such a chunk too)"
                )
            check_geometry(blockshape, typesize, len(src), f"{name} block")
        try:
            kernel(src, dst, blockshape, typesize, meta)
        except ValueError as exc:
            if encoding:
                raise
            raise FormatError(f"{name} filters_meta", "parameters the filter takes", exc) from None

    return run
