"""b2store's Zarr codec pipeline on ``B2ndStore`` arrays: a basic read is one box read by
b2store's own engine into zarr's output, item for item what ``b2store.open`` and zarr's own
pipeline read; keys that are not one box, stores with a writer, and writes go to zarr's
pipeline; a damaged chunk raises what ``b2store.open`` raises."""

import numpy as np
import pytest

zarr = pytest.importorskip("zarr", reason="the zarr extra is not installed")

import b2store  # noqa: E402
from b2store.integrations.zarr import b2nd_reads  # noqa: E402
from b2store.integrations.zarr import pipeline as pipeline_module  # noqa: E402
from b2store.integrations.zarr.pipeline import B2storeCodecPipeline  # noqa: E402
from b2store.integrations.zarr.store import B2ndStore  # noqa: E402

OURS = "b2store.integrations.zarr.pipeline.B2storeCodecPipeline"
DEFAULT = "zarr.core.codec_pipeline.BatchedCodecPipeline"

KEYS = [
    np.s_[:],
    np.s_[3:41, 5:70],
    np.s_[40:, 60:],
    np.s_[7],
    np.s_[:, 13],
    np.s_[9, 33],
    np.s_[::3, 1::7],
    np.s_[2:44:5, 3],
    np.s_[-5:, :-3],
    np.s_[0:0, :],
]


def values(dtype="f4", shape=(45, 71)):
    y, x = np.mgrid[: shape[0], : shape[1]]
    return (np.sin(x / 7) * np.cos(y / 5) * 100 + y).astype(dtype)


@pytest.fixture
def boxes(monkeypatch):
    """The boxes the pipeline read with b2store's engine."""
    seen = []
    real = pipeline_module.read_box

    def spy(store, node, key, out, nthreads):
        seen.append(key)
        return real(store, node, key, out, nthreads)

    monkeypatch.setattr(pipeline_module, "read_box", spy)
    return seen


def open_with(path, which, **kwargs):
    with zarr.config.set({"codec_pipeline.path": which}):
        return zarr.open_array(B2ndStore(path, **kwargs), mode="r")


@pytest.mark.parametrize(
    "dtype, chunks, blocks, contiguous",
    [
        ("f4", (10, 20), (5, 10), True),
        ("i2", (16, 16), (16, 4), False),  # a sparse frame
        ("c16", (45, 71), (9, 71), True),  # one chunk: decoded straight into the output
        ("u1", (7, 9), (7, 9), True),  # one block per chunk
    ],
)
def test_basic_keys_are_one_box_read_as_b2store_open_reads(
    tmp_path, boxes, dtype, chunks, blocks, contiguous
):
    expected = values(dtype)
    path = tmp_path / ("x.b2nd" if contiguous else "x")
    b2store.asarray(expected, path, chunks=chunks, blocks=blocks, contiguous=contiguous)
    ours = open_with(path, OURS)
    theirs = open_with(path, DEFAULT)
    assert type(ours._async_array.codec_pipeline) is B2storeCodecPipeline
    own = b2store.open(path)
    for key in KEYS:
        boxes.clear()
        got = ours[key]
        np.testing.assert_array_equal(got, own[key])
        np.testing.assert_array_equal(got, theirs[key])
        assert got.dtype == own.dtype
        assert len(boxes) == (1 if got.size else 0), key
    # Orthogonal and vectorized keys are zarr's placement, after zarr's pipeline.
    boxes.clear()
    np.testing.assert_array_equal(ours.oindex[[0, 17, 44], 2:50], expected[[0, 17, 44], 2:50])
    np.testing.assert_array_equal(
        ours.vindex[[0, 17, 44], [1, 2, 70]], expected[[0, 17, 44], [1, 2, 70]]
    )
    assert boxes == []


def test_a_three_dimensional_array_and_a_group_node(tmp_path, boxes):
    expected = np.arange(6 * 50 * 33, dtype="f8").reshape(6, 50, 33)
    path = tmp_path / "x.b2nd"
    b2store.asarray(expected, path, chunks=(2, 16, 11), blocks=(1, 8, 11))
    with zarr.config.set({"codec_pipeline.path": OURS}):
        group = zarr.open_group(B2ndStore(path, group=True), mode="r")
        (name,) = list(group.array_keys())
        arr = group[name]
        for key in (np.s_[:], np.s_[1:5, 3:49, 2], np.s_[4, ::4, 1:30:3], np.s_[5, 49, 32]):
            np.testing.assert_array_equal(arr[key], expected[key])
    assert len(boxes) == 4


def test_missing_chunks_read_as_b2store_open_reads_them(tmp_path, boxes):
    path = tmp_path / "x.b2nd"
    arr = b2store.empty((40, 40), "f4", path, chunks=(10, 10), blocks=(5, 5))
    arr[12:18, 3:30] = 2.5
    arr.close()
    ours = open_with(path, OURS)
    np.testing.assert_array_equal(ours[:], b2store.open(path)[:])
    np.testing.assert_array_equal(ours[:], open_with(path, DEFAULT)[:])
    assert len(boxes) == 2


