"""The frame-writing primitives of ``to_b2nd``: a Dataset's variables as b2nd frames (one
per variable, as :mod:`.encoding` encoded them, chunk by chunk, dask data never loaded
whole), the attributes frames and ``embed.b2e`` of a python-blosc2 ``.b2d``/``.b2z`` tree,
the layout a path asks for, and a new Dataset written beside its target and put in its
place (:func:`write_new`).

Writes into a stored Dataset (:mod:`.append`) and into an object store
(:mod:`.object_store`) are made of the same pieces. The metadata conventions are those the
``b2nd`` engine reads (see :mod:`b2store.integrations.xarray.backend`).
"""

from __future__ import annotations

import math
import os
import shutil
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import msgpack
import numpy as np
import xarray as xr

from ... import _files, _platform, _progress, _sync
from ...chunk.encoder import writable_dtype
from ...errors import TargetExistsError
from ...frame.schunk import SChunk
from ...frame.staging import place_new
from ...nd.chunks import cparams_for, encode_array_chunk
from ...nd.geometry import array_to_chunk, chunk_grid, chunk_nitems, chunk_region
from ...nd.meta import B2ndMeta
from ...nd.shapes import default_chunks_blocks
from ...tree import EMBED_NAME, VLMETA_NAME
from .conventions import (
    DIMENSION_KEY,
    DTYPE_KEY,
    FORMAT_VERSION,
    MIRRORS_KEY,
    STRINGDTYPE,
    WHOLE_BYTES,
    XARRAY_KEY,
)
from .encoding import CHAR_DIM, encode_groups

__all__ = [
    "MAX_EMBEDDED_COORD_BYTES",
    "choose_layout",
    "chunks_of",
    "frame_plan",
    "groups_of",
    "new_frame",
    "plain_attrs",
    "put_in_place",
    "values_at",
    "write_attrs_frame",
    "write_frame",
    "write_new",
    "whole_bytes_variable",
    "write_variable",
    "xb2_mirrors",
    "zip_tree",
]

#: Coordinates a single-frame Dataset may keep in its vlmeta (larger ones want a tree).
MAX_EMBEDDED_COORD_BYTES = 1 << 20
#: ``to_b2nd``'s Zstd level when ``encoding`` sets none (c-blosc2 gives zstd level 1 for it).
#: python-blosc2's default, clevel 5, is zstd level 9: on three 70 MB float32 fields it took
#: 2.4-3x as long as clevel 1 for 3% fewer bytes, and made a Dataset's write 0.4x
#: ``to_zarr``'s; clevel 1 writes it 1.1x as fast, 15% smaller (bench/bench_write.py).
#: Arrays (``b2store.asarray``, ``zeros``, ...) keep python-blosc2's clevel 5.
DEFAULT_CLEVEL = 1
_FRAME_SUFFIXES = (".b2nd", ".b2frame")


#: What to pass to write where a Dataset is stored (the words of every refusal to replace it).
WAY_OUT = (
    "pass mode='w' to replace it, or mode='a' to write into it (append_dim='<dim>' to append "
    "along a dimension)"
)


def write_new(
    obj,
    path: str,
    *,
    encoding,
    layout,
    contiguous: bool,
    nthreads,
    progress,
    mode: str = "w",
    write: Callable | None = None,
) -> None:
    """``obj`` written at the local ``path`` as a new frame or tree (what ``to_b2nd`` does
    where it writes into nothing stored): built in a new directory beside ``path``, then put
    in its place in one step (:func:`put_in_place`; replacing what is there in mode "w"
    only). Given ``write`` (:func:`write_frame`'s), a single frame is written by it straight
    at ``path`` instead (an object store's sparse frame: chunk objects first, index last)."""
    groups, encodings = groups_of(obj, encoding)
    layout = choose_layout(groups, path, layout)
    # Every group encoded first, in one call: what cannot be stored is refused before a byte
    # is written.
    encoded = encode_groups(groups, encodings)
    if write is not None:
        write_frame(encoded["/"], path, False, nthreads, None, write)
        return
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
        # Nothing in ``work`` is seen before put_in_place: under the "commit" setting each
        # frame is synced once as it is closed, not around each of its changes (6 fsyncs a
        # frame before, 2 now: the empty frame's creation and the close).
        with _sync.staged():
            if layout == "frame":
                built = work / target.name
                write_frame(encoded["/"], built, contiguous, nthreads, bar)
            else:
                built = work / "tree"
                _write_tree(encoded, built, nthreads, bar)
                if layout == "b2z":
                    built = zip_tree(built, work / target.name)
        put_in_place(built, target, mode)
    finally:
        bar.close()
        shutil.rmtree(work, ignore_errors=True)
        os.close(held)


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


