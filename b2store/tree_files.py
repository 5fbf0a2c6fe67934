"""The files of a tree (python-blosc2's ``.b2d``/``.b2z`` stores, directories of frames) under
one root, local or behind an fsspec URL: sizes, byte ranges and listings, read the same way
whichever it is. Local members are opened as regular files only and never block (a FIFO or
device member is refused); listings stop at the tree depth the limits admit."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

from . import _files
from .errors import FormatError
from .frame import ranges, remote
from .frame.sources import is_url, local_path
from .limits import LimitError, Limits, resolve

__all__ = ["TreeFiles", "short_path"]


class TreeFiles:
    """Sizes, byte ranges and listings under one root, local or behind an fsspec URL."""

    def __init__(self, urlpath, storage_options: Mapping | None = None):
        self.remote = is_url(urlpath)
        self.storage_options = dict(storage_options or {})
        if self.remote:
            self.fs, self.root = remote.filesystem(urlpath, self.storage_options)
            self.root = self.root.rstrip("/")
            self.urlpath = urlpath.rstrip("/")
        else:
            # Absolute: references must reopen from any working directory (or process).
            self.root = local_path(urlpath).absolute()
            self.urlpath = str(self.root)

    def join(self, rel: str) -> str:
        """The full path or URL of ``rel`` (posix) under the root."""
        if not rel:
            return self.urlpath
        return f"{self.urlpath}/{rel}" if self.remote else str(self.root / rel)

    def _fspath(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def isdir(self, rel: str = "") -> bool:
        if self.remote:
            path = self._fspath(rel)
            if "http" in self.fs.protocol and not path.endswith(("/", ".b2d")):
                return False  # an HTTP "directory" test downloads the page to list links
            return remote.call(self.join(rel), self.fs.isdir, path)
        return (self.root / rel).is_dir()

    def exists(self, rel: str = "") -> bool:
        if self.remote:
            # info() (a HEAD over HTTP), not exists(), which GETs the whole file there. A
            # server error is a RemoteError, not "missing".
            try:
                remote.call(self.join(rel), self.fs.info, self._fspath(rel))
            except FileNotFoundError:
                return False
            return True
        return (self.root / rel).exists()

    def size(self, rel: str = "") -> int:
        if self.remote:
            return int(ranges.stat(self.join(rel), self.fs, self._fspath(rel))["size"])
        # Checked as read() checks it: stat gives a FIFO or device a size of 0, and the tree
        # would then be refused as a zip with no signature instead of as no regular file.
        fd = _files.open_regular(self.root / rel)
        try:
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def read(self, rel: str, start: int, size: int) -> bytes:
        if size <= 0:
            return b""
        if self.remote:
            return ranges.read(self.join(rel), self.fs, self._fspath(rel), start, start + size)
        # Non-blocking, and only a regular file: a FIFO or device member never blocks.
        fd = _files.open_regular(self.root / rel)
        try:
            data = os.pread(fd, size, start)
        finally:
            os.close(fd)
        if len(data) != size:
            raise FormatError(rel or "file", f"{size} bytes at {start}", f"{len(data)} bytes")
        return data

    def walk(self, limits: Limits | None = None) -> Iterator[tuple[str, list[str], list[str]]]:
        """``(relative dir, subdirectory names, file names)``, top down, links not followed;
        a directory deeper than ``limits.max_tree_depth`` raises LimitError before it is
        entered (os.walk recurses a level a frame)."""
        max_depth = resolve(limits).max_tree_depth
        if self.remote:
            base = self.root
            listing = remote.call(
                self.urlpath, lambda: list(self.fs.walk(base, maxdepth=max_depth + 1))
            )
            for dirpath, dirs, files in listing:
                rel = dirpath[len(base) :].strip("/") if dirpath.startswith(base) else ""
                _check_depth(rel, dirs, max_depth)
                yield rel, sorted(dirs), sorted(files)
            return
        for dirpath, dirs, files in os.walk(self.root):
            dirs.sort()
            rel = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            rel = "" if rel == "." else rel
            _check_depth(rel, dirs, max_depth)
            yield rel, dirs, sorted(files)


def _check_depth(rel: str, dirs: list[str], max_depth: int) -> None:
    """Refuse subdirectories of ``rel`` past ``max_depth`` levels, before they are walked."""
    depth = rel.count("/") + 1 if rel else 0
    if dirs and depth + 1 > max_depth:
        where = f"tree depth at {short_path(rel + '/' + dirs[0])}"
        raise LimitError(where, "max_tree_depth", max_depth, depth + 1)


def short_path(path: str) -> str:
    """A path for an error message: a 20,000-character one shown by its ends."""
    return path if len(path) <= 80 else path[:40] + "..." + path[-37:]
