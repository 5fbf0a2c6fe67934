"""Block size and split decisions, made as c-blosc2 makes them.

The same parameters must give the same block layout as c-blosc2, so that chunks written here
compress as well as python-blosc2's and decode the same way in both libraries.
"""

from __future__ import annotations

from ..constants import CLEVEL_BLOCK_FACTOR, MAX_TYPESIZE, Codec, Filter, SplitMode

__all__ = ["split_block", "compute_blocksize", "MIN_BUFFERSIZE"]

# Below this many bytes a chunk is stored memcpyed; also the least items per split stream.
MIN_BUFFERSIZE = 32
_L1 = 32 * 1024
_MAX_STREAMS = 16
# Codecs that like large blocks ("high compression ratio" codecs in c-blosc2's tuner).
_HCR = frozenset({Codec.LZ4HC, Codec.ZLIB, Codec.ZSTD})
_SPLIT_ITEMS = {1: 32, 2: 32, 3: 32, 4: 64, 5: 64, 6: 64, 7: 128, 8: 256, 9: 512}


def split_block(
    codec: Codec, clevel: int, filters, splitmode: SplitMode, typesize: int, blocksize: int
) -> bool:
    """Whether blocks are stored as one stream per byte of the type."""
    if splitmode == SplitMode.ALWAYS_SPLIT:
        return True
    if splitmode == SplitMode.NEVER_SPLIT:
        return False
    # AUTO and FORWARD_COMPAT are the same rule in c-blosc2: fast codecs split, but only
    # shuffled data, small types, and blocks of enough items.
    fast = codec in (Codec.BLOSCLZ, Codec.LZ4) or (codec == Codec.ZSTD and clevel <= 5)
    return (
        fast
        and Filter.SHUFFLE in filters
        and typesize <= _MAX_STREAMS
        and blocksize // typesize >= MIN_BUFFERSIZE
    )


def compute_blocksize(
    nbytes: int,
    typesize: int,
    clevel: int,
    codec: Codec,
    filters,
    splitmode: SplitMode,
    blocksize: int = 0,
) -> int:
    """The block size c-blosc2 picks for a chunk (``typesize`` is the real one, even > 255)."""
    if nbytes < typesize:
        return 1
    if blocksize:
        bs = blocksize
    else:
        bs = nbytes
        if nbytes >= _L1:
            bs = _L1 * (2 if codec in _HCR else 1)
            bs = int(bs * CLEVEL_BLOCK_FACTOR[clevel])
            if clevel == 9 and codec in _HCR:
                bs *= 2
        if clevel > 0 and split_block(codec, clevel, filters, splitmode, typesize, nbytes):
            # Split streams want about the same number of items per stream whatever the type.
            bs = min(_SPLIT_ITEMS[clevel] * 1024 * typesize, 4 * 1024 * 1024)
            bs = max(bs, 32 * 1024)
    bs = min(bs, nbytes)
    if bs > typesize:
        bs = bs // typesize * typesize
    return bs


def header_typesize(typesize: int) -> int:
    """The typesize as stored: c-blosc2 treats items wider than 255 bytes as bytes."""
    return 1 if typesize > MAX_TYPESIZE else typesize
