# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Byte loops of the Blosc2 filters: shuffle, bitshuffle, truncation, runs (delta and
bytedelta are b2store.chunk._delta's).

Every kernel is a ``nogil`` loop over raw pointers with no Python objects inside. The ``def``
wrappers at the bottom check only what keeps the loops in bounds (lengths and element
sizes); the format rules (which filter, which element size, leftover policy) live in
``b2store.chunk.filters``.
"""

from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int64_t
from libc.string cimport memcpy
from libc.stdlib cimport malloc, free

from b2store.chunk._shuffle_avx2 cimport (
    c_bitrows_to_bytes_avx2,
    c_bytes_to_bitrows_avx2,
    c_have_avx2,
    c_shuffle_avx2,
    c_unshuffle_avx2,
)


cdef extern from *:
    """
    /* SSE2 (the x86-64 baseline) paths of the hot loops; elsewhere the scalar loops do it.
       Bit-unshuffle takes 16 groups (128 items) of one byte index at a time: gather byte g
       of the 8 bit rows with three rounds of unpacks, then transpose each 64-bit lane as an
       8x8 bit matrix. Unshuffle interleaves 16 items at a time with the same unpacks. */
    #include <stdint.h>
    #include <string.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define B2S_HAVE_SSE2 1
    static inline __m128i b2s_transpose_lanes(__m128i x) {
        const __m128i m1 = _mm_set1_epi64x(0x00AA00AA00AA00AALL);
        const __m128i m2 = _mm_set1_epi64x(0x0000CCCC0000CCCCLL);
        const __m128i m3 = _mm_set1_epi64x(0x00000000F0F0F0F0LL);
        __m128i t;
        t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 7)), m1);
        x = _mm_xor_si128(_mm_xor_si128(x, t), _mm_slli_epi64(t, 7));
        t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 14)), m2);
        x = _mm_xor_si128(_mm_xor_si128(x, t), _mm_slli_epi64(t, 14));
        t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 28)), m3);
        x = _mm_xor_si128(_mm_xor_si128(x, t), _mm_slli_epi64(t, 28));
        return x;
    }
    #define B2S_LOAD(p) _mm_loadu_si128((const __m128i*)(p))
    #define B2S_STORE(p, v) _mm_storeu_si128((__m128i*)(p), (v))
    /* Interleave 16 bytes of 8 planes (stride apart) into 16 items of 8 bytes, in order. */
    static inline void b2s_gather8(const uint8_t* p, ptrdiff_t stride, __m128i out[8]) {
        __m128i v0 = B2S_LOAD(p), v1 = B2S_LOAD(p + stride);
        __m128i v2 = B2S_LOAD(p + 2 * stride), v3 = B2S_LOAD(p + 3 * stride);
        __m128i v4 = B2S_LOAD(p + 4 * stride), v5 = B2S_LOAD(p + 5 * stride);
        __m128i v6 = B2S_LOAD(p + 6 * stride), v7 = B2S_LOAD(p + 7 * stride);
        __m128i a0 = _mm_unpacklo_epi8(v0, v1), a1 = _mm_unpackhi_epi8(v0, v1);
        __m128i a2 = _mm_unpacklo_epi8(v2, v3), a3 = _mm_unpackhi_epi8(v2, v3);
        __m128i a4 = _mm_unpacklo_epi8(v4, v5), a5 = _mm_unpackhi_epi8(v4, v5);
        __m128i a6 = _mm_unpacklo_epi8(v6, v7), a7 = _mm_unpackhi_epi8(v6, v7);
        __m128i b0 = _mm_unpacklo_epi16(a0, a2), b1 = _mm_unpackhi_epi16(a0, a2);
        __m128i b2 = _mm_unpacklo_epi16(a1, a3), b3 = _mm_unpackhi_epi16(a1, a3);
        __m128i b4 = _mm_unpacklo_epi16(a4, a6), b5 = _mm_unpackhi_epi16(a4, a6);
        __m128i b6 = _mm_unpacklo_epi16(a5, a7), b7 = _mm_unpackhi_epi16(a5, a7);
        out[0] = _mm_unpacklo_epi32(b0, b4); out[1] = _mm_unpackhi_epi32(b0, b4);
        out[2] = _mm_unpacklo_epi32(b1, b5); out[3] = _mm_unpackhi_epi32(b1, b5);
        out[4] = _mm_unpacklo_epi32(b2, b6); out[5] = _mm_unpackhi_epi32(b2, b6);
        out[6] = _mm_unpacklo_epi32(b3, b7); out[7] = _mm_unpackhi_epi32(b3, b7);
    }
    /* rows: the 8 bit rows of one byte index, nrow bytes apart; out: 128 item bytes. */
    static inline void b2s_bitrows_to_bytes16(const uint8_t* rows, ptrdiff_t nrow, uint8_t* out) {
        __m128i w[8];
        b2s_gather8(rows, nrow, w);
        for (int k = 0; k < 8; k++) B2S_STORE(out + 16 * k, b2s_transpose_lanes(w[k]));
    }
    /* The inverse: in, 16 groups of 8 item bytes (128 bytes); out, their 8 bit rows, 16
       bytes each, nrow bytes apart. Transpose each lane's 8x8 bits, then the 16x8 bytes:
       pair the two lanes' bytes, and transpose the 8x8 matrix of those 16-bit pairs. */
    static inline void b2s_bytes16_to_bitrows(const uint8_t* in, ptrdiff_t nrow, uint8_t* rows) {
        __m128i a[8], b[8], c[8];
        for (int i = 0; i < 8; i++) {
            __m128i w = b2s_transpose_lanes(B2S_LOAD(in + 16 * i));
            a[i] = _mm_unpacklo_epi8(w, _mm_srli_si128(w, 8));
        }
        for (int i = 0; i < 4; i++) {
            b[2 * i] = _mm_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
            b[2 * i + 1] = _mm_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
        }
        c[0] = _mm_unpacklo_epi32(b[0], b[2]); c[1] = _mm_unpackhi_epi32(b[0], b[2]);
        c[2] = _mm_unpacklo_epi32(b[1], b[3]); c[3] = _mm_unpackhi_epi32(b[1], b[3]);
        c[4] = _mm_unpacklo_epi32(b[4], b[6]); c[5] = _mm_unpackhi_epi32(b[4], b[6]);
        c[6] = _mm_unpacklo_epi32(b[5], b[7]); c[7] = _mm_unpackhi_epi32(b[5], b[7]);
        for (int k = 0; k < 4; k++) {
            B2S_STORE(rows + (2 * k) * nrow, _mm_unpacklo_epi64(c[k], c[k + 4]));
            B2S_STORE(rows + (2 * k + 1) * nrow, _mm_unpackhi_epi64(c[k], c[k + 4]));
        }
    }
    /* Unshuffle the first items of n (es = 2, 4 or 8) 16 at a time; returns how many. */
    static inline ptrdiff_t b2s_unshuffle_sse2(const uint8_t* src, uint8_t* dst, ptrdiff_t n,
                                               int es) {
        ptrdiff_t i = 0;
        if (es == 2) {
            for (; i + 16 <= n; i += 16) {
                __m128i p0 = B2S_LOAD(src + i), p1 = B2S_LOAD(src + n + i);
                B2S_STORE(dst + 2 * i, _mm_unpacklo_epi8(p0, p1));
                B2S_STORE(dst + 2 * i + 16, _mm_unpackhi_epi8(p0, p1));
            }
        } else if (es == 4) {
            for (; i + 16 <= n; i += 16) {
                __m128i p0 = B2S_LOAD(src + i), p1 = B2S_LOAD(src + n + i);
                __m128i p2 = B2S_LOAD(src + 2 * n + i), p3 = B2S_LOAD(src + 3 * n + i);
                __m128i a0 = _mm_unpacklo_epi8(p0, p1), a1 = _mm_unpackhi_epi8(p0, p1);
                __m128i a2 = _mm_unpacklo_epi8(p2, p3), a3 = _mm_unpackhi_epi8(p2, p3);
                B2S_STORE(dst + 4 * i, _mm_unpacklo_epi16(a0, a2));
                B2S_STORE(dst + 4 * i + 16, _mm_unpackhi_epi16(a0, a2));
                B2S_STORE(dst + 4 * i + 32, _mm_unpacklo_epi16(a1, a3));
                B2S_STORE(dst + 4 * i + 48, _mm_unpackhi_epi16(a1, a3));
            }
        } else if (es == 8) {
            __m128i w[8];
            for (; i + 16 <= n; i += 16) {
                b2s_gather8(src + i, n, w);
                for (int k = 0; k < 8; k++) B2S_STORE(dst + 8 * i + 16 * k, w[k]);
            }
        }
        return i;
    }
    #else
    #define B2S_HAVE_SSE2 0
    static inline void b2s_bitrows_to_bytes16(const uint8_t* rows, ptrdiff_t nrow, uint8_t* out) {}
    static inline void b2s_bytes16_to_bitrows(const uint8_t* in, ptrdiff_t nrow, uint8_t* rows) {}
    static inline ptrdiff_t b2s_unshuffle_sse2(const uint8_t* src, uint8_t* dst, ptrdiff_t n,
                                               int es) { return 0; }
    #endif
    """
    const bint B2S_HAVE_SSE2
    void b2s_bitrows_to_bytes16(const uint8_t* rows, Py_ssize_t nrow, uint8_t* out) noexcept nogil
    void b2s_bytes16_to_bitrows(const uint8_t* inp, Py_ssize_t nrow, uint8_t* rows) noexcept nogil
    Py_ssize_t b2s_unshuffle_sse2(const uint8_t* src, uint8_t* dst, Py_ssize_t n, int es) noexcept nogil


# The widest vectors the kernels use: 2 AVX2 (b2store.chunk._shuffle_avx2, where the CPU has
# it), 1 SSE2, 0 the scalar loops alone. Only tests lower it, to check each path against the others.
cdef int _best = 2 if c_have_avx2() else (1 if B2S_HAVE_SSE2 else 0)
cdef int _level = _best



# --- byte shuffle -------------------------------------------------------------------------
# Element sizes 2, 4, 8 and 16 get their own copy of the loop with a constant inner trip
# count, which the C compiler unrolls and vectorises; every other size takes the generic loop.

cdef inline void _shuffle_es(const uint8_t* src, uint8_t* dst, Py_ssize_t n,
                             const Py_ssize_t es, Py_ssize_t start) noexcept nogil:
    cdef Py_ssize_t i, j
    for j in range(es):
        for i in range(start, n):
            dst[j * n + i] = src[i * es + j]


cdef inline void _unshuffle_es(const uint8_t* src, uint8_t* dst, Py_ssize_t n,
                               const Py_ssize_t es, Py_ssize_t start) noexcept nogil:
    cdef Py_ssize_t i, j
    for i in range(start, n):
        for j in range(es):
            dst[i * es + j] = src[j * n + i]


cdef void c_shuffle(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                    Py_ssize_t es) noexcept nogil:
    """Byte-transpose ``size // es`` elements; copy the ``size % es`` trailing bytes."""
    cdef Py_ssize_t n = size // es, done = 0
    if es == 1:  # one byte per item: the transpose is a copy (the general loop took 2 ns/B)
        memcpy(dst, src, size)
        return
    if _level >= 2 and (es == 2 or es == 4 or es == 8):
        done = c_shuffle_avx2(src, dst, n, es)
    if es == 2:
        _shuffle_es(src, dst, n, 2, done)
    elif es == 4:
        _shuffle_es(src, dst, n, 4, done)
    elif es == 8:
        _shuffle_es(src, dst, n, 8, done)
    elif es == 16:
        _shuffle_es(src, dst, n, 16, 0)
    else:
        _shuffle_es(src, dst, n, es, 0)
    memcpy(dst + n * es, src + n * es, size - n * es)


