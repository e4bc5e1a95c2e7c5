"""plot.metric: the data on a learned map's two strongest directions beside two raw features."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya.nn import MLKR

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from nadaraya import plot  # noqa: E402


@pytest.fixture(scope="module")
def fitted() -> tuple[MLKR, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)) * [1.0, 10.0, 1.0, 0.1]
    y = X[:, 0] - X[:, 3] * 10
    return MLKR(n_components=3, max_iter=5).fit(X, y), X, y


def test_panels_show_raw_features_and_the_strongest_directions(fitted) -> None:
    model, X, y = fitted
    fig = plot.metric(model, X, y, feature_names=["a", "b", "c", "d"])
    raw, learned = fig.axes[:2]
    assert (raw.get_xlabel(), raw.get_ylabel()) == ("a", "b")
    assert np.allclose(raw.collections[0].get_offsets(), X[:, :2])
    # the coordinates S V^T x of the two largest singular values of A
    _, s, vt = np.linalg.svd(model.components_)
    want = X @ vt[:2].T * s[:2]
    got = np.asarray(learned.collections[0].get_offsets())
    assert np.allclose(np.abs(got), np.abs(want))  # an SVD fixes each direction up to its sign
    assert np.allclose(raw.collections[0].get_array(), y)
    assert len(fig.axes) == 3  # and the colour bar
    matplotlib.pyplot.close(fig)


def test_a_pipeline_transforms_before_the_map(fitted) -> None:
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    _, X, y = fitted
    pipe = make_pipeline(StandardScaler(), MLKR(n_components=1, max_iter=3)).fit(X, y)
    fig = plot.metric(pipe, X, y)
    learned = fig.axes[1]
    A = pipe[-1].components_
    z = pipe[0].transform(X) @ A.T
    got = np.asarray(learned.collections[0].get_offsets())
    assert np.allclose(np.abs(got[:, 0]), np.abs(z[:, 0]))  # one direction: drawn against y
    assert np.allclose(got[:, 1], y)
    matplotlib.pyplot.close(fig)


def test_bad_input(fitted) -> None:
    model, X, y = fitted
    from sklearn.linear_model import LinearRegression

    with pytest.raises(TypeError, match="components_"):
        plot.metric(LinearRegression().fit(X, y), X, y)
    with pytest.raises(ValueError, match="y of shape"):
        plot.metric(model, X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="feature_names"):
        plot.metric(model, X, y, feature_names=["a"])
