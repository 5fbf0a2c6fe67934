"""Encode and decode vlmeta values as python-blosc2 does: msgpack plus its ext types."""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Hashable

import msgpack
import numpy as np

from ..errors import FormatError
from ..limits import LimitError, Limits, resolve

__all__ = [
    "EXT_BLOSC2",
    "EXT_COMPLEX",
    "EXT_NDARRAY",
    "EXT_REFERENCE",
    "EXT_SET",
    "count_objects",
    "objects_at_most",
    "pack_value",
    "refused_ext",
    "unpack_payload",
    "unpack_value",
]

# python-blosc2 packs each value with msgpack.packb(value, default=hook, strict_types=True,
# use_bin_type=True). The hook turns tuples into ["__tuple__", *items], NumPy scalars into
# Python scalars, and these types into msgpack ext types:
#   42  a Blosc2 container: its cframe bytes;
#   43  a reference or lazy expression: a msgpack map {"kind", "version", ...};
#   44  a complex: struct ">dd" (real, imag);
#   45  a set or frozenset: a msgpack list of its items, packed with the same hook;
#   46  a NumPy array: a msgpack map {"dtype": {"str": dtype.str} or {"descr": dtype.descr},
#       "shape": [...], "data": C-order bytes}, or {"values": [...], "shape": [...]} for
#       object dtypes.
# Decoding is passive: 42, 43 and unknown codes stay msgpack.ExtType; nothing is unpickled,
# imported or evaluated.
EXT_BLOSC2 = 42
EXT_REFERENCE = 43
EXT_COMPLEX = 44
EXT_SET = 45
EXT_NDARRAY = 46

_TUPLE_TAG = "__tuple__"
_COMPLEX = struct.Struct(">dd")
# Ext payloads are decoded by nested unpack calls; a hostile value could nest them (or a
# structured dtype) thousands deep and exhaust the Python stack. Real values nest a few levels.
_MAX_DEPTH = 32


# --------------------------------------------------------------------------- decoding


def unpack_value(data, limits: Limits | None = None) -> object:
    """Decode one vlmeta payload (already decompressed from its chunk).

    Returns the value python-blosc2 would return, with these differences, all made for
    safety or fidelity: ext 42/43 and unknown ext codes come back as ``msgpack.ExtType``
    (never reconstructed); arrays are writable copies; maps may have non-string keys;
    unhashable items of a set are made hashable (lists -> tuples, sets -> frozensets); a set
    holding the string ``"__tuple__"`` keeps it (python-blosc2 may drop it).

    A payload that is not one complete msgpack object (C programs store raw bytes, e.g.
    c-blosc2's fuzz corpus) is returned unchanged as ``bytes``. A payload that is msgpack but
    whose ext contents are inconsistent raises :class:`~b2store.errors.FormatError`, as does
    an ext code below 0 other than msgpack's timestamp (-1, returned as msgpack.Timestamp).
    A value that would decode to more than ``limits.max_vlmeta_items`` objects, or whose ext
    payloads hold more than ``limits.max_vlmeta_nbytes`` bytes, raises
    :class:`~b2store.LimitError` before any object is built.
    """
    limits = resolve(limits)
    view = memoryview(data).cast("B")
    # Count first, build after: a 60 MiB run of nested one-byte lists would otherwise be
    # built (63 million objects, gigabytes) before anything could look at its size. The
    # count walks the bytes, allocates nothing, and stops at the limit. Each object takes a
    # byte at least, and each ext level copies at most the bytes it sits in, so a value this
    # small cannot reach either limit and is not walked (the walk costs ~0.7 us an object).
    most = objects_at_most(len(view))
    try:
        if most > min(limits.max_vlmeta_items, limits.max_vlmeta_nbytes):
            _count(view, limits)
    except _NotMsgpack:
        return bytes(view)
    except LimitError:
        if not _is_one_msgpack_object(view):
            return bytes(view)  # raw bytes that merely start like a long list
        raise
    data = bytes(view)
    # Second pass, structure only: hooks run while parsing, before msgpack notices trailing
    # bytes, so raw bytes that merely start like an ext 46 must be told apart up front (the
    # count above does not check UTF-8).
    try:
        _unpack(data, 0, check_only=True)
    except (ValueError, TypeError, msgpack.UnpackException):
        # Truncated, trailing bytes, bad type byte, declared length beyond the buffer, a
        # malformed timestamp: not a msgpack value, so it is the raw bytes a C writer stored.
        return data
    try:
        return _unpack(data, 0)
    except FormatError:
        raise
    except (ValueError, TypeError) as exc:
        # Complete msgpack that Python cannot hold, e.g. a list or map used as a map key.
        found = f"{type(exc).__name__}: {exc}"
        raise FormatError("vlmeta", "a value Python can represent", found) from None