cdef void c_unshuffle(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                      Py_ssize_t es) noexcept nogil:
    cdef Py_ssize_t n = size // es, done = 0
    if es == 1:
        memcpy(dst, src, size)
        return
    if _level >= 2 and (es == 2 or es == 4 or es == 8 or es == 16):
        done = c_unshuffle_avx2(src, dst, n, es)
    elif _level >= 1 and (es == 2 or es == 4 or es == 8):
        done = b2s_unshuffle_sse2(src, dst, n, <int>es)
    if es == 2:
        _unshuffle_es(src, dst, n, 2, done)
    elif es == 4:
        _unshuffle_es(src, dst, n, 4, done)
    elif es == 8:
        _unshuffle_es(src, dst, n, 8, done)
    elif es == 16:
        _unshuffle_es(src, dst, n, 16, done)
    else:
        _unshuffle_es(src, dst, n, es, 0)
    memcpy(dst + n * es, src + n * es, size - n * es)


# --- bit shuffle --------------------------------------------------------------------------
# The bitshuffle layout: with N elements of es bytes (N a multiple of 8) the output is 8*es
# rows of N/8 bytes; row 8*b + k holds bit k of byte b of every element, element e at bit
# e % 8 of byte e // 8. It is a byte shuffle followed by an 8x8 bit transpose of every 8
# consecutive bytes of a byte row, scattered to the 8 bit rows.

