"""The per-feature search's reported score is the exact criterion at the returned bandwidth,
whether an exact pass of its own or the sweep's column pass scored it; Memo's exact record."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nadaraya.bandwidth import score_bandwidth, select_bandwidth
from nadaraya.bandwidth._multistart import Memo


def _plain_cv(X, y, h):
    """Leave-one-out CV of the Gaussian Nadaraya-Watson fit, written out (own term masked)."""
    u = (X[:, None, :] - X[None, :, :]) / h
    w = np.exp(-0.5 * (u**2).sum(axis=2))
    np.fill_diagonal(w, 0.0)
    return float(np.mean((y - w @ y / w.sum(axis=1)) ** 2))


def _data(kind, n=240, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 3))
    y = np.sin(6 * X[:, 0]) + 0.5 * X[:, 1] + rng.normal(0, 0.2, n)  # feature 2 is noise
    if kind == "far":
        X = X + 1e6  # keys far from 0
    elif kind == "duplicates":
        X[n // 2 :] = X[: n - n // 2]
    return X, y


@pytest.mark.parametrize("kind", ["plain", "far", "duplicates"])
def test_reported_score_is_the_exact_criterion_at_the_bandwidth(kind):
    X, y = _data(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = select_bandwidth(X, y, per_feature=True)
    h = np.asarray(res.bandwidth, dtype=np.float64)
    assert res.score == pytest.approx(float(score_bandwidth(X, y, h)), rel=1e-10)
    finite = np.where(res.smoothed_out, np.inf, h)
    assert res.score == pytest.approx(_plain_cv(X, y, finite), rel=1e-7)  # h = 1e4 ranges ~ inf


def test_memo_batch_exact_rescores_a_gradient_point_in_the_column_pass():
    calls = []

    def f(h):
        return float((h**2).sum())

    def value_grad(h):
        return f(h) + 1e-3, 2 * h  # a gradient pass whose value is slightly off

    def column(h, cols, values):
        calls.append(len(cols))
        out = []
        for j, v in zip(cols, values):
            t = h.copy()
            t[j] = v
            out.append(f(t))
        return np.array(out)

    memo = Memo(f, value_grad, column=column)
    h = np.array([1.0, 2.0])
    assert memo(h) == pytest.approx(5.001) and h.tobytes() not in memo.exact
    assert memo.batch(h, [(0, 3.0)]) == [pytest.approx(13.0)] and calls == [1]
    # without ``exact`` the gradient's value stands; with it, the column pass scores h again
    assert memo.batch(h, [(0, 1.0)]) == [pytest.approx(5.001)] and calls == [1]
    assert memo.batch(h, [(0, 1.0), (1, 0.0)], exact=True) == [5.0, 1.0] and calls == [1, 2]
    assert h.tobytes() in memo.exact
    # scored exactly once: not again
    memo.batch(h, [(0, 1.0)], exact=True)
    assert calls == [1, 2]
