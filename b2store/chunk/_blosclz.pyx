# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""BloscLZ, the LZ77 codec native to Blosc (codec format 0): stream decoder and encoder.

Every read and write is checked against its buffer's end before it happens, so a corrupt
stream yields an error code, never an access out of bounds.
"""

from libc.stdint cimport uint8_t, uint32_t, uint64_t
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


# --- encoder --------------------------------------------------------------------------------
# The encoder reproduces c-blosc2's parse decisions (hash, probe, match lengths, the
# clevel-9 second hash) so that its streams are byte-identical to c-blosc2's.

DEF MAX_COPY = 32
DEF MAX_FARDISTANCE = 65535 + MAX_DISTANCE - 1
DEF HASH_LOG = 14
DEF IPSHIFT = 4
DEF MINLEN = 4

cdef int[10] _HASHLOG = [0, HASH_LOG - 2, HASH_LOG - 1, HASH_LOG, HASH_LOG,
                         HASH_LOG, HASH_LOG, HASH_LOG, HASH_LOG, HASH_LOG]
cdef double[10] _MIN_CRATIO = [0, 2, 1.5, 1.2, 1.2, 1.2, 1.2, 1.15, 1.1, 1.0]


cdef inline uint32_t _read32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return v


cdef inline uint32_t _hash(uint32_t seq, int hashlog) noexcept nogil:
    return <uint32_t>(seq * <uint32_t>2654435761U) >> (32 - hashlog)


cdef extern from *:
    """
    #include <stdint.h>
    /* Index of the lowest set bit of x != 0. */
    #if defined(__GNUC__) || defined(__clang__)
    static inline int b2z_ctz64(uint64_t x) { return __builtin_ctzll(x); }
    #else
    static inline int b2z_ctz64(uint64_t x) { int n = 0; while (!(x & 1)) { x >>= 1; n++; } return n; }
    #endif
    """
    int b2z_ctz64(uint64_t x) noexcept nogil


cdef inline uint64_t _read64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return v


cdef inline const uint8_t* _match_end(const uint8_t* ip, const uint8_t* ip_bound,
                                      const uint8_t* ref) noexcept nogil:
    """One past the first byte where ip and ref differ, but at most ip_bound."""
    cdef uint64_t diff
    # Eight bytes a step while a whole word lies before ip_bound (ref < ip, so it does too);
    # the lowest differing byte of a little-endian word is the first one.
    while ip + 8 < ip_bound:
        diff = _read64(ref) ^ _read64(ip)
        if diff:
            return ip + (b2z_ctz64(diff) >> 3) + 1
        ip += 8
        ref += 8
    while ip < ip_bound:
        if ref[0] != ip[0]:
            return ip + 1
        ip += 1
        ref += 1
    return ip


cdef double _probe_cratio(const uint8_t* ibase, Py_ssize_t maxlen, uint32_t* htab,
                          int hashlog) noexcept nogil:
    """Entropy probe: the compression ratio the parse would reach on ibase[:maxlen]."""
    cdef Py_ssize_t hashlen = 1 << hashlog
    cdef Py_ssize_t limit = hashlen if maxlen > hashlen else maxlen
    cdef const uint8_t* ip = ibase
    cdef const uint8_t* ip_bound = ibase + limit - 1
    cdef const uint8_t* ip_limit = ibase + limit - 12
    cdef const uint8_t* anchor
    cdef const uint8_t* ref
    cdef Py_ssize_t oc = 5, length
    cdef unsigned int copy = 4, distance
    cdef uint32_t hval
    memset(htab, 0, hashlen * sizeof(uint32_t))
    while ip < ip_limit:
        anchor = ip
        hval = _hash(_read32(ip), hashlog)
        ref = ibase + htab[hval]
        distance = <unsigned int>(anchor - ref)
        htab[hval] = <uint32_t>(anchor - ibase)
        if distance == 0 or distance >= MAX_FARDISTANCE or _read32(ref) != _read32(ip):
            oc += 1
            ip = anchor + 1
            copy += 1
            if copy == MAX_COPY:
                copy = 0
                oc += 1
            continue
        ip = _match_end(anchor + 4, ip_bound, ref + 4) - IPSHIFT
        length = ip - anchor
        if length < MINLEN:
            oc += 1
            ip = anchor + 1
            copy += 1
            if copy == MAX_COPY:
                copy = 0
                oc += 1
            continue
        if not copy:
            oc -= 1
        copy = 0
        if length >= 7:
            oc += (length - 7) // 255 + 1
        oc += 2 if distance - 1 < MAX_DISTANCE else 4
        hval = _hash(_read32(ip), hashlog)
        htab[hval] = <uint32_t>(ip - ibase)
        ip += 2
        oc += 1
    return <double>(ip - ibase) / <double>oc


cdef Py_ssize_t c_blosclz_compress(int clevel, const uint8_t* ibase, Py_ssize_t length,
                                   uint8_t* output, Py_ssize_t maxout) noexcept nogil:
    """Encode ibase[:length]; 0 when it does not compress well enough or exceed maxout."""
    cdef uint32_t htab[1 << HASH_LOG]
    cdef int hashlog = _HASHLOG[clevel]
    cdef Py_ssize_t maxlen = length
    if clevel < 2:
        maxlen //= 8
    elif clevel < 4:
        maxlen //= 4
    elif clevel < 7:
        maxlen //= 2
    if _probe_cratio(ibase + length - maxlen, maxlen, htab, hashlog) < _MIN_CRATIO[clevel]:
        return 0
    if length < 16 or maxout < 66:
        return 0

    cdef const uint8_t* ip = ibase
    cdef const uint8_t* ip_bound = ibase + length - 1
    cdef const uint8_t* ip_limit = ibase + length - 12
    cdef const uint8_t* anchor
    cdef const uint8_t* ref
    cdef uint8_t* op = output
    cdef uint8_t* op_limit = output + maxout
    cdef unsigned int copy = 4, distance, mlen
    cdef uint32_t hval, seq
    memset(htab, 0, (1 << hashlog) * sizeof(uint32_t))
    op[0] = MAX_COPY - 1
    memcpy(op + 1, ip, 4)
    op += 5
    ip += 4

    while ip < ip_limit:
        anchor = ip
        hval = _hash(_read32(ip), hashlog)
        ref = ibase + htab[hval]
        distance = <unsigned int>(anchor - ref)
        htab[hval] = <uint32_t>(anchor - ibase)
        mlen = 0
        if distance != 0 and distance < MAX_FARDISTANCE and _read32(ref) == _read32(ip):
            distance -= 1  # biased: 0 means a run of the previous byte
            ip = _match_end(anchor + 4, ip_bound, ref + 4) - IPSHIFT
            mlen = <unsigned int>(ip - anchor)
            if mlen < MINLEN or (mlen <= 5 and distance >= MAX_DISTANCE):
                mlen = 0
        if mlen == 0:
            # A literal: one byte into the pending run, a new run after 32.
            if op + 2 > op_limit:
                return 0
            op[0] = anchor[0]
            op += 1
            ip = anchor + 1
            copy += 1
            if copy == MAX_COPY:
                copy = 0
                op[0] = MAX_COPY - 1
                op += 1
            continue
        if copy:
            (op - copy - 1)[0] = <uint8_t>(copy - 1)
        else:
            op -= 1  # drop the unused run marker
        copy = 0
        if distance < MAX_DISTANCE:
            if mlen < 7:
                if op + 2 > op_limit:
                    return 0
                op[0] = <uint8_t>((mlen << 5) + (distance >> 8))
                op[1] = <uint8_t>(distance & 255)
                op += 2
            else:
                if op + 1 > op_limit:
                    return 0
                op[0] = <uint8_t>((7 << 5) + (distance >> 8))
                op += 1
                mlen -= 7
                while mlen >= 255:
                    if op + 1 > op_limit:
                        return 0
                    op[0] = 255
                    op += 1
                    mlen -= 255
                if op + 2 > op_limit:
                    return 0
                op[0] = <uint8_t>mlen
                op[1] = <uint8_t>(distance & 255)
                op += 2
        else:
            distance -= MAX_DISTANCE
            if mlen < 7:
                if op + 4 > op_limit:
                    return 0
                op[0] = <uint8_t>((mlen << 5) + 31)
                op += 1
            else:
                if op + 1 > op_limit:
                    return 0
                op[0] = (7 << 5) + 31
                op += 1
                mlen -= 7
                while mlen >= 255:
                    if op + 1 > op_limit:
                        return 0
                    op[0] = 255
                    op += 1
                    mlen -= 255
                if op + 4 > op_limit:
                    return 0
                op[0] = <uint8_t>mlen
                op += 1
            op[0] = 255
            op[1] = <uint8_t>(distance >> 8)
            op[2] = <uint8_t>(distance & 255)
            op += 3
        seq = _read32(ip)
        htab[_hash(seq, hashlog)] = <uint32_t>(ip - ibase)
        ip += 1
        if clevel == 9:
            # c-blosc2 also hashes the next position, from the same word shifted (a quirk
            # kept for identical output).
            htab[_hash(seq >> 8, hashlog)] = <uint32_t>(ip - ibase)
        ip += 1
        if op + 1 > op_limit:
            return 0
        op[0] = MAX_COPY - 1
        op += 1

    while ip <= ip_bound:
        if op + 2 > op_limit:
            return 0
        op[0] = ip[0]
        op += 1
        ip += 1
        copy += 1
        if copy == MAX_COPY:
            copy = 0
            op[0] = MAX_COPY - 1
            op += 1
    if copy:
        (op - copy - 1)[0] = <uint8_t>(copy - 1)
    else:
        op -= 1
    output[0] |= 1 << 5
    return op - output


def compress(const uint8_t[::1] src, uint8_t[::1] dst, int clevel):
    """Encode ``src`` into ``dst`` at ``clevel`` 1..9; returns the size, 0 if not worth it."""
    cdef Py_ssize_t n
    if not 1 <= clevel <= 9:
        raise ValueError(f"clevel must be 1..9, got {clevel}")
    if src.shape[0] == 0 or dst.shape[0] == 0:
        return 0
    with nogil:
        n = c_blosclz_compress(clevel, &src[0], src.shape[0], &dst[0], dst.shape[0])
    return n
