"""python-blosc2's BatchArray (metalayer ``batcharray``): batches of Python items, one chunk
of variable-length blocks per batch, each block a msgpack list of ``items_per_block`` items."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from ..errors import FormatError, UnsupportedError
from ..frame.schunk import SChunk
from .base import Container, normalize_index
from .payloads import check_meta, chunk_block, chunk_blocks, decode_item

__all__ = ["BatchArray", "BatchItems"]

META = "batcharray"
_WHOLE = object()  # an item that must come from its whole batch
# The vlmeta entry where python-blosc2 keeps each batch's item count (batch_array.py).
LENGTHS_KEY = "_batch_array_metadata"


class BatchArray(Container):
    """A python-blosc2 ``BatchArray``: ``len()`` batches, ``arr[i]`` the items of batch ``i``
    as a list (python-blosc2 returns a list-like ``Batch``; ``batch[:]`` is this list),
    ``arr[i:j]`` a list of such lists, and :attr:`items` the flat sequence of all items
    (python-blosc2's ``items``). A read decodes only the chunks (batches) it needs, the last
    one kept for the next read.

    Only the ``msgpack`` serializer is read; a BatchArray of Arrow IPC payloads
    (``serializer="arrow"``) is refused with :class:`~b2store.UnsupportedError`.
    """

    kind = "BatchArray"

    def __init__(self, schunk: SChunk):
        super().__init__(schunk)
        meta = schunk.meta[META]
        if (
            isinstance(meta, dict)
            and meta.get("version") == 1
            and meta.get("serializer") == "arrow"
        ):
            raise UnsupportedError(
                "BatchArray serializer", "arrow (Arrow IPC payloads; read it with python-blosc2)"
            )
        check_meta(meta, META, {"serializer": ("msgpack",), "items_per_block": (int, None)})
        self.items_per_block: int | None = meta.get("items_per_block")
        self._lengths: list[int] | None = self._stored_lengths()
        self._prefix: list[int] | None = None
        self._cached: tuple[int, list[Any]] | None = None
        self._block: tuple[tuple[int, int], list[Any]] | None = None

    def __len__(self) -> int:
        return self.schunk.nchunks

    def __getitem__(self, index) -> list[Any] | list[list[Any]]:
        if isinstance(index, slice):
            return [self.batch(i) for i in range(*index.indices(len(self)))]
        return self.batch(normalize_index(index, len(self), self.kind))

    def batch(self, i: int) -> list[Any]:
        """The items of batch ``i`` (one chunk decoded), a new list each call."""
        if self._cached is not None and self._cached[0] == i:
            return list(self._cached[1])
        where = f"{self.kind} batch {i}"
        items: list[Any] = []
        blocks = chunk_blocks(self.schunk, i, vl=True)
        for j, payload in enumerate(blocks):
            block = decode_item(payload, f"{where} block {j}", self.schunk)
            if not isinstance(block, list):
                raise FormatError(
                    f"{where} block {j}", "a msgpack list of items", type(block).__name__
                )
            ipb = self.items_per_block
            if ipb is not None and (len(block) > ipb or j < len(blocks) - 1 and len(block) != ipb):
                expected = f"{ipb} items (items_per_block), fewer in the last block only"
                raise FormatError(f"{where} block {j}", expected, f"{len(block)} items")
            items.extend(block)
        if self._lengths is not None and len(items) != self._lengths[i]:
            field = f"vlmeta {LENGTHS_KEY!r} batch_lengths[{i}]"
            raise FormatError(field, f"the {len(items)} items batch {i} holds", self._lengths[i])
        self._cached = (i, items)
        return list(items)

    @property
    def items(self) -> BatchItems:
        """All items of all batches, as one read-only sequence."""
        return BatchItems(self)

    def batch_lengths(self) -> list[int]:
        """The item count of each batch: python-blosc2's stored list when it is there and
        consistent with the batch count, else found by reading every batch."""
        if self._lengths is None:
            self._lengths = [len(self.batch(i)) for i in range(len(self))]
        return list(self._lengths)

    def _stored_lengths(self) -> list[int] | None:
        vlmeta = self.schunk.vlmeta
        if LENGTHS_KEY not in vlmeta:
            return None
        stored = vlmeta[LENGTHS_KEY]
        lengths = stored.get("batch_lengths") if isinstance(stored, dict) else None
        if not isinstance(lengths, list):
            return None  # python-blosc2 then counts the items itself
        if len(lengths) != self.schunk.nchunks or not all(
            type(n) is int and n > 0 for n in lengths
        ):
            found = f"{len(lengths)} entries" if len(lengths) != self.schunk.nchunks else lengths
            expected = f"{self.schunk.nchunks} positive item counts, one per batch"
            raise FormatError(f"vlmeta {LENGTHS_KEY!r} batch_lengths", expected, str(found)[:80])
        return lengths

    def _locate(self, k: int) -> tuple[int, int]:
        if self._prefix is None:
            prefix = [0]
            for n in self.batch_lengths():
                prefix.append(prefix[-1] + n)
            self._prefix = prefix
        i = bisect.bisect_right(self._prefix, k) - 1
        return i, k - self._prefix[i]

    def _block_item(self, i: int, j: int) -> Any:
        """Item ``j`` of batch ``i`` from its block alone, where ``items_per_block`` says which
        block (python-blosc2's scalar reads do the same); else ``_WHOLE``."""
        ipb = self.items_per_block
        if ipb is None:
            return _WHOLE
        b, inner = divmod(j, ipb)
        if self._block is None or self._block[0] != (i, b):
            payload = chunk_block(self.schunk, i, b)
            if payload is None:
                return _WHOLE
            where = f"{self.kind} batch {i} block {b}"
            block = decode_item(payload, where, self.schunk)
            last = (self._lengths or [0] * (i + 1))[i] <= (b + 1) * ipb
            if not isinstance(block, list) or len(block) > ipb or not last and len(block) != ipb:
                return _WHOLE  # the whole batch's read names what is wrong
            self._block = ((i, b), block)
        block = self._block[1]
        return block[inner] if inner < len(block) else _WHOLE

    def _nitems(self) -> int:
        return sum(self.batch_lengths())


class BatchItems(Sequence):
    """The items of a :class:`BatchArray` as one flat sequence (python-blosc2's
    ``BatchArray.items``): ``items[k]`` reads only the batch holding item ``k``."""

    def __init__(self, parent: BatchArray):
        self._parent = parent

    def __len__(self) -> int:
        return self._parent._nitems()

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._item(k) for k in range(*index.indices(len(self)))]
        return self._item(normalize_index(index, len(self), "BatchArray item"))

    def _item(self, k: int) -> Any:
        parent = self._parent
        i, j = parent._locate(k)
        batch = parent._cached
        if batch is not None and batch[0] == i:
            return batch[1][j]
        item = parent._block_item(i, j)
        if item is not _WHOLE:
            return item
        parent.batch(i)
        return parent._cached[1][j]  # type: ignore[index]
