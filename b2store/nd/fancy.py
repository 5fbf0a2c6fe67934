"""NumPy's advanced indexing (integer arrays, lists, boolean masks) of a b2nd array, planned
so that NumPy itself indexes what a read decodes, and a read decodes only what the key
touches.

A key with index arrays reads a *box*: per array axis an ascending range of items (the span
of an index array's values, of a mask's ``True`` items, the items of a slice), which NumPy
then indexes with the user's key fitted to it (:attr:`FancyPlan.box_key`: the index arrays
counted from the box's start, the masks cut to it, slices and integers as the box holds
them). The fitted key keeps every part of the user's key in its place (``...``, ``None``,
bool scalars, integers), so that NumPy's own rules shape the result (where the broadcast
index dimensions go) and NumPy's own gather runs. A box larger than the result is read in
tiles along the chunks (:meth:`FancyPlan.tiles`), each filling its part of the result: tiles
cut the axes of slices, of a lone mask, and of index arrays that vary along a broadcast
dimension of their own (one array, or an outer product ``a[i[:, None], j]``). Keys whose
box neither fits nor cuts so (points far apart in a large array), and points of many items
each in a box much larger than the cache (:meth:`FancyPlan.far_apart`), are read point by
point (:mod:`b2store.nd.points`): grouped by the chunk they fall in, of each chunk only the
bounding box of its points decoded. Writes go point by point too.

NumPy checks the key first, on a stand-in of the array's shape that holds no data, with the
index arrays emptied: every error it raises (a mask of the wrong shape, a float array, too
many indices) is NumPy's own ``IndexError``. Out-of-bounds indices and arrays that do not
broadcast are found from each array's extremes and shape (NumPy's full check of the key
costs as much as the indexing itself); the key then goes to NumPy on the stand-in, which
raises its own error.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from .indexing import bool_scalar, is_mask
from .points import PointPlan, plan_points

__all__ = ["FancyPlan", "place", "plan"]

_ALL, _REVERSED = slice(None), slice(None, None, -1)
# A box larger than this (a few times a core's share of the cache) gathered by points of
# FAR_ITEMS items or more each reads point by point: 3-d a[None, i, ..., j, None] of 10**5
# points of 300 items, a box of 92 MiB, took 2.1x NumPy's time gathered from the box, 1.03x
# point by point (which reads more per point, but from a chunk's box in the cache).
FAR_BYTES = 32 << 20
FAR_ITEMS = 16
# Items of no bytes: a stand-in of them indexed by any key allocates nothing.
_NO_BYTES = np.dtype([])


def _is_array_index(k) -> bool:
    """Whether NumPy takes ``k`` as an index array (a list, a tuple, an n-d array that is
    not an integer or bool scalar)."""
    if isinstance(k, (list, tuple)):
        return True
    return isinstance(k, np.ndarray) and k.ndim > 0


@dataclass(frozen=True)
class FancyPlan:
    """How a key with index arrays reads: see the module docstring."""

    #: The key, checked, its lists and tuples made arrays.
    key: tuple
    #: The array's shape.
    shape: tuple
    #: Per array axis, the ascending range of items the box holds.
    box: tuple
    #: The key NumPy applies to the box (an array of shape ``len(r) for r in box``).
    box_key: tuple
    #: Per axis of the box, where it comes from: ``("basic", i)`` (a slice, the Ellipsis or
    #: an axis the key leaves out; ``i`` the key's part, None for those), ``("mask", i, j)``
    #: (axis ``j`` of the mask ``key[i]``), ``("array", i)`` or ``("integer", i)``.
    owners: tuple
    #: The number of items of the result.
    size: int
    #: The number of points the index arrays select (broadcast together).
    npoints: int = 0
    #: Whether the axes of index arrays are always cut along the chunks, so that no chunk
    #: between the indices is read (an outer key's, :mod:`b2store.nd.outer`).
    by_chunks: bool = False

    @property
    def box_shape(self) -> tuple:
        return tuple(len(r) for r in self.box)

    def nothing(self, dtype) -> np.ndarray:
        """The result of a key that selects nothing, read from nowhere."""
        return np.broadcast_to(np.zeros((), dtype), self.box_shape)[self.box_key]

    def tiles(self, itemsize: int, chunks, budget: int):
        """How to read the box holding at most ``budget`` bytes of it at a time, in tiles
        that follow the chunks (no chunk decoded twice): None where it cannot; otherwise
        ``(lengths, tiles)``: per axis of the result that tiles cut, its length (None: one
        tile, the box, whose indexing is the result); and per tile ``(ranges, key,
        places)``: its ranges of the array, the key NumPy applies to it, and per axis of the
        result it cuts ``(q, place)``, the slice or the positions there that it fills.
        A tile holds a third of ``budget`` at most (or a chunk's bytes): with it, a read
        holds its part of the result (until placed) and the stored bytes it was decoded
        from. With :attr:`by_chunks`, the index arrays' axes are cut first, and always;
        tiles then hold as many bytes as the box would (or a third of ``budget``)."""
        box_bytes = math.prod(self.box_shape) * itemsize
        if box_bytes <= budget and not self.by_chunks:
            return None, [(self.box, self.box_key, ())]
        most = max(budget // 3, math.prod(chunks) * itemsize)
        if box_bytes <= budget:
            most = box_bytes  # (by chunks: the cuts of the arrays' axes only)
        cuts, extents = [], list(self.box_shape)
        for d in self._splittable():
            always = self.by_chunks and self.owners[d][0] == "array"
            if not always and math.prod(extents) * itemsize <= most:
                break
            split = self._split(d, chunks[d])
            if split is None:
                continue
            cuts.append(split)
            extents[d] = max(hi - lo + 1 for _, _, lo, hi in split.runs)
        if not cuts:
            return (None, [(self.box, self.box_key, ())]) if box_bytes <= budget else None
        if math.prod(extents) * itemsize > most:
            return None
        # The last axis cut takes as many of its runs per tile as fit; by chunks, every axis
        # cut does, from the last, an index array's only where their chunks are neighbours
        # (a chunk between them would be read).
        for cut in cuts[::-1] if self.by_chunks else cuts[-1:]:
            others = math.prod(extents) // extents[cut.d]
            cut.runs = _merged(cut.runs, most // (others * itemsize), cut.chunk_of)
            extents[cut.d] = max(hi - lo + 1 for _, _, lo, hi in cut.runs)
        lengths = {c.q: c.length for c in cuts}
        groups = [[c.group(u, v) for u, v, _, _ in c.runs] for c in cuts]
        tiles = []
        for picked in itertools.product(*groups):
            ranges, key, places = list(self.box), list(self.box_key), []
            for c, (r, change, place) in zip(cuts, picked):
                ranges[c.d] = r
                if change is not None:
                    key[change[0]] = change[1]
                places.append((c.q, place))
            tiles.append((tuple(ranges), tuple(key), tuple(places)))
        return lengths, tiles

    def far_apart(self, itemsize: int) -> bool:
        """Whether NumPy's gather from the box would fetch each point's items from far apart
        in memory, better read point by point (each chunk's gather then reads a box in the
        cache): a box larger than :data:`FAR_BYTES`, points of many items each, and index
        arrays no tile cuts (points, not one array or an outer product)."""
        if math.prod(self.box_shape) * itemsize <= FAR_BYTES or not self.npoints:
            return False
        arrays = [i for i, k in enumerate(self.key) if _is_array_index(k)]
        return self.size // self.npoints >= FAR_ITEMS and any(
            is_mask(self.key[i]) or self._own_dimension(i) is None for i in arrays
        )

    def _splittable(self) -> Iterator[int]:
        """The box's axes a tile may cut: basic ones, a lone mask's first, and those of
        index arrays that vary along a broadcast dimension of their own (an outer product,
        ``a[i[:, None], j]``, or one array); with :attr:`by_chunks`, the arrays' first."""
        arrays = [i for i, k in enumerate(self.key) if _is_array_index(k)]
        axes = []
        for d, owner in enumerate(self.owners):
            if len(self.box[d]) < 2:
                continue
            if owner[0] == "basic" or (owner[0] == "mask" and owner[2] == 0 and len(arrays) == 1):
                axes.append(d)
            elif owner[0] == "array" and self._own_dimension(owner[1]) is not None:
                axes.append(d)
        if self.by_chunks:
            axes.sort(key=lambda d: self.owners[d][0] != "array")
        yield from axes

    def _own_dimension(self, i: int) -> int | None:
        """The axis of index array ``key[i]`` along which it varies where no other index
        array does; None where there is none, or more than one it varies along."""
        if any(is_mask(k) for k in self.key):
            return None
        arrays = [k for k in self.key if _is_array_index(k)]
        ndim = max(k.ndim for k in arrays)
        aligned = [(1,) * (ndim - k.ndim) + k.shape for k in arrays]
        mine = (1,) * (ndim - self.key[i].ndim) + self.key[i].shape
        varies = [e for e, n in enumerate(mine) if n > 1]
        if len(varies) != 1 or sum(s[varies[0]] > 1 for s in aligned) != 1:
            return None
        return varies[0] - (ndim - self.key[i].ndim)

    def _split(self, d: int, chunk: int) -> _Split | None:
        """Box axis ``d`` cut along the chunks (see :class:`_Split`); None where NumPy's
        placement of it in the result is not found."""
        owner, r = self.owners[d], self.box[d]
        if owner[0] == "array":
            k = self.box_key[owner[1]]
            axis = self._own_dimension(owner[1])
            q = self._result_axis(d, (owner[1], axis))
            if q is None:
                return None
            values = k.reshape(-1)  # (its one varying axis)
            if values.min() < 0:  # (the whole axis, see _array_box: counted from its end)
                values = np.where(values < 0, values + len(r), values)
            order = np.argsort((values + r.start) // chunk, kind="stable")
            ids = (values[order] + r.start) // chunk
            starts = [0, *(np.flatnonzero(np.diff(ids)) + 1).tolist(), len(order)]
            runs = []
            for u, v in zip(starts, starts[1:]):
                taken = values[order[u:v]]
                runs.append((u, v, int(taken.min()), int(taken.max())))

            def group(u: int, v: int):
                pos = order[u:v]
                taken = values[pos]
                lo = int(taken.min())
                shape = list(k.shape)
                shape[axis] = len(pos)
                fitted = (taken - lo).reshape(shape)
                return range(r.start + lo, r.start + int(taken.max()) + 1), (owner[1], fitted), pos

            chunk_of = (lambda p: (p + r.start) // chunk) if self.by_chunks else None
            return _Split(d, q, len(values), runs, group, chunk_of)
        q = self._result_axis(d, None)
        if q is None:
            return None
        starts = [0, *(np.flatnonzero(np.diff(np.asarray(r) // chunk)) + 1).tolist(), len(r)]
        runs = [(u, v, u, v - 1) for u, v in zip(starts, starts[1:])]
        n = len(r)
        if owner[0] == "basic":
            reverse = owner[1] is not None and self.box_key[owner[1]] == _REVERSED

            def group(u: int, v: int):
                return r[u:v], None, slice(n - v, n - u) if reverse else slice(u, v)

            return _Split(d, q, n, runs, group)
        at = owner[1]
        mask = self.box_key[at]
        before = np.concatenate(([0], np.cumsum(mask.reshape(n, -1).sum(axis=1))))
        # (Runs of the mask's rows that hold no True read nothing.)
        runs = [run for run in runs if before[run[1]] > before[run[0]]]

        def group(u: int, v: int):
            return r[u:v], (at, mask[u:v]), slice(int(before[u]), int(before[v]))

        return _Split(d, q, int(before[-1]), runs, group)

    def _result_axis(self, d: int, array) -> int | None:
        """The axis of the result that box axis ``d`` becomes, as NumPy places it: asked of
        NumPy on stand-ins of one or two items per axis, the one axis of the result whose
        length follows that of ``d`` (or of index array ``key[array[0]]`` along its axis
        ``array[1]``, for an array's axis)."""
        shapes = []
        for length in (1, 2):
            sizes = [1] * len(self.box)
            if array is None:
                sizes[d] = length
            key = []
            for i, k in enumerate(self.box_key):
                if is_mask(k):
                    first = next(a for a, o in enumerate(self.owners) if o[:2] == ("mask", i))
                    key.append(np.ones(sizes[first : first + k.ndim], bool))
                elif isinstance(k, np.ndarray) and k.ndim:
                    ones = [1] * k.ndim
                    if array is not None and i == array[0]:
                        ones[array[1]] = length
                    key.append(np.zeros(ones, np.intp))
                else:
                    key.append(k)
            shapes.append(np.broadcast_to(np.zeros((), np.uint8), sizes)[tuple(key)].shape)
        moved = [q for q, (a, b) in enumerate(zip(*shapes)) if a != b]
        return moved[0] if len(moved) == 1 and len(shapes[0]) == len(shapes[1]) else None

    def points(self) -> PointPlan:
        """The point-by-point plan of the key (see :class:`PointPlan`)."""
        return plan_points(self.key, self.shape)


@dataclass
class _Split:
    """Axis ``d`` of a box cut along the chunks: ``runs`` of positions ``(u, v, lo, hi)``
    (in ``v - u`` items, spanning box positions ``lo..hi``), one chunk's each or merged,
    and ``group(u, v)``: a run's range of the array, the key part it changes (``(place in
    the key, part)``, or None) and the slice or positions of result axis ``q`` it fills
    (of ``length`` items)."""

    d: int
    q: int
    length: int
    runs: list
    group: Callable
    #: The chunk of a box position, where runs merge only across neighbouring chunks.
    chunk_of: Callable | None = None


def _merged(runs: list, most: int, chunk_of: Callable | None = None) -> list:
    """Neighbouring ``runs`` merged while their span stays within ``most`` positions (and,
    with ``chunk_of``, while the chunks they fall in are neighbours)."""
    out = [runs[0]]
    for u, v, lo, hi in runs[1:]:
        pu, _, plo, phi = out[-1]
        near = chunk_of is None or chunk_of(lo) <= chunk_of(phi) + 1
        if near and max(hi, phi) - min(lo, plo) + 1 <= most:
            out[-1] = (pu, v, min(lo, plo), max(hi, phi))
        else:
            out.append((u, v, lo, hi))
    return out


def place(out: np.ndarray, places, part: np.ndarray) -> None:
    """``part`` written where ``places`` (per axis of ``out``, a slice or positions) say."""
    at = [_ALL] * out.ndim
    picks = [(q, p) for q, p in places if not isinstance(p, slice)]
    for q, p in places:
        at[q] = p
    if len(picks) > 1:
        # Several axes by positions: NumPy would pair them; they cross as np.ix_'s, in their
        # places where they are neighbours (NumPy keeps them there), else moved first.
        picks.sort(key=lambda pick: pick[0])
        qs = [q for q, _ in picks]
        crossed = np.ix_(*(p for _, p in picks))
        if qs[-1] - qs[0] == len(qs) - 1:
            for q, p in zip(qs, crossed):
                at[q] = p
        else:
            out, part = np.moveaxis(out, qs, range(len(qs))), np.moveaxis(part, qs, range(len(qs)))
            at = list(crossed) + [a for q, a in enumerate(at) if q not in qs]
    out[tuple(at)] = part


def plan(key, shape, *, by_chunks: bool = False) -> FancyPlan | None:
    """The plan of ``key`` over an array of ``shape``; None when the key has no index
    array (NumPy's basic indexing, which :func:`~b2store.nd.indexing.normalize` plans).
    ``by_chunks``: see :attr:`FancyPlan.by_chunks`."""
    if not isinstance(key, tuple):
        key = (key,)
    if not any(_is_array_index(k) for k in key):
        return None
    key = tuple(_as_array(k) if _is_array_index(k) else k for k in key)
    # NumPy's errors, and its checks, on a stand-in that holds no data and index arrays that
    # hold no indices (their values and broadcasting are checked below, from what a read
    # needs anyway: NumPy's own check of them costs as much as the indexing).
    light = tuple(_emptied(k) for k in key)
    np.broadcast_to(np.zeros((), np.uint8), shape)[light]
    taking = sum(
        (k.ndim if is_mask(k) else 1)
        for k in key
        if k is not Ellipsis and k is not None and not bool_scalar(k)
    )
    # NumPy checks the indices only where the index arrays (with the bool scalars, as
    # arrays of one item or none) broadcast to some: ([5], False) of an axis of 5 is empty.
    masks = {i: _mask_box(k) for i, k in enumerate(key) if is_mask(k)}
    shapes = [
        (masks[i][1],)
        if i in masks
        else k.shape
        if isinstance(k, np.ndarray) and k.ndim
        else (int(bool(k)),)
        for i, k in enumerate(key)
        if i in masks or _is_array_index(k) or bool_scalar(k)
    ]
    try:
        npoints = math.prod(np.broadcast_shapes(*shapes))
    except ValueError:
        _refused(key, shape)
    box, box_key, owners = [], [], []
    per_point, axis = 1, 0
    for i, k in enumerate(key):
        if k is Ellipsis:
            n = len(shape) - taking
            box.extend(range(m) for m in shape[axis : axis + n])
            owners.extend([("basic", i)] * n)
            per_point *= math.prod(shape[axis : axis + n])
            box_key.append(Ellipsis)
            axis += n
        elif k is None or bool_scalar(k):
            box_key.append(k)
        elif isinstance(k, slice):
            r = range(shape[axis])[k]
            box.append(r if r.step > 0 else r[::-1])
            owners.append(("basic", i))
            box_key.append(_ALL if r.step > 0 else _REVERSED)
            per_point *= len(r)
            axis += 1
        elif i in masks:
            ranges = masks[i][0]
            box.extend(ranges)
            owners.extend(("mask", i, j) for j in range(k.ndim))
            box_key.append(k[tuple(slice(r.start, r.stop) for r in ranges)])
            axis += k.ndim
        elif isinstance(k, np.ndarray) and k.ndim:
            r, fitted = _array_box(k, shape[axis], key, shape) if npoints else (range(0), k)
            box.append(r)
            owners.append(("array", i))
            box_key.append(fitted)
            axis += 1
        else:  # an integer (the stand-in has checked it)
            at = operator.index(k) % shape[axis]
            box.append(range(at, at + 1))
            owners.append(("integer", i))
            box_key.append(0)
            axis += 1
    box.extend(range(n) for n in shape[axis:])
    owners.extend([("basic", None)] * (len(shape) - axis))
    per_point *= math.prod(shape[axis:])
    size = npoints * per_point
    return FancyPlan(
        key, tuple(shape), tuple(box), tuple(box_key), tuple(owners), size, npoints, by_chunks
    )


def _emptied(k):
    """``k`` with the same checks to pass but no indices: an index array made empty (of its
    dtype and dimensions), a mask all False (of its shape, without memory)."""
    if is_mask(k):
        return np.broadcast_to(np.False_, k.shape)
    if isinstance(k, np.ndarray) and k.ndim:
        return np.empty((0,) * k.ndim, k.dtype)
    return k


def _refused(key, shape) -> NoReturn:
    """Raise NumPy's own error for a key found out of bounds or not broadcasting."""
    np.broadcast_to(np.empty((), _NO_BYTES), shape)[key]
    raise IndexError(f"index out of bounds, or index arrays that do not broadcast: {key!r}")


def _array_box(k: np.ndarray, n: int, key, shape) -> tuple[range, np.ndarray]:
    """The range of items index array ``k`` takes along an axis of ``n``, and ``k`` fitted
    to it (its indices counted from the range's start)."""
    if not k.size:
        return range(0), k
    lo, hi = int(k.min()), int(k.max())
    if lo < -n or hi >= n:
        _refused(key, shape)
    if lo < 0 <= hi:
        # Indices from both ends: the whole axis, where NumPy counts them as it does in
        # the array (normalizing them would cost a pass and a copy of the indices).
        return range(n), k
    if hi < 0:
        lo, hi = lo + n, hi + n
        return range(lo, hi + 1), np.subtract(k, lo - n, dtype=np.intp, casting="unsafe")
    if lo:
        k = np.subtract(k, lo, dtype=np.intp, casting="unsafe")  # (in range: checked above)
    return range(lo, hi + 1), k


def _mask_box(k: np.ndarray) -> tuple[list[range], int]:
    """Per axis of mask ``k``, the range its True items span; and how many there are."""
    count = int(np.count_nonzero(k))
    if not count:
        return [range(0)] * k.ndim, 0
    if k.ndim == 1:
        first, last = int(k.argmax()), len(k) - 1 - int(k[::-1].argmax())
        return [range(first, last + 1)], count
    ranges = []
    for j in range(k.ndim):
        hit = np.flatnonzero(k.any(axis=tuple(a for a in range(k.ndim) if a != j)))
        ranges.append(range(int(hit[0]), int(hit[-1]) + 1))
    return ranges, count


def _as_array(k) -> np.ndarray:
    arr = np.asarray(k)
    if arr.size == 0 and arr.dtype.kind == "f" and not isinstance(k, np.ndarray):
        arr = arr.astype(np.intp)  # an empty list is an empty integer index, in NumPy too
    return arr
