"""The Zarr v3 ``b2nd`` array-to-bytes codec: a zarr chunk is one stored b2nd chunk (a Blosc2
chunk of blocks in block order, padded to whole blocks), decoded whole or block by block.

Reading a selection inside a chunk fetches only the chunk's header, its block starts and the
blocks the selection touches (zarr's partial decode); whole chunks take one read. Special
chunks (zeros, NaN, a repeated value, uninitialized) decode to their values without payload.
"""

from __future__ import annotations

import asyncio
import math
import sys
import threading
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from zarr.abc.codec import ArrayBytesCodec, ArrayBytesCodecPartialDecodeMixin
from zarr.abc.store import RangeByteRequest
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer, NDBuffer, default_buffer_prototype
from zarr.core.common import parse_named_configuration

from ...chunk.decoder import ChunkDecoder, decode_chunk
from ...chunk.encoder import resolve_filters, resolve_splitmode
from ...chunk.header import ChunkHeader
from ...chunk.params import parse_b2nd_codec
from ...constants import EXTENDED_HEADER_LENGTH, FRAME_MAGIC, MIN_HEADER_LENGTH, Filter
from ...errors import FormatError
from ...nd.chunks import cparams_for, encode_array_chunk
from ...nd.geometry import array_to_chunk, blocks_per_chunk, blocks_touched, chunk_to_array
from ...nd.shapes import blocks_of_blocksize, default_chunks_blocks

__all__ = ["B2ndCodec", "default_blockshape"]

_ENDIANS = ("little", "big")


def default_blockshape(chunkshape, itemsize: int, **coding) -> tuple[int, ...]:
    """The block shape python-blosc2 picks for chunks of ``chunkshape`` (``coding``: the
    compression, as :func:`~b2store.nd.shapes.default_chunks_blocks` takes it: c-blosc2's
    plugins get blocks they code)."""
    chunkshape = tuple(int(c) for c in chunkshape)
    return default_chunks_blocks(chunkshape, itemsize, chunks=chunkshape, **coding)[1]


def _native_dtype(spec: ArraySpec) -> np.dtype:
    dtype = spec.dtype
    return dtype.to_native_dtype() if hasattr(dtype, "to_native_dtype") else np.dtype(dtype)


