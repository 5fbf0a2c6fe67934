"""python-blosc2's own ndarray tests, as interop cases.

python-blosc2's ``tests/ndarray`` is the best list of the arrays it writes. Every
parametrization below is one of a test there that writes an array (the case id names the test
file and function), with the same shapes, chunks, blocks, dtypes, fill values, cparams,
metalayers and frame kinds. python-blosc2 writes the array; b2store reads it and must agree
with python-blosc2's own read of the same file: the whole array, slices with steps (negative
ones too), single items, dtype, shape, chunks, blocks, ``meta`` and ``vlmeta``. Where b2store
writes the same kind of array, the reverse runs too: b2store writes with the same parameters
and python-blosc2 reads it. c-blosc2's plugins (ZFP, NDLZ, NDCELL, NDMEAN) included: b2store
reads them as python-blosc2 does and writes chunks it reads.

Only the parameter lists come from python-blosc2 (Blosc/python-blosc2, tests/ndarray); the
code is b2store's.
"""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest

import b2store

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")

Codec, Filter, SplitMode = blosc2.Codec, blosc2.Filter, blosc2.SplitMode
SLOW_NBYTES = 4 * 2**20  # cases whose array is bigger than this run with the slow tests


def case(test: str, *values, id: str, nbytes: int = 0):
    """One parametrization of python-blosc2's ``test`` (``file::function``)."""
    marks = [pytest.mark.slow] if nbytes > SLOW_NBYTES else []
    return pytest.param(*values, id=f"{test}[{id}]", marks=marks)


def nbytes_of(shape, dtype) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


# ---------------------------------------------------------------------------------------------
# Checks


