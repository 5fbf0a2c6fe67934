# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""b2nd chunks decoded and placed in their array in C: many small ones in one call
(:func:`decode_run`), or a few blocks of one (:func:`decode_part`).

A whole-array read of small chunks (100x100 int16, 20 kB) spent more time in the Python
around each chunk (its read, its plan, its scatter: about 10 us) than python-blosc2 spent on
the chunk. Here the frame hands over one read of neighbouring chunks' bytes, and each chunk
is checked, decoded (:class:`~b2store._plan.Plan`) and its selected part copied to its place.

A chunk this loop does not take (not of Plan's common kind, damaged, its bytes not all in
the read) is left undone and the caller reads it the general way, which decodes it or says
what is wrong: nothing here raises on a chunk's bytes. Every index and region is checked
before any chunk is decoded.
"""

from cpython.buffer cimport PyBUF_STRIDES, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t

from b2store._blocks cimport Scratch, read_i32
from b2store._nd cimport MAX_DIMS, place_blocks
from b2store._plan cimport Plan

DEF CBYTES_AT = 12  # where a chunk header keeps the chunk's stored size
DEF MIN_HEADER = 16


cdef Py_ssize_t _geometry(chunkshape, blockshape, Py_buffer* out, uint8_t[::1] chunk,
                          Py_ssize_t* C, Py_ssize_t* B, Py_ssize_t* OS) except -1:
    """Check the chunk and block shapes against ``out`` and ``chunk`` (one padded chunk's
    bytes) and fill ``C``, ``B`` and ``OS`` (``out``'s byte strides); the blocks a chunk has."""
    cdef Py_ssize_t nd = len(chunkshape), d, padded = out.itemsize, nblocks = 1
    if not 0 < nd <= MAX_DIMS or len(blockshape) != nd or out.ndim != nd:
        raise ValueError(f"{nd}-d chunks of {len(blockshape)}-d blocks into a "
                         f"{out.ndim}-d array")
    for d in range(nd):
        C[d], B[d] = chunkshape[d], blockshape[d]
        if C[d] <= 0 or B[d] <= 0:
            raise ValueError(f"chunk {C[d]} and block {B[d]} along dimension {d}")
        nblocks *= (C[d] + B[d] - 1) // B[d]
        padded *= (C[d] + B[d] - 1) // B[d] * B[d]
        OS[d] = out.strides[d]
    if chunk.shape[0] != padded:
        raise ValueError(f"chunk holds {chunk.shape[0]} bytes, a padded chunk {padded}")
    return nblocks


def decode_run(const uint8_t[::1] data, const int64_t[::1] starts, const int64_t[::1] ends,
               const int64_t[::1] which, const int64_t[:, ::1] origins,
               const int64_t[:, ::1] lows, const int64_t[:, ::1] extents, chunkshape,
               blockshape, out, uint8_t[::1] chunk, Scratch scratch not None,
               uint8_t[::1] done):
    """Decode chunk ``k`` of the run (its stored bytes from ``data[starts[k]]``, within
    ``data[:ends[k]]``) into ``chunk`` (the padded chunk's bytes) and copy its items
    ``[lows[j], lows[j] + extents[j])`` to ``out`` at ``origins[j]``, where ``j`` is
    ``which[k]`` (the read's rows: a run takes some of them); set ``done[j]`` for each chunk
    placed. Returns how many were."""
    cdef Py_buffer view
    PyObject_GetBuffer(out, &view, PyBUF_STRIDES | PyBUF_WRITABLE)
    try:
        return _decode_run(data, starts, ends, which, origins, lows, extents, chunkshape,
                           blockshape, &view, chunk, scratch, done)
    finally:
        PyBuffer_Release(&view)


cdef Py_ssize_t _decode_run(const uint8_t[::1] data, const int64_t[::1] starts,
                            const int64_t[::1] ends, const int64_t[::1] which,
                            const int64_t[:, ::1] origins, const int64_t[:, ::1] lows,
                            const int64_t[:, ::1] extents, chunkshape, blockshape,
                            Py_buffer* out, uint8_t[::1] chunk, Scratch scratch,
                            uint8_t[::1] done) except -1:
    cdef Py_ssize_t nd = len(chunkshape), n = starts.shape[0], m = origins.shape[0]
    cdef Py_ssize_t d, k, j, cbytes, avail, placed = 0
    cdef Py_ssize_t nblocks, padded
    cdef Py_ssize_t C[MAX_DIMS]
    cdef Py_ssize_t B[MAX_DIMS]
    cdef Py_ssize_t L[MAX_DIMS]
    cdef Py_ssize_t H[MAX_DIMS]
    cdef Py_ssize_t OS[MAX_DIMS]
    cdef uint8_t* dst
    cdef Plan plan
    nblocks = _geometry(chunkshape, blockshape, out, chunk, C, B, OS)
    padded = chunk.shape[0]
    if ends.shape[0] != n or which.shape[0] != n:
        raise ValueError("starts, ends and which differ in length")
    if lows.shape[0] != m or extents.shape[0] != m or done.shape[0] != m:
        raise ValueError("origins, lows, extents and done differ in length")
    if origins.shape[1] != nd or lows.shape[1] != nd or extents.shape[1] != nd:
        raise ValueError(f"origins, lows and extents are not of {nd} dimensions")
    for k in range(n):
        if not 0 <= starts[k] < ends[k] <= data.shape[0]:
            raise ValueError(f"chunk {k}: bytes {starts[k]}..{ends[k]} of {data.shape[0]}")
        j = which[k]
        if not 0 <= j < m:
            raise ValueError(f"chunk {k}: row {j} of {m}")
        for d in range(nd):
            if (not 0 < extents[j, d] <= C[d] - lows[j, d] or lows[j, d] < 0
                    or origins[j, d] < 0 or origins[j, d] + extents[j, d] > out.shape[d]):
                raise ValueError(f"chunk {k}: items {lows[j, d]}+{extents[j, d]} of "
                                 f"{C[d]} to {origins[j, d]} along dimension {d} of "
                                 f"{out.shape[d]}")
    for k in range(n):
        avail = ends[k] - starts[k]
        if avail < MIN_HEADER:
            continue
        cbytes = read_i32(&data[starts[k]] + CBYTES_AT)
        if not MIN_HEADER <= cbytes <= avail:
            continue  # not all of it in this read: the caller reads it alone
        plan = Plan(data[starts[k]:starts[k] + cbytes])
        if not plan.ok or plan.nbytes != padded or plan.decode_to(&chunk[0], scratch):
            continue
        j = which[k]
        dst = <uint8_t*>out.buf
        for d in range(nd):
            L[d] = lows[j, d]
            H[d] = lows[j, d] + extents[j, d]
            dst += origins[j, d] * OS[d]
        with nogil:
            place_blocks(&chunk[0], 0, NULL, nblocks, nd, C, B, L, H, dst, OS, out.itemsize)
        done[j] = 1
        placed += 1
    return placed


def decode_part(const uint8_t[::1] src, const int64_t[::1] blocks, const int64_t[::1] ends,
                chunkshape, blockshape, lo, hi, out, uint8_t[::1] chunk,
                Scratch scratch not None):
    """Decode ``blocks`` (ascending) of the chunk whose header, block starts and those
    blocks' bytes (each up to its ``ends`` entry) are in place in ``src``, into ``chunk``
    (the padded chunk's bytes), and copy their part in ``[lo, hi)`` to ``out`` (that
    region's own array, any strides). False, ``out`` untouched, for a chunk the C loop does
    not take (its Blosc blocks not the array's blocks among them): the caller decodes it the
    general way."""
    cdef Py_buffer view
    PyObject_GetBuffer(out, &view, PyBUF_STRIDES | PyBUF_WRITABLE)
    try:
        return _decode_part(src, blocks, ends, chunkshape, blockshape, lo, hi, &view, chunk,
                            scratch)
    finally:
        PyBuffer_Release(&view)


cdef bint _decode_part(const uint8_t[::1] src, const int64_t[::1] blocks,
                       const int64_t[::1] ends, chunkshape, blockshape, lo, hi,
                       Py_buffer* out, uint8_t[::1] chunk, Scratch scratch) except -1:
    cdef Py_ssize_t nd = len(chunkshape), n = blocks.shape[0], d, k, padded, nblocks
    cdef Py_ssize_t C[MAX_DIMS]
    cdef Py_ssize_t B[MAX_DIMS]
    cdef Py_ssize_t L[MAX_DIMS]
    cdef Py_ssize_t H[MAX_DIMS]
    cdef Py_ssize_t OS[MAX_DIMS]
    cdef Plan plan
    nblocks = _geometry(chunkshape, blockshape, out, chunk, C, B, OS)
    padded = chunk.shape[0]
    if len(lo) != nd or len(hi) != nd:
        raise ValueError(f"a region of {len(lo)} and {len(hi)} dimensions in a {nd}-d chunk")
    for d in range(nd):
        L[d], H[d] = lo[d], hi[d]
        if not 0 <= L[d] < H[d] <= C[d]:
            raise ValueError(f"dimension {d}: region [{L[d]}, {H[d]}) of a chunk of {C[d]}")
        if out.shape[d] != H[d] - L[d]:
            raise ValueError(f"out has {out.shape[d]} items along {d}, not {H[d] - L[d]}")
    for k in range(n):
        if not 0 <= blocks[k] < nblocks:
            raise ValueError(f"block {blocks[k]} of {nblocks}")
    if n == 0:
        return True
    plan = Plan(src, blocks, ends)
    # Its Blosc blocks must be the array's blocks: block numbers would name other bytes.
    if (not plan.ok or plan.nbytes != padded or plan.J.blocksize != padded // nblocks
            or plan.decode_to(&chunk[0], scratch)):
        return False
    with nogil:
        place_blocks(&chunk[0], 0, &blocks[0], n, nd, C, B, L, H, <uint8_t*>out.buf, OS,
                     out.itemsize)
    return True