@dataclass(frozen=True)
class B2ndCodec(ArrayBytesCodecPartialDecodeMixin, ArrayBytesCodec):
    """Zarr v3 chunks stored as b2nd chunks.

    Parameters
    ----------
    blockshape : tuple of int, optional
        The block shape inside each chunk; None picks python-blosc2's choice for the chunk
        shape when encoding.
    endian : {"little", "big"}, optional
        Byte order of the items; None is little-endian for multi-byte items.
    cname, clevel, filters, splitmode
        Compression of new chunks, as for the ``blosc2`` codec; ``filters`` None is
        python-blosc2's default (shuffle). Decoding reads any b2nd chunk whatever these say.
        c-blosc2's plugins, which work on the blocks, are taken here: ``cname``
        ``"zfp_acc"``, ``"zfp_prec"``, ``"zfp_rate"`` (the ``zfp`` extra) or ``"ndlz"``,
        filters ``"ndcell"`` and ``"ndmean"``.
    codec_meta : int
        The plugin codec's parameter byte (python-blosc2's ``codec_meta``).
    """

    is_fixed_size = False

    blockshape: tuple[int, ...] | None = None
    endian: str | None = None
    cname: str = "zstd"
    clevel: int = 5
    filters: tuple[tuple[str, int], ...] | None = None
    splitmode: str = "auto"
    codec_meta: int = 0

    def __post_init__(self) -> None:
        if self.blockshape is not None:
            blocks = tuple(int(b) for b in self.blockshape)
            if any(b < 0 for b in blocks):
                raise ValueError(f"blockshape must be non-negative, got {self.blockshape!r}")
            object.__setattr__(self, "blockshape", blocks)
        if self.endian is not None and self.endian not in _ENDIANS:
            raise ValueError(f"endian must be 'little' or 'big', got {self.endian!r}")
        object.__setattr__(self, "cname", parse_b2nd_codec(self.cname).name.lower())
        if isinstance(self.codec_meta, bool) or not isinstance(self.codec_meta, int):
            raise ValueError(f"codec_meta must be an integer 0..255, got {self.codec_meta!r}")
        if not 0 <= self.codec_meta <= 255:
            raise ValueError(f"codec_meta must be an integer 0..255, got {self.codec_meta!r}")
        if not isinstance(self.clevel, int) or not 0 <= self.clevel <= 9:
            raise ValueError(f"clevel must be an integer 0..9, got {self.clevel!r}")
        splitmode = resolve_splitmode(self.splitmode).name.lower().removesuffix("_split")
        object.__setattr__(self, "splitmode", splitmode)
        if self.filters is not None:
            object.__setattr__(self, "filters", _parse_filters(self.filters))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> B2ndCodec:
        # No configuration is all defaults, as zarr's own codecs read it.
        _, config = parse_named_configuration(data, "b2nd", require_configuration=False)
        return cls(**(config or {}))

    def to_dict(self) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if self.blockshape is not None:
            config["blockshape"] = list(self.blockshape)
        if self.endian is not None:
            config["endian"] = self.endian
        config.update(cname=self.cname, clevel=self.clevel, splitmode=self.splitmode)
        if self.filters is not None:
            config["filters"] = [{"id": name, "meta": meta} for name, meta in self.filters]
        if self.codec_meta:
            config["codec_meta"] = self.codec_meta
        return {"name": "b2nd", "configuration": config}

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> B2ndCodec:
        dtype = _native_dtype(array_spec)
        if self.endian is None and dtype.itemsize > 1:
            # The array's own byte order, as python-blosc2 stores it (its dtype string).
            endian = getattr(array_spec.dtype, "endianness", None)
            if endian not in _ENDIANS:
                endian = "big" if dtype.byteorder == ">" else "little"
            return replace(self, endian=endian)
        return self

    def validate(self, *, shape, dtype, chunk_grid) -> None:
        chunk_shape = getattr(chunk_grid, "chunk_shape", None)
        if self.blockshape is not None and chunk_shape is not None:
            blocks_per_chunk(chunk_shape, self.blockshape)  # raises if they do not fit

    def compute_encoded_size(self, _input_byte_length: int, _chunk_spec: ArraySpec) -> int:
        raise NotImplementedError

    # --- geometry ----------------------------------------------------------------------------

    def _dtype(self, spec: ArraySpec) -> np.dtype:
        dtype = _native_dtype(spec)
        if dtype.itemsize > 1 and dtype.byteorder != "|" and dtype.fields is None:
            dtype = dtype.newbyteorder("<" if (self.endian or "little") == "little" else ">")
        elif dtype.fields is not None and self.endian == "big":
            # A Zarr v3 structured type has no byte order (zarr reads its fields as native):
            # a big-endian frame's fields are all big-endian (see meta.py), as decoded here.
            dtype = dtype.newbyteorder(">")
        return dtype

    def _blocks(self, spec: ArraySpec, dtype: np.dtype) -> tuple[int, ...]:
        if self.blockshape is not None:
            return self.blockshape
        return default_blockshape(spec.shape, dtype.itemsize, **self.coding())

    def _stored_blocks(self, spec: ArraySpec, dtype: np.dtype, header: ChunkHeader):
        """The block shape of a stored chunk: the configuration's, or (without one) the
        default that gives Blosc blocks of the chunk's own size. Not this machine's default
        alone: that follows the caches, and a plugin's chunk written on a machine with
        other caches was refused (its blocks are n-d fields of that shape)."""
        blocks = self._blocks(spec, dtype)
        if self.blockshape is not None or header.special or not header.nbytes:
            return blocks  # (a special chunk is one repeated item: any blocks lay it out)
        found = header.effective_blocksize
        if math.prod(blocks) * dtype.itemsize == found:
            return blocks
        # A chunk of another writer's Blosc blocks (several array blocks each, which the
        # array's layout allows) names no default: this machine's is all there is to go by.
        derived = blocks_of_blocksize(spec.shape, dtype.itemsize, found, **self.coding())
        return blocks if derived is None else derived

    def _nbytes(self, spec: ArraySpec, dtype: np.dtype, blocks=None) -> int:
        blocks = self._blocks(spec, dtype) if blocks is None else blocks
        per_dim = blocks_per_chunk(spec.shape, blocks)
        return math.prod(n * b for n, b in zip(per_dim, blocks)) * dtype.itemsize

    def _to_array(self, buf: np.ndarray, spec: ArraySpec, dtype: np.dtype, blocks=None):
        blocks = self._blocks(spec, dtype) if blocks is None else blocks
        ext = chunk_to_array(buf, spec.shape, blocks, dtype)
        return ext[tuple(slice(0, c) for c in spec.shape)]

    # --- whole chunks ------------------------------------------------------------------------

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        dtype = self._dtype(chunk_spec)
        src = chunk_bytes.as_numpy_array()
        # The header parsed, not its nbytes bytes read: a whole frame as the chunk (imagecodecs'
        # b2nd layout) or a short one is named there, not reported as a garbage nbytes.
        header = ChunkHeader.from_bytes(src)
        blocks = self._stored_blocks(chunk_spec, dtype, header)
        nbytes = self._nbytes(chunk_spec, dtype, blocks)
        if header.nbytes != nbytes:
            raise FormatError(
                "b2nd chunk nbytes",
                f"{nbytes} (chunk {chunk_spec.shape}, blocks {blocks})",
                header.nbytes,
                4,
            )
        buf = np.empty(nbytes, np.uint8)
        decode_chunk(src, out=buf, blockshape=blocks)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(
            self._to_array(buf, chunk_spec, dtype, blocks)
        )

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        dtype = self._dtype(chunk_spec)
        blocks = self._blocks(chunk_spec, dtype)
        data = np.asarray(chunk_array.as_numpy_array()).astype(dtype, copy=False)
        buf = array_to_chunk(data, chunk_spec.shape, blocks)
        return chunk_spec.prototype.buffer.from_bytes(
            # One thread, as the other codecs: Zarr runs codecs side by side already.
            encode_array_chunk(buf, dtype, self.cparams(dtype, blocks), nthreads=1)
        )

    def coding(self) -> dict[str, Any]:
        """The compression keywords of new chunks, as the writers take them."""
        kwargs: dict[str, Any] = dict(codec=self.cname, clevel=self.clevel)
        kwargs["splitmode"] = self.splitmode
        kwargs["codec_meta"] = self.codec_meta
        if self.filters is not None:
            names = [n for n, _ in self.filters]
            slots, packed = resolve_filters(names, [m for _, m in self.filters])
            kwargs.update(filters=list(slots), filters_meta=list(packed))
        return kwargs

    def cparams(self, dtype: np.dtype, blocks) -> dict:
        """The chunk parameters new chunks are encoded with."""
        return cparams_for(dtype, blocks, **self.coding())

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_array, chunk_spec)

    # --- partial reads -------------------------------------------------------------------------
    # One plan, two drivers. ``_partial_plan`` is a generator that says what it needs next (the
    # store's direct decode, byte ranges of the chunk, a decode to run) and is sent the answer;
    # the async driver awaits each (zarr's batched pipeline, and the fused one over a store
    # without synchronous IO), the sync driver calls the store's ``*_sync`` methods in the
    # thread it runs in (zarr's fused pipeline, zarr >= 3.4).

    async def _decode_partial_single(self, byte_getter, selection, chunk_spec: ArraySpec):
        direct, plan = self._partial_start(byte_getter, selection, chunk_spec, sync=False)
        prototype = default_buffer_prototype()
        step = _next_step(plan, None)
        while step[0] != "return":
            if step[0] == "direct":
                reply = await direct(byte_getter.path, *step[1:])
            elif step[0] == "get":
                reply = await asyncio.gather(*(byte_getter.get(prototype, r) for r in step[1]))
            else:
                reply = await asyncio.to_thread(*step[1:])
            step = _next_step(plan, reply)
        return step[1]

    def _decode_partial_sync(self, byte_getter, selection, chunk_spec: ArraySpec):
        """What :meth:`_decode_partial_single` does, without an event loop: zarr's fused
        pipeline calls it (in its own threads) over a store with synchronous IO."""
        direct, plan = self._partial_start(byte_getter, selection, chunk_spec, sync=True)
        prototype = default_buffer_prototype()
        step = _next_step(plan, None)
        while step[0] != "return":
            if step[0] == "direct":
                reply = direct(byte_getter.path, *step[1:])
            elif step[0] == "get":
                reply = [byte_getter.get_sync(prototype=prototype, byte_range=r) for r in step[1]]
            else:
                reply = step[1](*step[2:])
            step = _next_step(plan, reply)
        return step[1]

    def _partial_start(self, byte_getter, selection, chunk_spec: ArraySpec, *, sync: bool):
        """The store's direct decode, its ``*_sync`` one for the sync driver (None where the
        store has none: only a B2ndStore has), and the plan of the partial read, made for it."""
        name = "b2nd_decode_into_sync" if sync else "b2nd_decode_into"
        direct = getattr(getattr(byte_getter, "store", None), name, None)
        return direct, self._partial_plan(selection, chunk_spec, direct is not None)

    def _partial_plan(self, selection, chunk_spec: ArraySpec, direct: bool):
        """The steps of a partial read (see above); returns the selection's values, or None
        for a missing chunk."""
        dtype = self._dtype(chunk_spec)
        blocks = self._blocks(chunk_spec, dtype)
        region = _selection_bounds(selection, chunk_spec.shape)
        nblocks = math.prod(blocks_per_chunk(chunk_spec.shape, blocks))
        # The size of each block ``wanted`` numbers: a chunk whose Blosc blocks are of
        # another size is decoded whole (its block numbers name other bytes).
        block_bytes = math.prod(blocks) * dtype.itemsize
        wanted = None if region is None else blocks_touched(region, chunk_spec.shape, blocks)
        few = wanted is not None and len(wanted) * 2 <= nblocks
        if direct:
            # A B2ndStore decodes its stored chunk in place: no bytes copied through a
            # Buffer, one call instead of one per range request and one to decode.
            out = _spare_buffer(self._nbytes(chunk_spec, dtype))
            done = yield ("direct", sorted(set(wanted)) if few else None, out, block_bytes)
            if done is None:
                return None
            if done:
                return chunk_spec.prototype.nd_buffer.from_numpy_array(
                    self._to_array(out, chunk_spec, dtype)[selection]
                )
        if not few:
            # Most of the chunk: one read of it all.
            return (yield from self._whole_plan(selection, chunk_spec))
        if not wanted:
            return chunk_spec.prototype.nd_buffer.from_numpy_array(
                np.empty(chunk_spec.shape, dtype)[selection]
            )
        (head,) = yield ("get", [RangeByteRequest(0, EXTENDED_HEADER_LENGTH)])
        if head is None:
            return None
        buf, ranges = _block_ranges(head.to_bytes(), block_bytes)
        if ranges is None:
            return (yield from self._whole_plan(selection, chunk_spec))
        starts = yield ("get", [RangeByteRequest(start, end) for start, end in ranges])
        buf = _place(buf, ranges, _checked(ranges, starts))
        plan = _stream_ranges(buf, sorted(set(wanted) | {0}))
        if plan is None:
            return (yield from self._whole_plan(selection, chunk_spec))
        pieces = yield ("get", [RangeByteRequest(start, end) for start, end in plan])
        buf = _place(buf, plan, _checked(plan, pieces))
        decode = self._decode_blocks
        array = yield ("call", decode, buf, wanted, chunk_spec, dtype, blocks, selection)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(array)

    def _whole_plan(self, selection, chunk_spec: ArraySpec):
        (data,) = yield ("get", [None])
        if data is None:
            return None
        chunk = yield ("call", self._decode_sync, data, chunk_spec)
        return chunk[selection]

    def _decode_blocks(self, buf, wanted, spec, dtype, blocks, selection) -> np.ndarray:
        decoder = ChunkDecoder(buf, blockshape=blocks)
        nbytes = self._nbytes(spec, dtype)
        if decoder.header.nbytes != nbytes:
            raise FormatError("b2nd chunk nbytes", str(nbytes), decoder.header.nbytes, 4)
        out = np.zeros(nbytes, np.uint8)
        first = None
        if decoder.pipeline.has_delta:
            # DELTA codes every block against block 0, which must be decoded first.
            offset, size = decoder.block_span(0)
            first = out[offset : offset + size]
            decoder.decode_block(0, first)
        for j in wanted:
            offset, size = decoder.block_span(j)
            if j or first is None:
                decoder.decode_block(j, out[offset : offset + size], first)
        return self._to_array(out, spec, dtype)[selection]


