"""Index keys of a b2nd array: which items a key reads, and how NumPy shapes the result.

A key is split in two. The array's axes each get an ascending ``range`` of the items to
read (an integer reads one item, a slice its items in ascending order), and the block of
those items is then indexed by a second key, run by NumPy itself, that keeps NumPy's own
semantics for what is left: integers drop their axis, negative steps reverse, ``None``
adds an axis, and a bool scalar (``True``, ``np.True_``, a 0-d bool array) adds an axis of
length 1 or 0 with NumPy's rules for where it goes. Keys with integer arrays, boolean
masks or lists (NumPy's advanced indexing) are planned by :mod:`b2store.nd.fancy`, which
builds on this one; anything NumPy itself refuses (a float, a string) is an ``IndexError``
as in NumPy. :func:`chunks_touched` splits the ascending ranges by chunk, and
:func:`split_whole` also tells the chunks a read takes whole from the others.
"""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np

__all__ = ["chunks_touched", "normalize", "split_whole", "table_parts"]


def bool_scalar(k) -> bool:
    """Whether ``k`` is a bool scalar NumPy takes as a 0-d boolean mask."""
    return isinstance(k, (bool, np.bool_)) or (
        isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype == bool
    )


def is_mask(k) -> bool:
    """Whether ``k`` is a boolean mask (an n-d bool array, not a bool scalar)."""
    return isinstance(k, np.ndarray) and k.ndim > 0 and k.dtype == bool


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
    taking = sum(1 for k in key if k is not Ellipsis and k is not None and not bool_scalar(k))
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
        elif bool_scalar(k):
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
            dims.append(_integer(k, n, len(dims)))
            final.append(0)
    rest = [range(n) for n in axes]
    dims.extend(rest)
    final.extend(slice(None) for _ in rest)
    # As in numpy, an Ellipsis keeps a 0-d result an array instead of a scalar: it stays.
    return dims, tuple(final), empty


def _integer(k, n: int, axis: int) -> range:
    try:
        i = operator.index(k)
    except TypeError:
        if isinstance(k, np.ndarray) and k.dtype.kind not in "iub":
            raise IndexError(
                f"arrays used as indices must be of integer (or boolean) type, not {k.dtype}"
            ) from None
        raise IndexError(
            "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
            f"bool scalars are valid indices, not {type(k).__name__}"
        ) from None
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
    return range(i % n, i % n + 1)


def chunks_touched(dims, chunks):
    """For each chunk a selection touches: its coordinates, and per dimension the selected
    positions inside the chunk with their positions in the output."""
    per_dim = []
    for r, c in zip(dims, chunks):
        entries = []
        if len(r) == 0:
            return
        first, last = r[0] // c, r[-1] // c
        for k in range(first, last + 1):
            lo, hi = k * c, (k + 1) * c
            sub = _subrange(r, lo, hi)
            if len(sub[0]):
                entries.append((k, sub))
        per_dim.append(entries)
    for combo in itertools.product(*per_dim):
        yield tuple(k for k, _ in combo), [sub for _, sub in combo]


