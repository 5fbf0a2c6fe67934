# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Byte loops of the two b2nd cell filters: NDCELL (filter id 32) and NDMEAN (filter id 33).

Both work on one block of a b2nd array, seen as an array of ``blockshape`` items of
``typesize`` bytes (the blockshape is the one of the array's "b2nd" metalayer; the filter
meta byte is the cell side ``c``). The block is cut into cells of side ``c`` in every
dimension; cells are visited in C order over ``ceil(blockshape / c)``, edge cells being
truncated to what is left of the block. NDCELL writes each cell's items one after the other
(C order inside the cell); NDMEAN (lossy) writes, for each cell, the cell's mean repeated
once per item of the cell, so its output has the cell layout too. Both decoders scatter the
cells back to the C layout, so an NDMEAN array reads back as the original with every cell
flattened to its mean.

Facts (read in c-blosc2 3.3.x, plugins/filters/ndcell/ndcell.c and ndmean/ndmean.c, and
checked byte for byte against python-blosc2 4.14.1, which bundles c-blosc2 3.3.5):

* both filters get the whole block (before any split into streams) and refuse, so that the
  chunk fails to compress or decompress, when the block's byte length is not
  ``prod(blockshape) * typesize``, when ``ndim`` is not 1..8 or a block side is < 1;
* NDCELL takes the meta byte as unsigned (cells 1..255) and refuses ``c**ndim`` greater
  than the number of items of the block (e.g. a 3x3 block with cell 4);
* NDMEAN reads the meta byte as signed (cells 1..127), clamps the cell side to the block
  side dimension by dimension, encodes only typesizes 4 and 8 (taken as float32 / float64
  whatever the dtype: an int32 array gets the means of its bit patterns read as floats),
  and decodes any typesize 1..127;
* NDMEAN sums a cell in the item type (float32 sums in float32), item by item in the
  order the cell is laid out, from +0.0, then divides by the item count; x86 NaN rules
  apply: the first NaN met (quieted) is the result, inf + -inf gives the negative default
  NaN;
* NDMEAN places every cell origin using the first dimension's clamped cell side. When the
  first block side is smaller than the cell and a later dimension holds more than one cell
  this is wrong: the encoder then reads overlapping cells (we reproduce its bytes), and the
  decoder's final size check fails (we raise, where c-blosc2 fails the chunk).