# One spare decode buffer per chunk size, handed out again only once nothing refers to it:
# zarr copies each decoded chunk into its output and drops it, so reading chunk after chunk
# reuses memory already mapped (a fresh 4 MB buffer costs a page fault per 4 kB).
_SPARES: dict[int, np.ndarray] = {}
_SPARES_LOCK = threading.Lock()
_SPARE_SIZES = 4


def _next_step(plan, reply) -> tuple:
    """The next step of a partial read's plan, sent ``reply`` (the answer to the last one),
    or ``("return", value)`` once the plan has returned its value."""
    try:
        return plan.send(reply)
    except StopIteration as done:
        return ("return", done.value)


def _spare_buffer(nbytes: int) -> np.ndarray:
    with _SPARES_LOCK:
        spare = _SPARES.get(nbytes)
        # Referred to by the dict, ``spare`` and getrefcount's argument alone: no view of it
        # (an array zarr still holds) is alive, whatever zarr did with the last one.
        if spare is not None and sys.getrefcount(spare) == 3:
            return spare
        fresh = np.empty(nbytes, np.uint8)
        if nbytes in _SPARES or len(_SPARES) < _SPARE_SIZES:
            _SPARES[nbytes] = fresh
        return fresh


def _parse_filters(filters) -> tuple[tuple[str, int], ...]:
    """``[{"id": "shuffle", "meta": 0}, ...]`` (or names, or pairs) as checked pairs."""
    names, metas = [], []
    for f in filters:
        if isinstance(f, dict):
            names.append(f["id"])
            metas.append(int(f.get("meta", 0)))
        elif isinstance(f, str):
            names.append(f)
            metas.append(0)
        else:
            names.append(f[0])
            metas.append(int(f[1]))
    slots, packed = resolve_filters(names, metas)
    return tuple(
        (Filter(f).name.lower(), m - 256 if m > 127 else m) for f, m in zip(slots, packed) if f
    )


