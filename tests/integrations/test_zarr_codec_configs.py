"""The Zarr codecs' metadata: a codec named without a ``configuration`` takes all defaults, as
zarr's own codecs do; the ``b2nd`` codec given a whole Blosc2 frame as a chunk (imagecodecs'
``b2nd`` layout) says it is a frame, as the numcodecs twin does, instead of a garbage
nbytes read from the frame header's bytes."""

from __future__ import annotations

import json

import numpy as np
import pytest

import b2store
from b2store import FormatError

zarr = pytest.importorskip("zarr")

from zarr.storage import LocalStore  # noqa: E402

from b2store.integrations.numcodecs.codec import B2nd  # noqa: E402
from b2store.integrations.zarr.b2nd import B2ndCodec  # noqa: E402
from b2store.integrations.zarr.codecs import Blosc2Codec, NumcodecsBlosc2Codec  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
X = np.arange(100, dtype="<f4").reshape(10, 10)


@pytest.mark.parametrize(
    "cls, name",
    [(Blosc2Codec, "blosc2"), (B2ndCodec, "b2nd"), (NumcodecsBlosc2Codec, "numcodecs.blosc2")],
)
def test_a_codec_without_configuration_takes_the_defaults(cls, name):
    assert cls.from_dict({"name": name}) == cls.from_dict({"name": name, "configuration": {}})


def _array(tmp_path, codecs: list) -> str:
    path = tmp_path / "z.zarr"
    if codecs[0]["name"] == "b2nd":
        kw = {"serializer": B2ndCodec(), "compressors": None}
    else:
        kw = {"compressors": Blosc2Codec()}
    z = zarr.create_array(LocalStore(path), shape=(10, 10), chunks=(5, 5), dtype="<f4", **kw)
    z[:] = X
    meta = json.loads((path / "zarr.json").read_text())
    meta["codecs"] = codecs  # as another writer may have written it: names only
    (path / "zarr.json").write_text(json.dumps(meta))
    return path


# zarr's own ``bytes`` codec needs its ``endian`` for multi-byte items (zarr 3.4 refuses it): it is
# given here, so that what is tested is b2store's ``blosc2`` codec named without configuration.
@pytest.mark.parametrize(
    "codecs",
    [
        [{"name": "b2nd"}],
        [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "blosc2"}],
    ],
    ids=["b2nd", "blosc2"],
)
def test_an_array_whose_codecs_have_no_configuration_reads_back(tmp_path, codecs):
    path = _array(tmp_path, codecs)
    np.testing.assert_array_equal(zarr.open_array(LocalStore(path), mode="r")[:], X)


@pytest.mark.parametrize("selection", [np.s_[:], np.s_[0, 0], np.s_[:2, :5]])
def test_a_whole_frame_as_a_b2nd_chunk_is_named_a_frame(tmp_path, selection):
    path = _array(tmp_path, [{"name": "b2nd"}])
    frame = b2store.asarray(X[:5, :5].copy(), chunks=(5, 5), blocks=(5, 5)).schunk.to_cframe()
    (path / "c" / "0" / "0").write_bytes(frame)
    msg = "expected a Blosc chunk, found a Blosc2 frame"
    with pytest.raises(FormatError, match=msg):
        zarr.open_array(LocalStore(path), mode="r")[selection]
    with pytest.raises(FormatError, match=msg):  # the numcodecs twin says the same
        B2nd((5, 5), (5, 5), "<f4").decode(frame)


# Two machines' caches under which python-blosc2's default blocks differ in size.
_SMALL_L2 = (32 << 10, 256 << 10, 8 << 20)
_LARGE_L2 = (48 << 10, 2 << 20, 32 << 20)


@pytest.mark.parametrize(
    "coding",
    [
        {},
        {"cname": "lz4", "filters": [{"id": "ndcell", "meta": 4}]},
        pytest.param({"cname": "zfp_acc", "codec_meta": 254, "filters": []}, id="zfp_acc"),
    ],
    ids=["default", "ndcell", "zfp_acc"],
)
@pytest.mark.parametrize("caches", [(_SMALL_L2, _LARGE_L2), (_LARGE_L2, _SMALL_L2)])
def test_a_b2nd_array_without_blockshape_reads_on_a_machine_with_other_caches(
    tmp_path, monkeypatch, coding, caches
):
    """The codec's default blocks follow the writer's caches; the reader takes the blocks the
    chunk's own block size names, not its own machine's (which refused the chunks, or would
    lay them out in other places)."""
    from b2store.nd import shapes

    if coding.get("cname", "").startswith("zfp"):
        pytest.importorskip("zfpy", reason="ZFP needs the zfp extra (zfpy)")
    writer, reader = caches
    rng = np.random.default_rng(7)
    data = rng.standard_normal((16, 96, 200)).astype("f4")
    monkeypatch.setattr(shapes, "_detected_cache_sizes", lambda: writer)
    written = shapes.default_chunks_blocks(
        data.shape, 4, chunks=data.shape, **B2ndCodec(**coding).coding()
    )[1]
    monkeypatch.setattr(shapes, "_detected_cache_sizes", lambda: reader)
    read_with = shapes.default_chunks_blocks(
        data.shape, 4, chunks=data.shape, **B2ndCodec(**coding).coding()
    )[1]
    assert written != read_with  # the two machines disagree: the case this test is about

    monkeypatch.setattr(shapes, "_detected_cache_sizes", lambda: writer)
    z = zarr.create_array(
        LocalStore(tmp_path / "a.zarr"),
        shape=data.shape,
        chunks=data.shape,
        dtype="f4",
        serializer=B2ndCodec(**coding),
        compressors=None,
    )
    z[:] = data
    expected = z[:]
    monkeypatch.setattr(shapes, "_detected_cache_sizes", lambda: reader)
    again = zarr.open_array(LocalStore(tmp_path / "a.zarr"), mode="r")
    np.testing.assert_array_equal(again[:], expected)
    np.testing.assert_array_equal(again[3, 10:20, 5:9], expected[3, 10:20, 5:9])
    if not coding.get("cname", "").startswith("zfp"):
        np.testing.assert_array_equal(expected, data)
