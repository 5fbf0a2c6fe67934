"""A super-chunk: the chunks of one frame, with its metalayers and vlmeta, read by index.

Chunk i is found through the offsets index (itself a Blosc2 chunk of int64): an offset into
the chunks section of a contiguous frame, a chunk-file id in a sparse frame, or a special
value (zeros, NaN, uninitialized) for which no bytes are stored. Where the bytes live is the
layout's business (:class:`~b2store.frame.backend.Backend`); reading never asks which kind
it has.

:class:`SChunk` is one class, python-blosc2's ``SChunk`` as users know it, built from this
module (opening, the committed state and its retries, chunks read whole) and three mixins,
one job each: :mod:`~b2store.frame.changes` (changes, published in one step),
:mod:`~b2store.frame.block_reads` (the blocks a selection needs) and
:mod:`~b2store.frame.chunk_bounds` (where stored chunks lie; runs of neighbours read at
once). They share the committed :class:`~b2store.frame.state.State` and one retry loop
(``_reading``), so they stay methods of one object rather than helpers handed its privates;
their modules import only downward (the state, the layouts' interface), never this one.
:class:`OnSChunk` is what the objects read from one frame (b2nd arrays, python-blosc2's
containers) show of it alike: its ``meta`` and ``vlmeta``.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator, Mapping, MutableMapping

import numpy as np

from .._userpath import names_user_path
from ..chunk.decoder import decode_chunk, in_chunk
from ..chunk.encoder import special_chunk
from ..chunk.header import ChunkHeader
from ..chunk.params import ChunkParams
from ..constants import Codec, Filter, SpecialValue
from ..errors import B2StoreError, FormatError, UnsupportedError
from ..limits import Limits, resolve
from . import publishing, staging
from .backend import Backend
from .block_reads import BlockReads, check_value_item
from .changes import Changes
from .chunk_bounds import ChunkBounds
from .contiguous import ContiguousFrame
from .factory import open_backend
from .header import FrameHeader
from .mappings import MetaView, VLMetaView
from .remote_sparse import RemoteSparseFrame
from .sources import FileSource, MemorySource, is_url
from .sparse import SparseFrame
from .state import READ_TRIES, State, read_header, read_state

__all__ = ["SChunk", "FrameClosedError", "OnSChunk"]


class FrameClosedError(B2StoreError, ValueError):
    """The frame was closed: open it again to read or change it."""


_NOTHING = contextlib.nullcontext()
# The super-chunk whose read this thread is in where that read found no .b2lock sidecar: the
# reads nested in it (an array read's chunk reads) do not look again (an ``access`` each,
# 1-4 us of a 70 us element read).
_READS = threading.local()


class _NoSidecarRead:
    """A read of ``schunk`` that found no sidecar, marked for the reads nested in it."""

    __slots__ = ("schunk", "outer")

    def __init__(self, schunk):
        self.schunk = schunk

    def __enter__(self) -> None:
        self.outer = getattr(_READS, "schunk", None)
        _READS.schunk = self.schunk

    def __exit__(self, *exc) -> bool:
        _READS.schunk = self.outer
        return False


def _special_kind(offset: int) -> int:
    # A special offset has its top bit set and the special value in the top byte's low bits.
    return (offset >> 56) & 0x7F


# c-blosc2's default pipeline as its headers hold it: shuffle in the last of the six slots.
_DEFAULT_FILTERS = (Filter.NOFILTER,) * 5 + (Filter.SHUFFLE,)

# The longest a special VALUE chunk is: its header and one item of a typesize up to 255.
_VALUE_CHUNK_MAX = 32 + 255


def _from_header(name: str) -> property:
    """The committed header's field ``name``, read-only."""
    return property(lambda self: getattr(self.header, name))