def _selection_bounds(selection, shape) -> list[tuple[int, int]] | None:
    """Per dimension the ``(start, stop)`` a chunk selection stays within, or None when it is
    not one zarr hands a partial decoder (read the chunk whole then)."""
    if not isinstance(selection, tuple):
        selection = (selection,)
    if len(selection) != len(shape) or any(s is Ellipsis for s in selection):
        return None
    bounds = []
    for sel, n in zip(selection, shape):
        if isinstance(sel, slice):
            r = range(*sel.indices(n))
            if not len(r):
                return [(0, 0)] * len(shape)
            lo, hi = min(r[0], r[-1]), max(r[0], r[-1]) + 1
        elif isinstance(sel, (int, np.integer)):
            i = int(sel) % n if n else 0
            lo, hi = i, i + 1
        else:
            arr = np.asarray(sel)
            if arr.dtype == bool:
                arr = np.flatnonzero(arr)
            elif arr.dtype.kind not in "iu":
                return None
            if arr.size == 0:
                return [(0, 0)] * len(shape)
            arr = arr % n
            lo, hi = int(arr.min()), int(arr.max()) + 1
        bounds.append((lo, hi))
    return bounds


def _block_ranges(head: bytes, blocksize: int):
    """From a chunk's first bytes: a zeroed buffer of its size with the header in place, and
    the range holding the block starts (and dictionary size), or None to read it whole (also
    when its Blosc blocks are not the array's ``blocksize`` bytes: the array's block numbers
    would name other bytes)."""
    if len(head) < MIN_HEADER_LENGTH:
        return None, None
    if head[1 : 1 + len(FRAME_MAGIC)] == FRAME_MAGIC:
        ChunkHeader.from_bytes(head)  # raises: a whole frame, named (not sized from its bytes)
    cbytes = int.from_bytes(head[12:16], "little", signed=True)
    if cbytes < MIN_HEADER_LENGTH or cbytes <= len(head):
        return None, None
    buf = np.zeros(cbytes, np.uint8)
    buf[: len(head)] = np.frombuffer(head, np.uint8)
    header = ChunkHeader.from_bytes(buf)
    if header.special or header.memcpyed or header.vl_blocks or not header.nbytes:
        return None, None
    if header.effective_blocksize != blocksize:
        return None, None
    start = header.header_size
    end = start + 4 * header.nblocks + (4 if header.use_dict else 0)
    if end > cbytes:
        return None, None
    return buf, [(start, end)]


