"""The ``b2nd`` metalayer (and the legacy ``caterva`` one): an array's shape, chunks, blocks, dtype.

The metalayer is msgpack with fixed-width markers, always written the same way, so it is read
and written by position (spec: b2nd-metalayer.txt)::

    97                      fixarray of 7 (95, of 5, in the legacy caterva metalayer)
    00                      version (0 is the only one)
    nd                      ndim, a positive fixint (0..16)
    9n (d3 i64 BE) * nd     shape
    9n (d2 i32 BE) * nd     chunkshape
    9n (d2 i32 BE) * nd     blockshape
    00                      dtype_format (0: NumPy) -- not in caterva
    db u32 BE + bytes       dtype string (str32)    -- not in caterva

``9n`` is ``0x90 + ndim`` even for ndim 16, where it reads as a fixstr marker (``a0``): a
generic msgpack parser cannot read these bytes, so none is used.

The dtype string is ``dtype.str`` (``'<f8'``, ``'|S3'``, ``'<M8[s]'``) except for void dtypes
(structured, subarray, plain ``V``), which are ``str(dtype)``: ``"[('a', '<i4'), ('b', '<f8')]"``,
``"('<i4', (2,))"``, ``'|V300'``. Reading tries ``np.dtype(s)`` and then
``np.dtype(ast.literal_eval(s))``; nothing is ever evaluated, and object dtypes are refused.
"""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass

import numpy as np

from ..constants import MAX_BUFFERSIZE
from ..errors import FormatError, UnsupportedError
from ..frame import wire
from .geometry import chunk_grid, chunk_nitems, extchunkshape

__all__ = [
    "B2ndMeta",
    "layout_guard",
    "stored_meta",
    "dtype_string",
    "dtype_from_string",
    "B2ND_METALAYER_VERSION",
    "MAX_DIM",
]

B2ND_METALAYER_VERSION = 0
CATERVA_METALAYER_VERSION = 0
MAX_DIM = 16  # B2ND_MAX_DIM
NUMPY_DTYPE_FORMAT = 0

_B2ND_ARRAY = wire.FIXARRAY + 7
_CATERVA_ARRAY = wire.FIXARRAY + 5
_SECTIONS = (("shape", wire.INT64), ("chunkshape", wire.INT32), ("blockshape", wire.INT32))
_BINS = (0xC4, 0xC5, wire.BIN32.marker)  # a caterva metalayer wrapped by python-blosc2


def dtype_string(dtype) -> str:
    """The metalayer's dtype string: ``str(dtype)`` for void dtypes, else ``dtype.str``.

    >>> dtype_string(np.float64), dtype_string(">i4"), dtype_string("V300")
    ('<f8', '>i4', '|V300')
    >>> dtype_string([("a", "<i4"), ("b", "<f8", (2,))])
    "[('a', '<i4'), ('b', '<f8', (2,))]"
    """
    dtype = np.dtype(dtype)
    return str(dtype) if dtype.kind == "V" else dtype.str


def dtype_from_string(text: str, offset: int | None = None) -> np.dtype:
    """The dtype a metalayer's dtype string names; FormatError if NumPy cannot build it.

    Object dtypes (at any depth) and empty items are refused: neither can be stored.

    >>> dtype_from_string("[('a', '<i4'), ('b', '<f8')]")
    dtype([('a', '<i4'), ('b', '<f8')])
    """
    try:
        dtype = np.dtype(text)
    except Exception:
        try:
            dtype = np.dtype(ast.literal_eval(text))
        except Exception as exc:  # SyntaxError, ValueError, TypeError, RecursionError, ...
            raise FormatError("dtype", "a NumPy dtype string", repr(text[:200]), offset) from exc
    _check_dtype(dtype, text, offset)
    return dtype


def _check_dtype(dtype: np.dtype, text: object, offset: int | None) -> None:
    if dtype.hasobject:
        raise FormatError("dtype", "a dtype without Python objects", repr(text), offset)
    if not 1 <= dtype.itemsize <= MAX_BUFFERSIZE:
        raise FormatError(
            "dtype", f"an itemsize of 1 to {MAX_BUFFERSIZE} bytes", dtype.itemsize, offset
        )


