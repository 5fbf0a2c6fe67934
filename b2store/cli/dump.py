"""The ``dump`` command: an array's values (or a slice of them), printed numpy-style, with the
size of what would be decoded checked before anything is read, and only what is printed read.

numpy prints an array of more than ``threshold`` items as its first and last ``edgeitems``
along each axis, with ``...`` between: ``dump`` reads just those corners (each a box of the
array, so a b2nd array decodes a few blocks of a few chunks) and prints them as numpy prints
the whole, never holding the selection. ``--full`` prints every item and reads the selection
at once (at most ``Limits.max_chunk_nbytes``). Each chunk read is checked as the readers check
it (``verify`` calls the same ones bad), so a chunk that claims more than its frame says is a
``FormatError``, not an allocation of what it claims.
"""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np

from ..limits import DEFAULT_LIMITS
from .arguments import UsageError, parse_slice, selection_shape

__all__ = ["DUMP_LIMIT", "run", "printed"]

#: ``dump`` refuses to load more than this without ``--full`` or ``--slice``.
DUMP_LIMIT = 256 * 2**20


def run(args) -> int:
    from .inspection import open_arrays

    key = parse_slice(args.slice) if args.slice is not None else (Ellipsis,)
    found = False
    with np.printoptions(threshold=sys.maxsize) if args.full else np.printoptions():
        for name, arr in open_arrays(args.path, dtype=args.dtype):
            if args.array is not None and name.strip("/") != args.array.strip("/"):
                continue
            found = True
            shape = selection_shape(arr.shape, key)
            nbytes = int(np.prod(shape)) * np.dtype(arr.dtype).itemsize
            # Checked before anything is read: a 300-byte file may hold a terabyte of zeros.
            if nbytes > DUMP_LIMIT and not args.full:
                raise UsageError(
                    f"{name}: the selection is {nbytes} bytes decoded; narrow it with "
                    "--slice, or give --full"
                )
            if nbytes > DEFAULT_LIMITS.max_chunk_nbytes:
                raise UsageError(
                    f"{name}: the selection is {nbytes} bytes decoded, more than dump holds "
                    f"at once even with --full ({DEFAULT_LIMITS.max_chunk_nbytes}, "
                    "Limits.max_chunk_nbytes); print it in pieces with --slice"
                )
            text, dtype = printed(arr, key, shape)
            sel = f"[{args.slice}]" if args.slice is not None else ""
            print(f"{name}{sel}: shape {shape}, dtype {dtype}")
            print(text, flush=True)
    if not found:
        raise UsageError(f"{args.path}: no array named {args.array!r}")
    return 0


def printed(arr, key: tuple, shape: tuple[int, ...]) -> tuple[str, np.dtype]:
    """``str(arr[key])`` under numpy's print options, and the dtype of ``arr[key]``,
    reading only the items numpy shows (``shape`` is the selection's)."""
    opts = np.get_printoptions()
    if math.prod(shape) <= opts["threshold"]:
        values = np.asarray(arr[key])
        return str(values), values.dtype
    edge = opts["edgeitems"]
    boxes = _boxes(key, arr.shape, edge)
    pieces = [(dst, np.asarray(arr[src])) for src, dst in boxes]
    dtype = pieces[0][1].dtype
    # A summarised axis keeps ``edge`` items each side and one between, which numpy
    # replaces by "..." (never formatting it: widths come from the edges alone, as for the
    # whole array). threshold=0: every axis longer than 2 * edge is summarised.
    corners = np.zeros([2 * edge + 1 if n > 2 * edge else n for n in shape], dtype)
    for dst, values in pieces:
        corners[dst] = values
    with np.printoptions(threshold=0):
        return str(corners), dtype


def _boxes(key: tuple, full: tuple[int, ...], edge: int) -> list[tuple[tuple, tuple]]:
    """``(source key, place in the corners)`` of each box of ``arr[key]`` numpy prints:
    per axis of the selection longer than ``2 * edge``, its first and last ``edge`` items
    (the ``2 ** axes`` combinations), else all of it. ``key`` holds ints, slices and at most
    one Ellipsis (:func:`parse_slice`)."""
    at = key.index(Ellipsis) if Ellipsis in key else len(key)
    rest = [k for k in key if k is not Ellipsis]
    key = (*key[:at], *[slice(None)] * (len(full) - len(rest)), *key[at + 1 :])
    per_axis = []  # per axis of ``full``: [(source, place)], place None for an int
    for k, n in zip(key, full):
        if not isinstance(k, slice):
            per_axis.append([(k, None)])
            continue
        r = range(*k.indices(n))
        if len(r) > 2 * edge:
            head, tail = r[:edge], r[len(r) - edge :]
            per_axis.append(
                [(_slice(head), slice(0, edge)), (_slice(tail), slice(edge + 1, 2 * edge + 1))]
            )
        else:
            per_axis.append([(_slice(r), slice(0, len(r)))])
    boxes = []
    for combo in itertools.product(*per_axis):
        src = tuple(s for s, _ in combo)
        dst = tuple(d for _, d in combo if d is not None)
        boxes.append((src, dst))
    return boxes


def _slice(r: range) -> slice:
    """The slice that selects ``r`` (a stop past the start of a backward range is None)."""
    return slice(r.start, r.stop if r.stop >= 0 else None, r.step)
