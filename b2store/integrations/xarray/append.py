"""Writing into a Dataset ``to_b2nd`` wrote before: appending along a dimension
(``mode="a", append_dim=...``), overwriting variables (``mode="a"``), adding new ones, and
writing a region in place (``mode="r+", region=...``), as ``to_zarr`` does.

Values are encoded with what is stored (the CF encoding: ``dtype``, ``units`` of times,
``scale_factor``, ``_FillValue``...; and the frame's chunks, blocks and codec), one chunk at
a time (dask data is computed a few chunks at a time, never whole). Only the chunks the new
values touch are written: new chunks go after each frame's end, and the edge chunk an append
starts in is decoded, filled and written anew; nothing else of a frame is rewritten.

What is atomic, per layout:

- a single frame (``.b2nd``): its new chunks, shape, index and embedded coordinates are
  published by one header write (:meth:`SChunk.reindex`);
- a ``.b2d`` tree: every frame's change is written but for its header, and one journal
  commits them all (:mod:`b2store.journal`);
- a ``.b2z`` zip: members cannot grow in place, so the zip is unpacked beside, appended to as
  a ``.b2d``, zipped again and renamed over the old one: it costs twice the zip's size in
  writes, however small the append (a day, 133 kB, appended to a year of 180 x 360 float32
  stored in 47.6 MB: 95.4 MB written, against 0.13 MB for a ``.b2d`` or ``.b2nd``).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr

from ... import _files, _progress, journal
from ...api import open as open_array
from ...errors import B2StoreError
from ...frame.mappings import raw_value
from ...nd.chunks import encode_chunk_array
from ...nd.geometry import c_index, chunk_grid
from ...tree import VLMETA_NAME
from .conventions import DTYPE_KEY, STRINGDTYPE, XARRAY_KEY
from .encoding import encode_into
from .frames import (
    MAX_EMBEDDED_COORD_BYTES,
    plain_attrs,
    put_in_place,
    values_at,
    write_attrs_frame,
    write_variable,
    zip_tree,
)

__all__ = ["write_into", "resolve_mode", "write_region", "ConcurrentWriteError"]


class ConcurrentWriteError(B2StoreError, RuntimeError):
    """Another writer changed a stored array between the planning of a write and its start."""


def resolve_mode(mode, append_dim, region) -> str:
    """``mode`` as ``to_zarr`` resolves it (None: "a" with ``append_dim``, "r+" with
    ``region``, else "w-": an existing target is replaced only when asked), refusing the
    combinations it refuses."""
    if mode is None:
        mode = "a" if append_dim is not None else "r+" if region is not None else "w-"
    if mode not in ("w", "w-", "x", "a", "a-", "r+"):
        raise ValueError(f"mode must be 'w', 'w-', 'a', 'a-' or 'r+', not {mode!r}")
    if append_dim is not None and mode not in ("a", "a-"):
        raise ValueError("cannot set append_dim unless mode='a' or mode=None")
    if region is not None and mode not in ("a", "a-", "r+"):
        raise ValueError("cannot set region unless mode='a', mode='a-', mode='r+' or mode=None")
    return mode


@dataclass
class _Plan:
    """What a write into a stored Dataset does, decided (and checked) before any byte is
    written: encoded values of each stored variable and where they go, new variables."""

    into: dict = field(default_factory=dict)  # name -> (encoded variable, start, new shape)
    # name -> (encoded variable, storage options, whether a StringDType, whether a coordinate)
    new: dict = field(default_factory=dict)
    coords: dict = field(default_factory=dict)  # (single frame) name -> new stored values
    attrs: dict | None = None  # the group's attributes, when they change


def write_into(
    ds, path, *, mode, append_dim, region, encoding, nthreads, progress, storage_options=None
) -> None:
    """The body of ``to_b2nd`` for modes "a", "a-" and "r+" on an existing ``path`` (or a
    sparse frame in an object store, ``storage_options`` its fsspec options)."""
    if isinstance(ds, xr.DataArray):
        name = ds.name if ds.name is not None else "__xarray_dataarray_variable__"
        ds = ds.to_dataset(name=name)
    if not isinstance(ds, xr.Dataset):
        raise TypeError(
            f"to_b2nd(mode={mode!r}) writes into a stored Dataset from a Dataset or DataArray, "
            f"not {type(ds).__name__}: write each group's Dataset into its own path, or pass "
            "mode='w' to replace what is stored"
        )
    nbytes = int(ds.nbytes)
    name = os.fspath(path).rstrip("/").rsplit("/", 1)[-1]
    bar = _progress.bar(nbytes, name, progress, large=_progress.is_large(nbytes, 1))
    if storage_options is not None:  # (a URL: the caller checked it holds a sparse frame)
        try:
            _into_frame(ds, path, mode, append_dim, region, encoding, nthreads, bar,
                        storage_options)  # fmt: skip
        finally:
            bar.close()
        return
    target = Path(path)
    try:
        if target.is_file() and _is_zip(target):
            _into_zip(ds, target, mode, append_dim, region, encoding, nthreads, bar)
        elif target.is_dir() and not (target / "chunks.b2frame").exists():
            _into_tree(ds, target, mode, append_dim, region, encoding, nthreads, bar)
        else:
            _into_frame(ds, target, mode, append_dim, region, encoding, nthreads, bar)
    finally:
        bar.close()


def _is_zip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"PK\x03\x04"


# --- planning ------------------------------------------------------------------------------


def _plan(ds, stored: xr.Dataset, mode, append_dim, region, encoding, single: bool) -> _Plan:
    """Check ``ds`` against the ``stored`` Dataset as ``to_zarr`` checks it, and encode it
    with the stored encoding; raises before anything is written."""
    encoding = dict(encoding or {})
    sizes = dict(stored.sizes)
    if append_dim is not None and append_dim not in sizes:
        raise ValueError(
            f"append_dim={append_dim!r} does not match any existing dataset dimensions {sizes}: "
            "append along one of them"
        )
    region = _region(ds, stored, region, append_dim)
    if region:
        ds = ds.drop_vars([k for k in ds.indexes if k in ds.variables])  # as to_zarr does
    existing = [k for k in ds.variables if k in stored.variables]
    fresh = [k for k in ds.variables if k not in stored.variables]
    if mode == "r+" and fresh:
        raise ValueError(
            f"dataset contains non-pre-existing variables {fresh!r}, which is not allowed "
            "with mode='r+'. To allow writing new variables, set mode='a'."
        )
    for name in existing:
        if name in encoding:
            raise ValueError(
                f"variable {name!r} already exists, but encoding was provided: values written "
                f"into it are encoded as stored, so leave {name!r} out of encoding (or pass "
                "mode='w' to write the Dataset anew with it)"
            )
    if mode == "a-" and append_dim is not None:
        # "a-": what is stored and does not lie along append_dim is left as it is
        kept = [k for k in existing if append_dim not in ds.variables[k].dims]
        ds = ds.drop_vars(kept)
        existing = [k for k in existing if k not in kept]
    if single and fresh:
        dims = sorted(str(d) for d in sizes)
        raise ValueError(
            f"a single .b2nd frame holds one data variable and its coordinates "
            f"({sorted(map(str, stored.data_vars))!r}): {fresh!r} cannot be added to it. To "
            f"append along a dimension pass append_dim= one of {dims!r}; to replace the frame, "
            "mode='w'; to keep several variables, write the Dataset to a .b2d or .b2z tree"
        )
    # Sizes after the write: appended along append_dim, the same along every other dimension.
    after = dict(sizes)
    if append_dim is not None:
        after[append_dim] = sizes[append_dim] + ds.sizes.get(append_dim, 0)
    variables = {}
    for name in ds.variables:
        var = ds.variables[name]
        if name in stored.variables:
            have = stored.variables[name].dtype
            if var.dtype.kind in "SU" and have.kind not in (var.dtype.kind, "O"):
                raise ValueError(
                    f"Mismatched dtypes for variable {name} between the b2nd store on disk "
                    f"({have}) and the dataset to append ({var.dtype}): cast the values to "
                    f"{have} (.astype), or pass mode='w' to write the Dataset anew"
                )
            var = _as_stored(name, var, stored.variables[name], region, append_dim)
        else:
            for dim, n in var.sizes.items():
                if dim in after and n != after[dim] and dim not in region:
                    raise _size_error(name, dim, n, after[dim], append_dim)
        variables[name] = var
    if append_dim is not None:
        # Every stored variable along append_dim grows with it, or sizes would conflict.
        left = [k for k, v in stored.variables.items() if append_dim in v.dims and k not in ds]
        if left and ds.sizes.get(append_dim, 0):
            raise ValueError(
                f"variables {left!r} are stored along append_dim={append_dim!r} but are not "
                "in the dataset to append: they would be left shorter than the dimension; "
                "append them too"
            )
    # Encoded with what is stored, every variable in one call (encoding owns the dtypes).
    into, new, attrs = encode_into(
        variables, stored, coords=set(ds.coords), attrs=ds.attrs,
        encoding={k: v for k, v in encoding.items() if k in fresh}, append_dim=append_dim,
        whole=single or bool(region),
    )  # fmt: skip
    out = _Plan(new=new)
    for name, var in into.items():
        start, shape = [], []
        for dim, n in zip(var.dims, var.shape):
            if dim == append_dim:
                start.append(sizes[dim])
                shape.append(sizes[dim] + n)
            else:
                start.append(region[dim].start if dim in region else 0)
                shape.append(sizes[dim])
        was = tuple(sizes[d] for d in var.dims)
        out.into[name] = (var, tuple(start), tuple(shape), was)
    out.attrs = attrs
    return out


def _region(ds, stored, region, append_dim) -> dict:
    """``region`` as ``{dim: slice}`` with explicit bounds, checked as ``to_zarr`` does."""
    if region is None:
        return {}
    if region == "auto":
        region = dict.fromkeys(ds.dims, "auto")
    if not isinstance(region, Mapping):
        raise TypeError(f"``region`` must be a dict, got {type(region)}")
    if any(d not in ds.dims for d in region):
        raise ValueError(
            f"all keys in ``region`` are not in Dataset dimensions, got {list(region)} and "
            f"{list(ds.dims)}"
        )
    out = {}
    for dim, sl in region.items():
        if dim not in stored.sizes:
            raise ValueError(
                f"region dimension {dim!r} is not a stored dimension: region= takes the "
                f"stored ones, {sorted(map(str, stored.sizes))!r}"
            )
        if isinstance(sl, str) and sl == "auto":
            sl = _auto_region(ds, stored, dim)
        if not isinstance(sl, slice):
            raise TypeError(f"all values in ``region`` must be slice objects, got region={region}")
        if sl.step not in (1, None):
            raise ValueError(
                f"step on all slices in ``region`` must be 1 or None, got region={region}"
            )
        start, stop, _ = sl.indices(stored.sizes[dim])
        if stop - start != ds.sizes[dim]:
            raise ValueError(
                f"region {dim}={sl} holds {max(0, stop - start)} items, the dataset "
                f"{ds.sizes[dim]} along {dim!r}"
            )
        out[dim] = slice(start, stop)
    non_matching = [k for k, v in ds.variables.items() if not set(out).intersection(v.dims)]
    if out and non_matching:
        raise ValueError(
            "when setting `region` explicitly, all variables in the dataset to write must have "
            f"at least one dimension in common with the region's dimensions {list(out)}, but "
            "that is not the case for some variables here. To drop these variables from this "
            f"dataset before writing, write: .drop_vars({non_matching!r})"
        )
    if append_dim is not None and append_dim in out:
        raise ValueError(
            "cannot list the same dimension in both ``append_dim`` and ``region``, got "
            f"{append_dim} in both"
        )
    return out


def _auto_region(ds, stored, dim) -> slice:
    """The region of ``dim`` found from its coordinate's values in the stored one."""
    import pandas as pd

    if dim not in ds.indexes:
        return slice(0, ds.sizes[dim])
    if dim not in stored.indexes:
        raise ValueError(
            f"region='auto' needs a stored coordinate {dim!r} to find the region: give it as "
            f"region={{{dim!r}: slice(start, stop)}}"
        )
    idxs = pd.Index(stored.indexes[dim]).get_indexer(ds.indexes[dim])
    if (idxs == -1).any():
        raise KeyError(
            f"Not all values of coordinate {dim!r} in the new array were found in the "
            "stored one: a region write changes no dimension"
        )
    if len(idxs) and (np.diff(idxs) != 1).any():
        raise ValueError(
            f"The auto-detected region of coordinate {dim!r} had non-contiguous indices: a "
            "region write needs the new data to be a contiguous subset of the stored data"
        )
    return slice(int(idxs[0]), int(idxs[-1]) + 1) if len(idxs) else slice(0, 0)


