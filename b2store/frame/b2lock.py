"""python-blosc2's ``.b2lock`` sidecar, taken part in: the lock its handles share when
locking is on (``locking=True``, or the ``BLOSC_LOCKING`` environment variable), so a b2store
process and a python-blosc2 process never interleave a change to one container.

The protocol is c-blosc2's (``blosc/frame.c``, ``frame_lock``): a file ``<frame>.b2lock``
beside a contiguous frame, or ``<dir>/.b2lock`` inside a sparse frame's directory; readers
hold an ``flock`` shared, writers exclusive, for each operation; bytes 8-15 hold a generation
counter (a little-endian uint64, read as 0 while the file is shorter) that every exclusive
holder bumps as it takes the lock, before it changes anything, and that every holder
compares with the last value its handle saw: another value means another handle may have
changed the container, so its view (header, index, trailer) is read again.

b2store takes part when the sidecar exists (some python-blosc2 handle uses locking: ignoring
it would let the two interleave), and when asked (``locking=True``, or ``BLOSC_LOCKING``
set to anything but ``""`` or ``"0"``, as c-blosc2 reads it), then creating the sidecar as
c-blosc2 does. Its writers take the sidecar after their own writer lock
(:mod:`b2store.frame.lock`): python-blosc2 never takes b2store's lock, so no cycle is
possible. The lock is advisory and local: not for network file systems.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from pathlib import Path

from .. import _files, _platform
from ..errors import WriterLockedError

__all__ = ["SUFFIX", "GENERATION_AT", "Sidecar", "env_locking", "sidecar_path"]

SUFFIX = ".b2lock"
# c-blosc2's FRAME_LOCK_SEQ_OFFSET: past the byte range Windows' LockFileEx locks (byte 0).
GENERATION_AT = 8

# Threads of this process holding a sidecar now: (thread, sidecar path) -> [depth, exclusive].
# A read nested in a change of the same thread (an array's read-modify-write) must not take
# the sidecar again: a second descriptor's shared flock would wait for the first's exclusive.
_HELD: dict[tuple[int, str], list] = {}
_HELD_LOCK = threading.Lock()


def env_locking() -> bool:
    """Whether ``BLOSC_LOCKING`` asks for locking: set, not empty and not ``"0"`` (c-blosc2's
    ``frame_locking_requested``)."""
    value = os.environ.get("BLOSC_LOCKING")
    return value is not None and value not in ("", "0")


def sidecar_path(frame_path, sparse: bool) -> Path:
    """The sidecar of a frame: inside a sparse frame's directory, beside a contiguous one."""
    frame_path = Path(frame_path)
    if sparse:
        return frame_path / SUFFIX
    return frame_path.with_name(frame_path.name + SUFFIX)


