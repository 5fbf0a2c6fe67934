"""Calls to an fsspec filesystem for a remote URL, with every failure an ``OSError`` that
names the URL and what the server said, and no call waiting on a silent server for long.

fsspec passes its HTTP client's own exceptions through (aiohttp's ``ClientResponseError``
for a 500, ``ClientPayloadError`` for a body cut short), and reports a size it could not get
for any reason (a 500 included) as ``FileNotFoundError``. Here a missing object (404, 410) is
:class:`FileNotFoundError`; a transient failure (a 5xx, 408, 429, a dropped connection, a
truncated body, a timeout) is tried again after ``RETRY_DELAYS`` and then raised as
:class:`~b2store.RemoteError` with the status; any other refusal (401, 403 ...) is a
:class:`~b2store.RemoteError` at once.

Every request to an HTTP(S) server or to S3 ends after ``read_timeout`` seconds without a
byte (a ``storage_options`` key of b2store's own, :data:`READ_TIMEOUT` by default), and a
call starts no new try once that long has passed since its first: a server that stops
sending costs one read timeout, not one per try (aiohttp's own limit was 300 s a request).
"""

from __future__ import annotations

import asyncio
import errno
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

from ..errors import RemoteError

__all__ = [
    "CONCURRENT_REQUESTS",
    "READ_TIMEOUT",
    "RETRY_DELAYS",
    "ShortBody",
    "call",
    "filesystem",
    "overlapped",
    "read_timeout_of",
    "refused",
]

#: Seconds a request may go without a byte from the server (connecting included) before it
#: is abandoned, unless ``storage_options["read_timeout"]`` says otherwise.
READ_TIMEOUT = 60.0

# The attribute holding the read timeout a filesystem made here was given (fsspec keeps one
# instance per set of options, and the options carry the timeout, so an instance has one).
# (Not a WeakKeyDictionary: fsspec's instances compare equal by their options, and one
# that died would take an equal live one's entry with it.)
_TIMEOUT_ATTRIBUTE = "_b2store_read_timeout"
_TIMED = ("http", "https", "s3", "s3a")  # the protocols whose clients take it


def filesystem(url: str, storage_options=None):
    """``(filesystem, path)`` for ``url``: fsspec's, or, where ``storage_options`` holds an
    obstore store (or a zarr ``ObjectStore``) under ``"store"``, that store's, with the URL's
    path as the key in it (see :mod:`b2store.frame.obstores`).

    ``storage_options["read_timeout"]`` (seconds, :data:`READ_TIMEOUT` when absent) is
    b2store's, never passed on as it is: HTTP(S) requests get it as aiohttp's socket read and
    connect timeouts, S3 requests as botocore's read timeout, unless the options set those
    themselves (``client_kwargs["timeout"]``, ``config_kwargs["read_timeout"]``)."""
    options = dict(storage_options or {})
    timeout = _check_timeout(options.pop("read_timeout", None))
    if options.get("store") is not None:
        from urllib.parse import urlparse

        from .obstores import ObstoreFileSystem

        if timeout is not None:
            # (obstore's client options are the store's, fixed when it was made)
            raise ValueError(
                "read_timeout does not apply to an obstore store: give the store its own "
                "client_options timeout"
            )
        return ObstoreFileSystem(options["store"]), urlparse(url).path.strip("/")
    import fsspec

    seconds = READ_TIMEOUT if timeout is None else timeout
    timed = False
    if "::" in url:  # a chain (simplecache::https://...): each layer's options by protocol
        for layer in url.split("::"):
            protocol = layer.split("://")[0] if "://" in layer else ""
            if protocol in _TIMED:
                inner = dict(options.get(protocol) or {})
                options[protocol] = _with_timeout(protocol, inner, seconds)
                timed = True
    elif url.split("://")[0] in _TIMED:
        options = _with_timeout(url.split("://")[0], options, seconds)
        timed = True
    fs, path = fsspec.core.url_to_fs(url, **options)
    if timed:  # (other filesystems keep their own timeouts: not named as this one)
        setattr(fs, _TIMEOUT_ATTRIBUTE, seconds)
    return fs, path


def _check_timeout(value) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"read_timeout must be a number of seconds, not {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"read_timeout must be a positive number of seconds, not {value!r}")
    return float(value)


def _with_timeout(protocol: str, options: dict, seconds: float) -> dict:
    """``options`` with the read timeout given the way ``protocol``'s client takes it."""
    options = dict(options)
    if protocol in ("http", "https"):
        client = dict(options.get("client_kwargs") or {})
        if "timeout" not in client:
            import aiohttp

            # No limit on a whole request (a large write keeps sending); silence is the
            # limit, on connecting and on every read of the socket.
            client["timeout"] = aiohttp.ClientTimeout(
                total=None, sock_connect=seconds, sock_read=seconds
            )
        options["client_kwargs"] = client
    elif protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("read_timeout", seconds)
        # (s3fs connects within 5 s by default, and botocore and s3fs retry a connection
        # that times out: not made longer here)
        config.setdefault("connect_timeout", min(seconds, 5.0))
        options["config_kwargs"] = config
    return options