def choose_layout(groups: dict, path: str, layout: str | None) -> str:
    """The layout ``to_b2nd`` writes ``groups`` in at ``path``: "frame", "b2d" or "b2z"."""
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


def put_in_place(built: Path, target: Path, mode: str = "w") -> None:
    """Put ``built`` where ``target`` is, replacing a file or directory there in mode "w";
    in any other mode, refusing to (one rename that does not replace, where the system has
    one: a target another process made after ``to_b2nd`` checked is kept)."""
    _files.check_write(target)  # again: what was built beside goes only where it was meant
    if mode != "w":
        if not place_new(built, target):
            raise TargetExistsError(target, mode, WAY_OUT)
        return
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


# --- attributes as vlmeta -------------------------------------------------------------------


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


# --- writing frames ----------------------------------------------------------------------------


def write_frame(
    encoded: tuple, path, contiguous: bool, nthreads, bar, write: Callable | None = None
) -> None:
    """A group (one data variable, its coordinates in its vlmeta), as :func:`.encode_group`
    ``encoded`` it, as one frame at ``path``, by ``write`` (which takes
    :func:`write_variable`'s arguments; it by default)."""
    variables, attrs, storage, coord_names, sd_names = encoded
    (name,) = [n for n in variables if n not in coord_names]
    coords, total = {}, 0
    for cname in coord_names:
        var = variables[cname]
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
        elif whole_bytes_variable(var):
            coords[cname][DTYPE_KEY] = WHOLE_BYTES
    dattrs, dtypes = plain_attrs(attrs, "the dataset")
    extra = {"name": name, "attrs": dattrs, "dataset_attr_types": dtypes, "coords": coords}
    if name in sd_names:
        extra[DTYPE_KEY] = STRINGDTYPE
    write = write or write_variable
    write(variables[name], path, storage[name], contiguous, nthreads, extra, bar)


def _write_tree(encoded: dict, root: Path, nthreads, bar) -> None:
    root.mkdir()
    _write_embed(root / EMBED_NAME)
    for gpath, (variables, attrs, storage, coords, sd_names) in encoded.items():
        gdir = root.joinpath(*[p for p in gpath.split("/") if p])
        gdir.mkdir(parents=True, exist_ok=True)
        gattrs, gtypes = plain_attrs(attrs, f"group {gpath!r}")
        write_attrs_frame(gdir / VLMETA_NAME, gattrs, gtypes)
        for name, var in variables.items():
            extra = {DTYPE_KEY: STRINGDTYPE} if name in sd_names else {}
            path = gdir / f"{name}.b2nd"
            coord = name in coords
            write_variable(var, path, storage[name], True, nthreads, extra, bar, coord)


def _write_embed(path: Path) -> None:
    """python-blosc2's ``embed.b2e``: an empty frame marking a TreeStore (no embedded values)."""
    schunk = SChunk.create(
        path, typesize=1, meta={"b2tree": msgpack.packb({"version": 1}, use_bin_type=True)}
    )
    with schunk:
        schunk.vlmeta["estore_metadata"] = {"embed_map": {}, "current_offset": 0}


def write_attrs_frame(path: Path, attrs: dict, types: dict) -> None:
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


def write_variable(
    var, path: Path, storage: dict, contiguous: bool, nthreads, extra, bar, coord=False
) -> None:
    """One variable as one b2nd frame, its chunks computed and encoded in C order; ``coord``
    when it is one of a tree's coordinates."""
    var, meta, cparams, vlmeta = frame_plan(var, Path(path).stem, storage, extra, coord)
    with new_frame(path, meta, cparams, contiguous=contiguous) as schunk:
        if math.prod(meta.shape):
            schunk.extend_chunks(chunks_of(var, meta, cparams, nthreads, bar))
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
    if whole_bytes_variable(var):
        extra = {**extra, DTYPE_KEY: WHOLE_BYTES}
    dtype = writable_dtype(var.dtype)  # a writer's input: never B2ndMeta's FormatError
    coding = _coding(storage)
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
    # The shapes last: the plugins' fit check (nd.shapes asks chunk.plugins) is the one trip
    # down the layers a frame's plan makes.
    chunks, blocks = _chunking(var, storage, coding)
    meta = B2ndMeta(shape=tuple(var.shape), chunkshape=chunks, blockshape=blocks, dtype=dtype)
    cparams = cparams_for(dtype, blocks, **coding)
    return var, meta, cparams, vlmeta


