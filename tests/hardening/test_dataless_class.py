"""The class of frames that stand for data held elsewhere: any frame carrying one of
python-blosc2's marks (``b2o``, ``LazyArray``, ``proxy-source``, ``proxy``), whatever the mark
holds and whatever its chunks are, is refused with an UnsupportedError, never read as data;
and a mark-like name that is not one of them leaves an array readable."""

from __future__ import annotations

import random

import numpy as np
import pytest

import b2store
from b2store.nd.carriers import MARKERS

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the frames under test")


def _content(rng: random.Random):
    return rng.choice(
        [
            0,
            1,
            7,
            -1,
            "lazyexpr",
            b"\x00\xff",
            None,
            [1, 2],
            {"kind": rng.choice(["lazyexpr", "lazyudf", "c2array", "remote_array", "what"])},
            {"kind": 3, "version": "x"},
            {"source_kind": "local", "local_abspath": "/elsewhere/a.b2nd"},
            {"urlpath": ["https://x", "a", None]},
            {},
        ]
    )


@pytest.mark.parametrize("seed", range(24))
def test_any_mark_is_refused(tmp_path, seed):
    rng = random.Random(seed)
    marker = MARKERS[seed % len(MARKERS)]
    path = str(tmp_path / "m.b2nd")
    meta = {marker: _content(rng)}
    if rng.random() < 0.3:
        meta[rng.choice(MARKERS)] = _content(rng)
    make = rng.choice(["zeros", "empty", "full", "asarray"])
    kwargs = {"urlpath": path, "mode": "w", "meta": meta, "chunks": (4, 5)}
    if make == "asarray":
        blosc2.asarray(np.arange(80.0).reshape(8, 10), **kwargs)
    elif make == "full":
        blosc2.full((8, 10), 2.0, **kwargs)
    else:
        getattr(blosc2, make)((8, 10), **kwargs)
    with pytest.raises(b2store.UnsupportedError, match="python-blosc2"):
        b2store.open(path)


@pytest.mark.parametrize("name", ["b2o_x", "lazyarray", "proxy-sources", "Proxy", "b2nd_extra"])
def test_near_names_are_not_marks(tmp_path, name):
    path = str(tmp_path / "n.b2nd")
    blosc2.asarray(np.arange(6.0), urlpath=path, mode="w", meta={name: {"kind": "lazyexpr"}})
    with b2store.open(path) as arr:
        np.testing.assert_array_equal(arr[...], np.arange(6.0))


def test_b2store_writers_refuse_the_marks(tmp_path):
    for marker in MARKERS:
        with pytest.raises(ValueError, match="holds no data of its own"):
            b2store.asarray(np.arange(3), urlpath=tmp_path / "w.b2nd", meta={marker: 1})
    assert not list(tmp_path.iterdir())  # nothing left behind