def unpack_payload(
    data, field: str, limits: Limits | None = None
) -> tuple[object, list[msgpack.ExtType]]:
    """Decode one item payload of python-blosc2's containers (BatchArray, ListArray,
    ObjectArray): msgpack with the same ext types as vlmeta, but strict. Bytes that are not one
    complete msgpack object raise :class:`~b2store.errors.FormatError` naming ``field`` (a
    container never stores raw bytes), and the limits of :func:`unpack_value` hold.

    Returns the value and the ``msgpack.ExtType`` values inside it, which it keeps as
    :func:`unpack_value` does: ext 42 (an embedded cframe), 43 (a reference or lazy
    expression) and unknown codes (:func:`refused_ext` names the first).
    """
    view = memoryview(data).cast("B")
    # A block of a container holds many items (python-blosc2 fills it to a byte budget, not
    # an item count): without ext 45/46, which the count walks through, a payload decodes to
    # at most one object per byte, so a payload of n bytes may hold n objects.
    limits = resolve(limits)
    if len(view) > limits.max_vlmeta_items:
        limits = dataclasses.replace(limits, max_vlmeta_items=len(view))
    kept: list[msgpack.ExtType] = []
    try:
        if objects_at_most(len(view)) > min(limits.max_vlmeta_items, limits.max_vlmeta_nbytes):
            _count(view, limits)
        value = _unpack(bytes(view), 0, kept=kept)
    except LimitError:
        raise
    except FormatError as exc:
        raise FormatError(f"{field}: {exc.field}", exc.expected, exc.found) from None
    except (_NotMsgpack, ValueError, TypeError, msgpack.UnpackException) as exc:
        found = f"{len(view)} bytes that are not one msgpack value ({type(exc).__name__})"
        raise FormatError(field, "one msgpack value", found) from None
    return value, kept


def refused_ext(value: object, depth: int = 0) -> str | None:
    """The kind of the first ext value inside a decoded ``value`` that python-blosc2 4.14.1's
    ``deserialize="safe"`` refuses (an embedded cframe, a reference or lazy expression by its
    ``kind``, an unknown ext code), or None. Walks lists, tuples, maps, sets and object
    arrays (a value :func:`unpack_payload` gave lists them itself); nothing is rebuilt."""
    if isinstance(value, msgpack.ExtType):
        if value.code == EXT_BLOSC2:
            return "embedded cframe"
        if value.code == EXT_REFERENCE:
            try:
                envelope = msgpack.unpackb(value.data, strict_map_key=False)
                kind = envelope.get("kind") if isinstance(envelope, dict) else None
            except Exception:  # an unreadable envelope is still a refused reference
                kind = None
            return kind if isinstance(kind, str) else "structured reference"
        return f"MessagePack extension code {value.code}"
    if depth > _MAX_DEPTH:
        return None
    if isinstance(value, dict):
        items: object = [*value.keys(), *value.values()]
    elif isinstance(value, list | tuple | set | frozenset):
        items = value
    elif isinstance(value, np.ndarray) and value.dtype.hasobject:
        items = value.ravel()
    else:
        return None
    for item in items:  # type: ignore[union-attr]
        kind = refused_ext(item, depth + 1)
        if kind is not None:
            return kind
    return None


class _NotMsgpack(Exception):
    """The bytes are not one complete msgpack object."""


def _is_one_msgpack_object(view: memoryview) -> bool:
    """msgpack's own skip, in C, allocating nothing per item: the bytes are one object."""
    unpacker = msgpack.Unpacker(_Reader(view), read_size=1 << 16)
    try:
        unpacker.skip()
    except (ValueError, msgpack.UnpackException):
        return False
    return unpacker.tell() == len(view)


class _Reader:
    """A file over ``view`` that copies only what is read (io.BytesIO copies it whole)."""

    def __init__(self, view: memoryview):
        self._view, self._pos = view, 0

    def read(self, n: int) -> bytes:
        out = bytes(self._view[self._pos : self._pos + n])
        self._pos += len(out)
        return out


