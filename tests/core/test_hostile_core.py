"""Hostile input to the primitive, the selection and the estimator (issue 12, items 3, 4, 6, 10
and the unclear errors): each test failed before the fix."""

from __future__ import annotations

import math
import tracemalloc
import warnings
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest

import nadaraya
from nadaraya import EmptyWindowWarning, attention_weights, loo_pool, pool, select_bandwidth
from nadaraya.backends import available

LOG_KERNELS = ("gaussian", "laplacian", "logistic")
CPU = [b for b in ("reference", "fused") if b in available()]


# ------------------------------------------------------------------ item 3: not real numbers
BAD_ARRAYS = {
    "complex": np.array([1.0 + 1j, 2.0]),
    "datetime": np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[D]"),
    "timedelta": np.array([1, 2], dtype="timedelta64[s]"),
    "text": np.array(["a", "b"]),
    "missing": np.array([1.0, None], dtype=object),
}


@pytest.mark.parametrize("what", list(BAD_ARRAYS))
@pytest.mark.parametrize("arg", ["queries", "keys", "values", "sample_weight"])
def test_pool_refuses_what_is_not_a_real_number(what, arg):
    kw = {"queries": [0.5, 1.5], "keys": [0.0, 1.0], "values": [1.0, 2.0], "sample_weight": None}
    kw[arg] = BAD_ARRAYS[what]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's ComplexWarning was all there was
        with pytest.raises(ValueError, match=arg):
            pool(kw["queries"], kw["keys"], kw["values"], sample_weight=kw["sample_weight"])


@pytest.mark.parametrize("what", ["complex", "datetime", "timedelta"])
def test_selection_and_estimator_refuse_complex_and_dates(what):
    x = np.resize(BAD_ARRAYS[what], 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="X must be real"):
            select_bandwidth(x, np.arange(6.0))
        with pytest.raises(ValueError, match="real"):
            select_bandwidth(np.arange(6.0), x)
        with pytest.raises((ValueError, TypeError), match=r"(?i)complex|real|dtype"):
            nadaraya.NadarayaWatson(bandwidth=1.0).fit(x[:, None], np.arange(6.0))


def test_messages_name_the_argument_and_the_value():
    with pytest.raises(ValueError, match=r"bandwidth='0\.5' is a string.*positive number"):
        pool([1.0], [0.0, 1.0], [1.0, 2.0], bandwidth="0.5")
    with pytest.raises(ValueError, match=r"sample_weight must be numeric; got \['a', 'b'\]"):
        pool([1.0], [0.0, 1.0], [1.0, 2.0], sample_weight=["a", "b"])
    with pytest.raises(ValueError, match=r"keys contains missing values .*index \(1,\)"):
        pool([1.0], np.array([0.0, None], dtype=object), [1.0, 2.0])
    pd = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match="keys contains missing values"):
        pool([1.0], pd.Series([0, pd.NA], dtype=object), [1.0, 2.0])


# ------------------------------------------------------------------ item 4: far queries
def _exact(q, keys, values, h, power):
    """The estimate at one query from log weights -|u|^p (/2 for p = 2) taken exactly in
    rationals relative to the largest, then exponentiated in 60-digit decimals."""
    getcontext().prec = 60
    scale = Fraction(1, 2) if power == 2 else Fraction(1)
    qf, hf = Fraction(float(q)), Fraction(float(h))
    logw = [-scale * abs((qf - Fraction(float(k))) / hf) ** power for k in keys]
    top = max(logw)
    w = [(Decimal(d.numerator) / Decimal(d.denominator)).exp() for d in (lw - top for lw in logw)]
    return float(sum(wi * Decimal(float(v)) for wi, v in zip(w, values)) / sum(w))


