# XXH32, the 32-bit hash of the xxHash specification, written from the published algorithm,
# as inline functions for the kernels that cimport it (NDLZ indexes its match tables with its
# top 12 bits). No module of its own: the functions are compiled into each kernel using them.
from libc.stdint cimport uint8_t, uint32_t


cdef extern from *:
    """
    #define B2X_P1 0x9E3779B1U
    #define B2X_P2 0x85EBCA77U
    #define B2X_P3 0xC2B2AE3DU
    #define B2X_P4 0x27D4EB2FU
    #define B2X_P5 0x165667B1U
    """
    const uint32_t B2X_P1
    const uint32_t B2X_P2
    const uint32_t B2X_P3
    const uint32_t B2X_P4
    const uint32_t B2X_P5


cdef inline uint32_t rotl32(uint32_t x, int r) noexcept nogil:
    return (x << r) | (x >> (32 - r))


cdef inline uint32_t le32(const uint8_t* p) noexcept nogil:
    # Byte by byte so that the hash is the same on any host; compilers make it one load.
    return (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
            | (<uint32_t>p[3] << 24))


cdef inline uint32_t xxh32_round(uint32_t acc, uint32_t lane) noexcept nogil:
    acc = acc + <uint32_t>(lane * B2X_P2)
    return <uint32_t>(rotl32(acc, 13) * B2X_P1)


cdef inline uint32_t xxh32(const uint8_t* p, Py_ssize_t n, uint32_t seed) noexcept nogil:
    cdef uint32_t h, a, b, c, d
    cdef Py_ssize_t i = 0
    if n >= 16:
        a = seed + B2X_P1 + B2X_P2
        b = seed + B2X_P2
        c = seed
        d = seed - B2X_P1
        while i + 16 <= n:
            a = xxh32_round(a, le32(p + i))
            b = xxh32_round(b, le32(p + i + 4))
            c = xxh32_round(c, le32(p + i + 8))
            d = xxh32_round(d, le32(p + i + 12))
            i += 16
        h = rotl32(a, 1) + rotl32(b, 7) + rotl32(c, 12) + rotl32(d, 18)
    else:
        h = seed + B2X_P5
    h = h + <uint32_t>n
    while i + 4 <= n:
        h = <uint32_t>(rotl32(h + <uint32_t>(le32(p + i) * B2X_P3), 17) * B2X_P4)
        i += 4
    while i < n:
        h = <uint32_t>(rotl32(h + <uint32_t>(p[i] * B2X_P5), 11) * B2X_P1)
        i += 1
    h ^= h >> 15
    h = <uint32_t>(h * B2X_P2)
    h ^= h >> 13
    h = <uint32_t>(h * B2X_P3)
    h ^= h >> 16
    return h
