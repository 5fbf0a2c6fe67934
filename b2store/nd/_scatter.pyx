# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""A decoded b2nd chunk's blocks copied to their place in an array, in C.

A decoded chunk holds its blocks one after another, each block's items in C order: a block
is not a run of rows of the chunk, so a chunk lands in an array as many short row pieces.
Done with numpy, one block at a time, a 64^3 chunk of 16^3 blocks cost 0.5 ms of Python for
64 small copies; here each row piece is one ``memcpy``.

Everything is checked before the loop runs without the GIL: the block numbers against the
buffer, the region against the chunk, the destination's shape against the region.
"""

from cpython.buffer cimport PyBUF_STRIDES, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy



cdef int _dims(object values, Py_ssize_t* into, Py_ssize_t nd, str name) except -1:
    if len(values) != nd:
        raise ValueError(f"{name} has {len(values)} dimensions, not {nd}")
    for d in range(nd):
        into[d] = values[d]
    return 0


def scatter_blocks(const uint8_t[::1] buf, Py_ssize_t base, const int64_t[::1] blocks,
                   chunkshape, blockshape, lo, hi, out):
    """Copy the part of each block of ``blocks`` inside ``[lo, hi)`` (per dimension, within
    the chunk) to its place in ``out``, the region's own array (shape ``hi - lo``, any
    strides, the items' size). ``buf`` holds the decoded chunk from block ``base`` on."""
    cdef Py_buffer view
    PyObject_GetBuffer(out, &view, PyBUF_STRIDES | PyBUF_WRITABLE)
    try:
        _scatter(buf, base, blocks, chunkshape, blockshape, lo, hi, &view)
    finally:
        PyBuffer_Release(&view)


cdef int _scatter(const uint8_t[::1] buf, Py_ssize_t base, const int64_t[::1] blocks,
                  chunkshape, blockshape, lo, hi, Py_buffer* out) except -1:
    cdef Py_ssize_t nd = len(chunkshape), d, k, n, itemsize, block_bytes, nblocks = 1
    cdef Py_ssize_t C[MAX_DIMS]
    cdef Py_ssize_t B[MAX_DIMS]
    cdef Py_ssize_t L[MAX_DIMS]
    cdef Py_ssize_t H[MAX_DIMS]
    cdef Py_ssize_t OS[MAX_DIMS]
    if nd > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dimensions, not {nd}")
    _dims(chunkshape, C, nd, "chunkshape")
    _dims(blockshape, B, nd, "blockshape")
    _dims(lo, L, nd, "lo")
    _dims(hi, H, nd, "hi")
    if out.ndim != nd:
        raise ValueError(f"out has {out.ndim} dimensions, the chunk {nd}")
    itemsize = out.itemsize
    block_bytes = itemsize
    for d in range(nd):
        if B[d] <= 0 or C[d] <= 0 or not 0 <= L[d] < H[d] <= C[d]:
            raise ValueError(f"dimension {d}: region [{L[d]}, {H[d]}) of a chunk of {C[d]}")
        if out.shape[d] != H[d] - L[d]:
            raise ValueError(f"out has {out.shape[d]} items along {d}, not {H[d] - L[d]}")
        OS[d] = out.strides[d]
        nblocks *= (C[d] + B[d] - 1) // B[d]
        block_bytes *= B[d]
    n = blocks.shape[0]
    for k in range(n):
        if not base <= blocks[k] < nblocks or (blocks[k] - base + 1) * block_bytes > buf.shape[0]:
            raise ValueError(f"block {blocks[k]} is not in the buffer")
    if n == 0:
        return 0
    if nd == 0:
        memcpy(out.buf, &buf[(blocks[0] - base) * block_bytes], itemsize)
        return 0
    with nogil:
        place_blocks(&buf[0], base, &blocks[0], n, nd, C, B, L, H, <uint8_t*>out.buf, OS, itemsize)
    return 0


cdef void place_blocks(const uint8_t* buf, Py_ssize_t base, const int64_t* blocks, Py_ssize_t n,
                       Py_ssize_t nd, const Py_ssize_t* C, const Py_ssize_t* B,
                       const Py_ssize_t* L, const Py_ssize_t* H, uint8_t* dst,
                       const Py_ssize_t* OS, Py_ssize_t itemsize) noexcept nogil:
    """The copy itself, every argument already checked (see the header of ``_scatter.pxd``);
    ``blocks`` NULL: the ``n`` first blocks, in order."""
    cdef Py_ssize_t d, k, j, rem, block_bytes = itemsize, run, last = nd - 1
    cdef Py_ssize_t src_off, dst_off, count
    cdef Py_ssize_t NB[MAX_DIMS]
    cdef Py_ssize_t BS[MAX_DIMS]
    cdef Py_ssize_t A[MAX_DIMS]
    cdef Py_ssize_t Z[MAX_DIMS]
    cdef Py_ssize_t O[MAX_DIMS]
    cdef Py_ssize_t I[MAX_DIMS]
    cdef const uint8_t* block
    cdef bint skip
    for d in range(nd):
        NB[d] = (C[d] + B[d] - 1) // B[d]
        block_bytes *= B[d]
    for d in range(nd - 1, -1, -1):
        BS[d] = itemsize if d == nd - 1 else BS[d + 1] * B[d + 1]
    for k in range(n):
        j = blocks[k] if blocks != NULL else k
        rem = j
        skip = False
        for d in range(last, -1, -1):
            O[d] = (rem % NB[d]) * B[d]  # the block's origin in the chunk
            rem = rem // NB[d]
            A[d] = L[d] if L[d] > O[d] else O[d]
            Z[d] = H[d] if H[d] < O[d] + B[d] else O[d] + B[d]
            if A[d] >= Z[d]:
                skip = True
        if skip:
            continue
        block = buf + (j - base) * block_bytes
        count = Z[last] - A[last]
        run = count * itemsize
        for d in range(nd):
            I[d] = A[d]
        while True:
            src_off = 0
            dst_off = 0
            for d in range(nd):
                src_off += (I[d] - O[d]) * BS[d]
                dst_off += (I[d] - L[d]) * OS[d]
            if OS[last] == itemsize:
                memcpy(dst + dst_off, block + src_off, run)
            else:
                for rem in range(count):
                    memcpy(dst + dst_off + rem * OS[last], block + src_off + rem * itemsize,
                           itemsize)
            # The next row piece: an odometer over every dimension but the last.
            d = last - 1
            while d >= 0:
                I[d] += 1
                if I[d] < Z[d]:
                    break
                I[d] = A[d]
                d -= 1
            if d < 0:
                break
