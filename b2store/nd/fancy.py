"""NumPy's advanced indexing (integer arrays, lists, boolean masks) of a b2nd array, planned
as pieces of one chunk each, so that a read decodes only the chunks the selection touches.

A key with index arrays is turned into one NumPy itself applies, so that NumPy's own rules
decide the result's shape (where the broadcast index dimensions go, how ``None``, bool
scalars and integers combine with them). A boolean mask is its ``nonzero()`` arrays, as
NumPy defines it. The points the index arrays select (broadcast together) are numbered
``0..P-1``; a *working* array holds, for each point, the items of the basic (slice and
integer) axes, and is filled chunk by chunk: the points are grouped by the chunk they fall
in, and of each chunk only the bounding box of its points (and of the slices) is decoded.
NumPy checks the key first on a zero-strided stand-in of the array's shape, so that every
error (out of bounds, a mask of the wrong shape, arrays that do not broadcast, a float
array) is NumPy's own ``IndexError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .indexing import _bool_scalar, chunks_touched, normalize

__all__ = ["FancyPlan", "plan"]


def _is_array_index(k) -> bool:
    """Whether NumPy takes ``k`` as an index array (a list, a tuple, an n-d array that is
    not an integer or bool scalar)."""
    if isinstance(k, (list, tuple)):
        return True
    return isinstance(k, np.ndarray) and k.ndim > 0


@dataclass(frozen=True)
class FancyPlan:
    """How a key with index arrays reads: see the module docstring."""

    #: Per array axis, the ascending range of items read (advanced axes: unused).
    dims: list
    #: The array axes the index arrays take, in order.
    adv_axes: tuple
    #: Per advanced axis, the (non-negative) coordinate of each point, shape (P,).
    points: tuple
    #: The shape of the array NumPy indexes with ``final``: the first advanced axis holds
    #: the P points, the others are of length 1.
    t_shape: tuple
    #: The key NumPy applies to the ``t_shape`` array to give the result.
    final: tuple
    #: Whether the key selects nothing (a ``False``, an empty array, an empty slice).
    empty: bool

    @property
    def basic_axes(self) -> list[int]:
        return [d for d in range(len(self.dims)) if d not in self.adv_axes]

    def working(self, t: np.ndarray) -> np.ndarray:
        """The view of ``t`` (of ``t_shape``) with the points first, then the basic axes."""
        k = len(self.adv_axes)
        moved = np.moveaxis(t, self.adv_axes, range(k))
        return moved[(slice(None),) + (0,) * (k - 1)]

    def pieces(self, chunks) -> Iterator:
        """Per chunk touched: its coordinates in the chunk grid; per array axis the
        chunk-local ascending range to decode (the bounding box of the piece); the point
        numbers that fall in it; their chunk-local coordinates on the advanced axes; and the
        positions of the basic axes' items in the working array."""
        if self.empty:
            return
        adv, basic = self.adv_axes, self.basic_axes
        by_chunk = [p // chunks[d] for d, p in zip(adv, self.points)]
        grid = [max(int(c.max()) + 1, 1) for c in by_chunk]
        flat = np.ravel_multi_index(by_chunk, grid)
        order = np.argsort(flat, kind="stable")  # stable: points keep NumPy's order
        starts = np.flatnonzero(np.diff(flat[order])) + 1
        groups = np.split(order, starts)
        basic_pieces = list(
            _basic_pieces([self.dims[d] for d in basic], [chunks[d] for d in basic])
        )
        for group in groups:
            ccoords = [int(c[group[0]]) for c in by_chunk]
            local = [p[group] - cc * chunks[d] for d, p, cc in zip(adv, self.points, ccoords)]
            boxes = {d: range(int(lc.min()), int(lc.max()) + 1) for d, lc in zip(adv, local)}
            for bcoords, bparts in basic_pieces:
                coords = [0] * len(self.dims)
                ranges = [None] * len(self.dims)
                for d, cc in zip(adv, ccoords):
                    coords[d], ranges[d] = cc, boxes[d]
                for d, bc, (loc, _) in zip(basic, bcoords, bparts):
                    coords[d], ranges[d] = bc, loc
                yield tuple(coords), ranges, group, local, [pos for _, pos in bparts]


def _basic_pieces(dims, chunks):
    if not dims:
        yield (), []
        return
    yield from chunks_touched(dims, chunks)


def plan(key, shape) -> FancyPlan | None:
    """The plan of ``key`` over an array of ``shape``; None when the key has no index
    array (NumPy's basic indexing, which :func:`~b2store.nd.indexing.normalize` plans)."""
    if not isinstance(key, tuple):
        key = (key,)
    if not any(_is_array_index(k) for k in key):
        return None
    key = tuple(_as_array(k) if _is_array_index(k) else k for k in key)
    # NumPy's errors, and its checks, on a stand-in that holds no data.
    np.broadcast_to(np.zeros((), np.uint8), shape)[key]
    taking = sum(
        (k.ndim if k.dtype == bool else 1) if isinstance(k, np.ndarray) and k.ndim else 1
        for k in key
        if k is not Ellipsis and k is not None and not _bool_scalar(k)
    )
    expanded, ellipsis = [], None
    for k in key:
        if k is Ellipsis:
            ellipsis = (len(expanded), len(shape) - taking)  # where, and how many axes
            expanded.extend([slice(None)] * (len(shape) - taking))
        elif isinstance(k, np.ndarray) and k.ndim and k.dtype == bool:
            expanded.extend(k.nonzero())  # a mask is its nonzero() arrays, in NumPy too
        else:
            expanded.append(k)
    arrays = [i for i, k in enumerate(expanded) if isinstance(k, np.ndarray) and k.ndim]
    dims, final, empty = normalize(
        tuple(slice(None) if i in arrays else k for i, k in enumerate(expanded)), shape
    )
    final = list(final)
    # Which array axis each element of the key takes (None and bool scalars take none).
    axis_of, axis = {}, 0
    for i, k in enumerate(expanded):
        if k is None or _bool_scalar(k):
            continue
        axis_of[i] = axis
        axis += 1
    broadcast = np.broadcast_arrays(*(expanded[i] for i in arrays))
    bshape = broadcast[0].shape if broadcast else ()
    adv_axes = tuple(axis_of[i] for i in arrays)
    # (NumPy has checked them in bounds: a negative index counts from the end.)
    flat = [np.asarray(b, np.intp).reshape(-1) for b in broadcast]
    points = tuple(np.where(p < 0, p + shape[d], p) for p, d in zip(flat, adv_axes))
    npoints = points[0].size
    t_shape = [len(r) for r in dims]
    for j, (i, d) in enumerate(zip(arrays, adv_axes)):
        t_shape[d] = npoints if j == 0 else 1
        final[i] = np.arange(npoints).reshape(bshape) if j == 0 else np.zeros(bshape, np.intp)
    if ellipsis is not None:
        # The Ellipsis goes back into the key NumPy applies: it separates the index arrays on
        # either side of it even where it stands for no axis, and NumPy then moves their
        # dimensions first ((:, [0, 0, 0], ..., 0) of a 3-d array is (3, 5), not (5, 3)).
        # (Its axes are whole, so they index the working array as slice(None) would.)
        at, n = ellipsis
        final[at : at + n] = [Ellipsis]
    empty = (
        empty or npoints == 0 or any(len(r) == 0 for d, r in enumerate(dims) if d not in adv_axes)
    )
    return FancyPlan(dims, adv_axes, points, tuple(t_shape), tuple(final), empty)


def _as_array(k) -> np.ndarray:
    arr = np.asarray(k)
    if arr.size == 0 and arr.dtype.kind == "f" and not isinstance(k, np.ndarray):
        arr = arr.astype(np.intp)  # an empty list is an empty integer index, in NumPy too
    return arr
