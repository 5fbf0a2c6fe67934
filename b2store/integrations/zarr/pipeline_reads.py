"""A codec pipeline's reads of the Blosc-compressed arrays it serves (:class:`Reader`): the
chunks' bytes checked, decoded and placed in zarr's output by b2store's kernels, without the
GIL.

A ``LocalStore``'s chunk files are read straight from the disk by the kernels, other stores'
bytes are handed in (fetched through their byte getters by the pipeline); each chunk is
checked and walked in C (:class:`~b2store.chunk._chunk_plan.Plan`) and the chunks decoded in
threads over chunks, each straight into the output where the chunk lies there whole in C
order, else through a buffer copied out row piece by row piece
(:mod:`b2store.nd._plain_chunks`). A read of fewer chunks than threads (a dask task's one
chunk), of 1 MiB chunks or more, has the threads share each chunk's blocks instead. A chunk
the C pass does not take, or that fails, is decoded by
:func:`~b2store.chunk.decoder.decode_chunk`, which decodes it or raises the
:class:`~b2store.FormatError` naming what is wrong, as b2store's codecs do; missing chunks get
the fill value. A chunk file that is not a regular file (a FIFO, a device) is refused, never
waited on.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from zarr.core.config import config

from ...chunk import native
from ...chunk._chunk_plan import Plan
from ...chunk.decoder import decode_chunk
from ...errors import FormatError
from ...nd import _plain_chunks
from . import _chunk_boxes

__all__ = ["PRESENT", "SMALL_READ", "Reader", "fill_value", "read_file", "zarr_threads"]


def fill_value(spec: Any) -> Any:
    """The value of a missing chunk's items (zarr's ``fill_value_or_default``)."""
    fill = spec.fill_value
    if fill is None:  # Zarr v2 allowed a null fill value
        return spec.dtype.default_scalar()
    return fill


def read_file(path: str, buffer: Any = None) -> Any:
    """A chunk file's bytes, None if there is none; a FIFO or device is refused, never
    waited on. With ``buffer`` (a function giving a reusable byte array of at least ``n``
    bytes), read into its array where the platform can: a view of it is returned."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError("chunk file", f"a regular file at {path!r}", "another kind")
        if buffer is not None and hasattr(os, "readv"):
            # One byte more than its size is asked for: a file that grew is read again.
            view = memoryview(buffer(st.st_size + 1))[: st.st_size + 1]
            got = 0
            while got < len(view):
                n = os.readv(fd, [view[got:]])
                if n == 0:
                    break
                got += n
            if got <= st.st_size:
                return view[:got]
            os.lseek(fd, 0, os.SEEK_SET)
        parts, size = [], st.st_size
        while True:
            part = os.read(fd, max(size, 1 << 16))
            if not part:
                break
            parts.append(part)
            size = 1 << 16
        return parts[0] if len(parts) == 1 else b"".join(parts)
    finally:
        os.close(fd)


# A chunk's status after the kernels (nd/_plain_chunks.pyx), and zarr's results.
_PLACED, _FAILED, _MISSING = 0, 1, 2
PRESENT, ABSENT = "present", "missing"


@dataclass
class _Group:
    """The plainly placed chunks of one chunk shape in a read."""

    index: list[int]
    plans: list[Plan]
    boxes: list[list[int]]
    strides: list[int]


# A read of this many decoded bytes or fewer is decoded where it is asked for, with no hop to
# a worker thread (below the size threads share a chunk at, as for one chunk alone).
SMALL_READ = 2 * native.THREAD_BYTES


