"""A ``B2ndStore``'s keys: Zarr keys mapped to the frames' stored chunks, read whole or in part.

Chunk key ``<node>/c/i/j`` is the stored chunk ``i, j`` of the node's frame (row-major chunk
number), served as it is stored: the ``b2nd`` codec decodes it, or the store decodes it
straight into the codec's output. ``<node>/zarr.json`` is the node's synthesized metadata
(:mod:`.nodes`). :class:`~b2store.integrations.zarr.store.B2ndStore` inherits it.
"""

from __future__ import annotations

import json

import numpy as np
from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest

from ...chunk.decoder import decode_chunk, in_chunk
from ...chunk.header import ChunkHeader
from ...constants import SpecialValue
from ...errors import FormatError
from ...tree import is_url
from .nodes import StoreNodes
from .zarr_json import META, fill_bytes

__all__ = ["StoreKeys", "slice_bytes"]


def slice_bytes(data: bytes, byte_range: ByteRequest | None) -> bytes:
    """The bytes of ``data`` a Zarr ``byte_range`` asks for (all of them for None)."""
    if byte_range is None:
        return data
    if isinstance(byte_range, RangeByteRequest):
        return data[byte_range.start : byte_range.end]
    if isinstance(byte_range, OffsetByteRequest):
        return data[byte_range.offset :]
    if isinstance(byte_range, SuffixByteRequest):
        return data[len(data) - byte_range.suffix :] if byte_range.suffix else b""
    raise ValueError(f"Unexpected byte_range, got {byte_range}.")


