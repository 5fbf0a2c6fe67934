"""New frames built under a name beside their path and put in place whole: a process killed
meanwhile leaves the old frame there or none, never a half-written one.

:func:`staging_path` names where a writer builds a new frame, :func:`replace_path` puts it in
place (one rename, or one exchange of directories), and :func:`write_new` does both for the
empty frame :meth:`SChunk.create <b2store.frame.schunk.SChunk.create>` starts from.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .. import _files, _platform
from .._sync import sync_mode
from .backend import INDEX_NAME
from .sources import local_path

__all__ = ["staging_path", "replace_path", "place_new", "write_new"]


def write_new(urlpath, frame: bytes, contiguous: bool) -> Path:
    """Put the frame ``frame`` (an empty frame's bytes) at the local ``urlpath``, replacing
    what is there: a contiguous frame's file, or a sparse frame's directory holding it as
    its index file. Returns the path."""
    path = local_path(urlpath)
    _files.check_write(path)  # (no link inside a tree: refused before the first byte)
    path.parent.mkdir(parents=True, exist_ok=True)
    _files.sweep(path.parent, path.name)  # what killed writers of this path left
    # (not mkdtemp: a sparse frame's directory keeps the umask's mode). Locked while
    # this process makes it, so no other writer's sweep takes it.
    held, tmp = _files.make_temp_dir(path.parent, path.name, "new")
    try:
        made = tmp / "frame" if contiguous else tmp
        with open(made / INDEX_NAME if not contiguous else made, "xb") as fh:
            fh.write(frame)
            fh.flush()
            if sync_mode() != "none":  # closed here: "close" syncs it too
                os.fsync(fh.fileno())
        replace_path(made, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        os.close(held)
    return path


def staging_path(path) -> Path:
    """A fresh name beside ``path`` to build a new frame under before :func:`replace_path`."""
    path = local_path(path)
    _files.check_write(path)  # (no link inside a tree: refused before the first byte)
    path.parent.mkdir(parents=True, exist_ok=True)
    _forget_cached(path)
    # A killed writer's staged frame is never renamed into place: the next writer of the
    # path removes it (its name carries the dead writer's pid; see b2store._files).
    _files.sweep(path.parent, path.name)
    return _files.temp_name(path.parent, path.name, "new")


def _forget_cached(path: Path) -> None:
    """Let the kernel drop the page cache of a file about to be replaced. It stays whole
    and readable until the new one is renamed over it, but its cached pages are no use by
    then: held while the new file is written, they doubled the page cache a rewrite needs,
    and a 256 MiB rewrite ran 20-50% slower than a write to a new path on a VM."""
    if not hasattr(os, "posix_fadvise"):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # not there, a directory (sparse frames), unreadable: nothing to do
        return
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass
    finally:
        os.close(fd)


def place_new(made, path) -> bool:
    """Put the frame ``made`` at ``path`` only if nothing is there (mode "x"): one rename that
    refuses to replace (Linux), so a target another process made after the writer checked is
    kept, never replaced. False when something is there (``made`` is left as it is)."""
    path = local_path(path)
    _files.check_write(path)
    done = _platform.rename_new(made, path)
    if done is not None:
        return done
    if os.path.lexists(path):  # (elsewhere: checked just before the rename)
        return False
    os.rename(made, path)
    return True


def replace_path(made, path) -> None:
    """Put the frame ``made`` (a file or a sparse frame's directory) at ``path``, replacing
    what is there: one rename for files, one exchange for directories on Linux; elsewhere a
    directory replaced is removed first, so a process killed between the two steps leaves
    no frame there (never a half-written one)."""
    path = local_path(path)
    _files.check_write(path)  # again: what was built beside is put only where it was meant
    if Path(made).is_dir() and path.is_dir() and not path.is_symlink():
        if _platform.exchange(made, path):  # one step: the path is never missing
            shutil.rmtree(made)  # now the old frame
            return
        shutil.rmtree(path)
    elif path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif Path(made).is_dir() and (path.exists() or path.is_symlink()):
        path.unlink()
    os.replace(made, path)
