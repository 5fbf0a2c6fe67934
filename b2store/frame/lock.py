"""The writer lock: one change at a time to a frame (or a tree's commit), between the threads
of this process, its other handles and other processes.

Writers take it for each change, not for the life of a handle, so a handle never blocks
another one that is merely open, and are served in turn (:mod:`b2store._turns`). Every
writable layout holds one (a contiguous frame locks its own file, a sparse frame a lock file
inside its directory), and so does :mod:`b2store.journal` for a tree's commit.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from .. import _files, _platform, _turns

__all__ = ["WriteLock", "LOCK_NAME", "LOCK_TIMEOUT"]

# A sparse frame's lock file, inside its directory.
LOCK_NAME = ".b2store-lock"
# Seconds a writer waits for its turn before WriterLockedError.
LOCK_TIMEOUT = 30.0


class WriteLock:
    """A lock for one change at a time, between the threads of this process, its other
    handles and other processes: an OS file lock on ``path``, taken in turn with the other
    writers of the same file (:mod:`b2store._turns`: each outermost :meth:`hold` of any
    thread queues on its own). ``nofollow``: ``path`` is inside the frame (a sparse frame's
    lock file), so a link there is refused rather than followed out of the frame (a
    contiguous frame locks itself, the path the user gave).

    A lock file of its own (``nofollow``) also keeps, in its byte 8, whether a change is
    under way: found set when the lock is taken (``unfinished``), the last holder died or
    failed mid-change and may have left files behind for this one to sweep."""

    def __init__(self, path: Path, timeout: float = LOCK_TIMEOUT, *, nofollow: bool = False):
        self.path = path
        self.timeout = timeout
        self.nofollow = nofollow
        self.unfinished = False
        self._queue = _turns.queue_path(path)
        self._depth = threading.local()  # holds of the thread that has the lock
        self._fd = -1
        self._turn: _turns.Turn | None = None

    @contextlib.contextmanager
    def hold(self):
        depth = getattr(self._depth, "n", 0)
        if depth == 0:
            self._acquire()
        self._depth.n = depth + 1
        done = False
        try:
            yield
            done = True
        finally:
            self._depth.n -= 1
            if self._depth.n == 0:
                self._release(done)

    def _acquire(self) -> None:
        fd = _files.open_lock(self.path, nofollow=self.nofollow)
        try:
            turn = _turns.take(fd, self.path, self._queue, self.timeout)
        except BaseException:
            os.close(fd)
            raise
        if self.nofollow:
            try:  # (a lock file of an older b2store has no byte 8: unknown, so unfinished)
                self.unfinished = os.pread(fd, 1, 8) != b"\0"
                os.pwrite(fd, b"\1", 8)
            except BaseException:
                self._fd, self._turn = fd, turn
                self._release(False)
                raise
        self._fd, self._turn = fd, turn

    def _release(self, done: bool) -> None:
        """Let go of the lock, then of this writer's place in the queue (the next one looks
        for the lock only once that place is gone, so it finds the lock free)."""
        fd, self._fd = self._fd, -1
        turn, self._turn = self._turn, None
        try:
            if done and self.nofollow:
                os.pwrite(fd, b"\0", 8)  # the change is over
        finally:
            try:
                _platform.unlock(fd)
                os.close(fd)
            finally:
                if turn is not None:
                    turn.leave()

    def close(self) -> None:
        """The handle closes: the queue beside the lock goes if no one waits in it."""
        _turns.tidy(self._queue)

    def next_id(self) -> int:
        """The high-water mark of chunk-file ids kept in the lock file (0 if none yet)."""
        data = os.pread(self._fd, 8, 0)
        return int.from_bytes(data, "little") if len(data) == 8 else 0

    def set_next_id(self, value: int) -> None:
        os.pwrite(self._fd, value.to_bytes(8, "little"), 0)
