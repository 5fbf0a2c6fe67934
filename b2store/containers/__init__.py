"""python-blosc2's containers of variable-length items (4.12 and later): BatchArray,
ListArray, ObjectArray, read from the frame (SChunk) that holds each, and UTF8Array over its
two b2nd arrays. Which one a frame is comes from its metalayers (:func:`container_class`).

Each returns what python-blosc2 returns (lists, ``str``, Python objects, NumPy arrays), item
by item, decoding only the chunks a read needs; nothing is unpickled, imported or evaluated,
and payloads python-blosc2 4.14.1 refuses by default are refused (:class:`UnsafePayloadError`).
"""

from __future__ import annotations

from ..frame.schunk import SChunk
from .base import Container, ContainerNotArrayError
from .batch_array import BatchArray, BatchItems
from .list_array import ListArray
from .object_array import ObjectArray
from .payloads import UnsafePayloadError
from .utf8_array import STRING_DTYPE, UTF8Array

__all__ = [
    "CONTAINER_METALAYERS",
    "BatchArray",
    "BatchItems",
    "Container",
    "ContainerNotArrayError",
    "ListArray",
    "ObjectArray",
    "STRING_DTYPE",
    "UTF8Array",
    "UnsafePayloadError",
    "container_class",
    "open_container",
]

#: Metalayer -> class, in the order they are tried: a ListArray's frame also carries the
#: metalayer of the container under it (``batcharray`` or ``vlarray``).
CONTAINER_METALAYERS: dict[str, type[Container]] = {
    "listarray": ListArray,
    "batcharray": BatchArray,
    "vlarray": ObjectArray,
}


def container_class(metalayers) -> type[Container] | None:
    """The container class a frame with these metalayer names is, or None."""
    for name, cls in CONTAINER_METALAYERS.items():
        if name in metalayers:
            return cls
    return None


def open_container(schunk: SChunk) -> Container | None:
    """``schunk`` as the container its metalayers name, or None for none of them."""
    cls = container_class(schunk.header.metalayers)
    return None if cls is None else cls(schunk)
