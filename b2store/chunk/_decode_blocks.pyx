# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The GIL-free block loop: a chunk's streams walked, inflated and unfiltered block by block.

The codecs are called through C function pointers that :mod:`b2store.chunk.native` resolves
once (LZ4 and Zstd from numcodecs' or the ``lz4`` and ``zstandard`` wheels' extension modules,
zlib from zlib-ng or the system library; BloscLZ and the filter kernels are b2store's own,
cimported). Nothing here
raises on bad bytes: every function returns a status, and the caller falls back to the Python
path, which names the broken field. The walk checks every stream against the chunk's end and
its block before anything is inflated; the decoder checks every position again before it reads.

Several threads may run :func:`decode` (or a :mod:`b2store.chunk._chunk_plan` ``Plan``) on
the same job at once: each takes the next block from a shared counter (an atomic add), so
blocks, not chunks, are split. The entry points, the walk, the block loop and the per-thread
:class:`Scratch` defined here serve the one-pass plan, :mod:`b2store.chunk._chunk_plan`, and
the encoding half, :mod:`b2store.chunk._encode_blocks`, too (declared in
``_decode_blocks.pxd``).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from b2store.chunk._blosclz cimport c_blosclz_decompress
from b2store.chunk._delta cimport c_bytedelta_decode, c_delta_decode_first, c_xor
from b2store._shuffle cimport c_bitunshuffle_tmp, c_unshuffle


cdef Natives N
memset(&N, 0, sizeof(N))


cdef const Natives* natives() noexcept nogil:
    return &N


cdef unsigned long long ZSTD_CONTENTSIZE_UNKNOWN = <unsigned long long>(-1)
cdef unsigned long long ZSTD_CONTENTSIZE_ERROR = <unsigned long long>(-2)
# The most a payload of n bytes inflates to (the checks of b2store.chunk.compressors).
DEF LZ_RATIO = 256
DEF ZLIB_RATIO = 1040
DEF ZSTD_MAX_RATIO = 131072

_NAMES = (
    "LZ4_decompress_safe", "LZ4_decompress_safe_usingDict", "LZ4_compress_fast",
    "LZ4_compress_HC", "ZSTD_createDCtx", "ZSTD_freeDCtx", "ZSTD_createCCtx", "ZSTD_freeCCtx",
    "ZSTD_isError", "ZSTD_getFrameContentSize", "ZSTD_findFrameCompressedSize",
    "ZSTD_decompressDCtx",
    "ZSTD_decompress_usingDict", "ZSTD_compressCCtx", "uncompress2", "zng_inflateInit2",
    "zng_inflate", "zng_inflateReset", "zng_inflateEnd", "zng_deflateInit2", "zng_deflate",
    "zng_deflateReset", "zng_deflateEnd",
)


cdef void* _address(addresses, name) except? NULL:
    return <void*><size_t>int(addresses.get(name) or 0)


