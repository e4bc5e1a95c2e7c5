"""Plots draw what they are given: checked through the artists on an Agg canvas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

import nadaraya  # noqa: E402
from nadaraya import plot  # noqa: E402
from nadaraya.datasets import textbook  # noqa: E402


@pytest.fixture
def ax():
    return Figure().subplots()


def test_kernels_draw_each_profile_scaled_to_peak_one(ax) -> None:
    out = plot.kernels(["gaussian", "epanechnikov", "boxcar"], ax=ax)
    assert out is ax
    lines = {line.get_label(): line for line in ax.get_lines()}
    u = lines["gaussian"].get_xdata()
    np.testing.assert_allclose(lines["gaussian"].get_ydata(), np.exp(-u**2 / 2))
    np.testing.assert_allclose(lines["epanechnikov"].get_ydata(), np.clip(1 - u**2, 0, None))
    np.testing.assert_allclose(lines["boxcar"].get_ydata(), (abs(u) <= 1).astype(float))


def test_fit_curve_equals_predictions(ax) -> None:
    s = textbook(n=30, seed=1)
    shuffled = np.random.default_rng(0).permutation(s.x_val.size)
    x = s.x_val[shuffled]
    pred = nadaraya.pool(x, s.x_train, s.y_train, bandwidth=0.4)
    lo, hi = pred - 0.5, pred + 0.5
    plot.fit(s.x_train, s.y_train, x, pred, truth=s.truth(x), band=(lo, hi), ax=ax)
    lines = {line.get_label(): line for line in ax.get_lines()}
    order = np.argsort(x)
    np.testing.assert_array_equal(lines["prediction"].get_xdata(), x[order])
    np.testing.assert_array_equal(lines["prediction"].get_ydata(), pred[order])
    np.testing.assert_allclose(lines["truth"].get_ydata(), 2 * np.sin(x[order]) + x[order])
    scatter = ax.collections[0]
    np.testing.assert_array_equal(scatter.get_offsets(), np.column_stack([s.x_train, s.y_train]))
    assert len(ax.collections) == 2  # the points and the band


def test_attention_heatmap_is_the_sorted_weights(ax) -> None:
    rng = np.random.default_rng(2)
    q, k = rng.uniform(0, 5, 17), rng.uniform(0, 5, 23)
    w = nadaraya.attention_weights(q, k, bandwidth=0.5)
    plot.attention(w, q, k, ax=ax)
    shown = np.asarray(ax.images[0].get_array())
    np.testing.assert_array_equal(shown, w[np.argsort(q)][:, np.argsort(k)])
    assert len(ax.figure.axes) == 2  # the colour bar
    # sorted queries and keys: each row's heaviest key moves right as the query grows
    assert (np.diff(shown.argmax(axis=1)) >= 0).all()


def test_attention_rejects_mismatched_points(ax) -> None:
    with pytest.raises(ValueError, match="queries has 3 rows but weights has 2"):
        plot.attention(np.ones((2, 2)), [1.0, 2.0, 3.0], ax=ax)


def test_bandwidth_curve_marks_the_choice(ax) -> None:
    h = np.array([1.0, 0.1, 0.3, 3.0])
    scores = np.array([2.0, 5.0, 1.0, np.inf])
    plot.bandwidth_curve(h, scores, ax=ax)
    curve, mark = ax.get_lines()[:2]
    np.testing.assert_array_equal(curve.get_xdata(), [0.1, 0.3, 1.0])
    np.testing.assert_array_equal(curve.get_ydata(), [5.0, 1.0, 2.0])
    assert mark.get_xdata()[0] == 0.3
    assert ax.get_xscale() == "log"
    with pytest.raises(ValueError, match="positive"):
        plot.bandwidth_curve([0.0, 1.0], [1.0, 2.0], ax=ax)


def test_training_numbers_epochs_from_one(ax) -> None:
    plot.training({"train": [4.0, 2.0, 1.0], "validation": [5.0, 3.0, 2.5]}, ax=ax)
    train, val = ax.get_lines()
    np.testing.assert_array_equal(train.get_xdata(), [1, 2, 3])
    np.testing.assert_array_equal(val.get_ydata(), [5.0, 3.0, 2.5])
    assert ax.get_yscale() == "linear"  # a factor of 5: a log axis would label 2x10^0
    wide = plot.training([100.0, 10.0, 1.0], ax=Figure().subplots())
    assert wide.get_yscale() == "log"  # two decades

    class History:
        loss = (1.0, -0.5)

    ax2 = plot.training(History(), ax=Figure().subplots())
    assert ax2.get_yscale() == "linear"
    np.testing.assert_array_equal(ax2.get_lines()[0].get_ydata(), [1.0, -0.5])


def test_new_figure_when_no_axes_and_savefig_is_atomic(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    a = plot.training([1.0, 0.5])
    try:
        path = plot.savefig(a.figure, tmp_path / "t.png")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with pytest.raises(OSError, match="cannot write"):
            plot.savefig(a.figure, tmp_path / "missing" / "t.png")
        assert [p.name for p in tmp_path.iterdir()] == ["t.png"]
    finally:
        plt.close(a.figure)
