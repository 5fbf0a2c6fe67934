"""python-blosc2's ListArray (metalayer ``listarray``): one list (or None) per row, stored in a
BatchArray (``backend="batch"``: rows in batches of ``batch_rows``) or an ObjectArray
(``backend="vl"``: a row per chunk)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import FormatError, UnsupportedError
from ..frame.schunk import SChunk
from .base import Container, normalize_index
from .batch_array import BatchArray
from .object_array import ObjectArray
from .payloads import check_meta

__all__ = ["ListArray"]

META = "listarray"


class ListArray(Container):
    """A python-blosc2 ``ListArray``: ``len()`` rows, ``arr[i]`` row ``i`` (a list of its items,
    or None for a null row), ``arr[i:j]``, a list of indices or a boolean mask a list of rows.
    :attr:`spec` is the stored item description (python-blosc2's ``listarray`` metalayer:
    ``item``, ``nullable``, ``batch_rows``...). A read decodes only the batches it needs.

    Rows written by python-blosc2 but not yet flushed (still pending in its process) are not in
    the file and so not here."""

    kind = "ListArray"

    def __init__(self, schunk: SChunk):
        super().__init__(schunk)
        meta = schunk.meta[META]
        check_meta(
            meta,
            META,
            {"kind": ("list",), "backend": ("batch", "vl"), "serializer": ("msgpack", "arrow")},
        )
        self.spec: dict = meta
        backend = meta["backend"]
        if backend == "vl" and meta["serializer"] != "msgpack":
            raise UnsupportedError("ListArray backend 'vl' with serializer", meta["serializer"])
        needed = "batcharray" if backend == "batch" else "vlarray"
        if needed not in schunk.header.metalayers:
            found = ", ".join(schunk.header.metalayers) or "none"
            raise FormatError(f"metalayer {needed!r}", f"present for backend={backend!r}", found)
        self._rows: BatchArray | ObjectArray
        if backend == "batch":
            self._rows = BatchArray(schunk)
        else:
            self._rows = ObjectArray(schunk)

    def __len__(self) -> int:
        if isinstance(self._rows, BatchArray):
            return len(self._rows.items)
        return len(self._rows)

    def __getitem__(self, index) -> Any:
        n = len(self)
        if isinstance(index, slice):
            return [self._row(i) for i in range(*index.indices(n))]
        if isinstance(index, np.ndarray) and index.dtype == np.bool_:
            if index.shape != (n,):
                raise IndexError(f"boolean mask of shape {index.shape} for {n} rows")
            return [self._row(int(i)) for i in np.flatnonzero(index)]
        if isinstance(index, list | tuple | np.ndarray):
            return [self._row(normalize_index(i, n, self.kind)) for i in np.asarray(index).tolist()]
        return self._row(normalize_index(index, n, self.kind))

    def _row(self, i: int) -> list | None:
        rows = self._rows
        row = rows.items[i] if isinstance(rows, BatchArray) else rows[i]
        if row is not None and not isinstance(row, list):
            where = f"{self.kind} row {i}"
            raise FormatError(where, "a list of items or None", type(row).__name__)
        if row is None and not self.spec.get("nullable", False):
            raise FormatError(f"{self.kind} row {i}", "a list (the rows are not nullable)", None)
        return row
