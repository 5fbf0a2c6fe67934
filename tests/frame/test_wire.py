"""The fixed-width msgpack items of frame headers, trailers and the b2nd metalayer: one table,
read with checks that name the field and offset, written as msgpack writes them."""

import ast

import msgpack
import pytest
from helpers import corpus_dir
from hypothesis import given
from hypothesis import strategies as st

import b2store.frame.header
import b2store.frame.trailer
import b2store.nd.meta
from b2store.errors import FormatError
from b2store.frame import wire
from b2store.frame.header import _MODERN, FrameHeader
from b2store.frame.trailer import read_trailer, trailer_bytes

INTS = [
    (wire.UINT8, 0, 255),
    (wire.UINT16, 0, 2**16 - 1),
    (wire.UINT32, 0, 2**32 - 1),
    (wire.UINT64, 0, 2**64 - 1),
    (wire.INT8, -(2**7), 2**7 - 1),
    (wire.INT16, -(2**15), 2**15 - 1),
    (wire.INT32, -(2**31), 2**31 - 1),
    (wire.INT64, -(2**63), 2**63 - 1),
]


@pytest.mark.parametrize("item,lo,hi", INTS, ids=lambda v: getattr(v, "name", str(v)))
def test_integers_are_msgpack(item, lo, hi):
    for value in (lo, hi, 0, 1):
        raw = wire.pack(item, value)
        assert len(raw) == item.size and msgpack.unpackb(raw) == value
        assert wire.read(b"xx" + raw, 2, item, "f") == value
        assert wire.Cursor(raw).any_int("f") == (value, 0)
        out = bytearray(item.size + 3)
        wire.write(out, 3, item, value)
        assert bytes(out[3:]) == raw


def test_wrong_markers_and_truncation_name_field_and_offset():
    raw = b"\x00\x00" + wire.pack(wire.INT32, -5) + bytes(4)
    with pytest.raises(FormatError, match="nbytes marker at offset 2") as err:
        wire.read(raw, 2, wire.INT64, "nbytes")
    assert (err.value.field, err.value.offset) == ("nbytes marker", 2)
    with pytest.raises(FormatError, match=r"typesize at offset 2: expected 5 bytes") as err:
        wire.read(raw, 2, wire.INT32, "typesize", end=6)
    assert (err.value.field, err.value.offset) == ("typesize", 2)
    with pytest.raises(FormatError, match="x marker at offset 102") as err:
        wire.read(raw, 2, wire.INT64, "x", base=100)
    assert err.value.offset == 102
    with pytest.raises(FormatError, match="^x at offset -1:"):
        wire.read(raw, -1, wire.INT32, "x")


@given(st.binary(max_size=31), st.binary(max_size=300))
def test_strings_and_bins_are_msgpack(name, content):
    assert msgpack.unpackb(wire.pack_fixstr(name), raw=True) == name
    assert msgpack.unpackb(wire.pack_bin32(content)) == content
    assert msgpack.unpackb(wire.pack_str32(content), raw=True) == content
    raw = wire.pack_bin32(content)
    assert wire.read_bin32(raw, 0, len(raw), "v") == content
    with pytest.raises(FormatError, match="v length" if content else "v value"):
        wire.read_bin32(raw, 0, len(raw) - 1, "v")


def test_fixstr_errors():
    with pytest.raises(ValueError, match="a fixstr holds at most 31 bytes"):
        wire.pack_fixstr(b"x" * 32)
    assert wire.read_fixstr(b"\xa3abc!", 0, 5, "n") == ("abc", 4)
    for raw, end in ((b"\xa3ab", 3), (b"\xd9\x03abc", 5), (b"\xa2\xff\xfe", 3), (b"", 0)):
        with pytest.raises(FormatError, match="^name at offset 0:") as err:
            wire.read_fixstr(raw, 0, end, "name")
        assert err.value.field == "name" and err.value.offset == 0


