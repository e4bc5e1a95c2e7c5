"""The laplace backend (fast sum updating for the Laplacian kernel in 1-D) against exact references.

Every query is checked: predictions and the log-sum-exp of the weights to 1e-12 relative
against the reference backend (dense NumPy), and against a plain formula written here, anchored
at each query's nearest key, for queries a million bandwidths from every key (there the
reference's own distances ``(q - k) / h`` carry rounding of about 1e6 ulps, so it is not exact
enough to judge). Sizes 1, 2, 3, 1000, 10007; sorted, unsorted, duplicate and Cauchy keys;
bandwidths from 1e-6 to 1e3 times the keys' range; sample weights with zeros; leave-one-out;
several outputs; float32; the moments of local polynomial fits.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import nadaraya
from nadaraya import backends
from nadaraya.backends import laplace, reference
from nadaraya.kernels import get
from nadaraya.partials import Partials

K = get("laplacian")
P = 3
REL_H = (1e-6, 1e-2, 1.0, 1e3)
KINDS = ("uniform", "sorted", "duplicates", "cauchy")
# (n, m): every size on both sides, the reference's dense pairs kept to about 1e7
SIZES = [(1, 1), (1, 10007), (2, 3), (3, 1000), (1000, 2), (1000, 1000), (10007, 1), (10007, 3),
         (10007, 1000)]


def _keys(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "cauchy":
        return rng.standard_cauchy(n)
    if kind == "duplicates":  # about n / 4 distinct keys, each repeated
        return np.round(rng.uniform(0.0, 5.0, n) * max(1, n // 20)) / max(1, n // 20)
    k = rng.uniform(0.0, 5.0, n)
    return np.sort(k) if kind == "sorted" else k


def _problem(kind: str, n: int, m: int, rel_h: float, seed: int):
    rng = np.random.default_rng(seed)
    k = _keys(kind, n, rng)
    span = float(np.ptp(k)) or 1.0
    lo, hi = float(np.min(k)), float(np.max(k))
    q = rng.uniform(lo - 0.2 * span, hi + 0.2 * span, m)
    q[: m // 7] = rng.choice(k, m // 7)  # queries on keys
    v = rng.normal(size=(n, P)) + k[:, None] / span
    sw = rng.uniform(0.1, 2.0, n)
    sw[rng.random(n) < 0.15] = 0.0  # some keys carry no weight
    return q[:, None], k[:, None], v, sw, np.array([rel_h * span])


def _lse(p: Partials) -> np.ndarray:
    ok = ~p.empty
    return p.shift[ok] + np.log(p.weight[ok])


def _run(q, k, v, h, sw=None, exclude=None, moments=0) -> Partials:
    return laplace.partials(q, k, v, kernel=K, bandwidth=h, sample_weight=sw, exclude=exclude,
                            moments=moments)


def anchored(q, k, v, h, sw=None, exclude=None, degree=0):
    """Plain Nadaraya-Watson for the Laplacian, each query's log weights taken relative to its
    nearest usable key ``a``: ``|q - k| - |q - a|`` is ``|k - a|`` for keys on ``a``'s side
    (no huge distances subtracted, and the sample weights multiply, not added to huge logs).

    Returns the predictions (m, p), the log-sum-exp of the weights (m,), and for ``degree > 0``
    the moments of :func:`nadaraya.backends.reference.moment_shapes` divided by the weight, each
    (m, -1), with their natural sizes (the same sums of absolute values)."""
    q, k = q[:, 0], k[:, 0]
    sw = np.ones(k.size) if sw is None else sw
    m, p = q.size, v.shape[1]
    out, lse = np.full((m, p), np.nan), np.full(m, -np.inf)
    moms = [np.full((m, 1), np.nan) for _ in range(2 * degree)]
    moms += [np.full((m, p), np.nan) for _ in range(degree)]
    sizes = [np.zeros_like(x) for x in moms]
    for i, x in enumerate(q):
        usable = sw > 0
        if exclude is not None and 0 <= exclude[i] < k.size:
            usable[exclude[i]] = False
        if not usable.any():
            continue
        dist = np.where(usable, np.abs(x - k), np.inf)
        a = k[np.argmin(dist)]
        same = (k <= x) == (a <= x)
        rel = np.where(same, np.abs(k - a), np.abs(x - k) - np.abs(x - a)) / h[0]
        w = sw * np.exp(-np.where(usable, rel, np.inf))
        total = w.sum()
        out[i] = w @ v / total
        lse[i] = -abs(x - a) / h[0] + np.log(total)
        u = k - x
        for j in range(1, 2 * degree + 1):
            moms[j - 1][i] = w @ u**j / total
            sizes[j - 1][i] = w @ np.abs(u) ** j / total
        for j in range(1, degree + 1):
            moms[2 * degree + j - 1][i] = (w * u**j) @ v / total
            sizes[2 * degree + j - 1][i] = (w * np.abs(u) ** j) @ np.abs(v) / total
    return out, lse, moms, sizes


#: above this largest log weight (in magnitude) the reference's predictions are not exact
#: enough to judge 1e-12: its log weights ``log sw - |q - k| / h`` round by about this many ulps
FAR = 300.0


def _check_all(got, q, k, v, h, sw=None, exclude=None):
    """Against the reference backend; where it is not exact enough (far queries), the
    predictions against :func:`anchored`."""
    want = reference.partials(q, k, v, kernel=K, bandwidth=h, sample_weight=sw, exclude=exclude)
    scale = float(np.abs(v).max())
    np.testing.assert_array_equal(got.empty, want.empty)
    np.testing.assert_allclose(_lse(got), _lse(want), rtol=1e-12, atol=1e-12)
    near = np.abs(want.shift) <= FAR
    np.testing.assert_allclose(got.finalize()[near], want.finalize()[near], rtol=1e-12, atol=1e-12 * scale,
                               equal_nan=True)
    far = np.nonzero(~near & ~want.empty)[0]
    if far.size:
        pred = anchored(q[far], k, v, h, sw, None if exclude is None else exclude[far])[0]
        np.testing.assert_allclose(got.finalize()[far], pred, rtol=1e-12, atol=1e-12 * scale)


# -- every query against the reference ------------------------------------------------------


@pytest.mark.parametrize("rel_h", REL_H)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n, m", SIZES)
def test_matches_reference(n: int, m: int, kind: str, rel_h: float) -> None:
    q, k, v, sw, h = _problem(kind, n, m, rel_h, seed=n + 7 * m)
    _check_all(_run(q, k, v, h, sw), q, k, v, h, sw)
    _check_all(_run(q, k, v, h), q, k, v, h)  # no sample weights


@pytest.mark.parametrize("rel_h", REL_H)
@pytest.mark.parametrize("kind", KINDS)
def test_far_queries_against_the_anchored_formula(kind: str, rel_h: float) -> None:
    """Queries 1e6 bandwidths left and right of every key, and between two far clusters."""
    _, k, v, sw, h = _problem(kind, 300, 1, rel_h, seed=11)
    lo, hi = float(k.min()), float(k.max())
    q = np.array([[lo - 1e6 * h[0]], [hi + 1e6 * h[0]], [hi + 3e5 * h[0]], [lo - 1e3 * h[0]]])
    for weights in (None, sw):
        got = _run(q, k, v, h, weights)
        pred, lse, _, _ = anchored(q, k, v, h, weights)
        assert np.isfinite(got.finalize()).all()
        np.testing.assert_allclose(got.finalize(), pred, rtol=1e-12, atol=1e-12 * np.abs(v).max())
        np.testing.assert_allclose(got.shift + np.log(got.weight), lse, rtol=1e-12)
    # a far query whose nearest key weighs nothing gets the nearest key that weighs something
    weights = np.ones(k.shape[0])
    weights[np.argmin(k[:, 0])] = 0.0
    got = _run(q[:1], k, v, h, weights)
    np.testing.assert_allclose(got.finalize(), anchored(q[:1], k, v, h, weights)[0], rtol=1e-12, atol=1e-12)


def test_everything_matches_reference_at_10007() -> None:
    """n = m = 10007 with weights and leave-one-out at once, every query."""
    _, k, v, sw, h = _problem("duplicates", 10007, 10007, 1e-2, seed=5)
    _check_all(_run(k, k, v, h, sw, np.arange(10007)), k, k, v, h, sw, np.arange(10007))


# -- leave-one-out ------------------------------------------------------------------------------


@pytest.mark.parametrize("rel_h", REL_H)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 3, 1000])
def test_leave_one_out_matches_reference(n: int, kind: str, rel_h: float) -> None:
    _, k, v, sw, h = _problem(kind, n, 1, rel_h, seed=3 * n)
    got = _run(k, k, v, h, sw, np.arange(n))
    _check_all(got, k, k, v, h, sw, np.arange(n))
    if n == 1:
        assert got.empty.all()


@pytest.mark.parametrize("kind", KINDS)
def test_any_exclude_matches_reference(kind: str) -> None:
    """Arbitrary left-out keys (either side of the query, far inside it, zero-weight ones, -1
    and out of range): the sums split at the left-out key."""
    q, k, v, sw, h = _problem(kind, 1000, 1000, 1.0, seed=21)
    rng = np.random.default_rng(4)
    exclude = rng.integers(-1, 1001, size=1000)
    for weights in (None, sw):
        _check_all(_run(q, k, v, h, weights, exclude), q, k, v, h, weights, exclude)


def test_loo_pool_matches_reference() -> None:
    _, k, v, sw, h = _problem("duplicates", 1000, 1, 0.05, seed=8)
    got = nadaraya.loo_pool(k, v, kernel="laplacian", bandwidth=h, sample_weight=sw, backend="laplace")
    want = nadaraya.loo_pool(k, v, kernel="laplacian", bandwidth=h, sample_weight=sw, backend="reference")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(v).max())


# -- end to end, dtypes, moments, errors --------------------------------------------------------


def test_pool_end_to_end() -> None:
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 5, 2000)
    y = 2 * np.sin(x) + x + rng.normal(size=2000)
    q = np.linspace(-1, 6, 500)
    got = nadaraya.pool(q, x, y, kernel="laplacian", bandwidth=0.2, backend="laplace")
    want = nadaraya.pool(q, x, y, kernel="laplacian", bandwidth=0.2, backend="reference")
    assert got.shape == (500,)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(y).max())


def test_float32_is_computed_in_float64() -> None:
    q, k, v, sw, h = _problem("uniform", 1000, 500, 1e-2, seed=9)
    args32 = [a.astype(np.float32) for a in (q, k, v)]
    got = laplace.partials(*args32, kernel=K, bandwidth=h, sample_weight=sw.astype(np.float32))
    assert got.weight.dtype == got.value.dtype == got.shift.dtype == np.float32
    # the exact answer for the float32 inputs, computed in float64
    want = reference.partials(*(a.astype(np.float64) for a in args32), kernel=K, bandwidth=h,
                              sample_weight=sw.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(got.finalize(), want.finalize(), rtol=0,
                               atol=4 * np.finfo(np.float32).eps * np.abs(v).max())


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("rel_h", REL_H)
@pytest.mark.parametrize("kind", KINDS)
def test_moments_match_reference(kind: str, rel_h: float, degree: int) -> None:
    """Each moment over the weight within 1e-12 of the size of its terms (the same sum of
    absolute values), against :func:`anchored` on every query and the reference backend on the
    near ones."""
    q, k, v, sw, h = _problem(kind, 400, 300, rel_h, seed=13)
    for exclude in (None, np.random.default_rng(1).integers(-1, 400, size=300)):
        got = _run(q, k, v, h, sw, exclude, moments=degree)
        want = reference.partials(q, k, v, kernel=K, bandwidth=h, sample_weight=sw, exclude=exclude,
                                  moments=degree)
        _check_all(got, q, k, v, h, sw, exclude)
        assert [g.shape for g in got.moments] == [w.shape for w in want.moments]
        _, _, plain, sizes = anchored(q, k, v, h, sw, exclude, degree)
        ok = ~want.empty
        near = ok & (np.abs(want.shift) <= FAR)
        for g, w, x, size in zip(got.moments, want.moments, plain, sizes):
            mine = g.reshape(g.shape[0], -1) / got.weight[:, None]
            theirs = w.reshape(w.shape[0], -1) / want.weight[:, None]
            assert np.all(np.abs(mine[ok] - x[ok]) <= 1e-12 * size[ok])
            assert np.all(np.abs(mine[near] - theirs[near]) <= 1e-12 * size[near])


def test_extreme_sample_weights_are_scaled_exactly() -> None:
    q, k, v, sw, h = _problem("uniform", 200, 50, 0.1, seed=17)
    for factor in (1e-300, 1e300):
        _check_all(_run(q, k, v, h, sw * factor), q, k, v, h, sw * factor)
    got = _run(q, k, v, h, np.zeros(200))
    assert got.empty.all()


def test_supports_and_errors() -> None:
    assert laplace.supports(K, 1) and not laplace.supports(K, 2)
    assert not laplace.supports(get("gaussian"), 1)
    x = np.arange(4.0)[:, None]
    with pytest.raises(ValueError, match=r"backend='laplace'.*up to 2 in d=1; got 3"):
        backends.compute("laplace", x, x, x, kernel=K, bandwidth=np.ones(1), moments=3)
    with pytest.raises(ValueError, match="'gaussian'"):
        backends.compute("laplace", x, x, x, kernel=get("gaussian"), bandwidth=np.ones(1))
    with pytest.raises(ValueError, match="does not support"):
        nadaraya.pool(np.zeros((2, 2)), np.zeros((3, 2)), np.zeros(3), kernel="laplacian", bandwidth=1.0,
                      backend="laplace")
    assert "laplace" in backends.available()


def test_a_million_keys_and_queries_is_fast() -> None:
    """A coarse guard, not a timing: n = m = 1e6 in well under 10 s (about 0.4 s here)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 5, (10**6, 1))
    y = rng.normal(size=(10**6, 1))
    q = rng.uniform(0, 5, (10**6, 1))
    laplace.partials(q[:5], x[:5], y[:5], kernel=K, bandwidth=np.array([0.01]))  # load the compiled code
    start = time.perf_counter()
    got = laplace.partials(q, x, y, kernel=K, bandwidth=np.array([0.01]))
    assert time.perf_counter() - start < 10.0
    _check_all(got[:20], q[:20], x, y, np.array([0.01]))


def test_a_million_keys_keep_the_sum_of_weights_to_rounding() -> None:
    """With a bandwidth 1000 times the keys' range each running sum takes a million steps by
    factors next to 1: their rounding must not drift (a factor rounded next to 1, or NumPy's
    exp, biased by -0.1 ulp there, lost 3e-12 of the sum of weights)."""
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 5, (10**6, 1))
    y = rng.normal(size=(10**6, 1))
    q = rng.uniform(-1, 6, (8, 1))
    h = np.array([5e3])
    got = _run(q, x, y, h)
    want = reference.partials(q, x, y, kernel=K, bandwidth=h)
    np.testing.assert_allclose(_lse(got), _lse(want), rtol=0, atol=2e-13)
    np.testing.assert_allclose(got.finalize(), want.finalize(), rtol=1e-12, atol=1e-12)
