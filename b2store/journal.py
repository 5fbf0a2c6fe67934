"""One commit across several frames of a local tree (a ``.b2d`` or a directory of frames).

A frame commits alone in one write of its header (see :mod:`b2store.frame.publishing`); an append
to a Dataset changes several frames, and per-frame commits would leave a writer killed
between two of them with some variables extended and others not. Here every frame's change
is first written whole but for its header (chunks, index, trailer, synced: the header write
is held back, :meth:`ContiguousFrame.hold_commit`), and new files are built beside the tree.
Then one file, the journal ``.b2store-commit.json`` in the tree, is written atomically: it
holds each frame's old and new header bytes and the renames of new files. It is the commit
point. The header writes and renames follow, and the journal goes.

Killed before the journal lands, the tree is as before (bytes past each frame's end are
never read and the next writer's commit cuts them). Killed after, b2store's next reader or
writer of the tree (:func:`recover`, which :class:`b2store.tree.Tree`, ``b2store.open`` of a
frame in it and ``to_b2nd`` call) rolls it forward: it makes the renames and writes the new
headers again, which is idempotent, then removes the journal. A file a rename replaces is
first linked beside its new version and kept until the journal goes. A frame whose header is
neither its old nor its new one (another writer changed that frame since, through a path
that ignores the journal: python-blosc2) makes the journal stale: it is undone (headers
written back, new files removed, replaced ones put back), so the tree is as before with that
writer's change. python-blosc2 ignores the journal: between the journal's landing and its
removal (the few header writes of a live writer, or until b2store next opens a tree whose
writer was killed there) it may see some frames before and some after.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from . import _files
from ._sync import sync_mode
from .errors import FormatError, LinkError, UnsupportedError
from .frame.b2lock import Sidecar, sidecar_path
from .frame.header import FrameHeader
from .frame.lock import LOCK_TIMEOUT, WriteLock

__all__ = ["JOURNAL_NAME", "LOCK_NAME", "TreeCommit", "recover", "pending"]

JOURNAL_NAME = ".b2store-commit.json"
LOCK_NAME = ".b2store-commit.lock"
_VERSION = 1
# The frame whose .b2lock sidecar python-blosc2's DictStore locks a whole .b2d tree with.
STORE_LOCKED = "embed.b2e"


def pending(root) -> bool:
    """Whether the tree at ``root`` holds a journal: a commit interrupted, or under way."""
    return os.path.isfile(Path(root) / JOURNAL_NAME)


def recover(root, timeout: float = LOCK_TIMEOUT) -> bool:
    """Finish (or undo) the commit a killed writer left in the tree at ``root``; whether
    there was one. Waits for a live writer's commit to end (its lock)."""
    root = Path(root)
    if not pending(root):
        return False
    lock = WriteLock(root / LOCK_NAME, timeout, nofollow=True)
    try:
        with lock.hold():
            return _roll(root)
    except LinkError:
        raise
    except PermissionError as exc:
        raise PermissionError(
            exc.errno,
            f"{root} holds an interrupted commit ({JOURNAL_NAME}); open it once with write "
            "access so that b2store finishes it",
            str(root),
        ) from exc
    finally:
        lock.close()


def _roll(root: Path) -> bool:
    """Under the tree lock: apply the journal if it still is there (or undo it, stale)."""
    path = root / JOURNAL_NAME
    try:
        doc = json.loads(_files.read_regular(path, nofollow=True, max_nbytes=1 << 26))
    except FileNotFoundError:
        return False
    frames = [
        (_member(root, f["path"]), bytes.fromhex(f["old"]), bytes.fromhex(f["new"]), f["new_len"])
        for f in doc["frames"]
    ]
    # (source, destination, where the destination's old file is kept: None when new)
    renames = [
        (_staged(root, src), _member(root, dst), None if keep is None else _staged(root, keep))
        for src, dst, keep in doc["renames"]
    ]
    heads = {p: _head(p, len(new)) for p, _, new, _ in frames}
    stale = any(heads[p] not in (old[: len(new)], new) for p, old, new, _ in frames) or any(
        not src.exists() and not dst.exists() for src, dst, _ in renames
    )
    if stale:
        for p, old, new, _ in frames:
            if heads[p] == new:
                _write_head(p, old[: len(new)], FrameHeader.from_bytes(old).frame_len)
        for src, dst, keep in renames:
            if src.exists():
                os.unlink(src)  # never put in place
            elif keep is not None and keep.exists():
                os.replace(keep, dst)  # the old file back
            elif keep is None and dst.exists():
                os.unlink(dst)  # a new file: gone again
    else:
        _apply(frames, renames)
    for _, _, keep in renames:
        if keep is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(keep)
    os.unlink(path)
    _sync_dir(root)
    for staging in {src.parent for src, _, _ in renames}:
        # the writer's directory of new files, now empty (it removes it itself if alive)
        if _files.is_temp_name(staging.name):
            with contextlib.suppress(OSError):
                os.rmdir(staging)
    return True


def _member(root: Path, rel) -> Path:
    """The journal's path ``rel`` in the tree: a relative path that stays in it (no ``..``)
    and passes through no link there, or refused before the journal is rolled."""
    parts = Path(rel).parts if isinstance(rel, str) else ()
    if not parts or Path(rel).is_absolute() or ".." in parts:
        raise FormatError(JOURNAL_NAME, "paths inside the tree", repr(rel))
    path = root.joinpath(*parts)
    _files.check_write(path, root)
    return path