def set_entry_points(addresses):
    """Install the codecs' C functions: a mapping of symbol name to address (0: absent)."""
    for name in addresses:
        if name not in _NAMES:
            raise KeyError(f"unknown entry point {name!r}")
    N.lz4_decompress = <lz4_dec_f>_address(addresses, "LZ4_decompress_safe")
    N.lz4_decompress_dict = <lz4_dec_dict_f>_address(addresses, "LZ4_decompress_safe_usingDict")
    N.lz4_compress_fast = <lz4_fast_f>_address(addresses, "LZ4_compress_fast")
    N.lz4_compress_hc = <lz4_hc_f>_address(addresses, "LZ4_compress_HC")
    N.zstd_create_dctx = <zstd_create_f>_address(addresses, "ZSTD_createDCtx")
    N.zstd_free_dctx = <zstd_free_f>_address(addresses, "ZSTD_freeDCtx")
    N.zstd_create_cctx = <zstd_create_f>_address(addresses, "ZSTD_createCCtx")
    N.zstd_free_cctx = <zstd_free_f>_address(addresses, "ZSTD_freeCCtx")
    N.zstd_is_error = <zstd_iserr_f>_address(addresses, "ZSTD_isError")
    N.zstd_frame_content_size = <zstd_fcs_f>_address(addresses, "ZSTD_getFrameContentSize")
    N.zstd_frame_size = <zstd_ffs_f>_address(addresses, "ZSTD_findFrameCompressedSize")
    N.zstd_decompress = <zstd_dctx_f>_address(addresses, "ZSTD_decompressDCtx")
    N.zstd_decompress_dict = <zstd_dctx_dict_f>_address(addresses, "ZSTD_decompress_usingDict")
    N.zstd_compress = <zstd_cctx_f>_address(addresses, "ZSTD_compressCCtx")
    N.zlib_uncompress2 = <z_uncompress2_f>_address(addresses, "uncompress2")
    N.zng_inflate_init2 = <zng_init_f>_address(addresses, "zng_inflateInit2")
    N.zng_inflate = <zng_op_f>_address(addresses, "zng_inflate")
    N.zng_inflate_reset = <zng_end_f>_address(addresses, "zng_inflateReset")
    N.zng_inflate_end = <zng_end_f>_address(addresses, "zng_inflateEnd")
    if not (N.zng_inflate_init2 and N.zng_inflate and N.zng_inflate_reset and N.zng_inflate_end):
        N.zng_inflate_init2 = NULL
    N.zng_deflate_init2 = <zng_definit_f>_address(addresses, "zng_deflateInit2")
    N.zng_deflate = <zng_op_f>_address(addresses, "zng_deflate")
    N.zng_deflate_reset = <zng_end_f>_address(addresses, "zng_deflateReset")
    N.zng_deflate_end = <zng_end_f>_address(addresses, "zng_deflateEnd")
    if not (N.zng_deflate_init2 and N.zng_deflate and N.zng_deflate_reset and N.zng_deflate_end):
        N.zng_deflate_init2 = NULL


def decodable(int codec_format, bint with_dict):
    """Whether :func:`decode` can inflate this codec format (with a dictionary or not)."""
    return can_decode(codec_format, with_dict)


cdef bint can_decode(int codec_format, bint with_dict) noexcept nogil:
    cdef bint zstd
    if codec_format == F_BLOSCLZ:
        return not with_dict
    if codec_format == F_LZ4:
        return (N.lz4_decompress_dict if with_dict else N.lz4_decompress) != NULL
    if codec_format == F_ZLIB:
        return not with_dict and (N.zlib_uncompress2 != NULL or N.zng_inflate_init2 != NULL)
    if codec_format == F_ZSTD:
        zstd = (N.zstd_create_dctx != NULL and N.zstd_free_dctx != NULL
                and N.zstd_is_error != NULL and N.zstd_frame_content_size != NULL
                and N.zstd_frame_size != NULL)
        return zstd and (N.zstd_decompress_dict if with_dict else N.zstd_decompress) != NULL
    return False


def encodable(int codec):
    """Whether :func:`encode` can compress with this codec id (no dictionary)."""
    if codec == C_BLOSCLZ:
        return True
    if codec == C_LZ4:
        return N.lz4_compress_fast != NULL
    if codec == C_LZ4HC:
        return N.lz4_compress_hc != NULL
    if codec == C_ZLIB:
        # zlib-ng only: the Python path deflates with it too (zlib's bytes differ).
        return N.zng_deflate_init2 != NULL
    if codec == C_ZSTD:
        return (N.zstd_create_cctx != NULL and N.zstd_free_cctx != NULL
                and N.zstd_is_error != NULL and N.zstd_compress != NULL)
    return False


# --- per-thread scratch ------------------------------------------------------------------------

cdef inline void* _zstd_context(void** ctx, zstd_free_f* made_by, zstd_create_f create,
                                zstd_free_f free_it) noexcept:
    """A kept Zstd context (``ctx``), made anew where the library that made it is no longer
    the one installed: a context is only used by its own library, and set_entry_points may
    have installed another since (a test comparing builds does)."""
    if ctx[0] != NULL and made_by[0] != free_it:
        made_by[0](ctx[0])
        ctx[0] = NULL
    if ctx[0] == NULL and create != NULL:
        ctx[0] = create()
        made_by[0] = free_it
    return ctx[0]


