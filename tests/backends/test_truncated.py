"""The truncated backend (exact Gaussian sums in 1-D over the keys that matter) against the reference.

Every query is checked against the dense NumPy reference backend: the log-sum-exp of the weights
to 1e-12, and each prediction to 1e-13 of its natural size, the weighted mean of ``|v|`` (a
relative error against the prediction itself would judge cancellation, not the method). Sizes
1, 2, 3, 17, 1000; sorted, unsorted, duplicate, clustered and Cauchy keys; queries among the
keys, on them, and a thousand ranges away; bandwidths from 1e-6 to 1e3 times the keys' range;
sample weights with zeros and over many decades; leave-one-out; several outputs; float32; the
moments of local polynomial fits. Then the method itself: every skipped key's log weight is
below the query's largest minus ``L`` (computed here from the dense matrix), and the windows
hold a small fraction of the pairs for a small bandwidth.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
import nadaraya.backends._truncated_grid as _truncated_grid
from nadaraya import backends
from nadaraya.backends import truncated
from nadaraya.kernels import get
from nadaraya.partials import Partials

K = get("gaussian")
P = 3
REL_H = (1e-6, 1e-3, 0.1, 1.0, 1e3)
KINDS = ("uniform", "sorted", "duplicates", "clustered", "cauchy")
SIZES = [(1, 1), (1, 17), (2, 3), (3, 1000), (17, 2), (17, 17), (1000, 3), (1000, 1000)]


def _keys(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "cauchy":
        return rng.standard_cauchy(n)
    if kind == "duplicates":  # a few distinct keys, each repeated
        return np.round(rng.uniform(0.0, 5.0, n) * max(1, n // 20)) / max(1, n // 20)
    if kind == "clustered":  # tight clusters far apart
        return rng.choice([-40.0, 0.0, 3.0, 1e3], n) + 1e-4 * rng.normal(size=n)
    k = rng.uniform(0.0, 5.0, n)
    return np.sort(k) if kind == "sorted" else k


def _queries(keys: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """Among the keys, some exactly on keys, and some a thousand ranges away on either side."""
    lo, hi = float(keys.min()), float(keys.max())
    span = max(hi - lo, 1.0)
    q = rng.uniform(lo - 0.1 * span, hi + 0.1 * span, m)
    on = rng.random(m) < 0.2
    q[on] = rng.choice(keys, int(on.sum()))
    far = rng.random(m) < 0.1
    q[far] = np.where(rng.random(int(far.sum())) < 0.5, lo - 1e3 * span, hi + 1e3 * span)
    return q


def _weights(n: int, rng: np.random.Generator, spread: float = 2.0) -> np.ndarray:
    sw = 10.0 ** rng.uniform(-spread, spread, n)
    sw[rng.random(n) < 0.15] = 0.0
    return sw


def _compare(got: Partials, want: Partials, abs_want: Partials, vmax: float, rel: float = 1e-13) -> None:
    """``abs_want``: the reference's partials of ``|v|``, the natural size of each prediction;
    plus ``2^-56 max |v|``: the skipped keys weigh below ``2^-60`` of the largest term (the
    module's bound), which is all a prediction near 0 among far larger values can be held to."""
    np.testing.assert_array_equal(got.empty, want.empty)
    ok = ~want.empty
    lse = lambda r: r.shift[ok] + np.log(r.weight[ok])  # noqa: E731
    np.testing.assert_allclose(lse(got), lse(want), rtol=1e-12, atol=1e-12)
    size = abs_want.finalize()[ok]
    err = np.abs(got.finalize()[ok] - want.finalize()[ok])
    assert np.all(err <= rel * size + 2.0**-56 * vmax), float(np.max(err / np.maximum(size, 1e-300)))


def _case(kind: str, n: int, m: int, seed: int, weighted: bool):
    rng = np.random.default_rng(seed)
    k = _keys(kind, n, rng)
    q = _queries(k, m, rng)
    v = rng.normal(size=(n, P)) + k[:, None] / (1.0 + np.abs(k[:, None]))
    sw = _weights(n, rng) if weighted else None
    span = float(np.ptp(k)) or 1.0
    return q[:, None], k[:, None], v, sw, span


def _run(name: str, q, k, v, h: float, sw=None, exclude=None, moments: int = 0) -> Partials:
    return backends.compute(name, q, k, v, kernel=K, bandwidth=np.array([h]), sample_weight=sw,
                            exclude=exclude, moments=moments)


def _check(q, k, v, h, sw=None, exclude=None) -> None:
    want = _run("reference", q, k, v, h, sw, exclude)
    abs_want = _run("reference", q, k, np.abs(v), h, sw, exclude)
    _compare(_run("truncated", q, k, v, h, sw, exclude), want, abs_want, float(np.abs(v).max()))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("n", "m"), SIZES)
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_reference_on_every_query(kind: str, n: int, m: int, weighted: bool) -> None:
    q, k, v, sw, span = _case(kind, n, m, seed=n * 31 + m + KINDS.index(kind), weighted=weighted)
    for rel in REL_H:
        _check(q, k, v, rel * span, sw)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 3, 17, 1000])
