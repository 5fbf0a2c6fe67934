"""A sparse frame in an object store: the index object ``chunks.b2frame`` and one
``%08X.chunk`` object per chunk under one prefix (``s3://bucket/x.b2nd/``), read and written
by requests.

An object store has no rename, no append and no lock. So a change writes its new chunk
objects first, under ids that no index names yet, and the index object last, in one PUT: a
reader sees the old index or the new one, each naming only chunks that are there, and a
writer killed before its index PUT leaves the old state (and chunk objects nobody names).
Where the store takes conditional writes (S3 through s3fs, with a botocore that knows them),
a chunk object is written only where none is (``If-None-Match: *``) and the index only over
the version this writer read (``If-Match`` its ETag): two writers never overwrite each
other's chunks or index silently; the one that loses gets :class:`~b2store.ConflictError`.
Elsewhere the last index written wins, as on a local filesystem without locks, and each
change lists the chunk objects to give only ids past them (an id an older index names is
never given again, which If-None-Match ensures where there is one).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import threading
from collections.abc import Iterable

from ..errors import ConflictError, FormatError, TargetExistsError
from ..limits import Limits, resolve
from . import publishing, ranges, remote
from .backend import INDEX_NAME, Backend
from .header import FrameHeader
from .sources import FsspecSource, MemorySource, ObjectReplaced
from .sparse import SparseLayout, chunk_file_name, whole_chunk
from .state import read_header, read_state

__all__ = [
    "RemoteSparseFrame",
    "conditional_writes",
    "drop_sparse",
    "fill_new",
    "put_chunk",
    "put_chunks",
]

_WHOLE = 1 << 40  # a range end past any chunk object's
_INDEX_TRIES = 10  # reads of an index that writers keep replacing under the reader
_INDEX_HEADROOM = 64 << 10  # an index's fixed parts: header fields, chunk and trailer headers


def conditional_writes(fs) -> bool:
    """Whether ``fs`` sends S3's ``If-Match`` / ``If-None-Match`` on a PUT: s3fs with a
    botocore whose PutObject knows them (1.35.70 and newer: every stack the remote extra
    admits), or an obstore store's (its put modes, :mod:`b2store.frame.obstores`)."""
    if getattr(fs, "conditional_writes", False) is True:
        return True
    if "s3" not in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
        return False
    return _botocore_sends_conditions()


@functools.cache
def _botocore_sends_conditions() -> bool:
    # (asked once: botocore loads its S3 model, tens of ms, to answer)
    try:
        import botocore.session

        model = botocore.session.get_session().get_service_model("s3")
        members = model.operation_model("PutObject").input_shape.members
    except Exception:  # pragma: no cover - no botocore model to ask
        return False
    return "IfMatch" in members and "IfNoneMatch" in members


