# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""b2nd chunks decoded and placed in their array in C: many small ones in one call
(:func:`decode_run`), or a few blocks of one (:func:`decode_part`).

A whole-array read of small chunks (100x100 int16, 20 kB) spent more time in the Python
around each chunk (its read, its plan, its scatter: about 10 us) than python-blosc2 spent on
the chunk. Here the frame hands over one read of neighbouring chunks' bytes, and each chunk
is checked, decoded (:class:`~b2store.chunk._chunk_plan.Plan`) and its selected part copied to
its place.

A chunk this loop does not take (not of Plan's common kind, damaged, its bytes not all in
the read) is left undone and the caller reads it the general way, which decodes it or says
what is wrong: nothing here raises on a chunk's bytes. Every index and region is checked
before any chunk is decoded.
"""

from cpython.buffer cimport PyBUF_STRIDES, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport free, malloc, qsort

from b2store.chunk._chunk_plan cimport Plan
from b2store.chunk._decode_blocks cimport (
    DELTA, F_BLOSCLZ, F_LZ4, F_ZLIB, F_ZSTD, Scratch, b2b_next, read_i32,
)
from b2store.nd._scatter cimport MAX_DIMS, place_blocks

DEF CBYTES_AT = 12  # where a chunk header keeps the chunk's stored size
DEF MIN_HEADER = 16
DEF HEADER = 32  # a Blosc2 chunk's header; its block starts follow
DEF MEMCPYED = 0x02  # a header flag: the items stored raw after the header
DEF EXTENDED = 0x05  # both shuffle flags: a Blosc2 header (32 bytes)
# Blocks of a cut chunk closer than this are read in one go (as chunk/partial.PART_GAP).
DEF PART_GAP = 8192

cdef extern from *:
    """
    #include <errno.h>
    #ifdef _WIN32
    /* No pread: every chunk is left to the caller, which reads it through Python. */
    static Py_ssize_t b2s_pread(int fd, void *buf, Py_ssize_t n, long long at) { return -1; }
    #else
    #include <unistd.h>
    /* All of [at, at + n) of the file, or fewer bytes where it ends; -1 on an error. */
    static Py_ssize_t b2s_pread(int fd, void *buf, Py_ssize_t n, long long at) {
        Py_ssize_t got = 0;
        while (got < n) {
            ssize_t r = pread(fd, (char *)buf + got, (size_t)(n - got), (off_t)(at + got));
            if (r < 0) {
                if (errno == EINTR) continue;
                return -1;
            }
            if (r == 0) break;
            got += r;
        }
        return got;
    }
    #endif
    static int b2s_cmp_i64(const void *a, const void *b) {
        long long x = *(const long long *)a, y = *(const long long *)b;
        return (x > y) - (x < y);
    }
    """
    Py_ssize_t b2s_pread(int fd, void* buf, Py_ssize_t n, long long at) nogil
    int b2s_cmp_i64(const void* a, const void* b) noexcept nogil


cdef inline void _next_in_c_order(Py_ssize_t* at, const Py_ssize_t* first,
                                  const Py_ssize_t* last, Py_ssize_t nd) noexcept nogil:
    """Step ``at`` (a position in the grid ``[first, last]``) to the next in C order."""
    cdef Py_ssize_t d = nd - 1
    while d >= 0:
        at[d] += 1
        if at[d] <= last[d]:
            return
        at[d] = first[d]
        d -= 1


cdef inline Py_ssize_t _first_past(const int64_t* ascending, Py_ssize_t n,
                                   int64_t value) noexcept nogil:
    """Where the first of ``ascending`` (``n`` of them) larger than ``value`` is; ``n``
    when there is none."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if ascending[mid] <= value:
            lo = mid + 1
        else:
            hi = mid
    return lo


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


