"""``.b2nd`` files as virtual chunks of an Icechunk repository: VirtualiZarr's ``B2ndParser``
output committed with ``vds.vz.to_icechunk``, then read back through
``xr.open_zarr(session.store)`` equal to the engine's reading of the same files, with the
repository and the files on the local filesystem and in an S3 bucket (moto's server).
"""

from __future__ import annotations

import numpy as np
import pytest

icechunk = pytest.importorskip(
    "icechunk",
    reason="Icechunk repositories (the test-virtual extra; icechunk 2 needs Python 3.12+)",
)
pytest.importorskip(
    "virtualizarr", reason="VirtualiZarr's parser protocol (the test-virtual extra)"
)
xr = pytest.importorskip("xarray")

import b2store  # noqa: E402
from b2store.integrations.virtual.references import B2ndParser  # noqa: E402

ENCODING = {"tas": {"chunks": (4, 5, 3), "blocks": (2, 5, 3)}}


def _datasets(n: int = 3) -> list:
    parts = []
    for k in range(n):
        data = np.random.default_rng(k).normal(280, 5, (8, 5, 6)).astype("f4")
        if k == 1:
            data[4:] = 0  # a chunk row of zeros: special chunks, no bytes to point at
        parts.append(xr.Dataset({"tas": (("time", "y", "x"), data, {"units": "K"})}))
    return parts


def _committed(urls, registry, storage, container, credentials):
    """The references of ``urls`` combined along time and committed; the repository."""
    from virtualizarr import open_virtual_dataset

    vds = [open_virtual_dataset(u, registry=registry, parser=B2ndParser()) for u in urls]
    combined = xr.concat(vds, dim="time", coords="minimal", compat="override")
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(container)
    access = icechunk.containers_credentials({container.url_prefix: credentials})
    repo = icechunk.Repository.create(storage, config, authorize_virtual_chunk_access=access)
    session = repo.writable_session("main")
    combined.vz.to_icechunk(session.store)
    session.commit("b2nd references")
    # Opened again, as a reader elsewhere would.
    return icechunk.Repository.open(storage, authorize_virtual_chunk_access=access)


def _check(repo, engine_ds) -> None:
    with xr.open_zarr(repo.readonly_session("main").store, consolidated=False) as ds:
        assert ds["tas"].attrs["units"] == "K" and ds["tas"].dims == ("time", "y", "x")
        xr.testing.assert_equal(ds["tas"].load(), engine_ds["tas"])
        np.testing.assert_array_equal(
            ds["tas"][6:13, 2, 1:4].values, engine_ds["tas"][6:13, 2, 1:4].values
        )


def test_b2nd_references_in_a_local_icechunk_repository(tmp_path):
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    urls = []
    for k, ds in enumerate(_datasets()):
        path = tmp_path / f"t{k}.b2nd"
        b2store.to_b2nd(ds, path, encoding=ENCODING)
        urls.append(path.as_uri())
    container = icechunk.VirtualChunkContainer(
        f"file://{tmp_path}/", icechunk.local_filesystem_store(str(tmp_path))
    )
    repo = _committed(
        urls,
        ObjectStoreRegistry({"file://": LocalStore()}),
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        container,
        icechunk.credentials.LocalFileSystemAccess,
    )
    engine_ds = xr.open_mfdataset(
        [u.removeprefix("file://") for u in urls], engine="b2nd", combine="nested",
        concat_dim="time", variable_name="tas",
    ).load()  # fmt: skip
    _check(repo, engine_ds)


def test_b2nd_references_in_an_icechunk_repository_in_a_bucket(request):
    pytest.importorskip(
        "s3fs", reason="s3:// URLs are written by fsspec's s3fs (the test-s3 extra)"
    )
    pytest.importorskip(
        "moto.server", reason="the local S3 API is moto's server (the test-s3 extra)"
    )
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import S3Store
    from s3server import KEY, REGION, SECRET

    server = request.getfixturevalue("s3")  # (the run's server: this test's `s3` is a dict)
    bucket = server.new_bucket()
    options = server.storage_options
    urls = []
    for k, ds in enumerate(_datasets()):
        url = f"s3://{bucket}/t{k}.b2nd"
        b2store.to_b2nd(ds, url, encoding=ENCODING, storage_options=options)
        urls.append(url)
    s3 = dict(endpoint_url=server.endpoint, allow_http=True, region=REGION)
    reader = S3Store(
        bucket,
        endpoint=server.endpoint,
        access_key_id=KEY,
        secret_access_key=SECRET,
        region=REGION,
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )
    container = icechunk.VirtualChunkContainer(
        f"s3://{bucket}/", icechunk.s3_store(**s3, s3_compatible=True, force_path_style=True)
    )
    storage = icechunk.s3_storage(
        bucket=bucket,
        prefix="repo",
        access_key_id=KEY,
        secret_access_key=SECRET,
        force_path_style=True,
        **s3,
    )
    repo = _committed(
        urls,
        ObjectStoreRegistry({f"s3://{bucket}": reader}),
        storage,
        container,
        icechunk.s3_credentials(access_key_id=KEY, secret_access_key=SECRET),
    )
    engine_ds = xr.open_mfdataset(
        urls, engine="b2nd", combine="nested", concat_dim="time", variable_name="tas",
        storage_options=options,
    ).load()  # fmt: skip
    _check(repo, engine_ds)
