"""Fancy indexing (index arrays, masks) of a b2nd array against NumPy on the loaded array.

What it measures
----------------
Float32 arrays (a smooth field plus noise, fixed seed) written by ``b2store.asarray`` (zstd,
clevel 5, shuffle) to files in a temporary directory, then indexed with keys of NumPy's
advanced indexing:

* issue 35's key: 10**6 random indices into the first axis of a (3, 4, 5, 6) array (one
  chunk; a 458 MiB result), and the same at 2.5 * 10**5 indices;
* one index array, several broadcasting together, index arrays beside slices and integers,
  boolean masks (whole-shape and along one axis), keys with ``...`` and ``np.newaxis``, on a
  2-d array of 48 chunks and a 3-d one of 64;
* sparse keys (random points, pixel time series), whose points lie far apart: most of what
  they touch is decoded and thrown away.

Per case, in a fresh process, three contenders alternate over the rounds (one call each per
round, order rotated), each on one thread: NumPy indexing the array loaded beforehand
(``arr[...]``, outside the measure), b2store indexing the opened array (``arr[key]``), and
b2store reading the whole array then NumPy indexing it (``arr[...][key]``: what decoding
costs, the floor wherever a key touches most chunks). Times are medians of the process's CPU
time (the machine is shared: wall time swung twofold between runs). Memory, in a fresh
process per contender: the peak resident size the call adds beyond its result (Linux: the
peak is reset through /proc/self/clear_refs just before it). Reported: the result's MiB,
milliseconds, the time ratio b2store / NumPy (the goal: at most 1.5) and b2store / whole
read, each side's extra memory in MiB, and b2store's over the result's size (the goal: at
most 1). No figure is asserted anywhere.

How to run
----------
    python bench/bench_fancy.py                 # every case, 7 rounds (a few minutes)
    python bench/bench_fancy.py --quick         # smaller keys, 3 rounds
    python bench/bench_fancy.py --only issue    # the cases whose name has this text
    python bench/bench_fancy.py --json out.json # also write the results as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import b2store

ARRAYS = {
    "tiny": ((3, 4, 5, 6), None, None),
    "2-d": ((4000, 3000), (500, 500), (100, 250)),  # 48 MiB, 8 x 6 chunks
    "3-d": ((200, 300, 400), (50, 75, 100), (25, 25, 50)),  # 92 MiB, 4 x 4 x 4 chunks
}


def _rows(rng, n, size):
    return rng.integers(0, n, size)


# name: (array, key maker (rng, shape, scale) -> key); scale is 1, or 1/4 with --quick.
CASES = {
    "issue 35: a[i], 10**6 indices into (3, 4, 5, 6)": (
        "tiny",
        lambda rng, s, q: rng.integers(-3, 3, int(10**6 * q)),
    ),
    "a[i], 2.5*10**5 indices into (3, 4, 5, 6)": (
        "tiny",
        lambda rng, s, q: rng.integers(0, 3, int(250_000 * q)),
    ),
    "2-d a[i], 20,000 rows": ("2-d", lambda rng, s, q: _rows(rng, s[0], int(20_000 * q))),
    "2-d a[i[:, None], j], 3000 x 2000 broadcast": (
        "2-d",
        lambda rng, s, q: (
            _rows(rng, s[0], int(3000 * q))[:, None],
            _rows(rng, s[1], 2000),
        ),
    ),
    "2-d a[mask], half the items": ("2-d", lambda rng, s, q: rng.random(s) < 0.5),
    "2-d a[:, mask], 30 % of the columns": (
        "2-d",
        lambda rng, s, q: (slice(None), rng.random(s[1]) < 0.3),
    ),
    "3-d a[i, :, 7], 10,000 indices": (
        "3-d",
        lambda rng, s, q: (_rows(rng, s[0], int(10_000 * q)), slice(None), 7),
    ),
    "3-d a[..., i], 500 indices": ("3-d", lambda rng, s, q: (..., _rows(rng, s[2], 500))),
    "3-d a[None, i, ..., j, None], 10**5 points": (
        "3-d",
        lambda rng, s, q: (
            None,
            _rows(rng, s[0], int(10**5 * q)),
            ...,
            _rows(rng, s[2], int(10**5 * q)),
            None,
        ),
    ),
    "3-d a[::-2, i, j], negative step, 20,000 points": (
        "3-d",
        lambda rng, s, q: (
            slice(None, None, -2),
            _rows(rng, s[1], int(20_000 * q)),
            _rows(rng, s[2], int(20_000 * q)),
        ),
    ),
    "sparse: 2-d a[i, j], 10**5 random points": (
        "2-d",
        lambda rng, s, q: (_rows(rng, s[0], int(10**5 * q)), _rows(rng, s[1], int(10**5 * q))),
    ),
    "sparse: 3-d a[:, i, j], 1000 pixel series": (
        "3-d",
        lambda rng, s, q: (slice(None), _rows(rng, s[1], 1000), _rows(rng, s[2], 1000)),
    ),
    "sparse: 2-d a[i], 50 rows": ("2-d", lambda rng, s, q: _rows(rng, s[0], 50)),
}

_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import b2store
from b2store.chunk import native
from bench_fancy import CASES, ARRAYS, contenders, run_rounds

native.set_nthreads(1)  # (NumPy's indexing runs one thread)

def status(key):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(key))

path, name, side, repeat, scale = sys.argv[2:7]
which, make = CASES[name]
key = make(np.random.default_rng(35), ARRAYS[which][0], float(scale))
ops = contenders(b2store.open(path), key)
if side == "time":
    print(json.dumps(run_rounds(ops, int(repeat))))
else:
    op = ops[side]
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # the peak (VmHWM) starts again from the resident size now
    rss = status("VmRSS:")
    r = op()
    print(json.dumps({"extra": status("VmHWM:") - rss - r.nbytes, "nbytes": r.nbytes}))
"""


