"""What a file that is not a Blosc2 frame looks like, told from its first bytes.

A user who hands b2store a NumPy ``.npy``, a netCDF file or a text file should read "not a
Blosc2 file" first, and what the file seems to be, not a frame header field that did not
match. Only cheap, certain signs are used: magic numbers, and text for bytes that are all
printable. Nothing here is a full check of the other format.
"""

from __future__ import annotations

import os

from ..chunk.header import ChunkHeader
from ..errors import B2StoreError, FormatError

__all__ = ["NotBlosc2Error", "looks_like", "looks_like_directory", "FRAME_PREFIX_LENGTH"]

#: Bytes :func:`looks_like` reads.
FRAME_PREFIX_LENGTH = 64

# (magic, offset, what it is); first match wins.
_MAGICS = (
    (b"\x93NUMPY", 0, "a NumPy .npy file"),
    (b"\x89HDF\r\n\x1a\n", 0, "an HDF5 file; netCDF-4 files are HDF5"),
    (b"CDF\x01", 0, "a netCDF-3 file"),
    (b"CDF\x02", 0, "a netCDF-3 (64-bit offset) file"),
    (b"CDF\x05", 0, "a netCDF-3 (64-bit data) file"),
    (b"PK\x03\x04", 0, "a zip file; if a .b2z tree, b2store.open_tree opens it"),
    (b"PK\x05\x06", 0, "an empty zip file"),
    (b"\x1f\x8b", 0, "a gzip file"),
    (b"\x28\xb5\x2f\xfd", 0, "a Zstandard file"),
    (b"BZh", 0, "a bzip2 file"),
    (b"\xfd7zXZ\x00", 0, "an xz file"),
    (b"PAR1", 0, "a Parquet file"),
    (b"GRIB", 0, "a GRIB file"),
    (b"II*\x00", 0, "a TIFF file"),
    (b"MM\x00*", 0, "a TIFF file"),
    (b"\x89PNG\r\n\x1a\n", 0, "a PNG image"),
    (b"\xff\xd8\xff", 0, "a JPEG image"),
    (b"SIMPLE  =", 0, "a FITS file"),
    (b"ARROW1", 0, "an Arrow IPC file"),
    (b"blpk", 0, "a bloscpack file"),
)
_TREE = "a directory of frames, a tree: b2store.open_tree or B2ndStore opens it"
_CHUNK = "a single Blosc chunk, not a frame: b2store.decode_chunk reads it"
_BLOSC_NOT_A_FRAME = (_TREE, _CHUNK)
# A text file's first bytes, quoted in the message, at most this long.
_QUOTED = 24


class NotBlosc2Error(FormatError):
    """A file or buffer that is not a Blosc2 frame at all (another format, text, nothing)."""

    def __init__(self, what: str, field: str, expected: str, found: object, offset=None):
        super().__init__(field, expected, found, offset)
        self.what = what
        self.name: str | None = None
        self._detail = str(self)
        # A tree or a lone chunk is Blosc2 all the same, only not one frame.
        blosc = what.startswith(_BLOSC_NOT_A_FRAME)
        self.lead = "not a single Blosc2 frame" if blosc else "not a Blosc2 file"
        self.args = (f"{self.lead} ({what}); {self._detail}",)

    def named(self, name: str, head: bytes | None = None, total: int | None = None):
        """The same error with the path or URL it is about in front, and what the file looks
        like told again from ``head`` (more of its first bytes, ``total`` in all) if given."""
        self.name = name
        if head is not None:
            self.what = looks_like(head, total=total)
            blosc = self.what.startswith(_BLOSC_NOT_A_FRAME)
            self.lead = "not a single Blosc2 frame" if blosc else "not a Blosc2 file"
        self.args = (f"{name}: {self.lead} ({self.what}); {self._detail}",)
        return self


def looks_like(head: bytes, *, total: int | None = None) -> str:
    """What bytes that start with ``head`` (``total`` bytes in all, when known) look like."""
    if total == 0 or (total is None and not head):
        return "an empty file"
    for magic, at, what in _MAGICS:
        if head[at : at + len(magic)] == magic:
            return what
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"[") and b'"zarr_format"' in head:
        return "a Zarr metadata document (zarr.json, .zarray); open the store's directory"
    if _is_text(head):
        text = head[:_QUOTED].decode("utf-8", "replace")
        return f"text: {text!r}{'...' if len(head) > _QUOTED else ''}"
    if _is_chunk(head):
        return _CHUNK
    return "unrecognized bytes"


def looks_like_directory(path) -> str | None:
    """What a directory that is not a sparse frame (no ``chunks.b2frame``) looks like, or
    None when it has the index file. Only the names in it are read."""
    try:
        names = set(os.listdir(path))
    except OSError:
        return None  # the layout reports what is wrong with it
    if "chunks.b2frame" in names:
        return None
    if names & {"zarr.json", ".zarray", ".zgroup"}:
        return "a Zarr store; zarr.open reads it"
    if "embed.b2e" in names or any(n.endswith((".b2nd", ".b2f", ".b2frame")) for n in names):
        return _TREE
    if not names:
        return "an empty directory"
    return "a directory with no chunks.b2frame, so not a sparse frame"


def _is_text(head: bytes) -> bool:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        # A multi-byte character cut by the end of ``head`` is still text.
        try:
            text = head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return False
    return bool(text) and all(c.isprintable() or c in "\t\r\n\f" for c in text)


def _is_chunk(head: bytes) -> bool:
    try:
        ChunkHeader.from_bytes(head, available=1 << 31)
    except (B2StoreError, ValueError):
        return False
    return True
