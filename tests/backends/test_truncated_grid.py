"""The exact truncated sums in 2 and 3 features (a grid of cells) against dense log-domain sums."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
import nadaraya.backends._truncated_grid as _truncated_grid
from nadaraya.backends import _truncated_grid as grid
from nadaraya.backends import reference, truncated
from nadaraya.kernels import get

K = get("gaussian")


def dense(q, k, v, h, sw=None, exclude=None):
    """Plain log-domain Gaussian sums over every key: the largest log weight, the log of the
    weights' sum and the predictions."""
    u = (q[:, None, :] - k[None, :, :]) * (1.0 / h)
    with np.errstate(divide="ignore"):
        lw = -0.5 * (u * u).sum(axis=2) + (0.0 if sw is None else np.log(sw)[None, :])
    if exclude is not None:
        lw[np.arange(q.shape[0]), exclude] = -np.inf
    top = lw.max(axis=1, keepdims=True)
    w = np.exp(lw - top)
    return top[:, 0], top[:, 0] + np.log(w.sum(axis=1)), (w @ v) / w.sum(axis=1, keepdims=True)


def check(q, k, v, h, sw=None, exclude=None, rtol=1e-13):
    """The grid's partials against :func:`dense` on every query: predictions within ``rtol``
    of the largest value, the log of the weight sum to 1e-13 relative, the shift at or above the
    largest log weight."""
    part = truncated.partials(q, k, v, kernel=K, bandwidth=h, sample_weight=sw, exclude=exclude)
    top, log_w, pred = dense(q, k, v, h, sw, exclude)
    err = np.abs(part.finalize() - pred)
    assert np.all(err <= rtol * np.abs(v).max()), err.max()
    got_log_w = part.shift + np.log(part.weight)
    gap = np.abs(got_log_w - log_w)
    assert np.all(gap <= 1e-13 * np.maximum(1.0, np.abs(log_w))), gap.max()
    assert np.all(part.shift >= top - 1e-13 * np.abs(top))
    return part


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("h", [5e-6, 1e-3, 0.03, 0.3, 3.0, 300.0, 5e3])  # 1e-6 to 1e3 times the range
def test_matches_dense_sums_on_every_query(d, h):
    rng = np.random.default_rng(int(d * 1000 + h * 10))
    k = rng.uniform(0, 5, (700, d))
    q = np.vstack([rng.uniform(-1, 6, (300, d)), k[:20]])
    v = rng.normal(size=(700, 2))
    check(q, k, v, np.full(d, h))


@pytest.mark.parametrize("d", [2, 3])
def test_per_feature_bandwidths_sample_weights_and_leave_one_out(d):
    rng = np.random.default_rng(d)
    k = rng.uniform(0, 5, (900, d))
    v = rng.normal(size=(900, 1))
    h = np.array([0.05, 0.4, 2.0])[:d]
    sw = rng.uniform(0.1, 3.0, 900)
    sw[::7] = 0.0  # zero-weight keys add nothing
    check(k, k, v, h, sw=sw, exclude=np.arange(900))
    check(k[:50], k, v, h, exclude=np.arange(50))


def test_duplicates_clusters_and_heavy_tails():
    rng = np.random.default_rng(3)
    k = np.vstack([np.repeat(rng.uniform(0, 1, (40, 2)), 5, axis=0), rng.standard_cauchy((300, 2))])
    v = rng.normal(size=(k.shape[0], 1))
    q = np.vstack([k[::3], rng.standard_cauchy((200, 2))])
    for h in (1e-4, 0.01, 1.0):
        check(q, k, v, np.full(2, h), rtol=1e-12)


def test_no_key_with_weight_gives_empty_partials_like_the_reference():
    rng = np.random.default_rng(6)
    k = rng.uniform(size=(50, 2))
    v = rng.normal(size=(50, 1))
    part = truncated.partials(k, k, v, kernel=K, bandwidth=np.ones(2), sample_weight=np.zeros(50))
    ref = reference.partials(k, k, v, kernel=K, bandwidth=np.ones(2), sample_weight=np.zeros(50))
    assert np.all(part.weight == 0) and np.all(ref.weight == 0)
    assert np.array_equal(part.shift, ref.shift)


def test_far_queries_keep_their_nearest_key():
    k = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    v = np.array([[1.0], [2.0], [3.0]])
    q = np.array([[1e3, 0.0, 0.0], [0.0, 0.0, -1e8], [0.5, 0.0, 0.0]])
    part = check(q, k, v, np.ones(3), rtol=1e-12)
    assert part.finalize()[0, 0] == pytest.approx(2.0, abs=1e-12)  # nearest key (1, 0, 0)


def test_leave_one_out_when_the_own_key_carries_the_sum():
    """A query on its own key, all other keys far: the sum is what remains, never a cancellation."""
    k = np.array([[0.0, 0.0], [30.0, 0.0], [0.0, 31.0]])
    v = np.array([[5.0], [1.0], [2.0]])
    part = truncated.partials(k, k, v, kernel=K, bandwidth=np.ones(2), exclude=np.arange(3))
    _, _, pred = dense(k, k, v, np.ones(2), exclude=np.arange(3))
    np.testing.assert_allclose(part.finalize(), pred, rtol=1e-12)


