"""The codecs' C entry points for the GIL-free block loop (``_decode_blocks``), and its threads.

The ``lz4`` wheel's extension exports LZ4's API as dynamic symbols, and ``zstandard``'s cffi
extension exports Zstd's: chunks are encoded with those (as the Python path encodes). They
are decoded with numcodecs' own builds of LZ4 and Zstd where its extensions export the
decoding API (faster builds; any conforming build decodes alike), else with the wheels'.
Python's ``zlib`` module links the system ``libz``. The addresses are found once, with
``ctypes``, the first time a chunk is decoded or encoded (zlib-ng's inflate and deflate too,
from the ``zlib-ng`` package, a dependency), and handed to ``_decode_blocks``, which calls
them without the GIL. Whatever is missing (another build of a wheel,
no system zlib, ``B2STORE_NATIVE=0`` in the environment) leaves that codec on the Python path
of :mod:`b2store.chunk.compressors`, which decodes the same chunks, only slower.

Threads come from one long-lived pool, made again in a child process after ``fork``; they
split a chunk's blocks, taking the next block from a shared counter.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from ..constants import Codec, CodecFormat, Filter

try:
    from . import _chunk_plan, _decode_blocks, _encode_blocks
except ImportError:  # pragma: no cover - a build without the extensions
    _chunk_plan = _decode_blocks = _encode_blocks = None

__all__ = [
    "enabled",
    "walk",
    "decode",
    "decode_whole",
    "quick_decode",
    "cpu_count",
    "encode",
    "executor",
    "threads_for",
    "default_nthreads",
    "set_nthreads",
]

_LZ4_DECODE = ("LZ4_decompress_safe", "LZ4_decompress_safe_usingDict")
_LZ4_ENCODE = ("LZ4_compress_fast", "LZ4_compress_HC")
# Contexts are made and freed by the library that uses them; ZSTD_isError's error codes are
# the same in every Zstd since 1.3.
_ZSTD_DECODE = (
    "ZSTD_createDCtx",
    "ZSTD_freeDCtx",
    "ZSTD_getFrameContentSize",
    "ZSTD_findFrameCompressedSize",
    "ZSTD_decompressDCtx",
    "ZSTD_decompress_usingDict",
)
_ZSTD_ENCODE = ("ZSTD_createCCtx", "ZSTD_freeCCtx", "ZSTD_isError", "ZSTD_compressCCtx")
_ZLIB_NG = (
    "zng_inflateInit2",
    "zng_inflate",
    "zng_inflateReset",
    "zng_inflateEnd",
    "zng_deflateInit2",
    "zng_deflate",
    "zng_deflateReset",
    "zng_deflateEnd",
)
# Zstd before 1.4 lacks parts of this API; zlib before 1.2.9 has no uncompress2.
_MIN_ZSTD = 10400
_USER_FORMATS = {
    Codec.BLOSCLZ: CodecFormat.BLOSCLZ,
    Codec.LZ4: CodecFormat.LZ4,
    Codec.LZ4HC: CodecFormat.LZ4,
    Codec.ZLIB: CodecFormat.ZLIB,
    Codec.ZSTD: CodecFormat.ZSTD,
}
_TRUNCATIONS = frozenset({Filter.TRUNC_PREC, Filter.INT_TRUNC})

_UNWALKED = -(1 << 40)
_lock = threading.Lock()
_state: dict = {"ready": False, "on": False, "entry_points": {}}


def _symbols(path: str | None, names) -> dict[str, int]:
    import ctypes  # here, not at import: it costs `import b2store` several ms

    if path is None:
        return {}
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return {}
    found = {}
    for name in names:
        try:
            found[name] = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        except AttributeError:
            pass
    return found


def _module_path(name: str) -> str | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None else None


def _zlib_path() -> str | None:
    # The library Python's zlib module is linked against; Windows has no system zlib.
    if sys.platform.startswith("linux"):
        return "libz.so.1"
    if sys.platform == "darwin":
        return "libz.dylib"
    return None


def _version(path: str | None, symbol: str) -> int:
    """What ``symbol`` (``LZ4_versionNumber``, ``ZSTD_versionNumber``) of a library says, 0
    when it has none."""
    import ctypes

    address = _symbols(path, (symbol,)).get(symbol)
    return ctypes.CFUNCTYPE(ctypes.c_uint)(address)() if address else 0


def _decoders(wheel: str | None, wheel_version: int, names, module: str, symbol: str):
    """The decoding entry points ``names``: numcodecs' build of the codec (``module``) when it
    exports them all and is no older than the wheel's, else the wheel's (``wheel``).

    Decoding is the same on every conforming build, so it may come from the fastest one, and
    numcodecs (a dependency already) compiles LZ4 and Zstd faster than the wheels do. Measured
    here on the 8 MB benchmark chunks (``docs/performance.md``): numcodecs' Zstd inflates in
    0.92x the time of ``zstandard``'s, its LZ4 1.10 in 0.98x the time of the ``lz4`` wheel's
    1.9.4. Encoding stays with the wheels: the Python path compresses with them, and both
    paths must write the same bytes."""
    path = _module_path(module)
    theirs = _symbols(path, names)
    if len(theirs) == len(names) and _version(path, symbol) >= max(wheel_version, 1):
        return theirs
    return _symbols(wheel, names)


def _resolve() -> dict[str, int]:
    import lz4.block  # noqa: F401 - the extensions whose symbols are used must be loaded
    import zstandard

    try:
        import numcodecs.lz4
        import numcodecs.zstd  # noqa: F401
    except ImportError:  # a numcodecs built without them: the wheels decode
        pass
    except ValueError:
        # numcodecs 0.15-0.17 fail to import at all beside zfpy 1.0.1.post0 (they read its
        # version as integers): the lz4 and zstandard wheels' own entry points serve.
        pass

    lz4_path = _module_path("lz4.block._block")
    found = _symbols(lz4_path, _LZ4_ENCODE)
    found.update(
        _decoders(lz4_path, _version(lz4_path, "LZ4_versionNumber"), _LZ4_DECODE,
                  "numcodecs.lz4", "LZ4_versionNumber")
    )  # fmt: skip
    zstd_path = _module_path("zstandard._cffi")
    major, minor, patch = zstandard.ZSTD_VERSION
    # The very library zstandard runs (so frames match the Python path's), recent enough.
    if _version(zstd_path, "ZSTD_versionNumber") == max(
        major * 10000 + minor * 100 + patch, _MIN_ZSTD
    ):
        found.update(_symbols(zstd_path, _ZSTD_ENCODE))
        found.update(
            _decoders(zstd_path, _MIN_ZSTD, _ZSTD_DECODE, "numcodecs.zstd", "ZSTD_versionNumber")
        )
    found.update(_symbols(_zlib_path(), ("uncompress2",)))
    # zlib-ng inflates about twice as fast as zlib (c-blosc2 uses it); its Python package
    # exports the native API.
    found.update(_symbols(_module_path("zlib_ng.zlib_ng"), _ZLIB_NG))
    return found


def _ready() -> bool:
    """Find the entry points once; whether the block loop is in use (built, and not turned
    off by ``B2STORE_NATIVE=0``, which is read then: every chunk asks, and reading the
    environment each time cost 2 us of a 15 us small chunk)."""
    if _state["ready"]:
        return _state["on"]
    with _lock:
        if not _state["ready"]:
            on = _decode_blocks is not None and os.environ.get("B2STORE_NATIVE", "1") != "0"
            if on:
                _state["entry_points"] = _resolve()
                _decode_blocks.set_entry_points(_state["entry_points"])
            _state["on"], _state["ready"] = on, True
    return _state["on"]


def enabled() -> bool:
    """Whether the GIL-free block loop is in use (the extension is built, not disabled)."""
    return _ready()


def entry_points() -> dict[str, int]:
    """The C functions found, by name (for ``b2store`` diagnostics and the benchmarks)."""
    _ready()
    return dict(_state["entry_points"])


# --- threads ----------------------------------------------------------------------------------

_nthreads: dict = {"value": None, "env": None}


class ThreadPool:
    """A long-lived pool of threads named ``prefix``, grown to the most threads asked of it
    (the old pool is let finish what it holds); a forked child starts it afresh."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._forget()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        # (a forked child has the parent's pool object but none of its threads)
        self._executor: ThreadPoolExecutor | None = None
        self._size = 0

    def get(self, workers: int) -> ThreadPoolExecutor:
        """The pool, with at least ``workers`` threads."""
        with self._lock:
            if self._executor is None or self._size < workers:
                old = self._executor
                self._executor = ThreadPoolExecutor(workers, thread_name_prefix=self._prefix)
                self._size = workers
                if old is not None:
                    old.shutdown(wait=False)
            return self._executor


