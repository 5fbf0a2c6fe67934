"""``to_b2nd`` into an object store (``s3://bucket/x.b2nd``, any fsspec URL).

Object stores have no rename and no append, and a reader may look at any moment: what is
stored there must be whole or absent. Everything is written to a local temporary first:

- a ``.b2nd`` frame and a ``.b2z`` zip are each one object, stored in one request (one PUT;
  s3fs sends a large object as a multipart upload, which the store completes only when every
  part is in): the object holds what it held before or the new one, never a part;
- a sparse frame (``contiguous=False``) is written straight there, not through a temporary:
  its chunk objects first (by the dask tasks that compute them, for dask-backed data), its
  index last in one PUT (:mod:`b2store.frame.remote_sparse`);
- a ``.b2d`` tree is many objects: its frames are stored first (a sparse frame's chunk
  objects before its index, see :mod:`b2store.frame.remote_sparse`), its groups' attributes
  (``__vlmeta__.b2f``) after them, the root's last; then objects of a tree that was there and
  that the new one does not have are removed. Each frame is whole at every moment; a reader
  during a replacement may find some variables old and others new.

Writes into a stored Dataset (appends, regions) go into a sparse frame only (new chunk
objects, then its index in one PUT); into a contiguous frame, a zip or a tree they are
refused before anything is written.

The Dataset itself never comes here: ``to_b2nd`` asks :func:`upload_for` where to write (and
what the store refuses), hands the Dataset once to its writer, as for a local path, then
calls :meth:`Upload.store`.
"""

from __future__ import annotations

import errno
import functools
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from ... import _progress
from ...errors import TargetExistsError, UnsupportedError
from ...frame import remote
from ...frame.backend import INDEX_NAME
from ...frame.mappings import check_vlmeta_sum, raw_value
from ...frame.remote_sparse import drop_sparse, fill_new, put_chunk
from ...nd.chunks import encode_array_chunk
from ...nd.geometry import array_to_chunk
from .append import resolve_mode
from .frames import WAY_OUT, chunks_of, frame_plan, new_frame

__all__ = ["Upload", "upload_for"]

_LAYOUTS = {".b2nd": "frame", ".b2z": "b2z", ".b2d": "b2d"}
# Written after the frames: each group's attributes, and the embed store (small arrays kept
# inside it, which python-blosc2 looks up as members of the tree).
_AFTER = ("__vlmeta__.b2f", "embed.b2e")


@dataclass
class Upload:
    """What ``to_b2nd`` writes for a URL, decided before anything is written, and how it is
    stored there once written: ``to_b2nd`` hands the Dataset to its one writer (a write into
    a stored sparse frame where ``into``, else a new Dataset at ``target``, by ``write`` where
    a sparse frame goes straight to the bucket), then calls :meth:`store`. A context manager:
    the local temporary goes at its exit."""

    url: str
    options: dict
    mode: str
    layout: str
    into: bool = False
    #: where the writer writes: the URL itself, or a file in a local temporary directory
    target: str = ""
    #: a sparse frame's writer (:func:`.frames.write_frame`'s ``write``), or None
    write: Callable | None = None
    _tmp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> Upload:
        return self

    def __exit__(self, *exc) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    def store(self) -> None:
        """What was written in the local temporary, stored at the URL (nothing to do for
        what was written there straight)."""
        if self._tmp is None:
            return
        fs, path = remote.filesystem(self.url, self.options)
        if self.layout == "b2d":
            _put_tree(Path(self.target), self.url, fs, path.rstrip("/"), self.options)
        else:
            remote.call(self.url, fs.put_file, self.target, path)
            if self.layout == "frame":
                drop_sparse(self.url, self.options)  # (a sparse frame of that name, replaced)


def upload_for(
    url: str, storage_options: Mapping | None, mode, layout, *, append_dim, region, contiguous
) -> Upload:
    """How ``to_b2nd(obj, url, ...)`` writes (see the module docstring); what an object store
    cannot take is refused here, before anything is written."""
    suffix = PurePosixPath(url.split("?")[0]).suffix
    layout = layout or _LAYOUTS.get(suffix)
    if layout not in ("frame", "b2z", "b2d") or _LAYOUTS.get(suffix) != layout:
        raise UnsupportedError(
            "layout in an object store (a .b2nd frame, a .b2z zip or a .b2d tree, named so)",
            layout or suffix or url,
        )
    options = dict(storage_options or {})
    if mode in ("a", "a-", "r+") or append_dim is not None or region is not None:
        return _upload_into(url, options, mode, layout, append_dim, region)
    if mode not in (None, "w", "w-", "x"):
        raise UnsupportedError("mode in an object store", mode)
    if contiguous is False and layout == "b2z":
        raise UnsupportedError("sparse frame in a .b2z (contiguous=False)", url)
    fs, path = remote.filesystem(url, options)
    mode = mode or "w-"  # (as to_zarr: what is there is replaced only when asked)
    if mode != "w" and remote.call(url, fs.exists, path):
        raise TargetExistsError(url, mode, WAY_OUT)
    if layout == "frame" and contiguous is False:
        write = functools.partial(_variable_to_bucket, options, mode != "w")
        return Upload(url, options, "w", layout, target=url, write=write)
    tmp = tempfile.TemporaryDirectory(prefix=".b2store-upload-")
    local = os.path.join(tmp.name, "object" + suffix)
    return Upload(url, options, "w", layout, target=local, _tmp=tmp)


