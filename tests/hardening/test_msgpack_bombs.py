"""Nested msgpack bombs: vlmeta values whose few bytes (or few compressed bytes) would decode to
millions of Python objects, or whose ext payloads nest copies of themselves. Each is refused,
while decoding and before the objects are built, by a limit the error names; decoding what is
refused stays small in memory and time, and raising the named limit lets the value through.

The class is generated: shapes (flat, deep, wide maps, strings, nested sets and arrays), sizes
and whether the bytes come straight to the decoder or compressed inside a frame's vlmeta.
"""

from __future__ import annotations

import time

import msgpack
import numpy as np
import pytest

import b2store
from b2store import LimitError, Limits, SChunk
from b2store.chunk.encoder import encode_chunk
from b2store.constants import Codec, Filter
from b2store.frame.vlmeta_codec import EXT_NDARRAY, EXT_SET, unpack_value

ITEMS = Limits().max_vlmeta_items
NBYTES = Limits().max_vlmeta_nbytes


def flat(width: int, count: int) -> bytes:
    """``count`` lists of ``width`` nils: one byte an object."""
    inner = msgpack.packb([None] * width)
    return b"\xdd" + count.to_bytes(4, "big") + inner * count


def tree(depth: int) -> bytes:
    """A full binary tree of lists ``depth`` deep: 2**(depth + 1) - 1 objects."""
    out = b"\xc0"
    for _ in range(depth):
        out = b"\x92" + out + out
    return out


def deep_chain(depth: int, width: int) -> bytes:
    """Lists nested ``depth`` deep, each holding ``width`` nils beside the next level."""
    out = b"\xc0"
    for _ in range(depth):
        out = b"\xdc" + (width + 1).to_bytes(2, "big") + b"\xc0" * width + out
    return out


def maps(count: int) -> bytes:
    """Empty maps: the costliest object per byte (a dict each)."""
    return b"\xdd" + count.to_bytes(4, "big") + b"\x80" * count


def strings(count: int) -> bytes:
    return b"\xdd" + count.to_bytes(4, "big") + b"\xa0" * count


def nested_sets(levels: int, filler: int) -> bytes:
    """A set holding a set holding ...: each level's payload is a copy of all below it."""
    out = msgpack.packb([bytes(filler)])
    for _ in range(levels):
        out = msgpack.packb([msgpack.ExtType(EXT_SET, out)])
    return out


def nested_arrays(levels: int, nbytes: int) -> bytes:
    """An object array holding an object array ...: each level's payload is copied out."""
    out = msgpack.packb({"dtype": {"str": "|u1"}, "shape": [nbytes], "data": bytes(nbytes)})
    for _ in range(levels):
        out = msgpack.packb({"values": [msgpack.ExtType(EXT_NDARRAY, out)], "shape": [1]})
    return msgpack.packb(msgpack.ExtType(EXT_NDARRAY, out))


# (name, payload, the limit that refuses it with the defaults)
BOMBS = [
    ("flat 1x300k", flat(1, 300_000), "max_vlmeta_items"),
    ("flat 1000x600", flat(1000, 600), "max_vlmeta_items"),
    ("flat 15x40k", flat(15, 40_000), "max_vlmeta_items"),
    ("binary tree 19", tree(19), "max_vlmeta_items"),
    ("deep chain 500x1100", deep_chain(500, 1100), "max_vlmeta_items"),
    ("empty maps 600k", maps(600_000), "max_vlmeta_items"),
    ("strings 600k", strings(600_000), "max_vlmeta_items"),
    ("sets 32 deep", nested_sets(30, 600_000), "max_vlmeta_nbytes"),
    ("arrays 30 deep", nested_arrays(30, 300_000), "max_vlmeta_nbytes"),
]