cdef class Scratch:
    """One thread's buffers and codec contexts, kept between chunks: fresh ones per call
    cost page faults and context set-up that one small block's decode cannot hide."""

    def __dealloc__(self):
        self._release()
        if self.dctx != NULL and self.free_dctx != NULL:
            self.free_dctx(self.dctx)
        if self.cctx != NULL and self.free_cctx != NULL:
            self.free_cctx(self.cctx)
        if self.zng_ready and self.zng_end != NULL:
            self.zng_end(&self.zng)
        if self.zdef_level and self.zdef_end != NULL:
            self.zdef_end(&self.zdef)

    cdef void _release(self) noexcept:
        free(self.work)
        free(self.spare)
        free(self.tmp)
        self.work = self.spare = self.tmp = NULL
        self.size = 0

    cdef int reserve(self, Py_ssize_t size, Py_ssize_t packed_size) noexcept:
        """Buffers of at least ``size`` bytes (and ``packed_size`` for compressed output)."""
        if size > self.size:
            self._release()
            self.work = <uint8_t*>malloc(size)
            self.spare = <uint8_t*>malloc(size)
            self.tmp = <uint8_t*>malloc(size)
            if self.work == NULL or self.spare == NULL or self.tmp == NULL:
                self._release()
                return -1
            self.size = size
        if packed_size > self.packed_size:
            free(self.packed)
            self.packed = <uint8_t*>malloc(packed_size)
            self.packed_size = packed_size if self.packed != NULL else 0
            if self.packed == NULL:
                return -1
        return 0

    cdef void* zstd_dctx(self) noexcept:
        return _zstd_context(&self.dctx, &self.free_dctx, N.zstd_create_dctx, N.zstd_free_dctx)

    cdef b2b_zng_stream* inflater(self) noexcept:
        """zlib-ng's inflate state (zlib format), or NULL without zlib-ng."""
        if not self.zng_ready and N.zng_inflate_init2 != NULL:
            memset(&self.zng, 0, sizeof(self.zng))
            if N.zng_inflate_init2(&self.zng, 15) == 0:
                self.zng_ready, self.zng_end = True, N.zng_inflate_end
        return &self.zng if self.zng_ready else NULL

    cdef void* zstd_cctx(self) noexcept:
        return _zstd_context(&self.cctx, &self.free_cctx, N.zstd_create_cctx, N.zstd_free_cctx)

    cdef b2b_zng_stream* deflater(self, int level) noexcept:
        """zlib-ng's deflate state for ``level`` (zlib format, as zlib_ng.compress makes it:
        a 32 KiB window, memLevel 8, the default strategy), or NULL without zlib-ng."""
        if self.zdef_level and (self.zdef_level != level or self.zdef_end != N.zng_deflate_end):
            self.zdef_end(&self.zdef)
            self.zdef_level = 0
        if not self.zdef_level and N.zng_deflate_init2 != NULL and 1 <= level <= 9:
            memset(&self.zdef, 0, sizeof(self.zdef))
            if N.zng_deflate_init2(&self.zdef, level, 8, 15, 8, 0) == 0:  # Z_DEFLATED, ...
                self.zdef_level, self.zdef_end = level, N.zng_deflate_end
        return &self.zdef if self.zdef_level else NULL


# --- the walk: every stream of the chosen blocks checked, its place recorded -------------------

cdef bint _inflatable(int codec_format, const uint8_t* payload, Py_ssize_t n,
                      Py_ssize_t size) noexcept nogil:
    """Whether ``n`` bytes can inflate to ``size`` (the checks of compressors.check_inflatable)."""
    cdef unsigned long long declared
    if codec_format == F_ZSTD:
        declared = N.zstd_frame_content_size(payload, n)
        if declared == ZSTD_CONTENTSIZE_ERROR:
            return False
        if declared == ZSTD_CONTENTSIZE_UNKNOWN:
            return size <= ZSTD_MAX_RATIO * n
        return declared == <unsigned long long>size
    if codec_format == F_ZLIB:
        return size <= ZLIB_RATIO * (n + 1)
    return size <= LZ_RATIO * (n + 1)