def _as_stored(name, var, stored, region, append_dim) -> xr.Variable:
    """``var`` in the stored variable's dimension order, its sizes checked against the
    stored ones (every dimension but ``append_dim``; a region's size along its dims)."""
    if var.dims != stored.dims:
        if set(var.dims) != set(stored.dims):
            raise ValueError(
                f"variable {name!r} already exists with different dimension names "
                f"{stored.dims} != {var.dims}, but changing variable dimensions is not "
                "supported by to_b2nd()."
            )
        var = var.transpose(*stored.dims)
    for dim, n in var.sizes.items():
        want = stored.sizes[dim]
        if dim in region:
            want = region[dim].stop - region[dim].start
        if dim != append_dim and n != want:
            raise _size_error(name, dim, n, want, append_dim)
    return var


def _size_error(name, dim, n, want, append_dim) -> ValueError:
    # the words of xarray's netCDF writers, then of its zarr writer
    return ValueError(
        f"Unable to update size for existing dimension {dim!r} ({n} != {want}): variable "
        f"{name!r} would be written with different dimension sizes than stored. to_b2nd() "
        f"only changes dimension sizes when explicitly appending, but append_dim="
        f"{append_dim!r}. To write to a subset of what is stored, use the region argument."
    )


# --- writing into frames -------------------------------------------------------------------


