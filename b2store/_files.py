"""Opening local files so that a hostile directory can neither redirect a write nor block a read.

One place for the rules every reader and writer of local files follows:

- *Readers* open with ``O_NONBLOCK`` and check with ``fstat`` that what they opened is a
  regular file before reading it: a FIFO, a socket or a device named like a member, a chunk
  file or ``embed.b2e`` would otherwise block the reader forever (or read a device). Such a
  file is a :class:`~b2store.errors.FormatError` naming its path.
- *Writers* never follow a symbolic link inside the frame or tree they write: a lock file is
  opened with ``O_NOFOLLOW``, a temporary is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``
  (never an existing file, never through a link), and every path a writer writes is walked
  component by component before its first byte (:func:`check_write`): once the walk is
  inside a tree (a ``.b2d``, a directory holding ``embed.b2e``, or the tree or frame the
  writer was given), a link is a :class:`~b2store.errors.LinkError` (a ``PermissionError``)
  naming it. The links on the way to a tree are the user's choice and are followed, as every
  tool follows them.
- *Temporaries* carry the writer's pid in their name (``.NAME.PID.RANDOM.tmp`` or ``.new``)
  and are locked (``flock``) by their writer while it lives, when they are files or
  directories b2store holds open. :func:`sweep` removes those of dead writers: a temporary
  is dead when the process its name names is not running on this machine *and* no one holds
  a lock on it. A live writer's temporary is never removed.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import uuid
from pathlib import Path

from . import _platform
from .errors import FormatError, LinkError

__all__ = [
    "open_regular",
    "read_regular",
    "check_regular",
    "open_writable",
    "open_lock",
    "create_temp",
    "make_temp_dir",
    "write_atomic",
    "naming",
    "check_write",
    "sweep",
    "temp_name",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)

# .NAME.PID.HEX.(tmp|new): what temp_name makes. NAME may itself hold dots.
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{12}\.(?:tmp|new)$")


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one :func:`temp_name` (or :func:`make_temp_dir`) makes."""
    return _TEMP.match(name) is not None


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return f"a file of mode {mode:o}"


