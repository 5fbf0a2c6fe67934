"""Opening Blosc2 frames: an array when the frame has the b2nd (or caterva) metalayer, else a
super-chunk."""

from __future__ import annotations

from .frame.schunk import SChunk
from .nd.array import B2ndArray
from .nd.meta import B2ndMeta

__all__ = ["open"]


def open(urlpath, mode: str = "r", *, dtype=None):
    """Open the frame at ``urlpath`` (a ``.b2nd``/``.b2frame`` file, a sparse-frame
    directory, or the frame's bytes).

    Returns a :class:`B2ndArray` for frames with a ``b2nd`` or legacy ``caterva``
    metalayer (``dtype`` supplies the item type caterva does not store) and an
    :class:`SChunk` otherwise. ``mode="a"`` allows changes (one writer at a time).
    """
    if mode not in ("r", "a"):
        raise ValueError(
            f"mode must be 'r' (read) or 'a' (read and write), not {mode!r}; "
            "b2store.asarray/zeros/... create new arrays"
        )
    schunk = SChunk.open(urlpath, mode=mode)
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