def split_whole(dims, chunks, blocks, shape):
    """The chunks a selection touches, split into those a read decodes whole, those it
    reads a few blocks of, and the rest.

    A chunk is decoded whole where the selection takes a step-1 range of it along every
    dimension, and all of it (up to the array's end) or more than half of its blocks (then
    reading the blocks apart costs more than decoding them all).

    Returns ``(whole, few, rest)``. ``whole`` is None (no such chunk) or four int64 arrays
    with a row per chunk decoded whole: its coordinates in the chunk grid, where its part goes
    in the output, where that part starts in the chunk, and how many items it has along each
    dimension. ``few`` is the same for the chunks of which a step-1 part of at most half the
    blocks is read. ``rest`` yields ``(coords, parts)`` for the others (a step other than 1
    along some dimension), as :func:`chunks_touched` does."""
    runnable, cut = [], []
    per_chunk = 1
    for r, c, b, n in zip(dims, chunks, blocks, shape):
        if len(r) == 0:
            return None, None, iter(())
        per_chunk *= -(-c // b)
        w, x = [], []
        if r.step == 1:  # (the common case, without _subrange's arithmetic)
            start, stop = r.start, r.stop
            for k in range(start // c, (stop - 1) // c + 1):
                lo, hi = max(start, k * c), min(stop, k * c + c)
                local = range(lo - k * c, hi - k * c)
                whole = lo == k * c and hi == min(k * c + c, n)
                w.append((k, (local, range(lo - start, hi - start)), whole))
        else:
            for k in range(r[0] // c, r[-1] // c + 1):
                local, pos = _subrange(r, k * c, (k + 1) * c)
                if len(local):
                    # (whether it is all of the chunk that is inside the array)
                    whole = local.start == 0 and len(local) == min(c, n - k * c)
                    (w if local.step == 1 else x).append((k, (local, pos), whole))
        runnable.append(w)
        cut.append(x)
    rest = _cut_combinations(runnable, cut)
    if not all(runnable):
        return None, None, rest
    if math.prod(len(w) for w in runnable) <= _FEW_COMBINATIONS:
        return _split_few(runnable, blocks, per_chunk, rest)
    # Per dimension, (grid coordinate, output start, start in the chunk, items, blocks
    # touched, whole) of each step-1 part; one row per combination of them, in C order.
    columns = [
        np.array(
            [
                (k, pos.start, loc.start, len(loc), (loc.stop - 1) // b - loc.start // b + 1, w)
                for k, (loc, pos), w in entries
            ],
            np.int64,
        )
        for entries, b in zip(runnable, blocks)
    ]
    picks = np.indices([len(col) for col in columns]).reshape(len(columns), -1)
    table = np.stack([col[p] for col, p in zip(columns, picks)], axis=1)
    most = (2 * table[:, :, 4].prod(axis=1) > per_chunk) | table[:, :, 5].all(axis=1)
    return _columns(table[most]), _columns(table[~most]), rest


def _columns(table: np.ndarray):
    """The four column arrays of ``table`` (rows of per-dimension ``(coordinate, output
    start, start in the chunk, items, ...)``), or None for no rows."""
    if not len(table):
        return None
    return tuple(np.ascontiguousarray(table[:, :, j]) for j in range(4))


# Up to this many step-1 combinations, split_whole goes through them in Python: NumPy's
# table of them cost about 40 us, ten times the loop's, for the 4 chunks of a small box.
_FEW_COMBINATIONS = 32


def _split_few(runnable, blocks, per_chunk: int, rest):
    """:func:`split_whole`'s step-1 combinations, one by one (few of them)."""
    rows, touched, whole = [], [], []
    for entries, b in zip(runnable, blocks):
        rows.append([(k, pos.start, loc.start, len(loc)) for k, (loc, pos), _ in entries])
        touched.append([(loc.stop - 1) // b - loc.start // b + 1 for _, (loc, _), _ in entries])
        whole.append([w for _, _, w in entries])
    if 2 * math.prod(min(t) for t in touched) > per_chunk or all(all(w) for w in whole):
        decoded, few = list(itertools.product(*rows)), []  # all of them whole
    elif 2 * math.prod(max(t) for t in touched) <= per_chunk and not all(map(any, whole)):
        decoded, few = [], list(itertools.product(*rows))  # none
    else:
        decoded, few = [], []
        for pick in itertools.product(*(range(len(entries)) for entries in runnable)):
            combo = tuple(r[i] for r, i in zip(rows, pick))
            if 2 * math.prod(t[i] for t, i in zip(touched, pick)) > per_chunk or all(
                w[i] for w, i in zip(whole, pick)
            ):
                decoded.append(combo)
            else:
                few.append(combo)
    return _table(decoded, len(rows)), _table(few, len(rows)), rest


def _table(combos, ndim: int):
    """:func:`_columns` of ``combos`` (per chunk, per dimension ``(coordinate, output start,
    start in the chunk, items)``)."""
    if not combos:
        return None
    # (One flat list to NumPy: a nested one took three times as long.)
    flat = [v for combo in combos for row in combo for v in row]
    return _columns(np.array(flat, np.int64).reshape(len(combos), ndim, 4))


def table_parts(columns):
    """``(coords, parts)`` of each row of ``columns`` (a table of :func:`split_whole`), as
    :func:`chunks_touched` gives them."""
    coords, origins, lows, extents = (c.tolist() for c in columns)
    for k, at in enumerate(coords):
        parts = [
            (range(lo, lo + n), range(o, o + n))
            for o, lo, n in zip(origins[k], lows[k], extents[k])
        ]
        yield tuple(at), parts


def _cut_combinations(whole, cut):
    """Every combination of chunks with at least one dimension cut (not a step-1 range),
    each once: the first cut dimension is ``d``, those before it not cut, those after it
    either."""
    for d in range(len(whole)):
        if not cut[d]:
            continue
        after = [sorted(w + x, key=lambda e: e[0]) for w, x in zip(whole[d + 1 :], cut[d + 1 :])]
        for combo in itertools.product(*whole[:d], cut[d], *after):
            yield tuple(e[0] for e in combo), [e[1] for e in combo]


def _subrange(r: range, lo: int, hi: int):
    """The items of ascending range ``r`` inside [lo, hi): as chunk-local and output ranges."""
    step = r.step
    start_pos = max(0, -(-(lo - r.start) // step))
    stop_pos = min(len(r), -(-(hi - r.start) // step))
    if stop_pos <= start_pos:
        return range(0), range(0)
    local = range(r[start_pos] - lo, r[stop_pos - 1] - lo + 1, step)
    return local, range(start_pos, stop_pos)
