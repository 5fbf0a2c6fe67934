"""A quick run of every fuzz target: corpus seeds and their mutants, only B2StoreError allowed.

The long, coverage-guided runs are atheris's (``fuzz/run.py``, figures in docs/guarantees.md);
this one runs in the suite: a few seconds per target, and a longer ``slow`` run.
"""

from __future__ import annotations

import importlib
import random
import time

import pytest
from hardening.fuzz_targets import TARGETS, run_one, seeds
from helpers import corpus_dir

INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 2**63 - 1, 2**64 - 1]


def mutate(rng: random.Random, data: bytes) -> bytes:
    """One to four of: flip a bit, set a byte, write an interesting integer, cut, splice."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not buf:
            buf += bytes([rng.randrange(256)])
        op = rng.randrange(6)
        at = rng.randrange(len(buf))
        if op == 0:
            buf[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[at] = rng.randrange(256)
        elif op == 2:
            width = rng.choice([1, 2, 4, 8])
            value = rng.choice(INTERESTING) & ((1 << (8 * width)) - 1)
            order = rng.choice(["little", "big"])
            buf[at : at + width] = value.to_bytes(width, order)
        elif op == 3:
            del buf[rng.randrange(len(buf) + 1) :]
        elif op == 4:
            del buf[at : at + rng.randint(1, 64)]
        else:
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(buf)


def fuzz_for(name: str, seconds: float, seed: int) -> int:
    inputs = seeds(name, corpus_dir("generated").parent)
    assert inputs, f"no seeds for {name}"
    rng = random.Random(seed)
    for data in inputs:
        run_one(name, data)
    n, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        run_one(name, mutate(rng, rng.choice(inputs)))
        n += 1
    return n


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_quick_fuzz(name):
    assert fuzz_for(name, 2.0, seed=11) > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_longer_fuzz(name, run_seed):
    assert fuzz_for(name, 30.0, seed=run_seed) > 0


@pytest.mark.parametrize("kind", ["b2z", "b2d"])
def test_tree_seeds_come_from_both_writers(tmp_path, kind):
    # No corpus: the trees made here, python-blosc2's and b2store's (and the .b2z shapes).
    assert len(seeds(kind, tmp_path)) == (6 if kind == "b2z" else 2)


@pytest.mark.parametrize("writer", ["b2store.to_b2nd", "blosc2.DictStore"])
def test_a_seed_tree_that_cannot_be_written_fails_the_run(tmp_path, monkeypatch, writer):
    module, name = writer.split(".")

    def broken(*args, **kwargs):
        raise RuntimeError(f"{writer} broke")

    monkeypatch.setattr(importlib.import_module(module), name, broken)
    with pytest.raises(RuntimeError, match=f"^{writer} broke$"):
        seeds("b2d", tmp_path)
