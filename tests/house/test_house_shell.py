"""The shell after the house (issue 13): one bandwidth search, one CV curve, file helpers in support."""

from __future__ import annotations

from pathlib import Path

import matplotlib.colors
import numpy as np
import pytest
from matplotlib.figure import Figure

from nadaraya import plot, report
from nadaraya._support.files import atomic_write
from nadaraya.bandwidth import BandwidthWarning, select_bandwidth
from nadaraya.datasets import textbook


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_the_report_keeps_exactly_what_select_bandwidth_evaluated(kernel: str) -> None:
    s = textbook(n=40, seed=3)
    expected = select_bandwidth(s.x_train, s.y_train, kernel=kernel)
    got = report.bandwidth_search(s.x_train, s.y_train, kernel=kernel)
    np.testing.assert_array_equal(got.bandwidth, expected.bandwidth)
    np.testing.assert_array_equal(got.grid, expected.search["bandwidths"])
    np.testing.assert_array_equal(got.scores, expected.search["scores"])
    assert got.method == "cv" and got.grid.shape == (got.scores.size, 1) and got.scores.size > 10


def test_a_one_point_search_keeps_no_record() -> None:
    # constant y: select_bandwidth evaluates Scott's rule only; there is no curve to draw
    x = np.linspace(0.0, 5.0, 30)
    with pytest.warns(BandwidthWarning, match="constant"):
        got = report.bandwidth_search(x, np.full(30, 2.0))
    assert got.scores.shape == (0,) and got.grid.shape == (0, 1) and got.bandwidth.shape == (1,)


def test_the_dot_mark_draws_the_bare_curve_sorted_and_the_choice_at_the_best_score() -> None:
    h = np.array([1.0, 0.1, 3.0, 0.3, 0.5])  # the order a search evaluates in: refinements last
    s = np.array([2.0, 4.0, np.inf, 1.5, 1.0])
    ax = Figure().subplots()
    plot.bandwidth_curve(h, s, chosen=0.45, ax=ax, label="boxcar", color="C2", mark="dot")
    curve, dot = ax.get_lines()
    assert curve.get_xdata().tolist() == [0.1, 0.3, 0.5, 1.0]  # sorted, the infinite score left out
    assert curve.get_ydata().tolist() == [4.0, 1.5, 1.0, 2.0]
    assert curve.get_label() == "boxcar" and curve.get_marker() in ("None", "", None)
    assert dot.get_xdata().tolist() == [0.45] and dot.get_ydata().tolist() == [1.0]
    assert matplotlib.colors.same_color(dot.get_color(), "C2") and dot.get_label().startswith("_")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["boxcar"]


def test_an_unknown_mark_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"mark='cross' is not known; choose 'line' or 'dot'"):
        plot.bandwidth_curve([0.1, 1.0], [1.0, 2.0], mark="cross")


def test_the_report_draws_the_cv_curves_through_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    study = report.textbook_study(kernels=["constant", "gaussian", "boxcar"], slider=[0.5], learnable=False)
    calls = []
    drawn = plot.bandwidth_curve

    def spy(bandwidths, scores, **kwargs):
        calls.append((np.asarray(bandwidths), np.asarray(scores), kwargs))
        return drawn(bandwidths, scores, **kwargs)

    monkeypatch.setattr(plot, "bandwidth_curve", spy)
    names = [p.name for p in report.write_figures(study, tmp_path)]
    assert "bandwidth.png" in names
    assert [c[2]["label"] for c in calls] == ["gaussian", "boxcar"]  # not average pooling
    for (grid, scores, kwargs), k in zip(calls, ("gaussian", "boxcar")):
        np.testing.assert_array_equal(grid, study.searches[k].grid[:, 0])
        np.testing.assert_array_equal(scores, study.searches[k].scores)
        assert kwargs["chosen"] == study.searches[k].bandwidth[0] and kwargs["mark"] == "dot"


def test_atomic_write_replaces_only_with_a_complete_file(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    target.write_text("old")
    with pytest.raises(KeyError), atomic_write(target, "w") as f:
        f.write("half")
        raise KeyError("stop")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]
    with pytest.raises(ValueError, match=r"mode must be 'wb' or 'w'; got 'a'"), atomic_write(target, "a"):
        pass
