"""to_b2nd's one rule for encoding keys: CF keys (``_Unsigned``, masking and packing, times,
the CF linkage ``grid_mapping``, ``bounds``, ... and ``coordinates``) are stored whether they
come through ``encoding=`` or the variable's own ``.encoding``; other backends' storage keys
left in ``.encoding`` are ignored, as xarray's writers ignore them; any other key is refused
with a ValueError naming it and the variable, never dropped."""

import numpy as np
import pytest

xr = pytest.importorskip("xarray")

from b2store.integrations.xarray.encoding import (  # noqa: E402
    CF_KEYS,
    CHAR_KEYS,
    FOREIGN_KEYS,
    STORAGE_KEYS,
    VALUE_KEYS,
)
from b2store.integrations.xarray.to_b2nd import to_b2nd  # noqa: E402

LAYOUTS = ["t.b2nd", "t.b2d", "t.b2z"]


def unsigned_bytes():
    """A netCDF byte variable marked unsigned, as ``open_dataset`` decodes it."""
    values = np.array([0, 1, 127, 128, 254], "f4")
    encoding = {"dtype": "i1", "_Unsigned": "true", "_FillValue": np.int8(-1)}
    return xr.Dataset({"b": ("x", values, {}, encoding)})


@pytest.mark.parametrize("name", LAYOUTS)
def test_unsigned_bytes_from_encoding_round_trip(tmp_path, name):
    # Used to read back as int8 [0 1 127 -128 -2]: _Unsigned was dropped, dtype i1 kept.
    ds = unsigned_bytes()
    path = to_b2nd(ds, tmp_path / name)
    back = xr.open_dataset(path, engine="b2nd")
    np.testing.assert_array_equal(back.b.values, [0, 1, 127, 128, 254])
    assert back.b.encoding["_Unsigned"] == "true" and back.b.encoding["dtype"] == np.int8
    raw = xr.open_dataset(path, engine="b2nd", decode_cf=False)
    assert raw.b.dtype == np.int8 and raw.b.attrs["_Unsigned"] == "true"
    np.testing.assert_array_equal(raw.b.values, [0, 1, 127, -128, -2])


def test_unsigned_through_encoding_argument(tmp_path):
    # Used to be refused ("unexpected encoding"), so there was no way to keep it.
    ds = xr.Dataset({"b": ("x", np.array([0, 200, 255], "u1"))})
    enc = {"b": {"dtype": "i1", "_Unsigned": "true"}}
    back = xr.open_dataset(to_b2nd(ds, tmp_path / "u.b2nd", encoding=enc), engine="b2nd")
    assert back.b.dtype == np.uint8
    np.testing.assert_array_equal(back.b.values, [0, 200, 255])


def test_fill_value_attribute_takes_the_variables_dtype(tmp_path):
    # A plain 255 on a u1 variable marked _Unsigned="false" must read back as uint8 (-1
    # signed), as netCDF and Zarr store _FillValue in the variable's type.
    ds = xr.Dataset(
        {"x": ("t", np.array([146, 1, 255], "u1"), {"_FillValue": 255, "_Unsigned": "false"})}
    )
    path = to_b2nd(ds, tmp_path / "f.b2nd")  # used to raise OverflowError on reading
    back = xr.open_dataset(path, engine="b2nd")
    np.testing.assert_array_equal(back.x.values, [-110, 1, np.nan])
    raw = xr.open_dataset(path, engine="b2nd", decode_cf=False)
    assert type(raw.x.attrs["_FillValue"]) is np.uint8


def cf_linked():
    """A variable with a CRS, bounds, cell measures and formula terms linked in .encoding,
    where ``open_dataset(decode_coords="all")``, rioxarray and cf_xarray put them."""
    ds = xr.Dataset(
        {"t": (("y", "x"), np.arange(6.0).reshape(2, 3))},
        {
            "y": ("y", [0.5, 1.5]),
            "x": ("x", [0.5, 1.5, 2.5]),
            "y_bnds": (("y", "nv"), [[0, 1], [1, 2]]),
            "crs": ((), 0, {"grid_mapping_name": "latitude_longitude"}),
            "area": (("y", "x"), np.ones((2, 3))),
            "p0": ((), 1000.0),
            "lev": ((), 0.5, {"standard_name": "atmosphere_sigma_coordinate"}),
        },
    )
    ds.t.encoding.update({"grid_mapping": "crs", "cell_measures": "area: area"})
    ds.y.encoding["bounds"] = "y_bnds"
    ds.lev.encoding["formula_terms"] = "sigma: lev ps: p0"
    return ds


