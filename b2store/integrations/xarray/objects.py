"""``to_b2nd`` into an object store (``s3://bucket/x.b2nd``, any fsspec URL).

Object stores have no rename and no append, and a reader may look at any moment: what is
stored there must be whole or absent. Everything is written to a local temporary first:

- a ``.b2nd`` frame and a ``.b2z`` zip are each one object, stored in one request (one PUT;
  s3fs sends a large object as a multipart upload, which the store completes only when every
  part is in): the object holds what it held before or the new one, never a part;
- a sparse frame (``contiguous=False``) is its chunk objects, stored first, and its index,
  stored last in one PUT (:mod:`b2store.frame.remote_sparse`);
- a ``.b2d`` tree is many objects: its frames are stored first (a sparse frame's chunk
  objects before its index, see :mod:`b2store.frame.remote_sparse`), its groups' attributes
  (``__vlmeta__.b2f``) after them, the root's last; then objects of a tree that was there and
  that the new one does not have are removed. Each frame is whole at every moment; a reader
  during a replacement may find some variables old and others new.

Writes into a stored Dataset (appends, regions) are not done there yet, and are refused
before anything is written.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from ...errors import UnsupportedError
from ...frame import remote

__all__ = ["to_object"]

_LAYOUTS = {".b2nd": "frame", ".b2z": "b2z", ".b2d": "b2d"}
# Written after the frames: each group's attributes, and the embed store (small arrays kept
# inside it, which python-blosc2 looks up as members of the tree).
_AFTER = ("__vlmeta__.b2f", "embed.b2e")


def to_object(write, obj, url: str, storage_options: Mapping | None, mode, layout, **kwargs):
    """``write(obj, local_path, mode="w", layout=..., **kwargs)`` (``to_b2nd``) to a local
    temporary, then the file stored at ``url`` whole; returns ``url``."""
    import fsspec

    suffix = PurePosixPath(url.split("?")[0]).suffix
    layout = layout or _LAYOUTS.get(suffix)
    if layout not in ("frame", "b2z", "b2d") or _LAYOUTS.get(suffix) != layout:
        raise UnsupportedError(
            "layout in an object store (a .b2nd frame, a .b2z zip or a .b2d tree, named so)",
            layout or suffix or url,
        )
    if mode not in (None, "w", "w-", "x"):
        raise UnsupportedError("mode in an object store (only 'w' and 'w-' yet)", mode)
    if kwargs.get("append_dim") is not None or kwargs.get("region") is not None:
        raise UnsupportedError("append or region write in an object store", url)
    if kwargs.get("contiguous") is False and layout == "b2z":
        raise UnsupportedError("sparse frame in a .b2z (contiguous=False)", url)
    options = dict(storage_options or {})
    fs, path = fsspec.core.url_to_fs(url, **options)
    if mode in ("w-", "x") and remote.call(url, fs.exists, path):
        raise FileExistsError(errno.EEXIST, f"the object exists (mode={mode!r})", url)
    with tempfile.TemporaryDirectory(prefix=".b2store-upload-") as tmp:
        local = os.path.join(tmp, "object" + suffix)
        write(obj, local, mode="w", layout=layout, **kwargs)
        if layout == "b2d":
            _put_tree(Path(local), url, fs, path.rstrip("/"), options)
        elif os.path.isdir(local):  # a sparse frame: its chunk objects, then its index
            from ...frame.remote_sparse import put_sparse
            from ...frame.schunk import SChunk

            with SChunk.open(local) as source:
                put_sparse(source, url, options)
        else:
            remote.call(url, fs.put_file, local, path)
    return url


def _put_tree(local: Path, url: str, fs, root: str, options: dict) -> None:
    """The tree at ``local`` stored under ``url``: frames, then attributes, the root's last,
    then what a tree there before had and this one has not removed."""
    from ...frame.remote_sparse import put_sparse
    from ...frame.schunk import SChunk

    url = url.rstrip("/")
    sparse, files, attrs = [], [], []
    for here, dirs, names in os.walk(local):
        rel = Path(here).relative_to(local).as_posix()
        rel = "" if rel == "." else rel + "/"
        if "chunks.b2frame" in names:  # a sparse frame: stored by put_sparse, whole
            sparse.append(rel.rstrip("/"))
            dirs[:] = []
            continue
        for name in names:
            (attrs if name in _AFTER else files).append(rel + name)
    before = _listing(url, fs, root)
    for rel in files:
        remote.call(f"{url}/{rel}", fs.put_file, str(local / rel), f"{root}/{rel}")
    for rel in sparse:
        with SChunk.open(local / rel) as source:
            put_sparse(source, f"{url}/{rel}", options)
    # Deepest first: a group's attributes after everything under it, the root's last.
    for rel in sorted(attrs, key=lambda r: (-r.count("/"), r.endswith(_AFTER[0]), r)):
        remote.call(f"{url}/{rel}", fs.put_file, str(local / rel), f"{root}/{rel}")
    kept = set(files) | set(attrs)
    gone = [
        rel
        for rel in before
        if rel not in kept and not any(rel.startswith(frame + "/") for frame in sparse)
    ]
    if gone:
        remote.call(url, fs.rm, [f"{root}/{rel}" for rel in gone])


def _listing(url: str, fs, root: str) -> list[str]:
    """The objects under ``root`` now (relative, posix); none when nothing is there."""
    try:
        found = remote.call(url, fs.find, root)
    except FileNotFoundError:
        return []
    prefix = root + "/"
    return [p[len(prefix) :] for p in found if p.startswith(prefix)]
