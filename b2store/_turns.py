"""Writers served in turn: a queue of ticket files beside a writer lock, so that a writer waits
only for the writers that came before it.

An OS lock taken by retrying lets the writer that lets go take it again at once, and so does
a blocking ``flock`` (Linux wakes every waiter and the first to run wins, most often the
writer that just let go): a writer in a tight loop kept a frame for seconds while another
waited. Here a writer that finds the lock held, or others waiting for it, joins the lock's
queue, the directory ``.NAME.b2store-queue`` beside the lock's file: it names a file there
by its ticket (one more than the highest there, so that later writers sort after it), its
pid and a random part, and holds an ``flock`` on that file while it waits and while it holds
the lock. It waits until no ticket ahead of its own is alive, then takes the OS lock, which
alone keeps writers apart: the queue only orders them, so a writer of an older b2store, or
one that cannot queue (a directory it may not add to, no ``flock``), still excludes the
others and is excluded. A writer lets go of the lock, then of its ticket, which becomes a
free file for the next writer to take (``free-RANDOM``: renaming a file costs less than
making one, and a queue forms and drains at every change of writers in tight loops). The
directory is made by the first writer that finds the lock taken, and removed by a writer's
handle closing when no one waits: a frame written by one writer at a time never has one.

Crash safety rests on the kernel letting go of a dead process's locks: a ticket whose lock
can be taken belongs to a writer that died (or has just left), and the next writer that
finds it ahead of itself frees it, so a writer killed while queued or holding never holds
up the others. A writer waits at most ``timeout`` seconds in all, then raises
:class:`~b2store.errors.WriterLockedError`, naming the lock's holder where the system says.
"""

from __future__ import annotations

import errno
import os
import random
import re
import stat
import time
import uuid
from pathlib import Path

from . import _platform
from .errors import FormatError, LinkError, WriterLockedError

__all__ = ["QUEUE_SUFFIX", "Turn", "queue_path", "take", "tidy"]

QUEUE_SUFFIX = ".b2store-queue"
# TICKET-PID-RANDOM, the ticket in fixed-width hex first, so that names sort in ticket order
# (writers that joined at the same moment may share a ticket: any order of those is fair).
_TICKET = re.compile(r"^[0-9a-f]{16}-(?P<pid>\d+)-[0-9a-f]{12}$")
_FREE = re.compile(r"^free-[0-9a-f]{12}$")
# Seconds between two looks at the writer ahead (or at the lock): doubled from the first to
# the last, and back to the first when the queue moves. The last bounds how long the lock
# may lie free before the next writer sees it (a small change takes 0.3 to 2 ms).
FIRST_POLL, LAST_POLL = 50e-6, 1e-3

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# A queue needs flock (a lock the kernel drops at death) and calls relative to the queue's
# open directory, so that nothing is made, renamed or removed through a link put in its place.
_CAN_QUEUE = (
    _platform.fcntl is not None
    and bool(_NOFOLLOW and _DIRECTORY)
    and {os.open, os.unlink, os.rename, os.stat} <= os.supports_dir_fd
    and os.listdir in os.supports_fd
)
# Errors that mean this writer cannot add to the queue's directory: it takes the lock
# without queuing (the change itself needs only the frame's file).
_CANNOT_QUEUE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}
_OPEN_OTHERS = os.O_RDONLY | _NONBLOCK | _NOFOLLOW | _CLOEXEC


class _NoQueue(Exception):
    """The queue's directory cannot be added to by this writer."""


def queue_path(lock_path) -> Path:
    """The queue directory of the lock on ``lock_path``, beside the file it names (links
    resolved, so that writers naming one frame through different links share a queue)."""
    real = Path(os.path.realpath(lock_path))
    name = real.name if real.name.startswith(".") else "." + real.name
    return real.parent / (name + QUEUE_SUFFIX)


def take(main_fd: int, path, queue: Path | None, timeout: float) -> Turn | None:
    """Take the OS lock on ``main_fd`` (the lock file ``path``) in turn with the writers in
    ``queue``. Returns this writer's place there, to :meth:`Turn.leave` once the lock is let
    go; None when it did not queue (no one waited and the lock was free, or it could not)."""
    deadline = time.monotonic() + timeout
    can_queue = queue is not None and _CAN_QUEUE
    if not (can_queue and _waiting(queue)) and _platform.try_lock(main_fd):
        return None  # free, and no one waits for it: no queue needed
    turn = Turn.join(queue) if can_queue else None
    try:
        if turn is not None:
            turn.wait_for_head(main_fd, path, deadline, timeout)
        _lock(main_fd, path, deadline, timeout)
    except BaseException:
        if turn is not None:
            turn.leave()
        raise
    return turn


