"""``to_b2nd`` into an object store (``s3://bucket/x.b2nd``, any fsspec URL).

Object stores have no rename and no append, and a reader may look at any moment: what is
stored there must be whole or absent. A ``.b2nd`` frame and a ``.b2z`` zip are each one
object, so each is written to a local temporary first and then stored in one request (one
PUT; s3fs sends a large object as a multipart upload, which the store completes only when
every part is in): the object then holds what it held before or the new one, never a part.
A ``.b2d`` tree (many objects, an index to write last) and writes into a stored Dataset
(appends, regions) are not done there yet, and are refused before anything is written.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Mapping
from pathlib import PurePosixPath

from ...errors import UnsupportedError
from ...frame import remote

__all__ = ["to_object"]

_ONE_OBJECT = {".b2nd": "frame", ".b2z": "b2z"}


def to_object(write, obj, url: str, storage_options: Mapping | None, mode, layout, **kwargs):
    """``write(obj, local_path, mode="w", layout=..., **kwargs)`` (``to_b2nd``) to a local
    temporary, then the file stored at ``url`` whole; returns ``url``."""
    import fsspec

    suffix = PurePosixPath(url.split("?")[0]).suffix
    layout = layout or _ONE_OBJECT.get(suffix)
    if layout not in ("frame", "b2z") or suffix not in _ONE_OBJECT:
        raise UnsupportedError(
            "layout in an object store (a .b2nd frame or a .b2z zip, one object each)",
            layout or suffix or url,
        )
    if mode not in (None, "w", "w-", "x"):
        raise UnsupportedError("mode in an object store (only 'w' and 'w-' yet)", mode)
    if kwargs.get("append_dim") is not None or kwargs.get("region") is not None:
        raise UnsupportedError("append or region write in an object store", url)
    if kwargs.get("contiguous") is False:
        raise UnsupportedError("sparse frame in an object store (contiguous=False)", url)
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    if mode in ("w-", "x") and remote.call(url, fs.exists, path):
        raise FileExistsError(errno.EEXIST, f"the object exists (mode={mode!r})", url)
    with tempfile.TemporaryDirectory(prefix=".b2store-upload-") as tmp:
        local = os.path.join(tmp, "object" + suffix)
        write(obj, local, mode="w", layout=layout, **kwargs)
        remote.call(url, fs.put_file, local, path)
    return url
