"""A python-blosc2 CTable read: :func:`open_table` and :class:`Table`, its columns' live rows
with their nulls, as NumPy arrays or a pandas DataFrame.

A CTable is a tree (``.b2d``, ``.b2z``, local or a URL): ``/_meta`` (the manifest:
:mod:`.schema`), ``/_valid_rows`` (the live rows: :mod:`.rows`), ``/_cols/<name>`` a b2nd
array per column, with ``<name>.notnull`` (True where a value is there) for a column keeping
its nulls in a mask and ``<name>.utf8`` (the bytes; the column's own array holds int64
offsets, Arrow's large_string layout) for a ``utf8`` column; ``/_vlmeta`` holds the table's
own attributes; ``/_indexes`` python-blosc2's summaries, which a read does not need.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

import numpy as np

from ..containers.batch_array import BatchArray
from ..containers.list_array import ListArray
from ..errors import FormatError, UnsupportedError
from ..limits import Limits
from ..nd.array import B2ndArray
from ..tree import Tree, open_frame, open_tree
from .rows import LiveRows
from .schema import Column, Schema, column_key, parse_manifest

__all__ = ["Table", "open_table", "is_table", "META_NAME"]

META_NAME = "_meta.b2f"
_VLMETA_NAME = "_vlmeta.b2f"


def is_table(tree: Tree, node: str = "/") -> bool:
    """Whether the group ``node`` of ``tree`` is a CTable (it has ``_valid_rows``)."""
    return _join(node, "_valid_rows") in tree.arrays()


def _join(node: str, name: str) -> str:
    return posixpath.join(node, name) if node != "/" else "/" + name


def _frame_beside(tree: Tree, node: str, name: str, limits):
    """The frame ``name`` (``_meta.b2f``, ``_vlmeta.b2f``) of the table at ``node``: a zip
    member, or a file beside its ``_valid_rows``; None when there is none."""
    ref = tree.objects().get(_join(node, name.removesuffix(".b2f")))
    if ref is not None:  # listed by the tree (a frame that is no b2nd array)
        return ref.open_object()
    rel = _join(node, name).lstrip("/")
    if tree.kind == "b2z":
        if rel not in tree.files():
            return None
        return open_frame(tree.read_file(rel), limits=limits)
    anchor = tree.arrays()[_join(node, "_valid_rows")]
    base = anchor.urlpath
    if not base.endswith("_valid_rows.b2nd") or anchor.offset or anchor.embedded:
        raise UnsupportedError("CTable /_valid_rows stored", "not as a file of the tree")
    url = base[: -len("_valid_rows.b2nd")] + name
    try:
        return open_frame(url, storage_options=tree.storage_options, limits=limits)
    except FileNotFoundError:
        return None


class Table:
    """A CTable, opened for reading (see :func:`open_table`).

    Attributes
    ----------
    schema : Schema
        Its columns in order (:class:`b2store.table.schema.Column`).
    attrs : dict
        The table's own attributes (python-blosc2's ``table.vlmeta``).
    """

    def __init__(self, tree: Tree, node: str = "/", limits: Limits | None = None):
        self.tree, self.node, self.path = tree, node, tree.urlpath
        if not is_table(tree, node):
            raise FormatError(f"{tree.urlpath} {node}", "a CTable (a /_valid_rows array)", "none")
        self._opened: list = []
        try:
            meta = _frame_beside(tree, node, META_NAME, limits)
            if meta is None:
                raise FormatError(f"CTable {node} _meta", "the manifest frame", "none")
            self._opened.append(meta)
            self.schema: Schema = parse_manifest(meta.vlmeta)
            self.attrs = self._attrs(limits)
            self._live = LiveRows(self._array("_valid_rows"))
            self._check_rows()
            self._columns = {c.name: self._open_column(c) for c in self.schema.columns}
        except BaseException:
            self.close()
            raise

    # --- opening ----------------------------------------------------------------------------

    def _attrs(self, limits) -> dict:
        frame = _frame_beside(self.tree, self.node, _VLMETA_NAME, limits)
        if frame is None:
            return {}
        self._opened.append(frame)
        return dict(getattr(frame, "schunk", frame).vlmeta)

    def _array(self, rel: str, required: bool = True) -> B2ndArray | None:
        ref = self.tree.arrays().get(_join(self.node, rel.lstrip("/")))
        if ref is None:
            if required:
                raise FormatError(f"CTable {_join(self.node, rel.lstrip('/'))}", "an array", "none")
            return None
        arr = ref.open()
        self._opened.append(arr)
        if arr.ndim != 1:
            raise FormatError(f"CTable {ref.path}", "a 1-d array", f"shape {arr.shape}")
        return arr

    def _batches(self, key: str, kind: type = BatchArray):
        """A variable-length column's BatchArray (``<key>.b2b``; a ListArray for a list
        column)."""
        ref = self.tree.objects().get(_join(self.node, key.lstrip("/")))
        if ref is None:
            raise FormatError(f"CTable {key}", "a BatchArray (.b2b)", "none")
        obj = ref.open_object()
        self._opened.append(obj)
        if not isinstance(obj, kind):
            raise FormatError(f"CTable {key}", f"a {kind.__name__}", type(obj).__name__)
        return obj

    def _decoded(self, col: Column, parts: dict, codes: np.ndarray):
        """A dictionary column's values for its ``codes``: the dictionary read whole once
        (it holds each distinct value once)."""
        if "table" not in parts:
            table = np.empty(len(parts["dict"].items), dtype=object)
            table[:] = list(parts["dict"].items)
            want = bytes if col.values == "vlbytes" else str
            for i, v in enumerate(table):
                if not isinstance(v, want):
                    raise FormatError(f"CTable {col.name}_dict item {i}", want.__name__, v)
            parts["table"] = table
        table = parts["table"]
        nulls = codes == col.null_value if col.nulls == "code" else np.zeros(len(codes), bool)
        bad = ~nulls & ((codes < 0) | (codes >= len(table)))
        if bad.any():
            found = int(codes[bad][0])
            raise FormatError(
                f"CTable column {col.name!r} code", f"one of its {len(table)} values", found
            )
        values = np.empty(len(codes), dtype=object)
        values[~nulls] = table[codes[~nulls]]
        return values, nulls

    def _check_rows(self) -> None:
        n = self.schema.n_rows
        if n is not None and n != len(self._live):
            raise FormatError(
                "CTable schema n_rows", f"{len(self._live)} (the rows /_valid_rows keeps)", n
            )

    def _open_column(self, col: Column) -> dict:
        key = column_key(col.name)
        if col.kind == "list":
            return {"items": self._batches(key, ListArray)}
        if col.stored is None and col.kind != "utf8":
            return {"items": self._batches(key)}
        if col.kind == "dictionary":
            codes = self._array(key)
            if not _same_type(codes.dtype, col.stored):
                raise FormatError(f"CTable {key} codes", str(col.stored), codes.dtype)
            return {"values": codes, "dict": self._batches(key + "_dict")}
        arr = self._array(key)
        parts = {"values": arr}
        if col.kind == "utf8":
            if arr.dtype != np.dtype("<i8"):
                raise FormatError(f"CTable {key} offsets", "int64", arr.dtype)
            parts["bytes"] = data = self._array(key + ".utf8")
            if data.dtype != np.dtype("u1"):
                raise FormatError(f"CTable {key}.utf8", "uint8", data.dtype)
        elif not _same_type(arr.dtype, col.stored):
            raise FormatError(f"CTable {key} dtype", f"{col.stored} (its schema's)", arr.dtype)
        mask = self._array(key + ".notnull", required=False)
        if mask is not None:
            if col.nulls != "mask":
                raise FormatError(f"CTable {key}.notnull", "no mask (no null_storage)", "one")
            if mask.dtype != np.dtype(bool):
                raise FormatError(f"CTable {key}.notnull", "bool", mask.dtype)
            parts["notnull"] = mask
        return parts

    # --- what it is ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._live)

    @property
    def columns(self) -> list[str]:
        """The column names, in the schema's order."""
        return [c.name for c in self.schema.columns]

    def column(self, name: str) -> Column:
        """What the schema says of column ``name``."""
        for c in self.schema.columns:
            if c.name == name:
                return c
        raise KeyError(f"no column {name!r} in the CTable at {self.path}; columns: {self.columns}")

    def __repr__(self) -> str:
        return f"Table({self.path!r}, rows={len(self)}, columns={self.columns})"

    def close(self) -> None:
        """Release the table's files."""
        for frame in self._opened:
            getattr(frame, "schunk", frame).close()
        self._opened = []

    def __enter__(self) -> Table:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- reading ------------------------------------------------------------------------------

    def __getitem__(self, key):
        """``table["a"]``: the whole column (:meth:`read`); ``table[10:20]``: those rows as a
        dict of columns."""
        if isinstance(key, str):
            return self.read(key)
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise IndexError("a CTable's rows are read by slices of step 1")
            start, stop, _ = key.indices(len(self))
            pos = self._live.positions(start, stop)
            return {c: self._read_at(self.column(c), pos) for c in self.columns}
        raise TypeError(f"a CTable is indexed by a column name or a slice, not {key!r}")

    @property
    def chunk_rows(self) -> int:
        """The stored rows of one ``/_valid_rows`` chunk: about the rows one read decodes."""
        return self._live.step

    def positions(self, start: int, stop: int) -> np.ndarray:
        """The stored positions of live rows ``start`` to ``stop``."""
        return self._live.positions(start, stop)

    def read(self, name: str, start: int = 0, stop: int | None = None):
        """Live rows ``start`` to ``stop`` of column ``name``: a NumPy array (timestamps as
        ``datetime64``, ``utf8`` strings as an object array of ``str``), a
        ``numpy.ma.MaskedArray`` masked at the nulls where the column is nullable."""
        stop = len(self) if stop is None else stop
        return self._read_at(self.column(name), self._live.positions(start, stop))

    def _read_at(self, col: Column, pos: np.ndarray):
        values, nulls = self.read_raw(col.name, pos)
        if col.nulls == "none":
            return values
        return np.ma.MaskedArray(values, mask=nulls)

    def read_raw(self, name: str, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Column ``name`` at stored positions ``pos``: its values (of :attr:`Column.dtype`;
        what nulls hold is unspecified) and where they are null."""
        col, parts = self.column(name), self._columns[name]
        if col.kind == "utf8":
            values = _utf8_at(col.name, parts["values"], parts["bytes"], pos)
        elif "items" in parts:
            values = _items_at(col, parts["items"], pos)
        elif col.kind == "dictionary":
            values, nulls = self._decoded(col, parts, _at(col.name, parts["values"], pos))
            return values, nulls
        else:
            values = _at(col.name, parts["values"], pos)
        if col.nulls == "mask":
            mask = parts.get("notnull")
            nulls = np.zeros(len(pos), bool) if mask is None else ~_at(f"{name}.notnull", mask, pos)
        elif col.nulls == "sentinel":
            nulls = col.sentinel_nulls(values)
        elif col.nulls == "native":
            nulls = np.array([v is None for v in values], dtype=bool)
        else:
            nulls = np.zeros(len(pos), bool)
        if col.kind == "timestamp":
            values = values.view(col.dtype)
        elif col.kind == "bool" and values.dtype != bool:
            values = values == 1
        return values, nulls

    def to_pandas(self, start: int = 0, stop: int | None = None):
        """Live rows ``start`` to ``stop`` as a pandas DataFrame: a column holding a null in
        them gets the dtype pandas has for it (``Int64``... for integers, ``boolean``,
        ``NaN``/``NaT`` for floats and times, ``None`` in an ``object`` column for text, bytes
        and complex), as python-blosc2's ``CTable.to_pandas`` gives them."""
        import pandas as pd

        stop = len(self) if stop is None else stop
        pos = self._live.positions(start, stop)
        data = {}
        for col in self.schema.columns:
            values, nulls = self.read_raw(col.name, pos)
            if col.kind == "utf8" and not nulls.any():
                # as python-blosc2 hands them to pandas (which keeps them as objects)
                values = values.astype(np.dtypes.StringDType())
            data[col.name] = _pandas(pd, values, nulls)
        return pd.DataFrame(data)


def _same_type(found: np.dtype, wanted: np.dtype) -> bool:
    return found == wanted or (found.kind == wanted.kind and found.newbyteorder("=") == wanted)


def _at(name: str, arr: B2ndArray, pos: np.ndarray) -> np.ndarray:
    """``arr`` at stored positions ``pos`` (increasing), read as one span."""
    if not len(pos):
        return np.zeros(0, arr.dtype)
    lo, hi = int(pos[0]), int(pos[-1]) + 1
    if hi > arr.shape[0]:
        raise FormatError(f"CTable column {name!r} length", f"at least {hi} rows", arr.shape[0])
    span = np.asarray(arr[lo:hi])
    return span if len(span) == len(pos) else span[pos - lo]


_ITEM_TYPES = {"vlstring": str, "vlbytes": bytes, "list": list}


def _items_at(col: Column, batches, pos: np.ndarray) -> np.ndarray:
    """The items of a variable-length column at stored positions ``pos`` (each batch
    holding them decoded once)."""
    items = batches if isinstance(batches, ListArray) else batches.items
    out = np.empty(len(pos), dtype=object)
    if len(pos) and int(pos[-1]) >= len(items):
        raise FormatError(
            f"CTable column {col.name!r} items", f"at least {int(pos[-1]) + 1}", len(items)
        )
    want = _ITEM_TYPES.get(col.kind)
    for i, p in enumerate(pos.tolist()):
        v = items[p]
        if want is not None and v is not None and not isinstance(v, want):
            raise FormatError(
                f"CTable column {col.name!r} row {p}", f"a {want.__name__}", type(v).__name__
            )
        if v is None and col.nulls == "none":
            raise FormatError(f"CTable column {col.name!r} row {p}", "a value (not nullable)", None)
        out[i] = v
    return out


def _utf8_at(name: str, offsets: B2ndArray, data: B2ndArray, pos: np.ndarray) -> np.ndarray:
    """The strings of a ``utf8`` column at stored positions ``pos``."""
    out = np.empty(len(pos), dtype=object)
    if not len(pos):
        return out
    lo, hi = int(pos[0]), int(pos[-1]) + 1
    if hi + 1 > offsets.shape[0]:
        raise FormatError(f"CTable column {name!r} offsets", f"at least {hi + 1}", offsets.shape[0])
    offs = np.asarray(offsets[lo : hi + 1])
    first, last = int(offs[0]), int(offs[-1])
    if first < 0 or last > data.shape[0] or np.any(np.diff(offs) < 0):
        raise FormatError(
            f"CTable column {name!r} offsets",
            f"increasing offsets within its {data.shape[0]} bytes",
            f"{first}..{last}",
        )
    blob = np.asarray(data[first:last]).tobytes()
    starts, ends = offs[pos - lo] - first, offs[pos - lo + 1] - first
    for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        try:
            out[i] = blob[a:b].decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(
                f"CTable column {name!r} row {int(pos[i])}", "UTF-8 text", blob[a:b][:40]
            ) from None
    return out


def _pandas(pd, values: np.ndarray, nulls: np.ndarray):
    """A column's values for pandas, its nulls as the NA of a dtype that has one."""
    if not nulls.any():
        return values
    kind = values.dtype.kind
    if kind in "fmM":
        out = values.copy()
        out[nulls] = np.nan if kind == "f" else np.datetime64("NaT", np.datetime_data(out.dtype)[0])
        return out
    if kind == "b":
        out = pd.array(values, dtype="boolean")
        out[nulls] = pd.NA
        return out
    if kind in "iu":
        prefix = "Int" if kind == "i" else "UInt"
        out = pd.array(values, dtype=f"{prefix}{values.dtype.itemsize * 8}")
        out[nulls] = pd.NA
        return out
    out = values.astype(object)
    out[nulls] = None
    return out


def open_table(
    path,
    *,
    group: str | None = None,
    storage_options: Mapping | None = None,
    limits: Limits | None = None,
) -> Table:
    """Open the python-blosc2 CTable at ``path`` (a ``.b2z`` or ``.b2d``, local or an fsspec
    URL; ``group``: the table's path inside a larger tree) for reading.

    A schema version, column kind or key b2store does not know is refused
    (:class:`b2store.UnsupportedError`, naming it), and a table that contradicts itself
    (a column of another type or length than its schema, a row count ``/_valid_rows`` does not
    keep) raises :class:`b2store.FormatError` naming the field.
    """
    tree = open_tree(path, storage_options=storage_options, limits=limits)
    node = "/" if not group or group == "/" else "/" + group.strip("/")
    return Table(tree, node, limits)
