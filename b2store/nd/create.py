"""Writing b2nd arrays: from numpy data (``asarray``, ``frombuffer``) or filled with one value
(``zeros``, ``empty``, ``full``), in memory or to a contiguous or sparse frame.

Chunk and block shapes default to python-blosc2's choice, compression parameters to its
defaults (Zstd, clevel 5, shuffle), and constant chunks are stored as special chunks.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import _files, _progress
from .._userpath import names_user_path
from ..chunk.encoder import special_chunk, writable_dtype
from ..constants import SpecialValue
from ..errors import TargetExistsError
from ..frame import remote
from ..frame.b2lock import Sidecar, sidecar_path
from ..frame.lock import LOCK_TIMEOUT
from ..frame.mappings import check_vlmeta_sum, raw_value
from ..frame.remote_sparse import drop_sparse, fill_new
from ..frame.schunk import SChunk
from ..frame.sources import is_url, local_path
from ..frame.staging import place_new, replace_path, staging_path
from ..frame.vlmeta_codec import pack_value
from .array import B2ndArray
from .chunks import cparams_for, encode_array_chunk, encode_chunk_array
from .geometry import chunk_grid, chunk_nitems, chunk_region
from .meta import B2ndMeta
from .options import ArrayOptions, array_constructor
from .shapes import default_chunks_blocks

__all__ = ["asarray", "frombuffer", "zeros", "empty", "full"]


_check_dtype = writable_dtype  # StringDType: UnsupportedError; objects, empty items: TypeError


def _as_shape(shape) -> tuple[int, ...]:
    """A shape as NumPy and python-blosc2 take it: a sequence of ints, or one int (1-d)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        return (int(shape),)
    return tuple(int(n) for n in shape)


def _new(shape, dtype, urlpath, opts: ArrayOptions, storage_options=None):
    if opts.mode != "w" and urlpath is not None and not is_url(urlpath):
        # Refused before any work (a link to nothing counts: a write there would follow it);
        # checked again, in one step where the system can, when the array is put in place.
        # A link planted inside a tree is named as such first (LinkError), as in mode "w".
        _files.check_write(local_path(urlpath))
        if os.path.lexists(local_path(urlpath)):
            raise TargetExistsError(urlpath, opts.mode)
    shape = _as_shape(shape)
    dtype = _check_dtype(dtype)
    coding = opts.coding
    chunks, blocks = default_chunks_blocks(
        shape, dtype.itemsize, chunks=opts.chunks, blocks=opts.blocks, **coding
    )
    b2nd = B2ndMeta(shape=shape, chunkshape=chunks, blockshape=blocks, dtype=dtype)
    cparams = cparams_for(dtype, blocks, **coding)
    # Packed as python-blosc2 packs them (NumPy arrays, tuples, sets...), read back decoded.
    user_meta = {name: pack_value(value) for name, value in (opts.meta or {}).items()}
    size = math.prod(shape)
    made = dict(
        chunksize=chunk_nitems(chunks, blocks) * dtype.itemsize if size else -1,
        params=cparams,
        meta={"b2nd": b2nd.to_bytes(), **user_meta},
    )
    if is_url(urlpath):  # (a sparse frame in an object store: written by its first change)
        schunk = SChunk.create(
            urlpath,
            contiguous=False,
            storage_options=dict(storage_options or {}),
            exclusive=opts.mode != "w",
            **made,
        )
        return schunk, b2nd, cparams
    # A new array on disk is built under a name beside its path and renamed into place once
    # whole (_finish): a process killed meanwhile never leaves an array short of chunks.
    staged = None if urlpath is None else staging_path(urlpath)
    schunk = SChunk.create(staged, contiguous=opts.contiguous, **made)
    schunk._final_path = urlpath
    schunk._final_mode = opts.mode
    schunk._final_locking = (opts.locking, opts.contiguous)
    return schunk, b2nd, cparams


@contextlib.contextmanager
def _removed_on_error(schunk):
    """On any error while a new array is written (a full disk, an interrupt), close its
    staged frame and remove it: neither its descriptor (which would pin a deleted file's
    space) nor its file outlives the error. The path it was to replace is left as it was."""
    try:
        yield
    except BaseException:
        staged = schunk.urlpath if getattr(schunk, "_final_path", None) is not None else None
        schunk.close()
        if staged is not None:
            _remove_staged(staged)
        raise


def _remove_staged(staged) -> None:
    if os.path.isdir(staged) and not os.path.islink(staged):
        shutil.rmtree(staged, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)


