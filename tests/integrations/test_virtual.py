"""kerchunk references to .b2nd files: several files combined along time, opened through
zarr and xarray, equal the arrays; special chunks inlined, stored chunks pointed at."""

from __future__ import annotations

import numpy as np
import pytest

fsspec = pytest.importorskip("fsspec")
zarr = pytest.importorskip("zarr")
blosc2 = pytest.importorskip("blosc2")

from b2store.integrations.virtual.references import combine_refs, kerchunk_refs  # noqa: E402


def _files(tmp_path, n=3):
    parts, paths = [], []
    for k in range(n):
        data = np.random.default_rng(k).random((8, 5, 6))
        if k == 1:
            data[:4] = 0  # a zeros special chunk row
        path = tmp_path / f"t{k}.b2nd"
        arr = blosc2.asarray(data, urlpath=str(path), mode="w", chunks=(4, 5, 3), blocks=(2, 5, 3))
        arr.vlmeta["_ARRAY_DIMENSIONS"] = ["time", "y", "x"]
        arr.vlmeta["units"] = "K"
        parts.append(data)
        paths.append(path)
    return paths, np.concatenate(parts)


def _mapper(refs):
    return fsspec.filesystem("reference", fo=refs).get_mapper("")


def test_combined_along_time_through_zarr_and_xarray(tmp_path):
    xr = pytest.importorskip("xarray")
    paths, expected = _files(tmp_path)
    refs = combine_refs(paths, name="temp")
    z = zarr.open_group(_mapper(refs), mode="r", zarr_format=2)
    np.testing.assert_array_equal(z["temp"][...], expected)
    np.testing.assert_array_equal(z["temp"][9:13, 2, 1:4], expected[9:13, 2, 1:4])
    ds = xr.open_dataset(_mapper(refs), engine="zarr", consolidated=False, zarr_format=2)
    assert ds["temp"].dims == ("time", "y", "x") and ds["temp"].attrs["units"] == "K"
    np.testing.assert_array_equal(ds["temp"].values, expected)


def test_references_stored_as_parquet(tmp_path):
    """The same references in kerchunk's Parquet form (several record files), inlined
    special chunks among them, read back through fsspec's reference filesystem."""
    xr = pytest.importorskip("xarray")
    pytest.importorskip(
        "kerchunk", reason="kerchunk writes Parquet references (the test-virtual extra)"
    )
    pytest.importorskip("fastparquet", reason="kerchunk's Parquet engine (the test-virtual extra)")
    from b2store.integrations.virtual.references import refs_to_parquet

    paths, expected = _files(tmp_path)
    refs = combine_refs(paths, name="temp")
    root = refs_to_parquet(refs, tmp_path / "refs.parq", record_size=4)
    assert len(list((tmp_path / "refs.parq").rglob("*.parq"))) >= 3  # 18 chunks, 4 a file
    fs = fsspec.filesystem("reference", fo=root, remote_protocol="file")
    ds = xr.open_dataset(fs.get_mapper(""), engine="zarr", consolidated=False, zarr_format=2)
    assert ds["temp"].dims == ("time", "y", "x") and ds["temp"].attrs["units"] == "K"
    np.testing.assert_array_equal(ds["temp"].values, expected)
    np.testing.assert_array_equal(ds["temp"][9:13, 2, 1:4].values, expected[9:13, 2, 1:4])


def test_references_point_into_the_files(tmp_path):
    paths, _ = _files(tmp_path, 2)
    refs = kerchunk_refs(paths[0])["refs"]
    ref = blosc2.open(str(paths[0]))
    url, offset, length = refs["t0/1.0.1"]
    assert url == str(paths[0])
    with open(url, "rb") as fh:
        fh.seek(offset)
        assert fh.read(length) == ref.schunk.get_chunk(3)
    inlined = combine_refs(paths, name="t")["refs"]["t/2.0.0"]  # file 1's zeros chunk
    assert isinstance(inlined, str) and inlined.startswith("base64:")


