"""Platform specifics behind one small interface: an exclusive, non-blocking lock on an open
file (``flock`` on POSIX, ``msvcrt.locking`` on Windows), so ``import b2store`` works anywhere."""

from __future__ import annotations

import os

__all__ = ["try_lock", "unlock", "exchange"]

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None
    import msvcrt


def try_lock(fd: int) -> bool:
    """Take the exclusive lock on ``fd``'s file, or return False at once if another holder has it.

    Each ``os.open`` is its own holder, so two handles in one process exclude each other too.
    """
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:  # pragma: no cover - Windows
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except (BlockingIOError, PermissionError):
        return False
    except OSError as exc:  # pragma: no cover - Windows reports contention as EDEADLOCK/EACCES
        if fcntl is None:
            return False
        raise exc
    return True


def unlock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:  # pragma: no cover - Windows
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


def exchange(a, b) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``), so a directory
    replaced this way is never missing, even to a process killed meanwhile; False where the
    system cannot (then nothing was changed)."""
    import sys

    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0