def read_timeout_of(fs) -> float | None:
    """The read timeout ``fs`` was made with by :func:`filesystem`, or None (another's)."""
    return getattr(fs, _TIMEOUT_ATTRIBUTE, None)


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
    """``fn(*args, **kwargs)``, a request about ``url``, tried again on transient failures
    (none started once the read timeout of ``fn``'s filesystem has passed)."""
    timeout = read_timeout_of(_owner(fn))
    return attempts(url, within(fn, timeout), args, kwargs, timeout=timeout, what=_name(fn))


def _owner(fn: Callable):
    """The filesystem ``fn`` is a method of: a bound method's, or, for the sync methods of
    fsspec's async filesystems (functions wrapping the bound coroutine method), the
    wrapped one's."""
    owner = getattr(fn, "__self__", None)
    return owner if owner is not None else getattr(_coroutine_of(fn), "__self__", None)


def _coroutine_of(fn: Callable):
    inner = getattr(fn, "__wrapped__", None)
    return inner if asyncio.iscoroutinefunction(inner) else None


# Calls answered by a few headers or one small document: given the read timeout whole.
_ONE_ANSWER = ("info", "exists", "isdir", "isfile", "size")


def within(fn: Callable, timeout: float | None) -> Callable:
    """``fn``, or, for a call of an async filesystem that one small answer ends (its
    ``info`` and the like), that call given ``timeout`` seconds in all: s3fs and botocore
    each try again a request that timed out (25 requests for one answer that never
    starts), and fsspec's HTTP ``info`` tries a GET after a HEAD."""
    inner = _coroutine_of(fn)
    fs = getattr(inner, "__self__", None)
    if timeout is None or fs is None or inner.__name__.lstrip("_") not in _ONE_ANSWER:
        return fn

    def bounded(*args, **kwargs):
        from fsspec.asyn import sync

        return sync(fs.loop, inner, *args, timeout=timeout, **kwargs)

    bounded.__name__ = fn.__name__
    return bounded


def attempts(
    url: str, fn: Callable, args=(), kwargs=None, *, timeout: float | None, what: str
) -> object:
    """:func:`call`'s tries: none is started once ``timeout`` seconds (the read timeout the
    filesystem was given; None: one b2store did not set, and :data:`READ_TIMEOUT`) have
    passed since the first; a try that timed out is named by ``what``."""
    delays = tuple(RETRY_DELAYS)
    budget = READ_TIMEOUT if timeout is None else timeout
    began = time.monotonic()
    for attempt in range(len(delays) + 1):
        try:
            return fn(*args, **(kwargs or {}))
        except Exception as exc:
            kind, status, reason = _classify(exc)
            if kind is None:
                raise  # not a failure of the remote read (a bad argument, say)
            if kind == "missing":
                raise FileNotFoundError(
                    errno.ENOENT, f"no such object (HTTP {status or 404})", url
                ) from exc
            if _timed_out(exc):
                reason = f"{what} timed out: " + (
                    reason if timeout is None else f"no byte for {timeout:g} s (read_timeout)"
                )
            late = time.monotonic() - began + (delays[attempt] if attempt < len(delays) else 0)
            if kind == "transient" and attempt < len(delays) and late < budget:
                time.sleep(delays[attempt])
                continue
            raise RemoteError(url, status, reason, attempt + 1) from exc
    raise AssertionError("unreachable")  # pragma: no cover


def _name(fn: Callable) -> str:
    name = getattr(fn, "__name__", "").lstrip("_")
    return f"the request ({name})" if name and name != "<lambda>" else "the request"


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
    if module.startswith("botocore"):  # (s3fs passes these through as they are)
        return "Timeout" in name or name in _BOTOCORE_TRANSPORT
    return module.startswith("fsspec") and "Timeout" in name


_BOTOCORE_TRANSPORT = (
    "EndpointConnectionError",
    "ConnectionClosedError",
    "IncompleteReadError",  # (a body cut short, as aiobotocore reads it)
    "ResponseStreamingError",
)


def _timed_out(exc: BaseException | None) -> bool:
    """A request abandoned for silence: aiohttp's socket read or connect timeout, botocore's,
    fsspec's (or a failure they caused: fsspec's HTTP info makes them FileNotFoundError)."""
    while exc is not None:
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) or (
            type(exc).__module__.startswith(("botocore", "fsspec"))
            and "Timeout" in type(exc).__name__
        ):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
