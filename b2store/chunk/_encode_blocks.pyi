"""Typed stub of the block loop's encoding half (b2store/chunk/_encode_blocks.pyx)."""

from collections.abc import Buffer, Sequence

from ._decode_blocks import Scratch

def encode(
    src: Buffer,
    blocksize: int,
    full_nstreams: int,
    steps: Sequence[tuple[int, int]],
    typesize: int,
    codec: int,
    clevel: int,
    level: int,
    out: Buffer,
    slot: int,
    sizes: Buffer,
    counter: Buffer,
    flags: Buffer,
    scratch: Scratch,
) -> int: ...

class ChunkOut:
    capacity: int
    def __init__(self, capacity: int) -> None: ...
    def __buffer__(self, flags: int) -> memoryview: ...
    def finish_blocks(self, header: Buffer, sizes: Buffer, slot: int) -> bytes: ...
    def raw(self, header: Buffer, items: Buffer) -> bytes: ...
