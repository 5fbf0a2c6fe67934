# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""NDLZ, c-blosc2's registered codec 32: a 2-d, cell-based LZ codec for one stream of a block.

Format facts were learnt by reading c-blosc2's ``plugins/codecs/ndlz`` (``ndlz.c``,
``ndlz4x4.c``, ``ndlz8x8.c``) and how ``blosc/blosc2.c`` (``blosc_c``, ``blosc_d``) calls a
plugin codec, then checked byte for byte against python-blosc2 4.14.1 (c-blosc2 3.3.5).
This is an independent implementation; none of c-blosc2's code is reused.

The stream codes a ``bs0 x bs1`` matrix of single bytes, ``bs0, bs1`` being the b2nd
metalayer's blockshape (in items). It starts with a 9-byte header: the byte 2 (ndim) and
the two blockshape extents as int32 LE. Then come the cells, ``cell x cell`` squares of the
matrix (codec_meta, 4 or 8) in row-major order, each one token and its payload:

* ``0``: a literal cell, its bytes row by row. The cells of the last cell row or column
  are cut to the matrix (``rows x cols``), and the encoder always writes those literally.
* ``64``: every byte of the cell is the byte that follows.
* ``192``: a copy of the cell whose token sits ``offset`` (u16 LE) bytes before this token:
  the cell's bytes are read from the stream at ``token position - offset``.
