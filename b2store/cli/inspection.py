"""What a path holds, told by its bytes: describe any Blosc input and check every chunk of it
(the ``info``, ``dump`` and ``verify`` commands of :mod:`b2store.cli`).

Inputs are recognised by content, not by name: a Blosc1/Blosc2 chunk, a contiguous frame (the
frame magic at byte 1), a sparse frame (a directory holding ``chunks.b2frame``), a tree of
frames (a directory of ``.b2nd`` files, a ``.b2d`` directory, a ``.b2z`` zip) or a Zarr v2/v3
store (``zarr.json``, ``.zarray``, ``.zgroup``). Zarr is imported only for Zarr stores.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from .. import _files
from ..chunk.decoder import chunk_info
from ..chunk.header import ChunkHeader
from ..constants import Filter, SplitMode
from ..errors import B2StoreError
from ..frame.header import MAGIC
from ..frame.sniff import FRAME_PREFIX_LENGTH, looks_like
from .chunks import LazyBytes, chunk_bytes, schunk_bytes

__all__ = [
    "InputError",
    "detect",
    "describe",
    "open_arrays",
    "jsonable",
    "open_frame_path",
    "shown",
    "not_blosc",
    "zarr_arrays",
]

#: Kinds :func:`detect` returns.
KINDS = ("chunk", "frame", "sparse-frame", "tree", "zarr", "npy", "netcdf", "hdf5")
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_NPY_MAGIC = b"\x93NUMPY"
# Values longer than this are shortened in text output (never in --json).
_SHOWN_VALUE_CHARS = 200


class InputError(B2StoreError):
    """A path that is missing, or holds nothing b2store can read, said in one line."""


# --- recognising an input --------------------------------------------------------------------


def detect(path: str | os.PathLike) -> str:
    """What ``path`` holds, from its bytes (and, for directories, the names in it).

    Returns
    -------
    str
        One of ``"chunk"``, ``"frame"`` (contiguous), ``"sparse-frame"``, ``"tree"`` (a
        directory of frames, ``.b2d`` or ``.b2z``), ``"zarr"``, ``"npy"``, ``"netcdf"``
        (netCDF-3 or netCDF-4/HDF5 with a ``.nc`` name) or ``"hdf5"``.

    Raises
    ------
    InputError
        When ``path`` does not exist or holds none of these.
    """
    p = Path(path)
    if p.is_dir():
        names = set(os.listdir(p))
        if "chunks.b2frame" in names:
            return "sparse-frame"
        if names & {"zarr.json", ".zarray", ".zgroup"}:
            return "zarr"
        if p.suffix == ".b2d" or names & {"embed.b2e", "__vlmeta__.b2f"}:
            return "tree"
        for name in names:
            if name.endswith(".b2nd") or (p / name / "chunks.b2frame").is_file():
                return "tree"
        raise InputError(f"{path}: a directory with no Blosc2 frames and no Zarr metadata")
    if not p.exists():
        raise InputError(f"{path}: no such file or directory")
    if not p.is_file():
        raise InputError(f"{path}: not a regular file or directory")
    with open(_files.open_regular(p), "rb") as fh:  # (never blocks on a FIFO)
        head = fh.read(FRAME_PREFIX_LENGTH)
    if len(head) >= 10 and head[1:10] == MAGIC:
        return "frame"
    if head[:4] == b"PK\x03\x04":
        return "tree"
    if head[:6] == _NPY_MAGIC:
        return "npy"
    if head[:3] == b"CDF":
        return "netcdf"
    if head[:8] == _HDF5_MAGIC:
        return "netcdf" if p.suffix in (".nc", ".nc4", ".cdf") else "hdf5"
    what = looks_like(head, total=p.stat().st_size)
    if len(head) < 16:
        raise InputError(
            f"{path}: not a Blosc2 file ({what}; {len(head)} bytes, too short for any Blosc input)"
        )
    if what.startswith("a single Blosc chunk"):
        return "chunk"
    if what == "unrecognized bytes":
        # Neither a frame nor a chunk header: say why not as a chunk, field by field, since
        # it may be a chunk damaged in its first bytes.
        try:
            ChunkHeader.from_bytes(head, available=p.stat().st_size)
        except B2StoreError as exc:
            raise InputError(f"{path}: not a Blosc2 file ({what}; as a chunk: {exc})") from None
        return "chunk"
    raise InputError(f"{path}: not a Blosc2 file ({what})")


def not_blosc(path, kind: str) -> InputError:
    return InputError(
        f"{path}: not a Blosc2 file (a {'NumPy .npy' if kind == 'npy' else kind} file, not a "
        "Blosc input); b2store convert turns it into one"
    )


# --- values for people and for JSON ---------------------------------------------------------


def jsonable(value: Any) -> Any:
    """``value`` as JSON can hold it: containers recursively, arrays as lists (large ones as a
    summary), bytes as a summary, anything else as its repr."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        if value.size <= 64 and value.dtype.kind in "biufUS":
            return jsonable(value.tolist())
        return f"<array shape={value.shape} dtype={value.dtype.str}>"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, msgpack.ExtType):
        return f"<msgpack ext type {value.code}, {len(value.data)} bytes (not evaluated)>"
    return repr(value)


