"""Typed stub of the compiled NDLZ codec (b2store/chunk/_ndlz.pyx), c-blosc2's codec 32."""

from collections.abc import Buffer

def decompress(
    src: Buffer, dst: Buffer, blockshape: tuple[int, int], cell: int, typesize: int
) -> int: ...
def compress(
    src: Buffer,
    dst: Buffer,
    blockshape: tuple[int, int],
    cell: int,
    typesize: int,
    clevel: int,
) -> int: ...
def xxh32(data: Buffer, seed: int = 0) -> int: ...
