# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The GIL-free block loop: a chunk's streams walked, inflated and unfiltered block by block.

The codecs are called through C function pointers that :mod:`b2store.chunk.native` resolves
once (LZ4 and Zstd from the ``lz4`` and ``zstandard`` wheels' extension modules, zlib from the
system library; BloscLZ and the filter kernels are b2store's own, cimported). Nothing here
raises on bad bytes: every function returns a status, and the caller falls back to the Python
path, which names the broken field. The walk checks every stream against the chunk's end and
its block before anything is inflated; the decoder checks every position again before it reads.

Several threads may run :func:`decode` or :func:`encode` on the same job at once: each takes
the next block from a shared counter (an atomic add), so blocks, not chunks, are split.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memmove, memset
from cpython.buffer cimport PyBuffer_FillInfo
from cpython.object cimport PyObject
from cpython.ref cimport Py_XDECREF

from b2store._blosclz cimport c_blosclz_compress, c_blosclz_decompress
from b2store._shuffle cimport (
    c_bitshuffle_tmp,
    c_bitunshuffle_tmp,
    c_bytedelta_decode,
    c_bytedelta_encode,
    c_delta_decode_first,
    c_delta_encode_first,
    c_is_run,
    c_shuffle,
    c_unshuffle,
    c_xor,
    c_zero_low_bits,
)


cdef extern from *:
    """
    #include <stdint.h>
    #if defined(_MSC_VER)
    #include <intrin.h>
    static inline int64_t b2b_next(int64_t* counter) {
        return _InterlockedExchangeAdd64((volatile long long*)counter, 1);
    }
    static inline int b2b_failed(int32_t* flag) { return _InterlockedOr((volatile long*)flag, 0); }
    static inline void b2b_fail(int32_t* flag) { _InterlockedExchange((volatile long*)flag, 1); }
    #else
    static inline int64_t b2b_next(int64_t* counter) {
        return __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
    }
    static inline int b2b_failed(int32_t* flag) { return __atomic_load_n(flag, __ATOMIC_RELAXED); }
    static inline void b2b_fail(int32_t* flag) { __atomic_store_n(flag, 1, __ATOMIC_RELAXED); }
    #endif
    """
    int64_t b2b_next(int64_t* counter) noexcept nogil
    int b2b_failed(int32_t* flag) noexcept nogil
    void b2b_fail(int32_t* flag) noexcept nogil


cdef extern from *:
    """
    /* zlib-ng's native stream (zlib-ng.h, 2.x): zlib's z_stream with a 32-bit adler. Only
       the fields set here are touched; the library owns the rest. */
    typedef struct {
        const uint8_t* next_in; uint32_t avail_in; size_t total_in;
        uint8_t* next_out; uint32_t avail_out; size_t total_out;
        const char* msg; void* state;
        void* zalloc; void* zfree; void* opaque;
        int data_type; uint32_t adler; unsigned long reserved;
    } b2b_zng_stream;
    """
    ctypedef struct b2b_zng_stream:
        const uint8_t* next_in
        uint32_t avail_in
        size_t total_in
        uint8_t* next_out
        uint32_t avail_out
        size_t total_out


# --- the codecs' entry points -----------------------------------------------------------------

ctypedef int (*lz4_dec_f)(const char*, char*, int, int) noexcept nogil
ctypedef int (*lz4_dec_dict_f)(const char*, char*, int, int, const char*, int) noexcept nogil
ctypedef int (*lz4_fast_f)(const char*, char*, int, int, int) noexcept nogil
ctypedef int (*lz4_hc_f)(const char*, char*, int, int, int) noexcept nogil
ctypedef void* (*zstd_create_f)() noexcept nogil
ctypedef size_t (*zstd_free_f)(void*) noexcept nogil
ctypedef unsigned (*zstd_iserr_f)(size_t) noexcept nogil
ctypedef unsigned long long (*zstd_fcs_f)(const void*, size_t) noexcept nogil
ctypedef size_t (*zstd_dctx_f)(void*, void*, size_t, const void*, size_t) noexcept nogil
ctypedef size_t (*zstd_dctx_dict_f)(void*, void*, size_t, const void*, size_t,
                                    const void*, size_t) noexcept nogil
ctypedef size_t (*zstd_cctx_f)(void*, void*, size_t, const void*, size_t, int) noexcept nogil
ctypedef int (*z_uncompress2_f)(uint8_t*, unsigned long*, const uint8_t*,
                                unsigned long*) noexcept nogil
ctypedef int32_t (*zng_init_f)(b2b_zng_stream*, int32_t) noexcept nogil
ctypedef int32_t (*zng_op_f)(b2b_zng_stream*, int32_t) noexcept nogil
ctypedef int32_t (*zng_end_f)(b2b_zng_stream*) noexcept nogil

cdef struct Natives:
    lz4_dec_f lz4_decompress
    lz4_dec_dict_f lz4_decompress_dict
    lz4_fast_f lz4_compress_fast
    lz4_hc_f lz4_compress_hc
    zstd_create_f zstd_create_dctx
    zstd_free_f zstd_free_dctx
    zstd_create_f zstd_create_cctx
    zstd_free_f zstd_free_cctx
    zstd_iserr_f zstd_is_error
    zstd_fcs_f zstd_frame_content_size
    zstd_dctx_f zstd_decompress
    zstd_dctx_dict_f zstd_decompress_dict
    zstd_cctx_f zstd_compress
    z_uncompress2_f zlib_uncompress2
    zng_init_f zng_inflate_init2
    zng_op_f zng_inflate
    zng_end_f zng_inflate_reset
    zng_end_f zng_inflate_end

cdef Natives N
memset(&N, 0, sizeof(N))

# Codec formats as stored in the chunk flags (bits 5-7), and the encoders' codec ids.
DEF F_BLOSCLZ = 0
DEF F_LZ4 = 1
DEF F_ZLIB = 3
DEF F_ZSTD = 4
DEF C_BLOSCLZ = 0
DEF C_LZ4 = 1
DEF C_LZ4HC = 2
DEF C_ZSTD = 5
# Filter ids (b2store.constants.Filter).
DEF SHUFFLE = 1
DEF BITSHUFFLE = 2
DEF DELTA = 3
DEF TRUNC_PREC = 4
DEF BYTEDELTA_BUGGY = 34
DEF BYTEDELTA = 35
DEF INT_TRUNC = 36
DEF MAX_STEPS = 6
cdef unsigned long long ZSTD_CONTENTSIZE_UNKNOWN = <unsigned long long>(-1)
cdef unsigned long long ZSTD_CONTENTSIZE_ERROR = <unsigned long long>(-2)
# The most a payload of n bytes inflates to (the checks of b2store.chunk.compressors).
DEF LZ_RATIO = 256
DEF ZLIB_RATIO = 1040
DEF ZSTD_MAX_RATIO = 131072

_NAMES = (
    "LZ4_decompress_safe", "LZ4_decompress_safe_usingDict", "LZ4_compress_fast",
    "LZ4_compress_HC", "ZSTD_createDCtx", "ZSTD_freeDCtx", "ZSTD_createCCtx", "ZSTD_freeCCtx",
    "ZSTD_isError", "ZSTD_getFrameContentSize", "ZSTD_decompressDCtx",
    "ZSTD_decompress_usingDict", "ZSTD_compressCCtx", "uncompress2", "zng_inflateInit2",
    "zng_inflate", "zng_inflateReset", "zng_inflateEnd",
)


cdef void* _address(addresses, name) except? NULL:
    return <void*><size_t>int(addresses.get(name) or 0)


def set_entry_points(addresses):
    """Install the codecs' C functions: a mapping of symbol name to address (0: absent)."""
    for name in addresses:
        if name not in _NAMES:
            raise KeyError(f"unknown entry point {name!r}")
    N.lz4_decompress = <lz4_dec_f>_address(addresses, "LZ4_decompress_safe")
    N.lz4_decompress_dict = <lz4_dec_dict_f>_address(addresses, "LZ4_decompress_safe_usingDict")
    N.lz4_compress_fast = <lz4_fast_f>_address(addresses, "LZ4_compress_fast")
    N.lz4_compress_hc = <lz4_hc_f>_address(addresses, "LZ4_compress_HC")
    N.zstd_create_dctx = <zstd_create_f>_address(addresses, "ZSTD_createDCtx")
    N.zstd_free_dctx = <zstd_free_f>_address(addresses, "ZSTD_freeDCtx")
    N.zstd_create_cctx = <zstd_create_f>_address(addresses, "ZSTD_createCCtx")
    N.zstd_free_cctx = <zstd_free_f>_address(addresses, "ZSTD_freeCCtx")
    N.zstd_is_error = <zstd_iserr_f>_address(addresses, "ZSTD_isError")
    N.zstd_frame_content_size = <zstd_fcs_f>_address(addresses, "ZSTD_getFrameContentSize")
    N.zstd_decompress = <zstd_dctx_f>_address(addresses, "ZSTD_decompressDCtx")
    N.zstd_decompress_dict = <zstd_dctx_dict_f>_address(addresses, "ZSTD_decompress_usingDict")
    N.zstd_compress = <zstd_cctx_f>_address(addresses, "ZSTD_compressCCtx")
    N.zlib_uncompress2 = <z_uncompress2_f>_address(addresses, "uncompress2")
    N.zng_inflate_init2 = <zng_init_f>_address(addresses, "zng_inflateInit2")
    N.zng_inflate = <zng_op_f>_address(addresses, "zng_inflate")
    N.zng_inflate_reset = <zng_end_f>_address(addresses, "zng_inflateReset")
    N.zng_inflate_end = <zng_end_f>_address(addresses, "zng_inflateEnd")
    if not (N.zng_inflate_init2 and N.zng_inflate and N.zng_inflate_reset and N.zng_inflate_end):
        N.zng_inflate_init2 = NULL


def decodable(int codec_format, bint with_dict):
    """Whether :func:`decode` can inflate this codec format (with a dictionary or not)."""
    if codec_format == F_BLOSCLZ:
        return not with_dict
    if codec_format == F_LZ4:
        return (N.lz4_decompress_dict if with_dict else N.lz4_decompress) != NULL
    if codec_format == F_ZLIB:
        return not with_dict and (N.zlib_uncompress2 != NULL or N.zng_inflate_init2 != NULL)
    if codec_format == F_ZSTD:
        zstd = (N.zstd_create_dctx != NULL and N.zstd_free_dctx != NULL
                and N.zstd_is_error != NULL and N.zstd_frame_content_size != NULL)
        return zstd and (N.zstd_decompress_dict if with_dict else N.zstd_decompress) != NULL
    return False


def encodable(int codec):
    """Whether :func:`encode` can compress with this codec id (no dictionary)."""
    if codec == C_BLOSCLZ:
        return True
    if codec == C_LZ4:
        return N.lz4_compress_fast != NULL
    if codec == C_LZ4HC:
        return N.lz4_compress_hc != NULL
    if codec == C_ZSTD:
        return (N.zstd_create_cctx != NULL and N.zstd_free_cctx != NULL
                and N.zstd_is_error != NULL and N.zstd_compress != NULL)
    return False


# --- per-thread scratch ------------------------------------------------------------------------

cdef class Scratch:
    """One thread's buffers and codec contexts, kept between chunks: fresh ones per call
    cost page faults and context set-up that one small block's decode cannot hide."""

    cdef uint8_t* work
    cdef uint8_t* spare
    cdef uint8_t* tmp
    cdef uint8_t* packed
    cdef Py_ssize_t size, packed_size
    cdef void* dctx
    cdef void* cctx
    cdef zstd_free_f free_dctx
    cdef zstd_free_f free_cctx
    cdef b2b_zng_stream zng
    cdef bint zng_ready
    cdef zng_end_f zng_end

    def __dealloc__(self):
        self._release()
        if self.dctx != NULL and self.free_dctx != NULL:
            self.free_dctx(self.dctx)
        if self.cctx != NULL and self.free_cctx != NULL:
            self.free_cctx(self.cctx)
        if self.zng_ready and self.zng_end != NULL:
            self.zng_end(&self.zng)

    cdef void _release(self) noexcept:
        free(self.work)
        free(self.spare)
        free(self.tmp)
        self.work = self.spare = self.tmp = NULL
        self.size = 0

    cdef int reserve(self, Py_ssize_t size, Py_ssize_t packed_size) noexcept:
        """Buffers of at least ``size`` bytes (and ``packed_size`` for compressed output)."""
        if size > self.size:
            self._release()
            self.work = <uint8_t*>malloc(size)
            self.spare = <uint8_t*>malloc(size)
            self.tmp = <uint8_t*>malloc(size)
            if self.work == NULL or self.spare == NULL or self.tmp == NULL:
                self._release()
                return -1
            self.size = size
        if packed_size > self.packed_size:
            free(self.packed)
            self.packed = <uint8_t*>malloc(packed_size)
            self.packed_size = packed_size if self.packed != NULL else 0
            if self.packed == NULL:
                return -1
        return 0

    cdef void* zstd_dctx(self) noexcept:
        if self.dctx == NULL and N.zstd_create_dctx != NULL:
            self.dctx = N.zstd_create_dctx()
            self.free_dctx = N.zstd_free_dctx
        return self.dctx

    cdef b2b_zng_stream* inflater(self) noexcept:
        """zlib-ng's inflate state (zlib format), or NULL without zlib-ng."""
        if not self.zng_ready and N.zng_inflate_init2 != NULL:
            memset(&self.zng, 0, sizeof(self.zng))
            if N.zng_inflate_init2(&self.zng, 15) == 0:
                self.zng_ready, self.zng_end = True, N.zng_inflate_end
        return &self.zng if self.zng_ready else NULL

    cdef void* zstd_cctx(self) noexcept:
        if self.cctx == NULL and N.zstd_create_cctx != NULL:
            self.cctx = N.zstd_create_cctx()
            self.free_cctx = N.zstd_free_cctx
        return self.cctx


# --- the walk: every stream of the chosen blocks checked, its place recorded -------------------

cdef inline int32_t _read_i32(const uint8_t* p) noexcept nogil:
    cdef int32_t v
    memcpy(&v, p, 4)  # the format is little-endian, as is every platform b2store builds on
    return v


cdef bint _inflatable(int codec_format, const uint8_t* payload, Py_ssize_t n,
                      Py_ssize_t size) noexcept nogil:
    """Whether ``n`` bytes can inflate to ``size`` (the checks of compressors.check_inflatable)."""
    cdef unsigned long long declared
    if codec_format == F_ZSTD:
        declared = N.zstd_frame_content_size(payload, n)
        if declared == ZSTD_CONTENTSIZE_ERROR:
            return False
        if declared == ZSTD_CONTENTSIZE_UNKNOWN:
            return size <= ZSTD_MAX_RATIO * n
        return declared == <unsigned long long>size
    if codec_format == F_ZLIB:
        return size <= ZLIB_RATIO * (n + 1)
    return size <= LZ_RATIO * (n + 1)


cdef int _walk(const uint8_t* base, Py_ssize_t end_all, const int64_t* bstarts, Py_ssize_t nb,
               const int64_t* which, Py_ssize_t nwhich, const int64_t* ends, Py_ssize_t nbytes,
               Py_ssize_t blocksize, Py_ssize_t full_nstreams, int codec_format,
               int64_t* table, Py_ssize_t tstride) noexcept nogil:
    cdef Py_ssize_t k, j, s, end, size, nstreams, neblock, pos
    cdef int32_t csize
    for k in range(nwhich):
        j = which[k]
        if j < 0 or j >= nb:
            return -1
        end = ends[j]
        if end > end_all:
            return -1
        size = nbytes - j * blocksize
        if size > blocksize:
            size = blocksize
        if size <= 0:
            return -1
        nstreams = full_nstreams if size == blocksize else 1
        neblock = size // nstreams
        pos = bstarts[j]
        if pos < 0:
            return -1
        for s in range(nstreams):
            if pos + 4 > end:
                return -1
            csize = _read_i32(base + pos)
            if csize < 0:
                # A run of one byte: -value, then a token whose bit 0 marks it.
                if pos + 5 > end or not (base[pos + 4] & 1) or csize < -255:
                    return -1
                table[j * tstride + 2 * s] = pos + 5
                table[j * tstride + 2 * s + 1] = csize
                pos += 5
                continue
            pos += 4
            if csize > end - pos or csize > neblock:
                return -1
            if 0 < csize < neblock and not _inflatable(codec_format, base + pos, csize, neblock):
                return -1
            table[j * tstride + 2 * s] = pos
            table[j * tstride + 2 * s + 1] = csize
            pos += csize
    return 0


def walk(const uint8_t[::1] src, const int64_t[::1] bstarts, const int64_t[::1] which,
         const int64_t[::1] ends, Py_ssize_t nbytes, Py_ssize_t blocksize,
         Py_ssize_t full_nstreams, int codec_format, int64_t[:, ::1] table):
    """Check the streams of blocks ``which`` and record them in ``table``.

    ``table[j]`` gets ``(position, csize)`` per stream of block ``j``; ``ends[j]`` is where
    block ``j``'s bytes must end (``len(src)`` when the whole chunk is there). Returns 0, or
    -1 when anything is off: the caller's Python walk then says what.
    """
    cdef Py_ssize_t nb = bstarts.shape[0]
    cdef int rc
    if (blocksize <= 0 or full_nstreams <= 0 or ends.shape[0] != nb or nb == 0
            or table.shape[0] != nb or table.shape[1] < 2 * full_nstreams or src.shape[0] == 0
            or which.shape[0] == 0):
        return -1
    if codec_format == F_ZSTD and N.zstd_frame_content_size == NULL:
        return -1
    with nogil:
        rc = _walk(&src[0], src.shape[0], &bstarts[0], nb, &which[0], which.shape[0], &ends[0],
                   nbytes, blocksize, full_nstreams, codec_format, &table[0, 0], table.shape[1])
    return rc


# --- decoding ---------------------------------------------------------------------------------

cdef struct Job:
    const uint8_t* src
    Py_ssize_t srclen
    Py_ssize_t nbytes
    Py_ssize_t blocksize
    Py_ssize_t full_nstreams
    int codec_format
    const int64_t* table
    Py_ssize_t tstride
    const uint8_t* dictionary
    Py_ssize_t dictsize
    int nsteps
    int fids[MAX_STEPS]
    int metas[MAX_STEPS]
    Py_ssize_t typesize
    bint blosc1
    uint8_t* dest
    Py_ssize_t dest_base
    Py_ssize_t dest_len
    const uint8_t* first
    Py_ssize_t first_len
    b2b_zng_stream* zng


cdef Py_ssize_t _inflate(const Job* J, const uint8_t* payload, Py_ssize_t n, uint8_t* out,
                         Py_ssize_t size, void* dctx) noexcept nogil:
    """Inflate one stream; returns the bytes written, or -1."""
    cdef size_t r
    cdef unsigned long dlen, slen
    if J.codec_format == F_BLOSCLZ:
        return c_blosclz_decompress(payload, n, out, size)
    if J.codec_format == F_LZ4:
        if n > 0x7FFFFFFF or size > 0x7FFFFFFF:
            return -1
        if J.dictionary != NULL:
            return N.lz4_decompress_dict(<const char*>payload, <char*>out, <int>n, <int>size,
                                         <const char*>J.dictionary, <int>J.dictsize)
        return N.lz4_decompress(<const char*>payload, <char*>out, <int>n, <int>size)
    if J.codec_format == F_ZSTD:
        if J.dictionary != NULL:
            r = N.zstd_decompress_dict(dctx, out, size, payload, n, J.dictionary, J.dictsize)
        else:
            r = N.zstd_decompress(dctx, out, size, payload, n)
        return -1 if N.zstd_is_error(r) else <Py_ssize_t>r
    if J.codec_format == F_ZLIB and J.zng != NULL:
        if (n >> 32) or (size >> 32) or N.zng_inflate_reset(J.zng) != 0:
            return -1
        J.zng.next_in, J.zng.avail_in = payload, <uint32_t>n
        J.zng.next_out, J.zng.avail_out = out, <uint32_t>size
        if N.zng_inflate(J.zng, 4) != 1:  # Z_FINISH must reach Z_STREAM_END (checksum good)
            return -1
        return size - J.zng.avail_out
    if J.codec_format == F_ZLIB and N.zlib_uncompress2 != NULL:
        dlen, slen = size, n
        if N.zlib_uncompress2(out, &dlen, payload, &slen) != 0:  # Z_OK: the stream ended
            return -1
        return <Py_ssize_t>dlen
    return -1


cdef int _decode_streams(const Job* J, Py_ssize_t j, uint8_t* target, Py_ssize_t size,
                         void* dctx) noexcept nogil:
    cdef Py_ssize_t nstreams = J.full_nstreams if size == J.blocksize else 1
    cdef Py_ssize_t neblock = size // nstreams, s, pos, csize
    cdef const int64_t* row = J.table + j * J.tstride
    cdef uint8_t* out
    for s in range(nstreams):
        pos, csize = row[2 * s], row[2 * s + 1]
        out = target + s * neblock
        if csize > 0 and (pos < 0 or pos > J.srclen - csize):
            return -1  # never trusted: the table may not come from walk()
        if csize == neblock:
            memcpy(out, J.src + pos, neblock)
        elif csize > 0:
            if _inflate(J, J.src + pos, csize, out, neblock, dctx) != neblock:
                return -1
        elif csize >= -255:
            memset(out, <uint8_t>(-csize), neblock)  # a run: zeros, or -csize repeated
        else:
            return -1
    return 0


cdef inline Py_ssize_t _delta_width(Py_ssize_t ts) noexcept nogil:
    if ts == 1 or ts == 2 or ts == 4 or ts == 8:
        return ts
    return 8 if ts % 8 == 0 else 1


cdef int _undo_one(const Job* J, int fid, int meta, const uint8_t* src, uint8_t* dst,
                   Py_ssize_t size, uint8_t* tmp) noexcept nogil:
    cdef Py_ssize_t ts = J.typesize, n, body
    if fid == SHUFFLE:
        c_unshuffle(src, dst, size, meta if meta else ts)
    elif fid == BITSHUFFLE:
        n = size // ts
        if J.blosc1 and n % 8:
            # c-blosc1 bit-shuffled only blocks of a multiple of 8 items.
            memcpy(dst, src, size)
            return 0
        n -= n % 8
        if n:
            c_bitunshuffle_tmp(src, dst, n, ts, tmp)
        memcpy(dst + n * ts, src + n * ts, size - n * ts)
    elif fid == BYTEDELTA or fid == BYTEDELTA_BUGGY:
        c_bytedelta_decode(src, dst, size, meta if meta else ts, fid == BYTEDELTA_BUGGY)
    else:
        return -1
    return 0


cdef int _undo_delta(const Job* J, uint8_t* buf, Py_ssize_t size, Py_ssize_t j) noexcept nogil:
    cdef Py_ssize_t w = _delta_width(J.typesize)
    cdef Py_ssize_t body = size // w * w
    if j == 0:
        c_delta_decode_first(buf, size, w)
        return 0
    if J.first == NULL or J.first_len < body:
        return -1
    c_xor(buf, J.first, buf, body)
    return 0


cdef int _decode_block(const Job* J, Py_ssize_t j, uint8_t* work, uint8_t* spare,
                       uint8_t* tmp, void* dctx) noexcept nogil:
    cdef Py_ssize_t size = J.nbytes - j * J.blocksize, offset = j * J.blocksize - J.dest_base
    cdef uint8_t* dest
    cdef uint8_t* cur
    cdef uint8_t* other
    cdef uint8_t* target
    cdef int k, fid, last_real = -1
    if size > J.blocksize:
        size = J.blocksize
    if size <= 0 or offset < 0 or offset > J.dest_len - size:
        return -1
    dest = J.dest + offset
    for k in range(J.nsteps):
        if J.fids[k] != DELTA:
            last_real = k
    if last_real < 0:
        # No filter, or DELTA alone: inflate straight into the destination.
        if _decode_streams(J, j, dest, size, dctx):
            return -1
        for k in range(J.nsteps):
            if _undo_delta(J, dest, size, j):
                return -1
        return 0
    if _decode_streams(J, j, work, size, dctx):
        return -1
    cur, other = work, spare
    for k in range(J.nsteps):
        fid = J.fids[k]
        if fid == DELTA:
            if _undo_delta(J, cur, size, j):
                return -1
            continue
        target = dest if k == last_real else other
        if _undo_one(J, fid, J.metas[k], cur, target, size, tmp):
            return -1
        cur, other = target, cur
    if cur != dest:
        memcpy(dest, cur, size)
    return 0


def decode(const uint8_t[::1] src, const int64_t[:, ::1] table, const int64_t[::1] blocks,
           int64_t[::1] counter, int32_t[::1] failed, uint8_t[::1] dest,
           Py_ssize_t dest_base, Py_ssize_t nbytes, Py_ssize_t blocksize,
           Py_ssize_t full_nstreams, int codec_format, steps, Py_ssize_t typesize,
           bint blosc1, Scratch scratch not None, dictionary=None, first=None):
    """Decode blocks ``blocks`` into ``dest`` (which holds the decoded chunk from byte
    ``dest_base``) without the GIL; returns 0, or -1 if any block failed.

    Threads sharing ``counter`` (one int64, start 0) and ``failed`` (one int32) share the
    work, block by block. ``steps``: the filters to undo, in order, as (id, meta) pairs.
    ``first``: the chunk's decoded block 0, for DELTA. ``scratch``: this thread's.
    """
    cdef Job J
    cdef const uint8_t[::1] dict_view
    cdef const uint8_t[::1] first_view
    cdef Py_ssize_t n = blocks.shape[0], i, j
    cdef uint8_t* work = NULL
    cdef uint8_t* spare = NULL
    cdef uint8_t* tmp = NULL
    cdef void* dctx = NULL
    cdef int rc = 0
    cdef bint needs_scratch = False
    memset(&J, 0, sizeof(J))
    if (blocksize <= 0 or full_nstreams <= 0 or typesize <= 0 or table.shape[0] == 0
            or table.shape[1] < 2 * full_nstreams or counter.shape[0] < 1 or failed.shape[0] < 1
            or len(steps) > MAX_STEPS or src.shape[0] == 0 or dest.shape[0] == 0):
        return -1
    if not decodable(codec_format, dictionary is not None):
        return -1
    for i in range(n):
        if not 0 <= blocks[i] < table.shape[0]:
            return -1
    J.src, J.srclen = &src[0], src.shape[0]
    J.nbytes, J.blocksize, J.full_nstreams = nbytes, blocksize, full_nstreams
    J.codec_format = codec_format
    J.table, J.tstride = &table[0, 0], table.shape[1]
    J.typesize, J.blosc1 = typesize, blosc1
    J.dest, J.dest_base, J.dest_len = &dest[0], dest_base, dest.shape[0]
    J.nsteps = len(steps)
    for i, (fid, meta) in enumerate(steps):
        J.fids[i], J.metas[i] = fid, meta
        if fid != DELTA:
            needs_scratch = True
    if dictionary is not None:
        dict_view = dictionary
        if dict_view.shape[0] == 0:
            return -1
        J.dictionary, J.dictsize = &dict_view[0], dict_view.shape[0]
    if first is not None:
        first_view = first
        if first_view.shape[0]:
            J.first, J.first_len = &first_view[0], first_view.shape[0]
    if needs_scratch:
        if scratch.reserve(blocksize, 0):
            return -1
        work, spare, tmp = scratch.work, scratch.spare, scratch.tmp
    if codec_format == F_ZSTD:
        dctx = scratch.zstd_dctx()
        if dctx == NULL:
            return -1
    if codec_format == F_ZLIB:
        J.zng = scratch.inflater()
        if J.zng == NULL and N.zlib_uncompress2 == NULL:
            return -1
    with nogil:
        rc = _run_blocks(&J, &blocks[0] if n else NULL, n, &counter[0], &failed[0], work, spare,
                         tmp, dctx)
    return rc


cdef int _run_blocks(const Job* J, const int64_t* blocks, Py_ssize_t n, int64_t* counter,
                     int32_t* failed, uint8_t* work, uint8_t* spare, uint8_t* tmp,
                     void* dctx) noexcept nogil:
    """Decode blocks (``blocks[i]``, or ``i`` when ``blocks`` is NULL) until the shared
    ``counter`` passes ``n`` or any thread has failed; 0, or -1 (``failed`` then set)."""
    cdef Py_ssize_t i, j
    cdef int rc = 0
    while rc == 0:
        i = b2b_next(counter)
        if i >= n or b2b_failed(failed):
            break
        j = blocks[i] if blocks != NULL else i
        if _decode_block(J, j, work, spare, tmp, dctx):
            rc = -1
    if rc:
        b2b_fail(failed)
    return rc


# --- one common chunk, planned and decoded with no Python in between --------------------------

DEF EXTENDED = 0x05
DEF MEMCPYED = 0x02
DEF DONT_SPLIT = 0x10
DEF HEADER = 32
DEF MAX_BLOCKSIZE = 536866816


cdef void _copy_blocks(const Job* J, uint8_t* dest, Py_ssize_t n, int64_t* counter) noexcept nogil:
    """A raw chunk's items, block by block (threads sharing ``counter``)."""
    cdef Py_ssize_t i, size
    while True:
        i = b2b_next(counter)
        if i >= n:
            break
        size = J.nbytes - i * J.blocksize
        if size > J.blocksize:
            size = J.blocksize
        memcpy(dest + i * J.blocksize, J.src + HEADER + i * J.blocksize, size)




cdef class Plan:
    """A chunk of the common kind checked and walked in C: a Blosc2 header of version 4-6
    with no dictionary, special value or VL blocks; BloscLZ, LZ4, zlib or Zstd; shuffle and
    bit-shuffle as its only filters; or stored raw (memcpyed). Decoding it takes no Python
    per block or per stream, and one call per thread.

    ``Plan(src)`` leaves ``ok`` false for any other chunk, or for one that breaks the
    format anywhere: :class:`~b2store.chunk.decoder.ChunkDecoder` then decodes it or names
    what is wrong. Threads running :meth:`run` on one plan split its blocks.
    """

    cdef const uint8_t[::1] _src
    cdef Job J
    cdef int64_t* table
    cdef int64_t counter
    cdef int32_t failed
    cdef bint needs_scratch
    cdef bint raw
    cdef readonly bint ok
    cdef readonly Py_ssize_t nbytes
    cdef readonly Py_ssize_t nblocks

    def __cinit__(self, const uint8_t[::1] src):
        self._src = src
        self.ok = self._plan(src.shape[0]) == 0

    def __dealloc__(self):
        free(self.table)

    cdef int _plan(self, Py_ssize_t buflen) except -2:
        cdef const uint8_t* p
        cdef Py_ssize_t version, flags, ts, nbytes, bs, cbytes, nb, nstreams, starts_end, j
        cdef Py_ssize_t start, fmt, k, fid
        cdef int64_t* bstarts
        cdef int rc
        memset(&self.J, 0, sizeof(Job))
        if buflen < HEADER:
            return -1
        p = &self._src[0]
        version, flags, ts = p[0], p[2], p[3]
        nbytes, bs, cbytes = _read_i32(p + 4), _read_i32(p + 8), _read_i32(p + 12)
        fmt = flags >> 5
        # The checks of ChunkHeader._check and ChunkDecoder._read_layout, for this kind only.
        if (not 4 <= version <= 6 or flags & EXTENDED != EXTENDED
                or p[30] != 0 or p[31] != 0 or ts == 0 or nbytes <= 0 or bs <= 0
                or bs > MAX_BLOCKSIZE or cbytes < HEADER or cbytes > buflen
                or not (fmt == F_BLOSCLZ or fmt == F_LZ4 or fmt == F_ZLIB or fmt == F_ZSTD)):
            return -1
        if flags & MEMCPYED:
            # Stored raw: the items follow the header, exactly nbytes of them.
            if cbytes != nbytes + HEADER:
                return -1
            self.raw = True
            self.J.src, self.J.srclen = p, cbytes
            bs = min(bs, nbytes)
            self.J.nbytes, self.J.blocksize = nbytes, bs
            self.nbytes, self.nblocks = nbytes, (nbytes + bs - 1) // bs
            return 0
        if not decodable(fmt, False):
            return -1
        if fmt == F_ZSTD and N.zstd_frame_content_size == NULL:
            return -1
        self.J.nsteps = 0
        for k in range(5, -1, -1):  # the slots are undone last first
            fid = p[16 + k]
            if fid == SHUFFLE or fid == BITSHUFFLE:
                self.J.fids[self.J.nsteps] = <int>fid
                self.J.metas[self.J.nsteps] = p[24 + k]
                self.J.nsteps += 1
            elif not (fid == 0 or fid == TRUNC_PREC or fid == INT_TRUNC):
                return -1
        if bs > nbytes:
            bs = nbytes
        nb = (nbytes + bs - 1) // bs
        # Blosc2 headers split full blocks unless told not to; items of one byte never.
        nstreams = ts if ts > 1 and not flags & DONT_SPLIT else 1
        if nstreams > 1 and bs % ts:
            return -1
        starts_end = HEADER + 4 * nb
        # Every stream takes at least its 4-byte size: more streams than that cannot be there
        # (and would make the table below a huge allocation for a small hostile chunk).
        if starts_end > cbytes or nb * nstreams > cbytes // 4:
            return -1
        self.table = <int64_t*>malloc(nb * (3 + 2 * nstreams) * sizeof(int64_t))
        if self.table == NULL:
            return -1
        bstarts = self.table + nb * 2 * nstreams
        for j in range(nb):
            start = _read_i32(p + HEADER + 4 * j)
            if start < starts_end or start >= cbytes:
                return -1
            bstarts[j] = start
            bstarts[nb + j] = cbytes
            bstarts[2 * nb + j] = j
        with nogil:
            rc = _walk(p, cbytes, bstarts, nb, bstarts + 2 * nb, nb, bstarts + nb, nbytes, bs,
                       nstreams, <int>fmt, self.table, 2 * nstreams)
        if rc:
            return -1
        self.J.src, self.J.srclen = p, cbytes
        self.J.nbytes, self.J.blocksize, self.J.full_nstreams = nbytes, bs, nstreams
        self.J.codec_format = <int>fmt
        self.J.table, self.J.tstride = self.table, 2 * nstreams
        self.J.typesize = ts
        self.needs_scratch = self.J.nsteps > 0
        self.nbytes, self.nblocks = nbytes, nb
        return 0

    def run(self, uint8_t[::1] dest, Scratch scratch not None):
        """Decode blocks into ``dest`` (``nbytes`` long) until none are left; 0 or -1.
        A plan decodes once: its blocks are shared out to whichever threads run it."""
        cdef Job J = self.J
        cdef uint8_t* work = NULL
        cdef uint8_t* spare = NULL
        cdef uint8_t* tmp = NULL
        cdef void* dctx = NULL
        cdef int rc
        if not self.ok or dest.shape[0] != self.nbytes:
            return -1
        if self.raw:
            with nogil:
                _copy_blocks(&J, &dest[0], self.nblocks, &self.counter)
            return 0
        J.dest, J.dest_base, J.dest_len = &dest[0], 0, dest.shape[0]
        if self.needs_scratch:
            if scratch.reserve(J.blocksize, 0):
                return -1
            work, spare, tmp = scratch.work, scratch.spare, scratch.tmp
        if J.codec_format == F_ZSTD:
            dctx = scratch.zstd_dctx()
            if dctx == NULL:
                return -1
        if J.codec_format == F_ZLIB:
            J.zng = scratch.inflater()
            if J.zng == NULL and N.zlib_uncompress2 == NULL:
                return -1
        with nogil:
            rc = _run_blocks(&J, NULL, self.nblocks, &self.counter, &self.failed, work, spare,
                             tmp, dctx)
        return -1 if rc or self.failed else 0


# --- encoding ---------------------------------------------------------------------------------

cdef extern from "Python.h":
    PyObject* _new_bytes "PyBytes_FromStringAndSize"(const char* s, Py_ssize_t n) except NULL
    char* _bytes_data "PyBytes_AS_STRING"(PyObject* o)
    int _resize_bytes "_PyBytes_Resize"(PyObject** o, Py_ssize_t n) except -1


cdef class ChunkOut:
    """A chunk being encoded, in the ``bytes`` object that will be returned: blocks are
    compressed into fixed slots of it (threads may fill them in any order), then packed
    in place behind the header and block starts, and the object shrunk to fit. This
    spares a chunk-sized join (and its page faults) per chunk.

    It exposes its bytes as a writable buffer until :meth:`finish` hands them over.
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

    def finish(self, const uint8_t[::1] prefix, const int64_t[::1] sizes, Py_ssize_t slot):
        """The chunk: ``prefix`` (header and block starts), then block ``j``'s ``sizes[j]``
        bytes, found at ``len(prefix) + j * slot``. The bytes object is handed over."""
        cdef Py_ssize_t p = prefix.shape[0], n = sizes.shape[0], j, pos = prefix.shape[0]
        if self.obj == NULL or self.exports:
            raise BufferError("the chunk was handed over, or is still being written")
        if p + n * slot > self.capacity or slot < 0:
            raise ValueError("blocks past the chunk's room")
        for j in range(n):
            if not 0 <= sizes[j] <= slot:
                raise ValueError(f"block {j} of {sizes[j]} bytes in a slot of {slot}")
        with nogil:
            # Every block moves toward the start (sizes <= slot): in order, none is overrun.
            for j in range(n):
                memmove(self.data + pos, self.data + p + j * slot, sizes[j])
                pos += sizes[j]
            if p:
                memcpy(self.data, &prefix[0], p)
        return self._hand_over(pos)


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
    Py_ssize_t slot
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
        w = _delta_width(ts)
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
    return 0


cdef int _encode_block(const EncJob* E, Py_ssize_t j, uint8_t* work, uint8_t* spare,
                       uint8_t* tmp, uint8_t* packed, Py_ssize_t cap, void* cctx,
                       bint* all_zero) noexcept nogil:
    cdef Py_ssize_t size = E.nbytes - j * E.blocksize
    cdef const uint8_t* cur = E.src + j * E.blocksize
    cdef uint8_t* bufs[2]
    cdef uint8_t* op = E.out + j * E.slot
    cdef uint8_t* op_end = op + E.slot
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
    E.sizes[j] = op - (E.out + j * E.slot)
    return 0


def encode(const uint8_t[::1] src, Py_ssize_t blocksize, Py_ssize_t full_nstreams, steps,
           Py_ssize_t typesize, int codec, int clevel, int level, uint8_t[::1] out,
           Py_ssize_t slot, int64_t[::1] sizes, int64_t[::1] counter, int32_t[::1] flags,
           Scratch scratch not None):
    """Filter and compress the blocks of ``src`` without the GIL, block ``j`` into
    ``out[j * slot:]`` (its streams, each ``i32 csize`` then bytes, as c-blosc2 lays them),
    its length into ``sizes[j]``. Returns 0 or -1.

    Threads sharing ``counter`` (one int64) and ``flags`` (int32: failed, not all zero runs)
    share the blocks. ``steps``: the filters in order as (id, meta) pairs, meta being the
    number of bits cleared for TRUNC_PREC and INT_TRUNC. ``level``: LZ4's acceleration,
    LZ4HC's or Zstd's level.
    """
    cdef EncJob E
    cdef Py_ssize_t nblocks, i, cap
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
            or slot < blocksize + 5 * full_nstreams):
        return -1
    nblocks = (src.shape[0] + blocksize - 1) // blocksize
    if sizes.shape[0] < nblocks or out.shape[0] < nblocks * slot:
        return -1
    E.src, E.nbytes, E.blocksize, E.full_nstreams = &src[0], src.shape[0], blocksize, full_nstreams
    E.codec, E.clevel, E.level, E.typesize = codec, clevel, level, typesize
    E.out, E.slot, E.sizes = &out[0], slot, &sizes[0]
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