def test_float32_is_rounded_once():
    rng = np.random.default_rng(5)
    k = rng.uniform(0, 5, (500, 2))
    v = rng.normal(size=(500, 1))
    part = truncated.partials(k.astype(np.float32), k.astype(np.float32), v.astype(np.float32), kernel=K,
                              bandwidth=np.full(2, 0.1, dtype=np.float32))
    assert part.weight.dtype == np.float32 and part.shift.dtype == np.float32
    _, _, pred = dense(k.astype(np.float32).astype(float), k.astype(np.float32).astype(float),
                    v.astype(np.float32).astype(float), np.full(2, np.float32(0.1), dtype=float))
    assert np.abs(part.finalize() - pred).max() <= 4 * np.finfo(np.float32).eps * np.abs(v).max()


def test_skips_only_keys_below_the_stated_ratio():
    """The keys it leaves out weigh under 2^-60 of each query's largest term, together: with a
    key placed just inside the radius, its (tiny) weight is still summed."""
    n = 2000
    big_l = _truncated_grid.log_ratio(n)
    rng = np.random.default_rng(9)
    k = np.vstack([rng.uniform(0, 0.01, (n - 1, 2)), [[math.sqrt(2 * big_l) - 0.5, 0.0]]])
    v = np.zeros((n, 1))
    v[-1] = 1.0
    q = np.zeros((1, 2))
    part = truncated.partials(q, k, v, kernel=K, bandwidth=np.ones(2))
    _, _, pred = dense(q, k, v, np.ones(2))
    assert pred[0, 0] > 0 and part.finalize()[0, 0] == pytest.approx(pred[0, 0], rel=1e-12)


def test_auto_takes_the_grid_where_windows_are_small_and_agrees():
    from nadaraya._core.call import compute_partials, prepare

    rng = np.random.default_rng(2)
    x = rng.uniform(0, 5, (4000, 2))
    y = np.sin(x).sum(axis=1)
    _, small = compute_partials(prepare(x, x, y, kernel="gaussian", bandwidth=0.01))
    _, wide = compute_partials(prepare(x, x, y, kernel="gaussian", bandwidth=1.0))
    _, local = compute_partials(prepare(x, x, y, kernel="gaussian", bandwidth=0.01), moments=1)
    assert (small.name, wide.name, local.name) == ("truncated", "fused", "truncated")  # local fits too
    exact = nadaraya.pool(x, x, y, bandwidth=0.01, backend="reference")
    np.testing.assert_allclose(nadaraya.pool(x, x, y, bandwidth=0.01), exact, rtol=1e-12, atol=1e-13)


def test_pairs_estimate_tracks_the_true_count():
    rng = np.random.default_rng(4)
    k = rng.uniform(0, 5, (20000, 3))
    h = np.full(3, 0.1)
    big_l = _truncated_grid.log_ratio(k.shape[0])
    est = grid.pairs(k[:2000], k, h, big_l)
    d2 = (((k[:200, None, :] - k[None, :, :]) / h) ** 2).sum(axis=2)
    true_in_ball = (d2 <= 2 * big_l).sum(axis=1).mean() * 2000
    assert true_in_ball <= est <= 6 * true_in_ball


@given(
    d=st.sampled_from([2, 3]),
    n=st.integers(1, 60),
    m=st.integers(1, 20),
    log_h=st.floats(-4.0, 2.0),
    seed=st.integers(0, 2**16),
    weighted=st.booleans(),
    leave_out=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_random_problems_match_the_reference(d, n, m, log_h, seed, weighted, leave_out):
    """Clustered keys (a few sites, duplicates), per-feature bandwidths over six decades, zero and
    positive sample weights, some queries leaving a key out and some (-1) none."""
    rng = np.random.default_rng(seed)
    sites = rng.uniform(-3, 3, (3, d))
    k = sites[rng.integers(0, 3, n)] + rng.normal(0, 0.05, (n, d)) * rng.integers(0, 2, (n, 1))
    q = np.vstack([k[: min(m, n)], rng.uniform(-4, 4, (m, d))])
    v = rng.normal(size=(n, 2))
    h = 10.0 ** (log_h + rng.uniform(-0.5, 0.5, d))
    sw = rng.uniform(0.0, 2.0, n) * (rng.random(n) > 0.2) if weighted else None
    if sw is not None and not (sw > 0).any():
        sw[0] = 1.0
    ex = None
    if leave_out:
        ex = np.concatenate([np.arange(min(m, n)), np.full(m, -1)])
    got = truncated.partials(q, k, v, kernel=K, bandwidth=h, sample_weight=sw, exclude=ex)
    want = reference.partials(q, k, v, kernel=K, bandwidth=h, sample_weight=sw, exclude=ex)
    ok = want.weight > 0
    assert np.array_equal(got.weight > 0, ok)
    lse = lambda p: p.shift[ok] + np.log(p.weight[ok])  # noqa: E731
    np.testing.assert_allclose(lse(got), lse(want), rtol=1e-12, atol=1e-12)
    scale = np.abs(v).max()
    np.testing.assert_allclose(got.finalize()[ok], want.finalize()[ok], rtol=1e-11, atol=1e-11 * scale)