def test_a_store_with_a_writer_reads_through_zarrs_pipeline(tmp_path, boxes):
    path = tmp_path / "x.b2nd"
    expected = values()
    b2store.asarray(expected, path, chunks=(10, 20), blocks=(5, 10))
    with zarr.config.set({"codec_pipeline.path": OURS}):
        arr = zarr.open_array(B2ndStore(path, mode="a"))
        np.testing.assert_array_equal(arr[:], expected)
        assert len(boxes) == 1
        arr[3:12, 5:30] = -1
        expected[3:12, 5:30] = -1
        boxes.clear()
        np.testing.assert_array_equal(arr[:], expected)
        assert boxes == []  # (the writer's chunks are zarr's to read back)
    arr.store.close()
    np.testing.assert_array_equal(b2store.open(path)[:], expected)
    np.testing.assert_array_equal(open_with(path, OURS)[:], expected)


@pytest.mark.parametrize(
    "damage", [lambda b: b[:20], lambda b: b[:-30], lambda b: b[:40] + b"\xff" * (len(b) - 40)]
)
def test_a_damaged_chunk_raises_what_b2store_open_raises(tmp_path, damage):
    path = tmp_path / "x"  # a sparse frame: a file per chunk
    b2store.asarray(np.round(values()), path, chunks=(10, 20), blocks=(5, 10), contiguous=False)
    chunk = sorted(path.glob("*.chunk"))[6]
    chunk.write_bytes(damage(chunk.read_bytes()))
    with pytest.raises(b2store.FormatError) as theirs:
        b2store.open(path)[:]
    with pytest.raises(b2store.FormatError) as ours:
        open_with(path, OURS)[:]
    assert str(ours.value) == str(theirs.value)


def test_read_into_refuses_what_it_cannot_place(tmp_path):
    path = tmp_path / "x.b2nd"
    arr = b2store.asarray(values(), path, chunks=(10, 20), blocks=(5, 10))
    out = np.empty((45, 71), "f4")
    arr.read_into((slice(None), slice(None)), out)
    np.testing.assert_array_equal(out, values())
    cases = [
        ((slice(None, None, -1), slice(None)), out, "a key of forward slices"),
        ((slice(None), slice(None)), out.astype("f8"), "a key of forward slices"),
        ((slice(None), slice(None)), np.empty((71, 45), "f4").T, "a key of forward slices"),
        ((slice(None),), out, "a key of forward slices"),
        ((slice(1, None), slice(None)), out, "out has shape (45, 71), the key (44, 71)"),
    ]
    for key, where, message in cases:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            arr.read_into(key, where)


def test_batches_that_are_not_one_box_are_refused():
    class Getter:
        def __init__(self, path):
            self.path = path

    class Spec:
        shape = (10, 10)

    class Store:
        _writer = None

        def _parse_key(self, key):
            return ("", "chunk", None)

    out = np.empty((10, 20), "f4")
    whole = (slice(0, 10, 1), slice(0, 10, 1))
    left = (Getter("c/0/0"), Spec, whole, (slice(0, 10), slice(0, 10)), True)
    right = (Getter("c/0/1"), Spec, whole, (slice(0, 10), slice(10, 20)), True)
    assert b2nd_reads.box_of(Store(), [left, right], out) == (
        "",
        (slice(0, 10, 1), slice(0, 20, 1)),
    )
    swapped = (Getter("c/0/1"), Spec, whole, (slice(0, 10), slice(0, 10)), True)
    twice = (Getter("c/0/0"), Spec, whole, (slice(0, 10), slice(10, 20)), True)
    gap = (Getter("c/0/2"), Spec, whole, (slice(0, 10), slice(10, 20)), True)
    arrays = (Getter("c/0/1"), Spec, (np.arange(3), whole[1]), (slice(0, 10), slice(10, 20)), True)
    for batch in ([left, swapped], [left, twice], [left, gap], [left, arrays], [left]):
        assert b2nd_reads.box_of(Store(), batch, out) is None


@pytest.mark.parametrize("workers", [1, 2])
def test_the_box_is_decoded_in_zarrs_threads(tmp_path, monkeypatch, boxes, workers):
    # zarr's threading.max_workers holds a B2ndStore read to its threads, as it holds the
    # pipeline's reads of other arrays; b2store's own setting is for b2store's reads.
    from b2store.chunk import native

    data = values(shape=(400, 300))
    path = tmp_path / "a.b2nd"
    b2store.asarray(data, urlpath=str(path), chunks=(100, 300), blocks=(10, 300))
    asked = []
    real = native.default_nthreads
    monkeypatch.setattr(native, "default_nthreads", lambda: asked.append(real()) or asked[-1])
    native.set_nthreads(3)
    try:
        arr = open_with(path, OURS)
        with zarr.config.set({"threading.max_workers": workers}):
            np.testing.assert_array_equal(arr[:], data)
        assert boxes and asked and set(asked) == {workers}
        asked.clear()
        with b2store.open(path) as own:
            np.testing.assert_array_equal(own[:], data)
        assert asked and set(asked) == {3}
    finally:
        native.set_nthreads(None)


def test_threads_of_call_hold_only_the_calling_thread():
    import threading

    from b2store.chunk import native

    native.set_nthreads(3)
    try:
        seen = {}
        with native.threads_of_call(1):
            t = threading.Thread(target=lambda: seen.setdefault("other", native.default_nthreads()))
            t.start()
            t.join()
            with native.threads_of_call(2):
                seen["inner"] = native.default_nthreads()
            seen["outer"] = native.default_nthreads()
        seen["after"] = native.default_nthreads()
        assert seen == {"other": 3, "inner": 2, "outer": 1, "after": 3}
    finally:
        native.set_nthreads(None)
