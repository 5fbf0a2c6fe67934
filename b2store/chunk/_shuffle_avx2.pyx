# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""AVX2 bodies of the byte and bit shuffles, compiled for AVX2 and used only where the CPU has it.

Each kernel does the leading whole groups of 32 items (or of 32 bit-row bytes) and returns how
many it did; the caller (:mod:`b2store._shuffle`) does the rest with its SSE2 or scalar
loops, which stay the reference these are tested against. The functions are compiled with
``__attribute__((target("avx2")))`` so the module builds for the x86-64 baseline; whether
they may run is asked once with ``__builtin_cpu_supports``. Other compilers and CPUs get
stubs that do nothing (and ``c_have_avx2`` is false).

All of them work in 128-bit lanes, as AVX2's unpacks do: the low lane of every register
carries the first 16 items of the group and the high lane the next 16, so each lane runs the
SSE2 algorithm of ``_shuffle.pyx`` and only the loads and stores cross lanes.
"""

from libc.stdint cimport uint8_t


cdef extern from *:
    """
    #include <stdint.h>
    #include <stddef.h>
    #if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    #include <immintrin.h>
    #define B2V_TARGET __attribute__((target("avx2")))
    #define B2V_LD(p) _mm256_loadu_si256((const __m256i*)(p))
    #define B2V_ST(p, v) _mm256_storeu_si256((__m256i*)(p), (v))
    /* Two 16-byte loads as one register: p in the low lane, q in the high one. */
    B2V_TARGET static inline __m256i b2v_ld2(const uint8_t* p, const uint8_t* q) {
        __m256i lo = _mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)p));
        return _mm256_inserti128_si256(lo, _mm_loadu_si128((const __m128i*)q), 1);
    }
    #define B2V_LO(a, b) _mm256_permute2x128_si256((a), (b), 0x20)
    #define B2V_HI(a, b) _mm256_permute2x128_si256((a), (b), 0x31)

    static int b2v_have_avx2(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") != 0;
    }

    /* Each 64-bit lane as an 8x8 bit matrix, transposed (row k = byte k). */
    B2V_TARGET static inline __m256i b2v_transpose_lanes(__m256i x) {
        const __m256i m1 = _mm256_set1_epi64x(0x00AA00AA00AA00AALL);
        const __m256i m2 = _mm256_set1_epi64x(0x0000CCCC0000CCCCLL);
        const __m256i m3 = _mm256_set1_epi64x(0x00000000F0F0F0F0LL);
        __m256i t;
        t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 7)), m1);
        x = _mm256_xor_si256(_mm256_xor_si256(x, t), _mm256_slli_epi64(t, 7));
        t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 14)), m2);
        x = _mm256_xor_si256(_mm256_xor_si256(x, t), _mm256_slli_epi64(t, 14));
        t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 28)), m3);
        x = _mm256_xor_si256(_mm256_xor_si256(x, t), _mm256_slli_epi64(t, 28));
        return x;
    }

    /* 32 bytes of each of 8 planes (stride apart) interleaved: out[k] holds items 2k, 2k+1
       (8 bytes each) in its low lane and items 16+2k, 17+2k in its high lane. */
    B2V_TARGET static inline void b2v_gather8(const uint8_t* p, ptrdiff_t stride,
                                              __m256i out[8]) {
        __m256i v0 = B2V_LD(p), v1 = B2V_LD(p + stride);
        __m256i v2 = B2V_LD(p + 2 * stride), v3 = B2V_LD(p + 3 * stride);
        __m256i v4 = B2V_LD(p + 4 * stride), v5 = B2V_LD(p + 5 * stride);
        __m256i v6 = B2V_LD(p + 6 * stride), v7 = B2V_LD(p + 7 * stride);
        __m256i a0 = _mm256_unpacklo_epi8(v0, v1), a1 = _mm256_unpackhi_epi8(v0, v1);
        __m256i a2 = _mm256_unpacklo_epi8(v2, v3), a3 = _mm256_unpackhi_epi8(v2, v3);
        __m256i a4 = _mm256_unpacklo_epi8(v4, v5), a5 = _mm256_unpackhi_epi8(v4, v5);
        __m256i a6 = _mm256_unpacklo_epi8(v6, v7), a7 = _mm256_unpackhi_epi8(v6, v7);
        __m256i b0 = _mm256_unpacklo_epi16(a0, a2), b1 = _mm256_unpackhi_epi16(a0, a2);
        __m256i b2 = _mm256_unpacklo_epi16(a1, a3), b3 = _mm256_unpackhi_epi16(a1, a3);
        __m256i b4 = _mm256_unpacklo_epi16(a4, a6), b5 = _mm256_unpackhi_epi16(a4, a6);
        __m256i b6 = _mm256_unpacklo_epi16(a5, a7), b7 = _mm256_unpackhi_epi16(a5, a7);
        out[0] = _mm256_unpacklo_epi32(b0, b4); out[1] = _mm256_unpackhi_epi32(b0, b4);
        out[2] = _mm256_unpacklo_epi32(b1, b5); out[3] = _mm256_unpackhi_epi32(b1, b5);
        out[4] = _mm256_unpacklo_epi32(b2, b6); out[5] = _mm256_unpackhi_epi32(b2, b6);
        out[6] = _mm256_unpacklo_epi32(b3, b7); out[7] = _mm256_unpackhi_epi32(b3, b7);
    }

    /* The inverse for 16-bit units, per lane: x[r] holds 8 words; c[d] gets word d of
       x[0..7] (an 8x8 transpose of 16-bit words in each lane). */
    B2V_TARGET static inline void b2v_transpose16(const __m256i x[8], __m256i c[8]) {
        __m256i a0 = _mm256_unpacklo_epi16(x[0], x[1]), a1 = _mm256_unpackhi_epi16(x[0], x[1]);
        __m256i a2 = _mm256_unpacklo_epi16(x[2], x[3]), a3 = _mm256_unpackhi_epi16(x[2], x[3]);
        __m256i a4 = _mm256_unpacklo_epi16(x[4], x[5]), a5 = _mm256_unpackhi_epi16(x[4], x[5]);
        __m256i a6 = _mm256_unpacklo_epi16(x[6], x[7]), a7 = _mm256_unpackhi_epi16(x[6], x[7]);
        __m256i b0 = _mm256_unpacklo_epi32(a0, a2), b1 = _mm256_unpackhi_epi32(a0, a2);
        __m256i b2 = _mm256_unpacklo_epi32(a1, a3), b3 = _mm256_unpackhi_epi32(a1, a3);
        __m256i b4 = _mm256_unpacklo_epi32(a4, a6), b5 = _mm256_unpackhi_epi32(a4, a6);
        __m256i b6 = _mm256_unpacklo_epi32(a5, a7), b7 = _mm256_unpackhi_epi32(a5, a7);
        c[0] = _mm256_unpacklo_epi64(b0, b4); c[1] = _mm256_unpackhi_epi64(b0, b4);
        c[2] = _mm256_unpacklo_epi64(b1, b5); c[3] = _mm256_unpackhi_epi64(b1, b5);
        c[4] = _mm256_unpacklo_epi64(b2, b6); c[5] = _mm256_unpackhi_epi64(b2, b6);
        c[6] = _mm256_unpacklo_epi64(b3, b7); c[7] = _mm256_unpackhi_epi64(b3, b7);
    }

    /* Unshuffle the first items of n (es = 2, 4, 8 or 16), 32 at a time; returns how many. */
    B2V_TARGET static ptrdiff_t b2v_unshuffle(const uint8_t* src, uint8_t* dst, ptrdiff_t n,
                                              int es) {
        ptrdiff_t i = 0;
        if (es == 2) {
            for (; i + 32 <= n; i += 32) {
                __m256i p0 = B2V_LD(src + i), p1 = B2V_LD(src + n + i);
                __m256i lo = _mm256_unpacklo_epi8(p0, p1), hi = _mm256_unpackhi_epi8(p0, p1);
                B2V_ST(dst + 2 * i, B2V_LO(lo, hi));
                B2V_ST(dst + 2 * i + 32, B2V_HI(lo, hi));
            }
        } else if (es == 4) {
            for (; i + 32 <= n; i += 32) {
                __m256i p0 = B2V_LD(src + i), p1 = B2V_LD(src + n + i);
                __m256i p2 = B2V_LD(src + 2 * n + i), p3 = B2V_LD(src + 3 * n + i);
                __m256i a0 = _mm256_unpacklo_epi8(p0, p1), a1 = _mm256_unpackhi_epi8(p0, p1);
                __m256i a2 = _mm256_unpacklo_epi8(p2, p3), a3 = _mm256_unpackhi_epi8(p2, p3);
                __m256i r0 = _mm256_unpacklo_epi16(a0, a2), r1 = _mm256_unpackhi_epi16(a0, a2);
                __m256i r2 = _mm256_unpacklo_epi16(a1, a3), r3 = _mm256_unpackhi_epi16(a1, a3);
                B2V_ST(dst + 4 * i, B2V_LO(r0, r1));
                B2V_ST(dst + 4 * i + 32, B2V_LO(r2, r3));
                B2V_ST(dst + 4 * i + 64, B2V_HI(r0, r1));
                B2V_ST(dst + 4 * i + 96, B2V_HI(r2, r3));
            }
        } else if (es == 8) {
            __m256i w[8];
            for (; i + 32 <= n; i += 32) {
                b2v_gather8(src + i, n, w);
                for (int m = 0; m < 4; m++) {
                    B2V_ST(dst + 8 * i + 32 * m, B2V_LO(w[2 * m], w[2 * m + 1]));
                    B2V_ST(dst + 8 * i + 128 + 32 * m, B2V_HI(w[2 * m], w[2 * m + 1]));
                }
            }
        } else if (es == 16) {
            /* Bytes 0-7 of each item from planes 0-7, bytes 8-15 from planes 8-15. */
            __m256i a[8], b[8];
            for (; i + 32 <= n; i += 32) {
                b2v_gather8(src + i, n, a);
                b2v_gather8(src + 8 * n + i, n, b);
                for (int k = 0; k < 8; k++) {
                    __m256i u = _mm256_unpacklo_epi64(a[k], b[k]);
                    __m256i v = _mm256_unpackhi_epi64(a[k], b[k]);
                    B2V_ST(dst + 16 * (i + 2 * k), B2V_LO(u, v));
                    B2V_ST(dst + 16 * (i + 16 + 2 * k), B2V_HI(u, v));
                }
            }
        }
        return i;
    }

    /* Shuffle the first items of n (es = 2, 4 or 8), 32 at a time; returns how many. */
    B2V_TARGET static ptrdiff_t b2v_shuffle(const uint8_t* src, uint8_t* dst, ptrdiff_t n,
                                            int es) {
        ptrdiff_t i = 0;
        if (es == 2) {
            /* Per lane: the 8 low bytes, then the 8 high ones; then the quadwords in order. */
            const __m256i m = _mm256_setr_epi8(
                0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
            for (; i + 32 <= n; i += 32) {
                __m256i x0 = _mm256_shuffle_epi8(B2V_LD(src + 2 * i), m);
                __m256i x1 = _mm256_shuffle_epi8(B2V_LD(src + 2 * i + 32), m);
                x0 = _mm256_permute4x64_epi64(x0, 0xD8);  /* quadwords 0, 2, 1, 3 */
                x1 = _mm256_permute4x64_epi64(x1, 0xD8);
                B2V_ST(dst + i, B2V_LO(x0, x1));
                B2V_ST(dst + n + i, B2V_HI(x0, x1));
            }
        } else if (es == 4) {
            /* Per lane: the 4 items' byte 0, byte 1, ...; then dwords so that quadword d
               holds byte d of 8 items; then a 4x4 transpose of quadwords. */
            const __m256i m = _mm256_setr_epi8(
                0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
            const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
            for (; i + 32 <= n; i += 32) {
                __m256i x[4];
                for (int k = 0; k < 4; k++)
                    x[k] = _mm256_permutevar8x32_epi32(
                        _mm256_shuffle_epi8(B2V_LD(src + 4 * i + 32 * k), m), order);
                __m256i t0 = _mm256_unpacklo_epi64(x[0], x[1]);
                __m256i t1 = _mm256_unpackhi_epi64(x[0], x[1]);
                __m256i t2 = _mm256_unpacklo_epi64(x[2], x[3]);
                __m256i t3 = _mm256_unpackhi_epi64(x[2], x[3]);
                B2V_ST(dst + i, B2V_LO(t0, t2));
                B2V_ST(dst + n + i, B2V_LO(t1, t3));
                B2V_ST(dst + 2 * n + i, B2V_HI(t0, t2));
                B2V_ST(dst + 3 * n + i, B2V_HI(t1, t3));
            }
        } else if (es == 8) {
            /* Register r: items 2r, 2r+1 (low lane) and 16+2r, 17+2r (high lane), bytes
               paired by index; then an 8x8 transpose of those 16-bit pairs per lane. */
            const __m256i m = _mm256_setr_epi8(
                0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,
                0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
            __m256i x[8], c[8];
            for (; i + 32 <= n; i += 32) {
                const uint8_t* p = src + 8 * i;
                for (int r = 0; r < 8; r++)
                    x[r] = _mm256_shuffle_epi8(b2v_ld2(p + 16 * r, p + 128 + 16 * r), m);
                b2v_transpose16(x, c);
                for (int d = 0; d < 8; d++) B2V_ST(dst + d * n + i, c[d]);
            }
        }
        return i;
    }

    /* Bit rows to item bytes: rows holds the 8 bit rows of one byte index (nrow bytes
       apart); groups of 8 items, 32 at a time, into out (8 bytes per group). */
    B2V_TARGET static ptrdiff_t b2v_bitrows_to_bytes(const uint8_t* rows, ptrdiff_t nrow,
                                                     uint8_t* out, ptrdiff_t ngroups) {
        ptrdiff_t g = 0;
        __m256i w[8];
        for (; g + 32 <= ngroups; g += 32) {
            b2v_gather8(rows + g, nrow, w);
            for (int k = 0; k < 8; k++) w[k] = b2v_transpose_lanes(w[k]);
            for (int m = 0; m < 4; m++) {
                B2V_ST(out + 8 * g + 32 * m, B2V_LO(w[2 * m], w[2 * m + 1]));
                B2V_ST(out + 8 * g + 128 + 32 * m, B2V_HI(w[2 * m], w[2 * m + 1]));
            }
        }
        return g;
    }

    /* The inverse: groups of 8 item bytes (in, 8 bytes per group), 32 at a time, to their 8
       bit rows (nrow bytes apart). */
    B2V_TARGET static ptrdiff_t b2v_bytes_to_bitrows(const uint8_t* in, ptrdiff_t nrow,
                                                     uint8_t* rows, ptrdiff_t ngroups) {
        ptrdiff_t g = 0;
        __m256i a[8], c[8];
        for (; g + 32 <= ngroups; g += 32) {
            const uint8_t* p = in + 8 * g;
            for (int i = 0; i < 8; i++) {
                __m256i w = b2v_transpose_lanes(b2v_ld2(p + 16 * i, p + 128 + 16 * i));
                /* Pair the two groups' bytes of each row: row k's pair is word k. */
                a[i] = _mm256_unpacklo_epi8(w, _mm256_srli_si256(w, 8));
            }
            b2v_transpose16(a, c);
            for (int k = 0; k < 8; k++) B2V_ST(rows + k * nrow + g, c[k]);
        }
        return g;
    }
    #else
    static int b2v_have_avx2(void) { return 0; }
    static ptrdiff_t b2v_unshuffle(const uint8_t* s, uint8_t* d, ptrdiff_t n, int es) {
        return 0;
    }
    static ptrdiff_t b2v_shuffle(const uint8_t* s, uint8_t* d, ptrdiff_t n, int es) {
        return 0;
    }
    static ptrdiff_t b2v_bitrows_to_bytes(const uint8_t* r, ptrdiff_t nrow, uint8_t* o,
                                          ptrdiff_t ngroups) { return 0; }
    static ptrdiff_t b2v_bytes_to_bitrows(const uint8_t* i, ptrdiff_t nrow, uint8_t* r,
                                          ptrdiff_t ngroups) { return 0; }
    #endif
    """
    int b2v_have_avx2() noexcept nogil
    Py_ssize_t b2v_unshuffle(const uint8_t* src, uint8_t* dst, Py_ssize_t n, int es) noexcept nogil
    Py_ssize_t b2v_shuffle(const uint8_t* src, uint8_t* dst, Py_ssize_t n, int es) noexcept nogil
    Py_ssize_t b2v_bitrows_to_bytes(const uint8_t* rows, Py_ssize_t nrow, uint8_t* out,
                                    Py_ssize_t ngroups) noexcept nogil
    Py_ssize_t b2v_bytes_to_bitrows(const uint8_t* inp, Py_ssize_t nrow, uint8_t* rows,
                                    Py_ssize_t ngroups) noexcept nogil


cdef bint c_have_avx2() noexcept nogil:
    """Whether this CPU runs the AVX2 kernels (and this build has them)."""
    return b2v_have_avx2() != 0


cdef Py_ssize_t c_unshuffle_avx2(const uint8_t* src, uint8_t* dst, Py_ssize_t n,
                                 Py_ssize_t es) noexcept nogil:
    """Unshuffle the leading items of ``n`` (es 2, 4, 8 or 16); returns how many."""
    return b2v_unshuffle(src, dst, n, <int>es)


cdef Py_ssize_t c_shuffle_avx2(const uint8_t* src, uint8_t* dst, Py_ssize_t n,
                               Py_ssize_t es) noexcept nogil:
    """Shuffle the leading items of ``n`` (es 2, 4 or 8); returns how many."""
    return b2v_shuffle(src, dst, n, <int>es)


cdef Py_ssize_t c_bitrows_to_bytes_avx2(const uint8_t* rows, Py_ssize_t nrow, uint8_t* out,
                                        Py_ssize_t ngroups) noexcept nogil:
    """Bit-transpose the leading groups of 8 items of one byte index; returns how many."""
    return b2v_bitrows_to_bytes(rows, nrow, out, ngroups)


cdef Py_ssize_t c_bytes_to_bitrows_avx2(const uint8_t* inp, Py_ssize_t nrow, uint8_t* rows,
                                        Py_ssize_t ngroups) noexcept nogil:
    """The inverse of :func:`c_bitrows_to_bytes_avx2`; returns how many groups it did."""
    return b2v_bytes_to_bitrows(inp, nrow, rows, ngroups)
