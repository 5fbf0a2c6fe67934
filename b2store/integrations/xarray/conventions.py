"""The ``b2nd`` engine's metadata conventions: which vlmeta keys are attributes, the NumPy
types ``to_b2nd`` records for them, dimension names (``_ARRAY_DIMENSIONS``, else ``dim_i``),
and the coordinates a single-frame Dataset embeds (see :mod:`.backend`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from xarray import Variable

from ..embedded import DIMENSION_KEY, dims_of, embedded_coord, named_dims

__all__ = [
    "DIMENSION_KEY",
    "XARRAY_KEY",
    "FORMAT_VERSION",
    "is_structural",
    "restore_attrs",
    "dims_of",
    "named_dims",
    "xarray_meta",
    "embedded_coords",
    "DTYPE_KEY",
    "STRINGDTYPE",
    "WHOLE_BYTES",
    "whole_bytes",
    "restore_stringdtype",
]

XARRAY_KEY = "_xarray"
FORMAT_VERSION = 1
#: The ``_xarray`` key (of a variable, or of an embedded coordinate) naming the NumPy dtype
#: it had when the stored dtype does not say it all. ``STRINGDTYPE``: NumPy's variable-width
#: strings, stored as fixed-width ``<U`` and read back as StringDType, as xarray's Zarr
#: engine reads back what it wrote as Zarr's variable-length strings (a reader that ignores
#: the key reads the same strings as ``<U``). ``WHOLE_BYTES``: strings of one byte, which
#: xarray's decoder would otherwise take for netCDF's character arrays and join.
DTYPE_KEY = "original_dtype"
STRINGDTYPE = "StringDType"
WHOLE_BYTES = "|S1"
MIRRORS_KEY = "xb2"  # in _xarray: the vlmeta keys written for xarray-blosc2's reader
# Keys that are bookkeeping, never attributes: ours (``_zarr_fill_value`` is the fill value a
# Zarr client gave B2ndStore, not a CF attribute), and python-blosc2's stores'.
_OURS = frozenset({DIMENSION_KEY, XARRAY_KEY, "_zarr_fill_value"})
_BLOSC2_STORES = frozenset({"_object_registry", "_b2o_user_vlmeta", "estore_metadata"})
_STRUCTURAL = _OURS | _BLOSC2_STORES
# python-blosc2's serialized objects (b2o) also keep these plain names in vlmeta; elsewhere
# they are ordinary attributes ("version" is a common one).
_B2O_KEYS = frozenset(
    {"kind", "schema", "version", "b2o", "zarr-metadata", "hdf5-index", "fill_state", "fill_nonce"}
)
_STRUCTURAL_PREFIXES = ("proxy-", "_b2")


def is_structural(key: str, b2o: bool = False) -> bool:
    """Whether a vlmeta key is b2store's or python-blosc2's bookkeeping, not an attribute
    (``b2o``: in a python-blosc2 serialized object)."""
    return (
        key in _STRUCTURAL
        or key.startswith(_STRUCTURAL_PREFIXES)
        or key == "dstore_tick"
        or (b2o and key in _B2O_KEYS)
    )


def restore_attrs(
    vlmeta: Mapping, types: Mapping | None, long: Mapping | None = None, *, raw: bool = False
) -> dict:
    """The attributes among ``vlmeta`` (and ``long``, those with names too long for a
    vlmetalayer), with the NumPy types recorded in ``types``; ``raw`` when ``vlmeta`` holds
    attributes only (no bookkeeping keys to skip)."""
    attrs = {}
    b2o = "b2o" in vlmeta or "_b2o_user_vlmeta" in vlmeta
    mirrors = () if raw else mirror_keys(vlmeta)
    items = [(k, vlmeta[k]) for k in vlmeta if raw or not (is_structural(k, b2o) or k in mirrors)]
    if isinstance(long, Mapping):
        items += [(str(k), v) for k, v in long.items()]
    for key, value in items:
        tag = (types or {}).get(key)
        if isinstance(tag, str):
            try:
                if tag.startswith("["):
                    value = np.asarray(value, dtype=np.dtype(tag[1:]))
                else:
                    value = np.dtype(tag).type(value)
            except (TypeError, ValueError):
                pass  # a tag we cannot honour leaves the plain value
        attrs[key] = value
    return attrs


def mirror_keys(vlmeta: Mapping) -> frozenset:
    """The vlmeta keys ``to_b2nd`` wrote for xarray-blosc2's reader (``dims``, a lone
    frame's ``var``), listed under ``_xarray``'s ``xb2``: copies of what b2store keeps in
    ``_ARRAY_DIMENSIONS`` and ``_xarray``, never attributes."""
    keys = xarray_meta(vlmeta).get(MIRRORS_KEY)
    return (
        frozenset(k for k in keys if isinstance(k, str)) if isinstance(keys, list) else frozenset()
    )


def xarray_meta(vlmeta: Mapping) -> dict:
    info = vlmeta[XARRAY_KEY] if XARRAY_KEY in vlmeta else None
    return info if isinstance(info, dict) else {}


def whole_bytes(info) -> bool:
    """Whether ``info`` (a variable's ``_xarray`` vlmeta or an embedded coordinate's entry)
    marks one-byte strings ``to_b2nd`` wrote whole (see ``DTYPE_KEY``)."""
    return isinstance(info, Mapping) and info.get(DTYPE_KEY) == WHOLE_BYTES


def _to_stringdtype(values):
    # module-level: dask pickles it into its graph
    return np.asarray(values).astype(np.dtypes.StringDType())


def restore_stringdtype(info: Mapping, data, encoding: dict):
    """``data`` (fixed-width strings, lazy or not) read as NumPy's StringDType when ``info``
    says the variable was one, with ``encoding["dtype"]`` set as xarray's decoder wants it
    to keep a StringDType (else it makes an object array of one); else ``data``."""
    if info.get(DTYPE_KEY) != STRINGDTYPE or data.dtype.kind != "U":
        return data
    if not hasattr(np.dtypes, "StringDType"):
        return data  # NumPy 1: the fixed-width strings are what it has
    from xarray.coding.common import lazy_elemwise_func

    sd = np.dtypes.StringDType()
    encoding["dtype"] = sd
    if isinstance(data, np.ndarray):
        return data.astype(sd)
    return lazy_elemwise_func(data, _to_stringdtype, sd)


def embedded_coords(info: Mapping) -> dict[str, Variable]:
    """The coordinates a single-frame Dataset keeps in its ``_xarray`` vlmeta."""
    out = {}
    coords = info.get("coords")
    for name, spec in coords.items() if isinstance(coords, Mapping) else ():
        if not isinstance(spec, dict):
            continue
        data, dims, raw_attrs = embedded_coord(str(name), spec)  # checked: file content
        if dims is None or len(dims) != data.ndim:
            dims = [f"dim_{i}" for i in range(data.ndim)]
        types = spec.get("attr_types")
        attrs = restore_attrs(raw_attrs, types if isinstance(types, Mapping) else None, raw=True)
        encoding: dict = {}
        data = restore_stringdtype(spec, data, encoding)
        out[str(name)] = Variable(tuple(dims), data, attrs, encoding)
    return out