def _finish(schunk, b2nd, vlmeta) -> B2ndArray:
    arr = B2ndArray(schunk, b2nd)
    if vlmeta:
        arr.vlmeta.update(vlmeta)
    final = getattr(schunk, "_final_path", None)
    if final is None:
        return arr
    staged = schunk.urlpath
    arr.close()
    locking, contiguous = schunk._final_locking
    mode = schunk._final_mode
    # python-blosc2's handles with locking on are kept out while the array is replaced, and
    # told by the generation that their view is stale (frame/b2lock.py). The sidecar is the
    # one of what is there (a sparse frame's inside its directory), not of what replaces it:
    # a file where a sparse frame is to go has no directory to hold one.
    there = os.path.lexists(final)
    there_sparse = os.path.isdir(final) and not os.path.islink(final) if there else not contiguous
    sidecar = Sidecar(sidecar_path(final, sparse=there_sparse), locking, True, LOCK_TIMEOUT)
    with sidecar.hold_exclusive():
        if mode == "w":
            replace_path(staged, final)
        elif not place_new(staged, final):  # made by another process since _new checked
            _remove_staged(staged)
            raise TargetExistsError(final, mode)
    if not contiguous:  # (the new directory's own, made where asked, as c-blosc2 makes it)
        own = sidecar_path(final, sparse=True)
        with Sidecar(own, locking, True, LOCK_TIMEOUT).hold_exclusive():
            pass
    return B2ndArray(SChunk.open(final, mode="a", locking=locking), b2nd)


