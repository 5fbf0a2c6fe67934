"""Lazy b2nd variables for xarray: openers that pickle as recipes, and the ``BackendArray``.

An opener reopens its frame in whichever process reads it (a path or URL and options, never a
descriptor); the one array opened to read a variable's metadata is kept, within a bound, for
its first read. :class:`B2ndBackendArray` reads through an xarray ``CachingFileManager`` over
such an opener, orthogonally (:attr:`b2store.B2ndArray.oindex`).
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np
from xarray import Variable
from xarray.backends.common import BackendArray
from xarray.backends.file_manager import CachingFileManager
from xarray.core import indexing

from ...chunk.params import ChunkParams
from ...errors import FormatError
from ...limits import Limits
from ...tree import open_frame
from .conventions import dims_of, restore_attrs, restore_stringdtype, xarray_meta

__all__ = [
    "B2ndBackendArray",
    "Closer",
    "FrameRecipe",
    "MAX_PRIMED",
    "RefRecipe",
    "compressor_of",
    "lazy_variable",
]


# --- opening frames, by a recipe that pickles ------------------------------------------------


#: At most this many frames stay open waiting for their first read (opening thousands of
#: files with ``open_mfdataset`` must not hold thousands of descriptors); older ones close
#: and reopen when read, as without priming.
MAX_PRIMED = 64
_primed_order: OrderedDict[int, _Primed] = OrderedDict()
_primed_lock = threading.Lock()


class _Primed:
    """An opener that hands out, once, the array it was primed with (the one opening the
    Dataset read the metadata from), so the first read does not open the frame again."""

    _primed = None

    def prime(self, arr) -> None:
        with _primed_lock:
            self._primed = arr
            _primed_order[id(self)] = self
            evicted = []
            while len(_primed_order) > MAX_PRIMED:
                evicted.append(_primed_order.popitem(last=False)[1])
        for opener in evicted:
            opener.drop_primed()

    def take_primed(self):
        with _primed_lock:
            arr, self._primed = self._primed, None
            _primed_order.pop(id(self), None)
        return arr

    def drop_primed(self) -> None:
        arr = self.take_primed()
        if arr is not None:
            getattr(arr, "schunk", arr).close()


class FrameRecipe(_Primed):
    """How to open one b2nd frame again, in any process: a path or URL, the byte offset of
    the frame in it (a ``.b2z`` member), fsspec options and the :class:`b2store.Limits` it
    is read with. Calling it opens the array."""

    __slots__ = ("urlpath", "offset", "storage_options", "limits", "_key", "_primed")

    def __init__(
        self,
        urlpath,
        offset: int = 0,
        storage_options: Mapping | None = None,
        limits: Limits | None = None,
    ):
        self.urlpath = os.fspath(urlpath)
        self.offset = int(offset)
        self.storage_options = dict(storage_options) if storage_options else None
        self.limits = limits
        self._primed = None
        # CachingFileManager needs a hashable opener; options can hold dicts and lists.
        options = json.dumps(self.storage_options, sort_keys=True, default=repr)
        self._key = (self.urlpath, self.offset, options, limits)

    def __call__(self):
        arr = self.take_primed()
        if arr is not None:
            return arr
        return open_frame(
            self.urlpath,
            offset=self.offset,
            storage_options=self.storage_options,
            limits=self.limits,
        )

    def __reduce__(self):
        return FrameRecipe, (self.urlpath, self.offset, self.storage_options, self.limits)

    def __eq__(self, other) -> bool:
        return isinstance(other, FrameRecipe) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        at = f", offset={self.offset}" if self.offset else ""
        return f"FrameRecipe({self.urlpath!r}{at})"


class RefRecipe(_Primed):
    """A tree's array reference as a hashable opener (the reference itself pickles)."""

    def __init__(self, ref, key: tuple):
        self.ref, self._key = ref, key

    def __call__(self):
        arr = self.take_primed()
        return arr if arr is not None else self.ref.open()

    def __reduce__(self):
        return RefRecipe, (self.ref, self._key)

    def __eq__(self, other) -> bool:
        return isinstance(other, RefRecipe) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)


def _open_closable(opener, mode: str = "r"):
    # xarray's file manager always passes mode once unpickled; b2store reads only.
    if mode != "r":
        raise ValueError(f"the b2nd engine reads only (mode='r'), not mode={mode!r}")
    arr = opener()
    if not hasattr(arr, "close"):  # b2store releases without B2ndArray.close()
        arr.close = arr.schunk.close
    return arr


# --- the lazy array ---------------------------------------------------------------------------