def same(got, want) -> None:
    """Equal dtype, shape and bytes (bytes, so that NaNs, structured and string items count).
    A scalar (b2store gives NumPy's scalar for an integer-only key, as NumPy does) equals a
    0-d array of the same type and value."""
    if not isinstance(got, np.ndarray) or not isinstance(want, np.ndarray):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape == ()
        if got.dtype.kind in "SU":  # a str/bytes scalar's dtype is as long as its value
            assert got.dtype.kind == want.dtype.kind
            assert got[()] == want[()]
            return
        # A NumPy scalar has native byte order (python-blosc2 gives 0-d arrays, which keep
        # the file's): compare both in native order.
        got = got.astype(got.dtype.newbyteorder("="))
        want = want.astype(want.dtype.newbyteorder("="))
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def keys_for(shape) -> list:
    """Whole, stepped (2, 3, negative), mixed integer/stepped and single-item selections."""
    if not shape:
        return [(), ...]
    keys = [
        ...,
        tuple(slice(None, None, 2) for _ in shape),
        tuple(slice(1, None, 3) for _ in shape),
        tuple(slice(None, None, -2) for _ in shape),
        (shape[0] // 2 if shape[0] else slice(None),)
        + tuple(slice(-1, None, -3) for _ in shape[1:]),
    ]
    if all(shape):
        keys.append(tuple(n - 1 for n in shape))
        keys.append(tuple(n // 2 for n in shape))
    return keys


def user_meta(arr) -> dict:
    """python-blosc2's fixed metalayers other than the b2nd layout, decoded."""
    meta = arr.schunk.meta
    return {name: meta[name] for name in meta.keys() if name != "b2nd"}


def check_read(source, oracle, keys=()) -> None:
    """b2store reads ``source`` (a path or frame bytes) as python-blosc2 reads it (``oracle``).

    Selections are compared with NumPy's on python-blosc2's whole read, not with
    python-blosc2's own selections: python-blosc2 4.14 returns wrong items from small reads
    of DELTA-filtered arrays (it does not decode block 0 first), where b2store is right."""
    whole = oracle[...]
    with b2store.open(source) as arr:
        assert arr.shape == oracle.shape
        assert arr.dtype == oracle.dtype
        assert arr.chunks == tuple(oracle.chunks)
        assert arr.blocks == tuple(oracle.blocks)
        same(arr[...], whole)
        for key in [*keys_for(oracle.shape), *keys]:
            same(arr[key], whole[key])
        want = user_meta(oracle)
        assert set(arr.meta) - {"b2nd"} == set(want)
        for name, value in want.items():
            assert arr.meta[name] == value == oracle.schunk.meta[name]
        assert dict(arr.vlmeta) == oracle.schunk.vlmeta.getall()


def written_by_blosc2(tmp_path, make, urlpath, contiguous):
    """Run python-blosc2's constructor as its test does; return what b2store opens (the file,
    or the frame of an in-memory array) and python-blosc2's own reopened array."""
    if urlpath is None:
        a = make(contiguous=contiguous)
        frame = a.to_cframe()
        return frame, blosc2.ndarray_from_cframe(frame)
    path = str(tmp_path / urlpath)
    a = make(urlpath=path, contiguous=contiguous)
    del a
    return path, blosc2.open(path, mode="r")


def check_written_by_b2store(path, want: np.ndarray, chunks=None, blocks=None, meta=None):
    """python-blosc2 reads what b2store wrote at ``path`` and finds ``want``."""
    other = blosc2.open(str(path), mode="r")
    assert other.shape == want.shape
    assert other.dtype == want.dtype
    if chunks is not None:
        assert other.chunks == tuple(chunks)
    if blocks is not None:
        assert other.blocks == tuple(blocks)
    same(other[...], want)
    for key in keys_for(want.shape):
        same(other[key], want[key])
    with b2store.open(path) as mine:
        same(mine[...], want)
    if meta is not None:
        assert user_meta(other) == meta


def b2store_cparams(cparams) -> dict:
    """python-blosc2's cparams (a dict or a CParams) as b2store's keywords. ``use_dict`` has
    no b2store counterpart (it only changes how ZSTD/LZ4 compress)."""
    if not isinstance(cparams, dict):
        cparams = {k: getattr(cparams, k) for k in ("codec", "clevel", "filters", "filters_meta")}
    out = {}
    if "codec" in cparams:
        out["codec"] = cparams["codec"].value
    if "clevel" in cparams:
        out["clevel"] = cparams["clevel"]
    if "filters" in cparams:
        pairs = [
            (f.value, m)
            for f, m in zip(
                cparams["filters"],
                cparams.get("filters_meta") or [0] * len(cparams["filters"]),
                strict=True,
            )
            if f != Filter.NOFILTER
        ]
        out["filters"] = [f for f, _ in pairs]
        out["filters_meta"] = [m for _, m in pairs]
    if "splitmode" in cparams:
        out["splitmode"] = cparams["splitmode"].value
    return out


# ---------------------------------------------------------------------------------------------
# test_full.py::test_full


FULL = [  # shape, chunks, blocks, fill_value, dtype, cparams, urlpath, contiguous
    ((100, 1230), (200, 100), (55, 3), b"0123", None,
     {"clevel": 4, "use_dict": 0, "nthreads": 1}, None, False),
    ((23, 34), (20, 20), (10, 10), b"sun", None,
     {"codec": Codec.LZ4HC, "clevel": 8, "use_dict": False}, "full.b2nd", True),
    ((23, 34), (20, 20), (10, 10), "josé", None,
     {"codec": Codec.LZ4HC, "clevel": 8, "use_dict": False}, "full.b2nd", True),
    ((80, 51, 60), (20, 10, 33), (6, 6, 26), 3.14, np.float64,
     {"codec": Codec.ZLIB, "clevel": 5, "use_dict": True}, "full.b2nd", False),
    ((13, 13), (12, 12), (11, 11), 123456789, None,
     {"codec": Codec.LZ4HC, "clevel": 8, "use_dict": False}, None, True),
    ((0,), (200,), (55,), b"0123", None, {"clevel": 4, "use_dict": 0}, None, False),
    ((1, 1), (20, 20), (13, 6), b"sun", None,
     {"codec": Codec.LZ4HC, "clevel": 8, "use_dict": False}, "full.b2nd", True),
    ((1,), (2000,), (6,), 3.14, np.float64,
     {"codec": Codec.ZLIB, "clevel": 5, "use_dict": True}, "full.b2nd", False),
    ((0, 0, 0), (12, 12, 12), (11, 11, 11), 123456789, None,
     {"codec": Codec.LZ4HC, "clevel": 8, "use_dict": False}, None, True),
]  # fmt: skip
FULL_CASES = [case("test_full::test_full", *v, id=str(i)) for i, v in enumerate(FULL)]


@pytest.mark.parametrize(
    "shape,chunks,blocks,fill_value,dtype,cparams,urlpath,contiguous", FULL_CASES
)
def test_full(tmp_path, shape, chunks, blocks, fill_value, dtype, cparams, urlpath, contiguous):
    def make(**storage):
        return blosc2.full(
            shape, fill_value, chunks=chunks, blocks=blocks, dtype=dtype, cparams=cparams,
            **storage,
        )  # fmt: skip

    source, oracle = written_by_blosc2(tmp_path, make, urlpath, contiguous)
    check_read(source, oracle)
    same(oracle[...], np.full(shape, fill_value, dtype=oracle.dtype))

    path = tmp_path / "mine.b2nd"
    b2store.full(
        shape, fill_value, dtype, path, chunks=chunks, blocks=blocks, contiguous=contiguous,
        **b2store_cparams(cparams),
    ).close()  # fmt: skip
    check_written_by_b2store(path, oracle[...], chunks, blocks)


# test_full.py::test_full_simple, test_ones; test_nans.py::test_nans_simple: default geometry
SIMPLE_FULL = [
    case("test_full::test_full_simple", (100, 1230), b"0123", None, id="S4"),
    case("test_full::test_full_simple", (23, 34), b"sun", None, id="S3"),
    case("test_full::test_full_simple", (23, 34), "josé", None, id="U4"),
    case("test_full::test_full_simple", (80, 51, 60), 3.14, "f8", id="f8"),
    case("test_full::test_full_simple", (13, 13), 123456789, None, id="int"),
    case("test_full::test_ones", (10, 10), 1, np.float32, id="f4"),
    case("test_nans::test_nans_simple", (100, 1230), np.nan, np.float64, id="f8-2d"),
    case("test_nans::test_nans_simple", (23, 34), np.nan, np.float32, id="f4"),
    case("test_nans::test_nans_simple", (80, 51, 60), np.nan, "f4", id="f4-3d"),
    case("test_nans::test_nans_simple", (13, 13), np.nan, None, id="default"),
]


@pytest.mark.parametrize("shape,fill_value,dtype", SIMPLE_FULL)
def test_full_default_geometry(tmp_path, shape, fill_value, dtype):
    path = str(tmp_path / "a.b2nd")
    if fill_value is np.nan and dtype is not None:
        blosc2.nans(shape, dtype=dtype, urlpath=path, mode="w")
    elif fill_value is np.nan:
        blosc2.nans(shape, urlpath=path, mode="w")
    else:
        blosc2.full(shape, fill_value, dtype=dtype, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    check_read(path, oracle)
    same(oracle[...], np.full(shape, fill_value, dtype=oracle.dtype))

    mine = tmp_path / "mine.b2nd"
    b2store.full(shape, fill_value, oracle.dtype, mine).close()
    check_written_by_b2store(mine, oracle[...])


# ---------------------------------------------------------------------------------------------
# test_full/test_zeros/test_nans ::test_large_typesize: structured items of 255 bytes and more


def _large_typesize_cases():
    out = []
    full = np.dtype
    for typesize in (255, 256, 257, 261, 256 * 256):
        for shape in ((1,), (3,), (10,), (1024,)):
            dt = full([("f_001", "<i1", (typesize,))])
            out.append(case("test_full::test_large_typesize", shape, dt, 3,
                            id=f"{typesize}-{shape[0]}", nbytes=nbytes_of(shape, dt)))  # fmt: skip
        for shape in ((1,), (3,), (10,), (2 * 10,), (2**8 - 1, 3)):
            dt = full([("f_001", "<i1", (typesize,)), ("f_002", "f4", (typesize,))])
            out.append(case("test_zeros::test_large_typesize", shape, dt, 0,
                            id=f"{typesize}-{'x'.join(map(str, shape))}",
                            nbytes=nbytes_of(shape, dt)))  # fmt: skip
    for typesize in (1, 3, 255, 256, 257, 256 * 256):
        for shape in ((1,), (3,), (10,), (2 * 10,)):
            dt = full([("f_001", "f8", (typesize,)), ("f_002", "f4", (typesize,))])
            out.append(case("test_nans::test_large_typesize", shape, dt, np.nan,
                            id=f"{typesize}-{shape[0]}", nbytes=nbytes_of(shape, dt)))  # fmt: skip
    return out


@pytest.mark.parametrize("asarray", [True, False], ids=["asarray", "constructor"])
@pytest.mark.parametrize("shape,dtype,fill_value", _large_typesize_cases())
def test_large_typesize(tmp_path, shape, dtype, fill_value, asarray):
    data = np.full(shape, fill_value, dtype=dtype)
    path = str(tmp_path / "a.b2nd")
    if asarray:
        blosc2.asarray(data, urlpath=path, mode="w")
    elif fill_value == 0:
        blosc2.zeros(shape, dtype=dtype, urlpath=path, mode="w")
    else:
        blosc2.full(shape, fill_value, dtype=dtype, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    check_read(path, oracle)
    same(oracle[...], data)

    mine = tmp_path / "mine.b2nd"
    if asarray:
        b2store.asarray(data, mine).close()
    else:
        b2store.full(shape, fill_value, dtype, mine).close()
    check_written_by_b2store(mine, data)


def _complex_dtype():
    f = "<f4"
    return np.dtype([
        ("f_001", f, (164,)), ("f_002", f, (11,)), ("f_003", f, (154,)), ("f_004", f, (870,)),
        ("f_005", f, (1062,)), ("f_006", f, (22,)), ("f_007", f, (44,)), ("f_008", f, (512,)),
        ("f_009", f, (64, 77)), ("f_010", f, (97, 489)), ("f_011", f, (75, 255)),
        ("f_012", f, (8, 293)), ("f_013", f, (230, 591)), ("f_014", f, (101, 193)),
        ("f_015", f, (12, 48)), ("f_016", f, (90, 699)), ("f_017", f, (125, 65)),
        ("f_018", f, (132, 81)), ("f_019", f, (27, 363)), ("f_020", "S1000"),
        ("f_021", "S1000"), ("f_022", "<U1000"),
    ])  # fmt: skip


@pytest.mark.slow
def test_full__test_complex_datatype(tmp_path):
    dtype = _complex_dtype()
    data = np.zeros((16,), dtype=dtype)
    path = str(tmp_path / "b.b2nd")
    blosc2.asarray(data, cparams={"codec": Codec.BLOSCLZ, "clevel": 1}, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    check_read(path, oracle)
    with b2store.open(path) as arr:
        whole = arr[...]
    for field in dtype.fields:
        same(whole[field], data[field])

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine, codec="blosclz", clevel=1).close()
    check_written_by_b2store(mine, data)


# ---------------------------------------------------------------------------------------------
# test_zeros.py


ZEROS = [  # shape, chunks, blocks, dtype, cparams, urlpath, contiguous, meta
    ((100, 1230), (200, 100), (55, 3), np.int32,
     {"codec": Codec.ZSTD, "clevel": 4, "use_dict": 0}, None, True, None),
    ((23, 34), (10, 10), (10, 10), np.float64,
     {"codec": Codec.BLOSCLZ, "clevel": 8, "use_dict": False}, "zeros.b2nd", True,
     {"abc": 123456789, "2": [0, 1, 23]}),
    ((80, 51, 60), (20, 10, 33), (6, 6, 26), np.bool_,
     {"codec": Codec.LZ4, "clevel": 5, "use_dict": 1}, None, False,
     {"abc": 123, "2": [0, 1, 24]}),
]  # fmt: skip


@pytest.mark.parametrize(
    "shape,chunks,blocks,dtype,cparams,urlpath,contiguous,meta",
    [case("test_zeros::test_zeros", *v, id=str(i)) for i, v in enumerate(ZEROS)]
    # A sparse frame on disk for the in-memory sparse case, which only exists as a frame.
    + [case("test_zeros::test_zeros", *ZEROS[2][:5], "zeros", False, ZEROS[2][7], id="2-disk")],
)
def test_zeros(tmp_path, shape, chunks, blocks, dtype, cparams, urlpath, contiguous, meta):
    def make(**storage):
        return blosc2.zeros(
            shape, chunks=chunks, blocks=blocks, dtype=dtype, cparams=cparams, meta=meta,
            **storage,
        )  # fmt: skip

    source, oracle = written_by_blosc2(tmp_path, make, urlpath, contiguous)
    check_read(source, oracle)
    same(oracle[...], np.zeros(shape, dtype))

    path = tmp_path / "mine.b2nd"
    b2store.zeros(
        shape, dtype, path, chunks=chunks, blocks=blocks, contiguous=contiguous, meta=meta,
        **b2store_cparams(cparams),
    ).close()  # fmt: skip
    check_written_by_b2store(path, np.zeros(shape, dtype), chunks, blocks, meta or {})


@pytest.mark.parametrize(
    "dtype",
    [
        case("test_zeros::test_zeros", np.float32, id="3"),
        case("test_zeros::test_zeros", np.dtype("U1"), id="4"),
    ],
)
def test_zeros_chunks_over_the_buffer_limit_are_refused(tmp_path, dtype):
    # python-blosc2 refuses chunks of 2**30 items of 4 bytes (over its 2 GiB buffer limit);
    # b2store must refuse them as well rather than write a file nobody can read.
    shape, chunks = (2**31 - 1,), (2**30,)
    with pytest.raises(RuntimeError):
        blosc2.zeros(shape, chunks=chunks, dtype=dtype, urlpath=str(tmp_path / "o.b2nd"))
    with pytest.raises((ValueError, b2store.LimitError), match="(?i)chunk"):
        b2store.zeros(shape, dtype, tmp_path / "mine.b2nd", chunks=chunks)


ZEROS_MINIMAL = [(100, np.uint8), ((100, 1230), np.uint8), ((234, 125), np.int32),
                 ((80, 51, 60), np.bool_), ((400, 399, 401), np.float64)]  # fmt: skip


@pytest.mark.parametrize(
    "shape,dtype",
    [case("test_zeros::test_zeros_minimal", s, d, id=str(i),
          nbytes=nbytes_of(np.atleast_1d(s), d))
     for i, (s, d) in enumerate(ZEROS_MINIMAL)],
)  # fmt: skip
def test_zeros_minimal(tmp_path, shape, dtype):
    path = str(tmp_path / "a.b2nd")
    blosc2.zeros(shape, dtype=dtype, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    check_read(path, oracle)
    with b2store.open(path) as arr:
        assert arr.dtype == np.dtype(dtype)
        assert arr.schunk.typesize == np.dtype(dtype).itemsize

    mine = tmp_path / "mine.b2nd"
    b2store.zeros(shape, dtype, mine).close()  # an int shape too, as NumPy takes it
    check_written_by_b2store(mine, np.zeros(shape, dtype))


@pytest.mark.parametrize(
    "dtype",
    [
        case("test_zeros::test_nd_dtype", np.dtype(("<f8", (10,))), id="f8x10"),
        case("test_zeros::test_nd_dtype", np.dtype(("<i8", (10,))), id="i8x10"),
        case("test_zeros::test_nd_dtype", np.dtype(("<i4,>f4", (10,))), id="struct-x10"),
    ],
)
def test_zeros_nd_dtype(tmp_path, dtype):
    # python-blosc2 keeps a subarray dtype as the item type of a (1,) array.
    path = str(tmp_path / "a.b2nd")
    blosc2.zeros((1,), dtype=dtype, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    assert oracle.dtype == dtype
    check_read(path, oracle)  # items read as NumPy does: (1,) + the subarray's shape

    mine = tmp_path / "mine.b2nd"
    b2store.zeros((1,), dtype, mine).close()
    other = blosc2.open(str(mine), mode="r")
    assert other.dtype == dtype
    with b2store.open(mine) as arr:
        assert arr.dtype == dtype
        same(arr[...], other[...])
        same(arr[0], other[...][0])

    # b2store writes an item (a value of the subarray's shape); python-blosc2 reads it.
    want = other[...].copy()
    value = np.zeros_like(want[0])
    value.view(np.uint8)[...] = np.arange(value.nbytes) % 251
    want[0] = value
    with b2store.open(mine, mode="a") as arr:
        arr[0] = value
        same(arr[...], want)
    same(blosc2.open(str(mine), mode="r")[...], want)


def test_zeros__test_shape_empty(tmp_path):
    path = str(tmp_path / "a.b2nd")
    blosc2.zeros((), dtype=np.int32, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    check_read(path, oracle)
    with b2store.open(path) as arr:
        assert arr.shape == ()
        same(arr[()], np.zeros((), np.int32)[()])

    mine = tmp_path / "mine.b2nd"
    b2store.zeros((), np.int32, mine).close()
    check_written_by_b2store(mine, np.zeros((), np.int32))


# ---------------------------------------------------------------------------------------------
# test_empty.py::test_empty (values unset: compared by geometry, dtype and filters; b2store's
# empty arrays read as zeros)


EMPTY = [  # shape, chunks, blocks, dtype, cparams, urlpath, contiguous
    ((100, 1230), (200, 100), (55, 3), np.uint8,
     {"codec": Codec.LZ4, "clevel": 4, "use_dict": 0, "filters": [Filter.SHUFFLE]}, None, True),
    ((234, 125), (90, 90), (20, 10), np.int32,
     {"codec": Codec.LZ4HC, "clevel": 8, "use_dict": False,
      "filters": [Filter.DELTA, Filter.BITSHUFFLE]}, "empty.b2nd", False),
    ((400, 399, 401), (20, 10, 130), (6, 6, 26), np.float64,
     {"codec": Codec.BLOSCLZ, "clevel": 5, "use_dict": True,
      "filters": [Filter.DELTA, Filter.TRUNC_PREC]}, None, False),
]  # fmt: skip


@pytest.mark.parametrize(
    "shape,chunks,blocks,dtype,cparams,urlpath,contiguous",
    [case("test_empty::test_empty", *v, id=str(i), nbytes=nbytes_of(v[0], v[3]))
     for i, v in enumerate(EMPTY)],
)  # fmt: skip
def test_empty(tmp_path, shape, chunks, blocks, dtype, cparams, urlpath, contiguous):
    def make(**storage):
        return blosc2.empty(
            shape, chunks=chunks, blocks=blocks, dtype=dtype,
            cparams=blosc2.CParams(**cparams), storage=blosc2.Storage(**storage),
        )  # fmt: skip

    source, oracle = written_by_blosc2(tmp_path, make, urlpath, contiguous)
    with b2store.open(source) as arr:
        assert arr.shape == shape
        assert arr.chunks == chunks
        assert arr.blocks == blocks
        assert arr.dtype == np.dtype(dtype)
        assert arr.schunk.typesize == np.dtype(dtype).itemsize
        for key in keys_for(shape)[1:]:  # unset values: b2store reads zeros, never fails
            same(arr[key], np.zeros(shape, dtype)[key])

    path = tmp_path / "mine.b2nd"
    b2store.empty(
        shape, dtype, path, chunks=chunks, blocks=blocks, contiguous=contiguous,
        **b2store_cparams(cparams),
    ).close()  # fmt: skip
    other = blosc2.open(str(path), mode="r")
    assert (other.shape, other.chunks, other.blocks) == (shape, chunks, blocks)
    assert other.dtype == np.dtype(dtype)
    assert other.schunk.cparams.codec == cparams["codec"]
    assert other.schunk.cparams.clevel == cparams["clevel"]
    filters = [f for f in other.schunk.cparams.filters if f != Filter.NOFILTER]
    assert filters == cparams["filters"]


@pytest.mark.parametrize(
    "shape,chunks,blocks,dtype,cparams,urlpath,contiguous",
    [case("test_empty::test_empty", *v, id=f"{i}-with-data", nbytes=nbytes_of(v[0], v[3]))
     for i, v in enumerate(EMPTY)]
    # The lossy pipeline on a smaller array too, for the quick suite.
    + [case("test_empty::test_empty", (40, 39, 41), *EMPTY[2][1:], id="2-with-data-small")],
)  # fmt: skip
def test_empty_pipelines_with_data(
    tmp_path, shape, chunks, blocks, dtype, cparams, urlpath, contiguous
):
    # The same codecs and filter pipelines (DELTA+TRUNC_PREC is lossy: b2store must read the
    # values python-blosc2 reads, not the ones written), on values that are not all zero.
    # Two changes python-blosc2 needs to write data with these cparams: TRUNC_PREC keeps 20
    # mantissa bits (the test's filters_meta of 0 keeps none: "Error while setting the
    # slice"), and no dictionary with BloscLZ ("Error while creating the NDArray").
    cparams = {k: v for k, v in cparams.items() if k != "use_dict"}
    if Filter.TRUNC_PREC in cparams["filters"]:
        cparams["filters_meta"] = [20 if f == Filter.TRUNC_PREC else 0 for f in cparams["filters"]]
    data = (np.arange(math.prod(shape)) % 251).astype(dtype).reshape(shape)
    if np.dtype(dtype).kind == "f":
        data = data * 1.001 + 0.5

    def make(**storage):
        return blosc2.asarray(
            data, chunks=chunks, blocks=blocks, cparams=blosc2.CParams(**cparams),
            **storage,
        )  # fmt: skip

    source, oracle = written_by_blosc2(tmp_path, make, urlpath, contiguous)
    check_read(source, oracle)


# ---------------------------------------------------------------------------------------------
# test_persistency.py and test_metalayers.py


PERSISTENCY = [
    ([634], [156], [33], "test00.b2nd", np.float64),
    ([20, 134, 13], [7, 22, 5], [3, 5, 3], "test01.b2nd", np.int32),
    ([12, 13, 14, 15, 16], [4, 6, 4, 7, 5], [2, 4, 2, 3, 3], "test02.b2nd", np.float32),
]
METALAYERS = [
    ([556], [221], [33], "testmeta00.b2nd", np.float64),
    ([20, 134, 13], [12, 66, 8], [3, 13, 5], "testmeta01.b2nd", np.int32),
    ([12, 13, 14, 15, 16], [8, 9, 4, 12, 9], [2, 6, 4, 5, 4], "testmeta02.b2nd", np.float32),
]
FRAMES = pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])


@pytest.mark.parametrize(
    "shape,chunks,blocks,urlpath,dtype,contiguous",
    [case("test_persistency::test_persistency", *v, c, id=f"{i}-{'cs'[not c]}frame",
          # a sparse frame of 5-d tiny chunks is ~2000 files each way: seconds
          nbytes=SLOW_NBYTES + 1 if len(v[0]) == 5 and not c else 0)
     for i, v in enumerate(PERSISTENCY) for c in (True, False)],
)  # fmt: skip
def test_persistency(tmp_path, shape, chunks, blocks, urlpath, dtype, contiguous):
    data = np.arange(math.prod(shape), dtype=dtype).reshape(shape)

    def make(**storage):
        return blosc2.asarray(data, chunks=chunks, blocks=blocks, **storage)

    source, oracle = written_by_blosc2(tmp_path, make, urlpath, contiguous)
    check_read(source, oracle)
    same(oracle[...], data)

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine, chunks=chunks, blocks=blocks, contiguous=contiguous).close()
    check_written_by_b2store(mine, data, chunks, blocks)


@FRAMES
@pytest.mark.parametrize(
    "shape,chunks,blocks,urlpath,dtype",
    [case("test_metalayers::test_metalayers", *v, id=str(i))
     for i, v in enumerate(METALAYERS)],
)  # fmt: skip
def test_metalayers(tmp_path, shape, chunks, blocks, urlpath, dtype, contiguous):
    numpy_meta = {b"dtype": str(np.dtype(dtype))}
    meta = {"numpy": numpy_meta, "test": {b"lorem": 1234}}

    def make(**storage):
        a = blosc2.empty(
            shape, chunks=chunks, blocks=blocks, dtype=dtype,
            storage=blosc2.Storage(meta=meta, **storage),
        )  # fmt: skip
        a.schunk.meta["test"] = {b"lorem": 4231}  # rewritten in place, as the test does
        return a

    source, oracle = written_by_blosc2(tmp_path, make, urlpath, contiguous)
    assert user_meta(oracle) == {"numpy": numpy_meta, "test": {b"lorem": 4231}}
    with b2store.open(source) as arr:
        assert arr.shape == tuple(shape)
        assert (arr.chunks, arr.blocks) == (tuple(chunks), tuple(blocks))
        assert set(arr.meta) == {"b2nd", "numpy", "test"}
        assert arr.meta["numpy"] == numpy_meta
        assert arr.meta["test"] == {b"lorem": 4231}
        assert msgpack.unpackb(arr.meta.raw("test")) == {b"lorem": 4231}

    # b2store writes the same metalayers and updates one in place; python-blosc2 reads them.
    mine = tmp_path / "mine.b2nd"
    with b2store.empty(
        shape, dtype, mine, chunks=chunks, blocks=blocks, contiguous=contiguous, meta=meta
    ) as arr:
        arr.meta["test"] = {b"lorem": 4231}  # packed as python-blosc2 packs it
    other = blosc2.open(str(mine), mode="r")
    assert user_meta(other) == {"numpy": numpy_meta, "test": {b"lorem": 4231}}
    assert (other.shape, other.chunks, other.blocks) == tuple(map(tuple, (shape, chunks, blocks)))


# ---------------------------------------------------------------------------------------------
# test_lossy.py: c-blosc2's plugins (ZFP, NDLZ, NDCELL, NDMEAN), read and written


LOSSY = [  # shape, dtype, cparams, urlpath, contiguous, the plugin's name
    ((32, 18), np.uint8, {"codec": Codec.NDLZ, "codec_meta": 4}, None, False, "NDLZ"),
    ((100, 1230), np.float64, {"codec": Codec.ZFP_ACC, "codec_meta": 37,
     "splitmode": SplitMode.ALWAYS_SPLIT}, None, False, "ZFP_ACC"),
    ((23, 34), np.float64, {"codec": Codec.ZFP_PREC, "codec_meta": 37}, "lossy.b2nd", True,
     "ZFP_PREC"),
    ((80, 51, 60), np.float32, {"codec": Codec.ZFP_RATE, "codec_meta": 37,
     "splitmode": SplitMode.ALWAYS_SPLIT}, "lossy.b2nd", False, "ZFP_RATE"),
    ((13, 13), np.int32, {"filters": [Filter.NDMEAN], "filters_meta": [4]}, None, True,
     "NDMEAN"),
    ((10, 10), np.int64, {"filters": [Filter.NDCELL], "filters_meta": [4]}, None, False,
     "NDCELL"),
]  # fmt: skip


def _needs(name: str) -> None:
    if name.startswith("ZFP"):
        pytest.importorskip("zfpy", reason="ZFP is read and written through zfpy (zfp extra)")


def _blosc2_defaults(cparams) -> dict:
    """python-blosc2's cparams with its default filters spelt out (SHUFFLE in the last
    slot): b2store's default before ZFP is no filter, so the same chunks need them given."""
    cparams = dict(cparams)
    cparams.setdefault("filters", [Filter.NOFILTER] * 5 + [Filter.SHUFFLE])
    cparams.setdefault("filters_meta", [0] * len(cparams["filters"]))
    out = b2store_cparams(cparams)
    out["filters"] = [f.value for f in cparams["filters"]]
    out["filters_meta"] = list(cparams["filters_meta"])
    if "codec_meta" in cparams:
        out["codec_meta"] = cparams["codec_meta"]
    return out


@pytest.mark.parametrize(
    "shape,dtype,cparams,urlpath,contiguous,name",
    [case("test_lossy::test_lossy", *v, id=v[-1]) for v in LOSSY],
)
def test_lossy(tmp_path, shape, dtype, cparams, urlpath, contiguous, name):
    _needs(name)
    data = np.linspace(0, math.prod(shape), math.prod(shape), dtype=dtype).reshape(shape)

    def make(**storage):
        return blosc2.asarray(data, cparams=cparams, mode="w", **storage)

    source, oracle = written_by_blosc2(tmp_path, make, urlpath, contiguous)
    # b2store reads python-blosc2's file as python-blosc2 does, bit for bit.
    check_read(source, oracle, keys_for(shape))

    # b2store writes the same settings; python-blosc2 reads back what b2store reads, and
    # where the writes are deterministic (chunks without padding, whose unset bytes ZFP and
    # NDMEAN code as well), the very chunks python-blosc2 writes.
    mine = tmp_path / "mine.b2nd"
    b2store.asarray(
        data, mine, chunks=oracle.chunks, blocks=oracle.blocks, **_blosc2_defaults(cparams)
    ).close()
    with b2store.open(mine) as arr:
        check_written_by_b2store(mine, arr[...], oracle.chunks, oracle.blocks)
    other = blosc2.open(str(mine), mode="r")
    theirs = blosc2.asarray(
        data, chunks=oracle.chunks, blocks=oracle.blocks, cparams=cparams,
        urlpath=str(tmp_path / "theirs.b2nd"), mode="w",
    )  # fmt: skip
    grid = [math.ceil(n / c) for n, c in zip(shape, oracle.chunks)]
    whole = all(c % b == 0 for c, b in zip(oracle.chunks, oracle.blocks))
    for n, idx in enumerate(np.ndindex(*grid)):
        if whole and all((i + 1) * c <= s for i, c, s in zip(idx, oracle.chunks, shape)):
            assert other.schunk.get_chunk(n) == theirs.schunk.get_chunk(n), f"chunk {n}"
    if all(s % c == 0 for s, c in zip(shape, oracle.chunks)) and whole:
        same(other[...], theirs[...])


# ---------------------------------------------------------------------------------------------
# test_struct_dtype.py::test_scalar


STRUCT = [
    ((100, 123), "f4,f8", None),
    ((234, 125), "f4,(2,)f8", "test1.b2nd"),
    (80, [("f0", "<f4"), ("f1", "<f8")], "test2.b2nd"),
    ((40,), [("field 1", "<f4"), ("mamà", "<f8")], None),
    ((40,), [("field 1", "<f4"), ("mamà", "<f8")], "test3.b2nd"),
]


@pytest.mark.parametrize(
    "shape,dtype,urlpath",
    [case("test_struct_dtype::test_scalar", *v, id=str(i)) for i, v in enumerate(STRUCT)],
)
def test_struct_dtype(tmp_path, shape, dtype, urlpath):
    def make(**storage):
        return blosc2.zeros(shape, dtype=dtype, **storage)

    source, oracle = written_by_blosc2(tmp_path, make, urlpath, True)
    check_read(source, oracle)
    assert oracle.dtype == np.dtype(dtype)

    # With values that are not all zero, written both ways.
    dtype = np.dtype(dtype)
    data = np.zeros(shape, dtype)
    data.view(np.uint8)[...] = (
        (np.arange(data.nbytes) % 253).astype(np.uint8).reshape(data.view(np.uint8).shape)
    )
    path = str(tmp_path / "data.b2nd")
    blosc2.asarray(data, urlpath=path, mode="w")
    check_read(path, blosc2.open(path, mode="r"))
    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine).close()
    check_written_by_b2store(mine, data)


# ---------------------------------------------------------------------------------------------
# test_stringarrays.py


UNICODE_VALUES = ["café", "β", "こんにちは", "mañana", "добрый", "数据"]


def unicode_array(shape, maxlen=16):
    n = math.prod(shape)
    return np.array([UNICODE_VALUES[i % len(UNICODE_VALUES)] for i in range(n)],
                    dtype=f"U{maxlen}").reshape(shape)  # fmt: skip


STRING_SHAPES = [(12,), (12, 6), (3, 4, 5)]
STRING_GEOMETRY = {
    (12,): ((4,), (3,)),
    (12, 6): ((7, 4), (3, 3)),
    (3, 4, 5): ((2, 2, 5), (1, 2, 5)),
}


def _string_cases():
    out = []
    for shape in STRING_SHAPES:
        chunks, blocks = STRING_GEOMETRY[shape]
        for c in (None, chunks):
            for b in (None, blocks):
                out.append(case("test_stringarrays::test_unicode_roundtrip_in_memory", shape, c, b,
                                id=f"{shape}-{c}-{b}"))  # fmt: skip
        out.append(case("test_stringarrays::test_unicode_roundtrip_on_disk", shape,
                        tuple(max(1, s // 2) for s in shape), (1,) * len(shape),
                        id=str(shape)))  # fmt: skip
    out.append(case("test_stringarrays::test_unicode_indexing_and_slicing", (10,), (6,), (4,),
                    id="10"))  # fmt: skip
    out.append(case("test_stringarrays::test_unicode_multidimensional_slice", (6, 8), (3, 4),
                    (1, 4), id="6x8"))  # fmt: skip
    return out


@pytest.mark.parametrize("shape,chunks,blocks", _string_cases())
def test_unicode_arrays(tmp_path, shape, chunks, blocks):
    # Without cparams python-blosc2 picks its own pipeline for strings (SHUFFLE with a
    # filters_meta of 4: UTF-32 code units); b2store must read it.
    data = unicode_array(shape)
    path = str(tmp_path / "u.b2nd")
    blosc2.asarray(data, chunks=chunks, blocks=blocks, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    check_read(path, oracle, keys=[(slice(2, 8),), (slice(1, 5),)])
    same(oracle[...], data)

    # b2store picks the geometry python-blosc2 picks (blocks alone keep only their size).
    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine, chunks=chunks, blocks=blocks).close()
    check_written_by_b2store(mine, data, oracle.chunks, oracle.blocks)


def test_stringarrays__test_unicode_on_disk_partial_io(tmp_path):
    data = unicode_array((20,))
    path = str(tmp_path / "partial_unicode.b2nd")
    a = blosc2.asarray(data, urlpath=path, mode="w", chunks=(5,), blocks=(2,))
    replacement = np.array(["python", "is", "good", "!"], dtype=data.dtype)
    a[6:10] = replacement
    data[6:10] = replacement
    del a
    oracle = blosc2.open(path, mode="r")
    check_read(path, oracle)
    with b2store.open(path) as arr:
        same(arr[...], data)

    # The same change made by b2store on python-blosc2's file, read back by python-blosc2.
    blosc2.asarray(unicode_array((20,)), urlpath=path, mode="w", chunks=(5,), blocks=(2,))
    with b2store.open(path, mode="a") as arr:
        arr[6:10] = replacement
    same(blosc2.open(path, mode="r")[...], data)


def test_stringarrays__test_unicode_on_disk_persistence(tmp_path):
    path = str(tmp_path / "persistent_unicode.b2nd")
    blosc2.asarray(unicode_array((8,)), urlpath=path, mode="w")
    a = blosc2.open(path, mode="a")
    new = np.roll(unicode_array((8,)), 3)
    a[:] = new
    del a
    check_read(path, blosc2.open(path, mode="r"))
    with b2store.open(path) as arr:
        same(arr[...], new)


@pytest.mark.parametrize("shape", STRING_SHAPES, ids=str)
@pytest.mark.parametrize(
    "constructor",
    [f"test_stringarrays::test_constructors[{c}]" for c in ("zeros", "ones", "empty", "full",
                                                            "eye")],
)  # fmt: skip
def test_string_constructors(tmp_path, constructor, shape):
    kind = constructor.split("[")[1][:-1]
    path = str(tmp_path / "s.b2nd")
    if kind == "full":
        blosc2.full(shape, "pepe", dtype=np.str_, urlpath=path, mode="w")
        want = np.full(shape, "pepe", dtype=np.str_)
    elif kind == "eye":
        blosc2.eye(shape[0], dtype=np.str_, urlpath=path, mode="w")
        want = np.eye(shape[0], dtype=np.str_)
    else:
        getattr(blosc2, kind)(shape, dtype=np.str_, urlpath=path, mode="w")
        want = getattr(np, kind)(shape, dtype=np.str_)
    oracle = blosc2.open(path, mode="r")
    if kind != "empty":
        same(oracle[...], want)
        check_read(path, oracle)
    with b2store.open(path) as arr:
        assert arr.dtype == want.dtype
        assert arr.shape == want.shape
        if kind == "empty":
            same(arr[...], np.zeros(want.shape, want.dtype))


@pytest.mark.parametrize("shape", STRING_SHAPES, ids=str)
def test_stringarrays__test_frombuffer(tmp_path, shape):
    chunks = tuple(max(c // 4, 1) for c in shape)
    data = unicode_array(shape, maxlen=8)
    path = str(tmp_path / "b.b2nd")
    blosc2.frombuffer(bytes(data), shape, chunks=chunks, dtype=np.dtype("<U8"), urlpath=path,
                      mode="w")  # fmt: skip
    check_read(path, blosc2.open(path, mode="r"))

    mine = tmp_path / "mine.b2nd"
    b2store.frombuffer(bytes(data), shape, np.dtype("<U8"), mine, chunks=chunks).close()
    check_written_by_b2store(mine, data, chunks)


def test_stringarrays__test_fromiter(tmp_path):
    path = str(tmp_path / "i.b2nd")
    want = np.arange(0, 20).astype(np.str_)
    blosc2.fromiter(range(20), shape=(20,), dtype=want.dtype, urlpath=path, mode="w")
    check_read(path, blosc2.open(path, mode="r"))
    with b2store.open(path) as arr:
        same(arr[...], want)


@pytest.mark.parametrize("cparams", [None, "defaults"], ids=["string-pipeline", "cparams_dflts"])
def test_stringarrays__test_optimised_string_comp(tmp_path, cparams):
    # Both pipelines python-blosc2 compares (its string one and its general defaults); the
    # test's 1e5 repeats are cut to 2e3: the pipeline, not the size, is what is read.
    data = np.repeat(np.array(["josé", "pepe", "francisco"]), 2000)
    path = str(tmp_path / "s.b2nd")
    extra = {} if cparams is None else {"cparams": blosc2.cparams_dflts}
    blosc2.asarray(data, urlpath=path, mode="w", **extra)
    check_read(path, blosc2.open(path, mode="r"))


# ---------------------------------------------------------------------------------------------
# test_copy.py


COPY_VALUES = [
    ([521], [212], [33], [121], [18], "|S8"),
    ([521], [212], [33], [121], [18], "|V8"),
    ([521], [212], [33], [121], [18], "f4,i8"),
    ([20, 134, 13], [10, 43, 10], [3, 13, 5], [10, 43, 10], [3, 6, 5], "|S4"),
    ([12, 13, 14, 15, 16], [6, 6, 6, 6, 6], [2, 2, 2, 2, 2], [7, 7, 7, 7, 7], [3, 3, 5, 3, 3],
     "|S8"),
]  # fmt: skip
COPY_NUMPY = [
    ([521], [212], [33], [121], [18], "i8"),
    ([521], [212], [33], [121], [18], "i8, f4"),
    ([20, 134, 13], [10, 43, 10], [3, 13, 5], [10, 43, 10], [3, 6, 5], "f4"),
    ([12, 13, 14, 15, 16], [6, 6, 6, 6, 6], [2, 2, 2, 2, 2], [7, 7, 7, 7, 7], [3, 3, 5, 3, 3],
     "f8"),
]  # fmt: skip


@pytest.mark.parametrize(
    "shape,chunks1,blocks1,chunks2,blocks2,dtype,from_numpy",
    [case("test_copy::test_values", *v, False, id=str(i)) for i, v in enumerate(COPY_VALUES)]
    + [case("test_copy::test_copy_numpy", *v, True, id=str(i))
       for i, v in enumerate(COPY_NUMPY)],
)  # fmt: skip
def test_copy(tmp_path, shape, chunks1, blocks1, chunks2, blocks2, dtype, from_numpy):
    dtype = np.dtype(dtype)
    size = math.prod(shape)
    if not from_numpy:
        data = np.frombuffer(bytes(size * dtype.itemsize), dtype).reshape(shape)
        a = blosc2.frombuffer(bytes(data), shape, dtype=dtype, chunks=chunks1, blocks=blocks1,
                              cparams={"clevel": 2})  # fmt: skip
    else:
        data = np.ones(size, dtype) if dtype.kind == "V" else np.arange(size, dtype=dtype)
        data = data.reshape(shape)
        a = blosc2.asarray(data, chunks=chunks1, blocks=blocks1)
    cparams2 = {"clevel": 5, "filters": [Filter.BITSHUFFLE], "filters_meta": [0]}
    path = str(tmp_path / "copy.b2nd")
    a.copy(chunks=chunks2, blocks=blocks2, cparams=cparams2, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    assert oracle.chunks == tuple(chunks2)
    check_read(path, oracle)
    same(oracle[...], data)

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine, chunks=chunks2, blocks=blocks2,
                    **b2store_cparams(cparams2)).close()  # fmt: skip
    check_written_by_b2store(mine, data, chunks2, blocks2)


def test_copy__test_cparams_vlmeta(tmp_path):
    a = blosc2.arange(0, 10, 1, dtype="i4", shape=(10,))
    a.vlmeta["name"] = "a"
    path = str(tmp_path / "c.b2nd")
    blosc2.copy(a, cparams=blosc2.CParams(clevel=9, codec=Codec.LZ4), urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    assert oracle.schunk.vlmeta["name"] == "a"
    assert (oracle.schunk.cparams.codec, oracle.schunk.cparams.clevel) == (Codec.LZ4, 9)
    check_read(path, oracle)
    with b2store.open(path) as arr:
        assert arr.vlmeta["name"] == "a"

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(np.arange(10, dtype="i4"), mine, codec="lz4", clevel=9,
                    vlmeta={"name": "a"}).close()  # fmt: skip
    other = blosc2.open(str(mine), mode="r")
    assert other.schunk.vlmeta["name"] == "a"
    same(other[...], np.arange(10, dtype="i4"))


# ---------------------------------------------------------------------------------------------
# test_resize.py::test_resize: python-blosc2 resizes its file, b2store reads; and the reverse


RESIZE = [
    ((100, 1230), (200, 1230), (200, 100), (55, 3), b"0123"),
    ((23, 34), (23, 120), (20, 20), (10, 10), 1234),
    ((80, 51, 60), (80, 100, 100), (20, 10, 33), (6, 6, 26), 3.333),
    ((0,), (4,), (20,), (6,), 3.333),
    ((0, 0, 0), (4, 4, 100), (20, 10, 33), (6, 6, 26), 3.333),
    ((0, 0, 0), (40, 40, 10), (3, 3, 7), (2, 2, 5), 1),
]


@pytest.mark.parametrize(
    "shape,new_shape,chunks,blocks,fill_value",
    [case("test_resize::test_resize", *v, id=str(i)) for i, v in enumerate(RESIZE)],
)
def test_resize(tmp_path, shape, new_shape, chunks, blocks, fill_value):
    path = str(tmp_path / "r.b2nd")
    a = blosc2.full(shape, fill_value=fill_value, chunks=chunks, blocks=blocks, urlpath=path,
                    mode="w")  # fmt: skip
    a.resize(new_shape)
    del a
    oracle = blosc2.open(path, mode="r")
    assert oracle.shape == new_shape
    check_read(path, oracle)
    with b2store.open(path) as arr:
        old = tuple(slice(n) for n in shape)
        same(arr[old], np.full(shape, fill_value, dtype=oracle.dtype))

    mine = str(tmp_path / "mine.b2nd")
    with b2store.full(shape, fill_value, None, mine, chunks=chunks, blocks=blocks) as arr:
        arr.resize(new_shape)
    other = blosc2.open(mine, mode="r")
    assert other.shape == new_shape
    with b2store.open(mine) as arr:
        same(other[...], arr[...])
        same(arr[tuple(slice(n) for n in shape)], np.full(shape, fill_value, arr.dtype))


# ---------------------------------------------------------------------------------------------
# Slicing: test_getitem.py (test_basic/test_numpy/test_simple), test_ndarray.py
# (test_getitem_steps), test_slice.py (test_slice, test_slice_codec_and_clevel,
# test_slice_chunks_blocks)


GETITEM = [
    ([456], [258], [73], slice(0, 1), np.int32),
    ([77, 134, 13], [31, 13, 5], [7, 8, 3], (slice(3, 7), slice(50, 100), 7), np.float64),
    ([77, 134, 13], [31, 13, 5], [7, 8, 3], (slice(3, 56, 3), slice(100, 50, -4), 7),
     np.float64),
    ([12, 13, 14, 15, 16], [5, 5, 5, 5, 5], [2, 2, 2, 2, 2], (slice(1, 3), ..., slice(3, 6)),
     np.float32),
    ([12, 13, 14, 15, 16], [5, 5, 5, 5, 5], [2, 2, 2, 2, 2],
     (None, slice(1, 3), None, ..., slice(3, 6)), np.float32),
]  # fmt: skip
_S3 = ((10, 100, 300), (5, 25, 50), (1, 5, 10))
_WIDE = ((2, 100_003), (1, 40_000), (1, 10_000))
SLICE = [
    ([456], [258], [73], slice(0, 1), np.int32),
    ([77, 134, 13], [31, 13, 5], [7, 8, 3], (slice(3, 7), slice(50, 100), 7), np.float64),
    (
        [12, 13, 14, 15, 16],
        [5, 5, 5, 5, 5],
        [2, 2, 2, 2, 2],
        (slice(1, 3), ..., slice(3, 6)),
        np.float32,
    ),
    (*_S3, (slice(0, 10), slice(0, 100), slice(0, 300)), np.int32),
    (*_S3, (slice(0, 5), slice(0, 100), slice(0, 300)), np.int32),
    (*_S3, (slice(0, 5), slice(0, 25), slice(0, 200)), np.int32),
    (*_S3, (slice(0, 5), slice(0, 25), slice(0, 50)), np.int32),
    (*_S3, (slice(10, 50), slice(25, 100), slice(50, 300)), np.int32),
    (*_S3, (slice(10, 40), slice(25, 75), slice(100, 200)), np.int32),
    (*_S3, (slice(20, 35), slice(50, 75), slice(100, 300)), np.int32),
    (*_S3, (slice(20, 25), slice(25, 50), slice(50, 100)), np.int32),
    (*_WIDE, (slice(1, 2), slice(0, 40_000)), np.float64),
    (*_WIDE, (slice(1, 2), slice(40_000, 80_000)), np.float64),
    (*_WIDE, (slice(1, 2), slice(80_000, 100_003)), np.float64),
    ((6, 100_003), (1, 40_000), (1, 10_000), (slice(3, 5), slice(0, 40_000)), np.float64),
    ((4, 7, 5), (2, 3, 5), (1, 1, 5), (slice(2, 4), slice(0, 3), slice(0, 5)), np.float64),
    ((4, 7, 11), (2, 3, 4), (1, 1, 4), (slice(2, 4), slice(0, 3), slice(0, 4)), np.float64),
    (*_S3, (slice(0, 10), slice(0, 100), slice(0, 300 - 1)), np.int32),
    (*_S3, (slice(0, 5), slice(0, 100 - 1), slice(0, 300)), np.int32),
    (*_S3, (slice(0, 5 - 1), slice(0, 25), slice(0, 200)), np.int32),
    (*_S3, (slice(0, 5), slice(0, 25), slice(0, 50 - 1)), np.int32),
    (*_S3, (slice(10, 50 - 1), slice(25, 100), slice(50, 300)), np.int32),
    (*_S3, (slice(10, 40), slice(25, 75 - 1), slice(100, 200)), np.int32),
    (*_S3, (slice(20, 35), slice(50, 75), slice(100, 300 - 1)), np.int32),
    (*_S3, (slice(20 + 1, 25), slice(25, 50), slice(50, 100)), np.int32),
]
LZ4_BITSHUFFLE = {"codec": Codec.LZ4, "clevel": 6, "filters": [Filter.BITSHUFFLE]}


def _slice_cases():
    out = []
    for i, (shape, chunks, blocks, key, dtype) in enumerate(GETITEM):
        out.append(case("test_getitem::test_numpy", shape, chunks, blocks, key, dtype, None,
                        id=str(i)))  # fmt: skip
    for i, (shape, chunks, blocks, key, dtype) in enumerate(SLICE):
        nb = nbytes_of(shape, dtype)
        out.append(case("test_slice::test_slice", shape, chunks, blocks, key, dtype, None,
                        id=str(i), nbytes=nb))  # fmt: skip
        out.append(case("test_slice::test_slice_codec_and_clevel", shape, chunks, blocks, key,
                        dtype, LZ4_BITSHUFFLE, id=str(i), nbytes=nb))  # fmt: skip
    return out


@pytest.mark.parametrize("shape,chunks,blocks,key,dtype,cparams", _slice_cases())
def test_slices(tmp_path, shape, chunks, blocks, key, dtype, cparams):
    data = np.arange(math.prod(shape), dtype=dtype).reshape(shape)
    path = str(tmp_path / "s.b2nd")
    extra = {} if cparams is None else {"cparams": cparams}
    blosc2.asarray(data, chunks=chunks, blocks=blocks, urlpath=path, mode="w", **extra)
    oracle = blosc2.open(path, mode="r")
    with b2store.open(path) as arr:
        same(arr[key], data[key])
        same(arr[key], oracle[...][key])
        stepped = tuple(slice(None, None, -3) for _ in shape)
        same(arr[stepped], data[stepped])

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine, chunks=chunks, blocks=blocks,
                    **b2store_cparams(cparams or {})).close()  # fmt: skip
    same(blosc2.open(str(mine), mode="r")[key], data[key])


@pytest.mark.parametrize(
    "shape,chunks,blocks,key,dtype,chunks2,blocks2",
    [case("test_slice::test_slice_chunks_blocks", *GETITEM[0], [1], [1], id="0"),
     case("test_slice::test_slice_chunks_blocks", *GETITEM[1], [3, 50], None, id="1"),
     case("test_slice::test_slice_chunks_blocks", *GETITEM[3], None, [2, 3, 3, 5, 2], id="2")],
)  # fmt: skip
def test_slice_to_new_array(tmp_path, shape, chunks, blocks, key, dtype, chunks2, blocks2):
    # NDArray.slice writes a new array (its own chunks and blocks when given).
    data = np.arange(math.prod(shape), dtype=dtype).reshape(shape)
    a = blosc2.asarray(data, chunks=chunks, blocks=blocks)
    path = str(tmp_path / "slice.b2nd")
    a.slice(key, chunks=chunks2, blocks=blocks2, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    check_read(path, oracle)
    with b2store.open(path) as arr:
        same(arr[...].reshape(data[key].shape), data[key])


STEPS = [((200,), 1), ((200,), 3), ((200, 10), 1), ((200, 10), 2), ((200, 10, 10), 2),
         ((200, 10, 10), 40), ((200, 10, 10), -1), ((200, 10, 10), -3),
         ((200, 10, 10, 10), 9)]  # fmt: skip


@pytest.mark.parametrize(
    "shape,step",
    [case("test_ndarray::test_getitem_steps", s, st, id=f"{len(s)}d-{st}") for s, st in STEPS],
)
def test_getitem_steps(tmp_path, shape, step):
    data = np.arange(math.prod(shape), dtype="int32").reshape(shape)
    path = str(tmp_path / "g.b2nd")
    blosc2.asarray(data, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    with b2store.open(path) as arr:
        same(arr[::step], oracle[::step])
        same(arr[::step], data[::step])
        if len(shape) > 1:
            same(arr[1::step, ..., ::-step], data[1::step, ..., ::-step])

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine).close()
    same(blosc2.open(str(mine), mode="r")[::step], data[::step])


# ---------------------------------------------------------------------------------------------
# test_ndarray.py: frames of in-memory arrays, zero-sized shapes, asarray


CFRAME = [  # cparams, nchunks
    ({"codec": Codec.LZ4, "clevel": 6, "typesize": 4}, 1),
    ({"typesize": 4}, 1),
    ({"splitmode": SplitMode.ALWAYS_SPLIT, "typesize": 4}, 5),
    ({"codec": Codec.LZ4HC, "typesize": 4}, 10),
]


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
@pytest.mark.parametrize("urlpath", [None, "b2frame"], ids=["memory", "disk"])
@pytest.mark.parametrize(
    "cparams,nchunks",
    [case("test_ndarray::test_ndarray_cframe", *v, id=str(i),
          nbytes=200 * 1000 * v[1] * 4) for i, v in enumerate(CFRAME)],
)  # fmt: skip
def test_ndarray_cframe(tmp_path, cparams, nchunks, urlpath, contiguous):
    data = np.arange(200 * 1000 * nchunks, dtype="int32").reshape(200, 1000, nchunks)

    def make(**storage):
        return blosc2.asarray(data, cparams=cparams, storage=storage)

    source, oracle = written_by_blosc2(tmp_path, make, urlpath, contiguous)
    if urlpath is not None:  # its frame, as to_cframe() gives it, too
        frame = oracle.to_cframe()
        check_read(frame, blosc2.ndarray_from_cframe(frame))
    check_read(source, oracle)
    same(oracle[...], data)

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine, contiguous=contiguous, **b2store_cparams(cparams)).close()
    check_written_by_b2store(mine, data)


@pytest.mark.parametrize("urlpath", [None, "test.b2nd"], ids=["memory", "disk"])
@pytest.mark.parametrize(
    "shape",
    [case("test_ndarray::test_shape_with_zeros", s, id=str(s))
     for s in [(0,), (0, 0), (0, 1), (0, 0, 0), (0, 1, 0)]],
)  # fmt: skip
def test_shape_with_zeros(tmp_path, shape, urlpath):
    data = np.zeros(shape, dtype="int32")

    def make(**storage):
        return blosc2.asarray(data, mode="w", **storage)

    source, oracle = written_by_blosc2(tmp_path, make, urlpath, True)
    check_read(source, oracle)
    with b2store.open(source) as arr:
        assert arr.size == 0
        same(arr[()], data[()])

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine).close()
    check_written_by_b2store(mine, data)


@pytest.mark.parametrize(
    "data",
    [case("test_ndarray::test_asarray", v, id=i) for i, v in [
        ("linspace", np.linspace(0, 10)), ("scalar", np.asarray(np.linspace(0, 10)[0])),
        ("one", np.linspace(0, 10, 1)), ("0d", np.array(3.14))]],
)  # fmt: skip
def test_asarray(tmp_path, data):
    path = str(tmp_path / "a.b2nd")
    blosc2.asarray(data, urlpath=path, mode="w")
    check_read(path, blosc2.open(path, mode="r"))

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine).close()
    check_written_by_b2store(mine, data)


@pytest.mark.parametrize(
    "shape,chunks,blocks",
    [case("test_ndarray::test_asarray_chunks_larger_than_shape", *v, id=str(i),
          nbytes=nbytes_of(v[0], "f8")) for i, v in enumerate([
              ((146, 23802), (147, 23802), (1, 23802)),
              ((2200, 1000), (1100, 1024), (10, 1024)),
              ((20, 300, 500), (21, 300, 500), (1, 300, 500))])],
)  # fmt: skip
def test_asarray_chunks_larger_than_shape(tmp_path, shape, chunks, blocks):
    data = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    path = str(tmp_path / "a.b2nd")
    blosc2.asarray(data, chunks=chunks, blocks=blocks, urlpath=path, mode="w")
    check_read(path, blosc2.open(path, mode="r"))

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine, chunks=chunks, blocks=blocks).close()
    check_written_by_b2store(mine, data, chunks, blocks)


# ---------------------------------------------------------------------------------------------
# test_setitem.py::test_setitem: python-blosc2 changes selections (negative steps too) of its
# file, b2store reads it; b2store makes the same changes to its own file, python-blosc2 reads.


SETITEM = [
    ([456], [258], [73], np.s_[0:1], np.int32),
    ([77, 134, 13], [31, 13, 5], [7, 8, 3], np.s_[3:7, 50:100, 7], np.float64),
    ([12, 13, 14, 15, 16], [5, 5, 5, 5, 5], [2, 2, 2, 2, 2], np.s_[1:3, ..., 3:6], np.float32),
    ([12, 13, 14, 15, 16], [5, 5, 5, 5, 5], [2, 2, 2, 2, 2], np.s_[1:9:2, ..., 3:6], np.float32),
    ([12, 13], [5, 5], [2, 2], np.s_[11:2:-1, 6:2:-1], np.float32),
    ([25, 13, 22], [5, 5, 3], [2, 2, 1], np.s_[17:2:-3, 2, 6:2:-1], np.float32),
    ([25, 13, 22], [5, 5, 3], [2, 2, 1], np.s_[-5:-15:-1, -3:-11:-2, 6:2:-1], np.float32),
    ([0, 13, 22], [0, 5, 3], [0, 2, 1], np.s_[:, -5:-15:-1, 6:2:-1], np.float32),
    ([13, 22], [5, 3], [2, 1], np.s_[1, -5::-1], np.float32),
]


def _assign(arr, key, want: np.ndarray) -> None:
    """The test's three assignments: a scalar, an array of ones, then 1234567 everywhere."""
    shape = want[key].shape
    for value in (0, np.ones(shape, want.dtype), np.full(shape, 1234567, want.dtype)):
        arr[key] = value
        want[key] = value


@pytest.mark.parametrize(
    "shape,chunks,blocks,key,dtype",
    [case("test_setitem::test_setitem", *v, id=str(i)) for i, v in enumerate(SETITEM)],
)
def test_setitem(tmp_path, shape, chunks, blocks, key, dtype):
    data = np.arange(math.prod(shape), dtype=dtype).reshape(shape)
    want = data.copy()
    path = str(tmp_path / "s.b2nd")
    a = blosc2.frombuffer(
        bytes(data), data.shape, dtype=dtype, chunks=chunks, blocks=blocks, urlpath=path, mode="w"
    )
    _assign(a, key, want)
    del a
    oracle = blosc2.open(path, mode="r")
    same(oracle[...], want)
    check_read(path, oracle)

    mine = tmp_path / "mine.b2nd"
    b2store.frombuffer(bytes(data), shape, dtype, mine, chunks=chunks, blocks=blocks).close()
    want = data.copy()
    with b2store.open(mine, mode="a") as arr:
        _assign(arr, key, want)
    check_written_by_b2store(mine, want, chunks, blocks)


@pytest.mark.parametrize(
    "dtype",
    [
        # test_dsl_kernels::test_kernel_non_native_endian_needs_miniexpr's input, and
        # test_zeros::test_nd_dtype's mixed-order record
        case("test_dsl_kernels::test_kernel_non_native_endian", ">f8", id=">f8"),
        case("test_zeros::test_nd_dtype", "<i4,>f4", id="<i4,>f4"),
    ],
)
def test_big_endian(tmp_path, dtype):
    data = np.arange(100).astype(dtype).reshape(10, 10)
    path = str(tmp_path / "e.b2nd")
    blosc2.asarray(data, urlpath=path, mode="w")
    oracle = blosc2.open(path, mode="r")
    assert oracle.dtype == np.dtype(dtype)
    check_read(path, oracle)

    mine = tmp_path / "mine.b2nd"
    b2store.asarray(data, mine).close()
    check_written_by_b2store(mine, data)
