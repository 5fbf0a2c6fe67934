"""An n-dimensional array over a frame with the ``b2nd`` (or legacy ``caterva``) metalayer.

Reads decode only the chunks a selection touches and, inside each chunk, only the blocks it
touches: the block starts of a chunk say where each block's streams are.
"""

from __future__ import annotations

import math

import numpy as np

from ..constants import MAX_TYPESIZE
from ..errors import FormatError
from ..frame import remote
from ..frame.schunk import OnSChunk, SChunk
from ..frame.state import READ_TRIES
from . import fancy, read_chunks
from .carriers import check_holds_data
from .chunks import (
    SMALL_CHUNK_BYTES,
    copy_blocks,
    decode_selection,
    decode_small_chunk,
)
from .geometry import blocks_per_chunk, blocks_touched, c_index, chunk_grid, chunk_nitems
from .indexing import chunks_touched as _chunks_touched
from .indexing import normalize, split_whole, table_parts
from .meta import B2ndMeta, layout_guard, stored_meta
from .outer import OuterIndex, OuterKey
from .points import PointPlan
from .writes import ArrayWrites

__all__ = ["B2ndArray"]

# A read inside one chunk touching at most this many blocks takes the small-read path.
_FEW_BLOCKS = 32
# ... unless they are a whole chunk of at least this many bytes.
_WHOLE_CHUNK_BYTES = 1 << 20
# The most bytes of chunk scratch that reads of a remote frame hold at once.
_SCRATCH_IN_FLIGHT = 256 << 20
_ALL = slice(None)