def _staged(root: Path, rel) -> Path:
    """The journal's path ``rel`` of a file its writer built beside the tree: in one of that
    writer's temporary directories next to it (``../.NAME.PID.RANDOM.tmp/...``), or refused."""
    parts = Path(rel).parts if isinstance(rel, str) else ()
    if (
        len(parts) < 3
        or parts[0] != ".."
        or not _files.is_temp_name(parts[1])
        or any(p in ("..", ".", "") for p in parts[1:])
    ):
        raise FormatError(JOURNAL_NAME, "files built beside the tree", repr(rel))
    return root.parent.joinpath(*parts[1:])


def _apply(frames, renames) -> None:
    for src, dst, keep in renames:
        if src.exists():
            if keep is not None and dst.exists() and not keep.exists():
                os.link(dst, keep)  # kept until the journal goes, to undo a stale one
            os.replace(src, dst)
            _sync_dir(dst.parent)
    for p, _, new, new_len in frames:
        _write_head(p, new, new_len)


def _head(path: Path, n: int) -> bytes:
    fd = _files.open_regular(path, nofollow=True)
    try:
        return os.pread(fd, n, 0)
    finally:
        os.close(fd)


def _write_head(path: Path, head: bytes, frame_len: int) -> None:
    """A frame's commit: its header bytes, then its length (bytes past it were never
    committed: a rolled-back frame's, or a later change's)."""
    fd = _files.open_writable(path, nofollow=True)
    try:
        os.pwrite(fd, head, 0)
        os.ftruncate(fd, frame_len)
        if _syncing():
            os.fsync(fd)
    finally:
        os.close(fd)


def _syncing() -> bool:
    # A tree commit ends the write it belongs to: synced under "commit" and "close" alike
    # (see b2store._sync), never under "none".
    return sync_mode() != "none"


def _sync_dir(path: Path) -> None:
    if not _syncing():
        return
    with contextlib.suppress(OSError):  # (not every system syncs a directory)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class TreeCommit:
    """Changes to several frames of the tree at ``root``, committed together.

    Use as a context manager: inside, :meth:`frame` holds a frame's writer lock and its
    commit back for one change, :meth:`add_file` names a file built beside the tree to put
    in it, and :meth:`commit` makes them all visible (see the module's docstring); leaving
    without committing leaves the tree as it was."""

    def __init__(self, root, timeout: float = LOCK_TIMEOUT):
        self.root = Path(root)
        _files.check_write(self.root)  # (a tree inside a tree, reached through a link)
        self._lock = WriteLock(self.root / LOCK_NAME, timeout, nofollow=True)
        self._stack = contextlib.ExitStack()
        self._frames: list[tuple[str, bytes, list]] = []
        self._renames: list[tuple[Path, str]] = []
        self._lengths: list[tuple[str, int]] = []  # each frame's committed length
        self._done = False

    def __enter__(self) -> TreeCommit:
        self._stack.enter_context(self._lock.hold())
        if (self.root / STORE_LOCKED).is_file():
            # python-blosc2's DictStore with locking on changes a .b2d tree (its files and
            # key maps) holding the sidecar of its embed.b2e exclusive, and takes a leaf's
            # own sidecar only after it: so this commit takes it too, before any frame's.
            sidecar = Sidecar(
                sidecar_path(self.root / STORE_LOCKED, sparse=False),
                None,
                writable=True,
                timeout=self._lock.timeout,
            )
            self._stack.enter_context(sidecar.hold_exclusive())
        _roll(self.root)  # a killed writer's commit first: this one starts from its after
        _files.sweep(self.root, JOURNAL_NAME[1:])  # and a journal it was writing goes
        return self

    def __exit__(self, *exc) -> None:
        try:
            if not self._done and not pending(self.root):
                # Left without a commit: what was written past each frame's end goes (no
                # reader looks there, but python-blosc2's checks may see a longer file).
                for path, length in self._lengths:
                    with contextlib.suppress(OSError):
                        os.truncate(path, length)
        finally:
            self._stack.close()
            self._lock.close()

    @contextlib.contextmanager
    def frame(self, schunk):
        """Hold ``schunk``'s writer lock until the commit ends, and its next change's commit
        back (one change per frame: its header is written by :meth:`commit`)."""
        backend = schunk.backend
        if not hasattr(backend, "hold_commit"):
            raise UnsupportedError(
                f"{schunk.urlpath}: only contiguous frames of a tree are committed together "
                "(this one is a sparse frame)"
            )
        self._stack.enter_context(schunk.changing())
        old = backend.committed_head()
        self._lengths.append((schunk.urlpath, FrameHeader.from_bytes(old).frame_len))
        with backend.hold_commit() as held:
            yield
        if held:
            rel = os.path.relpath(schunk.urlpath, self.root)
            self._frames.append((rel, old, held))

    def add_file(self, built, rel: str) -> None:
        """Put the file ``built`` (beside the tree, on its file system) at ``rel`` in it."""
        self._renames.append((Path(built), rel))

    def commit(self) -> None:
        for _, rel in self._renames:  # put in place through no link in the tree
            _files.check_write(self.root / rel, self.root)
        frames = []
        for rel, old, held in self._frames:
            if len(held) != 1:
                raise ValueError(f"{rel}: one change per frame in a tree commit, not {len(held)}")
            ((new, new_len),) = held
            frames.append({"path": rel, "old": old.hex(), "new": new.hex(), "new_len": new_len})
        renames = [
            [
                os.path.relpath(built, self.root),
                rel,
                os.path.relpath(f"{built}.old", self.root)
                if os.path.lexists(self.root / rel)
                else None,
            ]
            for built, rel in self._renames
        ]
        doc = {"version": _VERSION, "frames": frames, "renames": renames}
        # The commit point: the journal, in one rename.
        _files.write_atomic(self.root / JOURNAL_NAME, json.dumps(doc).encode(), _syncing())
        self._done = True
        _sync_dir(self.root)
        _roll(self.root)