def test_leave_one_out_matches_reference(kind: str, n: int) -> None:
    rng = np.random.default_rng(n + 7 * KINDS.index(kind))
    k = _keys(kind, n, rng)[:, None]
    v = rng.normal(size=(n, P))
    sw = _weights(n, rng)
    span = float(np.ptp(k)) or 1.0
    for rel in REL_H:
        h = rel * span
        for weights in (None, sw):
            _check(k, k, v, h, weights, np.arange(n))
        # any key left out of any query (-1: none), queries not at the keys
        q = _queries(k[:, 0], 40, rng)[:, None]
        _check(q, k, v, h, sw, rng.integers(-1, n, 40))
        for empty in ("nan",):  # the public door: loo_pool with this backend, one output
            with np.errstate(all="ignore"), pytest.warns() if n == 1 else _no_warning():
                got = nadaraya.loo_pool(k, v[:, 0], bandwidth=h, backend="truncated", empty=empty)
                want = nadaraya.loo_pool(k, v[:, 0], bandwidth=h, backend="reference", empty=empty)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * float(np.abs(v).max()))


class _no_warning:
    def __enter__(self) -> None:
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc: object) -> None:
        self._w.__exit__(*exc)


def test_float32_is_as_accurate_as_the_float32_reference() -> None:
    for kind in KINDS:
        q, k, v, sw, span = _case(kind, 1000, 300, seed=5, weighted=True)
        for rel in REL_H:
            h = rel * span
            exact = _run("reference", q, k, v, h, sw)
            args = [a.astype(np.float32) for a in (q, k, v, sw)]
            got = _run("truncated", *args[:3], h, args[3])
            ref32 = _run("reference", *args[:3], h, args[3])
            assert got.weight.dtype == np.float32 and got.value.dtype == np.float32
            assert got.shift.dtype == np.float32
            a, b, x = (r.finalize().astype(np.float64) for r in (got, ref32, exact))
            both = np.isfinite(a) & np.isfinite(b) & np.isfinite(x)
            err_got = np.max(np.abs(a - x)[both], initial=0.0)
            err_ref = np.max(np.abs(b - x)[both], initial=0.0)
            assert err_got <= 2.0 * err_ref + 4 * np.finfo(np.float32).eps * float(np.abs(v).max())
            # no query of positive weight in float64 lost its weight
            solid = exact.weight * np.exp(np.where(np.isfinite(exact.shift), exact.shift, 0.0)) > 1e-20
            assert not got.empty[solid].any()