cdef int _walk(const uint8_t* base, Py_ssize_t end_all, const int64_t* bstarts, Py_ssize_t nb,
               const int64_t* which, Py_ssize_t nwhich, const int64_t* ends, Py_ssize_t nbytes,
               Py_ssize_t blocksize, Py_ssize_t full_nstreams, int codec_format,
               int64_t* table, Py_ssize_t tstride) noexcept nogil:
    cdef Py_ssize_t k, j, s, end, size, nstreams, neblock, pos
    cdef int32_t csize
    for k in range(nwhich):
        j = which[k]
        if j < 0 or j >= nb:
            return -1
        end = ends[j]
        if end > end_all:
            return -1
        size = nbytes - j * blocksize
        if size > blocksize:
            size = blocksize
        if size <= 0:
            return -1
        nstreams = full_nstreams if size == blocksize else 1
        neblock = size // nstreams
        pos = bstarts[j]
        if pos < 0:
            return -1
        for s in range(nstreams):
            if pos + 4 > end:
                return -1
            csize = read_i32(base + pos)
            if csize < 0:
                # A run of one byte: -value, then a token whose bit 0 marks it.
                if pos + 5 > end or not (base[pos + 4] & 1) or csize < -255:
                    return -1
                table[j * tstride + 2 * s] = pos + 5
                table[j * tstride + 2 * s + 1] = csize
                pos += 5
                continue
            pos += 4
            if csize > end - pos or csize > neblock:
                return -1
            if 0 < csize < neblock and not _inflatable(codec_format, base + pos, csize, neblock):
                return -1
            table[j * tstride + 2 * s] = pos
            table[j * tstride + 2 * s + 1] = csize
            pos += csize
    return 0


def walk(const uint8_t[::1] src, const int64_t[::1] bstarts, const int64_t[::1] which,
         const int64_t[::1] ends, Py_ssize_t nbytes, Py_ssize_t blocksize,
         Py_ssize_t full_nstreams, int codec_format, int64_t[:, ::1] table):
    """Check the streams of blocks ``which`` and record them in ``table``.

    ``table[j]`` gets ``(position, csize)`` per stream of block ``j``; ``ends[j]`` is where
    block ``j``'s bytes must end (``len(src)`` when the whole chunk is there). Returns 0, or
    -1 when anything is off: the caller's Python walk then says what.
    """
    cdef Py_ssize_t nb = bstarts.shape[0]
    cdef int rc
    if (blocksize <= 0 or full_nstreams <= 0 or ends.shape[0] != nb or nb == 0
            or table.shape[0] != nb or table.shape[1] < 2 * full_nstreams or src.shape[0] == 0
            or which.shape[0] == 0):
        return -1
    if codec_format == F_ZSTD and N.zstd_frame_content_size == NULL:
        return -1
    with nogil:
        rc = _walk(&src[0], src.shape[0], &bstarts[0], nb, &which[0], which.shape[0], &ends[0],
                   nbytes, blocksize, full_nstreams, codec_format, &table[0, 0], table.shape[1])
    return rc


# --- decoding ---------------------------------------------------------------------------------


cdef Py_ssize_t _inflate(const Job* J, const uint8_t* payload, Py_ssize_t n, uint8_t* out,
                         Py_ssize_t size, void* dctx) noexcept nogil:
    """Inflate one stream; returns the bytes written, or -1."""
    cdef size_t r
    cdef unsigned long dlen, slen
    if J.codec_format == F_BLOSCLZ:
        return c_blosclz_decompress(payload, n, out, size)
    if J.codec_format == F_LZ4:
        if n > 0x7FFFFFFF or size > 0x7FFFFFFF:
            return -1
        if J.dictionary != NULL:
            return N.lz4_decompress_dict(<const char*>payload, <char*>out, <int>n, <int>size,
                                         <const char*>J.dictionary, <int>J.dictsize)
        return N.lz4_decompress(<const char*>payload, <char*>out, <int>n, <int>size)
    if J.codec_format == F_ZSTD:
        # One frame, ending where the stream ends. (c-blosc2's ZSTD_decompressDCtx also reads
        # frames after it that add no bytes, skippable or empty; no writer puts any there.)
        if N.zstd_frame_size(payload, n) != <size_t>n:
            return -1
        if J.dictionary != NULL:
            r = N.zstd_decompress_dict(dctx, out, size, payload, n, J.dictionary, J.dictsize)
        else:
            r = N.zstd_decompress(dctx, out, size, payload, n)
        return -1 if N.zstd_is_error(r) else <Py_ssize_t>r
    if J.codec_format == F_ZLIB and J.zng != NULL:
        if (n >> 32) or (size >> 32) or N.zng_inflate_reset(J.zng) != 0:
            return -1
        J.zng.next_in, J.zng.avail_in = payload, <uint32_t>n
        J.zng.next_out, J.zng.avail_out = out, <uint32_t>size
        if N.zng_inflate(J.zng, 4) != 1:  # Z_FINISH must reach Z_STREAM_END (checksum good)
            return -1
        return size - J.zng.avail_out
    if J.codec_format == F_ZLIB and N.zlib_uncompress2 != NULL:
        dlen, slen = size, n
        if N.zlib_uncompress2(out, &dlen, payload, &slen) != 0:  # Z_OK: the stream ended
            return -1
        return <Py_ssize_t>dlen
    return -1


