"""Dict-like views of a frame's metalayers, decoded as python-blosc2 decodes them: vlmeta
and meta (whose raw bytes :meth:`MetaView.raw` gives)."""

from __future__ import annotations

from collections.abc import MutableMapping

from ..chunk.decoder import decode_chunk
from ..chunk.encoder import encode_chunk
from ..constants import Codec, Filter
from .vlmeta_codec import pack_value, unpack_value

__all__ = ["VLMetaView", "MetaView"]


class VLMetaView(MutableMapping):
    """The vlmetalayers of a frame, decoded on access; changes rewrite the trailer."""

    def __init__(self, schunk):
        self._schunk = schunk

    def __getitem__(self, name: str):
        raw = self._schunk._raw_vlmeta[name]
        limits = self._schunk.limits
        limits.check("max_vlmeta_nbytes", len(raw), f"vlmeta[{name!r}] stored bytes")
        # Decompressed within max_vlmeta_nbytes (the error names that limit, not the chunk
        # one), then decoded within max_vlmeta_items objects; no copy of the payload between.
        payload = decode_chunk(
            raw, max_nbytes=limits.max_vlmeta_nbytes, limit_name="max_vlmeta_nbytes"
        )
        return unpack_value(payload, limits)

    def __setitem__(self, name: str, value) -> None:
        self.update({name: value})

    def update(self, other=(), /, **kwargs) -> None:
        """Set several values in one published change (one new trailer, not one each)."""
        new = {
            # python-blosc2 stores each value compressed with its defaults for typesize 1.
            name: encode_chunk(
                pack_value(value), typesize=1, codec=Codec.ZSTD, clevel=5, filters=[Filter.SHUFFLE]
            )
            for name, value in dict(other, **kwargs).items()
        }
        # Read the other values under the writer lock: another writer may have published
        # some since this handle looked, and they must not be lost.
        with self._schunk._changing():
            self._schunk._set_vlmeta({**self._schunk._raw_vlmeta, **new})

    def __delitem__(self, name: str) -> None:
        with self._schunk._changing():
            raw = dict(self._schunk._raw_vlmeta)
            del raw[name]
            self._schunk._set_vlmeta(raw)

    def __iter__(self):
        return iter(list(self._schunk._raw_vlmeta))

    def __len__(self) -> int:
        return len(self._schunk._raw_vlmeta)

    def __repr__(self) -> str:
        return repr(dict(self))


class MetaView(MutableMapping):
    """The fixed metalayers, decoded on access as python-blosc2's ``schunk.meta`` decodes
    them (msgpack, with the same rules as :class:`VLMetaView`'s values): ``meta["b2nd"]`` is
    ``[0, ndim, shape, chunkshape, blockshape, 0, dtype]``.

    :meth:`raw` gives a metalayer's stored bytes, and :meth:`set_raw` writes bytes as they
    are. Setting ``meta[name] = value`` packs ``value`` as python-blosc2 does; fixed
    metalayers are updated in place, so the packed content must keep its size. A metalayer
    that is not one msgpack object (C programs may store raw bytes) reads as its bytes.
    """

    def __init__(self, schunk):
        self._schunk = schunk

    def __getitem__(self, name: str):
        if isinstance(name, slice):
            if name == slice(None):
                return self.getall()
            raise NotImplementedError("slicing the metalayers: only [:] (all of them)")
        return unpack_value(self.raw(name), self._schunk.limits)

    def raw(self, name: str) -> bytes:
        """The stored content of metalayer ``name`` (msgpack bytes, not decoded)."""
        return self._schunk.header.metalayers[name]

    def getall(self) -> dict:
        """Every metalayer, decoded (python-blosc2's ``meta.getall()``)."""
        return {name: self[name] for name in self}

    def __setitem__(self, name: str, value) -> None:
        self.set_raw(name, pack_value(value))

    def set_raw(self, name: str, content: bytes) -> None:
        """Store ``content`` as metalayer ``name`` (it must keep the stored size)."""
        self._schunk._set_meta(name, content)

    def __delitem__(self, name: str) -> None:
        raise ValueError("fixed metalayers cannot be deleted")

    def __iter__(self):
        return iter(list(self._schunk.header.metalayers))

    def __len__(self) -> int:
        return len(self._schunk.header.metalayers)

    def __contains__(self, name) -> bool:
        return name in self._schunk.header.metalayers

    def __repr__(self) -> str:
        return repr(self.getall())
