"""A python-blosc2 CTable's manifest (``/_meta``): its kind, version and schema, checked, as
the columns b2store reads; every key, schema version and column kind it does not know refused.

python-blosc2 4.14 writes the manifest as a super-chunk whose vlmeta hold ``kind="ctable"``,
``version=1`` and ``schema``, a JSON text: ``{"version": 1|2|3, "columns": [...], "n_rows":
...}``. Version 3 appears when a column keeps its nulls in a ``.notnull`` mask, version 2 when
the table has nested (struct) columns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FormatError, UnsupportedError

__all__ = ["Column", "Schema", "parse_manifest", "column_key", "MANIFEST_VERSION"]

#: The manifest version python-blosc2 4.14 writes (``_meta`` vlmeta ``version``).
MANIFEST_VERSION = 1
#: The schema versions python-blosc2 4.14 writes and reads.
SCHEMA_VERSIONS = (1, 2, 3)

#: Column kinds read here, with the NumPy type each is stored as.
FIXED_KINDS = {
    **{k: np.dtype(k) for k in ("int8", "int16", "int32", "int64")},
    **{k: np.dtype(k) for k in ("uint8", "uint16", "uint32", "uint64")},
    **{k: np.dtype(k) for k in ("float32", "float64", "complex64", "complex128")},
    "bool": np.dtype(bool),
    "timestamp": np.dtype("int64"),
}
#: Column kinds of one item a row, kept in a BatchArray (``_cols/<name>.b2b``) of msgpack
#: items, ``None`` for a null.
VARLEN_KINDS = ("vlstring", "vlbytes", "object")
#: Column kinds python-blosc2 writes that b2store does not read yet (their stores differ).
OTHER_KINDS = ("struct", "ndarray")

#: Keys of the schema b2store reads; the others python-blosc2 writes are refused below.
_SCHEMA_KEYS = {
    "version",
    "columns",
    "n_rows",
    "create_summary_index",
    "summary_indexes_built",
    "metadata",
}
#: Schema keys of tables whose columns are not all stored in the table itself.
_UNREAD_SCHEMA_KEYS = {
    "computed_columns": "computed columns, evaluated on read",
    "materialized_columns": "materialized columns, kept from expressions",
    "source_bindings_version": "columns bound to an outside source",
    "source_columns": "columns bound to an outside source",
}
#: Keys a column may have: validation constraints and storage settings that do not change
#: what the stored values mean.
_COLUMN_KEYS = {
    "name",
    "kind",
    "nullable",
    "null_value",
    "null_storage",
    "default",
    "cparams",
    "dparams",
    "chunks",
    "blocks",
    "ge",
    "gt",
    "le",
    "lt",
    "min_length",
    "max_length",
    "pattern",
    "unit",
    "timezone",
    "serializer",
    "batch_rows",
    "items_per_block",
    "index_type",
    "value_type",
    "ordered",
    "null_code",
    "item",
    "storage",
}
_TIME_UNITS = ("s", "ms", "us", "ns")


@dataclass(frozen=True)
class Column:
    """One column as stored.

    Attributes
    ----------
    name : str
        The column's name (the schema's).
    kind : str
        The schema's kind (``"int64"``, ``"string"``, ``"utf8"``, ``"timestamp"``...).
    stored : numpy.dtype or None
        The stored item type (None for ``utf8``: int64 offsets and a uint8 byte buffer).
    nulls : {"none", "mask", "sentinel", "native", "code"}
        Where its nulls are: nowhere, in a ``.notnull`` mask, as ``null_value`` in band,
        ``None`` items (``vlstring``, ``vlbytes``, ``object``), or a dictionary column's
        ``null_code`` (its ``null_value`` here).
    null_value : object
        The sentinel of a ``"sentinel"`` column.
    unit : str or None
        A timestamp's unit (``"s"``, ``"ms"``, ``"us"``, ``"ns"``).
    timezone : str or None
        A timestamp's time zone, kept for Arrow (its values count from the epoch in UTC;
        python-blosc2 reads them as naive ``datetime64``, as b2store does).
    """

    name: str
    kind: str
    stored: np.dtype | None
    nulls: str = "none"
    null_value: Any = None
    unit: str | None = None
    timezone: str | None = None
    #: a dictionary column's value kind (``vlstring`` or ``vlbytes``)
    values: str | None = None

    @property
    def dtype(self) -> np.dtype:
        """The type of its values when read (``object`` for ``utf8`` strings and the
        variable-length kinds)."""
        if self.kind == "timestamp":
            return np.dtype(f"datetime64[{self.unit}]")
        if self.kind == "bool":
            return np.dtype(bool)
        if self.kind == "dictionary":
            return np.dtype(object)
        return np.dtype(object) if self.stored is None else self.stored

    def sentinel_nulls(self, values: np.ndarray) -> np.ndarray:
        """Where ``values`` (as stored) hold this column's sentinel."""
        v = self.null_value
        if isinstance(v, float) and math.isnan(v):
            return np.isnan(values)
        return np.asarray(values == v, dtype=bool)