class StoreKeys(StoreNodes):
    """The synchronous reads behind the store's async API: which node and chunk a key names,
    and the bytes, size or existence of what it names (run in worker threads)."""

    def _parse_key(self, key: str) -> tuple[str, str, tuple[int, ...] | None] | None:
        """``(node, "meta" | "chunk", chunk coordinates)`` for a key the store serves."""
        nodes = self._index()
        if key == META or key.endswith("/" + META):
            node = key[: -len(META)].rstrip("/")
            return (node, "meta", None) if node in nodes else None
        parts = key.split("/")
        for i, part in enumerate(parts):
            if part != "c":
                continue
            node = "/".join(parts[:i])
            if nodes.get(node, ("",))[0] != "array":
                continue
            try:
                coords = tuple(int(p) for p in parts[i + 1 :])
            except ValueError:
                return None
            if any(str(c) != p for c, p in zip(coords, parts[i + 1 :])):
                return None
            return node, "chunk", coords
        return None

    def _chunk_number(self, node: str, coords: tuple[int, ...]) -> int | None:
        arr = self._array(node)
        if len(coords) != arr.ndim or arr.size == 0:
            return None
        grid = [-(-s // c) for s, c in zip(arr.shape, arr.chunks)]
        if not all(0 <= c < g for c, g in zip(coords, grid)):
            return None
        n = 0
        for c, g in zip(coords, grid):
            n = n * g + c
        return n

    def _stored_chunk(self, node: str, coords):
        """``(schunk, chunk number)`` of a chunk key that has a chunk with data, or None (a
        key past the grid, or a chunk never written: Zarr's missing key)."""
        n = self._chunk_number(node, coords)
        if n is None:
            return None
        arr = self._array(node)
        return None if self._missing(node, arr, n) else (arr.schunk, n)

    def _missing(self, node: str, arr, n: int) -> bool:
        """Whether chunk ``n`` is Zarr's missing key: never written, where that reads as the
        served fill value (zeros, as b2store and python-blosc2 read it). With another fill
        value (NaN from a CF ``_FillValue``) it is served as a chunk, so that the fill value
        does not change what it reads as."""
        if not is_uninit(arr.schunk, n):
            return False
        fill = self._node_meta(node)["fill_value"]
        return not fill_bytes(fill, arr.dtype).strip(b"\0")

    def _chunk_bytes(self, node: str, coords) -> bytes | None:
        if self._writer is not None:
            found, data = self._writer.client_chunk(node, coords)
            if found:
                return data
        found = self._stored_chunk(node, coords)
        if found is None:
            return None
        schunk, n = found
        return schunk.get_chunk(n)

    def _decode_into(
        self, key: str, blocks, out: np.ndarray, blocksize: int | None = None
    ) -> bool | None:
        parsed = self._parse_key(key)
        if parsed is None or parsed[1] != "chunk":
            return False
        node, _, coords = parsed
        if self._writer is not None and self._writer.transcodes(node):
            return False
        found = self._stored_chunk(node, coords)
        if found is None:
            return None
        schunk, n = found
        h = schunk.header  # (chunksize 0: chunks of varying size, each one's header says)
        if h.nbytes and h.chunksize > 0 and schunk._chunk_nbytes(n) != out.nbytes:
            return False  # not the chunk the codec expects: let it name the field
        if blocks is not None:
            # None: Blosc blocks that are not the array's (their numbers name other bytes).
            if schunk.decode_blocks(n, blocks, out, blocksize=blocksize) is not None:
                return True
        chunk = schunk.get_chunk(n)
        try:
            found = ChunkHeader.from_bytes(chunk).nbytes
        except FormatError as exc:
            raise in_chunk(exc, f"chunk {key}") from None
        if found != out.nbytes:
            # The frame's chunksize fits the array but this chunk's header does not: the
            # chunk lies, as b2store.open reports it (not a wrong-sized `out`).
            raise FormatError(f"chunk {key} nbytes", str(out.nbytes), found, 4)
        try:
            decode_chunk(
                chunk,
                out=out,
                max_nbytes=schunk.limits.max_chunk_nbytes,
                blockshape=schunk.blockshape,
            )
        except FormatError as exc:
            raise in_chunk(exc, f"chunk {key}") from None
        return True

    def _get_range_of(self, key: str, byte_range: ByteRequest) -> bytes | None:
        """Part of a key's value; a stored chunk's part is read alone (a range request)."""
        parsed = self._parse_key(key)
        if (
            parsed is None
            or parsed[1] != "chunk"
            or (self._writer is not None and self._writer.transcodes(parsed[0]))
        ):
            data = self._get_bytes_of(key)
            return None if data is None else slice_bytes(data, byte_range)
        node, _, coords = parsed
        found = self._stored_chunk(node, coords)
        if found is None:
            return None
        schunk, n = found
        span = schunk.chunk_span(n)
        if span is None or span[0].startswith("<"):  # special, or a frame in memory
            return slice_bytes(schunk.get_chunk(n), byte_range)
        url, offset, length = span
        start, stop = _range_bounds(byte_range, length)
        return _read_span(url, offset + start, stop - start, self.storage_options)

    def _get_bytes_of(self, key: str) -> bytes | None:
        parsed = self._parse_key(key)
        if parsed is None:
            return None
        node, what, coords = parsed
        if what == "meta":
            return json.dumps(self._node_meta(node)).encode()
        return self._chunk_bytes(node, coords)

    def _exists(self, key: str) -> bool:
        parsed = self._parse_key(key)
        if parsed is None:
            return False
        node, what, coords = parsed
        if what == "meta":
            return True
        n = self._chunk_number(node, coords)
        return n is not None and not self._missing(node, self._array(node), n)

    def _size_of(self, key: str) -> int | None:
        """A key's size; a chunk's from its header alone, never its data."""
        parsed = self._parse_key(key)
        if parsed is None:
            return None
        node, what, coords = parsed
        if what == "meta" or (self._writer is not None and self._writer.transcodes(node)):
            data = self._get_bytes_of(key)
            return None if data is None else len(data)
        n = self._chunk_number(node, coords)
        schunk = self._array(node).schunk
        if n is None or self._missing(node, self._array(node), n):
            return None
        if int(schunk.offsets[n]) < 0:
            return 32  # a special chunk: header only
        return schunk._stored_sizes(n)[1]

    def _all_keys(self) -> list[str]:
        keys = []
        for node, (kind, _) in sorted(self._index().items()):
            keys += self._node_keys(node, kind)
        return keys

    def _node_keys(self, node: str, kind: str) -> list[str]:
        """One node's keys: its ``zarr.json``, and an array's stored chunks."""
        prefix = f"{node}/" if node else ""
        keys = [prefix + META]
        if kind != "array":
            return keys
        arr = self._array(node)
        if arr.size == 0:
            return keys
        schunk = arr.schunk
        grid = [-(-s // c) for s, c in zip(arr.shape, arr.chunks)]
        for n, coords in enumerate(np.ndindex(*grid) if grid else [()]):
            if not is_uninit(schunk, n) or not self._missing(node, arr, n):
                keys.append(prefix + "/".join(["c", *map(str, coords)]))
        return keys

    def _dir_keys(self, prefix: str) -> list[str]:
        """The names just below ``prefix``, from the nodes of the tree: a group lists its
        children without opening any array, an array (or a folder of its chunks) only its
        own keys. (Listing each group from every key of the tree opened every array once
        per group: 45 s for 10,000 arrays, and a descriptor each.)"""
        index = self._index()
        base = f"{prefix}/" if prefix else ""
        owner = prefix
        while owner and owner not in index:
            owner = owner.rpartition("/")[0]
        if owner in index and index[owner][0] == "group" and owner == prefix:
            return [META, *self._children().get(prefix, ())]
        if owner in index and index[owner][0] == "array":
            keys = self._node_keys(owner, "array")
        else:
            keys = self._all_keys()  # a path no node holds: what the keys say, if anything
        seen: dict[str, None] = {}
        for key in keys:
            if key.startswith(base):
                seen.setdefault(key[len(base) :].split("/", 1)[0], None)
        return list(seen)

    def _children(self) -> dict[str, list[str]]:
        """Group node -> the names of the nodes directly in it, made once per index."""
        index = self._index()
        cached = getattr(self, "_children_of", None)
        if cached is not None and cached[0] is index:
            return cached[1]
        children: dict[str, list[str]] = {}
        for node in sorted(index):
            if node:
                parent, _, name = node.rpartition("/")
                children.setdefault(parent, []).append(name)
        self._children_of = (index, children)
        return children


def _range_bounds(byte_range: ByteRequest, length: int) -> tuple[int, int]:
    if isinstance(byte_range, RangeByteRequest):
        start, stop = byte_range.start, byte_range.end
    elif isinstance(byte_range, OffsetByteRequest):
        start, stop = byte_range.offset, length
    else:
        start, stop = length - byte_range.suffix, length
    start = max(0, min(start, length))
    return start, max(start, min(stop, length))


def _read_span(url: str, offset: int, size: int, storage_options) -> bytes:
    """``size`` bytes at ``offset`` of a local file or a URL (one range request)."""
    if size <= 0:
        return b""
    if is_url(url):
        from ...frame import ranges, remote

        fs, path = remote.filesystem(url, storage_options)
        return ranges.read(url, fs, path, offset, offset + size)
    import os

    fd = os.open(url, os.O_RDONLY)
    try:
        return os.pread(fd, size, offset)
    finally:
        os.close(fd)


def is_uninit(schunk, n: int) -> bool:
    """Whether chunk ``n`` was never written (Zarr's missing key: the fill value)."""
    entry = int(schunk.offsets[n])
    return entry < 0 and (entry >> 56) & 0x7F == SpecialValue.UNINIT
