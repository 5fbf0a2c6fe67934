"""Writes through :class:`~b2store.integrations.zarr.store.B2ndStore`: zarr's ``zarr.json``
and chunk keys become b2nd frames (one per array) in python-blosc2's layouts.

An array's ``zarr.json`` creates (or resizes, or re-attributes) its frame; a chunk key
replaces one chunk; deleting a chunk (zarr's way of writing an all-fill chunk) stores a
special chunk of the fill value. Chunks zarr encodes with the ``b2nd`` codec are stored as
they come; chunks of any other codec chain are decoded with it and re-encoded as b2nd chunks,
and served back to that same client encoded its way, so that zarr can read what it wrote.
Writers of different chunks may be many threads and processes: each chunk change takes the
frame's writer lock and starts from what is on disk. A store refuses to write chunks of an
array another writer has resized since it opened it (:class:`ConcurrentResizeError`), since
its chunk keys would then name other chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import threading
import time

import msgpack
import numpy as np

from ..._userpath import names_user_path
from ...chunk.encoder import special_chunk
from ...chunk.params import ChunkParams, codec_name, filter_name
from ...constants import SpecialValue
from ...errors import B2StoreError, ConflictError
from ...nd.geometry import array_to_chunk, chunk_to_array
from ...nd.meta import B2ndMeta
from ...tree import EMBED_NAME, VLMETA_NAME
from .b2nd import B2ndCodec, default_blockshape
from .compat import chunk_spec
from .places import Place
from .zarr_json import (
    CF_FILL,
    DIMS_KEY,
    FILL_KEY,
    META,
    XARRAY_KEY,
    fill_bytes,
    plain_fill_attr,
    served_fill,
)

__all__ = ["Writer", "ConcurrentResizeError"]


# A chunk change refused in an object store because another writer published first is made
# again, up to this many times, after a random wait that doubles from _CONFLICT_DELAY.
_CONFLICT_TRIES = 40
_CONFLICT_DELAY, _CONFLICT_DELAY_MOST = 0.01, 0.5


def _compression_of(codecs) -> dict:
    """b2nd compression parameters from a zarr codec chain (python-blosc2's defaults else)."""
    for codec in codecs:
        name = type(codec).__name__
        if isinstance(codec, B2ndCodec):
            return {
                "cname": codec.cname,
                "clevel": codec.clevel,
                "filters": codec.filters,
                # A plugin codec's parameter (ZFP's error bound, rate or precision): the
                # frame's, which later writes through b2store or python-blosc2 code with.
                "codec_meta": codec.codec_meta,
                "splitmode": codec.splitmode,
            }
        if name == "Blosc2Codec":
            # its whole pipeline (the b2nd engine's compressor, kept by to_zarr), not just
            # its codec and level
            params = ChunkParams.from_zarr(codec.to_dict().get("configuration") or {})
            filters = tuple((filter_name(f), m) for f, m in params.pipeline)
            return {"cname": codec_name(params.codec), "clevel": params.clevel, "filters": filters}
        if name == "BloscCodec":
            cname = getattr(codec, "cname", "zstd")
            cname = getattr(cname, "value", cname)
            if cname not in ("blosclz", "lz4", "lz4hc", "zlib", "zstd"):
                cname = "zstd"
            return {"cname": cname, "clevel": int(getattr(codec, "clevel", 5))}
        if name == "ZstdCodec":
            # zstd level 0 means its default; python-blosc2's default level is 5.
            level = int(codec.level)
            return {"cname": "zstd", "clevel": max(1, min(9, level)) if level else 5}
        if name == "GzipCodec":
            return {"cname": "zlib", "clevel": max(0, min(9, int(codec.level)))}
    return {}


class ConcurrentResizeError(B2StoreError, RuntimeError):
    """Another writer (a process, or another store) resized an array this store writes."""


class _Client:
    """What one zarr client wrote as an array's ``zarr.json``, and its codec pipeline."""

    def __init__(self, doc: dict):
        from zarr.core.metadata.v3 import ArrayV3Metadata
        from zarr.registry import get_pipeline_class

        self.doc = doc
        self.meta = ArrayV3Metadata.from_dict(dict(doc))
        self.pipeline = get_pipeline_class().from_codecs(self.meta.codecs)
        codecs = self.meta.codecs
        self.b2nd = codecs[0] if len(codecs) == 1 and isinstance(codecs[0], B2ndCodec) else None

    def spec(self, coords):
        # Every chunk of the regular grid zarr writes through this store has the same spec.
        return chunk_spec(self.meta)

    async def decode(self, data: bytes, coords) -> np.ndarray:
        from zarr.core.buffer import default_buffer_prototype

        buf = default_buffer_prototype().buffer.from_bytes(data)
        (out,) = await self.pipeline.decode([(buf, self.spec(coords))])
        return out.as_numpy_array()

    async def encode(self, array: np.ndarray, coords) -> bytes | None:
        from zarr.core.buffer import default_buffer_prototype

        nd = default_buffer_prototype().nd_buffer.from_numpy_array(array)
        (out,) = await self.pipeline.encode([(nd, self.spec(coords))])
        return None if out is None else out.to_bytes()


class Writer:
    """The write side of one :class:`B2ndStore` (see the module docstring)."""

    def __init__(self, store, fresh: bool):
        self.store = store
        self.place = Place.of(store.path, store.storage_options)
        self._lock = threading.RLock()
        self._node_locks: dict[str, threading.Lock] = {}
        self._clients: dict[str, _Client] = {}
        self._open: dict[str, object] = {}
        self.single = store.path.endswith((".b2nd", ".b2frame")) or (
            self.place.isdir("") and self.place.exists("chunks.b2frame")
        )
        # In an object store a frame changes chunk by chunk only as a sparse frame (a
        # contiguous one is one object, stored whole).
        self.contiguous = getattr(store, "contiguous", True) and not self.place.remote
        if fresh:
            self.place.remove("")

    # --- where nodes live -------------------------------------------------------------------

    def _frame_rel(self, node: str) -> str:
        return "" if self.single else f"{node}.b2nd"

    def _check_node(self, node: str) -> None:
        parts = node.split("/") if node else []
        if any(p in ("", ".", "..") or p.startswith(".") for p in parts):
            raise ValueError(f"node name {node!r} cannot be stored as a b2nd file")
        if parts and parts[-1] == "__vlmeta__":
            raise ValueError("'__vlmeta__' is reserved by python-blosc2's tree layout")

    def array(self, node: str):
        """The array of ``node`` open for writing (shared by the store's reads)."""
        with self._lock:
            arr = self._open.get(node)
            if arr is None:
                rel = self._frame_rel(node)
                if not self.place.exists(rel):
                    return None
                from ...api import open as b2open

                arr = b2open(
                    self.place.frame(rel),
                    mode="a",
                    limits=self.store.limits,
                    storage_options=self.place.storage_options,
                )
                self._open[node] = arr
            return arr

    def _forget(self, node: str) -> None:
        with self._lock:
            arr = self._open.pop(node, None)
            if arr is not None:
                arr.schunk.close()
            self.store._arrays.pop(node, None)
            self.store._invalidate()

    def close(self) -> None:
        with self._lock:
            for arr in self._open.values():
                arr.schunk.close()
            self._open.clear()

    # --- what the store asks ------------------------------------------------------------------

    def client_meta(self) -> dict:
        return {node: client.doc for node, client in self._clients.items()}

    def restore_client_meta(self, docs: dict) -> None:
        for node, doc in docs.items():
            self._clients[node] = _Client(doc)

    def meta_for(self, node: str) -> dict | None:
        client = self._clients.get(node)
        return None if client is None or client.b2nd is not None else client.doc

    def transcodes(self, node: str) -> bool:
        client = self._clients.get(node)
        return client is not None and client.b2nd is None

    def client_chunk(self, node: str, coords):
        """``(True, bytes or None)`` for a chunk a non-b2nd client reads, else ``(False, None)``."""
        client = self._clients.get(node)
        if client is None or client.b2nd is not None:
            return False, None
        n = self.store._chunk_number(node, coords)
        if n is None:
            return True, None
        arr = self.store._array(node)
        schunk = arr.schunk
        if self.store._missing(node, arr, n):  # (as the store's keys say: see keys.py)
            return True, None
        ext = chunk_to_array(schunk.decompress_chunk(n), arr.chunks, arr.blocks, arr.dtype)
        chunk = np.ascontiguousarray(ext[tuple(slice(0, c) for c in arr.chunks)])
        return True, _run(client.encode(chunk, coords))

    # --- set ---------------------------------------------------------------------------------

    @names_user_path
    def set(self, key: str, data: bytes) -> None:
        if key == META or key.endswith("/" + META):
            node = key[: -len(META)].rstrip("/")
            self._check_node(node)
            doc = json.loads(data)
            if doc.get("node_type") == "array":
                self._set_array_meta(node, doc)
            elif doc.get("node_type") == "group":
                self._set_group_meta(node, doc)
            else:
                raise ValueError(f"{key}: only Zarr v3 array and group metadata can be stored")
            return
        parsed = self.store._parse_key(key)
        if parsed is None or parsed[1] != "chunk":
            raise KeyError(f"{key} is neither a node's zarr.json nor a chunk of an array")
        node, _, coords = parsed
        client = self._clients.get(node)
        if client is not None and client.b2nd is None:
            array = _run(client.decode(data, coords))
            self._set_chunk_array(node, coords, array)
        else:
            self._set_chunk_bytes(node, coords, data)

    def _node_lock(self, node: str) -> threading.Lock:
        with self._lock:
            return self._node_locks.setdefault(node, threading.Lock())

    def _chunk_index(self, node: str, coords) -> int:
        n = self.store._chunk_number(node, coords)
        if n is None:
            raise KeyError(f"chunk {coords} is outside the array {node or '/'}")
        return n

    @contextlib.contextmanager
    def _changing(self, node: str, arr):
        """A change to one array's chunks: under the thread lock and the frame's writer lock,
        and only while the array still has the shape this store numbers chunks by (another
        process may have resized it: its chunk ``c/i/j`` would then be another chunk)."""
        with self._node_lock(node), arr.schunk.changing():
            name = "b2nd" if "b2nd" in arr.schunk.meta else "caterva"
            shape = B2ndMeta.from_bytes(arr.schunk.meta.raw(name), caterva=name == "caterva").shape
            if tuple(shape) != tuple(arr.shape):
                raise ConcurrentResizeError(
                    f"{self.store.path}:{node or '/'}: another writer resized the array from "
                    f"{tuple(arr.shape)} to {tuple(shape)}; reopen the store to write to it"
                )
            yield

    def _set_chunks(self, node: str, arr, updates: dict) -> None:
        """Chunks ``{number: stored bytes}`` of ``node`` replaced in one change. In an object
        store writers take no lock: one whose index was replaced meanwhile by another (dask
        workers writing chunks of one array) is refused (ConflictError) and makes its
        change again from the new index, as a local writer would after waiting for the
        lock: a chunk written is the same whatever the other writers did."""
        # A frame whose header gives new chunks parameters no chunk can be written with (a
        # clevel past 9, an unknown codec or filter id) takes none from this store either:
        # a FormatError naming the field, as b2store's other writers refuse it.
        arr.schunk.params  # noqa: B018
        delay = _CONFLICT_DELAY
        for tries_left in range(_CONFLICT_TRIES - 1, -1, -1):
            try:
                with self._changing(node, arr):
                    arr.schunk.update_chunks(updates)
                return
            except ConflictError:
                if not tries_left:
                    raise
                time.sleep(delay * (1 + random.random()))
                delay = min(2 * delay, _CONFLICT_DELAY_MOST)

    def _set_chunk_bytes(self, node: str, coords, data: bytes) -> None:
        arr = self.array(node)
        n = self._chunk_index(node, coords)
        self._set_chunks(node, arr, {n: data})

    def _set_chunk_array(self, node: str, coords, array: np.ndarray) -> None:
        from ...nd.chunks import encode_array_chunk

        arr = self.array(node)
        n = self._chunk_index(node, coords)
        buf = array_to_chunk(np.asarray(array, arr.dtype), arr.chunks, arr.blocks)
        chunk = encode_array_chunk(buf, arr.dtype, arr.schunk.params)
        self._set_chunks(node, arr, {n: chunk})

    def _fill_chunk(self, arr) -> bytes:
        """The special chunk of the array's fill value (what zarr means by a missing chunk)."""
        dtype = arr.dtype
        nbytes = arr.schunk.chunksize
        # The fill value the store serves (a CF _FillValue of NaN where no Zarr client set
        # one): a chunk zarr deletes as all-fill reads back as that value.
        value = fill_bytes(served_fill(dict(arr.vlmeta), dtype), dtype)
        blocksize = arr.schunk.blocksize
        if not value.strip(b"\0"):
            return special_chunk(SpecialValue.ZERO, nbytes, dtype.itemsize, blocksize=blocksize)
        nan = np.full(1, np.nan, dtype).tobytes() if dtype.kind == "f" else None
        if value == nan and dtype.itemsize in (4, 8) and dtype.byteorder in ("<", "="):
            return special_chunk(SpecialValue.NAN, nbytes, dtype.itemsize, blocksize=blocksize)
        return special_chunk(SpecialValue.VALUE, nbytes, dtype.itemsize, value, blocksize)

    # --- metadata ------------------------------------------------------------------------------

    def _set_group_meta(self, node: str, doc: dict) -> None:
        if self.single:
            return  # the group view's root: nothing to store
        rel = f"{node}/{VLMETA_NAME}" if node else VLMETA_NAME
        self.place.make_parent(rel)
        if not node:
            self._ensure_embed()
        attrs = dict(doc.get("attributes") or {})
        if attrs or self.place.exists(rel):
            # (python-blosc2's __vlmeta__.b2f: an empty frame whose vlmeta are the attrs)
            self.place.put_frame(rel, {}, attrs)
        self.store._invalidate()

    def _ensure_embed(self) -> None:
        if self.place.exists(EMBED_NAME):
            return
        meta = {"b2tree": msgpack.packb({"version": 1})}
        vlmeta = {"estore_metadata": {"embed_map": {}, "current_offset": 0}}
        self.place.put_frame(EMBED_NAME, meta, vlmeta, chunksize=8192)

    def _set_array_meta(self, node: str, doc: dict) -> None:
        client = _Client(doc)
        meta = client.meta
        dtype = meta.data_type.to_native_dtype()
        if dtype.kind == "T":
            _refuse_variable_width(node, dtype)
        codec = client.b2nd
        if codec is not None and codec.endian == "big" and dtype.itemsize > 1:
            dtype = dtype.newbyteorder(">")
        elif dtype.itemsize > 1 and dtype.byteorder == ">":
            dtype = dtype.newbyteorder("<")
        shape = tuple(meta.shape)
        chunks = tuple(meta.chunk_grid.chunk_shape)
        if codec is not None and codec.blockshape is not None:
            blocks = codec.blockshape
        elif codec is not None:
            blocks = default_blockshape(chunks, dtype.itemsize, **codec.coding())
        else:
            blocks = default_blockshape(chunks, dtype.itemsize)
        vlmeta = dict(meta.attributes)
        if CF_FILL in vlmeta:
            # xarray's zarr form (base64 for floats) back to the plain value b2nd keeps.
            vlmeta[CF_FILL] = plain_fill_attr(vlmeta[CF_FILL], dtype)
        if meta.dimension_names is not None:
            vlmeta[DIMS_KEY] = list(meta.dimension_names)
        zdtype = meta.data_type
        fill_json = zdtype.to_json_scalar(meta.fill_value, zarr_format=3)
        if fill_json != served_fill(vlmeta, dtype):
            # Kept where the store would serve another (the dtype's zero, or the CF
            # _FillValue it derives one from): the client's fill value is read back as given.
            vlmeta[FILL_KEY] = fill_json
        if self.single and node:
            vlmeta[XARRAY_KEY] = self._single_node_info(node)
        existing = self.array(node)
        with self._node_lock(node):
            if existing is not None and (
                existing.chunks == chunks
                and existing.blocks == tuple(blocks)
                and existing.dtype == dtype
            ):
                self._update(existing, shape, vlmeta)
            else:
                self._create(node, shape, dtype, chunks, blocks, client, vlmeta)
        self._clients[node] = client
        self._forget_cached_reader(node)

    def _single_node_info(self, node: str) -> dict:
        """The ``_xarray`` vlmeta naming the one array of a single frame's group view (the
        name the b2nd engine and the group view give it); a second array is refused."""
        names = {n for n in self._clients if n} | {
            n for n, (kind, _) in self.store._index().items() if kind == "array" and n
        }
        names.discard(node)
        if names and self.place.exists("") and not self._fresh_single(names):
            raise ValueError(
                f"{self.store.path} is one frame, which holds one array ({sorted(names)[0]!r}); "
                f"cannot add {node!r}: write to a .b2d tree (a path without .b2nd) instead"
            )
        arr = self.array(node)
        info = arr.vlmeta.get(XARRAY_KEY) if arr is not None else None
        info = dict(info) if isinstance(info, dict) else {"version": 1}
        info["name"] = node
        return info

    def _fresh_single(self, names) -> bool:
        # A frame this store has not written an array to yet is being replaced by mode="w"
        # (the index still names it after the file).
        return not any(n in self._clients for n in names)

    def _forget_cached_reader(self, node: str) -> None:
        self.store._arrays.pop(node, None)
        self.store._invalidate()

    def _create(self, node, shape, dtype, chunks, blocks, client, vlmeta) -> None:
        from ...nd.create import full

        self._forget(node)
        rel = self._frame_rel(node)
        self.place.make_parent(rel)
        if not self.single:
            self._ensure_embed()
        comp = _compression_of(client.meta.codecs)
        kwargs = {"codec": comp.get("cname", "zstd"), "clevel": comp.get("clevel", 5)}
        for key in ("codec_meta", "splitmode"):
            if key in comp:
                kwargs[key] = comp[key]
        filters = comp.get("filters")
        if filters:
            kwargs["filters"] = [name for name, _ in filters]
            kwargs["filters_meta"] = [meta for _, meta in filters]
        fill = fill_bytes(vlmeta.get(FILL_KEY), dtype)
        value = np.frombuffer(fill, dtype)[0] if fill.strip(b"\0") else np.zeros((), dtype)
        arr = full(
            shape,
            value,
            dtype=dtype,
            urlpath=self.place.frame(rel),
            chunks=chunks,
            blocks=tuple(blocks),
            contiguous=self.contiguous,
            vlmeta=vlmeta,
            storage_options=self.place.storage_options,
            **kwargs,
        )
        with self._lock:
            self._open[node] = arr

    def _update(self, arr, shape, vlmeta) -> None:
        if tuple(arr.shape) != shape:
            old_grid = [-(-s // c) for s, c in zip(arr.shape, arr.chunks)]
            arr.resize(shape)
            if FILL_KEY in vlmeta:
                # Chunks new to the array hold the fill value, not resize's zeros.
                grid = [-(-s // c) for s, c in zip(shape, arr.chunks)]
                chunk = None
                updates = {}
                for n, coords in enumerate(np.ndindex(*grid) if grid else []):
                    if any(c >= g for c, g in zip(coords, old_grid)):
                        chunk = chunk or self._fill_chunk_for(arr, vlmeta[FILL_KEY])
                        updates[n] = chunk
                if updates:
                    arr.schunk.update_chunks(updates)
        current = dict(arr.vlmeta)
        for key in current:
            # The b2nd engine's bookkeeping is not a Zarr attribute: a client never sends it.
            if key not in vlmeta and key != XARRAY_KEY:
                del arr.vlmeta[key]
        changed = {k: v for k, v in vlmeta.items() if not _same(current.get(k, _MISSING), v)}
        if changed:
            arr.vlmeta.update(changed)

    def _fill_chunk_for(self, arr, fill_json) -> bytes:
        arr.vlmeta[FILL_KEY] = fill_json
        return self._fill_chunk(arr)

    # --- deleting ------------------------------------------------------------------------------

    @names_user_path
    def delete(self, key: str) -> None:
        if key == META or key.endswith("/" + META):
            node = key[: -len(META)].rstrip("/")
            self._delete_node(node)
            return
        parsed = self.store._parse_key(key)
        if parsed is None or parsed[1] != "chunk":
            return  # deleting what is not there is not an error
        node, _, coords = parsed
        n = self.store._chunk_number(node, coords)
        if n is None:
            return
        arr = self.array(node)
        self._set_chunks(node, arr, {n: self._fill_chunk(arr)})

    def _delete_node(self, node: str) -> None:
        nodes = self.store._index()
        if node not in nodes:
            return
        self._forget(node)
        self._clients.pop(node, None)
        if nodes[node][0] == "array":
            self.place.remove(self._frame_rel(node))
        elif not self.single:
            self.place.remove_file(f"{node}/{VLMETA_NAME}" if node else VLMETA_NAME)
        self.store._invalidate()

    @names_user_path
    def delete_dir(self, prefix: str) -> None:
        prefix = prefix.strip("/")
        nodes = dict(self.store._index())
        if not prefix:
            for node in list(self._open):
                self._forget(node)
            self._clients.clear()
            self.place.remove("")
            self.store._invalidate()
            return
        if prefix in nodes or any(n.startswith(prefix + "/") for n in nodes):
            for node in sorted(nodes, reverse=True):
                if node == prefix or node.startswith(prefix + "/"):
                    self._delete_node(node)
            if not self.single:
                self.place.remove(prefix)
            self.store._invalidate()
            return
        # A chunk prefix ("arr/c"): every chunk becomes the fill value.
        parsed = self.store._parse_key(prefix + "/0")
        if parsed is not None and parsed[1] == "chunk":
            node = parsed[0]
            arr = self.array(node)
            if arr is not None and math.prod(arr.shape):
                chunk = self._fill_chunk(arr)
                self._set_chunks(node, arr, {n: chunk for n in range(arr.schunk.nchunks)})


_MISSING = object()


def _refuse_variable_width(node: str, dtype: np.dtype) -> None:
    """Zarr's variable-length strings (``"string"``, what xarray writes NumPy's StringDType
    and object strings as) have no fixed width to create a frame with before the chunks
    come: refused, naming the array, before anything is written."""
    from ...errors import UnsupportedError

    exc = UnsupportedError("dtype", str(dtype))
    exc.args = (
        f"unsupported dtype {dtype} for array {node or '/'!r}: Zarr's variable-length "
        "strings cannot be stored in a b2nd frame, which holds fixed-size items. Write the "
        "Dataset with b2store.to_b2nd, which stores them as fixed-width strings (missing "
        "values as '', as xarray's writers do), or cast the variable to fixed-width strings "
        "first (object strings: ds[name].fillna('').astype(str); StringDType: "
        "ds[name].astype('U<width>'))",
    )
    raise exc


def _run(coroutine):
    """Run one of a client pipeline's coroutines from synchronous code: the store's worker
    threads, the fused pipeline's, or a ``*_sync`` call made on a thread whose event loop is
    running (where ``asyncio.run`` refuses: then in a thread of its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _same(a, b) -> bool:
    """Equal values, NaN equal to NaN (a NaN fill value is not a change)."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return type(a) is type(b) and a == b
