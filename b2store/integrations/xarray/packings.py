"""xarray-blosc2's lossy packings, decoded lazily to the values its own decoders give.

Both store floats as integers with ``unpacked = packed * scale_factor + add_offset``, computed
in float64 and cast to the original float type:

- ``lossy={name: {"max_error": e}}``: the packed integers as they are; the attributes say
  ``scale_factor``, ``add_offset``, ``_FillValue`` and ``_OriginalType``. The ``_FillValue``
  (the integer type's maximum) is no mask: the largest value packs to it, so CF decoding
  would turn the maximum into NaN. xarray-blosc2 decodes it with ``unpack_variable``.
- ``preset="geogrid"``: int16, and where the differences fit, each row (the last axis)
  differenced (``row_diff``), undone by a cumulative sum in the stored integer type (its
  wrap-around undoes the encoder's); the parameters are in ``dataset.json``'s ``geogrid``
  entry and in the attributes (``_geogrid_row_diff``, ``_geogrid_precision``). xarray-blosc2
  decodes it with ``geogrid_decode`` when it opens a directory.

A read of a row-differenced variable reads each row from its start up to the last element
asked for; any other read reads what it is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xarray.core import indexing

from ...errors import FormatError, UnsupportedError
from .lazy import B2ndBackendArray

__all__ = ["Packing", "geogrid_packing", "lossy_packing", "PackedBackendArray"]

#: What the attribute keys of a packing are, for cleaning them from the attributes as
#: xarray-blosc2's decoders do.
GEOGRID_ATTRS = ("scale_factor", "add_offset", "_OriginalType")
LOSSY_ATTRS = ("scale_factor", "add_offset", "_FillValue", "_OriginalType")
_GEOGRID_PARAMS = frozenset(
    {
        "scale_factor",
        "add_offset",
        "original_dtype",
        "target_dtype",
        "precision",
        "row_diff",
        "max_abs_error",
    }
)


@dataclass(frozen=True)
class Packing:
    """How one variable's integers unpack: ``scale_factor``, ``add_offset``, the float type
    they unpack to, and whether rows were differenced."""

    scale_factor: float
    add_offset: float
    dtype: np.dtype
    row_diff: bool = False

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        out = packed.astype(np.float64) * self.scale_factor + self.add_offset
        return out.astype(self.dtype)


def _number(value, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FormatError(field, "a number", repr(value))
    return float(value)


def _float_type(value, field: str) -> np.dtype:
    try:
        dtype = np.dtype(value) if isinstance(value, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind != "f":
        raise UnsupportedError(f"xarray-blosc2 packing {field}", repr(value))
    return dtype


def _check_stored(stored: np.dtype, where: str) -> None:
    if stored.kind not in "iu":
        raise FormatError(f"{where} stored type", "integers", str(stored))


def geogrid_packing(params, stored: np.dtype, where: str) -> Packing:
    """The packing of a ``geogrid`` variable from its ``dataset.json`` entry."""
    if not isinstance(params, Mapping):
        raise FormatError(f"{where} geogrid parameters", "a JSON object", repr(params))
    unknown = sorted(set(params) - _GEOGRID_PARAMS)
    if unknown:
        raise UnsupportedError(f"xarray-blosc2 geogrid parameter of {where}", unknown[0])
    _check_stored(stored, where)
    target = params.get("target_dtype", str(stored))
    if target != str(stored):
        raise FormatError(f"{where} geogrid target_dtype", str(stored), repr(target))
    row_diff = params.get("row_diff", False)
    if not isinstance(row_diff, bool):
        raise FormatError(f"{where} geogrid row_diff", "true or false", repr(row_diff))
    return Packing(
        _number(params.get("scale_factor"), f"{where} geogrid scale_factor"),
        _number(params.get("add_offset"), f"{where} geogrid add_offset"),
        _float_type(params.get("original_dtype", "float32"), f"original_dtype of {where}"),
        row_diff,
    )


def geogrid_from_attrs(attrs: Mapping, stored: np.dtype, where: str) -> Packing:
    """The packing of a ``geogrid`` variable from its attributes (a lone frame, or a
    dataset whose ``dataset.json`` has no entry for it)."""
    return geogrid_packing(
        {
            "scale_factor": attrs.get("scale_factor"),
            "add_offset": attrs.get("add_offset"),
            "original_dtype": attrs.get("_OriginalType", "float32"),
            "row_diff": attrs.get("_geogrid_row_diff", False),
        },
        stored,
        where,
    )


def lossy_packing(attrs: Mapping, stored: np.dtype, where: str) -> Packing:
    """The packing of a ``lossy=`` variable from its attributes, as ``unpack_variable``
    reads them (a missing scale is 1, a missing offset 0)."""
    _check_stored(stored, where)
    return Packing(
        _number(attrs.get("scale_factor", 1.0), f"{where} scale_factor"),
        _number(attrs.get("add_offset", 0.0), f"{where} add_offset"),
        _float_type(attrs.get("_OriginalType", "float32"), f"_OriginalType of {where}"),
    )


class PackedBackendArray(B2ndBackendArray):
    """A packed variable read lazily and unpacked as it is read."""

    def __init__(self, manager, shape, stored_dtype, packing: Packing, lock=None):
        super().__init__(manager, shape, stored_dtype, lock)
        self.packing = packing
        self.dtype = packing.dtype

    def _getitem(self, key: tuple) -> np.ndarray:
        key = tuple(key) + (slice(None),) * (len(self.shape) - len(key))
        if not self.packing.row_diff:
            return self.packing.unpack(self._read(key))
        # Differenced rows: read each from its start to the last element wanted, undo the
        # differences, then pick the wanted elements.
        n = self.shape[-1]
        last = key[-1]
        if isinstance(last, slice):
            wanted = np.arange(n)[last]
        else:
            wanted = np.asarray(last, dtype=np.intp)
            wanted = np.where(wanted < 0, wanted + n, wanted)
        stop = int(wanted.max()) + 1 if wanted.size else 0
        rows = self._read(key[:-1] + (slice(0, stop),))
        rows = np.cumsum(rows, axis=-1, dtype=rows.dtype)
        if isinstance(last, slice):
            picked = rows[..., last]
        elif np.ndim(last) == 0:
            picked = rows[..., int(wanted)]
        else:
            picked = np.take(rows, wanted, axis=-1)
        return self.packing.unpack(picked)


def packed_data(manager, arr, packing: Packing, lock) -> indexing.LazilyIndexedArray:
    return indexing.LazilyIndexedArray(
        PackedBackendArray(manager, arr.shape, arr.dtype, packing, lock)
    )