def shown(value: Any) -> str:
    text = repr(jsonable(value)) if not isinstance(value, str) else repr(value)
    if len(text) > _SHOWN_VALUE_CHARS:
        text = text[: _SHOWN_VALUE_CHARS - 3] + "..."
    return text


def _name(value) -> str:
    return value.name.lower() if hasattr(value, "name") else str(value)


def _filter_name(f) -> str:
    try:
        return _name(Filter(int(f)))
    except ValueError:
        return str(int(f))


def _filters(filters, filters_meta) -> list[dict]:
    return [
        {"name": _filter_name(f), "meta": int(m)}
        for f, m in zip(filters, filters_meta)
        if int(f) != 0  # NOFILTER slots
    ]


def _splitmode(value: int) -> str:
    try:
        return _name(SplitMode(value))
    except ValueError:
        return str(value)


def _spread(values: list[float]) -> dict | None:
    if not values:
        return None
    return {
        "min": min(values),
        "median": float(np.median(values)),
        "max": max(values),
    }


# --- frames -------------------------------------------------------------------------------


def _chunk_record(schunk, i: int) -> dict:
    """What the header of stored chunk ``i`` says, reading only its header and block starts."""
    span = schunk.chunk_span(i)
    head = schunk.get_chunk(i) if span is None or span[2] <= 64 else schunk.get_chunk_blocks(i, ())
    info = chunk_info(head)
    special = info.special if info.special else None
    return {
        "chunk": i,
        "offset": None if span is None else span[1],
        "stored": span is not None,
        "nbytes": info.nbytes,
        "cbytes": 0 if span is None else span[2],
        "version": info.version,
        "special": None if special is None else _name(special),
    }


def _chunk_stats(records: list[dict]) -> dict:
    stored = [r for r in records if r["special"] is None]
    specials: dict[str, int] = {}
    for r in records:
        if r["special"] is not None:
            specials[r["special"]] = specials.get(r["special"], 0) + 1
    return {
        "count": len(records),
        "special": specials,
        "in_index_only": sum(not r["stored"] for r in records),
        "cbytes": _spread([r["cbytes"] for r in stored]),
        "ratio": _spread([r["nbytes"] / r["cbytes"] for r in stored if r["cbytes"]]),
        "chunk_format_versions": sorted({r["version"] for r in records if r["stored"]}),
    }


def _dtype_text(dtype: np.dtype) -> str:
    """``<f8``, or for structured items their numpy description (the b2nd metalayer's form)."""
    return str(dtype.descr) if dtype.fields else dtype.str


