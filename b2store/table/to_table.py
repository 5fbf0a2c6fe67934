"""``b2store.to_table``: a DataFrame or a 1-d Dataset written as a python-blosc2 CTable, or
its rows appended to one (python-blosc2's or b2store's).

An append keeps the table's schema (each column's kind, nulls and settings) and attributes,
and puts the new rows after its live ones: the table is rewritten whole beside its path and
put in place in one step (its deleted rows and python-blosc2's indexes, which the new rows
would make stale, are left out), so a reader sees it before or after, never between.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from ..errors import FormatError, UnsupportedError
from ..frame.lock import WriteLock
from .reader import open_table
from .writer import columns_of, entry_for, write_table

__all__ = ["to_table"]


def to_table(data, path, *, mode: str = "w", attrs: dict | None = None) -> None:
    """Write ``data`` as a python-blosc2 CTable at the local ``path`` (``.b2z`` or ``.b2d``).

    Parameters
    ----------
    data : pandas.DataFrame, xarray.Dataset or mapping
        The columns: a DataFrame's (its index left out), a Dataset's data variables (all 1-d
        along one dimension; its coordinates left out), or a mapping of names to 1-d arrays.
    path : str or path
        Where the table goes.
    mode : {"w", "a"}
        ``"w"`` writes a new table (replacing what is at ``path``); ``"a"`` appends the rows
        to the table there, whose columns ``data`` must have (by name, in any order).
    attrs : dict, optional
        The table's attributes (python-blosc2's ``table.vlmeta``); a Dataset's own by default.
        Appending keeps the table's, updated with these.

    Examples
    --------
    >>> import b2store, pandas as pd, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.b2z")
    >>> b2store.to_table(pd.DataFrame({"a": [1, 2], "s": ["x", None]}), path)
    >>> b2store.to_table(pd.DataFrame({"a": [3], "s": ["z"]}), path, mode="a")
    >>> with b2store.open_table(path) as t:
    ...     len(t), t.read("a").tolist(), t.read("s").tolist()
    (3, [1, 2, 3], ['x', None, 'z'])
    """
    if mode not in ("w", "a"):
        raise ValueError(f"mode must be 'w' (write) or 'a' (append), not {mode!r}")
    if "://" in os.fspath(path):
        raise UnsupportedError("CTable written to a URL (write it locally)", os.fspath(path))
    if hasattr(data, "data_vars"):  # an xarray Dataset
        attrs = dict(data.attrs) if attrs is None else attrs
        data = _dataset_columns(data)
    new = columns_of(data)
    with _writing(path):
        if mode == "w":
            columns = [(entry_for(n, v, u is not None), v, u) for n, (v, u) in new.items()]
            write_table(path, columns, attrs)
        else:
            _append(path, new, attrs or {})


@contextlib.contextmanager
def _writing(path):
    """b2store's writers of one table, one at a time: an append reads the table and puts it
    back whole, and two at once would lose one's rows. (python-blosc2's writers do not take
    this lock.)"""
    path = Path(os.fspath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = WriteLock(path.parent / f".{path.name}.b2store-table-lock")
    try:
        with lock.hold():
            yield
    finally:
        lock.close()


def _dataset_columns(ds) -> dict:
    dims = {v.dims for v in ds.data_vars.values()}
    if len(dims) > 1 or any(len(d) != 1 for d in dims):
        raise ValueError(
            "a CTable is written from a Dataset whose data variables are all 1-d along one "
            f"dimension, not {sorted(dims)}"
        )
    return {str(name): var.values for name, var in ds.data_vars.items()}


def _append(path, new: dict, attrs: dict) -> None:
    with open_table(os.fspath(path)) as table:
        names = table.columns
        if sorted(new) != sorted(names):
            raise ValueError(
                f"the rows appended have the columns {sorted(new)}; the table's are {names}"
            )
        for col in table.schema.columns:
            if col.kind in ("vlstring", "vlbytes", "object", "list", "dictionary"):
                # (b2store writes no BatchArray yet)
                raise UnsupportedError(f"append to a CTable column {col.name!r} of kind", col.kind)
        old_attrs = dict(table.attrs)
        entries = {e["name"]: e for e in table.schema.entries}
        pos = table.positions(0, len(table))
        columns = []
        for col in table.schema.columns:
            values, nulls = table.read_raw(col.name, pos)
            add, add_nulls = new[col.name]
            add = _as_column(col, add)
            both = np.concatenate([values, add]) if col.kind != "utf8" else _join(values, add)
            nulls_both = np.concatenate(
                [nulls, np.zeros(len(add), bool) if add_nulls is None else add_nulls]
            )
            if nulls_both.any() and col.nulls == "none":
                raise ValueError(f"column {col.name!r} of the table is not nullable")
            columns.append((entries[col.name], both, nulls_both))
    write_table(path, columns, {**old_attrs, **attrs})


def _as_column(col, values: np.ndarray) -> np.ndarray:
    """New values as the column's type, refused where they would change."""
    if col.kind == "utf8":
        if values.dtype != object:
            raise TypeError(f"column {col.name!r} holds text, not {values.dtype}")
        return values
    target = col.dtype
    try:
        cast = values.astype(target)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"column {col.name!r}: {values.dtype} as {target}: {exc}") from None
    same = cast == values
    if target.kind in "fc" and values.dtype.kind in "fc":
        same |= np.isnan(values)
    elif target.kind == "M" and values.dtype.kind == "M":
        same |= np.isnat(values)
    if not np.all(same):
        raise FormatError(f"column {col.name!r} rows appended", f"values of {target}", values.dtype)
    return cast


def _join(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    out = np.empty(len(old) + len(new), dtype=object)
    out[: len(old)], out[len(old) :] = old, new
    return out