cdef int _check_rows(Py_ssize_t nd, const int64_t[::1] which, const int64_t[:, ::1] origins,
                     const int64_t[:, ::1] lows, const int64_t[:, ::1] extents,
                     uint8_t[::1] done, const Py_ssize_t* C, Py_buffer* out) except -1:
    """Check that each chunk's row ``which[k]`` is one of the read's, and that its items
    ``[lows, lows + extents)`` lie in a chunk and land inside ``out`` at ``origins``."""
    cdef Py_ssize_t n = which.shape[0], m = origins.shape[0], k, j, d
    if lows.shape[0] != m or extents.shape[0] != m or done.shape[0] != m:
        raise ValueError("origins, lows, extents and done differ in length")
    if origins.shape[1] != nd or lows.shape[1] != nd or extents.shape[1] != nd:
        raise ValueError(f"origins, lows and extents are not of {nd} dimensions")
    for k in range(n):
        j = which[k]
        if not 0 <= j < m:
            raise ValueError(f"chunk {k}: row {j} of {m}")
        for d in range(nd):
            if (not 0 < extents[j, d] <= C[d] - lows[j, d] or lows[j, d] < 0
                    or origins[j, d] < 0 or origins[j, d] + extents[j, d] > out.shape[d]):
                raise ValueError(f"chunk {k}: items {lows[j, d]}+{extents[j, d]} of "
                                 f"{C[d]} to {origins[j, d]} along dimension {d} of "
                                 f"{out.shape[d]}")
    return 0


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
    cdef Py_ssize_t nd = len(chunkshape), n = starts.shape[0]
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
    for k in range(n):
        if not 0 <= starts[k] < ends[k] <= data.shape[0]:
            raise ValueError(f"chunk {k}: bytes {starts[k]}..{ends[k]} of {data.shape[0]}")
    _check_rows(nd, which, origins, lows, extents, done, C, out)
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


def read_parts(int fd, const int64_t[::1] positions, const int64_t[::1] limits,
               const int64_t[::1] which, const int64_t[:, ::1] origins,
               const int64_t[:, ::1] lows, const int64_t[:, ::1] extents, chunkshape,
               blockshape, out, uint8_t[::1] room, uint8_t[::1] chunk,
               Scratch scratch not None, uint8_t[::1] done):
    """Of each chunk ``k`` stored in the file ``fd`` at ``positions[k]`` (-1: not stored
    there), in at most ``limits[k]`` bytes, read the header, the block starts and the
    blocks that items ``[lows[j], lows[j] + extents[j])`` need (``j`` is ``which[k]``) into
    ``room``, decode those blocks into ``chunk`` (the padded chunk's bytes) and copy the
    items to ``out`` at ``origins[j]``; set ``done[j]`` for each chunk placed. Returns how
    many were.

    A chunk stored in more bytes than ``room`` has, of another kind than Plan's partial
    one, of other blocks than the array's, cut short or damaged is left undone: the caller
    reads it through Python, which decodes it or names what is wrong."""
    cdef Py_buffer view
    PyObject_GetBuffer(out, &view, PyBUF_STRIDES | PyBUF_WRITABLE)
    try:
        return _read_parts(fd, positions, limits, which, origins, lows, extents, chunkshape,
                           blockshape, &view, room, chunk, scratch, done)
    finally:
        PyBuffer_Release(&view)


cdef Py_ssize_t _read_parts(int fd, const int64_t[::1] positions, const int64_t[::1] limits,
                            const int64_t[::1] which, const int64_t[:, ::1] origins,
                            const int64_t[:, ::1] lows, const int64_t[:, ::1] extents,
                            chunkshape, blockshape, Py_buffer* out, uint8_t[::1] room,
                            uint8_t[::1] chunk, Scratch scratch, uint8_t[::1] done) except -1:
    cdef Py_ssize_t nd = len(chunkshape), n = positions.shape[0], d, j, k, placed = 0
    cdef Py_ssize_t nblocks
    cdef Py_ssize_t C[MAX_DIMS]
    cdef Py_ssize_t B[MAX_DIMS]
    cdef Py_ssize_t OS[MAX_DIMS]
    cdef Py_ssize_t L[MAX_DIMS]
    cdef Py_ssize_t H[MAX_DIMS]
    cdef Py_ssize_t O[MAX_DIMS]
    cdef int64_t* work
    nblocks = _geometry(chunkshape, blockshape, out, chunk, C, B, OS)
    if limits.shape[0] != n or which.shape[0] != n:
        raise ValueError("positions, limits and which differ in length")
    for k in range(n):
        if positions[k] < -1 or limits[k] < 0:
            raise ValueError(f"chunk {k}: {limits[k]} bytes at {positions[k]}")
    _check_rows(nd, which, origins, lows, extents, done, C, out)
    # Per chunk: its wanted blocks, every block's end, the sorted starts, the pieces read.
    work = <int64_t*>malloc(5 * nblocks * sizeof(int64_t))
    if work == NULL:
        raise MemoryError()
    try:
        for k in range(n):
            if positions[k] < 0:
                continue
            j = which[k]
            for d in range(nd):
                L[d], H[d], O[d] = lows[j, d], lows[j, d] + extents[j, d], origins[j, d]
            if _read_part(fd, positions[k], limits[k], L, H, O, nd, C, B, OS, nblocks, out,
                          room, chunk, scratch, work):
                done[j] = 1
                placed += 1
    finally:
        free(work)
    return placed


