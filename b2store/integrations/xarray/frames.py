"""Writing xarray Datasets and DataTrees as b2nd frames: one frame per variable, alone or in a
python-blosc2 ``.b2d``/``.b2z`` tree, encoded chunk by chunk (dask data is never loaded whole).

The metadata conventions are those the ``b2nd`` engine reads (see
:mod:`b2store.integrations.xarray.backend`).
"""

from __future__ import annotations

import math
import os
import shutil
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path

import msgpack
import numpy as np
import xarray as xr
from xarray import conventions
from xarray.backends.common import ensure_dtype_not_object

from ... import _files, _platform, _progress
from ..._userpath import names_user_path
from ...chunk.encoder import writable_dtype
from ...frame.schunk import SChunk
from ...frame.sources import is_url
from ...nd.chunks import cparams_for, encode_array_chunk
from ...nd.geometry import array_to_chunk, chunk_grid, chunk_nitems, chunk_region
from ...nd.meta import B2ndMeta
from ...nd.shapes import default_chunks_blocks
from .append import resolve_mode, write_into
from .conventions import (
    DIMENSION_KEY,
    DTYPE_KEY,
    FORMAT_VERSION,
    MIRRORS_KEY,
    STRINGDTYPE,
    WHOLE_BYTES,
    XARRAY_KEY,
    is_stringdtype,
    xb2_mirrors,
)
from .encoding import (
    CF_KEYS,
    STORAGE_KEYS,
    check_string_fill,
    check_string_width,
    finish_encoding,
    object_strings,
    split_encoding,
)
from .objects import to_object

__all__ = ["to_b2nd", "STORAGE_KEYS", "CF_KEYS"]

