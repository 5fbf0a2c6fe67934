"""Datasets in xarray-blosc2's layout, opened as its own reader opens them (see
:mod:`.foreign` for the layout and how it is recognised, :mod:`.packings` for its packings).

A directory (or ``.b2z`` zip of one) holds a frame per variable, whose vlmeta say:

- ``dims`` (the dimension names), ``var`` (the variable's name), and for a coordinate
  ``is_coord`` and ``coord_name``; a coordinate of strings stores its ``labels`` in vlmeta
  (``dtype: "string"``) and their positions as data, a scalar one ``dims: ["_scalar"]``;
- attributes: ``units`` and ``long_name`` as keys, the others as a JSON object ``attrs``;
- bookkeeping read by nobody: ``nbytes``, ``cbytes``, ``cratio``, ``lineage`` and its times.

``dataset.json`` holds the Dataset's attributes, ``lineage`` (served, as xarray-blosc2 serves
it, as a JSON string attribute), each variable's attributes (``variable_attrs``, which win
over the frame's) and the ``geogrid`` packing parameters. A ``_commit.b2nd`` scalar marks the
committed extent of ``time`` (served as ``committed_extent``; the rows past it are left out).

What is not understood is refused, naming it: an unknown vlmeta or manifest key, a sidecar
frame (``_name.b2nd``) other than ``_commit``, a file other than ``dataset.json`` and
``pipeline.yaml`` (ZSTD dictionaries, ``.b2z`` shards), groups (nested datasets).
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from xarray import Dataset, Variable, conventions

from ...errors import FormatError, UnsupportedError
from .lazy import Closer, RefRecipe, lazy_variable
from .packings import (
    GEOGRID_ATTRS,
    LOSSY_ATTRS,
    geogrid_from_attrs,
    geogrid_packing,
    lossy_packing,
    packed_data,
)

__all__ = ["xb2_tree_dataset", "xb2_frame_dataset", "refuse_shards"]

MANIFEST = "dataset.json"
PIPELINE = "pipeline.yaml"
COMMIT = "_commit"
VLMETA_KEYS = frozenset(
    {
        "dims",
        "var",
        "coord_name",
        "is_coord",
        "dtype",
        "labels",
        "units",
        "long_name",
        "attrs",
        # bookkeeping xarray-blosc2's reader reads nothing from
        "nbytes",
        "cbytes",
        "cratio",
        "lineage",
        "change_time",
        "knowledge_time",
        "valid_time",
    }
)
MANIFEST_KEYS = frozenset(
    {"data_vars", "coords", "dims", "attrs", "lineage", "variable_attrs", "geogrid", "group_by"}
)
#: Manifest keys of layouts not read here, and what they are.
REFUSED_MANIFEST_KEYS = {
    "zstd_dict": "ZSTD-dictionary compressed variables (.zstd files)",
    "sharding": "a dataset sharded by ISO week (.b2z or directory shards)",
    "shards": "a dataset sharded by ISO week (.b2z or directory shards)",
    "frozen": "a dataset sharded by ISO week (.b2z or directory shards)",
}


def _unsupported(what: str, ident) -> UnsupportedError:
    return UnsupportedError(f"xarray-blosc2 {what}", ident)


def _json_object(data: bytes | str, field: str) -> dict:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FormatError(field, "a JSON object", f"{type(exc).__name__}: {exc}") from None
    if not isinstance(value, dict):
        raise FormatError(field, "a JSON object", type(value).__name__)
    return value


def _truthy(value, field: str) -> bool:
    # xarray-blosc2 writes True, or "1" for its spatial_ref; it tests Python truth.
    if not isinstance(value, (bool, int, str)):
        raise FormatError(field, "a bool, int or str", repr(value))
    return bool(value)


def _str_or_none(vlmeta: Mapping, key: str, where: str) -> str | None:
    value = vlmeta.get(key)
    if value is not None and not isinstance(value, str):
        raise FormatError(f"{where} vlmeta {key!r}", "a str", repr(value))
    return value or None


# --- one variable ------------------------------------------------------------------------------


def _variable(arr, opener, stem: str, lock, manifest: Mapping, where: str, single: bool):
    """``(name, variable, is_coord, handle)`` of one frame in xarray-blosc2's layout; the
    frame is consumed: closed by the handle, or here when read eagerly or refused."""
    handed = []
    try:
        return _read_variable(arr, opener, stem, lock, manifest, where, single, handed)
    except BaseException:
        if not handed:
            arr.schunk.close()
        raise


def _read_variable(arr, opener, stem, lock, manifest, where, single, handed):
    vlmeta = dict(arr.vlmeta)
    unknown = sorted(set(vlmeta) - VLMETA_KEYS)
    if unknown:
        raise _unsupported(f"vlmeta key of {where}", unknown[0])
    dims = vlmeta.get("dims", [f"dim_{i}" for i in range(arr.ndim)])
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, str) for d in dims):
        raise FormatError(f"{where} vlmeta 'dims'", "a list of names", repr(dims))
    dims = tuple(dims)
    is_coord = _truthy(vlmeta.get("is_coord", False), f"{where} vlmeta 'is_coord'")
    var = _str_or_none(vlmeta, "var", where)
    coord_name = _str_or_none(vlmeta, "coord_name", where)
    # xarray-blosc2 names a lone frame by ``var`` (else its file), one in a dataset by
    # ``coord_name``, ``var``, else its file.
    name = (var or stem) if single else (coord_name or var or stem)

    attrs = {k: vlmeta[k] for k in ("units", "long_name") if k in vlmeta}
    packed_json = vlmeta.get("attrs")
    if packed_json:
        if not isinstance(packed_json, str):
            raise FormatError(f"{where} vlmeta 'attrs'", "a JSON string", repr(packed_json))
        attrs.update(_json_object(packed_json, f"{where} vlmeta 'attrs'"))
    if not single:
        extra = manifest.get("variable_attrs", {}).get(name, {})
        if not isinstance(extra, Mapping):
            raise FormatError(f"{MANIFEST} variable_attrs[{name!r}]", "an object", repr(extra))
        attrs.update(extra)

    kind = vlmeta.get("dtype")
    if kind is not None and kind != "string" and kind != str(arr.dtype):
        raise _unsupported(f"vlmeta 'dtype' of {where} (stored {arr.dtype})", kind)
    if is_coord and kind == "string":
        labels = vlmeta.get("labels", [])
        if not isinstance(labels, list) or not all(isinstance(s, str) for s in labels):
            raise FormatError(f"{where} vlmeta 'labels'", "a list of str", repr(labels)[:80])
        if len(dims) != 1 or len(labels) != arr.size:
            raise FormatError(f"{where} vlmeta 'labels'", f"{arr.size} labels", len(labels))
        arr.schunk.close()
        handed.append(None)
        return name, Variable(dims, np.array(labels), attrs), True, None
    if kind == "string":
        raise _unsupported(f"vlmeta 'dtype' of {where} (not a coordinate)", kind)
    if is_coord and dims == ("_scalar",):
        if arr.size < 1:
            raise FormatError(f"{where} scalar coordinate", "one value", "none")
        value = np.asarray(arr[(0,) * arr.ndim])
        arr.schunk.close()
        handed.append(None)
        return name, Variable((), value[()], attrs), True, None
    if len(dims) != arr.ndim:
        raise FormatError(f"{where} vlmeta 'dims'", f"{arr.ndim} names", repr(list(dims)))

    packing, clean = None, ()
    geogrid = manifest.get("geogrid", {})
    if not single and name in geogrid:
        packing, clean = geogrid_packing(geogrid[name], arr.dtype, where), GEOGRID_ATTRS
    elif any(k.startswith("_geogrid") for k in attrs):
        packing, clean = geogrid_from_attrs(attrs, arr.dtype, where), GEOGRID_ATTRS
    elif "_OriginalType" in attrs:
        packing, clean = lossy_packing(attrs, arr.dtype, where), LOSSY_ATTRS
    if packing is not None:
        attrs = {k: v for k, v in attrs.items() if k not in clean and not k.startswith("_geogrid")}
        if packing.row_diff and not arr.ndim:
            raise FormatError(f"{where} geogrid row_diff", "an array with rows", "a scalar")
    variable, handle = lazy_variable(opener, arr, lock, dims)
    handed.append(handle)
    if packing is None:
        variable.attrs = attrs
        return name, variable, is_coord, handle
    encoding = dict(variable.encoding)
    if packing.row_diff:  # a read needs whole rows from their start
        encoding["preferred_chunks"] = {**encoding["preferred_chunks"], dims[-1]: arr.shape[-1]}
    data = packed_data(handle.manager, arr, packing, lock)
    return name, Variable(dims, data, attrs, encoding), is_coord, handle


def xb2_frame_dataset(arr, opener, stem: str, lock, decoders: dict) -> Dataset:
    """A lone frame written by xarray-blosc2 (one of a dataset's files): one variable named
    ``var``, else ``stem`` (the file's name), its attributes kept and its packing decoded
    from them (xarray-blosc2's lone-file reader drops both)."""
    name, variable, _, handle = _variable(arr, opener, stem, lock, {}, stem, single=True)
    handles = [handle] if handle else []
    try:
        return _dataset({name: variable}, {}, set(), decoders, handles)
    except BaseException:
        for handle in handles:
            handle.close()
        raise


# --- a dataset ---------------------------------------------------------------------------------


def refuse_shards(path: str) -> None:
    """A local directory of ``.b2z`` shards (``shard_by="isoweek", freeze=True``) holds no
    frame to list as a tree: refused here, by name, before it is listed."""
    p = Path(path.removeprefix("file://")).expanduser()
    if p.is_dir():
        shards = sorted(e.name for e in os.scandir(p) if e.name.endswith(".b2z"))
        if shards:
            raise _unsupported("sharded dataset (a .b2z shard)", shards[0])


def _manifest(tree) -> dict:
    if MANIFEST not in tree.files():
        return {}
    manifest = _json_object(tree.read_file(MANIFEST), MANIFEST)
    for key in manifest:
        if key in REFUSED_MANIFEST_KEYS:
            raise _unsupported(f"{MANIFEST} key {key!r}: {REFUSED_MANIFEST_KEYS[key]}", key)
        if key not in MANIFEST_KEYS:
            raise _unsupported(f"{MANIFEST} key", key)
    for key in ("attrs", "variable_attrs", "geogrid"):
        if not isinstance(manifest.get(key, {}), Mapping):
            raise FormatError(f"{MANIFEST} {key}", "a JSON object", repr(manifest[key])[:80])
    return manifest


def _check_files(tree) -> None:
    for name in tree.files():
        if name in (MANIFEST, PIPELINE):
            continue
        if "/" in name:
            raise _unsupported("nested dataset (a group in a subdirectory)", name)
        if name.endswith(".b2z"):
            raise _unsupported("sharded dataset (a .b2z shard)", name)
        if name.endswith((".zstd", ".zstd.json")) or name == "_zstd_dict.bin":
            raise _unsupported("ZSTD-dictionary compressed variable", name)
        raise _unsupported("dataset file", name)
    nested = [g for g in tree.groups() if g != "/"]
    if nested:
        raise _unsupported("nested dataset (a group in a subdirectory)", nested[0])


def _commit_extent(ref) -> int:
    arr = ref.open()
    try:
        if arr.size != 1 or arr.dtype.kind not in "iu":
            raise FormatError(f"{COMMIT}.b2nd", "one integer", f"{arr.size} of {arr.dtype}")
        return int(np.asarray(arr[(0,) * arr.ndim]))
    finally:
        arr.schunk.close()


def xb2_tree_dataset(tree, tree_path: str, lock, decoders: dict) -> Dataset:
    """A directory or ``.b2z`` written by xarray-blosc2 as its reader opens it, its packings
    decoded; then CF-decoded as the b2nd engine decodes any Dataset."""
    _check_files(tree)
    manifest = _manifest(tree)
    attrs = dict(manifest.get("attrs", {}))
    lineage = manifest.get("lineage")
    if lineage:
        attrs["lineage"] = lineage if isinstance(lineage, str) else json.dumps(lineage)
    if PIPELINE in tree.files():
        try:
            attrs["pipeline"] = tree.read_file(PIPELINE).decode()
        except UnicodeDecodeError as exc:
            raise FormatError(PIPELINE, "UTF-8 text", str(exc)) from None
        attrs.setdefault("pipeline_format", "hydra_zen.yaml")
    committed = None
    variables: dict[str, Variable] = {}
    coord_names: set[str] = set()
    handles: list = []
    try:
        for apath, ref in sorted(tree.arrays().items()):
            stem = posixpath.basename(apath)
            where = f"{tree_path} ({apath})"
            if stem.startswith("_") and not stem.startswith("_coord_"):
                if stem != COMMIT:
                    raise _unsupported("sidecar frame", f"{stem}.b2nd")
                committed = _commit_extent(ref)
                continue
            opener = RefRecipe(ref, (tree_path, apath, ref.limits))
            name, variable, is_coord, handle = _variable(
                ref.open(), opener, stem, lock, manifest, where, single=False
            )
            if handle is not None:
                handles.append(handle)
            if name in variables:
                raise FormatError(f"{where} name", "a name no other frame has", name)
            variables[name] = variable
            if is_coord:
                coord_names.add(name)
        if committed is not None:
            attrs["committed_extent"] = committed
        return _dataset(variables, attrs, coord_names, decoders, handles, committed)
    except BaseException:
        for handle in handles:
            handle.close()
        raise


def _dataset(variables, attrs, coord_names, decoders, handles, committed=None) -> Dataset:
    vars_, attrs_, decoded_coords = conventions.decode_cf_variables(variables, attrs, **decoders)
    ds = Dataset(vars_, attrs=attrs_)
    ds = ds.set_coords((set(decoded_coords) | coord_names).intersection(vars_))
    # The rows past the committed extent are preallocated, not data (xarray-blosc2's
    # trim_to_commit, its default).
    if committed is not None and "time" in ds.dims and 0 <= committed < ds.sizes["time"]:
        ds = ds.isel(time=slice(0, committed))
    ds.set_close(Closer(handles))
    return ds