def _check_geometry(
    shape: tuple[int, ...],
    chunkshape: tuple[int, ...],
    blockshape: tuple[int, ...],
    itemsize: int | None,
    offsets: dict[str, list[int]] | None = None,
) -> None:
    """Raise FormatError unless the three shapes describe a valid b2nd geometry."""

    def where(name: str, i: int) -> int | None:
        return offsets[name][i] if offsets else None

    ndim = len(shape)
    if ndim > MAX_DIM:
        raise FormatError("ndim", f"0 to {MAX_DIM}", ndim)
    if len(chunkshape) != ndim or len(blockshape) != ndim:
        raise FormatError(
            "ndim", f"{ndim} chunk and block dimensions", (len(chunkshape), len(blockshape))
        )
    for i, (s, c, b) in enumerate(zip(shape, chunkshape, blockshape)):
        if not 0 <= s < 2**63:
            raise FormatError(f"shape[{i}]", "a length >= 0 (an int64)", s, where("shape", i))
        if c >= 2**31 or b >= 2**31:
            name, value = ("chunkshape", c) if c >= 2**31 else ("blockshape", b)
            raise FormatError(f"{name}[{i}]", "an int32", value, where(name, i))
        low = 1 if s > 0 else 0
        if c < low:
            why = f"a length >= {low}" + (f" (shape[{i}] is {s})" if s else "")
            raise FormatError(f"chunkshape[{i}]", why, c, where("chunkshape", i))
        if b < (1 if c > 0 else 0):
            why = f"a length >= 1 (chunkshape[{i}] is {c})" if c else "a length >= 0"
            raise FormatError(f"blockshape[{i}]", why, b, where("blockshape", i))
        if b > c:
            raise FormatError(
                f"blockshape[{i}]", f"at most chunkshape[{i}] = {c}", b, where("blockshape", i)
            )
    # Even an empty array is a numpy array of this shape, and numpy refuses one whose
    # non-zero dimensions (times the item size) pass an int64.
    extent = math.prod(s for s in shape if s) * (itemsize or 1)
    if extent >= 2**63:
        raise FormatError("shape", "an array numpy can make (its size in bytes an int64)", shape)
    if itemsize is not None:
        nbytes = math.prod(extchunkshape(chunkshape, blockshape)) * itemsize
        if nbytes > MAX_BUFFERSIZE:
            raise FormatError(
                "chunkshape",
                f"chunks of at most {MAX_BUFFERSIZE} bytes"
                f" (rounded up to whole blocks, {itemsize}-byte items)",
                f"{nbytes} bytes",
                where("chunkshape", 0) if ndim else None,
            )


def _check_version(version: int, caterva: bool, offset: int | None) -> None:
    known = CATERVA_METALAYER_VERSION if caterva else B2ND_METALAYER_VERSION
    if version != known:
        name = "caterva" if caterva else "b2nd"
        expected = f"{known} (the only {name} metalayer version)"
        raise FormatError("version", expected, version, offset)


def _cursor(content: bytes, start: int = 0, end: int | None = None) -> wire.Cursor:
    return wire.Cursor(content, start, end, name="metalayer")


def _read_positional(reader: wire.Cursor, caterva: bool) -> B2ndMeta:
    reader.marker("metalayer array", _CATERVA_ARRAY if caterva else _B2ND_ARRAY)
    version = reader.fixint("version", 127)
    _check_version(version, caterva, reader.pos - 1)
    ndim = reader.fixint("ndim", MAX_DIM)
    values: dict[str, list[int]] = {}
    offsets: dict[str, list[int]] = {}
    for name, item in _SECTIONS:
        reader.marker(f"{name} array", wire.FIXARRAY + ndim)  # 0xa0 for 16 dims: still expected
        values[name], offsets[name] = [], []
        for i in range(ndim):
            offsets[name].append(reader.pos + 1)
            values[name].append(reader.item(item, f"{name}[{i}]"))
    shape, chunks, blocks = (tuple(values[name]) for name, _ in _SECTIONS)
    dtype = None
    if not caterva:
        dtype_format = reader.fixint("dtype_format", 127)
        if dtype_format != NUMPY_DTYPE_FORMAT:
            raise UnsupportedError("b2nd dtype_format", dtype_format)
        reader.marker("dtype marker", wire.STR32.marker)
        length = reader.unpack(wire.STR32.fmt, "dtype length")
        start = reader.pos
        raw = reader.take(length, "dtype")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError("dtype", "a UTF-8 string", repr(raw[:200]), start) from exc
        dtype = dtype_from_string(text, start)
    reader.finish("metalayer length")
    _check_geometry(shape, chunks, blocks, None if dtype is None else dtype.itemsize, offsets)
    return B2ndMeta(shape, chunks, blocks, dtype, legacy_caterva=caterva)


