"""A pandas DataFrame (or columns of NumPy arrays) written as a python-blosc2 CTable: the tree
:mod:`.reader` reads, built beside its path and put in place whole.

Each column's kind comes from its dtype: NumPy's integers, floats, complex and bool as
themselves, ``datetime64`` as a ``timestamp`` of its unit, fixed-width ``U``/``S`` as
``string``/``bytes`` of their width, ``str`` (pandas' ``str`` dtype, or an ``object`` column
of ``str``) as ``utf8``. Missing values (pandas' NA of ``Int64``/``boolean``/..., ``None``,
``NaT``) are nulls, kept in a ``.notnull`` mask (schema version 3); a float ``NaN`` is a
value, as python-blosc2 reads it from a DataFrame.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import msgpack
import numpy as np

from .. import _files
from ..errors import UnsupportedError
from ..frame.schunk import SChunk
from ..frame.staging import replace_path
from ..nd.create import asarray
from .schema import FIXED_KINDS, column_key, parse_manifest

__all__ = ["write_table", "columns_of"]

_EMBED_NAME = "embed.b2e"


def columns_of(data) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """``data`` (a DataFrame, or a mapping of names to 1-d arrays or Series) as
    ``name -> (values, nulls)``: NumPy values, and where they are null (None: nowhere)."""
    items = data.items()
    out = {}
    for name, column in items:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a CTable's column names are non-empty str, not {name!r}")
        out[name] = _values(name, column)
    lengths = {len(v) for v, _ in out.values()}
    if len(lengths) > 1:
        raise ValueError(f"a CTable's columns have one length, not {sorted(lengths)}")
    return out


def _values(name: str, column) -> tuple[np.ndarray, np.ndarray | None]:
    dtype = getattr(column, "dtype", None)
    if dtype is not None and not isinstance(dtype, np.dtype):  # a pandas extension dtype
        return _extension_values(name, column)
    values = np.asarray(column)
    if values.ndim != 1:
        raise ValueError(f"column {name!r}: a CTable column is 1-d, not of shape {values.shape}")
    if values.dtype.kind == "M":
        nulls = np.isnat(values)
        return values, nulls if nulls.any() else None
    if values.dtype.kind == "O":
        return _texts(name, values)
    return values, None


def _extension_values(name: str, column) -> tuple[np.ndarray, np.ndarray | None]:
    import pandas as pd

    dtype = column.dtype
    nulls = np.asarray(pd.isna(column), dtype=bool)
    if isinstance(dtype, pd.DatetimeTZDtype):
        raise UnsupportedError(
            f"column {name!r} with a time zone (write it in UTC, without the zone)", str(dtype)
        )
    if isinstance(dtype, pd.CategoricalDtype):  # (python-blosc2's dictionary kind)
        raise UnsupportedError(f"CTable column {name!r} of dtype", str(dtype))
    numpy_type = getattr(dtype, "numpy_dtype", None)
    if isinstance(dtype, pd.StringDtype) or numpy_type is None and dtype.kind == "O":
        return _texts(name, np.asarray(column, dtype=object))
    if numpy_type is None or numpy_type.kind not in "iufcb":
        raise UnsupportedError(f"CTable column {name!r} of dtype", str(dtype))
    fill = False if numpy_type.kind == "b" else 0
    values = np.asarray(column.to_numpy(dtype=numpy_type, na_value=fill))
    return values, nulls if nulls.any() else None


def _texts(name: str, values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """An object column of ``str`` (``None`` or NaN where missing)."""
    nulls = np.zeros(len(values), bool)
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        if isinstance(v, str):
            out[i] = v
        elif v is None or (isinstance(v, float) and v != v) or _is_na(v):
            nulls[i], out[i] = True, ""
        else:
            raise TypeError(
                f"column {name!r}: a CTable text column holds str (or None), not "
                f"{type(v).__name__} (row {i})"
            )
    return out, nulls if nulls.any() else None


def _is_na(v) -> bool:
    try:
        import pandas as pd
    except ImportError:
        return False
    return v is pd.NA or v is pd.NaT


def entry_for(name: str, values: np.ndarray, nullable: bool) -> dict:
    """The schema entry python-blosc2 writes for a column of ``values``."""
    kind = values.dtype.kind
    if values.dtype == object:
        entry = {"name": name, "kind": "utf8"}
    elif kind in "US":
        width = max(values.dtype.itemsize // (4 if kind == "U" else 1), 1)
        entry = {"name": name, "kind": "string" if kind == "U" else "bytes", "max_length": width}
    elif kind == "M":
        unit = np.datetime_data(values.dtype)[0]
        if unit not in ("s", "ms", "us", "ns"):
            raise UnsupportedError(f"CTable column {name!r} of datetime64 unit", unit)
        entry = {"name": name, "kind": "timestamp", "unit": unit}
    elif values.dtype.name in FIXED_KINDS and kind in "iufcb":
        entry = {"name": name, "kind": values.dtype.name}
    else:
        raise UnsupportedError(f"CTable column {name!r} of dtype", str(values.dtype))
    if nullable:
        entry.update(nullable=True, null_storage="mask")
    return entry


def write_table(
    path, columns: list[tuple[dict, np.ndarray, np.ndarray | None]], attrs: dict | None = None
) -> None:
    """Write a CTable at the local ``path`` (``.b2z``: a zip; else a ``.b2d`` directory),
    replacing what is there: ``columns`` are ``(schema entry, values, nulls)``, all of one
    length, every row live."""
    path = Path(os.fspath(path))
    _files.check_write(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _files.sweep(path.parent, path.name)
    held, work = _files.make_temp_dir(path.parent, path.name, "new")
    try:
        tree = work / "tree"
        tree.mkdir()
        _build(tree, columns, attrs or {})
        if path.suffix.lower() == ".b2z":
            made = _zip(tree, work / path.name)
        else:
            made = tree
        replace_path(made, path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.close(held)


def _build(tree: Path, columns, attrs: dict) -> None:
    n = len(columns[0][1]) if columns else 0
    room = max(n, 1)  # python-blosc2 keeps room for one row in an empty table
    (tree / "_cols").mkdir()
    valid = np.zeros(room, bool)
    valid[:n] = True
    asarray(valid, str(tree / "_valid_rows.b2nd"))
    entries = []
    for entry, values, nulls in columns:
        entries.append(entry)
        _write_column(tree, entry, values, nulls, room)
    mask = any(e.get("null_storage") == "mask" for e in entries)
    schema = {
        "version": 3 if mask else 1,
        "columns": entries,
        "n_rows": n,
        "summary_indexes_built": False,
    }
    parse_manifest({"kind": "ctable", "version": 1, "schema": json.dumps(schema)})  # (checks)
    with SChunk.create(str(tree / "_meta.b2f"), typesize=1) as meta:
        meta.vlmeta.update({"kind": "ctable", "version": 1, "schema": json.dumps(schema)})
    if attrs:
        with SChunk.create(str(tree / "_vlmeta.b2f"), typesize=1) as frame:
            frame.vlmeta.update(attrs)
    # python-blosc2's mark of a TreeStore: an empty embedded store
    marker = {"b2tree": msgpack.packb({"version": 1}, use_bin_type=True)}
    with SChunk.create(str(tree / _EMBED_NAME), typesize=1, meta=marker) as embed:
        embed.vlmeta["estore_metadata"] = {"embed_map": {}, "current_offset": 0}


def _write_column(tree: Path, entry: dict, values: np.ndarray, nulls, room: int) -> None:
    name, kind = entry["name"], entry["kind"]
    where = tree / (column_key(name).lstrip("/") + ".b2nd")
    nulls = None if nulls is None or not nulls.any() else np.asarray(nulls, bool)
    storage = entry.get("null_storage")
    if nulls is not None and storage is None and "null_value" not in entry:
        raise ValueError(f"column {name!r} is not nullable in its table; it has nulls here")
    if kind == "utf8":
        texts = list(values)
        if nulls is not None:
            fill = "" if storage == "mask" else entry["null_value"]
            texts = [fill if null else t for t, null in zip(texts, nulls)]
        blobs = [t.encode("utf-8") for t in texts]
        offsets = np.zeros(len(blobs) + 1, np.int64)
        np.cumsum([len(b) for b in blobs], out=offsets[1:])
        asarray(offsets, str(where))
        data = np.frombuffer(b"".join(blobs) or b"\0", np.uint8)
        asarray(data, str(where.with_suffix(".utf8.b2nd")))
    else:
        stored = _stored(entry, values, nulls, room)
        asarray(stored, str(where))
    if nulls is not None and storage == "mask":
        notnull = np.ones(room, bool)
        notnull[: len(nulls)] = ~nulls
        asarray(notnull, str(where.with_suffix(".notnull.b2nd")))


def _stored(entry: dict, values: np.ndarray, nulls, room: int) -> np.ndarray:
    kind = entry["kind"]
    if kind == "timestamp":
        dtype = np.dtype("int64")
        values = values.astype(f"datetime64[{entry.get('unit', 'us')}]").view(np.int64)
    elif kind in ("string", "bytes"):
        dtype = np.dtype(f"{'U' if kind == 'string' else 'S'}{entry.get('max_length', 32)}")
        if values.dtype.kind == "O":
            values = np.array(list(values), dtype=dtype)
        if values.dtype.itemsize > dtype.itemsize:
            raise ValueError(f"column {entry['name']!r}: text wider than its {dtype}")
    elif kind == "bool" and "null_value" in entry:
        dtype = np.dtype("uint8")  # python-blosc2's sentinel bool: 0, 1, and 255 for null
    else:
        dtype = FIXED_KINDS[kind]
    out = np.zeros(room, dtype)
    out[: len(values)] = values
    if nulls is not None:
        if "null_value" in entry:
            out[: len(values)][nulls] = entry["null_value"]
        elif dtype.kind in "fc":
            out[: len(values)][nulls] = np.nan  # python-blosc2's fill: loud where it can be
        elif kind == "timestamp":
            out[: len(values)][nulls] = np.iinfo(np.int64).min
        else:
            out[: len(values)][nulls] = np.zeros((), dtype)
    return out


def _zip(tree: Path, zpath: Path) -> Path:
    """A ``.b2z`` of ``tree``: members stored (a frame is read where it lies), largest first
    and ``embed.b2e`` last, as python-blosc2 writes them."""
    files = [p for p in tree.rglob("*") if p.is_file() and p.name != _EMBED_NAME]
    files.sort(key=lambda p: (-p.stat().st_size, p.as_posix()))
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_STORED) as zf:
        for p in [*files, tree / _EMBED_NAME]:
            zf.write(p, p.relative_to(tree).as_posix())
    return zpath
