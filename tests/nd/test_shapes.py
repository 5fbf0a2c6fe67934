"""Default chunk and block shapes: the same as python-blosc2's on this machine and on others."""

from __future__ import annotations

import json
import platform
import random
import subprocess

import numpy as np
import pytest
from helpers import plugin_blocks_fit

from b2store.constants import Codec
from b2store.nd import shapes
from b2store.nd.shapes import DEFAULT_CACHE_SIZES, cache_sizes, default_chunks_blocks

KiB, MiB = 1 << 10, 1 << 20
ITEMSIZES = (1, 2, 4, 8, 16, 300)

SHAPES = [
    (),
    # 1-d, from one item to 10**9 and beyond, primes among them
    (1,),
    (7,),
    (100,),
    (1000,),
    (4096,),
    (32768,),
    (999_983,),
    (10**6,),
    (12_345_678,),
    (2**27,),
    (10**9,),
    (999_999_937,),
    (10**12 + 39,),
    # 2-d .. 6-d
    (10, 10),
    (3, 1000),
    (1000, 3),
    (1000, 1000),
    (31_623, 31_623),
    (7, 999_983),
    (1_000_003, 1_000_033),
    (100, 200, 300),
    (1000, 1000, 1000),
    (2, 3, 5),
    (7, 11, 13, 17),
    (10, 100, 1000, 1000),
    (3, 3, 3, 3, 3),
    (8, 16, 32, 64, 128),
    (5, 7, 11, 13, 17, 19),
    (10, 10, 10, 10, 10, 10**5),
    (1, 1, 1, 1, 1, 1),
    # zeros
    (0,),
    (0, 5),
    (5, 0),
    (10, 0, 10),
    (0, 0, 0, 0),
]

# Machines other than this one: (system, machine, l1, l2, l3).
MACHINES = [
    ("Linux", "x86_64", 32 * KiB, 1 * MiB, 32 * MiB),  # AMD Zen 4
    ("Linux", "x86_64", 48 * KiB, 2 * MiB, 30 * MiB),  # Intel, L2 >= 2 MiB: 4 x L1
    ("Linux", "x86_64", 32 * KiB, 256 * KiB, 1 * MiB),  # python-blosc2's defaults
    ("Linux", "x86_64", 32 * KiB, 1 * MiB, 512 * KiB),  # L3 < L2: L3 ignored
    ("Linux", "aarch64", 64 * KiB, 1 * MiB, 32 * MiB),
    ("Darwin", "arm64", 128 * KiB, 12 * MiB, 1 * MiB),  # Apple M1: no L3, full L2 floor
    ("Windows", "AMD64", 48 * KiB, 1280 * KiB, 24 * MiB),  # not "x86_64": the L1 rule
]


def caches(l1: int, l2: int, l3: int) -> dict[str, int]:
    return {"l1": l1, "l2": l2, "l3": l3}


@pytest.fixture
def host(monkeypatch):
    """Pretend to run on another system and machine (for b2store and python-blosc2 alike)."""

    def pretend(system: str, machine: str) -> None:
        monkeypatch.setattr(platform, "system", lambda: system)
        monkeypatch.setattr(platform, "machine", lambda: machine)

    return pretend


@pytest.fixture
def blosc2():
    return pytest.importorskip("blosc2", reason="python-blosc2 is the reference")


def reference(blosc2, shape, itemsize, chunks=None, blocks=None, codec=None, clevel=5):
    """python-blosc2's answer, or the type of the error it raises."""
    kwargs = {}
    if codec is not None:
        kwargs["cparams"] = blosc2.CParams(codec=blosc2.Codec[codec.name], clevel=clevel)
    try:
        c, b = blosc2.compute_chunks_blocks(
            shape, chunks, blocks, dtype=np.dtype(f"V{itemsize}"), **kwargs
        )
    except ValueError:
        return ValueError
    return tuple(c), tuple(b)


def ours(shape, itemsize, **kwargs):
    try:
        return default_chunks_blocks(shape, itemsize, **kwargs)
    except ValueError:
        return ValueError


# --- this machine -------------------------------------------------------------------------


