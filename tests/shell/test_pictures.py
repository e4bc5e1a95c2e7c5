"""What the figures and the report draw: read back from the artists (Agg) and from the page (Chromium)."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

import nadaraya  # noqa: E402
import nadaraya.report._study as _study  # noqa: E402
from conftest import offline_tab  # noqa: E402
from nadaraya import plot, report  # noqa: E402
from nadaraya.bandwidth import BandwidthWarning  # noqa: E402
from nadaraya.datasets import textbook  # noqa: E402
from nadaraya.kernels import names as kernel_names  # noqa: E402


def _wait_ready(tab, seconds: float = 20.0) -> None:
    """Wait until the page has inflated its heatmaps (polled from Python: the page's CSP forbids
    the eval that playwright's wait_for_function uses)."""
    import time

    end = time.monotonic() + seconds
    while tab.evaluate("document.body.dataset.ready") != "1":
        assert time.monotonic() < end, "the report did not finish loading"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def study() -> _study.Study:
    """Every kernel (two at the textbook's bandwidths), a short slider, no learnable models."""
    return report.textbook_study(textbook(n=40, seed=3), kernels=["constant", "gaussian"], slider=[0.1, 1.0],
                                 every_kernel=True, learnable=False)


@pytest.fixture(scope="module")
def three_features() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (90, 3))
    return X, np.sin(6 * X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(90)


def _per_feature(X: np.ndarray, y: np.ndarray, method: str) -> nadaraya.BandwidthSelection:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)  # a smoothed-out feature on its bound
        return nadaraya.select_bandwidth(X, y, per_feature=True, method=method)


def _is_sorted(a: np.ndarray) -> bool:
    return bool((np.diff(np.asarray(a, dtype=float)) >= 0).all())


# -- the bandwidth search ----------------------------------------------------------------------


def test_bandwidth_curves_are_drawn_in_bandwidth_order(study: _study.Study) -> None:
    """A search records its refinement after its grid; a curve in that order draws a segment
    back across the plot (the demo's bandwidth.png did, from h ~ 0.01 back to 0.45)."""
    tried = study.searches["gaussian"].grid[:, 0]
    assert not _is_sorted(tried), "the record is in search order: the refinement comes after the grid"
    ax = plot.bandwidth_curve(tried, study.searches["gaussian"].scores, ax=Figure().subplots())
    assert _is_sorted(ax.get_lines()[0].get_xdata())
    fig = report.figure_bandwidth(study)
    curves = [line for line in fig.axes[0].get_lines() if len(line.get_xdata()) > 1]
    assert len(curves) == 1  # the featured kernel with a bandwidth: gaussian
    assert all(_is_sorted(line.get_xdata()) for line in curves)


def test_per_feature_selection_has_one_panel_per_feature(three_features) -> None:
    X, y = three_features
    sel = _per_feature(X, y, "cv")
    fig = plot.bandwidth_selection(sel, feature_names=["a", "b", "c"], fig=Figure(layout="constrained"))
    panels = [ax for ax in fig.axes if ax.has_data()]
    assert len(panels) == 3
    tried = sel.search["bandwidths"]
    for j, (ax, name) in enumerate(zip(panels, "abc")):
        assert name in ax.get_xlabel() and ax.get_title().startswith(f"{name}: ")
        assert ax.get_xscale() == "log"
        grid_line, _steps, chosen = ax.get_lines()[:3]
        # each panel plots its own feature's bandwidths (not feature 0's), the grid sorted
        on_grid = sel.search["stages"] == "grid"
        np.testing.assert_allclose(np.sort(grid_line.get_xdata()), np.sort(tried[on_grid, j]))
        assert _is_sorted(grid_line.get_xdata())
        assert chosen.get_xdata()[0] == pytest.approx(sel.bandwidth[j])
    with pytest.raises(ValueError, match="feature_names has 2 names but the selection has 3"):
        plot.bandwidth_selection(sel, feature_names=["a", "b"], fig=Figure())


@pytest.mark.parametrize(("method", "criterion"), [("cv", "CV"), ("aicc", "AICc")])
def test_y_label_names_the_criterion(three_features, method: str, criterion: str) -> None:
    X, y = three_features
    scalar = nadaraya.select_bandwidth(X[:, 0], y, method=method)
    fig = plot.bandwidth_selection(scalar, fig=Figure())
    assert len(fig.axes) == 1 and criterion in fig.axes[0].get_ylabel()
    per = plot.bandwidth_selection(_per_feature(X, y, method), fig=Figure())
    assert criterion in per.axes[0].get_ylabel()
    other = "AICc" if criterion == "CV" else "CV"
    assert all(other not in ax.get_ylabel() for ax in per.axes)
    ax = plot.bandwidth_curve([0.1, 1.0], [2.0, 1.0], method=method, ax=Figure().subplots())
    assert criterion in ax.get_ylabel()
    with pytest.raises(ValueError, match="method='mse' is not known"):
        plot.bandwidth_curve([0.1, 1.0], [2.0, 1.0], method="mse", ax=Figure().subplots())