def _upload_into(url: str, options: dict, mode, layout, append_dim, region) -> Upload:
    """Appends and region writes (modes "a", "a-", "r+") into a sparse frame in an object
    store: the chunks they touch go up as new chunk objects, then the index, in one PUT
    over the version read (a writer that loses to another gets ConflictError). A contiguous
    frame, a zip or a tree there is refused before anything is written."""
    mode = resolve_mode(mode, append_dim, region)
    fs, path = remote.filesystem(url, options)
    index = f"{path.rstrip('/')}/{INDEX_NAME}"
    if layout == "frame" and remote.call(url, fs.exists, index):
        return Upload(url, options, mode, layout, into=True, target=url)
    if layout != "frame" or remote.call(url, fs.exists, path):
        raise UnsupportedError(
            "write into a stored Dataset in an object store other than a sparse frame "
            "(a contiguous frame, a zip and a tree are stored whole: write them again, "
            "or store the Dataset as a sparse frame, contiguous=False)",
            url,
        )
    if mode == "r+" or region is not None:
        raise FileNotFoundError(errno.ENOENT, f"nothing to write into (mode={mode!r})", url)
    # Nothing there: the first append makes the frame (a sparse one, to append to).
    write = functools.partial(_variable_to_bucket, options, False)
    return Upload(url, options, "w", layout, target=url, write=write)


def _variable_to_bucket(options, exclusive, var, url, storage, contiguous, nthreads, extra, bar):
    var, meta, cparams, vlmeta = frame_plan(var, PurePosixPath(url).stem, storage, extra)
    raw = {name: raw_value(value) for name, value in vlmeta.items()}
    size = math.prod(meta.shape)
    schunk = new_frame(url, meta, cparams, contiguous=False, storage_options=options,
                       exclusive=exclusive)  # fmt: skip
    check_vlmeta_sum(raw, schunk.limits)
    with schunk:
        if size and hasattr(var.data, "dask"):  # (each task stores its chunk)

            def by_tasks(first):
                return _stored_by_tasks(var.data, meta, cparams, url, options, first)

            fill_new(schunk, raw, stored_by=by_tasks)
        else:  # (16 PUTs at once, then the index)
            chunks = chunks_of(var, meta, cparams, nthreads, _progress.NoBar()) if size else ()
            nchunks = math.prod(-(-n // c) for n, c in zip(meta.shape, meta.chunkshape))
            fill_new(schunk, raw, chunks, nchunks)


def _stored_by_tasks(data, meta, cparams, url: str, options: dict, first: int) -> list:
    """``(index entry, nbytes, cbytes)`` of each chunk of the dask array ``data`` (C order
    over the chunk grid), each encoded and stored by the task that computes it."""
    import dask

    if tuple(data.chunksize) != tuple(meta.chunkshape) or any(
        c[0] != meta.chunkshape[k] for k, c in enumerate(data.chunks) if len(c) > 1
    ):
        data = data.rechunk(meta.chunkshape)
    blocks = data.to_delayed().ravel()  # (C order: as np.ndindex walks the chunk grid)
    store = dask.delayed(_encode_and_put, pure=False)
    layout = (tuple(meta.chunkshape), tuple(meta.blockshape), meta.dtype.str)
    tasks = [
        store(block, url, options, layout, cparams, first + i, len(blocks))
        for i, block in enumerate(blocks)
    ]
    return list(dask.compute(*tasks))


def _encode_and_put(block, url, options, layout, cparams, chunk_id, stride):
    """A worker's task: one chunk encoded and stored (see :func:`put_chunk`)."""
    chunkshape, blockshape, dtype = layout
    dtype = np.dtype(dtype)
    buf = array_to_chunk(np.asarray(block, dtype=dtype), chunkshape, blockshape)
    chunk = encode_array_chunk(buf, dtype, cparams, 1)
    entry = put_chunk(url, options, chunk, chunk_id, stride)
    return entry, buf.nbytes, len(chunk) if entry >= 0 else 0


def _put_tree(local: Path, url: str, fs, root: str, options: dict) -> None:
    """The tree at ``local`` stored under ``url``: frames, then attributes, the root's last,
    then what a tree there before had and this one has not removed."""
    url = url.rstrip("/")
    files, attrs = [], []
    for here, _, names in os.walk(local):
        rel = Path(here).relative_to(local).as_posix()
        rel = "" if rel == "." else rel + "/"
        for name in names:
            (attrs if name in _AFTER else files).append(rel + name)
    before = _listing(url, fs, root)
    for rel in files:
        remote.call(f"{url}/{rel}", fs.put_file, str(local / rel), f"{root}/{rel}")
    # Deepest first: a group's attributes after everything under it, the root's last.
    for rel in sorted(attrs, key=lambda r: (-r.count("/"), r.endswith(_AFTER[0]), r)):
        remote.call(f"{url}/{rel}", fs.put_file, str(local / rel), f"{root}/{rel}")
    kept = set(files) | set(attrs)
    gone = [rel for rel in before if rel not in kept]
    if gone:
        remote.call(url, fs.rm, [f"{root}/{rel}" for rel in gone])


def _listing(url: str, fs, root: str) -> list[str]:
    """The objects under ``root`` now (relative, posix); none when nothing is there."""
    try:
        found = remote.call(url, fs.find, root)
    except FileNotFoundError:
        return []
    prefix = root + "/"
    return [p[len(prefix) :] for p in found if p.startswith(prefix)]
