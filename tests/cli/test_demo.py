"""``b2store demo``: the main job, end to end, on its generated dataset."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_b2store

pytest.importorskip("xarray")


def test_demo_runs_and_its_files_are_what_it_says(tmp_path):
    result = run_b2store("demo", "--dir", tmp_path)
    assert result.code == 0, result
    assert "All checks passed." in result.out
    for step in ("1.", "2. xarray", "3. zarr", "5. b2store verify"):
        assert step in result.out
    assert "Traceback" not in result.err
    blosc2 = pytest.importorskip("blosc2")
    assert "4. python-blosc2" in result.out
    # What the demo wrote is a python-blosc2 tree of the three variables.
    t2m = blosc2.open(str(tmp_path / "climate.b2d" / "t2m.b2nd"))
    assert t2m.shape == (730, 36, 72) and t2m.dtype == np.float32
    values = t2m[:]
    assert 150 < values.min() and values.max() < 350  # kelvin near the surface
    del t2m
    anomaly = blosc2.open(str(tmp_path / "t2m_anomaly.b2nd"))[:]
    assert abs(float(anomaly.mean())) < 0.1  # an anomaly averages out
