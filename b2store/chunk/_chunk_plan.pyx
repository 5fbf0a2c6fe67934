# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""One chunk of the common kind, checked, walked and decoded in C with no Python in between
(:class:`Plan`): the fast path :func:`b2store.chunk.native.quick_decode` takes for whole chunks.

Its header is checked here as :class:`~b2store.chunk.header.ChunkHeader` and
:class:`~b2store.chunk.decoder.ChunkDecoder` check it, for this kind only; every stream is
walked by :mod:`b2store.chunk._decode_blocks` before anything is inflated, and decoded by its
block loop (declared in ``_decode_blocks.pxd``). Nothing here raises on bad bytes: a chunk
this plan does not take, or that breaks the format, leaves ``ok`` false and the Python path
names what is wrong.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from b2store.chunk._decode_blocks cimport (
    BITSHUFFLE,
    BYTEDELTA,
    BYTEDELTA_BUGGY,
    DELTA,
    F_BLOSCLZ,
    F_LZ4,
    F_ZLIB,
    F_ZSTD,
    INT_TRUNC,
    SHUFFLE,
    TRUNC_PREC,
    Job,
    Scratch,
    _run_blocks,
    _walk,
    b2b_next,
    can_decode,
    natives,
    read_i32,
)


DEF EXTENDED = 0x05
DEF MEMCPYED = 0x02
DEF DONT_SPLIT = 0x10
DEF HEADER = 32
DEF BLOSC1_HEADER = 16
DEF LAST_BLOSC1_VERSION = 2
# c-blosc1 split a block only of items of at most 16 bytes, and at least 128 of them.
DEF BLOSC1_MAX_SPLITS = 16
DEF BLOSC1_MIN_ITEMS = 128
# The filters of a 16-byte header are flag bits (byte 2).
DEF SHUFFLE_FLAG = 0x01
DEF BITSHUFFLE_FLAG = 0x04
DEF DELTA_FLAG = 0x08
DEF MAX_BLOCKSIZE = 536866816


cdef inline bint start_ok(int64_t start, int64_t end, Py_ssize_t cbytes) noexcept nogil:
    """A block's bytes ``[start, end)`` inside the chunk (and not empty)."""
    return start < end <= cbytes


cdef void _copy_blocks(const Job* J, uint8_t* dest, Py_ssize_t n, int64_t* counter) noexcept nogil:
    """A raw chunk's items, block by block (threads sharing ``counter``)."""
    cdef Py_ssize_t i, size
    while True:
        i = b2b_next(counter)
        if i >= n:
            break
        size = J.nbytes - i * J.blocksize
        if size > J.blocksize:
            size = J.blocksize
        memcpy(dest + i * J.blocksize, J.src + HEADER + i * J.blocksize, size)