_BLOCKS = ThreadPool("b2store-blocks")


def executor(workers: int) -> ThreadPoolExecutor:
    """The long-lived pool of the block loops, with at least ``workers`` threads."""
    return _BLOCKS.get(workers)


def cpu_count() -> int:
    """The number of cores, asked once (``os.cpu_count`` reads /sys: 6 us a call here, paid
    per chunk when every decode asked it)."""
    if _cpus["value"] is None:
        _cpus["value"] = os.cpu_count() or 1
    return _cpus["value"]


_cpus: dict = {"value": None}


def default_nthreads() -> int:
    """Threads a whole-array read decodes with: the calling thread's :func:`threads_of_call`,
    else ``set_nthreads``, else ``B2STORE_NTHREADS`` (as the process found it first), else the
    number of cores (as python-blosc2 does)."""
    capped = getattr(_call, "nthreads", None)
    if capped is not None:
        return capped
    if _nthreads["value"] is not None:
        return _nthreads["value"]
    if _nthreads["env"] is None:
        # Read once: every chunk of a read asks (1.5 us each, of a 25 us small chunk).
        env = os.environ.get("B2STORE_NTHREADS")
        _nthreads["env"] = int(env) if env and env.isdigit() and int(env) > 0 else 0
    return _nthreads["env"] or cpu_count()


