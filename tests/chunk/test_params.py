"""ChunkParams: one normalisation per field, configurations with only non-default keys, and
encode_chunk taking it (keywords still work, and replace its fields)."""

import json

import numpy as np
import pytest

import b2store
from b2store import Codec, Filter, SplitMode
from b2store.chunk.params import ChunkParams

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 is the interop oracle")


def test_each_field_is_normalised_from_names_enums_and_ids():
    by_name = ChunkParams(
        codec="LZ4hc",
        clevel=9,
        filters=["delta", "trunc_prec"],
        filters_meta=[0, 253],
        splitmode="never",
        blocksize=4096,
        typesize=8,
        use_dict=True,
    )
    by_enum = ChunkParams(
        codec=Codec.LZ4HC,
        clevel=np.int64(9),
        filters=[Filter.DELTA, Filter.TRUNC_PREC],
        filters_meta=[0, -3],
        splitmode=SplitMode.NEVER_SPLIT,
        blocksize=4096,
        typesize=8,
        use_dict=np.bool_(True),
    )
    by_id = ChunkParams(
        codec=2,
        clevel=9,
        filters=[3, 4],
        filters_meta=(0, -3),
        splitmode=2,
        blocksize=4096,
        typesize=8,
        use_dict=1,
    )
    by_blosc2 = by_name.replace(
        codec=blosc2.Codec.LZ4HC,
        filters=[blosc2.Filter.DELTA, blosc2.Filter.TRUNC_PREC],
        filters_meta=[0, -3],
        splitmode=blosc2.SplitMode.NEVER_SPLIT,
    )
    assert by_name == by_enum == by_id == by_blosc2
    assert hash(by_name) == hash(by_id)
    assert by_name.codec is Codec.LZ4HC and by_name.splitmode is SplitMode.NEVER_SPLIT
    assert by_name.filters == (Filter.DELTA, Filter.TRUNC_PREC)
    assert by_name.filters_meta == (0, -3)  # trunc_prec's bits are int8
    assert ChunkParams(filters=["shuffle"], filters_meta=[-1]).filters_meta == (255,)
    assert ChunkParams(codec="blosc2").codec is Codec.BLOSCLZ  # ocf_blosc2's name


@pytest.mark.parametrize(
    "changes,match",
    [
        ({"clevel": 10}, "clevel"),
        ({"clevel": 5.0}, "clevel"),
        ({"clevel": True}, "clevel"),
        ({"typesize": 0}, "typesize"),
        ({"blocksize": -1}, "blocksize"),
        ({"codec": "zstdd"}, "unknown codec 'zstdd': b2store reads and writes blosclz, lz4"),
        ({"codec": Filter.SHUFFLE}, "unknown codec"),
        ({"filters": ["sharpen"]}, "unknown filter"),
        ({"filters": ["shuffle"] * 7}, "at most 6"),
        ({"filters": ["shuffle"], "filters_meta": [1, 2]}, "2 filters_meta for 1"),
        ({"filters": ["shuffle"], "filters_meta": [256]}, "filters_meta"),
        ({"splitmode": "sometimes"}, "unknown split mode"),
        ({"use_dict": "yes"}, "use_dict"),
    ],
)
def test_bad_values_are_refused(changes, match):
    with pytest.raises(ValueError, match=match):
        ChunkParams(**changes)


def test_numcodecs_config_holds_only_what_differs_from_the_defaults():
    assert ChunkParams().to_numcodecs() == {"id": "blosc2", "cname": "zstd", "clevel": 5}
    p = ChunkParams(
        codec="lz4",
        filters=["nofilter", "trunc_prec", "shuffle"],
        filters_meta=[0, 10, 0],
        splitmode="always",
        typesize=4,
        blocksize=1024,
        use_dict=True,
    )
    config = p.to_numcodecs()
    assert config == {
        "id": "blosc2",
        "cname": "lz4",
        "clevel": 5,
        "filters": ["trunc_prec", "shuffle"],
        "filters_meta": [10, 0],
        "blocksize": 1024,
        "splitmode": "always",
        "typesize": 4,
        "use_dict": True,
    }
    again = ChunkParams.from_numcodecs(json.loads(json.dumps(config)))
    assert again == p.compact() and again.to_numcodecs() == config
    with pytest.raises(TypeError, match="shuffle"):
        ChunkParams.from_numcodecs({"id": "blosc2", "shuffle": 1})


