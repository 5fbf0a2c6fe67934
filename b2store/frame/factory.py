"""Opening any frame: the layout for a path, directory, URL or the frame's bytes
(:func:`open_backend`), and its header, read and checked.

This module sits above the layouts it chooses among (:mod:`~b2store.frame.contiguous`,
:mod:`~b2store.frame.sparse`, :mod:`~b2store.frame.remote_sparse`); none of them imports it.
"""

from __future__ import annotations

from .. import _files
from ..limits import Limits
from .backend import Backend
from .contiguous import ContiguousFrame
from .header import FrameHeader
from .remote_sparse import RemoteSparseFrame
from .sniff import NotBlosc2Error, looks_like_directory
from .sources import FileSource, FsspecSource, MemorySource, is_url, local_path
from .sparse import SparseFrame
from .state import read_header

__all__ = ["open_backend"]


def open_backend(
    urlpath,
    *,
    writable: bool = False,
    offset: int = 0,
    storage_options: dict | None = None,
    limits: Limits | None = None,
    locking: bool | None = None,
) -> tuple[Backend, FrameHeader]:
    """The layout and header of the frame at ``urlpath``: a local file or directory, an
    fsspec URL, the frame's bytes, or a :class:`Backend` already made. ``locking``: take
    part in python-blosc2's ``.b2lock`` protocol (:mod:`b2store.frame.b2lock`) for a local
    frame."""
    if isinstance(urlpath, Backend):
        backend = urlpath.reopen(writable) if writable != urlpath.writable else urlpath
    elif isinstance(urlpath, (bytes, bytearray, memoryview)):
        backend = ContiguousFrame(MemorySource(memoryview(urlpath)[offset:]), writable=writable)
    elif is_url(urlpath):
        backend = _open_url(urlpath, storage_options, offset, writable, limits)
    else:
        path = local_path(urlpath)
        if writable:  # a link inside a tree is refused, even one that leads nowhere
            _files.check_write(path)
        if path.is_dir():
            if offset:
                raise ValueError(
                    "offset applies to frames inside a file, not to directories"
                ) from None
            what = looks_like_directory(path)
            if what is not None:
                raise NotBlosc2Error(
                    what, "chunks.b2frame", "a sparse frame's index file", "none"
                ).named(str(path))
            backend = SparseFrame(path, writable=writable, locking=locking)
        elif path.exists():
            backend = ContiguousFrame(
                FileSource(path, offset), writable=writable and not offset, locking=locking
            )
            if writable and offset:
                raise ValueError("a frame inside another file (offset) can only be read")
        else:
            raise FileNotFoundError(f"no frame at {path}")
    try:
        header = read_header(backend, limits)
    except BaseException:
        backend.close()
        raise
    return backend, header


def _open_url(url: str, storage_options, offset: int, writable: bool, limits=None) -> Backend:
    """A frame behind a URL: one object (a contiguous frame, read-only: an object store
    takes it only whole) or a prefix holding a sparse frame (its index and chunk objects)."""
    try:
        source = FsspecSource(url, storage_options, offset)
    except IsADirectoryError:
        if offset:
            raise ValueError("offset applies to frames inside a file, not to directories") from None
        return RemoteSparseFrame(url, storage_options, writable=writable, limits=limits)
    if writable:
        raise ValueError(
            f"{url}: a contiguous frame in an object store is read-only (it is stored whole: "
            "write it again with asarray or to_b2nd, or store it as a sparse frame, "
            "contiguous=False, to change it in place)"
        )
    return ContiguousFrame(source)
