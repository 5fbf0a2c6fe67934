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
    what zarr's ``batch`` of chunks would place there; None when the batch is not one box."""
    if not batch or store._writer is not None or len({b[0].path for b in batch}) != len(batch):
        return None
    prefix = _node_prefix(store, batch[0][0].path)
    if prefix is None:
        return None
    chunks = tuple(batch[0][1].shape)
    ndim = len(chunks)
    # Per axis: the first and last item read, the step (None: an integer), over all chunks.
    firsts: list[int | None] = [None] * ndim
    steps: list[int | None] = [None] * ndim
    places = []
    for getter, spec, csel, osel, _complete in batch:
        path = getter.path
        if not path.startswith(prefix) or tuple(spec.shape) != chunks:
            return None
        try:
            coords = [int(p) for p in path[len(prefix) :].split("/")]
        except ValueError:
            return None
        if len(coords) != ndim or type(csel) is not tuple or len(csel) != ndim:
            return None
        if type(osel) is not tuple:
            return None
        spans = []
        for d, (sel, c) in enumerate(zip(csel, chunks, strict=True)):
            origin = coords[d] * c
            if isinstance(sel, slice):
                start, stop, step = sel.indices(c)
                if step < 1 or stop <= start:
                    return None
                first = origin + start
                n = len(range(start, stop, step))
            elif isinstance(sel, (int, np.integer)):
                first, step, n = origin + int(sel), None, 1
            else:
                return None
            if steps[d] is None and firsts[d] is None:
                steps[d] = step
            elif steps[d] != step:
                return None
            firsts[d] = first if firsts[d] is None else min(firsts[d], first)
            spans.append((first, n))
        places.append((spans, osel))
    key, size, dims = [], 1, range(ndim)
    lasts = [max(sp[d][0] + (sp[d][1] - 1) * (steps[d] or 1) for sp, _ in places) for d in dims]
    for d in range(ndim):
        if steps[d] is None:
            if lasts[d] != firsts[d]:
                return None
            key.append(firsts[d])
        else:
            key.append(slice(firsts[d], lasts[d] + 1, steps[d]))
            size *= (lasts[d] - firsts[d]) // steps[d] + 1
    if size != out.size:
        return None
    # Each chunk's place in the output must be where the box puts its items, and the
    # places must fill the output: then the box's read is the batch's, item for item.
    filled = 0
    for spans, osel in places:
        j, volume = 0, 1
        for d, (first, n) in enumerate(spans):
            if steps[d] is None:
                continue
            if j >= len(osel) or not isinstance(osel[j], slice):
                return None
            start, stop, ostep = osel[j].indices(out.shape[j])
            if ostep != 1 or start != (first - firsts[d]) // steps[d] or stop - start != n:
                return None
            if (first - firsts[d]) % steps[d]:
                return None
            volume *= n
            j += 1
        if j != len(osel) or j != out.ndim:
            return None
        filled += volume
    if filled != out.size:
        return None
    return prefix[: -len("c/")].rstrip("/"), tuple(key)


def read_box(store: Any, node: str, key: tuple, out: np.ndarray) -> bool:
    """The box ``key`` of the store's array ``node`` read into ``out``; False when the
    array is not the one zarr described (another dtype)."""
    arr = store._array(node)
    if arr.dtype != out.dtype or arr.ndim != len(key):
        return False
    arr.read_into(key, out)
    return True
