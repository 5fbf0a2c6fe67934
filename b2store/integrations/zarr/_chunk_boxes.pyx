# cython: language_level=3, boundscheck=False, wraparound=False
"""Where each chunk of a zarr read lands in the output, for the kernels that place it
(:meth:`b2store.integrations.zarr.pipeline_reads.Reader._groups`).

zarr hands the pipeline one ``(getter, spec, chunk selection, output selection, complete)``
per chunk. Turning 128 of them into boxes took 0.26 ms of Python per read, a twentieth of a
one-thread read of 16 MB in 128 kB chunks; here it is the same work compiled. The rules are
those of the Python it replaced: a chunk is placed by the kernels where both selections are
plain (unit-step slices and in-range integers along the chunk, unit-step slices of the same
lengths along the output); any other chunk is left to zarr's placement.
"""

from cpython.slice cimport PySlice_GetIndicesEx

import numpy as np

_INTEGERS = (int, np.integer)


cdef list _box(object csel, object osel, tuple cshape, tuple oshape, tuple ostrides):
    """A chunk's box ``lo``, ``hi`` (per chunk axis) and the byte offset in the output of
    its first item; None where the selections are not plain."""
    cdef Py_ssize_t nd, d, j = 0, n, a, b, step, length, oa, ob, ostep
    cdef Py_ssize_t offset = 0, ond = len(oshape)
    cdef list lo, hi
    if type(csel) is not tuple or type(osel) is not tuple:
        return None  # (a vectorized key's selections: zarr's placement)
    nd = len(cshape)
    if len(<tuple>csel) != nd or len(<tuple>osel) > ond:
        return None
    lo, hi = [], []
    for d in range(nd):
        sel = (<tuple>csel)[d]
        n = cshape[d]
        if type(sel) is slice:
            PySlice_GetIndicesEx(sel, n, &a, &b, &step, &length)
            if step != 1 or b < a:
                return None
            if j >= len(<tuple>osel):
                return None
            osl = (<tuple>osel)[j]
            if type(osl) is not slice:
                return None
            PySlice_GetIndicesEx(osl, oshape[j], &oa, &ob, &ostep, &length)
            if ostep != 1 or ob - oa != b - a:
                return None
            offset += oa * <Py_ssize_t>ostrides[j]
            j += 1
            lo.append(a)
            hi.append(b)
        elif isinstance(sel, _INTEGERS) and 0 <= sel < n:
            a = sel
            lo.append(a)
            hi.append(a + 1)
        else:
            return None
    if j != ond or j != len(<tuple>osel):
        return None
    lo.extend(hi)
    lo.append(offset)
    return lo


cdef list _strides(tuple csel, tuple ostrides):
    """The bytes between neighbours in the output along each chunk axis (0 along
    integers)."""
    cdef list strides = []
    cdef Py_ssize_t j = 0
    for sel in csel:
        if type(sel) is slice:
            strides.append(ostrides[j])
            j += 1
        else:
            strides.append(0)
    return strides


def groups(list batch, out, bint fast, make_group):
    """The chunks of ``batch`` placed by the kernels, by chunk shape and integer axes
    (``make_group(index, plans, boxes, strides)`` makes each group); the positions of the
    others. ``fast``: whether the kernels place any (else all are others)."""
    cdef dict found = {}
    cdef list others = []
    cdef Py_ssize_t i
    cdef tuple oshape = out.shape, ostrides = out.strides
    cdef list box
    for i in range(len(batch)):
        info = batch[i]
        csel, osel = info[2], info[3]
        shape = info[1].shape
        if type(shape) is not tuple:
            shape = tuple(shape)
        box = _box(csel, osel, shape, oshape, ostrides) if fast else None
        if box is None:
            others.append(i)
            continue
        # (which axes are integers: the selections' types, one C call a chunk)
        key = (shape, tuple([type(s) for s in <tuple>csel]))
        group = found.get(key)
        if group is None:
            group = found[key] = make_group([], [], [], _strides(csel, ostrides))
        group.index.append(i)
        group.boxes.append(box)
    return found, others


def box(csel, osel, tuple cshape, out):
    """One chunk's :func:`groups` box (``[*lo, *hi, offset]``), or None where its
    selections are not plain."""
    return _box(csel, osel, cshape, out.shape, out.strides)
