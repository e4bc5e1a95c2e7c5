"""The taylor backend in 2 and 3 features (issue 16, item 3): every prediction within ``tol * max|v|``
of the exact sums on every query, whichever boxes take the series; its pieces against plain
formulas; the choice behind ``backend="auto"``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya import backends
from nadaraya.backends import _taylor_nd, reference, taylor
from nadaraya.kernels import get as kernel

GAUSS = kernel("gaussian")


def _points(kind: str, n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        return rng.uniform(0, 5, (n, d))
    if kind == "clustered":  # tight clusters far apart
        return rng.choice([0.0, 2.0, 40.0], (n, 1)) + rng.normal(0, 0.05, (n, d))
    if kind == "cauchy":  # heavy tails
        return rng.standard_cauchy((n, d))
    return rng.integers(0, 4, (n, d)).astype(float) * 0.5  # duplicates


def _case(kind: str, n: int, m: int, d: int, seed: int, p: int = 2):
    rng = np.random.default_rng(seed)
    x = _points(kind, n, d, rng)
    lo, hi = np.quantile(x, 0.02, axis=0), np.quantile(x, 0.98, axis=0)
    q = rng.uniform(lo - 0.2 * (hi - lo) - 0.5, hi + 0.2 * (hi - lo) + 0.5, (m, d))
    v = np.column_stack([np.sin(x).sum(axis=1), rng.normal(size=n), rng.uniform(-3, 1, n)])[:, :p]
    sw = rng.uniform(0.2, 3.0, n)
    sw[rng.random(n) < 0.1] = 0.0
    if not sw.any():
        sw[0] = 1.0
    return q, x, v, sw


def _check(q, x, v, sw, h, tol) -> float:
    """The largest error of the series' predictions in units of ``tol * max|v|`` (per column,
    over the keys with weight); the documented bound is 1."""
    h = np.asarray(h, dtype=float)
    got = taylor.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=sw, tol=tol)
    exact = reference.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=sw)
    g, e = got.finalize(), exact.finalize()
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
    keep = slice(None) if sw is None else sw > 0
    scale = tol * np.abs(v[keep]).max(axis=0)
    ok = ~np.isnan(e)
    return float(np.max(np.abs(g - e)[ok] / np.broadcast_to(scale, g.shape)[ok]))


def _series_share(q, x, h, tol) -> float:
    return _taylor_nd.plan(q, x, np.asarray(h, dtype=float), tol)["series"]


@pytest.mark.parametrize(("d", "h"), [(2, 0.4), (2, 3.0), (2, 8.0), (3, 0.4), (3, 8.0), (3, 30.0)])
@pytest.mark.parametrize("tol", [1e-4, 1e-10, 1e-12])
def test_every_prediction_within_tol_where_the_series_runs(d: int, tol: float, h: float) -> None:
    """Narrow boxes hold too few queries for the series to pay (all exact); wide ones take it
    (in 3-D only at the widest bandwidths); at h = 3 in 2-D some boxes do and some do not."""
    q, x, v, sw = _case("uniform", 2500, 3000, d, seed=d * 10 + int(h))
    if (d, h) in ((2, 3.0), (2, 8.0), (3, 30.0)):
        assert _series_share(q, x, np.full(d, h), tol) > 0.5
    assert _check(q, x, v, sw, np.full(d, h), tol) <= 1.0


def test_keys_beyond_the_radius_are_dropped_within_the_bound() -> None:
    """Keys spread over 12 bandwidths, many queries per box: the boxes take the series and drop
    the keys beyond their radius (about 9 bandwidths at 1e-10); the sampled queries still hold."""
    rng = np.random.default_rng(21)
    x = rng.uniform(0, 12, (5000, 2))
    v = np.column_stack([np.sin(x[:, 0]) + x[:, 1] / 4, rng.normal(size=5000)])
    q = rng.uniform(0, 12, (30000, 2))
    h = np.array([1.0, 1.0])
    plan = _taylor_nd.plan(q, x, h, 1e-10)
    assert plan["series"] > 0.5 and plan["radius"] < 12
    got = taylor.partials(q, x, v, kernel=GAUSS, bandwidth=h, tol=1e-10).finalize()
    some = rng.choice(30000, 1500, replace=False)
    exact = reference.partials(q[some], x, v, kernel=GAUSS, bandwidth=h).finalize()
    assert np.all(np.abs(got[some] - exact) <= 1e-10 * np.abs(v).max(axis=0))


@pytest.mark.parametrize("kind", ["clustered", "cauchy", "duplicates"])
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("rel_h", [1e-6, 1e-2, 0.3, 1e3])
def test_awkward_data_and_bandwidths_from_1e_6_to_1e3_of_the_range(kind: str, d: int, rel_h: float) -> None:
    q, x, v, sw = _case(kind, 1200, 800, d, seed=int(rel_h * 1e6) % 89 + d)
    span = np.quantile(x, 0.98, axis=0) - np.quantile(x, 0.02, axis=0)
    h = rel_h * np.maximum(span, 1e-3) * np.linspace(0.7, 1.4, d)  # per-feature bandwidths
    assert _check(q, x, v, sw, h, 1e-10) <= 1.0


@pytest.mark.parametrize(("n", "m"), [(1, 1), (2, 3), (3, 2), (17, 5), (5, 17), (900, 1), (1, 900)])
def test_awkward_sizes(n: int, m: int) -> None:
    q, x, v, sw = _case("uniform", n, m, 2, seed=n * 31 + m)
    for h in (0.01, 2.0, 50.0):
        assert _check(q, x, v, sw, np.array([h, 0.5 * h]), 1e-10) <= 1.0
        assert _check(q, x, v, None, np.array([h, 0.5 * h]), 1e-10) <= 1.0


def test_a_loose_tolerance_is_used_and_still_holds() -> None:
    """At ``tol = 1e-3`` the series takes fewer terms and its answer differs from the exact one,
    within the bound."""
    q, x, v, sw = _case("uniform", 3000, 3000, 2, seed=5)
    h = np.array([4.0, 6.0])
    loose = taylor.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=sw, tol=1e-3).finalize()
    exact = reference.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=sw).finalize()
    assert np.abs(loose - exact).max() > 1e-13
    assert _check(q, x, v, sw, h, 1e-3) <= 1.0
    assert 0 < _taylor_nd.plan(q, x, h, 1e-3)["terms"] < _taylor_nd.plan(q, x, h, 1e-10)["terms"]


def test_float32_within_tol_plus_single_precision_rounding() -> None:
    q, x, v, sw = _case("uniform", 2000, 1000, 2, seed=3)
    q32, x32, v32, sw32 = (a.astype(np.float32) for a in (q, x, v, sw))
    got = nadaraya.pool(q32, x32, v32, bandwidth=[1.0, 2.0], sample_weight=sw32, backend="taylor", tol=1e-10)
    assert got.dtype == np.float32
    exact = nadaraya.pool(q32.astype(float), x32.astype(float), v32.astype(float), bandwidth=[1.0, 2.0],
                          sample_weight=sw32.astype(float), backend="reference")
    err = np.abs(got - exact) / np.abs(v32).max(axis=0)
    assert err.max() <= 1e-10 + 8 * np.finfo(np.float32).eps


def test_far_queries_get_the_log_domain_answer() -> None:
    """Queries thousands of bandwidths from every key, beside queries whose box takes the series:
    the exact log-domain answer (the nearest key's value where it is nearer than the others by
    many bandwidths squared, a softmax of the nearest ones otherwise), never 0/0."""
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, (3000, 2))
    v = x[:, 0] + 2 * x[:, 1]
    x[0], v[0] = [-3.0, 0.5], 9.0  # nearer than every other key to the first far query by 2e4 h^2
    q = np.vstack([rng.uniform(0, 1, (2000, 2)), [[-5e3, 0.5], [0.5, 8e3]]])
    assert _series_share(q, x, np.array([0.5, 0.5]), 1e-10) > 0.5
    got = nadaraya.pool(q, x, v, bandwidth=0.5, backend="taylor", tol=1e-10)
    assert got[-2] == 9.0
    dist2 = (((x - q[-1]) / 0.5) ** 2).sum(axis=1)
    w = np.exp(-0.5 * (dist2 - dist2.min()))  # the plain softmax, relative to the nearest
    # 16000 bandwidths out, dist2 ~ 2.6e8 carries absolute rounding ~3e-8: so do the weights
    assert abs(got[-1] - w @ v / w.sum()) <= 1e-6 * np.abs(v).max()
    exact = nadaraya.pool(q[:-2], x, v, bandwidth=0.5, backend="reference")
    assert np.abs(got[:-2] - exact).max() <= 1e-10 * np.abs(v).max()


@pytest.mark.parametrize("kind", ["uniform", "clustered", "duplicates"])
@pytest.mark.parametrize(("d", "h"), [(2, 1.5), (2, 6.0), (3, 20.0), (2, 0.05)])
def test_leave_one_out_within_tol(kind: str, d: int, h: float) -> None:
    """Each point without its own key (other keys at the same place stay), against the
    reference's masked sums, in units of tol * max|v| on every point; where the point's own key
    would carry its box's sum the point is exact. The series must run for the wide bandwidths."""
    _, x, v, sw = _case(kind, 3000, 1, d, seed=d * 7 + int(h))
    bw = np.full(d, h)
    if kind == "uniform" and h >= 6:
        assert _taylor_nd.plan(x, x, bw, 1e-10)["series"] > 0.5
    got = nadaraya.loo_pool(x, v, bandwidth=bw, sample_weight=sw, backend="taylor", tol=1e-10)
    exact = nadaraya.loo_pool(x, v, bandwidth=bw, sample_weight=sw, backend="reference")
    finite = np.isfinite(exact).all(axis=1)  # a key alone with weight 0 elsewhere: NaN in both
    np.testing.assert_array_equal(np.isfinite(got).all(axis=1), finite)
    scale = 1e-10 * np.abs(v[sw > 0]).max(axis=0)
    assert np.all(np.abs(got[finite] - exact[finite]) <= scale)