def in_frame(payload: bytes, clevel: int = 5) -> bytes:
    """A frame whose vlmeta holds ``payload`` compressed, as python-blosc2 stores a value."""
    s = SChunk.create(None, typesize=1)
    s.append_data(b"x" * 10)
    raw = encode_chunk(
        payload, typesize=1, codec=Codec.ZSTD, clevel=clevel, filters=[Filter.SHUFFLE]
    )
    s._set_vlmeta({"bomb": raw})
    return s.to_cframe()


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def refused(fn, limit_name: str) -> tuple[int, float]:
    """Growth of the process's peak RSS (Linux: the peak is reset first) and seconds of
    ``fn``, which must raise the LimitError named. tracemalloc would trace the walk's every
    int and slow it 25-fold; the RSS peak sees numpy's and msgpack's buffers as well."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        before = _status("VmRSS")
    except OSError:
        before = None
    start = time.perf_counter()
    with pytest.raises(LimitError, match=f"Limits.{limit_name}") as info:
        fn()
    seconds = time.perf_counter() - start
    assert info.value.limit_name == limit_name
    growth = 0 if before is None else _status("VmHWM") - before
    return growth, seconds


@pytest.mark.parametrize("name, payload, limit_name", BOMBS, ids=[b[0] for b in BOMBS])
def test_a_msgpack_bomb_is_refused_before_its_objects_are_built(name, payload, limit_name):
    assert len(payload) < 1 << 20  # every bomb here is under 1 MB
    peak, seconds = refused(lambda: unpack_value(payload), limit_name)
    # Counting allocates nothing per object (before the fix: 30 to 60 MB here).
    assert peak < 8 << 20, f"{name}: RSS grew {peak} bytes"
    assert seconds < 5


@pytest.mark.parametrize("name, payload, limit_name", BOMBS, ids=[b[0] for b in BOMBS])
def test_a_compressed_msgpack_bomb_in_a_frame_is_refused(name, payload, limit_name):
    data = in_frame(payload)
    with b2store.open(data) as s:
        peak, _ = refused(lambda: s.vlmeta["bomb"], limit_name)
        # The decompressed payload (under 1 MB here) and the walk: far below 64 MiB.
        assert peak < len(payload) + (8 << 20), f"{name}: RSS grew {peak} bytes"
        # Through dict(vlmeta), as the Zarr store and xarray engine read attributes.
        with pytest.raises(LimitError, match=limit_name):
            dict(s.vlmeta)


@pytest.mark.parametrize("name, payload, limit_name", BOMBS, ids=[b[0] for b in BOMBS])
def test_raising_the_named_limit_lets_the_value_through(name, payload, limit_name):
    try:
        unpack_value(payload, Limits(**{limit_name: 1 << 40}))
    except LimitError as exc:  # pragma: no cover - a second limit would be a finding
        pytest.fail(f"{name}: raising {limit_name} hit {exc.limit_name}")
    except b2store.FormatError:
        pass  # e.g. an ext set of unhashable items: past the limits, an honest refusal


def test_a_17_kb_frame_of_60_mib_nested_msgpack_is_refused_before_decompressing():
    # The case: a few kB of zstd that decompress to 60 MB of nested lists.
    data = in_frame(msgpack.packb([[None] * 1000] * 60_000), clevel=9)
    assert len(data) < 20_000
    with b2store.open(data) as s:
        peak, seconds = refused(lambda: s.vlmeta["bomb"], "max_vlmeta_nbytes")
    assert peak < 1 << 20 and seconds < 2


def test_items_at_and_past_the_limit():
    value = list(range(999))  # the list and its 999 items
    packed = msgpack.packb(value)
    assert unpack_value(packed, Limits(max_vlmeta_items=1000)) == value
    with pytest.raises(LimitError, match="Limits.max_vlmeta_items"):
        unpack_value(packed, Limits(max_vlmeta_items=999))
    # Through a frame, the frame's limits apply.
    data = b2store.SChunk.create(None, typesize=1)
    data.vlmeta["v"] = value
    cframe = data.to_cframe()
    with b2store.open(cframe, limits=Limits(max_vlmeta_items=1000)) as s:
        assert s.vlmeta["v"] == value
    with b2store.open(cframe, limits=Limits(max_vlmeta_items=999)) as s:
        with pytest.raises(LimitError, match="Limits.max_vlmeta_items"):
            s.vlmeta["v"]


def test_ext_bytes_at_and_past_the_limit():
    array = np.arange(1000, dtype="<i8")
    packed = b2store.frame.vlmeta_codec.pack_value({"a": array})
    inner = msgpack.unpackb(packed, strict_map_key=False)["a"]
    counted = 2 * len(inner.data)  # an array's payload counts twice: it is copied out
    out = unpack_value(packed, Limits(max_vlmeta_nbytes=counted))
    np.testing.assert_array_equal(out["a"], array)
    with pytest.raises(LimitError, match="Limits.max_vlmeta_nbytes"):
        unpack_value(packed, Limits(max_vlmeta_nbytes=counted - 1))


@pytest.mark.parametrize(
    "raw",
    [
        b"\xdd\xff\xff\xff\xff",  # says 4 billion items, holds none
        b"\xdd\x00\x10\x00\x00" + b"\xc0" * 1000,  # a million items, a thousand present
        flat(1, 300_000)[:-1],  # a bomb cut short: not one msgpack object
        flat(1, 300_000) + b"\x00",  # ...or with a byte after it
        b"\xc1" * 10,
    ],
)
def test_raw_bytes_that_only_start_like_a_bomb_stay_raw_bytes(raw):
    # C writers store raw bytes in vlmeta; those are returned as they are, never refused.
    assert unpack_value(raw) == raw


# --- the sum of a frame's values ----------------------------------------------------------------
# Each value within the limits, together past them: eight values of 520,000 short strings, 68 kB
# of zstd, held 380 MB once dict(vlmeta) had read them (1 GB through the Zarr store).


def _many_values(nvalues: int, value, clevel: int = 9) -> bytes:
    s = SChunk.create(None, typesize=1)
    packed = msgpack.packb(value)
    chunk = encode_chunk(
        packed, typesize=1, codec=Codec.ZSTD, clevel=clevel, filters=[Filter.SHUFFLE]
    )
    s._set_vlmeta({f"v{i}": chunk for i in range(nvalues)})
    return s.to_cframe()


@pytest.mark.parametrize(
    "value, limit_name",
    [
        (["x" * 3300] * 1000, "max_vlmeta_nbytes"),  # 3.3 MB a value: 26 MB for eight
        ([None] * 100_000, "max_vlmeta_items"),  # 100,001 objects a value: 800,008 for eight
    ],
    ids=["bytes", "items"],
)
def test_values_within_the_limits_past_them_together_are_refused(value, limit_name):
    data = _many_values(8, value)
    assert len(data) < 1 << 20
    with b2store.open(data) as s:
        peak, _ = refused(lambda: dict(s.vlmeta), limit_name)
        assert peak < 8 << 20, f"RSS grew {peak} bytes before the refusal"
        with pytest.raises(LimitError, match=f"all values.*Limits.{limit_name}"):
            s.vlmeta["v3"]  # any one of them: the frame is refused, not the order of reads
    # One of them alone passes, and raising the named limit lets all of them through.
    assert dict(b2store.open(_many_values(1, value)).vlmeta) == {"v0": value}
    with b2store.open(data, limits=Limits(**{limit_name: 1 << 30})) as s:
        assert dict(s.vlmeta) == {f"v{i}": value for i in range(8)}


def test_the_sum_is_refused_through_zarr_and_xarray(tmp_path):
    zarr = pytest.importorskip("zarr")
    xr = pytest.importorskip("xarray")
    path = tmp_path / "many.b2nd"
    b2store.asarray(np.arange(10.0), path).close()
    # Written by a handle that trusts it (another writer, python-blosc2, need not refuse it).
    with b2store.open(path, mode="a", limits=Limits(max_vlmeta_nbytes=1 << 30)) as arr:
        arr.vlmeta.update({f"v{i}": ["x" * 3300] * 1000 for i in range(8)})
    with pytest.raises(LimitError, match="all values.*Limits.max_vlmeta_nbytes"):
        zarr.open_array(b2store.B2ndStore(path), mode="r")
    with pytest.raises(LimitError, match="all values.*Limits.max_vlmeta_nbytes"):
        xr.open_dataset(path, engine="b2nd")


_RSS_CHILD = """
import resource, sys, numpy as np, zarr, b2store
path, how = sys.argv[1], sys.argv[2]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if how == "vlmeta":
    held = dict(b2store.open(path).vlmeta)
