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
they are followed exactly (the search is in ``_ndlz_match.pxd``). c-blosc2 gives up (the
caller stores the block raw) when the block is shorter than one cell, when the output
capacity is below ``17 + 2 * (n // cell**2 - 1)``, when fewer than ``cell**2 + 1`` bytes
remain free before a cell, or when the stream outgrows the block.

NDLZ knows nothing of items: c-blosc2's encoder fails unless the stream is exactly
``bs0 * bs1`` bytes, so arrays of typesize > 1 must be written with split blocks (one
stream per byte of the item, best after SHUFFLE); typesize and clevel are not used by the
codec. Every read and write of the decoder is checked against its buffer first: a hostile
stream yields -1, never an access out of bounds.
"""

from libc.stdint cimport uint8_t, uint16_t, uint32_t, int32_t
from libc.string cimport memcpy, memset, memcmp

from b2store.chunk._ndlz_match cimport FAR, Tables, hash_slot, match4, match8, same, wr16
from b2store.chunk._xxh32 cimport le32, xxh32 as c_xxh32


DEF HEADER = 9               # ndim byte + two int32 extents


# --- small helpers -------------------------------------------------------------------------

cdef inline uint32_t _rd16(const uint8_t* p) noexcept nogil:
    return <uint32_t>p[0] | (<uint32_t>p[1] << 8)


cdef inline void _wr32(uint8_t* p, Py_ssize_t v) noexcept nogil:
    p[0] = <uint8_t>v
    p[1] = <uint8_t>(v >> 8)
    p[2] = <uint8_t>(v >> 16)
    p[3] = <uint8_t>(v >> 24)


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


# --- cells ---------------------------------------------------------------------------------
# The encoder and the decoder are each written once, over the cell: a fused type whose two
# members are the 4x4 and 8x8 cells' buffers. Cython compiles one copy per cell side, in which
# the side is a constant (as it was in the two hand-written copies), so the C compiler unrolls
# the row copies and hashes just the same. Only the row-match tokens differ by side.

ctypedef struct Cell4:
    uint8_t b[16]

ctypedef struct Cell8:
    uint8_t b[64]

ctypedef fused Cell:
    Cell4
    Cell8


# --- encoder ---------------------------------------------------------------------------------

cdef Py_ssize_t _encode(const uint8_t* ip, Py_ssize_t bs0, Py_ssize_t bs1, uint8_t* out,
                        Py_ssize_t maxout, Tables* tab, Cell* buf) noexcept nogil:
    """One stream of ``S x S`` cells (``buf``: their scratch, which picks S); 0 if c-blosc2
    gives up."""
    cdef Py_ssize_t S = 4 if Cell is Cell4 else 8
    cdef Py_ssize_t n = bs0 * bs1, nr = (bs0 + S - 1) // S, nc = (bs1 + S - 1) // S
    cdef Py_ssize_t r, c, q, op, orig, anchor, dist, nop
    cdef uint8_t* cell = buf.b
    # The S - 2 triples and S - 1 pairs of consecutive rows a literal cell enters in the
    # tables. Pending updates are cleared per cell, but the slots they go to are not:
    # c-blosc2 writes a remembered triple/pair slot back whenever the first one is set, so a
    # slot hashed in an earlier cell can be overwritten (with 0). Keeping them reproduces that.
    cdef uint32_t upd_triple[6]
    cdef uint32_t hash_triple[6]
    cdef uint32_t upd_pair[7]
    cdef uint32_t hash_pair[7]
    cdef uint32_t hc, t
    if n < S * S or maxout < 17 + (n // (S * S) - 1) * 2:
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
            memset(upd_triple, 0, (S - 2) * sizeof(uint32_t))
            memset(upd_pair, 0, (S - 1) * sizeof(uint32_t))
            if op + S * S + 1 > maxout:
                return 0
            orig = r * S * bs1 + c * S
            if (r == nr - 1 and bs0 % S) or (c == nc - 1 and bs1 % S):
                op = _literal_edge(ip, bs1, orig, _edge(bs0, r, nr, S), _edge(bs1, c, nc, S),
                                   out, op)
            else:
                for q in range(S):
                    memcpy(cell + S * q, ip + orig + q * bs1, S)
                anchor = op
                hc = hash_slot(cell, S * S)
                t = tab.cell[hc]
                dist = anchor - t if (t != 0 and same(cell, out + t, S * S)) else 0
                if _uniform(cell, S * S):
                    out[op] = 64
                    out[op + 1] = cell[0]
                    op += 2
                elif dist != 0 and dist < FAR:
                    out[op] = 192
                    wr16(out + op + 1, dist)
                    op += 3
                else:
                    if Cell is Cell4:
                        nop = match4(cell, out, anchor, tab, upd_triple, hash_triple,
                                     upd_pair, hash_pair)
                    else:
                        nop = match8(cell, out, anchor, tab, upd_triple, hash_triple,
                                     upd_pair, hash_pair)
                    if nop:
                        op = nop
                    else:
                        # Only literal cells enter the tables (their bytes are referenced).
                        tab.cell[hc] = <uint32_t>(anchor + 1)
                        if upd_triple[0]:
                            for q in range(S - 2):
                                tab.triple[hash_triple[q]] = upd_triple[q]
                        if upd_pair[0]:
                            for q in range(S - 1):
                                tab.pair[hash_pair[q]] = upd_pair[q]
                        out[op] = 0
                        memcpy(out + op + 1, cell, S * S)
                        op += S * S + 1
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
    a = <int32_t>le32(ip + 1)
    b = <int32_t>le32(ip + 5)
    if a <= 0 or b <= 0 or <Py_ssize_t>a * b != olen:
        return -1
    bs0[0] = a
    bs1[0] = b
    return 0


cdef inline void _put_cell(uint8_t* op, Py_ssize_t orig, Py_ssize_t bs1, const uint8_t* src,
                           Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t cell) noexcept nogil:
    # The source is read with a row stride of ``cols``, as c-blosc2 does, also for the cut
    # cells of a hostile stream whose row tokens filled a full-width buffer. (Inlined with a
    # constant ``cell``: full rows are copies of a known size.)
    cdef Py_ssize_t q
    if cols == cell:
        for q in range(rows):
            memcpy(op + orig + q * bs1, src + cell * q, cell)
    else:
        for q in range(rows):
            memcpy(op + orig + q * bs1, src + q * cols, cols)


cdef inline Py_ssize_t _rows4(const uint8_t* ip, Py_ssize_t n, Py_ssize_t cur, Py_ssize_t pos,
                              uint32_t token, uint8_t* buf) noexcept nogil:
    """A 4x4 cell of row-match token ``token`` (at ``cur``) into ``buf``; the position after
    its payload, or -1 for another token or a reference out of the stream."""
    cdef Py_ssize_t b1, b2
    cdef int i, j, k, l, m, q, hi
    if token >= 224 or 128 <= token <= 191:
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
            l = 6 - i - j - k
            if not _fits(pos, 4, n):
                return -1
            memcpy(buf + 4 * l, ip + pos, 4)
            return pos + 4
        if token == 128:
            i = 2
            j = 3
        else:
            i = (token - 128) >> 5
            j = ((token - 128) >> 3) - (i << 2)
        if not _fits(b1, 8, n):
            return -1
        # A hostile token may name one row twice: the second copy wins and the three other
        # rows are literals.
        memcpy(buf + 4 * i, ip + b1, 4)
        memcpy(buf + 4 * j, ip + b1 + 4, 4)
        for q in range(4):
            if q != i and q != j:
                if not _fits(pos, 4, n):
                    return -1
                memcpy(buf + 4 * q, ip + pos, 4)
                pos += 4
        return pos
    if 40 <= token <= 63:
        if not _fits(pos, 4, n):
            return -1
        b1 = cur + 5 - <Py_ssize_t>((_rd16(ip + pos) + 5) & 0xFFFF)
        b2 = cur + 5 - <Py_ssize_t>((_rd16(ip + pos + 2) + 5) & 0xFFFF)
        j = (token - 32) >> 3
        l = 2 if j == 1 else 1
        m = 2 if j == 3 else 3
        if not _fits(b1, 8, n) or not _fits(b2, 8, n):
            return -1
        memcpy(buf, ip + b1, 4)
        memcpy(buf + 4 * j, ip + b1 + 4, 4)
        memcpy(buf + 4 * l, ip + b2, 4)
        memcpy(buf + 4 * m, ip + b2 + 4, 4)
        return pos + 4
    return -1


cdef inline Py_ssize_t _rows8(const uint8_t* ip, Py_ssize_t n, Py_ssize_t cur, Py_ssize_t pos,
                              uint32_t token, uint8_t* buf) noexcept nogil:
    """As :func:`_rows4` for an 8x8 cell."""
    cdef Py_ssize_t b1
    cdef int row, span, l
    if (token >> 3) != 21 and (token >> 3) != 17:
        return -1
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
    return pos


cdef Py_ssize_t _decode(const uint8_t* ip, Py_ssize_t n, uint8_t* op, Py_ssize_t olen,
                        Cell* cellbuf) noexcept nogil:
    """Decode a stream of ``S x S`` cells (``cellbuf`` picks S); ``olen`` or -1."""
    cdef Py_ssize_t S = 4 if Cell is Cell4 else 8
    cdef Py_ssize_t bs0, bs1, nr, nc, r, c, rows, cols, cur, pos, b1, k
    cdef uint8_t* buf = cellbuf.b
    cdef const uint8_t* src
    cdef uint32_t token
    if _shape(ip, n, olen, &bs0, &bs1) < 0:
        return -1
    nr = (bs0 + S - 1) // S
    nc = (bs1 + S - 1) // S
    pos = HEADER
    for r in range(nr):
        rows = _edge(bs0, r, nr, S)
        for c in range(nc):
            cols = _edge(bs1, c, nc, S)
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
                memset(buf, ip[pos], S * S)
                src = buf
                pos += 1
            else:
                if Cell is Cell4:
                    pos = _rows4(ip, n, cur, pos, token, buf)
                else:
                    pos = _rows8(ip, n, cur, pos, token, buf)
                if pos < 0:
                    return -1
                src = buf
            _put_cell(op, r * S * bs1 + c * S, bs1, src, rows, cols, S)
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
    cdef Cell4 c4
    cdef Cell8 c8
    bs0, bs1 = _check(blockshape, cell, typesize)
    if dst.shape[0] != bs0 * bs1:
        raise ValueError(f"dst must hold the {bs0 * bs1} bytes of a {bs0}x{bs1} block stream, "
                         f"got {dst.shape[0]}")
    if src.shape[0] < HEADER:
        return -1
    with nogil:
        if cell == 4:
            r = _decode(&src[0], src.shape[0], &dst[0], dst.shape[0], &c4)
        else:
            r = _decode(&src[0], src.shape[0], &dst[0], dst.shape[0], &c8)
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
    cdef Cell4 c4
    cdef Cell8 c8
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
            r = _encode(&src[0], bs0, bs1, &dst[0], maxout, &tables, &c4)
        else:
            r = _encode(&src[0], bs0, bs1, &dst[0], maxout, &tables, &c8)
    return 0 if r >= n else r


def xxh32(const uint8_t[::1] data, uint32_t seed=0):
    """XXH32 of ``data`` (the hash NDLZ's encoder indexes its tables with; for tests)."""
    cdef Py_ssize_t n = data.shape[0]
    cdef uint8_t empty = 0
    cdef const uint8_t* p = &data[0] if n else &empty
    return c_xxh32(p, n, seed)
