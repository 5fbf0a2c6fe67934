"""Orthogonal (outer) indexing of a b2nd array, ``arr.oindex[...]`` as zarr names it: each
index array picks items along its own axis, whatever the others pick (``arr.oindex[[0, 2],
:, [1, 3]]`` is 2 x n x 2, where NumPy's ``arr[[0, 2], :, [1, 3]]`` pairs the two arrays),
the way xarray's lazy arrays are indexed.

An outer key is read as the NumPy key that selects the same items: each index array along a
broadcast dimension of its own (an outer product, ``a[i[:, None], :, j]``), and an integer
as a slice of one item where index arrays are there too (NumPy would broadcast it with them),
so that :mod:`b2store.nd.fancy` reads it as any index-array key is read: its box, cut in
tiles along the chunks, never decoding the chunks between the indices. NumPy puts the
broadcast dimensions first where the index arrays are not neighbours; they are then moved
back to their axes, and the integers' axes dropped. A key without index arrays is NumPy's
basic indexing, read as it is.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["OuterIndex", "OuterKey", "outer_key"]

_ALL = slice(None)


@dataclass(frozen=True)
class OuterKey:
    """An outer key as the NumPy key that selects its items (see the module docstring)."""

    #: The NumPy key.
    key: tuple
    #: The axes the index arrays take, in order.
    arrays: tuple
    #: The axes the integers take (of one item in what ``key`` reads; not in the result).
    drops: tuple
    #: The outer result's shape.
    shape: tuple

    @property
    def _moved(self) -> bool:
        """Whether NumPy puts the broadcast dimensions first (the arrays not neighbours)."""
        return len(self.arrays) > 1 and self.arrays[-1] - self.arrays[0] >= len(self.arrays)

    def result(self, read: np.ndarray) -> np.ndarray:
        """The outer result from what ``key`` read."""
        if self._moved:
            read = np.moveaxis(read, range(len(self.arrays)), self.arrays)
        if self.drops:
            read = read[tuple(0 if d in self.drops else _ALL for d in range(len(self.key)))]
        return read

    def value(self, value, dtype: np.dtype) -> np.ndarray:
        """``value`` (broadcast to the outer result's shape) laid out as ``key`` writes it."""
        dtype = np.dtype(dtype)
        value = np.broadcast_to(np.asarray(value, dtype.base), self.shape + dtype.shape)
        if self.drops:
            value = np.expand_dims(value, self.drops)
        if self._moved:
            value = np.moveaxis(value, self.arrays, range(len(self.arrays)))
        return value


def outer_key(key, shape: tuple) -> OuterKey:
    """The :class:`OuterKey` of ``key`` (integers, slices, 1-d integer arrays or lists,
    boolean masks of an axis's length, at most one Ellipsis) over an array of ``shape``."""
    key = _expanded(key if isinstance(key, tuple) else (key,), len(shape))
    parts, arrays, drops, result = [], [], [], []
    for axis, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, slice):
            parts.append(k)
            result.append(len(range(n)[k]))
        elif _is_integer(k):
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            parts.append(i)
            drops.append(axis)
        else:
            index = _index_array(k, axis, n)
            parts.append(index)
            arrays.append(axis)
            result.append(len(index))
    if arrays:
        m = len(arrays)
        for j, axis in enumerate(arrays):
            if m > 1:
                parts[axis] = parts[axis].reshape((1,) * j + (-1,) + (1,) * (m - 1 - j))
        for axis in drops:
            i = parts[axis] % shape[axis]
            parts[axis] = slice(i, i + 1)  # (an integer would be broadcast with the arrays)
    else:
        drops = []  # NumPy's basic indexing drops them itself
    return OuterKey(tuple(parts), tuple(arrays), tuple(drops), tuple(result))


class OuterIndex:
    """``arr.oindex``: an array indexed orthogonally, read (``arr.oindex[key]``) and written
    (``arr.oindex[key] = value``), through the array's ``read`` of an :class:`OuterKey` and
    its ``write`` of a NumPy key."""

    __slots__ = ("_read", "_write", "_shape", "_dtype")

    def __init__(self, read: Callable, write: Callable, shape: tuple, dtype: np.dtype):
        self._read, self._write, self._shape, self._dtype = read, write, shape, dtype

    def __getitem__(self, key) -> np.ndarray:
        return self._read(outer_key(key, self._shape))

    def __setitem__(self, key, value) -> None:
        outer = outer_key(key, self._shape)
        self._write(outer.key, outer.value(value, self._dtype))


def _expanded(key: tuple, ndim: int) -> tuple:
    """``key`` with its Ellipsis (or the axes it leaves out) as full slices."""
    at = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(at) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if at:
        key = key[: at[0]] + (_ALL,) * (ndim - len(key) + 1) + key[at[0] + 1 :]
    if len(key) > ndim:
        raise IndexError(
            f"too many indices for array: array is {ndim}-dimensional, but {len(key)} were indexed"
        )
    return key + (_ALL,) * (ndim - len(key))


def _is_integer(k) -> bool:
    if isinstance(k, (bool, np.bool_)):
        return False
    if isinstance(k, np.ndarray):
        return k.ndim == 0 and k.dtype.kind in "iu"
    try:
        operator.index(k)
    except TypeError:
        return False
    return True


def _index_array(k, axis: int, n: int) -> np.ndarray:
    """The 1-d integer index array of ``k`` along an axis of ``n`` items (a mask's
    ``True`` positions), or NumPy's IndexError (the bounds are checked when it is read)."""
    if k is None or isinstance(k, (bool, np.bool_, float, str, bytes)):
        raise IndexError(
            "outer indexing takes integers, slices, 1-d integer arrays, boolean masks and "
            f"one Ellipsis, not {k!r} (axis {axis})"
        )
    index = np.asarray(k)
    if index.ndim != 1:
        raise IndexError(
            f"outer indexing takes 1-d index arrays, not a {index.ndim}-d one (axis {axis})"
        )
    if index.dtype == bool:
        if len(index) != n:
            raise IndexError(
                f"boolean index did not match indexed array along axis {axis}; size of axis "
                f"is {n} but size of corresponding boolean axis is {len(index)}"
            )
        return np.flatnonzero(index)
    if index.dtype.kind not in "iu":
        if not index.size and not isinstance(k, np.ndarray):
            return index.astype(np.intp)  # an empty list is an empty integer index
        raise IndexError("arrays used as indices must be of integer (or boolean) type")
    return index