# Bytes that follow a type byte (0xc0..0xdf): a fixed payload, or the size of a length field
# (negative: -1, -2, -4) for str/bin/ext/array/map. None: 0xc1, never used.
_FOLLOW: dict[int, int | None] = {
    0xC0: 0, 0xC1: None, 0xC2: 0, 0xC3: 0,  # nil, unused, false, true
    0xC4: -1, 0xC5: -2, 0xC6: -4,  # bin 8/16/32
    0xC7: -1, 0xC8: -2, 0xC9: -4,  # ext 8/16/32
    0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8,  # float, uint
    0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8,  # int
    0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,  # fixext: type byte + 1..16
    0xD9: -1, 0xDA: -2, 0xDB: -4,  # str 8/16/32
    0xDC: -2, 0xDD: -4, 0xDE: -2, 0xDF: -4,  # array 16/32, map 16/32
}  # fmt: skip
_EXT_TYPES = frozenset((0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8))


def objects_at_most(nbytes: int) -> int:
    """A bound on the objects (and ext payload bytes) a payload of ``nbytes`` can decode to,
    without reading it: each object takes a byte at least, and each ext level copies at most
    the bytes it sits in."""
    return nbytes * (_MAX_DEPTH + 2) * 2


def count_objects(data, limits: Limits | None = None) -> int:
    """The objects one vlmeta payload decodes to (as :func:`unpack_value` counts them), found
    by a walk that builds nothing; 1 for a payload that is not msgpack (it is returned as raw
    bytes). More than ``limits.max_vlmeta_items`` raises :class:`~b2store.LimitError`."""
    limits = resolve(limits)
    view = memoryview(data).cast("B")
    try:
        return _count(view, limits)
    except _NotMsgpack:
        return 1
    except LimitError:
        if not _is_one_msgpack_object(view):
            return 1  # raw bytes that merely start like a long list
        raise


def _count(view: memoryview, limits: Limits) -> int:
    """Walk one msgpack object without building it: the objects it decodes to (through the
    ext payloads that are decoded, sets and arrays) within ``max_vlmeta_items``, the bytes of
    those payloads within ``max_vlmeta_nbytes``, ext nesting within ``_MAX_DEPTH``.

    Raises _NotMsgpack where the bytes are not one object (truncated, trailing bytes, 0xc1,
    a count larger than the bytes left could hold).
    """
    items = 0
    ext_nbytes = 0
    # (payload start, payload end, ext depth): the top-level value, then decoded ext payloads.
    spans = [(0, len(view), 0)]
    while spans:
        span = spans.pop()
        try:
            items, ext_nbytes = _count_span(view, span, items, ext_nbytes, spans, limits)
        except _NotMsgpack:
            if span[2] == 0:
                raise
            # A broken ext payload: the decoder reports it (FormatError) without building it.
    return items


def _count_span(view, span, items, ext_nbytes, spans, limits) -> tuple[int, int]:
    """Count one span (the value, or an ext payload); queue the payloads it holds."""
    pos, end, depth = span
    max_items = limits.max_vlmeta_items
    pending = 1  # objects still to read in this span, containers' items included
    while pending:
        if pos >= end:
            raise _NotMsgpack
        pending -= 1
        items += 1
        if items > max_items:
            raise LimitError("vlmeta items", "max_vlmeta_items", max_items, items)
        b = view[pos]
        pos += 1
        if b < 0x80 or b >= 0xE0:  # positive and negative fixint
            continue
        if b < 0x90:  # fixmap
            pending += 2 * (b & 0x0F)
        elif b < 0xA0:  # fixarray
            pending += b & 0x0F
        elif b < 0xC0:  # fixstr
            pos += b & 0x1F
        else:
            follow = _FOLLOW[b]
            if follow is None:
                raise _NotMsgpack
            if follow >= 0:
                pos += follow
                if b in _EXT_TYPES:  # fixext
                    start = pos - follow + 1
                    ext_nbytes = _ext(view, start, pos, end, depth, spans, ext_nbytes, limits)
                continue
            width = -follow
            if pos + width > end:
                raise _NotMsgpack
            n = int.from_bytes(view[pos : pos + width], "big")
            pos += width
            if b in (0xDC, 0xDD):
                pending += n
            elif b in (0xDE, 0xDF):
                pending += 2 * n
            elif b in _EXT_TYPES:
                start = pos + 1
                pos = start + n
                ext_nbytes = _ext(view, start, pos, end, depth, spans, ext_nbytes, limits)
            else:
                pos += n
        # Each pending object takes a byte at least: a count beyond the bytes left is a
        # truncated value, not a large one (and never counted against the limit).
        if pending > end - pos:
            raise _NotMsgpack
    if pos != end:
        raise _NotMsgpack
    return items, ext_nbytes