class RemoteSparseFrame(SparseLayout):
    """``chunks.b2frame`` and ``%08X.chunk`` objects under the prefix ``url``."""

    remote = True

    def __init__(
        self,
        url: str,
        storage_options: dict | None = None,
        writable: bool = False,
        limits: Limits | None = None,
    ):
        self._setup(url, storage_options, writable)
        self._limits = limits
        try:
            self._index, self._etag, self._frame_len = self._index_now()
        except (FileNotFoundError, IsADirectoryError):
            raise FormatError(
                INDEX_NAME, f"a sparse frame's index object under {self.url}", "none"
            ) from None

    def _setup(self, url: str, storage_options, writable: bool) -> None:
        self.url = url.rstrip("/")
        self.name = self.url
        self.storage_options = dict(storage_options or {})
        self.writable = writable
        self._fs, root = remote.filesystem(self.url, self.storage_options)
        self._root = root.rstrip("/")
        self._conditional = writable and conditional_writes(self._fs)
        self._etag = None
        self._next_id = 0
        self._replaced: list[int] = []  # the ids of a frame this new one replaces
        self._replaced_object = False  # a contiguous frame (one object) this one replaces
        self._stored: list[int] = []  # chunk objects of the change under way
        self._depth = 0
        self._thread_lock = threading.RLock()
        self._limits: Limits | None = None

    @classmethod
    def new(
        cls, url: str, frame: bytes, storage_options: dict | None = None, *, exclusive: bool
    ) -> RemoteSparseFrame:
        """A new frame at ``url`` whose index is ``frame`` (an empty sparse frame), written
        with its first change: until then nothing is written, and a frame already there
        stays readable. Its chunk objects get ids past the old frame's, whose objects go
        once the new index is in place. ``exclusive``: refuse when a frame is there."""
        self = cls.__new__(cls)
        self._setup(url, storage_options, True)
        try:
            old = cls(self.url, self.storage_options)
        except FormatError:
            old = None
            # A contiguous frame there, one object of the same name (which readers would
            # find first): it goes once the new index is in place.
            try:
                found = remote.call(self.url, self._fs.info, self._root)
            except FileNotFoundError:
                found = {}
            self._replaced_object = found.get("type") == "file"
        if exclusive and (old is not None or self._replaced_object):
            raise TargetExistsError(self.url, "x")
        if old is not None:
            # The ids of its chunk objects: its index, read as a reader reads it.
            try:
                offsets = read_state(old, read_header(old)).offsets
            finally:
                old.close()
            self._replaced = sorted({int(e) for e in offsets if e >= 0})
            self._etag = old._etag
            self._next_id = self._replaced[-1] + 1 if self._replaced else 0
        self._past_stored_ids()
        self._index = MemorySource(frame)
        self._frame_len = len(frame)
        return self

    def _join(self, name: str) -> str:
        return f"{self.url}/{name}"

    def _key(self, name: str) -> str:
        return f"{self._root}/{name}"

    # --- reading ---------------------------------------------------------------------------

    def chunk_name(self, chunk_id: int) -> str:
        return chunk_file_name(chunk_id)

    def _get(self, name: str, start: int, stop: int) -> bytes:
        url = self._join(name)
        try:
            return ranges.read(url, self._fs, self._key(name), start, stop, exact=False)
        except FileNotFoundError:
            raise FormatError("chunk object", f"{name} under {self.url}", "none") from None

    def chunk_reader(self, entry: int, header: FrameHeader, field: str = "chunk offset"):
        name = self.chunk_name(entry)

        def read(offset: int, size: int) -> bytes:
            # (No size asked first: that would be a request more. A range past the object's
            # end comes back short, and the short bytes fail the checks of what was read.)
            try:
                return self._get(name, offset, offset + size)
            except OSError as exc:
                if getattr(exc, "errno", None) == errno.EINVAL:  # 416: starts past the end
                    raise FormatError(
                        "chunk object", f"{size} bytes at {offset} of {name}", "fewer"
                    ) from None
                raise

        return read, None

    def chunk_span(
        self, entry: int, header: FrameHeader, field: str = "chunk offset"
    ) -> tuple[str, int, int]:
        name = self.chunk_name(entry)
        url = self._join(name)
        try:
            size = int(ranges.stat(url, self._fs, self._key(name))["size"])
        except FileNotFoundError:
            raise FormatError("chunk object", f"{name} under {self.url}", "none") from None
        return url, 0, size

    def read_chunk(
        self, entry: int, header: FrameHeader, field: str = "chunk offset", span: int = 0
    ) -> bytes:
        name = self.chunk_name(entry)
        # The whole object in one GET: a range from 0 past any end (without one, s3fs asks
        # for the size first, a request more).
        return whole_chunk(self._get(name, 0, _WHOLE), name, "chunk object")

    def _index_now(self, unless: str | None = None):
        """The index object as it is now: ``(its bytes in memory, ETag, size)``, read by a
        HEAD and one GET of the version it named (looked at again where another writer
        replaced it between the two); None when its ETag is still ``unless``."""
        # The most an index object can hold that the limits admit: a header (its
        # metalayers), the offsets of max_nchunks chunks, a trailer (the vlmeta). Past it,
        # refused before it is read (a hostile object would otherwise be read whole).
        lim = resolve(self._limits)
        most = lim.max_metalayer_nbytes + 8 * lim.max_nchunks + 2 * lim.max_vlmeta_nbytes
        most += _INDEX_HEADROOM
        for _ in range(_INDEX_TRIES):
            source = FsspecSource(self._join(INDEX_NAME), self.storage_options)
            if unless is not None and source.etag == unless:
                return None
            if source.size > most:
                raise FormatError(
                    INDEX_NAME, f"an index object of at most {most} bytes (the limits)", source.size
                )
            try:
                data = source.read(0, source.size)
            except ObjectReplaced:
                continue
            return MemorySource(data), source.etag, source.size
        raise FormatError(
            INDEX_NAME, "an index that stays the same while it is read", "writers kept replacing it"
        )

    def refresh(self) -> bool:
        if self.writable:
            return False
        try:
            fresh = self._index_now(unless=self._etag)
        except FileNotFoundError:
            return False
        if fresh is None:
            return False
        self._index, self._etag, self._frame_len = fresh
        return True

    # --- writing ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self):
        # No lock in an object store between processes: the index is written with If-Match
        # (where the store takes it), so a change made from a stale index is refused, not
        # lost. Threads of this process sharing the handle take turns (their changes and
        # the chunk objects each stored must not mix).
        if not self.writable:
            raise PermissionError(f"{self.name} is open for reading; open it with mode='a'")
        with self._thread_lock:
            if self._depth:  # inside a change already under way, in this thread
                yield False
                return
            changed = False
            if self._etag is not None and not self._replaced:
                # One HEAD: another writer may have published since this handle read the
                # index. (Not for a new frame not written yet: nothing there is its own.)
                fresh = self._index_now(unless=self._etag)
                changed = fresh is not None
                if changed:
                    self._index, self._etag, self._frame_len = fresh
            self._past_stored_ids()
            self._depth += 1
            try:
                yield changed
            except BaseException:
                # A change that failed (a refused index among them): its chunk objects are
                # named by no index and go (a killed writer's stay, named by none).
                stored, self._stored = self._stored, []
                with contextlib.suppress(OSError):
                    self._delete(stored)
                raise
            finally:
                self._depth -= 1

    def _past_stored_ids(self) -> None:
        """Where the store takes no If-None-Match: new ids start past every chunk object
        there (one listing a change). The highest id a change discards is kept as an
        object (:meth:`discard`), so an id an older index names is never given again: a
        reader holding that index would read the new chunk's bytes as the old one's."""
        if self._conditional or not self.writable:
            return
        try:
            listed = remote.call(self.url, self._fs.find, self._root + "/")
        except FileNotFoundError:
            return
        ids = [_chunk_id(str(key).rsplit("/", 1)[-1]) for key in listed]
        self._next_id = max([self._next_id, *(i + 1 for i in ids if i is not None)])

    def store(self, chunk: bytes, header: FrameHeader, in_use) -> int:
        ids = [int(e) for e in in_use if e >= 0]
        new_id = max(max(ids) + 1 if ids else 0, self._next_id)
        while True:
            name = self.chunk_name(new_id)
            try:
                self._put(name, chunk, IfNoneMatch="*")
            except ConflictError:
                new_id += 1  # another writer's chunk, not published yet: never overwritten
                continue
            self._next_id = new_id + 1
            self._stored.append(new_id)
            return new_id

    def store_many(self, chunks: list[bytes], header: FrameHeader, in_use) -> list[int]:
        ids = [int(e) for e in in_use if e >= 0]
        first = max(max(ids) + 1 if ids else 0, self._next_id)
        stride = max(1, len(chunks))

        def one(k):
            return put_chunk(self.url, self.storage_options, chunks[k], first + k, stride,
                             fs=self._fs, conditional=self._conditional)  # fmt: skip

        entries = remote.overlapped(one, range(len(chunks)))
        self._stored.extend(entries)
        self._next_id = max([self._next_id, *(e + 1 for e in entries)])
        return entries

    def claim(self, entries: Iterable[int]) -> None:
        self._stored.extend(int(e) for e in entries if e >= 0)

    @property
    def first_free_id(self) -> int:
        """Of a new frame (:meth:`new`): an id past every chunk of the frame it replaces."""
        return self._next_id

    def _put(self, name: str, data: bytes, **condition) -> str | None:
        """PUT ``data`` as ``name`` (under ``condition`` where the store takes it); its ETag."""
        url = self._join(name)
        kwargs = condition if self._conditional else {}
        try:
            answer = remote.call(url, self._fs.pipe_file, self._key(name), data, **kwargs)
        except OSError as exc:
            if kwargs and remote.refused(exc):
                raise ConflictError(self.url, name) from exc
            raise
        return answer.get("ETag") if isinstance(answer, dict) else None

    def publish(self, header, index, trailer, *, stored_bytes, full_header):
        published = super().publish(
            header, index, trailer, stored_bytes=stored_bytes, full_header=full_header
        )
        self._stored = []
        replaced, self._replaced = self._replaced, []
        self._delete(replaced)  # a new frame over an old one: the old one's chunk objects
        if self._replaced_object:
            self._replaced_object = False
            with contextlib.suppress(FileNotFoundError):
                remote.call(self.url, self._fs.rm_file, self._root)
        return published

    def _replace_index(self, frame: bytes) -> None:
        condition = {"IfMatch": self._etag} if self._etag else {"IfNoneMatch": "*"}
        etag = self._put(INDEX_NAME, frame, **condition)
        if etag is None:
            etag = FsspecSource(self._join(INDEX_NAME), self.storage_options).etag
        self._etag = etag
        self._index, self._frame_len = MemorySource(frame), len(frame)

    def discard(self, entries: Iterable[int], live: Iterable[int] = ()) -> None:
        gone = sorted(int(e) for e in entries if e >= 0)
        named = [int(e) for e in live if e >= 0]
        if gone and gone[-1] > max(named, default=-1):
            # Kept: the highest id ever stored. A new chunk takes an id past every object
            # there (If-None-Match), so no id is given twice, and a reader still holding an
            # older index never finds another chunk under an id it knew.
            gone.pop()
        self._delete(gone)

    def _delete(self, ids) -> None:
        if ids:
            keys = [self._key(self.chunk_name(int(e))) for e in ids]
            with contextlib.suppress(FileNotFoundError):
                remote.call(self.url, self._fs.rm, keys)

    def close(self) -> None:
        self._index.close()

    def __reduce__(self):
        return RemoteSparseFrame, (self.url, self.storage_options, self.writable, self._limits)

    def reopen(self, writable: bool | None = None) -> Backend:
        writable = self.writable if writable is None else writable
        return RemoteSparseFrame(self.url, self.storage_options, writable, self._limits)