def _stream_ranges(buf: np.ndarray, blocks) -> list[tuple[int, int]] | None:
    """The byte ranges of the dictionary and of ``blocks`` (block starts already in ``buf``)."""
    from ...chunk.header import ChunkHeader

    header = ChunkHeader.from_bytes(buf)
    cbytes = len(buf)
    starts_at = header.header_size
    starts_end = starts_at + 4 * header.nblocks
    bstarts = buf[starts_at:starts_end].view("<i4").astype(np.int64)
    if any(j >= header.nblocks for j in blocks):
        return None  # fewer blocks than the array's: the whole-chunk decoder names it
    data_start = starts_end
    ranges = []
    if header.use_dict:
        dsize = int(buf[starts_end : starts_end + 4].view("<i4")[0])
        if not 0 < dsize <= cbytes - starts_end - 4:
            return None
        ranges.append((starts_end + 4, starts_end + 4 + dsize))
        data_start += 4 + dsize
    if ((bstarts < data_start) | (bstarts >= cbytes)).any():
        return None  # let the whole-chunk decoder name the bad field
    ends = np.append(np.unique(bstarts), cbytes)
    for j in blocks:
        start = int(bstarts[j])
        end = int(ends[np.searchsorted(ends, start, side="right")])
        ranges.append((start, end))
    ranges.sort()
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _checked(ranges, parts) -> list[bytes]:
    """The bytes of range requests, each checked to be as long as asked."""
    out = []
    for (start, end), part in zip(ranges, parts):
        data = b"" if part is None else part.to_bytes()
        if len(data) != end - start:
            raise FormatError("b2nd chunk", f"bytes {start}..{end}", f"{len(data)} bytes", start)
        out.append(data)
    return out


def _place(buf: np.ndarray, ranges, pieces) -> np.ndarray:
    for (start, end), data in zip(ranges, pieces):
        buf[start:end] = np.frombuffer(data, np.uint8)
    return buf
