"""Randomised tests draw from a seed that a failure can be run again with: a fixed one, or
the ``run_seed`` fixture's (``B2STORE_SEED``, printed), never the clock or the system's
entropy, whose failures cannot be reproduced."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# A seed from the clock, or a generator seeded from the system's entropy.
UNSEEDED = re.compile(
    r"seed\s*=\s*int\(\s*time\.|time\.time_ns\(|"
    r"default_rng\(\s*\)|random\.Random\(\s*\)|random\.seed\(\s*\)|"
    r"RandomState\(\s*\)|SeedSequence\(\s*\)"
)


def _unseeded(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if UNSEEDED.search(line)]


@pytest.mark.parametrize(
    "line",
    [
        "assert fuzz_for(name, 30.0, seed=int(time.time())) > 0",
        "run_kills(tmp_path, kind, kills=kills, seed=int( time.monotonic()))",
        "rng = np.random.default_rng()",
        "rng = random.Random()",
        "random.seed()",
        "seed = time.time_ns()",
    ],
)
def test_the_pattern_sees_a_seed_from_the_clock(line):
    assert _unseeded(f"x = 1\n    {line}\n") == [line]


def test_no_test_seeds_from_the_clock():
    found = {
        str(p.relative_to(TESTS)): hits
        for p in sorted(TESTS.rglob("*.py"))
        if p.name != "test_seeds.py" and (hits := _unseeded(p.read_text("utf-8")))
    }
    assert found == {}, f"seed these from a fixed value or the run_seed fixture: {found}"