else:
    held = dict(zarr.open_array(b2store.B2ndStore(path), mode="r").attrs)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


@pytest.mark.parametrize("how", ["vlmeta", "zarr"])
@pytest.mark.parametrize(
    "values",
    [
        # sized from the defaults, so that raising one fails here first
        {"v": ["x" * 31] * (ITEMS - 2)},  # objects: at max_vlmeta_items
        {"v": ["x" * (NBYTES // 64 - 8)] * 64},  # bytes: at max_vlmeta_nbytes
        {f"v{i}": ["x" * (NBYTES // 128 - 8)] * 32 for i in range(4)},  # over several values
    ],
    ids=["objects", "bytes", "bytes-4-values"],
)
def test_what_the_defaults_admit_stays_under_64_mib(tmp_path, values, how):
    """The issue's bound: an input under 1 MB is decoded or refused within 64 MiB of RSS,
    measured in a fresh interpreter (the growth of its peak), through dict(vlmeta) and
    through the Zarr store, which holds the values and their JSON form at once."""
    import subprocess
    import sys

    path = tmp_path / "big.b2nd"
    arr = b2store.asarray(np.arange(10.0), path)
    arr.vlmeta.update(values)
    arr.close()
    assert path.stat().st_size < 1 << 20
    done = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(path), how], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    growth = int(done.stdout.split()[-1])
    assert growth < 64 << 20, f"RSS grew {growth / 2**20:.0f} MiB"


def test_a_writer_refuses_vlmeta_its_own_limits_would_refuse_to_read():
    arr = b2store.asarray(np.arange(10.0))
    with pytest.raises(LimitError, match="all values.*Limits.max_vlmeta_nbytes"):
        arr.vlmeta["big"] = bytes(NBYTES + 1)
    arr.vlmeta.update({f"v{i}": bytes(NBYTES // 4) for i in range(3)})
    with pytest.raises(LimitError, match="all values.*Limits.max_vlmeta_nbytes"):
        arr.vlmeta["v3"] = bytes(NBYTES // 4)  # the fourth passes the sum
    assert sorted(arr.vlmeta) == ["v0", "v1", "v2"]  # nothing was written by the refusal
