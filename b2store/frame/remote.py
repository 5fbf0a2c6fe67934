"""Calls to an fsspec filesystem for a remote URL, with every failure an ``OSError`` that
names the URL and what the server said.

fsspec passes its HTTP client's own exceptions through (aiohttp's ``ClientResponseError``
for a 500, ``ClientPayloadError`` for a body cut short), and reports a size it could not get
for any reason (a 500 included) as ``FileNotFoundError``. Here a missing object (404, 410) is
:class:`FileNotFoundError`; a transient failure (a 5xx, 408, 429, a dropped connection, a
truncated body, a timeout) is tried again after ``RETRY_DELAYS`` and then raised as
:class:`~b2store.RemoteError` with the status; any other refusal (401, 403 ...) is a
:class:`~b2store.RemoteError` at once.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

from ..errors import RemoteError

__all__ = [
    "CONCURRENT_REQUESTS",
    "RETRY_DELAYS",
    "ShortBody",
    "call",
    "filesystem",
    "overlapped",
    "refused",
]


def filesystem(url: str, storage_options=None):
    """``(filesystem, path)`` for ``url``: fsspec's, or, where ``storage_options`` holds an
    obstore store (or a zarr ``ObjectStore``) under ``"store"``, that store's, with the URL's
    path as the key in it (see :mod:`b2store.frame.obstores`)."""
    options = dict(storage_options or {})
    if options.get("store") is not None:
        from urllib.parse import urlparse

        from .obstores import ObstoreFileSystem

        return ObstoreFileSystem(options["store"]), urlparse(url).path.strip("/")
    import fsspec

    return fsspec.core.url_to_fs(url, **options)


#: Requests in flight at once when a read needs many chunks of a remote frame: each waits for
#: its round trip (tens of ms on an object store) beside the others, not after them.
CONCURRENT_REQUESTS = 16

# The pool, with its size and the process it was made in (a forked child makes its own: the
# parent's threads are not in it).
_pool: dict = {"executor": None, "size": 0, "pid": 0}
_pool_lock = threading.Lock()


def overlapped(fn: Callable, items, at_once: int | None = None) -> list:
    """``[fn(item) for item in items]``, up to :data:`CONCURRENT_REQUESTS` calls at once (in
    threads: fsspec's calls wait on its own event loop, so many threads can wait at once), or
    ``at_once`` where the caller's memory asks for fewer. The first failure is raised, after
    the calls in flight end."""
    items = list(items)
    at_once = min(CONCURRENT_REQUESTS, at_once or CONCURRENT_REQUESTS)
    if len(items) <= 1 or at_once <= 1:
        return [fn(item) for item in items]
    with _pool_lock:
        key = (CONCURRENT_REQUESTS, os.getpid())
        if _pool["executor"] is None or (_pool["size"], _pool["pid"]) != key:
            if _pool["executor"] is not None and _pool["pid"] == key[1]:
                _pool["executor"].shutdown(wait=False)
            _pool["executor"] = ThreadPoolExecutor(key[0], thread_name_prefix="b2store-requests")
            _pool["size"], _pool["pid"] = key
        pool = _pool["executor"]
    room = threading.BoundedSemaphore(at_once)
    jobs = []
    for item in items:
        room.acquire()
        jobs.append(pool.submit(fn, item))
        jobs[-1].add_done_callback(lambda _: room.release())
    wait(jobs)
    return [job.result() for job in jobs]


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` is the store refusing a conditional write (412 Precondition Failed,
    or 409 for a conditional write that raced another)."""
    while exc is not None:
        if isinstance(exc, FileExistsError):  # (s3fs's name for a refused If-None-Match)
            return True
        error = getattr(exc, "response", None)
        if isinstance(error, dict):
            code = error.get("Error", {}).get("Code")
            status = error.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (
                409,
                412,
            ):
                return True
        exc = exc.__cause__ or exc.__context__
    return False


#: Seconds to wait before each new try of a transient failure: three more tries, 0.7 s in
#: all. Set it (a tuple; ``()`` tries once) to change how hard remote reads insist.
RETRY_DELAYS: tuple[float, ...] = (0.1, 0.2, 0.4)

_TRANSIENT_STATUS = {408, 425, 429}


class ShortBody(ConnectionError):
    """A range answered with fewer bytes than asked, inside the object's size."""


_MISSING_STATUS = {404, 410}


def call(url: str, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)``, a request about ``url``, tried again on transient failures."""
    delays = tuple(RETRY_DELAYS)
    for attempt in range(len(delays) + 1):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            kind, status, reason = _classify(exc)
            if kind is None:
                raise  # not a failure of the remote read (a bad argument, say)
            if kind == "missing":
                raise FileNotFoundError(
                    errno.ENOENT, f"no such object (HTTP {status or 404})", url
                ) from exc
            if kind == "transient" and attempt < len(delays):
                time.sleep(delays[attempt])
                continue
            raise RemoteError(url, status, reason, attempt + 1) from exc
    raise AssertionError("unreachable")  # pragma: no cover


def _classify(exc: BaseException) -> tuple[str | None, int | None, str]:
    """``(kind, HTTP status or None, reason)``; kind is "missing", "transient", "refused",
    or None for an exception that is not about the remote read."""
    status = _status(exc)
    if isinstance(exc, FileNotFoundError):
        # fsspec's HTTP size and info turn any failure into FileNotFoundError; its cause
        # holds the real answer.
        cause = exc.__cause__ or exc.__context__
        if cause is not None and _status(cause) not in (None, *_MISSING_STATUS):
            return _classify(cause)
        if cause is not None and _status(cause) is None and _transport(cause):
            return _classify(cause)
        return "missing", status or 404, "no such object"
    if status is not None:
        reason = getattr(exc, "message", "") or type(exc).__name__
        if status in _MISSING_STATUS:
            return "missing", status, reason
        if status >= 500 or status in _TRANSIENT_STATUS:
            return "transient", status, reason
        return "refused", status, reason
    if _transport(exc):
        return "transient", None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return None, None, ""


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    if type(exc).__module__.startswith("aiohttp") and isinstance(status, int):
        return status
    code = getattr(getattr(exc, "response", None), "status_code", None)  # requests-like
    return code if isinstance(code, int) else None


def _transport(exc: BaseException) -> bool:
    """A dropped connection, a body cut short, a timeout: worth another try."""
    if isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError)):
        return True
    name = type(exc).__name__
    module = type(exc).__module__
    if module.startswith("aiohttp"):
        return name != "InvalidURL" and not name.startswith("ClientResponse")
    return module.startswith("fsspec") and "Timeout" in name
