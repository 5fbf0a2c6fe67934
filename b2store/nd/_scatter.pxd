# The copy of decoded b2nd blocks to their place in an array (_scatter.pyx), for the other
# kernels that place chunks themselves (_read_chunks.pyx). place_blocks checks nothing: the caller
# has checked that every block is in ``buf``, that ``0 <= L[d] < H[d] <= C[d]``, and that the
# region fits the destination at ``dst`` with byte strides ``OS``.
from libc.stdint cimport int64_t, uint8_t

cdef enum:
    MAX_DIMS = 16  # as many dimensions as b2nd allows

cdef void place_blocks(const uint8_t* buf, Py_ssize_t base, const int64_t* blocks, Py_ssize_t n,
                       Py_ssize_t nd, const Py_ssize_t* C, const Py_ssize_t* B,
                       const Py_ssize_t* L, const Py_ssize_t* H, uint8_t* dst,
                       const Py_ssize_t* OS, Py_ssize_t itemsize) noexcept nogil
