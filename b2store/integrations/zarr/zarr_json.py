"""Zarr v3 metadata synthesized from b2nd frames: each array's ``zarr.json`` (shape, a regular
grid of the chunk shape, data type, fill value, the ``b2nd`` codec, dimension names and
attributes from vlmeta) and each group's, as :class:`~b2store.B2ndStore` serves them.

Attributes are the JSON-safe vlmeta entries (others are left out with a warning); a CF
``_FillValue`` is served in xarray's zarr form (its ``FillValueCoder``: floats as base64 of a
little-endian float64) and stored back as the plain value b2nd files keep.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import struct
import sys
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...chunk.params import WRITABLE_CODECS
from ...constants import Filter
from ...errors import FormatError, UnsupportedError
from ..embedded import embedded_coord
from .b2nd import B2ndCodec

__all__ = [
    "array_metadata",
    "attribute_vlmeta",
    "zarr_dtype",
    "group_metadata",
    "json_attributes",
    "zarr_fill_attr",
    "plain_fill_attr",
    "EmbeddedCoord",
    "served_fill",
    "fill_bytes",
]

META = "zarr.json"
_SPLITMODES = {1: "always", 2: "never", 3: "auto", 4: "forward_compat"}
#: vlmeta keys the store keeps for itself (not shown as attributes).
FILL_KEY = "_zarr_fill_value"
DIMS_KEY = "_ARRAY_DIMENSIONS"
#: The b2nd xarray engine's bookkeeping (see the xarray backend): names, types, embedded coords.
XARRAY_KEY = "_xarray"
MIRRORS_KEY = "xb2"  # in _xarray: the vlmeta keys written for xarray-blosc2 (see xarray/)
CF_FILL = "_FillValue"


# --- metadata synthesis -----------------------------------------------------------------------


def _json_safe(value) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return not isinstance(value, int) or abs(value) < 2**63
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_json_safe(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _json_safe(v) for k, v in value.items())
    return False


def json_attributes(vlmeta: Mapping, where: str, skip=(DIMS_KEY, FILL_KEY)) -> dict:
    """The JSON-safe vlmeta entries as attributes; others are skipped with a warning."""
    attrs, skipped = {}, []
    for key, value in vlmeta.items():
        if key in skip:
            continue
        if isinstance(key, str) and _json_safe(value):
            attrs[key] = value
        else:
            skipped.append(key)
    if skipped:
        warnings.warn(
            f"{where}: vlmeta {skipped} are not JSON-safe and are left out of the Zarr attributes",
            UserWarning,
            stacklevel=3,
        )
    return attrs


def _b64_double(value: float) -> str:
    return base64.standard_b64encode(struct.pack("<d", float(value))).decode()


def zarr_fill_attr(value, dtype: np.dtype):
    """A CF ``_FillValue`` as xarray's zarr engine stores it in v3 attributes (its
    ``FillValueCoder``: floats as base64 of a little-endian float64, so NaN is JSON-safe),
    or ``value`` unchanged when it is not one of the forms that coder reads."""
    kind = np.dtype(dtype).kind
    if isinstance(value, bool) or value is None:
        return value
    if kind == "f" and isinstance(value, (int, float)):
        return _b64_double(value)
    if kind == "c" and isinstance(value, (int, float, complex)):
        value = complex(value)
        return [_b64_double(value.real), _b64_double(value.imag)]
    if kind == "S" and isinstance(value, bytes):
        return base64.standard_b64encode(value).decode()
    return value


def plain_fill_attr(value, dtype: np.dtype):
    """The inverse of :func:`zarr_fill_attr`: the plain number (or bytes) b2nd files keep,
    as python-blosc2 users and the ``b2nd`` engine expect; other values unchanged."""
    kind = np.dtype(dtype).kind
    try:
        if kind == "f" and isinstance(value, str):
            return struct.unpack("<d", base64.standard_b64decode(value))[0]
        if kind == "c" and isinstance(value, (list, tuple)) and len(value) == 2:
            re, im = (struct.unpack("<d", base64.standard_b64decode(v))[0] for v in value)
            return complex(re, im)
        if kind == "S" and isinstance(value, str):
            return base64.standard_b64decode(value)
    except (ValueError, TypeError, struct.error):
        pass  # not the coder's form: keep what was given
    return value


def attribute_vlmeta(vlmeta: Mapping, dtype: np.dtype | None) -> dict:
    """vlmeta as Zarr attributes: ``_FillValue`` in xarray's zarr form, the ``_xarray``
    bookkeeping dropped and its over-long attribute names restored."""
    out = dict(vlmeta)
    info = out.pop(XARRAY_KEY, None)
    if isinstance(info, Mapping) and isinstance(info.get("long_attrs"), Mapping):
        out.update({str(k): v for k, v in info["long_attrs"].items()})
    if isinstance(info, Mapping) and isinstance(info.get(MIRRORS_KEY), list):
        # Keys to_b2nd writes for xarray-blosc2's reader (``dims``, ``var``): not attributes.
        for key in info[MIRRORS_KEY]:
            out.pop(key, None)
    if dtype is not None and CF_FILL in out:
        out[CF_FILL] = zarr_fill_attr(out[CF_FILL], dtype)
    return out


def _codec_key(arr) -> tuple:
    """What ``arr``'s b2nd codec (the one that decodes its chunks and encodes new ones as the
    frame does) is made from."""
    schunk, dtype = arr.schunk, arr.dtype
    endian = None
    if dtype.itemsize > 1 and dtype.byteorder != "|" and dtype.fields is None:
        endian = "big" if dtype.byteorder == ">" else "little"
    elif dtype.fields is not None:
        endian = _structured_endian(dtype)
    return (
        tuple(schunk.filters),
        tuple(schunk.filters_meta),
        schunk.codec,
        tuple(max(b, 1) for b in arr.blocks),
        endian,
        max(0, min(9, schunk.clevel)),
        _SPLITMODES.get(schunk.header.splitmode, "auto"),
    )


# A tree's arrays mostly share their codec settings and dtypes; making the codec and asking
# zarr's dtype registry cost 1.3 ms an array, the most of a tree's zarr.json (70,000 arrays:
# 90 s), so each distinct one is made once. The documents are JSON, copied out of the cache.
@functools.lru_cache(maxsize=1024)
def _codec_json_cached(key: tuple) -> str:
    filters_in, filters_meta, codec, blockshape, endian, clevel, splitmode = key
    filters: list | None = []
    for f, m in zip(filters_in, filters_meta):
        if f:
            try:
                filters.append({"id": Filter(f).name.lower(), "meta": m - 256 if m > 127 else m})
            except ValueError:
                filters = None
                break
    # A codec b2store cannot write (a plugin, or an id it does not know): new chunks use
    # Zstd; its stored chunks are refused when read (UnsupportedError).
    cname = codec.name.lower() if codec in WRITABLE_CODECS else "zstd"
    try:
        B2ndCodec(filters=filters, cname=cname)
    except (ValueError, KeyError):
        filters = None
    codec_obj = B2ndCodec(
        blockshape=blockshape, endian=endian, cname=cname, clevel=clevel, filters=filters,
        splitmode=splitmode,
    )  # fmt: skip
    return json.dumps(codec_obj.to_dict())


def _codec_json(*key) -> dict:
    return json.loads(_codec_json_cached(key))


@functools.lru_cache(maxsize=256)
def _dtype_json(dtype: np.dtype) -> str:
    """``[data_type, default fill value]`` of ``dtype`` in Zarr v3 JSON."""
    zdtype = zarr_dtype(dtype)
    try:
        zero = zdtype.default_scalar()
    except (TypeError, ValueError):
        # zarr 3.1 cannot make the zero of a structured type with a raw-bytes (void) field;
        # all zero bytes is what the default fill means.
        zero = np.zeros((), zdtype.to_native_dtype())[()]
    fill = zdtype.to_json_scalar(zero, zarr_format=3)
    return json.dumps([zdtype.to_json(zarr_format=3), fill])


def _leaf_types(dtype: np.dtype):
    """The scalar types of a (nested, structured, subarray) dtype, depth first."""
    if dtype.subdtype is not None:
        yield from _leaf_types(dtype.subdtype[0])
    elif dtype.fields is not None:
        for name in dtype.names:
            yield from _leaf_types(dtype.fields[name][0])
    else:
        yield dtype


def _has_subarray_field(dtype: np.dtype) -> bool:
    if dtype.fields is None:
        return False
    return any(
        dtype.fields[n][0].subdtype is not None or _has_subarray_field(dtype.fields[n][0])
        for n in dtype.names
    )


def _structured_endian(dtype: np.dtype) -> str | None:
    """The byte order of a structured dtype's fields for the ``b2nd`` codec's ``endian``:
    Zarr v3 structured types carry none (zarr reads every field as native), so the codec
    swaps all fields or none; a mix of orders cannot be served."""
    orders = {
        "big" if t.byteorder == ">" or (t.byteorder == "=" and sys.byteorder == "big") else "little"
        for t in _leaf_types(dtype)
        if t.itemsize > 1 and t.byteorder != "|" and t.kind != "V"
    }
    if len(orders) > 1:
        raise UnsupportedError(
            "Zarr data type for a structured dtype with fields of both byte orders", str(dtype)
        )
    return orders.pop() if orders else None


def zarr_dtype(dtype: np.dtype):
    """Zarr's data type object for the NumPy ``dtype`` (its JSON name, fill values)."""
    from zarr.core.dtype import get_data_type_from_native_dtype

    if _has_subarray_field(dtype):
        # zarr 3.1 has no type for a subarray field: it would serve its items as raw bytes
        # (V8 for ('s', '<f4', (2,))). Refused rather than served as another type.
        raise UnsupportedError(
            "Zarr data type for a structured dtype with a subarray field", str(dtype)
        )
    if dtype.fields is not None:
        _structured_endian(dtype)  # a mix of byte orders is refused here, named

    if dtype.itemsize > 1 and dtype.byteorder == ">" and dtype.fields is None:
        dtype = dtype.newbyteorder("<")  # byte order is the codec's business in v3
    return get_data_type_from_native_dtype(dtype)


