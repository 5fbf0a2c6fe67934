"""An obstore store (or a zarr ``ObjectStore`` over one) where a URL's fsspec filesystem would
be: ``storage_options={"store": store}``, the URL's path the key in it. Read and written
through every entry point, against moto's S3 server (tests/s3server.py) and obstore's
in-memory store; what goes up through obstore comes back the same through s3fs."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pytest.importorskip("obstore", reason="obstore stores (the test-virtual extra)")
pytest.importorskip(
    "s3fs", reason="s3:// URLs through fsspec's s3fs, to compare (the test-s3 extra)"
)
pytest.importorskip("moto.server", reason="the local S3 API is moto's server (the test-s3 extra)")
xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

from obstore.store import MemoryStore, S3Store  # noqa: E402
from s3server import KEY, REGION, SECRET  # noqa: E402

import b2store  # noqa: E402

DATA = np.random.default_rng(21).random((40, 30))


@pytest.fixture
def bucket(s3):
    """``(bucket name, obstore S3Store over it)``."""
    name = s3.new_bucket()
    store = S3Store(name, endpoint=s3.endpoint, access_key_id=KEY, secret_access_key=SECRET,
                    region=REGION, client_options={"allow_http": True},
                    virtual_hosted_style_request=False)  # fmt: skip
    return name, store


@pytest.mark.parametrize("contiguous", [True, False], ids=["frame", "sparse"])
def test_arrays_through_an_obstore_store(s3, bucket, contiguous):
    name, store = bucket
    url = f"s3://{name}/a.b2nd"
    theirs = {"store": store}
    dims = {"_ARRAY_DIMENSIONS": ["y", "x"]}
    arr = b2store.asarray(DATA, url, contiguous=contiguous, chunks=(10, 30), vlmeta=dims,
                          storage_options=theirs)  # fmt: skip
    np.testing.assert_array_equal(arr[...], DATA)
    # The same objects, read through s3fs; and an array pickled with its store.
    np.testing.assert_array_equal(
        b2store.open(url, storage_options=s3.storage_options)[5:25], DATA[5:25]
    )
    reopened = pickle.loads(pickle.dumps(b2store.open(url, storage_options=theirs)))
    np.testing.assert_array_equal(reopened[17], DATA[17])
    with xr.open_dataset(url, engine="b2nd", storage_options=theirs, chunks={}) as ds:
        np.testing.assert_array_equal(ds["data"].values, DATA)
    if not contiguous:
        writer = b2store.open(url, mode="a", storage_options=theirs)
        writer[12] = -1
        expected = DATA.copy()
        expected[12] = -1
        np.testing.assert_array_equal(
            b2store.open(url, storage_options=s3.storage_options)[...], expected
        )


def test_trees_and_b2ndstore_through_an_obstore_store(s3, bucket):
    name, store = bucket
    theirs = {"store": store}
    ds = xr.Dataset({"t": (("y", "x"), DATA)}, coords={"x": np.arange(30.0)}, attrs={"a": 1})
    b2store.to_b2nd(ds, f"s3://{name}/t.b2d", storage_options=theirs)
    with xr.open_dataset(f"s3://{name}/t.b2d", engine="b2nd", storage_options=theirs) as back:
        xr.testing.assert_identical(back.load(), ds)
    # A zarr ObjectStore over the obstore store does as well.
    wrapped = {"store": zarr.storage.ObjectStore(store)}
    target = b2store.B2ndStore(f"s3://{name}/z.b2d", mode="w", storage_options=wrapped)
    ds.to_zarr(target, mode="w", consolidated=False, zarr_format=3)
    url = f"s3://{name}/z.b2d"
    with xr.open_dataset(url, engine="b2nd", storage_options=s3.storage_options) as back:
        xr.testing.assert_identical(back.load(), ds)
    tree = b2store.open_tree(url, storage_options=theirs)
    assert sorted(tree.arrays()) == ["/t", "/x"]


def test_two_writers_through_an_in_memory_store():
    """obstore's put modes are the conditional writes: a writer whose index was replaced
    meanwhile gets ConflictError; a missing object is FileNotFoundError."""
    store = MemoryStore()
    theirs = {"store": store}
    url = "memory://any/w.b2frame"
    a = b2store.SChunk.create(url, contiguous=False, typesize=8, storage_options=theirs)
    a.append_data(np.full(100, 5.0))
    b = b2store.SChunk.open(url, mode="a", storage_options=theirs)

    def chunks():
        yield _encoded(a, np.ones(100))
        b.append_data(np.full(100, 2.0))
        yield _encoded(a, np.full(100, 3.0))

    with pytest.raises(b2store.ConflictError, match="w.b2frame"):
        a.extend_chunks(chunks())
    reader = b2store.SChunk.open(url, storage_options=theirs)
    assert reader.nchunks == 2
    np.testing.assert_array_equal(np.frombuffer(reader.decompress_chunk(1), "f8"), 2.0)
    with pytest.raises(FileNotFoundError, match="nothing.b2nd"):
        b2store.open("memory://any/nothing.b2nd", storage_options=theirs)
    # A frame replaced under a reader: refused (If-Match on every range), not misread.
    # (large enough that its chunks lie past the ends of the frame kept once read)
    one, big = "memory://any/one.b2nd", np.tile(DATA, (10, 10))
    b2store.asarray(big, one, chunks=(40, 300), storage_options=theirs)
    held = b2store.open(one, storage_options=theirs)
    np.testing.assert_array_equal(held[:40], big[:40])
    b2store.asarray(-big, one, chunks=(40, 300), storage_options=theirs, mode="w")
    with pytest.raises(b2store.FormatError, match="replaced since"):
        held[200:240]


def _encoded(schunk, values) -> bytes:
    from b2store.chunk.encoder import encode_chunk

    return encode_chunk(values, schunk.params)
