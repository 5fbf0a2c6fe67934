"""Typed stub of the compiled NDCELL / NDMEAN kernels (b2store/chunk/_ndcell.pyx).

Each function filters one block: ``src`` and ``dst`` are distinct, non-overlapping buffers
of ``prod(blockshape) * typesize`` bytes; ``blockshape`` is the b2nd metalayer's (1 to 8
dimensions) and ``cell`` the filter meta byte. Bad parameters raise ValueError, as the
c-blosc2 filter would fail the chunk.
"""

from collections.abc import Buffer

Dims = tuple[int, ...]  # a block shape

def ndcell_encode(src: Buffer, dst: Buffer, blockshape: Dims, typesize: int, cell: int) -> None: ...
def ndcell_decode(src: Buffer, dst: Buffer, blockshape: Dims, typesize: int, cell: int) -> None: ...
def ndmean_encode(src: Buffer, dst: Buffer, blockshape: Dims, typesize: int, cell: int) -> None: ...
def ndmean_decode(src: Buffer, dst: Buffer, blockshape: Dims, typesize: int, cell: int) -> None: ...
