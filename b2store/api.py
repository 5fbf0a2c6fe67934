"""Opening Blosc2 frames: an array when the frame has the b2nd (or caterva) metalayer, one of
python-blosc2's variable-length containers when it has theirs, else a super-chunk."""

from __future__ import annotations

import os

from . import journal
from .containers import open_container
from .frame.schunk import SChunk
from .limits import Limits, resolve
from .nd.array import B2ndArray
from .nd.carriers import check_holds_data
from .nd.meta import B2ndMeta

__all__ = ["open"]


def open(
    urlpath,
    mode: str = "r",
    *,
    dtype=None,
    offset: int = 0,
    storage_options=None,
    limits: Limits | None = None,
    locking: bool | None = None,
):
    """Open the frame at ``urlpath``.

    Parameters
    ----------
    urlpath
        A ``.b2nd``/``.b2frame`` file, a sparse-frame directory, an fsspec URL
        (``https://``, ``s3://``, ... read by byte ranges, never whole), the frame's bytes, or a
        :class:`b2store.frame.backend.Backend`.
    mode
        ``"r"`` to read, ``"a"`` to change it too (local files and directories only).
    dtype
        The item type, for legacy ``caterva`` frames, which do not store one.
    offset
        Where the frame starts inside the file (a member of a ``.b2z`` zip stored as is).
    storage_options
        Options for the fsspec filesystem of a URL, and b2store's ``read_timeout``: the
        seconds a request may go without a byte (60 when absent; see
        :mod:`b2store.frame.remote`).
    limits
        The largest chunk, frame, chunk count, metalayer, vlmeta entry and dimension count
        accepted (:class:`b2store.Limits`; its defaults when None). A file asking for more
        raises :class:`b2store.limits.LimitError` before anything is allocated for it.
    locking
        Take part in python-blosc2's cross-process locking (its ``locking=True``): reads
        hold the ``.b2lock`` sidecar beside the frame shared, each change holds it
        exclusive, creating it if missing. None (the default): take part when the sidecar
        exists or the ``BLOSC_LOCKING`` environment variable is set (not ``""`` or
        ``"0"``), as python-blosc2 reads it; False: only when the sidecar exists (some
        python-blosc2 handle locks, and relies on every handle doing so). Local frames only
        (see :mod:`b2store.frame.b2lock`).

    Returns
    -------
    B2ndArray, BatchArray, ListArray, ObjectArray or SChunk
        A :class:`B2ndArray` for frames with a ``b2nd`` or legacy ``caterva`` metalayer; a
        :class:`~b2store.containers.ListArray`, :class:`~b2store.containers.BatchArray` or
        :class:`~b2store.containers.ObjectArray` for frames python-blosc2 wrote as one
        (metalayer ``listarray``, ``batcharray``, ``vlarray``: ``obj[i]`` is an item as
        python-blosc2 returns it); an :class:`SChunk` otherwise. Close it (or use ``with``) to
        release its files.
    """
    if mode not in ("r", "a"):
        raise ValueError(
            f"mode must be 'r' (read) or 'a' (read and write), not {mode!r}; "
            "b2store.asarray/zeros/... create new arrays"
        )
    limits = resolve(limits)
    if not offset and not storage_options and isinstance(urlpath, (str, os.PathLike)):
        local = os.fspath(urlpath)
        parent = os.path.dirname(os.path.abspath(local))
        if "://" not in local and journal.pending(parent):
            # a frame of a tree whose writer was killed mid-commit: finish the commit first,
            # or this frame could be read (or changed) as it was before while others are after
            journal.recover(parent)
    schunk = SChunk.open(
        urlpath,
        mode=mode,
        offset=offset,
        storage_options=storage_options,
        limits=limits,
        locking=locking,
    )
    try:
        meta = schunk.meta
        for name in ("b2nd", "caterva"):
            if name in meta:
                if offset:
                    # A tree's member (a .b2z zip): name which frame, not just the zip. The
                    # array checks the same again for every other way one is made.
                    check_holds_data(schunk, f"{schunk.urlpath} (the frame at byte {offset})")
                nd = B2ndMeta.from_bytes(meta.raw(name), caterva=name == "caterva")
                _check_array_limits(nd, schunk, dtype, limits)
                return B2ndArray(schunk, nd, dtype=dtype)
        # python-blosc2 4.14.1 refuses a frame marked as a proxy cache or a serialized object
        # whatever it holds (schunk.process_opened_object), a plain super-chunk too: a
        # Proxy of an SChunk is one, whose unfetched chunks read as zeros.
        where = f"{schunk.urlpath} (the frame at byte {offset})" if offset else None
        check_holds_data(schunk, where)
        container = open_container(schunk)
        return schunk if container is None else container
    except BaseException:
        schunk.close()
        raise


def _check_array_limits(nd: B2ndMeta, schunk: SChunk, dtype, limits: Limits) -> None:
    """The dimension count and one chunk's decoded size (what a read allocates) within
    ``limits``, before the array is made."""
    import numpy as np

    from .nd.geometry import chunk_nitems

    limits.check("max_ndim", len(nd.shape), "ndim")
    if dtype is not None:
        itemsize = np.dtype(dtype).itemsize
    elif nd.dtype is not None:
        itemsize = nd.dtype.itemsize
    else:
        itemsize = schunk.typesize
    limits.check(
        "max_chunk_nbytes",
        chunk_nitems(nd.chunkshape, nd.blockshape) * itemsize,
        "b2nd chunk nbytes",
    )
