"""BYTEDELTA on blocks whose length is no multiple of the item size: c-blosc2 3.3.2 fixed the
filter dropping the last ``length % typesize`` bytes of such a block; it now passes them
through, as b2store always has. Chunks of that shape from both libraries, read by both."""

from __future__ import annotations

import numpy as np
import pytest

import b2store
from b2store.chunk.encoder import encode_chunk

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes and reads the chunks")

# (items' bytes, typesize, blocksize): each has blocks (the last, or every one) whose length
# is no multiple of the typesize; python-blosc2 issue 357's float32 lengths among them.
SHAPES = [(781, 4, 0), (1003, 4, 100), (4099, 8, 1000), (77, 3, 20), (195 * 4 + 3, 4, 0)]


def test_pyblosc2_has_the_fix():
    version = tuple(int(p) for p in blosc2.blosclib_version.split()[0].split(".")[:3])
    assert version >= (3, 3, 2)


@pytest.mark.parametrize(("nbytes", "typesize", "blocksize"), SHAPES)
@pytest.mark.parametrize("filters", [[35], [1, 35]])
def test_tail_bytes_kept_both_ways(nbytes, typesize, blocksize, filters):
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    theirs = blosc2.compress2(
        data,
        typesize=typesize,
        filters=[blosc2.Filter(f) for f in filters],
        filters_meta=[0] * len(filters),
        codec=blosc2.Codec.ZSTD,
        blocksize=blocksize,
    )
    assert b2store.chunk_info(theirs).nbytes % typesize or blocksize % typesize
    assert blosc2.decompress2(theirs) == data
    assert bytes(b2store.decode_chunk(theirs)) == data
    ours = encode_chunk(
        data,
        typesize=typesize,
        filters=filters,
        filters_meta=[0] * len(filters),
        codec="zstd",
        blocksize=blocksize or None,
    )
    assert blosc2.decompress2(ours) == data
    assert bytes(b2store.decode_chunk(ours)) == data