cdef int _decode_streams(const Job* J, Py_ssize_t j, uint8_t* target, Py_ssize_t size,
                         void* dctx) noexcept nogil:
    cdef Py_ssize_t nstreams = J.full_nstreams if size == J.blocksize else 1
    cdef Py_ssize_t neblock = size // nstreams, s, pos, csize
    cdef const int64_t* row = J.table + j * J.tstride
    cdef uint8_t* out
    for s in range(nstreams):
        pos, csize = row[2 * s], row[2 * s + 1]
        out = target + s * neblock
        if csize > 0 and (pos < 0 or pos > J.srclen - csize):
            return -1  # never trusted: the table may not come from walk()
        if csize == neblock:
            memcpy(out, J.src + pos, neblock)
        elif csize > 0:
            if _inflate(J, J.src + pos, csize, out, neblock, dctx) != neblock:
                return -1
        elif csize >= -255:
            memset(out, <uint8_t>(-csize), neblock)  # a run: zeros, or -csize repeated
        else:
            return -1
    return 0


cdef int _undo_one(const Job* J, int fid, int meta, const uint8_t* src, uint8_t* dst,
                   Py_ssize_t size, uint8_t* tmp) noexcept nogil:
    cdef Py_ssize_t ts = J.typesize, n, body
    if fid == SHUFFLE:
        c_unshuffle(src, dst, size, meta if meta else ts)
    elif fid == BITSHUFFLE:
        n = size // ts
        if J.blosc1 and n % 8:
            # c-blosc1 bit-shuffled only blocks of a multiple of 8 items.
            memcpy(dst, src, size)
            return 0
        n -= n % 8
        if n:
            c_bitunshuffle_tmp(src, dst, n, ts, tmp)
        memcpy(dst + n * ts, src + n * ts, size - n * ts)
    elif fid == BYTEDELTA or fid == BYTEDELTA_BUGGY:
        c_bytedelta_decode(src, dst, size, meta if meta else ts, fid == BYTEDELTA_BUGGY)
    else:
        return -1
    return 0


cdef int _undo_delta(const Job* J, uint8_t* buf, Py_ssize_t size, Py_ssize_t j) noexcept nogil:
    cdef Py_ssize_t w = delta_width(J.typesize)
    cdef Py_ssize_t body = size // w * w
    if j == 0:
        c_delta_decode_first(buf, size, w)
        return 0
    if J.first == NULL or J.first_len < body:
        return -1
    c_xor(buf, J.first, buf, body)
    return 0


cdef int _decode_block(const Job* J, Py_ssize_t j, uint8_t* work, uint8_t* spare,
                       uint8_t* tmp, void* dctx) noexcept nogil:
    cdef Py_ssize_t size = J.nbytes - j * J.blocksize, offset = j * J.blocksize - J.dest_base
    cdef uint8_t* dest
    cdef uint8_t* cur
    cdef uint8_t* other
    cdef uint8_t* target
    cdef int k, fid, last_real = -1
    if size > J.blocksize:
        size = J.blocksize
    if size <= 0 or offset < 0 or offset > J.dest_len - size:
        return -1
    dest = J.dest + offset
    for k in range(J.nsteps):
        if J.fids[k] != DELTA:
            last_real = k
    if last_real < 0:
        # No filter, or DELTA alone: inflate straight into the destination.
        if _decode_streams(J, j, dest, size, dctx):
            return -1
        for k in range(J.nsteps):
            if _undo_delta(J, dest, size, j):
                return -1
        return 0
    if _decode_streams(J, j, work, size, dctx):
        return -1
    cur, other = work, spare
    for k in range(J.nsteps):
        fid = J.fids[k]
        if fid == DELTA:
            if _undo_delta(J, cur, size, j):
                return -1
            continue
        target = dest if k == last_real else other
        if _undo_one(J, fid, J.metas[k], cur, target, size, tmp):
            return -1
        cur, other = target, cur
    if cur != dest:
        memcpy(dest, cur, size)
    return 0