def test_leave_one_out_subtracts_the_own_key_exactly_enough_at_a_loose_tolerance() -> None:
    """At tol = 1e-4 the series differs from the exact sums, and the left-out key's share is
    really subtracted: the answer is far from the sums with the key kept."""
    rng = np.random.default_rng(30)
    x = rng.uniform(0, 5, (4000, 2))
    v = np.sin(x[:, 0]) + rng.normal(0, 1.0, 4000)
    h = np.array([3.0, 3.0])
    got = nadaraya.loo_pool(x, v, bandwidth=h, backend="taylor", tol=1e-4)
    kept = nadaraya.pool(x, x, v, bandwidth=h, backend="reference")
    exact = nadaraya.loo_pool(x, v, bandwidth=h, backend="reference")
    assert np.all(np.abs(got - exact) <= 1e-4 * np.abs(v).max())
    assert np.abs(got - kept).max() > 1e3 * np.abs(got - exact).max()


def test_higher_moments_and_more_features_are_refused_by_name() -> None:
    _, x, v, _ = _case("uniform", 800, 1, 2, seed=4)
    with pytest.raises(ValueError, match=r"backend='taylor' computes local polynomial degree"):
        backends.compute("taylor", x, x, v, kernel=GAUSS, bandwidth=np.ones(2), moments=3, tol=1e-10)
    with pytest.raises(ValueError, match=r"kernel='gaussian' with d=4: it computes the 'gaussian' kernel"):
        z4 = np.zeros((2, 4))
        backends.compute("taylor", z4, z4, np.ones((2, 1)), kernel=GAUSS, bandwidth=np.ones(4), tol=1e-10)


