"""Zarr v3 bytes-to-bytes codecs: ``blosc2``, and ``numcodecs.blosc2`` for ocf_blosc2's arrays.

Both are registered through the ``zarr.codecs`` entry point. ``blosc2`` is configured in the
spirit of zarr's ``blosc`` codec (``typesize`` and ``shuffle`` follow the array's dtype when
left out) plus the Blosc2 filter pipeline; decoding reads any Blosc1 or Blosc2 chunk.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

from zarr.abc.codec import BytesBytesCodec
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer
from zarr.core.common import parse_named_configuration

from ..chunk.decoder import decode_chunk
from ..chunk.encoder import encode_chunk, resolve_codec, resolve_filters, resolve_splitmode
from ..constants import Filter
from .numcodecs_codec import Blosc2

__all__ = ["Blosc2Codec", "NumcodecsBlosc2Codec"]

_SHUFFLES = {"noshuffle": (), "shuffle": ("shuffle",), "bitshuffle": ("bitshuffle",)}


def _item_size(spec: ArraySpec) -> int:
    size = getattr(spec.dtype, "item_size", None)
    return size if isinstance(size, int) and size > 0 else 1


def _decode(chunk_bytes: Buffer, spec: ArraySpec) -> Buffer:
    decoded = decode_chunk(chunk_bytes.as_numpy_array())
    return spec.prototype.buffer.from_array_like(decoded)


class _ThreadedSync:
    """The async codec API over the synchronous one, in a worker thread (the codecs release
    the GIL); compressed sizes are unknown in advance."""

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_bytes, chunk_spec)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    def compute_encoded_size(self, _input_byte_length: int, _chunk_spec: ArraySpec) -> int:
        raise NotImplementedError


@dataclass(frozen=True)
class Blosc2Codec(_ThreadedSync, BytesBytesCodec):
    """Blosc2 compression of Zarr v3 chunks.

    Parameters
    ----------
    typesize : int, optional
        Bytes per item; None takes the array's item size.
    cname : str
        ``"blosclz"``, ``"lz4"``, ``"lz4hc"``, ``"zlib"`` or ``"zstd"``.
    clevel : int
        0 (none) to 9.
    shuffle : {"noshuffle", "shuffle", "bitshuffle"}, optional
        None picks bitshuffle for 1-byte items, shuffle otherwise (as zarr's ``blosc`` does).
        Ignored when ``filters`` is given.
    filters : list of {"id": str, "meta": int}, optional
        The whole Blosc2 filter pipeline, in order, e.g.
        ``[{"id": "trunc_prec", "meta": 12}, {"id": "shuffle", "meta": 0}]``.
    blocksize : int
        Bytes per block; 0 lets c-blosc2's rules pick.
    splitmode : str
        ``"auto"``, ``"always"``, ``"never"`` or ``"forward_compat"``.
    """

    is_fixed_size = False

    typesize: int | None = None
    cname: str = "zstd"
    clevel: int = 5
    shuffle: str | None = None
    filters: tuple[tuple[str, int], ...] | None = None
    blocksize: int = 0
    splitmode: str = "auto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "cname", resolve_codec(self.cname).name.lower())
        if not isinstance(self.clevel, int) or not 0 <= self.clevel <= 9:
            raise ValueError(f"clevel must be an integer 0..9, got {self.clevel!r}")
        if self.typesize is not None and (not isinstance(self.typesize, int) or self.typesize < 1):
            raise ValueError(f"typesize must be a positive integer, got {self.typesize!r}")
        if self.shuffle is not None and self.shuffle not in _SHUFFLES:
            raise ValueError(f"shuffle must be one of {sorted(_SHUFFLES)}, got {self.shuffle!r}")
        if not isinstance(self.blocksize, int) or self.blocksize < 0:
            raise ValueError(f"blocksize must be an integer >= 0, got {self.blocksize!r}")
        splitmode = resolve_splitmode(self.splitmode).name.lower().removesuffix("_split")
        object.__setattr__(self, "splitmode", splitmode)
        if self.filters is not None:
            object.__setattr__(self, "filters", self._parse_filters(self.filters))

    @staticmethod
    def _parse_filters(filters) -> tuple[tuple[str, int], ...]:
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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Blosc2Codec:
        _, config = parse_named_configuration(data, "blosc2")
        return cls(**config)

    def to_dict(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "cname": self.cname,
            "clevel": self.clevel,
            "blocksize": self.blocksize,
            "splitmode": self.splitmode,
        }
        if self.typesize is not None:
            config["typesize"] = self.typesize
        if self.filters is not None:
            config["filters"] = [{"id": name, "meta": meta} for name, meta in self.filters]
        elif self.shuffle is not None:
            config["shuffle"] = self.shuffle
        return {"name": "blosc2", "configuration": config}

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Blosc2Codec:
        size = _item_size(array_spec)
        codec = self
        if codec.typesize is None:
            codec = replace(codec, typesize=size)
        if codec.shuffle is None and codec.filters is None:
            codec = replace(codec, shuffle="bitshuffle" if size == 1 else "shuffle")
        return codec

    def _pipeline(self) -> tuple[list[str], list[int]]:
        if self.filters is not None:
            return [n for n, _ in self.filters], [m for _, m in self.filters]
        names = list(_SHUFFLES[self.shuffle or "shuffle"])
        return names, [0] * len(names)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        names, metas = self._pipeline()
        chunk = encode_chunk(
            chunk_bytes.as_numpy_array(),
            typesize=self.typesize or _item_size(chunk_spec),
            codec=self.cname,
            clevel=self.clevel,
            filters=names,
            filters_meta=metas,
            blocksize=self.blocksize,
            splitmode=self.splitmode,
        )
        return chunk_spec.prototype.buffer.from_bytes(chunk)

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return _decode(chunk_bytes, chunk_spec)


@dataclass(frozen=True)
class NumcodecsBlosc2Codec(_ThreadedSync, BytesBytesCodec):
    """``numcodecs.blosc2``: the name ocf_blosc2's Zarr v3 wrapper wrote; its configuration
    is the numcodecs ``blosc2`` configuration (see :class:`b2store.Blosc2`)."""

    is_fixed_size = False
    codec_config: tuple[tuple[str, Any], ...] = ()

    def __init__(self, **codec_config: Any):
        codec_config.pop("id", None)
        object.__setattr__(self, "codec_config", tuple(sorted(codec_config.items())))

    @property
    def _codec(self) -> Blosc2:
        return Blosc2(**{k: list(v) if isinstance(v, tuple) else v for k, v in self.codec_config})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NumcodecsBlosc2Codec:
        _, config = parse_named_configuration(data, "numcodecs.blosc2")
        return cls(**(config or {}))

    def to_dict(self) -> dict[str, Any]:
        return {"name": "numcodecs.blosc2", "configuration": dict(self.codec_config)}

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return chunk_spec.prototype.buffer.from_bytes(
            self._codec.encode(chunk_bytes.as_numpy_array())
        )

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return _decode(chunk_bytes, chunk_spec)