def check_regular(fd: int, path) -> os.stat_result:
    """``fstat(fd)``, refusing anything but a regular file (the caller closes ``fd``)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise FormatError("file type", f"a regular file at {path}", _kind(st.st_mode))
    return st


def _checked(fd: int, path) -> int:
    try:
        check_regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _opened(path, flags: int, mode: int = 0o666, *, nofollow: bool) -> int:
    """``os.open`` with links refused (``nofollow``) and special files refused before they
    could block: the errors say which path and why."""
    try:
        return os.open(path, flags | _CLOEXEC | _BINARY | (_NOFOLLOW if nofollow else 0), mode)
    except OSError as exc:
        if nofollow and exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise LinkError(path) from None
        if exc.errno == errno.ENXIO:  # a socket (or a FIFO with no reader, for writes)
            try:
                kind = _kind(os.lstat(path).st_mode)
            except OSError:
                kind = "no openable file"
            raise FormatError("file type", f"a regular file at {path}", kind) from None
        if exc.errno == errno.EISDIR:
            raise FormatError("file type", f"a regular file at {path}", "a directory") from None
        raise


def open_regular(path, *, nofollow: bool = False) -> int:
    """A read-only descriptor on the regular file at ``path``: opened without blocking (a
    FIFO with no writer would block ``open`` forever), then checked with ``fstat``. With
    ``nofollow`` a symbolic link at ``path`` itself is refused too."""
    return _checked(_opened(path, os.O_RDONLY | _NONBLOCK, nofollow=nofollow), path)


def read_regular(path, *, nofollow: bool = False, max_nbytes: int | None = None) -> bytes:
    """The whole regular file at ``path`` (see :func:`open_regular`); ``max_nbytes`` refuses
    a larger one before reading it."""
    fd = _opened(path, os.O_RDONLY | _NONBLOCK, nofollow=nofollow)
    try:
        size = check_regular(fd, path).st_size
        if max_nbytes is not None and size > max_nbytes:
            raise FormatError("file size", f"at most {max_nbytes} bytes at {path}", size)
        data = os.pread(fd, size, 0)
        if len(data) == size:  # (as large as fstat said: one more read finds the end)
            more = os.pread(fd, 1 << 16, size)
            while more:  # it grew since
                data += more
                more = os.pread(fd, 1 << 16, len(data))
        return data
    finally:
        os.close(fd)


def open_writable(path, *, nofollow: bool = False) -> int:
    """A read-write descriptor on the existing regular file at ``path`` (see
    :func:`open_regular`)."""
    return _checked(_opened(path, os.O_RDWR | _NONBLOCK, nofollow=nofollow), path)


def open_lock(path, *, nofollow: bool = True) -> int:
    """A read-write descriptor on the lock file at ``path``, created if missing; a link at
    ``path`` (with ``nofollow``) or anything but a regular file there is refused."""
    fd = _opened(path, os.O_RDWR | os.O_CREAT | _NONBLOCK, 0o644, nofollow=nofollow)
    return _checked(fd, path)


# --- temporaries ---------------------------------------------------------------------------


def temp_name(directory, name: str, suffix: str = "tmp") -> Path:
    """``directory/.NAME.PID.RANDOM.SUFFIX``: a fresh name that says whose it is."""
    return Path(directory) / f".{name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.{suffix}"


def create_temp(directory, name: str, suffix: str = "tmp") -> tuple[int, Path]:
    """A new file beside what it will replace, open for writing and locked by this process
    until its descriptor is closed (so :func:`sweep` never takes it). ``O_EXCL`` with
    ``O_NOFOLLOW``: never an existing file, never through a link."""
    path = temp_name(directory, name, suffix)
    fd = _opened(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666, nofollow=True)
    _hold(fd)
    return fd, path


def make_temp_dir(directory, name: str, suffix: str = "tmp") -> tuple[int, Path]:
    """A new directory (``mkdir`` never follows a link), held open and locked by this process
    until the descriptor returned is closed."""
    path = temp_name(directory, name, suffix)
    os.mkdir(path, 0o777)  # the umask's mode, as a directory made by hand
    try:
        fd = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except BaseException:
        os.rmdir(path)
        raise
    _hold(fd)
    return fd, path


def _hold(fd: int) -> None:
    """Lock a new temporary for as long as its descriptor is open (POSIX ``flock``: it is
    new and no one else knows its name, so the lock is always taken)."""
    if _platform.fcntl is not None:
        _platform.try_lock(fd)


def write_atomic(path, data, sync: bool = True) -> None:
    """Replace ``path`` by a file holding ``data`` in one rename (a link at ``path`` is
    replaced, never written through); the temporary is removed on any error. ``sync``: the
    file reaches the disk before the rename (see :mod:`b2store._sync`)."""
    path = Path(path)
    fd, tmp = create_temp(path.parent, path.name)
    try:
        view, at = memoryview(data), 0
        while at < len(view):
            at += os.write(fd, view[at:])
        if sync:
            os.fsync(fd)
        os.replace(tmp, path)
    except OSError as exc:
        _unlink(tmp)
        named = naming(exc, path)  # write and fsync name no file: name the one being written
        if named is exc:
            raise
        raise named from exc
    except BaseException:
        _unlink(tmp)
        raise
    finally:
        os.close(fd)


def naming(exc: OSError, name, *, replace: bool = False) -> OSError:
    """``exc`` naming ``name``: where the system call gave no file (write, fsync), or, with
    ``replace``, in place of the one it gave (a temporary the user never named). The same
    class and errno; ``exc`` itself for b2store's own OSError subclasses and errno-less ones,
    which already say what they mean. The caller chains the original (``raise ... from``)."""
    if type(exc).__module__ != "builtins" or exc.errno is None:
        return exc
    if exc.filename is not None and not replace:
        return exc
    return type(exc)(exc.errno, exc.strerror, os.fspath(name))


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def sweep(directory, name: str | None = None) -> list[str]:
    """Remove dead writers' temporaries in ``directory`` (those of target ``name`` only, when
    given); returns the names removed. A temporary is dead when the pid in its name is not a
    running process and no one holds its lock; a live writer's is never touched."""
    removed = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return removed
    for entry in entries:
        if entry[:1] != "." or (name is not None and name not in entry):
            continue  # (cheap: most entries of a directory are not temporaries)
        m = _TEMP.match(entry)
        # (a temporary's name may be a temporary's name: a frame staged for ``name``)
        if m is None or (name is not None and not m["name"].lstrip(".").startswith(name)):
            continue
        if _platform.pid_alive(int(m["pid"])):
            continue
        path = os.path.join(directory, entry)
        try:
            st = os.lstat(path)
            flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
            if stat.S_ISDIR(st.st_mode):
                flags |= _DIRECTORY
            elif not stat.S_ISREG(st.st_mode):
                os.unlink(path)  # a link or special file under a temporary's name
                removed.append(entry)
                continue
            fd = os.open(path, flags)
        except OSError:
            continue
        try:
            if not _platform.try_lock(fd):
                continue  # held: its writer lives (another pid namespace, say)
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path, ignore_errors=True)
            else:
                _unlink(Path(path))
            removed.append(entry)
        finally:
            os.close(fd)
    return removed