@settings(max_examples=40, deadline=None)
@given(
    d=st.sampled_from([2, 3]),
    n=st.integers(1, 300),
    m=st.integers(1, 300),
    log_h=st.floats(-3, 3),
    tol=st.sampled_from([1e-3, 1e-8, 1e-12]),
    seed=st.integers(0, 2**16),
)
def test_the_bound_holds_on_generated_cases(
    d: int, n: int, m: int, log_h: float, tol: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (n, d)) * rng.uniform(0.1, 3, d)
    q = rng.normal(0, 1.5, (m, d))
    v = rng.normal(size=(n, 2)) + 3
    sw = rng.uniform(0.1, 2, n)
    assert _check(q, x, v, sw, 10.0**log_h * rng.uniform(0.5, 2, d), tol) <= 1.0


# --- the pieces against plain formulas ----------------------------------------------------------------


@pytest.mark.parametrize(("d", "p"), [(2, 1), (2, 6), (3, 5)])
def test_multi_indices_are_each_monomial_once_with_its_factorial(d: int, p: int) -> None:
    parent, dim, inv, count = _taylor_nd.multi_indices(d, p)
    assert parent.size == math.comb(p - 1 + d, d) == count[-1]
    u = np.array([0.3, -1.7, 2.2])[:d]
    value, alphas = np.ones(parent.size), [(0,) * d]
    for t in range(1, parent.size):
        a = list(alphas[parent[t]])
        a[dim[t]] += 1
        alphas.append(tuple(a))
        value[t] = value[parent[t]] * u[dim[t]] * inv[t]
    assert len(set(alphas)) == len(alphas) and all(sum(a) < p for a in alphas)
    plain = [np.prod([u[j] ** a[j] / math.factorial(a[j]) for j in range(d)]) for a in alphas]
    np.testing.assert_allclose(value, plain, rtol=1e-14)
    degrees = [sum(a) for a in alphas]
    assert [degrees.count(g) for g in range(p)] == np.diff(count).tolist()