def test_cursor():
    raw = msgpack.packb([1, [2, 3], b"xy"], use_bin_type=True)
    cur = wire.Cursor(raw, name="thing")
    assert cur.array_len("a") == 3 and cur.fixint("v", 5) == 1 and cur.array_len("b") == 2
    assert [cur.any_int("i")[0] for _ in range(2)] == [2, 3]
    assert cur.bin_len("c") == 2 and cur.take(2, "c") == b"xy"
    cur.finish("end")
    with pytest.raises(FormatError, match="the thing ends"):
        cur.byte("more")
    for value in (-32, -1, 127, 128, -33, 2**40, -(2**40)):
        assert wire.Cursor(msgpack.packb(value)).any_int("i")[0] == value
    for n in (0, 15, 16, 70000):
        assert wire.Cursor(msgpack.packb([0] * n)).array_len("a") == n
    cur = wire.Cursor(b"\x05\x00")
    with pytest.raises(FormatError, match="ndim at offset 0") as err:
        cur.fixint("ndim", 4)
    assert (err.value.field, err.value.offset) == ("ndim", 0)
    with pytest.raises(FormatError, match="metalayer length at offset 0") as err:
        wire.Cursor(b"\x01\x02", end=2).finish("metalayer length")
    assert err.value.offset == 0
    with pytest.raises(FormatError, match="i at offset 0: expected a msgpack integer"):
        wire.Cursor(b"\xc0").any_int("i")
    with pytest.raises(FormatError, match="a at offset 0: expected a msgpack array"):
        wire.Cursor(b"\xc0").array_len("a")
    with pytest.raises(FormatError, match="b at offset 0: expected a msgpack bin"):
        wire.Cursor(b"\xa1").bin_len("b")
    with pytest.raises(FormatError, match=r"shape\[0\] marker at offset 1") as err:
        wire.Cursor(b"\x00\xd3\x00\x00\x00\x00", 1).item(wire.INT32, "shape[0]")
    assert (err.value.field, err.value.offset) == ("shape[0] marker", 1)


def test_every_fixed_header_field_is_checked_by_the_table():
    data = (corpus_dir("generated") / "f8_2d_vlmeta.b2nd").read_bytes()
    header = FrameHeader.from_bytes(data)
    assert header.to_bytes() == data[: header.header_len]
    for name, (at, _) in _MODERN.fields.items():
        bad = bytearray(data)
        bad[at] = 0xC0
        with pytest.raises(FormatError, match=f"^{name} marker at offset {at}:") as err:
            FrameHeader.from_bytes(bytes(bad))
        assert (err.value.field, err.value.offset) == (f"{name} marker", at)


def test_trailer_index_errors():
    raw = trailer_bytes({"a": b"\x01\x02", "bc": b""})
    assert read_trailer(memoryview(raw)) == {"a": b"\x01\x02", "bc": b""}
    for at, field in ((2, "vlmeta index"), (3, "vlmeta index marker"), (6, "vlmeta count marker")):
        bad = bytearray(raw)
        bad[at] = 0xC0
        with pytest.raises(FormatError, match=f"^{field} at offset {at}:") as err:
            read_trailer(memoryview(bytes(bad)))
        assert (err.value.field, err.value.offset) == (field, at)
    bad = bytearray(raw)
    assert raw[9:12] == b"\xa1a\xd2"  # name "a", then its int32 offset
    bad[12:16] = (len(raw)).to_bytes(4, "big")  # vlmetalayer 'a' points past the end
    with pytest.raises(FormatError, match="vlmetalayer 'a' value"):
        read_trailer(memoryview(bytes(bad)))


@pytest.mark.parametrize("module", [b2store.frame.header, b2store.frame.trailer, b2store.nd.meta])
def test_layouts_are_read_and_written_through_wire_only(module):
    """The three fixed-msgpack layouts share wire.py: none packs or unpacks by itself."""
    tree = ast.parse(open(module.__file__).read())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "struct" not in imported