class SChunk(Changes, BlockReads, ChunkBounds):
    """The chunks of a Blosc2 frame (contiguous or sparse).

    Use :meth:`open` (or :func:`b2store.open`) to read one. ``meta`` maps the fixed
    metalayers' names to their decoded values (``meta.raw(name)``: the stored bytes), and
    ``vlmeta`` the variable-length ones. Close it with :meth:`close` or a ``with`` block;
    copies and pickles reopen the frame by its path (or carry its bytes when it lives in
    memory).
    """

    def __init__(self, backend: Backend, header: FrameHeader, limits: Limits | None = None):
        self._backend = backend
        self._closed = False
        self.limits = resolve(limits)
        self._refresh_lock = threading.Lock()
        self._layouts: tuple[State | None, dict] = (None, {})
        self._bounds: tuple[State | None, np.ndarray | None, int] = (None, None, 0)
        # Set by a layer above that keeps an invariant over the chunks (a b2nd array: as
        # many chunks as its shape needs, all of one size); checked before each publish.
        self.layout_guard = None
        # The b2nd array's block shape, set by the array over this frame: c-blosc2's plugin
        # codecs and filters (ZFP, NDLZ, NDCELL, NDMEAN) work on it, and no chunk says it.
        self.blockshape: tuple[int, ...] | None = None
        backend.adopt(header)
        self._load_committed(header)

    def _load_committed(self, header: FrameHeader | None = None) -> None:
        """:meth:`_load` from ``header`` (just read) or the header on storage now, beside
        writers in other processes. A header read while one commits may be torn, or a
        newer commit's than the trailer read after it; so the state is taken only when the
        header, read again after everything else, is still the same, and else read again
        from the newer one (up to ``READ_TRIES`` times, as chunk reads are). A failure with
        the header unchanged is the file's own: its FormatError is raised."""
        backend = self._backend
        for _ in range(READ_TRIES):
            if header is None:
                header = read_header(backend, self.limits)
            try:
                state = self._read_state(header)
            except FormatError:
                if not backend.moved(header):
                    raise
            else:
                if not backend.moved(header):
                    self._stored_bytes = header.cbytes
                    self._state = state
                    return
            backend.refresh()
            header = None
        raise FormatError(
            "frame header", "one that stays the same while it is read", "writers kept replacing it"
        )

    def _load(self, header: FrameHeader) -> None:
        """Take the frame's state from storage: the header given, the trailer, the index;
        published as one :class:`State` once all of it is read."""
        state = self._read_state(header)
        self._stored_bytes = header.cbytes
        self._state = state

    def _read_state(self, header: FrameHeader) -> State:
        """The state ``header`` names: its trailer and index, read from storage."""
        return read_state(self._backend, header, self.limits)

    # The committed state, read through one attribute (see State).
    header = property(lambda self: self._state.header)
    offsets = property(lambda self: self._state.offsets)
    _raw_vlmeta = property(lambda self: self._state.raw_vlmeta)
    _trailer_start = property(lambda self: self._state.trailer_start)

    def _fresh(self, st: State) -> bool:
        """After a read from state ``st`` failed: whether a newer committed state is now
        loaded (a writer in this process published, or one elsewhere did and the frame on
        disk moved on), so the read should be tried again from it."""
        if self._state is not st:
            return True
        if self._backend.writable:
            with self._changing():  # reloads under the writer lock when the disk moved on
                pass
            return self._state is not st
        with self._refresh_lock:
            if self._state is not st:
                return True
            if not self._backend.refresh():
                return False
            self._load_committed()
            new = self._state
            # The same header can come with another index (a chunk replaced by one of the
            # same size): compare what a read uses.
            return not (
                new.header == st.header
                and np.array_equal(new.offsets, st.offsets)
                and new.raw_vlmeta == st.raw_vlmeta
            )

    def committed(self) -> State:
        """The committed state now: pass it as ``state=`` to reads of several chunks that
        must all come from one state (one array read), whatever writers publish meanwhile.
        A read from a state a writer has since replaced may raise FormatError (a sparse
        frame's old chunk file discarded): see :meth:`refreshed`."""
        self._check_open()
        return self._state

    def refreshed(self, st: State) -> bool:
        """After a read from state ``st`` failed: whether a newer committed state is there to
        read from (then read everything again from :meth:`committed`)."""
        return self._fresh(st)

    def _reading(self, i: int, read, state: State | None = None):
        """``read(state, i)`` for chunk ``i``, from one committed state; tried again from a
        newer state (up to ``READ_TRIES`` times) while writers replace what it named (a
        sparse frame's chunk file discarded, a frame cut short). A read that fails with no
        newer state to go to raises its FormatError: the frame is damaged. With ``state``
        given, the read is from that state alone, and the caller tries again."""
        self._check_open()
        try:
            if state is not None:
                return read(state, self._index(i, state))
            for _ in range(READ_TRIES - 1):
                with self.reading():
                    st = self._state
                    try:
                        return read(st, self._index(i, st))
                    except FormatError as exc:
                        error = exc
                if not self._fresh(st):  # (outside the read: a writable handle locks here)
                    raise error
            with self.reading():
                st = self._state
                return read(st, self._index(i, st))
        except FormatError as exc:
            raise in_chunk(exc, f"chunk {i}") from None

    def reading(self):
        """A context that holds python-blosc2's ``.b2lock`` sidecar shared across one read,
        where b2store takes part (:mod:`b2store.frame.b2lock`), and loads the frame's state
        again first when a handle elsewhere changed it since this one last looked (the
        generation moved). Without a sidecar, a context that only marks the read, so that the
        reads nested in it do not look for one again: a sidecar python-blosc2 makes during the
        read is held from the next read on."""
        sidecar = self._backend.sidecar
        if sidecar is None or getattr(_READS, "schunk", None) is self:
            return _NOTHING
        if not sidecar.wanted():
            return _NoSidecarRead(self)
        return self._held_reading(sidecar)

    @contextlib.contextmanager
    def _held_reading(self, sidecar):
        with sidecar.hold_shared() as generation:
            if generation is not None and generation != sidecar.generation:
                with self._refresh_lock:  # (readers of other threads may hold it too)
                    if generation != sidecar.generation:
                        if self._backend.resync():
                            self._load_committed()
                        sidecar.generation = generation
            yield

    @classmethod
    def open(
        cls,
        urlpath,
        mode: str = "r",
        *,
        offset: int = 0,
        storage_options: dict | None = None,
        limits: Limits | None = None,
        locking: bool | None = None,
    ) -> SChunk:
        """Open the frame at ``urlpath``: a file, a sparse-frame directory, an fsspec URL
        (read by byte ranges), the frame's bytes, or a backend. ``mode="r"`` reads; ``"a"``
        allows changes too. ``offset`` opens a frame that starts inside a larger file.
        ``limits`` (:class:`b2store.limits.Limits`) bounds what the file may ask for.
        ``locking``: as :func:`b2store.open`'s."""
        if mode not in ("r", "a"):
            raise ValueError(
                f"mode must be 'r' or 'a' here (use SChunk.create for 'w'), not {mode!r}"
            )
        backend, header = open_backend(
            urlpath,
            writable=mode == "a",
            offset=offset,
            storage_options=storage_options,
            limits=limits,
            locking=locking,
        )
        try:
            return cls(backend, header, limits)
        except BaseException:
            backend.close()
            raise

    @classmethod
    @names_user_path
    def create(
        cls,
        urlpath=None,
        *,
        contiguous: bool = True,
        typesize: int = 1,
        chunksize: int = -1,
        codec="zstd",
        clevel: int = 5,
        filters=None,
        filters_meta=None,
        splitmode="auto",
        blocksize: int = 0,
        meta: Mapping[str, bytes] | None = None,
        params: ChunkParams | None = None,
        storage_options: dict | None = None,
        exclusive: bool = False,
    ) -> SChunk:
        """A new empty frame, in memory (``urlpath=None``) or replacing what is at
        ``urlpath``: a contiguous file, or a sparse-frame directory with ``contiguous=False``.

        A URL (``s3://...``, with fsspec's ``storage_options``) takes a sparse frame only (an
        object store takes a contiguous frame only whole: see ``b2store.asarray``). Nothing
        is written there before the first change, which writes its chunk objects and then
        the index; a frame already there stays readable until then (``exclusive``: refused).

        The compression parameters (``params``, or the separate keywords) are stored in the
        header and used by :meth:`append_data`; values no chunk can be written with are
        refused here, as :class:`~b2store.chunk.params.ChunkParams` refuses them.
        """
        if params is None:
            params = ChunkParams(
                codec=codec,
                clevel=clevel,
                typesize=typesize,
                filters=_DEFAULT_FILTERS if filters is None else filters,
                filters_meta=None if filters is None else filters_meta,
                splitmode=splitmode,
                blocksize=blocksize,
            )
        elif params.typesize is None:
            params = params.replace(typesize=typesize)
        header, frame = publishing.empty_frame(
            contiguous=contiguous or urlpath is None,
            params=params,
            chunksize=chunksize,
            metalayers={k: bytes(v) for k, v in (meta or {}).items()},
        )
        if urlpath is None:
            return cls(ContiguousFrame(MemorySource(frame), writable=True), header)
        if is_url(urlpath):
            if contiguous:
                raise UnsupportedError(
                    "contiguous frame changed in place in an object store (it is stored whole:"
                    " use asarray, or contiguous=False for a sparse frame)",
                    urlpath,
                )
            backend = RemoteSparseFrame.new(urlpath, frame, storage_options, exclusive=exclusive)
            return cls(backend, header)
        if storage_options:
            raise ValueError("storage_options are for a URL (s3://...), not a local path")
        path = staging.write_new(urlpath, frame, contiguous)
        if contiguous:
            return cls(ContiguousFrame(FileSource(path), writable=True), header)
        return cls(SparseFrame(path, writable=True), header)

    # --- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Release the frame's files; reading or changing it afterwards raises."""
        self._closed = True
        self._backend.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> SChunk:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise FrameClosedError(f"{self._backend.name}: the frame is closed")

    def __reduce__(self):
        # The backend pickles as the recipe to reopen it; the state is read again there. The
        # b2nd block shape goes along: the copy's plugin chunks need it as this frame's do.
        self._check_open()
        return _reopen, (self._backend.reopen(), self.limits, self.blockshape)

    def __dask_tokenize__(self):
        if isinstance(self._backend, ContiguousFrame) and self._backend.name == "<bytes>":
            return ("b2store.SChunk", hashlib.sha1(self._backend.getvalue()).hexdigest())
        # The fixed header changes with every published change (sizes, frame_len).
        return ("b2store.SChunk", self._backend.name, self.header.to_bytes()[:87].hex())

    @property
    def backend(self) -> Backend:
        """The layout the frame is read and changed through (see
        :class:`~b2store.frame.backend.Backend`)."""
        return self._backend

    @property
    def urlpath(self) -> str:
        """Where the frame lives (a path, a URL, or ``<bytes>`` for a frame in memory)."""
        return self._backend.name

    # --- the index -----------------------------------------------------------------------

    @property
    def params(self) -> ChunkParams:
        """The compression parameters the header records (what new chunks are encoded
        with); a header holding values no chunk can be written with is a FormatError
        naming the field (:meth:`FrameHeader.params`)."""
        return self.header.params(self.blockshape)

    # --- what the header says ----------------------------------------------------------------

    # (python-blosc2's names; the filters and their metas as the header's six slots)
    chunksize = _from_header("chunksize")
    typesize = _from_header("typesize")
    nbytes = _from_header("nbytes")
    cbytes = _from_header("cbytes")
    blocksize = _from_header("blocksize")
    clevel = _from_header("clevel")
    filters = _from_header("filters")
    filters_meta = _from_header("filters_meta")

    @property
    def nchunks(self) -> int:
        return len(self.offsets)

    @property
    def contiguous(self) -> bool:
        return self._backend.contiguous

    @property
    def remote(self) -> bool:
        """Read by requests over a network (each a round trip): reads of many chunks are
        then overlapped (:func:`b2store.frame.remote.overlapped`)."""
        return self._backend.remote

    @property
    def codec(self) -> Codec | int:
        try:
            return Codec(self.header.compcode)
        except ValueError:
            return self.header.compcode

    @property
    def meta(self) -> MetaView:
        """The fixed metalayers, msgpack-decoded as python-blosc2's ``schunk.meta``
        (``meta.raw(name)``: the stored bytes); an update must keep the content's size."""
        return MetaView(self)

    @property
    def vlmeta(self) -> MutableMapping[str, object]:
        """The variable-length metalayers, decoded (msgpack only, never unpickled)."""
        return VLMetaView(self)

    # --- chunks ----------------------------------------------------------------------------

    def _chunk_nbytes(self, i: int, st: State | None = None) -> int:
        st = st or self._state
        h = st.header
        if h.chunksize <= 0:
            raise FormatError(
                f"offsets[{i}]",
                "no special offsets with variable-size chunks",
                hex(int(st.offsets[i]) & (2**64 - 1)),
            )
        last = h.nbytes % h.chunksize
        return last if i == len(st.offsets) - 1 and last else h.chunksize

    def _special(self, i: int, entry: int, st: State | None = None) -> bytes:
        """The 32-byte special chunk that a special index entry stands for."""
        kind = _special_kind(entry)
        if kind not in (SpecialValue.ZERO, SpecialValue.NAN, SpecialValue.UNINIT):
            raise FormatError(
                f"offsets[{i}]",
                "a special offset for zeros, NaN or uninit",
                hex(entry & (2**64 - 1)),
            )
        nbytes = self._chunk_nbytes(i, st)
        if nbytes % self.typesize:
            raise FormatError(
                f"chunk {i} nbytes", f"whole items of typesize {self.typesize}", nbytes
            )
        return special_chunk(SpecialValue(kind), nbytes, self.typesize)

    def get_chunk(self, i: int, *, state: State | None = None) -> bytes:
        """The stored bytes of chunk ``i`` (a 32-byte special chunk for special offsets);
        ``state``: from that committed state (see :meth:`committed`)."""
        return self._reading(i, self._get_chunk, state)

    def _get_chunk(self, st: State, i: int) -> bytes:
        entry = int(st.offsets[i])
        if entry < 0:
            return self._special(i, entry, st)
        chunk = self._backend.read_chunk(entry, st.header, f"offsets[{i}]", self._span(st, entry))
        if len(chunk) <= _VALUE_CHUNK_MAX:
            check_value_item(ChunkHeader.from_bytes(chunk), st.header.typesize, i)
        return chunk

    def chunk_span(self, i: int) -> tuple[str, int, int] | None:
        """Where chunk ``i``'s bytes are stored: (file path or URL, byte offset, length), or
        None for a special chunk, which stores no bytes (see :meth:`get_chunk`)."""
        return self._reading(i, self._chunk_span)

    def _chunk_span(self, st: State, i: int) -> tuple[str, int, int] | None:
        entry = int(st.offsets[i])
        if entry < 0:
            self._special(i, entry, st)  # a bad special entry is reported here too
            return None
        return self._backend.chunk_span(entry, st.header, f"offsets[{i}]")

    def decompress_chunk(self, i: int, out=None) -> np.ndarray:
        """Chunk ``i`` decoded: a 1-d uint8 array (or written into ``out``)."""
        chunk = self.get_chunk(i)
        try:
            return decode_chunk(
                chunk, out=out, max_nbytes=self.limits.max_chunk_nbytes, blockshape=self.blockshape
            )
        except FormatError as exc:
            raise in_chunk(exc, f"chunk {i}") from None

    def to_cframe(self) -> bytes:
        """The whole frame as one contiguous frame's bytes."""
        self._check_open()
        if self.contiguous:
            return self._backend.read(0, self._backend.frame_len)
        out = SChunk.create(
            None,
            params=self.params,  # whole: what new chunks are encoded with goes along
            meta=self.header.metalayers,
            chunksize=self.chunksize if self.nchunks else -1,
        )
        chunks: list[int] = []
        for i in range(self.nchunks):
            chunks.append(out._store(self.get_chunk(i), self.chunksize, pending=chunks))
        out._publish(np.array(chunks, np.int64), self.nbytes, self.chunksize, self._raw_vlmeta)
        return out._backend.getvalue()

    def _index(self, i: int, st: State | None = None) -> int:
        n = len((st or self._state).offsets)
        if not -n <= i < n:
            raise IndexError(f"chunk {i} out of range for {n} chunks")
        return i % n

    def __len__(self) -> int:
        return self.nchunks

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(self.nchunks):
            yield self.decompress_chunk(i)

    def __repr__(self) -> str:
        kind = "contiguous" if self.contiguous else "sparse"
        return (
            f"SChunk({kind}, nchunks={self.nchunks}, chunksize={self.chunksize}, "
            f"typesize={self.typesize}, nbytes={self.nbytes}, cbytes={self.cbytes})"
        )


def _reopen(backend: Backend, limits: Limits | None = None, blockshape=None) -> SChunk:
    schunk = SChunk(backend, read_header(backend, limits), limits)
    schunk.blockshape = blockshape
    return schunk


class OnSChunk:
    """What an object read from one frame (its ``schunk``: a b2nd array, a python-blosc2
    container) shows of that frame, as python-blosc2's objects do."""

    schunk: SChunk

    @property
    def meta(self):
        """The frame's fixed metalayers, decoded (python-blosc2's ``meta``)."""
        return self.schunk.meta

    @property
    def vlmeta(self):
        """The frame's user attributes (python-blosc2's ``vlmeta``)."""
        return self.schunk.vlmeta
