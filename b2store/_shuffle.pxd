# The nogil filter kernels of _shuffle.pyx, for other extension modules (b2store._blocks) to
# call without the GIL; the definitions and their contracts are in _shuffle.pyx.
from libc.stdint cimport uint8_t

cdef void c_shuffle(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                    Py_ssize_t es) noexcept nogil
cdef void c_unshuffle(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                      Py_ssize_t es) noexcept nogil
cdef void c_bitshuffle_tmp(const uint8_t* src, uint8_t* dst, Py_ssize_t n, Py_ssize_t es,
                           uint8_t* tmp) noexcept nogil
cdef void c_bitunshuffle_tmp(const uint8_t* src, uint8_t* dst, Py_ssize_t n, Py_ssize_t es,
                             uint8_t* tmp) noexcept nogil
cdef void c_delta_decode_first(uint8_t* buf, Py_ssize_t size, Py_ssize_t w) noexcept nogil
cdef void c_delta_encode_first(const uint8_t* src, uint8_t* dst, const uint8_t* ref,
                               Py_ssize_t size, Py_ssize_t w) noexcept nogil
cdef void c_xor(const uint8_t* src, const uint8_t* ref, uint8_t* dst,
                Py_ssize_t size) noexcept nogil
cdef void c_bytedelta_encode(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                             Py_ssize_t es, bint buggy) noexcept nogil
cdef void c_bytedelta_decode(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                             Py_ssize_t es, bint buggy) noexcept nogil
cdef void c_zero_low_bits(uint8_t* buf, Py_ssize_t size, Py_ssize_t width,
                          int zeroed) noexcept nogil
cdef bint c_is_run(const uint8_t* buf, Py_ssize_t n) noexcept nogil
