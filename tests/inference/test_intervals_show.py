"""Prediction intervals shown: the CLI's --interval columns and plot.fit's hatched interval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("typer")
from pyarrow import csv, parquet  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import nadaraya  # noqa: E402
from nadaraya.cli import app  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:X does not have valid feature names")
N = 60


def _run(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def fitted(tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 5, N)
    t = pa.table({"x": x, "y": np.sin(x) + rng.normal(0, 0.1 + 0.1 * x, N), "y2": x})
    data = tmp_path / "d.csv"
    csv.write_csv(t, data)
    model = tmp_path / "m.npz"
    r = _run("fit", data, "-x", "x", "-y", "y", "-b", "0.4", "-m", model, "-q")
    assert r.exit_code == 0, r.output
    return data, model, x[:, None]


@pytest.mark.parametrize("extra", [[], ["--interval-method", "cv+", "--seed", "4"], ["--adaptive"]])
def test_interval_columns_are_the_librarys(fitted, tmp_path: Path, extra: list[str]) -> None:
    data, model, X = fitted
    out = tmp_path / "p.parquet"
    r = _run("predict", data, "-m", model, "-o", out, "--interval", "0.8", *extra, "-q")
    assert r.exit_code == 0, r.output
    got = parquet.read_table(out)
    assert got.column_names[-3:] == ["predicted_y", "pi_lower_y", "pi_upper_y"]
    kw = {"method": "cv+", "random_state": 4} if "cv+" in extra else {"adaptive": bool(extra)}
    lo, hi = nadaraya.load(model).prediction_interval(X, level=0.8, **kw)
    np.testing.assert_array_equal(got.column("pi_lower_y").to_numpy(), lo)
    np.testing.assert_array_equal(got.column("pi_upper_y").to_numpy(), hi)


@pytest.mark.parametrize("args, message", [
    (["--interval", "1.5"], "--interval 1.5"),
    (["--interval", "0.9", "--interval-method", "jack"], "--interval-method 'jack'"),
    (["--adaptive"], "--adaptive is an option of the prediction interval"),
    (["--interval-method", "cv+"], "--interval-method is an option"),
])
def test_bad_interval_options(fitted, tmp_path: Path, args: list[str], message: str) -> None:
    data, model, _ = fitted
    r = _run("predict", data, "-m", model, "-o", tmp_path / "p.csv", *args, "-q")
    assert r.exit_code != 0 and message in r.output, r.output


def test_several_targets_are_refused(fitted, tmp_path: Path) -> None:
    data, _, _ = fitted
    model = tmp_path / "m2.npz"
    assert _run("fit", data, "-x", "x", "-y", "y,y2", "-b", "0.4", "-m", model, "-q").exit_code == 0
    r = _run("predict", data, "-m", model, "-o", tmp_path / "p.csv", "--interval", "0.9", "-q")
    assert r.exit_code != 0 and "one target" in r.output, r.output


def test_plot_fit_hatches_the_interval_beside_the_band() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from nadaraya import NadarayaWatson, plot

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 5, 80)
    y = np.sin(x) + rng.normal(0, 0.3, 80)
    model = NadarayaWatson(bandwidth=0.4).fit(x[:, None], y)
    grid = np.linspace(0, 5, 30)
    band = model.confidence_band(grid[:, None])
    lo, hi = model.prediction_interval(grid[:, None])
    ax = plot.fit(x, y, grid, model.predict(grid[:, None]), band=band, interval=(lo, hi))
    shades = {c.get_label(): c for c in ax.collections if c.get_label() in ("band", "prediction interval")}
    assert set(shades) == {"band", "prediction interval"}
    assert shades["prediction interval"].get_hatch() == "///"
    np.testing.assert_allclose(ax.get_ylim()[1] >= hi.max(), True)
    with pytest.raises(ValueError, match="prediction interval"):
        plot.fit(x, y, grid, model.predict(grid[:, None]), interval=(lo[:, None, None], hi))


def test_the_gallery_example_shows_intervals_beside_bands() -> None:
    import re

    text = (Path(__file__).resolve().parents[2] / "examples" / "gallery" / "plot_18_intervals.py").read_text()
    for pattern in (r"prediction_interval\(", r"confidence_band\(", r"adaptive=True", r"interval=", r"quiet"):
        assert re.search(pattern, text), pattern
