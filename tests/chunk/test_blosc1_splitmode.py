"""c-blosc 1.21 chunks written under BLOSC_SPLITMODE=ALWAYS: blocks of 39-byte items split into
one stream per byte with dont_split clear, a layout older c-blosc1 rules call unsplit."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import b2store

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")

FIXTURE = Path(__file__).parents[1] / "fixture" / "blosc1" / "splitmode_always_lz4_ts39.blosc"

# Written once by this program with BLOSC_SPLITMODE=ALWAYS (numcodecs 0.16.6, c-blosc 1.21.7):
# numcodecs uses c-blosc's global context, which reads the variable, when it may use threads.
GENERATOR = """
import sys
import numpy as np
from numcodecs import Blosc
dt = np.dtype([("a", "<f8"), ("b", "<i4"), ("c", "S27")])
rec = np.zeros(3001, dt)
rec["a"] = np.arange(3001) * 0.5
rec["b"] = np.arange(3001) % 97
rec["c"] = [b"item-%05d" % i for i in range(3001)]
sys.stdout.buffer.write(Blosc(cname="lz4", clevel=9, shuffle=Blosc.SHUFFLE).encode(rec))
"""


def records() -> np.ndarray:
    dt = np.dtype([("a", "<f8"), ("b", "<i4"), ("c", "S27")])
    rec = np.zeros(3001, dt)
    rec["a"] = np.arange(3001) * 0.5
    rec["b"] = np.arange(3001) % 97
    rec["c"] = [b"item-%05d" % i for i in range(3001)]
    return rec


def test_the_fixture_is_the_split_layout_with_dont_split_clear():
    chunk = FIXTURE.read_bytes()
    info = b2store.chunk_info(chunk)
    assert (info.version, info.typesize, info.nbytes) == (2, 39, 3001 * 39)
    assert not chunk[2] & 0x10  # dont_split clear
    assert blosc2.decompress(chunk) == records().tobytes()


def test_split_blosc1_chunks_of_wide_items_decode_bit_exact():
    assert b2store.decode_chunk(FIXTURE.read_bytes()).tobytes() == records().tobytes()


@pytest.mark.parametrize("splitmode", ["ALWAYS", "NEVER", None])
def test_chunks_numcodecs_writes_now_decode_bit_exact(splitmode):
    env = {k: v for k, v in os.environ.items() if k != "BLOSC_SPLITMODE"}
    if splitmode:
        env["BLOSC_SPLITMODE"] = splitmode
    chunk = subprocess.run(
        [sys.executable, "-c", GENERATOR], env=env, capture_output=True, check=True
    ).stdout
    assert blosc2.decompress(chunk) == records().tobytes()
    assert b2store.decode_chunk(chunk).tobytes() == records().tobytes()


@pytest.mark.parametrize("typesize", [17, 24, 39, 64])
def test_unsplit_blosc1_chunks_of_wide_items_still_decode(typesize):
    from numcodecs import Blosc

    data = np.random.default_rng(typesize).integers(0, 4, 200 * typesize, dtype=np.uint8)
    for cname in ("lz4", "zstd", "blosclz", "zlib"):
        chunk = Blosc(cname=cname, clevel=5, shuffle=Blosc.SHUFFLE).encode(
            data.view(f"V{typesize}")
        )
        assert b2store.decode_chunk(chunk).tobytes() == data.tobytes()
