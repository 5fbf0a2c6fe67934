"""Decoding a chunk: header, then block starts, then each block's streams, codec and filters.

:class:`ChunkDecoder` checks the whole layout (block starts, dictionary, special and memcpyed
sizes) before it allocates or inflates anything, and can decode single blocks, which is what
partial reads of arrays build on.
"""

from __future__ import annotations

import struct

import numpy as np

from ..constants import MAX_DICT_SIZE, SpecialValue
from ..errors import FormatError
from ..limits import DEFAULT_LIMITS, LimitError
from . import native
from .compressors import check_inflatable, stream_decoder
from .filters import Pipeline
from .header import LAST_BLOSC1_VERSION, ChunkHeader, ChunkInfo
from .repeat import fill_repeated

__all__ = [
    "decode_chunk",
    "chunk_info",
    "ChunkDecoder",
    "as_uint8",
    "in_chunk",
    "out_size_error",
]

_I32 = struct.Struct("<i")
_NAN_BYTES = {4: np.float32("nan").tobytes(), 8: np.float64("nan").tobytes()}


def as_uint8(buf, *, writable: bool = False, name: str = "buffer") -> np.ndarray:
    """A flat uint8 view of any contiguous buffer (bytes, memoryview, numpy array, ...)."""
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")
        arr = buf.reshape(-1).view(np.uint8)
    else:
        mv = memoryview(buf)
        if not mv.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")
        arr = np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, np.uint8)
    if writable and not arr.flags.writeable:
        raise ValueError(f"{name} must be writable")
    return arr


def out_size_error(room: int, nbytes: int) -> FormatError:
    """The error for a chunk whose header decodes to other than the ``room`` bytes of the
    ``out`` it is decoded into. ``out`` is sized from what holds the chunk (an array's chunk
    shape, a frame's chunksize, a Zarr chunk), so a mismatch is a chunk that lies about its
    size: a FormatError, as every entry point (b2store.open, zarr, numcodecs) reports it."""
    return FormatError("nbytes", f"{room} (the bytes of out)", nbytes, 4)


def _in_stream(exc: FormatError, j: int, s: int | None, pos: int) -> FormatError:
    """``exc``, raised decoding one stream, naming it: block ``j`` (stream ``s`` of the block
    where blocks are split), and the offset in the chunk (``pos``, where the stream starts,
    plus the offset in the stream the error names, if any)."""
    where = f"block {j}" if s is None else f"stream {s} of block {j}"
    offset = pos + (exc.offset or 0)
    named = FormatError(f"{exc.field} of {where}", exc.expected, exc.found, offset)
    named.block = j
    named.of_chunk = True
    return named


def in_chunk(exc: FormatError, label: str) -> FormatError:
    """An error in a chunk's own bytes (its header, its layout, a stream: ``of_chunk``)
    naming the chunk too (``label``: "chunk 7"); any other as it is.

    The chunk decoder knows the field and the block, not which chunk of a frame it decodes:
    the callers that know say it. Errors of the frame around the chunk (its index, an
    array's metalayer) already say what they are about."""
    if not exc.of_chunk or exc.field.endswith(label):
        return exc
    named = FormatError(f"{exc.field} of {label}", exc.expected, exc.found, exc.offset)
    named.block = exc.block
    named.of_chunk = True
    return named


def chunk_info(buf) -> ChunkInfo:
    """Everything the header of the chunk in ``buf`` says.

    >>> info = chunk_info(bytes([2, 1, 0x13, 1]) + (4).to_bytes(4, "little") * 2
    ...                   + (20).to_bytes(4, "little") + b"abcd")
    >>> info.version, info.nbytes, info.memcpyed, info.codec.name
    (2, 4, True, 'BLOSCLZ')
    """
    return ChunkHeader.from_bytes(buf).info()


