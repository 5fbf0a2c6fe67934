"""One thread against two, on chunks of 16 kB to 4 MB: where a second thread pays.

What it measures
----------------
A float32 random walk (fixed seed) is cut into chunks of 16 kB to 4 MB, each of eight blocks
or more, and compressed with python-blosc2 (LZ4 and Zstd, shuffle, clevel 5). On the same
chunks in the same run it times:

* decoding: ``b2store.decode_chunk(chunk, out, nthreads=n)`` and
  ``blosc2.decompress2(chunk, dst=out)`` with ``blosc2.set_nthreads(n)``, n = 1 and 2;
* encoding: ``b2store.encode_chunk(data, nthreads=n)`` and ``blosc2.compress2(data,
  nthreads=n)`` with the same codec, filter, level and block size.

Each contender is called enough times per round to take about a millisecond; the rounds are
interleaved and their order rotated. Reported: median microseconds per chunk, and the speed of
two threads over one (``2t/1t``: above 1, the second thread paid) for each library. b2store
gives a chunk a second thread only where each thread has enough of it to do
(``b2store.chunk.native.threads_for``); python-blosc2 whenever a chunk has two blocks.
No timed assertions: the numbers are informative.

How to run
----------
    python bench/bench_threads.py                 # 9 rounds (about a minute)
    python bench/bench_threads.py --quick         # smoke run: 3 rounds, fewer sizes
    python bench/bench_threads.py --json out.json # also write the results as JSON
"""

from __future__ import annotations

import json

import blosc2
import numpy as np
from _common import parse_args, run_case, versions

import b2store

SIZES = [(16 << 10, 2 << 10), (64 << 10, 8 << 10), (256 << 10, 32 << 10), (1 << 20, 64 << 10),
         (4 << 20, 256 << 10)]  # fmt: skip
CODECS = {"lz4": blosc2.Codec.LZ4, "zstd": blosc2.Codec.ZSTD}


def _repeated(f, reps: int):
    def call():
        for _ in range(reps):
            f()

    return call


def _set_threads(n: int, f):
    def call():
        blosc2.set_nthreads(n)
        f()

    return call


def case(data: np.ndarray, blocksize: int, codec: str, repeat: int) -> dict:
    """The eight timings of one chunk size and codec, in microseconds per chunk."""
    nbytes = data.nbytes
    kw = {"typesize": 4, "codec": CODECS[codec], "clevel": 5, "blocksize": blocksize}
    chunk = blosc2.compress2(data, nthreads=1, **kw)
    out = np.empty(nbytes, np.uint8)
    assert np.array_equal(b2store.decode_chunk(chunk, nthreads=2).view(np.float32), data)
    ours = {"codec": codec, "clevel": 5, "blocksize": blocksize, "filters": ["shuffle"]}
    assert np.array_equal(
        b2store.decode_chunk(b2store.encode_chunk(data, nthreads=2, **ours)).view(np.float32),
        data,
    )
    reps = max(1, (1 << 20) // nbytes)
    funcs = {}
    for n in (1, 2):
        funcs[f"decode b2store {n}t"] = lambda n=n: b2store.decode_chunk(chunk, out, nthreads=n)
        funcs[f"decode blosc2 {n}t"] = _set_threads(n, lambda: blosc2.decompress2(chunk, dst=out))
        funcs[f"encode b2store {n}t"] = lambda n=n: b2store.encode_chunk(data, nthreads=n, **ours)
        funcs[f"encode blosc2 {n}t"] = lambda n=n: blosc2.compress2(data, nthreads=n, **kw)
    got = run_case({k: _repeated(f, reps) for k, f in funcs.items()}, reps, repeat)
    return {k: 1e-9 / v * 1e6 for k, v in got.items()}  # run_case: calls / s / 1e9


def main() -> None:
    args, repeat = parse_args(__doc__, 9, "3 rounds, fewer sizes")
    print("versions:", ", ".join(f"{k} {v}" for k, v in versions().items()))
    rng = np.random.default_rng(7)
    rows = []
    print("\n| chunk | blocks | codec | what | b2store 1t / 2t us | 2t/1t | blosc2 1t / 2t us "
          "| 2t/1t | b2store / blosc2 at 2t |")  # fmt: skip
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    for nbytes, blocksize in SIZES[1::2] if args.quick else SIZES:
        data = (np.cumsum(rng.normal(size=nbytes // 4)) * 100).astype(np.float32)
        for codec in CODECS:
            us = case(data, blocksize, codec, repeat)
            rows.append({"nbytes": nbytes, "blocksize": blocksize, "codec": codec, "us": us})
            for what in ("decode", "encode"):
                a1, a2 = us[f"{what} b2store 1t"], us[f"{what} b2store 2t"]
                b1, b2 = us[f"{what} blosc2 1t"], us[f"{what} blosc2 2t"]
                print(f"| {nbytes >> 10} kB | {nbytes // blocksize} | {codec} | {what} "
                      f"| {a1:.1f} / {a2:.1f} | {a1 / a2:.2f} | {b1:.1f} / {b2:.1f} "
                      f"| {b1 / b2:.2f} | {b2 / a2:.2f} |", flush=True)  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"versions": versions(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