def set_nthreads(n: int | None) -> None:
    """Set the threads of array reads (None: back to the default)."""
    if n is not None and int(n) < 1:
        raise ValueError(f"nthreads must be at least 1, not {n}")
    _nthreads["value"] = None if n is None else int(n)


_call = threading.local()  # (threads_of_call's count, for the thread that set it)


@contextlib.contextmanager
def threads_of_call(n: int):
    """The reads this thread makes inside the block decode with ``n`` threads (a Zarr
    codec pipeline's read of a ``B2ndStore`` array, held to zarr's ``threading.max_workers``),
    whatever ``set_nthreads`` says for the others."""
    before = getattr(_call, "nthreads", None)
    _call.nthreads = max(1, int(n))
    try:
        yield
    finally:
        _call.nthreads = before


_local = threading.local()


def _scratch():
    """This thread's buffers and codec contexts (``_decode_blocks.Scratch``), kept for reuse."""
    scratch = getattr(_local, "scratch", None)
    if scratch is None:
        scratch = _local.scratch = _decode_blocks.Scratch()
    return scratch


# Bytes of a chunk each thread must have before another thread is worth its handoff (30-40 us
# on a 2-core machine, more than LZ4 takes to decode 256 kB). Decoding with two threads, a 16 kB
# chunk took 11x as long as with one and a 256 kB one 1.9x (Zstd 0.94x); 1 MB chunks took
# 0.72-0.77x. Encoding is slower, LZ4 the least: two threads encoded 64 kB of LZ4 at 0.46x one
# thread's speed and 512 kB at 1.27x; BloscLZ, LZ4HC, zlib and Zstd gain from 64 kB (1.14x,
# 1.47x, 1.60x, 1.57x). bench/bench_threads.py measures LZ4 and Zstd.
THREAD_BYTES = 512 << 10
ENCODE_THREAD_BYTES = {Codec.LZ4: 256 << 10}
SLOW_ENCODE_THREAD_BYTES = 32 << 10


