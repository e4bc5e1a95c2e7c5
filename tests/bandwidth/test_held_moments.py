"""The gradient pass that skips the moments of the features a search holds fixed.

A polish holds each feature at its upper bound (smoothed out) there; the pass then sums moments
only for the others (``loo_gradient(..., moments=mask)``, ``with_gradient(h, held=...)``). The
free features' gradient and Gauss-Newton matrix must be those of the full pass and of a
reference written out here (central differences of leave-one-out predictions computed per row,
own term left out); the held entries are NaN, never a silent wrong number.
"""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya.bandwidth._gradient import loo_gradient
from nadaraya.bandwidth._objective import _Objective
from nadaraya.bandwidth._passes import shifts
from nadaraya.kernels import get


def _loo(X, y, h, s):
    """Leave-one-out predictions of the Gaussian Nadaraya-Watson fit with key weights ``s``."""
    u = (X[:, None, :] - X[None, :, :]) / h
    g = 0.5 * (u**2).sum(axis=2)
    np.fill_diagonal(g, np.inf)  # the own term left out
    w = s * np.exp(-(g - g.min(axis=1, keepdims=True)))
    return w @ y / w.sum(axis=1)


def _data(kind, n=240, d=4, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(6 * X[:, 0]) + 0.5 * X[:, 1] + rng.normal(0, 0.2, n)
    if kind == "far":
        X = X + 1e6
    elif kind == "duplicates":
        X[n // 2 :] = X[: n - n // 2]
    return X, y


@pytest.mark.parametrize("mask", [(1, 1, 0, 0), (0, 1, 0, 1), (1, 0, 0, 0), (0, 0, 0, 0), (1, 1, 1, 1)])
def test_masked_moments_are_the_full_ones(mask):
    """Every kept feature's moments equal the full pass's (to rounding: the generated loop
    differs only in the sums it leaves out); the sums ``S``, ``T`` are unchanged."""
    X, y = _data("plain")
    h = np.array([0.05, 0.1, 0.2, 0.3])
    zt = np.ascontiguousarray((X / (np.sqrt(2.0) * h)).T)
    c, ref = shifts(zt)
    s, sy = np.ones(X.shape[0]), np.ascontiguousarray(y[None])
    S, T, A, B = loo_gradient(zt, c, ref, s, sy)
    keep = np.array(mask, dtype=bool)
    Sm, Tm, Am, Bm = loo_gradient(zt, c, ref, s, sy, keep)
    np.testing.assert_allclose(Sm, S, rtol=1e-13)
    np.testing.assert_allclose(Tm, T, rtol=1e-13)
    cols = keep if keep.any() else np.ones(4, dtype=bool)  # an empty mask sums them all
    np.testing.assert_allclose(Am[:, cols], A[:, cols], rtol=1e-12, atol=1e-12 * np.abs(A).max())
    np.testing.assert_allclose(Bm[:, cols], B[:, cols], rtol=1e-12, atol=1e-12 * np.abs(B).max())


@pytest.mark.parametrize("kind", ["plain", "far", "duplicates"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_held_features_gradient(kind, weighted, method):
    """``with_gradient(h, held=...)``: the score and the free entries as without ``held``; the
    held entries NaN; CV's free entries the central differences of the plain CV."""
    X, y = _data(kind)
    n = X.shape[0]
    s = np.random.default_rng(1).uniform(0.5, 2.0, n) if weighted else None
    h = np.array([0.06, 0.12, 1e4, 1e4])  # the last two at a bound of the search: held
    held = np.array([False, False, True, True])
    obj = _Objective(X, y[:, None], s, get("gaussian"), method, "auto")
    full = obj.with_gradient(h, gauss_newton=True)
    part = obj.with_gradient(h, gauss_newton=True, held=held)
    assert part[0] == pytest.approx(full[0], rel=1e-13)
    np.testing.assert_allclose(part[1][~held], full[1][~held], rtol=1e-10, atol=1e-14)
    assert np.isnan(part[1][held]).all()
    if method == "cv":
        np.testing.assert_allclose(part[2][np.ix_(~held, ~held)], full[2][np.ix_(~held, ~held)], rtol=1e-10)
        assert np.isnan(part[2][held]).all() and np.isnan(part[2][:, held]).all()
        w = np.ones(n) if s is None else s

        def cv(hh):
            return float(w @ (y - _loo(X, y, hh, w)) ** 2 / w.sum())

        for k in np.flatnonzero(~held):
            step = np.zeros(4)
            step[k] = 1e-5
            slope = (cv(h * np.exp(step)) - cv(h * np.exp(-step))) / 2e-5
            assert part[1][k] == pytest.approx(slope, rel=1e-5, abs=1e-9)
    else:
        assert part[2] is None


def test_the_search_is_the_same_with_held_moments(monkeypatch):
    """A per-feature search whose polishes hold features smoothed out (two noise features)
    ends where the full gradient passes lead it: the same bandwidths and score, to rounding,
    and the same number of passes."""
    from nadaraya.bandwidth import select_bandwidth

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (400, 4))
    y = np.sin(6 * X[:, 0]) + 0.5 * X[:, 1] + rng.normal(0, 0.2, 400)
    calls = []
    plain = _Objective.with_gradient

    def counted(self, h, *args, held=None, **kwargs):
        calls.append(held is not None and bool(np.any(held)))
        return plain(self, h, *args, held=held, **kwargs)

    monkeypatch.setattr(_Objective, "with_gradient", counted)
    res = select_bandwidth(X, y, per_feature=True)
    assert any(calls) and res.smoothed_out.any()  # some pass held a feature

    def full(self, h, *args, held=None, **kwargs):
        return plain(self, h, *args, **kwargs)

    monkeypatch.setattr(_Objective, "with_gradient", full)
    ref = select_bandwidth(X, y, per_feature=True)
    np.testing.assert_allclose(res.bandwidth, ref.bandwidth, rtol=1e-9)
    assert res.score == pytest.approx(ref.score, rel=1e-12)
    assert res.n_passes == ref.n_passes and (res.smoothed_out == ref.smoothed_out).all()