@pytest.mark.parametrize(("big_a", "radius"), [(0.42, 9.0), (0.43, 3.0), (0.3, 12.0)])
@pytest.mark.parametrize("jp", [0, 2, 4])
def test_the_terms_bound_the_remainder_at_every_radius(big_a: float, radius: float, jp: int) -> None:
    """``p`` from :func:`_power` bounds ``exp(-(r - A)_+^2 / 2) (A r)^p / p! max(1, r)^jp`` (a
    key's remainder times its largest moment monomial) on a fine grid of ``r`` up to the
    radius, and ``p - 1`` does not."""
    r = np.linspace(1e-6, radius, 20001)

    def worst(p: int) -> float:
        log_g = -0.5 * np.maximum(r - big_a, 0) ** 2 + p * np.log(big_a * r) - math.lgamma(p + 1)
        return float((log_g + jp * np.log(np.maximum(r, 1.0))).max())

    for log_target in (-10.0, -25.0, -40.0):
        p = _taylor_nd._power(log_target, big_a, radius, 60, jp)
        assert worst(p) <= log_target + 1e-9 < worst(p - 1) + 1e-9 or p == 1


@pytest.mark.parametrize("big_a", [0.28, 0.85, 1.39])
@pytest.mark.parametrize("jp", [0, 2, 4])
def test_keys_beyond_the_drop_radius_weigh_under_the_target_with_their_moments(big_a: float, jp: int) -> None:
    """Beyond ``R`` from :func:`_drop_radius`, ``exp(-(r - A)^2 / 2) (r + A)^jp`` (a dropped key's
    weight at a query of the box times its largest moment monomial) stays under
    ``exp(-log_ratio)`` on a fine grid of ``r`` out to ``R + 30``."""
    for log_ratio in (5.0, 20.0, 45.0):
        rad = _taylor_nd._drop_radius(log_ratio, big_a, jp)
        r = np.linspace(rad, rad + 30.0, 30001)
        log_w = -0.5 * (r - big_a) ** 2 + jp * np.log(r + big_a)
        assert log_w.max() <= -log_ratio + 1e-9
        if jp:  # and not far beyond what it needs: within a tenth of a bandwidth
            tight = np.linspace(rad - 0.1, rad, 101)
            assert (-0.5 * (tight - big_a) ** 2 + jp * np.log(tight + big_a)).max() > -log_ratio


def test_the_series_reproduces_dense_sums_in_one_box() -> None:
    """All queries within one box next to its keys: the sums themselves (not only the ratio)
    match the dense Gaussian sums written out here, within ``tol / 2.1`` of the weight."""
    rng = np.random.default_rng(8)
    x = rng.uniform(0, 3, (400, 2))
    q = rng.uniform(1.0, 1.5, (300, 2))
    v = rng.normal(size=(400, 1))
    h, tol = np.array([3.0, 3.0]), 1e-9
    got = taylor.partials(q, x, v, kernel=GAUSS, bandwidth=h, tol=tol)
    dist2 = (((q[:, None, :] - x[None, :, :]) / h) ** 2).sum(axis=2)
    w = np.exp(-0.5 * dist2)
    weight, value = w.sum(axis=1), w @ v[:, 0]
    mine_w = got.weight * np.exp(got.shift)
    mine_v = got.value[:, 0] * np.exp(got.shift)
    assert np.all(np.abs(mine_w - weight) <= tol / 2.1 * weight)
    assert np.all(np.abs(mine_v - value) <= tol / 2.1 * weight * np.abs(v).max())
    assert _series_share(q, x, h, tol) == 1.0


