"""The chunk and block shapes python-blosc2 4.14.1 picks for an array, and the caches behind them.

python-blosc2 chooses ``chunks`` and ``blocks`` from the CPU caches of the machine it runs on,
so the same call gives different shapes on different computers. The rules, as
``blosc2.compute_chunks_blocks`` applies them:

1. A shape with a 0 and neither ``chunks`` nor ``blocks`` given: ``chunks = blocks = shape``.
   When both are given they are checked (same length as the shape, no 0 where the shape has
   none, no block dimension above its chunk dimension) and returned as they are.
2. The block size in bytes. With ``blocks`` given it is ``prod(blocks) * itemsize`` (and the
   given block *shape* is then thrown away: only its size is kept). Otherwise it starts at
   32 KiB, or, with the NDLZ or a ZFP codec or the NDCELL or NDMEAN filter, at the block size
   c-blosc2's STUNE picks for 8 MiB of items with the same settings (the filters other than
   SHUFFLE and BITSHUFFLE left out): 32 KiB scaled by the compression level (x1/4 at 0, x1/2
   at 1, x1 at 2, x2 at 3, x4 at 4-5, x8 at 6-9), more for the codecs that like large blocks,
   or its own size for split blocks (:func:`b2store.chunk.tuning.compute_blocksize`). It is
   then raised to a floor: on x86_64 a quarter of L2, or 4 x L1 when L2 is 2 MiB or more; on
   any other machine L1. Finally at least ``itemsize``. Above ``MAX_BLOCKSIZE`` is an error.
3. ``blocks = partition(blocksize // itemsize, chunks if given else shape)``.
4. Without ``chunks``: the chunk size in bytes starts at 32 blocks (if that stays below
   64 MiB, else one block), becomes L3 when L3 > L2, is divided by 4, is raised to L2 / 4
   (macOS: to L2) when L2 is larger, then clamped to [4 MiB, ``MAX_BUFFERSIZE``] and to at
   least one block, and rounded down to whole blocks. ``chunks = partition(chunksize //
   itemsize, shape, minimum=blocks)``, each dimension then rounded up to a multiple of the
   block dimension but not above the shape.
5. b2store's own rule: where c-blosc2's plugins among the settings cannot code the blocks of
   step 3 (ZFP wants every block side at least 4; NDCELL a whole cell's items in a block;
   NDMEAN a first block side of at least its cell, or else no other side longer than the
   cell), the blocks are cut again, as in step 3 but with those bounds on each side, from
   as many items (at least a cell's). python-blosc2 keeps its blocks and fails to write: the
   block it picks depends on the machine's caches, so the same call worked on one machine
   and failed on another. Its blocks are kept wherever the plugins code them, and where no
   block fits (a ZFP array with a side under 4) the writer refuses the array, saying why.

``partition(nitems, maxshape, minimum)`` fills dimensions from the last one: a dimension
that fits in the items left takes its full length; one that does not takes the items left
(at least its minimum), snapped down to the largest divisor of its length if there is one
above half of that value. The items left are then divided by what the dimension took.

The cache sizes come from where python-blosc2 reads them (``blosc2.core.get_cpu_info``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import math
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..chunk.encoder import resolve_filters, resolve_splitmode
from ..chunk.params import parse_b2nd_codec
from ..chunk.plugins import PLUGIN_FILTERS, block_rules, fits_block
from ..chunk.tuning import compute_blocksize
from ..constants import MAX_BLOCKSIZE, MAX_BUFFERSIZE, Codec, Filter

__all__ = ["DEFAULT_CACHE_SIZES", "blocks_of_blocksize", "cache_sizes", "default_chunks_blocks"]

KiB = 1 << 10
MiB = 1 << 20

# What python-blosc2 assumes for any level it cannot detect.
DEFAULT_CACHE_SIZES: Mapping[str, int] = {"l1": 32 * KiB, "l2": 256 * KiB, "l3": 1 * MiB}

# Codecs and filters whose default block size python-blosc2 asks STUNE for (it compresses
# 8 MiB of zeros and takes the block size of the chunk), instead of taking 32 KiB.
_STUNE_CODECS = frozenset({Codec.NDLZ, Codec.ZFP_ACC, Codec.ZFP_PREC, Codec.ZFP_RATE})
_STUNE_PROBE_NBYTES = 8 * MiB
# The filters python-blosc2 keeps in that probe; it empties the other slots.
_PROBE_FILTERS = frozenset({Filter.SHUFFLE, Filter.BITSHUFFLE})


# --- cache sizes ------------------------------------------------------------------------


def _sysfs_size(text: str) -> int | None:
    # python-blosc2 only understands a K, M or G suffix; anything else counts as undetected.
    units = {"K": KiB, "M": MiB, "G": 1 << 30}
    text = text.rstrip("\n")
    if text[-1:] in units and text[:-1].isdigit():
        return int(text[:-1]) * units[text[-1]]
    return None


def _lscpu_size(field: str) -> int | None:
    """Size of one instance of a cache per ``lscpu --json`` (e.g. ``"64 KiB (2 instances)"``)."""
    try:
        out = subprocess.run(["lscpu", "--json"], capture_output=True, check=True, text=True).stdout
        entries = json.loads(out)["lscpu"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError):
        return None
    units = {"KiB": KiB, "MiB": MiB, "GiB": 1 << 30}
    for entry in entries:
        if entry.get("field") != f"{field} cache:":
            continue
        try:
            size_unit, instances = entry["data"].split(" (")
            size, unit = size_unit.split()
            return int(size) * units[unit] // int(instances.split()[0])
        except (ValueError, KeyError, IndexError, ZeroDivisionError):
            return None
    return None


def _linux_size(index: int, lscpu_field: str) -> int | None:
    # python-blosc2 takes cpu0's cache index0 as L1 data, index2 as L2 and index3 as L3 by
    # their position, whatever their "level" and "type" files say; only when the file is
    # missing does it ask lscpu (which divides the total by the number of instances).
    try:
        with open(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size") as f:
            return _sysfs_size(f.read())
    except FileNotFoundError:
        return _lscpu_size(lscpu_field)
    except (OSError, ValueError):
        return None


def _darwin_size(level: int) -> int | None:
    # The performance cluster's caches; Intel Macs have no perflevel0 and get the defaults.
    name = "hw.perflevel0.l1dcachesize" if level == 1 else f"hw.perflevel0.l{level}cachesize"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        size, length = ctypes.c_size_t(0), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
        libc.sysctlbyname(name.encode("ascii"), ctypes.byref(size), ctypes.byref(length), None, 0)
    except (OSError, AttributeError):
        return None
    return size.value or None


@functools.lru_cache(maxsize=1)
def _detected_cache_sizes() -> tuple[int, int, int]:
    sizes = dict(DEFAULT_CACHE_SIZES)
    system = platform.system()
    if sys.platform == "emscripten" or platform.machine().startswith("wasm"):
        found: dict[str, int | None] = {}
    elif system == "Linux":
        found = {
            "l1": _linux_size(0, "L1d"),
            "l2": _linux_size(2, "L2"),
            "l3": _linux_size(3, "L3"),
        }
    elif system == "Darwin":
        found = {"l1": _darwin_size(1), "l2": _darwin_size(2), "l3": _darwin_size(3)}
    else:
        # python-blosc2 asks Windows (GetLogicalProcessorInformationEx); b2store does not.
        found = {}
    sizes.update({k: v for k, v in found.items() if v is not None})
    return sizes["l1"], sizes["l2"], sizes["l3"]


def cache_sizes() -> dict[str, int]:
    """The L1 data, L2 and L3 cache sizes in bytes that python-blosc2 sees on this machine.

    Linux: ``/sys/devices/system/cpu/cpu0/cache/index{0,2,3}/size``, else ``lscpu --json``
    (size per instance); macOS: ``sysctl hw.perflevel0.*``. A level that cannot be found
    keeps python-blosc2's default (32 KiB, 256 KiB, 1 MiB). Detected once, on first use.

    Returns
    -------
    dict
        ``{"l1": bytes, "l2": bytes, "l3": bytes}``
    """
    l1, l2, l3 = _detected_cache_sizes()
    return {"l1": l1, "l2": l2, "l3": l3}


def _host() -> tuple[str, str]:
    """(system, machine): the rules treat x86_64 and macOS apart."""
    return platform.system(), platform.machine()


# --- partitions ---------------------------------------------------------------------------


def _largest_divisor_in(a: int, low: int, high: int) -> int | None:
    """The largest divisor of ``a`` in ``(low, high]``, or None; ``0 <= low < high``."""
    if high >= a:
        return a if a > low else None
    # Three ways to look, each cheap where the others are not: the candidates downwards,
    # their cofactors ``a // d`` upwards, or every divisor pair up to sqrt(a). A prime
    # length of 10**9 costs at most ~3e4 steps instead of ~1e6.
    down = high - low
    up = a // (low + 1) - a // high + 1
    root = math.isqrt(a)
    if down <= min(up, root):
        for d in range(high, low, -1):
            if a % d == 0:
                return d
        return None
    if up <= root:
        q = -(-a // high)  # the smallest cofactor whose divisor is <= high
        while q * low < a:  # a // q > low
            if a % q == 0:
                return a // q
            q += 1
        return None
    best = None
    for i in range(1, root + 1):
        if a % i == 0:
            for d in (i, a // i):
                if low < d <= high and (best is None or d > best):
                    best = d
    return best


def _closest_divisor(a: int, b: int) -> int:
    """python-blosc2's non-strict ``nearest_divisor`` (only reached with ``b > a``)."""
    if a > 100_000:
        return _largest_divisor_in(a, 0, b) or 1
    # Its compiled version visits the divisors in the order 1, a, 2, a/2, 3, ...; a later
    # one wins only if strictly closer, and none counts that is a or more away from b.
    best, best_diff = 1, a
    i = 1
    while i * i <= a:
        if a % i == 0:
            for d in (i, a // i):
                if abs(d - b) < best_diff:
                    best, best_diff = d, abs(d - b)
        i += 1
    return best


def _partition(
    nitems: int, maxshape: Sequence[int], minimum: Sequence[int] | None = None
) -> list[int]:
    if 0 in maxshape:
        raise ValueError(f"cannot partition the shape {tuple(maxshape)}: it has a 0 dimension")
    if nitems == 0:
        raise ValueError("cannot partition into parts of 0 items")
    if minimum is None:
        minimum = [1] * len(maxshape)
    part = [1] * len(maxshape)
    left = nitems
    for i in reversed(range(len(maxshape))):
        if left <= 1:
            break
        size, least = maxshape[i], minimum[i]
        n = max(size, least)
        if n <= left:
            if size % n:
                n = _closest_divisor(size, n)
        else:
            n = max(left, least)
            if size % n:
                n = _largest_divisor_in(size, n // 2, n) or n
        part[i] = n
        left //= n
    return part


# --- sizes --------------------------------------------------------------------------------


def _codec_id(codec: object) -> int | None:
    if codec is None:
        return None
    # The writers' own parsing: a misspelt or unwritable name is refused here as they refuse
    # it (this runs before them, when they ask for default shapes).
    value = codec if isinstance(codec, str) else int(getattr(codec, "value", codec))
    return int(parse_b2nd_codec(value))  # (blosc2.Codec is a plain Enum: its value)


@dataclass(frozen=True)
class _Coding:
    """The compression settings the default shapes depend on, resolved."""

    codec: Codec
    clevel: int
    codec_meta: int
    filters: tuple[int, ...]
    filters_meta: tuple[int, ...]
    splitmode: int

    @property
    def stune(self) -> bool:
        return self.codec in _STUNE_CODECS or any(f in PLUGIN_FILTERS for f in self.filters)

    def fits(self, itemsize: int, blocks: Sequence[int]) -> bool:
        """Whether c-blosc2's plugins among these settings, if any, code such blocks."""
        if not self.stune:  # (its codecs and filters are the plugins with block rules)
            return True
        return fits_block(
            self.codec, self.codec_meta, self.filters, self.filters_meta, itemsize, blocks
        )


def _coding(codec, clevel: int, codec_meta: int, filters, filters_meta, splitmode) -> _Coding:
    if filters is None:  # python-blosc2's default (b2store's too, but for ZFP: no matter)
        filters, filters_meta = [Filter.SHUFFLE], None
    ids, metas = resolve_filters(filters, filters_meta)
    return _Coding(
        codec=Codec(_codec_id(codec) if codec is not None else Codec.ZSTD),
        clevel=clevel,
        codec_meta=int(codec_meta),
        filters=ids,
        filters_meta=metas,
        splitmode=resolve_splitmode(splitmode),
    )


def _default_blocksize(itemsize: int, coding: _Coding, caches: Mapping[str, int]) -> int:
    if coding.stune:
        nbytes = _STUNE_PROBE_NBYTES // itemsize * itemsize
        probe = [f if f in _PROBE_FILTERS else Filter.NOFILTER for f in coding.filters]
        blocksize = compute_blocksize(
            nbytes, itemsize, coding.clevel, coding.codec, probe, coding.splitmode
        )
    else:
        blocksize = 32 * KiB
    if _host()[1] == "x86_64":
        floor = caches["l1"] * 4 if caches["l2"] >= 2 * MiB else caches["l2"] // 4
    else:
        floor = caches["l1"]
    return max(blocksize, floor, itemsize)


def _default_chunksize(blocksize: int, caches: Mapping[str, int]) -> int:
    chunksize = blocksize * 32 if blocksize * 32 < 64 * MiB else blocksize
    l2, l3 = caches["l2"], caches["l3"]
    if 0 < l3 and l2 < l3:
        chunksize = l3
    # Room in L3 for three operands and a result.
    chunksize //= 4
    if l2 > chunksize:
        chunksize = l2 if _host()[0] == "Darwin" else max(l2 // 4, chunksize)
    chunksize = min(max(chunksize, 4 * MiB), MAX_BUFFERSIZE)
    chunksize = max(chunksize, blocksize)
    return chunksize // blocksize * blocksize


# --- blocks the plugins code -------------------------------------------------------------


def _partition_within(
    nitems: int, maxshape: Sequence[int], least: Sequence[int], most: Sequence[int]
) -> list[int]:
    """:func:`_partition` with bounds on each side: dimensions are filled from the last as
    python-blosc2 fills them, each keeping room for the least sides of those before it."""
    part = list(least)
    left = nitems
    for i in reversed(range(len(maxshape))):
        size, lo, hi = maxshape[i], least[i], most[i]
        room = left // math.prod(least[:i])
        n = hi if hi <= room else max(room, lo)
        if size % n:
            n = _largest_divisor_in(size, max(n // 2, lo - 1), n) or n
        part[i] = n
        left //= n
    return part


def _fitted_blocks(
    blocks: tuple[int, ...], nitems: int, maxshape: Sequence[int], itemsize: int, coding: _Coding
) -> tuple[int, ...]:
    """Blocks of about ``nitems`` items that the plugins among ``coding`` code, where
    python-blosc2's ``blocks`` are ones they fail on; ``blocks`` where none fit (the writer
    then refuses them, saying why).

    Only blocks that their own size derives (:func:`_derived`) are taken: a reader that has
    no block shape but the chunk's block size finds them again."""
    least, most, items = block_rules(
        coding.codec, coding.codec_meta, coding.filters, coding.filters_meta, maxshape
    )
    if any(lo > hi for lo, hi in zip(least, most)):
        return blocks
    # Snapping to divisors may leave fewer items than a cell needs: then twice as many.
    nitems = max(nitems, items)
    while nitems * itemsize <= MAX_BLOCKSIZE:
        fitted = tuple(_partition_within(nitems, maxshape, least, most))
        if coding.fits(itemsize, fitted):
            derived = _derived(math.prod(fitted), maxshape, itemsize, coding)
            if derived is not None and derived == _derived(
                math.prod(derived), maxshape, itemsize, coding
            ):
                return derived
        if nitems >= math.prod(maxshape):
            break
        nitems *= 2
    return blocks


def _derived(
    nitems: int, maxshape: Sequence[int], itemsize: int, coding: _Coding
) -> tuple[int, ...] | None:
    """The blocks of ``nitems`` items the defaults give inside ``maxshape``: python-blosc2's
    partition where the plugins among ``coding`` code it, else the partition within their
    bounds; None where neither codes."""
    blocks = tuple(_partition(nitems, maxshape))
    if coding.fits(itemsize, blocks):
        return blocks
    least, most, _ = block_rules(
        coding.codec, coding.codec_meta, coding.filters, coding.filters_meta, maxshape
    )
    if any(lo > hi for lo, hi in zip(least, most)):
        return None
    blocks = tuple(_partition_within(nitems, maxshape, least, most))
    return blocks if coding.fits(itemsize, blocks) else None


def blocks_of_blocksize(
    chunks: Sequence[int],
    itemsize: int,
    blocksize: int,
    *,
    codec: Codec | int | str | None = None,
    clevel: int = 5,
    filters: Sequence[str | int] | None = None,
    filters_meta: Sequence[int] | None = None,
    splitmode: str | int = "auto",
    codec_meta: int = 0,
) -> tuple[int, ...] | None:
    """The block shape python-blosc2's default gives chunks of ``chunks`` whose blocks are
    ``blocksize`` bytes, or None where no default gives blocks of that size.

    The default's only tie to the machine is the block size it aims at: the shape follows
    from the size by a fixed partition, and partitioning again by the size of the blocks
    found gives them back (the blocks cut again for the plugins are chosen so that it does,
    :func:`_fitted_blocks`). So a chunk's own ``blocksize`` names its block shape on any
    machine, where the writer's caches do not.
    """
    chunks = tuple(int(c) for c in chunks)
    itemsize = int(itemsize)
    if itemsize < 1 or blocksize < itemsize or blocksize % itemsize or 0 in chunks:
        return None
    coding = _coding(codec, clevel, codec_meta, filters, filters_meta, splitmode)
    nitems = blocksize // itemsize
    blocks = _derived(nitems, chunks, itemsize, coding)
    return blocks if blocks is not None and math.prod(blocks) == nitems else None


# --- the entry point ----------------------------------------------------------------------


def _as_dims(name: str, value: int | Sequence[int], ndim: int) -> tuple[int, ...]:
    dims = (int(value),) if isinstance(value, int) else tuple(int(v) for v in value)
    if len(dims) != ndim:
        raise ValueError(f"{name} {dims} should have as many dimensions as the shape ({ndim})")
    if any(d < 0 for d in dims):
        raise ValueError(f"{name} {dims} has a negative dimension")
    return dims


def default_chunks_blocks(
    shape: Sequence[int],
    itemsize: int,
    *,
    chunks: int | Sequence[int] | None = None,
    blocks: int | Sequence[int] | None = None,
    codec: Codec | int | str | None = None,
    clevel: int = 5,
    filters: Sequence[str | int] | None = None,
    filters_meta: Sequence[int] | None = None,
    splitmode: str | int = "auto",
    codec_meta: int = 0,
    cache_sizes: Mapping[str, int] | None = None,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ``(chunks, blocks)`` python-blosc2 4.14.1 picks for an array of this shape and itemsize.

    Parameters
    ----------
    shape
        The array shape (``()`` for 0-d).
    itemsize
        Bytes per item (any positive size, 300 as well as 8).
    chunks, blocks
        What the caller asked for: both are checked and returned as given; with ``chunks``
        alone, blocks are computed inside them; with ``blocks`` alone only their number of
        items is kept (python-blosc2 re-partitions it over the shape).
    codec, clevel, filters, filters_meta, splitmode, codec_meta
        The compression the array is written with, as the writers take it (``None``:
        python-blosc2's defaults, ZSTD and SHUFFLE). They matter where python-blosc2 tunes
        the block size with STUNE (the NDLZ and ZFP codecs, the NDCELL and NDMEAN filters),
        and where c-blosc2's plugins among them cannot code python-blosc2's blocks: those
        blocks are then re-cut to ones they code (see the module's rule 5).
    cache_sizes
        ``{"l1": bytes, "l2": bytes, "l3": bytes}`` instead of the detected ones
        (:func:`cache_sizes`), for results that do not depend on this machine's caches. The
        machine type still counts: x86_64 and macOS have rules of their own.

    Returns
    -------
    tuple
        ``(chunks, blocks)``, two tuples of ``len(shape)`` ints.

    Raises
    ------
    ValueError
        Inconsistent ``chunks``/``blocks``, a block larger than ``MAX_BLOCKSIZE``, or a 0
        that python-blosc2 cannot partition; unknown codec, filters or split mode.

    Examples
    --------
    >>> default_chunks_blocks((0, 5), 8)
    ((0, 5), (0, 5))
    >>> default_chunks_blocks((100, 100), 4, chunks=(50, 50), blocks=(10, 10))
    ((50, 50), (10, 10))
    """
    if isinstance(shape, int):
        shape = (shape,)
    ndim = len(shape)
    shape = _as_dims("shape", shape, ndim)
    itemsize = int(itemsize)
    if itemsize < 1:
        raise ValueError(f"itemsize must be positive, not {itemsize}")
    if not 0 <= clevel <= 9:
        raise ValueError(f"clevel must be in 0..9, not {clevel}")
    coding = _coding(codec, clevel, codec_meta, filters, filters_meta, splitmode)
    if chunks is not None:
        chunks = _as_dims("chunks", chunks, ndim)
        if any(c == 0 and s != 0 for c, s in zip(chunks, shape)):
            raise ValueError(f"chunks {chunks} have a 0 where the shape {shape} has none")
    if blocks is not None:
        blocks = _as_dims("blocks", blocks, ndim)
        if any(b == 0 and s != 0 for b, s in zip(blocks, shape)):
            raise ValueError(f"blocks {blocks} have a 0 where the shape {shape} has none")

    if chunks is None and blocks is None and 0 in shape:
        return shape, shape
    if chunks is not None and blocks is not None:
        if any(b > c for b, c in zip(blocks, chunks)):
            raise ValueError(f"blocks {blocks} cannot be larger than chunks {chunks}")
        return chunks, blocks

    if cache_sizes is None:
        l1, l2, l3 = _detected_cache_sizes()
        caches: Mapping[str, int] = {"l1": l1, "l2": l2, "l3": l3}
    else:
        missing = {"l1", "l2", "l3"} - set(cache_sizes)
        if missing:
            raise ValueError(f"cache_sizes lacks {sorted(missing)}")
        caches = {k: int(cache_sizes[k]) for k in ("l1", "l2", "l3")}

    if blocks is None:
        blocksize = _default_blocksize(itemsize, coding, caches)
    else:
        blocksize = math.prod(blocks) * itemsize
    if blocksize > MAX_BLOCKSIZE:
        raise ValueError(f"a block of {blocksize} bytes exceeds MAX_BLOCKSIZE ({MAX_BLOCKSIZE})")
    within = shape if chunks is None else chunks
    blocks = tuple(_partition(blocksize // itemsize, within))
    if not coding.fits(itemsize, blocks):
        blocks = _fitted_blocks(blocks, blocksize // itemsize, within, itemsize, coding)

    if chunks is None:
        blocksize = math.prod(blocks) * itemsize
        chunksize = _default_chunksize(blocksize, caches)
        grown = _partition(chunksize // itemsize, shape, blocks)
        # The divisor snapping may leave a chunk dimension that is no multiple of the block.
        chunks = tuple(min(s, -(-c // b) * b) for s, c, b in zip(shape, grown, blocks))
    return chunks, blocks