def _ext(view, start, stop, end, depth, spans, ext_nbytes, limits) -> int:
    """Account for one ext payload ``view[start:stop]`` (its type byte at ``start - 1``)."""
    if stop > end:
        raise _NotMsgpack
    code = view[start - 1]
    if code not in (EXT_SET, EXT_NDARRAY):
        return ext_nbytes  # kept as ExtType: its bytes are counted with the value's own
    # Decoding copies the payload out of its parent, then decodes it: each level of
    # nesting holds its own copy, so the bytes are summed over the levels; an array's
    # payload counts twice, for the array copied out of it.
    ext_nbytes += (stop - start) * (2 if code == EXT_NDARRAY else 1)
    if ext_nbytes > limits.max_vlmeta_nbytes:
        raise LimitError(
            "vlmeta ext payload bytes", "max_vlmeta_nbytes", limits.max_vlmeta_nbytes, ext_nbytes
        )
    if depth < _MAX_DEPTH:
        # Deeper payloads are refused by the decoder (FormatError) before they are built.
        spans.append((start, stop, depth + 1))
    return ext_nbytes


def _discard(*_: object) -> None:
    return None


def _unpack(data: bytes, depth: int, check_only: bool = False, kept: list | None = None) -> object:
    """One msgpack object, with python-blosc2's hooks and limits no larger than ``data``.

    ``check_only`` parses without building containers or decoding ext payloads.
    """
    limit = len(data)
    if check_only:
        # Without containers the first pass cannot fail on unhashable map keys either.
        hooks = {"list_hook": _discard, "object_pairs_hook": _discard, "ext_hook": _discard}
    else:
        ext_hook = lambda code, raw: _ext_hook(code, raw, depth, kept)  # noqa: E731
        hooks = {"list_hook": _list_hook, "ext_hook": ext_hook}
    return msgpack.unpackb(
        data,
        raw=False,
        strict_map_key=False,  # python-blosc2 writes any hashable key; keep what is there
        use_list=True,
        **hooks,
        # A declared length can never exceed the bytes that hold it; with these limits a
        # 5-byte "4 GiB bin" header is rejected before anything is allocated.
        max_str_len=limit,
        max_bin_len=limit,
        max_array_len=limit,
        max_map_len=limit // 2,
        max_ext_len=limit,
    )


def _list_hook(items: list) -> list | tuple:
    # python-blosc2 tags tuples as ["__tuple__", *items]; a genuine list starting with that
    # string is indistinguishable and becomes a tuple there too.
    if items and isinstance(items[0], str) and items[0] == _TUPLE_TAG:
        return tuple(items[1:])
    return items


def _unpack_nested(payload: bytes, field: str, depth: int, kept: list | None = None) -> object:
    """Decode an ext payload: here invalid msgpack is a broken value, not raw bytes."""
    if depth > _MAX_DEPTH:
        raise FormatError(field, f"ext nesting depth <= {_MAX_DEPTH}", depth)
    try:
        return _unpack(payload, depth, kept=kept)
    except FormatError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise FormatError(field, "a msgpack payload", f"{type(exc).__name__}: {exc}") from None


def _ext_hook(code: int, payload: bytes, depth: int, kept: list | None = None) -> object:
    if code == EXT_COMPLEX:
        if len(payload) != _COMPLEX.size:
            found = f"{len(payload)} bytes"
            raise FormatError("vlmeta complex", f"{_COMPLEX.size} bytes", found)
        real, imag = _COMPLEX.unpack(payload)
        return complex(real, imag)
    if code == EXT_SET:
        return _decode_set(_unpack_nested(payload, "vlmeta set", depth + 1, kept), depth)
    if code == EXT_NDARRAY:
        return _decode_ndarray(_unpack_nested(payload, "vlmeta ndarray", depth + 1, kept), depth)
    if code < 0:
        # Reserved by the msgpack spec (-1, the timestamp, never reaches this hook);
        # msgpack.ExtType cannot even hold them.
        raise FormatError("vlmeta ext", "a type code 0..127", code)
    # 42 (cframe), 43 (reference / lazy expression) and codes we do not know: hand them back
    # untouched. Rebuilding them would mean opening files, URLs or evaluating expressions.
    value = msgpack.ExtType(code, payload)
    if kept is not None:
        kept.append(value)  # for unpack_payload, which refuses them
    return value


