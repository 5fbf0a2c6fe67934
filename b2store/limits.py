"""The largest things a reader accepts from a file, in one place, and the error for more.

A file states sizes (a chunk's decoded bytes, the number of chunks, a metalayer's length) and a
reader would allocate what they say. Each size is checked against a :class:`Limits` *before*
anything is allocated for it, so a hostile 32-byte file cannot ask for gigabytes. The defaults
admit every file python-blosc2 writes with its own defaults and far larger ones; raise them
for files you trust that go beyond (``b2store.open(p, limits=Limits(max_chunk_nbytes=...))``).
"""

from __future__ import annotations

import dataclasses

from .errors import FormatError

__all__ = ["Limits", "LimitError", "DEFAULT_LIMITS", "resolve"]


class LimitError(FormatError):
    """A file asks for more than a :class:`Limits` allows (a FormatError: refuse the file, or
    raise the limit if you trust it).

    ``limit_name`` is the :class:`Limits` field that, raised, lets the file through; a bound
    that is not a ``Limits`` field is named with its owner (``"Blosc2.max_buffer_size"``).
    """

    def __init__(self, field: str, limit_name: str, limit: int, found: int, offset=None):
        self.limit_name = limit_name
        self.limit = limit
        where = limit_name if "." in limit_name else f"Limits.{limit_name}"
        super().__init__(
            field,
            f"at most {limit} ({where}; raise it to read this file)",
            found,
            offset,
        )


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a reader accepts. Every field is an inclusive maximum.

    Parameters
    ----------
    max_chunk_nbytes
        Decoded bytes of one chunk: data chunks, the offsets index, a vlmeta value, and a b2nd
        chunk (chunk shape times item size). Default 1 GiB (c-blosc2's own ceiling is 2 GiB).
    max_frame_nbytes
        Decoded bytes of a whole frame (the header's ``nbytes``). Default 2**50 (1 PiB): a
        sanity bound; what is allocated is bounded by the chunk limit.
    max_nchunks
        Chunks in one frame (entries of the offsets index). Default 2**25.
    max_metalayer_nbytes
        The frame header with its fixed metalayers (``header_len``), and so each metalayer.
        Default 1 MiB (python-blosc2's b2nd metalayer is under 200 bytes).
    max_vlmeta_nbytes
        The variable-length metalayers of one frame: the stored bytes and the decompressed
        msgpack of each value and of all of them summed, and the bytes of the msgpack ext
        payloads (sets, NumPy arrays) decoded from a value, summed over their nesting.
        Default 8 MiB.
    max_vlmeta_items
        Objects decoded from a frame's vlmeta (each list or map item, key and value counted,
        through nested ext payloads too), for one value and for all of them summed, counted
        before any is built. Default 2**17 (131,072; a python-blosc2 store's ``embed_map``
        takes six per embedded array). With both defaults, reading all of a frame's vlmeta
        holds under 64 MiB, through the Zarr store's JSON attributes too.
    max_ndim
        Dimensions of a b2nd array. Default 16 (B2ND_MAX_DIM, what the format can store).
    max_tree_members
        Entries of a ``.b2z`` zip's central directory, and arrays plus groups of any tree
        (what listing a tree allocates). Default 1,000,000. The bytes of a ``.b2z``'s frames
        need no limit of their own: they are stored, not compressed, and lie inside the file.
    max_tree_depth
        Levels of groups above a tree's array or group (the parts of a ``.b2z`` member's
        name, the directories of a ``.b2d``). Default 128: zarr's and xarray's walks of a
        group recurse once a level, and so do Python 3.11's ``os.walk`` (10,000 levels
        raised ``RecursionError``).
    max_member_nbytes
        Bytes of a tree member that is read whole into memory rather than in place: a
        deflated ``.b2z`` member (xarray-blosc2 deflates its ``dataset.json``), inflated at
        most this far whatever its header says, and a manifest file of a directory. Default
        8 MiB (a manifest of a few thousand variables is tens of kB).
    """

    max_chunk_nbytes: int = 1 << 30
    max_frame_nbytes: int = 1 << 50
    max_nchunks: int = 1 << 25
    max_metalayer_nbytes: int = 1 << 20
    max_vlmeta_nbytes: int = 8 << 20
    max_vlmeta_items: int = 1 << 17
    max_ndim: int = 16
    max_tree_members: int = 1_000_000
    max_tree_depth: int = 128
    max_member_nbytes: int = 8 << 20

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"Limits.{f.name} must be a non-negative int, not {value!r}")

    def check(self, name: str, found: int, field: str | None = None, offset=None) -> int:
        """``found`` if it is within ``Limits.<name>``, else a :class:`LimitError`."""
        limit = getattr(self, name)
        if found > limit:
            raise LimitError(field or name.removeprefix("max_"), name, limit, found, offset)
        return found

    def replace(self, **changes) -> Limits:
        return dataclasses.replace(self, **changes)


DEFAULT_LIMITS = Limits()


def resolve(limits: Limits | None) -> Limits:
    """``limits``, or the defaults when None."""
    if limits is None:
        return DEFAULT_LIMITS
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a b2store.Limits, not {type(limits).__name__}")
    return limits
