# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Chunks of plain C-order items (one Blosc chunk each, as Zarr stores them) decoded and
placed in an array, many chunks per call (:func:`decode_place`).

Each chunk was checked and walked by :class:`~b2store.chunk._chunk_plan.Plan`; a chunk is
decoded straight into the array where its box is the whole chunk and lies there in C order,
else into the caller's buffer and copied out one row piece per ``memcpy``. Threads running
the call on the same arguments share its chunks (a shared counter). Every place is checked
against the array's length before a byte moves; a chunk that fails is marked in ``status``
for the Python path to decode again (and name what is wrong), never raised from here.
"""

from libc.stdint cimport int8_t, int64_t, uint8_t
from libc.stdlib cimport free
from libc.string cimport memcpy

from b2store.chunk._chunk_plan cimport Plan
from b2store.chunk._decode_blocks cimport Scratch, b2b_next

DEF MAX_DIMS = 64
DEF MIN_HEADER = 16  # the shortest chunk header (Blosc1's)

# A chunk's status after a call.
DEF PLACED = 0
DEF FAILED = 1  # decode it again in Python, which names what is wrong
DEF MISSING = 2  # no file: the fill value
DEF LEFT = 3  # not read here (not a regular file, an error, too large): read it in Python

cdef extern from *:
    """
    #include <errno.h>
    #include <stdlib.h>
    #ifdef _WIN32
    static int b2p_read_file(const char *path, unsigned char **buf, Py_ssize_t *cap,
                             Py_ssize_t *n, Py_ssize_t limit) { return 3; }
    #else
    #include <fcntl.h>
    #include <sys/stat.h>
    #include <unistd.h>
    /* A chunk file's bytes into *buf (grown to *cap as needed), *n of them: 0; no such
       file: 2; anything else (not a regular file, past limit bytes, an error, a file that
       changed size while read): 3, for the caller to read through Python, which names it.
       Opened non-blocking and read only if regular, so a FIFO never blocks the read. */
    static int b2p_read_file(const char *path, unsigned char **buf, Py_ssize_t *cap,
                             Py_ssize_t *n, Py_ssize_t limit) {
        struct stat st;
        Py_ssize_t got = 0, size;
        int fd;
        do {
            fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0) return (errno == ENOENT || errno == ENOTDIR) ? 2 : 3;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > limit) {
            close(fd);
            return 3;
        }
        size = (Py_ssize_t)st.st_size;
        if (size + 1 > *cap) {
            unsigned char *grown = (unsigned char *)realloc(*buf, (size_t)size + 1);
            if (grown == NULL) {
                close(fd);
                return 3;
            }
            *buf = grown;
            *cap = size + 1;
        }
        /* One byte more than its size is asked for: a file that grew is not half read. */
        while (got <= size) {
            ssize_t r = read(fd, *buf + got, (size_t)(size + 1 - got));
            if (r < 0) {
                if (errno == EINTR) continue;
                close(fd);
                return 3;
            }
            if (r == 0) break;
            got += r;
        }
        close(fd);
        if (got != size) return 3;
        *n = size;
        return 0;
    }
    #endif
    """
    int b2p_read_file(const char* path, unsigned char** buf, Py_ssize_t* cap, Py_ssize_t* n,
                      Py_ssize_t limit) nogil


cdef void _copy_box(const uint8_t* src, uint8_t* dst, Py_ssize_t nd, const int64_t* cshape,
                    const int64_t* lo, const int64_t* hi, const int64_t* dstr,
                    Py_ssize_t itemsize) noexcept nogil:
    """The box ``[lo, hi)`` of a C-order chunk at ``src`` to ``dst`` (the box's first item),
    whose axes step ``dstr`` bytes; one ``memcpy`` per row where the last axis is dense."""
    cdef int64_t sstr[MAX_DIMS]
    cdef int64_t idx[MAX_DIMS]
    cdef Py_ssize_t d, k, last = nd - 1
    cdef int64_t row, soff, doff
    if nd == 0:
        memcpy(dst, src, itemsize)
        return
    sstr[last] = itemsize
    for d in range(last - 1, -1, -1):
        sstr[d] = sstr[d + 1] * cshape[d + 1]
    for d in range(nd):
        if hi[d] <= lo[d]:
            return
        idx[d] = lo[d]
    row = hi[last] - lo[last]
    while True:
        soff = lo[last] * itemsize
        doff = 0
        for d in range(last):
            soff += idx[d] * sstr[d]
            doff += (idx[d] - lo[d]) * dstr[d]
        if dstr[last] == itemsize:
            memcpy(dst + doff, src + soff, row * itemsize)
        else:
            for k in range(row):
                memcpy(dst + doff + k * dstr[last], src + soff + k * itemsize, itemsize)
        # The next row: an odometer over the axes before the last.
        d = last - 1
        while d >= 0:
            idx[d] += 1
            if idx[d] < hi[d]:
                break
            idx[d] = lo[d]
            d -= 1
        if d < 0:
            return


cdef bint _in_bounds(Py_ssize_t nd, const int64_t* cshape, const int64_t* lo, const int64_t* hi,
                     int64_t offset, const int64_t* dstr, Py_ssize_t itemsize,
                     Py_ssize_t outlen) noexcept nogil:
    """The box lies in the chunk, and every byte it is copied to in ``[0, outlen)``."""
    cdef Py_ssize_t d
    cdef int64_t low = offset, high = offset
    for d in range(nd):
        if lo[d] < 0 or hi[d] > cshape[d] or lo[d] > hi[d]:
            return False
        if hi[d] == lo[d]:
            return True  # nothing is copied
        if dstr[d] >= 0:
            high += (hi[d] - lo[d] - 1) * dstr[d]
        else:
            low += (hi[d] - lo[d] - 1) * dstr[d]
    return low >= 0 and high + itemsize <= outlen


cdef bint _dense(Py_ssize_t nd, const int64_t* cshape, const int64_t* lo, const int64_t* hi,
                 const int64_t* dstr, Py_ssize_t itemsize) noexcept nogil:
    """The box is the whole chunk and lies in the array as the chunk does (C order)."""
    cdef Py_ssize_t d
    cdef int64_t step = itemsize
    for d in range(nd - 1, -1, -1):
        if lo[d] != 0 or hi[d] != cshape[d]:
            return False
        if cshape[d] > 1 and dstr[d] != step:
            return False
        step *= cshape[d]
    return True


cdef int64_t _check(list items, const int64_t[:, ::1] boxes, const int64_t[::1] chunkshape,
                    const int64_t[::1] strides, Py_ssize_t itemsize, const uint8_t[::1] tmp,
                    const int64_t[::1] counter, const int8_t[::1] status) except -1:
    """The arguments agree with each other; the bytes of one decoded chunk."""
    cdef Py_ssize_t nd = chunkshape.shape[0], n = len(items), d
    cdef int64_t nbytes = itemsize
    if (nd > MAX_DIMS or strides.shape[0] != nd or boxes.shape[0] != n
            or boxes.shape[1] != 2 * nd + 1 or status.shape[0] != n or counter.shape[0] != 1
            or itemsize <= 0):
        raise ValueError("inconsistent arguments")
    for d in range(nd):
        if chunkshape[d] < 0:
            raise ValueError("negative chunk shape")
        nbytes *= chunkshape[d]
    if tmp.shape[0] < nbytes:
        raise ValueError("tmp is smaller than a chunk")
    return nbytes


cdef int _place(Plan plan, const int64_t* row, const int64_t[::1] chunkshape,
                const int64_t[::1] strides, Py_ssize_t itemsize, int64_t nbytes,
                uint8_t[::1] out, uint8_t[::1] tmp, Scratch scratch):
    """One planned chunk decoded and placed at its row of ``boxes``: PLACED or FAILED."""
    cdef Py_ssize_t nd = chunkshape.shape[0]
    cdef const int64_t* cshape = &chunkshape[0] if nd else NULL
    cdef const int64_t* dstr = &strides[0] if nd else NULL
    if (not plan.ok or plan.nbytes != nbytes
            or not _in_bounds(nd, cshape, row, row + nd, row[2 * nd], dstr, itemsize,
                              out.shape[0])):
        return FAILED
    if nbytes == 0:
        return PLACED
    if _dense(nd, cshape, row, row + nd, dstr, itemsize):
        # Straight into the array: no copy of the decoded chunk.
        return FAILED if plan.decode_to(&out[0] + row[2 * nd], scratch) else PLACED
    if plan.decode_to(&tmp[0], scratch):
        return FAILED
    with nogil:
        _copy_box(&tmp[0], &out[0] + row[2 * nd], nd, cshape, row, row + nd, dstr, itemsize)
    return PLACED


def decode_place(list plans, const int64_t[:, ::1] boxes, const int64_t[::1] chunkshape,
                 const int64_t[::1] strides, Py_ssize_t itemsize, uint8_t[::1] out,
                 uint8_t[::1] tmp, Scratch scratch not None, int64_t[::1] counter,
                 int8_t[::1] status):
    """Decode the chunks of ``plans`` and place them in ``out`` (the array's bytes) until none
    are left; each chunk's status (0 placed, 1 failed) in ``status``.

    Row ``i`` of ``boxes`` is chunk ``i``'s box in the chunk (``lo`` then ``hi``, one per
    axis of ``chunkshape``) and then the byte offset in ``out`` of its first item;
    ``strides`` are the bytes between neighbours in ``out`` along each chunk axis (0 along
    an axis the read drops). ``tmp`` holds one decoded chunk (this thread's own).
    """
    cdef int64_t nbytes = _check(plans, boxes, chunkshape, strides, itemsize, tmp, counter,
                                 status)
    cdef Py_ssize_t i, n = len(plans)
    while True:
        i = b2b_next(&counter[0])
        if i >= n:
            break
        status[i] = _place(<Plan?>plans[i], &boxes[i, 0], chunkshape, strides, itemsize,
                           nbytes, out, tmp, scratch)


def read_place(list paths, Py_ssize_t limit, const int64_t[:, ::1] boxes,
               const int64_t[::1] chunkshape, const int64_t[::1] strides,
               Py_ssize_t itemsize, uint8_t[::1] out, uint8_t[::1] tmp,
               Scratch scratch not None, int64_t[::1] counter, int8_t[::1] status):
    """:func:`decode_place` of the chunks in the files ``paths`` (bytes), each read here
    without the GIL: 0 placed, 1 failed, 2 no such file, 3 not read (not a regular file,
    larger than ``limit`` bytes, an error; or any file on Windows)."""
    cdef int64_t nbytes = _check(paths, boxes, chunkshape, strides, itemsize, tmp, counter,
                                 status)
    cdef Py_ssize_t i, n = len(paths), cap = 0, size = 0
    cdef unsigned char* buf = NULL
    cdef const char* path
    cdef bytes name
    cdef int rc
    cdef Plan plan
    try:
        while True:
            i = b2b_next(&counter[0])
            if i >= n:
                break
            name = <bytes?>paths[i]
            path = name
            with nogil:
                rc = b2p_read_file(path, &buf, &cap, &size, limit)
            if rc:
                status[i] = rc
                continue
            if size < MIN_HEADER:
                status[i] = FAILED
                continue
            plan = Plan(<uint8_t[:size]>buf)
            status[i] = _place(plan, &boxes[i, 0], chunkshape, strides, itemsize, nbytes, out,
                               tmp, scratch)
            plan = None
    finally:
        free(buf)
