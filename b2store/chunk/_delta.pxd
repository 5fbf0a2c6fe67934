# The nogil kernels of _delta.pyx, for _decode_blocks and _encode_blocks to call without the
# GIL; the definitions and their contracts are in _delta.pyx.
from libc.stdint cimport uint8_t

cdef void c_delta_decode_first(uint8_t* buf, Py_ssize_t size, Py_ssize_t w) noexcept nogil
cdef void c_delta_encode_first(const uint8_t* src, uint8_t* dst, const uint8_t* ref,
                               Py_ssize_t size, Py_ssize_t w) noexcept nogil
cdef void c_xor(const uint8_t* src, const uint8_t* ref, uint8_t* dst,
                Py_ssize_t size) noexcept nogil
cdef void c_bytedelta_encode(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                             Py_ssize_t es, bint buggy) noexcept nogil
cdef void c_bytedelta_decode(const uint8_t* src, uint8_t* dst, Py_ssize_t size,
                             Py_ssize_t es, bint buggy) noexcept nogil
