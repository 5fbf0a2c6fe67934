"""Memory over many hostile inputs: a fuzz target's process must not grow with the inputs it
has seen (no cache of opened stores or frames, no descriptors or threads left behind), and
one input allocates at most what :data:`FUZZ_LIMITS` lets it ask for.

Python's heap is measured with ``tracemalloc`` (numpy's arrays are traced too); descriptors
and threads by counting them. The bounds are generous: a leak of one small object per input
over thousands of inputs passes them, a frame or store kept per input does not.

Each target is measured in a fresh interpreter, as the fuzzer runs it: in the test process,
threads that earlier tests left running (event loops, dask's pools) allocate while the heap is
traced, and their growth was counted as the target's (7.7 MB once, over the whole suite).
"""

from __future__ import annotations

import gc
import json
import os
import pathlib
import random
import subprocess
import sys
import threading
import tracemalloc

import pytest
from hardening.fuzz_targets import FUZZ_LIMITS, TARGETS, run_one, seeds
from hardening.test_fuzz_quick import mutate
from helpers import corpus_dir

# What the heap may grow by over a run, after warming up (measured: under 60 KiB per 3,000
# inputs for every target; numpy keeps a small cache of freed small blocks).
GROWTH = 1 << 20
# What one input may allocate at its peak: a chunk (or the offsets index) decoded within the
# limit, a copy of it, and the parsing around them (measured: 11.5 MiB with a 4 MiB limit).
PEAK = 3 * FUZZ_LIMITS.max_chunk_nbytes + (4 << 20)


def _fds() -> int | None:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None


# The interpreter's table of interned strings grows by doubling (1.9 MB once, in CI) when the
# strings it has held since its last rebuild fill it: pathlib interns each path part, msgpack
# each map key, so a run of ordinary inputs could see it grow, charged to whichever line interned
# the string that tipped it. CPython rebuilds it at the power of two that holds three times the
# strings alive in it. So a run first keeps this many strings interned and interns throwaway ones
# until the table is rebuilt (seen by tracing): the table then has room for that many more
# without a rebuild, and a rebuild with about as many alive keeps its size, which nets to nothing.
_BALLAST = 200_000


def _rebuild_interned_table() -> list[str]:
    """The ballast strings (keep them alive), once the table was rebuilt; tracing must be on."""
    ballast = [sys.intern(f"b2store-ballast-{i}") for i in range(_BALLAST)]
    for first in range(0, 4 * _BALLAST, 1000):
        tracemalloc.reset_peak()
        now = tracemalloc.get_traced_memory()[0]
        for i in range(first, first + 1000):
            sys.intern(f"b2store-throwaway-{i}")
        if tracemalloc.get_traced_memory()[1] - now > (1 << 20):
            return ballast
    raise AssertionError("the interned strings' table was never rebuilt")


def over_inputs(name: str, n: int, seed: int = 7) -> dict:
    """Over ``n`` mutants of ``name``'s seeds, after warming up: the heap's growth, the
    largest one input's peak, and descriptors and threads before and after."""
    inputs = seeds(name, corpus_dir("generated").parent)
    rng = random.Random(seed)
    # Traced from here on: the table of interned strings is then a traced block, and its
    # rebuild (old block out, new block in) is counted as what it is.
    tracemalloc.start()
    try:
        ballast = _rebuild_interned_table()
        for data in inputs:  # warm up: imports, lazily built tables, the event loop, threads
            run_one(name, data)
        for _ in range(min(n, 300)):
            run_one(name, mutate(rng, rng.choice(inputs)))
        batch = [mutate(rng, rng.choice(inputs)) for _ in range(n)]
        gc.collect()
        fds, threads = _fds(), threading.active_count()
        before = tracemalloc.take_snapshot()
        peak = 0
        for data in batch:
            tracemalloc.reset_peak()
            start = tracemalloc.get_traced_memory()[0]
            run_one(name, data)
            peak = max(peak, tracemalloc.get_traced_memory()[1] - start)
        del data
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    diffs = after.compare_to(before, "lineno")
    growth = sum(s.size_diff for s in diffs)
    del ballast
    return {
        "growth": growth,
        "grew_at": [str(s) for s in diffs[:5]],
        "peak": peak,
        "fds": (fds, _fds()),
        "threads": (threads, threading.active_count()),
    }


def in_child(name: str, n: int) -> dict:
    """:func:`over_inputs` run in a fresh interpreter (this test module's folder on its path)."""
    code = (
        "import json, sys; from hardening.test_fuzz_memory import over_inputs; "
        f"print(json.dumps(over_inputs({name!r}, {n})))"
    )
    tests = str(pathlib.Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (tests, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{name}: the child failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def check(name: str, n: int) -> None:
    corpus_dir("generated")  # skips here, with the reason, where the corpus is absent
    got = in_child(name, n)
    assert got["growth"] < GROWTH, (
        f"{name}: the heap grew by {got['growth']} B over {n} inputs, most at "
        + "; ".join(got["grew_at"])
    )
    assert got["peak"] < PEAK, f"{name}: one input allocated {got['peak']} bytes"
    fds_before, fds_after = got["fds"]
    assert fds_after == fds_before, f"{name}: descriptors left open"
    threads_before, threads_after = got["threads"]
    # The zarr store's reads run in the event loop's worker threads: a pool that may start a
    # few more workers (at most min(32, cpus + 4)), never one per input.
    assert threads_after <= threads_before + 8, f"{name}: threads left running"


@pytest.mark.slow  # (a minute of the quick suite; the slow test below covers the store too)
def test_the_zarr_store_target_does_not_grow_over_thousands_of_inputs():
    check("zarrstore", 3000)


# The quick suite keeps the cheap targets; the trees' (whole .b2d/.b2z opened per input) and
# the codec pipeline's (a Zarr array made per input: 10 s for 400) run in the slow suite, here
# and with many more inputs below.
_QUICK_TARGETS = [
    pytest.param(n, marks=pytest.mark.slow) if n in ("b2d", "b2z", "pipeline") else n
    for n in sorted(set(TARGETS) - {"zarrstore"})
]


@pytest.mark.parametrize("name", _QUICK_TARGETS)
def test_no_target_grows_over_its_inputs(name):
    check(name, 400)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_no_target_grows_over_many_inputs(name):
    check(name, 5000)
