"""The sources ``b2store convert`` reads, recognised by content: each opened as an array (its
attributes copied whole), a Dataset or a DataTree, as the output needs it.

A b2nd frame goes to array outputs (``.b2nd``, ``.npy``) as an array; to dataset outputs it
goes through the b2nd engine, so that its variable's name, dimensions, coordinates and
attributes are those the engine reports. Sources with groups below their root open as trees.
"""

from __future__ import annotations

import numpy as np

from .inspection import InputError, detect

__all__ = ["open_source", "pick_variable"]


def open_source(src: str, dst_kind: str, variable: str | None):
    """``("array", array-like, attrs, closer)``, ``("dataset", xarray.Dataset, None, closer)``
    or ``("tree", xarray.DataTree, None, closer)`` (a source with groups below its root).

    A b2nd frame goes to array outputs (``.b2nd``, ``.npy``) as an array, its vlmeta copied
    whole; to dataset outputs (Zarr, netCDF, trees) it goes through the b2nd engine, so that
    the variable, its dimensions, coordinates and attributes are those the engine reports.
    """
    kind = detect(src)
    if kind == "npy":
        return "array", np.load(src, mmap_mode="r"), {}, None
    if kind in ("frame", "sparse-frame"):
        from ..api import open as open_b2

        obj = open_b2(src)
        if not hasattr(obj, "shape"):
            obj.close()
            raise InputError(f"{src}: a super-chunk without array metadata (no b2nd metalayer)")
        if dst_kind in ("b2nd", "npy") or variable is not None:
            vlmeta = dict(obj.vlmeta)
            if dst_kind == "b2nd":
                vlmeta = _named(src, vlmeta)
            return "array", obj, vlmeta, obj.close
        obj.close()
        import xarray as xr

        ds = xr.open_dataset(src, engine="b2nd", chunks={})
        return "dataset", ds, None, ds.close
    if kind == "zarr":
        import zarr

        node = zarr.open(store=src, mode="r")
        if isinstance(node, zarr.Array):
            return "array", node, dict(node.attrs), None
        if any(True for _ in node.groups()):
            return _tree(src, "zarr")
        import xarray as xr

        ds = xr.open_zarr(src, chunks={}, consolidated=None)
        return "dataset", ds, None, ds.close
    if kind == "tree":
        from ..tree import open_tree

        if set(open_tree(src).groups()) != {"/"}:
            return _tree(src, "b2nd")
        import xarray as xr

        ds = xr.open_dataset(src, engine="b2nd", chunks={})
        return "dataset", ds, None, ds.close
    if kind in ("netcdf", "hdf5"):
        import xarray as xr

        if _has_hdf5_groups(src):
            return _tree(src, "h5netcdf")
        try:
            ds = xr.open_dataset(src, chunks={})
        except (ValueError, OSError):
            # Plain HDF5 (no netCDF dimensions): h5netcdf names the dimensions itself.
            ds = xr.open_dataset(src, engine="h5netcdf", phony_dims="sort", chunks={})
        return "dataset", ds, None, ds.close
    raise InputError(f"{src}: a single Blosc chunk; nothing to convert (b2store decode reads it)")


def _named(src: str, vlmeta: dict) -> dict:
    """``vlmeta`` with the name the b2nd engine gives the source's variable stored in it, so
    that the copy (another file name) opens as the same variable."""
    import xarray as xr

    from ..integrations.xarray.conventions import FORMAT_VERSION, XARRAY_KEY

    with xr.open_dataset(src, engine="b2nd", chunks=None) as ds:
        names = list(ds.data_vars)
    info = vlmeta.get(XARRAY_KEY)
    if len(names) != 1 or (isinstance(info, dict) and info.get("name") == names[0]):
        return vlmeta
    info = dict(info) if isinstance(info, dict) else {"version": FORMAT_VERSION}
    return {**vlmeta, XARRAY_KEY: {**info, "name": names[0]}}


def _has_hdf5_groups(src: str) -> bool:
    """Whether a netCDF-4/HDF5 file holds groups below its root (netCDF-3 has none)."""
    try:
        import h5py
    except ImportError:  # without h5py, xarray reads the root group only, as before
        return False
    try:
        with h5py.File(src, "r") as f:
            return any(isinstance(item, h5py.Group) for item in f.values())
    except OSError:  # netCDF-3: not HDF5
        return False


def _tree(src: str, engine: str):
    import xarray as xr

    kw = {"consolidated": None} if engine == "zarr" else {}
    dt = xr.open_datatree(src, engine=engine, chunks={}, **kw)
    return "tree", dt, None, dt.close


def pick_variable(ds, src: str, variable: str | None):
    names = list(ds.data_vars)
    if variable is None:
        if len(names) != 1:
            raise InputError(
                f"{src} holds {len(names)} variables ({', '.join(names)}): "
                "choose one with --variable"
            )
        variable = names[0]
    if variable not in ds.variables:
        raise InputError(f"{src}: no variable {variable!r} (it has {', '.join(names)})")
    return ds[variable]