def decode_chunk(
    buf,
    out=None,
    *,
    nthreads: int | None = None,
    max_nbytes: int | None = None,
    limit_name: str = "max_chunk_nbytes",
    blockshape=None,
) -> np.ndarray:
    """Decode one Blosc1 or Blosc2 chunk.

    Parameters
    ----------
    buf
        The chunk: any contiguous buffer holding at least ``cbytes`` bytes.
    out
        Optional writable contiguous buffer of exactly ``nbytes`` bytes to decode into.
    nthreads
        Blocks decoded at once (default 1); the codecs and kernels release the GIL.
    max_nbytes
        The most the chunk may decode to (default: ``b2store.limits.DEFAULT_LIMITS``'s
        ``max_chunk_nbytes``); a header asking for more raises ``LimitError`` before
        anything is allocated.
    limit_name
        The :class:`~b2store.Limits` field ``max_nbytes`` comes from, named by that error as
        the limit to raise (a vlmeta value's is ``max_vlmeta_nbytes``).
    blockshape
        The b2nd array's block shape, which c-blosc2's plugins (ZFP, NDLZ, NDCELL, NDMEAN)
        need; a chunk using one is refused without it.

    Returns
    -------
    numpy.ndarray
        The decoded bytes as a 1-d uint8 array (a view of ``out`` when given).

    Raises
    ------
    FormatError
        The bytes break the format (truncated, corrupt, inconsistent header).
    UnsupportedError
        A valid feature b2store does not implement, such as a plugin codec.
    """
    limit = DEFAULT_LIMITS.max_chunk_nbytes if max_nbytes is None else max_nbytes
    fast = native.quick_decode(buf, out, nthreads, limit)  # the common kind, in one C pass
    if fast is not None:
        return fast
    # The size first (the header alone, parsed once and cached): an ``out`` the chunk does
    # not fit is the error to report, before any layout check.
    nbytes = ChunkHeader.from_bytes(as_uint8(buf)).nbytes
    if out is not None:
        dest = as_uint8(out, writable=True, name="out")
        if len(dest) != nbytes:
            raise out_size_error(len(dest), nbytes)
    # The layout checked: a lying nbytes is named before a limit.
    decoder = ChunkDecoder(buf, blockshape=blockshape)
    if nbytes > limit:
        raise LimitError("nbytes", limit_name, limit, nbytes, 4)
    if out is None:
        dest = np.empty(nbytes, np.uint8)
    decoder.decode_into(dest, nthreads=nthreads)
    return dest


def stream_split(header: ChunkHeader) -> bool | None:
    """Whether the chunk's full blocks are stored as ``typesize`` streams (True) or one
    (False); None when the header leaves it open and only the bytes can tell (see
    :meth:`ChunkDecoder._read_split_or_not`)."""
    split = header.splits(header.effective_blocksize)
    if (
        split
        or header.version > LAST_BLOSC1_VERSION
        or header.dont_split
        or header.typesize == 1
        or header.effective_blocksize % header.typesize
    ):
        return split
    return None


def block_starts(src: np.ndarray, h: ChunkHeader) -> tuple[np.ndarray, tuple[int, int] | None]:
    """A chunk's block starts (int64) and the bytes of its dictionary (None: it has none),
    read from ``src`` (the chunk, or its start up to the dictionary's end), each start
    checked to lie between the dictionary's end and ``cbytes``."""
    nblocks = h.nblocks
    starts_end = h.header_size + 4 * nblocks
    if starts_end > h.cbytes:
        raise FormatError(
            "bstarts",
            f"{nblocks} block starts within cbytes={h.cbytes}",
            f"{starts_end} bytes needed (nbytes={h.nbytes}, blocksize={h.blocksize})",
            h.header_size,
        )
    dict_range = None
    data_start = starts_end
    if h.use_dict:
        if starts_end + 4 > h.cbytes:
            raise FormatError(
                "dict size", "4 bytes after the block starts", "end of chunk", starts_end
            )
        dsize = int.from_bytes(src[starts_end : starts_end + 4], "little", signed=True)
        if not 0 < dsize <= MAX_DICT_SIZE or starts_end + 4 + dsize > h.cbytes:
            raise FormatError(
                "dict size", f"1..{MAX_DICT_SIZE} bytes inside the chunk", dsize, starts_end
            )
        data_start = starts_end + 4 + dsize
        dict_range = (starts_end + 4, data_start)
    bstarts = np.frombuffer(src, "<i4", nblocks, h.header_size).astype(np.int64)
    bad = np.flatnonzero((bstarts < data_start) | (bstarts >= h.cbytes))
    if len(bad):
        j = int(bad[0])
        raise FormatError(
            f"bstarts[{j}]",
            f"an offset in [{data_start}, {h.cbytes})",
            int(bstarts[j]),
            h.header_size + 4 * j,
        )
    return bstarts, dict_range