cdef uint8_t* _straight_to(const Py_ssize_t* L, const Py_ssize_t* H, const Py_ssize_t* O,
                           Py_ssize_t nd, const Py_ssize_t* C, const Py_ssize_t* B,
                           const Py_ssize_t* OS, Py_buffer* out,
                           Py_ssize_t* length) noexcept nogil:
    """Where in ``out`` the part ``[L, H)`` of a chunk (placed at ``O``) can be decoded
    straight, its blocks one after another as the decoded chunk has them, and in how many
    bytes (``length``); NULL when it must go through the chunk's scratch and be copied out.

    That is so when each block is whole trailing rows of the chunk (blocks of 1 before one
    dimension, not padded along it, the chunk's full length after it: the decoded chunk is
    the chunk in C order), ``out`` is C-contiguous, the part spans ``out`` along every
    dimension but the first (its rows are one run of ``out``) and starts at the chunk's
    start, and along the first it ends on a block's end: its blocks are then the chunk's
    first ones, and each lands where the copy would have put it. A whole-array read of
    python-blosc2's default layouts (chunks of whole trailing rows) is of this kind: the
    copy out of scratch was a tenth of its time, and its scratch never touched."""
    cdef Py_ssize_t d, split = 0, stride = out.itemsize
    while split < nd and B[split] == 1:
        split += 1
    if split < nd and C[split] % B[split]:
        return NULL
    for d in range(split + 1, nd):
        if B[d] != C[d]:
            return NULL
    for d in range(nd - 1, -1, -1):
        if OS[d] != stride:
            return NULL
        stride *= out.shape[d]
    for d in range(1, nd):
        if L[d] != 0 or H[d] != C[d] or out.shape[d] != C[d]:
            return NULL
    if L[0] != 0 or H[0] % B[0]:
        return NULL
    length[0] = H[0] * OS[0]
    return <uint8_t*>out.buf + O[0] * OS[0]


