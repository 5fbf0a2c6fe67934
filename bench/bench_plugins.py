"""c-blosc2's plugins (ZFP, NDLZ, NDCELL, NDMEAN): b2store against python-blosc2, one thread.

Each case writes one array in memory with the plugin (``b2store.asarray`` and
``blosc2.asarray``, the same chunks, blocks and settings), and reads a file of it back whole
(``arr[...]`` of each one's own file, opened once, in /dev/shm where there is one, so the page
cache holds it), interleaved round by round on the same data in the same run.
Reported: median GB/s of uncompressed data and the ratio b2store / python-blosc2 (above 1:
b2store is faster). ZFP is the zfp library in both (zfpy here, c-blosc2's own build there);
NDLZ, NDCELL and NDMEAN are b2store's Cython kernels against c-blosc2's C. numcodecs has none
of these codecs. Before timing, each case checks that python-blosc2 reads b2store's array as
it reads its own.

    python bench/bench_plugins.py [--repeat N] [--quick] [--json PATH]
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import blosc2
import numpy as np
from _common import gmean, parse_args, run_case
from _common import versions as common_versions

import b2store
from b2store.chunk import native


def _field(shape, dtype, seed=0) -> np.ndarray:
    """A smooth field with a little noise, as a model or satellite grid is."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 4, n) for n in shape], indexing="ij")
    field = sum(np.sin((k + 1) * g) for k, g in enumerate(grids))
    field = field + rng.normal(0, 1e-3, shape)
    if np.dtype(dtype).kind == "u":
        field = (field - field.min()) / (field.max() - field.min()) * 255
    return field.astype(dtype)


NOFILTER = [blosc2.Filter.NOFILTER]
SHUFFLE = [blosc2.Filter.NOFILTER] * 5 + [blosc2.Filter.SHUFFLE]

# name, data (shape, dtype), chunks, blocks, python-blosc2 cparams
CASES = [
    ("ZFP_ACC 1e-3 f8 2-d", ((2048, 2048), "f8"), (512, 2048), (64, 256),
     {"codec": blosc2.Codec.ZFP_ACC, "codec_meta": 253, "filters": NOFILTER}),
    ("ZFP_PREC 20 f4 3-d", ((64, 256, 512), "f4"), (16, 256, 512), (8, 32, 64),
     {"codec": blosc2.Codec.ZFP_PREC, "codec_meta": 20, "filters": NOFILTER}),
    ("ZFP_RATE 25% f4 2-d", ((4096, 2048), "f4"), (1024, 2048), (128, 128),
     {"codec": blosc2.Codec.ZFP_RATE, "codec_meta": 25, "filters": NOFILTER}),
    ("NDLZ 4 u1 2-d", ((4096, 4096), "u1"), (1024, 4096), (128, 256),
     {"codec": blosc2.Codec.NDLZ, "codec_meta": 4, "filters": NOFILTER}),
    ("NDLZ 8 u1 2-d", ((4096, 4096), "u1"), (1024, 4096), (128, 256),
     {"codec": blosc2.Codec.NDLZ, "codec_meta": 8, "filters": NOFILTER}),
    ("NDLZ 4 f4 2-d split", ((2048, 2048), "f4"), (512, 2048), (64, 256),
     {"codec": blosc2.Codec.NDLZ, "codec_meta": 4, "filters": SHUFFLE,
      "splitmode": blosc2.SplitMode.ALWAYS_SPLIT}),
    ("NDCELL 4 + zstd f4 3-d", ((64, 256, 512), "f4"), (16, 256, 512), (8, 32, 64),
     {"codec": blosc2.Codec.ZSTD, "clevel": 1, "filters": [blosc2.Filter.NDCELL],
      "filters_meta": [4]}),
    ("NDMEAN 4 + lz4 f4 2-d", ((4096, 2048), "f4"), (1024, 2048), (128, 128),
     {"codec": blosc2.Codec.LZ4, "clevel": 5, "filters": [blosc2.Filter.NDMEAN],
      "filters_meta": [4]}),
]  # fmt: skip