@pytest.mark.parametrize("backend", CPU)
@pytest.mark.parametrize(
    ("q", "h"), [(1e200, 1.0), (0.3, 1e-160), (-1e300, 1.0), (1e5, 1e-3), (60.0, 1.0), (2.0, 1e-300)]
)
def test_gaussian_far_query_is_the_exact_limit(backend, q, h):
    keys, values = np.array([0.0, 1.0, 1.5]), np.array([1.0, 2.0, 5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = pool([q], keys, values, bandwidth=h, backend=backend)
    assert got[0] == pytest.approx(_exact(q, keys, values, h, 2), rel=1e-12)


@pytest.mark.parametrize("backend", CPU)
@pytest.mark.parametrize(("q", "h"), [(1e300, 1.0), (-1e300, 1.0), (3.0, 1e-2), (1e3, 1e-300)])
def test_laplacian_far_query_is_its_own_limit_not_the_nearest_key(backend, q, h):
    keys, values = np.array([0.0, 0.01, 0.02]), np.array([1.0, 2.0, 4.0])
    got = pool([q], keys, values, bandwidth=h, kernel="laplacian", backend=backend)[0]
    assert got == pytest.approx(_exact(q, keys, values, h, 1), rel=1e-12)


@pytest.mark.parametrize("kernel", LOG_KERNELS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("backend", CPU)
def test_far_queries_are_never_nan_and_agree_across_backends(kernel, dtype, backend):
    rng = np.random.default_rng(3)
    keys = rng.uniform(-1, 1, (40, 2)).astype(dtype)
    values = rng.normal(size=40).astype(dtype)
    big = 1e30 if dtype == np.float32 else 1e300
    queries = np.array([[big, 0], [-big, big], [0.5, -big], [3, 3], [0.1, 0.2]], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = pool(queries, keys, values, kernel=kernel, bandwidth=[1e-3, 2e-3], backend=backend)
        ref = pool(queries, keys, values, kernel=kernel, bandwidth=[1e-3, 2e-3], backend="reference")
    assert np.isfinite(got).all()
    assert (got >= values.min() - 1e-6).all() and (got <= values.max() + 1e-6).all()
    np.testing.assert_allclose(got, ref, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_gaussian_far_query_in_two_features_is_the_nearest_in_x_over_h():
    keys = np.array([[0.0, 0.0], [3.0, 0.1]])
    # raw x: key 0 nearer; x / h with h = (10, 0.01): key 1 nearer
    got = pool([[1e160, 0.1]], keys, [1.0, 2.0], bandwidth=[10.0, 1e-170])
    assert got[0] == 2.0


def test_attention_weights_far_query_and_loo_alone():
    w = attention_weights([1e200, -1e200], [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(w, [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
    with pytest.warns(EmptyWindowWarning, match="no other key"):
        out = loo_pool([0.0], [1.0], kernel="epanechnikov", empty="nearest")
    assert np.isnan(out).all()
    with pytest.warns(EmptyWindowWarning, match="no other key"):
        out = loo_pool([0.0, 5.0], [1.0, 2.0], sample_weight=[1.0, 0.0])
    assert np.isnan(out[0]) and out[1] == 1.0


# ------------------------------------------------------------------ item 6: dense weights
def test_attention_weights_refuses_a_huge_dense_result_before_allocating():
    q = np.zeros(50_000)
    tracemalloc.start()
    with pytest.raises(ValueError, match=r"max_bytes.*pool\(\).*sparse=True"):
        attention_weights(q, q)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 * 2**20
    with pytest.raises(ValueError, match="max_bytes"):
        attention_weights(np.zeros(10), np.zeros(10), max_bytes=10 * 10 * 8 - 1)
    assert attention_weights(np.zeros(10), np.zeros(10), max_bytes=10 * 10 * 8).shape == (10, 10)
    with pytest.raises(ValueError, match="max_bytes must be a positive"):
        attention_weights([0.0], [0.0], max_bytes=0)


def test_attention_weights_peak_memory_is_the_result_plus_working_memory():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=2000)
    with nadaraya.config_context(working_memory=4):
        tracemalloc.start()
        w = attention_weights(x, x, bandwidth=0.1, max_bytes=2**30)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < w.nbytes + 8 * 2**20  # was 2.2x the result
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("empty", ["nan", "nearest", "mean"])
def test_sparse_attention_weights_equal_the_dense_ones(empty):
    rng = np.random.default_rng(1)
    k, q = rng.uniform(0, 1, 300), np.append(rng.uniform(0, 1, 50), [5.0])
    sw = rng.uniform(0.5, 2.0, 300)
    kw = dict(kernel="epanechnikov", bandwidth=0.05, sample_weight=sw, empty=empty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyWindowWarning)
        dense = attention_weights(q, k, **kw)
        sparse = attention_weights(q, k, sparse=True, **kw)
    assert sparse.format == "csr"
    want = np.nan_to_num(dense) if empty == "nan" else dense
    np.testing.assert_allclose(sparse.toarray(), want, rtol=1e-15)
    assert sparse.nnz == np.count_nonzero(want)
    with pytest.raises(ValueError, match="max_bytes"):
        attention_weights(q, k, sparse=True, max_bytes=100, **kw)


# ------------------------------------------------------------------ item 10: scales
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "constant"])
@pytest.mark.parametrize("scale", [1e-300, 1e160, 1e300, 2.0**-1060])
def test_values_at_any_scale_are_as_exact_as_at_unit_scale(kernel, scale):
    rng = np.random.default_rng(2)
    k = rng.uniform(size=300)
    v = rng.uniform(1, 2, size=300)
    scaled = v * scale  # rounds (below 2**-1022 it loses digits): compare with what it holds
    unit = pool(k[:50], k, scaled / scale, kernel=kernel, bandwidth=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = pool(k[:50], k, scaled, kernel=kernel, bandwidth=0.2)
    if scale >= 2.0**-1022:
        np.testing.assert_allclose(got / scale, unit, rtol=1e-12)
    else:  # the predictions are subnormal themselves: within their spacing
        np.testing.assert_allclose(got, unit * scale, rtol=0, atol=4 * np.finfo(float).smallest_subnormal)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "constant"])
@pytest.mark.parametrize("scale", [2.0**1020, 1e300, 1e-300, 2.0**-1070])
def test_sample_weights_at_any_scale(kernel, scale):
    rng = np.random.default_rng(4)
    k = rng.uniform(size=200)
    v = rng.normal(size=200)
    sw = rng.integers(1, 4, size=200).astype(float)
    unit = pool(k[:30], k, v, kernel=kernel, bandwidth=0.2, sample_weight=sw)
    got = pool(k[:30], k, v, kernel=kernel, bandwidth=0.2, sample_weight=sw * scale)
    np.testing.assert_allclose(got, unit, rtol=1e-12)
    assert np.isfinite(loo_pool(k, v, kernel=kernel, bandwidth=0.2, sample_weight=sw * scale)).all()


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_selection_is_scale_equivariant(method):
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 5, 80)
    y = 2 * np.sin(x) + x + rng.normal(0, 0.5, 80)
    unit = select_bandwidth(x, y, method=method)
    scales = [(2.0**-1000, 1.0), (2.0**900, 1.0), (1.0, 2.0**600), (1.0, 2.0**-1000), (2.0**-900, 2.0**700)]
    for xs, ys in scales:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            got = select_bandwidth(x * xs, y * ys, method=method)
        np.testing.assert_allclose(got.bandwidth, unit.bandwidth * xs, rtol=1e-12)
        np.testing.assert_allclose(got.rule_of_thumb, unit.rule_of_thumb * xs, rtol=1e-12)
        want = float(np.ldexp(unit.score, 2 * math.frexp(ys)[1] - 2)) if method == "cv" else (
            unit.score + 2 * math.log(ys)
        )
        if method == "cv" and not np.isfinite(want):
            assert got.score == math.inf
        else:
            assert got.score == pytest.approx(want, rel=1e-12, abs=1e-12)
    # not a power of two: rounding only
    got = select_bandwidth(x * 1e-300, y * 1e160, method=method)
    np.testing.assert_allclose(got.bandwidth, unit.bandwidth * 1e-300, rtol=1e-6)


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_selection_with_huge_or_tiny_sample_weights(method):
    rng = np.random.default_rng(6)
    x = rng.uniform(0, 5, 60)
    y = np.sin(x) + rng.normal(0, 0.3, 60)
    sw = rng.integers(1, 4, 60).astype(float)
    unit = select_bandwidth(x, y, method=method, sample_weight=sw)
    big = select_bandwidth(x, y, method=method, sample_weight=sw * 2.0**1000)
    if method == "cv":  # CV depends on the weights' ratios only; the rule of thumb that
        # centres the grid uses sum(w) - 1 (frequencies), so the search moves within its tolerance
        np.testing.assert_allclose(big.bandwidth, unit.bandwidth, rtol=1e-5)
    else:  # AICc's sample size is the weights' sum: huge weights, n -> inf (no overflow, no NaN)
        assert np.isfinite(big.score) and np.isfinite(big.bandwidth).all()
    tiny = select_bandwidth(x, y, method="cv", sample_weight=sw * 2.0**-1070)
    assert np.isfinite(tiny.score) and np.isfinite(tiny.bandwidth).all()


def test_rule_of_thumb_and_estimator_at_tiny_scale():
    rng = np.random.default_rng(7)
    x = rng.uniform(size=50)
    h = nadaraya.bandwidth.rule_of_thumb(x, "scott")
    tiny = nadaraya.bandwidth.rule_of_thumb(x * 2.0**-1000, "scott")
    np.testing.assert_allclose(tiny, h * 2.0**-1000, rtol=1e-12)
    est = nadaraya.NadarayaWatson(bandwidth="scott").fit(x[:, None] * 1e-300, x)
    assert est.bandwidth_[0] == pytest.approx(h[0] * 1e-300, rel=1e-9)


def test_exact_rational_tie_break():
    # q - 0 and q - 1 round to the same float: the exact comparison still finds key 1
    assert pool([1e200], [0.0, 1.0], [1.0, 2.0], kernel="epanechnikov", empty="nearest")[0] == 2.0
    # a true tie in exact arithmetic is shared by sample weight
    got = pool([0.5], [0.0, 1.0], [1.0, 4.0], kernel="boxcar", bandwidth=0.1, empty="nearest",
               sample_weight=[1.0, 2.0])
    assert got[0] == pytest.approx(float(Fraction(1 * 1 + 2 * 4, 3)))


def test_estimator_bandwidth_strings_say_what_was_meant():
    X, y = [[0.0], [1.0], [2.0]], [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match=r"'bandwidth' parameter .* Got '0\.5' instead\. "
                                         r"\(it is a string; pass the number 0\.5 itself\)"):
        nadaraya.NadarayaWatson(bandwidth="0.5").fit(X, y)
    with pytest.raises(ValueError, match=r"'bandwidth' parameter .* Got 'scot' instead\. "
                                         r"\(did you mean 'scott'\?\)"):
        nadaraya.NadarayaWatson(bandwidth="scot").fit(X, y)


@pytest.mark.parametrize("kernel", ["boxcar", "cosine", "epanechnikov", "triangular", "tricube"])
def test_compact_kernel_with_overflowing_scaled_distance_is_quiet(kernel):
    """u = (q - k) / h overflows to inf for a far query and a tiny bandwidth; the boxcar's profile
    computed 0 * inf there and leaked a RuntimeWarning (found by tests/core/test_fuzz.py). The query's
    window is empty: NaN with the EmptyWindowWarning only."""
    q = np.zeros((3, 2))
    q[2, 1] = 1e150
    k = np.zeros((3, 2), dtype=np.int64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = nadaraya.pool(q, k, np.arange(3.0), kernel=kernel, bandwidth=3e-161, backend="reference")
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    assert [issubclass(w.category, nadaraya.EmptyWindowWarning) for w in caught] == [True]
    np.testing.assert_array_equal(got[:2], [1.0, 1.0])
    assert np.isnan(got[2])