The ``def`` wrappers check everything above (with the GIL); after that the loops run on
raw pointers and, by construction of the geometry, stay inside the block.
"""

from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

import math


cdef enum:
    MAX_DIM = 8  # c-blosc2's NDCELL_MAX_DIM and NDMEAN_MAX_DIM (and B2ND_MAX_DIM)


cdef struct Geometry:
    # The block, once the trailing dimensions holding a single cell are folded into the
    # last dimension kept (a cell's rows along them are contiguous): a cell row is then
    # ``unit`` bytes times the cell's extent in dimension ``ndim - 1``.
    int ndim
    Py_ssize_t unit                 # bytes per step along the last kept dimension
    Py_ssize_t ncell[MAX_DIM]       # cells along each dimension
    Py_ssize_t side[MAX_DIM]        # cell side (clamped to the block side)
    Py_ssize_t edge[MAX_DIM]        # side of the last cell (block side % side, or side)
    Py_ssize_t ostep[MAX_DIM]       # bytes between the origins of neighbouring cells
    Py_ssize_t rstep[MAX_DIM]       # bytes between neighbouring rows (dims < ndim - 1)
    bint identity                   # cells are contiguous and in order: a plain copy


# --- geometry (with the GIL: every refusal happens here) ---------------------------------

cdef Geometry make_geometry(Py_ssize_t length, tuple blockshape, object typesize,
                            object cell, bint mean) except *:
    """Check the parameters as c-blosc2 does and lay out the cell walk."""
    cdef Geometry g
    cdef Py_ssize_t nd = len(blockshape), d, ts, c
    cdef Py_ssize_t bs[MAX_DIM]
    cdef Py_ssize_t stride[MAX_DIM]
    cdef Py_ssize_t mult, last
    # The checks run on Python ints, so no product can wrap around.
    name = "NDMEAN" if mean else "NDCELL"
    if nd < 1 or nd > MAX_DIM:
        raise ValueError(f"{name} needs 1 to {MAX_DIM} dimensions, blockshape has {nd}")
    if typesize < 1:
        raise ValueError(f"{name}: typesize must be >= 1, got {typesize}")
    # NDMEAN reads the meta byte as int8, NDCELL as uint8; 0 would divide by zero.
    if not 1 <= cell <= (127 if mean else 255):
        raise ValueError(f"{name}: cell side must be 1..{127 if mean else 255}, got {cell}")
    if any(v < 1 for v in blockshape):
        raise ValueError(f"{name}: block sides must be >= 1, got {blockshape}")
    items = math.prod(blockshape)
    if items * typesize != length:
        raise ValueError(f"{name}: block of {length} bytes, but blockshape {blockshape} "
                         f"of {typesize}-byte items needs {items * typesize}")
    # NDCELL wants a whole cell's worth of items in the block (cell ** ndim, unclamped);
    # NDMEAN makes the same check with clamped sides, which always passes.
    if not mean and cell ** nd > items:
        raise ValueError(f"NDCELL: a cell of {cell}**{nd} items is larger than the block "
                         f"({items} items)")
    # Everything now fits: each side and the typesize divide length.
    ts = typesize
    c = cell
    for d in range(nd):
        bs[d] = blockshape[d]

    stride[nd - 1] = 1
    for d in range(nd - 2, -1, -1):
        stride[d] = stride[d + 1] * bs[d + 1]
    for d in range(nd):
        g.side[d] = min(c, bs[d])
        g.ncell[d] = (bs[d] + g.side[d] - 1) // g.side[d]
        g.edge[d] = bs[d] % g.side[d] or g.side[d]
    # Cell origins: c-blosc2 multiplies every dimension's cell index by one side, the
    # cell for NDCELL (exact: a dimension where the cell is clamped has one cell) and the
    # clamped first side for NDMEAN (wrong in the case described in the docstring).
    mult = g.side[0] if mean else c
    for d in range(nd):
        g.ostep[d] = mult * stride[d] * ts
        g.rstep[d] = stride[d] * ts
    # Fold the trailing dimensions holding one cell: a cell spans them whole, so its
    # rows along them follow each other in memory and in c-blosc2's order.
    last = nd - 1
    while last > 0 and g.ncell[last] == 1:
        last -= 1
    g.ndim = last + 1
    g.unit = stride[last] * ts
    # With a single kept dimension the cells are consecutive slabs of the block.
    g.identity = last == 0
    return g


cdef check_buffers(const uint8_t[::1] src, uint8_t[::1] dst):
    if dst.shape[0] != src.shape[0]:
        raise ValueError(f"destination has {dst.shape[0]} bytes, source {src.shape[0]}")
    if src.shape[0] == 0:
        raise ValueError("empty block")
    cdef const uint8_t* s = &src[0]
    cdef const uint8_t* e = s + src.shape[0]
    cdef const uint8_t* d = &dst[0]
    if d < e and s < d + dst.shape[0]:
        raise ValueError("source and destination overlap")


cdef int check_decodable(const Geometry* g, Py_ssize_t length) except -1:
    """Refuse what c-blosc2's decoders refuse after their loop: one past the last row of
    the last cell must be the end of the block. Only NDMEAN's origin slip fails this
    (its origins then fall short, so nothing is written outside the block)."""
    cdef Py_ssize_t d, end = g.edge[g.ndim - 1] * g.unit
    for d in range(g.ndim):
        end += (g.ncell[d] - 1) * g.ostep[d]
        if d < g.ndim - 1:
            end += (g.edge[d] - 1) * g.rstep[d]
    if end != length:
        raise ValueError("NDMEAN: the first block side is smaller than the cell while a "
                         "later dimension holds several cells; c-blosc2 cannot decode "
                         "such blocks")
    return 0


# --- the cell walk --------------------------------------------------------------------

cdef inline void copy_run(uint8_t* d, const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # Runs are short (cell * typesize bytes); constant sizes let the compiler inline
    # the copy instead of calling memcpy for 16 bytes.
    if n == 16:
        memcpy(d, s, 16)
    elif n == 32:
        memcpy(d, s, 32)
    elif n == 8:
        memcpy(d, s, 8)
    elif n == 64:
        memcpy(d, s, 64)
    elif n == 4:
        memcpy(d, s, 4)
    else:
        memcpy(d, s, n)


cdef inline bint next_cell(const Geometry* g, Py_ssize_t* ii, Py_ssize_t* orig) noexcept nogil:
    """Step the cell odometer (C order); False after the last cell."""
    cdef int d = g.ndim - 1
    while d >= 0:
        ii[d] += 1
        orig[0] += g.ostep[d]
        if ii[d] < g.ncell[d]:
            return True
        orig[0] -= ii[d] * g.ostep[d]
        ii[d] = 0
        d -= 1
    return False


cdef void c_cells(const Geometry* g, const uint8_t* src, uint8_t* dst, Py_ssize_t length,
                  bint gather) noexcept nogil:
    """gather: the block (C layout) to the cell layout; otherwise back (scatter)."""
    cdef int nd = g.ndim, d
    cdef Py_ssize_t ii[MAX_DIM]
    cdef Py_ssize_t kk[MAX_DIM]
    cdef Py_ssize_t pad[MAX_DIM]
    cdef Py_ssize_t orig = 0, off, pos = 0, run, r, nrows
    if g.identity:
        memcpy(dst, src, length)
        return
    for d in range(nd):
        ii[d] = 0
    while True:
        # This cell: its extent and the byte offset of its first item.
        nrows = 1
        for d in range(nd):
            pad[d] = g.edge[d] if ii[d] == g.ncell[d] - 1 else g.side[d]
            if d < nd - 1:
                nrows *= pad[d]
                kk[d] = 0
        run = pad[nd - 1] * g.unit
        off = orig
        for r in range(nrows):
            if gather:
                copy_run(dst + pos, src + off, run)
            else:
                copy_run(dst + off, src + pos, run)
            pos += run
            # Next row: odometer over the cell's leading dimensions.
            d = nd - 2
            while d >= 0:
                kk[d] += 1
                off += g.rstep[d]
                if kk[d] < pad[d]:
                    break
                off -= pad[d] * g.rstep[d]
                kk[d] = 0
                d -= 1
        if not next_cell(g, ii, &orig):
            return


# NDMEAN sums. The hardware sum of a run is kept unless it came out NaN; then the run is
# summed again item by item with the x86 SSE rules spelled out, so the NaN payload is the
# same on every machine: the accumulator's NaN wins over the item's, a NaN comes out
# quieted, and inf + -inf gives the negative default NaN. A NaN accumulator stays what it
# is until the end of the cell (and through the division), so the caller stops summing.

ctypedef fused real:     # the item type of NDMEAN: float32 (typesize 4) or float64 (8)
    float
    double


cdef inline real load(const uint8_t* p, real like) noexcept nogil:
    cdef real x
    memcpy(&x, p, sizeof(real))
    return x


cdef inline real quieted(real x) noexcept nogil:
    """``x`` (a NaN) with its quiet bit set, its payload kept."""
    cdef uint32_t b32
    cdef uint64_t b64
    if real is float:
        memcpy(&b32, &x, 4)
        b32 |= 0x00400000u
        memcpy(&x, &b32, 4)
    else:
        memcpy(&b64, &x, 8)
        b64 |= 0x0008000000000000u
        memcpy(&x, &b64, 8)
    return x


cdef inline real default_nan(real like) noexcept nogil:
    """x86's default NaN (sign set, quiet), which inf + -inf gives."""
    cdef uint32_t b32 = 0xFFC00000u
    cdef uint64_t b64 = 0xFFF8000000000000u
    cdef real x
    if real is float:
        memcpy(&x, &b32, 4)
    else:
        memcpy(&x, &b64, 8)
    return x


