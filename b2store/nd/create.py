"""Writing b2nd arrays: from numpy data (``asarray``, ``frombuffer``) or filled with one value
(``zeros``, ``empty``, ``full``), in memory or to a contiguous or sparse frame.

Chunk and block shapes default to python-blosc2's choice, compression parameters to its
defaults (Zstd, clevel 5, shuffle), and constant chunks are stored as special chunks.
"""

from __future__ import annotations

import math

import msgpack
import numpy as np

from ..chunk.encoder import special_chunk
from ..constants import SpecialValue
from ..frame.schunk import SChunk
from .array import B2ndArray
from .chunks import cparams_for, encode_array_chunk, encode_chunk_array
from .geometry import chunk_grid, chunk_nitems, chunk_region
from .meta import B2ndMeta
from .shapes import default_chunks_blocks

__all__ = ["asarray", "frombuffer", "zeros", "empty", "full"]
# Still importable from here for the integrations written against it; nd/chunks.py holds them.
_REEXPORTED = (cparams_for, encode_array_chunk)


def _check_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise TypeError(f"b2nd arrays hold fixed-size items, not {dtype}")
    if dtype.itemsize == 0:
        raise TypeError(f"b2nd arrays need items of at least one byte, not {dtype}")
    return dtype


def _new(shape, dtype, urlpath, *, chunks, blocks, contiguous, mode, meta, cparams_kw):
    if mode not in ("w", "x"):
        raise ValueError(f"mode must be 'w' (overwrite) or 'x' (create new), not {mode!r}")
    if mode == "x" and urlpath is not None:
        from ..frame.sources import local_path

        if local_path(urlpath).exists():
            raise FileExistsError(f"{urlpath} exists (mode='x')")
    shape = tuple(int(n) for n in shape)
    dtype = _check_dtype(dtype)
    chunks, blocks = default_chunks_blocks(shape, dtype.itemsize, chunks=chunks, blocks=blocks)
    b2nd = B2ndMeta(shape=shape, chunkshape=chunks, blockshape=blocks, dtype=dtype)
    cparams = cparams_for(dtype, blocks, **cparams_kw)
    user_meta = {
        name: msgpack.packb(value, use_bin_type=True) for name, value in (meta or {}).items()
    }
    size = math.prod(shape)
    schunk = SChunk.create(
        urlpath,
        contiguous=contiguous,
        typesize=dtype.itemsize,
        chunksize=chunk_nitems(chunks, blocks) * dtype.itemsize if size else -1,
        codec=cparams["codec"],
        clevel=cparams["clevel"],
        filters=cparams["filters"],
        filters_meta=cparams["filters_meta"],
        splitmode=cparams["splitmode"],
        blocksize=cparams["blocksize"],
        meta={"b2nd": b2nd.to_bytes(), **user_meta},
    )
    return schunk, b2nd, cparams


def _finish(schunk, b2nd, vlmeta) -> B2ndArray:
    arr = B2ndArray(schunk, b2nd)
    for name, value in (vlmeta or {}).items():
        arr.vlmeta[name] = value
    return arr


def asarray(
    array,
    urlpath=None,
    *,
    chunks=None,
    blocks=None,
    contiguous: bool = True,
    mode: str = "w",
    codec="zstd",
    clevel: int = 5,
    filters=None,
    filters_meta=None,
    splitmode="auto",
    meta: dict | None = None,
    vlmeta: dict | None = None,
    nthreads: int | None = None,
    **metadata,
) -> B2ndArray:
    """Write ``array`` as a b2nd frame (in memory when ``urlpath`` is None).

    ``meta`` adds fixed metalayers (msgpack-packed values); ``vlmeta`` and any other keyword
    (``units="K"``) become variable-length metalayers.

    >>> import numpy as np, b2store
    >>> a = b2store.asarray(np.arange(12.0).reshape(3, 4), units="K")
    >>> a[1, ::2], a.vlmeta["units"]
    (array([4., 6.]), 'K')
    """
    vlmeta = {**(vlmeta or {}), **metadata}
    data = np.asarray(array)
    dtype = _check_dtype(data.dtype)
    schunk, b2nd, cparams = _new(
        data.shape,
        dtype,
        urlpath,
        chunks=chunks,
        blocks=blocks,
        contiguous=contiguous,
        mode=mode,
        meta=meta,
        cparams_kw=dict(
            codec=codec,
            clevel=clevel,
            filters=filters,
            filters_meta=filters_meta,
            splitmode=splitmode,
        ),
    )
    if data.size:
        schunk.extend_chunks(encode_chunks(data, b2nd, cparams, nthreads))
    return _finish(schunk, b2nd, vlmeta)


