"""One array read, one committed state: a read that spans several chunks, beside a writer
that changes them all in one commit, sees every chunk as that one commit (or the one before)
left it, never some chunks of each (docs/guarantees.md, "Readers beside writers")."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hardening.workers import run_threads

import b2store

SHAPE = (40, 40)
BASE = np.arange(SHAPE[0] * SHAPE[1], dtype="<i8").reshape(SHAPE)  # no chunk is constant


def version(x: np.ndarray, base: np.ndarray) -> set[int]:
    """The write versions a read shows: one when it came from one commit."""
    return set(np.unique(x - base).tolist())


def race(a, read, selections, readers: int) -> None:
    """``readers`` threads read ``selections`` through ``read`` for 2 s while a writer
    rewrites every chunk of ``a`` in one commit after another; every read must show one
    commit, and there must be reads enough to mean something."""
    errors: list = []
    reads = [0]
    stop = time.monotonic() + 2.0

    def reader(k):
        while time.monotonic() < stop:
            key = selections[(k + reads[0]) % len(selections)]
            try:
                seen = version(read(key), BASE[key])
            except Exception as exc:
                errors.append(repr(exc))
                continue
            if len(seen) != 1:
                errors.append(f"{key}: chunks of commits {sorted(seen)} in one read")
            reads[0] += 1

    def writer():
        v = 1
        while time.monotonic() < stop:
            a[...] = BASE + v  # every chunk, published in one commit
            v += 1

    # A writer's (or reader's) uncaught failure fails the test, not a warning.
    run_threads(*[lambda k=k: reader(k) for k in range(readers)], writer)
    a.close()
    assert not errors, errors[:5]
    assert reads[0] > 50


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_reads_across_chunks_come_from_one_commit(tmp_path, contiguous):
    a = b2store.asarray(
        BASE, urlpath=tmp_path / "a.b2nd", chunks=(10, 40), blocks=(5, 40), contiguous=contiguous
    )
    selections = [(...,), (slice(5, 25), 3), (slice(8, 32), slice(None, None, 7)), (np.s_[::9, 1])]
    race(a, a.__getitem__, selections, readers=3)


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_reads_through_zarr_and_b2stores_pipeline_come_from_one_commit(tmp_path, contiguous):
    # zarr reads a B2ndStore chunk by chunk, each key alone, and may mix commits; with
    # b2store's codec pipeline a basic read is one box read from one committed state.
    zarr = pytest.importorskip("zarr")
    from b2store.integrations.zarr.pipeline import PIPELINE_PATH
    from b2store.integrations.zarr.store import B2ndStore

    path = tmp_path / "a.b2nd"
    a = b2store.asarray(BASE, urlpath=path, chunks=(10, 40), blocks=(5, 40), contiguous=contiguous)
    with zarr.config.set({"codec_pipeline.path": PIPELINE_PATH}):
        z = zarr.open_array(B2ndStore(path))
    selections = [(...,), (slice(5, 25), 3), (slice(8, 32), slice(None, None, 7))]
    race(a, z.__getitem__, selections, readers=2)
