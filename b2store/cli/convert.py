"""Converting between .npy, netCDF/HDF5, Zarr v2/v3 and Blosc2 (.b2nd, .b2d, .b2z), chunk by
chunk, so that memory stays within a few chunks whatever the size of the data (``b2store
convert``).

Plain arrays (``.npy``, a b2nd frame, a Zarr array) are copied region by region of the
output's chunk grid. Datasets (netCDF/HDF5, ``.b2d``/``.b2z`` trees, Zarr groups) go through
xarray, each variable rechunked with dask to the output's chunks, and written by
:func:`b2store.to_b2nd`, ``to_zarr`` or ``to_netcdf``, which compute a few chunks at a time.
The sources are opened by :mod:`b2store.cli.inputs`.
"""

from __future__ import annotations

import importlib
import os
import shutil
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .. import _files, _progress
from .._userpath import names_user_path
from .arguments import ints, names
from .inputs import open_source, pick_variable
from .inspection import InputError

__all__ = ["convert", "run", "ARRAY_SUFFIXES", "TREE_SUFFIXES"]

ARRAY_SUFFIXES = (".b2nd", ".b2frame", ".npy")
TREE_SUFFIXES = (".b2d", ".b2z")
NETCDF_SUFFIXES = (".nc", ".nc4", ".h5", ".hdf5")
#: Rows of an .npy source copied at once when nothing else sets the grid (bytes per piece).
NPY_PIECE_BYTES = 16 * 2**20
# convert's keywords that its writers read as given; the command line's options of the same
# names are passed on as they are.
_SETTINGS = ("codec", "clevel", "codec_meta", "zarr_format", "nc_compression", "decoded")


def _dst_kind(dst: str) -> str:
    suffix = Path(dst.rstrip("/")).suffix.lower()
    if suffix in (".b2nd", ".b2frame"):
        return "b2nd"
    if suffix in TREE_SUFFIXES:
        return suffix[1:]
    if suffix == ".npy":
        return "npy"
    if suffix == ".zarr":
        return "zarr"
    if suffix in NETCDF_SUFFIXES:
        return "netcdf"
    raise InputError(
        f"{dst}: unknown output format {suffix or '(no suffix)'!r}; "
        "use .b2nd, .b2d, .b2z, .npy, .zarr or .nc"
    )


# --- compression options -----------------------------------------------------------------


def _b2_options(codec, clevel, filters, codec_meta=None) -> dict:
    out: dict[str, Any] = {}
    if codec is not None:
        out["codec"] = codec
    if codec_meta is not None:
        out["codec_meta"] = codec_meta
    if clevel is not None:
        out["clevel"] = clevel
    if filters is not None:
        out["filters"] = list(filters)
    return out


def _zarr_compressor(zarr_format: int, codec, clevel, filters):
    if zarr_format == 2:
        from ..integrations.numcodecs.codec import Blosc2

        kw: dict[str, Any] = {"cname": codec or "zstd", "clevel": 5 if clevel is None else clevel}
        if filters is not None:
            kw["filters"] = list(filters)
        return Blosc2(**kw)
    from ..integrations.zarr.codecs import Blosc2Codec

    kw = {"cname": codec or "zstd", "clevel": 5 if clevel is None else clevel}
    if filters is not None:
        kw["filters"] = [{"id": f, "meta": 0} for f in filters] or [{"id": "nofilter", "meta": 0}]
    return Blosc2Codec(**kw)


# --- array to array ----------------------------------------------------------------------


