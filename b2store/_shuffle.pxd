# The nogil filter kernels of _shuffle.pyx, for other extension modules (chunk/_decode_blocks,
# chunk/_encode_blocks, chunk/_delta) to call without the GIL; the definitions and their
# contracts are in _shuffle.pyx.
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcpy

cdef void c_shuffle(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                    Py_ssize_t es) noexcept nogil
cdef void c_unshuffle(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                      Py_ssize_t es) noexcept nogil
cdef void c_bitshuffle_tmp(const uint8_t* src, uint8_t* dst, Py_ssize_t n, Py_ssize_t es,
                           uint8_t* tmp) noexcept nogil
cdef void c_bitunshuffle_tmp(const uint8_t* src, uint8_t* dst, Py_ssize_t n, Py_ssize_t es,
                             uint8_t* tmp) noexcept nogil
cdef void c_zero_low_bits(uint8_t* buf, Py_ssize_t size, Py_ssize_t width,
                          int zeroed) noexcept nogil
cdef bint c_is_run(const uint8_t* buf, Py_ssize_t n) noexcept nogil
cdef int c_simd_level() noexcept nogil
cdef int check_pair(Py_ssize_t nsrc, Py_ssize_t ndst, Py_ssize_t es) except -1


# Unaligned little-endian 64-bit loads and stores, shared by both kernel modules.
cdef inline uint64_t load64(const uint8_t* p) noexcept nogil:
    cdef uint64_t x
    memcpy(&x, p, 8)
    return x


cdef inline void store64(uint8_t* p, uint64_t x) noexcept nogil:
    memcpy(p, &x, 8)
