"""The pass that scores bandwidths each changing one feature (``loo_column``) against sums written out.

Each level ``l`` sets feature ``cols[l]``'s bandwidth to ``values[l]`` (the others held); the
leave-one-out sums are checked against ``sum_{j != i} s_j exp(-g_ij)`` computed plainly per row
(the own term left out of the sum, not subtracted), through the shift-free quantities
``T / S`` and ``log S - C - g_ref``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from nadaraya.bandwidth._column import loo_column
from nadaraya.bandwidth._multistart import Memo, profile_each, smooth_out, sweep
from nadaraya.bandwidth._objective import _Objective
from nadaraya.bandwidth._passes import shifts
from nadaraya.kernels import get


def _plain(X, Y, s, h):
    """Per row: the leave-one-out predictions and ``log sum_{j != i} s_j exp(-g_ij)``, each row
    shifted by its own least ``g`` before the exponential (its own term left out)."""
    n = X.shape[0]
    pred = np.empty((n, Y.shape[1]))
    logS = np.empty(n)
    for i in range(n):
        g = 0.5 * (((X - X[i]) / h) ** 2).sum(axis=1)
        keep = np.arange(n) != i
        gk = g[keep]
        c = gk.min()
        w = s[keep] * np.exp(-(gk - c))
        pred[i] = w @ Y[keep] / w.sum()
        logS[i] = math.log(w.sum()) - c
    return pred, logS


def _check(X, Y, s, h, cols, values, ref=None, rtol=1e-12):
    zt = np.ascontiguousarray((X / (math.sqrt(2.0) * h)).T)
    if ref is None:
        _, ref = shifts(zt)
    sy = np.ascontiguousarray((s[:, None] * Y).T)
    with np.errstate(divide="ignore"):
        mult = (h[cols] / values) ** 2
    S, T, C, _, _ = loo_column(zt, ref, s, sy, np.asarray(cols), mult)
    share = (zt - zt[:, ref]) ** 2
    g_ref = share.sum(axis=0)[None, :] + (mult - 1.0)[:, None] * share[cols]
    for lev, (j, v) in enumerate(zip(cols, values)):
        hl = h.copy()
        hl[j] = v
        pred, logS = _plain(X, Y, s, hl)
        np.testing.assert_allclose(T[lev] / S[lev][:, None], pred, rtol=rtol, atol=1e-13 * np.abs(Y).max())
        np.testing.assert_allclose(np.log(S[lev]) - C[lev] - g_ref[lev], logS, rtol=rtol, atol=1e-9)


@pytest.mark.parametrize("n", [7, 300, 600])
def test_every_level_against_plain_sums(n):
    """Levels on every feature, from a hundredth of the bandwidth to smoothed out (inf), sample
    weights and two outputs, across several tiles of keys (600 > 2 tiles)."""
    rng = np.random.default_rng(n)
    X = rng.uniform(0, 1, (n, 3))
    X = X[np.argsort(X[:, 0])]
    Y = np.column_stack([np.sin(5 * X[:, 0]) + rng.normal(0, 0.1, n), rng.normal(size=n)])
    s = rng.uniform(0.2, 1.0, n)
    h = np.array([0.05, 0.2, 1e3])
    cols = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    values = np.array([5e-4, 0.01, np.inf, 0.02, 2.0, 0.01, 0.3, np.inf])
    _check(X, Y, s, h, cols, values)


def test_rows_that_would_overflow_take_the_exact_rows(monkeypatch):
    """Points in no order (a row's own tile of keys holds none of its nearest) and a reference
    far from each row: at a narrow level some rows' nearest points outweigh both the
    reference and the own tile's best by more than exp(700), and those rows are computed
    again with each level's own running shift; the sums do not change. (Each exponent is
    then a difference against the far point's, about 1e5 at the narrow level: its rounding
    bounds the agreement at 1e-9; the search's references are nearest points.)"""
    import nadaraya.bandwidth._column as column

    ran = []
    real = column.run_ranges

    def spy(task, args, m, outputs, *rest, **kw):
        ran.append((task.__name__, m))
        return real(task, args, m, outputs, *rest, **kw)

    monkeypatch.setattr(column, "run_ranges", spy)
    rng = np.random.default_rng(1)
    n = 600
    X = rng.uniform(0, 1, (n, 2))
    Y = np.cos(4 * X[:, :1]) + rng.normal(0, 0.1, (n, 1))
    h = np.array([0.05, 0.05])
    far = np.argmax(np.abs(X[:, :1] - X[:, 0]), axis=0)  # each row's farthest point in x0
    _check(X, Y, np.ones(n), h, np.array([0, 1, 1]), np.array([5e-4, 0.002, np.inf]), ref=far, rtol=1e-9)
    assert ran[0] == ("_fast_rows", n) and ran[1][0] == "_exact_rows" and 0 < ran[1][1] < n


def test_keys_far_from_zero_and_duplicates():
    """Keys near 1e6 with bandwidths of 1e-3 (each share a difference of squares against the
    reference, not of 1e12-sized squares), with duplicated points (weight one each, the own
    term still left out)."""
    rng = np.random.default_rng(2)
    base = rng.uniform(0, 0.05, (60, 2))
    X = 1e6 + np.vstack([base, base[:10]])
    X = X[np.argsort(X[:, 0])]
    Y = rng.normal(size=(70, 1))
    h = np.array([2e-3, 5e-3])
    _check(X - 1e6, Y, np.ones(70), h, np.array([0, 1]), np.array([1e-3, np.inf]), rtol=1e-11)
    # the same sums from the raw keys: the shift-free predictions agree to rounding of 1e6
    zt = np.ascontiguousarray((X / (math.sqrt(2.0) * h)).T)
    zc = np.ascontiguousarray(((X - 1e6) / (math.sqrt(2.0) * h)).T)
    _, ref = shifts(zc)
    mult = np.array([4.0, 0.0])
    S, T, *_ = loo_column(zt, ref, np.ones(70), np.ascontiguousarray(Y.T), np.array([0, 1]), mult)
    Sc, Tc, *_ = loo_column(zc, ref, np.ones(70), np.ascontiguousarray(Y.T), np.array([0, 1]), mult)
    np.testing.assert_allclose(T / S[..., None], Tc / Sc[..., None], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_objective_column_matches_one_pass_per_bandwidth(method):
    """Every level's criterion equals the primitive's leave-one-out pass at that bandwidth."""
    rng = np.random.default_rng(3)
    n = 300
    X = rng.uniform(0, 1, (n, 4))
    y = np.sin(6 * X[:, 0]) + 0.5 * X[:, 1] + rng.normal(0, 0.2, n)
    obj = _Objective(X, y[:, None], rng.uniform(0.5, 2.0, n), get("gaussian"), method, "auto")
    h = np.array([0.04, 0.1, 1e4, 0.3])
    cols = np.array([0, 0, 1, 2, 2, 3])
    values = np.array([0.005, 0.2, np.inf, 0.05, 1.0, 1e5])
    passes = obj.n_passes
    got = obj.column(h, cols, values)
    assert obj.n_passes == passes + 1
    for (j, v), score in zip(zip(cols, values), got):
        trial = h.copy()
        trial[j] = v
        want = obj.at(trial)
        assert score == want or abs(score - want) <= 1e-11 * abs(want), (j, v)


def test_memo_batch_scores_the_new_bandwidths_in_one_pass():
    """Bandwidths scored before are not scored again; the others take one pass together."""
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (80, 3))
    y = X[:, 0] + rng.normal(0, 0.1, 80)
    obj = _Objective(X, y[:, None], None, get("gaussian"), "cv", "auto")
    f = Memo(lambda h: obj.at(h), obj.with_gradient, column=obj.column)
    h = np.array([0.1, 0.2, 0.3])
    f(h)
    first = f.batch(h, [(0, 0.05), (1, 0.4), (0, 0.05)])
    passes = obj.n_passes
    again = f.batch(h, [(1, 0.4), (2, np.inf), (0, 0.05)])
    assert obj.n_passes == passes + 1  # only (2, inf) was new
    assert again[0] == first[1] and again[2] == first[0]
    trial = h.copy()
    trial[2] = np.inf
    assert again[1] == pytest.approx(obj.at(trial), rel=1e-11)


def test_batched_steps_choose_what_one_call_each_chooses():
    """``smooth_out`` and ``sweep`` on a criterion that scores columns in batches return what
    they return calling it once per bandwidth (a plain function)."""

    def plain(h):
        return float((np.log(h[0] / 0.3)) ** 2 + 1.0 / (1.0 + h[1]) + 0.1 * np.log1p(h[2]))

    calls = []

    def column(h, cols, values):
        calls.append(len(values))
        out = []
        for j, v in zip(cols, values):
            t = np.array(h)
            t[j] = v
            out.append(plain(t))
        return np.array(out)

    upper = np.full(3, 1e4)
    span = np.ones(3)
    h0 = np.array([2.0, 3.0, 5.0])
    want = smooth_out(plain, h0, plain(h0), upper, span)
    got = smooth_out(Memo(plain, column=column), h0, plain(h0), upper, span)
    assert np.array_equal(want[0], got[0]) and want[1:] == got[1:]
    assert calls == [3, 1]  # all three at once, then the one after the first kept
    g = [np.geomspace(0.01, 10.0, 9)] * 3
    want = sweep(plain, h0, plain(h0), g, rounds=2, patience=2)
    got = sweep(Memo(plain, column=column), h0, plain(h0), g, rounds=2, patience=2)
    assert np.array_equal(want[0], got[0]) and want[1:] == got[1:]
    assert profile_each(plain, h0, [(0, 0.3)]) == [plain(np.array([0.3, 3.0, 5.0]))]
