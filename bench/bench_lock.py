"""Writers of one frame in tight loops: how fairly and how fast the writer lock serves them.

Two or three processes each update ``arr[0:10]`` of one ``.b2nd`` (a 1,000-item int32 array
in chunks of 100) as fast as they can, for a few seconds. Each records, per write, when it
asked for the lock, when it got it and when it let go. Two locks are compared, in rounds
that alternate them (medians):

- ``queued``: b2store's lock, writers served in turn (``b2store._turns``), each waiter
  looking at the writer ahead again after sleeps of 50 us doubled up to 1 ms;
- ``before``: the lock as it was before the queue, the OS lock retried after sleeps of 1 ms
  doubled up to 50 ms.

Figures: writes per second (all writers), the smallest writer's share of them, the longest
wait for the lock, the most writes of the others that one wait let through (0 or 1 when
served in turn), and the median time the lock lay free between two writers' holds. Run from
the checkout: ``python bench/bench_lock.py [--quick] [--seconds S] [--sync MODE]``.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import subprocess
import sys
import tempfile

WORKER = r"""
import json, os, sys, time
import numpy as np
import b2store
from b2store import _turns
from b2store.frame import lock as frame_lock

path, seconds, ident, mode = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def before(main_fd, path, queue, timeout):  # the lock before the queue, as it was
    deadline, delay = time.monotonic() + timeout, 0.001
    while not _turns._platform.try_lock(main_fd):
        if time.monotonic() > deadline:
            raise b2store.WriterLockedError(path, None, timeout)
        time.sleep(delay)
        delay = min(delay * 2, 0.05)

if os.environ.get("LAST_POLL"):  # (to try other poll times)
    _turns.LAST_POLL = float(os.environ["LAST_POLL"])
if mode == "before":
    _turns.take = before
asked, got, left = [], [], []
acquire, release = frame_lock.WriteLock._acquire, frame_lock.WriteLock._release

def timed_acquire(self):
    asked.append(time.monotonic())
    acquire(self)
    got.append(time.monotonic())

def timed_release(self, done):
    left.append(time.monotonic())
    release(self, done)

frame_lock.WriteLock._acquire, frame_lock.WriteLock._release = timed_acquire, timed_release
arr = b2store.open(path, mode="a")
asked.clear(), got.clear(), left.clear()  # (opening may take the lock once)
print("ready", flush=True)
sys.stdin.readline()
n = 0
stop = time.monotonic() + seconds
while time.monotonic() < stop:
    arr[0:10] = np.full(10, ident * 1000 + n % 1000, arr.dtype)
    n += 1
arr.close()
print(json.dumps({"asked": asked, "got": got, "left": left}))
"""


def run_once(where: str, nproc: int, seconds: float, mode: str, sync: str) -> dict:
    import b2store

    path = os.path.join(where, "w.b2nd")
    b2store.zeros((1000,), "<i4", urlpath=path, chunks=(100,), mode="w").close()
    env = {**os.environ, "B2STORE_SYNC": sync}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, path, str(seconds), str(i), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(nproc)
    ]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError("a writer did not start")
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    recs = [json.loads(p.communicate()[0]) for p in procs]
    return figures(recs, seconds)


def figures(recs: list[dict], seconds: float) -> dict:
    writes = [len(r["asked"]) for r in recs]
    worst_wait, worst_through = 0.0, 0
    for i, r in enumerate(recs):
        others = sorted(t for j, o in enumerate(recs) if j != i for t in o["got"])
        for asked, got in zip(r["asked"], r["got"]):
            worst_wait = max(worst_wait, got - asked)
            through = bisect.bisect_left(others, got) - bisect.bisect_right(others, asked)
            worst_through = max(worst_through, through)
    holds = sorted(
        (got, left, i) for i, r in enumerate(recs) for got, left in zip(r["got"], r["left"])
    )
    gaps = [b[0] - a[1] for a, b in zip(holds, holds[1:]) if a[2] != b[2]]
    return {
        "writes/s": sum(writes) / seconds,
        "smallest share": min(writes) / max(sum(writes), 1),
        "longest wait ms": worst_wait * 1e3,
        "others' writes in one wait": worst_through,
        "lock free between writers us": statistics.median(gaps) * 1e6 if gaps else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one round of 2 s")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sync", default="none", help="B2STORE_SYNC of the writers")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    seconds, repeat = (2.0, 1) if args.quick else (args.seconds, args.repeat)
    modes = ["queued", "before"]
    results: dict = {}
    with tempfile.TemporaryDirectory() as where:
        for nproc in (2, 3):
            rounds: dict[str, list[dict]] = {m: [] for m in modes}
            for r in range(repeat):
                k = r % len(modes)
                for mode in modes[k:] + modes[:k]:
                    rounds[mode].append(run_once(where, nproc, seconds, mode, args.sync))
            for mode in modes:
                keys = rounds[mode][0]
                med = {key: statistics.median(x[key] for x in rounds[mode]) for key in keys}
                results[f"{nproc} writers, {mode}"] = med
    width = max(map(len, results))
    names = list(next(iter(results.values())))
    print(f"sync={args.sync}, {seconds:g} s a run, medians of {repeat}")
    print(" " * width + " | " + " | ".join(names))
    for case, med in results.items():
        cells = [f"{med[n]:>{len(n)}.{3 if n == 'smallest share' else 0}f}" for n in names]
        print(f"{case:<{width}} | " + " | ".join(cells))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
