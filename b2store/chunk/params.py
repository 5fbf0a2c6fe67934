"""Chunk compression parameters: one frozen type, one normalisation per field, and the
numcodecs and Zarr v3 configurations that carry it (only the keys that differ from defaults).

Names, the :class:`~b2store.Codec` / :class:`~b2store.Filter` / :class:`~b2store.SplitMode`
enums (or python-blosc2's enums of the same names) and their integer ids are accepted wherever
a codec, filter or split mode is asked for.
"""

from __future__ import annotations

import enum
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..constants import MAX_BLOCKSIZE, MAX_FILTERS, Codec, Filter, SplitMode
from ..errors import UnsupportedError

__all__ = [
    "ChunkParams",
    "parse_codec",
    "parse_writable_codec",
    "parse_b2nd_codec",
    "unwritable_codec",
    "WRITABLE_CODECS",
    "parse_clevel",
    "parse_typesize",
    "parse_filters",
    "parse_splitmode",
    "parse_blocksize",
    "parse_use_dict",
    "codec_name",
    "filter_name",
    "splitmode_name",
]

# Filters whose meta is a signed bit count (int8); every other meta is a byte size (uint8).
_SIGNED_META = frozenset({Filter.TRUNC_PREC, Filter.INT_TRUNC})
# ocf_blosc2 offered cname "blosc2" for c-blosc2's own codec, BloscLZ.
_CNAME_ALIASES = {"blosc2": "blosclz"}
#: The codecs b2store reads and writes in any chunk. The other :class:`Codec` members are
#: c-blosc2's registered plugins: known by name and id (a header may name them).
WRITABLE_CODECS = frozenset({Codec.BLOSCLZ, Codec.LZ4, Codec.LZ4HC, Codec.ZLIB, Codec.ZSTD})
# The plugins b2store runs on a b2nd array's blocks (b2store.chunk.plugins).
_BLOCK_PLUGINS = frozenset({Codec.NDLZ, Codec.ZFP_ACC, Codec.ZFP_PREC, Codec.ZFP_RATE})
# The JPEG 2000 plugins, read (b2store.chunk.plugins), never written.
_READ_ONLY_PLUGINS = frozenset({Codec.OPENHTJ2K, Codec.GROK})
_ZARR_SHUFFLES = {
    "noshuffle": (),
    "shuffle": (Filter.SHUFFLE,),
    "bitshuffle": (Filter.BITSHUFFLE,),
}


