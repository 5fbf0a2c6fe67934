"""Virtual datasets over ``.b2nd`` files: kerchunk references (chunk key -> path, offset,
length) whose codec decodes a stored b2nd chunk where it lies, one file or many combined.

The references use kerchunk's version-1 format with Zarr v2 metadata, whose compressor is
the numcodecs ``b2nd`` codec (:class:`~b2store.integrations.numcodecs_codec.B2nd`): it carries
the chunk and block shapes and the dtype, since a v2 codec is not told the chunk shape.
Special chunks (zeros, NaN, a repeated value) store no bytes to point at: their 32- (or
32 + typesize-) byte special chunk is inlined as ``base64:``; uninitialized chunks are left
out, so readers see the fill value.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence

import numpy as np

from ..tree import open_frame

__all__ = ["kerchunk_refs", "combine_refs"]


def _array_refs(arr, name: str, offset: int = 0) -> dict[str, object]:
    """Chunk references of one array, its first-axis chunk index shifted by ``offset``."""
    from .zarr_store import _is_uninit

    schunk = arr.schunk
    grid = [-(-s // c) for s, c in zip(arr.shape, arr.chunks)]
    refs: dict[str, object] = {}
    if arr.size == 0:
        return refs
    for n, coords in enumerate(np.ndindex(*grid) if grid else [()]):
        if _is_uninit(schunk, n):
            continue
        coords = (coords[0] + offset, *coords[1:]) if coords else (0,)
        key = f"{name}/" + ".".join(map(str, coords))
        span = schunk.chunk_span(n)
        if span is None:
            refs[key] = "base64:" + base64.b64encode(schunk.get_chunk(n)).decode()
        else:
            refs[key] = [span[0], span[1], span[2]]
    return refs


def _meta(arr, name: str, shape) -> dict[str, str]:
    from .zarr_store import _attribute_vlmeta, json_attributes

    dtype = arr.dtype
    vlmeta = dict(arr.vlmeta)
    compressor = {
        "id": "b2nd",
        "chunkshape": list(arr.chunks),
        "blockshape": list(arr.blocks),
        "dtype": dtype.str,
    }
    zarray = {
        "zarr_format": 2,
        "shape": list(shape) or [1],
        "chunks": list(arr.chunks) or [1],
        "dtype": dtype.str if dtype.fields is None else dtype.descr,
        "compressor": compressor,
        # None: no value is missing data to xarray (uninitialized chunks read as zeros);
        # a CF _FillValue is v2's fill_value, which xarray masks with in Zarr v2.
        "fill_value": _v2_fill(vlmeta.get("_FillValue"), dtype),
        "filters": None,
        "order": "C",
        "dimension_separator": ".",
    }
    attrs = json_attributes(_attribute_vlmeta(vlmeta, None), name, skip=_SKIP)
    dims = vlmeta.get("_ARRAY_DIMENSIONS")
    if isinstance(dims, (list, tuple)) and len(dims) == arr.ndim:
        attrs["_ARRAY_DIMENSIONS"] = list(dims)
    return {f"{name}/.zarray": json.dumps(zarray), f"{name}/.zattrs": json.dumps(attrs)}


_SKIP = ("_ARRAY_DIMENSIONS", "_zarr_fill_value", "_FillValue")


def _v2_fill(value, dtype: np.dtype):
    """A CF ``_FillValue`` as Zarr v2 JSON (NaN and infinities as strings), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if dtype.kind == "f":
        value = float(value)
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    return int(value) if dtype.kind in "iu" and float(value).is_integer() else None


def kerchunk_refs(path, name: str | None = None, *, storage_options=None) -> dict:
    """kerchunk references for the array in the ``.b2nd`` frame at ``path``, as variable
    ``name`` (default: the file's stem) of a Zarr v2 group.

    Open them with ``fsspec.filesystem("reference", fo=refs)`` and zarr (or xarray's zarr
    engine, ``consolidated=False``); b2store must be installed where they are read, for the
    ``b2nd`` codec.
    """
    return combine_refs([path], name=name, storage_options=storage_options)


def combine_refs(paths: Sequence, name: str | None = None, *, storage_options=None) -> dict:
    """kerchunk references for the arrays of several ``.b2nd`` frames concatenated along
    their first axis (time, say), without copying: every file must have the same chunk and
    block shapes and dtype, and all but the last a first dimension that is a whole number of
    chunks."""
    arrays = [open_frame(p, storage_options=storage_options) for p in paths]
    try:
        first = arrays[0]
        name = name or str(paths[0]).rstrip("/").rsplit("/", 1)[-1].removesuffix(".b2nd")
        refs: dict[str, object] = {".zgroup": json.dumps({"zarr_format": 2})}
        offset = 0
        for k, arr in enumerate(arrays):
            if (arr.chunks, arr.blocks, arr.dtype, arr.shape[1:]) != (
                first.chunks,
                first.blocks,
                first.dtype,
                first.shape[1:],
            ):
                raise ValueError(
                    f"{paths[k]}: chunks, blocks, dtype or shape differ from {paths[0]}"
                )
            if k < len(arrays) - 1 and arr.shape[0] % arr.chunks[0]:
                raise ValueError(
                    f"{paths[k]}: its first dimension ({arr.shape[0]}) is not a whole number "
                    f"of chunks ({arr.chunks[0]}), so the next file cannot follow it"
                )
            refs.update(_array_refs(arr, name, offset))
            offset += -(-arr.shape[0] // arr.chunks[0]) if arr.ndim else 1
        shape = (sum(a.shape[0] for a in arrays), *first.shape[1:]) if first.ndim else ()
        refs.update(_meta(first, name, shape))
        return {"version": 1, "refs": refs}
    finally:
        for arr in arrays:
            arr.schunk.close()
