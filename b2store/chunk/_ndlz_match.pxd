# NDLZ's match search: c-blosc2's hash tables of earlier literal cells and the order in which
# its encoder tries whole cells, sets of rows and row runs. That order, its tie breaks and its
# deferred table updates decide the bytes of a stream, so they are followed exactly here (see
# _ndlz.pyx for the format). Inline functions, compiled into the NDLZ kernel that cimports them.
from libc.stdint cimport uint8_t, uint32_t
from libc.string cimport memcmp, memcpy, memset

from b2store.chunk._xxh32 cimport xxh32


cdef enum:
    HASH_SHIFT = 20     # 32 - 12: c-blosc2 indexes its tables with the top 12 bits of XXH32
    TABLE = 4096
    FAR = 65535         # matches this far or farther are not taken (u16 offsets)


cdef struct Tables:
    # stream positions + 1 of earlier literal cells, by the slot of a cell, 3 rows, 2 rows
    uint32_t cell[TABLE]
    uint32_t triple[TABLE]
    uint32_t pair[TABLE]


cdef inline uint32_t hash_slot(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    return xxh32(p, n, 1) >> HASH_SHIFT


cdef inline void wr16(uint8_t* p, Py_ssize_t v) noexcept nogil:
    p[0] = <uint8_t>v
    p[1] = <uint8_t>(v >> 8)


cdef inline bint same(const uint8_t* a, const uint8_t* b, size_t n) noexcept nogil:
    return memcmp(a, b, n) == 0


cdef inline uint32_t rows_slot(const uint8_t* cell, int i, int j, uint32_t* cache) noexcept nogil:
    """Table slot of rows i and j of a 4x4 cell, hashed once per cell."""
    cdef uint8_t rows[8]
    if cache[4 * i + j] == 0xFFFFFFFFU:
        memcpy(rows, cell + 4 * i, 4)
        memcpy(rows + 4, cell + 4 * j, 4)
        cache[4 * i + j] = hash_slot(rows, 8)
    return cache[4 * i + j]


cdef inline bint same_rows(const uint8_t* cell, int i, int j, const uint8_t* ref) noexcept nogil:
    return same(cell + 4 * i, ref, 4) and same(cell + 4 * j, ref + 4, 4)


cdef inline Py_ssize_t match4(const uint8_t* cell, uint8_t* out, Py_ssize_t anchor, Tables* tab,
                              uint32_t* upd_triple, uint32_t* hash_triple,
                              uint32_t* upd_pair, uint32_t* hash_pair) noexcept nogil:
    """Look for row matches of a 4x4 cell (no whole-cell match); write the token and payload
    at ``anchor`` and return the new output position, or 0 if nothing matched (the caller
    then writes a literal and applies the table updates gathered here)."""
    cdef uint8_t rows[12]
    cdef uint32_t slot, t, t2
    cdef uint32_t cache[16]     # pair slots by 4 * first row + second (phases 1 and 3)
    cdef Py_ssize_t dist, op = anchor
    cdef int i, j, k, l, m
    memset(cache, 0xFF, sizeof(cache))
    # 1. Row 0 with row j, and the two other rows with each other: two references.
    for j in range(1, 4):
        t = tab.pair[rows_slot(cell, 0, j, cache)]
        if t == 0 or not same_rows(cell, 0, j, out + t) or anchor - t >= FAR:
            continue
        l = 2 if j == 1 else 1
        m = 2 if j == 3 else 3
        t2 = tab.pair[rows_slot(cell, l, m, cache)]
        if t2 == 0 or not same_rows(cell, l, m, out + t2):
            continue
        # c-blosc2 measures this one from row l of the cell, but writes it from the token.
        dist = anchor + 4 * l - t2
        if dist <= 0 or dist >= FAR:
            continue
        out[op] = <uint8_t>(32 | (j << 3))
        wr16(out + op + 1, anchor - t)
        wr16(out + op + 3, anchor - t2)
        return op + 5
    # 2. Three rows; the consecutive triples (0,1,2) and (1,2,3) are remembered when unseen.
    for i in range(2):
        for j in range(i + 1, 3):
            for k in range(j + 1, 4):
                memcpy(rows, cell + 4 * i, 4)
                memcpy(rows + 4, cell + 4 * j, 4)
                memcpy(rows + 8, cell + 4 * k, 4)
                slot = hash_slot(rows, 12)
                t = tab.triple[slot]
                if t == 0:
                    if j == i + 1 and k == j + 1:
                        upd_triple[i] = <uint32_t>(anchor + 1 + 4 * i)
                        hash_triple[i] = slot
                    continue
                if not same(rows, out + t, 12):
                    continue
                dist = anchor + 4 * i - t
                if dist <= 0 or dist >= FAR:
                    continue
                out[op] = 224 if i == 1 else <uint8_t>(224 | ((j + k - 2) << 3))
                wr16(out + op + 1, anchor - t)
                l = 6 - i - j - k          # the row left out (rows sum to 6)
                memcpy(out + op + 3, cell + 4 * l, 4)
                return op + 7
    # 3. Two rows; the consecutive pairs (0,1), (1,2), (2,3) are remembered when unseen.
    for i in range(3):
        for j in range(i + 1, 4):
            slot = rows_slot(cell, i, j, cache)
            t = tab.pair[slot]
            if t == 0:
                if j == i + 1:
                    upd_pair[i] = <uint32_t>(anchor + 1 + 4 * i)
                    hash_pair[i] = slot
                continue
            if not same_rows(cell, i, j, out + t):
                continue
            dist = anchor + 4 * i - t
            if dist <= 0 or dist >= FAR:
                continue
            out[op] = 128 if i == 2 else <uint8_t>(128 | (i << 5) | (j << 3))
            wr16(out + op + 1, anchor - t)
            op += 3
            for k in range(4):
                if k != i and k != j:
                    memcpy(out + op, cell + 4 * k, 4)
                    op += 4
            return op
    return 0


cdef inline Py_ssize_t match_run8(const uint8_t* cell, uint8_t* out, Py_ssize_t anchor,
                                   uint32_t* table, uint32_t* upd, uint32_t* hashes,
                                   int span, int token) noexcept nogil:
    """``span`` consecutive rows of an 8x8 cell matched in ``table`` (token ``token + first
    row``, then the other rows as literals); 0 if none, the unseen ones remembered."""
    cdef uint32_t slot, t
    cdef Py_ssize_t dist, op = anchor
    cdef int i, l
    for i in range(9 - span):
        slot = hash_slot(cell + 8 * i, 8 * span)
        t = table[slot]
        if t == 0:
            upd[i] = <uint32_t>(anchor + 1 + 8 * i)
            hashes[i] = slot
            continue
        if not same(cell + 8 * i, out + t, 8 * span):
            continue
        dist = anchor + 8 * i - t
        if dist <= 0 or dist >= FAR:
            continue
        out[op] = <uint8_t>(token + i)
        wr16(out + op + 1, anchor - t)
        op += 3
        for l in range(8):
            if l < i or l >= i + span:
                memcpy(out + op, cell + 8 * l, 8)
                op += 8
        return op
    return 0


cdef inline Py_ssize_t match8(const uint8_t* cell, uint8_t* out, Py_ssize_t anchor, Tables* tab,
                              uint32_t* upd_triple, uint32_t* hash_triple,
                              uint32_t* upd_pair, uint32_t* hash_pair) noexcept nogil:
    """As :func:`match4` for 8x8 cells: three then two consecutive rows."""
    cdef Py_ssize_t op = match_run8(cell, out, anchor, tab.triple, upd_triple, hash_triple,
                                    3, 168)
    if op:
        return op
    return match_run8(cell, out, anchor, tab.pair, upd_pair, hash_pair, 2, 136)