class Sidecar:
    """One handle's part in a frame's ``.b2lock`` protocol (see the module docstring).

    ``locking``: True takes part always (creating the sidecar), None when the sidecar exists
    or ``BLOSC_LOCKING`` asks, False only when the sidecar exists (python-blosc2's writers
    rely on it). ``writable``: whether this handle writes (a writer never opens the sidecar
    through a symbolic link: it writes to it)."""

    def __init__(self, path: Path, locking: bool | None, writable: bool, timeout: float):
        self.path = Path(path)
        self.create = bool(locking) or (locking is None and env_locking())
        self.writable = writable
        self.timeout = timeout
        self.generation: int | None = None  # the last value this handle saw (None: none yet)
        self._key = os.path.realpath(self.path)  # (one key for every name of one file)

    def wanted(self) -> bool:
        """Whether b2store takes part now: asked to, or the sidecar exists (told without an
        exception: the common case, no sidecar, costs one ``access`` a read)."""
        return self.create or os.access(self.path, os.F_OK)

    @contextlib.contextmanager
    def hold_exclusive(self):
        """Hold the sidecar exclusive for one change, bumping the generation; yields whether
        it had moved since this handle last held it (another handle changed the frame: its
        view is stale; on the first hold, always). Nested in a hold of the same thread, or
        where b2store takes no part: nothing more is held, and False is yielded."""
        with self._hold(True) as generation:
            if generation is None:
                yield False
                return
            moved = self.generation != generation - 1
            self.generation = generation  # (one change at a time: b2store's own lock)
            yield moved

    def hold_shared(self):
        """Hold the sidecar shared for one read; yields the generation it holds (None where
        nested or where b2store takes no part). The caller compares it with
        :attr:`generation` and, once its view is read again, sets :attr:`generation`:
        readers hold the lock together, so only the one that reloads may say it is done."""
        return self._hold(False)

    @contextlib.contextmanager
    def _hold(self, exclusive: bool):
        key = (threading.get_ident(), self._key)
        with _HELD_LOCK:
            held = _HELD.get(key)
            if held is not None:
                if exclusive and not held[1]:  # (b2store never writes inside a read)
                    raise RuntimeError(f"{self.path}: a change inside a read of this thread")
                held[0] += 1
        if held is not None:
            try:
                yield None
            finally:
                with _HELD_LOCK:
                    held[0] -= 1
            return
        fd = self._open()
        if fd is None:
            yield None
            return
        try:
            self._take(fd, exclusive)
            data = os.pread(fd, 8, GENERATION_AT)
            generation = int.from_bytes(data, "little") if len(data) == 8 else 0
            if exclusive:
                generation = (generation + 1) & 0xFFFFFFFFFFFFFFFF
                os.pwrite(fd, generation.to_bytes(8, "little"), GENERATION_AT)
            with _HELD_LOCK:
                _HELD[key] = [1, exclusive]
            try:
                yield generation
            finally:
                with _HELD_LOCK:
                    del _HELD[key]
        finally:
            os.close(fd)  # (closing the descriptor lets go of its flock)

    def _open(self) -> int | None:
        """A descriptor on the sidecar, or None where b2store takes no part: no sidecar and
        none asked for (or none can be made: a read-only place has no writer to exclude)."""
        path = self.path
        if self.writable:
            try:
                if self.create:
                    return _files.open_lock(path, nofollow=True)
                return _files.open_writable(path, nofollow=True)
            except FileNotFoundError:
                return None
        try:  # a reader: created where asked and allowed, else only opened
            if self.create:
                try:
                    return _files.open_lock(path, nofollow=False)
                except PermissionError:
                    pass
                except OSError as exc:
                    if exc.errno != errno.EROFS:
                        raise
            return _files.open_regular(path)
        except FileNotFoundError:
            return None

    def _take(self, fd: int, exclusive: bool) -> None:
        """``flock`` ``fd``, waiting up to the timeout (then ``WriterLockedError`` naming the
        holder). The wait is a blocking ``flock`` (python-blosc2's writers block in one: a
        waiter that polled would rarely find the lock free between their holds), made in a
        thread on a duplicate of ``fd``, so that the wait can end: a lock the thread takes
        after the caller gave up is let go at once."""
        if _platform.try_lock(fd, shared=not exclusive):
            return
        if _platform.fcntl is None:  # pragma: no cover - Windows: polled
            deadline = time.monotonic() + self.timeout
            while not _platform.try_lock(fd, shared=not exclusive):
                if time.monotonic() >= deadline:
                    raise WriterLockedError(self.path, None, self.timeout)
                time.sleep(0.001)
            return
        waiter = _Waiter(os.dup(fd), exclusive)
        if not waiter.wait(self.timeout):
            raise WriterLockedError(self.path, _platform.lock_holder(fd), self.timeout)


class _Waiter:
    """A blocking ``flock`` in a thread of its own, on a duplicate descriptor (the lock is
    the open file's, shared by both descriptors); see :meth:`Sidecar._take`."""

    def __init__(self, fd: int, exclusive: bool):
        self._fd = fd
        self._op = _platform.fcntl.LOCK_EX if exclusive else _platform.fcntl.LOCK_SH
        self._mutex = threading.Lock()
        self._done = threading.Event()
        self._taken = self._abandoned = False
        threading.Thread(target=self._run, name="b2store-b2lock", daemon=True).start()

    def _run(self) -> None:
        try:
            _platform.fcntl.flock(self._fd, self._op)
            taken = True
        except OSError:
            taken = False
        with self._mutex:
            if taken and self._abandoned:
                with contextlib.suppress(OSError):
                    _platform.fcntl.flock(self._fd, _platform.fcntl.LOCK_UN)
            self._taken = taken and not self._abandoned
            os.close(self._fd)  # (the caller's descriptor keeps the lock it took)
        self._done.set()

    def wait(self, timeout: float) -> bool:
        self._done.wait(timeout)
        with self._mutex:
            if not self._done.is_set() and not self._taken:
                self._abandoned = True
            return self._taken
