"""python-blosc2's ObjectArray (metalayer ``vlarray``): one Python value per chunk, each a
msgpack payload compressed whole, read item by item."""

from __future__ import annotations

from typing import Any

from ..frame.schunk import SChunk
from .base import Container, normalize_index
from .payloads import check_meta, chunk_blocks, decode_item

__all__ = ["ObjectArray"]

# The ObjectArray keeps the metalayer name of its first release, "vlarray" (objectarray.py).
META = "vlarray"


class ObjectArray(Container):
    """A python-blosc2 ``ObjectArray``: ``len()`` values, ``arr[i]`` the value (dict, list,
    str, tuple, set, complex, NumPy array... as python-blosc2 returns it), ``arr[i:j]`` a list
    of them. Each read decodes only the chunks of the items it returns."""

    kind = "ObjectArray"

    def __init__(self, schunk: SChunk):
        super().__init__(schunk)
        check_meta(schunk.meta[META], META, {"serializer": ("msgpack",)})

    def __len__(self) -> int:
        return self.schunk.nchunks

    def __getitem__(self, index) -> Any:
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(len(self)))]
        return self._item(normalize_index(index, len(self), self.kind))

    def _item(self, i: int) -> Any:
        (payload,) = chunk_blocks(self.schunk, i, vl=False)
        return decode_item(payload, f"{self.kind} item {i}", self.schunk)
