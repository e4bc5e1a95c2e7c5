"""The taylor backend and ``tol=`` (issue 16): every prediction within ``tol * max|v|`` of the exact
one, on every query, against the reference backend; the cost model's choice; bad tolerances."""

from __future__ import annotations

import time

import numpy as np
import pytest

import nadaraya
from nadaraya import backends
from nadaraya.backends import reference, taylor
from nadaraya.kernels import get as kernel


def _keys(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        return rng.uniform(0, 5, n)
    if kind == "clustered":  # three tight clusters far apart
        return rng.choice([0.0, 2.0, 40.0], n) + rng.normal(0, 0.05, n)
    if kind == "cauchy":  # heavy tails: a few keys very far away
        return rng.standard_cauchy(n)
    return rng.integers(0, 6, n).astype(float) * 0.5  # duplicates


def _data(kind: str, n: int, m: int, seed: int, p: int = 2):
    rng = np.random.default_rng(seed)
    x = _keys(kind, n, rng)
    lo, hi = np.quantile(x, [0.02, 0.98]) if n > 2 else (x.min(), x.max() + 1.0)
    q = rng.uniform(lo - 0.3 * (hi - lo) - 1, hi + 0.3 * (hi - lo) + 1, m)
    v = np.column_stack([np.sin(x) + x / 5, rng.normal(size=n)] + [rng.uniform(-3, 1, n)] * (p - 2))[:, :p]
    sw = rng.uniform(0.2, 3.0, n)
    sw[rng.random(n) < 0.1] = 0.0
    if sw.sum() == 0:
        sw[0] = 1.0
    span = max(float(x.max() - x.min()), 1e-3)
    return q, x, v, sw, span


def _within(got: np.ndarray, exact: np.ndarray, v: np.ndarray, tol: float) -> float:
    """The largest error over queries and columns, in units of ``tol * max|v|`` of each column
    (the documented bound is 1)."""
    scale = tol * np.abs(v).max(axis=0)
    return float(np.max(np.abs(got - exact) / scale))


@pytest.mark.parametrize("kind", ["uniform", "clustered", "cauchy", "duplicates"])
@pytest.mark.parametrize("rel_h", [1e-6, 1e-3, 0.02, 0.3, 1e3])
@pytest.mark.parametrize("tol", [1e-4, 1e-10, 1e-12])
def test_every_prediction_within_tol_of_the_exact_one(kind: str, rel_h: float, tol: float) -> None:
    q, x, v, sw, span = _data(kind, 700, 400, seed=int(rel_h * 1e6) % 97)
    h = rel_h * span
    got = nadaraya.pool(q, x, v, bandwidth=h, sample_weight=sw, backend="taylor", tol=tol)
    exact = nadaraya.pool(q, x, v, bandwidth=h, sample_weight=sw, backend="reference")
    assert _within(got, exact, v[sw > 0], tol) <= 1.0


@pytest.mark.parametrize(("n", "m"), [(1, 1), (2, 3), (3, 2), (17, 5), (5, 17), (1000, 1)])
def test_awkward_sizes(n: int, m: int) -> None:
    q, x, v, sw, _ = _data("uniform", n, m, seed=n * 31 + m)
    for h in (0.01, 1.0):
        got = nadaraya.pool(q, x, v, bandwidth=h, sample_weight=sw, backend="taylor", tol=1e-10)
        exact = nadaraya.pool(q, x, v, bandwidth=h, sample_weight=sw, backend="reference")
        assert _within(got, exact, v[sw > 0], 1e-10) <= 1.0


@pytest.mark.parametrize("kind", ["uniform", "clustered", "duplicates"])
@pytest.mark.parametrize("h", [0.003, 0.05, 2.0])
def test_leave_one_out_within_tol(kind: str, h: float) -> None:
    """Each point without its own key (other keys at the same place stay), against the
    reference's masked sums; where the own key would carry the sum the point is exact."""
    _, x, v, sw, _ = _data(kind, 900, 1, seed=7)
    got = nadaraya.loo_pool(x, v, bandwidth=h, sample_weight=sw, backend="taylor", tol=1e-10)
    exact = nadaraya.loo_pool(x, v, bandwidth=h, sample_weight=sw, backend="reference")
    finite = np.isfinite(exact).all(axis=1)  # a key alone with weight 0 elsewhere: NaN in both
    np.testing.assert_array_equal(np.isfinite(got).all(axis=1), finite)
    assert _within(got[finite], exact[finite], v[sw > 0], 1e-10) <= 1.0


def test_float32_within_tol_plus_single_precision_rounding() -> None:
    q, x, v, sw, _ = _data("uniform", 800, 300, seed=3)
    q32, x32, v32, sw32 = (a.astype(np.float32) for a in (q, x, v, sw))
    got = nadaraya.pool(q32, x32, v32, bandwidth=0.05, sample_weight=sw32, backend="taylor", tol=1e-10)
    assert got.dtype == np.float32
    exact = nadaraya.pool(q32.astype(float), x32.astype(float), v32.astype(float), bandwidth=0.05,
                          sample_weight=sw32.astype(float), backend="reference")
    err = np.abs(got - exact) / np.abs(v32).max(axis=0)
    assert err.max() <= 1e-10 + 8 * np.finfo(np.float32).eps


def test_far_queries_get_their_nearest_keys() -> None:
    """A query a million bandwidths from every key gets the nearest key's value (the log
    domain, as for the exact backends), never 0/0."""
    x = np.array([0.0, 1.0, 2.0])
    v = np.array([1.0, 2.0, 7.0])
    q = np.array([-1e4, 3e4, 1.0])
    got = nadaraya.pool(q, x, v, bandwidth=0.01, backend="taylor", tol=1e-10)
    np.testing.assert_allclose(got, [1.0, 7.0, 2.0], rtol=1e-12)


def test_the_approximation_is_real_and_bounded() -> None:
    """A loose tolerance is used (the result differs from the exact sums) and still holds."""
    q, x, v, sw, _ = _data("uniform", 3000, 2000, seed=11)
    got = nadaraya.pool(q, x, v, bandwidth=0.2, sample_weight=sw, backend="taylor", tol=1e-3)
    exact = nadaraya.pool(q, x, v, bandwidth=0.2, sample_weight=sw, backend="reference")
    assert np.abs(got - exact).max() > 1e-12
    assert _within(got, exact, v[sw > 0], 1e-3) <= 1.0
    plan = taylor.plan(3000, 2000, 1e-3, 25.0)
    assert plan["terms"] < taylor.plan(3000, 2000, 1e-10, 25.0)["terms"]


# --- the choice behind backend="auto" -------------------------------------------------------------


def test_auto_chooses_the_series_only_where_it_meets_tol_and_pays() -> None:
    g = kernel("gaussian")
    big = {"n": 10**6, "m": 10**6, "d": 1, "tol": 1e-10, "span": 5000.0}
    choice = backends.choose_within(g, **big)
    assert choice is not None and choice.name == "taylor" and "tol * max|y|" in choice.reason
    assert backends.choose_within(g, **{**big, "tol": None}) is None  # exact asked
    assert backends.choose_within(g, **{**big, "tol": 1e-14}) is None  # below what the series offers
    assert backends.choose_within(g, **{**big, "d": 2}) is None
    assert backends.choose_within(kernel("epanechnikov"), **big) is None
    assert backends.choose_within(g, **big, moments=1).name == "taylor"  # local linear's moment sums
    assert backends.choose_within(g, **big, moments=3) is None
    assert backends.choose_within(g, **{**big, "n": 300, "m": 300}) is None  # too small to pay
    assert backends.explain("gaussian", n=10**6, m=10**6, tol=1e-10, span=5000.0).startswith("taylor:")
    assert backends.explain("gaussian", n=10**6, m=10**6).split(":")[0] != "taylor"


def test_tol_on_a_case_where_the_exact_sums_cost_100x() -> None:
    """n = m = 2e5 at h = 0.001 * range: the exact sums visit 4e10 pairs. A coarse guard, not a
    timing: pool(tol=) must finish in under a tenth of the exact loop's time on a 1 % sample
    of the queries, scaled up."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 5, 200_000)
    y = np.sin(x) + rng.normal(0, 0.3, x.size)
    q = rng.uniform(0, 5, 200_000)
    nadaraya.pool(q[:10], x[:1000], y[:1000], bandwidth=0.005, tol=1e-10, backend="taylor")  # compiled code
    nadaraya.pool(q[:10], x[:1000], y[:1000], bandwidth=0.005, backend="fused")
    start = time.perf_counter()
    got = nadaraya.pool(q, x, y, bandwidth=0.005, tol=1e-10)
    fast = time.perf_counter() - start
    start = time.perf_counter()  # the wrong choice: the exact loop over all pairs
    exact = nadaraya.pool(q[:2000], x, y, bandwidth=0.005, backend="fused")
    slow = (time.perf_counter() - start) * 100
    assert fast < slow / 10
    assert _within(got[:2000, None], exact[:, None], y[:, None], 1e-10) <= 1.0


@pytest.mark.parametrize("bad", [0, 0.0, -1e-10, 0.5, float("nan"), "1e-10", True, [1e-10]])
def test_a_bad_tolerance_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ValueError, match="tol must be None"):
        nadaraya.pool([0.5], [0.0, 1.0], [1.0, 2.0], tol=bad)
    with pytest.raises(ValueError, match="tol must be None"):
        nadaraya.loo_pool([0.0, 1.0], [1.0, 2.0], tol=bad)


def test_what_the_series_does_not_compute_is_refused_by_name() -> None:
    x = np.linspace(0, 1, 20)
    with pytest.raises(ValueError, match="backend='taylor' does not support kernel='epanechnikov'"):
        nadaraya.pool(x, x, x, kernel="epanechnikov", backend="taylor", tol=1e-6)
    x4 = np.c_[x, x, x, x]
    with pytest.raises(ValueError, match="backend='taylor' does not support kernel='gaussian' with d=4"):
        nadaraya.pool(x4, x4, x, backend="taylor", tol=1e-6)
    with pytest.raises(ValueError, match=r"tol must be a number from 1e-12 to 0.1 for backend='taylor'"):
        nadaraya.pool(x, x, x, backend="taylor", tol=1e-14)
    with pytest.raises(ValueError, match=r"backend='taylor' computes local polynomial degree"):
        backends.compute("taylor", x[:, None], x[:, None], x[:, None], kernel=kernel("gaussian"),
                         bandwidth=np.ones(1), moments=3, tol=1e-6)


def test_tol_leaves_exact_methods_exact() -> None:
    """Where no faster method applies, tol changes nothing: the exact sums meet any tol."""
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, (500, 2))
    y = X[:, 0] ** 2
    np.testing.assert_array_equal(nadaraya.pool(X, X, y, bandwidth=0.1, tol=1e-6),
                                  nadaraya.pool(X, X, y, bandwidth=0.1))
    x = X[:, 0]
    logistic = {"bandwidth": 0.1, "degree": 1, "kernel": "logistic"}
    np.testing.assert_array_equal(nadaraya.pool(x, x, y, tol=1e-6, **logistic),
                                  nadaraya.pool(x, x, y, **logistic))


# --- the exact truncated sums behind backend="auto" -------------------------------------------------


def test_auto_takes_the_exact_windows_where_they_are_small() -> None:
    """Without tol, auto picks the exact truncated sums for the Gaussian in 1-D only where the
    windows hold a small share of the pairs; the result is the exact one."""
    g = kernel("gaussian")
    assert backends.choose_window(g, n=10**5, m=10**5, d=1, moments=0, pairs=2.1e6).name == "truncated"
    assert backends.choose_window(g, n=10**5, m=10**5, d=1, moments=0, pairs=0.9e10) is None
    assert backends.choose_window(g, n=10**5, m=10**5, d=3, moments=0, pairs=2.1e6).name == "truncated"
    assert backends.choose_window(g, n=10**5, m=10**5, d=4, moments=0, pairs=2.1e6) is None
    assert backends.choose_window(g, n=10**5, m=10**5, d=2, moments=1, pairs=2.1e6).name == "truncated"
    assert backends.choose_window(g, n=10**5, m=10**5, d=2, moments=3, pairs=2.1e6) is None
    assert backends.choose_window(g, n=10**5, m=10**5, d=1, moments=3, pairs=2.1e6) is None
    assert backends.choose_window(kernel("laplacian"), n=10**5, m=10**5, d=1, moments=0, pairs=2.1e6) is None
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 5, 3000)
    y = np.sin(x) + rng.normal(0, 0.3, x.size)
    q = rng.uniform(-1, 6, 500)
    from nadaraya._core.call import compute_partials, prepare

    call = prepare(q, x, y, kernel="gaussian", bandwidth=0.005)
    _, choice = compute_partials(call)
    assert choice.name == "truncated"
    _, wide = compute_partials(prepare(q, x, y, kernel="gaussian", bandwidth=5.0))
    assert wide.name != "truncated"
    exact = nadaraya.pool(q, x, y, bandwidth=0.005, backend="reference")
    np.testing.assert_allclose(nadaraya.pool(q, x, y, bandwidth=0.005), exact, rtol=1e-13, atol=1e-15)
    exact = nadaraya.loo_pool(x, y, bandwidth=0.005, backend="reference")
    np.testing.assert_allclose(nadaraya.loo_pool(x, y, bandwidth=0.005), exact, rtol=1e-13, atol=1e-15)


def test_select_bandwidth_within_tol_picks_a_bandwidth_as_good_as_the_exact_search() -> None:
    """With tol=1e-8 the search runs on leave-one-out passes of the series; the bandwidth it
    returns scores, by the exact CV, within 1e-6 relative of the exact search's optimum."""
    from nadaraya.bandwidth import score_bandwidth

    rng = np.random.default_rng(8)
    x = rng.uniform(0, 5, 8000)
    y = 2 * np.sin(x) + x + rng.normal(0, 0.5, x.size)
    exact = nadaraya.select_bandwidth(x, y, backend="fused")  # the compiled passes over all pairs
    fast = nadaraya.select_bandwidth(x, y, tol=1e-8)
    assert fast.n_passes > exact.n_passes  # one pass per bandwidth, not the Gaussian grid pass
    small = nadaraya.select_bandwidth(x[:300], y[:300], tol=1e-8)  # too small to pay: the exact passes
    assert small.n_passes == nadaraya.select_bandwidth(x[:300], y[:300]).n_passes
    assert abs(score_bandwidth(x, y, fast.bandwidth) - exact.score) <= 1e-6 * exact.score
    assert abs(fast.score - score_bandwidth(x, y, fast.bandwidth)) <= 1e-6 * exact.score
    with pytest.raises(ValueError, match="tol must be None"):
        nadaraya.select_bandwidth(x, y, tol=-1.0)


def test_local_linear_search_within_tol_is_as_good_as_the_exact_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Degree 1: the search's leave-one-out passes take the series for their moment sums (each
    within its bound), and the bandwidth returned scores, by the exact CV, within 1e-6 relative
    of the exact search's optimum."""
    from nadaraya.bandwidth import score_bandwidth

    rng = np.random.default_rng(18)
    x = rng.uniform(0, 5, 4000)
    y = 2 * np.sin(x) + x + rng.normal(0, 0.5, x.size)
    seen: list[str] = []
    real = backends.compute

    def record(name, *args, **kw):  # type: ignore[no-untyped-def]
        seen.append(name)
        return real(name, *args, **kw)

    exact = nadaraya.select_bandwidth(x, y, degree=1)
    monkeypatch.setattr(backends, "compute", record)
    fast = nadaraya.select_bandwidth(x, y, degree=1, tol=1e-8)
    assert "taylor" in seen
    exact_at_fast = score_bandwidth(x, y, fast.bandwidth, degree=1)
    assert abs(exact_at_fast - exact.score) <= 1e-6 * exact.score
    assert abs(fast.score - exact_at_fast) <= 1e-6 * exact.score


