"""A key with index arrays or masks read or written point by point: the points its index
arrays select (broadcast together) grouped by the chunk they fall in, each chunk's bounding
box of them, and the key NumPy applies to the gathered points.

:mod:`b2store.nd.fancy` reads keys this way where its box is too large to read and cannot
be cut in tiles (points far apart in a large array), and every write goes this way. The
points are numbered ``0..P-1``; a *working* array holds, for each point, the items of the
basic (slice and integer) axes, and is filled chunk by chunk. A read fills a view of its
result arranged as the working array (:meth:`PointPlan.result`), where NumPy's placement of
the broadcast dimensions is found on a stand-in of a few items; a write fills the working
array ``t`` from the value, as NumPy's indexing of it by :attr:`PointPlan.final` gives it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .indexing import bool_scalar, chunks_touched, is_mask, normalize

__all__ = ["PointPlan", "plan_points"]

_REVERSED = slice(None, None, -1)


@dataclass(frozen=True)
class PointPlan:
    """A key read or written point by point: its points grouped by chunk (see the module
    docstring)."""

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
    #: The shape the index arrays broadcast to (P items).
    bshape: tuple = ()
    #: The basic axes a slice of negative step takes (reversed in the result).
    flips: tuple = ()
    #: The basic axes an integer takes (not in the result).
    drops: tuple = ()

    @property
    def basic_axes(self) -> list[int]:
        return [d for d in range(len(self.dims)) if d not in self.adv_axes]

    def working(self, t: np.ndarray) -> np.ndarray:
        """The view of ``t`` (of ``t_shape``) with the points first, then the basic axes."""
        k = len(self.adv_axes)
        moved = np.moveaxis(t, self.adv_axes, range(k))
        return moved[(slice(None),) + (0,) * (k - 1)]

    def result(self, dtype) -> tuple[np.ndarray, np.ndarray] | None:
        """The result, of NumPy's shape for the key (uninitialized), and its view arranged as
        the working array, into which the points can be gathered straight: no working array
        and no indexing of it (a second result). None where the layout is not found."""
        if self.empty or np.dtype(dtype).subdtype is not None:
            return None  # (a subarray dtype's items are arrays of their own)
        # NumPy's placement of the broadcast dimensions, on a stand-in of a few items: the
        # broadcast dimensions come out of length 2, the basic axes kept of length 3, the new
        # axes (None, True) of length 1.
        nb, basic = len(self.bshape), self.basic_axes
        if not 0 < nb <= 8:
            return None  # (a stand-in of 2**nb items: kept small)
        small = [3] * len(self.dims)
        for j, d in enumerate(self.adv_axes):
            small[d] = 2**nb if j == 0 else 1
        key, first = [], True
        for k in self.final:
            if isinstance(k, np.ndarray) and k.ndim:
                k = np.arange(2**nb).reshape((2,) * nb) if first else np.zeros((2,) * nb, int)
                first = False
            key.append(k)
        marks = np.broadcast_to(np.zeros((), np.uint8), small)[tuple(key)].shape
        kept = [d for d in basic if d not in self.drops]
        at = marks.index(2) if 2 in marks else -1
        if (
            marks[at : at + nb] != (2,) * nb
            or marks.count(2) != nb
            or marks.count(3) != len(kept)
            or set(marks) - {1, 2, 3}
        ):
            return None
        lengths = iter(len(self.dims[d]) for d in kept)
        shape = [n if n != 3 else next(lengths) for n in marks]
        shape[at : at + nb] = self.bshape
        out = np.empty(shape, dtype)
        view = out.reshape(tuple(shape[:at]) + (-1,) + tuple(shape[at + nb :]))
        axes = marks[:at] + (2,) + marks[at + nb :]
        flips = iter(d in self.flips for d in kept)
        view = view[tuple(0 if m == 1 else _REVERSED if m == 3 and next(flips) else
                          slice(None) for m in axes)]  # fmt: skip
        view = np.moveaxis(view, [m for m in axes if m != 1].index(2), 0)
        # (The axes an integer takes are of one item in the working array.)
        return out, np.expand_dims(view, [1 + basic.index(d) for d in self.drops])

    def pieces(self, chunks) -> Iterator:
        """Per chunk touched: its coordinates in the chunk grid; per array axis the
        chunk-local ascending range to decode (the bounding box of the piece); the point
        numbers that fall in it; their chunk-local coordinates on the advanced axes; and the
        positions of the basic axes' items in the working array."""
        if self.empty:
            return
        adv, basic = self.adv_axes, self.basic_axes
        grid = [int(p.max()) // chunks[d] + 1 for d, p in zip(adv, self.points)]
        # Each point's chunk, numbered in C order of the advanced axes' grid (one array of
        # them at a time, not one per axis: a few integers per point are what this holds).
        flat = self.points[0] // chunks[adv[0]]
        for d, p, g in zip(adv[1:], self.points[1:], grid[1:]):
            flat *= g
            flat += p // chunks[d]
        if math.prod(grid) <= 1 << 16:
            flat = flat.astype(np.uint16)  # (NumPy sorts 16-bit keys by radix: in linear time)
        counts = np.bincount(flat, minlength=math.prod(grid))
        order = np.argsort(flat, kind="stable")  # stable: points keep NumPy's order
        del flat
        touched = np.flatnonzero(counts)
        groups = np.split(order, np.cumsum(counts[touched])[:-1])
        basic_pieces = list(
            _basic_pieces([self.dims[d] for d in basic], [chunks[d] for d in basic])
        )
        for group, nchunk in zip(groups, touched.tolist()):
            ccoords = [int(c) for c in np.unravel_index(nchunk, grid)]
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


def plan_points(key, shape) -> PointPlan:
    """The point plan of ``key`` (checked by :func:`b2store.nd.fancy.plan`, its lists made
    arrays) over an array of ``shape``."""
    taking = sum(
        (k.ndim if is_mask(k) else 1)
        for k in key
        if k is not Ellipsis and k is not None and not bool_scalar(k)
    )
    expanded, ellipsis = [], None
    for k in key:
        if k is Ellipsis:
            ellipsis = (len(expanded), len(shape) - taking)  # where, and how many axes
            expanded.extend([slice(None)] * (len(shape) - taking))
        elif is_mask(k):
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
        if k is None or bool_scalar(k):
            continue
        axis_of[i] = axis
        axis += 1
    flips = tuple(d for i, d in axis_of.items() if i not in arrays and final[i] == _REVERSED)
    drops = tuple(d for i, d in axis_of.items() if i not in arrays and type(final[i]) is int)
    broadcast = np.broadcast_arrays(*(expanded[i] for i in arrays))
    bshape = broadcast[0].shape if broadcast else ()
    adv_axes = tuple(axis_of[i] for i in arrays)
    points = []
    for b, d in zip(broadcast, adv_axes):
        p = np.asarray(b, np.intp).reshape(-1)  # (a view where b is one array, unbroadcast)
        if p.size and p.min() < 0:  # (in bounds, checked: negative indices count from the end)
            p = np.where(p < 0, p + shape[d], p)
        points.append(p)
    npoints = math.prod(bshape)
    t_shape = [len(r) for r in dims]
    for j, (i, d) in enumerate(zip(arrays, adv_axes)):
        t_shape[d] = npoints if j == 0 else 1
        # (The other arrays index an axis of one item: zeros, of no memory.)
        final[i] = (
            np.arange(npoints).reshape(bshape)
            if j == 0
            else np.broadcast_to(np.zeros((), np.intp), bshape)
        )
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
    return PointPlan(
        dims, adv_axes, tuple(points), tuple(t_shape), tuple(final), empty, bshape, flips, drops
    )
