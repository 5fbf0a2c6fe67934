"""vlmeta values: b2store's msgpack codec against python-blosc2's own encoder and decoder."""

from __future__ import annotations

import tracemalloc

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from b2store.errors import FormatError
from b2store.frame.vlmeta_codec import pack_value, unpack_value

blosc2 = pytest.importorskip("blosc2")
from blosc2.msgpack_utils import msgpack_packb, msgpack_unpackb  # noqa: E402

STRUCT = np.dtype([("a", "<i4"), ("b", ">f8", (2,)), ("s", "S3")])
NESTED = np.dtype([(("title", "t"), "<u2"), ("n", [("x", "u1"), ("y", "<f4", (2, 2))])])
ARRAYS = [
    np.arange(12, dtype="<i8").reshape(3, 4),
    np.arange(12, dtype=">i2").reshape(4, 3).T,  # not contiguous: stored in C order
    np.linspace(0, 1, 5, dtype="<f4"),
    np.array([True, False]),
    np.array(["ab", "çé"]),
    np.array([b"x", b"yz"]),
    np.zeros(3, STRUCT),
    np.ones(2, NESTED),
    np.array(["2020-01-01"], "M8[D]"),
    np.array(7, dtype="<u8"),
    np.zeros((2, 0)),
    np.array([1, "a", None, [1, 2]], dtype=object),
]
SAMPLES = [
    None,
    True,
    0,
    -1,
    2**64 - 1,
    -(2**63),
    1.5,
    "",
    "é",
    b"\x00\xff",
    [],
    (),
    [1, [2, (3,)]],
    {"a": (1, {"b": (2, [3, (4,)])})},
    1 + 2j,
    np.complex64(-1j),
    {1, 2},
    frozenset({"x", (1, 2)}),
    np.float32(1.5),
    np.int16(-3),
    np.uint64(2**63),
    np.bool_(True),
    np.str_("s"),
    np.bytes_(b"b"),
    msgpack.ExtType(7, b"opaque"),
    {"arr": ARRAYS[0], "t": (ARRAYS[2], 1j)},
]