#: Coordinates a single-frame Dataset may keep in its vlmeta (larger ones want a tree).
MAX_EMBEDDED_COORD_BYTES = 1 << 20
VLMETA_NAME = "__vlmeta__.b2f"
EMBED_NAME = "embed.b2e"
_FRAME_SUFFIXES = (".b2nd", ".b2frame")


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
        ``.b2z``, stored whole in one request (:mod:`.objects`).
    encoding : dict, optional
        ``{variable: {key: value}}`` (for a DataTree ``{group_path: {variable: {...}}}``).
        Storage keys: ``codec`` (and ``codec_meta``, the parameter of c-blosc2's plugin
        codecs ZFP and NDLZ), ``clevel``, ``filters``, ``filters_meta``, ``splitmode``,
        ``chunks``, ``blocks``; CF keys: ``dtype``, ``_FillValue``, ``missing_value``,
        ``scale_factor``, ``add_offset``, ``units``, ``calendar``, ``_Unsigned`` and the CF
        linkage (``coordinates``, ``grid_mapping``, ``bounds``, ``cell_measures``,
        ``formula_terms``, ...), also taken from each variable's own ``.encoding``. Unset
        storage keys come from the variable's own encoding (when it still fits), its dask
        chunks, then python-blosc2's defaults. A key that cannot be stored, given here or in
        a variable's ``.encoding``, raises a ValueError (other backends' storage keys in
        ``.encoding`` are ignored): see :mod:`.encoding`.
    mode : {"w", "w-", "a", "a-", "r+"}, optional
        As ``to_zarr``: ``"w"`` replaces what is at ``path``; ``"w-"`` (or ``"x"``) refuses
        to; ``"a"`` writes into the Dataset stored there (created if absent): variables it
        holds are overwritten (or, along ``append_dim``, appended to), others added;
        ``"a-"`` is ``"a"`` leaving stored variables without ``append_dim`` as they are;
        ``"r+"`` writes into stored variables only (``region``). By default ``"a"`` with
        ``append_dim``, ``"r+"`` with ``region``, else ``"w"``. Values written into stored
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
        A tqdm bar on stderr counting the bytes written: always (True), never (False), or
        (None, the default) when stderr is a terminal and the data is large (more than
        64 MiB or 16 chunks, see :mod:`b2store._progress`).
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
    if is_url(path):
        return to_object(
            to_b2nd, obj, path, storage_options, mode, layout, encoding=encoding,
            append_dim=append_dim, region=region, contiguous=contiguous, nthreads=nthreads,
            progress=progress,
        )  # fmt: skip
    if storage_options:
        raise ValueError("storage_options are for a URL path (s3://...), not a local path")
    mode = resolve_mode(mode, append_dim, region)
    path = os.fspath(path)
    # Before anything is written, in every mode: a path inside a tree through a link planted
    # there (a group directory, a member) is refused, never followed out of the tree.
    _files.check_write(path)
    if mode in ("a", "a-", "r+") and os.path.exists(path):
        write_into(
            obj,
            path,
            mode=mode,
            append_dim=append_dim,
            region=region,
            encoding=encoding,
            nthreads=nthreads,
            progress=progress,
        )
        return path
    if mode == "r+":
        raise FileNotFoundError(f"{path}: nothing to write into (mode='r+')")
    if region is not None:
        raise FileNotFoundError(f"{path}: nothing to write a region into")
    if mode not in ("w", "a", "a-") and os.path.lexists(path):
        raise FileExistsError(f"{path} exists (mode={mode!r})")
    groups, encodings = groups_of(obj, encoding)
    layout = _layout(groups, path, layout)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built in a new directory beside the target (its name carries this process's pid and
    # it is locked while this process lives); what killed writers left there goes first.
    _files.sweep(target.parent, target.name)
    held, work = _files.make_temp_dir(target.parent, target.name)
    nbytes = sum(int(ds.nbytes) for ds in groups.values())
    nchunks = sum(_nchunks(var) for ds in groups.values() for var in ds.variables.values())
    bar = _progress.bar(nbytes, target.name, progress, large=_progress.is_large(nbytes, nchunks))
    try:
        if layout == "frame":
            built = work / target.name
            _write_frame(groups["/"], encodings["/"], built, contiguous, nthreads, bar)
        else:
            built = work / "tree"
            _write_tree(groups, encodings, built, nthreads, bar)
            if layout == "b2z":
                built = _zip_tree(built, work / target.name)
        _replace(built, target)
    finally:
        bar.close()
        shutil.rmtree(work, ignore_errors=True)
        os.close(held)
    return path


def groups_of(obj, encoding: Mapping | None) -> tuple[dict, dict]:
    """``({group path: Dataset}, {group path: encoding})`` of what ``to_b2nd`` writes."""
    if isinstance(obj, xr.DataArray):
        name = obj.name if obj.name is not None else "__xarray_dataarray_variable__"
        obj = obj.to_dataset(name=name)
    if isinstance(obj, xr.DataTree):
        groups = {node.path: node.to_dataset(inherit=False) for node in obj.subtree}
        encodings = dict(encoding or {})
        if set(encodings) - set(groups):
            raise ValueError(f"encoding for unknown groups: {sorted(set(encodings) - set(groups))}")
        return groups, encodings
    if isinstance(obj, xr.Dataset):
        return {"/": obj}, {"/": encoding or {}}
    raise TypeError(f"to_b2nd writes xarray Datasets and DataTrees, not {type(obj).__name__}")


def _nchunks(var: xr.Variable) -> int:
    """The dask chunks of ``var`` (1 for in-memory data): a guess at the chunks written."""
    return math.prod(len(c) for c in var.chunks) if var.chunks else 1


def _layout(groups: dict, path: str, layout: str | None) -> str:
    suffix = os.path.splitext(path.rstrip("/"))[1].lower()
    single = list(groups) == ["/"] and len(groups["/"].data_vars) == 1
    if layout is None:
        if suffix in _FRAME_SUFFIXES:
            layout = "frame"
        elif suffix in (".b2d", ".b2z"):
            layout = suffix[1:]
        else:
            layout = "frame" if single else "b2d"
    if layout not in ("frame", "b2d", "b2z"):
        raise ValueError(f"layout must be 'frame', 'b2d' or 'b2z', not {layout!r}")
    if layout == "frame" and not single:
        raise ValueError(
            "a single .b2nd frame holds one data variable (with its coordinates); "
            f"write {len(groups)} group(s) / {sum(len(g.data_vars) for g in groups.values())} "
            "data variables to a .b2d or .b2z tree"
        )
    return layout


def _replace(built: Path, target: Path) -> None:
    """Put ``built`` where ``target`` is, replacing a file or directory there."""
    _files.check_write(target)  # again: what was built beside goes only where it was meant
    if (
        target.is_dir()
        and not target.is_symlink()
        and built.is_dir()
        and _platform.exchange(built, target)
    ):
        shutil.rmtree(built, ignore_errors=True)  # now the old tree
    elif target.is_dir() and not target.is_symlink():
        # Two renames: a process killed between them leaves the old tree at ``old``.
        old = target.with_name(f".{target.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
        os.replace(built, target)
        shutil.rmtree(old, ignore_errors=True)
    elif built.is_dir() and target.exists():
        target.unlink()
        os.replace(built, target)
    else:
        os.replace(built, target)


# --- encoding variables ------------------------------------------------------------------------


def _encode_group(ds: xr.Dataset, encoding: Mapping) -> tuple[dict, dict, dict, set, set]:
    """CF-encoded variables and attributes of ``ds``, the storage options of each variable,
    the names of its coordinates, and those of its StringDType variables (stored as ``<U``,
    read back as StringDType)."""
    unknown = set(encoding) - set(ds.variables)
    if unknown:
        raise ValueError(f"encoding for variables not in the dataset: {sorted(map(str, unknown))}")
    ds = ds.copy(deep=False)
    storage = {}
    for name, var in ds.variables.items():
        if not isinstance(var.dtype, np.dtype):
            # a pandas extension type (xarray keeps one for some string coordinates):
            # refused, named, before xarray's CF encoder fails on it with a TypeError of its own
            writable_dtype(var.dtype)
        if name is not None and not isinstance(name, str):
            # the type and words of xarray's own writers (a Hashable is no file name)
            raise TypeError(
                f"Invalid name {name!r} for DataArray or Dataset key: must be either a "
                "string or None for serialization to b2nd"
            )
        if name == "":
            raise ValueError(
                f"Invalid name {name!r} for DataArray or Dataset key: string must be "
                "length 1 or greater for serialization to b2nd"
            )
        if name is None or "/" in name or name == VLMETA_NAME[:-4]:
            raise ValueError(f"variable name {name!r} cannot name a b2nd frame")
        storage[name], var.encoding = split_encoding(name, var, encoding.get(name))
        check_string_width(name, var)
    sd_names = {n for n, v in ds.variables.items() if is_stringdtype(v.dtype)}
    variables, attrs = conventions.encode_dataset_coordinates(ds)
    for name, var in variables.items():
        variables[name] = object_strings(var)
        check_string_fill(name, variables[name])
    variables, attrs = conventions.cf_encoder(variables, attrs)
    for name, var in variables.items():
        # xarray's netCDF writers' next step: object arrays typed from their items, missing
        # strings as "" (numbers as NaN), mixed items refused naming the variable
        variables[name] = finish_encoding(name, ensure_dtype_not_object(var, name=name))
    return variables, attrs, storage, set(ds.coords), sd_names


def plain_attrs(attrs: Mapping, where: str) -> tuple[dict, dict]:
    """Attributes as plain msgpack values, and the NumPy types to restore them with."""
    plain, types = {}, {}
    for key, value in attrs.items():
        if not isinstance(key, str):
            raise TypeError(f"attribute names of {where} must be str, not {key!r}")
        if isinstance(value, np.ndarray):
            types[key] = "[" + value.dtype.str
            value = value.tolist()
        elif isinstance(value, np.generic):
            if not isinstance(value, (np.str_, np.bytes_)):
                types[key] = value.dtype.str
            value = value.item()
        plain[key] = _plain(value, f"attribute {key!r} of {where}")
    return plain, types


def _plain(value, where: str):
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v, where) for k, v in value.items()}
    raise TypeError(f"{where}: {type(value).__name__} values cannot be stored in vlmeta")