cdef real sum_run(const uint8_t* p, Py_ssize_t n, real acc) noexcept nogil:
    """acc + p[0] + ... + p[n-1] in the item type, left to right (acc is not NaN)."""
    cdef real t = acc, x
    cdef Py_ssize_t k
    for k in range(n):
        t = t + load(p + sizeof(real) * k, acc)
    if t == t:
        return t
    t = acc
    for k in range(n):
        x = load(p + sizeof(real) * k, acc)
        if x != x:
            return quieted(x)
        t = t + x
        if t != t:
            return default_nan(x)
    return t


cdef void sum_runs(const uint8_t* pa, const uint8_t* pb, Py_ssize_t n, real* a,
                   real* b) noexcept nogil:
    """sum_run of two runs of two cells at once. Each sum is a chain of dependent adds
    (the order is c-blosc2's), so two chains side by side take the time of one."""
    cdef real ta = a[0], tb = b[0]
    cdef Py_ssize_t k
    for k in range(n):
        ta = ta + load(pa + sizeof(real) * k, ta)
        tb = tb + load(pb + sizeof(real) * k, tb)
    a[0] = ta if ta == ta else sum_run(pa, n, a[0])
    b[0] = tb if tb == tb else sum_run(pb, n, b[0])


cdef void c_mean_encode(const Geometry* g, const uint8_t* src, uint8_t* dst,
                        real* m) noexcept nogil:
    """Each cell (walked as in c_cells' gather) becomes its mean repeated per item; ``m``
    holds two sums of the item type (which picks it).

    When the next cell along the last dimension has the same extent, the two are summed
    together (cell B lies ``ostep[nd - 1]`` bytes after cell A, row for row)."""
    cdef int nd = g.ndim, d, c
    cdef Py_ssize_t ii[MAX_DIM]
    cdef Py_ssize_t kk[MAX_DIM]
    cdef Py_ssize_t pad[MAX_DIM]
    cdef Py_ssize_t orig = 0, off, pos = 0, run, r, nrows, count, k, bstep = g.ostep[nd - 1]
    cdef Py_ssize_t typesize = sizeof(real)
    cdef bint nan[2]
    cdef bint pair, more = True
    for d in range(nd):
        ii[d] = 0
    while more:
        nrows = 1
        for d in range(nd):
            pad[d] = g.edge[d] if ii[d] == g.ncell[d] - 1 else g.side[d]
            if d < nd - 1:
                nrows *= pad[d]
                kk[d] = 0
        # B exists and is not a narrower edge cell.
        pair = (ii[nd - 1] + 1 < g.ncell[nd - 1]
                and (ii[nd - 1] + 2 < g.ncell[nd - 1] or g.edge[nd - 1] == g.side[nd - 1]))
        run = pad[nd - 1] * g.unit // typesize    # items per row
        count = nrows * run
        m[0] = m[1] = 0
        nan[0] = False
        nan[1] = not pair   # no cell B: treat it as finished
        off = orig
        for r in range(nrows):
            if not nan[0] and not nan[1]:
                sum_runs(src + off, src + off + bstep, run, &m[0], &m[1])
            elif not nan[0]:
                m[0] = sum_run(src + off, run, m[0])
            elif not nan[1]:
                m[1] = sum_run(src + off + bstep, run, m[1])
            nan[0] = m[0] != m[0]
            nan[1] = nan[1] or m[1] != m[1]
            if nan[0] and nan[1]:
                break
            d = nd - 2
            while d >= 0:
                kk[d] += 1
                off += g.rstep[d]
                if kk[d] < pad[d]:
                    break
                off -= pad[d] * g.rstep[d]
                kk[d] = 0
                d -= 1
        # Division by the item count in the item type, as c-blosc2 does (a NaN sum stays
        # as it is); then the mean once per item of the cell.
        for c in range(2 if pair else 1):
            if m[c] == m[c]:
                m[c] = m[c] / <real>count
            for k in range(count):
                memcpy(dst + pos + typesize * k, &m[c], typesize)
            pos += count * typesize
            more = next_cell(g, ii, &orig)


