"""b2store's Zarr codec pipeline (:class:`B2storeCodecPipeline`): Blosc-compressed arrays read
with their chunks decoded and placed in zarr's output by b2store's kernels, without the GIL.

Turned on for the whole process with one line (``"b2store.integrations.zarr.pipeline."``
and the class name, as one string)::

    zarr.config.set({"codec_pipeline.path": PIPELINE_PATH})

It serves the arrays whose chunks are one Blosc chunk of plain C-order items: Zarr v3 with
``bytes`` (little-endian; a ``transpose`` of identity order before it) and one of zarr's
``blosc``, ``numcodecs.blosc``, b2store's ``blosc2`` or ``numcodecs.blosc2``; Zarr v2 with
the ``blosc`` or ``blosc2`` compressor, no filters and C order; and ``B2ndStore`` arrays
(their ``b2nd`` codec), whose basic reads are one box read by b2store's own engine
(:mod:`.b2nd_reads`). Every other array (other codecs, sharding, checksums, big-endian
items, F order, object items) gets zarr's own ``BatchedCodecPipeline`` itself, built as
zarr builds it: the setting is process-wide and never changes what an array it does not
serve reads or writes. Writes of the Blosc arrays are merged, encoded by the array's own
codecs and stored in threads over the chunks (:mod:`.pipeline_writes`: zarr's bytes);
writes of ``B2ndStore`` arrays, and reads into an output that is not a C-contiguous NumPy
array, go to that same pipeline of zarr's.

A read fetches its chunks' bytes (a ``LocalStore``'s files read straight from the disk,
other stores through their byte getters, concurrently) and hands them to
:mod:`.pipeline_reads`, whose kernels decode and place them in threads, a bad chunk raising
the :class:`~b2store.FormatError` b2store's decoder raises; missing chunks get the fill value.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from zarr.abc.codec import CodecPipeline
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.core.config import config
from zarr.core.metadata import ArrayV2Metadata, ArrayV3Metadata
from zarr.registry import register_pipeline

from .b2nd_reads import box_of, read_box
from .pipeline_reads import PRESENT, Reader, read_file, zarr_threads
from .pipeline_writes import Writer, chunk_encoder
from .store import B2ndStore

__all__ = ["PIPELINE_PATH", "B2storeCodecPipeline"]

#: The ``codec_pipeline.path`` that turns the pipeline on.
PIPELINE_PATH = "b2store.integrations.zarr.pipeline.B2storeCodecPipeline"

# The bytes-to-bytes codecs whose chunks are one Blosc1 or Blosc2 chunk (v3 names, v2 ids).
_BLOSC_V3 = frozenset({"blosc", "numcodecs.blosc", "blosc2", "numcodecs.blosc2"})
_BLOSC_V2 = frozenset({"blosc", "blosc2"})
# Items whose bytes are the value, in native order once decoded (no objects, no strings).
_PLAIN_KINDS = frozenset("biufcmM")


def _name(codec: Any) -> str | None:
    try:
        name = codec.to_dict().get("name")
    except Exception:  # a codec that cannot describe itself is not one we serve
        return None
    return name if isinstance(name, str) else None


def _plain_dtype(dtype: Any) -> np.dtype | None:
    try:
        dt = np.dtype(dtype.to_native_dtype() if hasattr(dtype, "to_native_dtype") else dtype)
    except Exception:
        return None
    if dt.kind not in _PLAIN_KINDS or dt.hasobject or dt.itemsize == 0 or not dt.isnative:
        return None
    return dt


def _little(dt: np.dtype) -> bool:
    return dt.itemsize == 1 or sys.byteorder == "little"


def served_dtype(metadata: Any) -> np.dtype | None:
    """The items' dtype if this pipeline serves the array ``metadata`` describes, else None."""
    if isinstance(metadata, ArrayV3Metadata):
        dt = _plain_dtype(metadata.data_type)
        codecs = list(metadata.codecs)
        if dt is None or len(codecs) < 2 or _name(codecs[-1]) not in _BLOSC_V3:
            return None
        for codec in codecs[:-1]:
            name = _name(codec)
            if name == "transpose":
                order = tuple(getattr(codec, "order", ()))
                if order != tuple(range(len(metadata.shape))):
                    return None
            elif name == "bytes":
                endian = getattr(codec, "endian", None)
                endian = getattr(endian, "value", endian)
                if endian not in (None, "little") or not _little(dt):
                    return None
            else:
                return None
        if _name(codecs[-2]) != "bytes":
            return None
        return dt
    if isinstance(metadata, ArrayV2Metadata):
        dt = _plain_dtype(metadata.dtype)
        compressor = metadata.compressor
        codec_id = getattr(compressor, "codec_id", None)
        if dt is None or metadata.filters or metadata.order != "C" or codec_id not in _BLOSC_V2:
            return None
        return dt
    return None


