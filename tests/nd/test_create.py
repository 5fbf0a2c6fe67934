"""The array constructors' keywords: explicit signatures, metadata only as a mapping, and the
Codec/Filter/SplitMode enums wherever names are accepted."""

import inspect
import re

import numpy as np
import pytest

import b2store
from b2store.constants import Codec, Filter, SplitMode

blosc2 = pytest.importorskip("blosc2", reason="python-blosc2 reads what b2store writes")

X = np.arange(60.0).reshape(6, 10)
CONSTRUCTORS = {
    "asarray": lambda **kw: b2store.asarray(X, **kw),
    "frombuffer": lambda **kw: b2store.frombuffer(X.tobytes(), X.shape, X.dtype, **kw),
    "zeros": lambda **kw: b2store.zeros(X.shape, X.dtype, **kw),
    "empty": lambda **kw: b2store.empty(X.shape, X.dtype, **kw),
    "full": lambda **kw: b2store.full(X.shape, 2.5, **kw),
}
KEYWORDS = {
    "chunks",
    "blocks",
    "codec",
    "clevel",
    "filters",
    "filters_meta",
    "splitmode",
    "contiguous",
    "mode",
    "meta",
    "vlmeta",
    "nthreads",
}


@pytest.mark.parametrize("name", CONSTRUCTORS)
@pytest.mark.parametrize("bad", [{"clvel": 9}, {"cname": "lz4"}, {"units": "K"}])
def test_unknown_keywords_raise(tmp_path, name, bad):
    path = tmp_path / "a.b2nd"
    with pytest.raises(TypeError, match=next(iter(bad))):
        CONSTRUCTORS[name](urlpath=path, **bad)
    assert not path.exists()


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_signatures_are_explicit(name):
    params = inspect.signature(getattr(b2store, name)).parameters
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    assert KEYWORDS <= {n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_help_documents_every_keyword_it_takes_and_no_other(name):
    # (frombuffer's help named storage_options, which it does not take, and the others
    # documented seven of their keywords by "as for asarray")
    func = getattr(b2store, name)
    entries = re.findall(r"^ *(\w+(?:, \w+)*) : ", func.__doc__, re.MULTILINE)
    documented = [n for entry in entries for n in entry.split(", ")]
    assert documented == list(inspect.signature(func).parameters)


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_an_unknown_keyword_is_worded_as_python_words_it(name):
    def native(*, clevel=5):  # (a def of its own, named as the constructor)
        pass

    native.__qualname__ = name
    with pytest.raises(TypeError) as expected:
        native(clvel=9)
    with pytest.raises(TypeError) as got:
        CONSTRUCTORS[name](clvel=9)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_vlmeta_mapping_is_what_python_blosc2_reads(tmp_path, name):
    path = tmp_path / "a.b2nd"
    attrs = {"units": "K", "scale": 0.5, "dims": ["y", "x"]}
    arr = CONSTRUCTORS[name](urlpath=path, vlmeta=attrs, meta={"mine": {"v": 1}})
    arr.close()
    theirs = blosc2.open(str(path))
    assert {k: theirs.vlmeta[k] for k in attrs} == attrs
    assert theirs.schunk.meta["mine"] == {"v": 1}
    with b2store.open(path) as ours:
        assert dict(ours.vlmeta) == attrs


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_metadata_that_is_not_a_mapping_is_refused(tmp_path, name):
    path = tmp_path / "a.b2nd"
    for bad in ({"vlmeta": [("units", "K")]}, {"vlmeta": {1: "K"}}, {"meta": "b2nd"}):
        with pytest.raises(TypeError, match="meta"):
            CONSTRUCTORS[name](urlpath=path, **bad)
    assert not path.exists()


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_bad_parameters_are_refused_before_writing(tmp_path, name):
    path = tmp_path / "a.b2nd"
    for bad, error, match in [
        ({"clevel": 42}, ValueError, "clevel must be 0 to 9, not 42"),
        ({"clevel": "9"}, TypeError, "clevel must be an int"),
        ({"codec": "lz5"}, ValueError, "unknown codec 'lz5'"),
        ({"filters": ["shufle"]}, ValueError, "unknown filter 'shufle'"),
        ({"splitmode": "sometimes"}, ValueError, "unknown split mode 'sometimes_split'"),
        ({"mode": "a"}, ValueError, "mode must be 'x' .* or 'w' .* not 'a'"),
    ]:
        with pytest.raises(error, match=match):
            CONSTRUCTORS[name](urlpath=path, **bad)
        assert not path.exists()


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_enums_wherever_names_are_accepted(tmp_path, name):
    path = tmp_path / "a.b2nd"
    arr = CONSTRUCTORS[name](
        urlpath=path,
        codec=Codec.LZ4,
        clevel=7,
        filters=[Filter.BITSHUFFLE],
        filters_meta=[0],
        splitmode=SplitMode.NEVER_SPLIT,
    )
    assert arr.schunk.codec == Codec.LZ4 and arr.schunk.filters[0] == Filter.BITSHUFFLE
    arr.close()
    theirs = blosc2.open(str(path))
    assert theirs.schunk.cparams.codec == blosc2.Codec.LZ4
    assert theirs.schunk.cparams.filters[0] == blosc2.Filter.BITSHUFFLE
    expected = {"zeros": 0, "empty": 0, "full": 2.5}.get(name)
    np.testing.assert_array_equal(theirs[...], X if expected is None else np.full_like(X, expected))
    named = CONSTRUCTORS[name](codec="lz4", clevel=7, filters=["bitshuffle"], splitmode="never")
    assert named.schunk.codec == Codec.LZ4 and named.schunk.filters == arr.schunk.filters


def test_rewriting_a_file_keeps_it_readable_until_the_new_one_is_whole(tmp_path, monkeypatch):
    # The old file's cached pages are dropped before the new one is built beside it; the
    # old file itself stays, readable, until the rename.
    from b2store.frame import staging

    path = tmp_path / "a.b2nd"
    old = np.arange(100_000, dtype="<f8")
    b2store.asarray(old, urlpath=path)
    seen = []
    built = staging.replace_path

    def replace_path(made, final):
        if final == path:  # (not the staging file's own making)
            seen.append(np.array_equal(b2store.open(final)[:], old))  # still the old array
        built(made, final)

    monkeypatch.setattr(staging, "replace_path", replace_path)
    monkeypatch.setattr(b2store.nd.create, "replace_path", replace_path)
    new = old[::-1].copy()
    b2store.asarray(new, urlpath=path, mode="w")
    assert seen == [True]
    np.testing.assert_array_equal(b2store.open(path)[:], new)
    assert [p.name for p in tmp_path.iterdir()] == ["a.b2nd"]  # no staging file left
    # A directory or a missing path has no pages to drop: nothing is raised.
    staging._forget_cached(tmp_path)
    staging._forget_cached(tmp_path / "missing")