def _fixed_width(var: xr.Variable, name) -> xr.Variable:
    """Object-dtype strings as fixed-width items (b2nd holds fixed-size items only); so too
    a StringDType the encoders left (xarray 2026.2 declares a lazily read StringDType
    variable object while its chunks compute as StringDType)."""
    if var.dtype != object and var.dtype.kind != "T":
        return var
    if hasattr(var.data, "dask"):
        # the width is only known once every item is: say so, as xarray's writers do
        warnings.warn(
            f"variable {name} has data in the form of a dask array with dtype=object, which "
            "means it is being loaded into memory to determine a data type that can be "
            "safely stored on disk. To avoid this, coerce this variable to a fixed-size "
            "dtype with astype() before saving it.",
            xr.SerializationWarning,
            stacklevel=2,
        )
    values = np.asarray(var.values)
    if values.dtype.kind == "T":
        values = values.astype(object)  # NumPy keeps a StringDType through astype(str)
    flat = values.ravel().tolist()
    if all(isinstance(v, str) for v in flat):
        data = values.astype(str) if values.size else values.astype("U1")
    elif all(isinstance(v, bytes) for v in flat):
        data = values.astype(bytes) if values.size else values.astype("S1")
    else:
        raise TypeError(
            f"variable {name!r} holds both str and bytes strings: b2nd stores one kind; "
            "decode the bytes (or encode the str) first"
        )
    return xr.Variable(var.dims, data, var.attrs, var.encoding)


