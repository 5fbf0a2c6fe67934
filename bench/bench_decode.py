"""Decode throughput of b2store against the C libraries, single-threaded.

What it measures
----------------
Two 8 MB datasets (float64: a smooth 2-D field plus a little noise; int32: a slowly varying
random walk; fixed seeds) are compressed with every combination of codec (lz4, zstd, blosclz)
and filter (shuffle, bitshuffle) at clevel 5, once as a Blosc2 chunk (``blosc2.compress2``)
and once as a Blosc1 chunk (``numcodecs.Blosc().encode``). Then, on the same chunks in the
same run, it times:

* ``b2store.decode_chunk(blosc2_chunk)`` against ``blosc2.decompress2(blosc2_chunk)``;
* ``b2store.decode_chunk(blosc1_chunk)`` against ``numcodecs.Blosc().decode(blosc1_chunk)``;
* plus ``b2store.decode_chunk(chunk, out=preallocated)`` for both chunks (JSON only).

Every result is checked once against the input bytes before timing. The contenders are
interleaved round by round (one call each per round, in a new order every round), so machine
noise hits all of them alike. Reported figures are the MEDIAN throughput over the rounds in
GB/s (1e9 bytes) of uncompressed data, and the ratios b2store / C library (> 1: b2store is
faster). The cratio column is the Blosc2 chunk's (the Blosc1 one is in the JSON).
All libraries run with one thread. No timed assertions: the numbers are informative.

How to run
----------
    python bench/bench_decode.py                 # full run, 15 rounds (a minute or two)
    python bench/bench_decode.py --repeat 31     # more rounds
    python bench/bench_decode.py --quick         # smoke run: 3 rounds, float64 only
    python bench/bench_decode.py --json out.json # also write the results as JSON
"""

from __future__ import annotations

import json

import blosc2
import numcodecs
import numcodecs.blosc
import numpy as np
from _common import gmean, make_datasets, parse_args, run_case
from _common import versions as common_versions

import b2store

CODECS = {"lz4": blosc2.Codec.LZ4, "zstd": blosc2.Codec.ZSTD, "blosclz": blosc2.Codec.BLOSCLZ}
FILTERS = {
    "shuffle": (blosc2.Filter.SHUFFLE, numcodecs.Blosc.SHUFFLE),
    "bitshuffle": (blosc2.Filter.BITSHUFFLE, numcodecs.Blosc.BITSHUFFLE),
}


def contenders(data: np.ndarray, codec: str, filt: str):
    """Compress ``data`` both ways; return the compression ratios and the timed callables."""
    raw = data.tobytes()
    c2 = blosc2.compress2(
        data,
        typesize=data.itemsize,
        codec=CODECS[codec],
        clevel=5,
        filters=[FILTERS[filt][0]],
        nthreads=1,
    )
    nc = numcodecs.Blosc(cname=codec, clevel=5, shuffle=FILTERS[filt][1])
    c1 = nc.encode(data)
    out = np.empty(len(raw), dtype=np.uint8)
    funcs = {
        "b2store": lambda: b2store.decode_chunk(c2),
        "blosc2": lambda: blosc2.decompress2(c2, nthreads=1),
        "b2store_out": lambda: b2store.decode_chunk(c2, out=out),
        "b2store_b1": lambda: b2store.decode_chunk(c1),
        "numcodecs": lambda: nc.decode(c1),
        "b2store_b1_out": lambda: b2store.decode_chunk(c1, out=out),
    }
    for name, f in funcs.items():  # verify once (this also warms up every path)
        out[:] = 0
        got = f()
        assert bytes(memoryview(got)) == raw, f"{name} mismatch for {codec}/{filt}"
    return len(raw) / len(c2), len(raw) / len(c1), funcs


def main() -> None:
    args, repeat = parse_args(__doc__, 15, "3 rounds, first dtype only")

    blosc2.set_nthreads(1)
    numcodecs.blosc.set_nthreads(1)
    versions = common_versions()
    print(" ".join(f"{k} {v}" for k, v in versions.items()) + f"; {repeat} rounds, 1 thread")
    print()

    datasets = make_datasets()
    if args.quick:
        datasets = dict(list(datasets.items())[:1])
    cols = [
        "dtype",
        "codec",
        "filter",
        "cratio",
        "b2store GB/s",
        "blosc2 GB/s",
        "ratio vs blosc2",
        "b2store(Blosc1 chunk) GB/s",
        "numcodecs GB/s",
        "ratio vs numcodecs",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" if i < 3 else "---:" for i in range(len(cols))) + "|")
    rows = []
    for dtype, data in datasets.items():
        for codec in CODECS:
            for filt in FILTERS:
                cr2, cr1, funcs = contenders(data, codec, filt)
                gbs = run_case(funcs, data.nbytes, repeat)
                row = {
                    "dtype": dtype,
                    "codec": codec,
                    "filter": filt,
                    "cratio_blosc2": cr2,
                    "cratio_blosc1": cr1,
                    "gbps": gbs,
                    "ratio_vs_blosc2": gbs["b2store"] / gbs["blosc2"],
                    "ratio_vs_numcodecs": gbs["b2store_b1"] / gbs["numcodecs"],
                }
                rows.append(row)
                print(
                    f"| {dtype} | {codec} | {filt} | {cr2:.2f} | {gbs['b2store']:.2f} | "
                    f"{gbs['blosc2']:.2f} | {row['ratio_vs_blosc2']:.2f} | "
                    f"{gbs['b2store_b1']:.2f} | {gbs['numcodecs']:.2f} | "
                    f"{row['ratio_vs_numcodecs']:.2f} |",
                    flush=True,
                )

    g2 = gmean([r["ratio_vs_blosc2"] for r in rows])
    g1 = gmean([r["ratio_vs_numcodecs"] for r in rows])
    print(f"\ngeometric-mean ratio b2store/blosc2: {g2:.3f}; b2store/numcodecs: {g1:.3f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "versions": versions,
                    "repeat": repeat,
                    "nthreads": 1,
                    "rows": rows,
                    "gmean_ratio_vs_blosc2": g2,
                    "gmean_ratio_vs_numcodecs": g1,
                },
                fh,
                indent=2,
            )


if __name__ == "__main__":
    main()