cdef inline uint64_t _transpose8x8(uint64_t x) noexcept nogil:
    # Transpose the 8x8 bit matrix whose row k is byte k of x (little-endian); an involution.
    cdef uint64_t t
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAULL
    x = x ^ t ^ (t << 7)
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCULL
    x = x ^ t ^ (t << 14)
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ULL
    x = x ^ t ^ (t << 28)
    return x


cdef void c_bitshuffle_tmp(const uint8_t* src, uint8_t* dst, Py_ssize_t n, Py_ssize_t es,
                           uint8_t* tmp) noexcept nogil:
    """Bit-transpose ``n`` elements (``n % 8 == 0``) through ``tmp`` (``n * es`` bytes)."""
    cdef Py_ssize_t nrow = n // 8, b, g, k, g0
    cdef uint64_t x
    c_shuffle(src, tmp, n * es, es)
    for b in range(es):
        g0 = 0
        if _level >= 2:
            g0 = c_bytes_to_bitrows_avx2(tmp + b * n, nrow, dst + 8 * b * nrow, nrow)
        if _level >= 1:
            while g0 + 16 <= nrow:
                b2s_bytes16_to_bitrows(tmp + b * n + 8 * g0, nrow, dst + 8 * b * nrow + g0)
                g0 += 16
        for g in range(g0, nrow):
            x = _transpose8x8(load64(tmp + b * n + 8 * g))
            for k in range(8):
                dst[(8 * b + k) * nrow + g] = <uint8_t>(x >> (8 * k))


