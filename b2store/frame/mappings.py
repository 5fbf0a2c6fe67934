"""Dict-like views of a frame's metalayers, decoded as python-blosc2 decodes them: vlmeta
and meta (whose raw bytes :meth:`MetaView.raw` gives)."""

from __future__ import annotations

from collections.abc import MutableMapping

from ..chunk.decoder import decode_chunk
from ..chunk.encoder import encode_chunk
from ..chunk.header import ChunkHeader
from ..constants import Codec, Filter
from ..errors import FormatError
from ..limits import LimitError
from .vlmeta_codec import count_objects, objects_at_most, pack_value, unpack_value

__all__ = ["VLMetaView", "MetaView", "raw_value"]


class VLMetaView(MutableMapping):
    """The vlmetalayers of a frame, decoded on access; changes rewrite the trailer."""

    def __init__(self, schunk):
        self._schunk = schunk

    def __getitem__(self, name: str):
        st = self._schunk._state
        raw = st.raw_vlmeta[name]
        limits = self._schunk.limits
        check_vlmeta_totals(self._schunk, st)
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
        new = {name: raw_value(value) for name, value in dict(other, **kwargs).items()}
        # Read the other values under the writer lock: another writer may have published
        # some since this handle looked, and they must not be lost.
        with self._schunk._changing():
            raw = {**self._schunk._raw_vlmeta, **new}
            # Nothing is written that this handle's own limits would refuse to read back.
            check_vlmeta_sum(raw, self._schunk.limits)
            self._schunk._set_vlmeta(raw)

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


def raw_value(value) -> bytes:
    """A vlmeta value as stored: msgpack, compressed as python-blosc2 compresses each value
    (its defaults for typesize 1)."""
    return encode_chunk(
        pack_value(value), typesize=1, codec=Codec.ZSTD, clevel=5, filters=[Filter.SHUFFLE]
    )


def check_vlmeta_totals(schunk, st) -> None:
    """Refuse a frame whose vlmeta values *together* pass ``max_vlmeta_nbytes`` (stored or
    decompressed) or ``max_vlmeta_items`` (objects decoded), once per committed state.

    Each value is bounded on its own when it is read; this bounds what reading them all
    holds (``dict(vlmeta)``, which the Zarr store and the xarray engine do for attributes):
    eight values each within the limits, compressed into 68 kB, decoded to 380 MB before.
    The decompressed sizes come from the values' chunk headers; the objects are counted
    (decompressed one value at a time, walked, nothing built) only when the sizes could
    hold more than the limit.
    """
    if schunk.__dict__.get("_vlmeta_checked") is st:
        return
    check_vlmeta_sum(st.raw_vlmeta, schunk.limits)
    schunk._vlmeta_checked = st


def check_vlmeta_sum(raw_vlmeta: dict, limits) -> None:
    """The check of :func:`check_vlmeta_totals` on stored values (name -> chunk bytes)."""
    raws = list(raw_vlmeta.values())
    limits.check("max_vlmeta_nbytes", sum(map(len, raws)), "vlmeta stored bytes (all values)")
    sizes = []
    for raw in raws:
        try:
            sizes.append(ChunkHeader.from_bytes(raw).nbytes)
        except FormatError:
            sizes.append(0)  # refused when it is read, with the field that is wrong
    limits.check("max_vlmeta_nbytes", sum(sizes), "vlmeta decoded bytes (all values)")
    if sum(map(objects_at_most, sizes)) > limits.max_vlmeta_items:
        items = 0
        for raw, size in zip(raws, sizes):
            if not size:
                continue
            try:
                payload = decode_chunk(
                    raw, max_nbytes=limits.max_vlmeta_nbytes, limit_name="max_vlmeta_nbytes"
                )
            except LimitError:
                raise
            except FormatError:
                continue  # refused when it is read, with the field that is wrong
            # One value past a limit is refused as reading it alone would be; the sum after.
            items += count_objects(payload, limits)
            limits.check("max_vlmeta_items", items, "vlmeta items (all values)")


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
