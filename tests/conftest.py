"""Test-wide set-up: the tests in a worker per CPU, hypothesis profiles, the run's local S3
server, and a guard that the tests exercise the installed package rather than the source tree
when CI asks for that."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest
from helpers import CORPUS, corpus_absent_reason, holds_absent_corpus
from hypothesis import HealthCheck, settings
from zarr_pipelines import zarr_pipeline  # noqa: F401 (a fixture: the codec pipelines)

import b2store

# "dev" keeps a local run quick; CI (CI=true) runs the thorough profile. Tests that set their
# own max_examples keep them; the profiles set the default for the rest and the deadline.
settings.register_profile(
    "dev", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)

SOURCE_TREE = Path(__file__).resolve().parents[1] / "b2store"

# Child interpreters the tests start (`python -c`, `python -m b2store.cli`, dask and
# distributed workers) must import b2store as installed, not from the checkout that happens
# to be their working directory: `-c` and `-m` put the working directory first on sys.path.
os.environ["PYTHONSAFEPATH"] = "1"
# ...and where this run imports this checkout (an editable install, or a worktree put first on
# sys.path), the children import the same checkout, not whichever one the venv points at.
if Path(b2store.__file__).resolve().parent == SOURCE_TREE:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(SOURCE_TREE.parent), os.environ.get("PYTHONPATH")) if p
    )


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Tests run in parallel unless told otherwise: pytest-xdist's ``-n auto`` (a worker per
    CPU, or ``PYTEST_XDIST_AUTO_NUM_WORKERS``) with ``--dist worksteal`` (each worker starts on
    its own share of the tests in their order, and takes from the other's when it runs out:
    the few tests of many seconds do not all end up at the end of one). ``-n 0`` (or ``-p
    no:xdist``) runs the tests in this process, and so do ``--pdb`` and ``--trace``, which need
    this process's terminal."""
    option = config.option
    if hasattr(config, "workerinput") or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # an xdist worker: it runs its share here (else each would start workers)
    if getattr(option, "numprocesses", "absent") is not None:
        return  # (-n given, or no xdist: the run is as asked)
    if option.usepdb or option.trace:
        option.numprocesses = 0
        return
    option.numprocesses = "auto"
    if option.dist == "no":
        option.dist = "worksteal"


def pytest_report_header(config):
    return f"b2store {b2store.__version__} imported from {Path(b2store.__file__).parent}"


def pytest_collection_modifyitems(config, items):
    # A test parametrized over the cases of an absent corpus folder skips and says where the
    # corpus was looked for (pytest would say "got empty parameter set").
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec and any(holds_absent_corpus(v) for v in callspec.params.values()):
            item.add_marker(pytest.mark.skip(reason=corpus_absent_reason(CORPUS)))


def pytest_sessionstart(session):
    # CI always has ../shared and python-blosc2: there, a missing corpus or oracle is a broken
    # run, not a reason to skip the interop tests.
    if os.environ.get("CI"):
        if not (CORPUS / "generated" / "manifest.json").is_file():
            raise pytest.UsageError(corpus_absent_reason(CORPUS) + ": CI must have it")
        try:
            import blosc2  # noqa: F401 (the oracle is there)
        except ImportError as exc:
            message = f"python-blosc2, the interop oracle, is missing: {exc}"
            raise pytest.UsageError(message) from exc
    _serial_oracle()
    # .ci/run installs the built wheel and sets this: a test must never pass by importing
    # the checkout (which, in a clean clone, has no compiled kernels anyway).
    if os.environ.get("B2STORE_REQUIRE_INSTALLED"):
        where = Path(b2store.__file__).resolve().parent
        if where == SOURCE_TREE:
            raise RuntimeError(
                f"b2store was imported from the source tree {where}, not from the installed wheel"
            )


def _serial_oracle() -> None:
    """The oracle decodes with one thread unless a test asks for more: python-blosc2 4.14.1
    with two threads decodes chunks with the DELTA filter after a shuffle wrongly, at random
    (its own chunks too; bitshuffle+DELTA, typesize 300, 30,000-byte zlib blocks: 25 of 40
    decodes), which failed interop tests now and then although b2store's decoding was right."""
    try:
        import blosc2
    except ImportError:
        return
    blosc2.set_nthreads(1)


@pytest.fixture(scope="session")
def s3():
    """moto's S3 API on localhost (tests/s3server.py), one for this process's whole run: it
    took 0.2 s to start and its first clients 0.3 s more, once per module. Each test makes a
    bucket of its own (``s3.new_bucket()``); what a test sets on the server (a delay, stalls)
    and what it counted are put back after it (``pytest_runtest_teardown`` below)."""
    pytest.importorskip(
        "moto.server", reason="the local S3 API is moto's server (the test-s3 extra)"
    )
    from s3server import S3Server

    server = S3Server()
    _S3.append(server)
    yield server
    _S3.clear()
    server.stop()


_S3: list = []  # the run's S3 server, once a test asked for it


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    try:
        return (yield)
    finally:
        for server in _S3:
            server.tidy()


@pytest.fixture
def run_seed(request) -> int:
    """The seed of a randomised run (fuzz mutants, kill times): ``B2STORE_SEED`` when set,
    else one fixed per test, and printed, so that a failure runs again with the same inputs
    (``B2STORE_SEED=<seed> pytest <test>``; other seeds explore further)."""
    given = os.environ.get("B2STORE_SEED")
    seed = int(given) if given else zlib.crc32(request.node.nodeid.encode())
    print(f"seed {seed}: B2STORE_SEED={seed} runs {request.node.nodeid} again")
    return seed


@pytest.fixture
def native_on(monkeypatch):
    """The GIL-free block loop on for one test, whatever ``B2STORE_NATIVE`` says: the tests of
    that loop compare it with the Python path, so they run in both settings, never skip."""
    from b2store.chunk import native

    if native._decode_blocks is None:
        pytest.fail("this install has no compiled block loop (b2store.chunk._decode_blocks)")
    # Restored after the test, so that the setting the run was given holds for the others.
    monkeypatch.setitem(native._state, "on", native._state["on"])
    monkeypatch.setitem(native._state, "ready", False)
    monkeypatch.setenv("B2STORE_NATIVE", "1")
    assert native.enabled()


@pytest.fixture(autouse=True)
def _zarrs_default_pipeline(request):
    """Each test runs under the codec pipeline it asks for: zarr's default unless it takes the
    ``zarr_pipeline`` fixture (or sets one itself). The setting is process-wide, and a worker
    once ran a test under b2store's pipeline that a module-scoped ``zarr_pipeline`` of another
    module had left set (seen once under xdist's work stealing, not in sequence)."""
    if "zarr_pipeline" in request.fixturenames:
        yield
        return
    import zarr

    with zarr.config.set({"codec_pipeline.path": _ZARR_DEFAULT_PIPELINE}):
        yield


_ZARR_DEFAULT_PIPELINE = "zarr.core.codec_pipeline.BatchedCodecPipeline"