def write_region(arr, var: xr.Variable, start, shape, was, nthreads, bar, vlmeta=None) -> None:
    """Write ``var`` (encoded, in the frame's dimension order) at ``start`` of the frame
    ``arr``, resized to ``shape``; ``vlmeta`` (raw values) replaces the frame's, in the same
    commit. The chunks the values touch are encoded one at a time and stored as they come;
    a chunk they cover in part is decoded first. Called with the frame's writer lock held;
    ``was`` is the shape the write was planned on (another writer may have changed it)."""
    arr._reload_meta()
    if tuple(arr.shape) != tuple(was):
        raise ConcurrentWriteError(
            f"{arr.schunk.urlpath}: another writer changed the array from {tuple(was)} to "
            f"{tuple(arr.shape)} while this write was prepared; nothing was written (write "
            "again: the new shape is read then)"
        )
    dtype, chunks, blocks = arr.dtype, arr.chunks, arr.blocks
    if var.dtype != dtype and not np.can_cast(var.dtype, dtype, "same_kind"):
        raise ValueError(
            f"Mismatched dtypes for variable {Path(arr.schunk.urlpath).stem} between the b2nd "
            f"store on disk ({dtype}) and the dataset to write ({var.dtype}): cast the values "
            f"to {dtype} (.astype), or pass mode='w' to write the Dataset anew"
        )
    old_shape, shape = tuple(arr.shape), tuple(shape)
    if any(s < o for s, o in zip(shape, old_shape)):
        raise ValueError(
            f"a write into a frame never shrinks it: {old_shape} -> {shape}; write the values "
            "into a part of it with region=..., or pass mode='w' to replace it"
        )
    old_grid, grid = chunk_grid(old_shape, chunks), chunk_grid(shape, chunks)
    had = math.prod(old_shape) > 0
    touched = [
        range(s // c, -(-(s + n) // c)) if n else range(0)
        for s, n, c in zip(start, var.shape, chunks)
    ]
    todo = list(np.ndindex(*[len(r) for r in touched])) if var.size else []
    todo = [tuple(r[i] for r, i in zip(touched, t)) for t in todo]

    def pieces():
        spans = [_spans(coords, start, var.shape, shape, chunks) for coords in todo]
        values = values_at(var, [src for src, _, _ in spans])
        for coords, (_, dst, full), value in zip(todo, spans, values):
            inside = had and all(c < g for c, g in zip(coords, old_grid))
            if full or not inside:
                ext = np.zeros(chunks, dtype)
            else:
                ext = arr._whole_chunk(c_index(coords, old_grid)).copy()
            ext[dst] = np.asarray(value, dtype)
            bar.update(int(np.asarray(value).nbytes))
            yield (
                c_index(coords, grid),
                encode_chunk_array(
                    ext, chunks, blocks, arr.schunk.params, dtype=dtype, nthreads=nthreads
                ),
            )

    # B2ndArray's resize, with the new chunks and vlmeta in its one commit (the chunks the
    # values cover are not re-encoded by the resize first)
    covered = {c_index(coords, grid) for coords in todo}
    arr._resize_locked(shape, pieces(), covered, vlmeta=vlmeta)


def _spans(coords, start, n, shape, chunks):
    """For chunk ``coords``: the slices of the values that fall in it, where they go in the
    chunk, and whether they cover every item of the chunk inside the array."""
    src, dst, full = [], [], True
    for i, s, k, size, c in zip(coords, start, n, shape, chunks):
        lo, hi = i * c, min(i * c + c, size)
        a, b = max(lo, s), min(hi, s + k)
        src.append(slice(a - s, b - s))
        dst.append(slice(a - lo, b - lo))
        full = full and a == lo and b == hi
    return tuple(src), tuple(dst), full


# --- the layouts ---------------------------------------------------------------------------


def _open_stored(path, storage_options=None) -> xr.Dataset:
    options = {} if storage_options is None else {"storage_options": storage_options}
    return xr.open_dataset(path, engine="b2nd", chunks=None, cache=False, **options)


def _into_frame(
    ds, path, mode, append_dim, region, encoding, nthreads, bar, storage_options=None
) -> None:
    with _open_stored(path, storage_options) as stored:
        name = next(iter(stored.data_vars), None)
        plan = _plan(ds, stored, mode, append_dim, region, encoding, single=True)
    arr = open_array(os.fspath(path), mode="a", storage_options=storage_options)
    try:
        with arr.schunk.changing():
            info = dict(arr.vlmeta.get(XARRAY_KEY) or {})
            coords = {k: dict(v) for k, v in (info.get("coords") or {}).items()}
            for cname, (var, start, shape, _) in plan.into.items():
                if cname == name:
                    continue
                data = np.asarray(coords[cname]["data"])
                values = np.asarray(var.values, data.dtype)
                grown = np.zeros(shape, data.dtype)
                grown[tuple(slice(0, n) for n in data.shape)] = data
                grown[tuple(slice(s, s + n) for s, n in zip(start, values.shape))] = values
                coords[cname]["data"] = grown
            if (
                sum(np.asarray(c["data"]).nbytes for c in coords.values())
                > MAX_EMBEDDED_COORD_BYTES
            ):
                raise ValueError(
                    f"the coordinates of {name!r} would hold more than "
                    f"{MAX_EMBEDDED_COORD_BYTES} bytes; write the dataset to a .b2d or .b2z tree"
                )
            if coords:
                info["coords"] = coords
            if plan.attrs is not None:  # the Dataset's attributes, updated as a tree's are
                info["attrs"], info["dataset_attr_types"] = plain_attrs(plan.attrs, "the dataset")
            raw = dict(arr.schunk._raw_vlmeta)
            if coords or plan.attrs is not None:
                raw[XARRAY_KEY] = raw_value(info)
            if name in plan.into:
                var, start, shape, was = plan.into[name]
                write_region(arr, var, start, shape, was, nthreads, bar, vlmeta=raw)
            elif coords or plan.attrs is not None:
                arr.vlmeta[XARRAY_KEY] = info
    finally:
        arr.close()


def _into_tree(ds, root: Path, mode, append_dim, region, encoding, nthreads, bar) -> None:
    for name in ds.variables:  # the members it may write: no link there, before any byte
        _files.check_write(root / f"{name}.b2nd", root)
    journal.recover(root)  # first: its journal may name files a killed writer built beside
    _files.sweep(root.parent, root.name)
    held, work = _files.make_temp_dir(root.parent, root.name)
    try:
        # Planned under the tree's commit lock (two appenders never plan on the same sizes);
        # the arrays opened (and the stored Dataset, which a variable rewritten whole reads)
        # close after the commit's locks go.
        with contextlib.ExitStack() as arrays, journal.TreeCommit(root) as tx:
            stored = arrays.enter_context(_open_stored(root))
            plan = _plan(ds, stored, mode, append_dim, region, encoding, single=False)
            for name, (var, start, shape, was) in plan.into.items():
                arr = open_array(os.fspath(root / f"{name}.b2nd"), mode="a")
                arrays.callback(arr.close)
                with tx.frame(arr.schunk):
                    write_region(arr, var, start, shape, was, nthreads, bar)
            for name, (var, storage, stringdtype, coord) in plan.new.items():
                built = work / f"{name}.b2nd"
                extra = {DTYPE_KEY: STRINGDTYPE} if stringdtype else {}
                write_variable(var, built, storage, True, nthreads, extra, bar, coord)
                tx.add_file(built, f"{name}.b2nd")
            if plan.attrs is not None:
                attrs, types = plain_attrs(plan.attrs, "group '/'")
                write_attrs_frame(work / VLMETA_NAME, attrs, types)
                tx.add_file(work / VLMETA_NAME, VLMETA_NAME)
            tx.commit()
    finally:
        # A journal still there (its writes failed) names files built here: they stay for
        # the next reader or writer to finish the commit with.
        if not journal.pending(root):
            shutil.rmtree(work, ignore_errors=True)
        os.close(held)


def _into_zip(ds, target: Path, mode, append_dim, region, encoding, nthreads, bar) -> None:
    _files.sweep(target.parent, target.name)
    held, work = _files.make_temp_dir(target.parent, target.name)
    try:
        tree = work / "tree"
        tree.mkdir()
        with zipfile.ZipFile(target) as zf:
            for info in zf.infolist():
                dest = tree.joinpath(*_member_parts(info.filename))
                _files.check_write(dest, tree)
                if info.is_dir():
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
        _into_tree(ds, tree, mode, append_dim, region, encoding, nthreads, bar)
        put_in_place(zip_tree(tree, work / target.name), target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.close(held)


def _member_parts(name: str) -> list[str]:
    parts = [p for p in name.split("/") if p]
    if any(p in (".", "..") for p in parts) or name.startswith("/"):
        raise ValueError(f"zip member {name!r} leaves the tree")
    return parts