def decode(const uint8_t[::1] src, const int64_t[:, ::1] table, const int64_t[::1] blocks,
           int64_t[::1] counter, int32_t[::1] failed, uint8_t[::1] dest,
           Py_ssize_t dest_base, Py_ssize_t nbytes, Py_ssize_t blocksize,
           Py_ssize_t full_nstreams, int codec_format, steps, Py_ssize_t typesize,
           bint blosc1, Scratch scratch not None, dictionary=None, first=None):
    """Decode blocks ``blocks`` into ``dest`` (which holds the decoded chunk from byte
    ``dest_base``) without the GIL; returns 0, or -1 if any block failed.

    Threads sharing ``counter`` (one int64, start 0) and ``failed`` (one int32) share the
    work, block by block. ``steps``: the filters to undo, in order, as (id, meta) pairs.
    ``first``: the chunk's decoded block 0, for DELTA. ``scratch``: this thread's.
    """
    cdef Job J
    cdef const uint8_t[::1] dict_view
    cdef const uint8_t[::1] first_view
    cdef Py_ssize_t n = blocks.shape[0], i, j
    cdef uint8_t* work = NULL
    cdef uint8_t* spare = NULL
    cdef uint8_t* tmp = NULL
    cdef void* dctx = NULL
    cdef int rc = 0
    cdef bint needs_scratch = False
    memset(&J, 0, sizeof(J))
    if (blocksize <= 0 or full_nstreams <= 0 or typesize <= 0 or table.shape[0] == 0
            or table.shape[1] < 2 * full_nstreams or counter.shape[0] < 1 or failed.shape[0] < 1
            or len(steps) > MAX_STEPS or src.shape[0] == 0 or dest.shape[0] == 0):
        return -1
    if not decodable(codec_format, dictionary is not None):
        return -1
    for i in range(n):
        if not 0 <= blocks[i] < table.shape[0]:
            return -1
    J.src, J.srclen = &src[0], src.shape[0]
    J.nbytes, J.blocksize, J.full_nstreams = nbytes, blocksize, full_nstreams
    J.codec_format = codec_format
    J.table, J.tstride = &table[0, 0], table.shape[1]
    J.typesize, J.blosc1 = typesize, blosc1
    J.dest, J.dest_base, J.dest_len = &dest[0], dest_base, dest.shape[0]
    J.nsteps = len(steps)
    for i, (fid, meta) in enumerate(steps):
        J.fids[i], J.metas[i] = fid, meta
        if fid != DELTA:
            needs_scratch = True
    if dictionary is not None:
        dict_view = dictionary
        if dict_view.shape[0] == 0:
            return -1
        J.dictionary, J.dictsize = &dict_view[0], dict_view.shape[0]
    if first is not None:
        first_view = first
        if first_view.shape[0]:
            J.first, J.first_len = &first_view[0], first_view.shape[0]
    if needs_scratch:
        if scratch.reserve(blocksize, 0):
            return -1
        work, spare, tmp = scratch.work, scratch.spare, scratch.tmp
    if codec_format == F_ZSTD:
        dctx = scratch.zstd_dctx()
        if dctx == NULL:
            return -1
    if codec_format == F_ZLIB:
        J.zng = scratch.inflater()
        if J.zng == NULL and N.zlib_uncompress2 == NULL:
            return -1
    with nogil:
        rc = _run_blocks(&J, &blocks[0] if n else NULL, n, &counter[0], &failed[0], work, spare,
                         tmp, dctx)
    return rc


cdef int _run_blocks(const Job* J, const int64_t* blocks, Py_ssize_t n, int64_t* counter,
                     int32_t* failed, uint8_t* work, uint8_t* spare, uint8_t* tmp,
                     void* dctx) noexcept nogil:
    """Decode blocks (``blocks[i]``, or ``i`` when ``blocks`` is NULL) until the shared
    ``counter`` passes ``n`` or any thread has failed; 0, or -1 (``failed`` then set)."""
    cdef Py_ssize_t i, j
    cdef int rc = 0
    while rc == 0:
        i = b2b_next(counter)
        if i >= n or b2b_failed(failed):
            break
        j = blocks[i] if blocks != NULL else i
        if _decode_block(J, j, work, spare, tmp, dctx):
            rc = -1
    if rc:
        b2b_fail(failed)
    return rc