def test_the_estimator_takes_tol_for_its_search_and_its_predictions() -> None:
    from sklearn.base import clone

    rng = np.random.default_rng(9)
    x = rng.uniform(0, 5, (8000, 1))
    y = 2 * np.sin(x[:, 0]) + x[:, 0] + rng.normal(0, 0.5, 8000)
    model = nadaraya.NadarayaWatson(tol=1e-8).fit(x, y)
    assert model.selection_.n_passes > 5 and clone(model).get_params()["tol"] == 1e-8
    exact = nadaraya.NadarayaWatson(bandwidth=model.bandwidth_).fit(x, y)
    q = np.linspace(-1, 6, 20_000)[:, None]
    assert np.abs(model.predict(q) - exact.predict(q)).max() <= 1e-8 * np.abs(y).max()
    with pytest.raises(ValueError, match=r"'tol' parameter of NadarayaWatson must be a float in the range "
                                         r"\(0\.0, 0\.1\] or None\. Got 2\.0 instead"):
        nadaraya.NadarayaWatson(tol=2.0).fit(x, y)


# --- the moment sums of local polynomial fits -------------------------------------------------------


def _dense_moments(q, x, v, h, r, sw=None, exclude=None):
    """Plain log-domain Gaussian weights (relative to each query's largest), their moment sums in
    the partials' order, and each sum's allowed error scale ``h^j sum w (|x - q| / h + 1)^j``."""
    d = x[None, :, 0] - q[:, None, 0]
    lw = -0.5 * (d / h) ** 2 + (0.0 if sw is None else np.log(sw)[None, :])
    if exclude is not None:
        rows = np.flatnonzero(exclude >= 0)
        lw[rows, exclude[rows]] = -np.inf
    top = lw.max(axis=1)
    w = np.exp(lw - top[:, None])
    sums, scales = [w.sum(axis=1), w @ v], [w.sum(axis=1), w.sum(axis=1)]
    for j in range(1, 2 * r + 1):
        sums.append((w * d**j).sum(axis=1))
        scales.append(h**j * (w * (np.abs(d) / h + 1.0) ** j).sum(axis=1))
    for j in range(1, r + 1):
        sums.append((w * d**j) @ v)
        scales.append(h**j * (w * (np.abs(d) / h + 1.0) ** j).sum(axis=1))
    return top, sums, scales


