"""Writes to disk under each sync setting of b2store against python-blosc2 (which never syncs).

Three cases, each timed in rounds that rotate the contenders (medians, same run):

- a whole-array write: ``asarray(x, path)`` of a 64 MiB float32 field;
- a job of small changes: 20 writes of one row into an open array (one commit each, each
  re-encoding the 8 MiB chunk it falls in);
- the same job writing one constant row 16 times: the two chunks it falls in soon hold one
  value, stored as special chunks (no data, only the value), decoded and found constant again
  at each write.

b2store's settings (``b2store.set_sync``): ``commit`` syncs each change before it returns (the
default), ``close`` syncs once at close, ``none`` never syncs, as python-blosc2. Run from the
checkout: ``python bench/bench_sync.py [--quick]``.
"""

from __future__ import annotations

import json
import os
import tempfile

import blosc2
import numpy as np
from _common import parse_args, run_case, versions

import b2store
from b2store.chunk import native

MODES = ("commit", "close", "none")


def _whole(x: np.ndarray, where: str, nthreads: int) -> dict:
    def ours(mode):
        def write():
            b2store.set_sync(mode)
            b2store.asarray(x, os.path.join(where, f"ours_{mode}.b2nd"), mode="w").close()

        return write

    def theirs():
        blosc2.asarray(x, urlpath=os.path.join(where, "theirs.b2nd"), mode="w")

    funcs = {f"b2store {m}": ours(m) for m in MODES}
    funcs["python-blosc2"] = theirs
    return funcs


def _small_changes(x: np.ndarray, where: str, rows: int, constant: bool = False) -> dict:
    # Values like the data's, unless ``constant``: a constant row soon makes whole chunks
    # constant, which both libraries store as special chunks without compressing anything.
    new_rows = np.full_like(x[:rows], 1.0) if constant else x[:rows] + np.float32(0.5)
    name = "constant" if constant else "edit"
    ours_paths = {m: os.path.join(where, f"{name}_{m}.b2nd") for m in MODES}
    theirs_path = os.path.join(where, f"{name}_theirs.b2nd")
    for path in ours_paths.values():
        b2store.asarray(x, path, mode="w", chunks=(8, 512, 512)).close()
    blosc2.asarray(x, urlpath=theirs_path, mode="w", chunks=(8, 512, 512))

    def ours(mode):
        def edit():
            b2store.set_sync(mode)
            arr = b2store.open(ours_paths[mode], mode="a")
            for i in range(rows):
                arr[i] = new_rows[i]
            arr.close()

        return edit

    def theirs():
        arr = blosc2.open(theirs_path, mode="a")
        for i in range(rows):
            arr[i] = new_rows[i]
        del arr

    funcs = {f"b2store {m}": ours(m) for m in MODES}
    funcs["python-blosc2"] = theirs
    return funcs


def main() -> None:
    args, repeat = parse_args(__doc__, 7, "3 rounds")
    rng = np.random.default_rng(1)
    x = (np.cumsum(rng.normal(size=(64, 512, 512)), axis=2) * 0.01).astype("f4")
    results = {"versions": versions(), "cases": {}}
    print(json.dumps(results["versions"]))
    with tempfile.TemporaryDirectory(dir=os.environ.get("B2STORE_BENCH_DIR")) as where:
        for nthreads in (1, 2):
            native.set_nthreads(nthreads)
            blosc2.set_nthreads(nthreads)
            os.environ["B2STORE_NTHREADS"] = str(nthreads)
            cases = {
                f"whole 64 MiB write, {nthreads} thread(s)": (_whole(x, where, nthreads), x.nbytes),
                f"20 row writes (20 commits), {nthreads} thread(s)": (
                    _small_changes(x, where, 20),
                    20 * x[0].nbytes,
                ),
                f"16 constant-row writes (16 commits), {nthreads} thread(s)": (
                    _small_changes(x, where, 16, constant=True),
                    16 * x[0].nbytes,
                ),
            }
            for name, (funcs, nbytes) in cases.items():
                speeds = run_case(funcs, nbytes, repeat)
                base = speeds["python-blosc2"]
                results["cases"][name] = speeds
                print(f"\n{name} (median ms; ratio to python-blosc2, higher is faster)")
                for who, gbps in speeds.items():
                    print(f"  {who:16s} {nbytes / gbps / 1e6:9.1f} ms  {gbps / base:5.2f}x")
    b2store.set_sync(None)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
