"""The b2nd engine reads xarray-blosc2's datasets as xarray-blosc2's own reader does:
directories, ``.b2z`` zips (their ``dataset.json`` deflated) and lone frames, with dimension
names, coordinates, attributes, global attributes and its packings (``geogrid``, ``lossy=``)
decoded to the values its own decoders give; what it does not understand is refused, naming
it, and its sealed blob is refused. ``guess_can_open`` leaves the layout to xarray-blosc2's
engine where that is installed.

Layouts are built here by hand from the conventions (see
``b2store.integrations.xarray.blosc2_layout``) and, where xarray-blosc2 is installed, written
by it and compared with its reader."""

import json
import zipfile

import numpy as np
import pytest

xr = pytest.importorskip("xarray")

import b2store  # noqa: E402
from b2store.integrations.xarray import backend  # noqa: E402
from b2store.integrations.xarray.backend import B2ndBackendEntrypoint  # noqa: E402
from b2store.integrations.xarray.foreign import ForeignLayoutError  # noqa: E402
from b2store.integrations.xarray.to_b2nd import to_b2nd  # noqa: E402

ENGINE = B2ndBackendEntrypoint()
LINEAGE = json.dumps({"history": ["saved by xarray_blosc2 1.7.1"]})
# What xarray-blosc2 1.7.1 writes: geogrid packs floats as int16 with its parameters in a
# JSON string.
PACKED = json.dumps({"scale_factor": 0.01, "add_offset": 280.0, "_geogrid_row_diff": True})


def xb2_variable(path, contiguous=True, **extra):
    """A frame as xarray-blosc2 writes a data variable: int16 geogrid values, its vlmeta."""
    vlmeta = {"dims": ["lat", "lon"], "var": "t", "units": "K", "attrs": PACKED, **extra}
    data = np.arange(12, dtype="i2").reshape(3, 4)
    # (mode "w": the refusal cases write a broken frame over a good one)
    b2store.asarray(data, str(path), contiguous=contiguous, vlmeta=vlmeta, mode="w")


def xb2_coord(path, name="lat", n=3):
    vlmeta = {"dims": [name], "is_coord": True, "coord_name": name, "lineage": LINEAGE}
    b2store.asarray(np.linspace(-10.0, 10.0, n), str(path), vlmeta=vlmeta, mode="w")


def manifest():
    return json.dumps(
        {
            "data_vars": ["t"],
            "coords": ["lat", "lon"],
            "dims": {"lat": 3, "lon": 4},
            "attrs": {"Conventions": "CF-1.11"},
        }
    )


def xb2_directory(root, *, with_manifest=True, with_coords=True, variable=True):
    root.mkdir()
    if variable:
        xb2_variable(root / "t.b2nd")
    else:
        b2store.asarray(np.zeros((3, 4)), str(root / "t.b2nd"))
    if with_coords:
        xb2_coord(root / "_coord_lat.b2nd")
        xb2_coord(root / "_coord_lon.b2nd", "lon", 4)
    if with_manifest:
        (root / "dataset.json").write_text(manifest())
    return root


def xb2_zip(tmp_path, name, *, with_manifest=True, with_coords=True, group=""):
    src = xb2_directory(tmp_path / "src", with_manifest=with_manifest, with_coords=with_coords)
    out = tmp_path / name
    with zipfile.ZipFile(out, "w") as zf:
        for p in sorted(src.iterdir()):
            # As xarray-blosc2 writes it: frames stored, the manifest deflated.
            kind = zipfile.ZIP_DEFLATED if p.suffix == ".json" else zipfile.ZIP_STORED
            zf.write(p, group + p.name, compress_type=kind)
    return out


def _decoded_t():
    # The hand-made t: int16 rows differenced, scale 0.01, offset 280, float32 by default.
    rows = np.cumsum(np.arange(12, dtype="i2").reshape(3, 4), axis=-1, dtype="i2")
    return (rows.astype("f8") * 0.01 + 280.0).astype("f4")


