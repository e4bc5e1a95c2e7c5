"""``nadaraya fit --span --robust``: LOWESS from the command line, saved and loaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("typer")
from pyarrow import csv  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import nadaraya  # noqa: E402
from nadaraya.cli import app  # noqa: E402


def test_fit_with_a_span_and_robustness_is_lowess(tmp_path: Path):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, 80)
    y = np.sin(x) + rng.normal(0, 0.3, 80)
    y[5] += 6.0
    path = tmp_path / "d.csv"
    csv.write_csv(pa.table({"x": x, "y": y}), path)
    model = tmp_path / "m.npz"
    res = CliRunner().invoke(app, ["fit", str(path), "-x", "x", "-y", "y", "-k", "tricube", "--degree", "1",
                                   "--span", "0.3", "--robust", "3", "--model", str(model), "-q"])
    assert res.exit_code == 0, res.output
    est = nadaraya.load(model)
    assert (est.bandwidth_type, est.robust_iterations) == ("generalized_nn", 3)
    assert est.bandwidth_.tolist() == [24.0]
    want = nadaraya.lowess(y, x, frac=0.3, it=3, return_sorted=False)
    np.testing.assert_allclose(est.predict(x[:, None]), want, rtol=0, atol=1e-10)
    for flags, fragment in ((["--span", "wide"], "--span 'wide' is not valid"),
                            (["--robust", "-1"], "--robust -1 is not valid")):
        res = CliRunner().invoke(app, ["fit", str(path), "-x", "x", "-y", "y", *flags, "--model",
                                       str(tmp_path / "bad.npz")])
        assert res.exit_code != 0 and fragment in res.output