class B2ndBackendArray(BackendArray):
    """A b2nd variable for xarray: holds a file manager (which pickles as the recipe to
    reopen) and reads, under ``lock`` when one is given, only the blocks a key touches."""

    def __init__(self, manager: CachingFileManager, shape, dtype, lock=None):
        self.manager = manager
        self.shape = tuple(shape)
        # A structured dtype with fields of the other byte order is served in this machine's
        # (as the Zarr store serves it): xarray's decoding casts any non-native dtype to its
        # kind and size, which for a structured one is raw void ("V12"), and then fails.
        self.stored_dtype = np.dtype(dtype)
        native = self.stored_dtype.fields is None or self.stored_dtype.isnative
        self.dtype = self.stored_dtype if native else self.stored_dtype.newbyteorder("=")
        self.lock = lock

    def __getitem__(self, key: indexing.ExplicitIndexer):
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._getitem
        )

    async def async_getitem(self, key: indexing.ExplicitIndexer):
        import asyncio

        return await asyncio.to_thread(self.__getitem__, key)

    def _getitem(self, key: tuple) -> np.ndarray:
        out = self._read(key)
        return out if out.dtype == self.dtype else out.astype(self.dtype)

    def _read(self, key: tuple) -> np.ndarray:
        """The stored values at the outer ``key`` (integers, slices, 1-d integer arrays), as
        an array (a 0-d one for integers only)."""
        if self.lock is None:
            with self.manager.acquire_context() as arr:
                return np.asarray(arr.oindex[key])
        with self.lock, self.manager.acquire_context(needs_lock=False) as arr:
            return np.asarray(arr.oindex[key])


def lazy_variable(opener, arr, lock, dims=None) -> tuple[Variable, _Handle]:
    """A Variable over ``arr`` (just opened, for its metadata) that reopens through
    ``opener`` when read, and the file manager that owns the handle."""
    vlmeta = dict(arr.vlmeta)
    info = xarray_meta(vlmeta)
    dims = dims if dims is not None else dims_of(vlmeta, arr.shape)
    manager = CachingFileManager(_open_closable, opener, mode="r")
    data = indexing.LazilyIndexedArray(B2ndBackendArray(manager, arr.shape, arr.dtype, lock))
    encoding = {
        "chunks": tuple(arr.chunks),
        "preferred_chunks": dict(zip(dims, arr.chunks)),
        "blocks": tuple(arr.blocks),
        **_compression(arr),
        "contiguous": arr.schunk.contiguous,
    }
    data = restore_stringdtype(info, data, encoding)
    variable = Variable(
        dims, data, restore_attrs(vlmeta, info.get("attr_types"), info.get("long_attrs")), encoding
    )
    opener.prime(arr)  # the first read uses this handle instead of opening the frame again
    return variable, _Handle(manager, opener)


class _Handle:
    """A variable's file manager and its opener (which may still hold the primed array)."""

    def __init__(self, manager: CachingFileManager, opener: _Primed):
        self.manager, self.opener = manager, opener

    def close(self) -> None:
        self.opener.drop_primed()
        self.manager.close()


class Closer:
    """Closes a Dataset's variables' handles (``Dataset.set_close``); pickles with them (as
    recipes)."""

    def __init__(self, handles):
        self.handles = list(handles)

    def __call__(self) -> None:
        for handle in self.handles:
            handle.close()


def compressor_of(params: ChunkParams) -> dict:
    """A frame's compression as the ``compressors`` entry xarray's Zarr writer passes on: the
    ``blosc2`` codec in both Zarr forms in one dict, the v3 one (``name``, ``configuration``:
    b2store's ``blosc2`` codec) and the v2 one (``id`` and numcodecs' keys: b2store's numcodecs
    ``blosc2``), so that ``to_zarr`` keeps the codec, level and filters whichever format it
    writes. The item size and the block size follow the Zarr array (b2nd blocks are n-d)."""
    params = params.replace(typesize=None, blocksize=0).compact()
    return {**params.to_numcodecs(), "name": "blosc2", "configuration": params.to_zarr()}


def _compression(arr) -> dict:
    """The encoding keys of the frame's compression: what its header gives new chunks. A
    header whose values no chunk can be written with (python-blosc2 reads such a frame, and
    so does this engine: each stored chunk says its own) gives none, so that writing the
    Dataset again takes the defaults rather than failing on them."""
    try:
        params = arr.schunk.params
    except FormatError:
        return {}
    return {
        "codec": getattr(params.codec, "name", str(params.codec)).lower(),
        "clevel": params.clevel,
        "compressors": (compressor_of(params),),
    }
