"""NumPy 2's StringDType given to any array writer is an UnsupportedError naming the dtype (it
once was a FormatError, whose meaning is corrupt bytes read); Python objects stay a TypeError.
Nothing is left on disk by the refusal. (``to_b2nd`` writes StringDType variables as
fixed-width strings: tests/integrations/test_xarray_strings.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import b2store
from b2store import FormatError, UnsupportedError

SD = getattr(np.dtypes, "StringDType", None)
pytestmark = [
    pytest.mark.skipif(SD is None, reason="NumPy 2's StringDType"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


def _writers(tmp_path):
    sd = SD()
    x = np.array(["a", "bb", "ccc"], dtype=sd)
    out = {
        "asarray": lambda: b2store.asarray(x),
        "asarray-file": lambda: b2store.asarray(x, urlpath=tmp_path / "a.b2nd"),
        "asarray-2d": lambda: b2store.asarray(x.reshape(3, 1), urlpath=tmp_path / "a.b2nd"),
        "zeros": lambda: b2store.zeros((3,), dtype=sd, urlpath=tmp_path / "z.b2nd"),
        "empty": lambda: b2store.empty((3,), dtype=sd),
        "full": lambda: b2store.full((3,), "a", dtype=sd),
        "frombuffer": lambda: b2store.frombuffer(b"abc", (3,), sd),
        "encode_chunk": lambda: b2store.encode_chunk(x),
    }
    try:
        from b2store.integrations.numcodecs.codec import B2nd, Blosc2

        out["numcodecs-blosc2"] = lambda: Blosc2().encode(x)
        out["numcodecs-b2nd"] = lambda: B2nd((3,), (3,), "<U3").encode(x)
        out["numcodecs-b2nd-dtype"] = lambda: B2nd((3,), (3,), sd)
    except ImportError:
        pass
    try:
        import zarr

        from b2store.integrations.zarr.store import B2ndStore

        out["zarr-store"] = lambda: zarr.create_array(
            B2ndStore(tmp_path / "s.b2nd", mode="w"), shape=(3,), dtype=sd
        )
    except ImportError:
        pass
    return out


WRITERS = sorted(_writers(None))


@pytest.mark.parametrize("writer", WRITERS)
def test_string_dtype_is_unsupported_in_every_writer(tmp_path, writer):
    with pytest.raises(UnsupportedError, match=r"unsupported dtype StringDType\(\)") as exc:
        _writers(tmp_path)[writer]()
    assert not isinstance(exc.value, FormatError)
    assert exc.value.feature == "dtype"
    assert not [p for p in tmp_path.iterdir() if p.name != "s.b2nd"]  # nothing left behind


def test_object_arrays_stay_a_type_error():
    with pytest.raises(TypeError, match="fixed-size items, not object"):
        b2store.asarray(np.array([1, None]))
    with pytest.raises(TypeError, match="fixed-size items, not object"):
        b2store.encode_chunk(np.array([1, None]))


def test_string_dtype_values_set_into_a_fixed_width_array_follow_numpy(tmp_path):
    a = b2store.asarray(np.array(["xx", "yy", "zz"]), urlpath=tmp_path / "u.b2nd")
    a[:] = np.array(["a", "bb", "ccc"], dtype=SD())
    ref = np.array(["xx", "yy", "zz"])
    ref[:] = np.array(["a", "bb", "ccc"], dtype=SD())
    assert a[:].tolist() == ref.tolist()