@names_user_path
@array_constructor
def asarray(
    array,
    urlpath=None,
    *,
    progress: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> B2ndArray:
    """Write ``array`` as a b2nd frame (in memory when ``urlpath`` is None).

    Parameters
    ----------
    array : array_like
        The data (any fixed-size dtype).
    urlpath : str or path, optional
        The ``.b2nd`` file (or sparse-frame directory) to write; None keeps it in memory. An
        fsspec URL (``s3://bucket/x.b2nd``) stores one contiguous frame there, whole in one
        request, and returns it opened for reading.
    <options>
    progress : bool, optional
        A tqdm bar on stderr counting the bytes encoded: always (True), never (False), or
        (None, the default) when stderr is a terminal and the array is large (more than
        64 MiB or 16 chunks, see :mod:`b2store._progress`).
    <storage_options>

    Returns
    -------
    B2ndArray

    >>> import numpy as np, b2store
    >>> a = b2store.asarray(np.arange(12.0).reshape(3, 4), vlmeta={"units": "K"})
    >>> a[1, ::2], a.vlmeta["units"]
    (array([4., 6.]), 'K')
    """
    opts = ArrayOptions(**options)
    data = np.asarray(array)
    if is_url(urlpath):
        return _to_object(data, urlpath, opts, progress, storage_options)
    if storage_options:
        raise ValueError(
            f"storage_options are for a URL urlpath (s3://...), not a local path: drop them "
            f"for {os.fspath(urlpath) if urlpath is not None else 'an array in memory'}"
        )
    return _from_array(data, urlpath, opts, progress)


def _to_object(data: np.ndarray, url: str, opts: ArrayOptions, progress, storage_options):
    """``data`` in an object store: a sparse frame (``contiguous=False``, see
    :func:`_to_sparse_object`) or a contiguous frame stored whole (:func:`_put_whole`)."""
    if not opts.contiguous:
        return _to_sparse_object(data, url, opts, progress, storage_options)
    return _put_whole(lambda: _from_array(data, None, opts, progress), url, opts, storage_options)


def _put_whole(make, url: str, opts: ArrayOptions, storage_options) -> B2ndArray:
    """The array ``make()`` builds in memory, stored at ``url`` as one contiguous frame.
    Object stores have no rename and no append: the frame is stored in one request (one PUT;
    s3fs sends a large object as a multipart upload, completed only when whole), so the
    object holds the frame it held before or the new one, never a part."""
    fs, path = remote.filesystem(url, storage_options)
    if opts.mode != "w" and remote.call(url, fs.exists, path):
        raise TargetExistsError(url, opts.mode)
    made = make()
    remote.call(url, fs.pipe_file, path, made.schunk.to_cframe())
    drop_sparse(url, storage_options)  # (a sparse frame of that name, replaced)
    schunk = SChunk.open(url, storage_options=dict(storage_options or {}))
    return B2ndArray(schunk, made._meta, dtype=made.dtype)


def _to_sparse_object(data: np.ndarray, url: str, opts: ArrayOptions, progress, storage_options):
    """``data`` as a sparse frame in an object store: its chunk objects first, then its index
    with the vlmeta in one PUT (see :mod:`b2store.frame.remote_sparse`). A frame that was
    there stays readable until that PUT, and its chunk objects go after it."""
    dtype = _check_dtype(data.dtype)
    schunk, b2nd, cparams = _new(data.shape, dtype, url, opts, storage_options)
    raw = {name: raw_value(value) for name, value in (opts.vlmeta or {}).items()}
    check_vlmeta_sum(raw, schunk.limits)
    nchunks = math.prod(chunk_grid(b2nd.shape, b2nd.chunkshape))
    bar = _progress.bar(
        data.nbytes,
        url.rsplit("/", 1)[-1],
        progress,
        large=_progress.is_large(data.nbytes, nchunks),
    )
    try:
        chunks = encode_chunks(data, b2nd, cparams, opts.nthreads) if data.size else ()
        counted = _counted(chunks, bar, data.nbytes / max(1, nchunks))
        # Many PUTs in flight at once (each a round trip), then the index.
        fill_new(schunk, raw, counted, nchunks)
    finally:
        bar.close()
    return B2ndArray(schunk, b2nd)


def _from_array(data: np.ndarray, urlpath, opts: ArrayOptions, progress=False) -> B2ndArray:
    dtype = _check_dtype(data.dtype)
    schunk, b2nd, cparams = _new(data.shape, dtype, urlpath, opts)
    nchunks = math.prod(chunk_grid(b2nd.shape, b2nd.chunkshape))
    large = _progress.is_large(data.nbytes, nchunks)
    desc = os.path.basename(os.fspath(urlpath)) if urlpath is not None else "asarray"
    bar = _progress.bar(data.nbytes, desc, progress, large=large)
    with _removed_on_error(schunk):
        try:
            if data.size:
                chunks = encode_chunks(data, b2nd, cparams, opts.nthreads)
                schunk.extend_chunks(_counted(chunks, bar, data.nbytes / max(1, nchunks)))
        finally:
            bar.close()
        return _finish(schunk, b2nd, opts.vlmeta)


def _counted(chunks, bar, per_chunk: float):
    """``chunks`` passed on, each counted on ``bar`` (as its share of the array's bytes: edge
    chunks are smaller, the total is exact in the end)."""
    done = 0.0
    for chunk in chunks:
        yield chunk
        before, done = done, done + per_chunk
        bar.update(round(done) - round(before))


def encode_chunks(data: np.ndarray, b2nd: B2ndMeta, cparams: dict, nthreads=None):
    """The compressed chunks of ``data``, in C order over the chunk grid."""
    grid = chunk_grid(b2nd.shape, b2nd.chunkshape)
    rows = _row_blocks(data, b2nd.chunkshape, b2nd.blockshape)
    if rows:
        params = cparams.replace(
            typesize=data.dtype.itemsize,
            blocksize=math.prod(b2nd.blockshape) * data.dtype.itemsize,
        )
    for coords in np.ndindex(*grid) if grid else [()]:
        region = chunk_region(coords, b2nd.shape, b2nd.chunkshape)
        part = data[region]
        if rows and part.shape == tuple(b2nd.chunkshape):
            # The chunk's items already lie in block order: encode them where they are.
            buf = np.ascontiguousarray(part).reshape(-1)
            yield encode_array_chunk(buf, data.dtype, params, nthreads)
            continue
        yield encode_chunk_array(part, b2nd.chunkshape, b2nd.blockshape, cparams, nthreads=nthreads)


def _row_blocks(data: np.ndarray, chunks: Sequence[int], blocks: Sequence[int]) -> bool:
    """Whether a full chunk's blocks follow one another in the chunk's C order: every block
    spans the chunk's trailing dimensions whole and the first dimension splits evenly (as
    python-blosc2's default shapes for large arrays do). Such a chunk needs no reordering
    and no padding, so encoding skips the zero-filled copy ``array_to_chunk`` makes."""
    if data.ndim != len(chunks) or not chunks or data.dtype.subdtype is not None:
        return False
    return chunks[0] % blocks[0] == 0 and tuple(blocks[1:]) == tuple(chunks[1:])


@names_user_path
@array_constructor
def frombuffer(buffer, shape: Sequence[int], dtype, urlpath=None, **options: Any) -> B2ndArray:
    """Write the items of ``buffer`` (C order) as an array of ``shape`` and ``dtype``.

    Parameters
    ----------
    buffer : bytes-like
        At least ``prod(shape)`` items of ``dtype``.
    shape : int or tuple of int
    dtype : numpy dtype
    urlpath : str or path, optional
        Where to write; None keeps it in memory.
    <options>
    """
    opts = ArrayOptions(**options)
    dtype = _check_dtype(dtype)
    shape = _as_shape(shape)
    data = np.frombuffer(buffer, dtype=dtype, count=math.prod(shape)).reshape(shape)
    return _from_array(data, urlpath, opts)


def _filled(
    kind, shape, dtype, value: bytes, urlpath, opts: ArrayOptions, storage_options=None
) -> B2ndArray:
    if is_url(urlpath) and opts.contiguous:

        def make():
            return _filled(kind, shape, dtype, value, None, opts)

        return _put_whole(make, urlpath, opts, storage_options)
    if storage_options and not is_url(urlpath):
        raise ValueError(
            f"storage_options are for a URL urlpath (s3://...), not a local path: drop them "
            f"for {os.fspath(urlpath) if urlpath is not None else 'an array in memory'}"
        )
    schunk, b2nd, cparams = _new(shape, dtype, urlpath, opts, storage_options)
    chunks = []
    if math.prod(b2nd.shape):
        nbytes = chunk_nitems(b2nd.chunkshape, b2nd.blockshape) * b2nd.dtype.itemsize
        chunk = special_chunk(kind, nbytes, b2nd.dtype.itemsize, value, cparams.blocksize)
        chunks = [chunk] * math.prod(chunk_grid(b2nd.shape, b2nd.chunkshape))
    if is_url(urlpath):  # a sparse frame in an object store: its index, in one PUT
        raw = {name: raw_value(v) for name, v in (opts.vlmeta or {}).items()}
        check_vlmeta_sum(raw, schunk.limits)
        schunk.extend_chunks(chunks, vlmeta=raw)
        return B2ndArray(schunk, b2nd)
    with _removed_on_error(schunk):
        if chunks:
            schunk.extend_chunks(chunks)
        return _finish(schunk, b2nd, opts.vlmeta)


# zeros' and empty's docstrings after their first line.
_ZERO_FILLED_PARAMETERS = """

    Parameters
    ----------
    shape : int or tuple of int
    dtype : numpy dtype
        Default float64.
    urlpath : str or path, optional
        Where to write; None keeps it in memory.
    <options>
    <storage_options>
    """


def _zero_filled(name: str, summary: str) -> Callable[..., B2ndArray]:
    """``zeros`` or ``empty``: one body, as python-blosc2's ``empty`` reads as zeros (every
    chunk a zeros special chunk), each with its own name and first docstring line."""

    def constructor(
        shape: Sequence[int],
        dtype=np.float64,
        urlpath=None,
        *,
        storage_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> B2ndArray:
        opts = ArrayOptions(**options)
        return _filled(SpecialValue.ZERO, shape, dtype, b"", urlpath, opts, storage_options)

    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = summary + _ZERO_FILLED_PARAMETERS
    return names_user_path(array_constructor(constructor))


zeros = _zero_filled(
    "zeros", "An array of zeros: every chunk a zeros special chunk (no data stored)."
)
empty = _zero_filled(
    "empty", "An array whose values are not set; like python-blosc2's, it reads as zeros."
)


@names_user_path
@array_constructor
def full(
    shape: Sequence[int],
    fill_value,
    dtype=None,
    urlpath=None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> B2ndArray:
    """An array of ``fill_value`` everywhere: repeated-value special chunks.

    Parameters
    ----------
    shape : int or tuple of int
    fill_value : scalar
        The value of every item.
    dtype : numpy dtype, optional
        Default: ``fill_value``'s.
    urlpath : str or path, optional
        Where to write; None keeps it in memory.
    <options>
    <storage_options>
    """
    opts = ArrayOptions(**options)
    value = np.asarray(fill_value, dtype=dtype)
    dtype = _check_dtype(value.dtype)
    kind = SpecialValue.VALUE if value.tobytes().strip(b"\0") else SpecialValue.ZERO
    raw = value.tobytes() if kind == SpecialValue.VALUE else b""
    return _filled(kind, shape, dtype, raw, urlpath, opts, storage_options)