def _decode_set(items: object, depth: int) -> set:
    if isinstance(items, tuple):
        # The set held the string "__tuple__" and iteration put it first, so the tuple hook
        # ate it (python-blosc2 then loses it); a set payload is always a list, so restore it.
        items = (_TUPLE_TAG, *items)
    if not isinstance(items, list | tuple):
        raise FormatError("vlmeta set", "a msgpack list of items", type(items).__name__)
    return {_hashable(item, depth) for item in items}


def _hashable(item: object, depth: int) -> Hashable:
    """Items python-blosc2 writes are hashable; lists and sets from elsewhere are made so."""
    if depth > _MAX_DEPTH:
        raise FormatError("vlmeta set", f"item nesting depth <= {_MAX_DEPTH}", depth)
    if isinstance(item, list | tuple):
        return tuple(_hashable(x, depth + 1) for x in item)
    if isinstance(item, set):
        return frozenset(item)
    if not isinstance(item, Hashable) or isinstance(item, np.ndarray):
        raise FormatError("vlmeta set", "hashable items", type(item).__name__)
    return item


def _decode_ndarray(payload: object, depth: int) -> np.ndarray:
    if not isinstance(payload, dict):
        raise FormatError("vlmeta ndarray", "a msgpack map", type(payload).__name__)
    shape = _shape(payload.get("shape"), "vlmeta ndarray shape")
    count = math.prod(shape)
    if "values" in payload:
        values = payload["values"]
        if not isinstance(values, list | tuple) or len(values) != count:
            found = len(values) if isinstance(values, list | tuple) else type(values).__name__
            raise FormatError("vlmeta ndarray", f"{count} values for shape {shape}", found)
        # np.array(values) would turn list items into extra dimensions; fill one by one.
        result = np.empty(count, dtype=object)
        for index, item in enumerate(values):
            result[index] = item
        try:
            return result.reshape(shape)
        except ValueError as exc:  # more than NumPy's 64 dimensions, a dimension beyond intp
            raise FormatError("vlmeta ndarray", "a valid shape", f"{shape}: {exc}") from None
    dtype = _dtype(payload.get("dtype"), depth)
    data = payload.get("data")
    if not isinstance(data, bytes):
        raise FormatError("vlmeta ndarray", "bin data", type(data).__name__)
    if len(data) != count * dtype.itemsize:
        expected = f"{count * dtype.itemsize} bytes for shape {shape} of {dtype.str}"
        raise FormatError("vlmeta ndarray", expected, f"{len(data)} bytes")
    try:
        if count == 0:
            return np.empty(shape, dtype=dtype)
        if dtype.itemsize == 0:
            # np.frombuffer refuses these; python-blosc2 never writes them (NumPy makes S0 S1).
            raise FormatError("vlmeta ndarray", "a dtype with itemsize > 0", dtype.str)
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:
        raise FormatError("vlmeta ndarray", "a valid shape", f"{shape}: {exc}") from None


def _shape(value: object, field: str) -> tuple[int, ...]:
    if not isinstance(value, list | tuple) or not all(
        type(size) is int and size >= 0 for size in value
    ):
        raise FormatError(field, "a list of non-negative ints", repr(value)[:80])
    return tuple(value)


