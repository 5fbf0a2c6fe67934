"""The chunks of a read decoded with one compiled call each, or one per run of them.

The whole small chunks of a read are decoded a run at a time: one read of neighbouring
chunks' bytes (:meth:`~b2store.frame.schunk.SChunk.stored_runs`) and one compiled call
(:func:`b2store.nd._read_chunks.decode_run`) that decodes each and copies it to its place. Of a
chunk a read cuts, the few blocks it needs are read into their places in a buffer kept per thread
(:meth:`~b2store.frame.schunk.SChunk.chunk_part`), then walked, decoded and copied out in one
call (:func:`b2store.nd._read_chunks.decode_part`).

A whole-array read of 400 chunks of 100x100 int16 spent about 10 us of Python per chunk
(two reads, a plan, a scatter, the checks between them), as long as the decoding itself.
Here the per-chunk work is array arithmetic done once per read and a loop in C. The chunks
this path leaves (special ones, ones the C loop does not take, all of a sparse frame's) are
returned to be read one by one as before, which also reports what is wrong with them.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, replace

import numpy as np

from ..chunk import native
from ..frame.schunk import SChunk
from ..frame.state import State
from .geometry import blocks_per_chunk, blocks_touched

try:
    from . import _read_chunks
except ImportError:  # pragma: no cover - a build without the extensions
    _read_chunks = None

__all__ = [
    "ReadRows",
    "available",
    "box_threads",
    "box_way",
    "read_box",
    "read_part",
    "read_parts",
    "read_runs",
    "read_small",
    "straight_box",
]

# Padded chunks up to this size are decoded whole in runs. 64^3 float64 chunks (2 MiB) read
# whole at 0.83-0.85x python-blosc2 by groups of blocks and at 1.05-1.09x in runs; 4 MiB
# ones at 0.84-0.86x either way, so larger chunks keep the groups (less memory per thread).
MAX_CHUNK_BYTES = 2 << 20

# Chunks per thread at the least: a thread's handoff (30-40 us) costs more than a few
# small chunks' decoding.
_CHUNKS_PER_THREAD = 8


def available() -> bool:
    """Whether runs are decoded in C here (the extensions are built and enabled)."""
    return _read_chunks is not None and native.enabled()


@dataclass(frozen=True)
class ReadRows:
    """The chunks of a read, a row each (as :func:`~b2store.nd.indexing.split_whole` gives
    them): chunk ``k`` is number ``nchunks[k]`` of the frame, and its items ``[lows[k],
    lows[k] + extents[k])`` go in the output at ``origins[k]``; the array's chunk and block
    shapes beside."""

    nchunks: np.ndarray
    origins: np.ndarray
    lows: np.ndarray
    extents: np.ndarray
    chunkshape: tuple[int, ...]
    blockshape: tuple[int, ...]

    def take(self, rows: np.ndarray) -> ReadRows:
        """Only the chunks at positions ``rows``."""
        return replace(
            self,
            nchunks=self.nchunks[rows],
            origins=self.origins[rows],
            lows=self.lows[rows],
            extents=self.extents[rows],
        )


def read_runs(
    schunk: SChunk, state: State, rows: ReadRows, out: np.ndarray, scratch: np.ndarray
) -> np.ndarray:
    """Decode the chunks ``rows`` of ``state`` and put each one's items in ``out``;
    ``scratch`` holds one padded chunk. Returns the positions in ``rows`` of the chunks not
    done, for the caller to read one by one."""
    nchunks = rows.nchunks
    done = np.zeros(len(nchunks), np.uint8)
    nthreads = native.default_nthreads()
    # Chunks with none of the others beside them in the frame (a column of a 2-d array,
    # chunks written out of order) are each a run of their own: about 25 us of Python per
    # run. They are read from the file in one call instead (read_parts), whole.
    alone: list[int] = []
    for data, which, starts, ends in schunk.stored_runs(nchunks, state, alone=alone):
        _decode_run(data, which, starts, ends, rows, out, scratch, done, nthreads)
    if alone:
        single = np.array(alone, np.int64)
        left = single[read_parts(schunk, state, rows.take(single), out, scratch)]
        done[single] = 1
        done[left] = 0
        if len(left):  # (DELTA chunks, say, which read_parts does not take): as runs
            for data, which, starts, ends in schunk.stored_runs(nchunks[left], state):
                _decode_run(data, left[which], starts, ends, rows, out, scratch, done, nthreads)
    return np.flatnonzero(done == 0)


def _decode_run(data, which, starts, ends, rows: ReadRows, out, scratch, done, nthreads: int):
    """One run's chunks decoded and placed, with threads when there are enough of them."""
    args = (data, starts, ends, which, rows.origins, rows.lows, rows.extents)
    shapes = rows.chunkshape, rows.blockshape
    threads = min(
        native.threads_for(len(which) * len(scratch), nthreads),
        len(which) // _CHUNKS_PER_THREAD or 1,
    )
    _shared(
        lambda chunk, lo, hi: _run(args, *shapes, out, chunk, done, lo, hi),
        len(which), scratch, threads,
    )  # fmt: skip