@pytest.mark.parametrize("r", [1, 2])
@pytest.mark.parametrize("h", [0.002, 0.05, 2.0])
@pytest.mark.parametrize("case", ["plain", "weights", "loo", "cauchy"])
def test_moment_sums_are_within_their_stated_bound_on_every_query(r: int, h: float, case: str) -> None:
    tol = 1e-10
    rng = np.random.default_rng(r * 100 + int(h * 1000))
    n = 3000
    x = rng.standard_cauchy((n, 1)) if case == "cauchy" else rng.uniform(0, 5, (n, 1))
    v = np.column_stack([3 * np.sin(x[:, 0]), rng.normal(size=n)])
    sw = rng.uniform(0.1, 2.0, n) if case == "weights" else None
    if case == "loo":
        q, exclude = x, np.arange(n)
    else:
        q, exclude = np.vstack([rng.uniform(-1, 6, (400, 1)), x[:100]]), None
    got = taylor.partials(q, x, v, kernel=kernel("gaussian"), bandwidth=np.array([h]), moments=r, tol=tol,
                          sample_weight=sw, exclude=exclude)
    top, sums, scales = _dense_moments(q, x, v, h, r, sw, exclude)
    rescale = np.exp(got.shift - top)
    mine = [got.weight, got.value, *got.moments]
    vmax = np.abs(v).max(axis=0)
    for k, (a, b, scale) in enumerate(zip(mine, sums, scales, strict=True)):
        a = a.reshape(b.shape) * rescale.reshape((-1,) + (1,) * (b.ndim - 1))
        gmax = vmax if b.ndim == 2 else 1.0
        bound = tol * (scale[:, None] if b.ndim == 2 else scale) * gmax
        assert np.all(np.abs(a - b) <= bound), (k, float((np.abs(a - b) / bound).max()))


