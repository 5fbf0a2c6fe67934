"""Virtual datasets over ``.b2nd`` files: kerchunk references (chunk key -> path, offset,
length) whose codec decodes a stored b2nd chunk where it lies, one file or many combined, and
a VirtualiZarr parser (:class:`B2ndParser`) whose chunk manifests point at the same bytes.

The kerchunk references use version 1 with Zarr v2 metadata, whose compressor is the
numcodecs ``b2nd`` codec (:class:`~b2store.integrations.numcodecs.codec.B2nd`): it carries
the chunk and block shapes and the dtype, since a v2 codec is not told the chunk shape.
Special chunks (zeros, NaN, a repeated value) store no bytes to point at: in kerchunk their
32- (or 32 + typesize-) byte special chunk is inlined as ``base64:``; a VirtualiZarr manifest
cannot inline, see :class:`B2ndParser`. Uninitialized chunks are left out (the fill value).
"""

from __future__ import annotations

import base64
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ... import _files
from ...errors import UnsupportedError
from ...tree import open_frame

__all__ = ["kerchunk_refs", "combine_refs", "refs_to_parquet", "B2ndParser", "manifest_store"]


def _array_refs(arr, name: str, offset: int = 0) -> dict[str, object]:
    """Chunk references of one array, its first-axis chunk index shifted by ``offset``."""
    from ..zarr.keys import is_uninit

    schunk = arr.schunk
    grid = [-(-s // c) for s, c in zip(arr.shape, arr.chunks)]
    refs: dict[str, object] = {}
    if arr.size == 0:
        return refs
    for n, coords in enumerate(np.ndindex(*grid) if grid else [()]):
        if is_uninit(schunk, n):
            continue
        coords = (coords[0] + offset, *coords[1:]) if coords else (0,)
        key = f"{name}/" + ".".join(map(str, coords))
        span = schunk.chunk_span(n)
        if span is None:
            refs[key] = "base64:" + base64.b64encode(schunk.get_chunk(n)).decode()
        else:
            refs[key] = [span[0], span[1], span[2]]
    return refs


def _meta(arr, name: str, shape) -> dict[str, str]:
    from ..zarr.zarr_json import attribute_vlmeta, json_attributes

    dtype = arr.dtype
    vlmeta = dict(arr.vlmeta)
    compressor = {
        "id": "b2nd",
        "chunkshape": list(arr.chunks),
        "blockshape": list(arr.blocks),
        "dtype": dtype.str,
    }
    zarray = {
        "zarr_format": 2,
        "shape": list(shape) or [1],
        "chunks": list(arr.chunks) or [1],
        "dtype": dtype.str if dtype.fields is None else dtype.descr,
        "compressor": compressor,
        # None: no value is missing data to xarray (uninitialized chunks read as zeros);
        # a CF _FillValue is v2's fill_value, which xarray masks with in Zarr v2.
        "fill_value": _v2_fill(vlmeta.get("_FillValue"), dtype),
        "filters": None,
        "order": "C",
        "dimension_separator": ".",
    }
    attrs = json_attributes(attribute_vlmeta(vlmeta, None), name, skip=_SKIP)
    dims = vlmeta.get("_ARRAY_DIMENSIONS")
    if isinstance(dims, (list, tuple)) and len(dims) == arr.ndim:
        attrs["_ARRAY_DIMENSIONS"] = list(dims)
    return {f"{name}/.zarray": json.dumps(zarray), f"{name}/.zattrs": json.dumps(attrs)}


_SKIP = ("_ARRAY_DIMENSIONS", "_zarr_fill_value", "_FillValue")


def _v2_fill(value, dtype: np.dtype):
    """A CF ``_FillValue`` as Zarr v2 JSON (NaN and infinities as strings), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if dtype.kind == "f":
        value = float(value)
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    return int(value) if dtype.kind in "iu" and float(value).is_integer() else None


def kerchunk_refs(path, name: str | None = None, *, storage_options=None) -> dict:
    """kerchunk references for the array in the ``.b2nd`` frame at ``path``, as variable
    ``name`` (default: the file's stem) of a Zarr v2 group.

    Open them with ``fsspec.filesystem("reference", fo=refs)`` and zarr (or xarray's zarr
    engine, ``consolidated=False``); b2store must be installed where they are read, for the
    ``b2nd`` codec.
    """
    return combine_refs([path], name=name, storage_options=storage_options)


def refs_to_parquet(refs: dict, url, *, record_size: int = 10_000, storage_options=None) -> str:
    """Store kerchunk references (:func:`kerchunk_refs`, :func:`combine_refs`) as kerchunk's
    Parquet directory at ``url`` (local or fsspec), ``record_size`` references per file:
    for many chunks, far smaller and faster to open than the JSON. Read them back with
    ``fsspec.filesystem("reference", fo=url, remote_protocol=...)`` (its ``fo`` a Parquet
    directory). Needs kerchunk and fastparquet (``pip install kerchunk fastparquet``).
    Returns ``url``."""
    try:
        from kerchunk.df import refs_to_dataframe
    except ImportError as exc:
        raise ImportError(
            "Parquet references are written by kerchunk with fastparquet: "
            "pip install kerchunk fastparquet"
        ) from exc
    url = os.fspath(url)
    refs_to_dataframe(
        refs, url, record_size=record_size, storage_options=dict(storage_options or {})
    )
    return url


def combine_refs(paths: Sequence, name: str | None = None, *, storage_options=None) -> dict:
    """kerchunk references for the arrays of several ``.b2nd`` frames concatenated along
    their first axis (time, say), without copying: every file must have the same chunk and
    block shapes and dtype, and all but the last a first dimension that is a whole number of
    chunks."""
    arrays = [open_frame(p, storage_options=storage_options) for p in paths]
    try:
        first = arrays[0]
        name = name or str(paths[0]).rstrip("/").rsplit("/", 1)[-1].removesuffix(".b2nd")
        refs: dict[str, object] = {".zgroup": json.dumps({"zarr_format": 2})}
        offset = 0
        for k, arr in enumerate(arrays):
            if (arr.chunks, arr.blocks, arr.dtype, arr.shape[1:]) != (
                first.chunks,
                first.blocks,
                first.dtype,
                first.shape[1:],
            ):
                raise ValueError(
                    f"{paths[k]}: chunks, blocks, dtype or shape differ from {paths[0]}"
                )
            if k < len(arrays) - 1 and arr.shape[0] % arr.chunks[0]:
                raise ValueError(
                    f"{paths[k]}: its first dimension ({arr.shape[0]}) is not a whole number "
                    f"of chunks ({arr.chunks[0]}), so the next file cannot follow it"
                )
            refs.update(_array_refs(arr, name, offset))
            offset += -(-arr.shape[0] // arr.chunks[0]) if arr.ndim else 1
        shape = (sum(a.shape[0] for a in arrays), *first.shape[1:]) if first.ndim else ()
        refs.update(_meta(first, name, shape))
        return {"version": 1, "refs": refs}
    finally:
        for arr in arrays:
            arr.schunk.close()


# --- VirtualiZarr --------------------------------------------------------------------------


class B2ndParser:
    """A VirtualiZarr parser for ``.b2nd`` frames: ``open_virtual_dataset(url, registry,
    parser=B2ndParser())`` gives a virtual Dataset whose one variable's chunks are
    references (path, offset, length) into the frame, decoded by the Zarr v3 ``b2nd`` codec.

    Parameters
    ----------
    name : str, optional
        The variable's name: by default the one ``to_b2nd`` recorded, else the file's stem.
    sidecar_dir : str or path-like, optional
        Where to write the special chunks a manifest cannot hold (see Notes), as tiny files
        named by their content; without it such a frame is refused.

    Notes
    -----
    A chunk manifest entry is a byte range of some file: it cannot carry bytes inline (as
    kerchunk's ``base64:`` references do). Special chunks store no bytes, so:

    - chunks whose value is the array's fill value (zeros for the synthesized metadata,
      uninitialized chunks) are left out of the manifest, and read as the fill value;
    - other special chunks (NaN, or a repeated value) are written, each distinct one
      once, as a 32- (or 32 + typesize-) byte file in ``sidecar_dir`` and pointed at there;
      without ``sidecar_dir`` the parser raises :class:`~b2store.UnsupportedError` naming
      the chunk, rather than let them read as the fill value.

    Local frames (``file://`` URLs), contiguous or sparse, are read where they are; other
    URLs go through the registry's object store, by byte ranges (contiguous frames).
    """

    def __init__(self, *, name: str | None = None, sidecar_dir=None):
        self.name = name
        self.sidecar_dir = None if sidecar_dir is None else Path(sidecar_dir).absolute()

    def __call__(self, url: str, registry):
        from virtualizarr.manifests import (
            ChunkManifest,
            ManifestArray,
            ManifestGroup,
            ManifestStore,
        )
        from zarr.core.metadata import ArrayV3Metadata

        from ...nd.array import B2ndArray
        from ..zarr.zarr_json import XARRAY_KEY, array_metadata

        arr = _open_for_parser(url, registry)
        try:
            if not isinstance(arr, B2ndArray):
                raise UnsupportedError("virtual arrays from frames without a b2nd metalayer", url)
            # The dtype's zero as the fill value, not a CF _FillValue of NaN (as B2ndStore
            # serves it): a manifest leaves out the chunks that read as the fill value (zero
            # and uninitialized ones, as b2store reads them) and cannot carry others.
            # xarray masks with the _FillValue attribute in Zarr v3, not with fill_value.
            doc = array_metadata(arr, url, cf_fill=False)
            vlmeta = dict(arr.vlmeta)
            info = vlmeta.get(XARRAY_KEY)
            name = self.name or (info.get("name") if isinstance(info, dict) else None)
            if not isinstance(name, str) or not name:
                name = url.rstrip("/").rsplit("/", 1)[-1]
                name = name.rsplit(".", 1)[0] if "." in name else name
            metadata = ArrayV3Metadata.from_dict(doc)
            fill = np.asarray(metadata.fill_value, arr.dtype).tobytes()
            entries = self._entries(arr, url, fill)
            # The grid is given, not inferred from the keys: chunks left out (the fill value)
            # at the end of an axis, or everywhere, must not shrink it.
            grid = tuple(-(-s // c) for s, c in zip(arr.shape, arr.chunks)) or None
        finally:
            arr.schunk.close()
        manifest = ChunkManifest(entries, shape=grid, separator="/")
        group = ManifestGroup(arrays={name: ManifestArray(metadata, manifest)}, attributes={})
        return ManifestStore(group=group, registry=registry)

    def _entries(self, arr, url: str, fill: bytes) -> dict:
        from ..zarr.keys import is_uninit

        schunk = arr.schunk
        grid = [-(-s // c) for s, c in zip(arr.shape, arr.chunks)]
        entries: dict[str, dict] = {}
        if arr.size == 0:
            return entries
        remote = not url.startswith("file://")
        for n, coords in enumerate(np.ndindex(*grid) if grid else [()]):
            key = "/".join(map(str, coords)) if coords else "0"
            if is_uninit(schunk, n):
                continue
            span = schunk.chunk_span(n)
            if span is None:
                chunk = schunk.get_chunk(n)
                if _special_value(chunk, arr.dtype.itemsize) == fill:
                    continue  # reads as the fill value
                entries[key] = self._sidecar(chunk, url, n)
                continue
            path, offset, length = span
            entries[key] = {
                "path": url if remote else Path(path).absolute().as_uri(),
                "offset": offset,
                "length": length,
            }
        return entries

    def _sidecar(self, chunk: bytes, url: str, n: int) -> dict:
        if self.sidecar_dir is None:
            raise UnsupportedError(
                f"special chunk {n} of {url} (NaN or a repeated value) in a chunk manifest, "
                "which holds byte ranges only; pass B2ndParser(sidecar_dir=...) to write such "
                "chunks as tiny files",
                url,
            )
        import hashlib

        self.sidecar_dir.mkdir(parents=True, exist_ok=True)
        path = self.sidecar_dir / f"{hashlib.sha256(chunk).hexdigest()[:32]}.b2chunk"
        if not path.exists():  # (never through a link planted at a temporary's name)
            _files.write_atomic(path, chunk)
        return {"path": path.as_uri(), "offset": 0, "length": len(chunk)}


def _special_value(chunk: bytes, itemsize: int) -> bytes:
    """The item a special chunk repeats (decoded from one item's worth)."""
    from ...chunk.decoder import ChunkDecoder

    decoder = ChunkDecoder(chunk)
    out = np.empty(decoder.header.nbytes, np.uint8)
    decoder.decode_into(out)
    return out[:itemsize].tobytes()


def _open_for_parser(url: str, registry):
    """The frame at ``url``: opened where it lies for ``file://`` URLs, else read by byte
    ranges through the registry's object store."""
    from ...api import open as b2open

    if url.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return b2open(unquote(urlparse(url).path))
    from ...frame.contiguous import RangeBackend

    store, path = registry.resolve(url)
    path = str(path)
    size = int(store.head(path)["size"])
    return b2open(RangeBackend(_ObjectRange(store, path), size, name=url))


class _ObjectRange:
    """``read_range(start, stop)`` over an obstore/obspec store."""

    def __init__(self, store, path: str):
        self.store, self.path = store, path

    def __call__(self, start: int, stop: int) -> bytes:
        if stop <= start:
            return b""
        return bytes(self.store.get_range(self.path, start=start, end=stop))


def manifest_store(vds, registry):
    """A read-only Zarr store over a virtual Dataset (one from ``open_virtual_dataset``,
    or several combined with ``xr.concat``), so that it can be read without writing it
    to Icechunk first: ``xr.open_zarr(manifest_store(vds, registry), consolidated=False)``.

    VirtualiZarr's kerchunk writer cannot carry ``.b2nd`` references (it drops
    array-to-bytes codecs such as ``b2nd``); use :func:`combine_refs` for kerchunk.
    """
    from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore
    from virtualizarr.manifests.utils import copy_and_replace_metadata

    arrays = {}
    for name, var in vds.variables.items():
        marr = var.data
        if not isinstance(marr, ManifestArray):
            raise TypeError(f"variable {name!r} is not virtual (loaded variables have no manifest)")
        meta = copy_and_replace_metadata(
            marr.metadata, new_dimension_names=list(var.dims), new_attributes=dict(var.attrs)
        )
        arrays[str(name)] = ManifestArray(metadata=meta, chunkmanifest=marr.manifest)
    group = ManifestGroup(arrays=arrays, attributes=dict(vds.attrs))
    return ManifestStore(group=group, registry=registry)
