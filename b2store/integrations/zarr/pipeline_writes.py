"""A codec pipeline's writes of the Blosc-compressed arrays it serves: zarr's write, chunk for
chunk, with the encoding and a ``LocalStore``'s file writes done in threads over the batch.

For each chunk of a write, as zarr's ``BatchedCodecPipeline`` does: a chunk the write covers
whole is taken from the value; one it covers in part is read (a missing one starts as the
fill value), decoded, and the value merged in; a chunk left holding only the fill value is
deleted unless the array's ``write_empty_chunks`` says otherwise; the others are encoded and
stored. The encoding is the array's own codecs, called one after the other through their
synchronous methods (``_encode_sync``, as zarr's own pipeline calls them): the bytes are
those zarr writes, b2store's encoder for the ``blosc2`` codecs (which compresses without the
GIL), numcodecs' c-blosc for zarr's ``blosc`` (b2store writes Blosc2 chunks, version 5,
never c-blosc 1.x's; see :mod:`b2store.chunk.encoder`). Existing chunks are decoded by
b2store's decoder, so a damaged one raises the :class:`~b2store.FormatError` it names.

A ``LocalStore`` is written from the threads: checked once per write as its ``set_sync``
checks it (open, not read-only), then each chunk file as zarr writes it, a temporary renamed
into place (b2store's :func:`~b2store._files.write_atomic`, which also never writes through a
link: the temporary is ``O_EXCL | O_NOFOLLOW``), with no ``fsync``, as zarr's. Chunks are
deleted by the store's own ``delete_sync``; chunks written in part are read as the pipeline's
reads read them (a FIFO refused, never waited on). Other stores are written through their
byte getters and setters, from the event loop, as zarr does.

Most of a ``LocalStore`` write's time is then the file system's, about 0.2 ms a chunk file on
ext4 here: creating the temporary (a new inode, found past the recently freed ones) and
renaming it over the old file (which frees the old one and, by ext4's ``auto_da_alloc``, which
keeps a crash from leaving an empty file, starts the new one's writeback). That is kept:
writing a chunk in place, as zarrs does, would let a reader or a crash see half of it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from zarr.core.config import config

from ... import _files
from ...chunk import native
from ...chunk.decoder import decode_chunk
from ...errors import FormatError
from .compat import check_local_store_writable
from .pipeline_reads import fill_value, zarr_threads

__all__ = ["Writer", "chunk_encoder"]


def chunk_encoder(codecs: list, dtype: np.dtype) -> Callable[[np.ndarray, Any], Any] | None:
    """``encode(chunk, spec)``: the codecs' synchronous encoders in zarr's order, each given
    the spec zarr gives it; None where one has no synchronous encoder (zarr's pipeline then
    writes)."""
    if not codecs or not all(callable(getattr(c, "_encode_sync", None)) for c in codecs):
        return None
    resolve = [getattr(c, "resolve_metadata", None) for c in codecs]
    if not all(callable(r) for r in resolve):
        return None

    def encode(chunk: np.ndarray, spec: Any) -> Any:
        value: Any = spec.prototype.nd_buffer.from_ndarray_like(chunk)
        for codec, step in zip(codecs, resolve, strict=True):
            if value is None:
                return None
            value = codec._encode_sync(value, spec)
            spec = step(spec)
        return value

    return encode


def _all_fill(chunk: np.ndarray, spec: Any) -> bool:
    """Whether ``chunk`` holds only the fill value, by zarr's own test (its ``all_equal``);
    a chunk whose first item differs from the fill is answered without it."""
    fill = fill_value(spec)
    if chunk.size and chunk.dtype.kind in "biufc":
        first = chunk.flat[0]
        # Any all_equal zarr has (numeric, NaN equal to NaN, or bit for bit) says no here.
        if not (first == fill or (first != first and fill != fill)):
            return False
    return spec.prototype.nd_buffer.from_ndarray_like(chunk).all_equal(fill)


class Writer:
    """One write of a batch of chunks (see the module's docstring)."""

    def __init__(
        self, encode: Callable, dtype: np.dtype, local_store: Any, read_local: Callable
    ) -> None:
        self.encode = encode
        self.dtype = dtype
        self.local = local_store  # a LocalStore written from the threads, else None
        self.root = None if local_store is None else str(local_store.root)
        # A LocalStore chunk's bytes by key, None if missing: opened non-blocking, a FIFO or
        # device refused (zarr's own get would wait on a FIFO).
        self.read_local = read_local

    async def write(self, batch: list, value: np.ndarray, drop_axes: tuple) -> None:
        existing: list[Any] = [None] * len(batch)
        if self.local is None:
            # The chunks written in part are read first, through the store, as zarr reads them.
            limit = asyncio.Semaphore(max(1, int(config.get("async.concurrency", 10) or 10)))

            async def get(i: int, setter: Any, spec: Any) -> None:
                async with limit:
                    buf = await setter.get(prototype=spec.prototype)
                existing[i] = None if buf is None else buf.as_numpy_array()

            await asyncio.gather(*(get(i, b[0], b[1]) for i, b in enumerate(batch) if not b[4]))
        encoded = await asyncio.to_thread(self._encode_all, batch, value, drop_axes, existing)
        if self.local is not None:
            return
        limit = asyncio.Semaphore(max(1, int(config.get("async.concurrency", 10) or 10)))

        async def put(setter: Any, chunk: Any) -> None:
            async with limit:
                if chunk is None:
                    await setter.delete()
                else:
                    await setter.set(chunk)

        await asyncio.gather(*(put(b[0], c) for b, c in zip(batch, encoded, strict=True)))

    def _encode_all(self, batch: list, value: np.ndarray, drop_axes: tuple, existing: list):
        """Every chunk merged and encoded (and, to a LocalStore, stored), in threads over
        the chunks; the encoded chunks (None: delete) where the store is not local."""
        out: list[Any] = [None] * len(batch)
        lock = threading.Lock()
        state = {"next": 0, "error": None}
        dirs: set[str] = set()  # the chunk directories this write has made or found
        if self.local is not None and batch:
            check_local_store_writable(self.local)  # (set_sync's checks, once per write)

        def run() -> None:
            while True:
                with lock:
                    i = state["next"]
                    if i >= len(batch) or state["error"] is not None:
                        return
                    state["next"] = i + 1
                try:
                    out[i] = self._one(batch[i], value, drop_axes, existing[i], dirs)
                except BaseException as exc:  # (raised once all threads are done)
                    with lock:
                        if state["error"] is None:
                            state["error"] = exc
                    return

        nthreads = min(zarr_threads(), len(batch))
        jobs = [_WRITES.get(nthreads - 1).submit(run) for _ in range(nthreads - 1)]
        run()
        for job in jobs:
            job.result()
        if state["error"] is not None:
            raise state["error"]
        return out

    def _one(
        self, info: tuple, value: np.ndarray, drop_axes: tuple, existing: Any, dirs: set
    ) -> Any:
        setter, spec, csel, osel, complete = info
        shape = tuple(spec.shape)
        chunk = None
        if complete and value.shape != ():
            chunk = value[osel]
            if chunk.shape != shape:
                chunk = None
        if chunk is None:
            if not complete and self.local is not None:
                existing = self.read_local(setter.path)
            chunk = self._decoded(existing, shape, spec)
            if csel == () or value.shape == ():
                part = value
            else:
                part = value[osel]
                if drop_axes:
                    part = part[
                        tuple(None if a in drop_axes else slice(None) for a in range(len(shape)))
                    ]
            chunk[csel] = part
        empty = not spec.config.write_empty_chunks and _all_fill(chunk, spec)
        encoded = None if empty else self.encode(np.ascontiguousarray(chunk), spec)
        if self.local is None:
            return encoded
        if encoded is None:
            self.local.delete_sync(setter.path)
        else:
            path = os.path.join(self.root, setter.path)
            folder = os.path.dirname(path)
            if folder not in dirs:
                os.makedirs(folder, exist_ok=True)  # (as zarr's set_sync makes them)
                dirs.add(folder)
            _files.write_atomic(path, encoded.as_buffer_like(), sync=False)
        return None

    def _decoded(self, existing: Any, shape: tuple, spec: Any) -> np.ndarray:
        """A chunk written in part: its stored items (a copy of its own), else the fill."""
        if existing is None:
            return np.full(shape, fill_value(spec), self.dtype)
        # One thread per chunk: the chunks are the write's threads' work already.
        decoded = decode_chunk(np.frombuffer(existing, np.uint8), nthreads=1)
        expected = self.dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if decoded.nbytes != expected:
            raise FormatError(
                "nbytes", f"{expected} (a chunk of shape {shape}, {self.dtype})", decoded.nbytes
            )
        return decoded.view(self.dtype).reshape(shape)


# The writes' own threads. A codec may hand blocks to b2store's kernel pool
# (native.executor) and wait for them: run from that pool's threads, writes could hold every
# one of them waiting for work queued behind themselves.
_WRITES = native.ThreadPool("b2store-writes")
