"""The numcodecs ``blosc2`` codec passes numcodecs' own codec checks and reads ocf_blosc2 data."""

from pathlib import Path

import numpy as np
import pytest
from codec_checks import (
    check_config,
    check_encode_decode,
    check_fixtures,
    check_max_buffer_size,
    check_object_buffers_refused,
    check_repr,
)
from numcodecs import get_codec

import b2store
from b2store.integrations.numcodecs.codec import Blosc2

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")

CODECS = [
    Blosc2(),
    Blosc2(cname="lz4", clevel=1, filters=["bitshuffle"]),
    Blosc2(cname="lz4hc", clevel=9, filters=["delta", "shuffle"], splitmode="always"),
    Blosc2(cname="zlib", clevel=3, filters=[]),
    Blosc2(cname="blosclz", clevel=5, blocksize=2048),
    Blosc2(cname="zstd", clevel=0),
    Blosc2(
        cname="zstd", clevel=7, filters=["shuffle", "bytedelta"], filters_meta=[0, 0], use_dict=True
    ),
]

# numcodecs' own Blosc test arrays, smaller.
ARRAYS = [
    np.arange(1000, dtype="i4"),
    np.linspace(1000, 1001, 1000, dtype="f8"),
    np.random.default_rng(42).normal(loc=1000, scale=1, size=(100, 10)),
    np.random.default_rng(42).integers(0, 2, size=1000, dtype=bool).reshape(100, 10, order="F"),
    np.random.default_rng(42).choice([b"a", b"bb", b"ccc"], size=1000).astype("S3"),
    np.random.default_rng(42).integers(0, 2**60, size=1000, dtype="u8").view("M8[ns]"),
    np.random.default_rng(42).integers(0, 2**25, size=1000, dtype="u8").view("m8[m]"),
    np.array([np.iinfo("i8").min, np.iinfo("i8").max] * 500, dtype="M8[ns]"),
]


@pytest.mark.parametrize("codec", CODECS, ids=repr)
@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: a.dtype.str)
def test_encode_decode(codec, arr):
    check_encode_decode(arr, codec)


@pytest.mark.parametrize("codec", CODECS, ids=repr)
def test_config_round_trips_through_json_and_the_entry_point(codec):
    check_config(codec)


def test_repr():
    for statement in (
        "Blosc2(cname='lz4', clevel=3, filters=['bitshuffle'])",
        "Blosc2(cname='zstd', clevel=5)",
    ):
        check_repr(statement, {"Blosc2": Blosc2})


def test_object_buffers_and_the_size_limit():
    codec = Blosc2()
    check_object_buffers_refused(codec)
    check_max_buffer_size(codec)


def test_backwards_compatibility():
    # Golden chunks under tests/fixture/blosc2/, committed and never rewritten by a test; each
    # one is also decoded by python-blosc2, so that a fixture stands for what c-blosc2 reads.
    fixtures = Path(__file__).parents[1] / "fixture" / Blosc2.codec_id
    checked = check_fixtures(fixtures, ARRAYS, CODECS, oracle=blosc2.decompress2)
    assert checked == len(ARRAYS) * len(CODECS)


def test_top_level_name_and_registration():
    assert b2store.Blosc2 is Blosc2
    assert isinstance(get_codec({"id": "blosc2"}), Blosc2)


@pytest.mark.parametrize(
    "config",
    [
        {"id": "blosc2", "cname": "zstd", "clevel": 5},
        {"id": "blosc2", "cname": "blosc2", "clevel": 9},
    ],
)
def test_ocf_blosc2_configs_and_chunks(config):
    # ocf_blosc2 encoded with plain blosc2.compress; "blosc2" named BloscLZ.
    codec = get_codec(dict(config))
    assert codec.cname == ("blosclz" if config["cname"] == "blosc2" else "zstd")
    data = np.random.default_rng(1).normal(size=(50, 40)).astype("f4")
    chunk = blosc2.compress(data, codec=blosc2.Codec[codec.cname.upper()], clevel=config["clevel"])
    np.testing.assert_array_equal(np.frombuffer(codec.decode(chunk), "f4").reshape(50, 40), data)
    # And what the codec writes, python-blosc2 reads.
    np.testing.assert_array_equal(
        np.frombuffer(blosc2.decompress(codec.encode(data)), "f4"), data.ravel()
    )