def _chunk_id(name: str) -> int | None:
    """The id of a chunk object's name (``%08X.chunk``), or None for another name."""
    if len(name) == 14 and name.endswith(".chunk"):
        try:
            return int(name[:8], 16)
        except ValueError:
            return None
    return None


def fill_new(schunk, vlmeta: dict[str, bytes], chunks=(), nchunks: int = 1, stored_by=None) -> None:
    """Fill the new sparse frame ``schunk`` (in an object store, made by ``SChunk.create``,
    nothing written yet): its chunk objects first, then its index with ``vlmeta`` (stored
    values) in one PUT. The chunks are ``chunks`` (``nchunks`` of them), stored 16 at a time
    (:func:`put_chunks`), or stored elsewhere by ``stored_by(first id)``, which returns
    ``(index entry, nbytes, cbytes)`` per chunk (dask tasks, :func:`put_chunk`)."""
    backend = schunk.backend
    if stored_by is None:
        url, options = backend.url, backend.storage_options
        stored, cbytes = put_chunks(url, options, chunks, backend.first_free_id, max(1, nchunks))
    else:
        done = stored_by(backend.first_free_id)
        stored, cbytes = [(e, n) for e, n, _ in done], sum(c for *_, c in done)
    schunk.extend_stored(stored, cbytes, vlmeta)