def _member(enum_type: type[enum.IntEnum], value: Any, what: str):
    """``enum_type`` member from a member, another library's enum member of the same name, a
    (case-insensitive) name or an integer id."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, enum.Enum):
        # python-blosc2's enums (or another of ours: Filter.SHUFFLE is not a codec).
        value = value.name
    if isinstance(value, str):
        try:
            return enum_type[value.upper()]
        except KeyError:
            names = ", ".join(m.name.lower() for m in enum_type)
            raise ValueError(f"unknown {what} {value!r}; expected one of {names}") from None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        try:
            return enum_type(int(value))
        except ValueError:
            raise ValueError(f"unknown {what} id {value!r}") from None
    raise TypeError(f"a {what} is a name, an id or a {enum_type.__name__}, not {value!r}")


def _integer(value: Any, what: str, low: int, high: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ValueError(f"{what} must be an integer {low}..{high}, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{what} must be {low}..{high}, got {value}")
    return int(value)


def _codecs_known() -> str:
    usable = ", ".join(c.name.lower() for c in Codec if c in WRITABLE_CODECS)
    on_blocks = ", ".join(c.name.lower() for c in Codec if c in _BLOCK_PLUGINS)
    read_only = ", ".join(c.name.lower() for c in Codec if c in _READ_ONLY_PLUGINS)
    plugins = ", ".join(
        c.name.lower()
        for c in Codec
        if c not in WRITABLE_CODECS and c not in _BLOCK_PLUGINS and c not in _READ_ONLY_PLUGINS
    )
    return (
        f"b2store reads and writes {usable} ('blosc2' is blosclz), and {on_blocks} in b2nd "
        f"arrays; the c-blosc2 plugins {read_only} are read only (JPEG 2000, through "
        f"imagecodecs), and {plugins} known but neither read nor written"
    )


def parse_codec(value: Any) -> Codec:
    """A :class:`Codec` from the enum, its id, or its name (``"blosc2"`` is BloscLZ, as
    ocf_blosc2 named it); plugin codecs included (see :func:`parse_writable_codec`)."""
    if isinstance(value, str):
        value = _CNAME_ALIASES.get(value.lower(), value)
        if value.lower() == "snappy":  # Blosc1's, dropped by c-blosc2: known, not usable
            exc = UnsupportedError("codec", "snappy")
            exc.args = (
                "unsupported codec 'snappy': Blosc1's, which c-blosc2 dropped; b2store can "
                f"neither write nor read it; {_codecs_known()}",
            )
            raise exc
        if value.upper() not in Codec.__members__:
            raise ValueError(f"unknown codec {value!r}: {_codecs_known()}")
    return _member(Codec, value, "codec")


def parse_writable_codec(value: Any) -> Codec:
    """:func:`parse_codec` for a writer of bare chunks: a plugin codec, which works on a
    b2nd array's blocks, is an UnsupportedError naming it (not a ValueError: the name is
    right)."""
    codec = parse_codec(value)
    if codec not in WRITABLE_CODECS:
        raise unwritable_codec(codec)
    return codec


def parse_b2nd_codec(value: Any) -> Codec:
    """:func:`parse_codec` for a b2nd array's writer: the plugins that work on its blocks
    (ZFP, NDLZ) are taken, the others refused as :func:`parse_writable_codec` does."""
    codec = parse_codec(value)
    if codec not in WRITABLE_CODECS and codec not in _BLOCK_PLUGINS:
        raise unwritable_codec(codec)
    return codec


def unwritable_codec(codec: Codec) -> UnsupportedError:
    """The error for writing bare chunks with ``codec``, a c-blosc2 plugin."""
    exc = UnsupportedError("codec", codec.name.lower())
    if codec in _BLOCK_PLUGINS:
        exc.args = (
            f"unsupported codec {codec.name.lower()!r} for bare chunks: a c-blosc2 plugin "
            "working on a b2nd array's blocks; write a b2nd array, or use the 'b2nd' codec, "
            f"which knows its blocks; {_codecs_known()}",
        )
    elif codec in _READ_ONLY_PLUGINS:
        exc.args = (
            f"unsupported codec {codec.name.lower()!r} for writing: a c-blosc2 JPEG 2000 "
            f"plugin that b2store reads but does not write; {_codecs_known()}",
        )
    else:
        exc.args = (
            f"unsupported codec {codec.name.lower()!r}: a c-blosc2 plugin that b2store can "
            f"neither write nor read; {_codecs_known()}",
        )
    return exc


def parse_clevel(value: Any) -> int:
    """A compression level, 0 (none) to 9."""
    return _integer(value, "clevel", 0, 9)


def parse_typesize(value: Any) -> int | None:
    """Bytes per item, or None (the item size of the data being encoded)."""
    if value is None:
        return None
    return _integer(value, "typesize", 1, MAX_BLOCKSIZE)


def parse_blocksize(value: Any) -> int:
    """Bytes per block; 0 lets c-blosc2's rules pick."""
    return _integer(value, "blocksize", 0, MAX_BLOCKSIZE)


def parse_splitmode(value: Any) -> SplitMode:
    """A :class:`SplitMode` from the enum, its id, or ``"always"``/``"always_split"``, ..."""
    if isinstance(value, str) and not value.upper().endswith("_SPLIT"):
        value = f"{value}_split"  # "auto" -> AUTO_SPLIT
    return _member(SplitMode, value, "split mode")


def parse_use_dict(value: Any) -> bool:
    if value not in (True, False):  # also numpy bools and 0/1
        raise ValueError(f"use_dict must be a boolean, got {value!r}")
    return bool(value)


def _meta(fid: Filter, value: Any) -> int:
    m = _integer(value, "filters_meta", -128, 255)
    if fid in _SIGNED_META:
        return m - 256 if m > 127 else m
    return m & 0xFF


