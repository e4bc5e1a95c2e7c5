"""Local linear beside Nadaraya-Watson in the demo: the study's fits, fit_local.png, the report, the table."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import nadaraya  # noqa: E402
import nadaraya.report._study as _study  # noqa: E402
from nadaraya import report  # noqa: E402
from nadaraya.datasets import textbook  # noqa: E402


@pytest.fixture(scope="module")
def study() -> _study.Study:
    """The demo's data (textbook(), seed 0), one kernel: the local fits do not depend on the others."""
    return report.textbook_study(kernels=["constant", "gaussian"], slider=[0.5], learnable=False)


def _plain_local_linear(q: np.ndarray, x: np.ndarray, y: np.ndarray, h: float) -> np.ndarray:
    """Weighted least squares of y on [1, x - q] with Gaussian weights, per query: the intercept."""
    out = np.empty(q.size)
    for j, qj in enumerate(q):
        w = np.sqrt(np.exp(-0.5 * ((x - qj) / h) ** 2))
        design = np.column_stack([np.ones_like(x), x - qj])
        out[j] = np.linalg.lstsq(design * w[:, None], y * w, rcond=None)[0][0]
    return out


def _nw(q: np.ndarray, x: np.ndarray, y: np.ndarray, h: float) -> np.ndarray:
    w = np.exp(-0.5 * ((q[:, None] - x[None, :]) / h) ** 2)
    return (w @ y) / w.sum(axis=1)


