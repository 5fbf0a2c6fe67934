"""The exception hierarchy every b2store module raises from."""

from __future__ import annotations

import errno
import os

__all__ = [
    "B2StoreError",
    "FormatError",
    "LinkError",
    "RemoteError",
    "TargetExistsError",
    "UnsupportedError",
    "WriterLockedError",
]


class B2StoreError(Exception):
    """Root of every error b2store raises on purpose."""

    def __reduce__(self):
        # Rebuilt from its message and attributes, not by calling __init__ again with the
        # message alone (which the subclasses' signatures refuse): an error raised in a
        # dask worker crosses back to the client pickled.
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(cls, args, state):
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class FormatError(B2StoreError, ValueError):
    """Bytes that break the Blosc format: truncated, corrupt or lying.

    The message names the field, the offset it was read at, what was expected and what was
    found, so that a user can tell a damaged file from a bug.

    Parameters
    ----------
    field
        The format field (as the spec names it) that is wrong, e.g. ``"cbytes"``.
    expected, found
        What the format requires and what the bytes hold.
    offset
        Byte offset of the field in the buffer being read, if it has one.
    """

    # Set where the error is in a chunk's own bytes (and which of its blocks), so that a
    # reader that knows which chunk of a frame it read can say so (chunk.decoder.in_chunk).
    of_chunk = False
    block: int | None = None

    def __init__(self, field: str, expected: str, found: object, offset: int | None = None):
        self.field = field
        self.expected = expected
        self.found = found
        self.offset = offset
        where = f" at offset {offset}" if offset is not None else ""
        super().__init__(f"{field}{where}: expected {expected}, found {found}")


class UnsupportedError(B2StoreError, NotImplementedError):
    """A valid Blosc feature that b2store does not implement (a plugin codec, say)."""

    def __init__(self, feature: str, ident: int | str):
        self.feature = feature
        self.ident = ident
        super().__init__(f"unsupported {feature} {ident!r}: b2store does not implement it")


class RemoteError(B2StoreError, OSError):
    """A read from a remote URL failed: the server answered with an error (a 5xx after the
    retries, or a refusal such as 403), the connection dropped, or the body came short.

    Not a :class:`FileNotFoundError`: a missing object (HTTP 404) raises that one instead.

    Parameters
    ----------
    url
        What was being read.
    status
        The HTTP status the server gave, or None when there was no answer (a dropped
        connection, a truncated body, a timeout).
    reason
        What went wrong, in words.
    tries
        How many times it was tried.
    """

    def __init__(self, url: str, status: int | None, reason: str, tries: int = 1):
        self.url = url
        self.status = status
        self.reason = reason
        self.tries = tries
        answer = f"HTTP {status}" if status is not None else "no complete answer"
        after = f" (tried {tries} times)" if tries > 1 else ""
        super().__init__(f"reading {url} failed: {answer}: {reason}{after}")


class LinkError(B2StoreError, PermissionError):
    """A symbolic link inside a frame or tree being written: b2store writes never follow
    one out of their target (the path a user gives may be a link; what is inside it may
    not)."""

    def __init__(self, path):
        self.path = str(path)
        super().__init__(
            f"{path} is a symbolic link: b2store does not write through links in a frame or tree"
        )


class ConflictError(B2StoreError, OSError):
    """Another writer published to a frame in an object store while this change was being
    made: the store refused the conditional write of the index (its ETag had changed), so
    nothing of this change is visible. Open the frame again and redo the change."""

    def __init__(self, url: str, what: str = "the index"):
        self.url = url
        super().__init__(
            f"{url}: another writer replaced {what} while this change was made; nothing of "
            "this change was published (open the frame again and redo it)"
        )


class WriterLockedError(B2StoreError):
    """A writer did not get a frame's (or tree's) writer lock within the lock timeout.

    Writers are served in turn: a writer waits for those ahead of it, each one's change;
    past the timeout (30 s), one of them hangs, or holds the lock for long changes.

    Parameters
    ----------
    path
        The file locked (the frame's file, or the lock file of a sparse frame or tree).
    holder
        The pid of the process holding the lock when the wait ended, where the system says.
    timeout
        The seconds waited.
    """

    def __init__(self, path, holder: int | None, timeout: float):
        self.path = str(path)
        self.holder = holder
        self.timeout = timeout
        if holder is None:
            who = ""
        elif holder == os.getpid():
            who = ", another handle or thread of this process"
        else:
            who = f", process {holder}"
        super().__init__(f"{path} is locked by another writer{who} (waited {timeout:g} s)")


class TargetExistsError(B2StoreError, FileExistsError):
    """A writer's target exists and its mode does not say to replace it.

    b2store's writers (``asarray``, ``zeros``, ``empty``, ``full``, ``frombuffer``,
    ``to_b2nd``) replace what is at their path only when told to (``mode="w"``), as
    ``to_zarr`` (its default mode ``"w-"``) and python-blosc2 (which refuses an existing
    ``urlpath`` unless ``mode="w"``) do: a default that replaces would drop a whole tree for a
    mistyped name without a word. A :class:`FileExistsError`, so ``except FileExistsError``
    (and ``except OSError``) catch it; ``errno`` is ``EEXIST`` and ``filename`` the path.

    Parameters
    ----------
    path
        The target that exists.
    mode
        The mode the write was given (or took by default).
    way_out
        What to pass instead, in words (the modes that would write there).
    """

    def __init__(self, path, mode: str, way_out: str = "pass mode='w' to replace it"):
        self.path = str(path)
        self.mode = mode
        self.way_out = way_out
        message = f"{path} exists and mode={mode!r} does not replace it: {way_out}"
        super().__init__(message)
        self.errno, self.strerror, self.filename = errno.EEXIST, message, self.path

    def __reduce__(self):
        return type(self), (self.path, self.mode, self.way_out)

    def __str__(self) -> str:  # the message alone, not OSError's "[Errno 17] ...: 'path'"
        return self.args[0]