# --- the choice behind backend="auto" -----------------------------------------------------------------


def test_auto_takes_the_series_only_where_it_pays() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 5, (60000, 2))
    wide = backends.choose_for_data(GAUSS, x, x, np.array([1.0, 1.0]), tol=1e-10)
    assert wide is not None and wide.name == "taylor" and "d=2" in wide.reason
    narrow = backends.choose_for_data(GAUSS, x, x, np.array([0.01, 0.01]), tol=1e-10)
    assert narrow is not None and narrow.name == "truncated"
    exact = backends.choose_for_data(GAUSS, x, x, np.array([1.0, 1.0]))
    assert exact is None or exact.name != "taylor"
    loo = backends.choose_for_data(GAUSS, x, x, np.array([1.0, 1.0]), tol=1e-10, loo=True)
    assert loo is not None and loo.name == "taylor"
    assert backends.choose_for_data(GAUSS, x, x, np.array([1.0, 1.0]), tol=1e-10, moments=3) is None


def test_pool_with_tol_in_two_features_takes_the_series_and_holds() -> None:
    rng = np.random.default_rng(12)
    x = rng.uniform(0, 5, (20000, 2))
    y = np.sin(x[:, 0]) * np.cos(x[:, 1]) + rng.normal(0, 0.1, 20000)
    q = rng.uniform(0, 5, (20000, 2))
    from nadaraya._core.call import compute_partials, prepare

    _, choice = compute_partials(prepare(q, x, y, kernel="gaussian", bandwidth=[1.5, 2.0]), tol=1e-10)
    assert choice.name == "taylor"
    fast = nadaraya.pool(q, x, y, bandwidth=[1.5, 2.0], tol=1e-10)
    exact = nadaraya.pool(q[:3000], x, y, bandwidth=[1.5, 2.0], backend="reference")
    assert np.abs(fast[:3000] - exact).max() <= 1e-10 * np.abs(y).max()


@pytest.mark.parametrize("rho", _taylor_nd.RHO)
@pytest.mark.parametrize("d", [2, 3])
def test_every_box_width_it_may_choose_keeps_the_bound(rho: float, d: int) -> None:
    """Wider boxes take more terms and amplify the series' rounding (``e^(A r)``); each width the
    cost model may pick keeps every prediction within tol, and boxes it cannot certify are exact."""
    q, x, v, sw = _case("clustered" if d == 3 else "uniform", 1500, 2000, d, seed=int(rho * 100) + d)
    h = np.full(d, 2.0)
    got = _taylor_nd.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=sw, tol=1e-11, rho=rho)
    exact = reference.partials(q, x, v, kernel=GAUSS, bandwidth=h, sample_weight=sw)
    scale = 1e-11 * np.abs(v[sw > 0]).max(axis=0)
    assert np.all(np.abs(got.finalize() - exact.finalize()) <= scale)


def test_explain_with_the_data_says_the_series_or_the_truncated_sums() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 5, (60000, 2))
    wide = backends.explain("gaussian", n=60000, m=60000, d=2, bandwidth=1.0, tol=1e-10, queries=x, keys=x)
    assert wide.startswith("taylor: Gaussian kernel in d=2 with tol=1e-10") and "terms" in wide
    narrow = backends.explain("gaussian", n=60000, m=60000, d=2, bandwidth=0.01, tol=1e-10, queries=x, keys=x)
    assert narrow.startswith("truncated: ")
    sizes_only = backends.explain("gaussian", n=60000, m=60000, d=2, bandwidth=1.0, tol=1e-10)
    assert sizes_only.split(":")[0] in ("fused", "reference")