def drop_sparse(url: str, storage_options) -> None:
    """After a contiguous frame (one object) was stored at ``url``: remove a sparse frame
    that was there under the same name (its index first, then its chunk objects), which
    readers no longer find (the object is found first) and nothing would remove."""
    fs, root = remote.filesystem(url.rstrip("/"), storage_options)
    root = root.rstrip("/")
    index = f"{root}/{INDEX_NAME}"
    try:
        remote.call(url, fs.info, index)
    except FileNotFoundError:
        return
    remote.call(url, fs.rm_file, index)
    with contextlib.suppress(FileNotFoundError):
        rest = remote.call(url, fs.find, root + "/")
        if rest:
            remote.call(url, fs.rm, list(rest))


def put_chunks(
    url: str, storage_options, chunks, first_id: int, stride: int
) -> tuple[list[tuple[int, int]], int]:
    """Store ``chunks`` (an iterable of encoded chunks, read a batch at a time) as chunk
    objects of the sparse frame at ``url`` for a change published with
    :meth:`~b2store.frame.changes.Changes.extend_stored`, up to
    :data:`~b2store.frame.remote.CONCURRENT_REQUESTS` PUTs in flight; chunk ``k`` under
    ``first_id + k`` (see :func:`put_chunk`). Returns ``([(index entry, nbytes)], bytes
    stored)``; on a failure, the objects stored so far are removed."""

    fs, root = remote.filesystem(url.rstrip("/"), storage_options)
    chunks = iter(chunks)
    stored: list[tuple[int, int]] = []
    total = 0
    try:
        while batch := list(itertools.islice(chunks, remote.CONCURRENT_REQUESTS)):
            at = first_id + len(stored)

            def one(k, batch=batch, at=at):
                return put_chunk(url, storage_options, batch[k], at + k, stride, fs=fs)

            entries = remote.overlapped(one, range(len(batch)))
            for chunk, entry in zip(batch, entries):
                stored.append((entry, int.from_bytes(chunk[4:8], "little")))
                total += len(chunk) if entry >= 0 else 0
    except BaseException:
        with contextlib.suppress(Exception):
            keys = [f"{root.rstrip('/')}/{chunk_file_name(e)}" for e, _ in stored if e >= 0]
            if keys:
                fs.rm(keys)
        raise
    return stored, total


