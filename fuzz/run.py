"""Run one b2store fuzz target under atheris (coverage-guided, libFuzzer), seeded from the corpus.

    python fuzz/run.py --target cframe --runs 1000000

The targets are in ``tests/hardening/fuzz_targets.py`` (shared with the quick runs in the test
suite). A target may end normally or raise a B2StoreError; anything else is a crash, which
libFuzzer saves as ``crash-*`` in ``--artifacts``. Each input gets ``--timeout`` seconds
(libFuzzer's per-input timeout: a hang is a finding) and the process ``--rss-mb`` of memory.
The working corpus (``fuzz/work/<target>/``, not committed) grows with the inputs that reached
new code; libFuzzer's closing ``stat::number_of_executed_units`` is the count of inputs run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--timeout", type=int, default=10, help="seconds per input")
    parser.add_argument("--rss-mb", type=int, default=2048)
    parser.add_argument("--max-len", type=int, default=1 << 20)
    parser.add_argument(
        "--corpus",
        default=os.environ.get("B2STORE_CORPUS", str(ROOT.parent / "shared" / "corpus")),
        help="the reference corpus (seeds); $B2STORE_CORPUS or ../shared/corpus",
    )
    parser.add_argument("--work", default=str(HERE / "work"))
    parser.add_argument("--artifacts", default=str(HERE / "artifacts"))
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="record Python exceptions other than B2StoreError (one input per kind) and go "
        "on, instead of stopping at the first; crashes of the process, hangs and memory "
        "overruns still stop the run",
    )
    args, extra = parser.parse_known_args()

    import atheris

    with atheris.instrument_imports(include=["b2store"]):
        # The modules b2store imports lazily, imported here so that they are instrumented.
        from hardening import fuzz_targets

        import b2store.frame.trailer
        import b2store.frame.vlmeta_codec
        import b2store.integrations.numcodecs.codec
        import b2store.integrations.zarr.b2nd
        import b2store.integrations.zarr.store
        import b2store.nd.meta
        import b2store.tree  # noqa: F401

    name = args.target
    target = fuzz_targets.TARGETS[name]
    work = Path(args.work) / name
    work.mkdir(parents=True, exist_ok=True)
    artifacts = Path(args.artifacts) / name
    artifacts.mkdir(parents=True, exist_ok=True)
    if not any(work.iterdir()):
        if not Path(args.corpus).is_dir():
            sys.exit(f"no corpus at {args.corpus}: pass --corpus or set B2STORE_CORPUS")
        for n, seed in enumerate(fuzz_targets.seeds(name, Path(args.corpus))):
            (work / f"seed-{n:04d}").write_bytes(seed[: args.max_len])

    from b2store.errors import B2StoreError

    seen: set[str] = set()

    import warnings

    warnings.simplefilter("ignore")  # expected on hostile metadata, and costly

    def one(data: bytes) -> None:
        try:
            target(data)
        except B2StoreError:
            pass
        except Exception as exc:  # a finding: anything but a B2StoreError
            if not args.keep_going:
                raise
            # Keep going (a long run must reach its count), saving one input per kind of
            # failure: the exception type and where it was raised.
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            sig = f"{type(exc).__name__}@{Path(tb.filename).name}:{tb.lineno}"
            if sig not in seen:
                seen.add(sig)
                digest = hashlib.sha1(data).hexdigest()[:12]
                (artifacts / f"finding-{digest}").write_bytes(data)
                text = "".join(traceback.format_exception(exc))
                (artifacts / f"finding-{digest}.txt").write_text(f"{sig}\n{text}")
                sys.stderr.write(f"FINDING {sig} -> finding-{digest}\n{text}\n")

    argv = [
        sys.argv[0],
        str(work),
        f"-runs={args.runs}",
        f"-timeout={args.timeout}",
        f"-rss_limit_mb={args.rss_mb}",
        f"-max_len={args.max_len}",
        f"-artifact_prefix={artifacts}/",
        "-print_final_stats=1",
        *extra,
    ]

    atheris.Setup(argv, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
