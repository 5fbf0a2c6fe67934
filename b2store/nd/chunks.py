"""Encoding and decoding one b2nd chunk: block order, padding to whole blocks, edge crops, and
decoding only the blocks a selection inside the chunk touches.

A b2nd chunk is one Blosc2 chunk holding ``prod(extchunkshape)`` items (see
:mod:`b2store.nd.geometry`): the chunk's blocks in C order over its block grid, each block's
items in C order, padding (beyond an edge chunk's data or the rounding to whole blocks) zero.
A chunk whose items are all one value is stored as a special chunk (zeros or a repeated
value) that holds no data, as python-blosc2 does.

API (the array, the writers and the Zarr ``b2nd`` codec all go through it)::

    cparams_for(dtype, blockshape, *, codec="zstd", clevel=5, filters=None,
                filters_meta=None, splitmode="auto") -> dict
        python-blosc2's chunk parameters for an array: keywords of ``encode_chunk``.
    encode_chunk_array(array, chunkshape, blockshape, params, *, dtype=None,
                       nthreads=None) -> bytes
        ``array`` (``chunkshape`` or smaller, for edge chunks: padded with zeros) as one
        chunk. ``params``: encode_chunk keywords (codec, clevel, filters, filters_meta,
        splitmode, ...); typesize and blocksize follow from ``dtype`` and ``blockshape``.
        ``dtype`` is the item type when it has a subarray shape (its dimensions trail
        ``array``'s), else ``array.dtype``.
    encode_array_chunk(buf, dtype, params, nthreads=None) -> bytes
        The same for a chunk already in block order (a 1-d buffer of the padded chunk).
    decode_chunk_array(chunk, chunkshape, blockshape, dtype) -> np.ndarray
        A stored chunk decoded whole: a new C-contiguous array of ``chunkshape`` (padding
        cropped; an edge chunk's items beyond the array are whatever was stored, zeros
        for chunks b2store and python-blosc2 write).
    decode_selection(source, chunkshape, blockshape, dtype, selection, out, *,
                     scratch=None, label="chunk") -> None
        ``out[...] = chunk[selection]``, decoding only the blocks the selection touches.
        ``selection``: one ``slice`` (step > 0) or ``range`` per dimension, inside
        ``chunkshape``. ``source``: the chunk's bytes, or a callable ``fetch(blocks)`` that
        returns the chunk with at least the streams of ``blocks`` (a sorted list of block
        numbers; None: the whole chunk) in place, so that only those are
        read from storage. Which byte ranges the blocks need, and DELTA's block-0 rule, are
        :mod:`b2store.chunk.partial`'s; a chunk whose Blosc blocks are not the array's
        blocks (or special, memcpyed, VL-block) is decoded whole.

Errors: a chunk whose decoded size is not the padded chunk's raises FormatError naming
``label`` (``"chunk 7"``); bad chunk bytes raise the chunk decoder's errors.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence

import numpy as np

from ..chunk import native
from ..chunk.decoder import ChunkDecoder, as_uint8, decode_chunk, in_chunk
from ..chunk.encoder import encode_chunk, special_chunk
from ..chunk.header import ChunkHeader
from ..chunk.params import ChunkParams, parse_b2nd_codec
from ..chunk.partial import decode_blocks, plan_blocks
from ..chunk.plugins import ZFP_CODECS, check_encodable, check_filters_encodable
from ..chunk.repeat import repeats_one_item
from ..constants import Filter, SpecialValue, SplitMode
from ..errors import FormatError
from .geometry import (
    array_to_chunk,
    blocks_per_chunk,
    blocks_touched,
    chunk_nitems,
    chunk_to_array,
)

try:
    from . import _scatter
except ImportError:  # pragma: no cover - a build without the extensions
    _scatter = None

__all__ = [
    "SMALL_CHUNK_BYTES",
    "decode_small_chunk",
    "cparams_for",
    "encode_chunk_array",
    "encode_array_chunk",
    "decode_chunk_array",
    "decode_selection",
    "copy_blocks",
]

ChunkSource = bytes | bytearray | memoryview | np.ndarray | Callable[[list[int] | None], bytes]


def cparams_for(
    dtype: np.dtype,
    blocks: Sequence[int],
    *,
    codec="zstd",
    clevel: int = 5,
    filters=None,
    filters_meta=None,
    splitmode="auto",
    codec_meta: int = 0,
) -> ChunkParams:
    """The chunk parameters of an array: python-blosc2's defaults unless given.

    Names and the ``Codec``/``Filter``/``SplitMode`` enums are both accepted; c-blosc2's
    plugins (ZFP, NDLZ, NDCELL, NDMEAN) too, as they work on the array's ``blocks``.
    """
    dtype = np.dtype(dtype)
    codec = parse_b2nd_codec(codec)  # a plugin b2store does not have: refused, named
    if filters is None and codec in ZFP_CODECS:
        # ZFP codes floats: python-blosc2 keeps its default SHUFFLE, which hands ZFP the
        # floats' bytes regrouped, and its accuracy, precision or rate then mean nothing.
        filters = []
    elif filters is None:
        filters = [0, 0, 0, 0, 0, int(Filter.SHUFFLE)]
        # UCS4 strings shuffle 4-byte code units, not whole strings (python-blosc2 too).
        filters_meta = [0, 0, 0, 0, 0, 4 if dtype.kind == "U" else 0]
    params = ChunkParams(
        codec=codec,
        clevel=clevel,
        typesize=dtype.itemsize,
        filters=filters,
        filters_meta=filters_meta,
        splitmode=splitmode,
        blocksize=math.prod(blocks) * dtype.itemsize,
        codec_meta=codec_meta,
        blockshape=tuple(blocks),
    )
    check_encodable(
        params.codec,
        params.codec_meta,
        dtype.itemsize,
        params.blockshape,
        params.splitmode == SplitMode.ALWAYS_SPLIT,
    )
    check_filters_encodable(params.filters, params.filters_meta, dtype.itemsize, params.blockshape)
    return params


# --- encoding -----------------------------------------------------------------------------


def _constant_chunk(buf: np.ndarray, dtype: np.dtype, blocksize: int) -> bytes | None:
    """A special chunk for a chunk whose items are all one value, else None."""
    raw = buf.view(np.uint8).reshape(-1)
    items = raw.reshape(-1, dtype.itemsize)
    if not len(items) or (items[-1] != items[0]).any():
        return None  # most chunks show it at their last item: no pass over them all
    if not repeats_one_item(raw, dtype.itemsize):
        return None
    if not items[0].any():
        return special_chunk(SpecialValue.ZERO, buf.nbytes, dtype.itemsize, blocksize=blocksize)
    return special_chunk(
        SpecialValue.VALUE, buf.nbytes, dtype.itemsize, items[0].tobytes(), blocksize=blocksize
    )


def encode_array_chunk(
    buf: np.ndarray, dtype: np.dtype, params: ChunkParams, nthreads: int | None = None
) -> bytes:
    """One chunk from ``buf``, the padded chunk already in block order (1-d); its blocks
    compressed by ``nthreads`` threads (None: as many as reads use, the cores by default,
    as python-blosc2 does)."""
    dtype = np.dtype(dtype)
    special = _constant_chunk(buf, dtype, params.blocksize)
    if special is not None:
        return special
    if nthreads is None:
        nthreads = native.default_nthreads()
    return encode_chunk(buf.view(np.uint8), params, nthreads=nthreads)


def encode_chunk_array(
    array,
    chunkshape: Sequence[int],
    blockshape: Sequence[int],
    params: ChunkParams,
    *,
    dtype=None,
    nthreads: int | None = None,
) -> bytes:
    """``array`` (the chunk's part of an array: ``chunkshape`` or smaller) as one b2nd chunk.

    Parameters
    ----------
    array : array_like
        The chunk's items; an edge chunk is smaller than ``chunkshape`` and is padded with
        zeros, as is the rounding of ``chunkshape`` up to whole blocks.
    chunkshape, blockshape : sequence of int
        The array's chunk and block shapes.
    params : mapping
        Keywords of :func:`b2store.chunk.encoder.encode_chunk` (``codec``, ``clevel``,
        ``filters``, ``filters_meta``, ``splitmode``, ...), e.g. from :func:`cparams_for`.
        ``typesize`` and ``blocksize`` are set from ``dtype`` and ``blockshape``.
    dtype : numpy.dtype, optional
        The item type, when it has a subarray shape whose dimensions trail ``array``'s.
    nthreads : int, optional
        Blocks compressed at once (default: the cores, as :func:`encode_array_chunk`).

    Returns
    -------
    bytes
        The chunk; a special chunk when every item is the same.

    >>> import numpy as np
    >>> x = np.arange(10, dtype="<i4").reshape(2, 5)
    >>> chunk = encode_chunk_array(x, (2, 5), (2, 3), cparams_for(x.dtype, (2, 3)))
    >>> decode_chunk_array(chunk, (2, 5), (2, 3), x.dtype).tolist() == x.tolist()
    True
    """
    array = np.asarray(array)
    dtype = array.dtype if dtype is None else np.dtype(dtype)
    buf = array_to_chunk(array, chunkshape, blockshape)
    params = params.replace(
        typesize=dtype.itemsize, blocksize=math.prod(blockshape) * dtype.itemsize
    )
    return encode_array_chunk(buf, dtype, params, nthreads)


# --- decoding -----------------------------------------------------------------------------


def decode_chunk_array(
    chunk, chunkshape: Sequence[int], blockshape: Sequence[int], dtype
) -> np.ndarray:
    """A stored b2nd chunk decoded whole, as a new C-contiguous array of ``chunkshape``."""
    dtype = np.dtype(dtype)
    buf = np.empty(chunk_nitems(chunkshape, blockshape) * dtype.itemsize, np.uint8)
    decoder = ChunkDecoder(chunk, blockshape=blockshape)
    _check_nbytes(decoder.header.nbytes, buf, "chunk")
    decoder.decode_into(buf)
    ext = chunk_to_array(buf, chunkshape, blockshape, dtype)
    return np.ascontiguousarray(ext[tuple(slice(0, c) for c in chunkshape)])


def decode_selection(
    source: ChunkSource,
    chunkshape: Sequence[int],
    blockshape: Sequence[int],
    dtype,
    selection: Sequence[slice | range],
    out: np.ndarray,
    *,
    scratch: np.ndarray | None = None,
    label: str = "chunk",
) -> None:
    """Decode ``chunk[selection]`` into ``out``, decoding only the blocks it touches.

    Parameters
    ----------
    source : bytes-like or callable
        The chunk, or ``fetch(blocks)`` returning it with at least the streams of ``blocks``
        (sorted block numbers; None means all) in place; the fetcher adds block 0 where DELTA
        needs it.
    chunkshape, blockshape : sequence of int
        The array's chunk and block shapes.
    dtype : numpy.dtype
        The item type.
    selection : sequence of slice or range
        Per dimension, ascending positions inside the chunk (slices with a positive step).
    out : numpy.ndarray
        Where the selected items go: the selection's shape (a view into a larger result is
        fine), with a subarray dtype's dimensions trailing.
    scratch : numpy.ndarray, optional
        A uint8 buffer of the padded chunk's bytes to decode into (reused across calls).
    label : str
        How errors name the chunk (``"chunk 7"``).
    """
    try:
        _decode_selection(source, chunkshape, blockshape, dtype, selection, out, scratch, label)
    except FormatError as exc:
        raise in_chunk(exc, label) from None


def _decode_selection(source, chunkshape, blockshape, dtype, selection, out, scratch, label):
    dtype = np.dtype(dtype)
    chunkshape = tuple(int(c) for c in chunkshape)
    blockshape = tuple(int(b) for b in blockshape)
    ranges = _ranges(selection, chunkshape)
    if any(len(r) == 0 for r in ranges):
        return
    nbytes = chunk_nitems(chunkshape, blockshape) * dtype.itemsize
    if scratch is None:
        scratch = np.empty(nbytes, np.uint8)
    elif scratch.nbytes != nbytes or scratch.dtype != np.uint8:
        raise ValueError(f"scratch must be {nbytes} bytes of uint8")
    region = [(r[0], r[-1] + 1) for r in ranges]
    direct = _direct_target(ranges, chunkshape, blockshape, dtype, out)
    if direct is not None:
        # The whole chunk, whose decoded bytes are its items in C order, into a contiguous
        # part of the output: decode straight there, no scratch, no copy.
        _decode_blocks(source, region, chunkshape, blockshape, dtype, direct, label)
        return
    wanted = None
    if dtype.subdtype is None and all(r.step == 1 for r in ranges):
        if len(scratch) < SMALL_CHUNK_BYTES:
            # A small chunk, whole or most of it: one C pass, one scatter (the general path's
            # planning cost more than decoding a chunk of a few tens of kB).
            whole = all(r.start == 0 and len(r) == c for r, c in zip(ranges, chunkshape))
            wanted = None if whole else blocks_touched(region, chunkshape, blockshape)
            if whole or 2 * len(wanted) > math.prod(blocks_per_chunk(chunkshape, blockshape)):
                if callable(source):
                    source = source(None)
                if decode_small_chunk(source, chunkshape, blockshape, scratch, out, wanted, region):
                    return
        else:
            wanted = blocks_touched(region, chunkshape, blockshape) if chunkshape else [0]
            if _decode_in_groups(
                source, wanted, ranges, chunkshape, blockshape, dtype, scratch, out, label
            ):
                return
    wanted = _decode_blocks(source, region, chunkshape, blockshape, dtype, scratch, label, wanted)
    if dtype.subdtype is None and all(r.step == 1 for r in ranges):
        copy_blocks(wanted, ranges, chunkshape, blockshape, dtype, scratch, out)
        return
    ext = chunk_to_array(scratch, chunkshape, blockshape, dtype)
    out[...] = ext[tuple(slice(r.start, r.stop, r.step) for r in ranges)]


def _ranges(selection, chunkshape) -> list[range]:
    if len(selection) != len(chunkshape):
        raise ValueError(f"{len(selection)} selections for a {len(chunkshape)}-d chunk")
    ranges = []
    for s, c in zip(selection, chunkshape):
        r = range(c)[s] if isinstance(s, slice) else s
        if not isinstance(r, range) or r.step < 1:
            raise ValueError(f"a selection is ascending slices or ranges, not {s!r}")
        if len(r) and not (0 <= r[0] and r[-1] < c):
            raise ValueError(f"selection {s!r} outside a chunk dimension of {c}")
        ranges.append(r)
    return ranges


def _direct_target(ranges, chunkshape, blockshape, dtype, out: np.ndarray) -> np.ndarray | None:
    """``out`` as the flat bytes of the decoded chunk, when the selection is the whole chunk,
    ``out`` is contiguous and the chunk's block order is C order: every block is a run of
    whole trailing rows (blocks of 1 before some dimension, the full chunk after it)."""
    if not isinstance(out, np.ndarray) or dtype.subdtype is not None or out.dtype != dtype:
        return None
    if not out.flags.c_contiguous or not out.flags.writeable:
        return None
    if any(r.start != 0 or r.step != 1 or len(r) != c for r, c in zip(ranges, chunkshape)):
        return None
    split = next((d for d in range(len(blockshape)) if blockshape[d] != 1), len(blockshape))
    if any(b != c for b, c in zip(blockshape[split + 1 :], chunkshape[split + 1 :])):
        return None
    if split < len(blockshape) and chunkshape[split] % blockshape[split]:
        return None  # padded to whole blocks
    return out.reshape(-1).view(np.uint8)


def _check_nbytes(nbytes: int, buf: np.ndarray, label: str) -> None:
    if nbytes != len(buf):
        raise FormatError(f"{label} nbytes", str(len(buf)), nbytes)


def _decode_blocks(
    source, region, chunkshape, blockshape, dtype, buf: np.ndarray, label, wanted=None
) -> list[int]:
    """Decode into ``buf`` at least the blocks ``region`` touches (``wanted``, where the
    caller has them); returns them."""
    if wanted is None:
        wanted = blocks_touched(region, chunkshape, blockshape) if chunkshape else [0]
    nblocks = math.prod(blocks_per_chunk(chunkshape, blockshape))
    block_bytes = math.prod(blockshape) * dtype.itemsize
    few = len(wanted) * 2 <= nblocks
    if few and hasattr(source, "decode_blocks"):
        # A source that decodes blocks itself plans and reads once, straight into ``buf``.
        if source.decode_blocks(sorted(set(wanted)), buf, blocksize=block_bytes) is not None:
            return wanted
        source = source(None)
    if callable(source):
        # Few blocks: fetch only their bytes (the fetcher adds block 0 when DELTA needs it).
        chunk = source(sorted(set(wanted)) if few else None)
    else:
        chunk = source
    chunk = as_uint8(chunk, name="chunk")
    try:
        plan = plan_blocks(chunk, wanted) if len(wanted) < nblocks else None
    except IndexError as exc:
        header = ChunkHeader.from_bytes(chunk)
        if header.vl_blocks or header.effective_blocksize == block_bytes:
            # The chunk has fewer blocks than the array's geometry says.
            raise FormatError(
                f"{label} nblocks", f"block {max(wanted)} of {nblocks}", str(exc)
            ) from None
        plan = None  # Blosc blocks that are not the array's: their numbers name other bytes
    if plan is not None and plan.header.effective_blocksize == block_bytes:
        _check_nbytes(plan.header.nbytes, buf, label)
        pieces = [chunk[start:stop] for start, stop in plan.ranges]
        # Only the prefix as the prefix: the rest of ``chunk`` is not copied again.
        decode_blocks(plan, chunk[: plan.prefix_length], pieces, buf, blockshape)
        return wanted
    # Special, memcpyed or VL-block chunks, all blocks wanted, or Blosc blocks that are not
    # the array's blocks: decode it whole (the items are in block order all the same), in
    # one C pass where the chunk is of the common kind.
    header = ChunkHeader.from_bytes(chunk)
    _check_nbytes(header.nbytes, buf, label)
    try:
        decode_chunk(
            chunk,
            out=buf,
            nthreads=native.default_nthreads(),
            max_nbytes=len(buf),
            blockshape=blockshape,
        )
    except FormatError as exc:
        if header.special or header.vl_blocks or header.effective_blocksize == block_bytes:
            raise
        # Other blocks than the array's are valid Blosc, but a damaged chunk often shows
        # first as its block size (fewer, larger blocks): name both.
        raise FormatError(
            f"{label} blocksize",
            f"{block_bytes} bytes (the array's blocks), or a chunk of other blocks that decodes",
            f"{header.effective_blocksize} bytes in a chunk that does not ({exc})",
        ) from exc
    return wanted


# Most of a chunk is decoded a group of blocks of about this size at a time, each group
# copied to the output while it is still in the core's cache.
_GROUP_BYTES = 1 << 20
# Smaller (padded) chunks are decoded whole in one C pass, then scattered.
SMALL_CHUNK_BYTES = 2 * _GROUP_BYTES


def decode_small_chunk(
    chunk, chunkshape, blockshape, scratch, out, wanted=None, region=None
) -> bool:
    """Decode ``chunk`` whole into ``scratch`` in one C pass and put the ``wanted`` blocks'
    part in ``region`` (all of them, the whole chunk, when None) in ``out``; False (``out``
    untouched) for a chunk the pass does not take (special, damaged, ...)."""
    if _scatter is None or not isinstance(out, np.ndarray) or out.ndim != len(chunkshape):
        return False
    nthreads = native.default_nthreads()
    if native.quick_decode(chunk, scratch, nthreads, len(scratch)) is None:
        return False
    if wanted is None:
        blocks, lo, hi = _all_blocks(chunkshape, blockshape), (0,) * len(chunkshape), chunkshape
    else:
        blocks = np.asarray(wanted, np.int64)
        lo, hi = [a for a, _ in region], [b for _, b in region]
    _scatter.scatter_blocks(scratch, 0, blocks, chunkshape, blockshape, lo, hi, out)
    return True


@functools.lru_cache(maxsize=64)
def _all_blocks(chunkshape, blockshape) -> np.ndarray:
    blocks = np.arange(math.prod(blocks_per_chunk(chunkshape, blockshape)), dtype=np.int64)
    blocks.flags.writeable = False
    return blocks


def _decode_in_groups(
    source, wanted, ranges, chunkshape, blockshape, dtype, scratch, out, label
) -> bool:
    """Most of a chunk whose items do not lie in the output as they lie in the chunk: decode
    it a group of blocks at a time into the start of ``scratch`` with the C block loop, and
    copy each group to ``out`` while it is still in cache (instead of the whole chunk out to
    memory and back). False when this is not the way (few blocks, or a chunk the C loop does
    not take as the array's blocks); nothing has been read then. ``wanted``: the blocks
    the selection touches."""
    nblocks = math.prod(blocks_per_chunk(chunkshape, blockshape))
    block_bytes = math.prod(blockshape) * dtype.itemsize
    group = max(1, _GROUP_BYTES // max(block_bytes, 1))
    if len(wanted) * 2 <= nblocks or group * 2 > nblocks or not native.enabled():
        return False
    if callable(source):
        source = source(None)
    decoder = ChunkDecoder(as_uint8(source, name="chunk"), blockshape=blockshape)
    _check_nbytes(decoder.header.nbytes, scratch, label)
    header = decoder.header
    nthreads = native.default_nthreads()
    if not decoder.native or header.vl_blocks or header.effective_blocksize != block_bytes:
        # Not the array's blocks, or no C loop for it: decoded whole, from these bytes.
        return _decode_all(
            decoder, wanted, ranges, chunkshape, blockshape, dtype, scratch, out, nthreads
        )
    groups = []
    i = 0
    while i < len(wanted):
        lo, k = wanted[i], i
        while k < len(wanted) and wanted[k] < lo + group:
            k += 1
        groups.append((lo, wanted[i:k]))
        i = k
    # Each thread decodes a group into its own room and copies it out, then takes the next:
    # the copy is shared as the decode is (one thread copying while the others waited cost a
    # whole read of 16 MB chunks a third of its time). Block 0 of a DELTA chunk after them.
    room_bytes = group * block_bytes
    has_delta = decoder.pipeline.has_delta
    rooms = max(1, min(nthreads, len(groups), len(scratch) // room_bytes - has_delta))
    first = None
    if has_delta:
        # DELTA codes every block against block 0: decoded once.
        first = scratch[rooms * room_bytes : rooms * room_bytes + block_bytes]
        if not native.decode(decoder, [0], first, 0):
            return _decode_all(decoder, wanted, ranges, chunkshape, blockshape, dtype, scratch, out)
    where = (ranges, chunkshape, blockshape, dtype, scratch, out)
    if rooms > 1:
        if _in_rooms(decoder, groups, rooms, room_bytes, block_bytes, first, where):
            return True
    else:
        for lo, members in groups:
            room = scratch[: (members[-1] - lo + 1) * block_bytes]
            if not native.decode(decoder, members, room, lo * block_bytes, first, nthreads):
                break
            copy_blocks(members, ranges, chunkshape, blockshape, dtype, room, out, base=lo)
        else:
            return True
    return _decode_all(decoder, wanted, ranges, chunkshape, blockshape, dtype, scratch, out)


def _in_rooms(decoder, groups, rooms: int, room_bytes: int, block_bytes: int, first, where):
    """``groups`` of blocks decoded and copied out by ``rooms`` threads, each into its own
    ``room_bytes`` of ``scratch`` (the first ``rooms`` of them); False if a block failed."""
    ranges, chunkshape, blockshape, dtype, scratch, out = where
    pending = iter(groups)
    lock = threading.Lock()
    failed = []

    def work(n: int) -> int:
        mine = scratch[n * room_bytes : (n + 1) * room_bytes]
        while not failed:
            with lock:
                lo, members = next(pending, (None, None))
            if members is None:
                return 0
            room = mine[: (members[-1] - lo + 1) * block_bytes]
            if not native.decode(decoder, members, room, lo * block_bytes, first):
                failed.append(lo)
                return 1
            copy_blocks(members, ranges, chunkshape, blockshape, dtype, room, out, base=lo)
        return 1

    pool = native.executor(rooms - 1)
    jobs = [pool.submit(work, n) for n in range(1, rooms)]
    rc = work(0)
    rc = max([rc] + [job.result() for job in jobs])
    return rc == 0 and not failed


def _decode_all(
    decoder, wanted, ranges, chunkshape, blockshape, dtype, scratch, out, nthreads=1
) -> bool:
    # The whole chunk at once; where the C loop refused a block, the Python decoder decodes
    # it or names what is wrong.
    decoder.decode_into(scratch, nthreads=nthreads)
    copy_blocks(wanted, ranges, chunkshape, blockshape, dtype, scratch, out)
    return True


def copy_blocks(
    wanted, ranges, chunkshape, blockshape, dtype, buf, out: np.ndarray, base: int = 0
) -> None:
    """Copy each decoded block's selected part straight to its place in ``out`` (one copy,
    whatever the block layout); every range has step 1. ``buf`` holds the decoded chunk from
    block ``base`` on."""
    if _scatter is not None and isinstance(out, np.ndarray) and out.ndim == len(ranges):
        # In C, one memcpy per row piece (numpy, a block at a time, cost more than decoding).
        _scatter.scatter_blocks(
            buf, base, np.asarray(wanted, np.int64), chunkshape, blockshape,
            [r.start for r in ranges], [r.stop for r in ranges], out,
        )  # fmt: skip
        return
    # A build without the extensions: numpy, a block at a time.
    per_dim = blocks_per_chunk(chunkshape, blockshape)
    block_items = math.prod(blockshape)
    items = buf.view(dtype)[: len(buf) // dtype.itemsize]
    for j in wanted:
        coords = np.unravel_index(j, per_dim) if per_dim else ()
        src, dst = [], []
        for c, b, r in zip(coords, blockshape, ranges):
            lo, hi = max(r.start, c * b), min(r.stop, (c + 1) * b)
            if lo >= hi:
                break
            src.append(slice(lo - c * b, hi - c * b))
            dst.append(slice(lo - r.start, hi - r.start))
        else:
            at = (j - base) * block_items
            block = items[at : at + block_items].reshape(blockshape)
            out[tuple(dst)] = block[tuple(src)]
