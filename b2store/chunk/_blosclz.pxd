# The nogil BloscLZ codec of _blosclz.pyx, for the block loop (_decode_blocks,
# _encode_blocks).
from libc.stdint cimport uint8_t

cdef Py_ssize_t c_blosclz_decompress(const uint8_t* ip, Py_ssize_t ilen,
                                     uint8_t* op, Py_ssize_t olen) noexcept nogil
cdef Py_ssize_t c_blosclz_compress(int clevel, const uint8_t* ibase, Py_ssize_t length,
                                   uint8_t* output, Py_ssize_t maxout) noexcept nogil