def test_cache_sizes_are_blosc2s(blosc2):
    info = blosc2.cpu_info
    assert cache_sizes() == {
        "l1": info["l1_data_cache_size"],
        "l2": info["l2_cache_size"],
        "l3": info["l3_cache_size"],
    }


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_default_matches_blosc2_here(blosc2, shape):
    for itemsize in ITEMSIZES:
        expected = reference(blosc2, shape, itemsize)
        assert default_chunks_blocks(shape, itemsize) == expected, itemsize


EXPLICIT = [
    # (shape, chunks, blocks)
    ((1000, 1000), (500, 500), None),
    ((1000, 1000), (100, 100), None),
    ((1000, 1000), (1000, 7), None),
    ((10**6,), (12345,), None),
    ((0, 5), (10, 5), None),  # a 0 in the shape, chunks given: blocks within them
    ((1000, 1000), None, (10, 10)),  # only the block size is kept
    ((1000, 1000), None, (7, 13)),
    ((10**6,), None, (1000,)),
    ((100, 200, 300), None, (2, 3, 5)),
    ((1000, 1000), (100, 100), (10, 10)),  # both: as given
    ((1000, 1000), (100, 100), (100, 100)),
    ((10, 0), (5, 0), (5, 0)),
    ((), (), ()),
    ((), (), None),
    ((), None, ()),
    # errors
    ((1000, 1000), (100, 100), (200, 10)),  # block above chunk
    ((1000, 1000), (100,), None),  # wrong length
    ((1000, 1000), None, (10, 10, 10)),
    ((1000, 1000), (100, 0), None),  # 0 where the shape has none
    ((1000, 1000), None, (0, 10)),
    ((0, 5), (0, 5), None),  # nothing to partition
    ((0, 5), None, (0, 5)),
    ((10**6,), None, (10**6,)),  # 8 MB blocks are fine for itemsize 8, not for 1000
]


@pytest.mark.parametrize("shape, chunks, blocks", EXPLICIT, ids=str)
def test_explicit_matches_blosc2_here(blosc2, shape, chunks, blocks):
    for itemsize in (1, 8, 300, 1000):
        expected = reference(blosc2, shape, itemsize, chunks, blocks)
        assert ours(shape, itemsize, chunks=chunks, blocks=blocks) == expected, itemsize


def test_huge_itemsize_matches_blosc2_here(blosc2):
    # One item above MAX_BLOCKSIZE cannot make a block.
    for itemsize in (10**6, 9 * MiB, 500 * MiB, 600 * MiB):
        for shape in [(), (10,), (3, 1000)]:
            assert ours(shape, itemsize) == reference(blosc2, shape, itemsize), (shape, itemsize)