def _read_caterva_compact(reader: wire.Cursor) -> B2ndMeta:
    """``[version, ndim, shape, chunkshape, blockshape]`` in any msgpack integer encoding."""
    n = reader.array_len("metalayer array")
    if n != 5:
        raise FormatError("metalayer array", "5 entries", n, reader.pos - 1)
    version, offset = reader.any_int("version")
    _check_version(version, True, offset)
    ndim, offset = reader.any_int("ndim")
    if not 0 <= ndim <= MAX_DIM:
        raise FormatError("ndim", f"0 to {MAX_DIM}", ndim, offset)
    values: dict[str, list[int]] = {}
    offsets: dict[str, list[int]] = {}
    for name, _ in _SECTIONS:
        n = reader.array_len(f"{name} array")
        if n != ndim:
            raise FormatError(f"{name} array", f"{ndim} entries", n, reader.pos - 1)
        pairs = [reader.any_int(f"{name}[{i}]") for i in range(ndim)]
        values[name] = [v for v, _ in pairs]
        offsets[name] = [o for _, o in pairs]
    reader.finish("metalayer length")
    shape, chunks, blocks = (tuple(values[name]) for name, _ in _SECTIONS)
    _check_geometry(shape, chunks, blocks, None, offsets)
    return B2ndMeta(shape, chunks, blocks, None, legacy_caterva=True)


def _read_caterva(content: bytes) -> B2ndMeta:
    """The legacy layout, or the same list as python-blosc2 writes a user metalayer.

    A ``caterva`` metalayer written through python-blosc2's ``meta=`` argument (as a
    re-creation of an old file) is compact msgpack, wrapped in a msgpack bin when it was given
    as bytes; c-blosc2 cannot read it, but its content is unambiguous, so it is accepted.
    """
    start, end = 0, len(content)
    if content and content[0] in _BINS:
        reader = _cursor(content)
        length = reader.bin_len("metalayer bin")
        start = reader.pos
        if length != end - start:
            raise FormatError("metalayer bin length", f"{end - start}", length, 1)
    try:
        return _read_positional(_cursor(content, start, end), caterva=True)
    except FormatError as positional:
        try:
            return _read_caterva_compact(_cursor(content, start, end))
        except FormatError:
            raise positional from None