def _b2store_kwargs(cparams: dict) -> dict:
    kw = {"codec": cparams["codec"].name.lower(), "clevel": cparams.get("clevel", 5)}
    kw["filters"] = [f.value for f in cparams["filters"]]
    kw["filters_meta"] = list(cparams.get("filters_meta", [0] * len(cparams["filters"])))
    if "codec_meta" in cparams:
        kw["codec_meta"] = cparams["codec_meta"]
    if "splitmode" in cparams:
        kw["splitmode"] = cparams["splitmode"].value
    return kw


def contenders(data, chunks, blocks, cparams, where: Path):
    kw = _b2store_kwargs(cparams)
    cp = dict(cparams, nthreads=1)

    def mine(urlpath=None):
        return b2store.asarray(data, urlpath, chunks=chunks, blocks=blocks, nthreads=1, **kw)

    def theirs(urlpath=None):
        return blosc2.asarray(data, chunks=chunks, blocks=blocks, cparams=cp, urlpath=urlpath,
                              mode="w")  # fmt: skip

    mine(where / "mine.b2nd").close()
    theirs(str(where / "theirs.b2nd"))
    a = b2store.open(where / "mine.b2nd")
    b = blosc2.open(str(where / "theirs.b2nd"), mode="r")
    other = blosc2.open(str(where / "mine.b2nd"), mode="r")
    want = b[...]
    assert np.array_equal(other[...], a[...], equal_nan=True), "python-blosc2 reads b2store's"
    assert np.array_equal(a[...][tuple(slice(0, c) for c in chunks)],
                          want[tuple(slice(0, c) for c in chunks)], equal_nan=True)  # fmt: skip
    encode = {"b2store": mine, "blosc2": theirs}
    decode = {"b2store": lambda: a[...], "blosc2": lambda: b[...]}
    return encode, decode, a.schunk.cbytes, b.schunk.cbytes


def main() -> None:
    args, repeat = parse_args(__doc__, 7, "3 rounds, first three cases")
    blosc2.set_nthreads(1)
    native.set_nthreads(1)  # b2store reads arrays with the cores by default
    versions = common_versions()
    import zfpy

    versions["zfpy"] = zfpy.__version__ if hasattr(zfpy, "__version__") else "installed"
    print(" ".join(f"{k} {v}" for k, v in versions.items()) + f"; {repeat} rounds, 1 thread\n")
    cases = CASES[:3] if args.quick else CASES
    cols = ["case", "MB", "encode b2store GB/s", "encode blosc2 GB/s", "encode ratio"]
    cols += ["decode b2store GB/s", "decode blosc2 GB/s", "decode ratio", "size vs blosc2"]
    print("| " + " | ".join(cols) + " |")
    print("|---|" + "|".join("---:" for _ in cols[1:]) + "|")
    rows = []
    shm = Path("/dev/shm")
    tmp = tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None)
    for name, (shape, dtype), chunks, blocks, cparams in cases:
        data = _field(shape, dtype)
        encode, decode, mine_bytes, their_bytes = contenders(
            data, chunks, blocks, cparams, Path(tmp.name)
        )
        enc = run_case(encode, data.nbytes, repeat)
        dec = run_case(decode, data.nbytes, repeat)
        row = {
            "case": name,
            "mb": data.nbytes / 1e6,
            "encode": enc,
            "decode": dec,
            "encode_ratio": enc["b2store"] / enc["blosc2"],
            "decode_ratio": dec["b2store"] / dec["blosc2"],
            "size_ratio": mine_bytes / their_bytes,
        }
        rows.append(row)
        print(
            f"| {name} | {row['mb']:.0f} | {enc['b2store']:.3f} | {enc['blosc2']:.3f} | "
            f"{row['encode_ratio']:.2f} | {dec['b2store']:.3f} | {dec['blosc2']:.3f} | "
            f"{row['decode_ratio']:.2f} | {row['size_ratio']:.3f} |",
            flush=True,
        )
    print(
        f"\ngeometric mean: encode {gmean([r['encode_ratio'] for r in rows]):.2f}x, "
        f"decode {gmean([r['decode_ratio'] for r in rows]):.2f}x of python-blosc2"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": versions, "repeat": repeat, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