def test_pool_with_this_backend_equals_the_reference() -> None:
    q, k, v, sw, span = _case("uniform", 1000, 500, seed=9, weighted=True)
    for rel in (1e-3, 0.1):
        args = dict(bandwidth=rel * span, sample_weight=sw)
        got = nadaraya.pool(q, k, v, backend="truncated", **args)
        want = nadaraya.pool(q, k, v, backend="reference", **args)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * float(np.abs(v).max()))


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("kind", ["uniform", "duplicates", "cauchy"])
def test_moments_match_reference(degree: int, kind: str) -> None:
    q, k, v, sw, span = _case(kind, 1000, 200, seed=degree + 3, weighted=True)
    exclude = np.random.default_rng(0).integers(-1, 1000, 200)
    for rel in (1e-6, 1e-3, 0.1, 10.0):
        h = rel * span
        got = _run("truncated", q, k, v, h, sw, exclude, moments=degree)
        want = _run("reference", q, k, v, h, sw, exclude, moments=degree)
        np.testing.assert_array_equal(got.empty, want.empty)
        ok = ~want.empty
        w_got, w_want = got.weight[ok], want.weight[ok]
        # each normalised moment sum to 1e-12 of its natural size: E|u|^j <= (E u^(2r))^(j / 2r),
        # plus h^j (skipped keys weigh below 2^-60 / n of w_max h^j: the module's bound)
        top = want.moments[2 * degree - 1][ok].reshape(-1) / w_want
        vmax = float(np.abs(v).max())
        for j in range(1, 2 * degree + 1):
            a = got.moments[j - 1][ok].reshape(ok.sum(), -1) / w_got[:, None]
            b = want.moments[j - 1][ok].reshape(ok.sum(), -1) / w_want[:, None]
            size = (top ** (j / (2 * degree)))[:, None] + h**j
            assert np.all(np.abs(a - b) <= 1e-12 * size + 1e-300), (j, float(np.max(np.abs(a - b) / size)))
        for j in range(1, degree + 1):
            a = got.moments[2 * degree + j - 1][ok].reshape(ok.sum(), -1) / w_got[:, None]
            b = want.moments[2 * degree + j - 1][ok].reshape(ok.sum(), -1) / w_want[:, None]
            size = ((top ** (j / (2 * degree)))[:, None] + h**j) * vmax
            assert np.all(np.abs(a - b) <= 1e-12 * size + 1e-300), (j, float(np.max(np.abs(a - b) / size)))


def test_bad_input_names_the_argument() -> None:
    x = np.arange(4.0)[:, None]
    door = backends.compute  # the backend door checks each call against truncated's capabilities
    with pytest.raises(ValueError, match=r"backend='truncated'.*'laplacian'"):
        door("truncated", x, x, x, kernel=get("laplacian"), bandwidth=np.ones(1))
    x4 = np.ones((4, 4))
    with pytest.raises(ValueError, match=r"backend='truncated'.*d=4: it computes .* 1 to 3 features"):
        door("truncated", x4, x4, x, kernel=K, bandwidth=np.ones(4))
    x2 = np.ones((4, 2))
    with pytest.raises(ValueError, match=r"up to 2 in d=2; got 3"):
        door("truncated", x2, x2, x, kernel=K, bandwidth=np.ones(2), moments=3)
    with pytest.raises(ValueError, match=r"up to 2 in d=1; got 3"):
        door("truncated", x, x, x, kernel=K, bandwidth=np.ones(1), moments=3)
    with pytest.raises(ValueError, match=r"moments must be a non-negative int.*-1"):
        door("truncated", x, x, x, kernel=K, bandwidth=np.ones(1), moments=-1)
    with pytest.raises(ValueError, match=r"backend='truncated' does not support kernel='epanechnikov'"):
        nadaraya.pool(x, x, x[:, 0], kernel="epanechnikov", backend="truncated")


def _dense_log_weights(q, k, h, sw, exclude):
    u = (q[:, None] - k[None, :]) * (1.0 / h)
    with np.errstate(divide="ignore"):
        lw = -0.5 * u * u + (0.0 if sw is None else np.log(sw)[None, :])
    if exclude is not None:
        rows = np.nonzero(exclude >= 0)[0]
        lw[rows, exclude[rows]] = -np.inf
    return lw


@pytest.mark.parametrize("weighted", [False, True])
def test_only_keys_below_the_bound_are_skipped(weighted: bool) -> None:
    """From the dense log weights: every key outside a query's window is below its largest log
    weight minus L, and the windows are much smaller than all keys."""
    rng = np.random.default_rng(11)
    n, m = 2000, 500
    k = rng.standard_cauchy(n)
    q = _queries(k, m, rng)
    sw = _weights(n, rng, spread=6.0) if weighted else None
    exclude = rng.integers(-1, n, m)
    for h in (1e-3, 0.05, 1.0):
        for moments in (0, 2):
            st_ = truncated._Sorted(q[:, None], k[:, None], np.zeros((n, 1)), sw, exclude)
            lo, hi, top = truncated._windows_of(st_, h, 2 * moments)
            ls = None if sw is None else np.exp(st_.ls)
            lw = _dense_log_weights(st_.qs, st_.ks, h, ls, st_.ex)
            best = lw.max(axis=1)
            big_l = _truncated_grid.log_ratio(st_.ks.size)
            j = np.arange(st_.ks.size)[None, :]
            inside = (j >= lo[:, None]) & (j < hi[:, None])
            gap = np.where(inside, -np.inf, lw).max(axis=1)
            assert np.all(gap < best - big_l)
            assert np.all(top >= best - 1e-12 * np.abs(best))  # the shift is at or above the maximum
            if moments:  # a skipped term times |k - q|^4 stays below 2^-60 / n of w_max h^4
                with np.errstate(divide="ignore"):
                    dist = np.log(np.abs(st_.ks[None, :] - st_.qs[:, None]) / h)
                far = np.where(inside, -np.inf, lw + 4 * dist)
                assert np.all(far.max(axis=1) < best - big_l)
            if h == 1e-3:
                assert (hi - lo).sum() < 0.05 * n * m