cdef bint _read_part(int fd, int64_t position, int64_t limit, const Py_ssize_t* L,
                     const Py_ssize_t* H, const Py_ssize_t* O, Py_ssize_t nd,
                     const Py_ssize_t* C, const Py_ssize_t* B, const Py_ssize_t* OS,
                     Py_ssize_t nblocks, Py_buffer* out, uint8_t[::1] room, uint8_t[::1] chunk,
                     Scratch scratch, int64_t* work) except -1:
    """One chunk of :func:`read_parts`: its items ``[L, H)`` to ``out`` at ``O`` (all
    checked by the caller); whether it was placed."""
    cdef Py_ssize_t padded = chunk.shape[0], prefix = HEADER + 4 * nblocks, cbytes
    cdef Py_ssize_t d, i, n, npieces, lo
    cdef Py_ssize_t first[MAX_DIMS]
    cdef Py_ssize_t last[MAX_DIMS]
    cdef Py_ssize_t at[MAX_DIMS]
    cdef Py_ssize_t per[MAX_DIMS]
    cdef int64_t* wanted = work
    cdef int64_t* ends = work + nblocks
    cdef int64_t* starts = work + 2 * nblocks
    cdef int64_t* pieces = work + 3 * nblocks  # (start, stop) pairs
    cdef int64_t start, stop
    cdef uint8_t* buf = &room[0] if room.shape[0] else NULL
    cdef uint8_t* dst
    cdef Plan plan
    cdef Py_ssize_t got, length
    cdef bint raw
    if prefix > limit or prefix > room.shape[0]:
        return False
    with nogil:
        got = b2s_pread(fd, buf, prefix, position)
    if got != prefix:
        return False
    cbytes = read_i32(buf + CBYTES_AT)
    # The array's own blocks, stored in no more than the index leaves it and room holds.
    if (read_i32(buf + 4) != padded or read_i32(buf + 8) != padded // nblocks
            or buf[30] != 0 or buf[31] != 0):
        return False
    raw = buf[2] & MEMCPYED
    if raw:
        # Stored raw (data that did not compress): no block starts, the items follow the
        # header. Read whole, one element of a 4.5 MB chunk took 4 ms.
        if not _raw_ok(buf, cbytes, limit, padded):
            return False
    elif not prefix <= cbytes <= limit or cbytes > room.shape[0]:
        return False
    for i in range(6):
        # DELTA codes every block against block 0, which Plan's partial kind does not read:
        # refused from the header, before any block is read for nothing.
        if buf[16 + i] == DELTA and not raw:
            return False
    # The blocks the items need, ascending (C order within the chunk).
    n = 1
    for d in range(nd):
        first[d], last[d] = L[d] // B[d], (H[d] - 1) // B[d]
        at[d] = first[d]
        per[d] = (C[d] + B[d] - 1) // B[d]
        n *= last[d] - first[d] + 1
    for i in range(n):
        start = 0
        for d in range(nd):
            start = start * per[d] + at[d]
        wanted[i] = start
        _next_in_c_order(at, first, last, nd)
    if raw:
        return _read_raw(fd, position, wanted, n, padded // nblocks, L, H, O, nd, C, B, OS,
                         out, chunk)
    # Each block ends where the next larger start is, or at cbytes: Plan walks a block no
    # further, so it never reads bytes that were not read here. Blocks not wanted are
    # never walked: their end is cbytes.
    for i in range(nblocks):
        start = read_i32(buf + HEADER + 4 * i)
        if not prefix <= start < cbytes:
            return False
        starts[i] = start
        ends[i] = cbytes
    qsort(starts, nblocks, sizeof(int64_t), b2s_cmp_i64)
    npieces = 0
    for i in range(n):
        start = read_i32(buf + HEADER + 4 * wanted[i])
        lo = _first_past(starts, nblocks, start)
        stop = starts[lo] if lo < nblocks else cbytes
        ends[wanted[i]] = stop
        pieces[2 * npieces], pieces[2 * npieces + 1] = start, stop
        npieces += 1
    # The pieces in file order, those close together read as one.
    qsort(pieces, npieces, 2 * sizeof(int64_t), b2s_cmp_i64)
    with nogil:
        i = 0
        while i < npieces:
            start, stop = pieces[2 * i], pieces[2 * i + 1]
            i += 1
            while i < npieces and pieces[2 * i] - stop <= PART_GAP:
                if pieces[2 * i + 1] > stop:
                    stop = pieces[2 * i + 1]
                i += 1
            got = b2s_pread(fd, buf + start, stop - start, position + start)
            if got != stop - start:
                break
    if got != stop - start:
        return False
    plan = Plan(room[:cbytes], <int64_t[:n]>wanted, <int64_t[:nblocks]>ends)
    if not plan.ok or plan.nbytes != padded or plan.J.blocksize != padded // nblocks:
        return False
    dst = _straight_to(L, H, O, nd, C, B, OS, out, &length)
    if dst != NULL:
        return plan.decode_into(dst, length, scratch) == 0
    if plan.decode_to(&chunk[0], scratch):
        return False
    dst = <uint8_t*>out.buf
    for d in range(nd):
        dst += O[d] * OS[d]
    with nogil:
        place_blocks(&chunk[0], 0, wanted, n, nd, C, B, L, H, dst, OS, out.itemsize)
    return True


cdef bint _raw_ok(const uint8_t* buf, Py_ssize_t cbytes, int64_t limit,
                  Py_ssize_t padded) noexcept nogil:
    """Whether the header of a chunk stored raw is one :class:`Plan` takes (the same checks):
    a Blosc2 header, exactly its items after it, within the bytes the index leaves it."""
    cdef int fmt = buf[2] >> 5
    return (4 <= buf[0] <= 6 and buf[2] & EXTENDED == EXTENDED and buf[3] != 0
            and cbytes == padded + HEADER and cbytes <= limit
            and (fmt == F_BLOSCLZ or fmt == F_LZ4 or fmt == F_ZLIB or fmt == F_ZSTD))


