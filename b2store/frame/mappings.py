"""Dict-like views of a frame's metalayers: vlmeta (decoded values) and meta (raw bytes)."""

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
    """The fixed metalayers (raw bytes); updated in place when the size does not change."""

    def __init__(self, schunk):
        self._schunk = schunk

    def __getitem__(self, name: str) -> bytes:
        return self._schunk.header.metalayers[name]

    def __setitem__(self, name: str, content: bytes) -> None:
        self._schunk._set_meta(name, content)

    def __delitem__(self, name: str) -> None:
        raise ValueError("fixed metalayers cannot be deleted")

    def __iter__(self):
        return iter(list(self._schunk.header.metalayers))

    def __len__(self) -> int:
        return len(self._schunk.header.metalayers)

    def __repr__(self) -> str:
        return repr(dict(self))
