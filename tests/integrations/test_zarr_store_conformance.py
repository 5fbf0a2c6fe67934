"""B2ndStore against zarr's store conformance suite (zarr.testing.store.StoreTests).

What cannot apply, and why: the suite writes arbitrary keys with arbitrary bytes ("foo",
"foo/c/0.0", "c/0" holding b"\\x01\\x02\\x03\\x04") and reads them back. A B2ndStore has no
place for such keys: its keys are synthesized from frames (a node's ``zarr.json``, an array's
chunk keys), a chunk key exists only inside an array's grid, and its value must be a Blosc2
chunk of that array's size. So the tests that round-trip free-form keys (get/set/list/
delete/getsize/is_empty/clear/set_if_not_exists and their sync twins, and the serialization
and with_read_only tests that write "foo") are replaced here by the same checks on the keys
the store does have. Everything about identity, opening, read-only behaviour and byte-range
validation runs as the suite wrote it.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
blosc2 = pytest.importorskip("blosc2")

from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest  # noqa: E402
from zarr.core.buffer import cpu, default_buffer_prototype  # noqa: E402
from zarr.core.sync import sync  # noqa: E402
from zarr.testing.store import StoreTests  # noqa: E402

from b2store.integrations.zarr_store import B2ndStore  # noqa: E402

PROTO = default_buffer_prototype()
# The suite's tests and fixtures are coroutines: anyio's pytest plugin runs them.
pytestmark = pytest.mark.anyio
NOT_APPLICABLE = "writes a free-form key; a B2ndStore's keys are synthesized (module docstring)"

FREE_FORM = [
    "test_serializable_store",
    "test_with_read_only_store",
    "test_get",
    "test_get_not_open",
    "test_get_raises",
    "test_get_many",
    "test_getsize",
    "test_getsize_prefix",
    "test_getsize_raises",
    "test_set",
    "test_set_not_open",
    "test_set_many",
    "test_get_partial_values",
    "test_exists",
    "test_delete",
    "test_delete_dir",
    "test_is_empty",
    "test_clear",
    "test_list",
    "test_list_prefix",
    "test_list_empty_path",
    "test_list_dir",
    "test_set_if_not_exists",
    "test_get_bytes",
    "test_get_bytes_sync",
    "test_get_json",
    "test_get_json_sync",
]


def _not_applicable(name):
    def test(self, *args, **kwargs):
        pytest.skip(NOT_APPLICABLE)

    test.__name__ = name
    return test


class TestB2ndStoreConformance(StoreTests[B2ndStore, cpu.Buffer]):
    store_cls = B2ndStore
    buffer_cls = cpu.Buffer

    locals().update({name: _not_applicable(name) for name in FREE_FORM})

    async def set(self, store, key, value):
        raise NotImplementedError(NOT_APPLICABLE)

    async def get(self, store, key):
        raise NotImplementedError(NOT_APPLICABLE)

    @pytest.fixture
    def anyio_backend(self):
        return "asyncio"

    @pytest.fixture
    def store_kwargs(self, tmp_path):
        path = tmp_path / "t.b2d"
        with blosc2.TreeStore(str(path), mode="w") as ts:
            ts["/a"] = blosc2.asarray(np.arange(100.0), chunks=(30,), blocks=(10,))
        return {"path": path, "mode": "a"}

    @pytest.fixture
    def store(self, open_kwargs):
        # A plain fixture: the suite's sync tests use it too, and anyio only drives
        # coroutine fixtures for coroutine tests.
        return sync(B2ndStore.open(**open_kwargs))

    @pytest.fixture
    def store_not_open(self, store_kwargs):
        return B2ndStore(**store_kwargs)

    def test_store_repr(self, store):
        assert repr(store) == f"B2ndStore({store.path!r}, mode='a')"

    def test_store_supports_writes(self, store):
        assert store.supports_writes

    def test_store_supports_listing(self, store):
        assert store.supports_listing

    # --- the suite's checks, on the keys a B2ndStore has ----------------------------------

    async def test_serializable_store_real_keys(self, store):
        again = pickle.loads(pickle.dumps(store))
        assert again == store and again.read_only == store.read_only
        chunk = await again.get("a/c/1", PROTO)
        assert chunk is not None
        await again.set("a/c/1", chunk)  # a writable copy writes
        assert (await store.get("a/c/1", PROTO)).to_bytes() == chunk.to_bytes()

    async def test_with_read_only_real_keys(self, store_kwargs):
        store = await B2ndStore.open(**{**store_kwargs, "read_only": True})
        chunk = await store.get("a/c/0", PROTO)
        with pytest.raises(ValueError, match="read-only mode"):
            await store.set("a/c/0", chunk)
        writer = store.with_read_only(read_only=False)
        assert not writer._is_open and not writer.read_only
        await writer.set("a/c/0", chunk)
        await writer.delete("a/c/0")
        reader = store.with_read_only(read_only=True)
        with pytest.raises(ValueError, match="read-only mode"):
            await reader.delete("a/c/0")

    @pytest.mark.parametrize(
        "byte_range",
        [None, RangeByteRequest(1, 4), OffsetByteRequest(1), SuffixByteRequest(1)],
    )
    async def test_get_real_keys(self, store, byte_range):
        # Keep the array alive: python-blosc2 crashes on a freed array's schunk.
        ref = blosc2.open(f"{store.path}/a.b2nd")
        whole = ref.schunk.get_chunk(2)
        got = await store.get("a/c/2", PROTO, byte_range)
        start, stop = {
            None: (0, None),
            RangeByteRequest(1, 4): (1, 4),
            OffsetByteRequest(1): (1, None),
            SuffixByteRequest(1): (len(whole) - 1, None),
        }[byte_range]
        assert got.to_bytes() == whole[start:stop]
        with pytest.raises((ValueError, TypeError), match=r"Unexpected byte_range, got.*"):
            await store.get("a/c/2", PROTO, byte_range=(0, 2))
        assert await store.get("a/c/9", PROTO) is None

    async def test_listing_real_keys(self, store):
        keys = [k async for k in store.list()]
        assert keys == ["zarr.json", "a/zarr.json", "a/c/0", "a/c/1", "a/c/2", "a/c/3"]
        assert [k async for k in store.list_prefix("a/c")] == keys[2:]
        assert sorted([k async for k in store.list_dir("")]) == ["a", "zarr.json"]
        assert sorted([k async for k in store.list_dir("a")]) == ["c", "zarr.json"]
        assert not await store.is_empty("") and await store.is_empty("b")
        sizes = [await store.getsize(k) for k in keys[2:]]
        assert await store.getsize_prefix("a/c") == sum(sizes)
        with pytest.raises(FileNotFoundError):
            await store.getsize("a/c/7")
