"""Opening Blosc2 frames: an array when the frame has the b2nd (or caterva) metalayer, else a
super-chunk."""

from __future__ import annotations

from .frame.schunk import SChunk
from .nd.array import B2ndArray
from .nd.meta import B2ndMeta

__all__ = ["open"]


def open(urlpath, mode: str = "r", *, dtype=None, offset: int = 0, storage_options=None):
    """Open the frame at ``urlpath``.

    Parameters
    ----------
    urlpath
        A ``.b2nd``/``.b2frame`` file, a sparse-frame directory, an fsspec URL
        (``https://``, ``s3://``, ... read by byte ranges, never whole), the frame's bytes, or a
        :class:`b2store.frame.backends.Backend`.
    mode
        ``"r"`` to read, ``"a"`` to change it too (local files and directories only).
    dtype
        The item type, for legacy ``caterva`` frames, which do not store one.
    offset
        Where the frame starts inside the file (a member of a ``.b2z`` zip stored as is).
    storage_options
        Options for the fsspec filesystem of a URL.

    Returns
    -------
    B2ndArray or SChunk
        A :class:`B2ndArray` for frames with a ``b2nd`` or legacy ``caterva`` metalayer, an
        :class:`SChunk` otherwise. Close it (or use ``with``) to release its files.
    """
    if mode not in ("r", "a"):
        raise ValueError(
            f"mode must be 'r' (read) or 'a' (read and write), not {mode!r}; "
            "b2store.asarray/zeros/... create new arrays"
        )
    schunk = SChunk.open(urlpath, mode=mode, offset=offset, storage_options=storage_options)
    try:
        meta = schunk.meta
        if "b2nd" in meta:
            return B2ndArray(schunk, B2ndMeta.from_bytes(meta["b2nd"]), dtype=dtype)
        if "caterva" in meta:
            return B2ndArray(
                schunk, B2ndMeta.from_bytes(meta["caterva"], caterva=True), dtype=dtype
            )
        return schunk
    except BaseException:
        schunk.close()
        raise