def parse_filters(filters: Any, filters_meta: Any = None) -> tuple[tuple[Filter, ...], tuple]:
    """Up to six filters (in the order they run; ``NOFILTER`` keeps a slot empty) and one
    meta each (None: all 0). Metas are int8 for TRUNC_PREC and INT_TRUNC, uint8 otherwise."""
    if isinstance(filters, (str, numbers.Integral, enum.Enum)):
        filters = (filters,)
    ids = tuple(_member(Filter, f, "filter") for f in filters)
    if len(ids) > MAX_FILTERS:
        raise ValueError(f"at most {MAX_FILTERS} filters, got {len(ids)}")
    if filters_meta is None:
        metas: Sequence = (0,) * len(ids)
    elif isinstance(filters_meta, numbers.Integral):
        metas = (filters_meta,)
    else:
        metas = tuple(filters_meta)
    if len(metas) != len(ids):
        raise ValueError(f"{len(metas)} filters_meta for {len(ids)} filters")
    return ids, tuple(_meta(f, m) for f, m in zip(ids, metas))


def codec_name(codec: Codec) -> str:
    return codec.name.lower()


def filter_name(fid: Filter) -> str:
    return fid.name.lower()


def splitmode_name(mode: SplitMode) -> str:
    return mode.name.lower().removesuffix("_split")


