"""Zarr v2 and v3 arrays compressed with Blosc2 round-trip through zarr.open, and the Blosc2
data already published (ocf_blosc2's v2 and v3 layouts) opens with b2store installed."""

import json

import numpy as np
import pytest

zarr = pytest.importorskip("zarr", reason="the zarr extra is not installed")
blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 writes the ocf_blosc2-style data")

import b2store  # noqa: E402
from b2store import Codec, Filter  # noqa: E402
from b2store.integrations.numcodecs.codec import Blosc2  # noqa: E402
from b2store.integrations.zarr.codecs import Blosc2Codec, NumcodecsBlosc2Codec  # noqa: E402

# Under zarr's default codec pipeline and its fused one (tests/integrations/conftest.py).
pytestmark = pytest.mark.usefixtures("zarr_pipeline")


def field(shape=(60, 90), dtype="f4"):
    y, x = np.mgrid[: shape[0], : shape[1]]
    return (np.sin(x / 7) * np.cos(y / 5) * 100).astype(dtype)


def test_zarr_v2_array_round_trips(tmp_path):
    data = field()
    path = tmp_path / "v2.zarr"
    arr = zarr.create_array(
        path,
        shape=data.shape,
        chunks=(25, 40),
        dtype=data.dtype,
        zarr_format=2,
        compressors=Blosc2(cname="lz4", clevel=7),
    )
    arr[:] = data
    meta = json.loads((path / ".zarray").read_text())
    assert meta["compressor"]["id"] == "blosc2" and meta["compressor"]["cname"] == "lz4"
    again = zarr.open(path, mode="r")
    np.testing.assert_array_equal(again[:], data)
    # Every stored chunk is a Blosc2 chunk python-blosc2 reads.
    chunk = (path / "1.1").read_bytes()
    expected = np.ascontiguousarray(data[25:50, 40:80])
    np.testing.assert_array_equal(
        np.frombuffer(blosc2.decompress(chunk), "f4").reshape(25, 40), expected
    )


@pytest.mark.parametrize(
    "codec",
    [
        Blosc2Codec(),
        Blosc2Codec(cname="blosclz", clevel=9, shuffle="bitshuffle"),
        Blosc2Codec(
            cname="zstd", filters=[{"id": "delta", "meta": 0}, {"id": "shuffle", "meta": 0}]
        ),
        Blosc2Codec(cname="lz4hc", typesize=4, blocksize=1024, splitmode="always"),
    ],
    ids=["default", "bitshuffle", "delta-shuffle", "explicit"],
)
@pytest.mark.parametrize("dtype", ["f8", "i2", "u1"])
def test_zarr_v3_array_round_trips(tmp_path, codec, dtype):
    data = field(dtype=dtype)
    path = tmp_path / "v3.zarr"
    arr = zarr.create_array(
        path, shape=data.shape, chunks=(32, 32), dtype=data.dtype, compressors=[codec]
    )
    arr[:] = data
    meta = json.loads((path / "zarr.json").read_text())
    stored = [c for c in meta["codecs"] if c["name"] == "blosc2"][0]["configuration"]
    assert stored["typesize"] == data.dtype.itemsize or codec.typesize == stored["typesize"]
    chunk = (path / "c" / "0" / "1").read_bytes()
    if codec.shuffle is None and codec.filters is None:
        # Left out, shuffle follows the items (and is not written, being implied).
        assert "shuffle" not in stored and "filters" not in stored
        expected_filter = Filter.BITSHUFFLE if stored["typesize"] == 1 else Filter.SHUFFLE
        assert b2store.chunk_info(chunk).filters[0] == expected_filter
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[:], data)
    expected = np.ascontiguousarray(data[:32, 32:64])
    np.testing.assert_array_equal(
        np.frombuffer(blosc2.decompress(chunk), data.dtype), expected.ravel()
    )


def test_v3_codec_config_round_trips():
    codec = Blosc2Codec(cname="zstd", clevel=3, filters=[("trunc_prec", 10), "shuffle"])
    again = Blosc2Codec.from_dict(codec.to_dict())
    assert again == codec and again.to_dict()["configuration"]["filters"][0] == {
        "id": "trunc_prec",
        "meta": 10,
    }
    with pytest.raises(ValueError, match="clevel"):
        Blosc2Codec(clevel=12)
    with pytest.raises(ValueError, match="shuffle"):
        Blosc2Codec(shuffle="byteshuffle")


def write_ocf_v2(path, data, chunks, cname, clevel):
    """A Zarr v2 array as ocf_blosc2 wrote it: plain blosc2.compress chunks."""
    path.mkdir()
    (path / ".zarray").write_text(
        json.dumps(
            {
                "zarr_format": 2,
                "shape": list(data.shape),
                "chunks": list(chunks),
                "dtype": data.dtype.str,
                "compressor": {"id": "blosc2", "cname": cname, "clevel": clevel},
                "fill_value": 0,
                "filters": None,
                "order": "C",
                "dimension_separator": ".",
            }
        )
    )
    codec = blosc2.Codec.BLOSCLZ if cname == "blosc2" else blosc2.Codec[cname.upper()]
    for i in range(0, data.shape[0], chunks[0]):
        for j in range(0, data.shape[1], chunks[1]):
            block = np.zeros(chunks, data.dtype)
            part = data[i : i + chunks[0], j : j + chunks[1]]
            block[: part.shape[0], : part.shape[1]] = part
            (path / f"{i // chunks[0]}.{j // chunks[1]}").write_bytes(
                blosc2.compress(block, codec=codec, clevel=clevel)
            )