def test_decode_reads_blosc1_chunks_too():
    from numcodecs import Blosc

    data = np.arange(5000, dtype="<i8")
    np.testing.assert_array_equal(np.frombuffer(Blosc2().decode(Blosc().encode(data)), "<i8"), data)


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="clevel"):
        Blosc2(clevel=11)
    with pytest.raises(ValueError, match="unknown codec"):
        Blosc2(cname="zstdd")
    with pytest.raises(ValueError, match="unknown filter"):
        Blosc2(filters=["sharpen"])
    with pytest.raises(ValueError, match="typesize"):
        Blosc2(typesize=0)


def test_default_settings_write_the_config_ocf_blosc2_takes():
    # ocf_blosc2's constructor is Blosc2(cname="blosc2", clevel=5): numcodecs calls it with
    # the config's keys, so any other key was a TypeError there.
    def ocf_blosc2_init(cname="blosc2", clevel=5):
        return cname, clevel

    for codec, expected in [
        (Blosc2(), {"id": "blosc2", "cname": "zstd", "clevel": 5}),
        (Blosc2(cname="lz4", clevel=9, filters=["shuffle"], filters_meta=[0]), None),
        (Blosc2(cname="blosc2", clevel=9, splitmode="auto", blocksize=0, use_dict=False), None),
    ]:
        config = codec.get_config()
        assert list(config) == ["id", "cname", "clevel"]
        assert expected is None or config == expected
        ocf_blosc2_init(**{k: v for k, v in config.items() if k != "id"})
    # Settings ocf_blosc2 cannot take are written, and only those.
    config = Blosc2(filters=["bitshuffle"], blocksize=4096, typesize=4).get_config()
    assert set(config) == {"id", "cname", "clevel", "filters", "blocksize", "typesize"}


@pytest.mark.parametrize(
    "codec",
    [
        Blosc2(filters=["shuffle", "bytedelta"]),
        Blosc2(cname="lz4", filters=["bytedelta"], filters_meta=[0]),
        Blosc2(filters=[b2store.Filter.SHUFFLE, b2store.Filter.BYTEDELTA], clevel=9),
    ],
    ids=repr,
)
@pytest.mark.parametrize("dtype", ["<i4", "<f8", "<u2"])
def test_bytedelta_chunks_with_default_metas_are_read_by_python_blosc2(codec, dtype):
    data = (np.arange(20000) * 3 % 1000).astype(dtype)
    chunk = codec.encode(data)
    assert b2store.chunk_info(chunk).filters_meta[list(codec.params.filters).index(35)] == (
        data.dtype.itemsize
    )
    np.testing.assert_array_equal(np.frombuffer(blosc2.decompress2(chunk), dtype), data)


def test_enums_are_accepted_where_names_are():
    from b2store import Codec, Filter, SplitMode

    by_enum = Blosc2(
        cname=Codec.LZ4HC,
        filters=[Filter.DELTA, Filter.BITSHUFFLE],
        splitmode=SplitMode.NEVER_SPLIT,
    )
    by_name = Blosc2(cname="lz4hc", filters=["delta", "bitshuffle"], splitmode="never")
    assert by_enum == by_name and by_enum.get_config()["cname"] == "lz4hc"
    # python-blosc2's enums carry the same names.
    by_blosc2 = Blosc2(cname=blosc2.Codec.LZ4HC, filters=[blosc2.Filter.DELTA, "bitshuffle"])
    assert by_blosc2.cname == "lz4hc" and by_blosc2.filters == ["delta", "bitshuffle"]
    with pytest.raises(ValueError, match="unknown codec"):
        Blosc2(cname=Filter.SHUFFLE)  # an enum of the wrong kind is not its integer


def test_garbage_and_frames_are_format_errors():
    codec = Blosc2()
    with pytest.raises(b2store.FormatError, match="^version"):
        codec.decode(b"hello, this is a text file and not a chunk\n" * 3)
    frame = blosc2.SChunk(chunksize=4000, data=np.arange(1000, dtype="i4")).to_cframe()
    with pytest.raises(b2store.FormatError, match="a Blosc2 frame: open it with b2store.open"):
        codec.decode(frame)