@pytest.mark.parametrize("name", ["t.b2d", "t.b2z"])
def test_cf_linkage_in_encoding_is_written(tmp_path, name):
    # The CRS link used to disappear from the file.
    ds = cf_linked()
    path = to_b2nd(ds, tmp_path / name)
    raw = xr.open_dataset(path, engine="b2nd", decode_coords=False)
    assert raw.t.attrs["grid_mapping"] == "crs"
    assert raw.t.attrs["cell_measures"] == "area: area"
    assert raw.y.attrs["bounds"] == "y_bnds"
    assert raw.lev.attrs["formula_terms"] == "sigma: lev ps: p0"
    back = xr.open_dataset(path, engine="b2nd", decode_coords="all")
    xr.testing.assert_identical(back.load(), ds)
    assert back.t.encoding["grid_mapping"] == "crs"
    assert back.y.encoding["bounds"] == "y_bnds"


def test_grid_mapping_of_a_single_frame(tmp_path):
    ds = cf_linked()[["t"]]
    ds.coords["crs"] = cf_linked().crs
    ds.t.encoding = {"grid_mapping": "crs"}
    path = to_b2nd(ds, tmp_path / "t.b2nd")
    assert xr.open_dataset(path, engine="b2nd", decode_coords=False).t.attrs["grid_mapping"] == (
        "crs"
    )
    back = xr.open_dataset(path, engine="b2nd", decode_coords="all")
    assert "crs" in back.coords and back.t.encoding["grid_mapping"] == "crs"


def test_users_coordinates_encoding_is_written(tmp_path):
    ds = xr.Dataset(
        {"temp": ("x", [0, 1]), "precip": ("x", [0, -1])},
        {"lat": ("x", [2, 3]), "lon": ("x", [4, 5])},
    )
    ds.temp.encoding["coordinates"] = "lat"
    path = to_b2nd(ds, tmp_path / "c.b2d")
    raw = xr.open_dataset(path, engine="b2nd", decode_coords=False)
    assert raw.temp.attrs["coordinates"] == "lat"
    assert set(raw.precip.attrs["coordinates"].split()) == {"lat", "lon"}


# --- the rule, key by key ----------------------------------------------------------------------


def _with_encoding(key, value):
    var = xr.Variable("x", np.arange(4.0), encoding={key: value})
    return xr.Dataset({"v": var})


FOREIGN_VALUES = {
    "source": "/data/in.nc",
    "original_shape": (4,),
    "preferred_chunks": {"x": 2},
    "compressors": (),
    "compressor": None,
    "serializer": None,
    "fill_value": 0.0,
    "chunksizes": (2,),
    "zlib": True,
    "complevel": 4,
    "contiguous": False,
    "_Encoding": "utf-8",
    "char_dim_name": "string4",
}


@pytest.mark.parametrize("key", sorted(FOREIGN_KEYS))
def test_other_backends_keys_in_dot_encoding_are_ignored(tmp_path, key):
    ds = _with_encoding(key, FOREIGN_VALUES.get(key, True))
    back = xr.open_dataset(to_b2nd(ds, tmp_path / "v.b2nd"), engine="b2nd")
    np.testing.assert_array_equal(back.v.values, np.arange(4.0))


@pytest.mark.parametrize("key", sorted(FOREIGN_KEYS))
def test_other_backends_keys_through_encoding_argument_are_refused(tmp_path, key):
    ds = xr.Dataset({"v": ("x", np.arange(4.0))})
    with pytest.raises(ValueError, match=f"unexpected encoding for 'v': \\['{key}'\\]"):
        to_b2nd(ds, tmp_path / "v.b2nd", encoding={"v": {key: FOREIGN_VALUES.get(key, True)}})
    assert not (tmp_path / "v.b2nd").exists()