@pytest.mark.parametrize("cname,clevel", [("zstd", 5), ("blosc2", 9)])
def test_ocf_blosc2_v2_store_opens_without_ocf_blosc2(tmp_path, cname, clevel):
    import importlib.util

    assert importlib.util.find_spec("ocf_blosc2") is None
    data = field((70, 50), "f4")
    write_ocf_v2(tmp_path / "ocf.zarr", data, (32, 32), cname, clevel)
    np.testing.assert_array_equal(zarr.open(tmp_path / "ocf.zarr", mode="r")[:], data)


def test_ocf_blosc2_v3_layout_opens(tmp_path):
    # ocf_blosc2's v3 wrapper stored the codec as "numcodecs.blosc2" with the numcodecs config.
    data = field((40, 40), "f8")
    path = tmp_path / "ocf3.zarr"
    path.mkdir()
    (path / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "array",
                "shape": [40, 40],
                "data_type": "float64",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [20, 40]}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": 0.0,
                "attributes": {},
                "codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "numcodecs.blosc2", "configuration": {"cname": "zstd", "clevel": 5}},
                ],
            }
        )
    )
    (path / "c" / "0").mkdir(parents=True)
    for i in range(2):
        block = np.ascontiguousarray(data[20 * i : 20 * (i + 1)])
        (path / "c" / str(i) / "0").parent.mkdir(parents=True, exist_ok=True)
        (path / "c" / str(i) / "0").write_bytes(blosc2.compress(block, codec=blosc2.Codec.ZSTD))
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[:], data)
    codec = NumcodecsBlosc2Codec.from_dict(
        {"name": "numcodecs.blosc2", "configuration": {"cname": "zstd", "clevel": 5}}
    )
    assert codec.to_dict()["configuration"] == {"clevel": 5, "cname": "zstd"}


def test_numcodecs_blosc2_name_writes_too(tmp_path):
    data = field((30, 30), "i4")
    arr = zarr.create_array(
        tmp_path / "n.zarr",
        shape=data.shape,
        chunks=(16, 16),
        dtype="i4",
        compressors=[NumcodecsBlosc2Codec(cname="lz4", clevel=5)],
    )
    arr[:] = data
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "n.zarr", mode="r")[:], data)


def all_chunks(path):
    return [
        f for f in path.rglob("*") if f.is_file() and f.name != "zarr.json" and f.name[0] != "."
    ]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_bytedelta_with_default_metas_writes_chunks_python_blosc2_reads(tmp_path, zarr_format):
    data = field((70, 90), "f4")
    if zarr_format == 2:
        codec = Blosc2(filters=["shuffle", "bytedelta"])
    else:
        codec = Blosc2Codec(filters=["shuffle", "bytedelta"])
    arr = zarr.create_array(
        tmp_path / "a.zarr",
        shape=data.shape,
        chunks=(32, 32),
        dtype=data.dtype,
        zarr_format=zarr_format,
        compressors=codec,
    )
    arr[:] = data
    chunks = all_chunks(tmp_path / "a.zarr")
    assert len(chunks) == 9
    for path in chunks:
        assert b2store.chunk_info(path.read_bytes()).filters_meta[1] == 4
        assert len(blosc2.decompress2(path.read_bytes())) == 32 * 32 * 4
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "a.zarr", mode="r")[:], data)


def test_v2_metadata_of_default_settings_is_what_ocf_blosc2_reads(tmp_path):
    arr = zarr.create_array(
        tmp_path / "d.zarr",
        shape=(10,),
        chunks=(5,),
        dtype="i4",
        zarr_format=2,
        compressors=Blosc2(cname="zstd", clevel=5),
    )
    arr[:] = np.arange(10)
    meta = json.loads((tmp_path / "d.zarr" / ".zarray").read_text())
    assert meta["compressor"] == {"id": "blosc2", "cname": "zstd", "clevel": 5}


def test_v3_codec_takes_enums_and_writes_only_what_it_must():
    by_enum = Blosc2Codec(cname=Codec.LZ4, filters=[Filter.DELTA, Filter.SHUFFLE])
    by_name = Blosc2Codec(cname="lz4", filters=[{"id": "delta"}, {"id": "shuffle", "meta": 0}])
    assert by_enum == by_name
    assert by_enum.to_dict()["configuration"] == {
        "cname": "lz4",
        "clevel": 5,
        "filters": [{"id": "delta", "meta": 0}, {"id": "shuffle", "meta": 0}],
    }
    assert Blosc2Codec().to_dict()["configuration"] == {"cname": "zstd", "clevel": 5}
    # A pipeline that is the one implied by the typesize is not written.
    implied = Blosc2Codec(typesize=8, shuffle="shuffle")
    assert implied.to_dict()["configuration"] == {"cname": "zstd", "clevel": 5, "typesize": 8}
    for codec in [by_enum, implied, Blosc2Codec(typesize=1, shuffle="shuffle")]:
        assert Blosc2Codec.from_dict(codec.to_dict()) == codec
    assert Blosc2Codec(typesize=1, shuffle="shuffle").to_dict()["configuration"]["shuffle"] == (
        "shuffle"
    )
