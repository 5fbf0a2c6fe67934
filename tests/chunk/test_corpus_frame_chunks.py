"""Every chunk inside the corpus frames decodes as python-blosc2 decodes it.

The frames themselves are the frame layer's business; here python-blosc2 only hands over the
raw chunks (version-4 chunks of 2021, variable-length blocks, dictionaries, bytedelta,
trunc_prec, special chunks ...), so the chunk decoder meets every chunk the corpus holds.
"""

import numpy as np
import pytest
from helpers import case_id, corpus_cases, corpus_dir

import b2store

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 hands over the raw chunks")

FRAMES = [
    ("compat", c)
    for c in corpus_cases("compat", {"schunk", "b2nd", "caterva"})
    # python-blosc2 cannot open the pre-2.0 frame, and crashes on the must_raise files
    if not c.get("legacy_header") and not c.get("must_raise")
] + [("generated", c) for c in corpus_cases("generated", {"schunk", "b2nd", "caterva"})]


def open_schunk(path):
    """``(owner, schunk)``: an NDArray owns its SChunk's C memory, so keep both alive
    (drop the NDArray and python-blosc2 segfaults on the SChunk)."""
    opened = blosc2.open(str(path))
    return opened, getattr(opened, "schunk", opened)


@pytest.mark.parametrize(
    "folder,case", FRAMES, ids=lambda v: case_id(v) if isinstance(v, dict) else v
)
def test_every_chunk_of_the_frame(folder, case):
    path = corpus_dir(folder) / case["path"]
    if case.get("oracle_error"):
        # The manifest records that python-blosc2 refuses this file (a lazy expression it will
        # not deserialize safely): check that it still does, then there is nothing to compare.
        # (Its words changed between releases; each names the lazy object it refuses.)
        with pytest.raises(Exception, match="(?i)lazy"):
            open_schunk(path)
        pytest.skip(f"python-blosc2 refuses {path.name} (manifest: oracle_error): no oracle")
    # Any other failure of python-blosc2 on a corpus file fails the test: no silent skip.
    _owner, schunk = open_schunk(path)
    assert schunk.nchunks > 0
    for i in range(schunk.nchunks):
        chunk = schunk.get_chunk(i)
        info = b2store.chunk_info(chunk)
        got = b2store.decode_chunk(chunk)
        assert len(got) == info.nbytes
        if info.special == b2store.SpecialValue.UNINIT:
            continue  # undefined bytes
        expected = np.frombuffer(schunk.decompress_chunk(i), np.uint8)
        np.testing.assert_array_equal(got, expected, err_msg=f"chunk {i}")


def test_vl_block_chunks_are_read_block_by_block():
    root = corpus_dir("compat")
    _owner, schunk = open_schunk(root / "compat__vlblocks-lz4-variable-3.0.0.b2frame")
    sizes = []
    for i in range(schunk.nchunks):
        info = b2store.chunk_info(schunk.get_chunk(i))
        assert info.vl_blocks and info.version == 6 and not info.split
        sizes.append((info.nblocks, info.nbytes))
    assert sizes == [(2, 1000), (3, 1500), (4, 2000), (5, 2500), (6, 3000)]