# --- Python entry points ------------------------------------------------------------------

def ndcell_encode(const uint8_t[::1] src, uint8_t[::1] dst, tuple blockshape, typesize, cell):
    """NDCELL forward: lay the block out cell by cell (``cell`` = the filter meta byte)."""
    check_buffers(src, dst)
    cdef Geometry g = make_geometry(src.shape[0], blockshape, typesize, cell, False)
    with nogil:
        c_cells(&g, &src[0], &dst[0], src.shape[0], True)


def ndcell_decode(const uint8_t[::1] src, uint8_t[::1] dst, tuple blockshape, typesize, cell):
    """NDCELL backward: put the cells back in the block's C layout."""
    check_buffers(src, dst)
    cdef Geometry g = make_geometry(src.shape[0], blockshape, typesize, cell, False)
    with nogil:
        c_cells(&g, &src[0], &dst[0], src.shape[0], False)


def ndmean_encode(const uint8_t[::1] src, uint8_t[::1] dst, tuple blockshape, typesize, cell):
    """NDMEAN forward (lossy): each cell, in cell order, as its mean repeated per item.
    Items are float32 (typesize 4) or float64 (typesize 8), whatever the array's dtype."""
    if typesize != 4 and typesize != 8:
        raise ValueError(f"NDMEAN only encodes typesize 4 or 8 (float32/float64), "
                         f"got {typesize}")
    check_buffers(src, dst)
    cdef Geometry g = make_geometry(src.shape[0], blockshape, typesize, cell, True)
    cdef Py_ssize_t ts = typesize
    cdef float m32[2]
    cdef double m64[2]
    with nogil:
        if ts == 4:
            c_mean_encode(&g, &src[0], &dst[0], m32)
        else:
            c_mean_encode(&g, &src[0], &dst[0], m64)


def ndmean_decode(const uint8_t[::1] src, uint8_t[::1] dst, tuple blockshape, typesize, cell):
    """NDMEAN backward: the same scatter as NDCELL's (the means are already in place)."""
    # c-blosc2 keeps the decoder's typesize in an int8.
    if typesize > 127:
        raise ValueError(f"NDMEAN decodes typesizes 1..127, got {typesize}")
    check_buffers(src, dst)
    cdef Geometry g = make_geometry(src.shape[0], blockshape, typesize, cell, True)
    check_decodable(&g, src.shape[0])
    with nogil:
        c_cells(&g, &src[0], &dst[0], src.shape[0], False)