def served_fill(vlmeta: Mapping, dtype: np.dtype, where: str = "array", cf: bool = True):
    """The Zarr ``fill_value`` (JSON) of an array with ``vlmeta``: the one a Zarr client
    stored (``_zarr_fill_value``), else (unless not ``cf``) its CF ``_FillValue`` where that
    is a number the dtype holds exactly (NaN for a float array xarray and python-blosc2's
    users fill with NaN), else the dtype's zero."""
    data_type, default_fill = json.loads(_dtype_json(dtype))
    if FILL_KEY in vlmeta:
        fill = vlmeta[FILL_KEY]
        try:  # file content: what zarr cannot parse is named here, not as zarr's TypeError
            zarr_dtype(dtype).from_json_scalar(fill, zarr_format=3)
        except (TypeError, ValueError, OverflowError):
            zdtype = zarr_dtype(dtype)
            raise FormatError(
                f"{where} vlmeta {FILL_KEY}", f"a Zarr fill value of {zdtype}", repr(fill)[:200]
            ) from None
        return fill
    value = vlmeta.get(CF_FILL) if cf else None
    if dtype.kind not in "iuf" or isinstance(value, bool) or not isinstance(value, (int, float)):
        return default_fill
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (NumPy's cast warnings: an inexact one is refused)
        try:
            item = np.asarray(value).astype(dtype)[()]
        except (OverflowError, ValueError):
            return default_fill
    nan = isinstance(value, float) and math.isnan(value)
    same = item.item() == value or (nan and bool(np.isnan(item)))
    if not same:
        return default_fill  # a _FillValue the dtype cannot hold: not a fill of its items
    return zarr_dtype(dtype).to_json_scalar(item, zarr_format=3)


def fill_bytes(fill, dtype: np.dtype) -> bytes:
    """One item of the (JSON) Zarr fill value ``fill``, as ``dtype`` stores it."""
    if fill is None:
        return bytes(dtype.itemsize)
    scalar = zarr_dtype(dtype).from_json_scalar(fill, zarr_format=3)
    return np.asarray(scalar, dtype=dtype).tobytes()


def array_metadata(
    arr, where: str = "array", vlmeta: Mapping | None = None, cf_fill: bool = True
) -> dict:
    """The Zarr v3 ``zarr.json`` of a b2nd array (a :class:`~b2store.B2ndArray`), its fill
    value, dimension names and attributes from ``vlmeta`` (the array's own by default); the
    fill value from a CF ``_FillValue`` unless not ``cf_fill`` (see :func:`served_fill`)."""
    data_type, _ = json.loads(_dtype_json(arr.dtype))
    vlmeta = dict(arr.vlmeta if vlmeta is None else vlmeta)
    fill = served_fill(vlmeta, arr.dtype, where, cf=cf_fill)
    doc: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(arr.shape),
        "data_type": data_type,
        "chunk_grid": {
            "name": "regular",
            # A zero-length dimension may have a zero chunk; zarr wants at least 1.
            "configuration": {"chunk_shape": [max(c, 1) for c in arr.chunks]},
        },
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": [_codec_json(*_codec_key(arr))],
        "attributes": json_attributes(attribute_vlmeta(vlmeta, arr.dtype), where),
        "storage_transformers": [],
    }
    dims = vlmeta.get(DIMS_KEY)
    if (
        isinstance(dims, (list, tuple))
        and len(dims) == arr.ndim
        and all(isinstance(d, str) for d in dims)
    ):
        doc["dimension_names"] = list(dims)
    return doc


def group_metadata(attrs: Mapping, where: str = "group") -> dict:
    return {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": json_attributes(attribute_vlmeta(attrs, None), where),
    }


class EmbeddedCoord:
    """A coordinate a single-frame ``to_b2nd`` Dataset keeps in its ``_xarray`` vlmeta,
    shown as a small in-memory array (read-only, like the vlmeta it comes from)."""

    def __init__(self, name: str, spec: Mapping):
        self.path, self.spec = "/" + name, spec

    def open(self, dtype=None):
        from ...nd.create import asarray

        data, dims, vlmeta = embedded_coord(self.path[1:], self.spec)
        if dims is not None and len(dims) == data.ndim:
            vlmeta[DIMS_KEY] = dims
        return asarray(data, vlmeta=vlmeta)
