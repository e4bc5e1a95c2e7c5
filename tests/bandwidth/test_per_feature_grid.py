"""The per-feature search's one-pass grid stops at 2**1.5 times Scott's rule, and scores the
whole grid (up to three times the range) only where its best point is that top.

The grid only picks the polishes' first start: the search must end where the whole grid leads
it (the same bandwidths and score, to rounding), and where the short grid's best is its top the
start must be the whole grid's best, checked against the criterion written out here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nadaraya.bandwidth.search as search
from nadaraya.bandwidth import select_bandwidth


def _loo_cv(X, y, h):
    """Leave-one-out CV of the Gaussian Nadaraya-Watson fit, own term left out."""
    u = (X[:, None, :] - X[None, :, :]) / h
    g = 0.5 * (u**2).sum(axis=2)
    np.fill_diagonal(g, np.inf)
    w = np.exp(-(g - g.min(axis=1, keepdims=True)))
    return float(np.mean((y - w @ y / w.sum(axis=1)) ** 2))


def _select(X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return select_bandwidth(X, y, per_feature=True, **kw)


def _grid_of(res):
    stages = res.search["stages"]
    return res.search["bandwidths"][stages == "grid"], res.search["scores"][stages == "grid"]


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_the_short_grid_leads_where_the_whole_one_does(monkeypatch, method):
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (300, 3))
    y = np.sin(6 * X[:, 0]) + 0.5 * X[:, 1] + rng.normal(0, 0.2, 300)
    res = _select(X, y, method=method)
    hs, _ = _grid_of(res)
    assert len(hs) == 16  # 2**1.5 down to 2**-6 times the rule, ratio sqrt(2)
    np.testing.assert_allclose(hs[0], res.rule_of_thumb * 2.0**1.5, rtol=1e-12)
    monkeypatch.setattr(search, "_PF_ABOVE", 100)  # the whole grid, as before
    ref = _select(X, y, method=method)
    assert len(_grid_of(ref)[0]) > 16
    np.testing.assert_allclose(res.bandwidth, ref.bandwidth, rtol=1e-9)
    assert res.score == pytest.approx(ref.score, rel=1e-12, abs=1e-14)
    assert res.n_passes == ref.n_passes


def test_a_best_at_the_short_top_scores_the_whole_grid():
    """y barely depends on X: along the rule the criterion falls to the largest bandwidths, so
    the short grid's best is its top and the levels above it are scored too (one pass more, each
    level once); the search's first start is the whole grid's best, whose score is the plain
    leave-one-out CV."""
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, (200, 2))
    y = 0.05 * X[:, 0] + rng.normal(0, 1.0, 200)
    res = _select(X, y)
    hs, scores = _grid_of(res)
    assert len(hs) > 16  # the short grid, then the levels above it
    short, upper = scores[:16], scores[16:]
    assert int(np.argmin(short)) == 0
    # every level once: the upper ones continue the chain above the short grid's top, by sqrt 2
    chain = np.concatenate([hs[16:], hs[:16]])  # both descending
    np.testing.assert_allclose(chain[:-1] / chain[1:], np.sqrt(2.0), rtol=1e-12)
    best = int(np.argmin(upper))
    assert upper[best] < short[0]  # above the short grid's top
    h0 = hs[16 + best]
    assert upper[best] == pytest.approx(_loo_cv(X, y, h0), rel=1e-10)
    # the search ends no worse than its start
    assert res.score <= upper[best] * (1 + 1e-12)
