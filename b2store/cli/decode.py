"""The ``decode`` command: one chunk decoded to raw bytes, on standard output or into a file.

What is held at once is checked before anything is allocated: a special chunk (zeros, NaN, a
repeated value) is written in pieces of its value, never made whole (a 32-byte file may stand
for 1 GiB of zeros), and any other chunk is decoded once, within the chunk limit, and written
from that buffer without a copy.
"""

from __future__ import annotations

import sys

import numpy as np

from .. import _files
from ..chunk.decoder import ChunkDecoder
from ..limits import DEFAULT_LIMITS

__all__ = ["run"]

# A special chunk's value is written this many bytes at a time.
_PIECE = 1 << 20


def run(args) -> int:
    data = _files.read_regular(args.path)
    decoder = ChunkDecoder(data)  # the header and layout checked, nothing decoded
    nbytes = DEFAULT_LIMITS.check("max_chunk_nbytes", decoder.header.nbytes, "nbytes", 4)
    if args.output != "-":
        _files.check_write(args.output)  # (an output inside a tree, through a link there)
    out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")
    with out:
        if decoder.special:
            # A whole number of the value's items a piece (the value may be wider than typesize).
            h = decoder.header
            item = max(1, h.cbytes - h.header_size, h.typesize)
            piece = np.empty(min(nbytes, max(1, _PIECE // item) * item), np.uint8)
            if len(piece):
                decoder.fill_special(piece)
            left = nbytes
            while left:
                n = min(left, len(piece))
                out.write(memoryview(piece)[:n])
                left -= n
        else:
            decoded = np.empty(nbytes, np.uint8)
            decoder.decode_into(decoded)
            out.write(memoryview(decoded))
    return 0
