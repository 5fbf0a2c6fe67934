"""Writing b2nd arrays: python-blosc2 reads what b2store writes and changes, and b2store reads
and changes what python-blosc2 writes, over dtypes x shapes x codecs x filters x frame kinds."""

import numpy as np
import pytest

import b2store

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")

DTYPES = [
    "<f8",
    "<f4",
    "<f2",
    "<i8",
    ">i4",
    "|u1",
    "|b1",
    "<c16",
    "<c8",
    "|S7",
    "<U5",
    "<M8[s]",
    "<m8[ms]",
    [("a", "<i4"), ("b", "<f8", (2,))],
    [("p", [("x", "<f4"), ("y", "<f4")]), ("tag", "|S3")],
    "|V300",
]
if hasattr(np, "float128"):
    DTYPES.append("<f16")
SHAPES = [  # shape, chunks, blocks: edge chunks, blocks that do not divide chunks, 1-d to 8-d
    ((100,), (30,), (7,)),
    ((23, 17), (10, 8), (4, 3)),
    ((6, 5, 4), (4, 5, 3), (2, 2, 2)),
    ((3, 2, 3, 2, 3, 2, 3, 2), (2, 2, 2, 2, 2, 2, 2, 2), (1, 2, 1, 2, 1, 2, 1, 2)),
]


def sample(shape, dtype, seed=0):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    if dtype.kind in "fc":
        return (rng.normal(size=shape) * 100).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "U":
        return np.array(
            [
                "".join(chr(97 + (i * 7 + j) % 26) for j in range(i % 6))
                for i in range(int(np.prod(shape)))
            ],
            dtype,
        ).reshape(shape)
    if dtype.kind in "Mm":
        return raw.view("<i8")[: int(np.prod(shape))].reshape(shape).astype(dtype)
    if dtype.fields:
        out = np.zeros(shape, dtype)
        out.view(np.uint8)[...] = raw.reshape(out.view(np.uint8).shape)
        return out
    return raw.view(dtype).reshape(shape)


def equal(a, b):
    if a.dtype.kind in "fc":
        return np.array_equal(a, b, equal_nan=True)
    return a.tobytes() == b.tobytes() and a.shape == b.shape


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_dtypes_round_trip_both_ways(tmp_path, dtype, contiguous):
    shape, chunks, blocks = SHAPES[1]
    data = sample(shape, dtype)
    path = tmp_path / "d.b2nd"
    ours = b2store.asarray(
        data,
        path,
        chunks=chunks,
        blocks=blocks,
        contiguous=contiguous,
        vlmeta={"source": "b2store", "n": 3},
    )
    ours.schunk.close()
    theirs = blosc2.open(str(path))
    assert theirs.dtype == data.dtype and equal(theirs[()], data)
    assert theirs.vlmeta["source"] == "b2store" and theirs.vlmeta["n"] == 3
    path2 = tmp_path / "p.b2nd"
    blosc2.asarray(
        data, urlpath=str(path2), chunks=chunks, blocks=blocks, contiguous=contiguous, mode="w"
    )
    back = b2store.open(path2)
    # python-blosc2 writes a plain V300 as the struct [('f0', 'V300')]: read what it says.
    assert back.dtype == blosc2.open(str(path2)).dtype
    assert back[...].tobytes() == data.tobytes()


@pytest.mark.parametrize("shape,chunks,blocks", SHAPES, ids=lambda v: "x".join(map(str, v)))
@pytest.mark.parametrize(
    "codec,filters",
    [
        ("zstd", ["shuffle"]),
        ("lz4", ["bitshuffle"]),
        ("blosclz", ["delta", "shuffle"]),
        ("zlib", []),
        ("lz4hc", ["shuffle", "bytedelta"]),
    ],
)
def test_shapes_codecs_filters(tmp_path, shape, chunks, blocks, codec, filters):
    data = sample(shape, "<i4", seed=len(shape))
    metas = [4 if f == "bytedelta" else 0 for f in filters]
    path = tmp_path / "s.b2nd"
    b2store.asarray(
        data, path, chunks=chunks, blocks=blocks, codec=codec, filters=filters, filters_meta=metas
    ).schunk.close()
    theirs = blosc2.open(str(path))
    assert theirs.chunks == chunks and theirs.blocks == blocks
    assert equal(theirs[()], data)


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_changes_read_by_python_blosc2_and_back(tmp_path, contiguous):
    data = sample((40, 30), "<f8")
    path = tmp_path / "c.b2nd"
    b2store.asarray(
        data, path, chunks=(16, 16), blocks=(5, 7), contiguous=contiguous
    ).schunk.close()
    arr = b2store.open(path, mode="a")
    arr[5:35:3, ::4] = 7.5
    data[5:35:3, ::4] = 7.5
    arr[0] = np.arange(30)
    data[0] = np.arange(30)
    arr.resize((50, 20))
    grown = np.zeros((50, 20))
    grown[:40] = data[:, :20]
    arr.vlmeta["step"] = "resized"
    arr.schunk.close()
    theirs = blosc2.open(str(path), mode="a")
    assert theirs.shape == (50, 20) and equal(theirs[()], grown)
    assert theirs.vlmeta["step"] == "resized"
    theirs[45:, :] = -1.0
    grown[45:, :] = -1.0
    theirs.resize((55, 25))
    del theirs
    final = np.zeros((55, 25))
    final[:50, :20] = grown
    back = b2store.open(path)
    assert back.shape == (55, 25) and equal(back[...], final)


