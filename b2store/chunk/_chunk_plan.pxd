# A common chunk checked and decoded in one pass (_chunk_plan.pyx), for the kernels that decode
# many chunks in one call (_read_chunks.pyx).
from libc.stdint cimport int32_t, int64_t, uint8_t

from b2store.chunk._decode_blocks cimport Job, Scratch


cdef class Plan:
    cdef const uint8_t[::1] _src
    cdef Job J
    cdef int64_t* table
    cdef int64_t counter
    cdef int32_t failed
    cdef bint needs_scratch
    cdef bint raw
    cdef bint partial
    cdef readonly bint delta
    cdef bint first_done
    cdef const int64_t[::1] _blocks
    cdef const int64_t[::1] _ends
    cdef readonly bint ok
    cdef readonly Py_ssize_t nbytes
    cdef readonly Py_ssize_t nblocks

    cdef int _plan(self, Py_ssize_t buflen) except -2
    cdef int _plan_blosc1(self, Py_ssize_t buflen) except -2
    cdef int _walk_blocks(self, Py_ssize_t hsize, Py_ssize_t nbytes, Py_ssize_t bs,
                          Py_ssize_t cbytes, Py_ssize_t ts, Py_ssize_t nstreams,
                          Py_ssize_t fmt) except -2
    cdef int _first(self, uint8_t* dest, Scratch scratch)
    cdef int decode_to(self, uint8_t* dest, Scratch scratch)
    cdef int decode_into(self, uint8_t* dest, Py_ssize_t dest_len, Scratch scratch)
    cdef int _decode(self, uint8_t* dest, Scratch scratch, Py_ssize_t n, Py_ssize_t dest_len)
