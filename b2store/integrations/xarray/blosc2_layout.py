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

import os
import posixpath
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from xarray import Dataset, Variable, conventions

from ...errors import FormatError
from ..xb2_layout import (
    COMMIT,
    unsupported,
    xb2_dataset,
    xb2_packing,
    xb2_variable,
)
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
    v = xb2_variable(dict(arr.vlmeta), arr.ndim, arr.size, arr.dtype, stem, manifest, where, single)
    name, dims, attrs = v.name, v.dims, v.attrs
    if v.labels is not None:
        arr.schunk.close()
        handed.append(None)
        return name, Variable(dims, np.array(v.labels), attrs), True, None
    if v.scalar:
        value = np.asarray(arr[(0,) * arr.ndim])
        arr.schunk.close()
        handed.append(None)
        return name, Variable((), value[()], attrs), True, None

    packing, clean = None, ()
    kind = xb2_packing(v, manifest, single)
    if kind == "geogrid":
        packing = geogrid_packing(manifest["geogrid"][name], arr.dtype, where)
        clean = GEOGRID_ATTRS
    elif kind == "geogrid-attrs":
        packing, clean = geogrid_from_attrs(attrs, arr.dtype, where), GEOGRID_ATTRS
    elif kind == "lossy":
        packing, clean = lossy_packing(attrs, arr.dtype, where), LOSSY_ATTRS
    if packing is not None:
        attrs = {k: v for k, v in attrs.items() if k not in clean and not k.startswith("_geogrid")}
        if packing.row_diff and not arr.ndim:
            raise FormatError(f"{where} geogrid row_diff", "an array with rows", "a scalar")
    variable, handle = lazy_variable(opener, arr, lock, dims)
    handed.append(handle)
    if packing is None:
        variable.attrs = attrs
        return name, variable, v.is_coord, handle
    encoding = dict(variable.encoding)
    if packing.row_diff:  # a read needs whole rows from their start
        encoding["preferred_chunks"] = {**encoding["preferred_chunks"], dims[-1]: arr.shape[-1]}
    data = packed_data(handle.manager, arr, packing, lock)
    return name, Variable(dims, data, attrs, encoding), v.is_coord, handle


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
            raise unsupported("sharded dataset (a .b2z shard)", shards[0])


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
    manifest, attrs = xb2_dataset(tree)
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
                    raise unsupported("sidecar frame", f"{stem}.b2nd")
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