def _b2nd_version(meta) -> int | None:
    from ..nd.meta import B2ndMeta

    for name in ("b2nd", "caterva"):
        if name in meta:
            return B2ndMeta.from_bytes(meta.raw(name), caterva=name == "caterva").version
    return None


def _frame_type(obj) -> str:
    from ..containers import Container

    if isinstance(obj, Container):
        # python-blosc2's containers of variable-length items: b2store.open(path)[i] reads one
        return f"python-blosc2 {obj.kind} of {len(obj)} (items of variable length)"
    return "b2nd array" if hasattr(obj, "shape") else "super-chunk"


def _frame_info(obj, *, chunks: bool) -> dict:
    """Everything about an open frame (a B2ndArray or an SChunk)."""
    schunk = obj.schunk if hasattr(obj, "schunk") else obj
    header = schunk.header
    records = [_chunk_record(schunk, i) for i in range(schunk.nchunks)]
    out: dict[str, Any] = {
        "kind": "contiguous frame" if schunk.contiguous else "sparse frame",
        "type": _frame_type(obj),
        "frame_format_version": header.version,
    }
    if hasattr(obj, "shape"):
        out.update(
            b2nd_metalayer_version=_b2nd_version(schunk.meta),
            shape=list(obj.shape),
            dtype=_dtype_text(obj.dtype),
            chunks=list(obj.chunks),
            blocks=list(obj.blocks),
        )
    out.update(
        typesize=schunk.typesize,
        codec=_name(schunk.codec),
        codec_meta=header.compcode_meta,
        clevel=schunk.clevel,
        filters=_filters(schunk.filters, schunk.filters_meta),
        splitmode=_splitmode(header.splitmode),
        blocksize=schunk.blocksize,
        chunksize=schunk.chunksize,
        nchunks=schunk.nchunks,
        nbytes=schunk.nbytes,
        cbytes=schunk.cbytes,
        ratio=schunk.nbytes / schunk.cbytes if schunk.cbytes else None,
        metalayers={name: len(content) for name, content in schunk.header.metalayers.items()},
        vlmeta=_vlmeta(schunk),
        chunk_stats=_chunk_stats(records),
    )
    if chunks:
        out["chunk_list"] = records
    return out


def _vlmeta(schunk) -> dict:
    """The frame's vlmeta; a refused one (past a limit, damaged) is described by its error, in
    place of the values, so that info still shows the rest of the frame."""
    try:
        return dict(schunk.vlmeta)
    except B2StoreError as exc:
        return {"(not shown)": str(exc)}


def open_frame_path(path):
    """Open a contiguous or sparse frame for reading (a B2ndArray or an SChunk)."""
    from ..api import open as open_b2

    return open_b2(os.fspath(path))


# --- trees and Zarr stores -------------------------------------------------------------------


def _dataless_info(exc, urlpath, offset: int, *, chunks: bool) -> dict:
    """What ``info`` says of a frame python-blosc2 saved for an object holding no data (a
    lazy expression, a proxy's cache): its frame as a super-chunk, and what it stands for."""
    from ..frame.schunk import SChunk

    with SChunk.open(urlpath, offset=offset) as schunk:
        out = _frame_info(schunk, chunks=chunks)
    out.update(type=f"python-blosc2 {exc.ident} (not served as an array)", no_data=exc.what)
    return out


def _tree_info(path, *, chunks: bool) -> dict:
    from ..nd.carriers import DatalessObjectError
    from ..tree import open_tree

    tree = open_tree(os.fspath(path))
    arrays = {}
    for name, ref in tree.arrays().items():
        try:
            with ref.open() as arr:
                arrays[name] = _frame_info(arr, chunks=chunks)
        except DatalessObjectError as exc:
            if ref.embedded is not None:
                raise
            arrays[name] = _dataless_info(exc, ref.urlpath, ref.offset, chunks=chunks)
    return {
        "kind": {"b2z": ".b2z tree (zip)", "b2d": ".b2d tree", "dir": "directory of frames"}.get(
            tree.kind, tree.kind
        ),
        "groups": {g: dict(attrs) for g, attrs in tree.groups().items()},
        "arrays": arrays,
    }


