"""The documentation's examples run: every ```python block of a page (in ``docs/`` and its
folders, ``docs/workflows/`` among them), in order, in one namespace, in a fresh directory;
and, in the same directory, every ``$ b2store ...`` and ``$ python ...`` line of its
```console blocks (install lines such as ``pip install`` are not run). A page whose example
breaks fails here, so the docs cannot rot.

A block that only illustrates (it names files of the reader's own, a remote host, a
cluster) says so with an HTML comment on the line before its fence, which the page does not
show::

    <!-- not run: opens the reader's own files -->
    ```python

A block that needs an optional package names it (and the extra that brings it) the same way;
where the package is absent the block is passed over, every other block of the page still
runs, and the page's test is then skipped with the reason::

    <!-- needs: zfpy (the zfp extra) -->
    ```python

The README's example is the first a new user runs: it runs here as a page of its own.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
NOT_RUN = re.compile(r"<!--\s*not run:[^>]*-->\s*\Z")
NEEDS = re.compile(r"<!--\s*needs:\s*([\w.]+)\s*(?:\(([^)]*)\))?\s*-->\s*\Z")
RUN_LANGUAGES = ("python", "console")
# Fences that only show text (diagrams, output, file layouts): never run.
SHOWN_LANGUAGES = ("", "text")
# The pages with nothing to run, each checked to have none: a page that gains an example
# (or a fence in a language this runner does not know) fails test_every_page_is_covered.
NO_EXAMPLES = {
    "api.md",
    "architecture.md",
    "chunks.md",
    "encoding.md",
    "formats.md",
    "index.md",
    "performance.md",
}
RUN_COMMANDS = ("b2store", "python")
# Pages whose examples need more than a test should spend: the reason is given.
SLOW = {
    "xarray.md": "its workflow writes four years of daily 1 degree data",
}


def _all_pages() -> list[Path]:
    if not DOCS.is_dir():
        return []
    return sorted(DOCS.rglob("*.md")) + ([README] if README.is_file() else [])


def _runs(page: Path) -> bool:
    return any(m.group(1) in RUN_LANGUAGES for m in FENCE.finditer(page.read_text()))


def _pages() -> list[Path]:
    return [p for p in _all_pages() if _runs(p)]


def _name(page: Path) -> str:
    return page.name if page == README else page.relative_to(DOCS).as_posix()


def _param(page: Path):
    marks = [pytest.mark.slow] if page.name in SLOW else []
    return pytest.param(page, id=_name(page), marks=marks)


def test_docs_are_found():
    # A moved docs folder must not turn this module into a silent no-op.
    assert any(p.name == "quickstart.md" for p in _pages()), DOCS


def test_every_page_is_covered():
    """Every page of docs/ (and the README) has its examples run, or is listed as having
    none; and no fence is in a language this runner passes over unknowingly (``py``,
    ``pycon``, ``bash``...: its example would never run)."""
    if not DOCS.is_dir():
        pytest.skip(f"no docs/ beside the tests ({DOCS}): not a checkout")
    unrun = {_name(p) for p in _all_pages() if not _runs(p)}
    assert unrun == NO_EXAMPLES
    known = RUN_LANGUAGES + SHOWN_LANGUAGES
    odd = [
        (_name(p), m.group(1))
        for p in _all_pages()
        for m in FENCE.finditer(p.read_text())
        if m.group(1) not in known
    ]
    assert odd == []
    assert {"README.md", "quickstart.md", "codecs.md", "workflows/append.md"} <= {
        _name(p) for p in _pages()
    }


def _run_console(block: str, cwd: Path, page: str) -> None:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for line in block.splitlines():
        if not line.startswith("$ "):
            continue  # output shown in the page
        command = line[2:]
        if command.split()[0] not in RUN_COMMANDS:
            continue
        proc = subprocess.run(
            command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, f"{page}: `{command}` failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.parametrize("page", [_param(p) for p in _pages()])
def test_page_examples_run(page: Path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    ran = 0
    missing = []
    text = page.read_text()
    for match in FENCE.finditer(text):
        lang, code = match.group(1), match.group(2)
        before = text[: match.start()]
        if NOT_RUN.search(before):
            continue
        needs = NEEDS.search(before)
        if needs and importlib.util.find_spec(needs.group(1)) is None:
            line = before.count("\n") + 2
            what = f"{needs.group(1)} ({needs.group(2)})" if needs.group(2) else needs.group(1)
            missing.append(f"the example at {page.name}:{line} needs {what}")
            continue
        if lang == "python":
            line = text[: match.start()].count("\n") + 2
            compiled = compile(code, f"{page.name}:{line}", "exec")
            exec(compiled, namespace)  # the documentation's own example code
            ran += 1
        elif lang == "console":
            _run_console(code, tmp_path, page.name)
            ran += 1
    capsys.readouterr()
    assert ran
    if missing:  # (every other example of the page ran, and passed)
        pytest.skip("; ".join(missing) + ", which is not installed")


# Machines whose caches make python-blosc2 pick blocks ZFP cannot code for the ZFP example's
# (60, 90, 180) float32 (a quarter of L2 on x86_64: (3, 90, 180) at 768 KiB), and one where
# its blocks do: the example holds on all of them (issue 35).
CACHES = [
    (32 << 10, 256 << 10, 8 << 20),
    (48 << 10, 768 << 10, 32 << 20),
    (48 << 10, 1 << 20, 32 << 20),
]


@pytest.mark.parametrize("caches", CACHES, ids=lambda c: f"L2={c[1] >> 10}K")
def test_the_zfp_example_on_other_caches(caches, tmp_path, monkeypatch, capsys):
    import platform

    pytest.importorskip("zfpy", reason="the ZFP example needs zfpy (the zfp extra)")

    from b2store.nd import shapes

    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(shapes, "_detected_cache_sizes", lambda: caches)
    monkeypatch.chdir(tmp_path)
    page = DOCS / "codecs.md"
    blocks = [m.group(2) for m in FENCE.finditer(page.read_text()) if "zfp_acc" in m.group(2)]
    assert len(blocks) == 1, "codecs.md's ZFP example moved: point this test at it"
    exec(compile(blocks[0], "codecs.md", "exec"), {"__name__": "docs_codecs"})
    assert float(capsys.readouterr().out) < 3  # zfp_rate at 25 %: an error of a few kelvin
