"""python-blosc2 objects saved as b2nd frames that hold no data of their own.

python-blosc2 persists a ``LazyExpr``, a ``LazyUDF``, a ``C2Array`` or ``RemoteArray``
reference and a ``Proxy``'s cache as an ordinary-looking b2nd frame: the shape and dtype of
the result, chunks that are all special (uninitialized) or, for a proxy, filled only where
something was fetched, and a metalayer that says what the frame stands for. Read as an array,
each would come back as zeros (or as a mix of fetched values and zeros) without an error.
b2store evaluates nothing from a file, so it refuses them, naming what the file is.

The markers, as python-blosc2 4.x writes and reads them (``b2objects.py``, ``lazyexpr.py``,
``proxy.py``, ``schunk.process_opened_object``), are fixed metalayers:

``b2o``          ``{"kind": ..., "version": 1}``: ``lazyexpr``, ``lazyudf``, ``c2array``,
                 ``remote_array`` (the payload, with the expression, is vlmeta ``b2o``)
``LazyArray``    the format before ``b2o``: 0 for an expression, 1 for a UDF (vlmeta
                 ``_LazyArray`` holds the expression or the function's source)
``proxy-source`` a Proxy's cache: which source it copies from (``proxy`` too, in RemoteArray's
                 list of carrier metalayers)

A proxy cache is refused as a whole even when its bitmap (vlmeta ``proxy-fetched``) says every
chunk was fetched: a chunk may hold only the blocks one read needed, which looks exactly like a
complete chunk from outside, and the source may have been replaced since (``proxy-stamp``).
Only python-blosc2, which keeps that bookkeeping, can tell which values are real.

Empty or never-written chunks of an ordinary array are different: they are its fill value, and
stay readable.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import B2StoreError, UnsupportedError
from ..frame.vlmeta_codec import unpack_value

__all__ = ["DatalessObjectError", "dataless_object", "check_holds_data"]

#: The metalayers that mark a frame as standing for something else.
MARKERS = ("b2o", "LazyArray", "proxy-source", "proxy")

_B2O_KINDS = {
    "lazyexpr": "a python-blosc2 LazyExpr: a lazy expression over other arrays",
    "lazyudf": "a python-blosc2 LazyUDF: a lazy user-defined function over other arrays",
    "c2array": "a python-blosc2 C2Array reference: a pointer to an array on a Caterva2 server",
    "remote_array": "a python-blosc2 RemoteArray: a reference to an array held elsewhere",
}
_LAZYARRAY_KINDS = {0: "lazyexpr", 1: "lazyudf"}
# Longest piece of an expression, a source or a path quoted in a message.
_QUOTED = 120


class DatalessObjectError(UnsupportedError):
    """A frame saved by python-blosc2 for an object whose values are not in the frame (a lazy
    expression, a lazy UDF, a remote reference, a proxy's cache)."""

    def __init__(self, what: str, kind: str, path: str | None = None):
        self.feature = "python-blosc2 object"
        self.ident = kind
        self.what = what
        where = f"{path}: " if path else ""
        B2StoreError.__init__(
            self,
            f"{where}{what}; b2store evaluates nothing from a file and does not serve it as an "
            "array. Open it with python-blosc2, or save its values as an ordinary array",
        )


def _decoded(content) -> object:
    try:
        return unpack_value(bytes(content))
    except Exception:  # any undecodable marker still marks the frame
        return None


def _quoted(value) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return repr(text if len(text) <= _QUOTED else text[: _QUOTED - 3] + "...")


def dataless_object(meta: Mapping, vlmeta: Mapping | None = None) -> tuple[str, str] | None:
    """``(kind, description)`` when the metalayers ``meta`` (name -> raw bytes) mark a frame
    that holds no data of its own, else None. ``vlmeta``, when given, adds the expression or
    function name to the description; nothing in it is evaluated."""
    present = [name for name in MARKERS if name in meta]
    if not present:
        return None
    name = present[0]
    marker = _decoded(meta[name])
    if name in ("proxy-source", "proxy"):
        source = None
        if isinstance(marker, Mapping):
            source = marker.get("local_abspath") or marker.get("urlpath") or marker.get("kind")
            source = source or marker.get("source_kind")
        of = f" of {_quoted(source)}" if source else ""
        return "proxy", (
            f"a python-blosc2 Proxy cache{of}: it holds only the chunks (or blocks) fetched "
            "from that source, and the rest would read as zeros"
        )
    if name == "LazyArray":
        kind = _LAZYARRAY_KINDS.get(marker, "lazyarray") if isinstance(marker, int) else None
        kind = kind or "lazyarray"
        payload = _vl(vlmeta, "_LazyArray")
    else:
        kind = marker.get("kind") if isinstance(marker, Mapping) else None
        kind = kind if isinstance(kind, str) else "b2o"
        payload = _vl(vlmeta, "b2o")
    what = _B2O_KINDS.get(kind, f"a python-blosc2 serialized object of kind {kind!r}")
    if isinstance(payload, Mapping):
        expression = payload.get("expression")
        function = payload.get("name")
        if isinstance(expression, str):
            what += f" ({_quoted(expression)})"
        elif isinstance(function, str):
            what += f" (function {_quoted(function)})"
    return kind, what + ", saved without its values (its chunks would read as zeros)"


def _vl(vlmeta: Mapping | None, key: str):
    if vlmeta is None:
        return None
    try:
        return vlmeta[key] if key in vlmeta else None
    except Exception:  # a damaged or oversized value only costs the detail
        return None


def check_holds_data(schunk, path: str | None = None) -> None:
    """Raise :class:`DatalessObjectError` when ``schunk``'s frame stands for an object whose
    values it does not hold (see the module docstring)."""
    meta = schunk.header.metalayers
    if not any(name in meta for name in MARKERS):
        return
    found = dataless_object(meta, schunk.vlmeta)
    if found is not None:
        raise DatalessObjectError(found[1], found[0], path)