# --- other machines: python-blosc2 told the same caches and platform ----------------------


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[0]}-{m[1]}-L2={m[3] // KiB}K")
def test_matches_blosc2_elsewhere(blosc2, monkeypatch, host, machine):
    system, arch, l1, l2, l3 = machine
    host(system, arch)
    for key, value in zip(("l1_data_cache_size", "l2_cache_size", "l3_cache_size"), (l1, l2, l3)):
        monkeypatch.setitem(blosc2.cpu_info, key, value)
    for shape in SHAPES:
        for itemsize in ITEMSIZES:
            got = default_chunks_blocks(shape, itemsize, cache_sizes=caches(l1, l2, l3))
            assert got == reference(blosc2, shape, itemsize), (shape, itemsize)
    for shape, chunks, blocks in EXPLICIT:
        got = ours(shape, 8, chunks=chunks, blocks=blocks, cache_sizes=caches(l1, l2, l3))
        assert got == reference(blosc2, shape, 8, chunks, blocks), (shape, chunks, blocks)


@pytest.mark.parametrize(
    "codec", [Codec.ZFP_RATE, Codec.ZFP_PREC, Codec.ZFP_ACC, Codec.NDLZ, Codec.LZ4]
)
def test_stune_codecs_match_blosc2(blosc2, monkeypatch, host, codec):
    # A small L1 on a non-x86 machine lets STUNE's block size show through the cache floor.
    host("Linux", "aarch64")
    monkeypatch.setitem(blosc2.cpu_info, "l1_data_cache_size", 16 * KiB)
    monkeypatch.setitem(blosc2.cpu_info, "l2_cache_size", 1 * MiB)
    monkeypatch.setitem(blosc2.cpu_info, "l3_cache_size", 32 * MiB)
    for clevel in range(10):
        for shape in [(10**6,), (7, 999_983)]:  # python-blosc2 compresses 8 MB for each
            for itemsize in (8, 300):
                got = default_chunks_blocks(
                    shape,
                    itemsize,
                    codec=codec,
                    clevel=clevel,
                    cache_sizes=caches(16 * KiB, MiB, 32 * MiB),
                )
                theirs = reference(blosc2, shape, itemsize, codec=codec, clevel=clevel)
                if plugin_blocks_fit(theirs[1], itemsize, codec.name.lower(), 4):
                    assert got == theirs
                elif itemsize == 300 or len(shape) == 1:  # no ZFP block or NDLZ one fits
                    assert got == theirs
                else:  # ZFP's (1, 2048) cut again (tests/nd/test_plugin_shapes.py)
                    assert plugin_blocks_fit(got[1], itemsize, codec.name.lower(), 4)


def test_random_shapes_match_blosc2(blosc2, monkeypatch, host):
    rng = random.Random(20240806)
    lengths = [1, 2, 3, 7, 13, 100, 128, 1000, 999_983, 10**9 + 7]
    for _ in range(400):
        system, arch, l1, l2, l3 = rng.choice(MACHINES)
        host(system, arch)
        for key, value in zip(
            ("l1_data_cache_size", "l2_cache_size", "l3_cache_size"), (l1, l2, l3)
        ):
            monkeypatch.setitem(blosc2.cpu_info, key, value)
        shape = tuple(
            rng.choice(lengths + [rng.randint(1, 5000), rng.randint(1, 10**7)])
            for _ in range(rng.randint(1, 8))
        )
        itemsize = rng.choice(ITEMSIZES)
        chunks = blocks = None
        if rng.random() < 0.3:
            chunks = tuple(rng.randint(1, s) for s in shape)
        elif rng.random() < 0.3:
            blocks = tuple(rng.randint(1, min(s, 50)) for s in shape)
        got = ours(shape, itemsize, chunks=chunks, blocks=blocks, cache_sizes=caches(l1, l2, l3))
        assert got == reference(blosc2, shape, itemsize, chunks, blocks), (system, arch, l1, l2, l3)


def test_divisor_search_matches_blosc2(blosc2):
    nearest = blosc2.blosc2_ext.nearest_divisor
    rng = random.Random(7)
    for _ in range(2000):
        # compute_partition's strict search: only a divisor above half of b is ever kept
        a = rng.choice([rng.randint(1, 300), rng.randint(1, 10**5), rng.randint(10**5, 10**10)])
        b = rng.randint(1, min(2 * a + 5, 10**5))  # python-blosc2 scans down from b, one by one
        strict = nearest(a, b, strict=True)
        expected = strict if strict > b // 2 else None
        assert shapes._largest_divisor_in(a, b // 2, b) == expected, (a, b)
        # the unbounded search, on smaller numbers
        a = rng.randint(1, 2 * 10**5)
        b = rng.randint(1, 2 * a)
        low = rng.randint(0, b - 1)
        strict = nearest(a, b, strict=True)
        assert (shapes._largest_divisor_in(a, 0, b) or 1) == strict, (a, b)
        expected = strict if strict > low else None
        assert shapes._largest_divisor_in(a, low, b) == expected, (a, low, b)
        if a <= 10**5:
            # b > a: the only way compute_partition could reach the non-strict search
            b = rng.randint(a, 3 * a)
            assert shapes._closest_divisor(a, b) == nearest(a, b), (a, b)


# --- the rules by hand, with the caches and the platform fixed ----------------------------

ZEN4 = caches(32 * KiB, 1 * MiB, 32 * MiB)


def test_by_hand_1d(host):
    host("Linux", "x86_64")
    # Block: max(32 KiB, L2/4 = 256 KiB) = 32768 f8 items; 10**6 = 2**6 * 5**6 has no divisor
    # 32768 but 31250 (> 32768 // 2).  Chunk: 32 blocks = 8e6 B, replaced by L3 = 32 MiB,
    # /4 = 8 MiB, rounded down to 33 blocks = 8250000 B = 1031250 items >= 10**6: all of it.
    assert default_chunks_blocks((10**6,), 8, cache_sizes=ZEN4) == ((10**6,), (31250,))


def test_by_hand_3d(host):
    host("Linux", "x86_64")
    # Block: 256 KiB / 4 = 65536 items, from the last dimension: 300, leaving 218; 200 fits,
    # leaving 1.  Chunk: 8 MiB rounded down to 34 blocks of 240000 B = 2040000 items: 300
    # (6800 left), 200 (34 left), then 100 > 34: the largest divisor of 100 in (17, 34] is 25.
    assert default_chunks_blocks((100, 200, 300), 4, cache_sizes=ZEN4) == (
        (25, 200, 300),
        (1, 200, 300),
    )


def test_by_hand_big_l2_uses_4x_l1(host):
    host("Linux", "x86_64")
    # L2 = 2 MiB: the block floor is 4 x 48 KiB = 196608 B = 49152 items: 300 (163 left),
    # then 200 > 163: the largest divisor of 200 in (81, 163] is 100.  Chunk: L3 30 MiB / 4 =
    # 7864320 B, 65 blocks of 120000 B = 1950000 items: 300, 200, then 32 of 100 -> 25.
    got = default_chunks_blocks((100, 200, 300), 4, cache_sizes=caches(48 * KiB, 2 * MiB, 30 * MiB))
    assert got == ((25, 200, 300), (1, 100, 300))


def test_by_hand_blosc2_defaults_round_chunks_to_blocks(host):
    host("Linux", "x86_64")
    # Block: 256 KiB / 4 = 64 KiB = 8192 items -> divisor 8000.  Chunk: 1 MiB L3 / 4 is below
    # the 4 MiB minimum; 4194304 B is 65 blocks of 64000 B = 520000 items -> divisor 500000,
    # which is 62.5 blocks: rounded up to 63 x 8000 = 504000.
    got = default_chunks_blocks((10**6,), 8, cache_sizes=dict(DEFAULT_CACHE_SIZES))
    assert got == ((504_000,), (8000,))


def test_by_hand_itemsize_300(host):
    host("Linux", "x86_64")
    # Block: 262144 // 300 = 873 items -> the divisor of 10**6 in (436, 873] is 800.  Chunk:
    # 8 MiB is 34 blocks of 240000 B = 27200 items -> divisor 25000 -> 31.25 blocks -> 25600.
    assert default_chunks_blocks((10**6,), 300, cache_sizes=ZEN4) == ((25_600,), (800,))


def test_by_hand_arm_linux_uses_l1(host):
    host("Linux", "aarch64")
    # Block floor is L1 = 32 KiB = 4096 items -> divisor 4000; the chunk still holds 10**6.
    assert default_chunks_blocks((10**6,), 8, cache_sizes=ZEN4) == ((10**6,), (4000,))
    # STUNE gives ZFP at clevel 9 8 x 32 KiB = 256 KiB, above L1: the x86 block again.
    assert default_chunks_blocks((10**6,), 8, codec="zfp_rate", clevel=9, cache_sizes=ZEN4) == (
        (10**6,),
        (31250,),
    )
    # At clevel 0 STUNE says 8 KiB, below L1: no change.
    assert default_chunks_blocks((10**6,), 8, codec=Codec.ZFP_RATE, clevel=0, cache_sizes=ZEN4) == (
        (10**6,),
        (4000,),
    )


def test_by_hand_apple_silicon(host):
    host("Darwin", "arm64")
    # Block: L1 = 128 KiB = 16384 items; 10**8 = 2**8 * 5**8 -> divisor 16000.  Chunk: 32
    # blocks = 4096000 B (L3 1 MiB < L2: ignored), / 4 = 1024000 < L2, and macOS takes all
    # of L2 = 12 MiB: 98 blocks = 1568000 items -> divisor 1562500 -> rounded up to 98 blocks.
    got = default_chunks_blocks((10**8,), 8, cache_sizes=caches(128 * KiB, 12 * MiB, 1 * MiB))
    assert got == ((1_568_000,), (16000,))


def test_by_hand_explicit(host):
    host("Linux", "x86_64")
    # Chunks only: blocks of 32768 items inside (500, 500): 500, then 65 of 500 -> divisor 50.
    assert default_chunks_blocks((1000, 1000), 8, chunks=(500, 500), cache_sizes=ZEN4) == (
        (500, 500),
        (50, 500),
    )
    # Blocks only: their 100 items are re-partitioned over the shape, (10, 10) -> (1, 100).
    assert default_chunks_blocks((1000, 1000), 8, blocks=(10, 10), cache_sizes=ZEN4) == (
        (1000, 1000),
        (1, 100),
    )
    # Both: as given, whatever the caches.
    assert default_chunks_blocks((1000, 1000), 8, chunks=(100, 30), blocks=(7, 30)) == (
        (100, 30),
        (7, 30),
    )


def test_zero_dims_and_0d():
    assert default_chunks_blocks((), 8) == ((), ())
    assert default_chunks_blocks((0,), 1) == ((0,), (0,))
    assert default_chunks_blocks((4, 0, 3), 300) == ((4, 0, 3), (4, 0, 3))
    assert default_chunks_blocks(7, 8, cache_sizes=ZEN4) == ((7,), (7,))


def test_deterministic_whatever_the_detected_caches(monkeypatch, host):
    host("Linux", "x86_64")
    first = default_chunks_blocks((1000, 1000, 100), 8, cache_sizes=ZEN4)
    monkeypatch.setattr(shapes, "_detected_cache_sizes", lambda: (1, 2, 3))
    assert default_chunks_blocks((1000, 1000, 100), 8, cache_sizes=ZEN4) == first


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"shape": (10,), "itemsize": 0}, "itemsize"),
        ({"shape": (10,), "itemsize": 8, "clevel": 10}, "clevel"),
        ({"shape": (10,), "itemsize": 8, "cache_sizes": {"l1": 1, "l2": 2}}, "l3"),
        ({"shape": (10,), "itemsize": 8, "codec": "nosuchcodec"}, "codec"),
        ({"shape": (10,), "itemsize": 8, "chunks": (5,), "blocks": (6,)}, "larger than chunks"),
        ({"shape": (10,), "itemsize": 8, "chunks": (-5,)}, "negative"),
        ({"shape": (10,), "itemsize": 600 * MiB}, "MAX_BLOCKSIZE"),
    ],
)
def test_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        default_chunks_blocks(**kwargs)