@dataclass(frozen=True)
class B2ndMeta:
    """The content of a ``b2nd`` metalayer (or of a legacy ``caterva`` one).

    ``dtype`` is None only for ``caterva`` metalayers, which store none (the frame's typesize
    is all there is). Construction validates the geometry: a shape dimension of 0 may have
    chunk and block dimensions of 0, any other needs ``1 <= blockshape <= chunkshape``; a
    chunk, padded to whole blocks, must fit a Blosc chunk (``MAX_BUFFERSIZE`` bytes).

    >>> meta = B2ndMeta((10, 7), (4, 5), (2, 3), np.dtype("<i4"))
    >>> B2ndMeta.from_bytes(meta.to_bytes()) == meta
    True
    >>> meta.extchunkshape, meta.nchunks
    ((4, 6), 6)
    """

    shape: tuple[int, ...]
    chunkshape: tuple[int, ...]
    blockshape: tuple[int, ...]
    dtype: np.dtype | None
    version: int = B2ND_METALAYER_VERSION
    dtype_format: int = NUMPY_DTYPE_FORMAT
    legacy_caterva: bool = False

    def __post_init__(self) -> None:
        for name in ("shape", "chunkshape", "blockshape"):
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))
        _check_version(self.version, self.legacy_caterva, None)
        if self.dtype_format != NUMPY_DTYPE_FORMAT:
            raise UnsupportedError("b2nd dtype_format", self.dtype_format)
        if self.dtype is None:
            if not self.legacy_caterva:
                expected = "a NumPy dtype (only caterva metalayers have none)"
                raise FormatError("dtype", expected, None)
        else:
            dtype = np.dtype(self.dtype)
            _check_dtype(dtype, dtype, None)
            object.__setattr__(self, "dtype", dtype)
        itemsize = None if self.dtype is None else self.dtype.itemsize
        _check_geometry(self.shape, self.chunkshape, self.blockshape, itemsize)

    @classmethod
    def from_bytes(cls, content: bytes, *, caterva: bool = False) -> B2ndMeta:
        """Parse a ``b2nd`` metalayer's content (``caterva=True``: a legacy ``caterva`` one).

        Raises FormatError for anything that breaks the format (naming the field and its
        offset in ``content``) and UnsupportedError for a dtype_format other than NumPy's.
        """
        content = bytes(content)
        if len(content) > 4096:  # (real ones are tens of bytes: keep only those)
            return _parsed.__wrapped__(content, caterva)
        return _parsed(content, caterva)

    def to_bytes(self) -> bytes:
        """The metalayer content, byte for byte as c-blosc2 writes it.

        A ``legacy_caterva`` meta is written in the caterva layout, which has no dtype.
        """
        ndim = len(self.shape)
        out = bytearray(
            (_CATERVA_ARRAY if self.legacy_caterva else _B2ND_ARRAY, self.version, ndim)
        )
        for name, item in _SECTIONS:
            out.append(wire.FIXARRAY + ndim)
            for value in getattr(self, name):
                out += wire.pack(item, value)
        if not self.legacy_caterva:
            out.append(self.dtype_format)
            out += wire.pack_str32(dtype_string(self.dtype).encode("utf-8"))
        return bytes(out)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int | None:
        """Bytes per item, or None when the metalayer has no dtype (caterva)."""
        return None if self.dtype is None else self.dtype.itemsize

    @property
    def extchunkshape(self) -> tuple[int, ...]:
        """The chunk shape rounded up to whole blocks: the shape of every decoded chunk."""
        return extchunkshape(self.chunkshape, self.blockshape)

    @property
    def chunk_nitems(self) -> int:
        """Items in every decoded chunk, padding included."""
        return math.prod(self.extchunkshape)

    @property
    def block_nitems(self) -> int:
        return math.prod(self.blockshape)

    @property
    def chunk_grid(self) -> tuple[int, ...]:
        """Chunks per dimension: ``ceil(shape / chunkshape)``."""
        return tuple(-(-s // c) if c else 0 for s, c in zip(self.shape, self.chunkshape))

    @property
    def nchunks(self) -> int:
        return math.prod(self.chunk_grid)


@functools.lru_cache(maxsize=64)
def _parsed(content: bytes, caterva: bool) -> B2ndMeta:
    # B2ndMeta is immutable: a file opened again (dask tasks, xarray reads) reuses one.
    if caterva:
        return _read_caterva(content)
    return _read_positional(_cursor(content), caterva=False)


def layout_guard(itemsize: int):
    """The check a b2nd array's frame runs before each publish: the chunks must stay as many
    as the shape needs, all of the array's chunk size. The array's own writes and resizes
    keep this; a change made through ``arr.schunk`` (``append_data``, ``insert_chunk``,
    ``delete_chunk``, a chunk of another size) would leave a file that b2store refuses and
    that python-blosc2 reads wrong, so it is refused before anything is published. Only the
    item size is held (not the array), so the frame keeps no reference back to its array."""

    def guard(nchunks: int, chunksize: int, metalayers) -> None:
        name = "b2nd" if "b2nd" in metalayers else "caterva"
        if name not in metalayers:
            return
        meta = B2ndMeta.from_bytes(metalayers[name], caterva=name == "caterva")
        expected = math.prod(chunk_grid(meta.shape, meta.chunkshape))
        per_chunk = chunk_nitems(meta.chunkshape, meta.blockshape) * itemsize
        if not math.prod(meta.shape):
            expected = nchunks  # an empty array's frame may keep chunks (python-blosc2's do)
        if nchunks != expected or (nchunks and chunksize != per_chunk):
            found = f"{nchunks} chunks of {chunksize if chunksize > 0 else 'mixed'} bytes"
            raise ValueError(
                f"this change to the frame of a b2nd array of shape {meta.shape} and chunks "
                f"{meta.chunkshape} would leave {found} where the array needs {expected} of "
                f"{per_chunk} bytes; change the array (arr[...] = value, arr.resize) instead"
            )

    return guard


def stored_meta(header) -> bytes | None:
    """The stored b2nd (or caterva) metalayer of a frame header."""
    layers = header.metalayers
    return layers.get("b2nd", layers.get("caterva"))