# -- training ----------------------------------------------------------------------------------


def test_training_draws_losses_only() -> None:
    """The record of nadaraya.nn.fit: a "loss" per epoch and the module's "bandwidth"."""
    history = {"loss": [2.0, 1.5, 1.25], "bandwidth": [0.9, 0.6, 0.52]}
    ax = plot.training(history, ax=Figure().subplots())
    lines = ax.get_lines()
    assert len(lines) == 1
    np.testing.assert_array_equal(lines[0].get_ydata(), history["loss"])
    ax = plot.training({**history, "val_loss": [2.1, 1.7, 1.5]}, ax=Figure().subplots())
    assert [line.get_label() for line in ax.get_lines()] == ["training loss", "val loss"]


def test_training_from_nn_fit_draws_its_loss() -> None:
    pytest.importorskip("torch")
    from nadaraya import nn

    x = np.linspace(0, 5, 30)
    history = nn.fit(nn.KernelPooling("gaussian", bandwidth=1.0).double(), x, np.sin(x), epochs=4, lr=0.5)
    assert "bandwidth" in history
    ax = plot.training(history, ax=Figure().subplots())
    assert len(ax.get_lines()) == 1
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), history["loss"])


def test_demo_training_figure_has_equal_epochs_a_linear_axis_and_y_labels(study: _study.Study) -> None:
    losses = {"w": np.linspace(1.45, 1.19, report.LEARN_EPOCHS), "additive": np.linspace(2.2, 1.15, 60)}
    study = _study.Study(**{**study.__dict__, "learned": {
        name: {"history": h, "prediction": study.split.y_val} for name, h in losses.items()}})
    fig = report.figure_training(study)
    loss_ax, fit_ax = fig.axes
    assert {len(line.get_xdata()) for line in loss_ax.get_lines()} == {report.LEARN_EPOCHS}
    assert loss_ax.get_yscale() == "linear"  # 1.15-2.2 is not a log axis's range
    assert loss_ax.get_ylabel() and fit_ax.get_ylabel() == "y"


# -- the textbook figures ------------------------------------------------------------------------


def test_kernels_figure_draws_every_kernel_with_one_y_label() -> None:
    fig = report.figure_kernels()
    panels = [ax for ax in fig.axes if ax.has_data()]
    assert [ax.get_title().split(" ")[0] for ax in panels] == kernel_names()
    assert all(ax.get_ylabel() == "" for ax in panels)
    assert fig.get_supylabel() == "K(u) / K(0)"
    gaussian = panels[kernel_names().index("gaussian")].get_lines()[0]
    np.testing.assert_allclose(gaussian.get_ydata(), np.exp(-gaussian.get_xdata() ** 2 / 2))


def test_fit_figure_shows_the_textbook_bandwidths_and_the_cv_choice(study: _study.Study) -> None:
    s = study.split
    fig = report.figure_fit(study)
    h_cv = float(study.searches["gaussian"].bandwidth[0])
    wanted = [("constant", 1.0), *[("gaussian", h) for h in (0.1, 0.2, 0.5, 1.0)], ("gaussian", h_cv)]
    assert len(fig.axes) == len(wanted)
    for ax, (kernel, h) in zip(fig.axes, wanted):
        pred = next(line for line in ax.get_lines() if line.get_label() == "prediction")
        expected = nadaraya.pool(s.x_val, s.x_train, s.y_train, kernel=kernel, bandwidth=h, empty="nearest")
        np.testing.assert_allclose(pred.get_ydata(), expected)
        assert ax.get_legend() is None  # no legend over the points: one for the figure, outside
    assert "CV" in fig.axes[-1].get_title() and "0.1" in fig.axes[1].get_title()
    assert len(fig.legends) == 1
    width, height = fig.get_size_inches() * 110
    assert width <= 1400 and width / height < 2.2  # the demo's was 1980x352


def test_attention_heatmaps_share_one_colour_scale(study: _study.Study) -> None:
    s = study.split
    fig = report.figure_attention(study)
    heat = [ax for ax in fig.axes if ax.images]
    assert len(heat) == 4 and len(fig.axes) == 5  # four panels and one colour bar
    limits = {ax.images[0].get_clim() for ax in heat}
    assert len(limits) == 1
    q, k = np.sort(s.x_val), np.sort(s.x_train)
    shown = [nadaraya.attention_weights(q, k, bandwidth=h) for h in (0.1, 0.2, 0.5, 1.0)]
    assert limits.pop() == (0.0, pytest.approx(max(w.max() for w in shown)))
    fig.draw_without_rendering()
    for ax, w in zip(heat, shown):
        np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), w)
    # shared axes label the bottom row and the left column: round inputs, where the sorted inputs reach them
    for axis, points in ((heat[2].xaxis, k), (heat[3].xaxis, k), (heat[0].yaxis, q), (heat[2].yaxis, q)):
        labels = [float(t.get_text()) for t in axis.get_ticklabels() if t.get_text()]
        assert len(labels) >= 3 and _is_sorted(labels) and all(v == round(v, 1) for v in labels)
        np.testing.assert_allclose(axis.get_ticklocs(), np.interp(labels, points, np.arange(points.size)))
    assert "training inputs" in fig.get_supxlabel() and "validation inputs" in fig.get_supylabel()


