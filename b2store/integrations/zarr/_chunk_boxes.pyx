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


def b2nd_box(list batch, out, str prefix):
    """The basic key of the box of a ``B2ndStore`` array whose read fills ``out`` exactly
    with what zarr's ``batch`` of chunks (keys under ``prefix``, ``c/`` included) would
    place there; None when the batch is not one box. :func:`b2nd_reads.box_of`'s loop over
    the chunks, compiled (323 us of Python for 128 chunks)."""
    cdef Py_ssize_t nb = len(batch), ndim, d, j, k, c, start, stop, step, length
    cdef Py_ssize_t first, n, last, size = 1, filled = 0, volume, plen = len(prefix)
    cdef Py_ssize_t ostart, ostop, ostep, origin
    cdef tuple oshape = out.shape
    cdef list firsts, steps, places, spans, key
    if nb == 0:
        return None
    chunks = tuple(batch[0][1].shape)
    ndim = len(chunks)
    # Per axis: the first item read, the step (None: an integer), over all chunks.
    firsts = [None] * ndim
    steps = [None] * ndim
    places = []
    seen = set()
    for k in range(nb):
        info = batch[k]
        getter, spec, csel, osel = info[0], info[1], info[2], info[3]
        path = getter.path
        if path in seen:
            return None
        seen.add(path)
        if not path.startswith(prefix) or tuple(spec.shape) != chunks:
            return None
        try:
            coords = [int(p) for p in path[plen:].split("/")]
            origins = [<Py_ssize_t>coords[d] * <Py_ssize_t>chunks[d] for d in range(len(coords))
                       if d < ndim]
        except (ValueError, OverflowError):
            return None
        if len(coords) != ndim or type(csel) is not tuple or len(<tuple>csel) != ndim:
            return None
        if type(osel) is not tuple:
            return None
        spans = []
        for d in range(ndim):
            sel = (<tuple>csel)[d]
            c = chunks[d]
            origin = origins[d]
            if type(sel) is slice:
                PySlice_GetIndicesEx(sel, c, &start, &stop, &step, &length)
                if step < 1 or stop <= start:
                    return None
                first = origin + start
                n = length
                this_step = step
            elif isinstance(sel, _INTEGERS) and 0 <= sel < c:
                first = origin + <Py_ssize_t>sel
                n = 1
                this_step = None
            else:
                return None
            if steps[d] is None and firsts[d] is None:
                steps[d] = this_step
            elif steps[d] != this_step:
                return None
            if firsts[d] is None or first < <Py_ssize_t>firsts[d]:
                firsts[d] = first
            spans.append((first, n))
        places.append((spans, osel))
    key = []
    for d in range(ndim):
        last = max([sp[d][0] + (sp[d][1] - 1) * (steps[d] or 1) for sp, _ in places])
        if steps[d] is None:
            if last != <Py_ssize_t>firsts[d]:
                return None
            key.append(firsts[d])
        else:
            key.append(slice(firsts[d], last + 1, steps[d]))
            size *= (last - <Py_ssize_t>firsts[d]) // <Py_ssize_t>steps[d] + 1
    if size != out.size:
        return None
    # Each chunk's place in the output must be where the box puts its items, and the
    # places must fill the output: then the box's read is the batch's, item for item.
    for spans, osel in places:
        j, volume = 0, 1
        for d in range(ndim):
            if steps[d] is None:
                continue
            first, n = spans[d]
            step = steps[d]
            if j >= len(<tuple>osel) or type((<tuple>osel)[j]) is not slice:
                return None
            PySlice_GetIndicesEx((<tuple>osel)[j], oshape[j], &ostart, &ostop, &ostep, &length)
            if (ostep != 1 or ostart != (first - <Py_ssize_t>firsts[d]) // step
                    or ostop - ostart != n or (first - <Py_ssize_t>firsts[d]) % step):
                return None
            volume *= n
            j += 1
        if j != len(<tuple>osel) or j != len(oshape):
            return None
        filled += volume
    if filled != out.size:
        return None
    return tuple(key)
