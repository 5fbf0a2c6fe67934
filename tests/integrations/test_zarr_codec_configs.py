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
