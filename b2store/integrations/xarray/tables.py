"""A python-blosc2 CTable as an xarray Dataset: one row dimension, a lazy variable per column.

The variables hold the table's live rows only (``/_valid_rows`` applied): a read of rows
``[a, b)`` finds their stored positions from the mask chunks they lie in and reads the
columns' span of them (:class:`b2store.table.Table`), so a dask read of a slice of rows reads
only the chunks it needs. Nulls are missing values as xarray decodes them: ``NaN`` in a float
column, ``NaT`` in a timestamp, and a nullable integer or bool column is float64 with ``NaN``
(what xarray makes of an integer with a ``_FillValue``); a nullable text column, and every
``utf8`` column, is an ``object`` array of ``str`` with ``None`` at its nulls.
"""

from __future__ import annotations

import numpy as np
from xarray import Dataset, Variable
from xarray.backends.common import BackendArray
from xarray.backends.file_manager import CachingFileManager
from xarray.core import indexing

from ...errors import UnsupportedError
from ...table.reader import Table
from ...table.schema import Column
from ...tree import open_tree

__all__ = ["ROW_DIM", "TableRecipe", "table_dataset"]

#: The one dimension of a table's variables.
ROW_DIM = "row"
#: The largest integer a float64 holds exactly: a nullable int64 beyond it cannot be served
#: as float64 with NaN without changing it.
_EXACT = 2**53


class TableRecipe:
    """Opens the table at ``node`` of the tree at ``path``, in whichever process reads (a
    path or URL and options: it pickles)."""

    def __init__(self, path: str, node: str, storage_options=None, limits=None):
        self.args = (path, node, dict(storage_options) if storage_options else None, limits)

    def __call__(self, mode: str = "r") -> Table:
        if mode != "r":
            raise ValueError(f"the b2nd engine reads only (mode='r'), not mode={mode!r}")
        path, node, options, limits = self.args
        return Table(open_tree(path, storage_options=options, limits=limits), node, limits)

    def __reduce__(self):
        return (TableRecipe, self.args)


def xarray_dtype(col: Column) -> np.dtype:
    """The type of a column's variable."""
    if col.dtype == object or (col.nulls != "none" and col.kind in ("string", "bytes")):
        return np.dtype(object)
    if col.nulls != "none" and col.dtype.kind in "iub":
        return np.dtype("float64")
    return col.dtype


def xarray_values(col: Column, values: np.ndarray, nulls: np.ndarray) -> np.ndarray:
    """A column's values (from :meth:`Table.read_raw`) with its nulls missing."""
    dtype = xarray_dtype(col)
    if col.nulls == "none" or not nulls.any():
        return values.astype(dtype, copy=False)
    if dtype.kind in "iu" or values.dtype.kind in "iu":
        kept = values[~nulls]
        if kept.size and (int(kept.max()) > _EXACT or int(kept.min()) < -_EXACT):
            raise UnsupportedError(
                f"CTable column {col.name!r} as float64 with NaN at its nulls (a value beyond "
                "2**53 would change; read it with b2store.open_table)",
                str(values.dtype),
            )
    out = values.astype(dtype)
    if dtype.kind == "O":
        out[nulls] = None
    elif dtype.kind == "M":
        out[nulls] = np.datetime64("NaT", np.datetime_data(dtype)[0])
    else:
        out[nulls] = np.nan
    return out


class TableBackendArray(BackendArray):
    """One column of a table for xarray: its live rows, read a slice at a time."""

    def __init__(self, manager: CachingFileManager, col: Column, nrows: int, lock=None):
        self.manager, self.col, self.lock = manager, col, lock
        self.shape = (nrows,)
        self.dtype = xarray_dtype(col)

    def __getitem__(self, key: indexing.ExplicitIndexer):
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.BASIC, self._getitem
        )

    def _getitem(self, key: tuple) -> np.ndarray:
        (k,) = key
        if isinstance(k, slice):
            start, stop, step = k.indices(self.shape[0])
            lo, hi = (start, stop) if step > 0 else (stop + 1, start + 1)
            out = self._rows(lo, hi)
            return out[::step] if step > 0 else out[::-1][::-step]
        i = int(k) + (self.shape[0] if int(k) < 0 else 0)
        if not 0 <= i < self.shape[0]:
            raise IndexError(f"row {k} out of {self.shape[0]}")
        return self._rows(i, i + 1)[0]

    def _rows(self, start: int, stop: int) -> np.ndarray:
        if self.lock is None:
            with self.manager.acquire_context() as table:
                return self._read(table, start, stop)
        with self.lock, self.manager.acquire_context(needs_lock=False) as table:
            return self._read(table, start, stop)

    def _read(self, table: Table, start: int, stop: int) -> np.ndarray:
        values, nulls = table.read_raw(self.col.name, table.positions(start, stop))
        return xarray_values(self.col, values, nulls)


class _Close:
    def __init__(self, manager: CachingFileManager):
        self.manager = manager

    def __call__(self) -> None:
        self.manager.close()


def table_dataset(table: Table, recipe: TableRecipe, lock=None, drop_variables=None) -> Dataset:
    """The Dataset of an opened ``table`` (closed here: the variables reopen it through
    ``recipe``)."""
    drop = {drop_variables} if isinstance(drop_variables, str) else set(drop_variables or ())
    chunk = table.chunk_rows
    nrows = len(table)
    columns = [c for c in table.schema.columns if c.name not in drop]
    for col in columns:
        if col.kind in ("object", "list"):
            table.close()
            raise UnsupportedError(
                f"CTable column {col.name!r} of Python objects or lists as an xarray variable "
                f"(read it with b2store.open_table({recipe.args[0]!r}).read({col.name!r}), or "
                "drop it with drop_variables); kind",
                col.kind,
            )
    attrs = dict(table.attrs)
    table.close()
    manager = CachingFileManager(recipe, mode="r")
    variables = {}
    for col in columns:
        data = indexing.LazilyIndexedArray(TableBackendArray(manager, col, nrows, lock))
        encoding = {"preferred_chunks": {ROW_DIM: min(chunk, max(nrows, 1))}}
        zone = {"timezone": col.timezone} if col.timezone else {}
        variables[col.name] = Variable((ROW_DIM,), data, zone, encoding)
    ds = Dataset(variables, attrs=attrs)
    ds.set_close(_Close(manager))
    return ds
