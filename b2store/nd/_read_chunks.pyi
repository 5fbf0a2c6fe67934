"""Typed stub of the many-chunk decode and placement (b2store/nd/_read_chunks.pyx)."""

from collections.abc import Buffer, Sequence

import numpy as np

from b2store.chunk._decode_blocks import Scratch

def decode_run(
    data: Buffer,
    starts: Buffer,
    ends: Buffer,
    which: Buffer,
    origins: Buffer,
    lows: Buffer,
    extents: Buffer,
    chunkshape: Sequence[int],
    blockshape: Sequence[int],
    out: np.ndarray,
    chunk: Buffer,
    scratch: Scratch,
    done: Buffer,
) -> int: ...
def decode_part(
    src: Buffer,
    blocks: Buffer,
    ends: Buffer,
    chunkshape: Sequence[int],
    blockshape: Sequence[int],
    lo: Sequence[int],
    hi: Sequence[int],
    out: np.ndarray,
    chunk: Buffer,
    scratch: Scratch,
) -> bool: ...