class B2ndArray(ArrayWrites, OnSChunk):
    """A b2nd array, read lazily: indexing decodes what the selection needs.

    Reading and writing take every NumPy index with NumPy's semantics: integers, slices
    with steps, Ellipsis, ``None``, bool scalars, and integer arrays, lists and boolean
    masks (advanced indexing, broadcast together and mixed with the others); and
    ``np.asarray(arr)``. An index array or mask is read chunk by chunk, decoding of each
    chunk it touches only the bounding box of what it selects there.
    """

    def __init__(self, schunk: SChunk, meta: B2ndMeta, dtype=None):
        # A lazy expression's or a proxy's frame would read as zeros: refused here, where
        # every entry point (open, trees, zarr, xarray, the command line) makes its arrays.
        check_holds_data(schunk, schunk.urlpath)
        self.schunk = schunk
        self._meta = meta
        self._meta_raw = stored_meta(schunk.header)  # (to tell when a writer changed it)
        schunk.blockshape = tuple(meta.blockshape)
        self._geometry = None  # (the metalayer it is of, what _in_one_chunk works from)
        dtype = np.dtype(dtype) if dtype is not None else meta.dtype
        if dtype is None:
            # The caterva layer stores no dtype: raw items of the frame's typesize.
            dtype = np.dtype(f"V{schunk.typesize}")
        self.dtype = dtype
        self._check_consistency()
        schunk.layout_guard = layout_guard(dtype.itemsize)

    def _check_consistency(self) -> None:
        """Refuse a frame whose metalayer contradicts its chunks (item size, chunk size,
        number of chunks)."""
        s, m = self.schunk, self._meta
        itemsize = self.dtype.itemsize
        # c-blosc2's writers (hdf5plugin, PyTables, NDArray.to_cframe) store items wider than
        # a chunk header's typesize byte as typesize 1 (bytes): the dtype alone says the size.
        wide = s.typesize == 1 and itemsize > MAX_TYPESIZE
        if itemsize != s.typesize and not wide:
            raise FormatError(
                "b2nd dtype",
                f"items of the frame's typesize ({s.typesize} bytes)",
                f"{self.dtype.str} ({self.dtype.itemsize}-byte items)",
            )
        if self.size == 0:
            return
        per_chunk = chunk_nitems(m.chunkshape, m.blockshape) * self.dtype.itemsize
        if s.chunksize > 0 and s.chunksize != per_chunk:
            raise FormatError(
                "chunksize",
                f"{per_chunk} bytes (chunks {m.chunkshape}, blocks {m.blockshape}, "
                f"{self.dtype.itemsize}-byte items)",
                s.chunksize,
            )
        expected = math.prod(chunk_grid(m.shape, m.chunkshape))
        if s.nchunks != expected:
            raise FormatError(
                "nchunks", f"{expected} for shape {m.shape} and chunks {m.chunkshape}", s.nchunks
            )

    # --- what the array is -----------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self._meta.shape

    @property
    def chunks(self) -> tuple[int, ...]:
        return self._meta.chunkshape

    @property
    def blocks(self) -> tuple[int, ...]:
        return self._meta.blockshape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def cbytes(self) -> int:
        return self.schunk.cbytes

    @property
    def cratio(self) -> float:
        return self.nbytes / self.cbytes if self.cbytes else math.inf

    @property
    def info(self) -> dict:
        return {
            "type": type(self).__name__,
            "shape": self.shape,
            "chunks": self.chunks,
            "blocks": self.blocks,
            "dtype": self.dtype.str,
            "nbytes": self.nbytes,
            "cbytes": self.cbytes,
            "cratio": self.cratio,
            "codec": self.schunk.codec,
            "clevel": self.schunk.clevel,
            "filters": self.schunk.filters,
            "contiguous": self.schunk.contiguous,
            "meta": list(self.meta),
            "vlmeta": list(self.schunk._raw_vlmeta),
        }

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return (
            f"B2ndArray(shape={self.shape}, dtype={self.dtype}, chunks={self.chunks}, "
            f"blocks={self.blocks})"
        )

    # --- lifetime: the frame's, which pickles and copies by reopening ---------------------

    def close(self) -> None:
        """Release the array's files; reading it afterwards raises FrameClosedError."""
        self.schunk.close()

    @property
    def closed(self) -> bool:
        return self.schunk.closed

    def __enter__(self) -> B2ndArray:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __dask_tokenize__(self):
        return ("b2store.B2ndArray", self.schunk.__dask_tokenize__(), self.dtype.str)

    def __array__(self, dtype=None, copy=None):
        data = self[...]
        return data.astype(dtype, copy=False) if dtype is not None else data

    @property
    def oindex(self) -> OuterIndex:
        """The array indexed orthogonally (zarr's ``oindex``), read and written: each index
        array along its own axis, ``arr.oindex[[0, 2], :, [1, 3]]`` of shape (2, n, 2), where
        ``arr[[0, 2], :, [1, 3]]`` pairs them (see :mod:`b2store.nd.outer`)."""
        return OuterIndex(self._read_outer, self.__setitem__, self.shape, self.dtype)

    def _read_outer(self, outer: OuterKey) -> np.ndarray:
        """An outer key read: its index arrays' axes cut along the chunks (no chunk between
        their indices read), or, without index arrays, NumPy's basic indexing."""
        if not outer.arrays:
            return self[outer.key]
        return outer.result(self._read_fancy(fancy.plan(outer.key, self.shape, by_chunks=True)))

    # --- reading ---------------------------------------------------------------------------

    def __getitem__(self, key) -> np.ndarray:
        # python-blosc2's sidecar held shared across the read where b2store takes part
        # (frame/b2lock.py): a handle elsewhere may have resized the array since this one
        # read its metalayer, so the key is read against the shape the frame has now.
        with self.schunk.reading():
            if stored_meta(self.schunk.header) != self._meta_raw:
                self._reload_meta()
            return self._getitem(key)

    def read_into(self, key: tuple, out: np.ndarray) -> None:
        """``out[...] = self[key]``, the chunks decoded straight into ``out`` (C-contiguous,
        writeable, of this dtype and the key's shape); ``key``: per axis an integer or a
        forward slice (a Zarr codec pipeline's read, :mod:`b2store.integrations.zarr`)."""
        forward = all(type(k) is not slice or (k.step or 1) > 0 for k in key)
        ok = isinstance(out, np.ndarray) and out.dtype == self.dtype and out.flags.c_contiguous
        if not (forward and ok and out.flags.writeable and len(key) == self.ndim):
            raise ValueError("read_into: a key of forward slices, a C-contiguous writeable out")
        with self.schunk.reading():  # (as in __getitem__)
            if stored_meta(self.schunk.header) != self._meta_raw:
                self._reload_meta()
            dims, final, _ = normalize(tuple(key), self.shape)
            shape = tuple(len(d) for d in dims)
            if out.shape != tuple(n for n, f in zip(shape, final) if f != 0):
                raise ValueError(f"read_into: out has shape {out.shape}, the key {shape}")
            if out.size:
                scratch = np.empty(chunk_nitems(self.chunks, self.blocks) * out.itemsize, np.uint8)
                self._read(dims, out.reshape(shape), scratch)

    def _getitem(self, key) -> np.ndarray:
        small = self._in_one_chunk(key)
        if small is not None:
            return small
        advanced = fancy.plan(key, self.shape)
        if advanced is not None:
            return self._read_fancy(advanced)
        dims, final, empty = normalize(key, self.shape)
        out = np.empty(tuple(len(d) for d in dims), self.dtype)
        if out.size and not empty:
            # One scratch chunk for the whole read: fresh buffers per chunk cost page faults.
            scratch = np.empty(
                chunk_nitems(self.chunks, self.blocks) * self.dtype.itemsize, np.uint8
            )
            self._read(dims, out, scratch)
        return out[final]

    def _in_one_chunk(self, key):
        """A small read (integers and step-1 slices, inside one chunk and at most
        ``_FEW_BLOCKS`` of its blocks: one element, a row of a slab): the blocks decoded
        straight into a chunk-sized buffer whose other pages are never touched, and the
        selection copied out of them, without the general selection's planning (most of a
        small read's time). None when the key or the chunk is not of that kind."""
        geo = self._small_geometry()
        if geo is None:
            return None
        dims, block_bytes, chunk_bytes = geo
        if type(key) is not tuple:
            key = (key,)
        if len(key) > len(dims):
            return None  # other keys, and their errors, are the general path's
        nchunk, nblocks, spans, kept, box = 0, 1, [], [], ([], [])
        for d, (n, c, b, grid) in enumerate(dims):
            k = key[d] if d < len(key) else _ALL
            if type(k) is int:
                if not -n <= k < n:
                    return None
                lo = k % n
                hi = lo + 1
            elif type(k) is slice and k.step in (None, 1):
                lo, hi, _ = k.indices(n)
                if hi <= lo:
                    return None
                kept.append(hi - lo)
            else:
                return None
            first = lo // c
            if (hi - 1) // c != first:
                return None
            box[0].append(lo)
            box[1].append(hi)
            nchunk = nchunk * grid + first
            lo, hi = lo - first * c, hi - first * c
            nblocks *= (hi - 1) // b - lo // b + 1
            spans.append((lo, hi, b))
        if nblocks > _FEW_BLOCKS:
            return None
        chunks, blocks = self.chunks, self.blocks
        large = nblocks * block_bytes >= _WHOLE_CHUNK_BYTES
        if large and nblocks == math.prod(blocks_per_chunk(chunks, blocks)):
            # A whole large chunk (a dask task's): the general path decodes it straight into
            # its output where its blocks are whole rows, not into a buffer then copied out
            # (8 MB chunks: 15% less CPU).
            return None
        dtype = self.dtype
        if read_chunks.available() and self.ndim:
            # A local frame's chunk: its blocks read, decoded and copied out in one compiled
            # call (a third of the time of the Python below, which does the rest).
            st = self.schunk.committed()
            out = np.empty([hi - lo for lo, hi in zip(*box)], dtype)
            # (the state read from must be of the metalayer the key was checked against)
            if stored_meta(st.header) == self._meta_raw and read_chunks.read_small(
                self.schunk, st, *box, self.shape, chunks, blocks, out, chunk_bytes
            ):
                return out.reshape(-1)[0] if not kept else out.reshape(kept)
        numbers = blocks_touched([(lo, hi) for lo, hi, _ in spans], chunks, blocks)
        buf = np.empty(chunk_bytes, np.uint8)
        if self.schunk.decode_blocks(nchunk, numbers, buf, blocksize=block_bytes) is None:
            return None  # Blosc blocks that are not the array's blocks: decoded whole
        if nblocks == 1:
            at = numbers[0] * block_bytes
            block = buf[at : at + block_bytes].view(dtype).reshape(blocks)
            sel = block[tuple(slice(lo % b, (hi - 1) % b + 1) for lo, hi, b in spans)]
            if not kept:
                # As numpy does, a key of integers only gives a scalar. (A np.void would
                # refer to the chunk-sized buffer: it gets one of its own.)
                return (sel.copy() if dtype.kind == "V" else sel).reshape(-1)[0]
            return sel.reshape(kept).copy()
        ranges = [range(lo, hi) for lo, hi, _ in spans]
        out = np.empty(tuple(len(r) for r in ranges), dtype)
        copy_blocks(numbers, ranges, chunks, blocks, dtype, buf, out)
        return out.reshape(kept)  # (integers only always fall in one block, above)

    def _small_geometry(self):
        """Per dimension ``(size, chunk, block, chunks along it)``, the bytes of a block and
        of a padded chunk: what :meth:`_in_one_chunk` works from, kept while the metalayer is
        the same. None when small reads take the general path."""
        meta = self._meta
        kept = self._geometry
        if kept is not None and kept[0] is meta:
            return kept[1]
        itemsize = self.dtype.itemsize
        shape, chunks, blocks = meta.shape, meta.chunkshape, meta.blockshape
        block_bytes = math.prod(blocks) * itemsize
        chunk_bytes = chunk_nitems(chunks, blocks) * itemsize
        geo = None
        # A subarray dtype (('<f8', (10,))) cannot view a byte buffer: NumPy expands it into
        # trailing dimensions, which the general path's arrays already do.
        if block_bytes and chunk_bytes <= 1 << 31 and self.dtype.subdtype is None:
            dims = tuple((n, c, b, -(-n // c)) for n, c, b in zip(shape, chunks, blocks))
            geo = (dims, block_bytes, chunk_bytes)
        self._geometry = (meta, geo)
        return geo

    def _read(self, dims, out: np.ndarray, scratch: np.ndarray) -> None:
        """Every chunk the selection touches, all from one committed state of the frame:
        a read beside a writer sees the array as one of its commits left it, never chunks
        of two. A state a writer has since replaced may fail to read (a sparse frame's old
        chunk file discarded); the whole read is then done again from the newer one."""
        self._committed(lambda st: self._read_state(dims, out, scratch, st))

    def _committed(self, read):
        """``read(state)`` of the frame's committed state, done again from a newer one
        where a writer replaced it meanwhile (see :meth:`_read`)."""
        schunk = self.schunk
        for _ in range(READ_TRIES):
            # (python-blosc2's sidecar held shared across the read, where b2store takes part)
            with schunk.reading():
                st = schunk.committed()
                if stored_meta(st.header) != self._meta_raw:
                    # (planned against another shape: never read the chunks by that one)
                    raise FormatError(
                        "b2nd metalayer",
                        "the one this read was planned with",
                        "another writer's (the array was resized meanwhile: read again)",
                    )
                try:
                    return read(st)
                except FormatError as exc:
                    error = exc
            if not schunk.refreshed(st):  # (outside the read: a writable handle locks here)
                raise error
        raise FormatError(
            "frame", "a committed state that stays readable", "writers kept replacing it"
        )

    def _read_state(self, dims, out: np.ndarray, scratch: np.ndarray, st) -> None:
        """:meth:`_read` from committed state ``st``."""
        # Small chunks a read takes whole are read a run of neighbours at a time and decoded
        # in one compiled call per run (nd/read_chunks.py); the others one by one.
        in_c = self.dtype.subdtype is None and self.ndim > 0 and read_chunks.available()
        in_runs = in_c and len(scratch) <= read_chunks.MAX_CHUNK_BYTES
        grid = chunk_grid(self.shape, self.chunks)
        if in_c and self._read_box(dims, grid, out, scratch, st, small=in_runs):
            return
        if in_runs:
            whole, few, others = split_whole(dims, self.chunks, self.blocks, self.shape)
            if whole is not None:
                self._read_runs(whole, grid, out, scratch, st)
            if few is not None:
                self._read_parts(few, grid, out, scratch, st)
        else:
            others = _chunks_touched(dims, self.chunks)
        self._read_each(
            ((c_index(coords, grid), parts) for coords, parts in others), out, scratch, st
        )

    def _read_box(
        self, dims, grid, out: np.ndarray, scratch: np.ndarray, state, small: bool = True
    ) -> bool:
        """A box (step-1 ranges) of a local frame planned and read in one compiled call
        (:func:`read_chunks.read_box`): a few ``small`` chunks, or large chunks decoded
        straight into ``out`` with threads over them; the chunks it leaves are read as
        :meth:`_read_runs` (or, large, :meth:`_read_each`) reads them. False when this is
        not the way (nothing done)."""
        chunks = self.chunks
        threads = read_chunks.box_way(dims, self.shape, chunks, self.blocks, out, small)
        if not threads:
            return False
        lo, hi = [r.start for r in dims], [r.stop for r in dims]
        left = read_chunks.read_box(
            self.schunk, state, lo, hi, self.shape, chunks, self.blocks, out, scratch, threads
        )
        if left is None:
            return False
        if len(left) and not small:
            # (special chunks, DELTA ones, ...: one by one, as large chunks are read)
            work = ((c_index(at, grid), parts) for at, parts in _chunks_touched(dims, chunks))
            undone = set(left.tolist())
            self._read_each(((n, p) for n, p in work if n in undone), out, scratch, state)
        elif len(left):
            # (special chunks, DELTA ones, ...: decoded whole in runs, or one by one)
            coords = np.stack(np.unravel_index(left, grid), axis=1).astype(np.int64)
            starts = coords * np.asarray(chunks, np.int64)
            low = np.maximum(np.asarray(lo, np.int64), starts)
            high = np.minimum(np.asarray(hi, np.int64), starts + np.asarray(chunks, np.int64))
            origins = low - np.asarray(lo, np.int64)
            self._read_runs((coords, origins, low - starts, high - low), grid, out, scratch, state)
        return True

    def _read_runs(self, whole, grid, out: np.ndarray, scratch: np.ndarray, state) -> None:
        """The chunks ``whole`` (from :func:`split_whole`: decoded whole) into ``out``: in
        runs, then each one the runs left, one by one."""
        nchunks, left = self._read_in_c(read_chunks.read_runs, whole, grid, out, scratch, state)
        _, origins, lows, extents = whole
        for k in left.tolist():
            parts = [
                (range(lo, lo + e), range(o, o + e))
                for o, lo, e in zip(origins[k].tolist(), lows[k].tolist(), extents[k].tolist())
            ]
            self._read_chunk(int(nchunks[k]), parts, out, scratch, state)

    def _read_parts(self, few, grid, out: np.ndarray, scratch: np.ndarray, state) -> None:
        """The chunks ``few`` (from :func:`split_whole`: a few blocks of each) into ``out``:
        in one compiled call, then each one it left, one by one."""
        nchunks, left = self._read_in_c(read_chunks.read_parts, few, grid, out, scratch, state)
        if len(left):
            rows = tuple(column[left] for column in few)
            parts = (p for _, p in table_parts(rows))
            self._read_each(zip(nchunks[left].tolist(), parts), out, scratch, state)

    def _read_in_c(self, read, table, grid, out: np.ndarray, scratch: np.ndarray, state):
        """``read`` (:func:`read_chunks.read_runs` or :func:`read_chunks.read_parts`) of the
        chunks of ``table`` (from :func:`split_whole`) into ``out``, in one compiled call: the
        chunks' numbers, and the positions of those it left."""
        coords, origins, lows, extents = table
        nchunks = np.ravel_multi_index(tuple(coords.T), grid).astype(np.int64, copy=False)
        rows = read_chunks.ReadRows(nchunks, origins, lows, extents, self.chunks, self.blocks)
        return nchunks, read(self.schunk, state, rows, out, scratch)

    def _read_each(self, work, out: np.ndarray, scratch: np.ndarray, state) -> None:
        """:meth:`_read_chunk` of each ``(nchunk, parts)`` of ``work``; of a remote frame,
        with their requests overlapped (each a round trip), each with a scratch of its own."""
        if not self.schunk.remote:
            for nchunk, parts in work:
                self._read_chunk(nchunk, parts, out, scratch, state)
            return

        def one(item) -> None:
            self._read_chunk(item[0], item[1], out, np.empty_like(scratch), state)

        # (each chunk in flight holds a scratch of its own: 256 MB of them at most)
        remote.overlapped(one, work, at_once=max(1, _SCRATCH_IN_FLIGHT // max(1, len(scratch))))

    def _read_fancy(self, plan: fancy.FancyPlan) -> np.ndarray:
        """An index-array key read: its box read as a basic selection is and indexed by
        NumPy, in tiles of at most as many bytes as the result has (or one chunk);
        where the box cannot be cut so, point by point."""
        if self.dtype.subdtype is None:
            if not plan.size:
                return plan.nothing(self.dtype)
            tiled = plan.tiles(self.dtype.itemsize, self.chunks, self._fancy_budget(plan))
            if tiled is not None and not plan.far_apart(self.dtype.itemsize):
                scratch = np.empty(
                    chunk_nitems(self.chunks, self.blocks) * self.dtype.itemsize, np.uint8
                )
                return self._committed(lambda st: self._read_tiles(*tiled, scratch, st))
        return self._read_points(plan.points())

    def _fancy_budget(self, plan: fancy.FancyPlan) -> int:
        """The bytes of box a read of ``plan`` may hold at once: as many as its result has
        (so that it holds at most twice the result), or one chunk's (which any read
        decodes whole in the worst case)."""
        return max(plan.size, chunk_nitems(self.chunks, self.blocks)) * self.dtype.itemsize

    def _read_tiles(self, lengths, tiles, scratch: np.ndarray, st) -> np.ndarray:
        """The tiles of :meth:`FancyPlan.tiles` read and indexed by NumPy, each into its
        place in the result (``lengths``: of the result's axes they cut)."""
        out = None
        for ranges, key, places in tiles:
            box = np.empty(tuple(len(r) for r in ranges), self.dtype)
            self._read_state(list(ranges), box, scratch, st)
            part = box[key]
            if lengths is None:
                return part  # (the one box)
            del box
            if out is None:
                shape = [lengths.get(q, n) for q, n in enumerate(part.shape)]
                out = np.empty(shape, self.dtype)
            fancy.place(out, places, part)
        return out

    def _read_points(self, plan: PointPlan) -> np.ndarray:
        """An index-array key read point by point: of each chunk its points fall in, the
        bounding box of those points (and of the slices) is decoded, then gathered into the
        result (or, where its layout is not found, a working array NumPy then indexes)."""
        made = plan.result(self.dtype)
        t = None if made is not None else np.empty(plan.t_shape, self.dtype)
        if not plan.empty:
            out, work = made if made is not None else (None, plan.working(t))
            k = len(plan.adv_axes)
            scratch = np.empty(
                chunk_nitems(self.chunks, self.blocks) * self.dtype.itemsize, np.uint8
            )
            grid = chunk_grid(self.shape, self.chunks)

            def read(st) -> None:
                for coords, ranges, group, local, out_pos in plan.pieces(self.chunks):
                    box = np.empty(tuple(len(r) for r in ranges), self.dtype)
                    parts = [(r, range(len(r))) for r in ranges]
                    self._read_chunk(c_index(coords, grid), parts, box, scratch, st)
                    at = tuple(lc - ranges[d].start for d, lc in zip(plan.adv_axes, local))
                    moved = np.moveaxis(box, plan.adv_axes, range(k))
                    dst = (group,) + tuple(slice(p.start, p.stop) for p in out_pos)
                    work[dst] = moved[at]

            self._committed(read)
            if out is not None:
                return out
        return t[plan.final]

    def _read_chunk(self, nchunk, parts, out: np.ndarray, scratch: np.ndarray, state=None) -> None:
        """Copy what ``parts`` selects of chunk ``nchunk`` into ``out``."""
        # The trailing Ellipsis keeps a 0-d destination a view, not a scalar.
        dst = tuple(slice(pos.start, pos.stop) for _, pos in parts) + (Ellipsis,)
        source = self._fetcher(nchunk, state)
        if len(scratch) < SMALL_CHUNK_BYTES and all(
            local.start == 0 and local.step == 1 and len(local) == c
            for (local, _), c in zip(parts, self.chunks)
        ):
            # A whole small chunk (a whole-array read of many): read and decoded in one go,
            # without decode_selection's planning, which cost as much as the decoding.
            source = source(None)
            if decode_small_chunk(source, self.chunks, self.blocks, scratch, out[dst]):
                return
        elif (
            state is not None
            and self.dtype.subdtype is None
            and read_chunks.available()
            and all(local.step == 1 for local, _ in parts)
            and read_chunks.read_part(
                self.schunk,
                state,
                nchunk,
                [local for local, _ in parts],
                self.chunks,
                self.blocks,
                out[dst],
                scratch,
            )  # fmt: skip
        ):
            return  # a few blocks of the chunk, read and decoded in one call
        decode_selection(
            source,
            self.chunks,
            self.blocks,
            self.dtype,
            [local for local, _ in parts],
            out[dst],
            scratch=scratch,
            label=f"chunk {nchunk}",
        )

    def _fetcher(self, nchunk: int, state=None) -> _ChunkReader:
        """What :func:`decode_selection` reads chunk ``nchunk`` through (from committed
        state ``state``, or the newest)."""
        return _ChunkReader(self.schunk, nchunk, state)


class _ChunkReader:
    """Chunk ``nchunk`` of a frame as :func:`decode_selection` reads it: called, the chunk
    (with only some blocks' bytes in place, or whole); or a few blocks decoded straight
    into a buffer, planned and read once."""

    __slots__ = ("schunk", "nchunk", "state")

    def __init__(self, schunk: SChunk, nchunk: int, state=None):
        self.schunk, self.nchunk, self.state = schunk, nchunk, state

    def __call__(self, blocks):
        if blocks is None:
            return self.schunk.get_chunk(self.nchunk, state=self.state)
        return self.schunk.get_chunk_blocks(self.nchunk, blocks, state=self.state)

    def decode_blocks(self, blocks, out, *, blocksize):
        return self.schunk.decode_blocks(
            self.nchunk, blocks, out, blocksize=blocksize, state=self.state
        )
