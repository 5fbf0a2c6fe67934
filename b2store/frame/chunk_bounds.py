"""Where a frame's stored chunks lie, from its index alone, and the reads that knowing it
allows: chunks that lie one after another in a contiguous frame read together, a run of up
to a few MB at a time (:meth:`ChunkBounds.stored_runs`); a local frame's file places handed
to a compiled reader (:meth:`ChunkBounds.file_positions`, :meth:`ChunkBounds.file_index`);
a remote chunk read in one request (``_span``).

A whole-array read of small chunks took two reads per chunk (its header, then its bytes);
with 20 kB chunks, those reads and the Python around them cost as much as decoding. A run's
bounds come from the frame's index alone: a chunk's bytes end at most where the next stored
chunk starts (or the chunks section ends), so one read of a run holds every chunk in it
whole, whatever its size, without reading any header first. The decoder checks each chunk's
own size against what the run holds for it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from . import remote
from .state import State

__all__ = ["ChunkBounds"]

# The most bytes one read of a run takes (a longer chunk is a run of its own).
RUN_BYTES = 4 << 20


class ChunkBounds:
    """Where the chunks of :class:`~b2store.frame.schunk.SChunk` lie, and its many-chunk
    reads (a mixin: it uses the SChunk's ``_backend``, ``_check_open`` and ``_bounds``, the
    stored starts it keeps for one committed state)."""

    def stored_runs(
        self,
        nchunks: np.ndarray,
        state: State,
        max_bytes: int = RUN_BYTES,
        alone: list[int] | None = None,
    ) -> Iterator[tuple[bytes, np.ndarray, np.ndarray, np.ndarray]]:
        """Chunks ``nchunks`` (an int64 array of chunk numbers) of committed state
        ``state``, read a run of neighbours at a time: yields ``(data, which, starts, ends)``,
        one read each, where chunk ``nchunks[which[k]]`` is stored from ``data[starts[k]]``
        and ends at most at ``data[ends[k]]``. Chunks that are not stored in a contiguous
        frame's chunks section (special chunks, bad offsets, sparse frames) are not
        yielded: the caller reads those one by one, which reports what is wrong. With
        ``alone`` (a list), a chunk that would be a run by itself is not read but its
        position in ``nchunks`` appended there (for a reader of the file itself)."""
        self._check_open()
        if not self._backend.contiguous or not len(nchunks):
            return
        plan = plan_runs if len(nchunks) > FEW_CHUNKS else plan_few_runs
        base = state.header.header_len
        runs = plan(
            state.offsets[nchunks], self._stored_starts(state), state.header.cbytes, max_bytes
        )
        if self._backend.remote:
            # Each read a round trip: as many runs as there are requests in flight at once
            # are read side by side, then handed on in order.
            yield from self._overlapped_runs(runs, base)
            return
        for first, last, which, starts, ends in runs:
            if alone is not None and len(which) == 1:
                alone.append(int(which[0]))
                continue
            yield (
                self._backend.read(base + first, last - first),
                np.asarray(which, np.int64),
                np.asarray(starts, np.int64),
                np.asarray(ends, np.int64),
            )

    def _overlapped_runs(self, runs, base: int):
        runs = iter(runs)
        read = self._backend.read
        while batch := list(itertools.islice(runs, remote.CONCURRENT_REQUESTS)):
            got = remote.overlapped(lambda run: read(base + run[0], run[1] - run[0]), batch)
            for data, (_, _, which, starts, ends) in zip(got, batch):
                yield (
                    data,
                    np.asarray(which, np.int64),
                    np.asarray(starts, np.int64),
                    np.asarray(ends, np.int64),
                )

    def file_positions(self, nchunks: np.ndarray, state: State):
        """Where chunks ``nchunks`` of committed state ``state`` lie in the frame's file,
        for a compiled reader of the file itself: ``(fd, positions, limits)``, chunk
        ``nchunks[k]`` stored from byte ``positions[k]`` of the file in at most
        ``limits[k]`` bytes (to the next stored chunk's start), or at position -1 when it
        is not stored in the chunks section (special, a bad offset). ``fd`` is a duplicate
        of the frame's descriptor, for the caller to close: the frame may close its own
        meanwhile. None when the frame is not a local file (a sparse frame, in memory,
        remote): read the chunks through Python then."""
        if not len(nchunks):
            return None
        found = self.file_index(state)
        if found is None:
            return None
        fd, offsets, stored, base = found
        entries = offsets[nchunks]
        # (stored ends with the section's end: a chunk inside the section has a next start)
        at = np.minimum(stored.searchsorted(entries, side="right"), len(stored) - 1)
        inside = (entries >= 0) & (entries < stored[-1])
        positions = np.where(inside, base + entries, -1)
        limits = np.where(inside, stored[at] - entries, 0)
        return fd, positions, limits

    def file_index(self, state: State):
        """The index of committed state ``state`` for a compiled reader of the frame's file:
        ``(fd, offsets, stored, base)``, chunk ``i`` stored from byte ``base + offsets[i]``
        of the file and ending at most at the next of ``stored`` (the distinct stored
        starts, sorted, then the chunks section's end); ``fd`` as :meth:`file_positions`
        gives it. None when the frame is not a local file."""
        self._check_open()
        backend = self._backend
        if not backend.contiguous:
            return None
        fd = backend.duplicate_fd()
        if fd is None:
            return None
        base = backend.file_offset() + state.header.header_len
        return fd, state.offsets, self._stored_starts(state), base

    def _stored_starts(self, state: State) -> np.ndarray:
        """The distinct starts of the chunks stored in ``state``'s chunks section, sorted,
        then the section's end; kept per state."""
        kept = self._bounds
        if kept[0] is state:
            return kept[1]
        offsets = state.offsets
        section = state.header.cbytes
        starts = np.unique(offsets[(offsets >= 0) & (offsets < section)])
        starts = np.append(starts, np.int64(section))
        self._bounds = (state, starts, int(np.diff(starts).max(initial=0)))
        return starts

    def _span(self, state: State, entry: int) -> int:
        """For a frame read over a network, where each read is a round trip: the bytes the
        chunk stored at ``entry`` may take (up to the next stored chunk), for it to be read
        in one request. 0 (read its header first) for a local frame, or where that room is
        much more than a chunk of the frame needs (bytes no chunk names lie after it)."""
        backend = self._backend
        if not backend.remote:
            return 0
        if not backend.contiguous:
            return _SPAN_MOST  # (a chunk object of its own: one request reads it whole)
        starts = self._stored_starts(state)
        k = int(np.searchsorted(starts, entry, side="right"))
        if k >= len(starts):
            return 0
        chunksize = state.header.chunksize
        most = chunksize + chunksize // 8 + 4096 if chunksize > 0 else _SPAN_MOST
        span = int(starts[k]) - entry
        return span if span <= most else 0

    def widest_stored(self, state: State) -> int:
        """The most bytes any chunk stored in ``state`` can take (the widest gap between
        neighbouring stored starts); kept per state."""
        self._stored_starts(state)
        return self._bounds[2]


# A chunk of a frame of chunks of many sizes read remotely in one request up to this size.
_SPAN_MOST = 4 << 20

# Up to this many chunks, runs are planned in Python lists: NumPy's twenty small operations
# cost about 35 us, more than decoding a few 20 kB chunks.
FEW_CHUNKS = 64


def plan_runs(entries: np.ndarray, stored: np.ndarray, section: int, max_bytes: int):
    """The runs of :meth:`ChunkBounds.stored_runs`: ``(first, last, which, starts, ends)`` per
    read of the chunks section's bytes ``[first, last)``, for chunks at section offsets
    ``entries`` (``stored``: the distinct stored starts, sorted, then ``section``, the
    section's length)."""
    which = np.flatnonzero((entries >= 0) & (entries < section))
    # Where each chunk's bytes end at the latest: the next stored chunk's start. A chunk
    # with more room than one run (a large chunk, or bytes no chunk names after it) is
    # left to the caller, which reads its size first.
    ends = stored[np.searchsorted(stored, entries[which], side="right")]
    small = ends - entries[which] <= max_bytes
    which, ends = which[small], ends[small]
    if not len(which):
        return
    entries = entries[which]
    order = np.argsort(entries, kind="stable")
    which, entries, ends = which[order], entries[order], ends[order]
    # Sorted by start, the ends are sorted too. A run breaks where a chunk does not start
    # where the previous one ends (or at the same place: chunks may share their bytes).
    breaks = np.flatnonzero((entries[1:] != ends[:-1]) & (entries[1:] != entries[:-1])) + 1
    for lo, hi in zip([0, *breaks.tolist()], [*breaks.tolist(), len(entries)]):
        while lo < hi:
            # As many chunks as fit in max_bytes (at least one).
            limit = entries[lo] + max_bytes
            stop = lo + max(1, int(np.searchsorted(ends[lo:hi], limit, side="right")))
            first, last = int(entries[lo]), int(ends[stop - 1])
            yield first, last, which[lo:stop], entries[lo:stop] - first, ends[lo:stop] - first
            lo = stop


def plan_few_runs(entries: np.ndarray, stored: np.ndarray, section: int, max_bytes: int):
    """:func:`plan_runs` for a few chunks, the same runs from a loop over them (``which``,
    ``starts`` and ``ends`` as lists)."""
    kept = [(e, k) for k, e in enumerate(entries.tolist()) if 0 <= e < section]
    if not kept:
        return
    bounds = stored[np.searchsorted(stored, [e for e, _ in kept], side="right")].tolist()
    rows = sorted((e, k, end) for (e, k), end in zip(kept, bounds) if end - e <= max_bytes)
    run: list[tuple[int, int, int]] = []
    for row in rows:
        if run:
            e, last = row[0], run[-1]
            first = run[0][0]
            if (e != last[2] and e != last[0]) or row[2] > first + max_bytes:
                yield _run_of(run)
                run = []
        run.append(row)
    if run:
        yield _run_of(run)


def _run_of(run):
    # (lists: the caller makes arrays of the runs it reads, not of those it leaves)
    first, last = run[0][0], run[-1][2]
    return (
        first,
        last,
        [k for _, k, _ in run],
        [e - first for e, _, _ in run],
        [end - first for _, _, end in run],
    )