cdef int c_bitshuffle(const uint8_t* src, uint8_t* dst, Py_ssize_t n,
                      Py_ssize_t es) noexcept nogil:
    """Bit-transpose ``n`` elements (``n % 8 == 0``); returns -1 if out of memory."""
    cdef uint8_t* tmp = <uint8_t*>malloc(n * es if n * es > 0 else 1)
    if tmp == NULL:
        return -1
    c_bitshuffle_tmp(src, dst, n, es, tmp)
    free(tmp)
    return 0


cdef void c_bitunshuffle_tmp(const uint8_t* src, uint8_t* dst, Py_ssize_t n, Py_ssize_t es,
                             uint8_t* tmp) noexcept nogil:
    """Inverse of :func:`c_bitshuffle_tmp` (``tmp``: ``n * es`` bytes of scratch)."""
    cdef Py_ssize_t nrow = n // 8, b, g, k, g0
    cdef uint64_t x
    cdef const uint8_t* rows
    for b in range(es):
        rows = src + 8 * b * nrow
        g0 = 0
        if _level >= 2:
            g0 = c_bitrows_to_bytes_avx2(rows, nrow, tmp + b * n, nrow)
        if _level >= 1:
            while g0 + 16 <= nrow:
                b2s_bitrows_to_bytes16(rows + g0, nrow, tmp + b * n + 8 * g0)
                g0 += 16
        for g in range(g0, nrow):
            x = 0
            for k in range(8):
                x |= (<uint64_t>rows[k * nrow + g]) << (8 * k)
            store64(tmp + b * n + 8 * g, _transpose8x8(x))
    c_unshuffle(tmp, dst, n * es, es)


cdef int c_bitunshuffle(const uint8_t* src, uint8_t* dst, Py_ssize_t n,
                        Py_ssize_t es) noexcept nogil:
    cdef uint8_t* tmp = <uint8_t*>malloc(n * es if n * es > 0 else 1)
    if tmp == NULL:
        return -1
    c_bitunshuffle_tmp(src, dst, n, es, tmp)
    free(tmp)
    return 0


# --- truncation (lossy, applied on compression only) -------------------------------------

cdef void c_zero_low_bits(uint8_t* buf, Py_ssize_t size, Py_ssize_t width,
                          int zeroed) noexcept nogil:
    """Clear the ``zeroed`` low bits of every little-endian ``width``-byte word."""
    cdef Py_ssize_t i, n = size // width
    cdef uint64_t mask = ~((<uint64_t>1 << zeroed) - 1) if zeroed < 64 else 0
    cdef uint64_t v
    if width == 1:
        for i in range(n):
            buf[i] = <uint8_t>(buf[i] & mask)
    elif width == 2:
        for i in range(n):
            (<uint16_t*>buf)[i] = <uint16_t>((<uint16_t*>buf)[i] & mask)
    elif width == 4:
        for i in range(n):
            (<uint32_t*>buf)[i] = <uint32_t>((<uint32_t*>buf)[i] & mask)
    else:
        for i in range(n):
            (<uint64_t*>buf)[i] = (<uint64_t*>buf)[i] & mask


# --- Python entry points ------------------------------------------------------------------

cdef int c_simd_level() noexcept nogil:
    return _level