def _run(args, chunkshape, blockshape, out, chunk, done, lo: int, hi: int) -> int:
    data, starts, ends, which, origins, lows, extents = args
    return _read_chunks.decode_run(
        data, starts[lo:hi], ends[lo:hi], which[lo:hi], origins, lows, extents,
        chunkshape, blockshape, out, chunk, native._scratch(), done,
    )  # fmt: skip


def _shared(work, n: int, scratch: np.ndarray, threads: int) -> None:
    """``work(chunk, lo, hi)`` over ``n`` chunks cut in ``threads`` parts, each in its own
    thread with its own padded chunk (``scratch`` for this thread's): the parts write to
    different parts of the output and of ``done``."""
    if threads <= 1:
        work(scratch, 0, n)
        return
    cuts = [n * t // threads for t in range(threads + 1)]
    pool = native.executor(threads - 1)
    jobs = [
        pool.submit(work, np.empty_like(scratch), lo, hi) for lo, hi in zip(cuts[1:-1], cuts[2:])
    ]
    work(scratch, cuts[0], cuts[1])
    for job in jobs:
        job.result()


# Each thread's buffer for the stored bytes of a cut chunk (its prefix and the blocks read):
# a fresh one per chunk cost page faults; one per array would be shared by dask's threads.
# Chunks stored in more bytes take the general path, so that no thread keeps more.
_local = threading.local()
_ROOM_MAX = 32 << 20


def read_parts(
    schunk: SChunk, state: State, rows: ReadRows, out: np.ndarray, scratch: np.ndarray
) -> np.ndarray:
    """The chunks ``rows`` of ``state``, of which a read needs a few blocks: their items into
    ``out``, in one compiled call (one per thread) that reads those blocks from the frame's
    file, decodes them and places them. Returns the positions in ``rows`` of the chunks not
    done (the frame is not a local file, or a chunk is not of the kind the call takes), for
    the caller to read one by one."""
    nchunks, origins, lows, extents = rows.nchunks, rows.origins, rows.lows, rows.extents
    chunkshape, blockshape = rows.chunkshape, rows.blockshape
    done = np.zeros(len(nchunks), np.uint8)
    found = schunk.file_positions(nchunks, state)
    if found is None:
        return np.arange(len(nchunks))
    fd, positions, limits = found
    try:
        args = (fd, positions, limits, origins, lows, extents, chunkshape, blockshape, out)
        threads = len(nchunks) // _CHUNKS_PER_THREAD
        if threads > 1:
            b = np.asarray(blockshape)
            blocks = ((lows + extents - 1) // b - lows // b + 1).prod(axis=1).sum()
            nbytes = int(blocks) * math.prod(blockshape) * out.itemsize
            threads = min(threads, native.threads_for(nbytes, native.default_nthreads()))
        _shared(
            lambda chunk, lo, hi: _parts(args, chunk, done, lo, hi), len(nchunks), scratch,
            threads,
        )  # fmt: skip
    finally:
        os.close(fd)
    return np.flatnonzero(done == 0)


def _parts(args, chunk: np.ndarray, done: np.ndarray, lo: int, hi: int) -> None:
    """:func:`read_parts` of its chunks ``lo:hi``, in this thread, into ``chunk``."""
    fd, positions, limits, origins, lows, extents, chunkshape, blockshape, out = args
    # Room for the largest of them, as far as the index tells.
    room = _room(int(limits[lo:hi].max()))
    _read_chunks.read_parts(
        fd, positions[lo:hi], limits[lo:hi], np.arange(lo, hi, dtype=np.int64), origins, lows,
        extents, chunkshape, blockshape, out, room, chunk, native._scratch(), done,
    )  # fmt: skip


# Boxes of up to this many chunks are planned and read in one compiled call (read_box);
# larger reads are split in Python, their whole chunks read a run at a time, with threads.
BOX_CHUNKS = 64


def box_way(dims, shape, chunkshape, blockshape, out: np.ndarray, small: bool) -> int:
    """How many threads :func:`read_box` reads the box ``dims`` with; 0 where it is not the
    way. It takes a box (step-1 ranges) of a few ``small`` chunks with too few blocks for
    threads to share, in one thread; and a box of many large chunks that it decodes
    straight into ``out`` (:func:`straight_box`), one per thread at a time: no copy out of
    scratch, no Python per chunk (a whole read of 8 MB chunks handed each to two threads in
    turn, the chunk's read and the Python between them done by one thread). A read of one
    large chunk keeps the threads over its blocks."""
    if not all(r.step == 1 and len(r) for r in dims):
        return 0
    touched = math.prod((r.stop - 1) // c - r.start // c + 1 for r, c in zip(dims, chunkshape))
    if not small:
        if touched > 1 and straight_box(dims, shape, chunkshape, blockshape):
            return min(box_threads(dims, chunkshape, blockshape, out), touched)
        return 0
    # (box_threads walks the chunks along each dimension: only for a few of them)
    return 1 if touched <= BOX_CHUNKS and box_threads(dims, chunkshape, blockshape, out) == 1 else 0


def straight_box(dims, shape, chunkshape, blockshape) -> bool:
    """Whether the box ``dims`` (step-1 ranges) takes its chunks whole along every
    dimension but the first, chunks that are the array's full length there and whose blocks
    are whole trailing rows of them (blocks of 1 before one dimension, not padded along it,
    the chunk's full length after it): then :func:`read_box` decodes each chunk it takes
    from its start straight into the output, as python-blosc2's default layouts are read
    whole (``_read_chunks._straight_to`` decides per chunk)."""
    nd = len(chunkshape)
    split = next((d for d in range(nd) if blockshape[d] != 1), nd)
    if split < nd and chunkshape[split] % blockshape[split]:
        return False
    if any(blockshape[d] != chunkshape[d] for d in range(split + 1, nd)):
        return False
    return all(
        dims[d].start == 0 and len(dims[d]) == shape[d] == chunkshape[d] for d in range(1, nd)
    )


def box_threads(dims, chunkshape, blockshape, out: np.ndarray) -> int:
    """How many threads would share decoding the blocks that the box ``dims`` (step-1
    ranges) touches."""
    blocks = 1
    for r, c, b in zip(dims, chunkshape, blockshape):
        n = 0
        for k in range(r.start // c, (r.stop - 1) // c + 1):
            lo, hi = max(r.start, k * c) - k * c, min(r.stop, k * c + c) - k * c
            n += (hi - 1) // b - lo // b + 1
        blocks *= n
    nbytes = blocks * math.prod(blockshape) * out.itemsize
    return native.threads_for(nbytes, native.default_nthreads())


def read_box(
    schunk: SChunk, state: State, lo, hi, shape, chunkshape, blockshape, out, scratch,
    threads: int = 1,
) -> np.ndarray | None:  # fmt: skip
    """Items ``[lo, hi)`` (a box) of the array into ``out``, every chunk the box touches
    planned, read from the frame's file, decoded and placed in one compiled call (one per
    thread of ``threads``, each taking the next chunk as it is free). Returns the numbers
    of the chunks not done, for the caller to read another way; None when the frame is not
    a local file (nothing done)."""
    found = schunk.file_index(state)
    if found is None:
        return None
    fd, offsets, stored, base = found
    try:
        # (as the index was decoded: already int64 and contiguous, then not copied)
        offsets = np.ascontiguousarray(offsets, np.int64)
        left = np.empty(math.prod(len(range(a // c, (b - 1) // c + 1))
                                  for a, b, c in zip(lo, hi, chunkshape)), np.int64)  # fmt: skip
        widest = schunk.widest_stored(state)
        args = (fd, offsets, stored, base, lo, hi, shape, chunkshape, blockshape, out)
        if threads <= 1:
            n = _read_chunks.read_box(*args, _room(widest), scratch, native._scratch(), left)
            return left[:n]
        shared = np.zeros(2, np.int64)
        _together(
            lambda chunk: _read_chunks.read_box(
                *args, _room(widest), chunk, native._scratch(), left, shared=shared
            ),
            scratch, min(threads, len(left)),
        )  # fmt: skip
    finally:
        os.close(fd)
    return np.sort(left[: shared[1]])


def read_small(
    schunk: SChunk, state: State, lo, hi, shape, chunkshape, blockshape, out, chunk_bytes: int
) -> bool:  # fmt: skip
    """Items ``[lo, hi)`` of the array (a box inside one chunk, a few of its blocks) into
    ``out``: the chunk's header, block starts and those blocks read from the frame's file,
    decoded and copied out in one compiled call (:func:`read_box`'s, for one chunk: the
    Python around a one-element read was a third of its time). False where that is not the
    way, ``out`` then not all written: the frame is not a local file, or the chunk is not of
    the kind the call takes (special, DELTA, other blocks than the array's, damaged); the
    caller reads it the general way, which decodes it or names what is wrong."""
    found = schunk.file_index(state)
    if found is None:
        return False
    fd, offsets, stored, base = found
    try:
        room = _room(schunk.widest_stored(state))
        left = np.empty(1, np.int64)
        return not _read_chunks.read_box(
            fd, np.ascontiguousarray(offsets, np.int64), stored, base, lo, hi, shape,
            chunkshape, blockshape, out, room, np.empty(chunk_bytes, np.uint8),
            native._scratch(), left,
        )  # fmt: skip
    finally:
        os.close(fd)


def _together(work, scratch: np.ndarray, threads: int) -> None:
    """``work(chunk)`` in ``threads`` threads at once (this one with ``scratch``, the others
    each with a padded chunk of their own, which only the chunks decoded out of place
    touch), all of them done before it returns, also when one fails (they read from a
    descriptor the caller closes then). ``work`` takes chunks from a shared counter until
    none is left: a job not started when this thread is done is dropped (on a busy machine
    its thread may wait milliseconds for a core)."""
    pool = native.executor(threads - 1)
    jobs = [pool.submit(work, np.empty_like(scratch)) for _ in range(threads - 1)]
    try:
        work(scratch)
    finally:
        jobs = [job for job in jobs if not job.cancel()]
        for job in jobs:
            job.exception()  # (waits)
    for job in jobs:
        job.result()


def _room(need: int) -> np.ndarray:
    """This thread's kept buffer for a chunk's stored bytes, grown to ``need`` (at most
    ``_ROOM_MAX``: larger chunks are left to the caller)."""
    need = min(need, _ROOM_MAX)
    room = getattr(_local, "room", None)
    if room is None or len(room) < need:
        room = _local.room = np.empty(need, np.uint8)
    return room


def read_part(
    schunk: SChunk,
    state: State,
    nchunk: int,
    ranges,
    chunkshape,
    blockshape,
    out: np.ndarray,
    scratch: np.ndarray,
) -> bool:
    """The part ``ranges`` (step-1 ranges inside the chunk) of chunk ``nchunk`` into
    ``out`` (that part's own array), when it needs at most half the chunk's blocks: only
    their bytes are read, and they are walked, decoded and copied in one call. False when
    this is not the way (more blocks, a chunk the C loop does not take): nothing is
    written to ``out`` then."""
    region = [(r.start, r.stop) for r in ranges]
    wanted = blocks_touched(region, chunkshape, blockshape)
    if 2 * len(wanted) > math.prod(blocks_per_chunk(chunkshape, blockshape)):
        return False
    room = getattr(_local, "room", None)
    if room is None:
        room = np.empty(0, np.uint8)
    block_bytes = math.prod(blockshape) * out.itemsize
    got = schunk.chunk_part(
        nchunk, wanted, room, blocksize=block_bytes, state=state, max_cbytes=_ROOM_MAX
    )
    if got is None:
        return False
    buf, ends = got
    if buf.base is not room:
        _local.room = buf.base if buf.base is not None else buf
    return _read_chunks.decode_part(
        buf, np.asarray(wanted, np.int64), ends, chunkshape, blockshape,
        [lo for lo, _ in region], [hi for _, hi in region], out, scratch, native._scratch(),
    )  # fmt: skip
