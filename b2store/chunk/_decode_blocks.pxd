# What the parts of the GIL-free block loop share: _decode_blocks.pyx (the codecs' entry points,
# per-thread scratch, the walk and decoding; the definitions), _chunk_plan.pyx (a common chunk
# checked and decoded in one pass) and _encode_blocks.pyx (encoding).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

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


# --- the codecs' entry points (set once by _blocks.set_entry_points) --------------------------

ctypedef int (*lz4_dec_f)(const char*, char*, int, int) noexcept nogil
ctypedef int (*lz4_dec_dict_f)(const char*, char*, int, int, const char*, int) noexcept nogil
ctypedef int (*lz4_fast_f)(const char*, char*, int, int, int) noexcept nogil
ctypedef int (*lz4_hc_f)(const char*, char*, int, int, int) noexcept nogil
ctypedef void* (*zstd_create_f)() noexcept nogil
ctypedef size_t (*zstd_free_f)(void*) noexcept nogil
ctypedef unsigned (*zstd_iserr_f)(size_t) noexcept nogil
ctypedef unsigned long long (*zstd_fcs_f)(const void*, size_t) noexcept nogil
ctypedef size_t (*zstd_ffs_f)(const void*, size_t) noexcept nogil
ctypedef size_t (*zstd_dctx_f)(void*, void*, size_t, const void*, size_t) noexcept nogil
ctypedef size_t (*zstd_dctx_dict_f)(void*, void*, size_t, const void*, size_t,
                                    const void*, size_t) noexcept nogil
ctypedef size_t (*zstd_cctx_f)(void*, void*, size_t, const void*, size_t, int) noexcept nogil
ctypedef int (*z_uncompress2_f)(uint8_t*, unsigned long*, const uint8_t*,
                                unsigned long*) noexcept nogil
ctypedef int32_t (*zng_init_f)(b2b_zng_stream*, int32_t) noexcept nogil
ctypedef int32_t (*zng_op_f)(b2b_zng_stream*, int32_t) noexcept nogil
ctypedef int32_t (*zng_end_f)(b2b_zng_stream*) noexcept nogil
ctypedef int32_t (*zng_definit_f)(b2b_zng_stream*, int32_t, int32_t, int32_t, int32_t,
                                  int32_t) noexcept nogil

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
    zstd_ffs_f zstd_frame_size
    zstd_dctx_f zstd_decompress
    zstd_dctx_dict_f zstd_decompress_dict
    zstd_cctx_f zstd_compress
    z_uncompress2_f zlib_uncompress2
    zng_init_f zng_inflate_init2
    zng_op_f zng_inflate
    zng_end_f zng_inflate_reset
    zng_end_f zng_inflate_end
    zng_definit_f zng_deflate_init2
    zng_op_f zng_deflate
    zng_end_f zng_deflate_reset
    zng_end_f zng_deflate_end


cdef const Natives* natives() noexcept nogil

cdef enum:
    # Codec formats as stored in the chunk flags (bits 5-7), and the encoders' codec ids.
    F_BLOSCLZ = 0
    F_LZ4 = 1
    F_ZLIB = 3
    F_ZSTD = 4
    C_BLOSCLZ = 0
    C_LZ4 = 1
    C_LZ4HC = 2
    C_ZLIB = 4
    C_ZSTD = 5
    # Filter ids (b2store.constants.Filter).
    SHUFFLE = 1
    BITSHUFFLE = 2
    DELTA = 3
    TRUNC_PREC = 4
    BYTEDELTA_BUGGY = 34
    BYTEDELTA = 35
    INT_TRUNC = 36
    MAX_STEPS = 6


cdef inline Py_ssize_t delta_width(Py_ssize_t ts) noexcept nogil:
    """The word DELTA XORs in: the item, or 8 bytes of a wider one, or bytes."""
    if ts == 1 or ts == 2 or ts == 4 or ts == 8:
        return ts
    return 8 if ts % 8 == 0 else 1


cdef class Scratch:
    """One thread's buffers and codec contexts (see _decode_blocks.pyx)."""

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
    cdef b2b_zng_stream zdef
    cdef int zdef_level
    cdef zng_end_f zdef_end

    cdef void _release(self) noexcept
    cdef int reserve(self, Py_ssize_t size, Py_ssize_t packed_size) noexcept
    cdef void* zstd_dctx(self) noexcept
    cdef b2b_zng_stream* inflater(self) noexcept
    cdef void* zstd_cctx(self) noexcept
    cdef b2b_zng_stream* deflater(self, int level) noexcept


# --- shared with _chunk_plan.pyx (the one-pass decode of a common chunk) -----------------------

cdef inline int32_t read_i32(const uint8_t* p) noexcept nogil:
    cdef int32_t v
    memcpy(&v, p, 4)  # the format is little-endian, as is every platform b2store builds on
    return v


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


cdef bint can_decode(int codec_format, bint with_dict) noexcept nogil
cdef int _walk(const uint8_t* base, Py_ssize_t end_all, const int64_t* bstarts, Py_ssize_t nb,
               const int64_t* which, Py_ssize_t nwhich, const int64_t* ends, Py_ssize_t nbytes,
               Py_ssize_t blocksize, Py_ssize_t full_nstreams, int codec_format,
               int64_t* table, Py_ssize_t tstride) noexcept nogil
cdef int _run_blocks(const Job* J, const int64_t* blocks, Py_ssize_t n, int64_t* counter,
                     int32_t* failed, uint8_t* work, uint8_t* spare, uint8_t* tmp,
                     void* dctx) noexcept nogil
