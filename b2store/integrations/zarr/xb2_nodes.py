"""A dataset xarray-blosc2 wrote (a directory or ``.b2z`` of one frame per variable) as
:class:`~b2store.B2ndStore` serves it: each frame as an array under its variable's name, with
the dimension names and attributes xarray-blosc2's convention gives it (read by
:mod:`..xb2_layout`, as the ``b2nd`` engine reads them), a coordinate of strings or a scalar
one as a small array of its values, the Dataset's attributes as the root group's (its
coordinates that are no dimension listed in ``coordinates``, as CF and xarray's zarr engine
name them). Its packings and committed extent are refused: the ``b2nd`` engine decodes them.
"""

from __future__ import annotations

import posixpath
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from ...tree import is_url
from ..xb2_layout import (
    COMMIT,
    COORD_PREFIX,
    SEALED_MARKER,
    Xb2Variable,
    foreign_layout,
    foreign_vlmeta,
    unsupported,
    xb2_dataset,
    xb2_packing,
    xb2_variable,
)
from .zarr_json import DIMS_KEY

__all__ = ["is_xb2_tree", "xb2_index"]

_ENGINE = "(the b2nd engine reads it: xr.open_dataset(path, engine='b2nd'))"


def is_xb2_tree(path: str, tree) -> bool:
    """Whether the tree at ``path`` is in xarray-blosc2's layout: its files say so (a local
    directory or zip), or its first frame's vlmeta do."""
    if not is_url(path):
        marker = foreign_layout(path)
        if marker is not None and marker != SEALED_MARKER:
            return True
    if tree.kind == "b2d":
        return False  # python-blosc2's store (its embed.b2e): not xarray-blosc2's layout
    for ref in tree.arrays().values():
        arr = ref.open()
        try:
            return foreign_vlmeta(dict(arr.vlmeta)) is not None
        finally:
            arr.schunk.close()
    return False


class Xb2Ref:
    """A frame of the dataset, opened as the tree's reference opens it, with the vlmeta the
    Zarr metadata is made from (``shown_vlmeta``): its variable's attributes and dimension
    names."""

    def __init__(self, ref, var: Xb2Variable):
        self.ref, self.path = ref, ref.path
        self.shown_vlmeta = {**var.attrs, DIMS_KEY: list(var.dims)}

    def open(self, dtype=None):
        return self.ref.open(dtype=dtype)


class Xb2Values:
    """A coordinate kept as values, not a frame's items (a coordinate of strings: its labels;
    a scalar one: its frame's first item), shown as a small in-memory array."""

    def __init__(self, name: str, data: np.ndarray, var: Xb2Variable):
        self.path, self.data = "/" + name, data
        self.shown_vlmeta = {**var.attrs, DIMS_KEY: [] if var.scalar else list(var.dims)}

    def open(self, dtype=None):
        from ...nd.create import asarray

        return asarray(self.data, vlmeta=self.shown_vlmeta)


def xb2_index(tree, path: str) -> dict[str, tuple[str, Any]]:
    """Zarr node path -> ("group", attributes) or ("array", Xb2Ref or Xb2Values)."""
    manifest, attrs = xb2_dataset(tree)
    nodes: dict[str, tuple[str, Any]] = {}
    coords = []
    for apath, ref in sorted(tree.arrays().items()):
        stem = posixpath.basename(apath)
        where = f"{path} ({apath})"
        if stem.startswith("_") and not stem.startswith(COORD_PREFIX):
            if stem == COMMIT:
                # The rows past it are preallocated, not data: the engine leaves them out.
                raise UnsupportedError(
                    f"xarray-blosc2 committed extent ({COMMIT}.b2nd) through B2ndStore {_ENGINE}",
                    path,
                )
            raise unsupported("sidecar frame", f"{stem}.b2nd")
        arr = ref.open()
        try:
            var = xb2_variable(
                dict(arr.vlmeta), arr.ndim, arr.size, arr.dtype, stem, manifest, where, False
            )
            packing = xb2_packing(var, manifest, single=False)
            if packing is not None:
                raise UnsupportedError(
                    f"xarray-blosc2 {packing} packing through B2ndStore {_ENGINE}", var.name
                )
            if var.labels is not None:
                node: Any = Xb2Values(var.name, np.array(var.labels), var)
            elif var.scalar:
                node = Xb2Values(var.name, np.asarray(arr[(0,) * arr.ndim]).reshape(()), var)
            else:
                node = Xb2Ref(ref, var)
        finally:
            arr.schunk.close()
        name = var.name
        if not name or "/" in name or name.startswith(".") or name in nodes:
            raise FormatError(f"{where} name", "a Zarr node name no other frame has", name)
        nodes[name] = ("array", node)
        if var.is_coord and var.dims != (name,):
            coords.append(name)
    if coords:
        if "coordinates" in attrs:
            raise unsupported("Dataset attribute beside non-index coordinates", "coordinates")
        attrs["coordinates"] = " ".join(coords)
    nodes[""] = ("group", attrs)
    return nodes
