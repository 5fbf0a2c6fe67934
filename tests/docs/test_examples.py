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