def _dtype(value: object, depth: int) -> np.dtype:
    """``{"str": ...}`` or ``{"descr": ...}`` to a dtype, refusing object dtypes."""
    field = "vlmeta ndarray dtype"
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("str"), str):
        spec: object = value["str"]
    elif isinstance(value, dict) and len(value) == 1 and "descr" in value:
        spec = _descr(value["descr"], depth)
    else:
        raise FormatError(field, '{"str": ...} or {"descr": ...}', repr(value)[:80])
    try:
        dtype = np.dtype(spec)  # type: ignore[call-overload]
    except Exception as exc:  # NumPy raises many kinds for nonsense specs; all mean "bad dtype"
        raise FormatError(field, "a NumPy dtype", f"{spec!r}"[:80] + f": {exc}") from None
    # Object pointers cannot come from bytes; a top-level subarray dtype would add dimensions
    # that the stored shape does not list (dtype.str never produces one).
    if dtype.hasobject or dtype.subdtype is not None:
        raise FormatError(field, "a plain-data dtype", dtype.str)
    return dtype


def _descr(fields: object, depth: int) -> list[tuple]:
    """Validate a ``dtype.descr`` list (its tuples came back through the tuple hook)."""
    where = "vlmeta ndarray dtype"
    if depth > _MAX_DEPTH:
        raise FormatError(where, f"descr nesting depth <= {_MAX_DEPTH}", depth)
    if not isinstance(fields, list):
        raise FormatError(where, "a descr list", type(fields).__name__)
    out = []
    for field in fields:
        if not isinstance(field, list | tuple) or len(field) not in (2, 3):
            raise FormatError(where, "(name, spec[, shape]) fields", repr(field)[:80])
        name, spec = field[0], field[1]
        if isinstance(name, list | tuple) and len(name) == 2 and all(type(n) is str for n in name):
            name = tuple(name)  # a titled field: (title, name)
        elif not isinstance(name, str):
            raise FormatError(where, "a field name", repr(name)[:80])
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], dict):
            spec = spec[0]  # h5py's (dtype, metadata) pair; the metadata does not change bytes
        if isinstance(spec, list):
            spec = _descr(spec, depth + 1)
        elif not isinstance(spec, str):
            raise FormatError(where, "a field spec", repr(spec)[:80])
        if len(field) == 3:
            out.append((name, spec, _shape(field[2], where)))
        else:
            out.append((name, spec))
    return out


# --------------------------------------------------------------------------- encoding


def pack_value(value: object) -> bytes:
    """Encode ``value`` as python-blosc2 does, byte for byte.

    Accepts None, bool, int, float, str, bytes, list, tuple, dict, complex, set, frozenset,
    NumPy scalars (stored as the Python scalar), NumPy arrays (ext 46), ``msgpack.ExtType``
    (stored as is). As in python-blosc2, subclasses of the msgpack types (an OrderedDict, an
    IntEnum) are refused with :class:`TypeError`; ints beyond 64 bits raise OverflowError.
    Note that python-blosc2 decodes map keys only if they are str or bytes.
    """
    return msgpack.packb(value, default=_encode_default, strict_types=True, use_bin_type=True)


def _encode_default(obj: object) -> object:
    # The same order of checks as python-blosc2, so ambiguous objects encode the same way.
    if isinstance(obj, np.ndarray):
        return msgpack.ExtType(EXT_NDARRAY, pack_value(_ndarray_payload(obj)))
    if isinstance(obj, complex | np.complexfloating):
        return msgpack.ExtType(EXT_COMPLEX, _COMPLEX.pack(float(obj.real), float(obj.imag)))
    if isinstance(obj, set | frozenset):
        # Iteration order, like python-blosc2: same set object, same bytes.
        return msgpack.ExtType(EXT_SET, pack_value(list(obj)))
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.bytes_):
        return bytes(obj)
    if isinstance(obj, np.str_):
        return str(obj)
    if isinstance(obj, tuple):
        # msgpack has no tuple; strict_types sends tuples here instead of packing them as lists.
        return [_TUPLE_TAG, *obj]
    if type(obj) is int:
        # msgpack hands the ints it cannot pack (past 64 bits) to this hook: refused as
        # python-blosc2 refuses them, as an overflow (an int subclass stays a TypeError)
        raise OverflowError(f"an int of {obj.bit_length()} bits does not fit msgpack's 64 bits")
    raise TypeError(f"can not serialize {type(obj).__name__!r} object as vlmeta")


def _ndarray_payload(array: np.ndarray) -> dict:
    if array.dtype.hasobject:
        return {"values": array.ravel().tolist(), "shape": list(array.shape)}
    dtype = array.dtype
    dtype_value = {"descr": dtype.descr} if dtype.fields is not None else {"str": dtype.str}
    return {"dtype": dtype_value, "shape": list(array.shape), "data": array.tobytes()}