@pytest.mark.parametrize("key", ["rasterio_dtype", "my_key", "Zlib", "scale", "_unsigned"])
@pytest.mark.parametrize("via", ["encoding", "dot_encoding"])
def test_unknown_keys_are_refused_whichever_way_they_come(tmp_path, key, via):
    if via == "encoding":
        ds, enc, match = xr.Dataset({"v": ("x", np.arange(4.0))}), {"v": {key: 1}}, "unexpected"
    else:
        ds, enc, match = _with_encoding(key, 1), None, "carries encoding"
    with pytest.raises(ValueError, match=f"{match}.*'{key}'"):
        to_b2nd(ds, tmp_path / "v.b2d", encoding=enc)
    assert not (tmp_path / "v.b2d").exists()


@pytest.mark.parametrize("key", ["units", "calendar"])
@pytest.mark.parametrize("dtype", ["f8", "i4", "U2"])
def test_cf_keys_on_data_they_cannot_apply_to_are_refused(tmp_path, key, dtype):
    # ``units``/``calendar`` on a variable without times are not consumed by xarray's
    # encoder (netCDF and Zarr drop them): refused rather than dropped.
    value = "days since 2000-01-01" if key == "units" else "noleap"
    ds = xr.Dataset({"s": ("x", np.array([1, 2]).astype(dtype))})
    with pytest.raises(ValueError, match=f"\\['{key}'\\] of variable 's' does not apply"):
        to_b2nd(ds, tmp_path / "s.b2nd", encoding={"s": {key: value}})
    ds.s.encoding[key] = value
    with pytest.raises(ValueError, match=f"\\['{key}'\\] of variable 's' does not apply"):
        to_b2nd(ds, tmp_path / "s.b2nd")


def test_every_linkage_key_from_dot_encoding_becomes_an_attribute(tmp_path):
    linkage = sorted(CF_KEYS - set(VALUE_KEYS) - set(CHAR_KEYS) - {"coordinates"})
    ds = xr.Dataset({"v": ("x", np.arange(4.0))})
    ds.v.encoding.update({k: f"{k}_var" for k in linkage})
    raw = xr.open_dataset(to_b2nd(ds, tmp_path / "v.b2nd"), engine="b2nd", decode_coords=False)
    for key in linkage:
        assert raw.v.attrs[key] == f"{key}_var", key


def test_key_sets_do_not_overlap():
    assert not (STORAGE_KEYS & CF_KEYS)
    assert not (FOREIGN_KEYS & (STORAGE_KEYS | CF_KEYS))


def test_zarr_opened_dataset_writes_with_its_encoding(tmp_path):
    # Zarr's ``filters`` share b2nd's name but are Zarr codecs: ignored, not misread.
    pytest.importorskip("zarr")
    ds = cf_linked()
    ds.t.encoding["_FillValue"] = -9.0
    ds.to_zarr(tmp_path / "in.zarr", zarr_format=2, consolidated=False)
    opened = xr.open_dataset(
        tmp_path / "in.zarr", engine="zarr", decode_coords="all", consolidated=False
    )
    assert "compressors" in opened.t.encoding and "filters" in opened.t.encoding
    path = to_b2nd(opened, tmp_path / "out.b2d")
    back = xr.open_dataset(path, engine="b2nd", decode_coords="all")
    xr.testing.assert_identical(back.load(), opened.load())
    assert back.t.encoding["grid_mapping"] == "crs" and back.t.encoding["_FillValue"] == -9.0


def test_b2nd_engines_own_encoding_is_kept(tmp_path):
    ds = xr.Dataset({"v": ("x", np.arange(100.0))})
    first = to_b2nd(ds, tmp_path / "a.b2nd", encoding={"v": {"codec": "lz4", "chunks": (50,)}})
    opened = xr.open_dataset(first, engine="b2nd")
    back = xr.open_dataset(to_b2nd(opened, tmp_path / "b.b2nd"), engine="b2nd")
    assert back.v.encoding["codec"] == "lz4" and back.v.encoding["chunks"] == (50,)
    assert back.v.encoding["compressors"] == opened.v.encoding["compressors"]
