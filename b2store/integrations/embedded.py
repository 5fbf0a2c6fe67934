"""What a single-frame Dataset keeps in its ``_xarray`` vlmeta, read back checked: its
variable's name (or the name an unnamed array gets) and its coordinates; and an array's
dimension names (``_ARRAY_DIMENSIONS``, else ``dim_i``); shared by the xarray engine and
:class:`~b2store.B2ndStore` (which needs neither the other's library), so that both name the
same array and dimensions alike and refuse the same hostile entries the same way."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import FormatError
from ..nd.meta import dtype_from_string

__all__ = [
    "DEFAULT_VARIABLE_NAME",
    "DIMENSION_KEY",
    "dims_of",
    "embedded_coord",
    "frame_variable_name",
    "named_dims",
]

#: The vlmeta key of an array's dimension names (xarray's Zarr v2 attribute).
DIMENSION_KEY = "_ARRAY_DIMENSIONS"

#: The name of a frame's array when the frame stores none (python-blosc2's ``asarray`` files):
#: the same in every file, so that a series of such files combines into one variable
#: (``xr.open_mfdataset``), as ``b2store convert`` also names it.
DEFAULT_VARIABLE_NAME = "data"


def frame_variable_name(info, default: str | None = None) -> str:
    """The variable name a frame stores in its ``_xarray`` vlmeta (``info``), else ``default``
    (:data:`DEFAULT_VARIABLE_NAME` when None). A stored name that could not name a Zarr node
    or a tree member (empty, with ``/``, starting with ``.``) is not used."""
    name = info.get("name") if isinstance(info, Mapping) else None
    if isinstance(name, str) and name and "/" not in name and not name.startswith("."):
        return name
    return DEFAULT_VARIABLE_NAME if default is None else default


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


def named_dims(vlmeta: Mapping, ndim: int) -> tuple[str, ...] | None:
    dims = vlmeta.get(DIMENSION_KEY) if DIMENSION_KEY in vlmeta else None
    if isinstance(dims, (list, tuple)) and len(dims) == ndim:
        return tuple(str(d) for d in dims)
    return None


def dims_of(vlmeta: Mapping, shape, sizes: dict | None = None, name: str = "") -> tuple:
    """The dimensions of an array: ``_ARRAY_DIMENSIONS``, else ``dim_0, dim_1, ...``; a
    ``dim_i`` already in ``sizes`` (this group's and its ancestors' dimensions) with another
    length becomes ``<name>_dim_i``, so unnamed arrays of different shapes stay apart."""
    dims = named_dims(vlmeta, len(shape))
    if dims is None:
        dims = tuple(
            f"dim_{i}"
            if sizes is None or sizes.get(f"dim_{i}", n) == n
            else f"{name or 'var'}_dim_{i}"
            for i, n in enumerate(shape)
        )
    if sizes is not None:
        for d, n in zip(dims, shape):
            sizes.setdefault(d, n)
    return dims
