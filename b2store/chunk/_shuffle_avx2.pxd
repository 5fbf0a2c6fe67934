# The AVX2 kernels of _shuffle_avx2.pyx, for b2store._shuffle to dispatch to; each returns how many
# items (or groups of 8 items) it did, the caller doing the rest. Contracts in _shuffle_avx2.pyx.
from libc.stdint cimport uint8_t

cdef bint c_have_avx2() noexcept nogil
cdef Py_ssize_t c_unshuffle_avx2(const uint8_t* src, uint8_t* dst, Py_ssize_t n,
                                 Py_ssize_t es) noexcept nogil
cdef Py_ssize_t c_shuffle_avx2(const uint8_t* src, uint8_t* dst, Py_ssize_t n,
                               Py_ssize_t es) noexcept nogil
cdef Py_ssize_t c_bitrows_to_bytes_avx2(const uint8_t* rows, Py_ssize_t nrow, uint8_t* out,
                                        Py_ssize_t ngroups) noexcept nogil
cdef Py_ssize_t c_bytes_to_bitrows_avx2(const uint8_t* inp, Py_ssize_t nrow, uint8_t* rows,
                                        Py_ssize_t ngroups) noexcept nogil
