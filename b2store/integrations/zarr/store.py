"""``B2ndStore``: a Zarr v3 store whose arrays are b2nd frames, read (and written) as they are.

One frame is an array at the root (or, with ``group=True``, a group holding one array named
as the ``b2nd`` engine names it, which xarray's zarr engine needs); a directory of frames,
python-blosc2's ``.b2d`` directories and ``.b2z`` zips are groups of arrays and subgroups.
The store synthesizes each node's ``zarr.json`` from the frames' metalayers and vlmeta
(:mod:`.meta`; inline consolidated metadata at the root, so that opening lists nothing)
and serves chunk key ``c/i/j`` as the frame's stored chunk ``i, j``; the ``b2nd`` codec
decodes it. Writes land in frames python-blosc2 opens (see
:mod:`b2store.integrations.zarr.write`).

This module holds the store's face to zarr (the async API, pickling, lifetime); the node
index is :mod:`.nodes`, the mapping of keys to stored chunks
:mod:`.keys`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from zarr.abc.store import ByteRequest, Store
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

from ... import _files
from ...limits import Limits, resolve
from ...tree import is_url
from .keys import StoreKeys, slice_bytes

__all__ = ["B2ndStore"]

# What a pickled store carries (the writer's client metadata besides); it opens again on
# unpickling (``_setup``).
_STATE_KEYS = (
    "path",
    "mode",
    "group",
    "contiguous",
    "dtype",
    "storage_options",
    "limits",
    "_read_only",
)


# --- the store --------------------------------------------------------------------------------


class B2ndStore(StoreKeys, Store):
    """A Zarr v3 store over b2nd frames: one ``.b2nd`` file, a sparse-frame directory, a
    directory of frames, or a python-blosc2 ``.b2d``/``.b2z`` tree, local or remote.

    Parameters
    ----------
    path : str or path-like
        A local path or an fsspec URL (``https://``, ``s3://``, ``memory://``...).
    mode : {"r", "a", "w"}
        Read only; read and change what exists (creating what does not); or start afresh,
        replacing what is at ``path``.
    group : bool
        For one frame: show it as a group with one array (what ``xarray.open_zarr`` needs)
        instead of an array at the root, named as the ``b2nd`` engine names it: the name
        ``to_b2nd`` stored, else ``data``.
    contiguous : bool
        New frames are contiguous files (``x.b2nd``); False writes sparse frames
        (directories of chunk files).
    dtype : numpy dtype, optional
        The item type of legacy ``caterva`` frames, which store none.
    storage_options : dict, optional
        fsspec options for a remote ``path``, and b2store's ``read_timeout`` (seconds a
        request may go without a byte; 60 when absent).
    read_only : bool, optional
        Overrides what ``mode`` says (zarr's ``Store.open(read_only=...)`` passes it).
    limits : b2store.Limits, optional
        What the tree and its frames may ask for (its defaults when None); a file asking for
        more raises :class:`b2store.LimitError`. Pickled stores keep it.

    Examples
    --------
    >>> import numpy as np, zarr, b2store, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.b2nd")
    >>> _ = b2store.asarray(np.arange(12).reshape(3, 4), path, chunks=(2, 2), blocks=(1, 2))
    >>> zarr.open_array(B2ndStore(path))[1:, 2]
    array([ 6, 10])
    """

    supports_writes = True
    supports_deletes = True
    supports_listing = True
    # A chunk key is a stored chunk, replaced whole. (zarr 3.1.0-3.1.x still declared these
    # abstract; later zarr has the same defaults.)
    supports_partial_writes = False

    async def set_partial_values(self, key_start_values) -> None:
        raise NotImplementedError("B2ndStore writes whole keys only")

    def __init__(
        self,
        path,
        mode: str = "r",
        *,
        group: bool = False,
        contiguous: bool = True,
        dtype=None,
        storage_options: Mapping | None = None,
        read_only: bool | None = None,
        limits: Limits | None = None,
    ):
        resolve(limits)  # a TypeError here, not at the first read
        if mode not in ("r", "a", "w"):
            raise ValueError(f"mode must be 'r', 'a' or 'w', not {mode!r}")
        if read_only is None:
            read_only = mode == "r"
        elif read_only:
            mode = "r"
        elif mode == "r":
            mode = "a"
        super().__init__(read_only=read_only)
        self.path = str(path) if is_url(str(path)) else str(Path(path).expanduser().absolute())
        self.mode = mode
        self.group = bool(group)
        self.contiguous = bool(contiguous)
        self.dtype = None if dtype is None else np.dtype(dtype).str
        self.storage_options = dict(storage_options) if storage_options else None
        self.limits = limits
        if not read_only and not is_url(self.path):
            # before any byte: a root inside a tree reached through a link planted there
            _files.check_write(self.path)
        self._setup()

    def _setup(self) -> None:
        self._lock = threading.RLock()
        self._nodes: dict[str, tuple[str, Any]] | None = None
        self._arrays: dict[str, Any] = {}
        self._docs: dict[str, dict] = {}
        self._single_frame = False
        self._writer = None
        if self.mode == "w":
            from .write import Writer

            self._writer = Writer(self, fresh=True)
            self.mode = "a"  # pickled copies and reopenings must not wipe it again

    # --- identity, pickling ---------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and other.path == self.path
            and other.group == self.group
            and other.read_only == self.read_only
            and other.storage_options == self.storage_options
            and other.limits == self.limits
        )

    def __hash__(self) -> int:
        return hash((type(self), self.path, self.group, self.read_only))

    def __repr__(self) -> str:
        return f"B2ndStore({self.path!r}, mode={self.mode!r})"

    def __getstate__(self) -> dict:
        state = {key: getattr(self, key) for key in _STATE_KEYS}
        state["_is_open"] = False
        if self._writer is not None:
            state["client_meta"] = self._writer.client_meta()
        return state

    def __setstate__(self, state: dict) -> None:
        client_meta = state.pop("client_meta", None)
        state.setdefault("limits", None)  # a store pickled before stores carried limits
        self.__dict__.update(state)
        self._setup()
        if client_meta:
            self._ensure_writer().restore_client_meta(client_meta)

    def with_read_only(self, read_only: bool = False) -> B2ndStore:
        return type(self)(
            self.path,
            mode="r" if read_only else "a",
            group=self.group,
            contiguous=self.contiguous,
            dtype=self.dtype,
            storage_options=self.storage_options,
            limits=self.limits,
        )

    def close(self) -> None:
        with self._lock:
            for arr in self._arrays.values():
                arr.schunk.close()
            self._arrays.clear()
            if self._writer is not None:
                self._writer.close()
        super().close()

    def _ensure_writer(self):
        with self._lock:
            if self._writer is None:
                from .write import Writer

                # Reads go through the writer's handles from now on.
                for arr in self._arrays.values():
                    arr.schunk.close()
                self._arrays.clear()
                self._writer = Writer(self, fresh=False)
            return self._writer

    async def _open(self) -> None:
        if self.read_only and not self._is_open:
            # A read-only store of a missing path fails here, naming it (FileNotFoundError),
            # before zarr reads it as an empty store; the index is what zarr reads first.
            await asyncio.to_thread(self._index)
        await super()._open()

    # --- reading ---------------------------------------------------------------------------
    # Every read is synchronous underneath (a file read, or an fsspec range request): the
    # ``*_sync`` methods are zarr's sync store surface (``SupportsSyncStore``, zarr >= 3.4,
    # structural, so nothing is imported for it) and the async methods hop to a worker
    # thread and call them.

    @property
    def _supports_sync_io(self) -> bool:
        """Whether zarr's fused codec pipeline does its reads and writes through the
        ``*_sync`` methods (``zarr.abc.store._store_supports_sync_io`` asks). A local store
        says yes: a chunk is a file read, no event loop needed. A remote one says no, as
        zarr's own network stores (which have no ``*_sync`` methods) do: the fused pipeline
        would wait for each request in a pool of one thread per core, where the async path
        keeps many in flight; it cannot write either. Its ``get_sync`` still works."""
        return not is_url(self.path)

    def _ensure_open_sync(self) -> None:
        # zarr's Store._open only marks the store open; frames are opened when first read.
        if not self._is_open:
            self._is_open = True

    def get_sync(
        self,
        key: str,
        *,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        self._ensure_open_sync()
        slice_bytes(b"", byte_range)  # reject a bad range before anything else
        if byte_range is not None:
            data = self._get_range_of(key, byte_range)
        else:
            data = self._get_bytes_of(key)
        if data is None:
            return None
        if prototype is None:
            prototype = default_buffer_prototype()
        return prototype.buffer.from_bytes(data)

    async def get(
        self,
        key: str,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        if not self._is_open:
            await self._open()
        slice_bytes(b"", byte_range)  # a bad range raises here, before the hop
        return await asyncio.to_thread(
            partial(self.get_sync, key, prototype=prototype, byte_range=byte_range)
        )

    def b2nd_decode_into_sync(
        self, key: str, blocks, out: np.ndarray, blocksize: int | None = None
    ) -> bool | None:
        """The ``b2nd`` codec's shortcut past byte ranges: decode at least ``blocks`` (None:
        all) of the stored chunk at ``key`` straight into ``out`` (the decoded chunk's flat
        bytes), reading only what they need. ``blocks`` are the array's blocks, each
        ``blocksize`` bytes of ``out``; a chunk whose Blosc blocks are of another size (their
        numbers then name other bytes), or a call without ``blocksize``, is decoded whole.
        Returns True when done, None for a missing chunk (the fill value), False when the
        codec must go through :meth:`get` (a key that is no stored b2nd chunk, a transcoding
        writer's)."""
        self._ensure_open_sync()
        return self._decode_into(key, blocks if blocksize else None, out, blocksize)

    async def b2nd_decode_into(
        self, key: str, blocks, out: np.ndarray, blocksize: int | None = None
    ) -> bool | None:
        """:meth:`b2nd_decode_into_sync` for the async pipeline, in one worker thread."""
        if not self._is_open:
            await self._open()
        if _one_worker() and not is_url(self.path):
            # zarr asked for one worker thread: a hop to it and back buys no parallelism and
            # costs a thread switch per chunk; a local chunk is decoded here instead.
            return self.b2nd_decode_into_sync(key, blocks, out, blocksize)
        return await asyncio.to_thread(self.b2nd_decode_into_sync, key, blocks, out, blocksize)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self._exists, key)

    async def getsize(self, key: str) -> int:
        size = await asyncio.to_thread(self._size_of, key)
        if size is None:
            raise FileNotFoundError(key)
        return size

    async def getsize_prefix(self, prefix: str) -> int:
        keys = [k async for k in self.list_prefix(prefix)]
        sizes = await asyncio.gather(*(self.getsize(k) for k in keys))
        return sum(sizes)

    # --- listing ---------------------------------------------------------------------------

    async def list(self) -> AsyncIterator[str]:
        for key in await asyncio.to_thread(self._all_keys):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in await asyncio.to_thread(self._all_keys):
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        for name in await asyncio.to_thread(self._dir_keys, prefix.rstrip("/")):
            yield name

    # --- writing (see write.py) ---------------------------------------------------------

    def set_sync(self, key: str, value: Buffer) -> None:
        self._check_writable()
        self._ensure_open_sync()
        if not isinstance(value, Buffer):
            raise TypeError(f"expected a zarr Buffer, got {type(value).__name__}")
        self._ensure_writer().set(key, value.to_bytes())

    def delete_sync(self, key: str) -> None:
        self._check_writable()
        self._ensure_open_sync()
        self._ensure_writer().delete(key)

    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()  # raised here, not in the worker thread
        await asyncio.to_thread(self.set_sync, key, value)

    async def delete(self, key: str) -> None:
        self._check_writable()
        await asyncio.to_thread(self.delete_sync, key)

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        await asyncio.to_thread(self._ensure_writer().delete_dir, prefix)

    async def is_empty(self, prefix: str) -> bool:
        async for _ in self.list_prefix(prefix):
            return False
        return True


def _one_worker() -> bool:
    """Whether zarr's configuration gives its thread pool a single worker."""
    import zarr

    return zarr.config.get("threading.max_workers", None) == 1