def test_windows_are_truncated_for_a_small_bandwidth_and_pairs_estimates_them() -> None:
    rng = np.random.default_rng(3)
    n = m = 20000
    k = rng.uniform(0.0, 5.0, n)[:, None]
    q = rng.uniform(0.0, 5.0, m)[:, None]
    for h in (1e-3, 1e-2):
        st_ = truncated._Sorted(q, k, np.zeros((n, 1)), None, None)
        lo, hi, _ = truncated._windows_of(st_, h, 0)
        visited = float((hi - lo).sum())
        # about 2 sqrt(2 L) h times the density n / 5 keys per query
        expect = 2.0 * math.sqrt(2.0 * _truncated_grid.log_ratio(n)) * h * n / 5.0 * m
        assert 0.8 * expect < visited < 1.3 * expect
        assert visited < 0.1 * n * m
        est = truncated.pairs_1d(q, k, h)[0]  # the windows alone (the cells, where dense, are cheaper)
        assert 0.5 * visited < est < 2.0 * visited
        # dense cells (60 keys each at h = 0.01) are worth fewer pairs; 6 keys (h = 0.001) are not
        assert (truncated.pairs(q, k, h) < 0.5 * est) == (h == 1e-2)
    # and the sums over these windows are the reference's on a sample of the queries
    v = np.sin(3 * k)
    got = _run("truncated", q, k, v, 1e-3)
    pick = rng.integers(0, m, 150)
    want = _run("reference", q[pick], k, v, 1e-3)
    abs_want = _run("reference", q[pick], k, np.abs(v), 1e-3)
    _compare(got[pick], want, abs_want, float(np.abs(v).max()))


def test_pairs_small_cases() -> None:
    x = np.linspace(0.0, 1.0, 50)
    assert truncated.pairs(x, x, 10.0) == 50 * 50  # every key within reach of every query
    assert truncated.pairs(x, x[:0], 1.0) == 0.0
    assert 50 <= truncated.pairs(x + 100.0, x, 1e-6) <= 2 * 50  # far queries: the nearest keys only
    none = _run("truncated", np.zeros((0, 1)), x[:, None], x[:, None], 1.0)  # no queries: no rows
    assert none.weight.shape == (0,) and none.value.shape == (0, 1)


def test_sorted_query_order_when_there_are_many_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(truncated, "SORT_QUERIES_ABOVE", 8)
    for kind in ("uniform", "duplicates", "cauchy"):
        q, k, v, sw, span = _case(kind, 1000, 400, seed=2, weighted=True)
        exclude = np.random.default_rng(1).integers(-1, 1000, 400)
        for rel in (1e-6, 1e-2, 1.0):
            _check(q, k, v, rel * span, sw, exclude)


def test_a_negligible_nearest_weight_takes_the_window_maximum() -> None:
    """The nearest key weighs 1e-300: the bound ``log s_max - u_near^2 / 2`` is then far above
    the largest log weight, and the shift comes from the window's maximum instead."""
    k = np.array([0.0, 0.01, 1.0, 1.02, 2.0])[:, None]
    sw = np.array([1e-300, 1e-300, 1.0, 1.0, 1e-200])
    v = np.arange(5.0 * P).reshape(5, P)
    q = np.array([0.0, 0.005, 0.3, 1.5, 2.0, -3.0])[:, None]
    for h in (0.025, 0.04, 0.1, 1.0):
        _check(q, k, v, h, sw)
        got = _run("truncated", q, k, v, h, sw)
        assert np.all(got.weight[~got.empty] > 1e-300)  # shifted to the largest, not underflowed


