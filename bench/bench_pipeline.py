"""Zarr codec pipelines on the same Zarr v3 arrays: zarr's default ``BatchedCodecPipeline``
against zarrs (``zarrs.ZarrsCodecPipeline``, Rust) and b2store's (``B2storeCodecPipeline``).

A 16 MB float32 array (2048 x 2048, a smooth field with noise) in 128 kB (128 x 256) and 1 MB
(512 x 512) chunks, zarr's ``BloscCodec`` LZ4 and Zstd with shuffle, in a LocalStore; a
whole read and a box across many chunks (``[100:1900, 300:1700]``), one thread and two
(zarr's ``threading.max_workers``, which zarrs follows too). Medians over interleaved rounds
in one process, ratios against zarrs and zarr. ``floor`` is a pipeline that reads nothing
(its ``read`` returns at once): what zarr itself spends on a read around any pipeline,
which bounds every pipeline's ratio against zarr's.

    python bench/bench_pipeline.py [--quick] [--repeat N] [--json PATH]
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time

import numpy as np
import zarr
from _common import parse_args
from zarr.codecs import BloscCodec
from zarr.registry import register_pipeline

from b2store.integrations.zarr.pipeline import B2storeCodecPipeline


class Floor(B2storeCodecPipeline):
    """Reads nothing: zarr's own cost of a read, around whichever pipeline."""

    async def read(self, batch_info, out, drop_axes=()):
        return tuple({"status": "present"} for _ in batch_info)


register_pipeline(Floor)

PIPELINES = {
    "zarr": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "zarrs": "zarrs.ZarrsCodecPipeline",
    "b2store": "b2store.integrations.zarr.pipeline.B2storeCodecPipeline",
    "floor": f"{__name__}.Floor",
}
CHUNKS = {"128kB": (128, 256), "1MB": (512, 512)}
CODECS = {"lz4": "lz4", "zstd": "zstd"}
KEYS = {"whole": np.s_[:], "box": np.s_[100:1900, 300:1700]}


def field() -> np.ndarray:
    rng = np.random.default_rng(37)
    y, x = np.mgrid[0:2048, 0:2048] / 2048.0
    values = np.sin(6.0 * x) * np.cos(4.0 * y) + 0.5 * x * y
    return (values + rng.normal(0.0, 1e-3, values.shape)).astype(np.float32)


def timed(funcs: dict, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median and best wall seconds per function, the order rotated each round (the best
    is the figure least disturbed by other work on a shared machine)."""
    times: dict[str, list[float]] = {n: [] for n in funcs}
    names = list(funcs)
    for r in range(repeat):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            t0 = time.perf_counter()
            funcs[name]()
            times[name].append(time.perf_counter() - t0)
    return (
        {n: statistics.median(t) for n, t in times.items()},
        {n: min(t) for n, t in times.items()},
    )


def main() -> None:
    args, repeat = parse_args(__doc__, 21, "3 rounds")
    available = dict(PIPELINES)
    try:
        import zarrs  # noqa: F401
    except ImportError:
        del available["zarrs"]
    data = field()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for cname in CODECS:
            for cname_label, chunks in CHUNKS.items():
                path = f"{tmp}/{cname}-{cname_label}"
                arr = zarr.create_array(
                    path, shape=data.shape, chunks=chunks, dtype="f4",
                    compressors=BloscCodec(cname=cname, shuffle="shuffle", clevel=5),
                )  # fmt: skip
                arr[:] = data
                for threads in (1, 2):
                    opened = {}
                    for name, where in available.items():
                        with zarr.config.set({"codec_pipeline.path": where}):
                            opened[name] = zarr.open_array(path, mode="r")
                    for key_name, key in KEYS.items():
                        expected = data[key]

                        def read(a=None, key=key, threads=threads):
                            with zarr.config.set({"threading.max_workers": threads}):
                                return a[key]

                        for name, a in opened.items():
                            assert name == "floor" or np.array_equal(read(a), expected), name
                        funcs = {n: (lambda a=a: read(a)) for n, a in opened.items()}
                        med, best = timed(funcs, repeat)
                        row = {
                            "codec": cname,
                            "chunks": cname_label,
                            "threads": threads,
                            "read": key_name,
                            **{f"{n}_ms": round(t * 1e3, 2) for n, t in med.items()},
                            **{f"{n}_best_ms": round(t * 1e3, 2) for n, t in best.items()},
                            "vs_zarr": round(med["zarr"] / med["b2store"], 2),
                            "best_vs_zarr": round(best["zarr"] / best["b2store"], 2),
                        }
                        if "zarrs" in med:
                            row["vs_zarrs"] = round(med["zarrs"] / med["b2store"], 2)
                            row["best_vs_zarrs"] = round(best["zarrs"] / best["b2store"], 2)
                        results.append(row)
                        print(
                            f"{cname:5} {cname_label:6} {threads}t {key_name:6}",
                            "  ".join(f"{n} {t * 1e3:7.2f} ms" for n, t in med.items()),
                            f"  b2store: {row['vs_zarr']:.2f}x zarr",
                            f"{row.get('vs_zarrs', float('nan')):.2f}x zarrs",
                            f"  best: {row['best_vs_zarr']:.2f}x zarr",
                            f"{row.get('best_vs_zarrs', float('nan')):.2f}x zarrs",
                            flush=True,
                        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"zarr": zarr.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
