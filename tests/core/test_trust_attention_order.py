"""``model.attention_weights(X)`` has one column per training row in the order given to ``fit``
(as scikit-learn's neighbour graphs do): with degree 0, ``attention_weights(X) @ y == predict(X)``
for the ``y`` the user passed, whatever order the rows came in."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaWatson


def _data(seed=0, n=60, d=2, p=None):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, d))  # unsorted
    y = np.sin(X[:, 0]) + X[:, -1] ** 2 if p is None else rng.normal(size=(n, p))
    return X, y, rng.uniform(0.5, 3.0, n), rng.uniform(0, 5, (25, d))


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("p", [None, 3])
def test_weights_times_the_given_y_is_the_prediction(kernel, weighted, p):
    X, y, sw, Q = _data(p=p)
    sw = sw if weighted else None
    model = NadarayaWatson(kernel=kernel, bandwidth=1.2).fit(X, y, sample_weight=sw)
    W = model.attention_weights(Q)
    np.testing.assert_allclose(W @ y, model.predict(Q), rtol=1e-12, atol=1e-12)
    # the independent reference: the primitive on the rows as given
    want = nadaraya.attention_weights(Q, X, kernel=kernel, bandwidth=1.2, sample_weight=sw, empty="nearest")
    np.testing.assert_allclose(W, want, rtol=1e-12, atol=1e-15)
    S = model.attention_weights(Q, sparse=True)
    np.testing.assert_allclose(S.toarray(), W, rtol=1e-12, atol=1e-15)


def test_column_j_is_training_row_j():
    """A key far from all others gets its own column: the one of its row as given."""
    X = np.array([[3.0], [0.0], [100.0], [1.0]])
    y = np.array([1.0, 2.0, 3.0, 4.0])
    model = NadarayaWatson(kernel="epanechnikov", bandwidth=0.5).fit(X, y)
    W = model.attention_weights([[100.1], [0.1], [2.9]])
    np.testing.assert_allclose(W, np.eye(4)[[2, 1, 0]])


def test_the_order_survives_save_and_load(tmp_path):
    X, y, sw, Q = _data(seed=1)
    model = NadarayaWatson(bandwidth=0.8).fit(X, y, sample_weight=sw)
    path = model.save(tmp_path / "m.nwm") or tmp_path / "m.nwm"
    back = nadaraya.load(path)
    np.testing.assert_array_equal(back.fit_order_, model.fit_order_)
    np.testing.assert_allclose(back.attention_weights(Q) @ y, model.predict(Q), rtol=1e-12)
    np.testing.assert_array_equal(model.X_fit_, X[model.fit_order_])  # what fit_order_ says


@pytest.mark.parametrize("bad", [np.zeros(60, dtype=np.int64), np.arange(1, 61, dtype=np.int64)])
def test_a_file_whose_order_is_no_permutation_is_refused(tmp_path, bad):
    X, y, _, _ = _data(seed=2)
    model = NadarayaWatson(bandwidth=0.8).fit(X, y)
    model.fit_order_ = bad
    path = tmp_path / "bad.nwm"
    model.save(path)
    with pytest.raises(ValueError, match="fit_order_ must be None or a permutation of the 60 training rows"):
        nadaraya.load(path)


def test_dask_fits_keep_the_given_order():
    da = pytest.importorskip("dask.array")
    X, y, _, Q = _data(seed=3)
    model = NadarayaWatson(bandwidth=0.8).fit(da.from_array(X, chunks=20), da.from_array(y, chunks=20))
    assert model.fit_order_ is None
    np.testing.assert_allclose(model.attention_weights(Q) @ y, np.asarray(model.predict(Q)), rtol=1e-12)