def zarr_arrays(path) -> Iterator[tuple[str, Any]]:
    import zarr

    node = zarr.open(store=os.fspath(path), mode="r")
    if isinstance(node, zarr.Array):
        yield "/", node
        return
    for name, arr in sorted(node.arrays(), key=lambda kv: kv[0]):
        yield "/" + name, arr
    for gname, group in sorted(node.groups(), key=lambda kv: kv[0]):
        for name, arr in sorted(group.arrays(), key=lambda kv: kv[0]):
            yield f"/{gname}/{name}", arr


def _codec_configs(arr) -> list:
    meta = arr.metadata
    if getattr(meta, "zarr_format", 3) == 2:
        parts = [meta.compressor] if meta.compressor is not None else []
        parts += list(meta.filters or [])
        return [jsonable(p.get_config()) for p in parts]
    return [jsonable(c.to_dict()) for c in meta.codecs]


def _zarr_chunk_records(arr) -> list[dict]:
    """Per stored chunk: key, size, and what its Blosc header says when it has one."""
    from zarr.core.sync import sync

    store = arr.store_path.store
    prefix = arr.store_path.path
    records = []
    for idx in np.ndindex(*arr.cdata_shape):
        key = arr.metadata.encode_chunk_key(idx)
        full = f"{prefix}/{key}" if prefix else key
        data = sync(store.get(full, prototype=_prototype()))
        if data is None:
            continue
        raw = data.to_bytes()
        rec = {"chunk": key, "cbytes": len(raw), "special": None, "nbytes": None}
        try:
            info = chunk_info(raw) if len(raw) >= 16 else None
        except B2StoreError:
            info = None
        if info is not None:
            rec.update(nbytes=info.nbytes, version=info.version)
            if info.special:
                rec["special"] = _name(info.special)
        records.append(rec)
    return records


def _prototype():
    from zarr.core.buffer import default_buffer_prototype

    return default_buffer_prototype()


def _zarr_info(path, *, chunks: bool) -> dict:
    import zarr

    arrays = {}
    for name, arr in zarr_arrays(path):
        records = _zarr_chunk_records(arr)
        stored = sum(r["cbytes"] for r in records)
        blosc = [r for r in records if r.get("nbytes") is not None]
        info = {
            "zarr_format": arr.metadata.zarr_format,
            "shape": list(arr.shape),
            "dtype": str(arr.dtype),
            "chunks": list(arr.chunks),
            "codecs": _codec_configs(arr),
            "nbytes": arr.nbytes,
            "cbytes": stored,
            "ratio": arr.nbytes / stored if stored else None,
            "attributes": dict(arr.attrs),
            "chunk_stats": {
                "count": math.prod(arr.cdata_shape),
                "not_written": math.prod(arr.cdata_shape) - len(records),
                "special": _count_special(records),
                "cbytes": _spread([r["cbytes"] for r in records if r["special"] is None]),
                "ratio": _spread(
                    [r["nbytes"] / r["cbytes"] for r in blosc if r["special"] is None]
                ),
                "chunk_format_versions": sorted({r["version"] for r in blosc}),
            },
        }
        if chunks:
            info["chunk_list"] = records
        arrays[name] = info
    root = zarr.open(store=os.fspath(path), mode="r")
    return {
        "kind": f"Zarr v{root.metadata.zarr_format} "
        + ("array" if isinstance(root, zarr.Array) else "group"),
        "attributes": dict(root.attrs),
        "arrays": arrays,
    }


def _count_special(records) -> dict:
    out: dict[str, int] = {}
    for r in records:
        if r["special"] is not None:
            out[r["special"]] = out.get(r["special"], 0) + 1
    return out