# -- the report ----------------------------------------------------------------------------------


def _payload(page: str) -> dict:
    return json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
                      .group(1).replace("<\\/", "</"))


def test_report_has_every_kernel_and_the_cv_choice_among_the_slider_positions(study: _study.Study) -> None:
    page = report.render_html(study)
    data = _payload(page)
    others = [k for k in kernel_names() if k not in ("constant", "gaussian")]
    assert list(data["kernels"]) == ["constant", "gaussian", *others, "lowess"]
    for name, k in data["kernels"].items():
        if name == "lowess":  # its own slider over spans: tests/shell/test_report_lowess.py
            continue
        if name == "constant":
            assert k["cv"] is None
            continue
        cv = float(study.searches[name].bandwidth[0])
        assert data["slider"][k["cvIndex"]] == pytest.approx(cv, rel=1e-5)
        np.testing.assert_allclose(k["curves"][k["cvIndex"]], nadaraya.pool(
            study.split.x_val, study.split.x_train, study.split.y_train, kernel=name, bandwidth=cv,
            empty="nearest"), atol=1e-3)
    table = re.search(r"<table id='msetable'>.*?</table>", page, re.S).group(0)
    rows = re.findall(r"<tr><td>([^<]*)</td>", table)
    # one row per model, not one per (model, bandwidth): each kernel, local linear and quadratic, LOWESS
    assert rows[:len(kernel_names())] == [report._label(k) for k in data["kernels"] if k != "lowess"]
    assert rows[len(kernel_names()):] == ["local linear", "local quadratic", "LOWESS"]


def test_report_in_chromium_has_axes_a_colour_bar_and_a_cv_button(study, tmp_path) -> None:
    page = report.write_html(study, tmp_path / "report.html")
    with offline_tab() as (tab, errors, requests):
        tab.goto(page.as_uri())
        _wait_ready(tab)
        fit_text = tab.eval_on_selector_all("#fit text", "els => els.map(e => e.textContent)")
        numbers = [float(t) for t in fit_text if re.fullmatch(r"-?\d+(\.\d+)?", t)]
        assert len(numbers) >= 8 and all(abs(v * 2 - round(v * 2)) < 1e-9 for v in numbers)  # 1, 2, 3
        assert {"x", "y"} <= set(fit_text)
        texts = "els => els.map(e => e.textContent)"
        heat_text = " ".join(tab.eval_on_selector_all("#heataxes text", texts))
        assert "training input" in heat_text and "validation input" in heat_text
        assert "attention weight" in heat_text
        assert tab.eval_on_selector_all("#cbticks text", "els => els.length") >= 2
        options = tab.eval_on_selector_all("#kernel option", "els => els.length")
        assert options == len(kernel_names()) + 1  # and LOWESS
        tab.select_option("#kernel", "boxcar")
        tab.eval_on_selector("#bw", "el => { el.value = 0; el.dispatchEvent(new Event('input')); }")
        tab.click("#cvbtn")
        cv = float(study.searches["boxcar"].bandwidth[0])
        assert tab.inner_text("#bwval") == f"{cv:.3g} (CV choice)"
        assert len(tab.eval_on_selector_all("#scale .tick", "els => els.map(e => e.textContent)")) >= 2
    assert errors == []
    assert requests == []


def test_an_exploding_criterion_does_not_flatten_the_curve() -> None:
    """AICc at the smallest grid bandwidths can be 100 times its range elsewhere (diabetes, per feature)."""
    from types import SimpleNamespace

    h = np.geomspace(0.01, 1.0, 7)
    scores = np.array([1000.0, 10.0, 9.5, 9.2, 9.0, 9.3, 9.6])
    sel = SimpleNamespace(method="aicc", kernel="gaussian", per_feature=False, bandwidth=np.array([h[4]]),
                          smoothed_out=np.array([False]),
                          search={"bandwidths": h[:, None], "scores": scores, "stages": np.full(7, "grid")})
    ax = plot.bandwidth_selection(sel, fig=Figure()).axes[0]
    bottom, top = ax.get_ylim()
    assert 9.6 <= top < 100 and bottom < 9.0
    sel.search["scores"] = np.array([12.0, 10.0, 9.5, 9.2, 9.0, 9.3, 9.6])  # nothing to cut
    assert plot.bandwidth_selection(sel, fig=Figure()).axes[0].get_ylim()[1] >= 12.0


def test_training_epochs_are_whole_numbers() -> None:
    """Short runs drew ticks at half epochs (5 epochs: 1.5, 2.5; 20 epochs: 2.5, 7.5)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nadaraya import plot

    for epochs in (5, 20):
        fig, ax = plt.subplots()
        plot.training({"loss": list(np.linspace(3.0, 1.0, epochs))}, ax=ax)
        fig.canvas.draw()
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), (epochs, ticks)
        plt.close(fig)
