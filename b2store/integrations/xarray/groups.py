"""Datasets from one b2nd frame or one group of a tree, CF-decoded, dimensions named alike.

A group's unnamed dimensions are named from its ancestors' and its own dimension lengths, so
that a group opened alone names them as the DataTree does (:func:`ancestor_sizes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath

from xarray import Dataset, conventions
from xarray.backends.common import NONE_VAR_NAME

from ...containers import Container, ContainerNotArrayError
from ...errors import UnsupportedError
from ...limits import Limits
from ...nd.array import B2ndArray
from ..embedded import frame_variable_name
from .blosc2_layout import xb2_frame_dataset
from .conventions import (
    dims_of,
    embedded_coords,
    named_dims,
    restore_attrs,
    whole_bytes,
    xarray_meta,
)
from .foreign import ForeignLayoutError, foreign_vlmeta
from .lazy import Closer, FrameRecipe, RefRecipe, lazy_variable

__all__ = ["ancestor_sizes", "frame_dataset", "group_dataset"]


def _decode(variables: dict, attrs: dict, decoders: dict, closers, whole=()) -> Dataset:
    """``variables`` CF-decoded as a Dataset; those named in ``whole`` are one-byte strings
    ``to_b2nd`` wrote (see :func:`.conventions.whole_bytes`), never joined as characters."""
    if whole:
        decoders = {**decoders, "concat_characters": _whole_strings(variables, decoders, whole)}
    vars_, attrs_, coord_names = conventions.decode_cf_variables(variables, attrs, **decoders)
    if NONE_VAR_NAME in vars_ and None not in vars_:
        # the name xarray's writers (to_b2nd's too) store a variable named None under
        vars_ = {None if k == NONE_VAR_NAME else k: v for k, v in vars_.items()}
    ds = Dataset(vars_, attrs=attrs_)
    ds = ds.set_coords(coord_names.intersection(vars_))
    ds.set_close(Closer(closers))
    return ds


def _whole_strings(variables: dict, decoders: dict, whole) -> dict:
    """``concat_characters`` per variable, False for those in ``whole``: xarray's decoder
    would otherwise join their one-byte strings along the last dimension as netCDF's
    character arrays (``[b"a", b"c"]`` read as ``b"ac"``)."""
    given = decoders.get("concat_characters", True)
    out = {k: given.get(k, True) if isinstance(given, Mapping) else given for k in variables}
    out.update(dict.fromkeys((k for k in whole if k in out), False))
    return out


def frame_dataset(
    path: str,
    storage_options,
    lock,
    decoders,
    limits: Limits | None = None,
    variable_name: str | None = None,
) -> Dataset:
    """One frame as a Dataset; its array named as it stored, else ``variable_name``
    (``data`` when None)."""
    recipe = FrameRecipe(path, storage_options=storage_options, limits=limits)
    arr = recipe()
    if isinstance(arr, Container):
        arr.close()
        raise ContainerNotArrayError(arr.kind, path, f"b2store.open({path!r})[i]")
    if not isinstance(arr, B2ndArray):
        with arr:
            return _schunk_dataset(arr, decoders)
    try:
        if foreign_vlmeta(arr.vlmeta):
            stem = variable_name or PurePosixPath(path.rstrip("/")).stem
            return xb2_frame_dataset(arr, recipe, stem, lock, decoders)
        info = xarray_meta(arr.vlmeta)
        name = frame_variable_name(info, variable_name)
        var, handle = lazy_variable(recipe, arr, lock)
    except BaseException:
        arr.schunk.close()
        raise
    variables = {**embedded_coords(info), name: var}
    attrs = restore_attrs(info.get("attrs") or {}, info.get("dataset_attr_types"), raw=True)
    coords = info.get("coords")
    whole = (
        [n for n, spec in coords.items() if whole_bytes(spec)] if isinstance(coords, dict) else []
    )
    whole += [name] if whole_bytes(info) else []
    return _decode(variables, attrs, decoders, [handle], whole)


def _schunk_dataset(schunk, decoders) -> Dataset:
    # Its data has no shape or dtype: b2store.open reads it as an SChunk.
    """A frame without the b2nd metalayer: its vlmeta as attributes (a group's attributes
    frame); data without a shape is not an array."""
    if schunk.nbytes:
        raise UnsupportedError("array from a super-chunk without the b2nd metalayer", "no shape")
    vlmeta = dict(schunk.vlmeta)
    info = xarray_meta(vlmeta)
    attrs = restore_attrs(vlmeta, info.get("attr_types"), info.get("long_attrs"))
    return _decode({}, attrs, decoders, [])


def ancestor_sizes(tree, node: str) -> dict:
    """The dimension lengths ``node``'s ancestors define, as :func:`open_datatree` names
    them, so that a group opened alone names its unnamed dimensions as in the DataTree."""
    sizes: dict = {}
    if node == "/":
        return sizes
    parts = node.strip("/").split("/")
    for depth in range(len(parts)):
        prefix = "/" + "/".join(parts[:depth]) + ("/" if depth else "")
        arrays = [
            (p, r)
            for p, r in sorted(tree.arrays().items())
            if p.startswith(prefix) and "/" not in p[len(prefix) :]
        ]
        metas = []
        for apath, ref in arrays:
            arr = ref.open()
            try:
                metas.append((apath[len(prefix) :], dict(arr.vlmeta), arr.shape))
            finally:
                arr.schunk.close()
        for _, vlmeta, shape in metas:
            for d, n in zip(named_dims(vlmeta, len(shape)) or (), shape):
                sizes.setdefault(d, n)
        for name, vlmeta, shape in metas:
            dims_of(vlmeta, shape, sizes, name)
    return sizes


def group_dataset(
    tree, tree_path: str, node: str, lock, decoders, sizes: dict | None = None
) -> Dataset:
    """One group as a Dataset; ``sizes`` (the ancestors' dimension lengths, updated with this
    group's) keeps unnamed dimensions of different lengths apart across a DataTree."""
    prefix = node.rstrip("/") + "/"
    gattrs = dict(tree.groups()[node])
    info = xarray_meta(gattrs)
    attrs = restore_attrs(gattrs, info.get("attr_types"), info.get("long_attrs"))
    sizes = {} if sizes is None else sizes
    # A python-blosc2 container or proxy cache among the group's frames is no variable:
    # refused, naming it, rather than left out of the Dataset unsaid.
    tree.check_objects(node)
    opened = []
    try:
        for apath, ref in sorted(tree.arrays().items()):
            if apath.startswith(prefix) and "/" not in apath[len(prefix) :]:
                opened.append((apath, ref, ref.open()))
                marker = foreign_vlmeta(opened[-1][2].vlmeta)
                if marker:
                    raise ForeignLayoutError(f"{tree_path} ({apath})", marker)
        # Named dimensions first: an unnamed one must not take a name they use.
        for _, _, arr in opened:
            named = named_dims(arr.vlmeta, arr.ndim)
            for d, n in zip(named or (), arr.shape):
                sizes.setdefault(d, n)
        variables, closers, whole = {}, [], []
        while opened:
            apath, ref, arr = opened[0]
            name = apath[len(prefix) :]
            dims = dims_of(arr.vlmeta, arr.shape, sizes, name)
            opener = RefRecipe(ref, (tree_path, apath, ref.limits))
            variables[name], handle = lazy_variable(opener, arr, lock, dims)
            if whole_bytes(xarray_meta(arr.vlmeta)):
                whole.append(name)
            opened.pop(0)
            closers.append(handle)
    except BaseException:
        for _, _, arr in opened:
            arr.schunk.close()
        for handle in locals().get("closers", ()):
            handle.close()
        raise
    return _decode(variables, attrs, decoders, closers, whole)
