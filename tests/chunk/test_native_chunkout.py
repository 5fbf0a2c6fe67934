"""``_blocks.ChunkOut``: blocks compressed into slots of the chunk's own bytes, then packed
behind the header and block starts, with no chunk-sized copy."""

from __future__ import annotations

import numpy as np
import pytest

from b2store import _blocks


def test_blocks_are_packed_behind_the_prefix():
    slot, sizes = 10, np.array([3, 10, 0, 7], np.int64)
    out = _blocks.ChunkOut(4 + len(sizes) * slot)
    with memoryview(out) as mv:
        view = np.frombuffer(mv, np.uint8)
        for j, n in enumerate(sizes):
            view[4 + j * slot : 4 + j * slot + n] = j + 1
            view[4 + j * slot + n : 4 + (j + 1) * slot] = 0xEE  # slack never copied
        del view
    chunk = out.finish(b"HEAD", sizes, slot)
    assert isinstance(chunk, bytes)
    assert chunk == b"HEAD" + b"\x01" * 3 + b"\x02" * 10 + b"\x04" * 7


def test_handed_over_once_and_never_while_written():
    out = _blocks.ChunkOut(16)
    mv = memoryview(out)
    with pytest.raises(BufferError):
        out.finish(b"", np.zeros(0, np.int64), 0)
    mv.release()
    assert out.finish(b"ab", np.zeros(0, np.int64), 0) == b"ab"
    with pytest.raises(BufferError):
        out.finish(b"", np.zeros(0, np.int64), 0)
    with pytest.raises(BufferError):
        memoryview(out)


@pytest.mark.parametrize(
    "prefix, sizes, slot",
    [(b"", [5], 4), (b"", [-1], 4), (b"xx", [4, 4, 4, 4], 4), (b"", [1], -1)],
)
def test_bad_layouts_are_refused(prefix, sizes, slot):
    out = _blocks.ChunkOut(16)
    with pytest.raises(ValueError):
        out.finish(prefix, np.array(sizes, np.int64), slot)