def b2nd_dtype(metadata: Any, store: Any) -> np.dtype | None:
    """The items' dtype of a ``B2ndStore`` array (its one codec ``b2nd``), else None."""
    if not isinstance(store, B2ndStore) or not isinstance(metadata, ArrayV3Metadata):
        return None
    if [_name(c) for c in metadata.codecs] != ["b2nd"]:
        return None
    try:
        dt = np.dtype(metadata.data_type.to_native_dtype())
    except Exception:
        return None
    return None if dt.hasobject else dt


def zarr_default_pipeline(metadata: Any) -> CodecPipeline:
    """zarr's own pipeline for ``metadata``, built as zarr builds it without a store."""
    from zarr.core.array import create_codec_pipeline

    return create_codec_pipeline(metadata=metadata)


def _local_root(store: Any) -> str | None:
    """The directory of a zarr ``LocalStore`` (whose keys are files under it), else None."""
    try:
        from zarr.storage import LocalStore
    except ImportError:  # pragma: no cover - every zarr 3 has it
        return None
    if type(store) is LocalStore:
        return str(store.root)
    return None


class B2storeCodecPipeline(CodecPipeline):
    """A Zarr codec pipeline decoding Blosc-compressed chunks with b2store's kernels.

    Made by zarr through :meth:`from_array_metadata_and_store` for each array; for an array
    it does not serve, that returns zarr's own ``BatchedCodecPipeline``. Everything but
    reads and writes (and the reads and writes it leaves) is handed to zarr's pipeline
    (``inner``) unchanged.
    """

    def __init__(self, inner: CodecPipeline, dtype: np.dtype, store: Any = None) -> None:
        self.inner = inner
        self.dtype = dtype
        self.store = store
        self._root = _local_root(store)
        self._b2nd = isinstance(store, B2ndStore)
        self._reads = Reader(dtype, self._root)
        encode = None if self._b2nd else chunk_encoder(list(inner), dtype)
        sync = all(hasattr(store, m) for m in ("set_sync", "delete_sync"))
        local = store if self._root is not None and sync else None
        self._writes = None if encode is None else Writer(encode, dtype, local, self._chunk_file)

    def _chunk_file(self, key: str) -> bytes | None:
        """A LocalStore chunk's bytes (None: no such file), as the reads read them."""
        return read_file(os.path.join(self._root, key))

    # -- how zarr builds a pipeline --

    @classmethod
    def from_array_metadata_and_store(cls, array_metadata: Any, store: Any) -> CodecPipeline:
        inner = zarr_default_pipeline(array_metadata)
        dtype = served_dtype(array_metadata)
        if dtype is None:
            dtype = b2nd_dtype(array_metadata, store)
        if dtype is None:
            return inner
        return cls(inner, dtype, store)

    @classmethod
    def from_codecs(cls, codecs: Iterable[Any], **kwargs: Any) -> CodecPipeline:
        # zarr's default construction (no store) and sharding's inner chunks: zarr's own.
        return BatchedCodecPipeline.from_codecs(codecs, **kwargs)

    def evolve_from_array_spec(self, array_spec: Any) -> B2storeCodecPipeline:
        return type(self)(self.inner.evolve_from_array_spec(array_spec), self.dtype, self.store)

    def __eq__(self, other: object) -> bool:
        # zarr compares arrays field by field, their pipelines among them (a pickled copy
        # must equal its original).
        if type(other) is not type(self):
            return NotImplemented
        return (self.inner, self.dtype, self.store) == (other.inner, other.dtype, other.store)

    __hash__ = None  # type: ignore[assignment]  # (as zarr's own pipeline, a dataclass)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(inner={self.inner!r}, dtype={self.dtype!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"inner": self.inner, "dtype": self.dtype, "store": self.store}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["inner"], state["dtype"], state["store"])

    # -- zarr's pipeline, handed on --

    @property
    def supports_partial_decode(self) -> bool:
        return self.inner.supports_partial_decode

    @property
    def supports_partial_encode(self) -> bool:
        return self.inner.supports_partial_encode

    def __iter__(self) -> Iterator[Any]:
        return iter(self.inner)

    def validate(self, **kwargs: Any) -> None:
        self.inner.validate(**kwargs)

    def compute_encoded_size(self, byte_length: int, array_spec: Any) -> int:
        return self.inner.compute_encoded_size(byte_length, array_spec)

    async def decode(self, chunk_bytes_and_specs: Iterable[Any]) -> Iterable[Any]:
        return await self.inner.decode(chunk_bytes_and_specs)

    async def encode(self, chunk_arrays_and_specs: Iterable[Any]) -> Iterable[Any]:
        return await self.inner.encode(chunk_arrays_and_specs)

    async def write(self, batch_info: Iterable[Any], value: Any, drop_axes: tuple = ()) -> Any:
        try:
            arr = value.as_ndarray_like()
        except Exception:
            arr = None
        if self._writes is None or not isinstance(arr, np.ndarray) or arr.dtype != self.dtype:
            return await self.inner.write(batch_info, value, drop_axes)
        return await self._writes.write(list(batch_info), arr, drop_axes)

    # -- reading --

    async def read(self, batch_info: Iterable[Any], out: Any, drop_axes: tuple = ()) -> Any:
        batch = list(batch_info)
        try:
            arr = out.as_ndarray_like()
        except Exception:
            arr = None
        if (
            not isinstance(arr, np.ndarray)
            or arr.dtype != self.dtype
            or not arr.flags.c_contiguous
            or not arr.flags.writeable
        ):
            return await self.inner.read(batch, out, drop_axes)
        if self._b2nd:
            return await self._read_b2nd(batch, arr, out, drop_axes)
        # A small read runs here, in zarr's event loop, as zarr's own pipeline runs its Python
        # per chunk: its decode is shorter than a hop to a worker thread and back (0.12 ms a
        # read, a fifth of xr.open_zarr(...).load()'s time in 512 kB chunks, one per dask task).
        inline = self._reads.small(batch)
        if self._root is not None:
            if inline:
                return self._reads.read_local(batch, arr, drop_axes)
            return await asyncio.to_thread(self._reads.read_local, batch, arr, drop_axes)
        chunks = await self._fetch(batch)
        if inline:
            return self._reads.read_fetched(batch, chunks, arr, drop_axes)
        return await asyncio.to_thread(self._reads.read_fetched, batch, chunks, arr, drop_axes)

    async def _read_b2nd(self, batch: list, arr: np.ndarray, out: Any, drop_axes: tuple):
        """A ``B2ndStore`` array's read: one box read by b2store's engine into ``arr``
        (:mod:`.b2nd_reads`), or zarr's pipeline where the batch is not one box or zarr must
        be told which chunks are missing."""
        store = self.store
        box = None
        if batch and getattr(batch[0][1].config, "read_missing_chunks", True):
            box = box_of(store, batch, arr)
        if box is None or not await asyncio.to_thread(read_box, store, *box, arr, zarr_threads()):
            return await self.inner.read(batch, out, drop_axes)
        return tuple({"status": PRESENT} for _ in batch)

    async def _fetch(self, batch: list) -> list[Any]:
        """Every chunk's bytes through its byte getter, up to zarr's concurrency at once."""
        limit = asyncio.Semaphore(max(1, int(config.get("async.concurrency", 10) or 10)))

        async def get(getter: Any, spec: Any) -> Any:
            async with limit:
                buf = await getter.get(prototype=spec.prototype)
            return None if buf is None else buf.as_numpy_array()

        return list(await asyncio.gather(*(get(g, spec) for g, spec, *_ in batch)))


register_pipeline(B2storeCodecPipeline)
