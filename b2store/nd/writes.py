"""The writing half of :class:`~b2store.nd.array.B2ndArray` (a mixin: it uses the array's
``schunk``, ``_meta`` and geometry): each chunk a key touches decoded, changed and re-encoded,
all of them published at once under the writer lock; resizes, whose chunks leaving the array
are zeroed and whose new ones read as zeros.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..constants import SpecialValue
from ..frame import remote
from ..frame.publishing import special_offset
from . import fancy
from .chunks import decode_chunk_array, encode_chunk_array
from .geometry import c_index, chunk_grid, chunk_nitems
from .indexing import chunks_touched as _chunks_touched
from .indexing import normalize
from .meta import B2ndMeta
from .points import PointPlan

__all__ = ["ArrayWrites"]


class ArrayWrites:
    """Writing and resizing a b2nd array (see :class:`~b2store.nd.array.B2ndArray`)."""

    def __setitem__(self, key, value) -> None:
        """Write ``value`` (broadcast as numpy does) into the selection; each chunk touched
        is decoded, changed, re-encoded, and all are published at once, under the writer
        lock, so that no other writer's change in between is lost."""
        with self.schunk.changing():
            self._reload_meta()
            self._setitem_locked(key, value)

    def _reload_meta(self) -> None:
        # Another writer may have resized the array since this handle read its metalayer.
        name = "b2nd" if "b2nd" in self.schunk.header.metalayers else "caterva"
        raw = self.schunk.meta.raw(name)
        self._meta = B2ndMeta.from_bytes(raw, caterva=name == "caterva")
        self._meta_raw = raw

    def _setitem_locked(self, key, value) -> None:
        """The body of :meth:`__setitem__`, with the writer lock held."""
        advanced = fancy.plan(key, self.shape)
        if advanced is not None:
            return self._write_fancy(advanced.points(), value)
        dims, final, empty = normalize(key, self.shape)
        selected = np.empty(tuple(len(d) for d in dims), self.dtype)
        # NumPy expands a subarray dtype into trailing dimensions (``selected`` has them):
        # the value is of its base type, or each of its numbers would become a whole item.
        selected[final] = np.asarray(value, dtype=self.dtype.base)
        if empty:
            return  # (a False selects nothing: the value was only checked to broadcast)
        grid = chunk_grid(self.shape, self.chunks)
        updates = {}
        touched = list(_chunks_touched(dims, self.chunks))
        stored = self._fetched([c_index(coords, grid) for coords, _ in touched])
        for coords, parts in touched:
            nchunk = c_index(coords, grid)
            ext = self._whole_chunk(nchunk, stored.get(nchunk)).copy()
            src = tuple(_as_index(local) for local, _ in parts)
            dst = tuple(_as_index(pos) for _, pos in parts)
            ext[src] = selected[dst]
            updates[nchunk] = self._encode(ext)
        if updates:
            self.schunk.update_chunks(updates)

    def _write_fancy(self, plan: PointPlan, value) -> None:
        """An index-array key written: each chunk its points fall in decoded, changed at
        those points, re-encoded; all published at once (as the basic writes are)."""
        t = np.empty(plan.t_shape, self.dtype)
        t[plan.final] = np.asarray(value, dtype=self.dtype.base)  # broadcast as NumPy does
        if plan.empty:
            return
        work = plan.working(t)
        k = len(plan.adv_axes)
        grid = chunk_grid(self.shape, self.chunks)
        updates = {}
        for coords, ranges, group, local, out_pos in plan.pieces(self.chunks):
            nchunk = c_index(coords, grid)
            ext = self._whole_chunk(nchunk).copy()
            moved = np.moveaxis(ext, plan.adv_axes, range(k))
            basic = [ranges[d] for d in plan.basic_axes]
            # (A point repeated in the key is written in its order: the last one stays.)
            moved[tuple(local) + tuple(_as_index(r) for r in basic)] = work[
                (group,) + tuple(slice(p.start, p.stop) for p in out_pos)
            ]
            updates[nchunk] = self._encode(ext)
        if updates:
            self.schunk.update_chunks(updates)

    def resize(self, newshape) -> None:
        """Change the shape: chunks that leave the array go, new ones read as zeros."""
        with self.schunk.changing():
            self._reload_meta()
            self._resize_locked(newshape)

    def _resize_locked(self, newshape, chunks=(), covered=(), vlmeta=None) -> None:
        """The body of :meth:`resize`, with the writer lock held; also the resize of a write
        that grows the array (``to_b2nd``'s appends): ``chunks`` are pairs ``(n, chunk)``
        of new chunks at positions ``n`` of the new chunk grid (all of ``covered``), stored
        one by one as they come, and ``vlmeta`` (raw values) replaces the frame's, all in
        the one commit of the resize."""
        newshape = tuple(int(n) for n in newshape)
        if len(newshape) != self.ndim or any(n < 0 for n in newshape):
            raise ValueError(f"a new shape of {self.ndim} non-negative dimensions, not {newshape}")
        if any(c == 0 for c in self.chunks) and newshape != self.shape:
            raise ValueError("an array created with a zero-sized chunk dimension cannot grow")
        covered = set(covered)
        old_grid = chunk_grid(self.shape, self.chunks)
        new_grid = chunk_grid(newshape, self.chunks)
        zero = special_offset(SpecialValue.ZERO)
        entries, replace = [], {}
        if math.prod(newshape):
            for k, coords in enumerate(np.ndindex(*new_grid) if new_grid else [()]):
                inside = all(c < g for c, g in zip(coords, old_grid)) and math.prod(self.shape)
                if not inside:
                    entries.append(zero)
                    continue
                old_index = c_index(coords, old_grid)
                entries.append(int(self.schunk.offsets[old_index]))
                keep = [min(c, max(0, n - i * c)) for i, c, n in zip(coords, self.chunks, newshape)]
                had = [
                    min(c, max(0, n - i * c)) for i, c, n in zip(coords, self.chunks, self.shape)
                ]
                if keep != had and k not in covered:
                    # Zero what leaves the array, or a later growth would bring it back.
                    replace[k] = self._cleared_chunk(old_index, keep)
        meta = B2ndMeta(
            shape=newshape, chunkshape=self.chunks, blockshape=self.blocks, dtype=self._meta.dtype
        )
        nbytes = len(entries) * chunk_nitems(self.chunks, self.blocks) * self.dtype.itemsize
        metalayers = dict(self.schunk.header.metalayers)
        metalayers["b2nd" if "b2nd" in metalayers else "caterva"] = (
            meta.to_bytes() if "b2nd" in metalayers else metalayers["caterva"]
        )
        if "b2nd" not in metalayers:
            raise ValueError("resizing a legacy caterva array is not supported")
        # The chunk size is the b2nd geometry's: an array resized from an empty shape had none.
        chunksize = chunk_nitems(self.chunks, self.blocks) * self.dtype.itemsize
        pairs = itertools.chain(replace.items(), chunks)  # (the chunks as they come)
        self.schunk.reindex(entries, nbytes, metalayers, pairs, chunksize=chunksize, vlmeta=vlmeta)
        self._meta = meta
        self._meta_raw = metalayers["b2nd"]

    def _whole_chunk(self, nchunk: int, chunk: bytes | None = None) -> np.ndarray:
        """Chunk ``nchunk`` decoded (its stored bytes ``chunk``, where already read), as a
        new array of the chunk shape."""
        if chunk is None:
            chunk = self.schunk.get_chunk(nchunk)
        return decode_chunk_array(chunk, self.chunks, self.blocks, self.dtype)

    def _fetched(self, nchunks) -> dict[int, bytes]:
        """The stored bytes of chunks ``nchunks`` of a remote frame, read with their
        requests overlapped ({} for a local one: each is read when decoded)."""
        if not self.schunk.remote or len(nchunks) < 2:
            return {}
        got = remote.overlapped(self.schunk.get_chunk, nchunks)
        return dict(zip(nchunks, got))

    def _encode(self, items: np.ndarray) -> bytes:
        """A chunk of ``items`` (the chunk shape) with the frame's parameters."""
        return encode_chunk_array(
            items, self.chunks, self.blocks, self.schunk.params, dtype=self.dtype
        )

    def _cleared_chunk(self, nchunk: int, keep) -> bytes:
        """Chunk ``nchunk`` re-encoded with everything outside ``keep`` items zeroed."""
        ext = self._whole_chunk(nchunk)
        kept = np.zeros(self.chunks, self.dtype)
        region = tuple(slice(0, k) for k in keep)
        kept[region] = ext[region]
        return self._encode(kept)


def _as_index(r: range):
    return slice(r.start, r.stop, r.step) if len(r) else slice(0, 0)
