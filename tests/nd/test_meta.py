"""The b2nd metalayer: every corpus file, python-blosc2's bytes for many dtypes, and bad input.

The metalayer bytes are taken straight from the frame header (the metalayers index at offset
87), so nothing here depends on b2store's frame layer; python-blosc2 and the msgpack package
are the independent readers the values are compared with.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import msgpack
import numpy as np
import pytest
from helpers import case_id, corpus_cases, corpus_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from b2store.constants import MAX_BUFFERSIZE
from b2store.errors import FormatError, UnsupportedError
from b2store.nd.meta import B2ndMeta, dtype_from_string, dtype_string

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the reference metalayers")


# --- reading the metalayers out of a frame header, independently of b2store ----------------


def frame_header(path: Path) -> bytes:
    """A contiguous frame's bytes, or a sparse frame's ``chunks.b2frame`` (same header)."""
    return (path / "chunks.b2frame" if path.is_dir() else path).read_bytes()


def frame_metalayers(frame: bytes) -> dict[str, bytes]:
    """``{name: content}`` of the fixed metalayers (notes 3.1: index at 87, values bin32)."""
    assert frame[87] == 0x93 and frame[88] == 0xCD and frame[91] == 0xDE
    (count,) = struct.unpack_from(">H", frame, 92)
    pos, out = 94, {}
    for _ in range(count):
        length = frame[pos] - 0xA0
        name = frame[pos + 1 : pos + 1 + length].decode()
        pos += 1 + length
        assert frame[pos] == 0xD2
        (offset,) = struct.unpack_from(">i", frame, pos + 1)
        pos += 5
        assert frame[offset] == 0xC6
        (size,) = struct.unpack_from(">I", frame, offset + 1)
        out[name] = frame[offset + 5 : offset + 5 + size]
    return out


def frame_sizes(frame: bytes) -> tuple[int, int, int]:
    """``(nbytes, typesize, chunksize)`` from the frame header."""
    (nbytes,) = struct.unpack_from(">q", frame, 30)
    (typesize,) = struct.unpack_from(">i", frame, 48)
    (chunksize,) = struct.unpack_from(">i", frame, 58)
    return nbytes, typesize, chunksize


def oracle_fields(content: bytes) -> list:
    """The metalayer as a generic msgpack reader sees it (fine below 16 dimensions)."""
    return msgpack.unpackb(content)


# --- the corpus ------------------------------------------------------------------------------

GENERATED = corpus_cases("generated", {"b2nd", "caterva"})
COMPAT = corpus_cases("compat", {"b2nd", "caterva"})


def metalayer_of(folder: str, case: dict) -> tuple[bytes, bytes, str]:
    frame = frame_header(corpus_dir(folder) / case["path"])
    metas = frame_metalayers(frame)
    name = "b2nd" if case["kind"] == "b2nd" else "caterva"
    assert name in metas, f"{case['name']} has metalayers {sorted(metas)}"
    return frame, metas[name], name


@pytest.mark.parametrize("case", GENERATED, ids=case_id)
def test_generated_corpus(case):
    frame, content, name = metalayer_of("generated", case)
    meta = B2ndMeta.from_bytes(content, caterva=name == "caterva")
    assert meta.shape == tuple(case["shape"])
    assert meta.chunkshape == tuple(case["chunks"])
    assert meta.blockshape == tuple(case["blocks"])
    nbytes, typesize, chunksize = frame_sizes(frame)
    if name == "b2nd":
        assert not meta.legacy_caterva
        assert meta.dtype == dtype_from_string(case["dtype"])
        assert dtype_string(meta.dtype) == case["dtype"]
        assert meta.to_bytes() == content
        assert typesize == meta.itemsize
        # every chunk is padded to whole blocks: the frame's chunk size says so
        assert chunksize == meta.chunk_nitems * meta.itemsize
        assert nbytes == meta.nchunks * chunksize
        assert oracle_fields(content) == [
            0,
            meta.ndim,
            list(meta.shape),
            list(meta.chunkshape),
            list(meta.blockshape),
            0,
            case["dtype"],
        ]
    else:
        # python-blosc2 wrote this one as a user metalayer: compact msgpack in a msgpack bin
        assert meta.legacy_caterva and meta.dtype is None
        assert content[0] == 0xC4 and msgpack.unpackb(msgpack.unpackb(content)) == [
            0,
            2,
            case["shape"],
            case["chunks"],
            case["blocks"],
        ]
        canonical = meta.to_bytes()
        assert canonical[0] == 0x95 and B2ndMeta.from_bytes(canonical, caterva=True) == meta
        assert typesize == np.dtype(case["dtype"]).itemsize


@pytest.mark.parametrize("case", COMPAT, ids=case_id)
def test_compat_corpus(case):
    frame, content, name = metalayer_of("compat", case)
    meta = B2ndMeta.from_bytes(content, caterva=name == "caterva")
    assert meta.to_bytes() == content
    decoded = oracle_fields(content)
    assert [decoded[0], decoded[1]] == [0, meta.ndim]
    assert decoded[2:5] == [list(meta.shape), list(meta.chunkshape), list(meta.blockshape)]
    nbytes, typesize, chunksize = frame_sizes(frame)
    if name == "caterva":
        assert meta.legacy_caterva and meta.dtype is None and len(decoded) == 5
        assert meta.shape == tuple(case["shape"])
        assert meta.chunkshape == tuple(case["chunks"])
        assert meta.blockshape == tuple(case["blocks"])
        assert typesize == np.dtype(case["expected_dtype"]).itemsize
        assert chunksize == meta.chunk_nitems * typesize
        return
    assert decoded[5:] == [0, dtype_string(meta.dtype)]
    if case.get("must_raise"):
        # the C example files: dtype "|u1" over 4-byte items; visible from the metalayer alone
        assert dtype_string(meta.dtype) == "|u1" and typesize == 4
        assert meta.itemsize != typesize
        assert chunksize == meta.chunk_nitems * typesize
    else:
        if "expected_npy" in case:
            expected = np.load(corpus_dir("compat") / case["expected_npy"])
            assert meta.shape == expected.shape and meta.dtype == expected.dtype
        assert typesize == meta.itemsize
        assert chunksize == meta.chunk_nitems * meta.itemsize


def test_known_compat_values():
    """Values stated in the notes and the compat manifest, read from the bytes."""
    directory = corpus_dir("compat")
    expected = {
        "history__example_day_month_temp.caterva": ((400, 3), (110, 3), (57, 3)),
        "history__example_item_prices.caterva": ((12, 25, 250), (6, 10, 50), (3, 5, 10)),
        "plugins__test_data__example_day_month_temp.b2nd": ((400, 3), (110, 3), (57, 3)),
        "plugins__test_data__example_item_prices.b2nd": ((12, 25, 250), (8, 10, 50), (4, 5, 10)),
    }
    for filename, (shape, chunks, blocks) in expected.items():
        caterva = filename.endswith(".caterva")
        metas = frame_metalayers((directory / filename).read_bytes())
        meta = B2ndMeta.from_bytes(metas["caterva" if caterva else "b2nd"], caterva=caterva)
        assert (meta.shape, meta.chunkshape, meta.blockshape) == (shape, chunks, blocks)
        assert meta.legacy_caterva == caterva


def test_python_blosc2_agrees_on_a_corpus_file():
    path = corpus_dir("generated") / "struct_1d.b2nd"
    array = blosc2.open(str(path))
    meta = B2ndMeta.from_bytes(frame_metalayers(path.read_bytes())["b2nd"])
    assert array.schunk.meta["b2nd"] == [0, 1, [1000], [300], [100], 0, dtype_string(meta.dtype)]
    assert meta.shape == array.shape
    assert (meta.chunkshape, meta.blockshape) == (array.chunks, array.blocks)
    assert meta.dtype == array.dtype


# --- what python-blosc2 writes, for many dtypes and shapes ------------------------------------

ALIGNED = np.dtype([("a", "<i4"), ("b", "u1")], align=True)
OFFSETS = np.dtype(
    {"names": ["a", "b"], "formats": ["<i4", "<f8"], "offsets": [0, 16], "itemsize": 32}
)
# (dtype, the string python-blosc2 4.14.1 writes for it through blosc2.zeros)
DTYPES = [
    ("<f8", "<f8"),
    ("<f4", "<f4"),
    ("<f2", "<f2"),
    (">f8", ">f8"),
    ("<i4", "<i4"),
    (">i4", ">i4"),
    ("|i1", "|i1"),
    ("<u8", "<u8"),
    ("|u1", "|u1"),
    ("|b1", "|b1"),
    ("<c8", "<c8"),
    ("<c16", "<c16"),
    ("|S3", "|S3"),
    ("<U5", "<U5"),
    (">U3", ">U3"),
    ("<U1", "<U1"),
    ("<M8[s]", "<M8[s]"),
    ("<M8[ns]", "<M8[ns]"),
    ("<m8[D]", "<m8[D]"),
    ("V300", "|V300"),
    ("V8", "|V8"),
    (
        [("a", "<i4"), ("b", "<f8", (2,)), ("c", "S3")],
        "[('a', '<i4'), ('b', '<f8', (2,)), ('c', 'S3')]",
    ),
    ([("n", [("x", "<f4"), ("y", ">i2")])], "[('n', [('x', '<f4'), ('y', '>i2')])]"),
    ([(("title", "a"), "<i4")], "[(('title', 'a'), '<i4')]"),
    ([("a", "<U4"), ("é", "u1")], "[('a', '<U4'), ('é', 'u1')]"),
    (
        ALIGNED,
        "{'names': ['a', 'b'], 'formats': ['<i4', 'u1'], 'offsets': [0, 4], 'itemsize': 8, "
        "'aligned': True}",
    ),
    (
        OFFSETS,
        "{'names': ['a', 'b'], 'formats': ['<i4', '<f8'], 'offsets': [0, 16], 'itemsize': 32}",
    ),
    (("<i4", (2,)), "('<i4', (2,))"),
]
SHAPES = [
    ((), (), ()),
    ((0,), (0,), (0,)),
    ((0, 5), (0, 5), (0, 5)),
    ((0, 5), (2, 3), (1, 2)),
    ((5, 0), (2, 3), (1, 2)),
    ((7,), (10,), (10,)),
    ((10, 7), (4, 5), (2, 3)),
    ((3, 4, 5, 6), (2, 3, 3, 4), (1, 2, 2, 3)),
    ((2,) * 8, (2, 1) * 4, (1,) * 8),
    ((1,) * 15 + (3,), (1,) * 15 + (2,), (1,) * 15 + (2,)),
    ((2**33, 3), (2**22, 3), (2**10, 1)),
]


def cframe_meta(array) -> bytes:
    return frame_metalayers(array.schunk.to_cframe())["b2nd"]


def check_written(array, dtype_text: str) -> None:
    content = cframe_meta(array)
    meta = B2ndMeta.from_bytes(content)
    assert meta.shape == array.shape
    assert (meta.chunkshape, meta.blockshape) == (array.chunks, array.blocks)
    assert meta.dtype == array.dtype
    assert dtype_string(meta.dtype) == dtype_text
    assert meta.to_bytes() == content
    built = B2ndMeta(array.shape, array.chunks, array.blocks, array.dtype)
    assert built.to_bytes() == content and built == meta
    assert len(content) == 12 + 19 * meta.ndim + len(dtype_text.encode())


@pytest.mark.parametrize("dtype,text", DTYPES, ids=lambda v: str(v)[:40])
def test_dtypes_python_blosc2_writes(dtype, text):
    array = blosc2.zeros((3, 4), dtype=np.dtype(dtype), chunks=(2, 3), blocks=(1, 2))
    check_written(array, text)


@pytest.mark.parametrize("shape,chunks,blocks", SHAPES, ids=str)
def test_shapes_python_blosc2_writes(shape, chunks, blocks):
    array = blosc2.empty(shape, dtype="<i4", chunks=chunks, blocks=blocks)
    check_written(array, "<i4")


def test_asarray_rewrites_void_dtypes():
    """asarray turns plain V and padded structs into field lists before writing."""
    cases = [
        ("V300", "[('f0', 'V300')]"),
        (ALIGNED, "[('a', '<i4'), ('b', 'u1'), ('f2', 'V3')]"),
        (OFFSETS, "[('a', '<i4'), ('f1', 'V12'), ('b', '<f8'), ('f3', 'V8')]"),
    ]
    for dtype, text in cases:
        array = blosc2.asarray(np.zeros(4, dtype=dtype), chunks=(2,), blocks=(1,))
        check_written(array, text)


def test_default_shape_for_zero_length():
    array = blosc2.zeros((0, 5), dtype="<f8")
    assert (array.chunks, array.blocks) == ((0, 5), (0, 5))
    check_written(array, "<f8")


def test_sixteen_dims_have_a_fixstr_marker():
    shape = (1,) * 15 + (2,)
    array = blosc2.zeros(shape, dtype="|i1", chunks=shape, blocks=shape)
    content = cframe_meta(array)
    assert content[3] == 0xA0 and content[4 + 16 * 9] == 0xA0
    # A generic msgpack reader sees a 16-byte string there and loses its place.
    with pytest.raises(msgpack.ExtraData, match="extra data"):
        assert msgpack.unpackb(content)[2] == list(shape)
    assert B2ndMeta.from_bytes(content).shape == shape


def test_caterva_layout():
    meta = B2ndMeta((400, 3), (110, 3), (57, 3), None, legacy_caterva=True)
    content = meta.to_bytes()
    assert content.hex() == (
        "95000292d30000000000000190d3000000000000000392d20000006ed20000000392d200000039d200000003"
    )
    assert B2ndMeta.from_bytes(content, caterva=True) == meta
    with pytest.raises(FormatError, match="metalayer array") as err:
        B2ndMeta.from_bytes(content)  # not a b2nd metalayer
    assert err.value.offset == 0
    with pytest.raises(FormatError, match=r"metalayer array.*expected marker 0x95"):
        B2ndMeta.from_bytes(B2ndMeta((4,), (2,), (1,), np.dtype("<i4")).to_bytes(), caterva=True)


def test_caterva_as_python_writes_it():
    fields = [0, 2, [60, 40], [30, 20], [10, 10]]
    expected = B2ndMeta((60, 40), (30, 20), (10, 10), None, legacy_caterva=True)
    compact = msgpack.packb(fields)
    for content in (compact, msgpack.packb(compact), msgpack.packb(expected.to_bytes())):
        assert B2ndMeta.from_bytes(content, caterva=True) == expected
    with pytest.raises(FormatError, match=r"shape\[0\] marker"):
        B2ndMeta.from_bytes(msgpack.packb([0, 2, [60, 40], [30, 20], [10, 30]]), caterva=True)
    with pytest.raises(FormatError, match="metalayer bin length"):
        B2ndMeta.from_bytes(msgpack.packb(compact)[:-1], caterva=True)
    with pytest.raises(FormatError, match=r"metalayer array.*expected marker 0x95, found 0x94"):
        B2ndMeta.from_bytes(msgpack.packb([0, 2, [60, 40], [30, 20]]), caterva=True)
    with pytest.raises(FormatError, match=r"metalayer array.*expected marker 0x97"):
        B2ndMeta.from_bytes(msgpack.packb(compact)[:-1], caterva=False)


# --- bad input ---------------------------------------------------------------------------------

SAMPLES = [
    B2ndMeta((), (), (), np.dtype("<f8")),
    B2ndMeta((10, 7), (4, 5), (2, 3), np.dtype("<i4")),
    B2ndMeta((5,), (5,), (5,), np.dtype([("a", "<i4"), ("b", "<f8", (2,))])),
    B2ndMeta((2,) * 16, (1,) * 16, (1,) * 16, np.dtype("|u1")),
    B2ndMeta((12, 25, 250), (6, 10, 50), (3, 5, 10), None, legacy_caterva=True),
]


def b2nd(shape, chunks, blocks, dtype=b"<f8", *, ndim=None, version=0, dtype_format=0) -> bytes:
    """Metalayer bytes built by hand, with no validation."""
    ndim = len(shape) if ndim is None else ndim
    out = bytearray([0x97, version, ndim & 0xFF])
    for values, marker, fmt in ((shape, 0xD3, ">q"), (chunks, 0xD2, ">i"), (blocks, 0xD2, ">i")):
        out.append((0x90 + len(values)) & 0xFF)
        for v in values:
            out += bytes([marker]) + struct.pack(fmt, v)
    return bytes(out + bytes([dtype_format, 0xDB]) + struct.pack(">I", len(dtype)) + dtype)


def test_hand_built_matches():
    assert b2nd((10, 7), (4, 5), (2, 3), b"<i4") == SAMPLES[1].to_bytes()


@pytest.mark.parametrize("meta", SAMPLES, ids=lambda m: str(m.shape)[:20])
def test_every_truncation(meta):
    content = meta.to_bytes()
    for n in range(len(content)):
        with pytest.raises(FormatError, match=r"\(the metalayer ends\)"):
            B2ndMeta.from_bytes(content[:n], caterva=meta.legacy_caterva)
    with pytest.raises(FormatError, match="metalayer length") as err:
        B2ndMeta.from_bytes(content + b"\x00", caterva=meta.legacy_caterva)
    assert err.value.field == "metalayer length" and err.value.offset == len(content)


def marker_offsets(ndim: int, caterva: bool = False) -> dict[int, str]:
    offsets = {0: "metalayer array"}
    pos = 3
    for name, width in (("shape", 8), ("chunkshape", 4), ("blockshape", 4)):
        offsets[pos] = f"{name} array"
        pos += 1
        for i in range(ndim):
            offsets[pos] = f"{name}[{i}] marker"
            pos += 1 + width
    if not caterva:
        offsets[pos + 1] = "dtype marker"
    return offsets


@pytest.mark.parametrize("meta", SAMPLES, ids=lambda m: str(m.shape)[:20])
def test_every_marker_is_checked(meta):
    content = meta.to_bytes()
    for offset, field in marker_offsets(meta.ndim, meta.legacy_caterva).items():
        for wrong in {content[offset] ^ 0x01, 0xC0, 0xD3 if content[offset] != 0xD3 else 0xD2}:
            bad = bytearray(content)
            bad[offset] = wrong
            expected = rf"^{re.escape(field)} at offset {offset}:"
            with pytest.raises(FormatError, match=expected) as err:
                B2ndMeta.from_bytes(bytes(bad), caterva=meta.legacy_caterva)
            assert (err.value.field, err.value.offset) == (field, offset)


def test_ndim():
    with pytest.raises(FormatError, match="ndim at offset 2") as err:
        B2ndMeta.from_bytes(b2nd((1,) * 17, (1,) * 17, (1,) * 17))
    assert (err.value.field, err.value.offset) == ("ndim", 2)
    for ndim in (0x80, 0xFF):  # not a positive fixint: "negative"
        with pytest.raises(FormatError, match="ndim at offset 2") as err:
            B2ndMeta.from_bytes(b2nd((), (), (), ndim=ndim))
        assert err.value.field == "ndim"
    # ndim says 2, the arrays hold 1
    with pytest.raises(FormatError, match=r"shape array at offset 3: expected marker 0x92"):
        B2ndMeta.from_bytes(b2nd((4,), (2,), (1,), ndim=2))
    with pytest.raises(FormatError, match="ndim: expected 0 to 16"):
        B2ndMeta((1,) * 17, (1,) * 17, (1,) * 17, np.dtype("u1"))


def test_version():
    for version in (1, 0x7F, 0x80):
        with pytest.raises(FormatError, match="version at offset 1") as err:
            B2ndMeta.from_bytes(b2nd((4,), (2,), (1,), version=version))
        assert (err.value.field, err.value.offset) == ("version", 1)
    with pytest.raises(FormatError, match=r"version: expected 0 \(the only"):
        B2ndMeta((4,), (2,), (1,), np.dtype("u1"), version=1)


def test_dtype_format():
    with pytest.raises(UnsupportedError, match="dtype_format 1") as err:
        B2ndMeta.from_bytes(b2nd((4,), (2,), (1,), dtype_format=1))
    assert err.value.ident == 1 and "dtype_format" in str(err.value)
    with pytest.raises(FormatError, match="dtype_format at offset 25"):
        B2ndMeta.from_bytes(b2nd((4,), (2,), (1,), dtype_format=0x80))
    with pytest.raises(UnsupportedError, match="dtype_format 1"):
        B2ndMeta((4,), (2,), (1,), np.dtype("u1"), dtype_format=1)


GEOMETRY_ERRORS = [
    # (shape, chunks, blocks, field, offset)
    ((4, -1), (2, 1), (1, 1), "shape[1]", 14),
    ((-(2**63),), (1,), (1,), "shape[0]", 5),
    ((4, 3), (0, 3), (0, 3), "chunkshape[0]", 24),
    ((4, 3), (-2, 3), (1, 3), "chunkshape[0]", 24),
    ((4, 3), (2, 3), (0, 3), "blockshape[0]", 35),
    ((4, 3), (2, 3), (3, 3), "blockshape[0]", 35),
    ((4, 3), (2, 3), (2, 4), "blockshape[1]", 40),
    ((0, 3), (0, 3), (1, 3), "blockshape[0]", 35),  # a 0 chunk has 0 blocks
    ((0, 3), (2, 3), (0, 3), "blockshape[0]", 35),  # blocks of 0 in a chunk of 2
    ((0, 3), (-1, 3), (0, 3), "chunkshape[0]", 24),
    ((2**31, 2), (2**31 - 1, 2), (2**30, 1), "chunkshape", 24),  # 2**31 * 2 * 8 bytes a chunk
]


@pytest.mark.parametrize("shape,chunks,blocks,field,offset", GEOMETRY_ERRORS, ids=lambda v: str(v))
def test_geometry_errors(shape, chunks, blocks, field, offset):
    with pytest.raises(FormatError, match=rf"^{re.escape(field)} at offset {offset}:") as err:
        B2ndMeta.from_bytes(b2nd(shape, chunks, blocks))
    assert (err.value.field, err.value.offset) == (field, offset)
    assert isinstance(err.value, ValueError) and field in str(err.value)
    with pytest.raises(FormatError, match=rf"^{re.escape(field)}:"):
        B2ndMeta(shape, chunks, blocks, np.dtype("<f8"))


def test_geometry_accepted():
    for shape, chunks, blocks in [
        ((0, 3), (0, 3), (0, 3)),
        ((0, 3), (0, 1), (0, 1)),
        ((0, 3), (5, 3), (2, 1)),
        ((5,), (9,), (9,)),  # chunks may exceed the shape
        ((2**63 - 1,), (2**27,), (2**27,)),
        ((2**31,), (MAX_BUFFERSIZE,), (1,)),  # the largest chunk of bytes
    ]:
        meta = B2ndMeta.from_bytes(b2nd(shape, chunks, blocks, b"|u1"))
        assert (meta.shape, meta.chunkshape, meta.blockshape) == (shape, chunks, blocks)
    with pytest.raises(FormatError, match="chunkshape at offset 15: expected chunks of at most"):
        B2ndMeta.from_bytes(b2nd((2**31,), (MAX_BUFFERSIZE + 1,), (1,), b"|u1"))


BAD_DTYPES = [
    b"O",
    b"|O",
    b"object",
    b"[('a', 'O')]",
    b"[('a', '<i4'), ('b', [('c', 'O')])]",
    b"('O', (2,))",
    b"{'names': ['a'], 'formats': ['O']}",
    b"",
    b"nonsense",
    b"<f7",
    b"[('a', '<i4')",
    b"__import__('os').system('false')",
    b"[('a', __import__('os'))]",
    b"(" * 10000,
    b"[" * 200000,
    b"|S0",
    b"V0",
    b"[]",
    b"\xff\xfe",
    b"<f8\x00",
    b"[('a', 'V4', (1048576, 1048576))]",
]


@pytest.mark.parametrize("text", BAD_DTYPES, ids=lambda v: repr(v[:30]))
def test_bad_dtype_strings(text):
    with pytest.raises(FormatError, match="dtype at offset 31") as err:
        B2ndMeta.from_bytes(b2nd((4,), (2,), (1,), text))
    assert err.value.field == "dtype" and err.value.offset == 31


def test_object_dtypes_cannot_be_built():
    for dtype in ("O", [("a", "<i4"), ("b", "O")]):
        with pytest.raises(FormatError, match="dtype: expected a dtype without Python objects"):
            B2ndMeta((4,), (2,), (1,), np.dtype(dtype))
        with pytest.raises(FormatError, match="dtype: expected a dtype without Python objects"):
            dtype_from_string(dtype_string(dtype))


def test_dtype_strings_round_trip():
    for dtype, text in DTYPES:
        assert dtype_string(dtype) == text
        assert dtype_from_string(text) == np.dtype(dtype)
        assert dtype_string(dtype_from_string(text)) == text


def test_construction():
    meta = B2ndMeta([10, 7], [4, 5], [2, 3], "<i4")
    assert meta.shape == (10, 7) and meta.dtype == np.dtype("<i4")
    assert (meta.extchunkshape, meta.chunk_grid, meta.nchunks) == ((4, 6), (3, 2), 6)
    assert (meta.chunk_nitems, meta.block_nitems, meta.itemsize, meta.ndim) == (24, 6, 4, 2)
    assert hash(meta) == hash(B2ndMeta((10, 7), (4, 5), (2, 3), np.dtype("int32")))
    # only caterva metalayers lack a dtype
    with pytest.raises(FormatError, match=r"dtype: expected a NumPy dtype \(only caterva"):
        B2ndMeta((4,), (2,), (1,), None)
    scalar = B2ndMeta((), (), (), np.dtype("<f8"))
    assert (scalar.nchunks, scalar.chunk_nitems, scalar.extchunkshape) == (1, 1, ())
    assert scalar.to_bytes() == bytes.fromhex("97000090909000db000000033c6638")
    empty = B2ndMeta((0, 5), (0, 5), (0, 5), np.dtype("<f8"))
    assert (empty.nchunks, empty.chunk_grid, empty.chunk_nitems) == (0, (0, 1), 0)


def test_error_message():
    with pytest.raises(FormatError, match=re.escape("blockshape[0] at offset 21")) as err:
        B2ndMeta.from_bytes(b2nd((4,), (2,), (3,)))
    message = "blockshape[0] at offset 21: expected at most chunkshape[0] = 2, found 3"
    assert str(err.value) == message


FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.slow
@FUZZ
@given(
    sample=st.sampled_from(SAMPLES[:4]),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=3),
)
def test_corrupted_bytes(sample, edits):
    """Any corruption either parses into a valid meta or raises one of b2store's errors."""
    content = bytearray(sample.to_bytes())
    for offset, value in edits:
        content[offset % len(content)] = value
    try:
        meta = B2ndMeta.from_bytes(bytes(content))
    except (FormatError, UnsupportedError):
        return
    assert B2ndMeta.from_bytes(meta.to_bytes()) == meta


def test_dtype_is_parsed_not_evaluated(tmp_path):
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w')".encode()
    for text in (code, b"[('a', " + code + b")]"):
        with pytest.raises(FormatError, match="dtype at offset 31: expected a NumPy dtype string"):
            B2ndMeta.from_bytes(b2nd((4,), (2,), (1,), text))
    assert not marker.exists()


def test_manifest_lists_the_corpus():
    """The corpus tests above ran over something (skip cleanly without the corpus)."""
    directory = corpus_dir("generated")
    cases = json.loads((directory / "manifest.json").read_text())["cases"]
    assert sum(c["kind"] == "b2nd" for c in cases) == len(corpus_cases("generated", {"b2nd"}))
    assert len(GENERATED) > 20 and len(COMPAT) >= 8
