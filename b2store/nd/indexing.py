"""Index keys of a b2nd array: which items a key reads, and how NumPy shapes the result.

A key is split in two. The array's axes each get an ascending ``range`` of the items to
read (an integer reads one item, a slice its items in ascending order), and the block of
those items is then indexed by a second key, run by NumPy itself, that keeps NumPy's own
semantics for what is left: integers drop their axis, negative steps reverse, ``None``
adds an axis, and a bool scalar (``True``, ``np.True_``, a 0-d bool array) adds an axis of
length 1 or 0 with NumPy's rules for where it goes. Integer arrays, boolean masks and
lists (NumPy's advanced indexing) are refused with :class:`~b2store.UnsupportedError`;
anything NumPy itself refuses (a float, a string) is an ``IndexError`` as in NumPy.
"""

from __future__ import annotations

import operator

import numpy as np

from ..errors import UnsupportedError

__all__ = ["normalize"]


def _bool_scalar(k) -> bool:
    """Whether ``k`` is a bool scalar NumPy takes as a 0-d boolean mask."""
    return isinstance(k, (bool, np.bool_)) or (
        isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype == bool
    )


def normalize(key, shape):
    """``(dims, final, empty)``: per axis the ascending range of items read; the key that
    NumPy applies to the block read (of shape ``len(r) for r in dims``) to give the result;
    and whether the key selects nothing whatever the array holds (a ``False``), so that
    nothing needs reading or writing.

    >>> normalize((1, slice(None, None, -1)), (3, 4))[:2]
    ([range(1, 2), range(0, 4)], (0, slice(None, None, -1)))
    >>> normalize((True, None, 0), (3, 4))[1]
    (True, None, 0, slice(None, None, None))
    """
    if not isinstance(key, tuple):
        key = (key,)
    ellipses = sum(k is Ellipsis for k in key)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    # None and bool scalars add axes without taking one of the array's.
    taking = sum(1 for k in key if k is not Ellipsis and k is not None and not _bool_scalar(k))
    if taking > len(shape):
        raise IndexError(
            f"too many indices for array: array is {len(shape)}-dimensional, "
            f"but {taking} were indexed"
        )
    dims, final, empty = [], [], False
    axes = iter(shape)
    for k in key:
        if k is Ellipsis:
            for _ in range(len(shape) - taking):
                dims.append(range(next(axes)))
            final.append(Ellipsis)
        elif k is None:
            final.append(None)
        elif _bool_scalar(k):
            empty = empty or not bool(k)
            final.append(bool(k))
        elif isinstance(k, slice):
            r = range(next(axes))[k]
            if r.step < 0:
                dims.append(r[::-1])
                final.append(slice(None, None, -1))
            else:
                dims.append(r)
                final.append(slice(None))
        else:
            n = next(axes)
            dims.append(_integer(k, n))
            final.append(0)
    rest = [range(n) for n in axes]
    dims.extend(rest)
    final.extend(slice(None) for _ in rest)
    # As in numpy, an Ellipsis keeps a 0-d result an array instead of a scalar: it stays.
    return dims, tuple(final), empty


def _integer(k, n: int) -> range:
    try:
        i = operator.index(k)
    except TypeError:
        if isinstance(k, np.ndarray) and k.dtype.kind not in "iub":
            raise IndexError(
                f"arrays used as indices must be of integer (or boolean) type, not {k.dtype}"
            ) from None
        if isinstance(k, (list, tuple, np.ndarray)):
            raise UnsupportedError(
                "index (integer arrays, boolean masks and lists: read a slice, then index "
                "the NumPy array)",
                f"{type(k).__name__} of shape {np.shape(k)}",
            ) from None
        raise IndexError(
            "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
            f"bool scalars are valid indices, not {type(k).__name__}"
        ) from None
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of bounds for axis with size {n}")
    return range(i % n, i % n + 1)
