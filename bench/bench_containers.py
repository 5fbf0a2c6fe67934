"""python-blosc2's containers of variable-length items: b2store's reads vs python-blosc2's.

A BatchArray of 200 batches of 500 small dicts (items_per_block 100) and an ObjectArray of
2,000 dicts, written by python-blosc2 4.14 to files, then read by both libraries (open
included): every batch (``[b[:] for b in arr]`` / ``list(arr)``), one item of the middle
batch (``arr.items[k]``), and every item of the ObjectArray. Medians over rounds in which the
two alternate; the ratio is speed b2store / python-blosc2 (> 1: b2store is faster). Nothing is
asserted. Run from the checkout: ``python bench/bench_containers.py [--quick]``.
"""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

import blosc2
from _common import parse_args, run_case, versions

import b2store


def _item(i: int) -> dict:
    return {"id": i, "name": f"row {i}", "tags": ["a", "b", i % 7], "value": i * 0.5}


def main() -> None:
    args, repeat = parse_args(__doc__, 7, "3 rounds")
    print(versions())
    with tempfile.TemporaryDirectory(prefix="b2store_bench_") as tmp:
        bpath, opath = os.path.join(tmp, "b.b2b"), os.path.join(tmp, "o.b2frame")
        ba = blosc2.BatchArray(urlpath=bpath, mode="w", items_per_block=100)
        for b in range(200):
            ba.append([_item(b * 500 + k) for k in range(500)])
        oa = blosc2.ObjectArray(urlpath=opath, mode="w")
        oa.extend(_item(i) for i in range(2000))
        del ba, oa
        middle = 100 * 500 + 250
        cases = {
            "BatchArray, every batch": {
                "b2store": lambda: list(b2store.open(bpath)),
                "python-blosc2": lambda: [b[:] for b in blosc2.open(bpath)],
            },
            "BatchArray, one item": {
                "b2store": lambda: b2store.open(bpath).items[middle],
                "python-blosc2": lambda: blosc2.open(bpath).items[middle],
            },
            "ObjectArray, every item": {
                "b2store": lambda: list(b2store.open(opath)),
                "python-blosc2": lambda: list(blosc2.open(opath)),
            },
        }
        for name, funcs in cases.items():
            speeds = run_case(funcs, 1, repeat)  # calls per second (x 1e-9)
            ratio = speeds["b2store"] / speeds["python-blosc2"]
            print(f"{name:28s} b2store / python-blosc2 speed: {ratio:.2f}")


if __name__ == "__main__":
    main()