def test_constructors(tmp_path):
    zeros = b2store.zeros((70, 40), "<i2", tmp_path / "z.b2nd", chunks=(30, 30), blocks=(10, 10))
    assert zeros.cbytes < 64  # every chunk is a special offset: no chunk data stored
    assert equal(blosc2.open(str(tmp_path / "z.b2nd"))[()], np.zeros((70, 40), "<i2"))
    full = b2store.full(
        (70, 40), 2.5, urlpath=tmp_path / "f.b2nd", chunks=(30, 30), blocks=(10, 10)
    )
    assert equal(blosc2.open(str(tmp_path / "f.b2nd"))[()], np.full((70, 40), 2.5))
    assert full.schunk.get_chunk(0)[31] >> 4 == b2store.SpecialValue.VALUE
    empty = b2store.empty((5,), "<f4")
    assert empty.shape == (5,) and empty.schunk.contiguous
    buf = np.arange(24, dtype="<i8").tobytes()
    fb = b2store.frombuffer(buf, (4, 6), "<i8", tmp_path / "b.b2nd")
    assert equal(blosc2.open(str(tmp_path / "b.b2nd"))[()], np.arange(24).reshape(4, 6))
    assert equal(fb[...], np.arange(24).reshape(4, 6))


def test_default_shapes_and_special_cases(tmp_path):
    data = np.arange(1_000_000, dtype="<f8")
    ours = b2store.asarray(data, tmp_path / "big.b2nd")
    theirs = blosc2.asarray(data)
    assert (ours.chunks, ours.blocks) == (theirs.chunks, theirs.blocks)
    scalar = b2store.asarray(np.float64(3.25), tmp_path / "s.b2nd")
    assert scalar.shape == () and blosc2.open(str(tmp_path / "s.b2nd"))[()] == 3.25
    hollow = b2store.asarray(np.zeros((0, 5)), tmp_path / "h.b2nd")
    assert blosc2.open(str(tmp_path / "h.b2nd")).shape == (0, 5) and hollow[...].shape == (0, 5)
    constant = b2store.asarray(
        np.full((64, 64), 9, "<i4"), tmp_path / "k.b2nd", chunks=(32, 32), blocks=(8, 8)
    )
    assert all(len(constant.schunk.get_chunk(i)) == 36 for i in range(4))
    assert equal(blosc2.open(str(tmp_path / "k.b2nd"))[()], np.full((64, 64), 9, "<i4"))
    with pytest.raises(TypeError, match="fixed-size items, not object"):
        b2store.asarray(np.array([object()]))


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_small_reads_follow_every_change_of_a_chunk(tmp_path, contiguous):
    """A handle keeps each chunk's block layout for its small reads: a change of the chunk,
    through the same handle or another writer's, is read, never the layout kept."""
    path = tmp_path / ("a.b2nd" if contiguous else "a.b2nd.d")
    data = sample((64, 64), "<f8")
    b2store.asarray(data, urlpath=path, chunks=(32, 32), blocks=(8, 32), contiguous=contiguous)
    arr = b2store.open(path, mode="a")
    other = b2store.open(path, mode="a")
    assert arr[5, 5] == data[5, 5] and arr[20, 3] == data[20, 3]  # layouts now kept
    for step in range(3):
        new = sample((32, 32), "<f8", seed=step + 1) * (step + 2)
        (arr if step % 2 else other)[0:32, 0:32] = new
        data[0:32, 0:32] = new
        with arr.schunk.changing():  # a writer takes the newest state before it changes
            pass
        for i, j in [(5, 5), (20, 3), (31, 31), (40, 40)]:
            assert arr[i, j] == data[i, j]
            assert arr[i : i + 1, j].tolist() == data[i : i + 1, j].tolist()


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_chunk_changes_under_an_array_that_would_break_it_are_refused(tmp_path, contiguous):
    # arr.schunk is the frame: appending, inserting or deleting a chunk there, or storing a
    # chunk of another size, would leave a file whose chunks contradict its shape (b2store
    # then refuses it; python-blosc2 serves the first chunks and ignores the rest).
    path = str(tmp_path / "a.b2nd")
    data = np.arange(100.0)
    b2store.asarray(data, path, chunks=(10,), blocks=(5,), contiguous=contiguous)
    arr = b2store.open(path, mode="a")
    other = b2store.asarray(np.arange(20.0), chunks=(20,), blocks=(5,))
    changes = {
        "append": lambda: arr.schunk.append_data(np.ones(10).tobytes()),
        "insert": lambda: arr.schunk.insert_chunk(0, arr.schunk.get_chunk(0)),
        "delete": lambda: arr.schunk.delete_chunk(3),
        "resized chunk": lambda: arr.schunk.update_chunk(2, other.schunk.get_chunk(0)),
    }
    for what, change in changes.items():
        with pytest.raises(ValueError, match=r"would leave .* where the array needs 10 of 80"):
            change()
        assert arr.schunk.nchunks == 10, what
    np.testing.assert_array_equal(b2store.open(path)[:], data)
    np.testing.assert_array_equal(blosc2.open(path)[:], data)
    # The array's own changes, and a chunk of the right size through the frame, go through.
    arr.schunk.update_chunk(
        0, b2store.asarray(np.full(10, 5.0), chunks=(10,), blocks=(5,)).schunk.get_chunk(0)
    )
    arr[95:] = -1.0
    arr.resize((120,))
    expected = np.concatenate([np.full(10, 5.0), data[10:95], -np.ones(5), np.zeros(20)])
    np.testing.assert_array_equal(b2store.open(path)[:], expected)
    np.testing.assert_array_equal(blosc2.open(path)[:], expected)
