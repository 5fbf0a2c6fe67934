# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Byte loops of the two delta filters: DELTA (XOR against the chunk's first block) and
bytedelta (differences mod 256 in each byte channel).

As in :mod:`b2store._shuffle`, whose vector level they follow: ``nogil`` loops over raw
pointers, the ``def`` wrappers checking only what keeps them in bounds.
"""

from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcpy

from b2store._shuffle cimport c_simd_level, check_pair, load64, store64


cdef extern from *:
    """
    #include <stdint.h>
    #include <stddef.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define B2D_LOAD(p) _mm_loadu_si128((const __m128i*)(p))
    #define B2D_STORE(p, v) _mm_storeu_si128((__m128i*)(p), (v))
    /* Bytedelta's two loops, 16 bytes at a time; each returns how many bytes it did.
       Differences: each byte less the one before it (src[-1] is read: the caller does byte
       0 itself, and src and dst are distinct). Running sums: a vector's own prefix sum in
       four shift-and-add steps, plus the carry of the bytes before it, which grows by the
       vector's total; that broadcast of byte 15 does not wait for the carry, so the chain
       from one vector to the next is a single add. */
    static inline ptrdiff_t b2d_diff_sse2(const uint8_t* src, uint8_t* dst, ptrdiff_t n) {
        ptrdiff_t i = 0;
        for (; i + 16 <= n; i += 16)
            B2D_STORE(dst + i, _mm_sub_epi8(B2D_LOAD(src + i), B2D_LOAD(src + i - 1)));
        return i;
    }
    static inline ptrdiff_t b2d_running_sum_sse2(const uint8_t* src, uint8_t* dst, ptrdiff_t n,
                                                 uint8_t* acc) {
        __m128i carry = _mm_set1_epi8((char)*acc), x, top;
        ptrdiff_t i = 0;
        for (; i + 16 <= n; i += 16) {
            x = B2D_LOAD(src + i);
            x = _mm_add_epi8(x, _mm_slli_si128(x, 1));
            x = _mm_add_epi8(x, _mm_slli_si128(x, 2));
            x = _mm_add_epi8(x, _mm_slli_si128(x, 4));
            x = _mm_add_epi8(x, _mm_slli_si128(x, 8));
            top = _mm_unpackhi_epi8(x, x);
            top = _mm_shuffle_epi32(_mm_unpackhi_epi16(top, top), 0xFF);
            B2D_STORE(dst + i, _mm_add_epi8(x, carry));
            carry = _mm_add_epi8(carry, top);
        }
        if (i)
            *acc = dst[i - 1];
        return i;
    }
    #else
    static inline ptrdiff_t b2d_diff_sse2(const uint8_t* src, uint8_t* dst, ptrdiff_t n) {
        return 0;
    }
    static inline ptrdiff_t b2d_running_sum_sse2(const uint8_t* src, uint8_t* dst, ptrdiff_t n,
                                                 uint8_t* acc) { return 0; }
    #endif
    """
    Py_ssize_t b2d_diff_sse2(const uint8_t* src, uint8_t* dst, Py_ssize_t n) noexcept nogil
    Py_ssize_t b2d_running_sum_sse2(const uint8_t* src, uint8_t* dst, Py_ssize_t n,
                                    uint8_t* acc) noexcept nogil


# --- delta (XOR) --------------------------------------------------------------------------
# Words are w bytes wide (1, 2, 4 or 8); XOR is bytewise, so only the running XOR of the
# reference block depends on w. The ``size % w`` tail bytes are left as they are.

cdef void c_delta_decode_first(uint8_t* buf, Py_ssize_t size, Py_ssize_t w) noexcept nogil:
    cdef Py_ssize_t i, j, n = size // w, words = (n * w) // 8, s
    cdef uint64_t x, carry = 0, top
    # Eight bytes at a time: the running XOR inside a 64-bit word (shift-and-XOR by one
    # word, then two, ... in little-endian order), then the carry, the last word before it
    # repeated. A byte at a time, a 256 kB block took 190 us; this is one pass of loads.
    for i in range(words):
        x = load64(buf + 8 * i)
        s = 8 * w
        while s < 64:
            x ^= x << s
            s *= 2
        x ^= carry
        store64(buf + 8 * i, x)
        top = x >> (64 - 8 * w) if w < 8 else x
        s = 8 * w
        while s < 64:
            top |= top << s
            s *= 2
        carry = top
    for i in range(max(1, 8 * words // w), n):
        for j in range(w):
            buf[i * w + j] ^= buf[(i - 1) * w + j]


cdef void c_delta_encode_first(const uint8_t* src, uint8_t* dst, const uint8_t* ref,
                               Py_ssize_t size, Py_ssize_t w) noexcept nogil:
    """dst = src with each w-byte word XORed with ref's word before it, dst's first word
    ref's first (src and dst distinct)."""
    cdef Py_ssize_t n = size // w
    if n > 0:
        memcpy(dst, ref, w)
        c_xor(src + w, ref, dst + w, (n - 1) * w)


cdef void c_xor(const uint8_t* src, const uint8_t* ref, uint8_t* dst,
                Py_ssize_t size) noexcept nogil:
    cdef Py_ssize_t i, n8 = size // 8
    for i in range(n8):
        store64(dst + 8 * i, load64(src + 8 * i) ^ load64(ref + 8 * i))
    for i in range(8 * n8, size):
        dst[i] = src[i] ^ ref[i]