@dataclass(frozen=True)
class Schema:
    """A CTable's schema: its columns in order, the row count it records, and each column's
    entry as stored (what a writer of the same table keeps)."""

    version: int
    columns: tuple[Column, ...]
    n_rows: int | None
    entries: tuple[dict, ...] = ()


def column_key(name: str) -> str:
    """A column's path under ``_cols`` (python-blosc2 percent-encodes ``%``; a name with
    a dot or backslash is a nested field there, refused)."""
    if "." in name or "\\" in name or "/" in name:
        raise UnsupportedError("CTable nested (struct) column", name)
    return "/_cols/" + name.replace("%", "%25")


def parse_manifest(vlmeta: Mapping) -> Schema:
    """The schema in the vlmeta of a CTable's ``/_meta``, checked."""
    kind = _text(vlmeta.get("kind"))
    if kind != "ctable":
        raise FormatError("_meta kind", "'ctable'", repr(vlmeta.get("kind")))
    version = vlmeta.get("version")
    if version != MANIFEST_VERSION or isinstance(version, bool):
        raise UnsupportedError("CTable manifest version", version)
    raw = _text(vlmeta.get("schema"))
    if raw is None:
        raise FormatError("_meta schema", "a JSON text", repr(vlmeta.get("schema"))[:80])
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise FormatError("_meta schema", "a JSON text", f"invalid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise FormatError("_meta schema", "a JSON object", type(data).__name__)
    return _schema(data)


def _text(value) -> str | None:
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def _schema(data: dict) -> Schema:
    version = data.get("version", 1)
    if isinstance(version, bool) or version not in SCHEMA_VERSIONS:
        raise UnsupportedError("CTable schema version", version)
    for key in sorted(set(data) - _SCHEMA_KEYS):
        what = _UNREAD_SCHEMA_KEYS.get(key)
        raise UnsupportedError(f"CTable schema key ({what})" if what else "CTable schema key", key)
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise FormatError("CTable schema metadata", "a JSON object", type(metadata).__name__)
    if metadata:
        # nested (struct) groups and their parents are kept here (schema version 2)
        raise UnsupportedError("CTable schema metadata (nested columns)", sorted(metadata))
    columns = data.get("columns")
    if not isinstance(columns, list):
        raise FormatError("CTable schema columns", "a list", type(columns).__name__)
    parsed = tuple(_column(entry, i) for i, entry in enumerate(columns))
    names = [c.name for c in parsed]
    if len(set(names)) != len(names):
        raise FormatError("CTable schema columns", "distinct names", names)
    n_rows = data.get("n_rows")
    if n_rows is not None and (type(n_rows) is not int or n_rows < 0):
        raise FormatError("CTable schema n_rows", "a count of rows", repr(n_rows))
    return Schema(version, parsed, n_rows, tuple(dict(e) for e in columns))


def _column(entry, i: int) -> Column:
    field = f"CTable schema column {i}"
    if not isinstance(entry, dict):
        raise FormatError(field, "a JSON object", type(entry).__name__)
    name, kind = entry.get("name"), entry.get("kind")
    if not isinstance(name, str) or not name:
        raise FormatError(f"{field} name", "a non-empty string", repr(name))
    if not isinstance(kind, str):
        raise FormatError(f"CTable column {name!r} kind", "a string", repr(kind))
    field = f"CTable column {name!r}"
    if kind == "dictionary":
        return _dictionary(entry, name, field)
    if kind in OTHER_KINDS or (
        kind not in FIXED_KINDS and kind not in ("string", "bytes", "utf8", "list", *VARLEN_KINDS)
    ):
        raise UnsupportedError(f"{field} kind", kind)
    for key in sorted(set(entry) - _COLUMN_KEYS):
        raise UnsupportedError(f"{field} key", key)
    if kind == "list":
        # a ListArray (``<name>.b2b``): its rows are lists of items, None for a null
        if entry.get("storage", "batch") not in ("batch", "vl"):
            raise UnsupportedError(f"{field} list storage", entry["storage"])
        return Column(name, kind, None, "native" if entry.get("nullable") else "none")
    if kind in VARLEN_KINDS:
        if entry.get("serializer", "msgpack") != "msgpack":
            raise UnsupportedError(f"{field} serializer", entry["serializer"])
        if entry.get("null_value") is not None or entry.get("null_storage") is not None:
            raise UnsupportedError(f"{field} nulls other than None", kind)
        return Column(name, kind, None, "native" if entry.get("nullable") else "none")
    stored, unit = _stored(entry, kind, field)
    nulls, null_value = _nulls(entry, kind, field, stored)
    if kind == "bool" and nulls == "sentinel":
        stored = np.dtype("uint8")  # python-blosc2 widens a sentinel bool: 255 is its null
    return Column(name, kind, stored, nulls, null_value, unit, entry.get("timezone"))


def _dictionary(entry: dict, name: str, field: str) -> Column:
    """A dictionary column: integer codes in the column, its values in a BatchArray beside
    (``<name>_dict``), ``null_code`` for a null."""
    for key in sorted(set(entry) - _COLUMN_KEYS):
        raise UnsupportedError(f"{field} key", key)
    index, value = entry.get("index_type"), entry.get("value_type")
    ikind = index.get("kind") if isinstance(index, dict) else None
    if ikind not in ("int8", "int16", "int32", "int64"):
        raise UnsupportedError(f"{field} dictionary index_type", repr(index))
    vkind = value.get("kind") if isinstance(value, dict) else None
    if vkind not in ("vlstring", "vlbytes") or value.get("serializer", "msgpack") != "msgpack":
        raise UnsupportedError(f"{field} dictionary value_type", repr(value))
    code = entry.get("null_code")
    if code is not None and type(code) is not int:
        raise FormatError(f"{field} null_code", "an integer", repr(code))
    if entry.get("nullable") and code is None:
        raise FormatError(f"{field} null_code", "a code for nulls", "none")
    nulls = "code" if code is not None else "none"
    return Column(name, "dictionary", FIXED_KINDS[ikind], nulls, code, values=vkind)


def _stored(entry: dict, kind: str, field: str) -> tuple[np.dtype | None, str | None]:
    if kind in ("string", "bytes"):
        length = entry.get("max_length", 32)  # python-blosc2's default width
        if type(length) is not int or not 0 < length <= 1 << 20:
            raise FormatError(f"{field} max_length", "a width in characters", repr(length))
        return np.dtype(f"{'U' if kind == 'string' else 'S'}{length}"), None
    if kind == "utf8":
        return None, None
    unit = None
    if kind == "timestamp":
        unit = entry.get("unit", "us")
        if unit not in _TIME_UNITS:
            raise FormatError(f"{field} unit", f"one of {_TIME_UNITS}", repr(unit))
        zone = entry.get("timezone")
        if zone is not None and not isinstance(zone, str):
            raise FormatError(f"{field} timezone", "a time zone's name", repr(zone))
    return FIXED_KINDS[kind], unit


def _nulls(entry: dict, kind: str, field: str, stored) -> tuple[str, Any]:
    storage = entry.get("null_storage")
    value = entry.get("null_value")
    if storage not in (None, "mask", "sentinel"):
        raise UnsupportedError(f"{field} null_storage", storage)
    if storage == "mask":
        if value is not None:
            raise FormatError(f"{field} null_value", "none beside a mask", repr(value))
        return "mask", None
    if value is None:
        if entry.get("nullable") and storage is None:
            # python-blosc2 resolves nullable=True to a mask or a sentinel before it saves
            raise FormatError(f"{field} nulls", "a null_storage or a null_value", "neither")
        return "none", None
    if kind == "bytes" or isinstance(value, dict):
        raise UnsupportedError(f"{field} null_value sentinel of kind", kind)
    try:
        if kind == "utf8":
            ok = isinstance(value, str)
        elif kind == "bool":
            ok = value == 255 and not isinstance(value, bool)
        else:
            ok = np.array(value).astype(stored).item() == value or (
                isinstance(value, float) and math.isnan(value)
            )
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise FormatError(f"{field} null_value", f"a value of {kind}", repr(value))
    return "sentinel", value
