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

from zarr.abc.store import (  # noqa: E402
    OffsetByteRequest,
    RangeByteRequest,
    SuffixByteRequest,
)
from zarr.core.buffer import cpu, default_buffer_prototype  # noqa: E402
from zarr.core.sync import sync  # noqa: E402
from zarr.testing.store import StoreTests  # noqa: E402

from b2store.integrations.zarr.store import B2ndStore  # noqa: E402

PROTO = default_buffer_prototype()
# The suite's tests and fixtures are coroutines: anyio's pytest plugin runs them.
# Under zarr's default codec pipeline and its fused one (tests/integrations/conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("zarr_pipeline")]
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
    # zarr's sync store surface (SupportsSyncStore): the same, through get_sync/set_sync/
    # delete_sync; their real-key twins are the *_sync_real_keys tests below.
    "test_get_sync",
    "test_set_sync",
    "test_delete_sync",
    "test_sync_async_set_get_parity",
    "test_delete_sync_visible_to_async_get",
    "test_get_sync_byte_range_parity",
]
# Only what this zarr's suite has: a name it lacks would show as a skip of nothing.
FREE_FORM = [name for name in FREE_FORM if hasattr(StoreTests, name)]


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
        with pytest.raises(FileNotFoundError, match="a/c/7"):
            await store.getsize("a/c/7")

    # --- the sync store surface (zarr's SupportsSyncStore), on the keys it has ----------------

    def test_store_has_the_whole_sync_surface(self, store):
        # All or nothing (zarr's fused pipeline mixes sync reads, writes and deletes). The
        # protocol is structural; zarr before 3.2 does not name it, the methods are the same.
        SupportsSyncStore = getattr(zarr.abc.store, "SupportsSyncStore", None)
        if SupportsSyncStore is not None:
            assert isinstance(store, SupportsSyncStore)
        for name in ("get_sync", "set_sync", "delete_sync"):
            assert callable(getattr(store, name))
        assert getattr(store, "_supports_sync_io", True) is True  # a local store

    @pytest.mark.parametrize(
        "byte_range",
        [
            None,
            RangeByteRequest(1, 4),
            OffsetByteRequest(1),
            SuffixByteRequest(1),
            RangeByteRequest(10**6, 10**6 + 8),  # past the end: empty, as get says
        ],
    )
    @pytest.mark.parametrize("key", ["a/c/2", "a/zarr.json", "zarr.json", "a/c/9", "b/c/0"])
    async def test_get_sync_real_keys(self, store, key, byte_range):
        # What get_sync returns is what get returns, for every kind of key.
        sync_result = store.get_sync(key, byte_range=byte_range)
        async_result = await store.get(key, PROTO, byte_range)
        assert (sync_result is None) == (async_result is None)
        if async_result is not None:
            assert sync_result.to_bytes() == async_result.to_bytes()
        assert (sync_result is None) == (key in ("a/c/9", "b/c/0"))
        with pytest.raises((ValueError, TypeError), match=r"Unexpected byte_range, got.*"):
            store.get_sync(key, byte_range=(0, 2))

    @pytest.mark.parametrize("direction", ["set_async_get_sync", "set_sync_get_async"])
    async def test_sync_async_set_get_parity_real_keys(self, store, direction):
        chunk = await store.get("a/c/1", PROTO)
        assert chunk is not None
        if direction == "set_async_get_sync":
            await store.set("a/c/0", chunk)
            got = store.get_sync("a/c/0")
        else:
            store.set_sync("a/c/0", chunk)
            got = await store.get("a/c/0", PROTO)
        assert got.to_bytes() == chunk.to_bytes()
        np.testing.assert_array_equal(
            zarr.open_array(store, path="a", mode="r")[:30], np.arange(30.0, 60.0)
        )

    async def test_delete_sync_real_keys(self, store):
        # A deleted chunk is the fill value: what async delete leaves, and zarr reads zeros.
        store.delete_sync("a/c/1")
        after_sync = store.get_sync("a/c/1").to_bytes()
        await store.delete("a/c/2")
        assert (await store.get("a/c/2", PROTO)).to_bytes() == after_sync
        values = zarr.open_array(store, path="a", mode="r")[...]
        np.testing.assert_array_equal(values[30:90], 0.0)
        np.testing.assert_array_equal(values[:30], np.arange(30.0))
        store.delete_sync("a/c/9")  # past the grid: nothing there, no error
        store.delete_sync("nonexistent")

    def test_set_sync_checks_like_set(self, store_kwargs, store):
        chunk = store.get_sync("a/c/0")
        with pytest.raises(TypeError, match="expected a zarr Buffer, got bytes"):
            store.set_sync("a/c/0", chunk.to_bytes())
        with pytest.raises(KeyError, match="neither a node's zarr.json nor a chunk"):
            store.set_sync("foo", chunk)
        reader = B2ndStore(**{**store_kwargs, "mode": "r"})
        with pytest.raises(ValueError, match="read-only mode"):
            reader.set_sync("a/c/0", chunk)
        with pytest.raises(ValueError, match="read-only mode"):
            reader.delete_sync("a/c/0")

    def test_sync_methods_on_a_loop_thread(self, store):
        # A *_sync call made inside running async code works (zarr's own calls come from
        # worker threads, a user's may not).
        async def inside():
            chunk = store.get_sync("a/c/3")
            store.set_sync("a/c/3", chunk)
            store.delete_sync("a/c/3")
            return store.get_sync("a/c/3")

        assert sync(inside()) is not None
