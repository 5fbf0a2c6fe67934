"""The keywords every b2nd array constructor takes (``asarray``, ``frombuffer``, ``zeros``,
``empty``, ``full``), as one set: :class:`ArrayOptions` holds and checks them, and
:func:`array_constructor` spells them out in each constructor's signature and docstring.

A constructor is written once with ``**options``; :func:`array_constructor` gives it the
signature a ``def`` listing every keyword would have (``help()`` and
:func:`inspect.signature` show them) and refuses any other keyword as Python does, with
Python's words, before anything is written.
"""

from __future__ import annotations

import functools
import inspect
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..chunk.encoder import resolve_filters, resolve_splitmode
from ..chunk.params import parse_b2nd_codec
from .carriers import MARKERS

__all__ = ["ArrayOptions", "array_constructor"]


@dataclass(frozen=True)
class ArrayOptions:
    """The keywords every constructor takes, checked when made: before anything is written."""

    chunks: Sequence[int] | None = None
    blocks: Sequence[int] | None = None
    codec: str | int = "zstd"
    clevel: int = 5
    filters: Sequence[str | int] | None = None
    filters_meta: Sequence[int] | None = None
    splitmode: str | int = "auto"
    codec_meta: int = 0
    contiguous: bool = True
    mode: str = "x"
    meta: Mapping[str, Any] | None = None
    vlmeta: Mapping[str, Any] | None = None
    nthreads: int | None = None
    locking: bool | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("w", "x", "w-"):
            raise ValueError(
                f"mode must be 'x' (create, refusing an existing urlpath; the default) or 'w' "
                f"(create, replacing what is there), not {self.mode!r}"
            )
        if isinstance(self.clevel, bool) or not isinstance(self.clevel, int):
            raise TypeError(f"clevel must be an int from 0 to 9, not {self.clevel!r}")
        if not 0 <= self.clevel <= 9:
            raise ValueError(f"clevel must be 0 to 9, not {self.clevel}")
        parse_b2nd_codec(self.codec)  # ZFP and NDLZ too: they work on the array's blocks
        resolve_splitmode(self.splitmode)
        if isinstance(self.codec_meta, bool) or not isinstance(self.codec_meta, int):
            raise TypeError(f"codec_meta must be an int from 0 to 255, not {self.codec_meta!r}")
        if not 0 <= self.codec_meta <= 255:
            raise ValueError(f"codec_meta must be 0 to 255, not {self.codec_meta}")
        if self.filters is not None:
            resolve_filters(self.filters, self.filters_meta)
        for name in ("meta", "vlmeta"):
            _check_mapping(name, getattr(self, name))
        marked = sorted(set(self.meta or ()) & set(MARKERS))
        if marked:
            # Such a frame stands for an object whose values it does not hold, and reading
            # refuses it (nd/carriers.py): an array written with one would be unreadable.
            raise ValueError(
                f"metalayer name {marked[0]!r} is python-blosc2's mark of a frame that holds "
                "no data of its own (a lazy expression, a proxy); choose another name"
            )

    @property
    def coding(self) -> dict[str, Any]:
        """The compression asked for, whole, as the default shapes and the chunk parameters
        take it (None where python-blosc2's default for the item type applies)."""
        return {name: getattr(self, name) for name in _CODING}


# The keywords that say how chunks are compressed (the rest say what is written where).
_CODING = ("codec", "clevel", "filters", "filters_meta", "splitmode", "codec_meta")