def test_far_queries_keep_the_nearest_keys() -> None:
    k = np.array([0.0, 1.0, 1.0, 2.0])[:, None]
    v = np.array([[1.0], [2.0], [4.0], [8.0]])
    q = np.array([[-1e7], [1e7], [1e160], [-1e200]])
    p = _run("truncated", q, k, v, 1e-3)
    f = p.finalize()[:, 0]
    assert f[0] == 1.0 and f[1] == 8.0  # a single nearest key
    assert np.all(p.shift[:2] == -0.5 * ((q[:2, 0] - k[[0, 3], 0]) * 1e3) ** 2)
    assert np.all(p.empty[2:]) and np.all(p.shift[2:] == -np.inf)  # u^2 overflows: as the reference
    want = _run("reference", q, k, v, 1e-3)
    np.testing.assert_array_equal(p.empty, want.empty)
    # pooling's far rule then takes the nearest key
    out = nadaraya.pool(q, k, v[:, 0], bandwidth=1e-3, backend="truncated")
    np.testing.assert_allclose(out, [1.0, 8.0, 8.0, 1.0])


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    m=st.integers(1, 30),
    log_h=st.floats(-7.0, 3.0),
    seed=st.integers(0, 2**32 - 1),
    weighted=st.booleans(),
    loo=st.booleans(),
)
def test_property_random_problems(n: int, m: int, log_h: float, seed: int, weighted: bool, loo: bool) -> None:
    rng = np.random.default_rng(seed)
    k = np.round(rng.standard_cauchy(n), int(rng.integers(0, 4)))  # ties at low precision
    q = _queries(k, m, rng)
    v = rng.normal(size=(n, 2))
    sw = _weights(n, rng, spread=float(rng.uniform(0, 8))) if weighted else None
    exclude = rng.integers(-1, n, m) if loo else None
    h = 10.0**log_h * max(float(np.ptp(k)), 1.0)
    _check(q[:, None], k[:, None], v, h, sw, exclude)


@pytest.mark.parametrize("degree", [0, 2])
def test_no_output_columns(degree: int) -> None:
    """Values with no columns (the loop carries the first output along): weights and moments stay."""
    x = np.array([0.0, 0.3, 1.0, 1.1])[:, None]
    got = _run("truncated", x, x, np.zeros((4, 0)), 0.5, moments=degree)
    want = _run("reference", x, x, np.zeros((4, 0)), 0.5, moments=degree)
    assert got.value.shape == (4, 0)
    assert [s.shape for s in got.moments] == [s.shape for s in want.moments]
    np.testing.assert_allclose(got.shift + np.log(got.weight), want.shift + np.log(want.weight), rtol=1e-14)


def test_one_heavy_key_does_not_widen_every_window() -> None:
    """The radius follows the largest sample weight inside the first window, not the global one:
    a key of weight 1e200 at one end leaves the other windows as they were (a global bound would
    triple their radius), and the sums still match the reference."""
    rng = np.random.default_rng(4)
    n = 5000
    k = np.sort(rng.uniform(0.0, 5.0, n))[:, None]
    sw = np.ones(n)
    sw[-1] = 1e200
    v = np.cos(k)
    h = 1e-3
    plain = truncated._windows_of(truncated._Sorted(k, k, v, np.ones(n), None), h, 0)
    heavy = truncated._windows_of(truncated._Sorted(k, k, v, sw, None), h, 0)
    far = k[:, 0] < 4.5
    assert (heavy[1] - heavy[0])[far].sum() <= 1.01 * (plain[1] - plain[0])[far].sum()
    pick = np.r_[0:50, n - 50:n]
    want, size = (_run("reference", k[pick], k, x, h, sw) for x in (v, np.abs(v)))
    _compare(_run("truncated", k, k, v, h, sw)[pick], want, size, 1.0)


def test_argsort_spread_sorts_like_numpy() -> None:
    """The bucket sort the backends use for spread keys gives the sorted values of np.sort, and
    falls back to it for clustered, heavy-tailed or non-finite data."""
    from nadaraya.backends._sorted import argsort_spread, sorted_order

    rng = np.random.default_rng(21)
    cases = [rng.uniform(0, 5, 50000), rng.normal(size=50000), rng.standard_cauchy(50000),
             np.repeat(rng.uniform(size=500), 100),
             np.concatenate([rng.uniform(size=9000), [np.inf, -1e300]]),
             np.sort(rng.uniform(size=8000)), rng.uniform(size=100)]
    for x in cases:
        order = argsort_spread(x)
        assert np.array_equal(np.sort(order), np.arange(x.size))
        assert np.array_equal(x[order], np.sort(x))
        assert np.array_equal(x[sorted_order(x)], np.sort(x))