def same(a: object, b: object) -> bool:
    """Equality that also tells tuple from list, bool from int and compares arrays fully."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            type(a) is type(b)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and all(same(x, y) for x, y in zip(a.ravel().tolist(), b.ravel().tolist()))
        )
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def expected(value: object) -> object:
    """What a value reads back as: NumPy scalars become Python ones, frozensets sets."""
    if isinstance(value, np.generic):
        return value.item() if not isinstance(value, np.complexfloating) else complex(value)
    return set(value) if isinstance(value, frozenset) else value


@pytest.mark.parametrize("value", SAMPLES + ARRAYS, ids=lambda v: type(v).__name__)
def test_bytes_match_python_blosc2_both_ways(value):
    packed = pack_value(value)
    assert packed == msgpack_packb(value)
    assert same(unpack_value(packed), expected(value))
    # python-blosc2's decoder reads what b2store writes (and b2store what it writes).
    assert same(msgpack_unpackb(packed), expected(value))


@pytest.mark.parametrize("value", SAMPLES + ARRAYS, ids=lambda v: type(v).__name__)
def test_reads_vlmeta_written_by_python_blosc2(value):
    array = blosc2.zeros(10)
    array.vlmeta["k"] = value
    raw = array.schunk.vlmeta.get_vlmeta("k")  # the packed bytes, out of the compressed chunk
    assert same(unpack_value(raw), expected(value))


def test_decoded_arrays_are_writable_copies():
    out = unpack_value(pack_value(ARRAYS[0]))
    out[0, 0] = 99
    assert out.flags.writeable and out.flags.c_contiguous


PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text().filter(lambda s: s != "__tuple__")
    | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(PLAIN)
def test_round_trip_nested_plain_values(value):
    packed = pack_value(value)
    assert packed == msgpack_packb(value)
    assert same(unpack_value(packed), value)
    assert same(msgpack_unpackb(packed), value)


def test_raw_bytes_come_back_unchanged():
    # c-blosc2's fuzz corpus stores bytes(range(10)): a fixint 0 and then trailing bytes.
    broken_ext46 = b"\xd4\x2e\x00"  # alone a broken array value; followed by more, raw bytes
    for raw in [bytes(range(10)), b"", b"\xc1", b"\x92\x01", b"\xa5ab", broken_ext46 + b"xy"]:
        assert unpack_value(raw) == raw and type(unpack_value(raw)) is bytes
    array = blosc2.zeros(10)
    blosc2.blosc2_ext.vlmeta.set_vlmeta(array.schunk.vlmeta, "raw", bytes(range(10)), typesize=1)
    assert unpack_value(array.schunk.vlmeta.get_vlmeta("raw")) == bytes(range(10))


def test_opaque_ext_types_are_never_rebuilt(tmp_path):
    cframe = msgpack_packb(blosc2.zeros(3))
    assert unpack_value(cframe) == msgpack.ExtType(42, blosc2.zeros(3).to_cframe())
    ref = msgpack_packb(blosc2.Ref(kind="urlpath", urlpath=str(tmp_path / "x.b2nd")))
    assert unpack_value(ref) == msgpack.unpackb(ref)  # ExtType(43, ...), file never opened
    marker = tmp_path / "pwned"
    evil = {
        "kind": "lazyexpr",
        "version": 1,
        "operands": {},
        "expression": f"__import__('pathlib').Path({str(marker)!r}).touch()",
    }
    out = unpack_value(msgpack.packb(msgpack.ExtType(43, msgpack.packb(evil))))
    assert out == msgpack.ExtType(43, msgpack.packb(evil)) and not marker.exists()
    for code in (0, 7, 41, 47, 127):
        ext = msgpack.ExtType(code, b"ab")
        assert unpack_value(msgpack.packb([ext])) == [ext]
    with pytest.raises(FormatError, match="ext"):  # code -5: reserved by msgpack, no ExtType
        unpack_value(b"\x91\xd5\xfbab")


def ndarray_ext(payload: dict) -> bytes:
    return msgpack.packb(msgpack.ExtType(46, msgpack.packb(payload)))


BAD_NDARRAYS = [
    {"dtype": {"str": "O"}, "shape": [1], "data": bytes(8)},
    {"dtype": {"str": "|O"}, "shape": [1], "data": bytes(8)},
    {"dtype": {"descr": [["__tuple__", "a", "|O"]]}, "shape": [1], "data": bytes(8)},
    {"dtype": {"str": "not a dtype"}, "shape": [1], "data": bytes(8)},
    {"dtype": {"str": "(2,)<i4"}, "shape": [1], "data": bytes(8)},
    {"dtype": {"str": 5}, "shape": [1], "data": bytes(8)},
    {"dtype": {"descr": "<i4"}, "shape": [1], "data": bytes(4)},
    {"dtype": {"str": "<i8"}, "shape": [3], "data": bytes(16)},
    {"dtype": {"str": "<i8"}, "shape": [2**62], "data": bytes(8)},
    {"dtype": {"str": "V99999999999"}, "shape": [2**40], "data": bytes(8)},
    {"dtype": {"str": "<i8"}, "shape": [-1], "data": bytes(8)},
    {"dtype": {"str": "<i8"}, "shape": [True], "data": bytes(8)},
    {"dtype": {"str": "<i8"}, "shape": [0, 2**64 - 1], "data": b""},
    {"dtype": {"str": "<i8"}, "shape": [1] * 100, "data": bytes(8)},
    {"dtype": {"str": "<i8"}, "shape": [1], "data": "text"},
    {"values": [1], "shape": [10**12]},
    {"values": 5, "shape": [1]},
    {"shape": [1]},
]


@pytest.mark.parametrize("payload", BAD_NDARRAYS, ids=lambda p: repr(p)[:40])
def test_hostile_ndarrays_raise_format_error(payload):
    with pytest.raises(FormatError, match="vlmeta ndarray"):
        unpack_value(ndarray_ext(payload))


@pytest.mark.parametrize(
    "data",
    [
        # bin32, str32, array32, map32, ext32 declaring 4 GiB; deep nesting; a cut-off fixext.
        *(bytes([kind]) + b"\xff" * 4 for kind in (0xC6, 0xDB, 0xDD, 0xDF)),
        b"\xc9\xff\xff\xff\xff\x2e",
        b"\x91" * 5000,
        b"\xd4\x2e",
    ],
)
def test_huge_declared_lengths_are_raw_bytes_without_allocating(data):
    tracemalloc.start()
    try:
        assert unpack_value(data) == data
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()


def test_other_broken_ext_payloads_raise_format_error():
    nested = msgpack.ExtType(45, msgpack.packb([1]))
    for _ in range(100):  # sets nested far deeper than any real value
        nested = msgpack.ExtType(45, msgpack.packb([nested]))
    cases = [
        (44, b"\0" * 15),
        (45, b"\xc1"),
        (45, b"\x05"),
        (45, msgpack.packb([{"a": 1}])),
        (46, b"\x92"),
        nested,
    ]
    matches = [
        "vlmeta complex: expected 16 bytes, found 15",
        "vlmeta set: expected a msgpack payload",
        "vlmeta set: expected a msgpack list of items, found int",
        "vlmeta set: expected hashable items, found dict",
        "vlmeta ndarray: expected a msgpack payload",
        "vlmeta set: expected ext nesting depth <= 32, found 33",
    ]
    for case, match in zip(cases, matches, strict=True):
        with pytest.raises(FormatError, match=match):
            unpack_value(msgpack.packb(msgpack.ExtType(*case)))
    # complete msgpack, but a list as a map key
    with pytest.raises(FormatError, match="vlmeta: expected a value Python can represent"):
        unpack_value(b"\x81\x91\x01\x02")


def test_set_items_are_made_hashable_and_tuple_tag_survives():
    # A list item cannot come from python-blosc2, but may from other writers: it becomes a tuple.
    listy = msgpack.ExtType(45, msgpack.packb([[1, [2]], 3]))
    assert unpack_value(msgpack.packb(listy)) == {(1, (2,)), 3}
    # A set whose first item is the string "__tuple__": python-blosc2 loses it, b2store not.
    tagged = msgpack.packb(msgpack.ExtType(45, msgpack.packb(["__tuple__", 1])))
    assert msgpack_unpackb(tagged) == {1} and unpack_value(tagged) == {"__tuple__", 1}


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 200), st.integers(0, 255))
def test_garbage_and_mutated_payloads_never_crash(junk, position, byte):
    for data in (junk, bytearray(pack_value({"a": ARRAYS[6], "c": 1j, "s": {1}}))):
        if isinstance(data, bytearray):
            data[position % len(data)] = byte
        try:
            unpack_value(bytes(data))
        except FormatError:
            pass


def test_unsupported_values_are_refused_like_python_blosc2():
    # (value, the error python-blosc2 and b2store raise, python-blosc2's message, b2store's)
    for value, error, theirs, ours in (
        (object(), TypeError, "can not serialize 'object' object", "'object' object as vlmeta"),
        (np.zeros(1, STRUCT)[0], TypeError, "'numpy.void' object", "'void' object as vlmeta"),
        ({"k": 2**64}, OverflowError, "Integer value out of range", "65 bits does not fit"),
    ):
        with pytest.raises(error, match=theirs):
            msgpack_packb(value)
        with pytest.raises(error, match=ours):
            pack_value(value)