def test_local_linear_with_tol_takes_the_series_and_fits_like_the_exact_sums() -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 5, 40000)
    y = 2 * np.sin(x) + x + rng.normal(0, 0.5, x.size)
    q = rng.uniform(0, 5, 2000)
    from nadaraya._core.call import compute_partials, prepare

    _, choice = compute_partials(prepare(q, x, y, kernel="gaussian", bandwidth=0.05), moments=1, tol=1e-10)
    assert choice.name == "taylor"
    fast = nadaraya.pool(q, x, y, bandwidth=0.05, degree=1, tol=1e-10)
    exact = nadaraya.pool(q, x, y, bandwidth=0.05, degree=1, backend="reference")
    assert np.abs(fast - exact).max() <= 1e-8 * np.abs(y).max()  # well-posed local systems
    loo_fast = nadaraya.loo_pool(x[:8000], y[:8000], bandwidth=0.05, degree=1, tol=1e-10)
    loo_exact = nadaraya.loo_pool(x[:8000], y[:8000], bandwidth=0.05, degree=1, backend="reference")
    assert np.abs(loo_fast - loo_exact).max() <= 1e-8 * np.abs(y).max()


def test_bound_holds_far_from_the_origin_of_the_boxes() -> None:
    """Boxes are numbered from the smallest point: with one key far out (a heavy tail), the box
    centres are large sums, and every kernel must read the same rounded centre (an ulp of
    difference between the moments' and the evaluation's centre once moved predictions by 5e-10)."""
    rng = np.random.default_rng(102)
    x = rng.standard_cauchy((3000, 1))  # from -1064 to 6221
    v = np.column_stack([3 * np.sin(x[:, 0]), rng.normal(size=3000)])
    q = np.vstack([rng.uniform(-1, 6, (400, 1)), x[:100]])
    for h in (0.002, 0.0005):
        got = taylor.partials(q, x, v, kernel=kernel("gaussian"), bandwidth=np.array([h]), tol=1e-10)
        exact = reference.partials(q, x, v, kernel=kernel("gaussian"), bandwidth=np.array([h]))
        assert np.all(np.abs(got.finalize() - exact.finalize()) <= 1e-10 * np.abs(v).max())