def threads_for(nbytes: int, nthreads: int | None, per_thread: int | None = None) -> int:
    """How many of ``nthreads`` threads (None: one) work on ``nbytes`` of a chunk, each
    given ``per_thread`` bytes at least (None: :data:`THREAD_BYTES`)."""
    return max(1, min(nthreads or 1, nbytes // (per_thread or THREAD_BYTES)))


def _share(run, nthreads: int) -> int:
    """Run ``run()`` in ``nthreads`` threads (this one included); the worst status."""
    if nthreads <= 1:
        return run()
    pool = executor(nthreads - 1)
    jobs = [pool.submit(run) for _ in range(nthreads - 1)]
    rc = run()
    for job in jobs:
        # A job no thread has started yet has nothing left to take (``run`` takes its work
        # from a shared counter until none is left): dropped, not waited for. On a busy
        # machine its thread may wait for a core for milliseconds.
        if not job.cancel():
            rc = min(rc, job.result())
    return rc


# --- decoding ---------------------------------------------------------------------------------


def _effective_format(header) -> int:
    fmt = header.codec_format
    if fmt == CodecFormat.USER:
        return _USER_FORMATS.get(header.udcodec, -1)
    return fmt


def walk(decoder, split: bool, only=None, ends=None) -> bool:
    """Check and record every stream of ``decoder``'s chunk (or of the blocks ``only``) in
    ``decoder.stream_table``; False when the Python walk has to do it (and say what is wrong)."""
    if not enabled():
        return False
    h = decoder.header
    fmt = _effective_format(h)
    if decoder.pipeline.plugins:
        return False
    if not _decode_blocks.decodable(fmt, decoder.dictionary is not None):
        return False
    nstreams = h.typesize if split else 1
    nblocks = len(decoder.bstarts)
    # Blocks left unwalked keep a csize no stream has: decoding them fails. (empty and fill,
    # not np.full: one Python frame fewer on a small read's path)
    table = np.empty((nblocks, 2 * nstreams), np.int64)
    table.fill(_UNWALKED)
    which = np.arange(nblocks, dtype=np.int64) if only is None else np.asarray(only, np.int64)
    if ends is None:
        ends = np.empty(nblocks, np.int64)
        ends.fill(h.cbytes)
    rc = _decode_blocks.walk(
        decoder.src,
        decoder.bstarts,
        which,
        np.ascontiguousarray(ends, np.int64),
        h.nbytes,
        h.effective_blocksize,
        nstreams,
        fmt,
        table,
    )
    if rc:
        return False
    decoder.stream_table = table
    decoder.stream_format = fmt
    decoder.split = split
    return True


def decode(decoder, blocks, dest: np.ndarray, dest_base: int, first=None, nthreads=1) -> bool:
    """Decode ``blocks`` of a walked chunk into ``dest`` (the decoded chunk from byte
    ``dest_base`` on); False if any failed (the Python path then says why)."""
    table = getattr(decoder, "stream_table", None)
    if table is None:
        return False
    h = decoder.header
    if dest.dtype != np.uint8 or not dest.flags.c_contiguous or not dest.flags.writeable:
        return False
    if first is not None and (first.dtype != np.uint8 or not first.flags.c_contiguous):
        return False
    blocks = np.asarray(blocks, np.int64)
    counter = np.zeros(1, np.int64)
    failed = np.zeros(1, np.int32)
    steps = decoder.pipeline.int_steps
    nstreams = table.shape[1] // 2

    def run() -> int:
        return _decode_blocks.decode(
            decoder.src,
            table,
            blocks,
            counter,
            failed,
            dest,
            dest_base,
            h.nbytes,
            h.effective_blocksize,
            nstreams,
            decoder.stream_format,
            steps,
            h.typesize,
            decoder.pipeline.blosc1,
            _scratch(),
            decoder.dictionary,
            first,
        )

    if nthreads is None or nthreads <= 1:  # (a small read's one block: no share-out)
        return run() == 0 and not failed[0]
    nthreads = min(threads_for(len(blocks) * h.effective_blocksize, nthreads), len(blocks))
    return _share(run, nthreads) == 0 and not failed[0]


def quick_decode(buf, out, nthreads: int | None, max_nbytes: int) -> np.ndarray | None:
    """Decode a chunk of the common kind (``_chunk_plan.Plan``: no dictionary, special value or
    VL blocks, shuffle, bit-shuffle, bytedelta or DELTA only) checked, walked and inflated in C with
    no Python per block; None for any other chunk, a chunk with anything wrong, one past
    ``max_nbytes``, or an ``out`` that is not a writable contiguous 1-d uint8 array: the
    caller's :class:`~b2store.chunk.decoder.ChunkDecoder` then decodes it or says why not.
    ``out`` may be of any dtype and shape (not of objects): its bytes are decoded into.

    The Python around a chunk's decode (header, layout, walk) cost 40 us hot and 150 us
    after an 8 MB decode had pushed it out of the caches: 10% of an 8 MB chunk's time.
    """
    if not (_state["on"] if _state["ready"] else _ready()):
        return None
    try:
        plan = _chunk_plan.Plan(buf)
    except (TypeError, ValueError, BufferError):
        return None  # not a 1-d byte buffer: the general path takes any contiguous one
    if not plan.ok or plan.nbytes > max_nbytes:
        return None
    if out is None:
        dest = np.empty(plan.nbytes, np.uint8)
    elif (
        isinstance(out, np.ndarray)
        and out.flags.c_contiguous
        and out.flags.writeable
        and out.nbytes == plan.nbytes
        and not out.dtype.hasobject
    ):
        # Any dtype and shape, as the general path's as_uint8 takes it: numcodecs hands its
        # codecs the caller's float or int array (that path cost 42 us against 13 us here).
        dest = out if out.dtype == np.uint8 and out.ndim == 1 else out.reshape(-1).view(np.uint8)
    else:
        return None
    if nthreads is None or nthreads <= 1 or plan.nbytes < 2 * THREAD_BYTES:
        # One thread: one call (a 4 kB chunk's whole decode is 2 us; the Python around
        # the call was a fifth of it).
        return None if plan.run_alone(dest, _scratch()) else dest
    nthreads = min(threads_for(plan.nbytes, nthreads), plan.nblocks, cpu_count())
    # DELTA codes every block against block 0: decoded here first, before threads share
    # the others (a thread handing off its first block would race them).
    if plan.delta and plan.first(dest, _scratch()):
        return None
    if _share(lambda: plan.run(dest, _scratch()), nthreads):
        return None
    return dest


def decode_whole(decoder, dest: np.ndarray, nthreads: int = 1) -> bool:
    """Decode every block of a walked chunk into ``dest`` (``nbytes`` long)."""
    n = decoder.nblocks
    if decoder.pipeline.has_delta:
        # Block 0 first: DELTA codes every other block against it.
        if not decode(decoder, [0], dest, 0):
            return False
        first = dest[: min(decoder.header.effective_blocksize, decoder.header.nbytes)]
        return n == 1 or decode(decoder, np.arange(1, n), dest, 0, first, nthreads)
    return decode(decoder, np.arange(n), dest, 0, None, nthreads)


# --- encoding ---------------------------------------------------------------------------------


class Encoded:
    """The blocks of one chunk, compressed into its bytes (``_encode_blocks.ChunkOut``) by
    :func:`encode`; :meth:`chunk` puts the header and block starts in front."""

    def __init__(self, out, slot: int, sizes: np.ndarray, all_zero: bool):
        self._out, self._slot, self._sizes = out, slot, sizes
        self.sizes: list[int] = sizes.tolist()
        self.all_zero = all_zero

    def chunk(self, header: bytes) -> bytes:
        """The chunk: ``header`` (32 bytes; its cbytes is filled in), the block starts, then
        the blocks (:func:`encode` was given that prefix's length)."""
        return self._out.finish_blocks(header, self._sizes, self._slot)

    def raw(self, header: bytes, items: np.ndarray) -> bytes:
        """The chunk stored raw instead (``header``, then ``items``), in the same bytes."""
        return self._out.raw(header, items)


@functools.lru_cache(maxsize=64)
def _encode_steps(steps: tuple, typesize: int) -> tuple[tuple[int, int], ...]:
    """The filters as the C loop takes them: (id, meta), meta being the bits a truncation
    clears (a tuple: kept and shared, so not to be changed)."""
    from .filters import truncated_bits

    return tuple(
        (int(fid), int(truncated_bits(fid, meta, typesize) if fid in _TRUNCATIONS else meta))
        for fid, meta in steps
    )


class EncodeSteps(NamedTuple):
    """What the C loop is given to encode chunks of one layout, decided once
    (:func:`encode_steps`): writers encode chunk after chunk of one shape."""

    codec: int
    clevel: int
    level: int  # the codec's own level: LZ4's acceleration, Zstd's level
    steps: tuple[tuple[int, int], ...]
    typesize: int
    blocksize: int
    nstreams: int
    nblocks: int
    per_thread: int  # bytes a thread must have before another is worth starting


def encode_steps(job, zstd_levels) -> EncodeSteps | None:
    """The C loop's steps for an encoder job's layout; None when the Python path has to (no
    entry point, a plugin, zlib without zlib-ng)."""
    if not enabled() or job.pipeline.plugins:
        return None
    codec = int(job.codec)
    if not _decode_blocks.encodable(codec):
        return None
    clevel = job.clevel
    if codec == Codec.LZ4:
        level = 10 - clevel
    elif codec == Codec.LZ4HC or codec == Codec.ZLIB:
        level = clevel
    else:
        level = zstd_levels.get(clevel, 0) if codec == Codec.ZSTD else 0
    steps = _encode_steps(tuple(job.pipeline.steps), job.pipeline.typesize)
    per_thread = ENCODE_THREAD_BYTES.get(job.codec, SLOW_ENCODE_THREAD_BYTES)
    return EncodeSteps(
        codec, clevel, level, steps, job.pipeline.typesize, job.blocksize, job.nstreams,
        job.nblocks, per_thread,
    )  # fmt: skip


def encode(job, dictionary, nthreads: int, zstd_levels, prefix: int) -> Encoded | None:
    """Filter and compress the blocks of an encoder job into a chunk with ``prefix`` bytes
    before its first block; None when the Python path has to (no entry point, a dictionary,
    zlib without zlib-ng)."""
    if dictionary is not None:
        return None
    steps = encode_steps(job, zstd_levels)
    return None if steps is None else run_encode(steps, job.src, nthreads, prefix)


def run_encode(e: EncodeSteps, src, nthreads: int, prefix: int) -> Encoded | None:
    """Encode the ``e.nblocks`` blocks of ``src`` (uint8) as ``e`` says, after ``prefix``
    bytes; None when the C loop stops (the Python path then encodes, or says what is wrong)."""
    bs, nblocks = e.blocksize, e.nblocks
    nthreads = min(threads_for(nblocks * bs, nthreads, e.per_thread), nblocks)
    room = bs + 5 * e.nstreams  # the most one block takes
    # One thread writes each block right after the last (slot 0: nothing to pack after);
    # threads finish blocks out of order, so each gets a slot of its own.
    slot = 0 if nthreads == 1 else room
    out = _encode_blocks.ChunkOut(prefix + nblocks * room)
    sizes = np.zeros(nblocks, np.int64)
    counter = np.zeros(1, np.int64)
    flags = np.zeros(2, np.int32)
    with memoryview(out) as whole:
        blocks = whole[prefix:]
        args = (src, bs, e.nstreams, e.steps, e.typesize, e.codec, e.clevel, e.level,
                blocks, slot, sizes, counter, flags)  # fmt: skip
        if nthreads == 1:  # (no closure: a small chunk's encode spent 1 us around its call)
            rc = _encode_blocks.encode(*args, _scratch())
        else:
            rc = _share(lambda: _encode_blocks.encode(*args, _scratch()), nthreads)
        blocks.release()
    if rc or flags[0]:
        return None
    return Encoded(out, slot, sizes, not flags[1])