@dataclass(frozen=True)
class ChunkParams:
    """How a chunk is compressed; every field is normalised when the object is made.

    Parameters
    ----------
    codec
        ``Codec`` or its name or id: ``"blosclz"``, ``"lz4"``, ``"lz4hc"``, ``"zlib"``,
        ``"zstd"`` (plugin codecs are representable but :func:`encode_chunk` refuses them).
    clevel
        0 (no compression: a memcpyed chunk) to 9.
    typesize
        Bytes per item; None takes the item size of the data being encoded.
    filters
        Up to six filters, run in this order (``Filter`` members, names or ids);
        ``NOFILTER`` entries keep their slot, as frame headers store them.
    filters_meta
        One parameter per filter (None: zeros): shuffle's element size (0 = typesize),
        trunc_prec's and int_trunc's bits (int8), bytedelta's element size (0 = typesize).
    splitmode
        ``SplitMode`` or ``"always"``, ``"never"``, ``"auto"``, ``"forward_compat"``.
    blocksize
        Bytes per block; 0 picks c-blosc2's size.
    use_dict
        Train a dictionary per chunk (zstd, lz4, lz4hc).
    codec_meta
        The codec's parameter byte (0-255), for c-blosc2's plugins: ZFP_ACC's error
        exponent (an int8: 253 is 10**-3), ZFP_PREC's extra bit planes, ZFP_RATE's percent
        of the item's bits, NDLZ's cell side (4 or 8).
    blockshape
        The b2nd block shape the chunk's blocks hold (set by the b2nd writers): the plugin
        codecs and filters work on it; not part of a codec's configuration.

    Examples
    --------
    >>> p = ChunkParams(codec="lz4", filters=["shuffle", "bytedelta"])
    >>> p.codec, p.filters, p.filters_meta
    (<Codec.LZ4: 1>, (<Filter.SHUFFLE: 1>, <Filter.BYTEDELTA: 35>), (0, 0))
    >>> p.to_numcodecs()
    {'id': 'blosc2', 'cname': 'lz4', 'clevel': 5, 'filters': ['shuffle', 'bytedelta']}
    """

    codec: Codec = Codec.ZSTD
    clevel: int = 5
    typesize: int | None = None
    filters: tuple[Filter, ...] = (Filter.SHUFFLE,)
    filters_meta: tuple[int, ...] | None = field(default=None)
    splitmode: SplitMode = SplitMode.AUTO_SPLIT
    blocksize: int = 0
    use_dict: bool = False
    codec_meta: int = 0
    blockshape: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        filters, metas = parse_filters(self.filters, self.filters_meta)
        normal = {
            "codec": parse_codec(self.codec),
            "clevel": parse_clevel(self.clevel),
            "typesize": parse_typesize(self.typesize),
            "filters": filters,
            "filters_meta": metas,
            "splitmode": parse_splitmode(self.splitmode),
            "blocksize": parse_blocksize(self.blocksize),
            "use_dict": parse_use_dict(self.use_dict),
            "codec_meta": _integer(self.codec_meta, "codec_meta", 0, 255),
            "blockshape": None
            if self.blockshape is None
            else tuple(_integer(n, "blockshape", 0, MAX_BLOCKSIZE) for n in self.blockshape),
        }
        for name, value in normal.items():
            object.__setattr__(self, name, value)

    # --- what the fields mean ----------------------------------------------------------------

    @property
    def pipeline(self) -> tuple[tuple[Filter, int], ...]:
        """The filters that run, with their metas (empty slots left out)."""
        return tuple((f, m) for f, m in zip(self.filters, self.filters_meta) if f)

    def slots(self, typesize: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The six ``filters`` and ``filters_meta`` bytes of a chunk header of ``typesize``
        (as stored: the header typesize).

        A BYTEDELTA meta of 0 becomes the typesize, as python-blosc2 writes it: c-blosc2
        resolves a 0 only inside a super-chunk, so ``blosc2.decompress2`` could not read it.
        """
        pad = MAX_FILTERS - len(self.filters)
        metas = [
            typesize if m == 0 and f in (Filter.BYTEDELTA, Filter.BYTEDELTA_BUGGY) else m & 0xFF
            for f, m in zip(self.filters, self.filters_meta)
        ]
        return (
            tuple(int(f) for f in self.filters) + (0,) * pad,
            tuple(metas) + (0,) * pad,
        )

    def replace(self, **changes: Any) -> ChunkParams:
        """A copy with some fields changed (and normalised)."""
        return replace(self, **changes)

    def _default_pipeline(self) -> bool:
        return self.pipeline == ((Filter.SHUFFLE, 0),)

    # --- numcodecs --------------------------------------------------------------------------

    @classmethod
    def from_numcodecs(cls, config: Mapping[str, Any]) -> ChunkParams:
        """From a numcodecs ``blosc2`` configuration (``id`` optional; ocf_blosc2's
        ``{"cname": "blosc2", "clevel": 9}`` included)."""
        config = dict(config)
        config.pop("id", None)
        unknown = set(config) - _NUMCODECS_KEYS
        if unknown:
            raise TypeError(f"unknown blosc2 codec settings: {sorted(unknown)}")
        params = cls(
            codec=config.get("cname", "zstd"),
            clevel=config.get("clevel", 5),
            typesize=config.get("typesize"),
            filters=config.get("filters", ("shuffle",)),
            filters_meta=config.get("filters_meta"),
            splitmode=config.get("splitmode", "auto"),
            blocksize=config.get("blocksize", 0),
            use_dict=config.get("use_dict", False),
            codec_meta=config.get("codec_meta", 0),
        )
        parse_writable_codec(params.codec)  # a codec's configuration: it must encode too
        return params.compact()

    def compact(self) -> ChunkParams:
        """The same pipeline without empty slots (what the codecs' configurations hold)."""
        pipeline = self.pipeline
        return replace(
            self, filters=tuple(f for f, _ in pipeline), filters_meta=tuple(m for _, m in pipeline)
        )

    def to_numcodecs(self) -> dict[str, Any]:
        """The numcodecs ``blosc2`` configuration: ``id``, ``cname`` and ``clevel`` always, other
        keys only where they differ from the defaults, so that ocf_blosc2 (which takes only
        ``cname`` and ``clevel``) reads what default settings write."""
        config: dict[str, Any] = {"id": "blosc2", "cname": codec_name(self.codec)}
        config["clevel"] = self.clevel
        pipeline = self.pipeline
        if not self._default_pipeline():
            config["filters"] = [filter_name(f) for f, _ in pipeline]
            if any(m for _, m in pipeline):
                config["filters_meta"] = [m for _, m in pipeline]
        config.update(self._non_default_tail())
        return config

    def _non_default_tail(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.blocksize:
            out["blocksize"] = self.blocksize
        if self.splitmode != SplitMode.AUTO_SPLIT:
            out["splitmode"] = splitmode_name(self.splitmode)
        if self.typesize is not None:
            out["typesize"] = self.typesize
        if self.use_dict:
            out["use_dict"] = True
        if self.codec_meta:
            out["codec_meta"] = self.codec_meta
        return out

    # --- Zarr v3 ----------------------------------------------------------------------------

    @classmethod
    def from_zarr(cls, config: Mapping[str, Any], *, itemsize: int | None = None) -> ChunkParams:
        """From the ``configuration`` of a Zarr v3 ``blosc2`` codec.

        ``filters`` (a list of ``{"id": name, "meta": int}``) wins over ``shuffle``
        (``"noshuffle"``, ``"shuffle"``, ``"bitshuffle"``); with neither, the pipeline follows
        the item size as zarr's ``blosc`` codec does: bitshuffle for 1-byte items, else shuffle.
        ``itemsize`` stands in for a missing ``typesize`` in that rule.
        """
        config = dict(config)
        unknown = set(config) - _ZARR_KEYS
        if unknown:
            raise TypeError(f"unknown blosc2 codec settings: {sorted(unknown)}")
        typesize = parse_typesize(config.get("typesize"))
        filters, metas = parse_zarr_filters(
            config.get("filters"), config.get("shuffle"), typesize or itemsize
        )
        parse_writable_codec(config.get("cname", "zstd"))  # a codec's: it must encode too
        return cls(
            codec=config.get("cname", "zstd"),
            clevel=config.get("clevel", 5),
            typesize=typesize,
            filters=filters,
            filters_meta=metas,
            splitmode=config.get("splitmode", "auto"),
            blocksize=config.get("blocksize", 0),
            use_dict=config.get("use_dict", False),
            codec_meta=config.get("codec_meta", 0),
        ).compact()

    def to_zarr(self) -> dict[str, Any]:
        """The ``configuration`` of a Zarr v3 ``blosc2`` codec: ``cname`` and ``clevel``
        always, the rest only where it differs from what :meth:`from_zarr` would assume."""
        config: dict[str, Any] = {"cname": codec_name(self.codec), "clevel": self.clevel}
        pipeline = self.pipeline
        implied = _ZARR_SHUFFLES["bitshuffle" if self.typesize == 1 else "shuffle"]
        if self.typesize is None or pipeline != tuple((f, 0) for f in implied):
            shuffle = next(
                (k for k, v in _ZARR_SHUFFLES.items() if pipeline == tuple((f, 0) for f in v)),
                None,
            )
            if shuffle is not None:
                config["shuffle"] = shuffle
            else:
                config["filters"] = [{"id": filter_name(f), "meta": m} for f, m in pipeline]
        config.update(self._non_default_tail())
        return config


def parse_zarr_filters(
    filters: Any, shuffle: Any, itemsize: int | None
) -> tuple[tuple[Filter, ...], tuple[int, ...]]:
    """The pipeline of a Zarr v3 ``blosc2`` configuration (see :meth:`ChunkParams.from_zarr`)."""
    if filters is not None:
        names, metas = [], []
        for f in [filters] if isinstance(filters, (str, enum.Enum, Mapping)) else filters:
            if isinstance(f, Mapping):
                names.append(f["id"])
                metas.append(f.get("meta", 0))
            elif isinstance(f, (str, numbers.Integral, enum.Enum)):
                names.append(f)
                metas.append(0)
            else:
                name, meta = f
                names.append(name)
                metas.append(meta)
        return parse_filters(names, metas)
    if shuffle is None:
        shuffle = "bitshuffle" if itemsize == 1 else "shuffle"
    if isinstance(shuffle, enum.Enum):
        shuffle = shuffle.name
    key = str(shuffle).lower()
    if key == "nofilter":
        key = "noshuffle"
    if key not in _ZARR_SHUFFLES:
        raise ValueError(f"shuffle must be one of {sorted(_ZARR_SHUFFLES)}, got {shuffle!r}")
    chosen = _ZARR_SHUFFLES[key]
    return chosen, (0,) * len(chosen)


_FIELDS = frozenset(f.name for f in fields(ChunkParams))
_NUMCODECS_KEYS = (_FIELDS - {"codec", "blockshape"}) | {"cname"}
_ZARR_KEYS = _NUMCODECS_KEYS | {"shuffle"}
