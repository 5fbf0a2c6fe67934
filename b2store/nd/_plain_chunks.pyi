"""Typed stub of the many-chunk decode of plain C-order chunks (b2store/nd/_plain_chunks.pyx)."""

from collections.abc import Buffer

from b2store.chunk._chunk_plan import Plan
from b2store.chunk._decode_blocks import Scratch

def decode_place(
    plans: list[Plan],
    boxes: Buffer,
    chunkshape: Buffer,
    strides: Buffer,
    itemsize: int,
    out: Buffer,
    tmp: Buffer,
    scratch: Scratch,
    counter: Buffer,
    status: Buffer,
) -> None: ...
def read_place(
    paths: list[bytes],
    limit: int,
    boxes: Buffer,
    chunkshape: Buffer,
    strides: Buffer,
    itemsize: int,
    out: Buffer,
    tmp: Buffer,
    scratch: Scratch,
    counter: Buffer,
    status: Buffer,
) -> None: ...
