"""The per-feature search's Gauss-Newton parts: CV's Gauss-Newton matrix from the gradient pass,
Levenberg-Marquardt's runs, the tight polish's stop ahead, the sweep's points next to a minimum,
and the passes' accuracy for keys far from 0.

References are written out: leave-one-out predictions of the Gaussian Nadaraya-Watson fit
computed plainly per row (own term left out), their derivatives along ``log h`` by central
differences, and criteria whose minimum is known.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nadaraya.bandwidth import score_bandwidth, select_bandwidth
from nadaraya.bandwidth._multistart import Memo, sweep
from nadaraya.bandwidth._objective import _Objective
from nadaraya.bandwidth._polish import LOOSE_STEPS, gauss_newton, lbfgsb
from nadaraya.kernels import get


def _loo(X, y, h, s):
    """Leave-one-out predictions of the Gaussian Nadaraya-Watson fit with key weights ``s``,
    written out."""
    u = (X[:, None, :] - X[None, :, :]) / h
    g = 0.5 * (u**2).sum(axis=2)
    np.fill_diagonal(g, np.inf)  # the own term left out
    w = s * np.exp(-(g - g.min(axis=1, keepdims=True)))
    return w @ y / w.sum(axis=1)


@pytest.mark.parametrize("weighted", [False, True])
def test_gauss_newton_matrix_is_twice_the_weighted_jacobian_product(weighted):
    """``with_gradient(h, gauss_newton=True)``'s third item is ``2 sum_i w_i J_i J_i^T`` with
    ``J_i`` the leave-one-out prediction's derivatives along ``log h`` (central differences)
    and ``w_i = s_i / sum s``; its score and gradient are those without it."""
    rng = np.random.default_rng(0)
    n = 60
    X = rng.uniform(0, 1, (n, 3))
    y = np.sin(5 * X[:, 0]) + X[:, 1] + rng.normal(0, 0.2, n)
    s = rng.uniform(0.5, 2.0, n) if weighted else None
    w = np.ones(n) if s is None else s
    obj = _Objective(X, y[:, None], s, get("gaussian"), "cv", "auto")
    h = np.array([0.15, 0.3, 2.0])
    score, grad, gn = obj.with_gradient(h, gauss_newton=True)
    plain_score, plain_grad = obj.with_gradient(h)
    assert score == plain_score and np.array_equal(grad, plain_grad)
    eps = 1e-5
    J = np.empty((n, 3))
    for k in range(3):
        up, down = h.copy(), h.copy()
        up[k] *= np.exp(eps)
        down[k] *= np.exp(-eps)
        J[:, k] = (_loo(X, y, up, w) - _loo(X, y, down, w)) / (2 * eps)
    want = 2.0 * (J * (w / w.sum())[:, None]).T @ J
    np.testing.assert_allclose(gn, want, rtol=1e-6, atol=1e-9 * np.abs(want).max())
    assert np.all(np.linalg.eigvalsh(gn) >= -1e-12 * np.abs(gn).max())  # positive semidefinite


def test_gauss_newton_matrix_is_none_for_aicc():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (40, 2))
    obj = _Objective(X, (X[:, 0] + rng.normal(0, 0.1, 40))[:, None], None, get("gaussian"), "aicc", "auto")
    assert obj.with_gradient(np.array([0.2, 0.3]), gauss_newton=True)[2] is None


def _least_squares(A, b, calls):
    """``f(h) = |A log h - b|^2`` with its gradient and Gauss-Newton matrix (exact: the residuals
    are linear in ``log h``), counting the calls."""

    def value_grad(h):
        calls.append(np.array(h))
        r = A @ np.log(h) - b
        return float(r @ r), 2.0 * A.T @ r, 2.0 * A.T @ A

    return Memo(lambda h: value_grad(h)[0], value_grad)


def test_levenberg_marquardt_reaches_a_least_squares_minimum():
    """On a criterion that is a sum of squares linear in ``log h`` Gauss-Newton is exact: the
    tight run ends at the minimum (written out by lstsq) in a few passes, never above its start."""
    rng = np.random.default_rng(2)
    A = rng.normal(size=(20, 3))
    x_min = np.log([0.2, 1.5, 0.05])
    b = A @ x_min + rng.normal(0, 0.01, 20)
    want = np.linalg.lstsq(A, b, rcond=None)[0]
    calls: list = []
    memo = _least_squares(A, b, calls)
    lower, cap, upper = np.full(3, 1e-4), np.full(3, 1e3), np.full(3, 1e4)
    run = gauss_newton(memo, 1.0, lower, cap, upper)
    h0 = np.array([1.0, 1.0, 1.0])
    h, score, res = run(h0)
    np.testing.assert_allclose(np.log(h), want, atol=1e-6)
    assert score <= memo(h0) and res.success and len(calls) <= 6


def test_loose_run_stops_after_its_steps_and_holds_smoothed_columns():
    """A loose run takes LOOSE_STEPS steps that score lower (one pass each past the start); a
    column on its upper bound stays there; a start outside [lower, cap] is clipped into it."""
    rng = np.random.default_rng(3)
    A = rng.normal(size=(30, 3))
    b = A @ np.log([0.3, 0.3, 0.3]) + rng.normal(0, 0.5, 30)  # noisy: the steps keep gaining
    calls: list = []
    memo = _least_squares(A, b, calls)
    lower, cap, upper = np.full(3, 1e-3), np.full(3, 10.0), np.full(3, 1e4)
    run = gauss_newton(memo, 1.0, lower, cap, upper)
    h0 = np.array([50.0, 1e4, 1.0])  # column 0 beyond the cap, column 1 smoothed out
    h, score, res = run(h0, "loose")
    assert h[1] == 1e4 and all(c[1] == 1e4 for c in calls)
    assert calls[0][0] == pytest.approx(10.0, rel=1e-15)  # clipped to the cap
    assert res.nit <= LOOSE_STEPS and len(calls) <= 1 + LOOSE_STEPS + 8  # rejected steps cost a pass
    assert score <= memo(calls[0])


def test_tight_lbfgsb_on_the_scaled_variable_ends_at_the_minimum_and_stops_ahead():
    """The tight L-BFGS-B, on ``log h`` scaled by the Gauss-Newton diagonal at its start, ends at
    a least-squares minimum; where the Gauss-Newton step left is tiny it stops without another
    pass (the message says so)."""
    rng = np.random.default_rng(4)
    A = rng.normal(size=(25, 2)) * [1.0, 30.0]  # badly scaled columns
    b = A @ np.log([0.5, 2.0]) + rng.normal(0, 0.01, 25)
    want = np.linalg.lstsq(A, b, rcond=None)[0]
    calls: list = []
    memo = _least_squares(A, b, calls)
    lower, cap, upper = np.full(2, 1e-3), np.full(2, 1e2), np.full(2, 1e4)
    start = np.array([1.0, 1.0])
    memo.with_gradient(start)  # the start's matrix, as a loose run leaves it
    h, score, res = lbfgsb(memo, 1.0, lower, cap, upper)(start)
    np.testing.assert_allclose(np.log(h), want, atol=1e-4)
    assert score <= memo(start) and res.success
    assert "GAUSS-NEWTON STEP LEFT" in res.message


def test_sweep_counts_the_points_next_to_a_minimum_as_risen():
    """With ``near``, a polished column's grid points within that factor of it are not scored;
    the walk still finds a lower point further out."""
    scored: list = []

    def f(h):
        scored.append(float(h[0]))
        x = np.log(h[0])
        return float(min((x - np.log(0.5)) ** 2, (x - np.log(4.0)) ** 2 - 1.0))

    grid = np.array([0.05, 0.2, 0.4, 0.8, 3.2, 12.8, 20.0])
    h, score, moved = sweep(f, np.array([0.5]), f(np.array([0.5])), [grid], rounds=1, patience=2, near=2.0)
    assert 0.4 not in scored and 0.8 not in scored  # within a factor 2 of 0.5
    assert moved and h[0] == 3.2 and score == f(np.array([3.2]))
    scored.clear()
    sweep(f, np.array([0.5]), f(np.array([0.5])), [grid], rounds=1, patience=2)
    assert 0.4 in scored and 0.8 in scored  # without near, as before


def test_far_keys_score_as_near_ones():
    """Keys near 1e6 (differences of 1e-2): the search's reported score and its passes' scores
    equal the primitive's exact pass and the same data moved to 0."""
    rng = np.random.default_rng(3)
    n = 240
    far = rng.uniform(0, 1, (n, 3)) + 1e6
    X = far - 1e6  # exactly (Sterbenz): the same differences
    y = np.sin(6 * X[:, 0]) + 0.5 * X[:, 1] + rng.normal(0, 0.2, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = select_bandwidth(far, y, per_feature=True)
    h = np.asarray(res.bandwidth, dtype=np.float64)
    near = score_bandwidth(X, y, h)
    assert res.score == pytest.approx(float(score_bandwidth(far, y, h)), rel=1e-12)
    assert res.score == pytest.approx(near, rel=1e-12)
    obj = _Objective(far, y[:, None], None, get("gaussian"), "cv", "auto")
    assert obj.with_gradient(h)[0] == pytest.approx(near, rel=1e-12)
    assert obj.column(h, np.array([0]), h[:1])[0] == pytest.approx(near, rel=1e-12)