# The keywords' entries of each constructor's "Parameters" (numpydoc), in signature order.
_OPTIONS_DOC = """\
chunks, blocks : tuple of int, optional
    Chunk and block shapes; python-blosc2's choice for the shape and item size when None.
codec : str or Codec
    ``"zstd"`` (default), ``"lz4"``, ``"lz4hc"``, ``"blosclz"``, ``"zlib"``; or one of
    c-blosc2's plugins: ``"zfp_acc"``, ``"zfp_prec"``, ``"zfp_rate"`` (float32 and
    float64; the ``zfp`` extra) and ``"ndlz"`` (2-d arrays).
clevel : int
    Compression level, 0 to 9 (default 5).
filters : sequence of str or Filter, optional
    Up to six filters, applied in order; default shuffle, as python-blosc2.
filters_meta : sequence of int, optional
    One meta per filter (shuffle's element size, trunc_prec's bits, ...).
splitmode : str or SplitMode
    ``"auto"`` (default), ``"always"``, ``"never"``.
codec_meta : int
    The plugin codec's parameter byte, as python-blosc2's ``codec_meta``: ZFP_ACC's
    error exponent (an int8, so 253 is an error of 10**-3), ZFP_PREC's extra bit
    planes, ZFP_RATE's percent of the item's bits, NDLZ's cell side (4 or 8).
contiguous : bool
    One frame file (default) or a sparse-frame directory.
mode : {"x", "w"}
    ``"x"`` (the default; ``"w-"`` is the same) refuses an existing ``urlpath``
    (:class:`b2store.TargetExistsError`, a FileExistsError), as python-blosc2 and
    ``to_zarr`` do; ``"w"`` replaces it.
meta : mapping, optional
    Fixed metalayers: names to values packed as python-blosc2 packs them (read back
    decoded by ``array.meta[name]``, the bytes by ``array.meta.raw(name)``).
vlmeta : mapping, optional
    Variable-length metalayers (user attributes such as ``{"units": "K"}``): names to
    msgpack-packable values; python-blosc2 reads them as ``array.vlmeta``. Unknown
    keywords raise TypeError: attributes go here, never in loose keywords.
nthreads : int, optional
    Chunks' blocks compressed at once (default: as many as reads use, the cores unless
    ``B2STORE_NTHREADS`` says otherwise, as python-blosc2).
locking : bool, optional
    Take part in python-blosc2's cross-process locking (its ``locking=True``): the new
    array is put in place holding its ``.b2lock`` sidecar exclusive, made if missing, and
    the array returned locks as :func:`b2store.open`'s ``locking`` says. None (default):
    when a sidecar is there or ``BLOSC_LOCKING`` asks; False: only when one is there.
"""
_STORAGE_OPTIONS_DOC = """\
storage_options : mapping, optional
    fsspec's options for a URL ``urlpath`` (credentials, endpoint).
"""
# Where a constructor's docstring takes them: ``<options>`` (``<storage_options>``) on a line
# of its own, indented as its entries (Python 3.13 strips a docstring's common indent).
_DOC_MARKS = {"options": _OPTIONS_DOC, "storage_options": _STORAGE_OPTIONS_DOC}
_DOC_MARK = re.compile(r"^([ \t]*)<(options|storage_options)>\n", re.MULTILINE)

try:  # what CPython 3.13 words its own "unexpected keyword argument" errors with
    from _suggestions import _generate_suggestions as _suggest
except ImportError:  # (older Pythons, and other interpreters, suggest nothing there)
    _suggest = None

_OPTION_PARAMETERS = tuple(
    inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
    for f in fields(ArrayOptions)
)


def _unexpected(name: str, key: str, names: tuple[str, ...]) -> str:
    """Python's words for a keyword ``name()`` does not take (CPython 3.13 and newer add the
    name it likely meant, found as it finds it)."""
    message = f"{name}() got an unexpected keyword argument {key!r}"
    try:
        guess = None if _suggest is None else _suggest(list(names), key)
    except Exception:  # (CPython's private helper changed: the message goes without it)
        guess = None
    return message if guess is None else f"{message}. Did you mean {guess!r}?"


def array_constructor(body):
    """An array constructor made of ``body``, which takes the shared keywords as
    ``**options``: its signature and docstring spell every one of them out, as a ``def``
    listing them would (``help()`` and :func:`inspect.signature` show them), and a keyword
    neither takes is a TypeError, worded as Python words it, before anything is written."""
    own = inspect.signature(body)
    params = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
    at = next((k for k, p in enumerate(params) if p.kind is p.KEYWORD_ONLY), len(params))
    params[at:at] = _OPTION_PARAMETERS
    signature = own.replace(parameters=params)
    names = tuple(signature.parameters)  # (in order: the first of equal guesses wins)
    accepted = frozenset(names)
    name = body.__name__

    @functools.wraps(body)
    def constructor(*args, **kwargs):
        for key in kwargs:
            if key not in accepted:
                raise TypeError(_unexpected(name, key, names))
        return body(*args, **kwargs)

    constructor.__signature__ = signature  # type: ignore[attr-defined]
    # The body's own docstring too: documentation tools follow ``__wrapped__`` to it (griffe
    # 2.4 read the marks there and took them for malformed parameters).
    body.__doc__ = constructor.__doc__ = _DOC_MARK.sub(
        lambda m: textwrap.indent(_DOC_MARKS[m[2]], m[1]), body.__doc__ or ""
    )
    return constructor


def _check_mapping(name: str, value) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping of names to values, not {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise TypeError(f"{name} names are strings, not {key!r}")
