"""Object storage: what a round trip costs a read and a write, on a real S3 API on localhost.

moto's server (``tests/s3server.py``, in this process) answers; a delay is added to every
answer, as an object store far away would answer (tens of ms). Each case is timed with no
delay and with the delay, in rounds that alternate them (medians, same run); the ratio
delayed / not delayed says how much of the delay the requests' overlap hides (1.0: all; one
request after another would add ``requests x delay``).

- read: one time step of a 20 x 100 x 1000 float32 field in 10 x 10 x 100 chunks (100 chunks,
  a block each);
- write: a new sparse frame of 100 chunks (100 x 50 x 40 float64, one time step a chunk);
- change: 8 of those chunks replaced in one write (``arr[k] = ...`` for 8 steps at once).

python-blosc2 has no reader of ``s3://`` frames (only Caterva2's ``C2Array``), so there is no
same-run ratio against it here. Run from the checkout: ``python bench/bench_cloud.py
[--quick] [--delay 0.02]``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import b2store


def _timed(fn, server, delay: float) -> tuple[float, int, int]:
    server.delay = delay
    server.reset()
    start = time.perf_counter()
    try:
        fn()
    finally:
        server.delay = 0.0
    took = time.perf_counter() - start
    return took, len(server.counted()), server.most_in_flight


def main() -> None:
    import argparse

    from s3server import S3Server

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--delay", type=float, default=0.02, help="seconds added to each answer")
    args = ap.parse_args()
    rounds = 3 if args.quick else args.repeat
    server = S3Server()
    options = dict(server.storage_options, skip_instance_cache=False)
    bucket = server.new_bucket()
    rng = np.random.default_rng(0)
    field = rng.random((20, 100, 1000)).astype("f4")
    field_url = f"s3://{bucket}/field.b2nd"
    b2store.asarray(field, field_url, chunks=(10, 10, 100), blocks=(1, 10, 100),
                    storage_options=options)  # fmt: skip
    steps = rng.random((100, 50, 40))
    sparse_url = f"s3://{bucket}/steps.b2nd"

    def read():
        arr = b2store.open(field_url, storage_options=options)
        np.testing.assert_array_equal(arr[7], field[7])

    def write():
        b2store.asarray(steps, sparse_url, contiguous=False, chunks=(1, 50, 40),
                        storage_options=options)  # fmt: skip

    def change():
        arr = b2store.open(sparse_url, mode="a", storage_options=options)
        arr[10:18] = -steps[10:18]

    cases = {"read one time step (100 chunks)": read, "write 100 chunk objects": write}
    write()
    cases["change 8 chunks"] = change
    print(f"b2store {b2store.__version__}, delay {args.delay * 1000:.0f} ms, {rounds} rounds")
    print(f"{'case':36} {'no delay':>9} {'delayed':>9} {'ratio':>6} {'requests':>9} {'at once':>8}")
    for name, fn in cases.items():
        times = {0.0: [], args.delay: []}
        for _ in range(rounds):
            for delay in times:
                took, requests, at_once = _timed(fn, server, delay)
                times[delay].append(took)
        plain, slow = statistics.median(times[0.0]), statistics.median(times[args.delay])
        print(f"{name:36} {plain:8.2f}s {slow:8.2f}s {slow / plain:6.2f} {requests:9d} "
              f"{at_once:8d}")  # fmt: skip
    server.stop()


if __name__ == "__main__":
    main()
