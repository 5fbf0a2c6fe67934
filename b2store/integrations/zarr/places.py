"""Where a :class:`~b2store.integrations.zarr.write.Writer` keeps its tree or frame: a local
directory (links inside refused, never followed) or a prefix of an object store (frames there
sparse, or small ones stored whole), both by paths relative to the root."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from ... import _files
from ...frame import remote
from ...frame.schunk import SChunk
from ...frame.sources import is_url

__all__ = ["Place", "Local", "Remote"]


class Place:
    """Where a writer's tree or frame lives, by paths relative to its root (posix, ``""``
    the root itself): a local directory (:class:`Local`) or a prefix of an object store
    (:class:`Remote`)."""

    remote = False
    storage_options: dict | None = None

    @staticmethod
    def of(path: str, storage_options) -> Place:
        return Remote(path, storage_options) if is_url(path) else Local(Path(path))


class Local(Place):
    def __init__(self, root: Path):
        self.root = root

    def frame(self, rel: str) -> Path:
        # Never write through a symbolic link: one planted in the tree (the frame, or a
        # group directory; or in a tree this store's root lies in) could point anywhere.
        path = self.root / rel if rel else self.root
        _files.check_write(path, self.root)
        return path

    def exists(self, rel: str) -> bool:
        return (self.root / rel if rel else self.root).exists()

    def isdir(self, rel: str) -> bool:
        return (self.root / rel if rel else self.root).is_dir()

    def make_parent(self, rel: str) -> None:
        self.frame(rel).parent.mkdir(parents=True, exist_ok=True)

    def remove(self, rel: str) -> None:
        """A file or a directory (and all under it); nothing there is no error."""
        path = self.frame(rel)
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()

    def remove_file(self, rel: str) -> None:
        # (unlink removes a link itself; a linked group directory is refused)
        self.frame(rel).unlink(missing_ok=True)

    def put_frame(self, rel: str, meta: dict, vlmeta: dict, chunksize: int = -1) -> None:
        """A small contiguous frame with no chunks: metalayers ``meta``, vlmeta ``vlmeta``."""
        with SChunk.create(self.frame(rel), typesize=1, chunksize=chunksize, meta=meta) as sc:
            sc.vlmeta.update(vlmeta)


class Remote(Place):
    """A prefix of an object store: frames there are sparse frames (chunk objects and an
    index, :mod:`b2store.frame.remote_sparse`) or small contiguous frames stored whole."""

    remote = True

    def __init__(self, url: str, storage_options):

        self.url = url.rstrip("/")
        self.storage_options = dict(storage_options or {})
        self.fs, root = remote.filesystem(self.url, self.storage_options)
        self.root = root.rstrip("/")

    def frame(self, rel: str) -> str:
        return f"{self.url}/{rel}" if rel else self.url

    def _key(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def exists(self, rel: str) -> bool:
        return bool(remote.call(self.frame(rel), self.fs.exists, self._key(rel)))

    def isdir(self, rel: str) -> bool:
        return bool(remote.call(self.frame(rel), self.fs.isdir, self._key(rel)))

    def make_parent(self, rel: str) -> None:
        pass  # (an object store has no directories)

    def remove(self, rel: str) -> None:
        key = self._key(rel)
        with contextlib.suppress(FileNotFoundError):
            found = remote.call(self.frame(rel), self.fs.find, key)
            if remote.call(self.frame(rel), self.fs.isfile, key):
                found = [key, *found]
            if found:
                remote.call(self.frame(rel), self.fs.rm, sorted(set(found)))

    def remove_file(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            remote.call(self.frame(rel), self.fs.rm_file, self._key(rel))

    def put_frame(self, rel: str, meta: dict, vlmeta: dict, chunksize: int = -1) -> None:
        with SChunk.create(None, typesize=1, chunksize=chunksize, meta=meta) as sc:
            sc.vlmeta.update(vlmeta)
            frame = sc.to_cframe()
        remote.call(self.frame(rel), self.fs.pipe_file, self._key(rel), frame)
