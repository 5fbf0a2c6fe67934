"""A python-blosc2 UTF8Array (a CTable's ``utf8`` column: offsets and UTF-8 bytes in two b2nd
arrays) as a lazy xarray string variable, read a run of rows at a time."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xarray import Variable
from xarray.backends.common import BackendArray
from xarray.core import indexing

from ...containers import STRING_DTYPE, UTF8Array

__all__ = ["UTF8BackendArray", "utf8_variable"]


class UTF8BackendArray(BackendArray):
    """The rows of a :class:`~b2store.containers.UTF8Array` for xarray: a key reads only the
    offsets and bytes of the rows from its first to its last (under ``lock`` if given)."""

    def __init__(self, opener: Callable[[], UTF8Array], nrows: int, lock=None):
        # ``opener`` (which pickles, for dask's processes) gives the array; it is opened on
        # the first read of each copy of this object.
        self.opener = opener
        self.shape = (nrows,)
        self.dtype = STRING_DTYPE
        self.lock = lock
        self._arr: UTF8Array | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_arr": None}

    def __getitem__(self, key: indexing.ExplicitIndexer):
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._getitem
        )

    def _getitem(self, key: tuple) -> np.ndarray:
        (k,) = key
        if self.lock is None:
            return self._read(k)
        with self.lock:
            return self._read(k)

    def _read(self, k) -> np.ndarray:
        if self._arr is None:
            self._arr = self.opener()
        if isinstance(k, slice):
            return self._arr[k]
        if isinstance(k, np.ndarray):
            return self._arr[k] if len(k) else np.empty(0, STRING_DTYPE)
        return np.asarray(self._arr[int(k)], dtype=STRING_DTYPE)  # 0-d, for an integer


def utf8_variable(
    opener: Callable[[], UTF8Array], arr: UTF8Array, dim: str, attrs=None, lock=None
) -> Variable:
    """A lazy string Variable of ``arr``'s rows along ``dim``, reopened through ``opener``
    (a picklable callable) when read; its preferred chunks are the offsets' chunks, so that
    ``chunks={}`` gives dask a task per chunk of offsets."""
    data = indexing.LazilyIndexedArray(UTF8BackendArray(opener, len(arr), lock))
    encoding = {
        "dtype": STRING_DTYPE,  # xarray's decoder keeps a StringDType only when told so
        "preferred_chunks": {dim: int(arr.offsets.chunks[0])},
    }
    return Variable((dim,), data, dict(attrs or {}), encoding)