def _regions(shape, chunks) -> Iterator[tuple[slice, ...]]:
    grid = [-(-n // c) if c else 0 for n, c in zip(shape, chunks)]
    if any(g == 0 for g in grid):
        return
    for idx in np.ndindex(*grid):
        yield tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(idx, chunks, shape))


def _piece_chunks(src, shape, dtype) -> tuple[int, ...]:
    """The grid to copy by when the output has none (``.npy``): the source's chunks, else
    slabs along the first axis of about :data:`NPY_PIECE_BYTES`."""
    chunks = getattr(src, "chunksize", None) or getattr(src, "chunks", None)  # dask: chunksize
    if chunks is not None and len(chunks) == len(shape):
        return tuple(int(c) for c in chunks)
    if not shape:
        return ()
    row = max(1, int(np.prod(shape[1:])) * np.dtype(dtype).itemsize)
    return (max(1, min(shape[0], NPY_PIECE_BYTES // row)), *shape[1:])


def _copy(src, dst, chunks, bar) -> None:
    if not src.shape:
        dst[()] = np.asarray(src[()])
        return
    for region in _regions(src.shape, chunks):
        piece = np.asarray(src[region])
        dst[region] = piece
        bar.update(piece.nbytes)


def _array_to(src, dst: str, dst_kind: str, attrs: dict, opts: dict, bar) -> None:
    shape, dtype = tuple(src.shape), np.dtype(src.dtype)
    if dst_kind == "b2nd":
        from ..nd.create import zeros

        chunks, blocks = opts["chunks"], opts["blocks"]
        if chunks is None and isinstance(getattr(src, "blocks", None), tuple):
            # A b2nd source keeps its chunks and blocks: a copy's memory stays a few of its
            # chunks (the default shape for 256 MiB is 64 MiB chunks: 270 MiB held at once).
            chunks, blocks = tuple(src.chunks), blocks or tuple(src.blocks)
        out = zeros(
            shape,
            dtype,
            dst,
            chunks=chunks,
            blocks=blocks,
            vlmeta=_vlmeta(attrs),
            **_b2_options(opts["codec"], opts["clevel"], opts["filters"], opts["codec_meta"]),
        )
        with out:
            _copy(src, out, out.chunks, bar)
    elif dst_kind == "npy":
        _write_npy(src, dst, shape, dtype, bar)
    else:
        import dask.array as da
        import xarray as xr

        if isinstance(src, da.Array) or not shape:
            data = src if shape else np.asarray(src[()])
        else:
            data = da.from_array(src, chunks=_piece_chunks(src, shape, dtype), lock=True)
        dims = attrs.get("_ARRAY_DIMENSIONS") or [f"dim_{i}" for i in range(len(shape))]
        clean = {k: v for k, v in _json_attrs(attrs).items() if k != "_ARRAY_DIMENSIONS"}
        # An array has no name of its own: the variable is named after the source file, as
        # the b2nd engine names an unnamed frame.
        name = opts["name"]
        ds = xr.Dataset({name: (tuple(dims), data, clean)})
        _dataset_to(ds, dst, dst_kind, opts, bar)


def _write_npy(src, dst: str, shape, dtype: np.dtype, bar) -> None:
    """Write ``src`` as an ``.npy`` file in slabs along the first axis, appended in order
    (a memory map would keep every written page in the process's memory)."""
    row = int(np.prod(shape[1:])) * dtype.itemsize if shape else dtype.itemsize
    if shape and row > NPY_PIECE_BYTES * 4:
        # Rows too large to hold: fill a memory map chunk by chunk instead.
        out = np.lib.format.open_memmap(dst, mode="w+", dtype=dtype, shape=shape)
        _copy(src, out, _piece_chunks(src, shape, dtype), bar)
        out.flush()
        return
    header = {
        "descr": np.lib.format.dtype_to_descr(dtype),
        "fortran_order": False,
        "shape": tuple(shape),
    }
    with open(dst, "wb") as fh:
        try:
            np.lib.format.write_array_header_1_0(fh, header)
        except ValueError:  # a header over 64 KiB (many structured fields)
            fh.seek(0)
            fh.truncate()
            np.lib.format.write_array_header_2_0(fh, header)
        if not shape:
            fh.write(np.asarray(src[()], dtype).tobytes())
            return
        chunk0 = _piece_chunks(src, shape, dtype)[0]
        # Whole source chunks along axis 0 when that is small enough, else thinner slabs.
        step = chunk0 if chunk0 * row <= 4 * NPY_PIECE_BYTES else NPY_PIECE_BYTES // row
        step = max(1, min(shape[0], step))
        for start in range(0, shape[0], step):
            piece = np.ascontiguousarray(src[start : start + step], dtype=dtype)
            fh.write(memoryview(piece).cast("B"))
            bar.update(piece.nbytes)


def _vlmeta(attrs: dict) -> dict:
    return {k: v for k, v in attrs.items() if isinstance(k, str)}


def _json_attrs(attrs: dict) -> dict:
    from .inspection import jsonable

    return {k: jsonable(v) for k, v in attrs.items() if isinstance(k, str)}


# --- datasets -------------------------------------------------------------------------------


def _target_chunks(var, opts, dst_kind: str) -> tuple[int, ...]:
    """The output's chunks: as given, else the source's for Zarr and netCDF outputs (as
    array copies keep them), else python-blosc2's choice for the shape."""
    from ..nd.shapes import default_chunks_blocks

    given = opts["chunks"]
    if given is not None and len(given) == var.ndim:
        return tuple(min(c, n) if n else c for c, n in zip(given, var.shape))
    if dst_kind in ("zarr", "netcdf"):
        source = var.encoding.get("preferred_chunks")
        if isinstance(source, dict) and set(source) == set(var.dims):
            return tuple(min(int(source[d]), n) or 1 for d, n in zip(var.dims, var.shape))
    coding = {}
    if dst_kind in ("b2nd", "b2d", "b2z"):  # its blocks are cut inside these chunks
        coding = _b2_options(opts["codec"], opts["clevel"], opts["filters"], opts["codec_meta"])
    chunks, _ = default_chunks_blocks(tuple(var.shape), var.dtype.itemsize, **coding)
    return tuple(chunks)


def _ticking(var, bar):
    """``var`` rechunked as given, with each computed chunk counted on ``bar``."""
    import dask.array as da

    data = var.data
    if not isinstance(data, da.Array):
        return var

    def tick(block):
        bar.update(block.nbytes)
        return block

    return var.copy(data=data.map_blocks(tick, dtype=data.dtype))


def _prepared(ds, dst_kind: str, opts: dict, bar):
    """``ds`` rechunked to the output's chunks (each chunk counted on ``bar``) with the
    source's storage encoding dropped, and the output's encoding of each variable: its
    storage, and the source's CF encoding (:data:`_CF_ENCODING`: dtype, packing, fill value,
    time units) unless ``opts["decoded"]``."""
    import xarray as xr

    variables = {}
    encoding: dict[str, dict] = {}
    for name, var in ds.variables.items():
        if opts.get("decoded"):
            var = var.copy(deep=False)
            var.encoding = {}
        # xarray's to_zarr and to_netcdf replace a variable's encoding with the one given
        # for it: the CF keys go in that one, or the output stores the decoded values
        # (an int16 packed variable as float64, its _FillValue as NaN).
        cf = {k: v for k, v in var.encoding.items() if k in _CF_ENCODING}
        if var.ndim and var.dtype.kind not in "OUST":
            chunks = _target_chunks(var, opts, dst_kind)
            var = _ticking(var.chunk(dict(zip(var.dims, chunks))), bar)
            enc: dict[str, Any] = {}
            if dst_kind in ("b2nd", "b2d", "b2z"):
                enc = {
                    "chunks": chunks,
                    **_b2_options(
                        opts["codec"], opts["clevel"], opts["filters"], opts["codec_meta"]
                    ),
                }
                if opts["blocks"] is not None and len(opts["blocks"]) == var.ndim:
                    enc["blocks"] = opts["blocks"]
            elif dst_kind == "zarr":
                enc = {
                    "chunks": chunks,
                    "compressors": [
                        _zarr_compressor(
                            opts["zarr_format"], opts["codec"], opts["clevel"], opts["filters"]
                        )
                    ],
                }
            elif dst_kind == "netcdf":
                enc = _netcdf_encoding(chunks, opts)
            encoding[name] = {**cf, **enc}
        variables[name] = var
    coords = {k: variables[k] for k in ds.coords}
    data_vars = {k: variables[k] for k in ds.data_vars}
    out = xr.Dataset(data_vars, coords, ds.attrs)
    # Encodings of the source (netCDF chunk sizes, compression) do not apply to the output.
    for var in out.variables.values():
        var.encoding = {k: v for k, v in var.encoding.items() if k in _CF_ENCODING}
    return out, encoding


#: The netCDF compressions ``--nc-compression`` offers, and the level each uses by default.
NC_COMPRESSIONS = {"zlib": 4, "none": None}


def _netcdf_encoding(chunks, opts: dict) -> dict:
    """HDF5 chunks of the output's chunk shape, deflated (zlib, netCDF4's own compression,
    which every netCDF reader decodes) at ``clevel`` (4 by default) unless asked for none."""
    method = opts.get("nc_compression") or "zlib"
    if method == "none":
        return {"chunksizes": chunks}
    level = opts["clevel"] if opts["clevel"] is not None else NC_COMPRESSIONS[method]
    return {"chunksizes": chunks, "zlib": True, "complevel": level}


def _dataset_to(ds, dst: str, dst_kind: str, opts: dict, bar) -> None:
    """Write a Dataset, or a DataTree (every group kept), as ``dst_kind``."""
    import xarray as xr

    if isinstance(ds, xr.DataTree):
        prepared = {
            n.path: _prepared(n.to_dataset(inherit=False), dst_kind, opts, bar) for n in ds.subtree
        }
        out = xr.DataTree.from_dict({p: d for p, (d, _) in prepared.items()})
        encoding = {p: e for p, (_, e) in prepared.items()}
    else:
        out, encoding = _prepared(ds, dst_kind, opts, bar)
    if dst_kind in ("b2nd", "b2d", "b2z"):
        from ..integrations.xarray.to_b2nd import to_b2nd

        to_b2nd(
            out,
            dst,
            encoding=encoding,
            layout="frame" if dst_kind == "b2nd" else dst_kind,
            progress=False,  # the bar of this command counts the chunks
        )
    elif dst_kind == "zarr":
        with warnings.catch_warnings():
            # zarr warns that consolidated metadata is not in the v3 spec; xarray writes it.
            warnings.filterwarnings("ignore", "Consolidated metadata", UserWarning)
            out.to_zarr(dst, mode="w", encoding=encoding, zarr_format=opts["zarr_format"])
    elif dst_kind == "netcdf":
        out.to_netcdf(dst, engine=opts["nc_engine"], encoding=encoding)
    else:
        raise InputError(f"{dst}: a dataset cannot be written as {dst_kind}")


_CF_ENCODING = frozenset(
    {"units", "calendar", "dtype", "_FillValue", "missing_value", "scale_factor", "add_offset"}
)


# --- entry point ----------------------------------------------------------------------------


#: The libraries that write netCDF-4 outputs, in the order tried, and xarray's engine for each.
#: (scipy writes netCDF-3 only, which has no compression and no chunks: not one of them.)
NETCDF_WRITERS = (("h5netcdf", "h5netcdf"), ("netCDF4", "netcdf4"))


def _netcdf_engine(dst: str) -> str:
    """xarray's engine for writing ``dst`` as netCDF-4: h5netcdf where it imports (the reading
    side uses it too), else netCDF4. Checked before any work: without either, the write
    failed only once the whole source had been read."""
    for module, engine in NETCDF_WRITERS:
        try:
            importlib.import_module(module)
        except ImportError:
            continue
        return engine
    raise InputError(
        f"{dst}: writing netCDF needs h5netcdf or netCDF4, and neither is installed; install "
        'b2store\'s netcdf extra (pip install "b2store[netcdf]", which brings h5netcdf), or '
        "convert to .b2d, .b2z or .zarr instead"
    )


def _disk_size(path: str) -> int:
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _remove(path: str) -> None:
    p = Path(path)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    elif p.exists() or p.is_symlink():
        p.unlink()


@names_user_path
def convert(
    src,
    dst,
    *,
    chunks=None,
    blocks=None,
    codec: str | None = None,
    clevel: int | None = None,
    codec_meta: int | None = None,
    filters=None,
    variable: str | None = None,
    zarr_format: int = 3,
    nc_compression: str = "zlib",
    decoded: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
    verbose: bool = False,
) -> str:
    """Convert ``src`` into ``dst``, chunk by chunk.

    Parameters
    ----------
    src : str or path-like
        An ``.npy`` file, a b2nd frame (contiguous or sparse), a ``.b2d``/``.b2z`` tree, a
        Zarr v2/v3 array or group, or a netCDF/HDF5 file (recognised by content).
    dst : str or path-like
        ``.b2nd`` (one array), ``.b2d``/``.b2z`` (a tree), ``.npy``, ``.zarr`` or ``.nc``
        (chosen by suffix).
    chunks, blocks : tuple of int, optional
        The output's chunk shape (and, for Blosc2 outputs, block shape); by default
        python-blosc2's choice for Blosc2 outputs, the source's chunks otherwise.
    codec, clevel, filters
        Blosc2 compression of Blosc2 and Zarr outputs (``"zstd"``, 5, ``["shuffle"]`` by
        default); ``filters=[]`` for none.
    codec_meta : int, optional
        The parameter of c-blosc2's plugin codecs (ZFP, NDLZ), for Blosc2 outputs.
    variable : str, optional
        The variable of a dataset to write to an array output (``.npy``, ``.b2nd`` of one
        array); the only one when there is one.
    zarr_format : {2, 3}
        For ``.zarr`` outputs: a Zarr group holding each variable under its name, with its
        dimension names (v3 ``dimension_names``, v2 ``_ARRAY_DIMENSIONS``), coordinates and
        attributes, as ``xarray.open_zarr`` reads it.
    nc_compression : {"zlib", "none"}
        For ``.nc`` outputs: netCDF4's deflate (level ``clevel``, 4 by default), or none.
    decoded : bool
        Write each variable of a dataset as xarray decodes it (packed integers as floats,
        fill values as NaN, times in xarray's own units) instead of keeping the source's CF
        encoding (``dtype``, ``scale_factor``/``add_offset``, ``_FillValue``,
        ``missing_value``, time ``units`` and ``calendar``), which is kept by default, as
        ``to_zarr`` and ``to_netcdf`` keep it.
    overwrite : bool
        Replace ``dst`` if it exists (otherwise that is an error).
    progress : bool, optional
        A tqdm bar on stderr: always, never, or on a terminal for work that lasts (None).
    verbose : bool
        Print one line saying what was written.

    Returns
    -------
    str
        ``dst``.
    """
    src, dst = os.fspath(src), os.fspath(dst)
    dst_kind = _dst_kind(dst)
    _files.check_write(dst)  # (an output inside a tree, through a link planted there)
    if os.path.lexists(dst):
        if not overwrite:
            raise InputError(f"{dst} exists; give --overwrite to replace it")
        if Path(dst).resolve() == Path(src).resolve():
            raise InputError(f"{dst} is the source itself")
    opts = {key: value for key, value in locals().items() if key in _SETTINGS}
    opts.update(
        chunks=tuple(chunks) if chunks is not None else None,
        blocks=tuple(blocks) if blocks is not None else None,
        filters=filters,
        name=Path(src.rstrip("/")).stem or "data",
    )
    if nc_compression not in NC_COMPRESSIONS:
        raise InputError(
            f"--nc-compression {nc_compression!r}: choose one of {', '.join(NC_COMPRESSIONS)}"
        )
    opts["nc_engine"] = _netcdf_engine(dst) if dst_kind == "netcdf" else None
    start = time.perf_counter()
    kind, obj, attrs, closer = open_source(src, dst_kind, variable)
    try:
        if kind == "tree" and (dst_kind in ("npy", "b2nd") or variable is not None):
            raise InputError(
                f"{src} holds groups, which an array output cannot hold: write it to a tree "
                "(.b2d, .b2z), .zarr or .nc"
            )
        if kind == "dataset" and (dst_kind in ("npy",) or variable is not None):
            da_ = pick_variable(obj, src, variable)
            kind, attrs = "array", {**da_.attrs, "_ARRAY_DIMENSIONS": list(da_.dims)}
            obj = da_.variable.data if hasattr(da_.variable.data, "shape") else da_.values
        nbytes = (
            int(np.prod(obj.shape)) * np.dtype(obj.dtype).itemsize
            if kind == "array"
            else sum(int(n.to_dataset(inherit=False).nbytes) for n in obj.subtree)
            if kind == "tree"
            else int(obj.nbytes)
        )
        if os.path.lexists(dst):
            _remove(dst)
        bar = _progress.bar(nbytes, Path(dst).name, progress, large=_progress.is_large(nbytes))
        try:
            if kind == "array":
                _array_to(obj, dst, dst_kind, attrs or {}, opts, bar)
            else:
                _dataset_to(obj, dst, dst_kind, opts, bar)
        except BaseException:
            # What was written so far looks whole (a b2nd array is made at its full shape,
            # then filled): remove it rather than leave data that is silently wrong.
            if os.path.lexists(dst):
                _remove(dst)
            raise
        finally:
            bar.close()
    finally:
        if closer is not None:
            closer()
    if verbose:
        size = _disk_size(dst)
        ratio = f"{nbytes / size:.2f}x" if size else "-"
        print(
            f"{src} -> {dst}: {nbytes} bytes of data, {size} bytes written ({ratio}) "
            f"in {time.perf_counter() - start:.2f} s"
        )
    return dst


def run(args) -> int:
    given = {key: getattr(args, key) for key in (*_SETTINGS, "variable", "overwrite", "progress")}
    convert(
        args.src,
        args.dst,
        chunks=ints(args.chunks, "--chunks"),
        blocks=ints(args.blocks, "--blocks"),
        filters=names(args.filters),
        verbose=not args.quiet,
        **given,
    )
    return 0