def xb2_mirrors(dims, name: str | None, attrs: Mapping, coord: bool = False) -> dict:
    """What xarray-blosc2's reader needs to name a variable's dimensions (and a lone frame's
    variable, and to tell a tree's coordinate), where no attribute of that name is in the
    way."""
    out: dict = {"dims": [str(d) for d in dims]}
    if name is not None:
        out["var"] = str(name)
    if coord:
        out["is_coord"] = True
    return {k: v for k, v in out.items() if k not in attrs}


def _chunking(var: xr.Variable, storage: dict, coding: dict) -> tuple[tuple, tuple]:
    chunks, blocks = storage.get("chunks"), storage.get("blocks")
    if chunks is None and var.chunks is not None and var.ndim:
        # Uniform dask chunks become the frame's chunks: each task then fills whole chunks.
        if all(len(set(c[:-1])) <= 1 and c[-1] <= c[0] for c in var.chunks):
            chunks = tuple(c[0] for c in var.chunks)
    if isinstance(chunks, Mapping):
        chunks = tuple(chunks.get(d, n) for d, n in zip(var.dims, var.shape))
    return default_chunks_blocks(
        var.shape, var.dtype.itemsize, chunks=chunks, blocks=blocks, **coding
    )


def _coding(storage: dict) -> dict:
    """The coding a variable's storage options choose (the defaults where they choose none),
    as the chunk and block shapes and the chunk parameters are derived from it."""
    return {
        "codec": storage.get("codec", "zstd"),
        "clevel": storage.get("clevel", DEFAULT_CLEVEL),
        "filters": storage.get("filters"),
        "filters_meta": storage.get("filters_meta"),
        "splitmode": storage.get("splitmode", "auto"),
        "codec_meta": storage.get("codec_meta", 0),
    }


def whole_bytes_variable(var: xr.Variable) -> bool:
    """Whether ``var`` holds whole one-byte strings (to be read back unjoined: see
    :data:`.conventions.WHOLE_BYTES`), not a character array (:func:`characters`)."""
    return var.dtype == WHOLE_BYTES and CHAR_DIM not in var.encoding


def chunks_of(var: xr.Variable, meta: B2ndMeta, cparams: dict, nthreads, bar):
    """The encoded chunks of ``var``; dask data is computed a few chunks at a time."""
    grid = chunk_grid(meta.shape, meta.chunkshape)
    regions = [chunk_region(c, meta.shape, meta.chunkshape) for c in np.ndindex(*grid)]
    for value in values_at(var, regions if grid else [()]):
        block = np.asarray(value, dtype=meta.dtype)
        buf = array_to_chunk(block, meta.chunkshape, meta.blockshape)
        yield encode_array_chunk(buf, meta.dtype, cparams, nthreads)
        bar.update(block.nbytes)


def values_at(var: xr.Variable, regions: list) -> Iterator:
    """The values of ``var`` in each of ``regions`` (tuples of slices), in order; dask data
    is computed a few regions at a time (one a core), never whole."""
    data = var.data
    if not hasattr(data, "dask"):
        for r in regions:
            yield var[r].values if r else var.values
        return
    import dask

    batch = max(1, os.cpu_count() or 1)
    for start in range(0, len(regions), batch):
        yield from dask.compute(*[data[r] for r in regions[start : start + batch]])


def zip_tree(tree: Path, zpath: Path) -> Path:
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
    # The zip is a new file, copied from the synced tree: unless writes are never synced, it
    # reaches the disk before the rename that publishes it, or a power cut could leave the
    # name pointing at a file the disk never had.
    if _sync.sync_mode() != "none":
        _sync.sync_path(zpath)
    return zpath
