"""docs/install.md tells the truth about pyproject.toml: the dependencies it names and the
extras it lists, each with the packages it adds."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


@pytest.fixture(scope="module")
def project():
    path = ROOT / "pyproject.toml"
    if not path.is_file():
        pytest.skip(f"no pyproject.toml beside the tests ({path}): not a checkout")
    return tomllib.loads(path.read_text())["project"]


@pytest.fixture(scope="module")
def page():
    return (ROOT / "docs" / "install.md").read_text()


def test_every_extra_is_listed_with_the_packages_it_adds(project, page):
    rows = dict(re.findall(r"^\| `([\w-]+)` \| ([^|]+) \|", page, re.M))
    extras = project["optional-dependencies"]
    assert set(rows) == set(extras)
    for extra, requirements in extras.items():
        listed = rows[extra].lower()
        for requirement in requirements:
            assert _name(requirement) in listed, f"extra {extra!r}: {_name(requirement)} unlisted"


def test_every_core_dependency_is_named(project, page):
    paragraph = page[page.index("b2store depends on") :].split("\n\n", 1)[0].lower()
    for requirement in project["dependencies"]:
        assert _name(requirement) in paragraph, _name(requirement)
