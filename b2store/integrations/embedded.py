"""The coordinates a single-frame Dataset keeps in its ``_xarray`` vlmeta, read back checked:
shared by the xarray engine and :class:`~b2store.B2ndStore` (which needs neither the other's
library), so that both refuse the same hostile entries the same way."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import FormatError
from ..nd.meta import dtype_from_string

__all__ = ["embedded_coord"]


def embedded_coord(name: str, spec: Mapping) -> tuple[np.ndarray, list | None, dict]:
    """The data, dimension names (None: not given as names) and attributes of a coordinate
    a single-frame Dataset keeps in its ``_xarray`` vlmeta. The vlmeta is file content: a
    value no writer makes (ragged lists, objects, a dtype NumPy cannot build) is a
    FormatError naming the entry, whether zarr or the xarray engine reads it."""
    where = f"vlmeta _xarray coords[{name!r}]"
    try:
        data = np.asarray(spec.get("data"))
        if "dtype" in spec:
            text = spec["dtype"]
            if not isinstance(text, str):
                raise TypeError(f"dtype {text!r}")
            data = data.astype(dtype_from_string(text), copy=False)
    except (TypeError, ValueError, OverflowError) as exc:
        raise FormatError(f"{where} data", "an array of numbers or strings", exc) from None
    if data.dtype.hasobject or data.dtype.itemsize == 0 and data.size:
        raise FormatError(f"{where} data", "an array of numbers or strings", repr(data)[:200])
    dims = spec.get("dims")
    if not (isinstance(dims, (list, tuple)) and all(isinstance(d, str) for d in dims)):
        dims = None
    attrs = spec.get("attrs")
    if attrs is not None and not (
        isinstance(attrs, Mapping) and all(isinstance(k, str) for k in attrs)
    ):
        raise FormatError(f"{where} attrs", "a mapping of names to values", type(attrs).__name__)
    return data, None if dims is None else list(dims), dict(attrs or {})
