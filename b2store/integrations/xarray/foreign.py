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

The markers are read by :mod:`b2store.integrations.xb2_layout` (``foreign_layout``,
``foreign_vlmeta``, re-exported here), which :class:`~b2store.B2ndStore` reads the layout by
too. ``guess_can_open`` claims the layout only where xarray-blosc2's engine is not installed
(:func:`owner_engine_installed`): xarray asks ``b2nd`` before ``blosc2``, and the writer's
engine reads its own files first when it is there.
"""

from __future__ import annotations

from ...errors import UnsupportedError
from ..xb2_layout import SEALED_MARKER, foreign_layout, foreign_vlmeta

__all__ = [
    "ForeignLayoutError",
    "SEALED_MARKER",
    "foreign_layout",
    "foreign_vlmeta",
    "owner_engine_installed",
]

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


def owner_engine_installed() -> bool:
    """Whether xarray-blosc2's ``blosc2`` engine is installed (then ``guess_can_open``
    leaves its layout to it)."""
    from xarray.backends import list_engines

    return "blosc2" in list_engines()
