"""Zarr through B2ndStore against python-blosc2 on the same .b2nd file, against b2store's own
reader of it (``b2store.open(p)[...]``: what the store's path through zarr costs), and against
a Zarr LocalStore copy of the same data: a whole 256 MB read, and one small selection inside a
chunk (time and bytes read). Medians over interleaved rounds; one decoding thread everywhere, then
the whole read again with each library's default threads.

    python bench/bench_zarr_store.py [--quick] [--repeat N] [--json PATH]
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import parse_args, versions

_CPU: dict[str, float] = {}


def _timed(funcs: dict, repeat: int) -> dict[str, float]:
    """Median wall seconds per function; the median CPU seconds (all threads of this
    process, steadier than wall time on a shared machine) land in ``_CPU``."""
    times: dict[str, list[float]] = {n: [] for n in funcs}
    cpu: dict[str, list[float]] = {n: [] for n in funcs}
    names = list(funcs)
    for r in range(repeat):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            c0, t0 = time.process_time(), time.perf_counter()
            funcs[name]()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    _CPU.clear()
    _CPU.update({n: statistics.median(t) for n, t in cpu.items()})
    return {n: statistics.median(t) for n, t in times.items()}


class _Counting:
    """Counts bytes read through a zarr store (wraps its get)."""

    def __init__(self):
        self.bytes = 0


def main() -> None:
    args, repeat = parse_args(__doc__, 5, "a 32 MB array and 3 rounds")
    import blosc2
    import zarr
    from zarr.storage import LocalStore, WrapperStore

    import b2store
    from b2store.chunk import native
    from b2store.integrations.zarr.store import B2ndStore

    default_threads = blosc2.nthreads
    blosc2.set_nthreads(1)
    native.set_nthreads(1)
    zarr.config.set({"async.concurrency": 1, "threading.max_workers": 1})
    n = 2048 if args.quick else 8192  # 8192 x 4096 float64 = 256 MB
    y, x = np.mgrid[0:n, 0:4096].astype(np.float32) / 4096.0
    data = (np.sin(6.0 * x) * np.cos(4.0 * y) + 0.5 * x * y).astype(np.float64)
    del y, x
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "a.b2nd"
    arr = blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(512, 1024))
    blocks = arr.blocks
    z_local = zarr.create_array(
        store=LocalStore(tmp / "copy.zarr"), shape=data.shape, chunks=(512, 1024), dtype=data.dtype
    )
    z_local[...] = data
    counter = _Counting()

    class Counting(WrapperStore):
        async def get(self, key, prototype, byte_range=None):
            buf = await self._store.get(key, prototype, byte_range)
            if buf is not None:
                counter.bytes += len(buf)
            return buf

    zb = zarr.open_array(B2ndStore(path))
    zb_count = zarr.open_array(Counting(B2ndStore(path)))
    zl_count = zarr.open_array(Counting(LocalStore(tmp / "copy.zarr", read_only=True)))
    b2 = blosc2.open(str(path))
    own = b2store.open(path)

    whole = _timed(
        {
            "b2store zarr": lambda: zb[...],
            "python-blosc2": lambda: b2[...],
            "b2store open": lambda: own[...],
        },
        repeat,
    )
    whole_cpu = dict(_CPU)
    sel = (slice(700, 702), slice(1500, 1510))  # inside one chunk, one or two blocks
    small = _timed(
        {
            "b2store zarr": lambda: zb[sel],
            "python-blosc2": lambda: b2[sel],
            "zarr LocalStore": lambda: z_local[sel],
        },
        max(repeat, 20),
    )
    small_cpu = dict(_CPU)
    # The same whole read with every library's default threads: zarr runs chunk decodes in
    # its thread pool (b2store's decoder releases the GIL), python-blosc2 its block threads.
    blosc2.set_nthreads(default_threads)
    native.set_nthreads(None)
    zarr.config.set({"async.concurrency": 10, "threading.max_workers": None})
    zb_default = zarr.open_array(B2ndStore(path))
    whole_nt = _timed(
        {"b2store zarr": lambda: zb_default[...], "python-blosc2": lambda: b2[...]}, repeat
    )
    counter.bytes = 0
    zb_count[sel]
    b2nd_bytes = counter.bytes
    counter.bytes = 0
    zl_count[sel]
    local_bytes = counter.bytes
    result = {
        "versions": versions(),
        "nbytes": data.nbytes,
        "file_bytes": os.path.getsize(path),
        "chunks": [512, 1024],
        "blocks": list(blocks),
        "whole_read_s": whole,
        "whole_read_ratio_vs_blosc2": whole["python-blosc2"] / whole["b2store zarr"],
        "whole_read_ratio_vs_b2store_open": whole["b2store open"] / whole["b2store zarr"],
        "whole_read_cpu_s": whole_cpu,
        "whole_read_cpu_ratio_vs_blosc2": whole_cpu["python-blosc2"] / whole_cpu["b2store zarr"],
        "whole_read_default_threads_s": whole_nt,
        "whole_read_default_threads_ratio": whole_nt["python-blosc2"] / whole_nt["b2store zarr"],
        "blosc2_default_threads": default_threads,
        "small_selection_s": small,
        "small_selection_cpu_s": small_cpu,
        "small_selection_bytes": {"b2store zarr": b2nd_bytes, "zarr LocalStore": local_bytes},
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