def test_mismatched_files_are_refused(tmp_path):
    a = tmp_path / "a.b2nd"
    b = tmp_path / "b.b2nd"
    blosc2.asarray(np.zeros((6, 4)), urlpath=str(a), mode="w", chunks=(4, 4), blocks=(2, 2))
    blosc2.asarray(np.zeros((6, 4)), urlpath=str(b), mode="w", chunks=(4, 4), blocks=(2, 2))
    with pytest.raises(ValueError, match="whole number of chunks"):
        combine_refs([a, b])


def test_nan_fill_value_becomes_the_v2_fill_value(tmp_path):
    import warnings

    xr = pytest.importorskip("xarray")
    import b2store

    parts = []
    for k in range(2):
        data = np.random.default_rng(k).random((4, 3)).astype("f4")
        data[k, 1] = np.nan
        ds = xr.Dataset({"v": (("time", "x"), data, {"units": "K"})})
        b2store.to_b2nd(ds, tmp_path / f"v{k}.b2nd", encoding={"v": {"chunks": (2, 3)}})
        parts.append(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing left out as not JSON-safe
        refs = combine_refs([tmp_path / "v0.b2nd", tmp_path / "v1.b2nd"], name="v")
    zarray = __import__("json").loads(refs["refs"]["v/.zarray"])
    assert zarray["fill_value"] == "NaN"
    ds = xr.open_dataset(_mapper(refs), engine="zarr", consolidated=False, zarr_format=2)
    assert "_xarray" not in ds.v.attrs and ds.v.attrs["units"] == "K"
    np.testing.assert_array_equal(ds.v.values, np.concatenate(parts))


# --- VirtualiZarr ----------------------------------------------------------------------------


def _vz():
    pytest.importorskip("virtualizarr", reason="VirtualiZarr (the test-virtual extra)")
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset

    return open_virtual_dataset, ObjectStoreRegistry({"file://": LocalStore()})


def _to_b2nd_files(tmp_path, n=3, special=None):
    xr = pytest.importorskip("xarray")
    import b2store

    parts, urls = [], []
    for k in range(n):
        data = np.random.default_rng(k).random((8, 5, 6)).astype("f4")
        if k == 1:
            data[:4] = 0 if special is None else special  # a special chunk row
        ds = xr.Dataset({"tas": (("time", "y", "x"), data, {"units": "K"})})
        path = tmp_path / f"t{k}.b2nd"
        b2store.to_b2nd(ds, path, encoding={"tas": {"chunks": (4, 5, 3), "blocks": (2, 5, 3)}})
        parts.append(data)
        urls.append(path.as_uri())
    return urls, np.concatenate(parts)


def test_virtualizarr_parser_combined_along_time(tmp_path):
    xr = pytest.importorskip("xarray")
    open_virtual_dataset, registry = _vz()
    from b2store.integrations.virtual.references import B2ndParser, manifest_store

    urls, expected = _to_b2nd_files(tmp_path)
    vds = [open_virtual_dataset(u, registry=registry, parser=B2ndParser()) for u in urls]
    assert vds[0]["tas"].dims == ("time", "y", "x")
    manifest = vds[0]["tas"].data.manifest.dict()
    ref = blosc2.open(urls[0].removeprefix("file://"))
    entry = manifest["1.0.1"]
    with open(entry["path"].removeprefix("file://"), "rb") as fh:
        fh.seek(entry["offset"])
        assert fh.read(entry["length"]) == ref.schunk.get_chunk(3)
    # File 1's zeros row is a special chunk: left out, read as the fill value (zero).
    assert "2.0.0" not in vds[1]["tas"].data.manifest.dict()
    combined = xr.concat(vds, dim="time", coords="minimal", compat="override")
    ds = xr.open_zarr(manifest_store(combined, registry), consolidated=False)
    assert ds["tas"].attrs["units"] == "K" and ds["tas"].dims == ("time", "y", "x")
    np.testing.assert_array_equal(ds["tas"].values, expected)
    np.testing.assert_array_equal(ds["tas"][9:13, 2, 1:4].values, expected[9:13, 2, 1:4])


def test_virtualizarr_parser_special_chunks_need_a_sidecar(tmp_path):
    # Index-special chunks (zeros here) whose value is not the array's fill value (1.0, as
    # a Zarr client gave it) cannot be left out of a manifest, nor inlined in it.
    xr = pytest.importorskip("xarray")
    open_virtual_dataset, registry = _vz()
    import b2store
    from b2store.integrations.virtual.references import B2ndParser, manifest_store

    urls, parts = [], []
    for k in range(2):
        path = tmp_path / f"z{k}.b2nd"
        arr = blosc2.zeros((8, 6), dtype="f8", urlpath=str(path), mode="w", chunks=(4, 3))
        arr[4:, :3] = k + 0.5  # one stored chunk; three zero chunks stored as index entries
        arr.vlmeta["_zarr_fill_value"] = 1.0
        arr.vlmeta["_ARRAY_DIMENSIONS"] = ["time", "x"]
        parts.append(arr[...])
        urls.append(path.as_uri())
    assert b2store.open(tmp_path / "z0.b2nd").schunk.chunk_span(0) is None
    with pytest.raises(b2store.UnsupportedError, match="sidecar_dir"):
        open_virtual_dataset(urls[0], registry=registry, parser=B2ndParser())
    parser = B2ndParser(name="z", sidecar_dir=tmp_path / "side")
    vds = [open_virtual_dataset(u, registry=registry, parser=parser) for u in urls]
    sidecars = list((tmp_path / "side").iterdir())
    assert len(sidecars) == 1 and sidecars[0].stat().st_size == 32  # one zeros chunk, shared
    combined = xr.concat(vds, dim="time", coords="minimal", compat="override")
    ds = xr.open_zarr(manifest_store(combined, registry), consolidated=False)
    np.testing.assert_array_equal(ds["z"].values, np.concatenate(parts))


def test_virtualizarr_parser_reads_remote_frames_by_ranges(tmp_path):
    pytest.importorskip("virtualizarr", reason="VirtualiZarr (the test-virtual extra)")
    from http_server import serve_directory
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import HTTPStore
    from virtualizarr import open_virtual_dataset

    from b2store.integrations.virtual.references import B2ndParser, manifest_store

    xr = pytest.importorskip("xarray")
    urls, expected = _to_b2nd_files(tmp_path, 1)
    size = (tmp_path / "t0.b2nd").stat().st_size
    with serve_directory(tmp_path) as (url, served):
        store = HTTPStore.from_url(url, client_options={"allow_http": True})
        registry = ObjectStoreRegistry({url: store})
        vds = open_virtual_dataset(f"{url}/t0.b2nd", registry=registry, parser=B2ndParser())
        manifest = vds["tas"].data.manifest.dict()
        assert all(e["path"] == f"{url}/t0.b2nd" for e in manifest.values())
        assert served.bytes < size  # header, index, trailer and chunk headers only
        assert all(r is not None for m, _, r in served.requests if m == "GET")
        ds = xr.open_zarr(manifest_store(vds, registry), consolidated=False)
        np.testing.assert_array_equal(ds["tas"].values, expected)


@pytest.mark.parametrize("zero_rows", [slice(4, 8), slice(0, 8)], ids=["last-chunks", "all"])
def test_virtualizarr_parser_keeps_the_grid_when_fill_chunks_are_left_out(tmp_path, zero_rows):
    # Chunks holding the fill value are left out of the manifest: when they are the last ones
    # along an axis, or all of them, the grid must still be the array's, not the keys'.
    xr = pytest.importorskip("xarray")
    open_virtual_dataset, registry = _vz()
    import b2store
    from b2store.integrations.virtual.references import B2ndParser, manifest_store

    data = np.random.default_rng(7).random((8, 5, 6)).astype("f4")
    data[zero_rows] = 0
    path = tmp_path / "z.b2nd"
    ds = xr.Dataset({"tas": (("time", "y", "x"), data)})
    b2store.to_b2nd(ds, path, encoding={"tas": {"chunks": (4, 5, 3), "blocks": (2, 5, 3)}})
    vds = open_virtual_dataset(path.as_uri(), registry=registry, parser=B2ndParser())
    assert vds["tas"].data.manifest.shape_chunk_grid == (2, 1, 2)
    got = xr.open_zarr(manifest_store(vds, registry), consolidated=False)["tas"].values
    np.testing.assert_array_equal(got, data)
