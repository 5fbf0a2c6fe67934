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
