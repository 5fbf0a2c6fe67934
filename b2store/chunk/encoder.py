"""Encoding a chunk as c-blosc2 does: version 5 with the extended header, same block layout.

The decisions (block size, split, memcpy for clevel 0 and tiny or incompressible input, runs
of one byte, the all-zeros special chunk, dictionary training) follow c-blosc2, so chunks
written here match python-blosc2's in layout and, codec permitting, byte for byte.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from .. import _shuffle
from ..constants import (
    EXTENDED_HEADER_LENGTH,
    MAX_BUFFERSIZE,
    MAX_DICT_SIZE,
    Codec,
    Filter,
    SpecialValue,
    SplitMode,
)
from ..errors import UnsupportedError
from . import native
from .compressors import ZSTD_LEVELS, stream_encoder, train_dictionary
from .decoder import as_uint8
from .filters import Pipeline
from .header import BLOSC2_FLAGS, FLAGS, ChunkHeader
from .params import (
    ChunkParams,
    parse_codec,
    parse_filters,
    parse_splitmode,
    parse_typesize,
    parse_writable_codec,
    unwritable_codec,
)
from .plugins import PLUGIN_CODECS, PLUGIN_FILTERS, plugin_encoder
from .tuning import MIN_BUFFERSIZE, compute_blocksize, header_typesize, split_block

__all__ = [
    "encode_chunk",
    "quick_encode",
    "special_chunk",
    "resolve_codec",
    "resolve_writable_codec",
    "writable_dtype",
    "resolve_filters",
    "resolve_splitmode",
    "MAX_BUFFERSIZE",
]

CHUNK_VERSION = 5
# Dictionaries smaller than this are not worth storing (c-blosc2 falls back to none).
_MIN_USEFUL_DICT = 256
_DICT_CODECS = frozenset({Codec.ZSTD, Codec.LZ4, Codec.LZ4HC})
_CODEC_FORMAT = {Codec.BLOSCLZ: 0, Codec.LZ4: 1, Codec.LZ4HC: 1, Codec.ZLIB: 3, Codec.ZSTD: 4}
# c-blosc2 names a registered plugin codec in byte 22 under this codec format.
_USER_CODEC_FORMAT = 6

# The names the frame and nd layers import; each is a ChunkParams field normalisation.
resolve_codec = parse_codec
# Writers' codec names: a plugin codec is an UnsupportedError when the writer is set up.
resolve_writable_codec = parse_writable_codec
resolve_splitmode = parse_splitmode


def resolve_filters(filters, filters_meta) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Six filter slots and their meta bytes, filled from the start as python-blosc2 fills
    them (metas as given: a BYTEDELTA 0 is resolved only when a chunk is encoded)."""
    ids, metas = parse_filters(filters, filters_meta)
    pad = 6 - len(ids)
    return tuple(int(f) for f in ids) + (0,) * pad, tuple(m & 0xFF for m in metas) + (0,) * pad


def refuse_references(dtype: np.dtype) -> None:
    """Refuse data whose items are references, not bytes: NumPy 2's StringDType (valid, not
    stored yet: UnsupportedError naming it) and Python objects (TypeError)."""
    if dtype.kind == "T":
        exc = UnsupportedError("dtype", str(dtype))
        exc.args = (
            f"unsupported dtype {dtype}: NumPy's variable-width strings are not stored by "
            "b2store yet; convert them to fixed-width strings first (.astype('U'))",
        )
        raise exc
    if dtype.hasobject:
        raise TypeError(f"b2nd arrays hold fixed-size items, not {dtype}")