# --- bytedelta ----------------------------------------------------------------------------
# Each of the es byte channels (L = size // es bytes each, the layout after a shuffle) is
# delta coded mod 256. The flawed SIMD variant (filter id 34) restarts the running value at
# index 16 * (L // 16) of every channel.

cdef void _diff(const uint8_t* src, uint8_t* dst, Py_ssize_t n) noexcept nogil:
    """dst[0] = src[0], dst[i] = src[i] - src[i - 1] (mod 256); src and dst may be one."""
    cdef Py_ssize_t i
    cdef uint8_t prev = 0, cur
    if n <= 0:
        return
    if src != dst and c_simd_level() >= 1:
        dst[0] = src[0]
        i = 1 + b2d_diff_sse2(src + 1, dst + 1, n - 1)
        prev = src[i - 1]
    else:
        i = 0
    for i in range(i, n):
        cur = src[i]
        dst[i] = <uint8_t>(cur - prev)
        prev = cur


cdef void _running_sum(const uint8_t* src, uint8_t* dst, Py_ssize_t n) noexcept nogil:
    """dst[i] = src[0] + ... + src[i] (mod 256); src and dst may be one."""
    cdef Py_ssize_t i = 0
    cdef uint8_t acc = 0
    if c_simd_level() >= 1:
        i = b2d_running_sum_sse2(src, dst, n, &acc)
    for i in range(i, n):
        acc = <uint8_t>(acc + src[i])
        dst[i] = acc


ctypedef void (*ChannelPass)(const uint8_t*, uint8_t*, Py_ssize_t) noexcept nogil


cdef inline void _channels(const uint8_t* src, uint8_t* dst, Py_ssize_t size, Py_ssize_t es,
                           bint buggy, ChannelPass step) noexcept nogil:
    """``step`` over each byte channel; the bytes past the last whole item copied."""
    cdef Py_ssize_t L = size // es, k, restart = (L // 16) * 16 if buggy else 0
    for k in range(es):
        # The running value starts again at ``restart`` (0: only at the channel's start).
        step(src + k * L, dst + k * L, restart)
        step(src + k * L + restart, dst + k * L + restart, L - restart)
    memcpy(dst + L * es, src + L * es, size - L * es)


cdef void c_bytedelta_encode(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                             Py_ssize_t es, bint buggy) noexcept nogil:
    _channels(src, dst, size, es, buggy, _diff)


cdef void c_bytedelta_decode(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                             Py_ssize_t es, bint buggy) noexcept nogil:
    _channels(src, dst, size, es, buggy, _running_sum)


# --- Python entry points ------------------------------------------------------------------

def delta_decode_first(uint8_t[::1] buf, Py_ssize_t width):
    """Undo the delta of a chunk's first block in place: running XOR of ``width``-byte words."""
    if width not in (1, 2, 4, 8):
        raise ValueError(f"delta word width must be 1, 2, 4 or 8, got {width}")
    if buf.shape[0]:
        with nogil:
            c_delta_decode_first(&buf[0], buf.shape[0], width)


def delta_encode_first(const uint8_t[::1] src, uint8_t[::1] dst, const uint8_t[::1] ref,
                       Py_ssize_t width):
    """Delta-code a chunk's first block: word i becomes ``src[i] ^ ref[i-1]``."""
    if width not in (1, 2, 4, 8):
        raise ValueError(f"delta word width must be 1, 2, 4 or 8, got {width}")
    check_pair(src.shape[0], dst.shape[0], 1)
    if ref.shape[0] < src.shape[0]:
        raise ValueError("reference block is shorter than the block")
    cdef Py_ssize_t body = (src.shape[0] // width) * width
    if body:
        with nogil:
            c_delta_encode_first(&src[0], &dst[0], &ref[0], body, width)
    if body < src.shape[0]:
        dst[body:] = src[body:]


def xor_into(const uint8_t[::1] src, const uint8_t[::1] ref, uint8_t[::1] dst):
    """``dst = src ^ ref[:len(src)]`` bytewise (``dst`` may be ``src``)."""
    check_pair(src.shape[0], dst.shape[0], 1)
    if ref.shape[0] < src.shape[0]:
        raise ValueError("reference block is shorter than the block")
    if src.shape[0]:
        with nogil:
            c_xor(&src[0], &ref[0], &dst[0], src.shape[0])


def bytedelta_encode(const uint8_t[::1] src, uint8_t[::1] dst, Py_ssize_t es, bint buggy=False):
    """Delta-code each of the ``es`` byte channels mod 256."""
    check_pair(src.shape[0], dst.shape[0], es)
    if src.shape[0]:
        with nogil:
            c_bytedelta_encode(&src[0], &dst[0], src.shape[0], es, buggy)


def bytedelta_decode(const uint8_t[::1] src, uint8_t[::1] dst, Py_ssize_t es, bint buggy=False):
    """Inverse of :func:`bytedelta_encode`: a running sum mod 256 per channel."""
    check_pair(src.shape[0], dst.shape[0], es)
    if src.shape[0]:
        with nogil:
            c_bytedelta_decode(&src[0], &dst[0], src.shape[0], es, buggy)
