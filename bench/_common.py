"""What the benchmarks share: the datasets, the interleaved timing loop, the geometric mean."""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

import numpy as np


def parse_args(
    doc: str, default_repeat: int, quick_help: str, extra=None
) -> tuple[argparse.Namespace, int]:
    """The options every benchmark takes (and those ``extra(parser)`` adds); returns them and
    the number of rounds."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument(
        "--repeat",
        type=int,
        default=default_repeat,
        help=f"timed rounds per case (default {default_repeat})",
    )
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    if extra is not None:
        extra(ap)
    args = ap.parse_args()
    return args, 3 if args.quick else args.repeat


def versions() -> dict[str, str]:
    """The versions of the libraries compared, for the top of every report."""
    import blosc2
    import numcodecs

    import b2store

    return {
        "b2store": b2store.__version__,
        "blosc2": blosc2.__version__,
        "numcodecs": numcodecs.__version__,
        "numpy": np.__version__,
    }


def make_datasets() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20240601)
    y, x = np.mgrid[0:1024, 0:1024] / 1024.0  # 1,048,576 float64 values
    field = np.sin(6.0 * x) * np.cos(4.0 * y) + 0.5 * x * y
    field += rng.normal(0.0, 1e-3, field.shape)
    rng = np.random.default_rng(20240602)
    steps = rng.integers(-3, 4, 2_097_152)  # 2,097,152 int32 values
    walk = (10_000 + np.cumsum(steps)).astype(np.int32)
    return {"float64": field.ravel(), "int32": walk}


def round_orders(names: list, repeat: int):
    """The contenders' order in each of ``repeat`` rounds, shuffled (seeded) each round.

    Not rotated: a rotation keeps one cyclic order, so with three contenders or more each one
    always runs right after the same other one, which leaves the caches (and the thread
    pools) the same way for it every round. A file read right after the file was read by
    another contender ran 1.8 ms faster than after zarr's own pipeline read something else
    (16 MB, 128 chunks)."""
    rng = random.Random(20261129)
    order = list(names)
    for _ in range(repeat):
        rng.shuffle(order)
        yield list(order)


def run_case(funcs: dict, nbytes: int, repeat: int) -> dict[str, float]:
    """Median GB/s per contender; one call each per round, in a new order each round."""
    names = list(funcs)
    times: dict[str, list[float]] = {n: [] for n in names}
    for order in round_orders(names, repeat):
        for name in order:
            f = funcs[name]
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    return {n: nbytes / statistics.median(ts) / 1e9 for n, ts in times.items()}


def gmean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))
