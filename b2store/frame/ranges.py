"""An object behind a URL read by byte ranges, the same way for every reader: its size, and
exactly the bytes asked for or an error naming the URL.

Every remote read of b2store comes here: a contiguous frame's source, a tree's files, the
Zarr store's byte ranges, a sparse frame's chunk objects. So a server that bends HTTP is met
the same way through ``b2store.open``, ``B2ndStore`` and the xarray engine:

- **No Content-Length** (the body ends when the connection closes): the size is the total
  of a one-byte range request's ``Content-Range``; a server that gives neither is refused,
  saying so (fsspec reported no size, which read as an empty file).
- **Range ignored** (200 and the whole object, whatever was asked): an object of at most
  :data:`WHOLE_ANSWER_BYTES` is read whole and the range cut from it; a larger one is
  refused at its first read, before its body is read (reading it would download the whole
  object for every range, each time). A ``206`` whose ``Content-Range`` starts elsewhere than
  asked, or a body longer than asked, is refused too: never other bytes for the ones asked.
- **A body that stalls** ends after the read timeout (:mod:`.remote`).

HTTP ranges are asked here, through fsspec's aiohttp session and its request options, so
that the status and headers are seen before the body is read (fsspec's ``cat_file`` reads
any body whole first); other filesystems answer through ``cat_file``, their length checked.
"""

from __future__ import annotations

import re
import sys

from ..errors import FormatError, RemoteError
from . import remote

__all__ = ["WHOLE_ANSWER_BYTES", "ObjectReplaced", "read", "stat"]

#: The largest object read whole where its server ignores Range requests.
WHOLE_ANSWER_BYTES = 64 << 10


class ObjectReplaced(FormatError):
    """A remote object was replaced since it was opened (its ETag changed)."""


def stat(url: str, fs, path: str) -> dict:
    """fsspec's ``info`` of ``path`` (a HEAD over HTTP), its ``"size"`` an int for an object
    whatever its server sends."""
    timeout = remote.read_timeout_of(fs)
    info = remote.attempts(url, remote.within(fs.info, timeout), (path,), timeout=timeout,
                           what="the request of its size")  # fmt: skip
    if info.get("type") == "directory" or info.get("size") is not None:
        return info
    if _is_http(fs):
        from fsspec.asyn import sync

        size = remote.attempts(
            url, sync, (fs.loop, _http_total, fs, path), timeout=timeout,
            what="the range request of its size",
        )  # fmt: skip
        return {**info, "size": size}
    raise RemoteError(url, None, "its filesystem gives no size for it")


def read(
    url: str, fs, path: str, start: int, stop: int, *, etag: str | None = None, exact=True
) -> bytes:
    """Bytes ``start:stop`` of the object ``path`` (``url`` names it in errors): exactly those
    (``exact``), or up to its end (a range past it comes back short). With ``etag``, only
    from that version of the object (``If-Match``, where the filesystem sends it: s3fs,
    obstore, HTTP); another version is :class:`ObjectReplaced`."""
    if stop <= start:
        return b""
    return remote.attempts(
        url, _fetch, (url, fs, path, start, stop, etag, exact),
        timeout=remote.read_timeout_of(fs), what=f"the range request of bytes {start}-{stop - 1}",
    )  # fmt: skip


def _fetch(url: str, fs, path: str, start: int, stop: int, etag, exact: bool) -> bytes:
    """One try of :func:`read`."""
    try:
        data = _ranged(fs, path, start, stop, etag)
    except Exception as exc:
        if etag and (remote.refused(exc) or getattr(exc, "status", None) == 412):
            # Replaced since it was opened: its index and block starts, read from the
            # version opened, would name other bytes of the new one.
            raise ObjectReplaced(
                "object", f"the version of {url} opened (ETag {etag})",
                "another one: it was replaced since; open it again",
            ) from None  # fmt: skip
        raise
    want = stop - start
    if len(data) > want:
        raise RemoteError(url, None, f"{len(data)} bytes came for the {want} at {start} asked")
    if exact and len(data) < want:  # inside the size the server gave: a body cut short
        raise remote.ShortBody(f"{len(data)} bytes of the {want} at {start}")
    return bytes(data)


def _ranged(fs, path: str, start: int, stop: int, etag: str | None) -> bytes:
    if _is_http(fs):
        from fsspec.asyn import sync

        return sync(fs.loop, _http_range, fs, path, start, stop, etag)
    kind = type(fs).__name__
    if kind == "S3FileSystem" and hasattr(fs, "_call_s3"):
        from fsspec.asyn import sync

        return sync(fs.loop, _s3_range, fs, path, start, stop, etag)
    if etag and kind == "ObstoreFileSystem":
        return fs.cat_file(path, start=start, end=stop, if_match=etag)
    return fs.cat_file(path, start=start, end=stop)


