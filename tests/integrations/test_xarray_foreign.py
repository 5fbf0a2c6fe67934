"""The b2nd engine never serves another writer's layout as if it decoded it: xarray-blosc2's
directories, ``.b2z`` zips, variable frames and sealed blobs are declined by
``guess_can_open`` (xarray then asks the engine that owns them) and refused with an
UnsupportedError naming the layout when ``engine="b2nd"`` is forced.

The layouts are built here with b2store from the markers the detection keys on (see
``b2store.integrations.xarray.foreign``); where xarray-blosc2 is installed, files it writes
itself are checked too."""

import json
import zipfile

import numpy as np
import pytest

xr = pytest.importorskip("xarray")

import b2store  # noqa: E402
from b2store.integrations.xarray.backend import B2ndBackendEntrypoint  # noqa: E402
from b2store.integrations.xarray.foreign import ForeignLayoutError  # noqa: E402
from b2store.integrations.xarray.writer import to_b2nd  # noqa: E402

ENGINE = B2ndBackendEntrypoint()
LINEAGE = json.dumps({"history": ["saved by xarray_blosc2 1.7.1"]})
# What xarray-blosc2 1.7.1 writes: geogrid packs floats as int16 with its parameters in a
# JSON string only its reader decodes.
PACKED = json.dumps({"scale_factor": 0.01, "add_offset": 280.0, "_geogrid_row_diff": True})


def xb2_variable(path, contiguous=True, **extra):
    """A frame as xarray-blosc2 writes a data variable: int16 geogrid values, its vlmeta."""
    vlmeta = {"dims": ["lat", "lon"], "var": "t", "units": "K", "attrs": PACKED, **extra}
    data = np.arange(12, dtype="i2").reshape(3, 4)
    b2store.asarray(data, str(path), contiguous=contiguous, vlmeta=vlmeta)


def xb2_coord(path, name="lat", n=3):
    vlmeta = {"dims": [name], "is_coord": True, "coord_name": name, "lineage": LINEAGE}
    b2store.asarray(np.linspace(-10.0, 10.0, n), str(path), vlmeta=vlmeta)


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


LAYOUTS = {
    "directory": lambda t: xb2_directory(t / "ds"),
    "directory.b2d": lambda t: xb2_directory(t / "ds.b2d"),
    "directory, manifest only": lambda t: xb2_directory(t / "ds", with_coords=False),
    "directory, _coord_ frames only": lambda t: xb2_directory(t / "ds", with_manifest=False),
    "directory, manifest, plain frames": lambda t: xb2_directory(
        t / "ds", with_coords=False, variable=False
    ),
    "directory, variable frames only": lambda t: xb2_directory(
        t / "ds", with_manifest=False, with_coords=False
    ),
    "b2z": lambda t: xb2_zip(t, "ds.b2z"),
    "b2z, _coord_ members only": lambda t: xb2_zip(t, "ds.b2z", with_manifest=False),
    "b2z, manifest only": lambda t: xb2_zip(t, "ds.b2z", with_coords=False),
    "b2z, a group's manifest": lambda t: xb2_zip(t, "ds.b2z", group="g1/"),
    "zip without suffix": lambda t: xb2_zip(t, "ds"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_xarray_blosc2_datasets_are_declined_and_refused(tmp_path, layout):
    path = str(LAYOUTS[layout](tmp_path))
    assert not ENGINE.guess_can_open(path)
    with pytest.raises(ForeignLayoutError, match="xarray-blosc2's layout .*engine='blosc2'"):
        xr.open_dataset(path, engine="b2nd")
    with pytest.raises(b2store.UnsupportedError, match="xarray-blosc2"):
        xr.open_datatree(path, engine="b2nd")


@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("marker", ["var", "is_coord", "coord_name"])
def test_xarray_blosc2_frames_are_declined_and_refused(tmp_path, contiguous, marker):
    # Used to open with dim_0/dim_1, its bookkeeping as attributes and int16 packed values.
    path = tmp_path / "t.b2nd"
    vlmeta = {"dims": ["lat", "lon"], marker: True if marker == "is_coord" else "t"}
    b2store.asarray(
        np.arange(12, dtype="i2").reshape(3, 4), str(path), contiguous=contiguous, vlmeta=vlmeta
    )
    assert not ENGINE.guess_can_open(str(path))
    with pytest.raises(ForeignLayoutError, match=f"vlmeta 'dims' and '{marker}'"):
        xr.open_dataset(path, engine="b2nd")


def test_a_frame_of_a_directory_without_markers_is_refused_when_opened(tmp_path):
    # No manifest and no _coord_ frames: the variables' vlmeta still say whose they are.
    root = xb2_directory(tmp_path / "ds", with_manifest=False, with_coords=False)
    with pytest.raises(ForeignLayoutError, match=r"ds \(/t\)"):
        xr.open_dataset(root, engine="b2nd")


def test_the_error_pickles(tmp_path):
    import pickle

    err = ForeignLayoutError("/data/ds", "its dataset.json manifest in the directory")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.marker == err.marker and back.ident == "/data/ds"
    assert isinstance(back, b2store.UnsupportedError) and isinstance(back, NotImplementedError)


def test_a_sealed_blob_is_declined_and_refused(tmp_path):
    path = tmp_path / "ds.b2z"
    path.write_bytes(b"B2ENCBLB\x02" + bytes(64))
    assert not ENGINE.guess_can_open(str(path))
    with pytest.raises(ForeignLayoutError, match="sealed"):
        xr.open_dataset(path, engine="b2nd")


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


# --- files xarray-blosc2 writes itself ---------------------------------------------------------


@pytest.fixture
def xb2():
    return pytest.importorskip(
        "xarray_blosc2", reason="xarray-blosc2 is not installed (pip install xarray-blosc2)"
    )


def _dataset():
    rng = np.random.default_rng(0)
    return xr.Dataset(
        {"t": (("time", "lat", "lon"), rng.normal(280, 10, (3, 4, 5)).astype("f4"))},
        coords={"time": np.arange(3.0), "lat": np.linspace(-10, 10, 4), "lon": np.arange(5.0)},
        attrs={"title": "x"},
    )


@pytest.mark.parametrize("preset", [None, "geogrid"])
def test_xarray_blosc2_written_files_are_declined_and_refused(tmp_path, xb2, preset):
    root = xb2.save_dataset(_dataset(), tmp_path / "ds", preset=preset)
    frozen = xb2.freeze_dataset(root, keep_dir=True)
    for path in (root, frozen, root / "t.b2nd", root / "_coord_lat.b2nd"):
        assert not ENGINE.guess_can_open(str(path)), path
        with pytest.raises(ForeignLayoutError, match="xarray-blosc2's layout"):
            xr.open_dataset(path, engine="b2nd")
    # Declined, xarray picks xarray-blosc2's engine, which decodes the packing.
    if preset is None and "blosc2" in xr.backends.list_engines():
        back = xr.open_dataset(root)
        np.testing.assert_allclose(back.t.values, _dataset().t.values)


# --- drawn vlmeta: never a variable of that layout served as data ------------------------------

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
    assert ENGINE.guess_can_open(str(path)) is not xb2
    if xb2:
        with pytest.raises(ForeignLayoutError, match="xarray-blosc2"):
            xr.open_dataset(path, engine="b2nd")
    else:
        ds = xr.open_dataset(path, engine="b2nd")
        np.testing.assert_array_equal(ds["data"].values, [0, 1, 2])
