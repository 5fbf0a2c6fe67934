# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The block loop's encoding half: a chunk's blocks filtered and compressed without the GIL.

Blocks go into fixed slots of the chunk's own ``bytes`` (:class:`ChunkOut`), threads taking
the next block from a shared counter, and are packed behind the header at the end. The
codecs are the entry points :mod:`b2store.chunk._decode_blocks` was given (LZ4, LZ4HC, Zstd,
zlib-ng's deflate) and b2store's BloscLZ; the filters are the ``nogil`` kernels of
:mod:`b2store._shuffle` and :mod:`b2store.chunk._delta`.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy, memmove, memset
from cpython.buffer cimport PyBuffer_FillInfo
from cpython.object cimport PyObject
from cpython.ref cimport Py_XDECREF

from b2store.chunk._decode_blocks cimport (
    BITSHUFFLE,
    BYTEDELTA,
    BYTEDELTA_BUGGY,
    C_BLOSCLZ,
    C_LZ4,
    C_LZ4HC,
    C_ZLIB,
    C_ZSTD,
    DELTA,
    MAX_STEPS,
    SHUFFLE,
    Natives,
    Scratch,
    b2b_zng_stream,
    b2b_fail,
    b2b_next,
    b2b_failed,
    delta_width,
    natives,
)
from b2store.chunk._blosclz cimport c_blosclz_compress
from b2store.chunk._delta cimport c_bytedelta_encode, c_delta_encode_first, c_xor
from b2store._shuffle cimport c_bitshuffle_tmp, c_is_run, c_shuffle, c_zero_low_bits

from b2store.chunk._decode_blocks import encodable

# The entry points _decode_blocks holds (filled in by its set_entry_points, read at each call).
cdef const Natives* N = natives()


cdef extern from "Python.h":
    PyObject* _new_bytes "PyBytes_FromStringAndSize"(const char* s, Py_ssize_t n) except NULL
    char* _bytes_data "PyBytes_AS_STRING"(PyObject* o)
    int _resize_bytes "_PyBytes_Resize"(PyObject** o, Py_ssize_t n) except -1


cdef class ChunkOut:
    """A chunk being encoded, in the ``bytes`` object that will be returned: blocks are
    compressed into fixed slots of it (threads may fill them in any order), then packed
    in place behind the header and block starts, and the object shrunk to fit. This
    spares a chunk-sized join (and its page faults) per chunk.

    It exposes its bytes as a writable buffer until :meth:`finish_blocks` hands them over.
    """

    cdef PyObject* obj
    cdef uint8_t* data
    cdef readonly Py_ssize_t capacity
    cdef int exports

    def __cinit__(self, Py_ssize_t capacity):
        self.obj = _new_bytes(NULL, capacity if capacity > 0 else 1)
        self.data = <uint8_t*>_bytes_data(self.obj)
        self.capacity = capacity

    def __dealloc__(self):
        Py_XDECREF(self.obj)

    def __getbuffer__(self, Py_buffer* view, int flags):
        if self.obj == NULL:
            raise BufferError("the chunk was handed over")
        PyBuffer_FillInfo(view, self, self.data, self.capacity, 0, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self.exports -= 1

    def raw(self, const uint8_t[::1] header, const uint8_t[::1] items):
        """The chunk stored raw: ``header``, then ``items``, in these same bytes (already
        in memory, where a new object would fault in a chunk's worth of fresh pages)."""
        cdef Py_ssize_t h = header.shape[0], n = items.shape[0]
        if self.obj == NULL or self.exports:
            raise BufferError("the chunk was handed over, or is still being written")
        if h + n > self.capacity:
            raise ValueError("the items do not fit the chunk's room")
        with nogil:
            if h:
                memcpy(self.data, &header[0], h)
            if n:
                memcpy(self.data + h, &items[0], n)
        return self._hand_over(h + n)

    cdef object _hand_over(self, Py_ssize_t size):
        _resize_bytes(&self.obj, size)  # on failure it frees the object and sets NULL
        result = <object>self.obj
        Py_XDECREF(self.obj)
        self.obj = NULL
        self.data = NULL
        return result

    cdef Py_ssize_t _pack(self, Py_ssize_t p, const int64_t[::1] sizes,
                          Py_ssize_t slot) except -1:
        """Check the blocks' sizes and move them together from ``p`` on; the chunk's end."""
        cdef Py_ssize_t n = sizes.shape[0], j, end, pos = p
        if self.obj == NULL or self.exports:
            raise BufferError("the chunk was handed over, or is still being written")
        if p + n * slot > self.capacity or slot < 0:
            raise ValueError("blocks past the chunk's room")
        for j in range(n):
            if not 0 <= sizes[j] <= (slot if slot else self.capacity):
                raise ValueError(f"block {j} of {sizes[j]} bytes in a slot of {slot}")
            pos += sizes[j]
            if pos > self.capacity:
                raise ValueError("blocks past the chunk's room")
        end, pos = pos, p
        with nogil:
            # Every block moves toward the start (sizes <= slot): in order, none is overrun.
            # Slot 0: they were written one after another, in place already.
            for j in range(n if slot else 0):
                memmove(self.data + pos, self.data + p + j * slot, sizes[j])
                pos += sizes[j]
        return end

    def finish_blocks(self, const uint8_t[::1] header, const int64_t[::1] sizes,
                      Py_ssize_t slot):
        """The chunk: ``header`` (32 bytes) with its cbytes set to the chunk's length, one
        little-endian int32 start per block, then block ``j``'s ``sizes[j]`` bytes, found
        at ``32 + 4 * len(sizes) + j * slot`` (``slot`` 0: packed there already, one after
        another). The bytes object is handed over."""
        cdef Py_ssize_t h = header.shape[0], n = sizes.shape[0], j, start
        cdef Py_ssize_t end
        cdef int32_t word
        if h != 32:
            raise ValueError(f"a header of 32 bytes, not {h}")
        end = self._pack(h + 4 * n, sizes, slot)
        if end > 0x7FFFFFFF:
            raise ValueError("a chunk of more than 2 GiB")
        memcpy(self.data, &header[0], h)
        word = <int32_t>end
        memcpy(self.data + 12, &word, 4)  # cbytes (the format is little-endian)
        start = h + 4 * n
        for j in range(n):
            word = <int32_t>start
            memcpy(self.data + h + 4 * j, &word, 4)
            start += sizes[j]
        return self._hand_over(end)


cdef struct EncJob:
    const uint8_t* src
    Py_ssize_t nbytes
    Py_ssize_t blocksize
    Py_ssize_t full_nstreams
    int codec
    int clevel
    int level
    int nsteps
    int fids[MAX_STEPS]
    int metas[MAX_STEPS]
    Py_ssize_t typesize
    uint8_t* out
    Py_ssize_t outlen
    Py_ssize_t slot      # 0: blocks one after another (one thread), at *pos
    Py_ssize_t* pos
    int64_t* sizes


cdef void _apply_one(const EncJob* E, int fid, int meta, const uint8_t* src, uint8_t* dst,
                     Py_ssize_t size, Py_ssize_t j, uint8_t* tmp) noexcept nogil:
    cdef Py_ssize_t ts = E.typesize, n, body, w
    if fid == SHUFFLE:
        c_shuffle(src, dst, size, meta if meta else ts)
    elif fid == BITSHUFFLE:
        n = size // ts
        n -= n % 8
        if n:
            c_bitshuffle_tmp(src, dst, n, ts, tmp)
        memcpy(dst + n * ts, src + n * ts, size - n * ts)
    elif fid == DELTA:
        w = delta_width(ts)
        body = size // w * w
        if j == 0:
            # Block 0 is coded against itself as it enters this stage.
            if body:
                c_delta_encode_first(src, dst, src, body, w)
        else:
            c_xor(src, E.src, dst, body)  # against the chunk's unfiltered block 0
        memcpy(dst + body, src + body, size - body)
    elif fid == BYTEDELTA or fid == BYTEDELTA_BUGGY:
        c_bytedelta_encode(src, dst, size, meta if meta else ts, fid == BYTEDELTA_BUGGY)
    else:  # TRUNC_PREC, INT_TRUNC: meta is the number of low bits cleared
        memcpy(dst, src, size)
        body = size // ts * ts
        c_zero_low_bits(dst, body, ts, meta)


cdef Py_ssize_t _deflate(const EncJob* E, const uint8_t* stream, Py_ssize_t n, uint8_t* out,
                         Py_ssize_t cap, void* cctx) noexcept nogil:
    """Compress one stream; returns its size, or 0 when it is not worth storing so."""
    cdef size_t r
    cdef b2b_zng_stream* z
    if E.codec == C_BLOSCLZ:
        # BloscLZ gets exactly the stream's size as room, as c-blosc2 gives it.
        return c_blosclz_compress(E.clevel, stream, n, out, n)
    if n > 0x7FFFFFFF or cap > 0x7FFFFFFF:
        return 0
    if E.codec == C_LZ4:
        return N.lz4_compress_fast(<const char*>stream, <char*>out, <int>n, <int>cap, E.level)
    if E.codec == C_LZ4HC:
        return N.lz4_compress_hc(<const char*>stream, <char*>out, <int>n, <int>cap, E.level)
    if E.codec == C_ZSTD:
        r = N.zstd_compress(cctx, out, cap, stream, n, E.level)
        return 0 if N.zstd_is_error(r) else <Py_ssize_t>r
    if E.codec == C_ZLIB:
        z = <b2b_zng_stream*>cctx
        if N.zng_deflate_reset(z) != 0:
            return 0
        z.next_in, z.avail_in = stream, <uint32_t>n
        z.next_out, z.avail_out = out, <uint32_t>cap
        # One call with all of the input: the stream is kept only if it ends (Z_STREAM_END)
        # within ``cap``; the bytes are those of any other way of calling deflate.
        if N.zng_deflate(z, 4) != 1:  # Z_FINISH
            return 0
        return cap - z.avail_out
    return 0


cdef int _encode_block(const EncJob* E, Py_ssize_t j, uint8_t* work, uint8_t* spare,
                       uint8_t* tmp, uint8_t* packed, Py_ssize_t cap, void* cctx,
                       bint* all_zero) noexcept nogil:
    cdef Py_ssize_t size = E.nbytes - j * E.blocksize
    cdef const uint8_t* cur = E.src + j * E.blocksize
    cdef uint8_t* bufs[2]
    cdef uint8_t* start = E.out + (j * E.slot if E.slot else E.pos[0])
    cdef uint8_t* op = start
    cdef uint8_t* op_end = op + E.slot if E.slot else E.out + E.outlen
    cdef Py_ssize_t nstreams, neblock, s, n
    cdef const uint8_t* stream
    cdef int32_t word
    cdef int k
    if size > E.blocksize:
        size = E.blocksize
    bufs[0], bufs[1] = work, spare
    for k in range(E.nsteps):
        _apply_one(E, E.fids[k], E.metas[k], cur, bufs[k % 2], size, j, tmp)
        cur = bufs[k % 2]
    nstreams = E.full_nstreams if size == E.blocksize else 1  # a short last block: one stream
    neblock = size // nstreams
    for s in range(nstreams):
        stream = cur + s * neblock
        if c_is_run(stream, neblock):
            # One repeated byte: csize 0 for zeros, else -value and a run token.
            word = -(<int32_t>stream[0])
            if op + 5 > op_end:
                return -1
            memcpy(op, &word, 4)
            op += 4
            if stream[0]:
                op[0] = 1
                op += 1
                all_zero[0] = False
            continue
        all_zero[0] = False
        if E.codec != C_ZSTD and op + 4 + neblock <= op_end:
            # Straight into place, with no room to grow: the stream is kept only when it
            # shrinks, and LZ4 and BloscLZ write the same bytes whatever room they get.
            n = _deflate(E, stream, neblock, op + 4, neblock - 1, cctx)
            if not 0 < n < neblock:
                n = 0
                memcpy(op + 4, stream, neblock)
            word = <int32_t>(n if n else neblock)
            memcpy(op, &word, 4)
            op += 4 + word
            continue
        n = _deflate(E, stream, neblock, packed, cap, cctx)
        if not 0 < n < neblock:
            n = 0
        word = <int32_t>(n if n else neblock)
        if op + 4 + word > op_end:
            return -1
        memcpy(op, &word, 4)
        memcpy(op + 4, packed if n else stream, word)
        op += 4 + word
    E.sizes[j] = op - start
    if not E.slot:
        E.pos[0] += op - start
    return 0


def encode(const uint8_t[::1] src, Py_ssize_t blocksize, Py_ssize_t full_nstreams, steps,
           Py_ssize_t typesize, int codec, int clevel, int level, uint8_t[::1] out,
           Py_ssize_t slot, int64_t[::1] sizes, int64_t[::1] counter, int32_t[::1] flags,
           Scratch scratch not None):
    """Filter and compress the blocks of ``src`` without the GIL, block ``j`` into
    ``out[j * slot:]`` (its streams, each ``i32 csize`` then bytes, as c-blosc2 lays them),
    its length into ``sizes[j]``. Returns 0 or -1. ``slot`` 0 (one thread only): each block
    right after the one before, packed already.

    Threads sharing ``counter`` (one int64) and ``flags`` (int32: failed, not all zero runs)
    share the blocks. ``steps``: the filters in order as (id, meta) pairs, meta being the
    number of bits cleared for TRUNC_PREC and INT_TRUNC. ``level``: LZ4's acceleration,
    LZ4HC's or Zstd's level.
    """
    cdef EncJob E
    cdef Py_ssize_t nblocks, i, cap, pos = 0
    cdef uint8_t* work = NULL
    cdef uint8_t* spare = NULL
    cdef uint8_t* tmp = NULL
    cdef uint8_t* packed = NULL
    cdef void* cctx = NULL
    cdef int rc = 0
    cdef bint all_zero = True
    memset(&E, 0, sizeof(E))
    if (blocksize <= 0 or full_nstreams <= 0 or typesize <= 0 or src.shape[0] == 0
            or len(steps) > MAX_STEPS or counter.shape[0] < 1 or flags.shape[0] < 2
            or not encodable(codec) or not 1 <= clevel <= 9
            or (slot and slot < blocksize + 5 * full_nstreams) or slot < 0):
        return -1
    nblocks = (src.shape[0] + blocksize - 1) // blocksize
    if sizes.shape[0] < nblocks or out.shape[0] < nblocks * (
            slot if slot else blocksize + 5 * full_nstreams):
        return -1
    E.src, E.nbytes, E.blocksize, E.full_nstreams = &src[0], src.shape[0], blocksize, full_nstreams
    E.codec, E.clevel, E.level, E.typesize = codec, clevel, level, typesize
    E.out, E.outlen, E.slot, E.pos, E.sizes = &out[0], out.shape[0], slot, &pos, &sizes[0]
    E.nsteps = len(steps)
    for i, (fid, meta) in enumerate(steps):
        E.fids[i], E.metas[i] = fid, meta
    cap = blocksize + blocksize // 128 + 1024  # above LZ4's and Zstd's compress bounds
    if scratch.reserve(blocksize, cap):
        return -1
    work, spare, tmp, packed = scratch.work, scratch.spare, scratch.tmp, scratch.packed
    if codec == C_ZSTD:
        cctx = scratch.zstd_cctx()
        if cctx == NULL:
            return -1
    elif codec == C_ZLIB:
        cctx = scratch.deflater(level)
        if cctx == NULL:
            return -1
    with nogil:
        while rc == 0:
            i = b2b_next(&counter[0])
            if i >= nblocks or b2b_failed(&flags[0]):
                break
            if _encode_block(&E, i, work, spare, tmp, packed, cap, cctx, &all_zero):
                rc = -1
        if rc:
            b2b_fail(&flags[0])
        if not all_zero:
            b2b_fail(&flags[1])
    return rc