# --- links inside a target -----------------------------------------------------------------

#: Links followed on the way to a target before the walk gives up, as the kernel's ELOOP.
_MAX_HOPS = 40
#: python-blosc2's mark of a tree (its embedded store), in every ``.b2d`` it writes.
_TREE_MARK = "embed.b2e"


def _is_tree(directory: str, name: str) -> bool:
    """Whether ``directory`` (reached by the name ``name``) is a tree's root: a ``.b2d`` by
    either name, or a directory holding python-blosc2's ``embed.b2e``."""
    return (
        name.endswith(".b2d")
        or directory.endswith(".b2d")
        or os.path.lexists(os.path.join(directory, _TREE_MARK))
    )


class _Walk:
    """One path walked as the kernel resolves it, component by component: links are
    followed until the walk enters a tree, and refused from there on (see
    :func:`check_write`). Paths are strings here: this runs before every write."""

    def __init__(self) -> None:
        self.hops = 0

    def step(self, at: str, tree: str | None, name: str, spelled: str | None):
        """``(where, tree)`` after the component ``name`` from the real directory ``at``, or
        None where the walk ends (``name`` is not there yet, or cannot be looked at: the
        write then makes it, or fails on it with the system's own error)."""
        if name in ("", "."):
            return at, tree
        if name == "..":
            # inside a tree ``at`` holds no link, so its parent is the real one
            return os.path.dirname(at), (None if tree == at else tree)
        nxt = os.path.join(at, name)
        try:
            st = os.lstat(nxt)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            if tree is not None:
                raise LinkError(spelled if spelled is not None else nxt)
            self.hops += 1
            if self.hops > _MAX_HOPS:
                return None  # (the write fails on it with ELOOP)
            target = Path(os.readlink(nxt))
            got = (target.anchor, tree) if target.is_absolute() else (at, tree)
            for part in target.parts[1:] if target.is_absolute() else target.parts:
                got = self.step(got[0], got[1], part, None)
                if got is None:
                    return None
            where, tree = got
            if tree is None and os.path.isdir(where) and _is_tree(where, name):
                tree = where  # a tree's root reached through a link: the user's choice
            return where, tree
        if tree is None and stat.S_ISDIR(st.st_mode) and _is_tree(nxt, name):
            tree = nxt
        return nxt, tree


def check_write(path, root=None) -> Path | None:
    """Refuse a write at ``path`` that would pass through a symbolic link inside a tree;
    return the root of the tree ``path`` lies in (None: in none).

    ``path`` is walked from the file system's root as the kernel resolves it. Links on the
    way to a tree are the user's (followed, as every tool follows them); once the walk is
    inside a tree (a ``.b2d`` directory, a directory holding ``embed.b2e``, or ``root``: the
    tree or frame the writer was given), every component below must be a real directory or
    file. A link there (to a file or a directory, out of the tree or inside it, dangling or
    not) is a :class:`LinkError` naming it, raised before the caller writes a byte: a link
    that points inside today can be pointed outside tomorrow, and one frame with two names
    would be replaced under one and written through under the other. Components not there
    yet end the walk: the writer makes them (``mkdir``, ``O_EXCL``, which follow no link).
    A ``..`` is resolved where the walk is, so it can only climb out of real directories.

    The check comes before the first byte; the files a writer then opens inside a tree are
    opened with ``O_NOFOLLOW`` (the caller's, from the tree returned), so a link planted
    between the check and the write is refused there too, for the file itself.
    """
    given = Path(os.fspath(path)).expanduser()
    given = given if given.is_absolute() else Path.cwd() / given  # (".." kept: walked)
    parts = given.parts
    enter = None  # how many components of ``given`` lead to ``root``
    if root is not None:
        base = Path(os.fspath(root)).expanduser()
        base = base if base.is_absolute() else Path.cwd() / base
        if parts[: len(base.parts)] != base.parts:
            raise ValueError(f"{path} is not inside {root}")
        enter = len(base.parts)
    walk = _Walk()
    got: tuple[str, str | None] = (given.anchor, None)
    spelled = given.anchor  # the path as the user gave it, to name a link in it
    for i in range(1, len(parts)):
        spelled = os.path.join(spelled, parts[i])
        nxt = walk.step(got[0], got[1], parts[i], spelled)
        if nxt is None:
            break
        got = nxt
        if got[1] is None and enter == i + 1:
            got = (got[0], got[0])  # the writer's own target: nothing below it is followed
    return None if got[1] is None else Path(got[1])
