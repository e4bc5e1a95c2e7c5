"""The column pass with the gradient at its own bandwidth (one pass): the same score, gradient and
Gauss-Newton matrix as the gradient pass, and its levels' scores unchanged; Memo takes both.

References are written out: leave-one-out predictions of the Gaussian Nadaraya-Watson fit per
row (own term left out), their derivatives along ``log h`` by central differences.
"""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya.bandwidth._multistart import Memo
from nadaraya.bandwidth._objective import _Objective
from nadaraya.kernels import get


def _loo(X, y, h, s):
    """Leave-one-out predictions of the Gaussian Nadaraya-Watson fit with key weights ``s``."""
    u = (X[:, None, :] - X[None, :, :]) / h
    g = 0.5 * (u**2).sum(axis=2)
    np.fill_diagonal(g, np.inf)  # the own term left out
    w = s * np.exp(-(g - g.min(axis=1, keepdims=True)))
    return w @ y / w.sum(axis=1)


def _data(kind, n=300, seed=5):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 3))
    y = np.sin(6 * X[:, 0]) + 0.5 * X[:, 1] + rng.normal(0, 0.2, n)
    if kind == "far":
        X = X + 1e6
    elif kind == "duplicates":
        X[n // 2 :] = X[: n - n // 2]
    return X, y


@pytest.mark.parametrize("kind", ["plain", "far", "duplicates", "narrow"])
@pytest.mark.parametrize("weighted", [False, True])
def test_column_gradient_is_the_gradient_pass(kind, weighted):
    X, y = _data(kind)
    n = X.shape[0]
    s = np.random.default_rng(1).uniform(0.5, 2.0, n) if weighted else None
    obj = _Objective(X, y[:, None], s, get("gaussian"), "cv", "auto")
    # "narrow": features 1-2 narrow, the points sorted by feature 0, so that many rows' nearest
    # keys lie in another tile, by far more than exp(700) nearer (the exact rows' path)
    h = np.array([0.04, 0.3, 2.5]) if kind != "narrow" else np.array([0.5, 1e-3, 1e-3])
    cols, values = np.array([0, 2, 1]), np.array([0.08, np.inf, 0.1])
    plain = obj.column(h, cols, values)
    scores, (score, grad, gn) = obj.column(h, cols, values, gradient=True)
    np.testing.assert_allclose(scores, plain, rtol=1e-12)
    want_score, want_grad, want_gn = obj.with_gradient(h, gauss_newton=True)
    assert score == pytest.approx(want_score, rel=1e-11)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-8, atol=1e-10 * np.abs(want_grad).max())
    np.testing.assert_allclose(gn, want_gn, rtol=1e-8, atol=1e-10 * np.abs(want_gn).max())
    # and against central differences of the plain leave-one-out predictions
    w = np.ones(n) if s is None else s
    Xc = X - X.mean(axis=0)  # the same differences (keys far from 0 lose nothing)
    J = np.empty((n, 3))
    for k in range(3):
        up, down = h.copy(), h.copy()
        up[k] *= np.exp(1e-5)
        down[k] *= np.exp(-1e-5)
        J[:, k] = (_loo(Xc, y, up, w) - _loo(Xc, y, down, w)) / 2e-5
    resid = y - _loo(Xc, y, h, w)
    plain_grad = -2.0 * (w * resid) @ J / w.sum()
    np.testing.assert_allclose(grad, plain_grad, rtol=1e-5, atol=1e-8 * np.abs(plain_grad).max())
    assert score == pytest.approx(float(w @ resid**2 / w.sum()), rel=1e-10)


def test_column_gradient_with_no_level_is_one_pass():
    X, y = _data("plain", n=120)
    obj = _Objective(X, y[:, None], None, get("gaussian"), "cv", "auto")
    h = np.array([0.1, 0.3, 1.0])
    before = obj.n_passes
    scores, (score, *_) = obj.column(h, np.array([], dtype=np.int64), np.array([]), gradient=True)
    assert scores.size == 0 and obj.n_passes == before + 1
    assert score == pytest.approx(obj.with_gradient(h)[0], rel=1e-11)


def test_memo_batch_takes_the_gradient_from_the_column_pass():
    X, y = _data("plain", n=150)
    obj = _Objective(X, y[:, None], None, get("gaussian"), "cv", "auto")
    h = np.array([0.1, 0.3, 1.0])
    grads = []

    def value_grad(h):
        grads.append(h)
        return obj.with_gradient(h, gauss_newton=True)

    memo = Memo(lambda h: obj.at(h), value_grad, column=obj.column, graded=True)
    memo.batch(h, [(2, np.inf), (0, 0.2)], gradient=True)
    assert obj.n_passes == 1
    value, grad = memo.with_gradient(h)  # no pass: the column pass gave it
    assert obj.n_passes == 1 and not grads and h.tobytes() in memo.curvatures
    assert h.tobytes() in memo.exact
    want = obj.with_gradient(h, gauss_newton=True)
    assert value == pytest.approx(want[0], rel=1e-11)
    np.testing.assert_allclose(grad, want[1], rtol=1e-8)
    # without ``graded`` the column pass gives scores only
    plain = Memo(lambda h: obj.at(h), value_grad, column=obj.column)
    plain.batch(h, [(2, np.inf)], gradient=True)
    assert h.tobytes() not in plain.grads


def test_sweep_counts_a_model_risen_point_as_risen_and_still_scores_the_next():
    """A way's first grid point that ``risen`` predicts risen costs no score; the next one is
    scored, so a lower point beyond it is still found."""
    from nadaraya.bandwidth._multistart import sweep

    scored = []

    def f(h):
        scored.append(float(h[0]))
        x = float(np.log(h[0]))
        return (x - np.log(0.5)) ** 2 - 10.0 * float(h[0] > 5.0)  # a lower basin far above

    grid = np.array([0.03125, 0.125, 0.5, 2.0, 8.0, 32.0])
    h, s, moved = sweep(f, np.array([0.5]), f(np.array([0.5])), [grid], rounds=1, patience=2,
                        near=2.0, risen=lambda j, v: abs(np.log(v / 0.5)) <= np.log(4.0) * (1 + 1e-9))
    assert 0.125 not in scored and 2.0 not in scored  # predicted risen
    assert 0.03125 in scored and 8.0 in scored and moved and h[0] >= 8.0 and s < -1.0


def test_model_risen_needs_the_memos_model_and_its_rise():
    from nadaraya.bandwidth._multistart import _MODEL, _model_risen

    h = np.array([0.2, 0.5])
    memo = Memo(lambda h: 1.0)
    assert _model_risen(memo, h, 1.0) is None and _model_risen(lambda h: 1.0, h, 1.0) is None
    memo.grads[h.tobytes()] = np.zeros(2)
    memo.curvatures[h.tobytes()] = np.diag([1.0, 1e-4])
    risen = _model_risen(memo, h, 1.0)
    t = np.log(4.0)
    assert risen(0, 0.2 * 4.0) and risen(0, 0.2 / 4.0)  # 0.5 t^2 = 0.96 > 1e-2
    assert not risen(1, 0.5 * 4.0)  # a flat profile: 0.5e-4 t^2 < 1e-2
    assert not risen(0, 0.2 * 4.5)  # beyond the model's factor
    assert 0.5 * 1e-4 * t * t < _MODEL[1] < 0.5 * t * t