LAYOUTS = {
    "directory": lambda t: xb2_directory(t / "ds"),
    "directory.b2d": lambda t: xb2_directory(t / "ds.b2d"),
    "directory, manifest only": lambda t: xb2_directory(t / "ds", with_coords=False),
    "directory, _coord_ frames only": lambda t: xb2_directory(t / "ds", with_manifest=False),
    "directory, variable frames only": lambda t: xb2_directory(
        t / "ds", with_manifest=False, with_coords=False
    ),
    "b2z": lambda t: xb2_zip(t, "ds.b2z"),
    "b2z, _coord_ members only": lambda t: xb2_zip(t, "ds.b2z", with_manifest=False),
    "b2z, manifest only": lambda t: xb2_zip(t, "ds.b2z", with_coords=False),
    "zip without suffix": lambda t: xb2_zip(t, "ds"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_hand_made_layouts_open_with_their_conventions(tmp_path, layout):
    path = str(LAYOUTS[layout](tmp_path))
    ds = xr.open_dataset(path, engine="b2nd")
    assert ds["t"].dims == ("lat", "lon") and ds["t"].dtype == np.float32
    np.testing.assert_array_equal(ds["t"].values, _decoded_t())
    # The packing's keys are gone, the others kept; units from the frame's own key.
    assert ds["t"].attrs == {"units": "K"}
    if "manifest" in layout or layout in ("directory", "directory.b2d", "b2z"):
        assert ds.attrs == {"Conventions": "CF-1.11"}
    if "_coord_" in layout or layout in ("directory", "directory.b2d", "b2z"):
        assert set(ds.coords) == {"lat", "lon"} and list(ds.data_vars) == ["t"]
        np.testing.assert_array_equal(ds["lon"].values, np.linspace(-10.0, 10.0, 4))
        assert ds.lat.attrs == {}  # lineage is bookkeeping, not an attribute
    tree = xr.open_datatree(path, engine="b2nd")
    xr.testing.assert_identical(tree.to_dataset().load(), ds.load())


def test_plain_frames_with_a_manifest_open_as_xarray_blosc2_names_them(tmp_path):
    root = xb2_directory(tmp_path / "ds", with_coords=False, variable=False)
    ds = xr.open_dataset(root, engine="b2nd")
    assert list(ds.data_vars) == ["t"] and ds.t.dims == ("dim_0", "dim_1")


def test_a_group_in_a_zip_is_refused_as_a_nested_dataset(tmp_path):
    path = xb2_zip(tmp_path, "ds.b2z", group="g1/")
    with pytest.raises(b2store.UnsupportedError, match="nested dataset.*g1"):
        xr.open_dataset(path, engine="b2nd")


@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("marker", ["var", "is_coord", "coord_name"])
def test_a_lone_frame_opens_with_its_dims_and_name(tmp_path, contiguous, marker):
    path = tmp_path / "t.b2nd"
    vlmeta = {"dims": ["lat", "lon"], marker: True if marker == "is_coord" else "v"}
    b2store.asarray(
        np.arange(12, dtype="i2").reshape(3, 4), str(path), contiguous=contiguous, vlmeta=vlmeta
    )
    ds = xr.open_dataset(path, engine="b2nd")
    name = "v" if marker == "var" else "t"  # xarray-blosc2 names a lone frame by var, else file
    assert list(ds.variables) == [name] and ds[name].dims == ("lat", "lon")
    np.testing.assert_array_equal(ds[name].values, np.arange(12).reshape(3, 4))


def test_the_error_pickles(tmp_path):
    import pickle

    err = ForeignLayoutError("/data/ds", "an xarray-blosc2 sealed (encrypted) dataset blob")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.marker == err.marker and back.ident == "/data/ds"
    assert isinstance(back, b2store.UnsupportedError) and isinstance(back, NotImplementedError)


def test_a_sealed_blob_is_declined_and_refused(tmp_path, monkeypatch):
    path = tmp_path / "ds.b2z"
    path.write_bytes(b"B2ENCBLB\x02" + bytes(64))
    monkeypatch.setattr(backend, "owner_engine_installed", lambda: False)
    assert not ENGINE.guess_can_open(str(path))
    with pytest.raises(ForeignLayoutError, match="sealed"):
        xr.open_dataset(path, engine="b2nd")
    with pytest.raises(ForeignLayoutError, match="sealed"):
        xr.open_datatree(path, engine="b2nd")


def test_b2store_files_that_share_a_marker_name_still_open(tmp_path):
    # A tree (it has embed.b2e) with a variable called _coord_x, a frame whose vlmeta has a
    # plain "dims" attribute, and one with "dims" and "var" next to _ARRAY_DIMENSIONS.
    ds = xr.Dataset({"_coord_x": ("x", [1.0, 2.0]), "v": ("x", [3.0, 4.0])})
    tree = to_b2nd(ds, tmp_path / "t.b2d")
    assert ENGINE.guess_can_open(tree)
    xr.testing.assert_identical(xr.open_dataset(tree, engine="b2nd").load(), ds)
    one = xr.Dataset({"v": ("x", [1, 2], {"dims": ["a"], "var": "v"})})
    path = to_b2nd(one, tmp_path / "v.b2nd")
    assert ENGINE.guess_can_open(path)
    xr.testing.assert_identical(xr.open_dataset(path, engine="b2nd").load(), one)
    groups = xr.DataTree.from_dict({"/dataset.json": xr.Dataset({"v": ("x", [1.0])})})
    for suffix in (".b2d", ".b2z"):
        path = to_b2nd(groups, tmp_path / f"g{suffix}")
        assert ENGINE.guess_can_open(path)
        xr.testing.assert_identical(xr.open_datatree(path, engine="b2nd").load(), groups)
    plain = tmp_path / "p.b2nd"
    b2store.asarray(np.arange(3), str(plain), vlmeta={"dims": ["x"]})
    assert ENGINE.guess_can_open(str(plain))
    assert xr.open_dataset(plain, engine="b2nd")["data"].dims == ("dim_0",)


# --- refusals: what is not understood is named --------------------------------------------------


def _with_manifest_key(root, **keys):
    manifest = json.loads((root / "dataset.json").read_text())
    manifest.update(keys)
    (root / "dataset.json").write_text(json.dumps(manifest))


REFUSALS = {
    "zstd dictionary": (
        lambda r: _with_manifest_key(r, zstd_dict={"file": "_zstd_dict.bin"}),
        b2store.UnsupportedError,
        "zstd_dict",
    ),
    "zstd files": (
        lambda r: (r / "_zstd_dict.bin").write_bytes(b"x"),
        b2store.UnsupportedError,
        "_zstd_dict.bin",
    ),
    "shards": (
        lambda r: _with_manifest_key(r, sharding="isoweek"),
        b2store.UnsupportedError,
        "sharding",
    ),
    "unknown manifest key": (
        lambda r: _with_manifest_key(r, quantize={"t": 3}),
        b2store.UnsupportedError,
        "quantize",
    ),
    "unknown vlmeta key": (
        lambda r: xb2_variable(r / "t.b2nd", ufloat_source="t"),
        b2store.UnsupportedError,
        "ufloat_source",
    ),
    "unknown sidecar": (
        lambda r: b2store.asarray(np.arange(2), str(r / "_index.b2nd")),
        b2store.UnsupportedError,
        "_index.b2nd",
    ),
    "unknown file": (
        lambda r: (r / "notes.txt").write_text("x"),
        b2store.UnsupportedError,
        "notes.txt",
    ),
    "nested dataset": (
        lambda r: xb2_directory(r / "sub"),
        b2store.UnsupportedError,
        "nested",
    ),
    "unknown geogrid parameter": (
        lambda r: _with_manifest_key(
            r, geogrid={"t": {"scale_factor": 0.1, "add_offset": 0, "bits": 12}}
        ),
        b2store.UnsupportedError,
        "bits",
    ),
    "geogrid of another stored type": (
        lambda r: _with_manifest_key(
            r, geogrid={"t": {"scale_factor": 0.1, "add_offset": 0, "target_dtype": "int8"}}
        ),
        b2store.FormatError,
        "target_dtype",
    ),
    "a packing to integers": (
        lambda r: xb2_variable(
            r / "t.b2nd", attrs=json.dumps({"scale_factor": 2, "_OriginalType": "int64"})
        ),
        b2store.UnsupportedError,
        "int64",
    ),
    "attrs that are no JSON": (
        lambda r: xb2_variable(r / "t.b2nd", attrs="{'units': 'K'}"),
        b2store.FormatError,
        "vlmeta 'attrs'",
    ),
    "manifest that is no JSON object": (
        lambda r: (r / "dataset.json").write_text("[1, 2]"),
        b2store.FormatError,
        "dataset.json",
    ),
    "dims of another length": (
        lambda r: xb2_variable(r / "t.b2nd", dims=["lat"]),
        b2store.FormatError,
        "vlmeta 'dims'",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
@pytest.mark.parametrize("container", ["directory", "b2z"])
def test_what_is_not_understood_is_refused_by_name(tmp_path, case, container):
    spoil, error, match = REFUSALS[case]
    root = xb2_directory(tmp_path / "ds")
    spoil(root)
    path = root
    if container == "b2z":
        path = tmp_path / "ds.b2z"
        with zipfile.ZipFile(path, "w") as zf:
            for p in sorted(root.rglob("*")):
                if p.is_file():
                    kind = zipfile.ZIP_STORED if p.suffix == ".b2nd" else zipfile.ZIP_DEFLATED
                    zf.write(p, p.relative_to(root).as_posix(), compress_type=kind)
    with pytest.raises(error, match=match):
        xr.open_dataset(path, engine="b2nd")


def test_a_deflated_manifest_is_read_within_the_member_limit(tmp_path):
    path = xb2_zip(tmp_path, "ds.b2z")
    size = zipfile.ZipFile(path).getinfo("dataset.json").file_size
    limits = b2store.Limits(max_member_nbytes=size)
    assert xr.open_dataset(path, engine="b2nd", limits=limits).attrs["Conventions"] == "CF-1.11"
    with pytest.raises(b2store.LimitError, match="'dataset.json' bytes.*max_member_nbytes"):
        xr.open_dataset(path, engine="b2nd", limits=limits.replace(max_member_nbytes=size - 1))


# --- guess_can_open -------------------------------------------------------------------------


def test_the_layout_is_claimed_only_without_xarray_blosc2s_engine(tmp_path, monkeypatch):
    root = xb2_directory(tmp_path / "ds")
    frame = root / "t.b2nd"
    monkeypatch.setattr(backend, "owner_engine_installed", lambda: True)
    assert not ENGINE.guess_can_open(str(root)) and not ENGINE.guess_can_open(str(frame))
    monkeypatch.setattr(backend, "owner_engine_installed", lambda: False)
    assert ENGINE.guess_can_open(str(root)) and ENGINE.guess_can_open(str(frame))
    # Asked first (xarray orders engines alphabetically after its netCDF ones), b2nd reads it.
    assert xr.backends.plugins.guess_engine(str(root)) == "b2nd"
    xr.testing.assert_identical(xr.open_dataset(root), xr.open_dataset(root, engine="b2nd"))


# --- files xarray-blosc2 writes itself --------------------------------------------------------


@pytest.fixture
def xb2():
    return pytest.importorskip(
        "xarray_blosc2", reason="xarray-blosc2 is not installed (pip install xarray-blosc2)"
    )


def _dataset():
    """Several variables 1-d to 3-d, smooth enough for geogrid's row differences, index
    coordinates, a coordinate of strings, attributes of several types."""
    x = np.linspace(0.0, 3.0, 40)
    t = 280 + 10 * np.sin(x)[None, None, :] * np.cos(x[:6])[None, :, None]
    t = (t + np.arange(3)[:, None, None]).astype("f4")
    rng = np.random.default_rng(0)
    return xr.Dataset(
        {
            "t": (("time", "lat", "lon"), t, {"units": "K", "long_name": "air", "n": 3, "w": 0.5}),
            "p": (("lat", "lon"), rng.normal(1000, 5, (6, 40)), {"ok": True, "src": "model"}),
            "n": (("lon",), np.arange(40, dtype="i4")),
        },
        coords={
            "time": np.arange(3.0),
            "lat": np.linspace(-10, 10, 6),
            "lon": x,
            "station": ("lat", [f"s{i}" for i in range(6)]),
        },
        attrs={"title": "x", "version": 2, "scale": 1.5},
    )


SAVES = {
    "plain": {},
    "geogrid": {"preset": "geogrid"},
    "lossy": {"lossy": {"p": {"max_error": 0.01}, "t": {"max_error": 0.001}}},
}


def _save(xb2, tmp_path, kind, frozen):
    root = xb2.save_dataset(_dataset(), tmp_path / "ds", **SAVES[kind])
    return xb2.freeze_dataset(root, keep_dir=True) if frozen else root


def _reference(xb2, tmp_path, kind):
    """xarray-blosc2's own reading, its packings decoded by its own decoders: its directory
    reader decodes geogrid (its zip reader serves it packed), ``unpack_variable`` lossy."""
    ref = xr.open_dataset(tmp_path / "ds", engine="blosc2").load()
    if kind == "lossy":
        for name in SAVES["lossy"]["lossy"]:
            ref[name] = xb2.unpack_variable(ref[name])
    return ref


@pytest.mark.parametrize("frozen", [False, True], ids=["directory", "b2z"])
@pytest.mark.parametrize("kind", list(SAVES))
def test_xarray_blosc2_datasets_open_as_its_reader_decodes_them(tmp_path, xb2, kind, frozen):
    path = _save(xb2, tmp_path, kind, frozen)
    ours = xr.open_dataset(path, engine="b2nd")
    assert ours["t"].dtype == np.float32 and ours["p"].dtype == np.float64
    ours = ours.load()
    if kind == "plain" or (kind == "geogrid" and not frozen):
        xr.testing.assert_identical(ours, xr.open_dataset(path, engine="blosc2").load())
    xr.testing.assert_identical(ours, _reference(xb2, tmp_path, kind))
    assert ours["station"].dtype.kind == "U" and "station" in ours.coords
    assert ours.t.attrs["n"] == 3 and ours.p.attrs["ok"] is True
    assert ours.attrs["version"] == 2 and json.loads(ours.attrs["lineage"])["history"]


@pytest.mark.parametrize("frozen", [False, True], ids=["directory", "b2z"])
@pytest.mark.parametrize("kind", ["geogrid", "lossy"])
def test_packed_values_equal_xarray_blosc2s_decoders_exactly(tmp_path, xb2, kind, frozen):
    path = _save(xb2, tmp_path, kind, frozen)
    manifest = json.loads((tmp_path / "ds" / "dataset.json").read_text())
    raw = xr.open_dataset(path, engine="blosc2")
    ours = xr.open_dataset(path, engine="b2nd")
    for name in ("t", "p"):
        packed = raw[name]
        assert packed.dtype.kind == "i" or (kind == "geogrid" and not frozen)
        if kind == "geogrid":
            stored = b2store.open(str(tmp_path / "ds" / f"{name}.b2nd"))[...]
            expected = xb2.geogrid_decode(stored, manifest["geogrid"][name])
        else:
            expected = xb2.unpack_variable(packed).values
        got = ours[name].values
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    if kind == "geogrid":
        assert manifest["geogrid"]["t"]["row_diff"] is True  # the differenced path is tested


@pytest.mark.parametrize("frozen", [False, True], ids=["directory", "b2z"])
@pytest.mark.parametrize("kind", list(SAVES))
def test_dask_chunks_and_partial_reads_give_the_same_values(tmp_path, xb2, kind, frozen):
    path = _save(xb2, tmp_path, kind, frozen)
    whole = xr.open_dataset(path, engine="b2nd").load()
    lazy = xr.open_dataset(path, engine="b2nd", chunks={})
    assert lazy["t"].chunks is not None
    xr.testing.assert_identical(lazy.compute(), whole)
    lazy = xr.open_dataset(path, engine="b2nd", chunks={"lon": 7, "lat": 4})
    xr.testing.assert_identical(lazy.compute(), whole)
    lazy = xr.open_dataset(path, engine="b2nd")
    for key in (
        {"lon": slice(5, 17)},
        {"lon": 13},
        {"lon": [30, 2, 2, 39]},
        {"lon": slice(None, None, -3), "lat": 1},
        {"time": [2, 0], "lon": slice(0, 0)},
    ):
        xr.testing.assert_identical(lazy.isel(key).load(), whole.isel(key))


def test_a_lone_xarray_blosc2_frame(tmp_path, xb2):
    path = _save(xb2, tmp_path, "geogrid", False)
    theirs = xr.open_dataset(path / "n.b2nd", engine="blosc2").load()
    xr.testing.assert_identical(xr.open_dataset(path / "n.b2nd", engine="b2nd").load(), theirs)
    # xarray-blosc2's lone-file reader drops the attributes and serves the packing raw; the
    # b2nd engine keeps them and decodes it from them, as its directory reader does.
    lone = xr.open_dataset(path / "t.b2nd", engine="b2nd").load()
    assert lone.t.dims == xr.open_dataset(path / "t.b2nd", engine="blosc2").t.dims
    ref = _reference(xb2, tmp_path, "geogrid")
    np.testing.assert_array_equal(lone.t.values, ref.t.values)
    assert lone.t.attrs == {k: v for k, v in ref.t.attrs.items() if k != "grid_mapping"}
    coord = xr.open_dataset(path / "_coord_lat.b2nd", engine="b2nd").load()
    theirs = xr.open_dataset(path / "_coord_lat.b2nd", engine="blosc2").load()
    xr.testing.assert_identical(coord, theirs)


def test_the_committed_extent_and_a_pipeline_are_read_as_xarray_blosc2_reads_them(tmp_path, xb2):
    root = _save(xb2, tmp_path, "plain", False)
    b2store.asarray(np.array(2, dtype="i8"), str(root / "_commit.b2nd"))
    (root / "pipeline.yaml").write_text("_target_: builtins.dict\n")
    frozen = xb2.freeze_dataset(root, keep_dir=True)
    for path in (root, frozen):
        ours = xr.open_dataset(path, engine="b2nd").load()
        assert ours.sizes["time"] == 2 and ours.attrs["committed_extent"] == 2
        assert ours.attrs["pipeline"].startswith("_target_")
        xr.testing.assert_identical(ours, xr.open_dataset(path, engine="blosc2").load())


def test_with_xarray_blosc2_installed_its_engine_is_chosen(tmp_path, xb2):
    path = _save(xb2, tmp_path, "plain", True)
    assert not ENGINE.guess_can_open(str(path))
    assert xr.backends.plugins.guess_engine(str(path)) == "blosc2"


# --- drawn vlmeta: a variable of that layout opens by its conventions, or is refused ----------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

VLMETA_VALUES = {
    "dims": st.sampled_from([["x"], "x", [], None]),
    "var": st.sampled_from(["t", ""]),
    "is_coord": st.booleans(),
    "coord_name": st.just("x"),
    "_ARRAY_DIMENSIONS": st.just(["x"]),
    "attrs": st.just(PACKED),
    "lineage": st.just(LINEAGE),
    "units": st.just("K"),
}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(vlmeta=st.fixed_dictionaries({}, optional=VLMETA_VALUES))
def test_drawn_vlmeta_either_open_as_stored_or_are_refused(tmp_path_factory, vlmeta):
    path = tmp_path_factory.mktemp("v") / "v.b2nd"
    b2store.asarray(np.arange(3, dtype="i2"), str(path), vlmeta=vlmeta)
    xb2 = (
        isinstance(vlmeta.get("dims"), list)
        and {"var", "is_coord", "coord_name"} & set(vlmeta)
        and "_ARRAY_DIMENSIONS" not in vlmeta
    )
    if not xb2:
        assert ENGINE.guess_can_open(str(path))
        ds = xr.open_dataset(path, engine="b2nd")
        np.testing.assert_array_equal(ds["data"].values, [0, 1, 2])
        return
    try:
        ds = xr.open_dataset(path, engine="b2nd")
    except (b2store.FormatError, b2store.UnsupportedError):
        assert vlmeta["dims"] != ["x"]  # dims of the wrong length, or a scalar's "x"
        return
    assert vlmeta["dims"] == ["x"]
    (name,) = ds.variables
    assert name == (vlmeta.get("var") or "v") and ds[name].dims == ("x",)
    expected = np.arange(3)
    if "attrs" in vlmeta:
        expected = (np.cumsum(expected, dtype="i2") * 0.01 + 280.0).astype("f4")
    np.testing.assert_array_equal(ds[name].values, expected)


# --- the other way: what xarray-blosc2 sees of files to_b2nd writes ---------------------------


def _ours():
    return xr.Dataset(
        {
            "t": (("time", "lat"), np.arange(12.0).reshape(3, 4), {"units": "K", "n": 3}),
            "s": (("lat",), np.arange(4, dtype="i4"), {"long_name": "station"}),
        },
        coords={
            "time": np.arange(3.0),
            "lat": np.linspace(0.0, 1.0, 4),
            "area": (("time", "lat"), np.ones((3, 4)), {"units": "m2"}),
        },
        attrs={"title": "x"},
    )


@pytest.mark.parametrize("suffix", [".b2d", ".b2z"])
def test_xarray_blosc2_reads_b2store_trees_with_their_dims(tmp_path, xb2, suffix):
    ds = _ours()
    path = to_b2nd(ds, tmp_path / f"d{suffix}")
    theirs = xr.open_dataset(path, engine="blosc2").load()
    # Dimensions, values, coordinates (by is_coord); of the attributes, units and long_name
    # (it reads others from a JSON string, global ones from a dataset.json b2store does not
    # write).
    expected = ds.copy()
    expected.attrs = {}
    expected["t"].attrs = {"units": "K"}
    xr.testing.assert_identical(theirs, expected)
    # b2store reads its own file as before: dims is no attribute, nor a foreign marker.
    assert ENGINE.guess_can_open(path)
    xr.testing.assert_identical(xr.open_dataset(path, engine="b2nd").load(), ds)


def test_xarray_blosc2_reads_a_b2store_frame_with_its_name_and_dims(tmp_path, xb2):
    one = _ours()[["t"]].drop_vars(["time", "lat", "area"])
    path = to_b2nd(one, tmp_path / "other-name.b2nd")
    theirs = xr.open_dataset(path, engine="blosc2").load()
    assert list(theirs.data_vars) == ["t"] and theirs.t.dims == ("time", "lat")
    np.testing.assert_array_equal(theirs.t.values, one.t.values)
    assert ENGINE.guess_can_open(path)
    xr.testing.assert_identical(xr.open_dataset(path, engine="b2nd").load(), one)


def test_the_keys_for_xarray_blosc2_are_no_attributes_anywhere(tmp_path):
    zarr = pytest.importorskip("zarr")
    import blosc2

    ds = _ours()
    path = to_b2nd(ds, tmp_path / "d.b2d")
    arr = blosc2.open(str(tmp_path / "d.b2d" / "t.b2nd"))
    vlmeta = arr.vlmeta
    assert vlmeta["dims"] == ["time", "lat"] and vlmeta["_ARRAY_DIMENSIONS"] == ["time", "lat"]
    area = blosc2.open(str(tmp_path / "d.b2d" / "area.b2nd"))
    assert area.vlmeta["is_coord"] is True
    group = zarr.open_group(b2store.B2ndStore(path, mode="r"), mode="r")
    assert "dims" not in dict(group["t"].attrs) and dict(group["t"].attrs)["units"] == "K"
    assert "is_coord" not in dict(group["area"].attrs)
    assert xr.open_zarr(b2store.B2ndStore(path, mode="r")).area.attrs == {"units": "m2"}
    # A user attribute of that name wins, and stays an attribute.
    own = xr.Dataset({"v": ("x", [1.0, 2.0], {"dims": "mine"})})
    path = to_b2nd(own, tmp_path / "v.b2nd")
    arr = blosc2.open(path)
    assert arr.vlmeta["dims"] == "mine"
    xr.testing.assert_identical(xr.open_dataset(path, engine="b2nd").load(), own)


# --- lazily, elsewhere: pickles, dropped variables, drawn keys, a URL ---------------------------


def test_a_lazy_dataset_pickles_as_recipes_and_reads_the_same(tmp_path, xb2):
    import pickle

    path = _save(xb2, tmp_path, "geogrid", True)
    lazy = xr.open_dataset(path, engine="b2nd", chunks={"lat": 3})
    back = pickle.loads(pickle.dumps(lazy))
    xr.testing.assert_identical(back.compute(), xr.open_dataset(path, engine="b2nd").load())


def test_dropped_variables_are_left_out(tmp_path, xb2):
    path = _save(xb2, tmp_path, "lossy", True)
    ds = xr.open_dataset(path, engine="b2nd", drop_variables=["p", "station"])
    assert "p" not in ds and "station" not in ds and "t" in ds


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_drawn_keys_read_a_packed_variable_as_the_whole_decoded(tmp_path_factory, data):
    # Row-differenced values read through any outer key equal the decoded whole.
    root = tmp_path_factory.mktemp("k") / "ds"
    root.mkdir()
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    stored = rng.integers(-300, 300, (3, 5, 17)).astype("i2")
    b2store.asarray(
        stored,
        str(root / "t.b2nd"),
        chunks=(2, 3, 6),
        blocks=(1, 2, 4),
        vlmeta={"dims": ["a", "b", "c"], "var": "t"},
    )
    params = {"scale_factor": 0.5, "add_offset": 1.0, "original_dtype": "float64"}
    params["row_diff"] = True
    (root / "dataset.json").write_text(json.dumps({"geogrid": {"t": params}}))
    whole = (np.cumsum(stored, axis=-1, dtype="i2").astype("f8") * 0.5 + 1.0).astype("f8")
    ds = xr.open_dataset(root, engine="b2nd")
    np.testing.assert_array_equal(ds.t.values, whole)

    def key(n):
        return data.draw(
            st.one_of(
                st.integers(-n, n - 1),
                st.slices(n),
                st.lists(st.integers(-n, n - 1), max_size=5).map(np.array),
            )
        )

    keys = {d: key(n) for d, n in ds.sizes.items()}
    np.testing.assert_array_equal(
        ds.t.isel(keys).values, xr.DataArray(whole, dims=("a", "b", "c")).isel(keys).values
    )


def test_a_b2z_behind_a_url_is_read_by_its_frames_vlmeta(tmp_path, xb2):
    from http_server import serve_directory

    path = _save(xb2, tmp_path, "geogrid", True)
    with serve_directory(tmp_path) as (url, _):
        remote = xr.open_dataset(f"{url}/{path.name}", engine="b2nd").load()
    xr.testing.assert_identical(remote, _reference(xb2, tmp_path, "geogrid"))


def _daily(start: str, n: int) -> xr.Dataset:
    time = np.datetime64(start, "ns") + np.arange(n) * np.timedelta64(1, "D")
    return xr.Dataset(
        {"v": (("time", "x"), np.arange(n * 3, dtype="f8").reshape(n, 3), {"units": "m"})},
        coords={"time": time, "x": [10, 20, 30]},
    )


def test_times_and_an_appended_dataset_read_as_xarray_blosc2_reads_them(tmp_path, xb2):
    root = xb2.save_dataset(_daily("2024-01-01", 3), tmp_path / "ds")
    xb2.append_dataset(_daily("2024-01-04", 2), root)
    theirs = xr.open_dataset(root, engine="blosc2").load()
    ours = xr.open_dataset(root, engine="b2nd").load()
    assert ours.sizes["time"] == 5 and ours.time.dtype == np.dtype("M8[ns]")
    xr.testing.assert_identical(ours, theirs)


@pytest.mark.parametrize("freeze", [False, True])
def test_a_sharded_dataset_is_refused_by_name(tmp_path, xb2, freeze):
    root = xb2.save_dataset(
        _daily("2024-01-05", 6), tmp_path / "ds", shard_by="isoweek", freeze=freeze
    )
    what = r"sharded dataset \(a .b2z shard\) '2024W01.b2z'" if freeze else "nested dataset"
    with pytest.raises(b2store.UnsupportedError, match=what):
        xr.open_dataset(root, engine="b2nd")