cdef bint _read_raw(int fd, int64_t position, const int64_t* wanted, Py_ssize_t n,
                    Py_ssize_t bs, const Py_ssize_t* L, const Py_ssize_t* H,
                    const Py_ssize_t* O, Py_ssize_t nd, const Py_ssize_t* C,
                    const Py_ssize_t* B, const Py_ssize_t* OS, Py_buffer* out,
                    uint8_t[::1] chunk) except -1:
    """The ``wanted`` blocks (ascending, each ``bs`` bytes) of a chunk stored raw at
    ``position``, read from the file straight into ``out`` where :func:`_straight_to` says
    they can be, else into their places in ``chunk`` and copied out; whether it was
    placed."""
    cdef Py_ssize_t i = 0, length, size = 0, got = 0, d
    cdef int64_t lo, hi
    cdef uint8_t* dst = _straight_to(L, H, O, nd, C, B, OS, out, &length)
    if dst != NULL:
        with nogil:
            got = b2s_pread(fd, dst, length, position + HEADER)
        return got == length
    with nogil:
        while i < n:
            lo = hi = wanted[i]
            i += 1
            while i < n and wanted[i] == hi + 1:  # neighbouring blocks: one read
                hi += 1
                i += 1
            size = (hi - lo + 1) * bs
            got = b2s_pread(fd, &chunk[0] + lo * bs, size, position + HEADER + lo * bs)
            if got != size:
                break
    if got != size:
        return False
    dst = <uint8_t*>out.buf
    for d in range(nd):
        dst += O[d] * OS[d]
    with nogil:
        place_blocks(&chunk[0], 0, wanted, n, nd, C, B, L, H, dst, OS, out.itemsize)
    return True


def read_box(int fd, const int64_t[::1] offsets, const int64_t[::1] stored, int64_t base,
             lo, hi, shape, chunkshape, blockshape, out, uint8_t[::1] room,
             uint8_t[::1] chunk, Scratch scratch not None, int64_t[::1] left,
             int64_t[::1] shared=None):
    """Items ``[lo, hi)`` of an array of ``shape`` into ``out`` (of shape ``hi - lo``),
    each chunk they touch read from the file ``fd`` as :func:`read_parts` reads it: chunk
    ``i`` is stored at ``base + offsets[i]``, up to the next of ``stored`` (the distinct
    starts of the stored chunks, sorted, then the chunks section's end). The chunks are
    planned here too, with no Python per read but this call.

    Returns how many chunks were left (special ones, any not of Plan's partial kind, ...):
    their numbers are the first entries of ``left``, which has room for every chunk the box
    touches. The caller reads those through Python, which decodes them or names what is
    wrong.

    With ``shared`` (two int64, zeros to start: the next chunk, the chunks left), several
    threads run this call on the same box at once, each with its own ``room``, ``chunk``
    and ``scratch``: each takes the next chunk from ``shared[0]`` (an atomic add, so that a
    thread the machine holds back takes fewer), and the numbers of those all of them left
    are the first ``shared[1]`` entries of ``left`` (in no order). It returns how many this
    thread left."""
    cdef Py_buffer view
    if shared is not None and shared.shape[0] != 2:
        raise ValueError(f"shared holds {shared.shape[0]} counters, not 2")
    PyObject_GetBuffer(out, &view, PyBUF_STRIDES | PyBUF_WRITABLE)
    try:
        return _read_box(fd, offsets, stored, base, lo, hi, shape, chunkshape, blockshape,
                         &view, room, chunk, scratch, left,
                         &shared[0] if shared is not None else NULL)
    finally:
        PyBuffer_Release(&view)