def block_bounds(bstarts: np.ndarray, cbytes: int) -> np.ndarray:
    """Where each block's bytes end: at the next larger block start, or at ``cbytes``."""
    ends = np.append(np.unique(bstarts), cbytes)
    return ends[np.searchsorted(ends, bstarts, side="right")]


class ChunkDecoder:
    """A parsed chunk whose layout has been checked, ready to decode whole or block by block."""

    def __init__(self, buf, *, blocks=None, blockshape=None):
        # ``blocks``: walk only these blocks' streams (the others' bytes may be absent, as in
        # a partial read); only they can then be decoded. ``blockshape``: the b2nd array's,
        # which the plugin codecs and filters (ZFP, NDLZ, NDCELL, NDMEAN) need.
        self._only = None if blocks is None else sorted(set(blocks))
        self.blockshape = blockshape
        # Whether the streams were walked in C (chunk/_decode_blocks), which then decodes them.
        self.native = False
        src = as_uint8(buf)
        self.header = header = ChunkHeader.from_bytes(src)
        self.src = src[: header.cbytes]
        self._bytes = memoryview(self.src)
        self.special = header.special
        try:
            if self.special:
                self._check_special()
            elif header.memcpyed or header.nbytes == 0:
                if header.memcpyed and header.cbytes != header.nbytes + header.header_size:
                    raise FormatError(
                        "cbytes",
                        f"nbytes + {header.header_size} = "
                        f"{header.nbytes + header.header_size} for a memcpyed chunk",
                        header.cbytes,
                        12,
                    )
            else:
                self._read_layout()
        except FormatError as exc:
            exc.of_chunk = True  # (the frame's reader names the chunk: in_chunk)
            raise

    # --- layout -------------------------------------------------------------------------------

    def _check_special(self) -> None:
        h = self.header
        if self.special == SpecialValue.VALUE:
            # The header typesize may be capped at 1; the stored value's length is the truth.
            self.value_size = h.cbytes - h.header_size
            if self.value_size <= 0:
                raise FormatError(
                    "cbytes", "32 + typesize for a repeated-value chunk", h.cbytes, 12
                )
            if h.nbytes % self.value_size:
                raise FormatError(
                    "nbytes", f"a multiple of the value size {self.value_size}", h.nbytes, 4
                )
        elif self.special == SpecialValue.NAN and h.typesize not in _NAN_BYTES:
            raise FormatError("typesize", "4 or 8 for a NaN chunk", h.typesize, 3)
        elif self.special == SpecialValue.NAN and h.nbytes % h.typesize:
            raise FormatError("nbytes", f"a multiple of typesize {h.typesize}", h.nbytes, 4)

    def _read_layout(self) -> None:
        h = self.header
        # Unsupported codecs and filters are named before any layout check can fail.
        make_decoder = stream_decoder(
            h.codec_format, h.udcodec, h.compcode_meta, h.typesize, self.blockshape
        )
        self.pipeline = Pipeline.for_header(h, self.blockshape)
        nblocks = h.nblocks
        if nblocks <= 0:
            raise FormatError("blocksize", "at least one block", h.blocksize, 8)
        if (
            not h.vl_blocks
            and h.splits(h.effective_blocksize)
            and h.effective_blocksize % h.typesize
        ):
            # Each stream holds blocksize // typesize bytes, so the rest of every block was
            # never stored (c-blosc2 writes such chunks when asked for an odd blocksize).
            raise FormatError(
                "blocksize",
                f"blocks of a multiple of typesize {h.typesize} in a chunk with split blocks",
                f"{h.effective_blocksize} bytes per block",
                8,
            )
        self.bstarts, dict_range = block_starts(self.src, h)
        dictionary = None if dict_range is None else bytes(self._bytes[slice(*dict_range)])
        self.dictionary = dictionary
        if h.vl_blocks:
            self._read_vl_layout()
        else:
            self._read_split_or_not()
        # Codec contexts are not shared between threads: each thread makes its own.
        self._make_stream_decoder = lambda: make_decoder(dictionary)
        if not self.native or dictionary is not None:
            # The C loop needs no Python codec context (making a Zstd one costs 1 ms); a
            # dictionary is still checked here, where its FormatError is raised.
            self.decode_stream = self._make_stream_decoder()

    def _read_split_or_not(self) -> None:
        h = self.header
        split = stream_split(h)
        self.split = bool(split)
        if split is not None:
            ends = None if self._only is None else block_bounds(self.bstarts, h.cbytes)
            if native.walk(self, split, self._only, ends):
                # Checked in C; the Python walk runs only if the Python decoder is needed.
                self.native, self.streams = True, None
            else:
                self._read_streams(split)
            return
        # c-blosc 1.21 under BLOSC_SPLITMODE=ALWAYS splits blocks of items over 16 bytes (or
        # of few items) and leaves dont_split clear, as writers before 1.11 left it clear on
        # blocks they did not split. The layout whose streams fill the chunk exactly, block
        # after block, is the one written; the unsplit one is kept when neither does.
        try:
            self._read_streams(False)
        except FormatError as exc:
            unsplit_error, unsplit = exc, None
        else:
            if self._streams_tile():
                return
            unsplit_error, unsplit = None, self.streams
        try:
            self._read_streams(True)
        except FormatError:
            if unsplit is None:
                raise unsplit_error from None
            self.streams = unsplit
            return
        if unsplit is not None and not self._streams_tile():
            self.streams = unsplit
            return
        self.split = True

    def _streams_tile(self) -> bool:
        """Whether each block's streams end where another block starts (or the chunk ends)."""
        bounds = set(self.bstarts.tolist()) | {self.header.cbytes}
        return all(end in bounds for end in self._block_ends.values())

    def _read_streams(self, split: bool) -> None:
        """Walk every stream header of every block, so that nothing is allocated or inflated
        for a chunk whose streams cannot hold what its header says."""
        h = self.header
        src, end = self._bytes, h.cbytes
        full = h.effective_blocksize
        full_nstreams = h.typesize if split else 1
        walk = range(self.nblocks) if self._only is None else self._only
        bounds = None if self._only is None else block_bounds(self.bstarts, h.cbytes)
        self.streams = table = {}
        self._block_ends = ends = {}
        for j in walk:
            if bounds is not None:
                # Only this block's bytes are there: its streams must end where the next
                # block (in storage order) starts, as every writer lays them out.
                end = int(bounds[j])
            size = min(full, h.nbytes - j * full)
            nstreams = full_nstreams if size == full else 1
            neblock = size // nstreams
            pos = int(self.bstarts[j])
            entries = []
            for s in range(nstreams):
                where = f"stream {s} of block {j}"
                if pos + 4 > end:
                    raise FormatError(
                        f"csize of {where}", "4 bytes inside the chunk", "end of chunk", pos
                    )
                csize = _I32.unpack_from(src, pos)[0]
                if csize < 0:
                    # A run of one byte: -value, then a token whose bit 0 marks it.
                    if pos + 5 > end:
                        raise FormatError(
                            f"run token of {where}",
                            "1 byte inside the chunk",
                            "end of chunk",
                            pos + 4,
                        )
                    token = src[pos + 4]
                    if not token & 1 or csize < -255:
                        raise FormatError(
                            f"csize of {where}",
                            "a run of one byte (-255..-1 and an odd token)",
                            f"csize {csize}, token {token}",
                            pos,
                        )
                    entries.append((pos + 5, csize))
                    pos += 5
                    continue
                pos += 4
                if csize > end - pos:
                    raise FormatError(
                        f"csize of {where}",
                        f"at most the {end - pos} bytes left in the chunk",
                        csize,
                        pos - 4,
                    )
                if csize > neblock:
                    raise FormatError(
                        f"csize of {where}", f"at most the stream's {neblock} bytes", csize, pos - 4
                    )
                if 0 < csize < neblock:
                    check_inflatable(
                        h.codec_format, h.udcodec, src[pos : pos + csize], neblock, where
                    )
                entries.append((pos, csize))
                pos += csize
            table[j] = entries
            ends[j] = pos

    def _read_vl_layout(self) -> None:
        # VL blocks are written in order, each `i32 block_nbytes` then one stream that runs
        # to the next block's start.
        h = self.header
        ends = np.append(self.bstarts[1:], h.cbytes)
        if np.any(ends - self.bstarts < 4):
            j = int(np.flatnonzero(ends - self.bstarts < 4)[0])
            raise FormatError(
                f"bstarts[{j + 1}]",
                "increasing block starts in a VL-block chunk",
                int(ends[j]),
                h.header_size + 4 * (j + 1),
            )
        sizes = np.array([_I32.unpack_from(self._bytes, int(s))[0] for s in self.bstarts], np.int64)
        if np.any(sizes <= 0) or sizes.sum() != h.nbytes:
            raise FormatError(
                "block_nbytes",
                f"positive sizes adding up to nbytes={h.nbytes}",
                sizes.tolist()[:8],
                int(self.bstarts[0]),
            )
        self.vl_sizes = sizes
        self.vl_offsets = np.concatenate(([0], np.cumsum(sizes)))
        self.vl_ends = ends
        for j, (start, stop, size) in enumerate(zip(self.bstarts, ends, sizes)):
            clen = int(stop - start - 4)
            if clen > size:
                raise FormatError(
                    f"block {j}", f"at most its {size} bytes compressed", clen, int(start)
                )
            if clen < size:
                payload = self._bytes[int(start) + 4 : int(stop)]
                check_inflatable(h.codec_format, h.udcodec, payload, int(size), f"block {j}")

    # --- decoding -------------------------------------------------------------------------------

    @property
    def nblocks(self) -> int:
        return len(self.bstarts) if hasattr(self, "bstarts") else 0

    def block_span(self, j: int) -> tuple[int, int]:
        """Where block ``j`` lands in the decoded chunk: ``(offset, size)``."""
        h = self.header
        if h.vl_blocks:
            return int(self.vl_offsets[j]), int(self.vl_sizes[j])
        bs = h.effective_blocksize
        return j * bs, min(bs, h.nbytes - j * bs)

    def decode_into(self, dest: np.ndarray, *, nthreads: int | None = None) -> None:
        """Decode the whole chunk into ``dest`` (uint8, exactly ``nbytes`` long)."""
        h = self.header
        if self.special:
            self.fill_special(dest)
        elif h.memcpyed:
            dest[:] = self.src[h.header_size : h.header_size + h.nbytes]
        elif h.nbytes:
            first = dest[: self.block_span(0)[1]]
            nthreads = max(1, min(nthreads or 1, self.nblocks, native.cpu_count()))
            if self.native:
                if native.decode_whole(self, dest, nthreads):
                    return
                self._walk_in_python()
            if nthreads == 1:
                self._decode_blocks(range(self.nblocks), dest, first, self.decode_stream)
                return
            # Block 0 first: DELTA codes every other block against it.
            self._decode_blocks([0], dest, first, self.decode_stream)
            groups = [range(k, self.nblocks, nthreads) for k in range(1, nthreads + 1)]
            pool = native.executor(nthreads)
            jobs = [pool.submit(self._decode_blocks, g, dest, first, None) for g in groups]
            for job in jobs:
                job.result()

    def _decode_blocks(self, blocks, dest, first, decode_stream) -> None:
        work, spare = self._scratch()
        decode_stream = decode_stream or self._make_stream_decoder()
        for j in blocks:
            offset, size = self.block_span(j)
            self._decode_block(j, dest[offset : offset + size], work, spare, first, decode_stream)

    def decode_block(self, j: int, dest: np.ndarray, first_block: np.ndarray | None = None):
        """Decode block ``j`` alone into ``dest``; DELTA chunks need ``first_block`` decoded."""
        if self.native:
            if native.decode(self, [j], dest, self.block_span(j)[0], first_block):
                return
            self._walk_in_python()
        work, spare = self._scratch()
        self._decode_block(j, dest, work, spare, first_block, self.decode_stream)

    def _walk_in_python(self) -> None:
        # The C decoder failed on a layout the C walk passed: walk it here, where a broken
        # stream gets its FormatError, and let the Python decoder say what else is wrong.
        if self.streams is None:
            self._read_streams(self.split)
        if not hasattr(self, "decode_stream"):
            self.decode_stream = self._make_stream_decoder()
        self.native = False

    def _scratch(self) -> tuple[np.ndarray, np.ndarray]:
        h = self.header
        size = int(self.vl_sizes.max()) if h.vl_blocks else h.effective_blocksize
        return np.empty(size, np.uint8), np.empty(size, np.uint8)

    def _decode_block(self, j, dest, work, spare, first_block, decode_stream) -> None:
        size = len(dest)
        pipeline = self.pipeline
        target = work[:size] if pipeline else dest
        if self.header.vl_blocks:
            self._decode_vl_stream(j, target, decode_stream)
        else:
            self._decode_streams(j, target, decode_stream)
        if pipeline:
            pipeline.undo(target, dest, spare, first_block, j)

    def _decode_streams(self, j: int, target: np.ndarray, decode_stream) -> None:
        entries = self.streams[j]
        neblock = len(target) // len(entries)
        for s, (pos, csize) in enumerate(entries):
            out = target[s * neblock : (s + 1) * neblock]
            if csize == neblock:
                out[:] = self.src[pos : pos + csize]
            elif csize > 0:
                try:
                    decode_stream(self._bytes[pos : pos + csize], out)
                except FormatError as exc:
                    raise _in_stream(exc, j, s if len(entries) > 1 else None, pos) from None
            else:
                out[:] = -csize  # a run: zeros, or -csize repeated

    def _decode_vl_stream(self, j: int, target: np.ndarray, decode_stream) -> None:
        start, end = int(self.bstarts[j]) + 4, int(self.vl_ends[j])
        if end - start == len(target):
            target[:] = self.src[start:end]
        else:
            try:
                decode_stream(self._bytes[start:end], target)
            except FormatError as exc:
                raise _in_stream(exc, j, None, start) from None

    def fill_special(self, dest: np.ndarray) -> None:
        """Fill ``dest`` (uint8, a whole number of items) with a special chunk's value."""
        if self.special == SpecialValue.NAN:
            value = _NAN_BYTES[self.header.typesize]
        elif self.special == SpecialValue.VALUE:
            value = bytes(self._bytes[self.header.header_size :])
        else:
            # ZERO, and UNINIT, whose bytes are undefined: zeros are as good as any and safer.
            dest[:] = 0
            return
        fill_repeated(dest, value)