# --- cache detection ----------------------------------------------------------------------


def test_sysfs_size_units():
    assert shapes._sysfs_size("48K\n") == 48 * KiB
    assert shapes._sysfs_size("2M\n") == 2 * MiB
    assert shapes._sysfs_size("1G\n") == 1 << 30
    assert shapes._sysfs_size("32768\n") is None  # python-blosc2 only reads K, M and G


def test_lscpu_fallback_divides_by_instances(monkeypatch):
    report = {
        "lscpu": [
            {"field": "L1d cache:", "data": "384 KiB (8 instances)"},
            {"field": "L2 cache:", "data": "10 MiB (8 instances)"},
            {"field": "L3 cache:", "data": "32 MiB (1 instance)"},
        ]
    }

    def run(args, **kwargs):
        return subprocess.CompletedProcess(args, 0, stdout=json.dumps(report), stderr="")

    monkeypatch.setattr(subprocess, "run", run)
    # index99 does not exist: like python-blosc2, ask lscpu
    assert shapes._linux_size(99, "L1d") == 48 * KiB
    assert shapes._linux_size(99, "L2") == 1280 * KiB
    assert shapes._linux_size(99, "L3") == 32 * MiB
    assert shapes._linux_size(99, "L4") is None


def test_lscpu_missing(monkeypatch):
    def run(args, **kwargs):
        raise FileNotFoundError(args[0])

    monkeypatch.setattr(subprocess, "run", run)
    assert shapes._lscpu_size("L2") is None


def test_cache_sizes_shape():
    sizes = cache_sizes()
    assert set(sizes) == {"l1", "l2", "l3"}
    assert all(isinstance(v, int) and v > 0 for v in sizes.values())
    sizes["l1"] = 0  # a copy: the detected value stays
    assert cache_sizes()["l1"] > 0