# --- chunks -----------------------------------------------------------------------------------


def _chunk_file_info(path) -> dict:
    data = _files.read_regular(path)
    info = chunk_info(data)
    return {
        "kind": "chunk",
        "chunk_format_version": info.version,
        "codec_format_version": info.versionlz,
        "typesize": info.typesize,
        "codec": _name(info.codec),
        "filters": _filters(info.filters, info.filters_meta),
        "split": info.split,
        "memcpyed": info.memcpyed,
        "special": _name(info.special) if info.special else None,
        "use_dict": info.use_dict,
        "vl_blocks": info.vl_blocks,
        "blocksize": info.blocksize,
        "nblocks": info.nblocks,
        "nbytes": info.nbytes,
        "cbytes": info.cbytes,
        "ratio": info.nbytes / info.cbytes if info.cbytes else None,
        "trailing_bytes": len(data) - info.cbytes,
    }


# --- describe ------------------------------------------------------------------------------


def describe(path, *, chunks: bool = False) -> dict:
    """Everything ``b2store info`` reports about ``path``, as a JSON-ready mapping.

    Parameters
    ----------
    path : str or path-like
        Any Blosc input (see :func:`detect`).
    chunks : bool
        Also list every chunk (offset, sizes, format version, special kind).
    """
    kind = detect(path)
    if kind == "chunk":
        out = _chunk_file_info(path)
    elif kind in ("frame", "sparse-frame"):
        from ..nd.carriers import DatalessObjectError

        try:
            with open_frame_path(path) as obj:
                out = _frame_info(obj, chunks=chunks)
        except DatalessObjectError as exc:
            out = _dataless_info(exc, os.fspath(path), 0, chunks=chunks)
    elif kind == "tree":
        out = _tree_info(path, chunks=chunks)
    elif kind == "zarr":
        out = _zarr_info(path, chunks=chunks)
    else:
        raise not_blosc(path, kind)
    return {"path": os.fspath(path), **jsonable(out)}


# --- opening arrays (dump) --------------------------------------------------------------------


def open_arrays(path, *, dtype=None) -> Iterator[tuple[str, Any]]:
    """``(name, array-like)`` for every array ``path`` holds; array-likes take numpy basic
    indexing and have ``shape`` and ``dtype``. A chunk or a super-chunk is its decoded bytes,
    viewed as ``dtype`` when given."""
    kind = detect(path)
    if kind == "chunk":
        data = _files.read_regular(path)
        # Checked now, decoded only when indexed, after the caller checked the selection's
        # size: the header's nbytes is all the shape needs (a 32-byte chunk may say 1 GiB).
        read = chunk_bytes(data)
        yield Path(path).name, _lazy_bytes(chunk_info(data).nbytes, dtype, read)
    elif kind in ("frame", "sparse-frame"):
        obj = open_frame_path(path)
        try:
            if hasattr(obj, "shape"):
                yield Path(os.fspath(path).rstrip("/")).name, obj
            else:
                read = lambda lo, hi: schunk_bytes(obj, lo, hi)  # noqa: E731
                yield Path(path).name, _lazy_bytes(obj.nbytes, dtype, read)
        finally:
            obj.close()
    elif kind == "tree":
        from ..tree import open_tree

        for name, ref in open_tree(os.fspath(path)).arrays().items():
            with ref.open() as arr:
                yield name, arr
    elif kind == "zarr":
        yield from zarr_arrays(path)
    else:
        raise not_blosc(path, kind)


def _lazy_bytes(nbytes: int, dtype, read) -> LazyBytes:
    """The bytes ``read`` gives as a 1-d array of ``dtype`` (uint8 when None)."""
    dtype = np.dtype("u1" if dtype is None else dtype)
    size = dtype.itemsize
    if size == 0 or nbytes % size:
        raise InputError(f"{nbytes} bytes are not whole items of {dtype} ({size})")
    return LazyBytes(nbytes, dtype, read)