def put_chunk(
    url: str,
    storage_options,
    chunk: bytes,
    chunk_id: int,
    stride: int,
    *,
    fs=None,
    conditional: bool | None = None,
) -> int:
    """Store ``chunk`` as a chunk object of the sparse frame at ``url``, for a change that
    another process publishes (:meth:`~b2store.frame.changes.Changes.extend_stored`): under
    ``chunk_id`` or, where an object is there already (a killed writer's, or an earlier try
    of this one; seen where the store takes If-None-Match), ``chunk_id + stride``, and so on.
    Returns its index entry; a special chunk (all zeros, say) stores nothing and returns its
    special entry."""

    kind = publishing.special_kind_of(chunk)
    if kind:
        return publishing.special_offset(kind)
    made, root = remote.filesystem(url.rstrip("/"), storage_options)
    fs = fs or made
    if conditional is None:
        conditional = conditional_writes(fs)
    condition = {"IfNoneMatch": "*"} if conditional else {}
    while True:
        name = chunk_file_name(chunk_id)
        try:
            remote.call(f"{url}/{name}", fs.pipe_file, f"{root.rstrip('/')}/{name}", chunk,
                        **condition)  # fmt: skip
        except OSError as exc:
            if condition and remote.refused(exc):
                chunk_id += stride
                continue
            raise
        return chunk_id