class Reader:
    """The reads of one array's chunks, of items of ``dtype``: a ``LocalStore``'s files under
    ``root`` read by the kernels (:meth:`read_local`), other stores' bytes handed in
    (:meth:`read_fetched`). Each returns zarr's result per chunk."""

    def __init__(self, dtype: np.dtype, root: str | None) -> None:
        self.dtype = dtype
        self._root = root

    def _groups(self, batch: list, arr: np.ndarray, drop_axes: tuple) -> tuple[dict, list]:
        """The chunks placed by the kernels, by chunk shape and integer axes; the others."""
        return _chunk_boxes.groups(batch, arr, native.enabled() and not drop_axes, _Group)

    def read_local(self, batch: list, arr: np.ndarray, drop_axes: tuple) -> tuple:
        """A LocalStore's chunks: the files read and decoded by the kernels, in threads."""
        root = self._root
        if self._few_large(batch, drop_axes):
            # Each file read into this thread's buffer, kept between reads (a fresh one is
            # a fresh allocation the kernel zeroes page by page), when its chunk's turn comes.
            bufs = (read_file(os.path.join(root, info[0].path), _tmp) for info in batch)
            return self._read_large(batch, bufs, arr, drop_axes)
        groups, others = self._groups(batch, arr, drop_axes)
        prefix = os.fsencode(os.path.join(root, ""))  # (joined per chunk: 0.3 us each)
        status = np.zeros(len(batch), np.int8)
        status[others] = _FAILED
        for (shape, _ints), group in groups.items():
            paths = [prefix + os.fsencode(batch[i][0].path) for i in group.index]
            nbytes = self.dtype.itemsize * int(np.prod(shape, dtype=np.int64))
            # A Blosc chunk is at most its items and headers; a larger file is read (and
            # refused by the decoder) through Python.
            limit = nbytes + nbytes // 8 + (1 << 16)
            status[group.index] = self._run(
                lambda *a, paths=paths, limit=limit: _plain_chunks.read_place(paths, limit, *a),
                len(paths),
                group,
                shape,
                arr,
            )
        if not (status != _PLACED).any():  # (the usual read: every chunk placed in C)
            return tuple([{"status": PRESENT} for _ in batch])
        results = []
        for i, info in enumerate(batch):
            _getter, spec, _csel, osel, _complete = info
            if status[i] == _MISSING:
                arr[osel] = fill_value(spec)
                results.append({"status": ABSENT})
                continue
            if status[i] != _PLACED:
                buf = read_file(os.path.join(root, info[0].path))
                if buf is None:
                    arr[osel] = fill_value(spec)
                    results.append({"status": ABSENT})
                    continue
                self._place_one(info, buf, arr, drop_axes)
            results.append({"status": PRESENT})
        return tuple(results)

    def small(self, batch: list) -> bool:
        """The batch's chunks are :data:`SMALL_READ` bytes or fewer when decoded."""
        if not batch:
            return True
        per_chunk = self.dtype.itemsize * int(np.prod(batch[0][1].shape, dtype=np.int64))
        return len(batch) * per_chunk <= SMALL_READ

    def _few_large(self, batch: list, drop_axes: tuple) -> bool:
        """Fewer chunks than threads, each large enough for threads to share its blocks."""
        if drop_axes or not batch or len(batch) >= zarr_threads():
            return False
        shape = batch[0][1].shape
        return self.dtype.itemsize * int(np.prod(shape)) >= 2 * native.THREAD_BYTES

    def _read_large(self, batch: list, bufs: Iterator[Any], arr: np.ndarray, drop_axes: tuple):
        """The chunks of :meth:`_few_large` (their bytes from ``bufs``, in turn) placed one
        by one, each by all the threads."""
        results = []
        for info in batch:
            buf = next(bufs)
            if buf is None:
                arr[info[3]] = fill_value(info[1])
                results.append({"status": ABSENT})
                continue
            if not self._place_large(info, buf, arr):
                self._place_one(info, buf, arr, drop_axes)
            results.append({"status": PRESENT})
        return tuple(results)

    def _place_large(self, info: tuple, buf: Any, arr: np.ndarray) -> bool:
        """One large chunk decoded by threads sharing its blocks, straight into ``arr``
        where its box is all of it and lies there in C order, else placed from a decoded
        copy as zarr places it; False where the kernels do not take it (the general decoder
        then says why)."""
        _getter, spec, csel, osel, _complete = info
        shape = tuple(spec.shape)
        nbytes = self.dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        src = np.frombuffer(buf, np.uint8)
        box = _chunk_boxes.box(csel, osel, shape, arr)
        if box is not None and not any(box[: len(shape)]) and box[len(shape) : -1] == list(shape):
            region = arr[osel]  # (plain slices: a view of the output)
            if region.flags.c_contiguous and region.shape == shape:
                return native.quick_decode(src, region, zarr_threads(), nbytes) is not None
        decoded = native.quick_decode(src, None, zarr_threads(), nbytes)
        if decoded is None or decoded.nbytes != nbytes:
            return False
        # Through arr's own indexing: an orthogonal key's output selection may be index
        # arrays, where arr[osel] would be a copy.
        arr[osel] = decoded.view(self.dtype).reshape(shape)[csel]
        return True

    def read_fetched(self, batch: list, chunks: list, arr: np.ndarray, drop_axes: tuple):
        """Chunks fetched through the store: decoded by the kernels, in threads."""
        if self._few_large(batch, drop_axes):
            return self._read_large(batch, iter(chunks), arr, drop_axes)
        groups, _others = self._groups(batch, arr, drop_axes)
        status = np.full(len(batch), _FAILED, np.int8)
        for (shape, _ints), group in groups.items():
            keep = [k for k, i in enumerate(group.index) if chunks[i] is not None]
            plans = [Plan(chunks[group.index[k]]) for k in keep]
            index = [group.index[k] for k in keep]
            part = _Group(index, plans, [group.boxes[k] for k in keep], group.strides)
            status[index] = self._run(
                lambda *a, plans=plans: _plain_chunks.decode_place(plans, *a),
                len(plans),
                part,
                shape,
                arr,
            )
        results = []
        for i, info in enumerate(batch):
            buf = chunks[i]
            if buf is None:
                arr[info[3]] = fill_value(info[1])
                results.append({"status": ABSENT})
                continue
            if status[i] != _PLACED:
                self._place_one(info, buf, arr, drop_axes)
            results.append({"status": PRESENT})
        return tuple(results)

    def _run(self, call: Any, n: int, group: _Group, shape: tuple, arr: np.ndarray):
        """``call`` (a kernel given the group's geometry) in threads over ``n`` chunks;
        each chunk's status."""
        status = np.zeros(n, np.int8)
        if n == 0:
            return status
        itemsize = self.dtype.itemsize
        nbytes = itemsize * int(np.prod(shape, dtype=np.int64))
        boxes = np.array(group.boxes, dtype=np.int64).reshape(n, 2 * len(shape) + 1)
        cshape = np.array(shape, dtype=np.int64)
        strides = np.array(group.strides, dtype=np.int64)
        flat = arr.reshape(-1).view(np.uint8)
        counter = np.zeros(1, np.int64)

        def run() -> None:
            call(
                boxes,
                cshape,
                strides,
                itemsize,
                flat,
                _tmp(nbytes),
                native._scratch(),
                counter,
                status,
            )

        nthreads = min(zarr_threads(), n)
        jobs = [native.executor(nthreads - 1).submit(run) for _ in range(nthreads - 1)]
        run()
        for job in jobs:
            job.result()
        return status

    def _place_one(self, info: tuple, buf: Any, arr: np.ndarray, drop_axes: tuple) -> None:
        """One chunk decoded by the general decoder (which names what is wrong with a bad
        one) and placed as zarr places it."""
        _getter, spec, csel, osel, _complete = info
        shape = tuple(spec.shape)
        decoded = decode_chunk(np.frombuffer(buf, np.uint8))
        expected = self.dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if decoded.nbytes != expected:
            raise FormatError(
                "nbytes", f"{expected} (a chunk of shape {shape}, {self.dtype})", decoded.nbytes
            )
        chunk = decoded.view(self.dtype).reshape(shape)[csel]
        if drop_axes:
            chunk = chunk.squeeze(axis=drop_axes)
        arr[osel] = chunk


def zarr_threads() -> int:
    """Threads a read decodes (and a write encodes) with: zarr's ``threading.max_workers``,
    else the CPUs."""
    n = config.get("threading.max_workers", None)
    return max(1, int(n)) if n else native.cpu_count()


_local = threading.local()

# A thread keeps its buffer between reads only from this size on, where a fresh one costs its
# pages' faults and zeroing at every read; smaller ones are made per read. What the threads
# hold (the loop's, zarr's pool's and the kernels' pool's) is then only large chunks': small
# reads no longer leave a buffer in each thread that ever made one.
_KEPT_BYTES = 1 << 20


def _tmp(nbytes: int) -> np.ndarray:
    """A buffer of ``nbytes`` bytes at least for this thread's read: its kept one from
    :data:`_KEPT_BYTES` on, grown as needed."""
    if nbytes < _KEPT_BYTES:
        return np.empty(nbytes, np.uint8)
    buf = getattr(_local, "tmp", None)
    if buf is None or len(buf) < nbytes:
        buf = _local.tmp = np.empty(nbytes, np.uint8)
    return buf