# --- writing frames ----------------------------------------------------------------------------


def _write_frame(
    ds, encoding, path: Path, contiguous: bool, nthreads, bar, write_variable=None
) -> None:
    """``ds`` (one data variable, its coordinates in its vlmeta) as one frame at ``path``,
    by ``write_variable`` (:func:`_write_variable`'s arguments; it by default)."""
    variables, attrs, storage, coord_names, sd_names = _encode_group(ds, encoding)
    (name,) = [n for n in variables if n not in coord_names]
    coords, total = {}, 0
    for cname in coord_names:
        var = _fixed_width(variables[cname], cname)
        data = np.asarray(var.values)
        total += data.nbytes
        if total > MAX_EMBEDDED_COORD_BYTES:
            raise ValueError(
                f"the coordinates of {name!r} hold more than {MAX_EMBEDDED_COORD_BYTES} bytes; "
                "write the dataset to a .b2d or .b2z tree instead"
            )
        cattrs, ctypes = plain_attrs(var.attrs, f"coordinate {cname!r}")
        coords[cname] = {
            "dims": list(var.dims),
            "dtype": data.dtype.str,
            "data": data,
            "attrs": cattrs,
            "attr_types": ctypes,
        }
        if cname in sd_names:
            coords[cname][DTYPE_KEY] = STRINGDTYPE
        elif data.dtype == WHOLE_BYTES:
            coords[cname][DTYPE_KEY] = WHOLE_BYTES
    dattrs, dtypes = plain_attrs(attrs, "the dataset")
    extra = {"name": name, "attrs": dattrs, "dataset_attr_types": dtypes, "coords": coords}
    if name in sd_names:
        extra[DTYPE_KEY] = STRINGDTYPE
    write = write_variable or _write_variable
    write(variables[name], path, storage[name], contiguous, nthreads, extra, bar)