def test_exclude_minus_one_leaves_nothing_out() -> None:
    """-1 in ``exclude`` means no key is left out for that query (the Dask chunks use it), never
    the last key."""
    rng = np.random.default_rng(12)
    x = rng.uniform(0, 5, (4000, 1))
    v = np.sin(x)
    q = np.vstack([x[:50], rng.uniform(0, 5, (50, 1))])
    ex = np.concatenate([np.arange(50), np.full(50, -1)])
    h = np.array([0.01])
    got = taylor.partials(q, x, v, kernel=kernel("gaussian"), bandwidth=h, tol=1e-10, exclude=ex)
    exact = reference.partials(q, x, v, kernel=kernel("gaussian"), bandwidth=np.array([0.01]), exclude=ex)
    assert np.all(np.abs(got.finalize() - exact.finalize()) <= 1e-10)


def test_standard_errors_ride_on_the_series_within_tol(monkeypatch: pytest.MonkeyPatch) -> None:
    """``predict(return_std=True)`` with ``tol``: both passes (the weights and the squared weights)
    take the series, and each standard error of a local-constant fit is within ``tol`` of the
    exact one, relative, on every query (the variance ``sum w^2 sigma^2 / (sum w)^2`` is a ratio of
    two positive sums, each within ``tol / 2.1`` of itself)."""
    rng = np.random.default_rng(11)
    n, tol = 20000, 1e-6
    x = rng.uniform(0, 5, (n, 1))
    y = 2 * np.sin(x[:, 0]) + x[:, 0] + rng.normal(0, 0.3 + 0.2 * x[:, 0], n)
    sw = rng.uniform(0.5, 2.0, n)
    q = np.vstack([rng.uniform(-0.5, 5.5, (3000, 1)), [[40.0]]])  # and one far query
    calls = []
    real = taylor.partials

    def counted(*args, **kwargs):
        calls.append(kwargs["bandwidth"][0])
        return real(*args, **kwargs)

    fast = nadaraya.NadarayaWatson(bandwidth=0.02, tol=tol).fit(x, y, sample_weight=sw)
    exact = nadaraya.NadarayaWatson(bandwidth=0.02).fit(x, y, sample_weight=sw)
    exact_mean, exact_std = exact.predict(q, return_std=True)
    monkeypatch.setattr(taylor, "partials", counted)
    mean, std = fast.predict(q, return_std=True)
    assert np.isclose(calls, [0.02, 0.02 / np.sqrt(2)]).all()  # the weights, then the squared weights
    assert np.abs(mean - exact_mean).max() <= tol * np.abs(y).max()
    assert np.all(np.abs(std - exact_std) <= tol * exact_std)
    # local linear: the bound is on the moment sums; the errors stay small on well-posed systems
    fast1 = nadaraya.NadarayaWatson(bandwidth=0.05, degree=1, tol=1e-10).fit(x, y)
    exact1 = nadaraya.NadarayaWatson(bandwidth=0.05, degree=1).fit(x, y)
    inside = q[:-1]
    s1, e1 = fast1.predict(inside, return_std=True)[1], exact1.predict(inside, return_std=True)[1]
    assert np.all(np.abs(s1 - e1) <= 1e-6 * e1)
