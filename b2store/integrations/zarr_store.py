"""``B2ndStore``: a Zarr v3 store whose arrays are b2nd frames, read (and written) as they are.

One frame is an array at the root (or, with ``group=True``, a group holding one array named
as the ``b2nd`` engine names it, which xarray's zarr engine needs); a directory of frames,
python-blosc2's ``.b2d`` directories and ``.b2z`` zips are groups of arrays and subgroups.
The store synthesizes each node's ``zarr.json`` from the frames' metalayers and vlmeta
(:mod:`.zarr_meta`; inline consolidated metadata at the root, so that opening lists nothing)
and serves chunk key ``c/i/j`` as the frame's stored chunk ``i, j``; the ``b2nd`` codec
decodes it. Writes land in frames python-blosc2 opens (see
:mod:`b2store.integrations.zarr_store_write`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.core.buffer import Buffer, BufferPrototype

from ..constants import SpecialValue
from ..limits import Limits, resolve
from ..tree import is_url, open_tree
from .zarr_meta import (  # noqa: F401 - re-exported: the writer, virtual.py and tests use them
    CF_FILL,
    DIMS_KEY,
    FILL_KEY,
    META,
    XARRAY_KEY,
    EmbeddedCoord,
    _attribute_vlmeta,
    _zdtype,
    array_metadata,
    group_metadata,
    json_attributes,
    plain_fill_attr,
    zarr_fill_attr,
)

__all__ = ["B2ndStore", "array_metadata"]


def _slice_bytes(data: bytes, byte_range: ByteRequest | None) -> bytes:
    if byte_range is None:
        return data
    if isinstance(byte_range, RangeByteRequest):
        return data[byte_range.start : byte_range.end]
    if isinstance(byte_range, OffsetByteRequest):
        return data[byte_range.offset :]
    if isinstance(byte_range, SuffixByteRequest):
        return data[len(data) - byte_range.suffix :] if byte_range.suffix else b""
    raise ValueError(f"Unexpected byte_range, got {byte_range}.")


# --- the store --------------------------------------------------------------------------------


class B2ndStore(Store):
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
        For one frame: show it as a group with one array named after the file (what
        ``xarray.open_zarr`` needs) instead of an array at the root.
    contiguous : bool
        New frames are contiguous files (``x.b2nd``); False writes sparse frames
        (directories of chunk files).
    dtype : numpy dtype, optional
        The item type of legacy ``caterva`` frames, which store none.
    storage_options : dict, optional
        fsspec options for a remote ``path``.
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
        self._setup()

    def _setup(self) -> None:
        self._lock = threading.RLock()
        self._nodes: dict[str, tuple[str, Any]] | None = None
        self._arrays: dict[str, Any] = {}
        self._docs: dict[str, dict] = {}
        self._single_frame = False
        self._writer = None
        if self.mode == "w":
            from .zarr_store_write import Writer

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
        state = {
            "path": self.path,
            "mode": self.mode,
            "group": self.group,
            "contiguous": self.contiguous,
            "dtype": self.dtype,
            "storage_options": self.storage_options,
            "limits": self.limits,
            "_read_only": self._read_only,
            "_is_open": False,
        }
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
                from .zarr_store_write import Writer

                # Reads go through the writer's handles from now on.
                for arr in self._arrays.values():
                    arr.schunk.close()
                self._arrays.clear()
                self._writer = Writer(self, fresh=False)
            return self._writer

    # --- the node index ---------------------------------------------------------------------

    def _index(self) -> dict[str, tuple[str, Any]]:
        """Zarr node path -> ("group", attributes) or ("array", ArrayRef)."""
        nodes = self._nodes
        if nodes is not None:
            return nodes
        with self._lock:
            if self._nodes is not None:
                return self._nodes
            self._nodes = self._build_index()
            return self._nodes

    def _build_index(self) -> dict[str, tuple[str, Any]]:
        try:
            tree = open_tree(self.path, storage_options=self.storage_options, limits=self.limits)
        except FileNotFoundError:
            return {}  # nothing yet (a store about to be written)
        self._single_frame = tree.kind == "frame"
        if tree.kind == "frame":
            (ref,) = tree.arrays().values()
            if self.group:
                return self._frame_group(ref)
            return {"": ("array", ref)}
        nodes: dict[str, tuple[str, Any]] = {}
        for path, attrs in tree.groups().items():
            nodes[path.strip("/")] = ("group", dict(attrs))
        for path, ref in tree.arrays().items():
            nodes[path.strip("/")] = ("array", ref)
        return nodes

    def _frame_group(self, ref) -> dict[str, tuple[str, Any]]:
        """The group view of one frame: the array, named as the ``b2nd`` engine names it;
        a frame written by ``to_b2nd`` also shows its embedded coordinates as arrays and
        the Dataset's attributes as the group's, so xarray's zarr engine sees the same
        Dataset as the ``b2nd`` engine."""
        arr = ref.open(dtype=self.dtype)
        try:
            vlmeta = dict(arr.vlmeta) if hasattr(arr, "vlmeta") else {}
        finally:
            getattr(arr, "schunk", arr).close()
        info = vlmeta.get(XARRAY_KEY)
        info = info if isinstance(info, Mapping) else {}
        name = info.get("name")
        if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
            name = ref.path.strip("/")
        attrs = info.get("attrs")
        nodes: dict[str, tuple[str, Any]] = {
            "": ("group", dict(attrs) if isinstance(attrs, Mapping) else {}),
            name: ("array", ref),
        }
        coords = info.get("coords")
        for cname, spec in coords.items() if isinstance(coords, Mapping) else ():
            if isinstance(spec, Mapping) and isinstance(cname, str) and cname not in nodes:
                if cname and "/" not in cname and not cname.startswith("."):
                    nodes[cname] = ("array", EmbeddedCoord(cname, spec))
        return nodes

    def _invalidate(self) -> None:
        with self._lock:
            self._nodes = None
            self._docs = {}

    def _array(self, node: str):
        """The opened array of ``node`` (opened once per store, read by many threads)."""
        arr = self._arrays.get(node)
        if arr is not None:
            return arr
        with self._lock:
            arr = self._arrays.get(node)
            if arr is None:
                kind, ref = self._index()[node]
                arr = self._writer.array(node) if self._writer is not None else None
                if arr is None:
                    arr = ref.open(dtype=self.dtype)
                self._arrays[node] = arr
            return arr

    def _node_meta(self, node: str) -> dict:
        if self._writer is not None:
            doc = self._writer.meta_for(node)
            if doc is not None:
                return doc
        kind, value = self._index()[node]
        where = f"{self.path}:{node or '/'}"
        if kind == "array":
            return self._array_meta(node, value, where)
        doc = group_metadata(value, where)
        if node == "":
            doc["consolidated_metadata"] = {
                "kind": "inline",
                "must_understand": False,
                "metadata": {path: self._node_meta(path) for path in sorted(self._index()) if path},
            }
        return doc

    def _array_meta(self, node: str, ref, where: str) -> dict:
        """An array's ``zarr.json``, synthesized once; an array not open yet is opened only
        for it and closed (a tree of thousands of arrays must not hold a descriptor each
        for its consolidated metadata: arrays stay open once their chunks are read)."""
        docs = self._docs
        doc = docs.get(node)
        if doc is not None:
            return doc
        # One frame, or frames behind URLs (no descriptor; reopening costs requests): keep.
        self._index()
        keep = self._single_frame or is_url(self.path)
        if keep or node in self._arrays or self._writer is not None:
            doc = array_metadata(self._array(node), where)
        else:
            arr = ref.open(dtype=self.dtype)
            try:
                doc = array_metadata(arr, where)
            finally:
                arr.schunk.close()
        docs[node] = doc
        return doc

    def _parse_key(self, key: str) -> tuple[str, str, tuple[int, ...] | None] | None:
        """``(node, "meta" | "chunk", chunk coordinates)`` for a key the store serves."""
        nodes = self._index()
        if key == META or key.endswith("/" + META):
            node = key[: -len(META)].rstrip("/")
            return (node, "meta", None) if node in nodes else None
        parts = key.split("/")
        for i, part in enumerate(parts):
            if part != "c":
                continue
            node = "/".join(parts[:i])
            if nodes.get(node, ("",))[0] != "array":
                continue
            try:
                coords = tuple(int(p) for p in parts[i + 1 :])
            except ValueError:
                return None
            if any(str(c) != p for c, p in zip(coords, parts[i + 1 :])):
                return None
            return node, "chunk", coords
        return None

    def _chunk_number(self, node: str, coords: tuple[int, ...]) -> int | None:
        arr = self._array(node)
        if len(coords) != arr.ndim or arr.size == 0:
            return None
        grid = [-(-s // c) for s, c in zip(arr.shape, arr.chunks)]
        if not all(0 <= c < g for c, g in zip(coords, grid)):
            return None
        n = 0
        for c, g in zip(coords, grid):
            n = n * g + c
        return n

    def _chunk_bytes(self, node: str, coords) -> bytes | None:
        if self._writer is not None:
            found, data = self._writer.client_chunk(node, coords)
            if found:
                return data
        n = self._chunk_number(node, coords)
        if n is None:
            return None
        schunk = self._array(node).schunk
        if _is_uninit(schunk, n):
            return None
        return schunk.get_chunk(n)

    # --- reading ---------------------------------------------------------------------------

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        if not self._is_open:
            await self._open()
        _slice_bytes(b"", byte_range)  # reject a bad range before anything else
        if byte_range is not None:
            data = await asyncio.to_thread(self._get_range_of, key, byte_range)
            return None if data is None else prototype.buffer.from_bytes(data)
        data = await asyncio.to_thread(self._get_bytes_of, key)
        if data is None:
            return None
        return prototype.buffer.from_bytes(data)

    async def b2nd_decode_into(self, key: str, blocks, out: np.ndarray) -> bool | None:
        """The ``b2nd`` codec's shortcut past byte ranges: decode at least ``blocks`` (None:
        all) of the stored chunk at ``key`` straight into ``out`` (the decoded chunk's flat
        bytes), reading only what they need, in one worker thread. Returns True when done,
        None for a missing chunk (the fill value), False when the codec must go through
        :meth:`get` (a key that is no stored b2nd chunk, a transcoding writer's)."""
        if not self._is_open:
            await self._open()
        if _one_worker() and not is_url(self.path):
            # zarr asked for one worker thread: a hop to it and back buys no parallelism and
            # costs a thread switch per chunk; a local chunk is decoded here instead.
            return self._decode_into(key, blocks, out)
        return await asyncio.to_thread(self._decode_into, key, blocks, out)

    def _decode_into(self, key: str, blocks, out: np.ndarray) -> bool | None:
        parsed = self._parse_key(key)
        if parsed is None or parsed[1] != "chunk":
            return False
        node, _, coords = parsed
        if self._writer is not None and self._writer.transcodes(node):
            return False
        n = self._chunk_number(node, coords)
        if n is None:
            return None
        schunk = self._array(node).schunk
        if _is_uninit(schunk, n):
            return None
        if schunk.header.nbytes and schunk._chunk_nbytes(n) != out.nbytes:
            return False  # not the chunk the codec expects: let it name the field
        if blocks is None:
            schunk.decompress_chunk(n, out=out)
        else:
            schunk.decode_blocks(n, blocks, out)
        return True

    def _get_range_of(self, key: str, byte_range: ByteRequest) -> bytes | None:
        """Part of a key's value; a stored chunk's part is read alone (a range request)."""
        parsed = self._parse_key(key)
        if (
            parsed is None
            or parsed[1] != "chunk"
            or (self._writer is not None and self._writer.transcodes(parsed[0]))
        ):
            data = self._get_bytes_of(key)
            return None if data is None else _slice_bytes(data, byte_range)
        node, _, coords = parsed
        n = self._chunk_number(node, coords)
        if n is None:
            return None
        schunk = self._array(node).schunk
        if _is_uninit(schunk, n):
            return None
        span = schunk.chunk_span(n)
        if span is None or span[0].startswith("<"):  # special, or a frame in memory
            return _slice_bytes(schunk.get_chunk(n), byte_range)
        url, offset, length = span
        start, stop = _range_bounds(byte_range, length)
        return _read_span(url, offset + start, stop - start, self.storage_options)

    def _get_bytes_of(self, key: str) -> bytes | None:
        parsed = self._parse_key(key)
        if parsed is None:
            return None
        node, what, coords = parsed
        if what == "meta":
            return json.dumps(self._node_meta(node)).encode()
        return self._chunk_bytes(node, coords)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self._exists, key)

    def _exists(self, key: str) -> bool:
        parsed = self._parse_key(key)
        if parsed is None:
            return False
        node, what, coords = parsed
        if what == "meta":
            return True
        n = self._chunk_number(node, coords)
        return n is not None and not _is_uninit(self._array(node).schunk, n)

    async def getsize(self, key: str) -> int:
        size = await asyncio.to_thread(self._size_of, key)
        if size is None:
            raise FileNotFoundError(key)
        return size

    def _size_of(self, key: str) -> int | None:
        """A key's size; a chunk's from its header alone, never its data."""
        parsed = self._parse_key(key)
        if parsed is None:
            return None
        node, what, coords = parsed
        if what == "meta" or (self._writer is not None and self._writer.transcodes(node)):
            data = self._get_bytes_of(key)
            return None if data is None else len(data)
        n = self._chunk_number(node, coords)
        schunk = self._array(node).schunk
        if n is None or _is_uninit(schunk, n):
            return None
        if int(schunk.offsets[n]) < 0:
            return 32  # a special chunk: header only
        return schunk._stored_sizes(n)[1]

    async def getsize_prefix(self, prefix: str) -> int:
        keys = [k async for k in self.list_prefix(prefix)]
        sizes = await asyncio.gather(*(self.getsize(k) for k in keys))
        return sum(sizes)

    # --- listing ---------------------------------------------------------------------------

    def _all_keys(self) -> list[str]:
        keys = []
        for node, (kind, _) in sorted(self._index().items()):
            prefix = f"{node}/" if node else ""
            keys.append(prefix + META)
            if kind != "array":
                continue
            arr = self._array(node)
            if arr.size == 0:
                continue
            schunk = arr.schunk
            grid = [-(-s // c) for s, c in zip(arr.shape, arr.chunks)]
            for n, coords in enumerate(np.ndindex(*grid) if grid else [()]):
                if not _is_uninit(schunk, n):
                    keys.append(prefix + "/".join(["c", *map(str, coords)]))
        return keys

    async def list(self) -> AsyncIterator[str]:
        for key in await asyncio.to_thread(self._all_keys):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in await asyncio.to_thread(self._all_keys):
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        prefix = prefix.rstrip("/")
        base = f"{prefix}/" if prefix else ""
        seen = set()
        for key in await asyncio.to_thread(self._all_keys):
            if key.startswith(base):
                child = key[len(base) :].split("/", 1)[0]
                if child not in seen:
                    seen.add(child)
                    yield child

    # --- writing (see zarr_store_write) ---------------------------------------------------------

    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()
        if not self._is_open:
            await self._open()
        if not isinstance(value, Buffer):
            raise TypeError(f"expected a zarr Buffer, got {type(value).__name__}")
        await asyncio.to_thread(self._ensure_writer().set, key, value.to_bytes())

    async def delete(self, key: str) -> None:
        self._check_writable()
        await asyncio.to_thread(self._ensure_writer().delete, key)

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        await asyncio.to_thread(self._ensure_writer().delete_dir, prefix)

    async def is_empty(self, prefix: str) -> bool:
        async for _ in self.list_prefix(prefix):
            return False
        return True


def _range_bounds(byte_range: ByteRequest, length: int) -> tuple[int, int]:
    if isinstance(byte_range, RangeByteRequest):
        start, stop = byte_range.start, byte_range.end
    elif isinstance(byte_range, OffsetByteRequest):
        start, stop = byte_range.offset, length
    else:
        start, stop = length - byte_range.suffix, length
    start = max(0, min(start, length))
    return start, max(start, min(stop, length))


def _one_worker() -> bool:
    """Whether zarr's configuration gives its thread pool a single worker."""
    import zarr

    return zarr.config.get("threading.max_workers", None) == 1


def _read_span(url: str, offset: int, size: int, storage_options) -> bytes:
    """``size`` bytes at ``offset`` of a local file or a URL (one range request)."""
    if size <= 0:
        return b""
    if is_url(url):
        import fsspec

        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        return fs.cat_file(path, start=offset, end=offset + size)
    import os

    fd = os.open(url, os.O_RDONLY)
    try:
        return os.pread(fd, size, offset)
    finally:
        os.close(fd)


def _is_uninit(schunk, n: int) -> bool:
    entry = int(schunk.offsets[n])
    return entry < 0 and (entry >> 56) & 0x7F == SpecialValue.UNINIT