def _write_tree(groups: dict, encodings: dict, root: Path, nthreads, bar) -> None:
    root.mkdir()
    _write_embed(root / EMBED_NAME)
    for gpath, ds in groups.items():
        gdir = root.joinpath(*[p for p in gpath.split("/") if p])
        gdir.mkdir(parents=True, exist_ok=True)
        variables, attrs, storage, coords, sd_names = _encode_group(ds, encodings.get(gpath) or {})
        gattrs, gtypes = plain_attrs(attrs, f"group {gpath!r}")
        _write_attrs_frame(gdir / VLMETA_NAME, gattrs, gtypes)
        for name, var in variables.items():
            extra = {DTYPE_KEY: STRINGDTYPE} if name in sd_names else {}
            path = gdir / f"{name}.b2nd"
            coord = name in coords
            _write_variable(var, path, storage[name], True, nthreads, extra, bar, coord)


def _write_embed(path: Path) -> None:
    """python-blosc2's ``embed.b2e``: an empty frame marking a TreeStore (no embedded values)."""
    schunk = SChunk.create(
        path, typesize=1, meta={"b2tree": msgpack.packb({"version": 1}, use_bin_type=True)}
    )
    with schunk:
        schunk.vlmeta["estore_metadata"] = {"embed_map": {}, "current_offset": 0}


def _write_attrs_frame(path: Path, attrs: dict, types: dict) -> None:
    """A group's ``__vlmeta__.b2f``: an empty frame whose vlmeta are the group attributes."""
    with SChunk.create(path, typesize=1) as schunk:
        schunk.vlmeta.update(_with_info(attrs, {"attr_types": types} if types else {}))


def _with_info(attrs: dict, info: dict) -> dict:
    """Attributes as vlmeta, with ``_xarray`` holding ``info`` and the attributes whose names
    are too long for a vlmetalayer (31 bytes)."""
    vlmeta, long = {}, {}
    for key, value in attrs.items():
        (long if len(key.encode()) > 31 else vlmeta)[key] = value
    info = {k: v for k, v in info.items() if v or k == "name"}
    if long:
        info["long_attrs"] = long
    if info:
        vlmeta[XARRAY_KEY] = {"version": FORMAT_VERSION, **info}
    return vlmeta


def _write_variable(
    var, path: Path, storage: dict, contiguous: bool, nthreads, extra, bar, coord=False
) -> None:
    """One variable as one b2nd frame, its chunks computed and encoded in C order; ``coord``
    when it is one of a tree's coordinates."""
    var, meta, cparams, vlmeta = frame_plan(var, Path(path).stem, storage, extra, coord)
    with new_frame(path, meta, cparams, contiguous=contiguous) as schunk:
        if math.prod(meta.shape):
            schunk.extend_chunks(_chunks_of(var, meta, cparams, nthreads, bar))
        schunk.vlmeta.update(vlmeta)


def new_frame(path, meta: B2ndMeta, cparams, **where) -> SChunk:
    """An empty frame at ``path`` for the b2nd array ``meta`` (``where``: ``contiguous``,
    ``storage_options``, ``exclusive``, as ``SChunk.create`` takes them)."""
    chunksize = chunk_nitems(meta.chunkshape, meta.blockshape) * meta.dtype.itemsize
    return SChunk.create(
        path,
        chunksize=chunksize if math.prod(meta.shape) else -1,
        params=cparams,
        meta={"b2nd": meta.to_bytes()},
        **where,
    )