def test_zarr_config_holds_only_what_the_reader_would_not_assume():
    assert ChunkParams(typesize=4).to_zarr() == {"cname": "zstd", "clevel": 5, "typesize": 4}
    # 1-byte items are bitshuffled unless told: shuffle must then be written.
    assert ChunkParams(typesize=1).to_zarr()["shuffle"] == "shuffle"
    assert "shuffle" not in ChunkParams(typesize=1, filters=["bitshuffle"]).to_zarr()
    assert ChunkParams(filters=[]).to_zarr()["shuffle"] == "noshuffle"
    p = ChunkParams(filters=["delta", "bytedelta"], filters_meta=[0, 4], typesize=4)
    config = p.to_zarr()
    assert config["filters"] == [{"id": "delta", "meta": 0}, {"id": "bytedelta", "meta": 4}]
    for params in [p, ChunkParams(typesize=1), ChunkParams(typesize=2, filters=[]), ChunkParams()]:
        assert ChunkParams.from_zarr(params.to_zarr()) == params
    assert ChunkParams.from_zarr({}, itemsize=1).filters == (Filter.BITSHUFFLE,)
    assert ChunkParams.from_zarr({"shuffle": "noshuffle"}).filters == ()


def test_encode_chunk_takes_params_and_keywords_replace_fields():
    x = np.linspace(0, 1, 20000)
    p = ChunkParams(codec=Codec.LZ4, clevel=7, filters=[Filter.SHUFFLE])
    assert b2store.encode_chunk(x, p) == b2store.encode_chunk(
        x, codec="lz4", clevel=7, filters=["shuffle"]
    )
    assert b2store.encode_chunk(x, p, clevel=2) == b2store.encode_chunk(x, p.replace(clevel=2))
    # New filters without metas do not inherit the old filters' metas.
    q = ChunkParams(filters=["trunc_prec"], filters_meta=[20])
    assert (
        b2store.chunk_info(b2store.encode_chunk(x, q, filters=["bitshuffle"])).filters_meta[0] == 0
    )
    with pytest.raises(TypeError, match="ChunkParams"):
        b2store.encode_chunk(x, {"codec": "lz4"})


def test_encode_chunk_takes_enums_where_it_takes_names():
    x = np.arange(30000, dtype="<i8")
    assert b2store.encode_chunk(
        x, codec=Codec.BLOSCLZ, filters=[Filter.BITSHUFFLE], splitmode=SplitMode.ALWAYS_SPLIT
    ) == b2store.encode_chunk(x, codec="blosclz", filters=["bitshuffle"], splitmode="always")


@pytest.mark.parametrize("typesize", [1, 2, 4, 8, 16, 300])
@pytest.mark.parametrize(
    "filters", [["shuffle", "bytedelta"], ["bytedelta"], ["bitshuffle", "bytedelta"]]
)
def test_default_bytedelta_meta_is_the_typesize_so_python_blosc2_reads_it(typesize, filters):
    rng = np.random.default_rng(typesize)
    data = np.cumsum(rng.integers(0, 3, 40000 - 40000 % typesize, dtype=np.uint8)).astype(np.uint8)
    chunk = b2store.encode_chunk(data, typesize=typesize, filters=filters)
    info = b2store.chunk_info(chunk)
    assert info.filters_meta[len(filters) - 1] == info.typesize  # 1 for items over 255 bytes
    assert blosc2.decompress2(chunk) == data.tobytes()
    # And python-blosc2 writes the same filter slots (for 1-byte items it drops bytedelta).
    if 1 < typesize <= 255 and not info.memcpyed:
        theirs = blosc2.compress2(
            data,
            typesize=typesize,
            clevel=5,
            codec=blosc2.Codec.ZSTD,
            filters=[blosc2.Filter[f.upper()] for f in filters],
            nthreads=1,
        )
        assert theirs[16:32] == chunk[16:32]
