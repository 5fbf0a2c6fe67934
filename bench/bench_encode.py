"""Encode throughput and compressed size of b2store against the C libraries, single-threaded.

The datasets of ``bench_decode.py`` (8 MB of float64 and of int32) are compressed at clevel 5
with every codec and with shuffle and bitshuffle by ``b2store.encode_chunk``,
``blosc2.compress2`` and ``numcodecs.Blosc().encode``, interleaved round by round on the same
data in the same run. Reported: median GB/s of uncompressed data, the speed ratios
b2store / blosc2 and b2store / numcodecs, and the size ratio b2store / blosc2 (1.000 means
the same number of bytes). Every chunk is checked to decode back before timing.

    python bench/bench_encode.py [--repeat N] [--quick] [--json PATH]
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

CODECS = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]
FILTERS = {
    "shuffle": (blosc2.Filter.SHUFFLE, numcodecs.Blosc.SHUFFLE),
    "bitshuffle": (blosc2.Filter.BITSHUFFLE, numcodecs.Blosc.BITSHUFFLE),
}


def contenders(data: np.ndarray, codec: str, filt: str):
    ts = data.itemsize
    nc = numcodecs.Blosc(cname=codec, clevel=5, shuffle=FILTERS[filt][1])
    funcs = {
        "b2store": lambda: b2store.encode_chunk(data, codec=codec, clevel=5, filters=[filt]),
        "blosc2": lambda: blosc2.compress2(
            data,
            typesize=ts,
            codec=blosc2.Codec[codec.upper()],
            clevel=5,
            filters=[FILTERS[filt][0]],
            nthreads=1,
        ),
        "numcodecs": lambda: nc.encode(data),
    }
    sizes = {}
    for name, f in funcs.items():
        chunk = f()
        back = nc.decode(chunk) if name == "numcodecs" else b2store.decode_chunk(chunk)
        assert bytes(memoryview(back)) == data.tobytes(), f"{name} {codec}/{filt} does not decode"
        sizes[name] = len(chunk)
    assert np.array_equal(np.frombuffer(blosc2.decompress2(funcs["b2store"]()), data.dtype), data)
    return sizes, funcs


def main() -> None:
    args, repeat = parse_args(__doc__, 9, "3 rounds, first dtype only")
    blosc2.set_nthreads(1)
    numcodecs.blosc.set_nthreads(1)
    versions = common_versions()
    print(" ".join(f"{k} {v}" for k, v in versions.items()) + f"; {repeat} rounds, 1 thread\n")
    datasets = make_datasets()
    if args.quick:
        datasets = dict(list(datasets.items())[:1])
    cols = [
        "dtype",
        "codec",
        "filter",
        "b2store GB/s",
        "blosc2 GB/s",
        "speed vs blosc2",
        "numcodecs GB/s",
        "speed vs numcodecs",
        "b2store bytes",
        "size vs blosc2",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" if i < 3 else "---:" for i in range(len(cols))) + "|")
    rows = []
    for dtype, data in datasets.items():
        for codec in CODECS:
            for filt in FILTERS:
                sizes, funcs = contenders(data, codec, filt)
                gbs = run_case(funcs, data.nbytes, repeat)
                row = {
                    "dtype": dtype,
                    "codec": codec,
                    "filter": filt,
                    "gbps": gbs,
                    "sizes": sizes,
                    "speed_vs_blosc2": gbs["b2store"] / gbs["blosc2"],
                    "speed_vs_numcodecs": gbs["b2store"] / gbs["numcodecs"],
                    "size_vs_blosc2": sizes["b2store"] / sizes["blosc2"],
                }
                rows.append(row)
                print(
                    f"| {dtype} | {codec} | {filt} | {gbs['b2store']:.2f} | {gbs['blosc2']:.2f} "
                    f"| {row['speed_vs_blosc2']:.2f} | {gbs['numcodecs']:.2f} | "
                    f"{row['speed_vs_numcodecs']:.2f} | {sizes['b2store']} | "
                    f"{row['size_vs_blosc2']:.4f} |",
                    flush=True,
                )
    g2 = gmean([r["speed_vs_blosc2"] for r in rows])
    g1 = gmean([r["speed_vs_numcodecs"] for r in rows])
    print(f"\ngeometric-mean speed ratio b2store/blosc2: {g2:.3f}; b2store/numcodecs: {g1:.3f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"versions": versions, "repeat": repeat, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
