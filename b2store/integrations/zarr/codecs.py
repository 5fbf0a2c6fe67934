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

from ...chunk.decoder import decode_chunk
from ...chunk.encoder import encode_chunk
from ...chunk.params import (
    ChunkParams,
    codec_name,
    parse_writable_codec,
    parse_zarr_filters,
    splitmode_name,
)
from ..numcodecs.codec import Blosc2

__all__ = ["Blosc2Codec", "NumcodecsBlosc2Codec"]


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
    use_dict : bool
        Train a dictionary per chunk (zstd, lz4, lz4hc).

    Notes
    -----
    Codecs, filters and split modes may also be given as the ``Codec``, ``Filter`` and
    ``SplitMode`` enums. The configuration written holds ``cname`` and ``clevel`` and only
    the settings that differ from what would be assumed (see ``ChunkParams.to_zarr``).
    """

    is_fixed_size = False

    typesize: int | None = None
    cname: str = "zstd"
    clevel: int = 5
    shuffle: str | None = None
    filters: tuple[tuple[str, int], ...] | None = None
    blocksize: int = 0
    splitmode: str = "auto"
    use_dict: bool = False

    def __post_init__(self) -> None:
        # ChunkParams normalises and checks each field once. shuffle and filters stay None
        # when both are left out (they follow the array: see evolve_from_array_spec); else
        # they take the one form to_dict writes, so that a codec equals its round trip.
        parse_writable_codec(self.cname)  # a plugin codec: UnsupportedError, named
        params = self._params(1)
        given = self.shuffle is not None or self.filters is not None
        config = params.to_zarr() if given else {}
        filters = config.get("filters")
        if filters is not None:
            filters = tuple((f["id"], f["meta"]) for f in filters)
        object.__setattr__(self, "shuffle", config.get("shuffle"))
        object.__setattr__(self, "filters", filters)
        object.__setattr__(self, "typesize", params.typesize)
        object.__setattr__(self, "cname", codec_name(params.codec))
        object.__setattr__(self, "clevel", params.clevel)
        object.__setattr__(self, "blocksize", params.blocksize)
        object.__setattr__(self, "splitmode", splitmode_name(params.splitmode))
        object.__setattr__(self, "use_dict", params.use_dict)

    def _params(self, itemsize: int) -> ChunkParams:
        """The chunk parameters for items of ``itemsize`` bytes (used when typesize is
        None: as the typesize, and to pick shuffle or bitshuffle when neither is given)."""
        filters, metas = parse_zarr_filters(self.filters, self.shuffle, self.typesize or itemsize)
        return ChunkParams(
            codec=self.cname,
            clevel=self.clevel,
            typesize=self.typesize,
            filters=filters,
            filters_meta=metas,
            splitmode=self.splitmode,
            blocksize=self.blocksize,
            use_dict=self.use_dict,
        )

    @classmethod
    def from_params(cls, params: ChunkParams) -> Blosc2Codec:
        """The codec that compresses with ``params``."""
        return cls.from_dict({"name": "blosc2", "configuration": params.to_zarr()})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Blosc2Codec:
        _, config = parse_named_configuration(data, "blosc2", require_configuration=False)
        config = dict(config or {})
        if "filters" in config:
            config["filters"] = [
                (f["id"], f.get("meta", 0)) if isinstance(f, dict) else f for f in config["filters"]
            ]
        return cls(**config)

    def to_dict(self) -> dict[str, Any]:
        """``cname`` and ``clevel``, and the settings that differ from what the codec would
        take from the array (see ``ChunkParams.to_zarr``)."""
        config = self._params(1).to_zarr()
        if self.shuffle is None and self.filters is None and self.typesize is None:
            # Left to the array: written once evolve_from_array_spec has chosen.
            config.pop("shuffle", None)
            config.pop("filters", None)
        return {"name": "blosc2", "configuration": config}

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Blosc2Codec:
        size = _item_size(array_spec)
        codec = self
        if codec.typesize is None:
            codec = replace(codec, typesize=size)
        return codec

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        size = _item_size(chunk_spec)
        params = self._params(size)
        if params.typesize is None:
            params = params.replace(typesize=size)
        chunk = encode_chunk(chunk_bytes.as_numpy_array(), params)
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
        _, config = parse_named_configuration(data, "numcodecs.blosc2", require_configuration=False)
        return cls(**(config or {}))

    def to_dict(self) -> dict[str, Any]:
        return {"name": "numcodecs.blosc2", "configuration": dict(self.codec_config)}

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return chunk_spec.prototype.buffer.from_bytes(
            self._codec.encode(chunk_bytes.as_numpy_array())
        )

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return _decode(chunk_bytes, chunk_spec)
