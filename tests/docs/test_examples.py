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
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
NOT_RUN = re.compile(r"<!--\s*not run:[^>]*-->\s*\Z")
RUN_COMMANDS = ("b2store", "python")
# Pages whose examples need more than a test should spend: the reason is given.
SLOW = {
    "xarray.md": "its workflow writes four years of daily 1 degree data",
}


def _pages() -> list[Path]:
    if not DOCS.is_dir():
        return []
    return sorted(
        p
        for p in DOCS.rglob("*.md")
        if any(m.group(1) in ("python", "console") for m in FENCE.finditer(p.read_text()))
    )


def _param(page: Path):
    marks = [pytest.mark.slow] if page.name in SLOW else []
    return pytest.param(page, id=page.relative_to(DOCS).as_posix(), marks=marks)


def test_docs_are_found():
    # A moved docs folder must not turn this module into a silent no-op.
    assert any(p.name == "quickstart.md" for p in _pages()), DOCS


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
    text = page.read_text()
    for match in FENCE.finditer(text):
        lang, code = match.group(1), match.group(2)
        if NOT_RUN.search(text[: match.start()]):
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

    from b2store.nd import shapes

    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(shapes, "_detected_cache_sizes", lambda: caches)
    monkeypatch.chdir(tmp_path)
    page = DOCS / "codecs.md"
    blocks = [m.group(2) for m in FENCE.finditer(page.read_text()) if "zfp_acc" in m.group(2)]
    assert len(blocks) == 1, "codecs.md's ZFP example moved: point this test at it"
    exec(compile(blocks[0], "codecs.md", "exec"), {"__name__": "docs_codecs"})
    assert float(capsys.readouterr().out) < 3  # zfp_rate at 25 %: an error of a few kelvin
