"""When b2store's writes are forced to the disk (``fsync``): the one setting every writer reads.

A write is in the kernel once it returns: a process killed at any moment loses nothing it
wrote, and the commit protocol (see :mod:`b2store.frame.publishing`) keeps every frame readable
whichever the setting. What ``fsync`` adds is surviving a power cut or a kernel crash, at the
price of waiting for the disk:

- ``"commit"`` (the default): every change is on the disk when it returns. A contiguous
  frame's new bytes are synced before the header write that publishes them, then the header;
  a sparse frame's files each before the rename that publishes them. A power cut leaves the
  last change that returned, or the one in flight.
- ``"close"``: nothing is synced while a frame is written; closing it (``close()``, the end of
  a ``with`` block, the end of ``asarray`` or ``to_b2nd``) syncs everything it wrote. After
  the close, as durable as ``"commit"``; a power cut before it may leave the frame as it was
  at any earlier moment, or unreadable.
- ``"none"``: never; the operating system writes back when it chooses (python-blosc2 and
  c-blosc2 behave so). A power cut may leave any frame written in the last seconds
  unreadable.

Set it for the process with :func:`set_sync` or the ``B2STORE_SYNC`` environment variable;
a frame takes the setting in force when it is opened for writing.

Frames built where no reader looks, and published whole by a rename once closed (a new
Dataset ``to_b2nd`` builds beside its target), are written inside :func:`staged`: there
``"commit"`` acts as ``"close"``, as no half-built frame is ever seen, and each file is
synced once when it is closed, before the rename, instead of around every change.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["SYNC_MODES", "set_sync", "sync_mode"]

SYNC_MODES = ("commit", "close", "none")
ENV = "B2STORE_SYNC"
_chosen: dict[str, str | None] = {"mode": None}
_staged: ContextVar[bool] = ContextVar("b2store_staged", default=False)


def set_sync(mode: str | None) -> None:
    """When writes reach the disk: ``"commit"``, ``"close"`` or ``"none"`` (see
    :mod:`b2store._sync`); None goes back to ``B2STORE_SYNC`` or the default, ``"commit"``."""
    if mode is not None and mode not in SYNC_MODES:
        raise ValueError(f"sync must be one of {', '.join(SYNC_MODES)} (or None), not {mode!r}")
    _chosen["mode"] = mode


def sync_mode() -> str:
    """The setting in force: :func:`set_sync`'s, else ``B2STORE_SYNC``'s, else ``"commit"``."""
    mode = _chosen["mode"] or os.environ.get(ENV) or "commit"
    if mode not in SYNC_MODES:
        raise ValueError(f"{ENV} must be one of {', '.join(SYNC_MODES)}, not {mode!r}")
    if mode == "commit" and _staged.get():
        return "close"
    return mode


@contextmanager
def staged() -> Iterator[None]:
    """Frames opened for writing inside (in this thread or task) are being built under a
    name no reader opens and are closed before they are renamed into place: ``"commit"``
    syncs each of them once, at its close, as ``"close"`` does (see the module's notes)."""
    token = _staged.set(True)
    try:
        yield
    finally:
        _staged.reset(token)


def sync_path(path) -> None:
    """Force a file already written and closed to the disk (``"close"`` syncs so)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
