"""How the ``b2nd`` engine recognises Blosc2 files that xarray-blosc2 (its ``blosc2`` engine)
wrote, so that it reads them by that writer's conventions (:mod:`.blosc2_layout`, with its
packings in :mod:`.packings`) rather than serve its bookkeeping as data.

xarray-blosc2 writes a Dataset as a directory, or a ``.b2z`` zip of one, holding one
``.b2nd`` per variable: dimensions in a vlmeta key ``dims`` (not ``_ARRAY_DIMENSIONS``), the
variable's name in ``var``, coordinates as ``_coord_<name>.b2nd`` frames marked
``is_coord``, attributes packed in a JSON string ``attrs``, the Dataset's in a
``dataset.json`` manifest (deflated in a ``.b2z``), and, with its ``geogrid`` preset or
``lossy=``, values quantised to integers. Its encrypted datasets are a sealed blob
(``B2ENCBLB\\x02``), not a zip: refused (:class:`ForeignLayoutError`). The markers, any of
which names the layout:

- a ``dataset.json`` at the root of a directory, or as a member of a zip, anywhere in it;
- a ``_coord_<name>.b2nd`` beside the frames of a directory or zip that is no python-blosc2
  tree (no ``embed.b2e``);
- a frame whose vlmeta has a list ``dims`` and a ``var`` or ``is_coord`` key, and neither
  ``_ARRAY_DIMENSIONS`` nor ``_xarray`` (checked when the frame is opened);
- a file that starts with the sealed blob's magic.

``guess_can_open`` claims the layout only where xarray-blosc2's engine is not installed
(:func:`owner_engine_installed`): xarray asks ``b2nd`` before ``blosc2``, and the writer's
engine reads its own files first when it is there.
"""

from __future__ import annotations

import os
import struct
import zipfile
from collections.abc import Mapping
from pathlib import Path

from ...errors import UnsupportedError
from .conventions import DIMENSION_KEY, XARRAY_KEY

__all__ = [
    "ForeignLayoutError",
    "SEALED_MARKER",
    "foreign_layout",
    "foreign_vlmeta",
    "owner_engine_installed",
]

MANIFEST = "dataset.json"
COORD_PREFIX = "_coord_"
SEALED_MAGIC = b"B2ENCBLB\x02"
SEALED_MARKER = "an xarray-blosc2 sealed (encrypted) dataset blob"
_ZIP_MAGIC = b"PK\x03\x04"
_OWNER = (
    "xarray-blosc2 reads it: xarray_blosc2.open(path, key=...) for a sealed blob, "
    "xr.open_dataset(path, engine='blosc2') otherwise"
)


class ForeignLayoutError(UnsupportedError):
    """A Blosc2 dataset laid out by another writer (xarray-blosc2) that the ``b2nd`` engine
    does not decode (its sealed blob, a group of it); the message names the layout, the
    marker and the engine that reads it."""

    def __init__(self, path: str, marker: str):
        self.feature = "xarray-blosc2 layout"
        self.ident = path
        self.marker = marker
        NotImplementedError.__init__(
            self,
            f"{path} is in xarray-blosc2's layout ({marker}), which the b2nd engine does not "
            f"decode there; {_OWNER}",
        )

    def __reduce__(self):
        # Raised in a dask worker, it crosses back by pickle (args hold the message only).
        return type(self), (self.ident, self.marker)


def foreign_vlmeta(vlmeta: Mapping) -> str | None:
    """The marker, if a frame's vlmeta is an xarray-blosc2 variable's or coordinate's."""
    if DIMENSION_KEY in vlmeta or XARRAY_KEY in vlmeta or "dims" not in vlmeta:
        return None
    if not isinstance(vlmeta["dims"], (list, tuple)):
        return None
    for key in ("var", "is_coord", "coord_name"):
        if key in vlmeta:
            return f"vlmeta 'dims' and {key!r} without '_ARRAY_DIMENSIONS'"
    return None


def foreign_layout(path: str) -> str | None:
    """The marker, if the local ``path`` is a directory or zip in xarray-blosc2's layout or
    its sealed blob; None for anything else (remote paths are judged frame by frame)."""
    p = Path(path.rstrip("/").removeprefix("file://")).expanduser()
    try:
        if p.is_dir():
            # Files only: a DataTree may have a group (a directory) called dataset.json.
            return _foreign_names([e.name for e in os.scandir(p) if e.is_file()], "directory")
        if not p.is_file():
            return None
        with open(p, "rb") as fh:
            head = fh.read(len(SEALED_MAGIC))
        if head == SEALED_MAGIC:
            return SEALED_MARKER
        if head[:4] != _ZIP_MAGIC:
            return None
        directory = _central_directory(p)
        if directory is not None and not any(m in directory for m in _NAME_MARKERS):
            return None  # no member is called so: the common case, without parsing names
        with zipfile.ZipFile(p) as zf:
            return _foreign_names([n for n in zf.namelist() if not n.endswith("/")], "zip")
    except (OSError, zipfile.BadZipFile, ValueError):
        return None  # not readable here: the opener says why


_NAME_MARKERS = (MANIFEST.encode(), COORD_PREFIX.encode())
_EOCD = struct.Struct("<4s4xHHII")  # signature, ..., entries, entries, size, offset
_EOCD64_LOCATOR = struct.Struct("<4sIQI")  # signature, disk, offset of the zip64 record
_EOCD64 = struct.Struct("<4sQ2H2I2Q2Q")  # ..., entries, entries, size, offset


def _central_directory(path: Path) -> bytes | None:
    """The raw central directory of the zip at ``path`` (names are searched in it before
    zipfile parses 70,000 entries one by one), or None where it cannot be found cheaply."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        tail_at = max(0, size - (1 << 16) - _EOCD.size)
        fh.seek(tail_at)
        tail = fh.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < _EOCD.size:
            return None
        _, _, _, cd_size, cd_offset = _EOCD.unpack_from(tail, at)
        if 0xFFFFFFFF in (cd_size, cd_offset) and at >= _EOCD64_LOCATOR.size:
            sig, _, record, _ = _EOCD64_LOCATOR.unpack_from(tail, at - _EOCD64_LOCATOR.size)
            if sig != b"PK\x06\x07" or record + _EOCD64.size > size:
                return None
            fh.seek(record)
            fields = _EOCD64.unpack(fh.read(_EOCD64.size))
            if fields[0] != b"PK\x06\x06":
                return None
            cd_size, cd_offset = fields[-2], fields[-1]
        if cd_offset + cd_size > size:
            return None
        fh.seek(cd_offset)
        return fh.read(cd_size)


def _foreign_names(names: list[str], where: str) -> str | None:
    base = {n.rsplit("/", 1)[-1] for n in names}
    if where == "directory" and MANIFEST in base:
        return f"its {MANIFEST} manifest in the directory"
    if where == "zip" and MANIFEST in base:
        return f"its {MANIFEST} manifest in the zip"
    if "embed.b2e" in base:
        return None  # a python-blosc2 tree: a variable may well be called _coord_x
    if any(n.startswith(COORD_PREFIX) and n.endswith(".b2nd") for n in base):
        return f"its {COORD_PREFIX}<name>.b2nd coordinate frames"
    return None


def owner_engine_installed() -> bool:
    """Whether xarray-blosc2's ``blosc2`` engine is installed (then ``guess_can_open``
    leaves its layout to it)."""
    from xarray.backends import list_engines

    return "blosc2" in list_engines()
