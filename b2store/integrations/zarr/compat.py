"""The few zarr internals b2store needs that zarr has no public API for, one fallback per
zarr version, so that a zarr release that moves one breaks here and nowhere else."""

from __future__ import annotations


def chunk_spec(meta):
    """The ``ArraySpec`` of one (regular-grid) chunk of an array whose metadata is ``meta``.

    zarr up to 3.1 had ``ArrayV3Metadata.get_chunk_spec``; zarr 3.2 removed it and builds the
    spec from the chunk grid itself. The spec of every chunk of a regular grid is the same:
    the grid's chunk shape (edge chunks are stored whole), the array's data type and fill
    value, and the default array configuration and buffers.
    """
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer import default_buffer_prototype

    config = ArrayConfig.from_dict({})
    prototype = default_buffer_prototype()
    if hasattr(meta, "get_chunk_spec"):  # zarr < 3.2
        return meta.get_chunk_spec((0,) * len(meta.shape), config, prototype)
    return ArraySpec(
        shape=tuple(meta.chunks),
        dtype=meta.data_type,
        fill_value=meta.fill_value,
        config=config,
        prototype=prototype,
    )


def check_local_store_writable(store) -> None:
    """What a zarr ``LocalStore``'s ``set_sync`` checks before each file it writes, for a
    writer that writes the files itself: the store opened (its root made unless read-only)
    and writable (zarr's own ``ValueError`` if not). zarr 3.1.6 to 3.4 call these
    ``_ensure_open_sync`` and ``_check_writable``."""
    store._ensure_open_sync()
    store._check_writable()