def contenders(arr, key) -> dict:
    """The calls compared: NumPy on the array loaded beforehand, b2store, and b2store's
    whole read indexed by NumPy."""
    loaded = arr[...]
    return {
        "numpy": lambda: loaded[key],
        "b2store": lambda: arr[key],
        "whole": lambda: arr[...][key],
    }


def run_rounds(ops: dict, repeat: int) -> dict:
    """Median milliseconds of CPU time per contender (the process's: the machine is shared,
    and both sides run one thread); one call each per round, order rotated."""
    names = list(ops)
    times = {n: [] for n in names}
    for r in range(repeat):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            t0 = time.process_time()
            ops[name]()
            times[name].append(time.process_time() - t0)
    return {n: 1e3 * statistics.median(ts) for n, ts in times.items()}


def field(shape) -> np.ndarray:
    rng = np.random.default_rng(20240603)
    grids = np.meshgrid(*(np.linspace(0, 1, n, dtype=np.float32) for n in shape), indexing="ij")
    out = np.sin(6 * grids[0])
    for g in grids[1:]:
        out = out * np.cos(4 * g)
    return (out + rng.normal(0, 1e-3, shape)).astype(np.float32)


def measure(path: str, name: str, what: str, repeat: int, scale: float) -> dict:
    """Run ``what`` ("time", or one contender's memory) in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, os.path.dirname(os.path.abspath(__file__)), path, name,
         what, str(repeat), str(scale)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"{name} ({what}): {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7, help="timed rounds per case (default 7)")
    ap.add_argument("--quick", action="store_true", help="keys a quarter the size, 3 rounds")
    ap.add_argument("--only", metavar="TEXT", help="only the cases whose name has TEXT")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()
    repeat, scale = (3, 0.25) if args.quick else (args.repeat, 1.0)
    if not os.path.exists("/proc/self/clear_refs"):
        sys.exit("this benchmark reads its memory figures from /proc (Linux)")
    print(f"b2store {b2store.__version__}, numpy {np.__version__}; {repeat} rounds")
    rows = []
    with tempfile.TemporaryDirectory(prefix="b2store_bench_") as tmp:
        paths = {}
        for which, (shape, chunks, blocks) in ARRAYS.items():
            paths[which] = os.path.join(tmp, f"{which}.b2nd")
            b2store.asarray(field(shape), paths[which], chunks=chunks, blocks=blocks)
        cols = "case | MiB | numpy ms | b2store ms | time ratio | vs whole read"
        print(f"\n| {cols} | numpy extra MiB | b2store extra MiB | extra / result |")
        print("|---|" + "---:|" * 8)
        for name, (which, _) in CASES.items():
            if args.only and args.only not in name:
                continue
            ms = measure(paths[which], name, "time", repeat, scale)
            ref = measure(paths[which], name, "numpy", repeat, scale)
            got = measure(paths[which], name, "b2store", repeat, scale)
            row = {
                "case": name,
                "result MiB": ref["nbytes"] / 2**20,
                "numpy ms": ms["numpy"],
                "b2store ms": ms["b2store"],
                "whole read ms": ms["whole"],
                "time ratio": ms["b2store"] / ms["numpy"],
                "vs whole read": ms["b2store"] / ms["whole"],
                "numpy extra MiB": max(ref["extra"], 0) / 2**20,
                "b2store extra MiB": max(got["extra"], 0) / 2**20,
                "extra / result": max(got["extra"], 0) / max(ref["nbytes"], 1),
            }
            rows.append(row)
            print(
                f"| {name} | {row['result MiB']:.1f} | {ms['numpy']:.1f} | {ms['b2store']:.1f} | "
                f"{row['time ratio']:.2f} | {row['vs whole read']:.2f} | "
                f"{row['numpy extra MiB']:.1f} | {row['b2store extra MiB']:.1f} | "
                f"{row['extra / result']:.2f} |",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"numpy": np.__version__, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