cdef Py_ssize_t _read_box(int fd, const int64_t[::1] offsets, const int64_t[::1] stored,
                          int64_t base, lo, hi, shape, chunkshape, blockshape, Py_buffer* out,
                          uint8_t[::1] room, uint8_t[::1] chunk, Scratch scratch,
                          int64_t[::1] left, int64_t* shared) except -1:
    cdef Py_ssize_t nd = len(chunkshape), d, k, total = 1, nleft = 0, nblocks, nchunk
    cdef Py_ssize_t ns = stored.shape[0], a, c0, rest, slot
    cdef int64_t entry, section
    cdef bint placed
    cdef Py_ssize_t C[MAX_DIMS]
    cdef Py_ssize_t B[MAX_DIMS]
    cdef Py_ssize_t OS[MAX_DIMS]
    cdef Py_ssize_t LO[MAX_DIMS]
    cdef Py_ssize_t HI[MAX_DIMS]
    cdef Py_ssize_t grid[MAX_DIMS]
    cdef Py_ssize_t first[MAX_DIMS]
    cdef Py_ssize_t last[MAX_DIMS]
    cdef Py_ssize_t at[MAX_DIMS]
    cdef Py_ssize_t L[MAX_DIMS]
    cdef Py_ssize_t H[MAX_DIMS]
    cdef Py_ssize_t O[MAX_DIMS]
    cdef int64_t* work
    nblocks = _geometry(chunkshape, blockshape, out, chunk, C, B, OS)
    if len(lo) != nd or len(hi) != nd or len(shape) != nd:
        raise ValueError(f"a box of {len(lo)} and {len(hi)} dimensions in a {len(shape)}-d "
                         f"array of {nd}-d chunks")
    for d in range(nd):
        LO[d], HI[d] = lo[d], hi[d]
        grid[d] = (<Py_ssize_t>shape[d] + C[d] - 1) // C[d]
        if not 0 <= LO[d] < HI[d] <= shape[d]:
            raise ValueError(f"dimension {d}: items [{LO[d]}, {HI[d]}) of {shape[d]}")
        if out.shape[d] != HI[d] - LO[d]:
            raise ValueError(f"out has {out.shape[d]} items along {d}, not {HI[d] - LO[d]}")
        first[d], last[d] = LO[d] // C[d], (HI[d] - 1) // C[d]
        at[d] = first[d]
        total *= last[d] - first[d] + 1
    if left.shape[0] < total:
        raise ValueError(f"room for {left.shape[0]} chunks left, of {total}")
    if ns == 0:
        raise ValueError("no chunks section end in stored")
    for k in range(1, ns):
        if stored[k] <= stored[k - 1]:
            raise ValueError("stored is not ascending")
    section = stored[ns - 1]
    work = <int64_t*>malloc(5 * nblocks * sizeof(int64_t))
    if work == NULL:
        raise MemoryError()
    try:
        k = -1
        while True:
            k = b2b_next(shared) if shared != NULL else k + 1
            if k >= total:
                break
            if k < 0:
                raise ValueError(f"chunk {k} of the box taken: shared did not start at 0")
            if shared != NULL:
                # (chunks are taken in any order: the k-th of the box's grid in C order)
                rest = k
                for d in range(nd - 1, -1, -1):
                    at[d] = first[d] + rest % (last[d] - first[d] + 1)
                    rest //= last[d] - first[d] + 1
            nchunk = 0
            for d in range(nd):
                nchunk = nchunk * grid[d] + at[d]
                c0 = at[d] * C[d]  # where the chunk starts along d
                L[d] = (LO[d] if LO[d] > c0 else c0) - c0
                H[d] = (HI[d] if HI[d] < c0 + C[d] else c0 + C[d]) - c0
                O[d] = c0 + L[d] - LO[d]
            entry = offsets[nchunk] if nchunk < offsets.shape[0] else -1
            placed = False
            if 0 <= entry < section:
                # The first stored start past the chunk's: where it ends at most.
                a = _first_past(&stored[0], ns, entry)
                if a < ns:
                    placed = _read_part(fd, base + entry, stored[a] - entry, L, H, O, nd, C,
                                        B, OS, nblocks, out, room, chunk, scratch, work)
            if not placed:
                slot = b2b_next(shared + 1) if shared != NULL else nleft
                if not 0 <= slot < total:
                    raise ValueError(f"chunk left at {slot} of {total}: shared did not start "
                                     "at 0")
                left[slot] = nchunk
                nleft += 1
            if shared == NULL:
                _next_in_c_order(at, first, last, nd)
    finally:
        free(work)
    return nleft