def writable_dtype(dtype) -> np.dtype:
    """The dtype of items a writer is given, checked (see :func:`refuse_references`): never a
    FormatError, whose meaning is corrupt bytes read."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        # Not a NumPy type at all (a pandas extension type, such as its StringDtype, which
        # xarray keeps for some string coordinates): a type b2nd cannot hold, named.
        raise UnsupportedError("item type for a b2nd array", str(dtype)) from None
    refuse_references(dtype)
    if dtype.itemsize == 0:
        raise TypeError(f"b2nd arrays need items of at least one byte, not {dtype}")
    return dtype


def _check_encodable(filters, blockshape=None) -> None:
    if blockshape is not None:
        return
    for fid in filters:
        if fid in PLUGIN_FILTERS:
            exc = UnsupportedError("filter", fid.name.lower())
            exc.args = (
                f"unsupported filter {fid.name.lower()!r} here: it works on the b2nd array's "
                "blocks, and no block shape was given (write a b2nd array, or give blockshape)",
            )
            raise exc


def encode_chunk(
    data,
    params: ChunkParams | None = None,
    *,
    typesize: int | None = None,
    codec: Codec | str | None = None,
    clevel: int | None = None,
    filters: Sequence | None = None,
    filters_meta: Sequence[int] | None = None,
    blocksize: int | None = None,
    splitmode: SplitMode | str | None = None,
    use_dict: bool | None = None,
    nthreads: int | None = None,
    codec_meta: int | None = None,
    blockshape: Sequence[int] | None = None,
) -> bytes:
    """Compress ``data`` into one Blosc2 chunk (format version 5, extended header).

    Parameters
    ----------
    data
        Any contiguous buffer; a numpy array's itemsize is the default ``typesize``.
    params
        A :class:`~b2store.chunk.params.ChunkParams`; keywords given as well replace its
        fields. Without it, the keywords' defaults are ChunkParams's: zstd, clevel 5, shuffle.
    typesize
        Bytes per item (1 for a plain byte buffer); items wider than 255 bytes are stored
        as bytes, as c-blosc2 stores them.
    codec
        ``Codec`` or its name: ``"blosclz"``, ``"lz4"``, ``"lz4hc"``, ``"zlib"``, ``"zstd"``.
    clevel
        0 (no compression: a memcpyed chunk) to 9.
    filters, filters_meta
        Up to six filters (``Filter`` or names, applied in order) and their parameters:
        shuffle's element size (0 = typesize), trunc_prec's and int_trunc's bits (int8),
        bytedelta's element size (0 = typesize, written as the typesize).
    blocksize
        Bytes per block; 0 picks c-blosc2's size for these parameters.
    splitmode
        ``SplitMode`` or ``"always"``, ``"never"``, ``"auto"``, ``"forward_compat"``.
    use_dict
        Train a dictionary on the chunk and compress with it (zstd, lz4, lz4hc).
    nthreads
        Blocks compressed at once (default: 1), with the GIL released inside the codecs.
    codec_meta
        The codec's parameter byte, for c-blosc2's plugin codecs (ZFP's mode, NDLZ's cell).
    blockshape
        The b2nd block shape of the chunk's blocks, which the plugin codecs (``"zfp_acc"``,
        ``"zfp_prec"``, ``"zfp_rate"``, ``"ndlz"``) and filters (``"ndcell"``,
        ``"ndmean"``) work on; they are refused without it.

    Returns
    -------
    bytes
        The chunk; ``b2store.decode_chunk``, ``blosc2.decompress2`` and c-blosc2 read it.

    >>> import numpy as np, b2store
    >>> x = np.arange(1000, dtype="<i4")
    >>> chunk = encode_chunk(x, codec="lz4", clevel=9)
    >>> bool((b2store.decode_chunk(chunk).view("<i4") == x).all())
    True
    """
    given = {
        name: value
        for name, value in (
            ("typesize", typesize),
            ("codec", codec),
            ("clevel", clevel),
            ("filters", filters),
            ("filters_meta", filters_meta),
            ("blocksize", blocksize),
            ("splitmode", splitmode),
            ("use_dict", use_dict),
            ("codec_meta", codec_meta),
        )
        if value is not None
    }
    if params is None:
        params = _params_from(**given)
    elif not isinstance(params, ChunkParams):
        raise TypeError(f"params must be a ChunkParams, not {type(params).__name__}")
    elif given:
        if "filters" in given and "filters_meta" not in given:
            given["filters_meta"] = None  # the old metas belong to the old filters
        params = params.replace(**given)
    if isinstance(data, np.ndarray):
        refuse_references(data.dtype)
    src = as_uint8(data, name="data")
    typesize = params.typesize
    if typesize is None:
        typesize = parse_typesize(data.dtype.itemsize if isinstance(data, np.ndarray) else 1)
    if blockshape is not None:
        params = params.replace(blockshape=blockshape)
        if not params.blocksize:
            # The plugins compress whole b2nd blocks: one Blosc block each.
            itemsize = typesize or (data.dtype.itemsize if isinstance(data, np.ndarray) else 1)
            params = params.replace(blocksize=int(np.prod(blockshape)) * itemsize)
    lay = _layout(params, typesize, len(src))
    if lay.stored_raw:
        return _memcpyed(lay.header, src, FLAGS.EXTENDED | FLAGS.MEMCPYED)
    nbytes, flags = len(src), lay.flags
    job = _Job(src, lay.blocksize, lay.nstreams, lay.pipeline, lay.encoder)
    dictionary = job.train(nbytes, lay.header.typesize, lay.split) if params.use_dict else None
    prefix = 4 * job.nblocks + (0 if dictionary is None else 4 + len(dictionary))
    # The C loop compresses into the chunk's own bytes; the Python path's blocks are lists of
    # their streams' pieces, joined once at the end.
    fast = native.encode(
        job, dictionary, nthreads or 1, ZSTD_LEVELS, EXTENDED_HEADER_LENGTH + prefix
    )
    if fast is not None:  # the GIL-free block loop (b2store.chunk._decode_blocks)
        sizes, all_zero = fast.sizes, fast.all_zero
    else:
        blocks = job.run(nthreads, dictionary)
        sizes = [sum(len(p) for p in block) for block in blocks]
        all_zero = dictionary is None and job.all_zero_runs(blocks)
    if fast is not None:
        return _finish(lay, src, fast, prefix)
    body_size = prefix + sum(sizes)
    # python-blosc2 gives c-blosc2 room for nbytes plus one header: past that, memcpy.
    if body_size > nbytes:
        return _memcpyed(lay.header, src, flags | FLAGS.MEMCPYED)
    if all_zero:
        return _all_zero(lay)
    starts = EXTENDED_HEADER_LENGTH + prefix + np.concatenate(([0], np.cumsum(sizes[:-1])))
    bflags = 0 if dictionary is None else BLOSC2_FLAGS.USE_DICT
    head = _replace(
        lay.header, flags=flags, cbytes=EXTENDED_HEADER_LENGTH + body_size, blosc2_flags=bflags
    )
    pieces = [head.to_bytes(), starts.astype("<i4").tobytes()]
    if dictionary is not None:
        pieces += [len(dictionary).to_bytes(4, "little"), dictionary]
    for block in blocks:
        pieces += block
    return b"".join(pieces)


def _params_from(**given) -> ChunkParams:
    """``ChunkParams(**given)``, kept for keywords given again (a loop of ``encode_chunk``
    calls with the same keywords spent 8 us a chunk normalising them)."""
    try:
        key = tuple(
            (name, tuple(value) if isinstance(value, list) else value)
            for name, value in given.items()
        )
        hash(key)
    except TypeError:  # something unhashable: made each time
        return ChunkParams(**given)
    return _kept_params(key)


@functools.lru_cache(maxsize=64)
def _kept_params(key) -> ChunkParams:
    return ChunkParams(**dict(key))


class _Layout(NamedTuple):
    header: ChunkHeader  # cbytes 0, the flags of a memcpyed chunk
    stored_raw: bool  # clevel 0, too small, or no room for the block starts: memcpyed
    blocksize: int
    split: bool
    nstreams: int
    flags: int
    pipeline: Pipeline | None
    head: bytes  # the header of a compressed chunk, its cbytes left 0
    encoder: _StreamEncoder  # makes each thread's stream encoder


@functools.lru_cache(maxsize=256)
def _layout(params: ChunkParams, typesize: int, nbytes: int) -> _Layout:
    """What encoding ``nbytes`` with ``params`` decides before it reads a byte: kept,
    because writers encode chunk after chunk of one shape, and small chunks spent more on
    these decisions than on compressing (errors are raised each time: they are not kept)."""
    codec, clevel, blockshape = params.codec, params.clevel, params.blockshape
    _check_encodable(params.filters, blockshape)
    _check_parameters(nbytes, codec, params.use_dict, blockshape)
    ts = header_typesize(typesize)
    slots, metas = params.slots(ts)
    active = [f for f in slots if f]
    bs = compute_blocksize(
        nbytes, typesize, clevel, codec, active, params.splitmode, params.blocksize
    )
    header = ChunkHeader(
        version=CHUNK_VERSION,
        versionlz=1,
        flags=FLAGS.EXTENDED,
        typesize=ts,
        nbytes=nbytes,
        blocksize=bs,
        cbytes=0,
        filters=slots,
        udcodec=int(codec),
        compcode_meta=params.codec_meta,
        filters_meta=metas,
    )
    # (Which checks the filters' metas.)
    pipeline = Pipeline(slots, metas, ts, encoding=True, blockshape=blockshape)
    encoder = _StreamEncoder(codec, clevel, params.codec_meta, typesize, blockshape)
    # Not even the block starts would fit in what c-blosc2 allows the chunk: memcpyed too.
    if clevel == 0 or nbytes < MIN_BUFFERSIZE or 4 * -(-nbytes // bs) > nbytes:
        return _Layout(header, True, bs, False, 1, header.flags, None, b"", encoder)
    split = split_block(codec, clevel, active, params.splitmode, ts, bs)
    fmt = _CODEC_FORMAT.get(codec, _USER_CODEC_FORMAT)
    flags = FLAGS.EXTENDED | (fmt << 5) | (0 if split else FLAGS.DONT_SPLIT)
    if Filter.DELTA in active:
        flags |= FLAGS.DELTA
    head = _replace(header, flags=flags).to_bytes()
    return _Layout(header, False, bs, split, ts if split else 1, flags, pipeline, head, encoder)


def special_chunk(
    kind: SpecialValue, nbytes: int, typesize: int, value: bytes = b"", blocksize: int = 0
) -> bytes:
    """A chunk that stores no data, only what every item is (zeros, NaN, a repeated value,
    or undefined), as c-blosc2 builds them; ``value`` holds one item for VALUE."""
    if kind == SpecialValue.VALUE and len(value) != typesize:
        raise ValueError(f"a repeated value of {typesize} bytes, not {len(value)}")
    if nbytes % max(typesize, 1):
        raise ValueError(f"nbytes {nbytes} is not a whole number of {typesize}-byte items")
    body = value if kind == SpecialValue.VALUE else b""
    header = ChunkHeader(
        version=CHUNK_VERSION,
        versionlz=1,
        flags=FLAGS.EXTENDED,
        typesize=header_typesize(typesize),
        nbytes=nbytes,
        blocksize=blocksize or nbytes,
        cbytes=EXTENDED_HEADER_LENGTH + len(body),
        blosc2_flags=int(kind) << 4,
    )
    return header.to_bytes() + body


def _check_parameters(nbytes, codec, use_dict, blockshape) -> None:
    if nbytes > MAX_BUFFERSIZE:
        raise ValueError(f"a chunk holds at most {MAX_BUFFERSIZE} bytes, got {nbytes}")
    if codec in PLUGIN_CODECS:
        if blockshape is None:
            raise unwritable_codec(codec)  # a bare chunk: no b2nd blocks to work on
    elif codec not in _CODEC_FORMAT:
        raise unwritable_codec(codec)
    if use_dict and codec not in _DICT_CODECS:
        raise ValueError(f"dictionaries need zstd, lz4 or lz4hc, not {codec.name.lower()}")


def _replace(header: ChunkHeader, **fields) -> ChunkHeader:
    values = {name: getattr(header, name) for name in header.__dataclass_fields__}
    values.update(fields)
    return ChunkHeader(**values)


def _memcpyed_header(header: ChunkHeader, src: np.ndarray, flags: int) -> bytes:
    return _replace(header, flags=flags, cbytes=EXTENDED_HEADER_LENGTH + len(src)).to_bytes()


def _finish(lay: _Layout, src: np.ndarray, fast: native.Encoded, prefix: int) -> bytes:
    """The chunk of blocks the C loop compressed after ``prefix`` bytes (the block starts,
    and a dictionary): stored raw when they take more room than the items (python-blosc2
    gives c-blosc2 room for nbytes plus one header), a zeros chunk when every stream was a
    run of zeros, else the header and block starts put in front."""
    if prefix + sum(fast.sizes) > len(src):
        return fast.raw(_memcpyed_header(lay.header, src, lay.flags | FLAGS.MEMCPYED), src)
    if fast.all_zero:
        return _all_zero(lay)
    return fast.chunk(lay.head)  # the header with its cbytes, and the block starts, in C


def _all_zero(lay: _Layout) -> bytes:
    special = SpecialValue.ZERO << 4
    return _replace(
        lay.header, flags=lay.flags, blosc2_flags=special, cbytes=EXTENDED_HEADER_LENGTH
    ).to_bytes()


@functools.lru_cache(maxsize=256)
def _quick_steps(params: ChunkParams, typesize: int, nbytes: int):
    """The layout and C loop steps for ``quick_encode``, or None where it does not apply (a
    chunk stored raw, a dictionary, a plugin, a codec the C loop lacks). Errors are not kept:
    :func:`encode_chunk` raises them each time."""
    if params.use_dict or params.blockshape is not None:
        return None
    lay = _layout(params, typesize, nbytes)
    if lay.stored_raw:
        return None
    job = _Job(np.empty(0, np.uint8), lay.blocksize, lay.nstreams, lay.pipeline, lay.encoder)
    job.nblocks = -(-nbytes // lay.blocksize)
    steps = native.encode_steps(job, ZSTD_LEVELS)
    return None if steps is None else (lay, steps, 4 * job.nblocks)


def quick_encode(src: np.ndarray, params: ChunkParams, typesize: int) -> bytes | None:
    """:func:`encode_chunk` of ``src`` (a contiguous uint8 array) with ``params`` (its
    typesize set) and one thread, in one call of the C loop: the same bytes. None where
    ``encode_chunk`` has to (bad parameters, which it names; a raw chunk; a dictionary)."""
    try:
        found = _quick_steps(params, typesize, len(src))
    except (ValueError, TypeError):
        return None
    if found is None:
        return None
    lay, steps, prefix = found
    fast = native.run_encode(steps, src, 1, EXTENDED_HEADER_LENGTH + prefix)
    return None if fast is None else _finish(lay, src, fast, prefix)


def _memcpyed(header: ChunkHeader, src: np.ndarray, flags: int) -> bytes:
    # One copy of the items, not two (src.tobytes() and then a concatenation).
    return b"".join((_memcpyed_header(header, src, flags), memoryview(src)))


class _StreamEncoder(NamedTuple):
    """What makes a stream encoder: the built-in codecs', or a plugin's, which compresses a
    whole b2nd block of ``blockshape``."""

    codec: Codec
    clevel: int
    meta: int
    typesize: int
    blockshape: tuple[int, ...] | None

    def __call__(self, dictionary: bytes | None):
        if self.codec in PLUGIN_CODECS:
            return plugin_encoder(
                self.codec, self.meta, self.typesize, self.blockshape, self.clevel
            )
        return stream_encoder(self.codec, self.clevel, dictionary)


class _Job:
    """The blocks of one chunk, filtered and compressed (in parallel when asked)."""

    def __init__(self, src, blocksize, nstreams, pipeline, encoder: _StreamEncoder):
        self.src, self.blocksize, self.nstreams = src, blocksize, nstreams
        self.pipeline, self.codec, self.clevel = pipeline, encoder.codec, encoder.clevel
        self.make_encoder = encoder
        self.nblocks = -(-len(src) // blocksize)
        self.first_block = src[:blocksize]
        self._filtered: np.ndarray | None = None

    def _block(self, j: int) -> np.ndarray:
        return self.src[j * self.blocksize : (j + 1) * self.blocksize]

    def _filter(self, j: int, work, spare) -> np.ndarray:
        if self._filtered is not None:
            return self._filtered[j * self.blocksize : (j + 1) * self.blocksize]
        block = self._block(j)
        if not self.pipeline:
            return block
        return self.pipeline.apply(block, work, spare, self.first_block, j)

    def train(self, nbytes: int, ts: int, split: bool) -> bytes | None:
        """The dictionary c-blosc2 would train on this chunk, or None when too small."""
        maxsize = min(MAX_DICT_SIZE, nbytes // 20)
        nsamples = max(8, self.nblocks * (ts if split else 1))
        sample_size = nbytes // nsamples // 16
        if maxsize < _MIN_USEFUL_DICT or sample_size == 0:
            return None
        # The samples come from the whole filtered chunk; keep it for the real pass.
        filtered = np.empty(nbytes, np.uint8)
        work, spare = np.empty(self.blocksize, np.uint8), np.empty(self.blocksize, np.uint8)
        for j in range(self.nblocks):
            filtered[j * self.blocksize : (j + 1) * self.blocksize] = self._filter(j, work, spare)
        self._filtered = filtered
        return train_dictionary(self.codec, filtered, nsamples, sample_size, maxsize)

    def run(self, nthreads: int | None, dictionary: bytes | None) -> list[list[bytes]]:
        nthreads = max(1, min(nthreads or 1, self.nblocks, os.cpu_count() or 1))
        if nthreads == 1:
            encode = self.make_encoder(dictionary)
            work, spare = np.empty(self.blocksize, np.uint8), np.empty(self.blocksize, np.uint8)
            return [self._compress(j, encode, work, spare) for j in range(self.nblocks)]

        def task(indices):
            # Each thread has its own codec context and scratch buffers.
            encode = self.make_encoder(dictionary)
            work, spare = np.empty(self.blocksize, np.uint8), np.empty(self.blocksize, np.uint8)
            return [self._compress(j, encode, work, spare) for j in indices]

        groups = [range(k, self.nblocks, nthreads) for k in range(nthreads)]
        with ThreadPoolExecutor(nthreads) as pool:
            results = list(pool.map(task, groups))
        blocks: list[list[bytes]] = [[] for _ in range(self.nblocks)]
        for group, encoded in zip(groups, results):
            for j, block in zip(group, encoded):
                blocks[j] = block
        return blocks

    def _compress(self, j: int, encode, work, spare) -> list[bytes]:
        filtered = self._filter(j, work, spare)
        size = len(filtered)
        # A short last block is never split.
        nstreams = self.nstreams if size == self.blocksize else 1
        neblock = size // nstreams
        parts = []
        for s in range(nstreams):
            stream = filtered[s * neblock : (s + 1) * neblock]
            if _shuffle.is_run(stream):
                first = int(stream[0])
                # One repeated byte: csize 0 for zeros, else -value and a run token.
                parts.append(
                    b"\0\0\0\0"
                    if first == 0
                    else (-first).to_bytes(4, "little", signed=True) + b"\x01"
                )
                continue
            packed = encode(stream)
            if packed is None:
                packed = stream.tobytes()
            parts += [len(packed).to_bytes(4, "little"), packed]
        return parts

    def all_zero_runs(self, blocks: list[list[bytes]]) -> bool:
        """Whether every stream is a run of zeros (the chunk is then a zeros special)."""
        return all(part == b"\0\0\0\0" for block in blocks for part in block)
