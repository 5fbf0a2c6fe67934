"""Platform specifics behind one small interface: an exclusive, non-blocking lock on an open
file (``flock`` on POSIX, ``msvcrt.locking`` on Windows) and who holds it where the system
says (Linux), whether a pid runs, and renames in one step that swap two paths or refuse to
replace one (Linux's ``renameat2``), so ``import b2store`` works anywhere."""

from __future__ import annotations

import os

__all__ = ["try_lock", "unlock", "lock_holder", "pid_alive", "exchange", "rename_new"]

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None
    import msvcrt


def try_lock(fd: int, *, shared: bool = False) -> bool:
    """Take the exclusive lock on ``fd``'s file (``shared``: the lock readers share), or return
    False at once if another holder has it.

    Each ``os.open`` is its own holder, so two handles in one process exclude each other too.
    (``msvcrt`` has no shared lock: on Windows ``shared`` is exclusive too.)
    """
    try:
        if fcntl is not None:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
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


def lock_holder(fd: int) -> int | None:
    """The pid of the process holding the ``flock`` on ``fd``'s file, where the system lists
    its locks (Linux's ``/proc/locks``); None when unknown. For error messages only: the pid
    is the one that took the lock, as the kernel recorded it."""
    try:
        st = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    # "1: FLOCK  ADVISORY  WRITE 4754 fe:00:2157151 0 EOF" (waiters have "->" after the id)
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == where:
            try:
                return int(fields[4])
            except ValueError:
                return None
    return None


def pid_alive(pid: int | None) -> bool:
    """Whether ``pid`` is a running process on this machine (another user's counts; True
    when there is no telling)."""
    if pid is None or pid == os.getpid() or fcntl is None:
        return True  # (on Windows, os.kill's signal 0 is a Ctrl-C: never sent)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _renameat2():
    """Linux's ``renameat2``, or None where there is none."""
    import sys

    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None


_AT_FDCWD, _RENAME_NOREPLACE, _RENAME_EXCHANGE = -100, 1, 2


def exchange(a, b) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``), so a directory
    replaced this way is never missing, even to a process killed meanwhile; False where the
    system cannot (then nothing was changed)."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    return renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0


def rename_new(a, b) -> bool | None:
    """Rename ``a`` to ``b`` only if nothing is at ``b``, in one step (Linux
    ``renameat2(RENAME_NOREPLACE)``): True when done, False when something is at ``b``
    (nothing was changed), None where the system cannot say so in one step (another file
    system, another platform: the caller checks and renames)."""
    import ctypes
    import errno

    renameat2 = _renameat2()
    if renameat2 is None:
        return None
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        return False
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # (a file system without it)
        return None
    raise OSError(err, os.strerror(err), os.fspath(b))