* row matches: some rows of the cell are read from an earlier literal cell in the stream,
  the others follow as literals. 4x4 cells (offsets u16 LE, base = this token's position):
  ``128..191`` two rows (``128`` = rows 2, 3; else rows ``(t-128)>>5`` and
  ``((t-128)>>3) - 4*first``) at ``base - offset``, two literal rows;
  ``224..255`` three rows (``t>>3``: 28 = 1,2,3; 29 = 0,1,2; 30 = 0,1,3; 31 = 0,2,3) at
  ``base - offset``, one literal row; ``40..63`` rows 0 and ``(t-32)>>3`` at
  ``base - offset1``, the other two at ``base - offset2``, no literal.
  8x8 cells: ``136 + r`` rows r, r+1 at ``base - offset`` and six literal rows;
  ``168 + r`` rows r..r+2 and five literal rows.

The decoder reads the copies from the *compressed* stream (earlier literal cells), never
from its output. c-blosc2 adds 3 (two 4x4 row tokens) or 5 (the double pair) to the u16
offset in 16-bit arithmetic before subtracting it from ``base + 3`` / ``base + 5``; the
sum wraps for offsets >= 65533 / 65531, which its own encoder can write for far matches.
That is reproduced, so a stream decodes here exactly as python-blosc2 decodes it.

The encoder's hash tables (4096 u32 entries, XXH32 seed 1 of the cell / rows, top 12 bits)
hold stream positions of earlier literal cells; its search order, tie breaks and the
deferred table updates (including c-blosc2's writes of stale hashes) decide the bytes, so
they are followed exactly. c-blosc2 gives up (the caller stores the block raw) when the
block is shorter than one cell, when the output capacity is below
``17 + 2 * (n // cell**2 - 1)``, when fewer than ``cell**2 + 1`` bytes remain free before a
cell, or when the stream outgrows the block.

NDLZ knows nothing of items: c-blosc2's encoder fails unless the stream is exactly
``bs0 * bs1`` bytes, so arrays of typesize > 1 must be written with split blocks (one
stream per byte of the item, best after SHUFFLE); typesize and clevel are not used by the
codec. Every read and write of the decoder is checked against its buffer first: a hostile
stream yields -1, never an access out of bounds.
"""

from libc.stdint cimport uint8_t, uint16_t, uint32_t, int32_t
from libc.string cimport memcpy, memset, memcmp


# --- XXH32 ---------------------------------------------------------------------------------
# The hash of the xxHash specification (32-bit variant), written from the published algorithm;
# c-blosc2 indexes its tables with the top 12 bits of XXH32(bytes, seed=1).

cdef extern from *:
    """
    #define B2N_P1 0x9E3779B1U
    #define B2N_P2 0x85EBCA77U
    #define B2N_P3 0xC2B2AE3DU
    #define B2N_P4 0x27D4EB2FU
    #define B2N_P5 0x165667B1U
    """
    const uint32_t B2N_P1
    const uint32_t B2N_P2
    const uint32_t B2N_P3
    const uint32_t B2N_P4
    const uint32_t B2N_P5


DEF HASH_SHIFT = 20          # 32 - 12: tables of 4096 entries
DEF TABLE = 4096
DEF FAR = 65535              # matches this far or farther are not taken (u16 offsets)
DEF HEADER = 9               # ndim byte + two int32 extents


cdef inline uint32_t _rotl(uint32_t x, int r) noexcept nogil:
    return (x << r) | (x >> (32 - r))


cdef inline uint32_t _le32(const uint8_t* p) noexcept nogil:
    # Byte by byte so that the hash is the same on any host; compilers make it one load.
    return (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
            | (<uint32_t>p[3] << 24))


cdef inline uint32_t _round(uint32_t acc, uint32_t lane) noexcept nogil:
    acc = acc + <uint32_t>(lane * B2N_P2)
    return <uint32_t>(_rotl(acc, 13) * B2N_P1)


cdef inline uint32_t _xxh32(const uint8_t* p, Py_ssize_t n, uint32_t seed) noexcept nogil:
    cdef uint32_t h, a, b, c, d
    cdef Py_ssize_t i = 0
    if n >= 16:
        a = seed + B2N_P1 + B2N_P2
        b = seed + B2N_P2
        c = seed
        d = seed - B2N_P1
        while i + 16 <= n:
            a = _round(a, _le32(p + i))
            b = _round(b, _le32(p + i + 4))
            c = _round(c, _le32(p + i + 8))
            d = _round(d, _le32(p + i + 12))
            i += 16
        h = _rotl(a, 1) + _rotl(b, 7) + _rotl(c, 12) + _rotl(d, 18)
    else:
        h = seed + B2N_P5
    h = h + <uint32_t>n
    while i + 4 <= n:
        h = <uint32_t>(_rotl(h + <uint32_t>(_le32(p + i) * B2N_P3), 17) * B2N_P4)
        i += 4
    while i < n:
        h = <uint32_t>(_rotl(h + <uint32_t>(p[i] * B2N_P5), 11) * B2N_P1)
        i += 1
    h ^= h >> 15
    h = <uint32_t>(h * B2N_P2)
    h ^= h >> 13
    h = <uint32_t>(h * B2N_P3)
    h ^= h >> 16
    return h


cdef inline uint32_t _slot(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    return _xxh32(p, n, 1) >> HASH_SHIFT


# --- small helpers -------------------------------------------------------------------------

cdef inline uint32_t _rd16(const uint8_t* p) noexcept nogil:
    return <uint32_t>p[0] | (<uint32_t>p[1] << 8)


cdef inline void _wr16(uint8_t* p, Py_ssize_t v) noexcept nogil:
    p[0] = <uint8_t>v
    p[1] = <uint8_t>(v >> 8)


cdef inline void _wr32(uint8_t* p, Py_ssize_t v) noexcept nogil:
    p[0] = <uint8_t>v
    p[1] = <uint8_t>(v >> 8)
    p[2] = <uint8_t>(v >> 16)
    p[3] = <uint8_t>(v >> 24)


cdef inline bint _same(const uint8_t* a, const uint8_t* b, size_t n) noexcept nogil:
    return memcmp(a, b, n) == 0


cdef inline bint _uniform(const uint8_t* a, Py_ssize_t n) noexcept nogil:
    # All n bytes equal to the first: compare the buffer with itself shifted by one.
    return memcmp(a, a + 1, n - 1) == 0


cdef inline Py_ssize_t _edge(Py_ssize_t extent, Py_ssize_t idx, Py_ssize_t ncells,
                             Py_ssize_t cell) noexcept nogil:
    """Rows (or columns) of cell ``idx`` along an axis of ``extent``: the last cell is cut."""
    if idx == ncells - 1 and extent % cell:
        return extent % cell
    return cell


cdef inline Py_ssize_t _literal_edge(const uint8_t* ip, Py_ssize_t bs1, Py_ssize_t orig,
                                     Py_ssize_t rows, Py_ssize_t cols,
                                     uint8_t* out, Py_ssize_t op) noexcept nogil:
    cdef Py_ssize_t q
    out[op] = 0
    op += 1
    for q in range(rows):
        memcpy(out + op, ip + orig + q * bs1, cols)
        op += cols
    return op


# --- encoder, 4x4 cells ----------------------------------------------------------------------

cdef struct Tables:
    uint32_t cell[TABLE]
    uint32_t triple[TABLE]
    uint32_t pair[TABLE]


cdef inline uint32_t _pair_slot(const uint8_t* cell, int i, int j,
                                uint32_t* cache) noexcept nogil:
    """Table slot of rows i and j of a 4x4 cell, hashed once per cell."""
    cdef uint8_t rows[8]
    if cache[4 * i + j] == 0xFFFFFFFFU:
        memcpy(rows, cell + 4 * i, 4)
        memcpy(rows + 4, cell + 4 * j, 4)
        cache[4 * i + j] = _slot(rows, 8)
    return cache[4 * i + j]


cdef inline bint _same_rows(const uint8_t* cell, int i, int j, const uint8_t* ref) noexcept nogil:
    return _same(cell + 4 * i, ref, 4) and _same(cell + 4 * j, ref + 4, 4)


cdef Py_ssize_t _match4(const uint8_t* cell, uint8_t* out, Py_ssize_t anchor, Tables* tab,
                        uint32_t* upd_triple, uint32_t* hash_triple,
                        uint32_t* upd_pair, uint32_t* hash_pair) noexcept nogil:
    """Look for row matches of a 4x4 cell (no whole-cell match); write the token and payload
    at ``anchor`` and return the new output position, or 0 if nothing matched (the caller
    then writes a literal and applies the table updates gathered here)."""
    cdef uint8_t rows[12]
    cdef uint32_t slot, t, t2
    cdef uint32_t pair_slot[16]     # by 4 * first row + second; phases 1 and 3 share them
    cdef Py_ssize_t dist, op = anchor
    cdef int i, j, k, l, m
    memset(pair_slot, 0xFF, sizeof(pair_slot))
    # 1. Row 0 with row j, and the two other rows with each other: two references.
    for j in range(1, 4):
        t = tab.pair[_pair_slot(cell, 0, j, pair_slot)]
        if t == 0 or not _same_rows(cell, 0, j, out + t) or anchor - t >= FAR:
            continue
        l = 2 if j == 1 else 1
        m = 2 if j == 3 else 3
        t2 = tab.pair[_pair_slot(cell, l, m, pair_slot)]
        if t2 == 0 or not _same_rows(cell, l, m, out + t2):
            continue
        # c-blosc2 measures this one from row l of the cell, but writes it from the token.
        dist = anchor + 4 * l - t2
        if dist <= 0 or dist >= FAR:
            continue
        out[op] = <uint8_t>(32 | (j << 3))
        _wr16(out + op + 1, anchor - t)
        _wr16(out + op + 3, anchor - t2)
        return op + 5
    # 2. Three rows; the consecutive triples (0,1,2) and (1,2,3) are remembered when unseen.
    for i in range(2):
        for j in range(i + 1, 3):
            for k in range(j + 1, 4):
                memcpy(rows, cell + 4 * i, 4)
                memcpy(rows + 4, cell + 4 * j, 4)
                memcpy(rows + 8, cell + 4 * k, 4)
                slot = _slot(rows, 12)
                t = tab.triple[slot]
                if t == 0:
                    if j == i + 1 and k == j + 1:
                        upd_triple[i] = <uint32_t>(anchor + 1 + 4 * i)
                        hash_triple[i] = slot
                    continue
                if not _same(rows, out + t, 12):
                    continue
                dist = anchor + 4 * i - t
                if dist <= 0 or dist >= FAR:
                    continue
                out[op] = 224 if i == 1 else <uint8_t>(224 | ((j + k - 2) << 3))
                _wr16(out + op + 1, anchor - t)
                l = 6 - i - j - k          # the row left out (rows sum to 6)
                memcpy(out + op + 3, cell + 4 * l, 4)
                return op + 7
    # 3. Two rows; the consecutive pairs (0,1), (1,2), (2,3) are remembered when unseen.
    for i in range(3):
        for j in range(i + 1, 4):
            slot = _pair_slot(cell, i, j, pair_slot)
            t = tab.pair[slot]
            if t == 0:
                if j == i + 1:
                    upd_pair[i] = <uint32_t>(anchor + 1 + 4 * i)
                    hash_pair[i] = slot
                continue
            if not _same_rows(cell, i, j, out + t):
                continue
            dist = anchor + 4 * i - t
            if dist <= 0 or dist >= FAR:
                continue
            out[op] = 128 if i == 2 else <uint8_t>(128 | (i << 5) | (j << 3))
            _wr16(out + op + 1, anchor - t)
            op += 3
            for k in range(4):
                if k != i and k != j:
                    memcpy(out + op, cell + 4 * k, 4)
                    op += 4
            return op
    return 0


cdef Py_ssize_t _encode4(const uint8_t* ip, Py_ssize_t bs0, Py_ssize_t bs1,
                         uint8_t* out, Py_ssize_t maxout, Tables* tab) noexcept nogil:
    cdef Py_ssize_t n = bs0 * bs1, nr = (bs0 + 3) // 4, nc = (bs1 + 3) // 4
    cdef Py_ssize_t r, c, q, op, orig, anchor, dist, nop
    cdef uint8_t cell[16]
    # Pending updates are cleared per cell, but the slots they go to are not: c-blosc2
    # writes a remembered triple/pair slot back whenever the first one is set, so a slot
    # hashed in an earlier cell can be overwritten (with 0). Keeping them reproduces that.
    cdef uint32_t upd_triple[2]
    cdef uint32_t hash_triple[2]
    cdef uint32_t upd_pair[3]
    cdef uint32_t hash_pair[3]
    cdef uint32_t hc, t
    if n < 16 or maxout < 17 + (n // 16 - 1) * 2:
        return 0
    memset(tab, 0, sizeof(Tables))
    memset(hash_triple, 0, sizeof(hash_triple))
    memset(hash_pair, 0, sizeof(hash_pair))
    out[0] = 2
    _wr32(out + 1, bs0)
    _wr32(out + 5, bs1)
    op = HEADER
    for r in range(nr):
        for c in range(nc):
            upd_triple[0] = upd_triple[1] = 0
            upd_pair[0] = upd_pair[1] = upd_pair[2] = 0
            if op + 17 > maxout:
                return 0
            orig = r * 4 * bs1 + c * 4
            if (r == nr - 1 and bs0 % 4) or (c == nc - 1 and bs1 % 4):
                op = _literal_edge(ip, bs1, orig, _edge(bs0, r, nr, 4), _edge(bs1, c, nc, 4),
                                   out, op)
            else:
                for q in range(4):
                    memcpy(cell + 4 * q, ip + orig + q * bs1, 4)
                anchor = op
                hc = _slot(cell, 16)
                t = tab.cell[hc]
                dist = anchor - t if (t != 0 and _same(cell, out + t, 16)) else 0
                if _uniform(cell, 16):
                    out[op] = 64
                    out[op + 1] = cell[0]
                    op += 2
                elif dist != 0 and dist < FAR:
                    out[op] = 192
                    _wr16(out + op + 1, dist)
                    op += 3
                else:
                    nop = _match4(cell, out, anchor, tab, upd_triple, hash_triple,
                                  upd_pair, hash_pair)
                    if nop:
                        op = nop
                    else:
                        # Only literal cells enter the tables (their bytes are referenced).
                        tab.cell[hc] = <uint32_t>(anchor + 1)
                        if upd_triple[0]:
                            for q in range(2):
                                tab.triple[hash_triple[q]] = upd_triple[q]
                        if upd_pair[0]:
                            for q in range(3):
                                tab.pair[hash_pair[q]] = upd_pair[q]
                        out[op] = 0
                        memcpy(out + op + 1, cell, 16)
                        op += 17
            if op > n:
                return 0
    return op


# --- encoder, 8x8 cells ----------------------------------------------------------------------

cdef Py_ssize_t _match8(const uint8_t* cell, uint8_t* out, Py_ssize_t anchor, Tables* tab,
                        uint32_t* upd_triple, uint32_t* hash_triple,
                        uint32_t* upd_pair, uint32_t* hash_pair) noexcept nogil:
    """As :func:`_match4` for 8x8 cells: three then two consecutive rows."""
    cdef uint32_t slot, t
    cdef Py_ssize_t dist, op = anchor
    cdef int i, l
    for i in range(6):
        slot = _slot(cell + 8 * i, 24)
        t = tab.triple[slot]
        if t == 0:
            upd_triple[i] = <uint32_t>(anchor + 1 + 8 * i)
            hash_triple[i] = slot
            continue
        if not _same(cell + 8 * i, out + t, 24):
            continue
        dist = anchor + 8 * i - t
        if dist <= 0 or dist >= FAR:
            continue
        out[op] = <uint8_t>(168 + i)
        _wr16(out + op + 1, anchor - t)
        op += 3
        for l in range(8):
            if l < i or l > i + 2:
                memcpy(out + op, cell + 8 * l, 8)
                op += 8
        return op
    for i in range(7):
        slot = _slot(cell + 8 * i, 16)
        t = tab.pair[slot]
        if t == 0:
            upd_pair[i] = <uint32_t>(anchor + 1 + 8 * i)
            hash_pair[i] = slot
            continue
        if not _same(cell + 8 * i, out + t, 16):
            continue
        dist = anchor + 8 * i - t
        if dist <= 0 or dist >= FAR:
            continue
        out[op] = <uint8_t>(136 + i)
        _wr16(out + op + 1, anchor - t)
        op += 3
        for l in range(8):
            if l < i or l > i + 1:
                memcpy(out + op, cell + 8 * l, 8)
                op += 8
        return op
    return 0


cdef Py_ssize_t _encode8(const uint8_t* ip, Py_ssize_t bs0, Py_ssize_t bs1,
                         uint8_t* out, Py_ssize_t maxout, Tables* tab) noexcept nogil:
    cdef Py_ssize_t n = bs0 * bs1, nr = (bs0 + 7) // 8, nc = (bs1 + 7) // 8
    cdef Py_ssize_t r, c, q, op, orig, anchor, dist, nop
    cdef uint8_t cell[64]
    cdef uint32_t upd_triple[6]      # see _encode4
    cdef uint32_t hash_triple[6]
    cdef uint32_t upd_pair[7]
    cdef uint32_t hash_pair[7]
    cdef uint32_t hc, t
    if n < 64 or maxout < 17 + (n // 64 - 1) * 2:
        return 0
    memset(tab, 0, sizeof(Tables))
    memset(hash_triple, 0, sizeof(hash_triple))
    memset(hash_pair, 0, sizeof(hash_pair))
    out[0] = 2
    _wr32(out + 1, bs0)
    _wr32(out + 5, bs1)
    op = HEADER
    for r in range(nr):
        for c in range(nc):
            memset(upd_triple, 0, sizeof(upd_triple))
            memset(upd_pair, 0, sizeof(upd_pair))
            if op + 65 > maxout:
                return 0
            orig = r * 8 * bs1 + c * 8
            if (r == nr - 1 and bs0 % 8) or (c == nc - 1 and bs1 % 8):
                op = _literal_edge(ip, bs1, orig, _edge(bs0, r, nr, 8), _edge(bs1, c, nc, 8),
                                   out, op)
            else:
                for q in range(8):
                    memcpy(cell + 8 * q, ip + orig + q * bs1, 8)
                anchor = op
                hc = _slot(cell, 64)
                t = tab.cell[hc]
                dist = anchor - t if (t != 0 and _same(cell, out + t, 64)) else 0
                if _uniform(cell, 64):
                    out[op] = 64
                    out[op + 1] = cell[0]
                    op += 2
                elif dist != 0 and dist < FAR:
                    out[op] = 192
                    _wr16(out + op + 1, dist)
                    op += 3
                else:
                    nop = _match8(cell, out, anchor, tab, upd_triple, hash_triple,
                                  upd_pair, hash_pair)
                    if nop:
                        op = nop
                    else:
                        tab.cell[hc] = <uint32_t>(anchor + 1)
                        if upd_triple[0]:
                            for q in range(6):
                                tab.triple[hash_triple[q]] = upd_triple[q]
                        if upd_pair[0]:
                            for q in range(7):
                                tab.pair[hash_pair[q]] = upd_pair[q]
                        out[op] = 0
                        memcpy(out + op + 1, cell, 64)
                        op += 65
            if op > n:
                return 0
    return op


# --- decoder -----------------------------------------------------------------------------------
# ``fits(pos, k)``: k bytes from pos lie in the stream. Positions are signed (a hostile offset
# points before the stream start) and never turned into pointers before they are checked.

cdef inline bint _fits(Py_ssize_t pos, Py_ssize_t k, Py_ssize_t n) noexcept nogil:
    return pos >= 0 and pos <= n - k


cdef inline Py_ssize_t _shape(const uint8_t* ip, Py_ssize_t n, Py_ssize_t olen,
                              Py_ssize_t* bs0, Py_ssize_t* bs1) noexcept nogil:
    """Read the stream header; -1 unless it is 2-d with a shape of exactly ``olen`` bytes
    (c-blosc2 decodes by the stream's own shape and fails unless that fills the output)."""
    cdef int32_t a, b
    if n < HEADER or ip[0] != 2:
        return -1
    a = <int32_t>_le32(ip + 1)
    b = <int32_t>_le32(ip + 5)
    if a <= 0 or b <= 0 or <Py_ssize_t>a * b != olen:
        return -1
    bs0[0] = a
    bs1[0] = b
    return 0


cdef inline void _put_cell(uint8_t* op, Py_ssize_t orig, Py_ssize_t bs1, const uint8_t* src,
                           Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t cell) noexcept nogil:
    # The source is read with a row stride of ``cols``, as c-blosc2 does, also for the cut
    # cells of a hostile stream whose row tokens filled a full-width buffer.
    cdef Py_ssize_t q
    if cols == cell and cell == 4:
        for q in range(rows):
            memcpy(op + orig + q * bs1, src + 4 * q, 4)
    elif cols == cell and cell == 8:
        for q in range(rows):
            memcpy(op + orig + q * bs1, src + 8 * q, 8)
    else:
        for q in range(rows):
            memcpy(op + orig + q * bs1, src + q * cols, cols)


cdef Py_ssize_t _decode4(const uint8_t* ip, Py_ssize_t n, uint8_t* op,
                         Py_ssize_t olen) noexcept nogil:
    cdef Py_ssize_t bs0, bs1, nr, nc, r, c, rows, cols, cur, pos, b1, b2, k
    cdef uint8_t buf[16]
    cdef const uint8_t* src
    cdef uint32_t token
    cdef int i, j, l, m, q, hi
    if _shape(ip, n, olen, &bs0, &bs1) < 0:
        return -1
    nr = (bs0 + 3) // 4
    nc = (bs1 + 3) // 4
    pos = HEADER
    for r in range(nr):
        rows = _edge(bs0, r, nr, 4)
        for c in range(nc):
            cols = _edge(bs1, c, nc, 4)
            cur = pos
            if cur >= n:
                return -1
            token = ip[cur]
            pos = cur + 1
            if token == 0:
                k = rows * cols
                if not _fits(pos, k, n):
                    return -1
                src = ip + pos
                pos += k
            elif token == 192:
                if not _fits(pos, 2, n):
                    return -1
                b1 = cur - <Py_ssize_t>_rd16(ip + pos)
                if not _fits(b1, rows * cols, n):
                    return -1
                src = ip + b1
                pos += 2
            elif token == 64:
                if not _fits(pos, 1, n):
                    return -1
                memset(buf, ip[pos], 16)
                src = buf
                pos += 1
            elif token >= 224 or 128 <= token <= 191:
                if not _fits(pos, 2, n):
                    return -1
                # The offset plus 3 in u16 arithmetic, from the end of the offset (see top).
                b1 = cur + 3 - <Py_ssize_t>((_rd16(ip + pos) + 3) & 0xFFFF)
                pos += 2
                if token >= 224:
                    hi = token >> 3
                    i = 1 if hi == 28 else 0
                    j = 2 if (hi == 28 or hi == 31) else 1
                    k = 2 if hi == 29 else 3
                    if not _fits(b1, 12, n):
                        return -1
                    memcpy(buf + 4 * i, ip + b1, 4)
                    memcpy(buf + 4 * j, ip + b1 + 4, 4)
                    memcpy(buf + 4 * k, ip + b1 + 8, 4)
                    l = 6 - i - j - <int>k
                    if not _fits(pos, 4, n):
                        return -1
                    memcpy(buf + 4 * l, ip + pos, 4)
                    pos += 4
                else:
                    if token == 128:
                        i = 2
                        j = 3
                    else:
                        i = (token - 128) >> 5
                        j = ((token - 128) >> 3) - (i << 2)
                    if not _fits(b1, 8, n):
                        return -1
                    # A hostile token may name one row twice: the second copy wins and the
                    # three other rows are literals.
                    memcpy(buf + 4 * i, ip + b1, 4)
                    memcpy(buf + 4 * j, ip + b1 + 4, 4)
                    for q in range(4):
                        if q != i and q != j:
                            if not _fits(pos, 4, n):
                                return -1
                            memcpy(buf + 4 * q, ip + pos, 4)
                            pos += 4
                src = buf
            elif 40 <= token <= 63:
                if not _fits(pos, 4, n):
                    return -1
                b1 = cur + 5 - <Py_ssize_t>((_rd16(ip + pos) + 5) & 0xFFFF)
                b2 = cur + 5 - <Py_ssize_t>((_rd16(ip + pos + 2) + 5) & 0xFFFF)
                pos += 4
                j = (token - 32) >> 3
                l = 2 if j == 1 else 1
                m = 2 if j == 3 else 3
                if not _fits(b1, 8, n) or not _fits(b2, 8, n):
                    return -1
                memcpy(buf, ip + b1, 4)
                memcpy(buf + 4 * j, ip + b1 + 4, 4)
                memcpy(buf + 4 * l, ip + b2, 4)
                memcpy(buf + 4 * m, ip + b2 + 4, 4)
                src = buf
            else:
                return -1
            _put_cell(op, r * 4 * bs1 + c * 4, bs1, src, rows, cols, 4)
    return olen


cdef Py_ssize_t _decode8(const uint8_t* ip, Py_ssize_t n, uint8_t* op,
                         Py_ssize_t olen) noexcept nogil:
    cdef Py_ssize_t bs0, bs1, nr, nc, r, c, rows, cols, cur, pos, b1, k
    cdef uint8_t buf[64]
    cdef const uint8_t* src
    cdef uint32_t token
    cdef int row, span, l
    if _shape(ip, n, olen, &bs0, &bs1) < 0:
        return -1
    nr = (bs0 + 7) // 8
    nc = (bs1 + 7) // 8
    pos = HEADER
    for r in range(nr):
        rows = _edge(bs0, r, nr, 8)
        for c in range(nc):
            cols = _edge(bs1, c, nc, 8)
            cur = pos
            if cur >= n:
                return -1
            token = ip[cur]
            pos = cur + 1
            if token == 0:
                k = rows * cols
                if not _fits(pos, k, n):
                    return -1
                src = ip + pos
                pos += k
            elif token == 192:
                if not _fits(pos, 2, n):
                    return -1
                b1 = cur - <Py_ssize_t>_rd16(ip + pos)
                if not _fits(b1, rows * cols, n):
                    return -1
                src = ip + b1
                pos += 2
            elif token == 64:
                if not _fits(pos, 1, n):
                    return -1
                memset(buf, ip[pos], 64)
                src = buf
                pos += 1
            elif (token >> 3) == 21 or (token >> 3) == 17:
                span = 3 if (token >> 3) == 21 else 2     # rows copied from the reference
                row = token & 7
                if row + span > 8 or not _fits(pos, 2, n):
                    return -1
                # Unlike the 4x4 row tokens, the offset counts from this token, unwrapped.
                b1 = cur - <Py_ssize_t>_rd16(ip + pos)
                pos += 2
                if not _fits(b1, 8 * span, n):
                    return -1
                memcpy(buf + 8 * row, ip + b1, 8 * span)
                for l in range(8):
                    if l < row or l >= row + span:
                        if not _fits(pos, 8, n):
                            return -1
                        memcpy(buf + 8 * l, ip + pos, 8)
                        pos += 8
                src = buf
            else:
                return -1
            _put_cell(op, r * 8 * bs1 + c * 8, bs1, src, rows, cols, 8)
    return olen


# --- Python entry points -----------------------------------------------------------------------

cdef tuple _check(object blockshape, int cell, Py_ssize_t typesize):
    """Validate the parameters shared by both directions; return (bs0, bs1)."""
    if cell != 4 and cell != 8:
        raise ValueError(f"NDLZ codec_meta (the cell size) must be 4 or 8, got {cell}")
    try:
        shape = tuple(blockshape)
    except TypeError:
        raise ValueError(f"NDLZ blockshape must be a pair of ints, got {blockshape!r}") from None
    if len(shape) != 2:
        raise ValueError(f"NDLZ only codes 2-d blocks (c-blosc2 requires ndim == 2), "
                         f"got blockshape {shape!r}")
    bs0, bs1 = (int(x) for x in shape)
    if bs0 < 1 or bs1 < 1 or bs0 * bs1 > 0x7FFFFFFF:
        raise ValueError(f"NDLZ blockshape extents must be >= 1 and their product fit in "
                         f"int32, got {shape!r}")
    if typesize < 1:
        raise ValueError(f"typesize must be >= 1, got {typesize}")
    return bs0, bs1


def decompress(const uint8_t[::1] src, uint8_t[::1] dst, blockshape, int cell,
               Py_ssize_t typesize):
    """Decode the NDLZ stream ``src`` into ``dst``.

    Parameters
    ----------
    src : bytes-like
        One NDLZ stream (the payload of one block stream, without its csize).
    dst : writable uint8 buffer
        ``blockshape[0] * blockshape[1]`` bytes: one stream of a block (the whole block for
        typesize 1, one byte plane of a split block otherwise).
    blockshape : (int, int)
        The b2nd blockshape, in items. Like c-blosc2, the decoder follows the shape written
        in the stream itself; it must cover exactly ``len(dst)`` bytes.
    cell : int
        codec_meta: 4 or 8.
    typesize : int
        Checked to be >= 1, otherwise unused (NDLZ codes single bytes).

    Returns
    -------
    int
        ``len(dst)``, or -1 if the stream is corrupt or truncated (``dst`` is then partly
        written).
    """
    cdef Py_ssize_t bs0, bs1, r
    bs0, bs1 = _check(blockshape, cell, typesize)
    if dst.shape[0] != bs0 * bs1:
        raise ValueError(f"dst must hold the {bs0 * bs1} bytes of a {bs0}x{bs1} block stream, "
                         f"got {dst.shape[0]}")
    if src.shape[0] < HEADER:
        return -1
    with nogil:
        if cell == 4:
            r = _decode4(&src[0], src.shape[0], &dst[0], dst.shape[0])
        else:
            r = _decode8(&src[0], src.shape[0], &dst[0], dst.shape[0])
    return r


def compress(const uint8_t[::1] src, uint8_t[::1] dst, blockshape, int cell,
             Py_ssize_t typesize, int clevel):
    """Encode one block stream as c-blosc2's NDLZ codec does, byte for byte.

    Parameters
    ----------
    src : bytes-like
        Exactly ``blockshape[0] * blockshape[1]`` bytes (c-blosc2 fails otherwise: items
        wider than a byte need split blocks, one stream per byte).
    dst : writable uint8 buffer
        Output. The capacity used is ``min(len(dst), len(src))``, which is c-blosc2's
        ``maxout`` for a stream as long as the chunk has room; give the smaller capacity
        c-blosc2 would when it has not, to get its result. At least 9 bytes (c-blosc2
        fails the chunk below that).
    blockshape : (int, int)
        The b2nd blockshape (written into the stream).
    cell : int
        codec_meta: 4 or 8.
    typesize : int
        Checked to be >= 1, otherwise unused.
    clevel : int
        Checked to be in 0..9, otherwise unused (NDLZ has no levels).

    Returns
    -------
    int
        The stream's size, or 0 where c-blosc2 stores the stream raw: when its codec gives
        up, and when the result would be as long as the input (a csize equal to the stream
        size means "raw" in a chunk). Runs of one byte never reach the codec in c-blosc2
        (the chunk layer codes them); here they compress like any other data.
    """
    cdef Py_ssize_t bs0, bs1, n, maxout, r
    cdef Tables tables   # 48 kB, as c-blosc2 keeps them on its stack too
    bs0, bs1 = _check(blockshape, cell, typesize)
    if clevel < 0 or clevel > 9:
        raise ValueError(f"clevel must be in 0..9, got {clevel}")
    n = src.shape[0]
    if n != bs0 * bs1:
        raise ValueError(f"NDLZ codes {bs0}x{bs1} = {bs0 * bs1} bytes per stream, got {n} "
                         f"(for typesize > 1 the block must be split into one stream per "
                         f"byte, as c-blosc2 requires)")
    maxout = min(dst.shape[0], n)
    if maxout < HEADER:
        raise ValueError(f"NDLZ needs an output of at least {HEADER} bytes, got {maxout}")
    with nogil:
        if cell == 4:
            r = _encode4(&src[0], bs0, bs1, &dst[0], maxout, &tables)
        else:
            r = _encode8(&src[0], bs0, bs1, &dst[0], maxout, &tables)
    return 0 if r >= n else r


def xxh32(const uint8_t[::1] data, uint32_t seed=0):
    """XXH32 of ``data`` (the hash NDLZ's encoder indexes its tables with; for tests)."""
    cdef Py_ssize_t n = data.shape[0]
    cdef uint8_t empty = 0
    cdef const uint8_t* p = &data[0] if n else &empty
    return _xxh32(p, n, seed)
