"""Codec names: a misspelt one lists what b2store reads and writes apart from the plugins it
only knows by name; a known codec b2store cannot write (a c-blosc2 plugin it does not have,
Blosc1's snappy) is an UnsupportedError naming it, wherever a codec name is accepted, not a
ValueError. The plugins that work on a b2nd array's blocks (ZFP, NDLZ) are written by the b2nd
writers, and refused, named, by the writers of bare chunks."""

from __future__ import annotations

import numpy as np
import pytest

import b2store
from b2store import Codec, UnsupportedError
from b2store.chunk.params import WRITABLE_CODECS, ChunkParams

BLOCK_PLUGINS = ["ndlz", "zfp_acc", "zfp_prec", "zfp_rate"]
PLUGINS = sorted(
    c.name.lower()
    for c in Codec
    if c not in WRITABLE_CODECS and c.name.lower() not in BLOCK_PLUGINS
)
# Writers of bare chunks: no b2nd blocks for ZFP and NDLZ to work on.
BARE = {
    "encode_chunk",
    "encode_chunk-params",
    "numcodecs-blosc2",
    "zarr-blosc2",
    "zarr-blosc2-dict",
}
X = np.arange(100.0)


def _writers(name):
    """Every place a codec name is accepted for writing."""
    out = {
        "encode_chunk": lambda: b2store.encode_chunk(X, codec=name),
        "encode_chunk-params": lambda: b2store.encode_chunk(X, params=ChunkParams(codec=name)),
        "asarray": lambda: b2store.asarray(X, codec=name),
        "zeros": lambda: b2store.zeros((4,), codec=name),
    }
    try:
        from b2store.integrations.numcodecs.codec import B2nd, Blosc2

        out["numcodecs-blosc2"] = lambda: Blosc2(cname=name)
        out["numcodecs-b2nd"] = lambda: B2nd((10,), (5,), "<f8", cname=name)
    except ImportError:
        pass
    try:
        from b2store.integrations.zarr.b2nd import B2ndCodec
        from b2store.integrations.zarr.codecs import Blosc2Codec

        out["zarr-blosc2"] = lambda: Blosc2Codec(cname=name)
        out["zarr-blosc2-dict"] = lambda: Blosc2Codec.from_dict(
            {"name": "blosc2", "configuration": {"cname": name}}
        )
        out["zarr-b2nd"] = lambda: B2ndCodec(cname=name)
    except ImportError:
        pass
    try:
        import xarray as xr

        ds = xr.Dataset({"v": ("t", X)})
        out["to_b2nd"] = lambda: b2store.to_b2nd(ds, None, encoding={"v": {"codec": name}})
    except ImportError:
        pass
    return out


WRITERS = sorted(_writers("zstd"))


def _unwritable(writer):
    return [*PLUGINS, "snappy", "GROK"] + ([*BLOCK_PLUGINS, "ZFP_ACC"] if writer in BARE else [])


@pytest.mark.parametrize("writer,name", [(w, n) for w in WRITERS for n in _unwritable(w)])
def test_a_known_codec_b2store_cannot_write_is_unsupported_everywhere(tmp_path, writer, name):
    write = _writers(name)[writer]
    with pytest.raises(UnsupportedError, match=rf"unsupported codec '{name.lower()}'") as exc:
        if writer == "to_b2nd":
            import xarray as xr

            b2store.to_b2nd(
                xr.Dataset({"v": ("t", X)}), tmp_path / "v.b2nd", encoding={"v": {"codec": name}}
            )
        else:
            write()
    assert "b2store reads and writes blosclz, lz4, lz4hc, zlib, zstd" in str(exc.value)
    assert exc.value.feature == "codec" and exc.value.ident == name.lower()
    assert not list(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.parametrize("writer", WRITERS)
def test_a_misspelt_codec_says_which_are_readable_and_writable(tmp_path, writer):
    with pytest.raises(ValueError, match="unknown codec 'zstdd'") as exc:
        if writer == "to_b2nd":
            import xarray as xr

            b2store.to_b2nd(
                xr.Dataset({"v": ("t", X)}), tmp_path / "v.b2nd", encoding={"v": {"codec": "zstdd"}}
            )
        else:
            _writers("zstdd")[writer]()
    text = str(exc.value)
    writable = text.split("b2store reads and writes ")[1].split(" (")[0]
    assert writable == "blosclz, lz4, lz4hc, zlib, zstd"  # no plugin among them
    on_blocks = text.split("blosclz), and ")[1].split(" in b2nd arrays")[0]
    assert on_blocks.split(", ") == BLOCK_PLUGINS
    assert all(p in text.split("plugins ")[1] for p in PLUGINS)


def test_chunk_params_still_represent_a_plugin_codec_a_header_names():
    # SChunk.params of a ZFP frame: representable, refused only when encoding with it.
    assert ChunkParams(codec=Codec.ZFP_ACC).codec == Codec.ZFP_ACC


def test_a_block_filter_is_unsupported_in_a_bare_chunk():
    with pytest.raises(UnsupportedError, match="unsupported filter 'ndcell' here.*block shape"):
        b2store.encode_chunk(X, filters=["ndcell"])


@pytest.mark.parametrize("writer", sorted(set(WRITERS) - BARE))
def test_the_b2nd_writers_take_zfp(tmp_path, writer):
    pytest.importorskip("zfpy", reason="ZFP needs the zfp extra (zfpy)")
    write = _writers("zfp_rate")[writer]
    if writer == "to_b2nd":
        import xarray as xr

        b2store.to_b2nd(
            xr.Dataset({"v": ("t", X)}), tmp_path / "v.b2nd",
            encoding={"v": {"codec": "zfp_rate", "codec_meta": 50}},
        )  # fmt: skip
        with b2store.open(tmp_path / "v.b2nd") as arr:
            assert arr.schunk.codec == Codec.ZFP_RATE
            assert np.abs(arr[...] - X).max() < 1.0
    else:
        assert write() is not None


@pytest.mark.parametrize("name", ["grok", "openhtj2k"])
def test_the_command_line_says_unsupported_codec(tmp_path, capsys, name):
    from b2store.cli import main

    src = tmp_path / "a.b2nd"
    b2store.asarray(X, urlpath=src)
    rc = main(["convert", str(src), str(tmp_path / "b.b2nd"), "--codec", name])
    assert rc != 0
    assert f"unsupported codec '{name}'" in capsys.readouterr().err
    assert not (tmp_path / "b.b2nd").exists()