def encode_chunks(data: np.ndarray, b2nd: B2ndMeta, cparams: dict, nthreads=None):
    """The compressed chunks of ``data``, in C order over the chunk grid."""
    grid = chunk_grid(b2nd.shape, b2nd.chunkshape)
    for coords in np.ndindex(*grid) if grid else [()]:
        region = chunk_region(coords, b2nd.shape, b2nd.chunkshape)
        yield encode_chunk_array(
            data[region], b2nd.chunkshape, b2nd.blockshape, cparams, nthreads=nthreads
        )


def frombuffer(buffer, shape, dtype, urlpath=None, **kwargs) -> B2ndArray:
    """Write the items of ``buffer`` (C order) as an array of ``shape`` and ``dtype``."""
    dtype = _check_dtype(dtype)
    data = np.frombuffer(buffer, dtype=dtype, count=math.prod(shape)).reshape(shape)
    return asarray(data, urlpath, **kwargs)


def _filled(kind, shape, dtype, value: bytes, urlpath, **kwargs) -> B2ndArray:
    vlmeta = kwargs.pop("vlmeta", None)
    cparams_kw = {
        k: kwargs.pop(k)
        for k in ("codec", "clevel", "filters", "filters_meta", "splitmode")
        if k in kwargs
    }
    schunk, b2nd, cparams = _new(
        shape,
        dtype,
        urlpath,
        chunks=kwargs.pop("chunks", None),
        blocks=kwargs.pop("blocks", None),
        contiguous=kwargs.pop("contiguous", True),
        mode=kwargs.pop("mode", "w"),
        meta=kwargs.pop("meta", None),
        cparams_kw=cparams_kw,
    )
    if kwargs:
        raise TypeError(f"unexpected arguments: {', '.join(kwargs)}")
    if math.prod(b2nd.shape):
        nbytes = chunk_nitems(b2nd.chunkshape, b2nd.blockshape) * b2nd.dtype.itemsize
        chunk = special_chunk(kind, nbytes, b2nd.dtype.itemsize, value, cparams["blocksize"])
        n = math.prod(chunk_grid(b2nd.shape, b2nd.chunkshape))
        schunk.extend_chunks([chunk] * n)
    return _finish(schunk, b2nd, vlmeta)


def zeros(shape, dtype=np.float64, urlpath=None, **kwargs) -> B2ndArray:
    """An array of zeros: every chunk a zeros special chunk (no data stored)."""
    return _filled(SpecialValue.ZERO, shape, dtype, b"", urlpath, **kwargs)


def empty(shape, dtype=np.float64, urlpath=None, **kwargs) -> B2ndArray:
    """An array whose values are not set; like python-blosc2, it reads as zeros."""
    return zeros(shape, dtype, urlpath, **kwargs)


def full(shape, fill_value, dtype=None, urlpath=None, **kwargs) -> B2ndArray:
    """An array of ``fill_value`` everywhere: repeated-value special chunks."""
    value = np.asarray(fill_value, dtype=dtype)
    dtype = _check_dtype(value.dtype)
    if not value.tobytes().strip(b"\0"):
        return zeros(shape, dtype, urlpath, **kwargs)
    return _filled(SpecialValue.VALUE, shape, dtype, value.tobytes(), urlpath, **kwargs)