def simd_level():
    """The vectors the kernels use now: 2 AVX2, 1 SSE2, 0 none (scalar loops)."""
    return _level


def set_simd_level(int level):
    """Use vectors up to ``level`` (at most what this CPU and build have); returns the level
    in use before. For tests comparing the paths; results never depend on it."""
    global _level
    cdef int before = _level
    _level = max(0, min(level, _best))
    return before


cdef int check_pair(Py_ssize_t nsrc, Py_ssize_t ndst, Py_ssize_t es) except -1:
    """The checks every two-buffer kernel wrapper makes (b2store.chunk._delta's too)."""
    if es < 1:
        raise ValueError(f"element size must be >= 1, got {es}")
    if ndst != nsrc:
        raise ValueError(f"destination has {ndst} bytes, source {nsrc}")
    return 0


def shuffle(const uint8_t[::1] src, uint8_t[::1] dst, Py_ssize_t es):
    """Byte-shuffle ``src`` into ``dst`` with element size ``es`` (trailing bytes copied)."""
    check_pair(src.shape[0], dst.shape[0], es)
    if src.shape[0]:
        with nogil:
            c_shuffle(&src[0], &dst[0], src.shape[0], es)


def unshuffle(const uint8_t[::1] src, uint8_t[::1] dst, Py_ssize_t es):
    """Inverse of :func:`shuffle`."""
    check_pair(src.shape[0], dst.shape[0], es)
    if src.shape[0]:
        with nogil:
            c_unshuffle(&src[0], &dst[0], src.shape[0], es)


cdef int _bit_transpose(const uint8_t[::1] src, uint8_t[::1] dst, Py_ssize_t es,
                        bint forward) except -1:
    check_pair(src.shape[0], dst.shape[0], es)
    cdef Py_ssize_t n = src.shape[0] // es
    cdef int rc = 0
    n -= n % 8
    if n:
        with nogil:
            if forward:
                rc = c_bitshuffle(&src[0], &dst[0], n, es)
            else:
                rc = c_bitunshuffle(&src[0], &dst[0], n, es)
        if rc:
            raise MemoryError()
    if n * es < src.shape[0]:
        dst[n * es:] = src[n * es:]
    return 0


def bitshuffle(const uint8_t[::1] src, uint8_t[::1] dst, Py_ssize_t es):
    """Bit-shuffle the first ``8 * (n // 8)`` elements; copy the remaining bytes."""
    _bit_transpose(src, dst, es, True)


def bitunshuffle(const uint8_t[::1] src, uint8_t[::1] dst, Py_ssize_t es):
    """Inverse of :func:`bitshuffle`."""
    _bit_transpose(src, dst, es, False)


def zero_low_bits(uint8_t[::1] buf, Py_ssize_t width, int zeroed):
    """Clear the ``zeroed`` low bits of every little-endian ``width``-byte word, in place."""
    if width not in (1, 2, 4, 8):
        raise ValueError(f"word width must be 1, 2, 4 or 8, got {width}")
    if not 0 <= zeroed <= 8 * width:
        raise ValueError(f"cannot zero {zeroed} bits of a {width}-byte word")
    if buf.shape[0] % width:
        raise ValueError(f"buffer of {buf.shape[0]} bytes is not whole {width}-byte words")
    if buf.shape[0]:
        with nogil:
            c_zero_low_bits(&buf[0], buf.shape[0], width, zeroed)


cdef bint c_is_run(const uint8_t* buf, Py_ssize_t n) noexcept nogil:
    """Whether every byte of ``buf[:n]`` (n > 0) equals its first; stops at the first that
    differs."""
    cdef Py_ssize_t i, n32 = n // 32
    cdef uint8_t first = buf[0]
    cdef uint64_t p = 0x0101010101010101ULL * first, diff
    # 32 bytes a step: the encoder asks this of every stream, and the streams of a shuffled
    # chunk's high bytes are often whole runs.
    for i in range(n32):
        diff = ((load64(buf + 32 * i) ^ p) | (load64(buf + 32 * i + 8) ^ p)
                | (load64(buf + 32 * i + 16) ^ p) | (load64(buf + 32 * i + 24) ^ p))
        if diff:
            return False
    for i in range(32 * n32, n):
        if buf[i] != first:
            return False
    return True


def is_run(const uint8_t[::1] buf):
    """Whether every byte of ``buf`` (non-empty) equals its first: c-blosc2 stores such
    streams as runs. Returns at the first differing byte."""
    cdef bint same
    if buf.shape[0] == 0:
        return False
    with nogil:
        same = c_is_run(&buf[0], buf.shape[0])
    return same
