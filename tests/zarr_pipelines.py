"""zarr's codec pipelines as a fixture (tests/conftest.py makes it every test's).

zarr 3.4 has two codec pipelines: the default ``BatchedCodecPipeline`` (async, one coroutine
per chunk) and the opt-in ``FusedCodecPipeline``, which reads and writes through a store's
synchronous methods (``get_sync``...) and a codec's ``_decode_partial_sync``; b2store has its
own (``B2storeCodecPipeline``: a ``B2ndStore`` array's basic reads as one box). A module
that says ``pytestmark = pytest.mark.usefixtures("zarr_pipeline")`` runs each of its tests
under all three; the fused run skips, saying why, on a zarr that has no such pipeline.
"""

from __future__ import annotations

import pytest

BATCHED = "zarr.core.codec_pipeline.BatchedCodecPipeline"
FUSED = "zarr.core.codec_pipeline.FusedCodecPipeline"
B2STORE = "b2store.integrations.zarr.pipeline.B2storeCodecPipeline"


def _has_fused_pipeline() -> bool:
    try:
        from zarr.core.codec_pipeline import FusedCodecPipeline  # noqa: F401
    except ImportError:
        return False
    return True


# Module scope: the pipeline is set once per module and parameter (a function-scoped fixture
# would trouble hypothesis' @given tests), and the tests run grouped by pipeline.
@pytest.fixture(scope="module", params=["batched", "fused", "b2store"])
def zarr_pipeline(request):
    """The codec pipeline zarr uses for arrays opened in the test: its name."""
    zarr = pytest.importorskip("zarr")
    if request.param in ("batched", "b2store"):
        with zarr.config.set(
            {"codec_pipeline.path": {"batched": BATCHED}.get(request.param, B2STORE)}
        ):
            yield request.param
        return
    if not _has_fused_pipeline():
        pytest.skip(
            f"zarr {zarr.__version__} has no FusedCodecPipeline: only its default pipeline runs"
        )
    with zarr.config.set({"codec_pipeline.path": FUSED}):
        yield "fused"
