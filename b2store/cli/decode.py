"""The ``decode`` command: one chunk decoded to raw bytes, on standard output or into a file."""

from __future__ import annotations

import sys

import numpy as np

from .. import _files
from ..chunk.decoder import decode_chunk

__all__ = ["run"]


def run(args) -> int:
    decoded = decode_chunk(_files.read_regular(args.path))
    out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")
    with out:
        out.write(np.ascontiguousarray(decoded).tobytes())
    return 0
