"""The zarr internals b2store relies on, checked on whichever zarr is installed (CI runs the
newest release and the oldest admitted one)."""

import asyncio

import numpy as np
import zarr
from zarr.core.metadata.v3 import ArrayV3Metadata

from b2store.integrations.zarr.compat import chunk_spec
from b2store.integrations.zarr.write import _Client


def test_the_chunk_spec_is_the_grids_chunk_with_the_arrays_type_and_fill():
    store = zarr.storage.MemoryStore()
    arr = zarr.create_array(store, shape=(10, 7), chunks=(4, 3), dtype="i2", fill_value=-5)
    meta = arr.metadata
    assert isinstance(meta, ArrayV3Metadata)
    spec = chunk_spec(meta)
    assert spec.shape == (4, 3)
    assert spec.dtype.to_native_dtype() == np.dtype("i2")
    assert int(spec.fill_value) == -5
    # The store's writer encodes and decodes a chunk through zarr's own pipeline with it.
    client = _Client(meta.to_dict())
    chunk = np.arange(12, dtype="i2").reshape(4, 3)
    data = asyncio.run(client.encode(chunk, (0, 0)))
    np.testing.assert_array_equal(asyncio.run(client.decode(data, (0, 0))), chunk)