cdef class Plan:
    """A chunk of the common kind checked and walked in C: a Blosc2 header of version 4-6
    with no dictionary, special value or VL blocks; BloscLZ, LZ4, zlib or Zstd; shuffle,
    bit-shuffle, bytedelta and DELTA as its only filters (truncations have nothing to undo;
    DELTA's block 0 is decoded first, see :meth:`first`); or
    stored raw (memcpyed); or a Blosc1 chunk (version 1-2, a 16-byte header, as numcodecs
    writes) of those codecs and filters whose header alone says whether its blocks are
    split. Decoding it takes no Python per block or per
    stream, and one call per thread.

    ``Plan(src, blocks, ends)`` walks and decodes only ``blocks`` (ascending), each block's
    streams checked to lie before its ``ends`` entry: the other blocks' bytes in ``src`` are
    never looked at, so a partial read need not have them (nor zeros in their place). A
    chunk with DELTA is not taken so: its blocks need block 0, which the caller did not read.

    ``Plan(src)`` leaves ``ok`` false for any other chunk, or for one that breaks the
    format anywhere: :class:`~b2store.chunk.decoder.ChunkDecoder` then decodes it or names
    what is wrong. Threads running :meth:`run` on one plan split its blocks.
    """

    def __cinit__(self, const uint8_t[::1] src, const int64_t[::1] blocks=None,
                  const int64_t[::1] ends=None):
        self._src = src
        if blocks is not None:
            # Only these blocks (ascending, each once), each read no further than its end:
            # the other blocks' bytes need not be in ``src`` (a partial read).
            if ends is None or blocks.shape[0] == 0:
                return
            self._blocks, self._ends, self.partial = blocks, ends, True
        self.ok = self._plan(src.shape[0]) == 0

    def __dealloc__(self):
        free(self.table)

    cdef int _plan(self, Py_ssize_t buflen) except -2:
        cdef const uint8_t* p
        cdef Py_ssize_t version, flags, ts, nbytes, bs, cbytes, nb, nstreams, starts_end, j
        cdef Py_ssize_t start, fmt, k, fid
        cdef int64_t* bstarts
        cdef int rc
        memset(&self.J, 0, sizeof(Job))
        if buflen < BLOSC1_HEADER:
            return -1
        p = &self._src[0]
        version, flags, ts = p[0], p[2], p[3]
        nbytes, bs, cbytes = read_i32(p + 4), read_i32(p + 8), read_i32(p + 12)
        fmt = flags >> 5
        if 1 <= version <= LAST_BLOSC1_VERSION and flags & EXTENDED != EXTENDED:
            return -1 if self.partial else self._plan_blosc1(buflen)
        # The checks of ChunkHeader._check and ChunkDecoder._read_layout, for this kind only.
        if (buflen < HEADER or not 4 <= version <= 6 or flags & EXTENDED != EXTENDED
                or p[30] != 0 or p[31] != 0 or ts == 0 or nbytes <= 0 or bs <= 0
                or bs > MAX_BLOCKSIZE or cbytes < HEADER or cbytes > buflen
                or not (fmt == F_BLOSCLZ or fmt == F_LZ4 or fmt == F_ZLIB or fmt == F_ZSTD)):
            return -1
        if flags & MEMCPYED:
            # Stored raw: the items follow the header, exactly nbytes of them.
            if cbytes != nbytes + HEADER or self.partial:
                return -1
            self.raw = True
            self.J.src, self.J.srclen = p, cbytes
            bs = min(bs, nbytes)
            self.J.nbytes, self.J.blocksize = nbytes, bs
            self.nbytes, self.nblocks = nbytes, (nbytes + bs - 1) // bs
            return 0
        if not can_decode(fmt, False):
            return -1
        if fmt == F_ZSTD and natives().zstd_frame_content_size == NULL:
            return -1
        self.J.nsteps = 0
        for k in range(5, -1, -1):  # the slots are undone last first
            fid = p[16 + k]
            if (fid == SHUFFLE or fid == BITSHUFFLE or fid == BYTEDELTA
                    or fid == BYTEDELTA_BUGGY or fid == DELTA):
                self.J.fids[self.J.nsteps] = <int>fid
                self.J.metas[self.J.nsteps] = p[24 + k]
                self.J.nsteps += 1
                # DELTA codes every block against block 0 decoded: a partial read would
                # need block 0 too, which its caller did not read.
                if fid == DELTA:
                    if self.partial:
                        return -1
                    self.delta = True
            elif not (fid == 0 or fid == TRUNC_PREC or fid == INT_TRUNC):
                return -1
        if bs > nbytes:
            bs = nbytes
        # Blosc2 headers split full blocks unless told not to; items of one byte never.
        nstreams = ts if ts > 1 and not flags & DONT_SPLIT else 1
        return self._walk_blocks(HEADER, nbytes, bs, cbytes, ts, nstreams, fmt)

    cdef int _plan_blosc1(self, Py_ssize_t buflen) except -2:
        # A 16-byte header: its filters are flag bits (ChunkHeader.pipeline), and whether
        # full blocks are split is c-blosc1's rule (ChunkHeader.splits); where that rule says
        # "not split" with no flag saying so, only the bytes can tell (older writers split
        # by other rules), and ChunkDecoder reads them.
        cdef const uint8_t* p = &self._src[0]
        cdef Py_ssize_t flags = p[2], ts = p[3], fmt = p[2] >> 5, nstreams
        cdef Py_ssize_t nbytes = read_i32(p + 4), bs = read_i32(p + 8)
        cdef Py_ssize_t cbytes = read_i32(p + 12)
        if (ts == 0 or nbytes <= 0 or bs <= 0 or bs > MAX_BLOCKSIZE or cbytes < BLOSC1_HEADER
                or cbytes > buflen or flags & (MEMCPYED | DELTA_FLAG)
                or not (fmt == F_BLOSCLZ or fmt == F_LZ4 or fmt == F_ZLIB or fmt == F_ZSTD)):
            return -1
        if not can_decode(fmt, False):
            return -1
        if fmt == F_ZSTD and natives().zstd_frame_content_size == NULL:
            return -1
        self.J.nsteps = 0
        self.J.blosc1 = True  # (its bit-shuffle rules differ: see _undo)
        if flags & SHUFFLE_FLAG:
            self.J.fids[0], self.J.metas[0], self.J.nsteps = SHUFFLE, 0, 1
        elif flags & BITSHUFFLE_FLAG:
            self.J.fids[0], self.J.metas[0], self.J.nsteps = BITSHUFFLE, 0, 1
        if bs > nbytes:
            bs = nbytes
        if (ts > 1 and not flags & DONT_SPLIT and ts <= BLOSC1_MAX_SPLITS
                and bs // ts >= BLOSC1_MIN_ITEMS):
            nstreams = ts
        elif ts == 1 or flags & DONT_SPLIT or bs % ts:
            nstreams = 1
        else:
            return -1
        return self._walk_blocks(BLOSC1_HEADER, nbytes, bs, cbytes, ts, nstreams, fmt)

    cdef int _walk_blocks(self, Py_ssize_t hsize, Py_ssize_t nbytes, Py_ssize_t bs,
                          Py_ssize_t cbytes, Py_ssize_t ts, Py_ssize_t nstreams,
                          Py_ssize_t fmt) except -2:
        """Check the block starts after a ``hsize``-byte header and walk every stream."""
        cdef const uint8_t* p = &self._src[0]
        cdef Py_ssize_t nb, starts_end, j, start
        cdef int64_t* bstarts
        cdef int rc
        nb = (nbytes + bs - 1) // bs
        if nstreams > 1 and bs % ts:
            return -1
        starts_end = hsize + 4 * nb
        # Every stream takes at least its 4-byte size: more streams than that cannot be there
        # (and would make the table below a huge allocation for a small hostile chunk).
        if starts_end > cbytes or nb * nstreams > cbytes // 4:
            return -1
        if self.partial and self._ends.shape[0] != nb:
            return -1
        self.table = <int64_t*>malloc(nb * (3 + 2 * nstreams) * sizeof(int64_t))
        if self.table == NULL:
            return -1
        bstarts = self.table + nb * 2 * nstreams
        for j in range(nb):
            start = read_i32(p + hsize + 4 * j)
            if start < starts_end or start >= cbytes:
                return -1
            bstarts[j] = start
            bstarts[nb + j] = cbytes
            bstarts[2 * nb + j] = j
        if self.partial:
            for j in range(nb):
                if not start_ok(bstarts[j], self._ends[j], cbytes):
                    return -1
                bstarts[nb + j] = self._ends[j]
            for j in range(1, self._blocks.shape[0]):
                if self._blocks[j] <= self._blocks[j - 1]:
                    return -1
            with nogil:
                rc = _walk(p, cbytes, bstarts, nb, &self._blocks[0], self._blocks.shape[0],
                           bstarts + nb, nbytes, bs, nstreams, <int>fmt, self.table,
                           2 * nstreams)
        else:
            with nogil:
                rc = _walk(p, cbytes, bstarts, nb, bstarts + 2 * nb, nb, bstarts + nb, nbytes,
                           bs, nstreams, <int>fmt, self.table, 2 * nstreams)
        if rc:
            return -1
        self.J.src, self.J.srclen = p, cbytes
        self.J.nbytes, self.J.blocksize, self.J.full_nstreams = nbytes, bs, nstreams
        self.J.codec_format = <int>fmt
        self.J.table, self.J.tstride = self.table, 2 * nstreams
        self.J.typesize = ts
        self.needs_scratch = self.J.nsteps > 0
        self.nbytes, self.nblocks = nbytes, nb
        return 0

    def first(self, uint8_t[::1] dest, Scratch scratch not None):
        """Decode block 0 alone into ``dest`` (``nbytes`` long); 0 or -1. A chunk with
        DELTA needs it before threads share its other blocks (:meth:`run` refuses to
        start without it), as each of them is decoded against it."""
        if not self.ok or dest.shape[0] != self.nbytes:
            return -1
        return self._first(&dest[0], scratch)

    def run(self, uint8_t[::1] dest, Scratch scratch not None):
        """Decode blocks into ``dest`` (``nbytes`` long) until none are left; 0 or -1.
        A plan decodes once: its blocks are shared out to whichever threads run it."""
        if not self.ok or dest.shape[0] != self.nbytes or (self.delta and not self.first_done):
            return -1
        return self.decode_to(&dest[0], scratch)

    def run_alone(self, uint8_t[::1] dest, Scratch scratch not None):
        """Decode every block into ``dest`` (``nbytes`` long) in this thread alone, block 0
        first where DELTA needs it; 0 or -1. One call where :meth:`first` and :meth:`run`
        are two, for the one-thread decode, whose Python around the call is its fixed cost."""
        if not self.ok or dest.shape[0] != self.nbytes:
            return -1
        return self.decode_to(&dest[0], scratch)

    cdef int _first(self, uint8_t* dest, Scratch scratch):
        if not self.delta or self.first_done or self.raw or self.partial:
            return -1
        if self._decode(dest, scratch, 1, self.nbytes):
            return -1
        self.first_done = True
        self.counter = 1  # (the others start at block 1)
        return 0

    cdef int decode_to(self, uint8_t* dest, Scratch scratch):
        """:meth:`run` into ``nbytes`` bytes at ``dest``; for one thread alone (a chunk with
        DELTA decodes its block 0 first here, unless :meth:`first` did)."""
        if self.delta and self.nblocks > 1 and not self.first_done:
            if self._first(dest, scratch):
                return -1
        return self._decode(dest, scratch, self.nblocks, self.nbytes)

    cdef int decode_into(self, uint8_t* dest, Py_ssize_t dest_len, Scratch scratch):
        """:meth:`decode_to` into the ``dest_len`` bytes at ``dest``, each block at its place
        in the decoded chunk: fewer bytes than ``nbytes`` where a partial plan's blocks are
        the first ones (a chunk's part straight in its array), a block past them refused as
        a damaged one is. Not for DELTA (block 0 first) or raw chunks: -1."""
        if self.delta or self.raw or dest_len < 0 or dest_len > self.nbytes:
            return -1
        return self._decode(dest, scratch, self.nblocks, dest_len)

    cdef int _decode(self, uint8_t* dest, Scratch scratch, Py_ssize_t n, Py_ssize_t dest_len):
        """Blocks ``0..n-1`` (or the partial plan's) still left into ``dest`` (``dest_len``
        bytes of the decoded chunk from its start)."""
        cdef Job J = self.J
        cdef uint8_t* work = NULL
        cdef uint8_t* spare = NULL
        cdef uint8_t* tmp = NULL
        cdef void* dctx = NULL
        cdef int rc
        cdef const int64_t* which = NULL
        if not self.ok:
            return -1
        if self.raw:
            with nogil:
                _copy_blocks(&J, dest, self.nblocks, &self.counter)
            return 0
        J.dest, J.dest_base, J.dest_len = dest, 0, dest_len
        if self.needs_scratch:
            if scratch.reserve(J.blocksize, 0):
                return -1
            work, spare, tmp = scratch.work, scratch.spare, scratch.tmp
        if J.codec_format == F_ZSTD:
            dctx = scratch.zstd_dctx()
            if dctx == NULL:
                return -1
        if J.codec_format == F_ZLIB:
            J.zng = scratch.inflater()
            if J.zng == NULL and natives().zlib_uncompress2 == NULL:
                return -1
        if self.partial:
            which, n = &self._blocks[0], self._blocks.shape[0]
        if self.first_done:
            # The other blocks are XORed with block 0 as decoded, at the start of ``dest``.
            J.first, J.first_len = dest, J.blocksize
        with nogil:
            rc = _run_blocks(&J, which, n, &self.counter, &self.failed, work, spare, tmp, dctx)
        return -1 if rc or self.failed else 0
