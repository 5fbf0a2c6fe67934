# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""BloscLZ, the LZ77 codec native to Blosc (codec format 0): the stream decoder.

Every read and write is checked against its buffer's end before it happens, so a corrupt
stream yields an error code, never an access out of bounds.
"""

from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcpy, memset

# Distances up to this are coded in 13 bits; farther ones (up to 73 727) take two more bytes.
DEF MAX_DISTANCE = 8191


cdef Py_ssize_t c_blosclz_decompress(const uint8_t* ip, Py_ssize_t ilen,
                                     uint8_t* op, Py_ssize_t olen) noexcept nogil:
    """Decode one stream; returns the number of bytes written, or -1 if the stream is bad."""
    cdef const uint8_t* ip_end = ip + ilen
    cdef uint8_t* out = op
    cdef uint8_t* op_end = op + olen
    cdef const uint8_t* ref
    cdef Py_ssize_t length, dist, i, step
    cdef unsigned int ctrl, code
    cdef uint64_t word
    if ilen <= 0:
        return 0
    # The first byte is always a literal run; its bit 5 only marks the stream as BloscLZ.
    ctrl = ip[0] & 31
    ip += 1
    while True:
        if ctrl >= 32:
            length = (ctrl >> 5) + 2
            dist = (ctrl & 31) << 8
            if length == 9:
                while True:
                    if ip + 1 >= ip_end:
                        return -1
                    code = ip[0]
                    ip += 1
                    length += code
                    if code != 255:
                        break
            elif ip + 1 >= ip_end:
                return -1
            code = ip[0]
            ip += 1
            if code == 255 and dist == (31 << 8):
                if ip + 1 >= ip_end:
                    return -1
                dist = ((<Py_ssize_t>ip[0]) << 8) + ip[1] + MAX_DISTANCE + 1
                ip += 2
            else:
                dist += code + 1
            if length > op_end - op or dist > op - out:
                return -1
            # A well-formed stream ends with a literal run; the reference decoder drops a
            # match that ends the input, and so does this one.
            if ip >= ip_end:
                break
            ctrl = ip[0]
            ip += 1
            ref = op - dist
            if dist >= 8 and op_end - op >= length + 8:
                # 8-byte steps never read a byte before it is written when dist >= 8; the
                # last step may spill up to 7 bytes past the match, inside the buffer, and
                # later output overwrites them.
                i = 0
                while i < length:
                    memcpy(&word, ref + i, 8)
                    memcpy(op + i, &word, 8)
                    i += 8
            elif dist == 1:
                memset(op, ref[0], length)
            elif dist >= length:
                memcpy(op, ref, length)
            else:
                # A short period: the bytes from ref on repeat every dist, so copy the
                # pattern in doubling, non-overlapping pieces that start on a period.
                i = 0
                while i < length:
                    step = min(i + dist, length - i)
                    memcpy(op + i, ref, step)
                    i += step
            op += length
        else:
            ctrl += 1
            if ctrl > op_end - op or ctrl > ip_end - ip:
                return -1
            if op_end - op >= 32 and ip_end - ip >= 32:
                # A fixed-size copy compiles to a few moves; the bytes past ctrl are
                # overwritten by what follows.
                memcpy(op, ip, 32)
            else:
                memcpy(op, ip, ctrl)
            op += ctrl
            ip += ctrl
            if ip >= ip_end:
                break
            ctrl = ip[0]
            ip += 1
    return op - out


def decompress(const uint8_t[::1] src, uint8_t[::1] dst):
    """Decode the BloscLZ stream ``src`` into ``dst``; returns the bytes written, -1 if bad."""
    cdef Py_ssize_t n
    if src.shape[0] == 0:
        return 0
    if dst.shape[0] == 0:
        return -1
    with nogil:
        n = c_blosclz_decompress(&src[0], src.shape[0], &dst[0], dst.shape[0])
    return n
