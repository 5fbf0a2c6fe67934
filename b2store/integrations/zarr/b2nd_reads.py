"""A codec pipeline's read of a ``B2ndStore`` array: zarr's chunks and their selections put
back together into one box of the frame, read by b2store's own engine straight into zarr's
output (:meth:`~b2store.nd.array.B2ndArray.read_into`), one call per read.

zarr hands a pipeline every chunk of a basic selection in one batch: per chunk its key
(``c/i/j`` under the array's node), the selection inside the chunk and the place in the
output. Where those are the pieces of one box (integers, or slices of one step, each chunk
exactly where the box puts it, together filling the output), the box is read as
``b2store.open(...)[box]`` reads it: from one committed state of the frame, its chunks
decoded in C into the output, with no copy of a decoded chunk where the output is
C-contiguous. Anything else (orthogonal and vectorized keys, a store with a writer, whose
chunks may not be committed yet) is left to zarr's pipeline: :func:`box_of` says None.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...chunk import native
from . import _chunk_boxes

__all__ = ["box_of", "read_box"]


def _node_prefix(store: Any, path: str) -> str | None:
    """The key prefix (``node/`` or empty) of the array whose chunk key is ``path``."""
    parsed = store._parse_key(path)
    if parsed is None or parsed[1] != "chunk":
        return None
    node = parsed[0]
    return f"{node}/c/" if node else "c/"


def box_of(store: Any, batch: list, out: np.ndarray) -> tuple[str, tuple] | None:
    """``(node, key)``: the array and the basic key whose read fills ``out`` exactly with
    what zarr's ``batch`` of chunks would place there; None when the batch is not one box
    (the chunks' own checks in compiled code: ``_chunk_boxes.b2nd_box``)."""
    if not batch or store._writer is not None:
        return None
    prefix = _node_prefix(store, batch[0][0].path)
    if prefix is None:
        return None
    key = _chunk_boxes.b2nd_box(batch, out, prefix)
    if key is None:
        return None
    return prefix[: -len("c/")].rstrip("/"), key


def read_box(store: Any, node: str, key: tuple, out: np.ndarray, nthreads: int) -> bool:
    """The box ``key`` of the store's array ``node`` read into ``out`` in ``nthreads``
    threads; False when the array is not the one zarr described (another dtype)."""
    arr = store._array(node)
    if arr.dtype != out.dtype or arr.ndim != len(key):
        return False
    # As many threads as the pipeline's reads of other arrays: zarr's threading.max_workers.
    with native.threads_of_call(nthreads):
        arr.read_into(key, out)
    return True
