from collections.abc import Buffer, Sequence

import numpy as np

def scatter_blocks(
    buf: Buffer,
    base: int,
    blocks: Buffer,
    chunkshape: Sequence[int],
    blockshape: Sequence[int],
    lo: Sequence[int],
    hi: Sequence[int],
    out: np.ndarray,
) -> None: ...