def test_study_fits_are_the_cv_choices_and_plain_formulas(study: _study.Study) -> None:
    s = study.split
    assert sorted(study.local) == [0, 1, 2]
    assert study.local[0].bandwidth == pytest.approx(float(study.searches["gaussian"].bandwidth[0]))
    for d in (1, 2):
        chosen = nadaraya.select_bandwidth(s.x_train, s.y_train, degree=d).bandwidth[0]
        assert study.local[d].bandwidth == pytest.approx(float(chosen), rel=1e-12)
    ll, nw = study.local[1], study.local[0]
    np.testing.assert_allclose(ll.prediction, _plain_local_linear(ll.x, s.x_train, s.y_train, ll.bandwidth),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(nw.prediction, _nw(nw.x, s.x_train, s.y_train, nw.bandwidth), rtol=1e-12)
    plain = _plain_local_linear(s.x_val, s.x_train, s.y_train, ll.bandwidth)
    np.testing.assert_allclose(ll.validation, plain, rtol=1e-9, atol=1e-9)
    assert ll.mse == pytest.approx(np.mean((ll.validation - s.y_val) ** 2))
    assert ll.x[0] == min(s.x_train.min(), s.x_val.min()) and ll.x[-1] == max(s.x_train.max(), s.x_val.max())


def test_local_linear_is_closer_to_the_truth_at_the_left_edge(study: _study.Study) -> None:
    """The demo's own data: where 2 sin x + x rises with slope 3 from 0, Nadaraya-Watson's one-sided
    average sits well above the truth; the local line does not."""
    s = study.split
    nw, ll = study.local[0], study.local[1]
    truth = s.truth(nw.x)
    assert abs(ll.prediction[0] - truth[0]) < abs(nw.prediction[0] - truth[0]) / 3
    edge = s.x_val <= 0.4
    mse_ll, mse_nw = (np.mean((f.validation[edge] - s.y_val[edge]) ** 2) for f in (ll, nw))
    assert mse_ll < mse_nw


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_without_noise_local_linear_has_less_bias_at_both_edges(seed: int) -> None:
    """Noise-free data: only bias is left, and local linear's is the smaller at each end."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.SingularFitWarning)  # CV picks a tiny h without noise
        st = report.textbook_study(textbook(noise=0.0, seed=seed), kernels=["gaussian"], slider=[0.5],
                                   learnable=False, degrees=[1])
    nw, ll = st.local[0], st.local[1]
    truth = st.split.truth(nw.x)
    for end in (0, -1):
        assert abs(ll.prediction[end] - truth[end]) < abs(nw.prediction[end] - truth[end]), (seed, end)


def test_fit_local_png_draws_both_fits_the_truth_and_the_edge(study: _study.Study, tmp_path: Path) -> None:
    fig = report.figure_local(study)
    whole, edge = fig.axes
    for ax in (whole, edge):
        lines = {line.get_label(): line for line in ax.get_lines()}
        nw = next(v for k, v in lines.items() if k.startswith("Nadaraya-Watson"))
        ll = next(v for k, v in lines.items() if k.startswith("local linear"))
        np.testing.assert_allclose(nw.get_ydata(), study.local[0].prediction)
        np.testing.assert_allclose(ll.get_ydata(), study.local[1].prediction)
        np.testing.assert_allclose(lines["truth"].get_ydata(), study.split.truth(study.local[0].x))
        assert nw.get_color() != ll.get_color()
        assert ax.collections  # the training points
    lo, hi = edge.get_xlim()
    assert lo <= 0.0 < hi <= 1.1 and "x = 0" in edge.get_title()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(fig.legends) == 1 and {"training data", "truth"} <= set(legend)
    assert any("CV h = " in t for t in legend)
    box = edge.texts[0].get_text()
    assert f"{study.local[0].prediction[0]:.2f}" in box and f"{study.local[1].prediction[0]:.2f}" in box
    names = [p.name for p in report.write_figures(study, tmp_path)]
    assert names.index("fit_local.png") == names.index("fit.png") + 1
    assert (tmp_path / "fit_local.png").read_bytes()[:4] == b"\x89PNG"


def test_without_local_degrees_there_is_no_local_figure(tmp_path: Path) -> None:
    st = report.textbook_study(textbook(n=20), kernels=["gaussian"], slider=[0.5], learnable=False,
                               degrees=())
    assert st.local == {} and not any(r.model.startswith("local") for r in st.rows)
    assert "fit_local.png" not in [p.name for p in report.write_figures(st, tmp_path)]
    assert "id='local'" not in report.render_html(st)
    with pytest.raises(ValueError, match=r"degrees=\(0, 1\): the study has no local fit of degree 0"):
        report.figure_local(st)


def test_report_explains_and_draws_local_linear(study: _study.Study) -> None:
    page = report.render_html(study)
    section = re.search(r"<details open id='local'>.*?</details>", page, re.S).group(0)
    assert "local linear" in section.lower() and "boundary" in section and "degree=1" in section
    assert section.count("class='local0'") == 2 and section.count("class='local1'") == 2  # both panels
    rows = re.findall(r"<tr><td>([^<]*)</td><td>(\d)</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>",
                      section)
    assert [r[0] for r in rows] == ["Nadaraya-Watson", "local linear", "local quadratic"]
    for name, d, h, mse, at0 in rows:
        fit = study.local[int(d)]
        assert (h, mse, at0) == (f"{fit.bandwidth:.3g}", f"{fit.mse:.4f}", f"{fit.prediction[0]:.3f}"), name
    table = re.search(r"<table id='msetable'>.*?</table>", page, re.S).group(0)
    assert "<td>local linear</td>" in table and f"{study.local[1].mse:.4f}" in table


def test_demo_table_has_the_local_linear_row(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from nadaraya.cli import app

    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path), "--no-learn", "--quiet"])
    assert result.exit_code == 0, result.output
    s = textbook()
    h = float(nadaraya.select_bandwidth(s.x_train, s.y_train, degree=1).bandwidth[0])
    mse = float(np.mean((nadaraya.pool(s.x_val, s.x_train, s.y_train, bandwidth=h, degree=1) - s.y_val) ** 2))
    row = re.search(r"local linear\s*\S\s*(\S+)\s*\S\s*(\S+)\s*\S\s*gaussian, degree 1", result.output)
    assert row, result.output
    assert row.groups() == (f"{h:.3g}", f"{mse:.4f}")
    lines = result.output.splitlines()
    gaussian_cv = max(i for i, line in enumerate(lines) if line.lstrip("│ ").startswith("gaussian"))
    assert "local linear" in lines[gaussian_cv + 1]  # beside Nadaraya-Watson's rows
    assert (tmp_path / "fit_local.png").stat().st_size > 10_000
    assert "id='local'" in (tmp_path / "report.html").read_text(encoding="utf-8")