def frame_plan(var, stem: str, storage: dict, extra: dict, coord: bool = False):
    """``(variable, B2ndMeta, chunk params, vlmeta)`` of the frame ``var`` is written as
    (``stem``: its name where ``extra`` names none, a tree's member ``name.b2nd``)."""
    var = _fixed_width(var, extra.get("name", stem))
    if var.dtype == WHOLE_BYTES:
        extra = {**extra, DTYPE_KEY: WHOLE_BYTES}
    dtype = writable_dtype(var.dtype)  # a writer's input: never B2ndMeta's FormatError
    shape = tuple(var.shape)
    chunks, blocks = _chunking(var, storage)
    meta = B2ndMeta(shape=shape, chunkshape=chunks, blockshape=blocks, dtype=dtype)
    cparams = cparams_for(
        dtype,
        blocks,
        codec=storage.get("codec", "zstd"),
        clevel=storage.get("clevel", 5),
        filters=storage.get("filters"),
        filters_meta=storage.get("filters_meta"),
        splitmode=storage.get("splitmode", "auto"),
        codec_meta=storage.get("codec_meta", 0),
    )
    attrs, types = plain_attrs(var.attrs, f"variable {stem!r}")
    # xarray-blosc2's reader names dimensions from ``dims`` (a lone frame's variable from
    # ``var``) and tells coordinates by ``is_coord``: copies of what _ARRAY_DIMENSIONS and
    # _xarray say, listed in _xarray so that b2store's readers skip them.
    mirrors = xb2_mirrors(var.dims, extra.get("name"), attrs, coord)
    info = {**extra, "attr_types": types, MIRRORS_KEY: sorted(mirrors)}
    vlmeta = {
        DIMENSION_KEY: [str(d) for d in var.dims],
        **mirrors,
        **_with_info(attrs, info),
    }
    return var, meta, cparams, vlmeta


def _chunking(var: xr.Variable, storage: dict) -> tuple[tuple, tuple]:
    chunks, blocks = storage.get("chunks"), storage.get("blocks")
    if chunks is None and var.chunks is not None and var.ndim:
        # Uniform dask chunks become the frame's chunks: each task then fills whole chunks.
        if all(len(set(c[:-1])) <= 1 and c[-1] <= c[0] for c in var.chunks):
            chunks = tuple(c[0] for c in var.chunks)
    if isinstance(chunks, Mapping):
        chunks = tuple(chunks.get(d, n) for d, n in zip(var.dims, var.shape))
    return default_chunks_blocks(
        var.shape,
        var.dtype.itemsize,
        chunks=chunks,
        blocks=blocks,
        codec=storage.get("codec", "zstd"),
        clevel=storage.get("clevel", 5),
        filters=storage.get("filters"),
        filters_meta=storage.get("filters_meta"),
        splitmode=storage.get("splitmode", "auto"),
        codec_meta=storage.get("codec_meta", 0),
    )


def _chunks_of(var: xr.Variable, meta: B2ndMeta, cparams: dict, nthreads, bar):
    """The encoded chunks of ``var``; dask data is computed a few chunks at a time."""
    grid = chunk_grid(meta.shape, meta.chunkshape)
    regions = [chunk_region(c, meta.shape, meta.chunkshape) for c in np.ndindex(*grid)]
    if not grid:
        regions = [()]
    data = var.data
    is_dask = hasattr(data, "dask")
    batch = max(1, os.cpu_count() or 1) if is_dask else 1
    for start in range(0, len(regions), batch):
        part = regions[start : start + batch]
        if is_dask:
            import dask

            values = dask.compute(*[data[r] for r in part])
        else:
            values = [var[r].values if r else var.values for r in part]
        for value in values:
            block = np.asarray(value, dtype=meta.dtype)
            buf = array_to_chunk(block, meta.chunkshape, meta.blockshape)
            yield encode_array_chunk(buf, meta.dtype, cparams, nthreads)
            bar.update(block.nbytes)


def _zip_tree(tree: Path, zpath: Path) -> Path:
    """A ``.b2z``: the tree's files stored uncompressed, largest first, ``embed.b2e`` last
    (as python-blosc2 writes it), so that every member is a frame readable in place."""
    files = [
        p
        for p in tree.rglob("*")
        if p.is_file() and p.name != EMBED_NAME and not p.name.startswith(".")  # (locks)
    ]
    files.sort(key=lambda p: (-p.stat().st_size, p.as_posix()))
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_STORED) as zf:
        for p in [*files, tree / EMBED_NAME]:
            zf.write(p, p.relative_to(tree).as_posix())
    return zpath