async def _s3_range(fs, path: str, start: int, stop: int, etag: str | None) -> bytes:
    """A ranged GetObject through s3fs (its request options kept), ``If-Match`` ``etag``."""
    import asyncio

    bucket, key, version = fs.split_path(path)
    condition = {"IfMatch": etag} if etag else {}
    if version:
        condition["VersionId"] = version
    ask = fs._call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{stop - 1}",
                      **condition)  # fmt: skip
    timeout = remote.read_timeout_of(fs)
    # The answer's headers within the read timeout: s3fs and botocore each try a request
    # that times out again (a server that never answers cost 25 read timeouts). The body
    # is read under botocore's own read timeout, a byte at a time apart.
    answer = await (ask if timeout is None else asyncio.wait_for(ask, timeout))
    try:
        return await answer["Body"].read()
    finally:
        answer["Body"].close()


# --- HTTP ---------------------------------------------------------------------------------------


def _is_http(fs) -> bool:
    http = sys.modules.get("fsspec.implementations.http")
    return http is not None and isinstance(fs, http.HTTPFileSystem)


def _request(fs, path: str, start: int, stop: int, etag: str | None = None):
    """fsspec's GET of ``path`` with its request options, for bytes ``start:stop``."""
    options = dict(fs.kwargs)
    headers = dict(options.pop("headers", None) or {})
    headers["Range"] = f"bytes={start}-{stop - 1}"
    # A range counts the bytes the server stores: a compressed answer would count others.
    headers["Accept-Encoding"] = "identity"
    if etag:
        headers["If-Match"] = etag
    return fs.encode_url(path), headers, options


async def _http_range(fs, path: str, start: int, stop: int, etag: str | None) -> bytes:
    session = await fs.set_session()
    url, headers, options = _request(fs, path, start, stop, etag)
    want = stop - start
    async with session.get(url, headers=headers, **options) as answer:
        _check_status(answer, path)
        if answer.status == 206:
            given = answer.headers.get("Content-Range", "")
            found = _content_range(given)
            if found is None or found[0] != start:
                raise RemoteError(
                    path, 206,
                    f"bytes {start}-{stop - 1} asked, the answer holds {given or 'no range'}",
                )  # fmt: skip
            data = await _at_most(answer, want)
            if len(data) > want:
                raise RemoteError(path, 206, f"more than the {want} bytes at {start} asked")
            return data
        # 200: the whole object. The answer to a range from 0 past its end; else a server
        # that ignores Range, read only where the object is small.
        most = max(WHOLE_ANSWER_BYTES, want if start == 0 else 0)
        length = answer.content_length
        if length is None or length <= most:
            whole = await _at_most(answer, most)
            if len(whole) <= most:
                return whole[start:stop]
            length = None
        raise _ignores_ranges(path, start, stop, length)


async def _http_total(fs, path: str) -> int:
    """The object's size from a one-byte range request's ``Content-Range`` (a server that
    sends no Content-Length)."""
    session = await fs.set_session()
    url, headers, options = _request(fs, path, 0, 1)
    async with session.get(url, headers=headers, **options) as answer:
        if answer.status == 416:  # an empty object: "bytes */0"
            found = re.fullmatch(r"bytes \*/(\d+)", answer.headers.get("Content-Range", ""))
            if found:
                return int(found[1])
        _check_status(answer, path)
        found = _content_range(answer.headers.get("Content-Range", ""))
        if answer.status != 206 or found is None or found[2] is None:
            how = "answered a range with the whole object" if answer.status == 200 else (
                f"sent the Content-Range {answer.headers.get('Content-Range')!r}"
            )  # fmt: skip
            raise RemoteError(
                path, answer.status,
                f"the server gives no size: no Content-Length, and it {how}; b2store reads "
                "remote files by byte ranges within their size (download it and open the file)",
            )  # fmt: skip
        return found[2]


def _check_status(answer, path: str) -> None:
    if answer.status == 404:
        raise FileNotFoundError(path)
    answer.raise_for_status()  # (aiohttp's ClientResponseError: remote.call names it)
    coding = answer.headers.get("Content-Encoding", "identity").lower()
    if coding not in ("", "identity"):
        raise RemoteError(
            path, answer.status,
            f"the server sent the range encoded ({coding}): its bytes are not the file's",
        )  # fmt: skip


async def _at_most(answer, most: int) -> bytes:
    """The body, or its first ``most + 1`` bytes where it is longer (never all of it)."""
    parts, got = [], 0
    while got <= most:
        part = await answer.content.read(most + 1 - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _content_range(value: str) -> tuple[int, int, int | None] | None:
    """``(first, last, total or None)`` of ``bytes first-last/total``."""
    found = re.fullmatch(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", value or "")
    if found is None:
        return None
    total = None if found[3] == "*" else int(found[3])
    return int(found[1]), int(found[2]), total


def _ignores_ranges(path: str, start: int, stop: int, size: int | None) -> RemoteError:
    whole = f"the whole object ({size} bytes)" if size is not None else "the whole object"
    return RemoteError(
        path, 200,
        f"the server ignores Range requests: it answered bytes {start}-{stop - 1} with {whole}. "
        f"b2store reads remote files by byte ranges and reads whole only objects of at most "
        f"{WHOLE_ANSWER_BYTES} bytes; download the file and open it, or open "
        f"'simplecache::{path}' (fsspec keeps a local copy)",
    )  # fmt: skip
