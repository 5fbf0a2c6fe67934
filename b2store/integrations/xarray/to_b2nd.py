"""``to_b2nd``, the one entry of every Dataset write: it chooses the way and hands on. A new
Dataset is written by :mod:`.frames` (beside its target, then put in its place), a write
into a stored one (``mode="a"``, ``append_dim``, ``region``) by :mod:`.append`, and a URL
by :mod:`.object_store`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

from ... import _files
from ..._userpath import names_user_path
from ...errors import TargetExistsError
from ...frame.sources import is_url
from .append import resolve_mode, write_into
from .encoding import CF_KEYS, STORAGE_KEYS
from .frames import WAY_OUT, write_new
from .object_store import upload_for

__all__ = ["to_b2nd", "STORAGE_KEYS", "CF_KEYS"]


@names_user_path
def to_b2nd(
    obj,
    path,
    *,
    encoding: Mapping | None = None,
    mode: str | None = None,
    append_dim: str | None = None,
    region: Mapping | str | None = None,
    layout: str | None = None,
    contiguous: bool = True,
    nthreads: int | None = None,
    progress: bool | None = None,
    storage_options: Mapping | None = None,
) -> str:
    """Write a Dataset, DataArray or DataTree as Blosc2 b2nd frames.

    Parameters
    ----------
    obj : xarray.Dataset, xarray.DataArray or xarray.DataTree
        What to write. Dask-backed variables are computed and written one chunk (a few
        at a time) after another, never loaded whole.
    path : str or os.PathLike
        Where: ``x.b2nd`` (one frame), ``x.b2d`` (a directory tree) or ``x.b2z`` (a zip). An
        fsspec URL (``s3://bucket/x.b2nd``, with ``storage_options``) takes a ``.b2nd`` or a
        ``.b2z``, stored whole in one request (:mod:`.object_store`).
    encoding : dict, optional
        ``{variable: {key: value}}`` (for a DataTree ``{group_path: {variable: {...}}}``).
        Storage keys: ``codec`` (and ``codec_meta``, the parameter of c-blosc2's plugin
        codecs ZFP and NDLZ), ``clevel``, ``filters``, ``filters_meta``, ``splitmode``,
        ``chunks``, ``blocks``; CF keys: ``dtype``, ``_FillValue``, ``missing_value``,
        ``scale_factor``, ``add_offset``, ``units``, ``calendar``, ``_Unsigned`` and the CF
        linkage (``coordinates``, ``grid_mapping``, ``bounds``, ``cell_measures``,
        ``formula_terms``, ...), also taken from each variable's own ``.encoding``. Unset
        storage keys come from the variable's own encoding (when it still fits), its dask
        chunks, then python-blosc2's defaults, with Zstd at clevel 1 rather than 5 (2-3x
        faster to write, 3% more bytes). A key that cannot be stored, given here or in a
        variable's ``.encoding``, raises a ValueError (other backends' storage keys in
        ``.encoding`` are ignored): see :mod:`.encoding`.
    mode : {"w-", "w", "a", "a-", "r+"}, optional
        As ``to_zarr``: ``"w-"`` (or ``"x"``) refuses an existing ``path``
        (:class:`b2store.TargetExistsError`, a FileExistsError, naming the mode to pass);
        ``"w"`` replaces what is there; ``"a"`` writes into the Dataset stored there
        (created if absent): variables it holds are overwritten (or, along
        ``append_dim``, appended to), others added;
        ``"a-"`` is ``"a"`` leaving stored variables without ``append_dim`` as they are;
        ``"r+"`` writes into stored variables only (``region``). By default ``"a"`` with
        ``append_dim``, ``"r+"`` with ``region``, else ``"w-"``. Values written into stored
        variables are encoded with what is stored (CF encoding such as ``dtype``,
        ``scale_factor``, ``_FillValue`` and the ``units`` of times; chunks, blocks, codec):
        ``encoding`` for them is refused. Only the chunks the new values touch are written;
        a ``.b2nd`` frame commits in one step, a ``.b2d`` tree in one journal, a ``.b2z`` is
        rebuilt beside and renamed (a copy of the whole zip). See
        :mod:`b2store.integrations.xarray.append` and ``docs/workflows/append.md``.
    append_dim : str, optional
        The stored dimension the Dataset's values are appended along (mode ``"a"``).
    region : dict or "auto", optional
        ``{dim: slice}``, where in the stored variables the Dataset's values go (its
        variables must each span one of these dimensions; index coordinates are not
        written), or ``"auto"``: found from the coordinates' values.
    layout : {"frame", "b2d", "b2z"}, optional
        By default from the suffix of ``path``; without one, a single frame for a Dataset
        with one data variable, else a ``.b2d`` tree.
    contiguous : bool
        For the single-frame layout: False writes a sparse frame (a directory).
    nthreads : int, optional
        Threads per chunk encoding (default: the cores, as array writes).
    progress : bool, optional
        A tqdm bar on stderr counting the bytes written, as :func:`b2store.asarray` shows
        one: always (True), never (False), or (None) for large data on a terminal.
    storage_options : mapping, optional
        fsspec's options for a URL ``path`` (credentials, endpoint).

    Returns
    -------
    str
        The path written.

    Notes
    -----
    A single frame holds one data variable; its coordinates (at most 1 MiB) and the
    Dataset's attributes go in its ``_xarray`` vlmeta. A tree holds every variable as
    ``<group>/<name>.b2nd`` and each group's attributes in ``<group>/__vlmeta__.b2f``, the
    layout python-blosc2's ``TreeStore`` reads.

    Examples
    --------
    >>> import numpy as np, xarray as xr, tempfile, os
    >>> ds = xr.Dataset({"t": (("y", "x"), np.arange(6.0).reshape(2, 3))}, {"x": [10, 20, 30]})
    >>> p = to_b2nd(ds, os.path.join(tempfile.mkdtemp(), "t.b2nd"))
    >>> xr.open_dataset(p, engine="b2nd").t.sel(x=20).values
    array([1., 4.])
    """
    upload = None
    if is_url(path):
        # An object store: what it can take is decided first; the Dataset is written as for
        # a local path (straight there, or in a local temporary), then stored.
        upload = upload_for(
            path, storage_options, mode, layout, append_dim=append_dim, region=region,
            contiguous=contiguous,
        )  # fmt: skip
        mode, layout, target, into = upload.mode, upload.layout, upload.target, upload.into
    else:
        if storage_options:
            raise ValueError(
                f"storage_options are for a URL path (s3://...), not a local path: drop them "
                f"for {os.fspath(path)}"
            )
        mode = resolve_mode(mode, append_dim, region)
        target = path = os.fspath(path)
        # Before anything is written, in every mode: a path inside a tree through a link
        # planted there (a group directory, a member) is refused, never followed out of it.
        _files.check_write(path)
        into = mode in ("a", "a-", "r+") and os.path.exists(path)
        if not into:
            _check_new(path, mode, region)
    with upload or contextlib.nullcontext():
        if into:
            write_into(
                obj, target, mode=mode, append_dim=append_dim, region=region, encoding=encoding,
                nthreads=nthreads, progress=progress,
                storage_options=None if upload is None else upload.options,
            )  # fmt: skip
        else:
            write_new(
                obj, target, encoding=encoding, layout=layout, contiguous=contiguous,
                nthreads=nthreads, progress=progress, mode=mode,
                write=None if upload is None else upload.write,
            )  # fmt: skip
        if upload is not None:
            upload.store()
    return path


def _check_new(path: str, mode: str, region) -> None:
    """Refuse a new Dataset at the local ``path`` where ``mode`` or ``region`` asks to write
    into one stored, or ``path`` is taken and ``mode`` does not replace it."""
    if mode == "r+":
        raise FileNotFoundError(
            f"{path}: nothing to write into (mode='r+' writes into a stored Dataset only); "
            "write it first (mode='w-', the default)"
        )
    if region is not None:
        raise FileNotFoundError(
            f"{path}: nothing to write a region into; write the Dataset first (mode='w-', the "
            "default)"
        )
    if mode not in ("w", "a", "a-") and os.path.lexists(path):
        raise TargetExistsError(path, mode, WAY_OUT)
