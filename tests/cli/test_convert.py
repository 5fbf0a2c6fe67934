"""``b2store convert``: .npy, netCDF/HDF5, Zarr v2/v3 and Blosc2, both ways, chunk by chunk,
checked with python-blosc2, xarray and zarr."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import assert_user_error, run_b2store

blosc2 = pytest.importorskip("blosc2")


def _ok(*args):
    result = run_b2store("convert", *args)
    assert result.code == 0, result
    return result


def test_npy_to_b2nd_with_options_and_back(tmp_path):
    data = np.random.default_rng(1).normal(size=(300, 500)).astype("f4")
    np.save(tmp_path / "x.npy", data)
    _ok(
        tmp_path / "x.npy",
        tmp_path / "x.b2nd",
        "--chunks",
        "100,250",
        "--blocks",
        "25,125",
        "--codec",
        "lz4",
        "--clevel",
        "7",
        "--filters",
        "bitshuffle",
    )
    arr = blosc2.open(str(tmp_path / "x.b2nd"))
    assert np.array_equal(arr[:], data)
    assert arr.chunks == (100, 250) and arr.blocks == (25, 125)
    cparams = arr.schunk.cparams
    assert cparams.codec == blosc2.Codec.LZ4 and cparams.clevel == 7
    assert blosc2.Filter.BITSHUFFLE in cparams.filters
    assert blosc2.Filter.SHUFFLE not in cparams.filters
    del arr
    _ok(tmp_path / "x.b2nd", tmp_path / "y.npy")
    assert np.array_equal(np.load(tmp_path / "y.npy"), data)


def test_python_blosc2_frame_to_npy_and_zarr(tmp_path):
    zarr = pytest.importorskip("zarr")
    data = np.arange(24 * 50 * 7, dtype="<i8").reshape(24, 50, 7)
    blosc2.asarray(data, urlpath=str(tmp_path / "a.b2nd"), mode="w", chunks=(10, 20, 7))
    _ok(tmp_path / "a.b2nd", tmp_path / "a.npy")
    assert np.array_equal(np.load(tmp_path / "a.npy"), data)
    for fmt in (2, 3):
        out = tmp_path / f"a{fmt}.zarr"
        _ok(tmp_path / "a.b2nd", out, "--zarr-format", fmt, "--codec", "zstd", "--clevel", "3")
        # a group holding the variable under the name the b2nd engine gives an array that
        # stores none ("data", the same for every file of a series)
        z = zarr.open_group(str(out), mode="r")["data"]
        assert z.metadata.zarr_format == fmt
        assert z.chunks == (10, 20, 7)
        assert np.array_equal(z[:], data)
        text = "".join(p.read_text() for p in out.rglob("*.json")) + "".join(
            p.read_text() for p in out.rglob(".z*")
        )
        assert '"blosc2"' in text
        # ...and back to a frame python-blosc2 reads
        back = tmp_path / f"back{fmt}.b2nd"
        _ok(out, back)
        assert np.array_equal(blosc2.open(str(back))[:], data)


def test_netcdf_to_b2d_b2z_and_back(tmp_path):
    xr = pytest.importorskip("xarray")
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), rng.random((12, 10, 20), "f4"), {"units": "K"}),
            "mask": (("lat", "lon"), rng.integers(0, 2, (10, 20)).astype("u1")),
        },
        coords={
            "time": pd.date_range("2001-01-01", periods=12, freq="MS"),
            "lat": np.linspace(-45, 45, 10),
            "lon": np.arange(20.0),
        },
        attrs={"title": "convert test"},
    )
    ds.to_netcdf(tmp_path / "d.nc", engine="h5netcdf")  # (netCDF4 is not a test dependency)
    for suffix in (".b2d", ".b2z"):
        out = tmp_path / f"d{suffix}"
        _ok(tmp_path / "d.nc", out, "--chunks", "4,10,10", "--codec", "zstd")
        back = xr.open_dataset(out, engine="b2nd")
        xr.testing.assert_identical(back.load(), ds)
        back.close()
    # python-blosc2 opens each array of the tree
    t2m = blosc2.open(str(tmp_path / "d.b2d" / "t2m.b2nd"))
    assert t2m.chunks == (4, 10, 10)
    assert np.array_equal(t2m[:], ds.t2m.values)
    del t2m
    _ok(tmp_path / "d.b2d", tmp_path / "again.nc")
    xr.testing.assert_identical(xr.load_dataset(tmp_path / "again.nc"), ds)
    _ok(tmp_path / "d.nc", tmp_path / "t2m.npy", "--variable", "t2m")
    assert np.array_equal(np.load(tmp_path / "t2m.npy"), ds.t2m.values)


def test_hdf5_without_netcdf_dimensions(tmp_path):
    h5py = pytest.importorskip("h5py")
    data = np.arange(600, dtype="f8").reshape(20, 30)
    with h5py.File(tmp_path / "plain.h5", "w") as f:
        f.create_dataset("values", data=data, chunks=(10, 10))
    _ok(tmp_path / "plain.h5", tmp_path / "v.b2nd", "--variable", "values")
    assert np.array_equal(blosc2.open(str(tmp_path / "v.b2nd"))[:], data)


def test_progress_bar(tmp_path):
    pytest.importorskip("tqdm")
    np.save(tmp_path / "x.npy", np.zeros((100, 100)))
    result = _ok(tmp_path / "x.npy", tmp_path / "x.b2nd", "--progress")
    assert "100%" in result.err
    result = _ok(tmp_path / "x.npy", tmp_path / "y.b2nd")
    assert "%" not in result.err  # not a terminal: no bar unless asked


def test_convert_user_errors(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(10))
    _ok(tmp_path / "x.npy", tmp_path / "x.b2nd")
    assert_user_error(run_b2store("convert", tmp_path / "x.npy", tmp_path / "x.b2nd"), "exists")
    _ok(tmp_path / "x.npy", tmp_path / "x.b2nd", "--overwrite", "--quiet")
    assert_user_error(run_b2store("convert", tmp_path / "x.npy", tmp_path / "x.png"), ".png")
    assert_user_error(
        run_b2store("convert", tmp_path / "x.npy", tmp_path / "z.b2nd", "--chunks", "a,b"),
        "--chunks",
    )
    assert_user_error(
        run_b2store("convert", tmp_path / "x.npy", tmp_path / "z.b2nd", "--clevel", "12"),
        "--clevel",
    )
    assert_user_error(
        run_b2store("convert", tmp_path / "x.npy", tmp_path / "z.b2nd", "--codec", "snappy"),
        "snappy",
    )
    assert_user_error(run_b2store("convert", tmp_path / "no.npy", tmp_path / "z.b2nd"), "no.npy")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="peak memory read from /proc-like rusage")
def test_memory_stays_within_a_few_chunks(tmp_path):
    """A 256 MiB array converted b2nd -> b2nd and b2nd -> npy: the converting process peaks
    far below the data's size (its chunks are 2 MiB)."""
    import b2store

    shape, chunks = (512, 65536), (4, 65536)  # 256 MiB of float64, 2 MiB chunks
    src = tmp_path / "big.b2nd"
    out = b2store.zeros(shape, "f8", src, chunks=chunks, blocks=(1, 16384))
    with out:
        row = np.arange(65536, dtype="f8")
        for i in range(0, shape[0], chunks[0]):
            out[i : i + chunks[0]] = row + i
    probe = (
        "import resource, sys\n"
        "from b2store.cli import main\n"
        "rc = main(sys.argv[1:]) if len(sys.argv) > 1 else 0\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n"
    )
    import subprocess

    def peak_mib(*args) -> int:
        proc = subprocess.run(
            [sys.executable, "-c", probe, *map(str, args)], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        return int(proc.stdout.strip().splitlines()[-1])

    base = peak_mib("info", src)
    for dst in ("copy.b2nd", "copy.npy"):
        grown = peak_mib("convert", src, tmp_path / dst, "--quiet") - base
        assert grown < 64, f"{dst}: {grown} MiB above the baseline for 256 MiB of data"


# --- what xarray and zarr users open --------------------------------------------------------


def _climate(xr, pd, rng):
    return xr.Dataset(
        {"sst": (("time", "lat", "lon"), rng.random((6, 8, 10), "f4"), {"units": "degC"})},
        coords={
            "time": pd.date_range("2020-01-01", periods=6, freq="D"),
            "lat": ("lat", np.linspace(-10, 10, 8), {"units": "degrees_north"}),
            "lon": np.arange(10.0),
        },
        attrs={"title": "sea surface", "source": "convert test"},
    )


@pytest.mark.parametrize("fmt", [2, 3])
def test_frame_to_zarr_is_the_dataset_the_b2nd_engine_opens(tmp_path, cli, fmt):
    xr = pytest.importorskip("xarray")
    zarr = pytest.importorskip("zarr")
    # a python-blosc2 frame stores no name: the engine names its variable "data"
    blosc2.asarray(np.arange(120.0).reshape(10, 12), urlpath=str(tmp_path / "sst.b2nd"))
    out = tmp_path / "sst.zarr"
    assert cli("convert", tmp_path / "sst.b2nd", out, "--zarr-format", fmt).code == 0
    expected = xr.open_dataset(tmp_path / "sst.b2nd", engine="b2nd")
    got = xr.open_zarr(out)
    assert list(got.data_vars) == ["data"]
    xr.testing.assert_identical(got.load(), expected.load())
    arr = zarr.open_group(str(out), mode="r")["data"]
    if fmt == 3:
        assert arr.metadata.dimension_names == ("dim_0", "dim_1")
    else:
        assert arr.attrs["_ARRAY_DIMENSIONS"] == ["dim_0", "dim_1"]


def test_frame_to_frame_keeps_the_variable_name(tmp_path, cli):
    xr = pytest.importorskip("xarray")
    data = np.arange(120.0).reshape(10, 12)
    blosc2.asarray(data, urlpath=str(tmp_path / "sst.b2nd"), chunks=(5, 6))
    assert cli("convert", tmp_path / "sst.b2nd", tmp_path / "copy.b2nd").code == 0
    expected = xr.open_dataset(tmp_path / "sst.b2nd", engine="b2nd").load()
    xr.testing.assert_identical(xr.open_dataset(tmp_path / "copy.b2nd", engine="b2nd"), expected)
    assert np.array_equal(blosc2.open(str(tmp_path / "copy.b2nd"))[:], data)


def test_netcdf_variable_to_frame_and_back(tmp_path, cli):
    xr = pytest.importorskip("xarray")
    pd = pytest.importorskip("pandas")
    ds = _climate(xr, pd, np.random.default_rng(8))
    ds.to_netcdf(tmp_path / "x.nc", engine="h5netcdf")
    assert cli("convert", tmp_path / "x.nc", tmp_path / "x.b2nd").code == 0
    xr.testing.assert_identical(xr.open_dataset(tmp_path / "x.b2nd", engine="b2nd").load(), ds)
    assert cli("convert", tmp_path / "x.b2nd", tmp_path / "y.nc").code == 0
    xr.testing.assert_identical(xr.load_dataset(tmp_path / "y.nc"), ds)


@pytest.mark.parametrize("fmt", [2, 3])
def test_b2store_frame_with_coords_to_zarr_and_back(tmp_path, cli, fmt):
    xr = pytest.importorskip("xarray")
    pd = pytest.importorskip("pandas")
    from b2store import to_b2nd

    ds = _climate(xr, pd, np.random.default_rng(5))
    to_b2nd(ds, tmp_path / "x.b2nd")
    out = tmp_path / "x.zarr"
    assert cli("convert", tmp_path / "x.b2nd", out, "--zarr-format", fmt).code == 0
    xr.testing.assert_identical(xr.open_zarr(out).load(), ds)
    # ...and back, to a frame and to trees: names, coordinates and attributes kept
    for suffix in (".b2nd", ".b2d", ".b2z"):
        back = tmp_path / f"back{fmt}{suffix}"
        assert cli("convert", out, back).code == 0
        xr.testing.assert_identical(xr.open_dataset(back, engine="b2nd").load(), ds)


def test_tree_with_groups_to_zarr_netcdf_and_back(tmp_path, cli):
    xr = pytest.importorskip("xarray")
    pd = pytest.importorskip("pandas")
    from b2store import to_b2nd

    rng = np.random.default_rng(6)
    tree = xr.DataTree.from_dict(
        {
            "/": _climate(xr, pd, rng),
            "/forecast": xr.Dataset(
                {"wind": (("step", "y"), rng.random((4, 5)), {"units": "m/s"})},
                attrs={"model": "toy"},
            ),
        }
    )
    to_b2nd(tree, tmp_path / "t.b2d")
    expected = xr.open_datatree(tmp_path / "t.b2d", engine="b2nd").load()
    xr.testing.assert_identical(expected, tree)
    for out in ("t.zarr", "t.nc"):
        assert cli("convert", tmp_path / "t.b2d", tmp_path / out).code == 0
        got = xr.open_datatree(tmp_path / out, engine="zarr" if out.endswith("zarr") else None)
        xr.testing.assert_identical(got.load(), tree)
    for src, back in (("t.zarr", "u.b2z"), ("t.zarr", "u.b2d"), ("t.nc", "v.b2d")):
        assert cli("convert", tmp_path / src, tmp_path / back).code == 0
        got = xr.open_datatree(tmp_path / back, engine="b2nd")
        xr.testing.assert_identical(got.load(), tree)
    # a tree with groups has no single array to write
    result = cli("convert", tmp_path / "t.nc", tmp_path / "one.b2nd")
    assert result.code == 2 and "groups" in result.err


def test_npy_to_zarr_is_a_group_named_after_the_file(tmp_path, cli):
    xr = pytest.importorskip("xarray")
    data = np.arange(60, dtype="i4").reshape(6, 10)
    np.save(tmp_path / "counts.npy", data)
    assert cli("convert", tmp_path / "counts.npy", tmp_path / "c.zarr").code == 0
    got = xr.open_zarr(tmp_path / "c.zarr")
    assert list(got.data_vars) == ["counts"]
    assert np.array_equal(got.counts.values, data)


def test_netcdf_output_compressed_by_default(tmp_path, cli):
    xr = pytest.importorskip("xarray")
    pd = pytest.importorskip("pandas")
    h5py = pytest.importorskip("h5py")
    from b2store import to_b2nd

    ds = _climate(xr, pd, np.random.default_rng(7))
    ds["sst"] = ds.sst.round(1)  # compressible
    to_b2nd(ds, tmp_path / "x.b2d")
    assert cli("convert", tmp_path / "x.b2d", tmp_path / "z.nc").code == 0
    assert cli("convert", tmp_path / "x.b2d", tmp_path / "z9.nc", "--clevel", "9").code == 0
    args = ("--nc-compression", "none")
    assert cli("convert", tmp_path / "x.b2d", tmp_path / "raw.nc", *args).code == 0
    levels = {}
    for name in ("z.nc", "z9.nc", "raw.nc"):
        xr.testing.assert_identical(xr.load_dataset(tmp_path / name), ds)
        with h5py.File(tmp_path / name) as f:
            levels[name] = (f["sst"].compression, f["sst"].compression_opts)
    assert levels == {"z.nc": ("gzip", 4), "z9.nc": ("gzip", 9), "raw.nc": (None, None)}
    assert (tmp_path / "z.nc").stat().st_size < (tmp_path / "raw.nc").stat().st_size
    bad = cli("convert", tmp_path / "x.b2d", tmp_path / "q.nc", "--nc-compression", "lzma")
    assert bad.code == 2 and "--nc-compression" in bad.err


# --- progress and help ----------------------------------------------------------------------


def test_progress_forced_and_quiet_off_a_terminal(tmp_path, capsys):
    pytest.importorskip("tqdm")
    xr = pytest.importorskip("xarray")
    import b2store

    data = np.zeros((200, 50))
    b2store.asarray(data, tmp_path / "a.b2nd", chunks=(20, 50), progress=True)
    assert "100%" in capsys.readouterr().err
    b2store.asarray(data, tmp_path / "b.b2nd", chunks=(20, 50))  # stderr is not a terminal
    assert "%" not in capsys.readouterr().err
    ds = xr.Dataset({"v": (("y", "x"), data)})
    b2store.to_b2nd(ds, tmp_path / "v.b2nd", progress=True)
    assert "100%" in capsys.readouterr().err
    b2store.to_b2nd(ds, tmp_path / "w.b2nd")
    b2store.to_b2nd(ds, tmp_path / "w2.b2nd", progress=False)
    assert "%" not in capsys.readouterr().err


def test_progress_by_default_on_a_terminal_for_large_work(tmp_path, monkeypatch):
    pytest.importorskip("tqdm")
    import b2store
    from b2store import _progress

    shown = []
    real = _progress.bar

    def spy(*args, **kwargs):
        made = real(*args, **kwargs)
        shown.append(not isinstance(made, _progress.NoBar))
        return made

    monkeypatch.setattr(_progress, "bar", spy)
    monkeypatch.setattr(_progress, "_on_terminal", lambda: True)
    b2store.asarray(np.zeros((10, 10)), tmp_path / "small.b2nd")
    b2store.asarray(np.zeros((100, 10)), tmp_path / "big.b2nd", chunks=(5, 10))  # 20 chunks
    b2store.asarray(np.zeros((100, 10)), tmp_path / "off.b2nd", chunks=(5, 10), progress=False)
    assert shown == [False, True, False]
    monkeypatch.setattr(_progress, "_on_terminal", lambda: False)
    b2store.asarray(np.zeros((100, 10)), tmp_path / "pipe.b2nd", chunks=(5, 10))
    assert shown[-1] is False
    assert _progress.is_large(_progress.LARGE_BYTES + 1) and not _progress.is_large(10, 3)


def test_help_texts(capsys):
    from b2store.cli import main

    for command in ["info", "dump", "verify", "convert", "demo", "quickstart", "decode"]:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        assert "example" in out.lower(), command
        assert f"b2store {command}" in out.split("xample", 1)[1], command


def test_convert_to_zfp_with_its_codec_meta(tmp_path):
    pytest.importorskip("zfpy", reason="ZFP needs the zfp extra (zfpy)")
    blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")
    x = np.cumsum(np.random.default_rng(0).normal(size=(100, 80)), axis=1)
    np.save(tmp_path / "t.npy", x)
    dst = tmp_path / "t.b2nd"
    args = ["convert", tmp_path / "t.npy", dst, "--codec", "zfp_acc", "--codec-meta", "253"]
    result = run_b2store(*args)
    assert result.code == 0, result
    arr = blosc2.open(str(dst))
    assert arr.schunk.cparams.codec == blosc2.Codec.ZFP_ACC
    assert arr.schunk.cparams.codec_meta == 253
    assert 0 < np.abs(arr[...] - x).max() <= 1e-3
    # A Zarr output's chunks carry no b2nd blocks: refused, saying so.
    result = run_b2store("convert", tmp_path / "t.npy", tmp_path / "t.zarr", "--codec", "zfp_acc")
    assert_user_error(result, "zfp_acc", "bare chunks")


# --- netCDF outputs without a netCDF library ------------------------------------------------


@pytest.mark.parametrize("suffix", [".nc", ".h5"])
def test_a_netcdf_output_without_a_netcdf_library_is_refused_before_any_work(
    tmp_path, monkeypatch, cli, suffix
):
    """Without h5netcdf and netCDF4, convert to .nc said so only after reading the whole
    source (6.6 s of a 194 MB dataset, issue 39): it now says so first, naming the extra."""
    import b2store.cli.convert as convert_module

    for module in ("h5netcdf", "netCDF4"):
        monkeypatch.setitem(sys.modules, module, None)  # (its import raises ImportError)
    opened = []
    real_open = convert_module.open_source
    monkeypatch.setattr(convert_module, "open_source", lambda *a: opened.append(a) or real_open(*a))
    np.save(tmp_path / "x.npy", np.arange(6.0))
    dst = tmp_path / f"x{suffix}"
    result = cli("convert", tmp_path / "x.npy", dst)
    assert_user_error(
        result,
        f"{dst}: writing netCDF needs h5netcdf or netCDF4, and neither is installed; install "
        'b2store\'s netcdf extra (pip install "b2store[netcdf]", which brings h5netcdf), or '
        "convert to .b2d, .b2z or .zarr instead",
    )
    assert opened == [] and not dst.exists()
    # The same source to a .b2d is read (the check is for netCDF outputs only).
    assert cli("convert", tmp_path / "x.npy", tmp_path / "x.b2d").code == 0
    assert len(opened) == 1


def test_a_netcdf_output_is_written_by_netcdf4_where_h5netcdf_is_absent(tmp_path, monkeypatch):
    import b2store.cli.convert as convert_module

    monkeypatch.setitem(sys.modules, "h5netcdf", None)
    monkeypatch.setitem(sys.modules, "netCDF4", sys)  # (any module: it imports)
    assert convert_module._netcdf_engine("x.nc") == "netcdf4"
    monkeypatch.delitem(sys.modules, "h5netcdf")
    pytest.importorskip("h5netcdf")
    assert convert_module._netcdf_engine("x.nc") == "h5netcdf"