def _waiting(queue: Path) -> bool:
    """Whether a writer may be waiting in ``queue``. (Something else in its place matters
    only to a writer that must queue: joining then says what is wrong with it.)"""
    try:
        return any(_TICKET.match(name) for name in os.listdir(queue))
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True  # (not to be listed: joining tells whether this writer may queue)


def _lock(fd: int, path, deadline: float, timeout: float) -> None:
    """The OS lock on ``fd``, retried while another holds it: a writer that did not queue
    (those in the queue let go of the lock before their ticket, so the next finds it free)."""
    delay = FIRST_POLL
    while not _platform.try_lock(fd):
        if time.monotonic() > deadline:
            raise WriterLockedError(path, _platform.lock_holder(fd), timeout)
        time.sleep(delay)
        delay = min(delay * 2, LAST_POLL)


class Turn:
    """A writer's place in a lock's queue: its ticket file, locked while it waits and holds."""

    def __init__(self, queue: Path, dir_fd: int, name: str, fd: int, seen: list[str]):
        self.queue = queue
        self.name = name
        self._dir_fd = dir_fd
        self._fd = fd
        self._seen: list[str] | None = seen  # the tickets listed when this one was taken

    @classmethod
    def join(cls, queue: Path) -> Turn | None:
        """A new ticket at the back of ``queue``; None when this writer cannot add to it."""
        for _ in range(1000):  # (again while the last to leave removes the directory)
            try:
                dir_fd = _open_queue(queue)
            except _NoQueue:
                return None
            if dir_fd < 0:
                continue
            try:
                turn = cls._ticket(queue, dir_fd)
            except _NoQueue:
                os.close(dir_fd)
                return None
            except BaseException:
                os.close(dir_fd)
                raise
            if turn is not None:
                return turn
            os.close(dir_fd)
        return None  # pragma: no cover - a directory made and removed a thousand times

    @classmethod
    def _ticket(cls, queue: Path, dir_fd: int) -> Turn | None:
        names = os.listdir(dir_fd)
        seen = sorted(name for name in names if _TICKET.match(name))
        ticket = int(seen[-1][:16], 16) + 1 if seen else 0
        name = f"{ticket:016x}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        slot, fd = _free_slot(dir_fd, [n for n in names if _FREE.match(n)])
        if fd < 0:
            slot = _free_name()
            flags = os.O_RDONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
            try:
                fd = os.open(slot, flags, 0o666, dir_fd=dir_fd)
            except (FileNotFoundError, FileExistsError):
                return None  # the directory was just removed (or a name drawn twice): again
            except OSError as exc:
                if exc.errno in _CANNOT_QUEUE:
                    raise _NoQueue from None
                raise
            if not _platform.try_lock(fd):  # another writer took it as a free file first
                os.close(fd)
                return None
        try:
            # Named a ticket only while locked: a ticket that can be locked is a dead one.
            os.rename(slot, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            # A writer kept from running between its look and its ticket would pass those
            # that came meanwhile: it takes a new ticket, behind them.
            for _ in range(100):
                seen = _tickets(dir_fd)
                if int(seen[-1][:16], 16) <= ticket:
                    break
                ticket = int(seen[-1][:16], 16) + 1
                new = f"{ticket:016x}{name[16:]}"
                os.rename(name, new, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                name = new
        except FileNotFoundError:
            os.close(fd)
            return None  # (freed by a handle closing, in the moment before the lock)
        except BaseException:
            os.close(fd)
            raise
        return cls(queue, dir_fd, name, fd, seen)

    def wait_for_head(self, main_fd: int, path, deadline: float, timeout: float) -> None:
        """Wait until no ticket ahead of this one is alive: this writer is next."""
        head, head_fd, delay = None, -1, FIRST_POLL
        try:
            while True:
                if head is None:
                    names, self._seen = self._seen, None
                    head, head_fd = self._first_alive(names or _tickets(self._dir_fd))
                    if head is None:
                        return
                    delay = FIRST_POLL  # the queue moved: look often again
                elif self._gone(head, head_fd):
                    if head_fd >= 0:
                        os.close(head_fd)
                    head, head_fd = None, -1
                    continue
                if time.monotonic() > deadline:
                    raise WriterLockedError(path, _platform.lock_holder(main_fd), timeout)
                time.sleep(delay)
                delay = min(delay * 2, LAST_POLL)
        finally:
            if head_fd >= 0:
                os.close(head_fd)

    def _first_alive(self, names: list[str]) -> tuple[str | None, int]:
        """The first ticket of ``names`` ahead of this one that a live writer holds, and its
        descriptor to watch it by (-1: a ticket this writer may not open, watched by its
        pid); the dead ones before it are freed. (None, -1): none is."""
        for name in names:
            if name >= self.name:
                break
            try:
                fd = os.open(name, _OPEN_OTHERS, dir_fd=self._dir_fd)
            except FileNotFoundError:
                continue  # it left meanwhile
            except PermissionError:  # (another user's, made under a strict umask)
                if not self._gone(name, -1):
                    return name, -1
                continue
            except OSError:
                _remove(name, self._dir_fd)  # a link or special file under a ticket's name
                continue
            if not self._gone(name, fd):
                return name, fd
            os.close(fd)
        return None, -1

    def _gone(self, name: str, fd: int) -> bool:
        """Whether the writer of ticket ``name`` has left or died: its lock can be taken
        (``fd`` -1: its pid runs no more, or the name is gone). A dead writer's ticket is
        freed for the next writer to take."""
        if fd >= 0:
            if not _platform.try_lock(fd):
                # Held: by its writer while the ticket keeps its name, else by a writer that
                # took it as a free file since (names are never used twice).
                return not _exists(name, self._dir_fd)
            # Locked here now: its writer left (and renamed it) or died (then it still has
            # its name, and is made a free file).
            _rename(name, _free_name(), self._dir_fd)
            return True
        if _platform.pid_alive(_pid_of(name)):
            return not _exists(name, self._dir_fd)
        _remove(name, self._dir_fd)
        return True

    def leave(self) -> None:
        """Out of the queue, the lock already let go: the ticket is renamed to a free file
        for the next writer before its lock goes (a writer watching it finds it gone)."""
        try:
            _rename(self.name, _free_name(), self._dir_fd)
        except OSError:
            pass  # (then it is a dead writer's ticket to the next: freed by it)
        finally:
            os.close(self._fd)
            os.close(self._dir_fd)


def tidy(queue: Path | None) -> None:
    """Remove ``queue`` (its free files, then the directory) if no writer waits in it: a
    writer's handle closing. A writer that joins meanwhile makes it again."""
    if queue is None or not _CAN_QUEUE:
        return
    try:
        dir_fd = os.open(queue, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return  # none (or not ours to tidy)
    try:
        names = os.listdir(dir_fd)
        if any(_TICKET.match(name) for name in names):
            return
        for name in names:
            if _FREE.match(name):
                _free_slot(dir_fd, [name], remove=True)
        os.rmdir(queue)
    except OSError:
        pass  # a writer came meanwhile, or a dead one's ticket waits for the next writer
    finally:
        os.close(dir_fd)


def _open_queue(queue: Path) -> int:
    """The queue's directory opened (made if missing), -1 if it was removed meanwhile; a
    link in its place is a LinkError, anything else there a FormatError."""
    try:
        os.mkdir(queue, 0o777)  # (the umask's mode, as the frame's own directory)
    except FileExistsError:
        pass
    except OSError as exc:
        if exc.errno in _CANNOT_QUEUE:
            raise _NoQueue from None
        raise
    try:
        return os.open(queue, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except FileNotFoundError:
        return -1
    except OSError as exc:
        if exc.errno in _CANNOT_QUEUE:
            raise _NoQueue from None
        try:
            mode = os.lstat(queue).st_mode
        except FileNotFoundError:
            return -1
        if stat.S_ISLNK(mode):
            raise LinkError(queue) from None
        if not stat.S_ISDIR(mode):
            kind = "a regular file" if stat.S_ISREG(mode) else f"a file of mode {mode:o}"
            raise FormatError("writer queue", f"a directory at {queue}", kind) from None
        raise


def _free_slot(dir_fd: int, names: list[str], *, remove: bool = False) -> tuple[str, int]:
    """One of the free files ``names`` locked for this writer, and its descriptor (``remove``:
    each one that can be locked removed instead); ("", -1) when none is free."""
    random.shuffle(names)  # (writers joining at once try different ones first)
    for name in names:
        try:
            fd = os.open(name, _OPEN_OTHERS, dir_fd=dir_fd)
        except OSError:
            continue
        try:
            # Locked, and still under that name (another writer may have taken it meanwhile).
            if _platform.try_lock(fd) and _same_file(fd, name, dir_fd):
                if not remove:
                    return name, fd
                _remove(name, dir_fd)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    return "", -1


def _free_name() -> str:
    return f"free-{uuid.uuid4().hex[:12]}"


def _tickets(dir_fd: int) -> list[str]:
    return sorted(name for name in os.listdir(dir_fd) if _TICKET.match(name))


def _same_file(fd: int, name: str, dir_fd: int) -> bool:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _rename(name: str, new: str, dir_fd: int) -> None:
    try:
        os.rename(name, new, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _remove(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _pid_of(name: str | None) -> int | None:
    m = _TICKET.match(name or "")
    return int(m["pid"]) if m else None
