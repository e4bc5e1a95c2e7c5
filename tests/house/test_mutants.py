"""Tests that kill the mutants the rest of the fast suite let live (``make mutants``).

Each test compares a core function with a plain formula written here, or checks a property a
user can see (dtype, error message, exactness far from the keys). docs/testing.md lists the
mutants left alive and why each is equivalent or harmless.
"""

from __future__ import annotations

import math
import tracemalloc
import warnings
from fractions import Fraction

import numpy as np
import pytest

import nadaraya
import nadaraya._core.call as _call
from nadaraya import kernels
from nadaraya.backends import reference
from nadaraya.kernels import REGISTRY
from nadaraya.partials import Partials, concat, empty, merge, merge_all

RATIO = [k for k in REGISTRY.values() if k.log_ratio is not None]


# -- kernels: log_ratio against log K(a + d) - log K(a) ---------------------------------------


def _plain_log_k(name: str, u: float) -> float:
    """log K(u) up to a constant, written from the textbook formulas."""
    if name == "gaussian":
        return -u * u / 2
    if name == "laplacian":
        return -abs(u)
    if name == "logistic":
        return math.log(1.0 / (math.exp(u) + 2.0 + math.exp(-u)))
    assert name == "constant"
    return 0.0


@pytest.mark.parametrize("k", RATIO, ids=lambda k: k.name)
def test_log_ratio_is_the_difference_of_log_profiles(k):
    grid = np.array([-7.5, -3.0, -1.25, -0.5, 0.0, 0.25, 1.0, 2.5, 6.0])
    a, d = (g.ravel() for g in np.meshgrid(grid, grid))
    got = k.log_ratio(a, d, np)
    want = np.array([_plain_log_k(k.name, x + y) - _plain_log_k(k.name, x) for x, y in zip(a, d)])
    assert got.shape == a.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("k", RATIO, ids=lambda k: k.name)
def test_log_ratio_broadcasts_and_is_zero_where_the_keys_coincide(k):
    a = np.array([[0.5], [-2.0], [np.inf]])
    d = np.array([0.0, 0.0])
    with np.errstate(invalid="ignore", over="ignore"):  # as its callers do
        got = k.log_ratio(a, d, np)
    assert got.shape == (3, 2)
    assert (got == 0.0).all()  # also for a = inf, where -d (a + d / 2) would be NaN


@pytest.mark.parametrize("name", ["laplacian", "logistic"])
@pytest.mark.parametrize("a", [2.0**60, -(2.0**60), 1e300, -1e300])
@pytest.mark.parametrize("d", [1.0, -1.0, 3.5])
def test_abs_log_ratio_is_exact_far_from_zero(name, a, d):
    # a + d rounds to a, so |a| - |a + d| computed plainly would be 0: the exact value is
    # -d sign(a) (plus the logistic's tail, below 1e-300 here)
    got = float(REGISTRY[name].log_ratio(np.array(a), np.array(d), np))
    assert got == -d * math.copysign(1.0, a)


@pytest.mark.parametrize("a", [2.0**40, -(2.0**40), 1e150])
@pytest.mark.parametrize("d", [1.0, -0.75])
def test_gaussian_log_ratio_is_exact_far_from_zero(a, d):
    want = -(Fraction(a) + Fraction(d)) ** 2 / 2 + Fraction(a) ** 2 / 2
    got = float(REGISTRY["gaussian"].log_ratio(np.array(a), np.array(d), np))
    assert got == pytest.approx(float(want), rel=1e-15)


@pytest.mark.parametrize("name", ["laplacian", "logistic"])
def test_abs_log_ratio_across_zero(name):
    # a and a + d on opposite sides of zero: |a| - |a + d| (no shortcut applies)
    a = np.array([-0.5, 0.5, -3.0, 2.0, 0.0, -1.0])
    d = np.array([1.0, -1.0, 4.0, -2.5, 1.5, 1.0])
    want = np.array([_plain_log_k(name, x + y) - _plain_log_k(name, x) for x, y in zip(a, d)])
    np.testing.assert_allclose(REGISTRY[name].log_ratio(a, d, np), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.int32])
@pytest.mark.parametrize("k", list(REGISTRY.values()), ids=lambda k: k.name)
def test_kernel_call_evaluates_in_float64(k, dtype):
    u = np.array([0, 1, -2, 3], dtype=dtype)
    got = k(u)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, k.profile(u.astype(np.float64)))


def test_unknown_kernel_message_lists_the_names():
    with pytest.raises(ValueError, match=r"kernel='nope' is not a known kernel; valid names are: .*gaussian"):
        kernels.get("nope")
    with pytest.raises(ValueError, match="kernel=3 is not a known kernel"):
        kernels.get(3)  # type: ignore[arg-type]
    assert kernels.get("  Quartic ").name == "biweight"
    every = sorted(name for k in REGISTRY.values() for name in (k.name, *k.aliases))
    with pytest.raises(ValueError) as err:
        kernels.get("nope")
    assert str(err.value) == "kernel='nope' is not a known kernel; valid names are: " + ", ".join(every)


# -- partials ---------------------------------------------------------------------------------


def test_partials_getitem_selects_every_field():
    p = Partials(np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]), np.array([[7.0], [8.0], [9.0]]))
    q = p[np.array([2, 0])]
    assert q.shift.tolist() == [3.0, 1.0]
    assert q.weight.tolist() == [6.0, 4.0]
    assert q.value.tolist() == [[9.0], [7.0]]


def test_merge_all_of_nothing_says_what_it_needs():
    with pytest.raises(ValueError, match=r"^merge_all\(\) needs at least one Partials$"):
        merge_all([])


def test_empty_partials_per_domain():
    e = empty(2, 3, np.float32, log_domain=False)
    assert e.shift.dtype == e.weight.dtype == e.value.dtype == np.float32
    assert e.shift.tolist() == [0.0, 0.0] and e.value.shape == (2, 3)
    assert empty(1, 1).shift.tolist() == [-np.inf] and empty(1, 1).weight.dtype == np.float64


def test_merge_with_an_empty_side_is_the_other_side():
    a = Partials(np.array([3.0, -np.inf]), np.array([2.0, 0.0]), np.array([[4.0], [0.0]]))
    m = merge(a, empty(2, 1))
    assert m.shift.tolist() == [3.0, -np.inf]
    assert m.weight.tolist() == [2.0, 0.0]
    assert m.value.tolist() == [[4.0], [0.0]]
    assert merge(empty(2, 1), a).weight.tolist() == [2.0, 0.0]


# -- the reference backend: blocks, exclusion and sample weights against dense sums ----------


def _plain_partials(q, k, v, kernel, h, sw=None, exclude=None):
    """Dense weights prod_j K((q_j - k_j) / h_j) * sw, a left-out key per query; value / weight."""
    w = np.ones((q.shape[0], k.shape[0]))
    for j in range(q.shape[1]):
        w = w * kernel.profile((q[:, j, None] - k[None, :, j]) / h[j])
    if sw is not None:
        w = w * sw[None, :]
    if exclude is not None:
        rows = np.nonzero(exclude >= 0)[0]
        w[rows, exclude[rows]] = 0.0
    return w.sum(axis=1), w @ v / w.sum(axis=1)[:, None]


def test_block_sizes_fit_the_working_memory():
    assert reference.block_sizes(20000, 20000, 8, working_memory_mib=16) == (64, 4096)
    assert reference.block_sizes(3, 5, 8, working_memory_mib=16) == (3, 5)
    # 1 MiB of float64 scratch in 8 arrays: 16384 entries, keys first (at most 4096)
    assert reference.block_sizes(100, 10000, 8, working_memory_mib=1) == (4, 4096)
    assert reference.block_sizes(100, 10000, 4, working_memory_mib=1) == (8, 4096)
    assert reference.block_sizes(10, 10, 8, working_memory_mib=1e-9) == (1, 1)
    with nadaraya.config_context(working_memory=1):
        assert reference.block_sizes(100, 10000, 8) == (4, 4096)


@pytest.mark.parametrize("name", ["gaussian", "laplacian", "epanechnikov", "tricube"])
@pytest.mark.parametrize("memory", [256, 1])
def test_reference_partials_equal_dense_sums(name, memory):
    rng = np.random.default_rng(7)
    n, m, first = 5000, 37, 4080  # two key blocks (4096 keys each at most); the left-out
    keys = rng.uniform(0, 4, (n, 2))  # keys straddle them
    values = rng.normal(size=(n, 2))
    queries = np.vstack([keys[first:first + m], rng.uniform(0, 4, (5, 2))])
    sw = rng.uniform(0.5, 2.0, n)
    sw[::7] = 0.0
    h = np.array([0.6, 0.9])
    exclude = np.concatenate([np.arange(first, first + m), np.full(5, -1)])
    kernel = REGISTRY[name]
    with nadaraya.config_context(working_memory=memory):  # 1 MiB: query blocks of 4
        got = reference.partials(queries, keys, values, kernel=kernel, bandwidth=h,
                                 sample_weight=sw, exclude=exclude)
    weight, pooled = _plain_partials(queries, keys, values, kernel, h, sw, exclude)
    # the represented total weight exp(shift) * weight, up to the profile's constant
    total = np.exp(got.shift) * got.weight
    scale = total[0] / weight[0]
    np.testing.assert_allclose(total, weight * scale, rtol=1e-10)
    if name in ("gaussian", "laplacian"):  # log domain: log K without its constant
        assert scale == pytest.approx(kernel.profile(np.zeros(1))[0] ** -2, rel=1e-12)
        assert (got.weight >= 1.0 - 1e-12).all()  # the largest term is exp(0) = 1
    else:
        assert (got.shift == 0).all() and scale == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(got.finalize(), pooled, rtol=1e-10, atol=1e-12)


def test_reference_keeps_float32():
    rng = np.random.default_rng(3)
    k = rng.uniform(0, 1, (50, 1)).astype(np.float32)
    v = rng.normal(size=(50, 1)).astype(np.float32)
    got = reference.partials(k, k, v, kernel=REGISTRY["gaussian"], bandwidth=np.array([0.2]))
    assert got.weight.dtype == got.shift.dtype == got.value.dtype == np.float32
    _, pooled = _plain_partials(k.astype(float), k.astype(float), v.astype(float),
                                     REGISTRY["gaussian"], np.array([0.2]))
    np.testing.assert_allclose(got.finalize(), pooled, rtol=1e-4, atol=1e-5)


def test_block_weights_multiply_sample_weights_outside_the_log_domain():
    q, k = np.array([[0.0]]), np.array([[0.5], [2.0]])
    sw = np.array([2.0, 3.0])
    w = reference.block_weights(q, k, REGISTRY["epanechnikov"], np.array([1.0]), None, sw)
    np.testing.assert_allclose(w, [[2.0 * 0.75 * 0.75, 0.0]])
    lw = reference.block_weights(q, k, REGISTRY["gaussian"], np.array([2.0]), np.log(sw), sw)
    np.testing.assert_allclose(lw, [[-0.5 + np.log(2.0), -8.0 + np.log(3.0)]])


@pytest.mark.parametrize("k", RATIO, ids=lambda k: k.name)
def test_log_ratio_in_torch_equals_numpy(k):
    # nadaraya.nn recomputes far queries with the same function on torch tensors
    torch = pytest.importorskip("torch")
    a = np.array([-3.0, -0.5, 0.0, 0.75, 2.0**60, 4.0])
    d = np.array([1.0, 1.0, -2.0, -1.5, 1.0, 0.0])
    got = k.log_ratio(torch.from_numpy(a), torch.from_numpy(d), torch)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), k.log_ratio(a, d, np), rtol=1e-12, atol=0)


def test_parzen_far_out_is_quiet():
    # no overflow or inf - inf warning, nor NaN, for scaled distances near the float range
    import warnings

    k = REGISTRY["parzen"]
    u = np.array([1e200, -1e300, np.finfo(float).max])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = k(u)
    assert (got == 0.0).all()


@pytest.mark.parametrize("name", ["epanechnikov", "boxcar", "tricube", "gaussian"])
def test_reference_pool_keeps_float32_for_every_domain(name):
    # kernels outside the log domain start their shift at 0: in float64 it would promote the
    # merged partials, and the pooled answer, to float64
    rng = np.random.default_rng(4)
    k = rng.uniform(0, 1, (60, 1)).astype(np.float32)
    v = rng.normal(size=60).astype(np.float32)
    got = nadaraya.pool(k, k, v, kernel=name, bandwidth=0.3, backend="reference")
    assert got.dtype == np.float32
    got_p = reference.partials(k, k, v[:, None], kernel=REGISTRY[name], bandwidth=np.array([0.3]))
    assert got_p.shift.dtype == got_p.weight.dtype == got_p.value.dtype == np.float32
    local = reference.partials(k, k, v[:, None], kernel=REGISTRY[name], bandwidth=np.array([0.3]), moments=1)
    assert all(a.dtype == np.float32 for a in (local.shift, local.weight, local.value, *local.moments))
    _, pooled = _plain_partials(k.astype(float), k.astype(float), v[:, None].astype(float),
                                REGISTRY[name], np.array([0.3]))
    np.testing.assert_allclose(got, pooled[:, 0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("d", "r", "m", "n"), [(4, 2, 200, 200), (16, 0, 500, 2000)])
def test_reference_moment_blocks_fit_the_working_memory(d, r, m, n):
    # a local fit of degree r in d features holds d^(2r) entries per (query, key) pair in its
    # largest moment term: the blocks shrink by that factor, so the scratch stays within the
    # working memory; plain pooling (r = 0) makes no (query, key, feature) array at all. The
    # result (accumulated per query block, then concatenated) comes twice
    rng = np.random.default_rng(5)
    k, q, v = rng.uniform(0, 1, (n, d)), rng.uniform(0, 1, (m, d)), rng.normal(size=(n, 1))
    working = 1  # MiB
    with nadaraya.config_context(working_memory=working):
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            got = reference.partials(q, k, v, kernel=REGISTRY["gaussian"], bandwidth=np.full(d, 0.5),
                                     moments=r)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    result = sum(a.nbytes for a in (got.shift, got.weight, got.value, *got.moments))
    if r:
        assert got.moments[2 * r - 1].shape == (m,) + (d,) * (2 * r)  # the d^(2r) term is there
    assert peak - before < working * 2**20 + 2 * result, f"{(peak - before) / 2**20:.2f} MiB"


def test_reference_float32_scratch_fits_the_working_memory():
    # the scratch blocks are sized for the call's itemsize: a float32 call must build them in
    # float32 (in float64 they would take twice the working memory)
    rng = np.random.default_rng(6)
    k = rng.uniform(0, 1, (4096, 1)).astype(np.float32)  # one full key block
    q = rng.uniform(0, 1, (64, 1)).astype(np.float32)  # float32 blocks: 8 queries by 4096 keys
    v = rng.normal(size=(4096, 1)).astype(np.float32)
    working = 1  # MiB
    with nadaraya.config_context(working_memory=working):
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            got = reference.partials(q, k, v, kernel=REGISTRY["tricube"], bandwidth=np.array([0.5]))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    result = sum(a.nbytes for a in (got.shift, got.weight, got.value))
    assert got.weight.dtype == np.float32
    assert peak - before < working * 2**20 + 2 * result, f"{(peak - before) / 2**20:.2f} MiB"


@pytest.mark.parametrize("name", ["gaussian", "laplacian", "boxcar", "epanechnikov"])
def test_reference_block_weights_of_a_far_query_are_quiet(name):
    # (q - k) / h overflows to inf (and a profile's 0 * inf to NaN) for a query far out: the
    # weight is exactly zero (-inf in the log domain), without a RuntimeWarning for the user
    import warnings

    kernel = REGISTRY[name]
    q, k = np.array([[0.0], [0.5]]), np.array([[1e300], [0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w = reference.block_weights(q, k, kernel, np.array([1e10]))
    far = -np.inf if kernel.log_domain else 0.0
    assert w[0, 0] == far and w[1, 0] == far
    assert w[0, 1] == (0.0 if kernel.log_domain else kernel.profile(np.zeros(1))[0])


def test_concat_and_merge_errors_say_what_they_need():
    with pytest.raises(ValueError, match=r"^concat\(\) needs at least one Partials$"):
        concat([])
    one = np.ones(1)
    a = Partials(np.zeros(1), one, one[:, None], (np.ones((1, 2)),))
    b = Partials(np.zeros(1), one, one[:, None])
    with pytest.raises(ValueError, match=r"^cannot concatenate partials carrying \[0, 1\] moments; "
                                         r"all must carry the same stack$"):
        concat([a, b, a])
    with pytest.raises(ValueError, match=r"^cannot merge partials carrying 1 and 0 moments; "
                                         r"both sides must carry the same stack$"):
        merge(a, b)


def test_merge_all_in_torch_stays_in_torch():
    # the layers of nadaraya.nn merge torch partials that carry gradients: every merge must use
    # the namespace given (NumPy's functions cannot take a tensor that requires grad)
    torch = pytest.importorskip("torch")
    shifts, weights, values = [0.0, -1.0, 2.0], [1.0, 2.0, 0.5], [1.0, 4.0, -2.0]
    f64 = torch.float64
    leaves = [torch.tensor([[w * v]], dtype=f64, requires_grad=True) for w, v in zip(weights, values)]
    parts = [Partials(torch.tensor([s], dtype=torch.float64), torch.tensor([w], dtype=torch.float64), x)
             for s, w, x in zip(shifts, weights, leaves)]
    got = merge_all(parts, xp=torch)
    assert isinstance(got.shift, torch.Tensor) and float(got.shift[0]) == 2.0
    pooled = got.value[0, 0] / got.weight[0]
    total = [math.exp(s) * w for s, w in zip(shifts, weights)]  # the represented weights
    want = sum(t * v for t, v in zip(total, values)) / sum(total)
    assert float(pooled.detach()) == pytest.approx(want, rel=1e-14)
    pooled.backward()  # d pooled / d value_i = exp(shift_i) / sum_j exp(shift_j) weight_j
    for s, x in zip(shifts, leaves):
        assert float(x.grad[0, 0]) == pytest.approx(math.exp(s) / sum(total), rel=1e-14)


def test_finalize_in_torch_marks_empty_windows_nan():
    # torch partials (the torch backend, the layers) finalize with the same method
    torch = pytest.importorskip("torch")
    p = Partials(torch.zeros(3, dtype=torch.float64), torch.tensor([2.0, 0.0, 4.0], dtype=torch.float64),
                 torch.tensor([[3.0], [0.0], [2.0]], dtype=torch.float64))
    got = p.finalize()
    assert isinstance(got, torch.Tensor)
    assert got[0, 0].item() == 1.5 and got[2, 0].item() == 0.5 and math.isnan(got[1, 0].item())


# -- kernels: derivatives (NadarayaWatson.gradient) against central differences -----------------

_U = np.array([-2.6, -1.3, -0.83, -0.61, -0.37, -0.12, 0.09, 0.29, 0.44, 0.58, 0.77, 0.93, 1.3, 2.6])


@pytest.mark.parametrize("k", list(REGISTRY.values()), ids=lambda k: k.name)
def test_derivative_is_the_slope_of_the_profile(k):
    # d log K / du for log-domain kernels, dK / du for the others; points away from kinks
    e = 1e-6
    if k.log_domain:
        def f(u):
            return np.log(k.profile(u))
    else:
        f = k.profile
    want = (f(_U + e) - f(_U - e)) / (2 * e)
    got = k.derivative(_U)
    assert got.shape == _U.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert k.derivative(np.zeros(3)).tolist() == [0.0, 0.0, 0.0]  # symmetric: flat at 0
    if k.compact:
        assert (k.derivative(np.array([-1.5, 1.0001, 7.0])) == 0.0).all()


@pytest.mark.parametrize("k", list(REGISTRY.values()), ids=lambda k: k.name)
def test_derivative_in_torch_equals_numpy(k):
    # like the profiles, the derivatives are written once for every namespace
    torch = pytest.importorskip("torch")
    got = k.derivative(torch.from_numpy(_U), torch)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), k.derivative(_U), rtol=1e-12, atol=0)


# -- pooling: the defaults and the local-linear leave-one-out path against plain sums -----------


def _plain_loo(x, y, h, degree):
    """Leave-one-out Gaussian fits of degree 0 or 1, each by weighted least squares, in 1-D."""
    out = np.empty(len(x))
    for i in range(len(x)):
        others = np.arange(len(x)) != i
        w = np.exp(-0.5 * ((x[others] - x[i]) / h) ** 2)
        design = np.vander(x[others] - x[i], degree + 1, increasing=True)
        sw = np.sqrt(w)
        coef = np.linalg.lstsq(design * sw[:, None], y[others] * sw, rcond=None)[0]
        out[i] = coef[0]
    return out


def test_pool_and_loo_pool_defaults_are_a_gaussian_of_bandwidth_one():
    rng = np.random.default_rng(8)
    x, y = rng.uniform(0, 4, 30), rng.normal(size=30)
    np.testing.assert_allclose(nadaraya.loo_pool(x, y), _plain_loo(x, y, 1.0, 0), rtol=1e-12)
    q = np.array([-1.0, 0.5, 2.0, 9.0])
    w = np.exp(-0.5 * (q[:, None] - x[None, :]) ** 2)
    np.testing.assert_allclose(nadaraya.pool(q, x, y), w @ y / w.sum(1), rtol=1e-12)


def test_loo_pool_local_linear_is_leave_one_out_least_squares():
    rng = np.random.default_rng(9)
    x = np.sort(rng.uniform(0, 3, 40))
    y = np.sin(2 * x) + 0.1 * rng.normal(size=40)
    got = nadaraya.loo_pool(x, y, kernel="gaussian", bandwidth=0.4, degree=1)
    assert got.shape == (40,)
    np.testing.assert_allclose(got, _plain_loo(x, y, 0.4, 1), rtol=1e-9, atol=1e-12)


def _plain_local(q, x, y, h, degree, kernel="gaussian", sw=None, exclude=None):
    """Local polynomial fits by weighted least squares in k - q, one query at a time, 1-D."""
    sw = np.ones(len(x)) if sw is None else np.asarray(sw, float)
    out = np.empty(len(q))
    for i, qi in enumerate(q):
        w = REGISTRY[kernel].profile((x - qi) / h) * sw
        if exclude is not None:
            w[exclude[i]] = 0.0
        design = np.vander(x - qi, degree + 1, increasing=True)
        coef = np.linalg.lstsq(design * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
        out[i] = coef[0]
    return out


@pytest.mark.parametrize("degree", [1, 2])
def test_local_fits_with_kernel_weights_and_empty_windows_are_weighted_least_squares(degree):
    # the local path of pool and loo_pool passes every argument on: the kernel, the bandwidth,
    # the sample weights, the degree, the empty= policy and the backend
    rng = np.random.default_rng(10)
    x = np.sort(rng.uniform(0, 3, 40))
    y = np.cos(2 * x) + 0.1 * rng.normal(size=40)
    sw = rng.uniform(0.2, 3.0, 40)
    q = np.array([0.3, 1.1, 2.05, 2.7])
    got = nadaraya.pool(q, x, y, kernel="epanechnikov", bandwidth=0.7, degree=degree, sample_weight=sw,
                        backend="reference")
    want = _plain_local(q, x, y, 0.7, degree, "epanechnikov", sw)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    loo = nadaraya.loo_pool(x, y, kernel="epanechnikov", bandwidth=0.7, degree=degree, sample_weight=sw,
                            backend="reference")
    want = _plain_local(x, x, y, 0.7, degree, "epanechnikov", sw, exclude=np.arange(40))
    np.testing.assert_allclose(loo, want, rtol=1e-8, atol=1e-10)
    # a query outside every window: the nearest key's value, or the weighted mean
    far = nadaraya.pool([20.0], x, y, kernel="epanechnikov", bandwidth=0.7, degree=degree, empty="nearest")
    assert far.tolist() == [y[-1]]
    mean = nadaraya.pool([20.0], x, y, kernel="epanechnikov", bandwidth=0.7, degree=degree, empty="mean",
                         sample_weight=sw)
    np.testing.assert_allclose(mean, [sw @ y / sw.sum()], rtol=1e-12)
    with pytest.raises(ValueError, match=r"^2 of 2 queries have no key"):
        nadaraya.loo_pool([0.0, 5.0], [1.0, 2.0], kernel="epanechnikov", degree=degree, empty="raise")


@pytest.mark.parametrize("degree", [0, 1])
def test_pool_and_loo_pool_refuse_bad_arguments_on_every_path(degree):
    x = np.linspace(0, 3, 20)
    y = np.sin(x)
    calls = [lambda **kw: nadaraya.pool(x, x, y, degree=degree, bandwidth=0.5, **kw),
             lambda **kw: nadaraya.loo_pool(x, y, degree=degree, bandwidth=0.5, **kw)]
    for call in calls:
        for tol in (5.0, -1.0):
            with pytest.raises(ValueError, match=rf"^tol must be None \(exact\) or a number in .*got {tol}"):
                call(tol=tol)
        with pytest.raises(ValueError, match=r"^backend='nope' is not known"):
            call(backend="nope")
        with pytest.raises(ValueError, match=r"^empty='nope' is not valid"):
            call(empty="nope")
        with pytest.raises(ValueError, match=r"^device='cpu' is for backend='torch'; got backend='ref"):
            call(device="cpu", backend="reference")
        with pytest.raises(ValueError, match="categorical_kernel='nope'"):
            call(var_types="c", categorical_kernel="nope")


def _plain_mixed(q, x, y, h, lam, kernel, sw=None, exclude=None):
    """Gaussian in column 0 times a categorical factor in column 1 (unordered, c levels)."""
    c = len(np.unique(x[:, 1]))
    w = np.exp(-0.5 * ((q[:, None, 0] - x[None, :, 0]) / h) ** 2)
    same = q[:, None, 1] == x[None, :, 1]
    if kernel == "classic":  # Aitchison-Aitken
        w = w * np.where(same, 1 - lam, lam / (c - 1))
    else:  # Li-Racine
        w = w * np.where(same, 1.0, lam)
    if sw is not None:
        w = w * sw[None, :]
    if exclude is not None:
        w[np.arange(len(q)), exclude] = 0.0
    return w @ y / w.sum(axis=1)


def test_pool_and_loo_pool_with_an_unordered_column_use_the_categorical_kernel_asked_for():
    rng = np.random.default_rng(11)
    x = np.column_stack([rng.uniform(0, 2, 30), rng.integers(0, 3, 30)])
    y = x[:, 0] + 2 * x[:, 1] + 0.1 * rng.normal(size=30)
    sw = rng.uniform(0.5, 2.0, 30)
    q = np.array([[0.5, 0.0], [1.0, 2.0], [1.7, 1.0]])
    h, lam = 0.4, 0.3
    for ck in ("classic", "li-racine"):
        kw = {} if ck == "classic" else {"categorical_kernel": ck}  # classic is the default
        got = nadaraya.pool(q, x, y, bandwidth=[h, lam], var_types="cu", sample_weight=sw, **kw)
        np.testing.assert_allclose(got, _plain_mixed(q, x, y, h, lam, ck, sw), rtol=1e-10)
        loo = nadaraya.loo_pool(x, y, bandwidth=[h, lam], var_types="cu", sample_weight=sw, **kw)
        np.testing.assert_allclose(loo, _plain_mixed(x, x, y, h, lam, ck, sw, np.arange(30)), rtol=1e-10)


def test_local_fits_on_a_device_take_the_torch_backend():
    pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    x = np.sort(rng.uniform(0, 3, 30))
    y = np.sin(x)
    got = nadaraya.pool([0.5, 2.0], x, y, bandwidth=0.5, degree=1, device="cpu")
    np.testing.assert_allclose(got, _plain_local(np.array([0.5, 2.0]), x, y, 0.5, 1), rtol=1e-9)
    loo = nadaraya.loo_pool(x, y, bandwidth=0.5, degree=1, device="cpu")
    np.testing.assert_allclose(loo, _plain_loo(x, y, 0.5, 1), rtol=1e-9)


# -- pooling: Dask inputs give a lazy result with the NumPy answer ----------------------------


def test_each_dask_input_gives_a_lazy_result_with_the_numpy_answer():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(13)
    x = np.sort(rng.uniform(0, 3, 24))
    y = np.sin(2 * x)
    sw = rng.uniform(0.5, 2.0, 24)
    q = np.array([0.2, 1.3, 2.9])
    want = nadaraya.pool(q, x, y, bandwidth=0.4, sample_weight=sw)
    want_loo = nadaraya.loo_pool(x, y, bandwidth=0.4, sample_weight=sw)
    args = [q, x, y, sw]
    for i in range(4):
        lazy = [da.from_array(a, chunks=8) if j == i else a for j, a in enumerate(args)]
        got = nadaraya.pool(*lazy[:3], bandwidth=0.4, sample_weight=lazy[3])
        assert isinstance(got, da.Array), i
        np.testing.assert_allclose(got.compute(), want, rtol=1e-12)
        if i:
            got = nadaraya.loo_pool(*lazy[1:3], bandwidth=0.4, sample_weight=lazy[3])
            assert isinstance(got, da.Array), i
            np.testing.assert_allclose(got.compute(), want_loo, rtol=1e-12)


def test_dask_inputs_take_the_backend_degree_and_categorical_kernel_asked_for():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(14)
    x = np.column_stack([np.sort(rng.uniform(0, 3, 24)), rng.integers(0, 3, 24)])
    y = np.sin(2 * x[:, 0]) + x[:, 1]
    dx, dy = da.from_array(x, chunks=(8, 2)), da.from_array(y, chunks=8)
    for backend in ("auto", "dask", "reference"):
        got = nadaraya.pool(dx[:, :1], x[:, :1], y, bandwidth=0.4, backend=backend).compute()
        np.testing.assert_allclose(got, nadaraya.pool(x[:, :1], x[:, :1], y, bandwidth=0.4), rtol=1e-12)
    with pytest.raises(ValueError, match="backend='nope' is not known"):  # at the call or when computed
        nadaraya.pool(dx[:, :1], x[:, :1], y, bandwidth=0.4, backend="nope").compute()
    with pytest.raises(ValueError, match="backend='nope' is not known"):
        nadaraya.loo_pool(dx[:, :1], y, bandwidth=0.4, backend="nope").compute()
    local = nadaraya.pool(dx[:, :1], x[:, :1], y, bandwidth=0.4, degree=1).compute()
    np.testing.assert_allclose(local, _plain_local(x[:, 0], x[:, 0], y, 0.4, 1), rtol=1e-9)
    loo = nadaraya.loo_pool(dx[:, :1], dy, bandwidth=0.4, degree=1).compute()
    np.testing.assert_allclose(loo, _plain_loo(x[:, 0], y, 0.4, 1), rtol=1e-9)
    for ck in ("classic", "li-racine"):
        kw = {} if ck == "classic" else {"categorical_kernel": ck}
        got = nadaraya.pool(dx, x, y, bandwidth=[0.4, 0.3], var_types="cu", **kw).compute()
        np.testing.assert_allclose(got, _plain_mixed(x, x, y, 0.4, 0.3, ck), rtol=1e-10)
        got = nadaraya.loo_pool(dx, dy, bandwidth=[0.4, 0.3], var_types="cu", **kw).compute()
        want = _plain_mixed(x, x, y, 0.4, 0.3, ck, exclude=np.arange(24))
        np.testing.assert_allclose(got, want, rtol=1e-10)


# -- pooling: dtypes, and sums kept in range by exact powers of two ----------------------------


def test_pool_is_float32_only_when_every_input_is():
    x = np.array([0.0, 0.5, 1.0, 2.0])
    y = np.array([1.0, -2.0, 0.5, 3.0])
    for kinds in [(np.float32,) * 3, *[tuple(np.float64 if j == i else np.float32 for j in range(3))
                                       for i in range(3)]]:
        q, k, v = (np.asarray(a, dtype=t) for a, t in zip((x[:2], x, y), kinds))
        want = np.float32 if all(t is np.float32 for t in kinds) else np.float64
        assert nadaraya.pool(q, k, v, bandwidth=0.5).dtype == want, kinds
        assert nadaraya.pool(q, k, v, kernel="epanechnikov", bandwidth=0.8).dtype == want, kinds
    for kinds in [(np.float32, np.float32), (np.float64, np.float32), (np.float32, np.float64)]:
        k, v = (np.asarray(a, dtype=t) for a, t in zip((x, y), kinds))
        want = np.float32 if kinds == (np.float32, np.float32) else np.float64
        assert nadaraya.loo_pool(k, v, bandwidth=0.5).dtype == want, kinds


def test_sample_weights_act_by_their_ratios_at_any_scale():
    # the weights are brought to [0.5, 1) by an exact power of two: scaling them by one changes
    # nothing, also near the float range, where products with kernel terms would overflow or
    # sink into subnormals
    rng = np.random.default_rng(15)
    x = np.sort(rng.uniform(0, 3, 12))
    y = rng.normal(size=12)
    sw = rng.uniform(0.5, 1.0, 12)
    q = np.linspace(0, 3, 7)
    for name in ("epanechnikov", "gaussian"):
        want = nadaraya.pool(q, x, y, kernel=name, bandwidth=1.5, sample_weight=sw)
        for e in (-1021, -1000, 1000, 1023):  # still normal numbers
            got = nadaraya.pool(q, x, y, kernel=name, bandwidth=1.5, sample_weight=np.ldexp(sw, e))
            np.testing.assert_array_equal(got, want, err_msg=f"{name} 2**{e}")


@pytest.mark.parametrize(("a", "b"), [
    (2.0**400, 2.0**-900),  # in range (no rescaling): the small value keeps every digit
    (2.0**512, 2.0**-600),  # the top of the range is not rescaled either
    (1.5 * 2.0**1023, 1.75 * 2.0**1023),  # their sum overflows unless rescaled
    (-1.5 * 2.0**1023, -2.0**1023),
    (2.0**-1060, 3 * 2.0**-1070),  # subnormal: rescaled to keep the products' digits
])
def test_pool_of_values_far_from_one_is_exact(a, b):
    # keys 100 bandwidths apart: a query at a key sees only that key (weight 1, the other
    # exp(-5000) = 0), a query half-way sees both with weight 1 each
    keys = np.array([0.0, 100.0])
    got = nadaraya.pool([0.0, 100.0, 50.0], keys, [a, b])
    assert got[0] == a and got[1] == b
    assert got[2] == a / 2 + b / 2 or (a / 2 + b / 2 == 0 and got[2] == 0)


@pytest.mark.parametrize("e", [-1070, -1040, -700, -520, -300, 0, 300, 600, 1000])
def test_pool_commutes_with_powers_of_two_of_the_values(e):
    # sums of weighted values are taken on the values brought into range by an exact power of
    # two and scaled back once: pool(2^e v) = 2^e pool(v), rounded once
    rng = np.random.default_rng(16)
    x = np.sort(rng.uniform(0, 3, 15))
    v = rng.uniform(0.5, 1.0, (15, 2)) * [1.0, -1.0]
    q = np.linspace(-0.5, 3.5, 9)
    scaled = np.ldexp(v, e)  # rounded where subnormal: scale that back up (exactly)
    for name in ("gaussian", "epanechnikov"):
        up = np.ldexp(scaled, -e)
        want = np.ldexp(nadaraya.pool(q, x, up, kernel=name, bandwidth=0.7, empty="nearest"), e)
        got = nadaraya.pool(q, x, scaled, kernel=name, bandwidth=0.7, empty="nearest")
        np.testing.assert_array_equal(got, want, err_msg=name)
    # with a key of tiny relative weight alone in a window: its products with the values stay
    # normal (the values come to [0.5, 1) first)
    sw = np.array([1.0, 2.0**-400])
    got = nadaraya.pool([0.0, 10.0], [0.0, 10.0], np.ldexp([1.0, 0.75], -700), kernel="boxcar",
                        sample_weight=sw)
    assert got.tolist() == [2.0**-700, 0.75 * 2.0**-700]


def test_float32_values_far_from_one_stay_float32_and_exact():
    keys = np.array([0.0, 100.0], dtype=np.float32)
    for a in (np.float32(3e37), np.float32(2.0**-140)):
        v = np.array([a, a / 2], dtype=np.float32)
        got = nadaraya.pool(keys, keys, v)
        assert got.dtype == np.float32
        assert got.tolist() == v.tolist()
        got = nadaraya.pool(np.array([1000.0], dtype=np.float32), keys, v)  # far: recomputed
        assert got.dtype == np.float32 and got.tolist() == [a / 2]


# -- pooling: far queries, lonely leave-one-out points and the empty-window messages ------------


@pytest.mark.parametrize("q", [1e6, -3e7, 1e9])
def test_a_far_query_gets_the_exact_softmax_of_its_keys(q):
    # keys 0 and d with q d = 1: the true weights are proportional to exp(-(q - k)^2 / 2),
    # whose ratio exp(q d - d^2 / 2) is near e; the log weights themselves are near -q^2 / 2,
    # where float64 has no digits left for that difference
    d = 1.0 / q
    ratio = math.exp(q * d - d * d / 2)  # weight of key d over key 0
    want = [ratio / (1 + ratio) * 3.0 + 1 / (1 + ratio) * 1.0]
    got = nadaraya.pool([q], [0.0, d], [1.0, 3.0])
    assert got.tolist() == pytest.approx(want, rel=1e-12)
    both = nadaraya.pool([q, 0.0], [0.0, d], [1.0, 3.0])  # one far query among others
    assert both[0] == pytest.approx(want[0], rel=1e-12)


def test_leave_one_out_points_with_no_other_key_are_nan_and_reported():
    # Gaussian: points 1 and 2 carry no weight, so point 0 has nothing left to pool over;
    # every other point (far from the keys that weigh) takes the nearest weighing key
    keys, values = [0.0, 5.0, 10.0, 11.0], [1.0, 2.0, 3.0, 4.0]
    with pytest.warns(nadaraya.EmptyWindowWarning) as rec:
        got = nadaraya.loo_pool(keys, values, bandwidth=0.01, sample_weight=[1.0, 0.0, 0.0, 0.0])
    assert np.isnan(got[0]) and got[1:].tolist() == [1.0, 1.0, 1.0]
    assert [str(r.message) for r in rec] == [
        "1 of 4 points have no other key with positive weight to pool over; "
        "their leave-one-out predictions are NaN"]
    with pytest.raises(ValueError, match=r"^1 of 4 points have no other key with positive weight "
                                         r"to pool over \(leave-one-out\)$"):
        nadaraya.loo_pool(keys, values, bandwidth=0.01, sample_weight=[1.0, 0.0, 0.0, 0.0], empty="raise")
    # two weighing keys: every point far from the other has its nearest
    got = nadaraya.loo_pool(keys, values, bandwidth=0.01, sample_weight=[1.0, 0.0, 0.0, 1.0])
    assert got.tolist() == [4.0, 1.0, 4.0, 1.0]
    # a compact kernel with empty="nearest": the same lonely point, reported the same way
    with pytest.warns(nadaraya.EmptyWindowWarning) as rec:
        got = nadaraya.loo_pool([0.0, 5.0, 10.0], [1.0, 2.0, 3.0], kernel="epanechnikov", bandwidth=1.0,
                                empty="nearest", sample_weight=[1.0, 0.0, 0.0])
    assert np.isnan(got[0]) and got[1:].tolist() == [1.0, 1.0]
    assert [str(r.message) for r in rec] == [
        "1 of 3 points have no other key with positive weight to pool over; "
        "their leave-one-out predictions are NaN"]


def test_empty_windows_give_one_warning_that_says_how_many_and_where():
    import warnings

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = nadaraya.pool([0.0, 50.0, 60.0], [0.0, 0.5], [1.0, 2.0], kernel="epanechnikov", bandwidth=0.5)
    assert got[0] == 1.0 and np.isnan(got[1:]).all()
    assert [str(r.message) for r in rec] == [
        "2 of 3 queries have no key with positive weight within the support of the 'epanechnikov' "
        "kernel (bandwidth [0.5]); their predictions are NaN (empty='nan')"]
    assert rec[0].category is nadaraya.EmptyWindowWarning
    # seven bandwidths are summarised
    q, k = np.repeat([[0.0], [50.0]], 7, axis=1), np.repeat([[0.0], [0.5]], 7, axis=1)
    summary = r"\(bandwidth \[0\.5 0\.6 0\.7 \.\.\. 0\.9 1\.  1\.1\]\); "
    with pytest.warns(nadaraya.EmptyWindowWarning, match=summary):
        nadaraya.pool(q, k, [1.0, 2.0], kernel="epanechnikov", bandwidth=np.linspace(0.5, 1.1, 7))


# -- pooling: backend="auto" for the Gaussian in 1-D (the Taylor series within tol=, the truncated sums)


def _choice(x, h, tol):

    call = _call.prepare(x, x, np.sin(3 * x), kernel="gaussian", bandwidth=h)
    parts, choice = _call.compute_partials(call, tol=tol)
    return choice.name, parts, call


def test_auto_in_1d_takes_the_taylor_series_only_where_it_pays_and_stays_within_tol():
    # 1000 keys over 1000 bandwidths: the Taylor series within tol, else the exact sums over
    # each query's window; 600 keys spread over [3, 4] (span 1000 bandwidths, not 7000 nor 1):
    # not worth a series
    rng = np.random.default_rng(17)
    x = np.sort(rng.uniform(0, 1, 1000))
    name, parts, call = _choice(x, 0.001, 1e-6)
    assert name == "taylor"
    w = np.exp(-0.5 * ((x[:, None] - x[None, :]) / 0.001) ** 2)
    plain = w @ call.values[:, 0] / w.sum(axis=1)
    assert np.abs(parts.finalize()[:, 0] - plain).max() <= 1e-6 * np.abs(call.values).max()
    name, parts, _ = _choice(x, 0.001, None)
    assert name == "truncated"
    np.testing.assert_allclose(parts.finalize()[:, 0], plain, rtol=1e-12, atol=1e-14)
    assert _choice(x, 0.1, None)[0] not in ("taylor", "truncated")  # windows too wide
    y = 3 + np.sort(rng.uniform(0, 1, 600))
    # no series; at this size the sizes alone decide between the window and the fused loop (the
    # estimate would cost about what the window saves: 0.24 against 0.41 ms, measured)
    assert _choice(y, 0.001, 1e-6)[0] in ("truncated", "fused")
    assert _choice(3 + np.sort(rng.uniform(0, 1, 900)), 0.001 * 900 / 600, 1e-6)[0] != "taylor"


def test_loo_pool_with_tol_takes_the_series_within_its_bound():
    # tol= reaches the leave-one-out sums: the Taylor series (not bit-for-bit the exact sums)
    # within tol * max|y| of them on every point
    rng = np.random.default_rng(18)
    x = np.sort(rng.uniform(0, 1, 1000))
    y = np.sin(3 * x)
    exact = nadaraya.loo_pool(x, y, bandwidth=0.001)
    fast = nadaraya.loo_pool(x, y, bandwidth=0.001, tol=1e-6)
    gap = np.abs(fast - exact).max()
    assert 0 < gap <= 1e-6 * np.abs(y).max()


def test_integer_and_float16_inputs_are_pooled_in_float64():
    # every array is converted to the call's dtype (float64 unless all are float32): integer
    # keys, queries or values pool as their float64 values, float16 ones are not rounded
    # to float32 on the way
    q, k, v = np.array([0, 2]), np.array([0, 1, 2]), np.array([1, 2, 4])
    for name in ("gaussian", "epanechnikov"):
        want = nadaraya.pool(q.astype(float), k.astype(float), v.astype(float), kernel=name, bandwidth=0.7)
        got = nadaraya.pool(q, k, v, kernel=name, bandwidth=0.7)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-15)
        want = nadaraya.loo_pool(k.astype(float), v.astype(float), kernel=name, bandwidth=1.5)
        np.testing.assert_allclose(nadaraya.loo_pool(k, v, kernel=name, bandwidth=1.5), want, rtol=1e-15)
    q16, k16 = np.array([0.1, 1.7], np.float16), np.array([0.3, 1.1, 2.2], np.float16)
    v32 = np.array([1.0, 2.0, 4.0], np.float32)
    want = nadaraya.pool(q16.astype(float), k16.astype(float), v32.astype(float), bandwidth=0.7)
    got = nadaraya.pool(q16, k16, v32, bandwidth=0.7)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_dask_tasks_run_the_engine_set_in_the_options():
    # backend="auto" or "dask" leave the engine of each task to the Dask options; the laplace
    # engine takes only the Laplacian kernel, so the Gaussian is refused by it
    da = pytest.importorskip("dask.array")
    from nadaraya.distributed import backend as nd

    x = np.linspace(0, 3, 24)
    y = np.sin(x)
    dx = da.from_array(x, chunks=8)
    with nd.options(engine="laplace"):
        for backend in ("auto", "dask"):
            with pytest.raises(ValueError, match="backend='laplace' does not support kernel='gaussian'"):
                nadaraya.pool(dx, x, y, bandwidth=0.4, backend=backend).compute()
            got = nadaraya.pool(dx, x, y, kernel="laplacian", bandwidth=0.4, backend=backend).compute()
            want = nadaraya.pool(x, x, y, kernel="laplacian", bandwidth=0.4)
            np.testing.assert_allclose(got, want, rtol=1e-12)


# -- attention_weights: defaults, far rows, the size limits and the sparse result ----------------


def _softmax_rows(q, k, h=1.0, sw=None):
    """exp(-|q - k|^2 / (2 h^2)) * sw per row, normalised, computed relative to each row's best key."""
    logw = -0.5 * ((q[:, None] - k[None, :]) / h) ** 2
    if sw is not None:
        with np.errstate(divide="ignore"):
            logw = logw + np.log(sw)[None, :]
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    return w / w.sum(axis=1, keepdims=True)


def test_attention_weights_defaults_and_rows_far_from_the_keys():
    import warnings

    k = np.array([0.0, 0.5, 1.5, 3.0])
    q = np.array([0.2, 1.0, 43.0, 2.6])  # 40 bandwidths from the nearest key: weights near e^-800
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = nadaraya.attention_weights(q, k)  # Gaussian of bandwidth 1
    np.testing.assert_allclose(got, _softmax_rows(q, k), rtol=1e-12, atol=1e-300)
    # beyond the far limit (log weights near -q^2 / 2): the exact softmax, a zero-weight key 0
    sw = np.array([1.0, 0.0, 2.0, 1.0])
    qf = np.array([0.3, 1e6, -3e7])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a far row is not an empty one
        got = nadaraya.attention_weights(qf, [0.0, 5.0, 1e-6, 2e-6 - 1e-7], sample_weight=sw)
    kk = np.array([0.0, 5.0, 1e-6, 2e-6 - 1e-7])
    for i, qi in enumerate(qf):
        # log weights relative to key 0: q d - d^2 / 2 + log sw, differences taken exactly
        rel = np.array([qi * d - d * d / 2 for d in kk], dtype=float)
        with np.errstate(divide="ignore"):
            rel = rel + np.log(sw)
        want = np.exp(rel - rel.max())
        np.testing.assert_allclose(got[i], want / want.sum(), rtol=1e-9, atol=0)
    assert got[:, 1].tolist() == [0.0, 0.0, 0.0]


def test_attention_weights_far_rows_in_later_blocks():
    # 8192 keys: blocks of two rows in 1 MiB of working memory (16384 float64 entries); a far
    # row second in each block; 8189 keys of zero weight fill the blocks
    k = np.concatenate([[0.0, 1e-6, 5.0], np.linspace(10, 20, 8189)])
    q = np.array([0.25, 1e6, 0.5, 2e6])
    sw = np.zeros(k.size)
    sw[:2] = 1.0
    with nadaraya.config_context(working_memory=1):
        got = nadaraya.attention_weights(q, k, sample_weight=sw)
    assert got.shape == (4, 8192) and (got[:, 2:] == 0).all()
    for i, qi in enumerate(q):
        rel = np.array([qi * d - d * d / 2 for d in k[:2]])
        want = np.exp(rel - rel.max())
        np.testing.assert_allclose(got[i, :2], want / want.sum(), rtol=1e-9, atol=0)


@pytest.mark.parametrize(("m", "n", "max_bytes", "sizes"), [
    (1, 100, 799, ("800 bytes", "799 bytes")),
    (1, 128, 1023, ("1.0 KiB", "1023 bytes")),
    (3, 100, 1536, ("2.3 KiB", "1.5 KiB")),
    (1024, 128, 2**20 - 1, ("1.0 MiB", "1024.0 KiB")),
    (1536, 1024, 2**20, ("12.0 MiB", "1.0 MiB")),
    (2**14, 2**14, 2**30, ("2.0 GiB", "1.0 GiB")),
    (3, 3, 0.5, ("72 bytes", "0 bytes")),
])
def test_attention_weights_refuses_a_dense_result_over_max_bytes(m, n, max_bytes, sizes):
    q, k = np.zeros(m), np.zeros(n)
    msg = (f"attention_weights would return a dense ({m}, {n}) float64 array of {sizes[0]}, more than "
           f"max_bytes ({sizes[1]}); use pool() to predict (it never forms the matrix), sparse=True for a "
           "compact kernel, fewer queries or keys, or pass a larger max_bytes")
    with pytest.raises(ValueError) as err:
        nadaraya.attention_weights(q, k, max_bytes=max_bytes)
    assert str(err.value) == msg
    assert nadaraya.attention_weights(q[:1], k[:1], max_bytes=8).tolist() == [[1.0]]  # exactly the limit


def test_attention_weights_default_limit_is_four_working_memories():
    with nadaraya.config_context(working_memory=1):  # 4 MiB: 512 x 1024 float64 exactly
        assert nadaraya.attention_weights(np.zeros(512), np.zeros(1024)).shape == (512, 1024)
        with pytest.raises(ValueError, match=r"dense \(513, 1024\) float64 array of 4\.0 MiB, more than "
                                             r"max_bytes \(4\.0 MiB\)"):
            nadaraya.attention_weights(np.zeros(513), np.zeros(1024))
        # sparse results are limited by what they store, not by the dense shape
        w = nadaraya.attention_weights(np.arange(600.0), np.arange(1024.0), kernel="boxcar", bandwidth=0.5,
                                       sparse=True)
        assert w.shape == (600, 1024) and w.nnz == 600
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match=rf"^max_bytes must be a positive number of bytes; got {bad!r}$"):
            nadaraya.attention_weights([0.0], [0.0], max_bytes=bad)


def test_attention_weights_sparse_limit_counts_every_block():
    # 8193 keys: one query per block in 1 MiB of working memory; each row holds 2 positive
    # weights of 12 bytes each (float64 and an int32 index): 24 bytes a row, so a limit of 48
    # bytes is passed by the third row
    from scipy import sparse as sp

    k = np.arange(8193.0)
    q = np.arange(10.0) + 0.5
    with nadaraya.config_context(working_memory=1):
        msg = ("attention_weights(sparse=True) holds more than max_bytes (48 bytes) of positive weights "
               "after 3 of 10 queries; use pool() to predict, a smaller bandwidth or a compact kernel, or "
               "pass a larger max_bytes")
        with pytest.raises(ValueError) as err:
            nadaraya.attention_weights(q, k, kernel="epanechnikov", sparse=True, max_bytes=48)
        assert str(err.value) == msg
        w = nadaraya.attention_weights(q, k, kernel="epanechnikov", sparse=True, max_bytes=240)
    assert isinstance(w, sp.csr_array) and w.format == "csr" and w.nnz == 20
    dense = nadaraya.attention_weights(q, k, kernel="epanechnikov")
    np.testing.assert_allclose(w.toarray(), dense, rtol=1e-15)


@pytest.mark.parametrize(("m", "n", "max_bytes", "after"), [
    (10, 3000, 2 * 3000 * 12 + 1, 5),  # 16384 // 3000 = 5 rows a block
    (10, 16385, 2 * 16385 * 12 + 1, 3),  # one row a block, at least
    (12000, 1, 8192 * 12 - 1, 12000),  # every row in one block
])
def test_attention_weights_blocks_hold_whole_rows_within_the_working_memory(m, n, max_bytes, after):
    # blocks of 1 MiB / 64 = 16384 float64 entries (8 arrays of 8 bytes), as many whole rows as
    # fit (at least one): the sparse limit is checked after each block, so the row count in
    # its message tells the block size (rows of n positive boxcar weights, 12 bytes each)
    with nadaraya.config_context(working_memory=1), \
            pytest.raises(ValueError, match=rf"after {after} of {m} queries"):
        nadaraya.attention_weights(np.zeros(m), np.zeros(n), kernel="boxcar", sparse=True,
                                   max_bytes=max_bytes)


def test_attention_weights_sparse_empty_rows_hold_nothing_and_need_no_dense_matrix():
    import warnings

    k = np.array([0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        w = nadaraya.attention_weights([0.2, 50.0], k, kernel="epanechnikov", bandwidth=0.5, sparse=True)
    assert w.nnz == 1 and w.toarray().tolist() == [[1.0, 0.0], [0.0, 0.0]]
    rng = np.random.default_rng(19)
    x = rng.uniform(0, 1, 2000)
    with nadaraya.config_context(working_memory=1):
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            w = nadaraya.attention_weights(x, x, kernel="epanechnikov", bandwidth=1e-4, sparse=True)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert w.nnz >= 2000
    assert peak - before < 2000 * 2000 * 8 / 4, f"{(peak - before) / 2**20:.1f} MiB"


def test_attention_weights_nearest_is_euclidean_in_x_over_h():
    # no key in the window: one-hot at the nearest key in x / h, Euclidean (keys chosen where
    # another Minkowski distance would pick the other one)
    k = np.array([[0.0, 4.5], [3.2, 3.2]])
    w = nadaraya.attention_weights([[0.0, 0.0]], k, kernel="epanechnikov", bandwidth=[1.0, 1.0],
                                   empty="nearest")
    l2 = np.sqrt((k**2).sum(axis=1))
    l3 = np.cbrt((np.abs(k) ** 3).sum(axis=1))
    assert l2.argmin() != l3.argmin()
    assert w.tolist() == [[float(i == l2.argmin()) for i in range(2)]]
    with pytest.raises(ValueError, match=r"^keys must be numeric; got \['a', 'b'\]"):
        nadaraya.attention_weights([0.0], ["a", "b"])
    with pytest.raises(ValueError, match=r"^keys must be a 1-D or 2-D array; got the scalar 3\.0"):
        nadaraya.attention_weights([0.0], 3.0)


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_auto_takes_the_truncated_sums_for_narrow_gaussian_windows_in_up_to_3_features(d):
    # 1000 points, bandwidth 0.01 of the unit cube: each window holds few keys, so auto sums
    # over them exactly (1 to 3 features; not in 4); a named backend is what runs

    rng = np.random.default_rng(21)
    x = rng.uniform(0, 1, (1000, d))
    call = _call.prepare(x, x, np.sin(3 * x[:, 0]), kernel="gaussian", bandwidth=0.01)
    parts, choice = _call.compute_partials(call)
    assert (choice.name == "truncated") == (d <= 3)
    w = np.exp(-0.5 * (((x[:, None, :] - x[None, :, :]) / 0.01) ** 2).sum(axis=2))
    np.testing.assert_allclose(parts.finalize()[:, 0], w @ call.values[:, 0] / w.sum(axis=1), rtol=1e-12)
    assert _call.compute_partials(call, backend="reference")[1].name == "reference"


def test_pool_with_tol_takes_the_series_within_its_bound():
    rng = np.random.default_rng(22)
    x = np.sort(rng.uniform(0, 1, 1000))
    y = np.sin(3 * x)
    exact = nadaraya.pool(x, x, y, bandwidth=0.001)
    gaps = [np.abs(nadaraya.pool(x, x, y, bandwidth=0.001, tol=tol) - exact).max() for tol in (1e-6, 1e-2)]
    assert 0 < gaps[0] <= 1e-6 * np.abs(y).max() and gaps[1] <= 1e-2 * np.abs(y).max()
    assert gaps[1] > gaps[0]  # the series is cut for the tolerance asked, not a fixed one


def test_auto_in_2d_counts_the_pairs_of_the_queries_windows_with_each_bandwidth():
    # the choice counts the (query, key) pairs in each window, with one bandwidth per feature:
    # wide windows along the second feature hold every key (no truncated sums); keys in one
    # tight cluster meet the windows of few queries (truncated sums), though they would fill
    # each other's windows

    rng = np.random.default_rng(23)
    x = rng.uniform(0, 1, (1000, 2))
    call = _call.prepare(x, x, x[:, 0], kernel="gaussian", bandwidth=[0.01, 10.0])
    assert _call.compute_partials(call)[1].name != "truncated"
    keys = rng.uniform(0, 0.005, (1000, 2))
    call = _call.prepare(x, keys, keys[:, 0], kernel="gaussian", bandwidth=0.01)
    parts, choice = _call.compute_partials(call)
    assert choice.name == "truncated"
    w = np.exp(-0.5 * (((x[:, None, :] - keys[None, :, :]) / 0.01) ** 2).sum(axis=2))
    near = w.sum(axis=1) > 1e-200  # the rest are far queries, recomputed by pool
    want = w[near] @ keys[:, 0] / w[near].sum(axis=1)
    np.testing.assert_allclose(parts.finalize()[near, 0], want, rtol=1e-12)


# -- bandwidth criteria: score_bandwidth of local fits and mixed data against plain sums -------


def _plain_fits(x, y, h, degree, kernel="gaussian", sw=None, loo=False):
    """Local polynomial fits at each x_i (without its own point if ``loo``), and each point's
    own weight in its fit, L_ii = [(D' W D)^-1]_00 w_i, by plain least squares in 1-D."""
    n = len(x)
    sw = np.ones(n) if sw is None else sw
    fit, own = np.empty(n), np.empty(n)
    for i in range(n):
        w = REGISTRY[kernel].profile((x - x[i]) / h) * sw
        if loo:
            w[i] = 0.0
        design = np.vander(x - x[i], degree + 1, increasing=True)
        inv = np.linalg.inv(design.T @ (w[:, None] * design))
        fit[i] = (inv @ design.T @ (w * y))[0]
        own[i] = inv[0, 0] * w[i]
    return fit, own


@pytest.mark.parametrize("degree", [1, 2])
def test_score_bandwidth_of_local_fits_is_the_plain_cv_and_aicc(degree):
    from nadaraya.bandwidth import score_bandwidth

    rng = np.random.default_rng(24)
    x = np.sort(rng.uniform(0, 3, 40))
    y = np.sin(2 * x) + 0.1 * rng.normal(size=40)
    sw = rng.uniform(0.5, 2.0, 40)
    loo, _ = _plain_fits(x, y, 0.8, degree, "epanechnikov", sw, loo=True)
    cv = score_bandwidth(x, y, 0.8, degree=degree, kernel="epanechnikov", sample_weight=sw,
                         backend="reference")
    assert cv == pytest.approx(sw @ (y - loo) ** 2 / sw.sum(), rel=1e-9)
    fit, own = _plain_fits(x, y, 0.5, degree)
    n, tr = len(x), own.sum()
    aicc = np.log(np.mean((y - fit) ** 2)) + (1 + tr / n) / (1 - (tr + 2) / n)
    assert score_bandwidth(x, y, 0.5, degree=degree, method="aicc") == pytest.approx(aicc, rel=1e-9)
    with pytest.raises(ValueError, match=r"^gradient=True is available for degree=0 with continuous columns"):
        score_bandwidth(x, y, 0.5, degree=degree, gradient=True)
    with pytest.raises(ValueError, match=r"^backend='nope' is not known"):
        score_bandwidth(x, y, 0.5, degree=degree, backend="nope")


def test_score_bandwidth_of_mixed_data_uses_the_categorical_kernel_asked_for():
    from nadaraya.bandwidth import score_bandwidth

    rng = np.random.default_rng(25)
    x = np.column_stack([rng.uniform(0, 2, 30), rng.integers(0, 3, 30)])
    y = x[:, 0] + 2 * x[:, 1] + 0.1 * rng.normal(size=30)
    for ck in ("classic", "li-racine"):
        kw = {} if ck == "classic" else {"categorical_kernel": ck}  # classic is the default
        loo = _plain_mixed(x, x, y, 0.4, 0.3, ck, exclude=np.arange(30))
        got = score_bandwidth(x, y, [0.4, 0.3], var_types="cu", **kw)
        assert got == pytest.approx(np.mean((y - loo) ** 2), rel=1e-10)


def test_score_bandwidth_needs_three_points_of_positive_weight():
    from nadaraya.bandwidth import score_bandwidth

    x = np.linspace(0, 1, 5)
    for kw in ({}, {"degree": 1}):
        with pytest.raises(ValueError, match=r"^bandwidth selection needs at least 3 samples \(with "
                                             r"positive weight\); got n_samples = 2\. Pass a numeric "
                                             r"bandwidth instead$"):
            score_bandwidth(x, x, 0.5, sample_weight=[1.0, 0.0, 1.0, 0.0, 0.0], **kw)


def test_curvature_records_its_stage():
    from nadaraya.bandwidth._objective import _Objective

    x = np.linspace(0, 1, 20)
    obj = _Objective(x[:, None], np.sin(x)[:, None], None, REGISTRY["gaussian"], "cv", "auto")
    obj.at(np.array([0.3]))
    obj.curvature(np.array([0.2]))
    obj.curvature(np.array([0.25]))
    assert obj.record()["stages"].tolist() == ["refine"] * 3
    assert obj.n_passes == 3  # one pass each


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_curvature_third_derivative_is_the_slope_of_the_second(method):
    # d3 against central differences of d2 (d2 of d1, d1 of the score) from the same pass at nearby
    # bandwidths: accurate to about eps^2, far tighter than differences of the criterion
    from nadaraya.bandwidth._objective import _Objective

    rng = np.random.default_rng(26)
    x = rng.uniform(0, 2, (60, 2))
    y = np.column_stack([np.sin(2 * x[:, 0]) + 0.2 * rng.normal(size=60), np.cos(3 * x[:, 1])])
    sw = rng.uniform(0.3, 2.0, 60)
    obj = _Objective(x, y, sw, REGISTRY["gaussian"], method, "auto")
    eps = 1e-4
    for h in (np.array([0.15, 0.3]), np.array([0.5, 0.4])):
        _, d1, d2, d3 = obj.curvature(h)
        lo, hi = obj.curvature(h * np.exp(-eps)), obj.curvature(h * np.exp(eps))
        assert d1 == pytest.approx((hi[0] - lo[0]) / (2 * eps), rel=1e-6, abs=1e-8)
        assert d2 == pytest.approx((hi[1] - lo[1]) / (2 * eps), rel=1e-6, abs=1e-9)
        assert d3 == pytest.approx((hi[2] - lo[2]) / (2 * eps), rel=1e-6, abs=1e-9)


def _objective(x, y, sw=None, method="cv", weight_exp=0):
    from nadaraya.bandwidth._objective import _Objective

    return _Objective(x, y, sw, REGISTRY["gaussian"], method, "auto", weight_exp)


def test_aicc_of_weights_scaled_by_a_power_of_two_counts_their_true_sum():
    # the search brings the weights to [0.5, 1) and says by how much (weight_exp): AICc's
    # sample size is their true sum, so the score equals the one of the weights as given;
    # a true sum beyond the float range makes AICc's 2 vanish, quietly
    import warnings

    from nadaraya.bandwidth import score_bandwidth

    rng = np.random.default_rng(27)
    x = rng.uniform(0, 2, (30, 1))
    y = np.sin(2 * x) + 0.1 * rng.normal(size=(30, 1))
    sw = rng.uniform(0.5, 1.0, 30)
    h = np.array([0.3])
    for e in (2, 40, -40):
        want = score_bandwidth(x, y, h, method="aicc", sample_weight=np.ldexp(sw, e))
        assert _objective(x, y, sw, "aicc", e).at(h) == pytest.approx(want, rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        obj = _objective(x, y, sw, "aicc", 1100)
        assert obj._two() == 0.0
        assert np.isfinite(obj.at(h))


def test_one_pass_criteria_record_each_bandwidth_and_count_each_pass():
    rng = np.random.default_rng(28)
    x = rng.uniform(0, 2, (40, 2))
    y = np.column_stack([np.sin(2 * x[:, 0]), np.cos(x[:, 1])]) + 0.1 * rng.normal(size=(40, 2))
    sw = rng.uniform(0.3, 2.0, 40)
    h = np.array([0.3, 0.5])
    for method in ("cv", "aicc"):
        obj = _objective(x, y, sw, method)
        calls = []
        obj.progress = lambda *a: calls.append(a)  # noqa: B023
        first = obj.at(h)
        levels = obj.levels(h, 3)
        score, _ = obj.with_gradient(h)
        obj.at(h)
        assert obj.n_passes == 4  # one each
        assert calls == [("refine", 1, 1), ("grid", 2, 2), ("grid", 3, 2), ("grid", 4, 2),
                         ("per_feature", 5, 3), ("refine", 6, 4)]
        rec = obj.record()
        assert rec["stages"].tolist() == ["refine", "grid", "grid", "grid", "per_feature", "refine"]
        # every pass gives the same criterion as the primitive's leave-one-out pass
        want = [_objective(x, y, sw, method).at(h * 2.0 ** (-lev / 2)) for lev in range(3)]
        np.testing.assert_allclose(levels, want, rtol=1e-10)
        np.testing.assert_allclose(rec["scores"], [first, *want, want[0], want[0]], rtol=1e-10)
        assert score == pytest.approx(want[0], rel=1e-10)
        tried = [h] + [h * 2.0 ** (-lev / 2) for lev in range(3)] + [h, h]
        np.testing.assert_allclose(rec["bandwidths"], tried, rtol=1e-15)


def test_aicc_is_inf_where_every_point_fits_itself():
    # points 100 bandwidths apart: each point's own weight is all of it (H_ii = 1), the
    # in-sample residuals vanish and log(sigma^2) would be -inf: AICc is inf (never chosen)
    from nadaraya.bandwidth import score_bandwidth

    x = np.arange(10.0)
    y = np.sin(x)
    assert score_bandwidth(x, y, 0.01, method="aicc") == math.inf
    levels = _objective(x[:, None], y[:, None], None, "aicc").levels(np.array([0.01]), 2)
    assert levels.tolist() == [math.inf] * 2
    assert np.isfinite(score_bandwidth(x, y, 1.0, method="aicc"))
    # a fit with no residual at all (zero values): sigma^2 = 0 at every bandwidth, inf as well
    assert score_bandwidth(x, np.zeros(10), 1.0, method="aicc") == math.inf


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_gradient_of_several_outputs_is_the_slope_of_the_criterion(method):
    rng = np.random.default_rng(29)
    x = rng.uniform(0, 2, (40, 2))
    y = np.column_stack([np.sin(2 * x[:, 0]), np.cos(x[:, 1]), x[:, 0]]) + 0.1 * rng.normal(size=(40, 3))
    sw = rng.uniform(0.3, 2.0, 40)
    h = np.array([0.3, 0.5])
    _, grad = _objective(x, y, sw, method).with_gradient(h)
    eps = 1e-5
    for k in range(2):
        step = np.exp(eps * (np.arange(2) == k))
        up, down = (_objective(x, y, sw, method).at(h * step**s) for s in (1, -1))
        assert grad[k] == pytest.approx((up - down) / (2 * eps), rel=1e-6, abs=1e-10)


def test_passes_after_a_change_of_bandwidth_equal_fresh_ones():
    # the nearest neighbours found for one bandwidth are reused for the next: scaled along the
    # same direction (exactly), or as a first guess in a new direction (the gradient pass; the
    # others search again). Points 25 bandwidths apart, then 75: shifts near 300 and 2800, where
    # a wrong shift overflows or underflows every weight (the scores are compared: the
    # derivatives of so flat a criterion are rounding noise; AICc is inf there, every point
    # fitting itself, so only its levels are compared)
    x = np.column_stack([np.arange(12.0), np.arange(12.0) % 3 * 40.0])
    y = np.sin(x[:, :1]) + x[:, 1:] / 40
    h = np.array([0.04, 1.6])
    for then in (h / 3, np.array([1.6, 0.04]), np.array([0.05, 0.05])):
        for method in ("cv", "aicc"):
            obj = _objective(x, y, None, method)
            obj.levels(h, 2)
            fresh = _objective(x, y, None, method)
            np.testing.assert_allclose(obj.levels(then, 2), fresh.levels(then, 2), rtol=1e-9)
        obj = _objective(x, y)
        obj.with_gradient(h)
        score, grad = obj.with_gradient(then)
        fresh_score, fresh_grad = _objective(x, y).with_gradient(then)
        assert score == pytest.approx(fresh_score, rel=1e-9)
        assert np.isfinite(grad).all() and np.isfinite(fresh_grad).all()
        obj = _objective(x, y)
        obj.curvature(h)
        assert obj.curvature(then)[0] == pytest.approx(_objective(x, y).curvature(then)[0], rel=1e-9)


def test_reused_neighbours_that_would_underflow_every_weight_are_not_reused():
    # four corners: in the first direction each point's nearest is across the first feature;
    # in the second that neighbour's distance taken as the shift is far below the new nearest
    # distance, so every weight would underflow: the pass must notice and search again. And a
    # new direction close to the last (ratios 1.25 and 2.125) is still a new direction
    x = np.array([[-30.0, -50.0], [30.0, -50.0], [-30.0, 50.0], [30.0, 50.0]])
    y = np.array([[1.0], [2.0], [4.0], [3.0]])
    x2 = np.column_stack([np.repeat([0.0, 10.0, 20.0], 2), np.tile([0.0, 2.5], 3)])
    y2 = np.sin(x2[:, :1]) + x2[:, 1:]
    for data, h1, h2 in (((x, y), [1.0, 1.0], [0.5, 2.0]), ((x2, y2), [0.04, 0.05], [0.04, 0.085])):
        h1, h2 = np.array(h1), np.array(h2)
        obj = _objective(*data)
        obj.with_gradient(h1)
        obj.levels(h1, 1)
        score, grad = obj.with_gradient(h2)
        fresh_score, fresh_grad = _objective(*data).with_gradient(h2)
        assert score == pytest.approx(fresh_score, rel=1e-9)
        np.testing.assert_allclose(grad, fresh_grad, rtol=1e-6, atol=1e-12)
        obj.levels(h1, 1)
        assert obj.levels(h2, 1)[0] == pytest.approx(_objective(*data).levels(h2, 1)[0], rel=1e-9)


def test_a_criterion_with_tol_takes_the_series_within_its_bound():
    from nadaraya.bandwidth._objective import _Objective

    rng = np.random.default_rng(30)
    x = np.sort(rng.uniform(0, 1, 1000))[:, None]
    y = np.sin(3 * x) + 0.1 * rng.normal(size=(1000, 1))
    h = np.array([0.001])
    exact = _objective(x, y).at(h)
    fast = _Objective(x, y, None, REGISTRY["gaussian"], "cv", "auto", tol=1e-2).at(h)
    # each leave-one-out prediction within tol * max|y|: the mean squared residual moves by at
    # most 2 tol max|y| sqrt(CV) + (tol max|y|)^2
    bound = 1e-2 * np.abs(y).max()
    assert 0 < abs(fast - exact) <= 2 * bound * math.sqrt(exact) + bound**2


# -- bandwidth rules of thumb against the normal-reference formulas ------------------------------


def _plain_scale(x, w=None):
    """min(std, IQR / 1.349) per column: frequency weights, ddof 1, inverted-CDF quartiles."""
    w = np.ones(len(x)) if w is None else np.asarray(w, float)
    out = []
    for col in x.T:
        order = np.argsort(col)
        c, cw = col[order], w[order]
        cum = np.cumsum(cw) / cw.sum()
        q25, q75 = c[np.searchsorted(cum, 0.25)], c[np.searchsorted(cum, 0.75)]
        mean = cw @ c / cw.sum()
        var = cw @ (c - mean) ** 2 / (cw.sum() - 1) if cw.sum() > 1 else 0.0
        iqr = (q75 - q25) / 1.349
        out.append(min(math.sqrt(var), iqr) if iqr > 0 else math.sqrt(var))
    return np.array(out)


def test_rules_of_thumb_are_the_normal_reference_formulas():
    from nadaraya.bandwidth import rules

    rng = np.random.default_rng(31)
    x = rng.normal(size=(50, 3)) * [1.0, 3.0, 0.2]
    x[:, 2] = np.round(x[:, 2], 1)  # ties
    n, d = x.shape
    a = _plain_scale(x)
    np.testing.assert_allclose(rules.robust_scale(x), a, rtol=1e-14)
    scott = n ** (-1 / (d + 4))
    silverman = (n * (d + 2) / 4) ** (-1 / (d + 4))
    np.testing.assert_allclose(rules.rule_of_thumb(x), a * scott, rtol=1e-14)  # scott by default
    np.testing.assert_allclose(rules.rule_of_thumb(x, "silverman"), a * silverman, rtol=1e-14)
    assert rules.silverman(float(n), d) == pytest.approx(silverman, rel=1e-15)
    # another kernel: times the ratio of canonical bandwidths, (R(K) / mu2(K)^2)^(1/5)
    ratio = 15 ** 0.2 / (1 / (2 * math.sqrt(math.pi))) ** 0.2
    np.testing.assert_allclose(rules.rule_of_thumb(x, kernel="epanechnikov"), a * scott * ratio, rtol=1e-12)
    assert rules.rule_factor("scott", 100.0, 1) == pytest.approx(100 ** -0.2, rel=1e-15)
    assert rules.rule_factor("scott", 100.0, 1, "constant") == pytest.approx(100 ** -0.2, rel=1e-15)
    with pytest.raises(ValueError) as err:
        rules.rule_factor("nope", 100.0, 1)
    assert str(err.value) == "method='nope' is not a rule of thumb; choose one of scott, silverman"
    for f in (rules.rule_of_thumb, rules.robust_scale):
        with pytest.raises(ValueError, match=r"^X contains NaN or inf"):
            f([[0.0], [np.nan]])
    # booleans are numbers: 0 and 1
    b = np.array([[1, 0], [0, 1], [1, 1], [0, 0], [1, 0]], dtype=bool)
    np.testing.assert_allclose(rules.robust_scale(b), rules.robust_scale(b.astype(float)), rtol=1e-15)
    np.testing.assert_allclose(rules.rule_of_thumb(b), rules.rule_of_thumb(b.astype(float)), rtol=1e-15)


def test_rules_of_thumb_take_sample_weights_as_frequencies():
    from nadaraya.bandwidth import rules

    rng = np.random.default_rng(32)
    x = rng.normal(size=(20, 2))
    w = rng.integers(1, 4, 20)
    rep = np.repeat(x, w, axis=0)
    for method in ("scott", "silverman"):
        np.testing.assert_allclose(rules.rule_of_thumb(x, method, sample_weight=w.astype(float)),
                                   rules.rule_of_thumb(rep, method), rtol=1e-12)
    np.testing.assert_allclose(rules.robust_scale(x, w.astype(float)), _plain_scale(rep), rtol=1e-12)
    # fractional weights: the weighted variance with sum(w) - 1, 0 where the weights sum to 1 or less
    y = np.array([[0.0], [1.0], [3.0], [4.0]])
    half = [0.5] * 4
    np.testing.assert_allclose(rules.robust_scale(y, half), _plain_scale(y, half), rtol=1e-14)
    flat = rules.robust_scale(y, [0.25, 0.25, 0.25, 0.25])
    assert flat.tolist() == [0.0] and flat.dtype == np.float64
    assert rules.robust_scale(y, [0.2, 0.2, 0.2, 0.1]).tolist() == [0.0]


@pytest.mark.parametrize("e", [-600, -300, 300, 600])
def test_robust_scale_commutes_with_powers_of_two_per_feature(e):
    # features far from unit scale are brought near it by a power of two each, exactly
    from nadaraya.bandwidth import rules

    rng = np.random.default_rng(33)
    x = rng.normal(size=(30, 2))
    w = rng.uniform(0.5, 2.0, 30)
    scaled = x * [2.0**e, 1.0]
    want = rules.robust_scale(x, w) * [2.0**e, 1.0]
    np.testing.assert_allclose(rules.robust_scale(scaled, w), want, rtol=1e-14)
    np.testing.assert_allclose(rules.rule_of_thumb(scaled, sample_weight=w),
                               rules.rule_of_thumb(x, sample_weight=w) * [2.0**e, 1.0], rtol=1e-14)


def test_rules_of_thumb_on_ties_outliers_and_constant_features():
    from nadaraya.bandwidth import rules

    tied = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 5.0])  # IQR 0: the std alone
    assert rules.robust_scale(tied).tolist() == pytest.approx(_plain_scale(tied[:, None]).tolist(), rel=1e-15)
    assert rules.robust_scale(tied)[0] == pytest.approx(np.std(tied, ddof=1), rel=1e-15)
    heavy = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 9.0, -9.0])  # IQR / 1.349 < std, both < 1
    assert rules.robust_scale(heavy)[0] == pytest.approx(_plain_scale(heavy[:, None])[0], rel=1e-15)
    assert rules.robust_scale(heavy)[0] < np.std(heavy, ddof=1)
    assert rules.rule_of_thumb([[0.0], [1.0]]).shape == (1,)  # two rows are enough
    with pytest.raises(ValueError) as err:
        rules.rule_of_thumb([[1.0, 2.0], [1.0, 3.0], [1.0, 5.0]])
    assert str(err.value) == (
        "feature 0 has zero spread: it is constant (every value is 1.0), so no rule can choose its "
        "bandwidth (scott and silverman scale with the spread, and cv and aicc score every bandwidth "
        "of a constant feature alike); drop the feature, or pass a numeric bandwidth (a float or one "
        "per feature)")
    with pytest.raises(ValueError) as err:
        rules.rule_of_thumb([[0.0], [1.0]], "nope")
    assert str(err.value) == "method='nope' is not a rule of thumb; choose one of scott, silverman"
    with pytest.raises(ValueError, match=r"^bandwidth='scott' needs at least 2 samples"):
        rules.rule_of_thumb([[0.0]])


def test_a_constant_feature_without_its_values_is_named_alone():
    # the Dask path checks the scale without the data's first row: the message names the feature
    from nadaraya.bandwidth import rules

    with pytest.raises(ValueError) as err:
        rules.check_rule_input("scott", 3, np.array([1.0, 0.0]))
    assert str(err.value).startswith("feature 1 has zero spread: it is constant, so no rule can choose")


# -- the one-dimensional minimisers (bandwidth/optimise.py) -----------------------------------

_GOLDEN_PLAIN = (3.0 - math.sqrt(5.0)) / 2.0


class _Counted:
    """A function of one variable that records where it was called."""

    def __init__(self, f):
        self.f, self.xs = f, []

    def __call__(self, x):
        self.xs.append(x)
        return self.f(x)


def _cosh_at(centre: float, scale: float):
    """``scale * cosh(x - centre)`` with its first three derivatives: minimum at ``centre``."""

    def f(x):
        c, s = math.cosh(x - centre), math.sinh(x - centre)
        return scale * c, scale * s, scale * c, scale * s

    return f


def _skewed(x):
    """``x - 2 sqrt(x)`` (minimum -1 at 1) with its derivatives; Halley's denominator
    ``2 f''^2 - f' f'''`` is negative left of 1/9."""
    r = math.sqrt(x)
    return x - 2.0 * r, 1.0 - 1.0 / r, 0.5 / (r * x), -0.75 / (r * x * x)


_HALLEY_CASES = [  # (f, its minimiser, bracket)
    (_cosh_at(0.3, 1.0), 0.3, (-1.0, 0.0, 1.0)),
    (_cosh_at(0.3, 0.01), 0.3, (-1.0, 0.0, 1.0)),  # slopes below 1
    (_cosh_at(-2.7, 100.0), -2.7, (-4.0, -3.0, 2.0)),
    (_cosh_at(1.9, 1.0), 1.9, (-3.0, 1.5, 2.0)),
    (_skewed, 1.0, (0.001, 0.7, 6.0)),
    (_skewed, 1.0, (1e-4, 2.0, 50.0)),
]


@pytest.mark.parametrize("case", range(len(_HALLEY_CASES)))
def test_halley_finds_the_minimiser_within_tol_and_reports_what_it_evaluated(case):
    from nadaraya.bandwidth.optimise import halley

    f, x_star, xs = _HALLEY_CASES[case]
    fs = tuple(f(x)[0] for x in xs)
    tol = 1e-6
    g = _Counted(f)
    x, fx, ok = halley(g, xs, fs, tol)
    assert ok
    assert abs(x - x_star) <= 2 * tol
    # the best point seen, its own value: the minimum over b and every evaluation
    seen = {xs[1]: fs[1], **{v: f(v)[0] for v in g.xs}}
    assert fx == min(seen.values()) and seen[x] == fx
    assert all(xs[0] < v < xs[2] for v in g.xs)
    assert 1 <= len(g.xs) <= 12  # cubic steps, or halvings of the bracket


def test_halley_starts_at_the_vertex_and_keeps_the_brackets_value_of_b():
    from nadaraya.bandwidth.optimise import halley

    f = _cosh_at(1.3, 1.0)
    xs = (0.0, 1.0, 2.0)
    a, b, c = (f(x)[0] for x in xs)
    vertex = 1.0 - 0.5 * (1.0 * (b - c) - 1.0 * (b - a)) / (1.0 * (b - c) + 1.0 * (b - a))  # plain
    g = _Counted(f)
    halley(g, xs, (a, b, c), 1e-6)
    assert g.xs[0] == pytest.approx(vertex, abs=1e-15)
    # b's value as given counts as seen: a lower given value is kept against every evaluation
    g = _Counted(f)
    x, fx, ok = halley(g, xs, (a, 0.5, c), 1e-6)
    assert (x, fx, ok) == (1.0, 0.5, True) and min(f(v)[0] for v in g.xs) > 0.5


def test_halley_at_the_exact_minimum_stops_after_one_evaluation():
    from nadaraya.bandwidth.optimise import halley

    f = _cosh_at(0.5, 1.0)
    xs = (0.0, 0.5, 1.0)  # symmetric: the vertex is 0.5, where the slope is exactly 0
    g = _Counted(f)
    assert halley(g, xs, tuple(f(x)[0] for x in xs), 1e-6) == (0.5, 1.0, True)
    assert g.xs == [0.5]


@pytest.mark.parametrize("tol", [2**-10, 1.5 * 2**-10])
def test_halley_on_a_flat_function_halves_the_bracket_and_converges(tol):
    """Slope and curvature exactly 0 (a criterion that no bandwidth changes): no Halley or
    Newton step exists, so the bracket halves towards the descent side until it is at most
    2 tol wide."""
    from nadaraya.bandwidth.optimise import halley

    g = _Counted(lambda x: (1.0, 0.0, 0.0, 0.0))
    x, fx, ok = halley(g, (0.0, 0.5, 1.0), (1.0, 1.0, 1.0), tol)
    assert ok and fx == 1.0 and x == 0.5
    # the collinear bracket has no vertex: b first (then a = b: a slope of 0 is not positive),
    # then the midpoints towards c, 1 - 2^-k, until c - a = 2^-k <= 2 tol
    k_last = next(k for k in range(1, 60) if 2.0**-k <= 2 * tol)
    assert g.xs == [1.0 - 2.0**-k for k in range(1, k_last + 1)]


def test_halley_and_brent_stop_after_their_default_budgets():
    """With ``tol = 0`` neither can stop on the tolerance: Halley evaluates 30 points, Brent 40,
    and both say they did not converge."""
    from nadaraya.bandwidth.optimise import brent, halley

    concave = _Counted(lambda x: (-x * x, -2.0 * x, -2.0, 0.0))  # no minimum: halvings only
    x, fx, ok = halley(concave, (-1.0, 0.25, 1.0), (0.0, -0.0625, 0.0), 0.0)
    assert not ok and len(concave.xs) == 30
    f = _cosh_at(0.3, 1.0)
    g = _Counted(lambda x: f(x)[0])
    xs = (-1.0, 0.0, 1.0)
    x, fx, ok = brent(g, xs, tuple(f(v)[0] for v in xs), 0.0)
    assert not ok and len(g.xs) == 40
    assert abs(x - 0.3) < 1e-6 and fx == min(f(v)[0] for v in g.xs)


def _v_shape(x):
    return abs(x - 0.3) + 0.1 * (x - 0.3) ** 2


_BRENT_CASES = [  # (f, its minimiser, bracket, tol)
    (lambda x: _cosh_at(0.3, 1.0)(x)[0], 0.3, (-1.0, 0.0, 1.0), 1e-6),
    (lambda x: _cosh_at(-2.7, 100.0)(x)[0], -2.7, (-4.0, -3.0, 2.0), 1e-3),
    (_v_shape, 0.3, (-1.0, 0.0, 1.0), 1e-3),
    (_v_shape, 0.3, (-1.0, 0.0, 1.0), 1e-6),
    (_v_shape, 0.3, (0.1, 0.35, 5.0), 1e-6),
    (lambda x: _skewed(x)[0], 1.0, (1e-4, 2.0, 50.0), 1e-3),
]


@pytest.mark.parametrize("case", range(len(_BRENT_CASES)))
def test_brent_finds_the_minimiser_within_tol(case):
    from nadaraya.bandwidth.optimise import brent

    f, x_star, xs, tol = _BRENT_CASES[case]
    fs = tuple(f(x) for x in xs)
    g = _Counted(f)
    x, fx, ok = brent(g, xs, fs, tol)
    assert ok
    assert abs(x - x_star) <= tol * (1 + 1e-9)
    seen = {xs[1]: fs[1], **{v: f(v) for v in g.xs}}
    assert fx == min(seen.values()) and seen[x] == fx
    assert all(math.isfinite(v) and xs[0] < v < xs[2] for v in g.xs)
    assert len(g.xs) <= 40


def test_brent_takes_a_last_parabola_step_in_the_final_bracket():
    """The bracket 2 tol wide: one more evaluation, at the parabola's vertex, kept when lower."""
    from nadaraya.bandwidth.optimise import brent

    f = _Counted(lambda x: math.cosh(x - 0.3))
    xs = (0.25, 0.25 + 2**-5, 0.25 + 2**-4)  # c - a = 2 tol exactly
    fs = tuple(math.cosh(x - 0.3) for x in xs)
    x, fx, ok = brent(f, xs, fs, 2**-5)
    a, b, c = xs
    fa, fb, fc = fs
    vertex = b - 0.5 * ((b - a) ** 2 * (fb - fc) - (b - c) ** 2 * (fb - fa)) / (
        (b - a) * (fb - fc) - (b - c) * (fb - fa)
    )
    assert f.xs == [vertex] and ok
    assert (x, fx) == (vertex, math.cosh(vertex - 0.3)) and fx < fb
    # a collinear final bracket has no vertex: nothing is evaluated, b is returned
    line = _Counted(lambda x: x)
    assert brent(line, (0.0, 0.5, 1.0), (1.0, 1.0, 1.0), 0.5) == (0.5, 1.0, True)
    assert line.xs == []
    # a bracket 3 tol wide is narrowed before the last step
    g = _Counted(lambda x: math.cosh(x - 0.3))
    xs = (0.25, 0.25 + 1.5 * 2**-5, 0.25 + 3 * 2**-5)
    x, fx, ok = brent(g, xs, tuple(math.cosh(x - 0.3) for x in xs), 2**-5)
    assert ok and len(g.xs) > 1 and abs(x - 0.3) <= 2**-5


@pytest.mark.parametrize(
    ("xs", "left_inf", "right"),
    [
        ((0.0, 0.25, 2.0), True, True),  # a's value infinite, the right side larger
        ((1.0, 1.25, 3.0), True, True),  # right side larger, though smaller than b + a
        ((-2.0, 1.75, 2.0), False, False),  # c's value infinite, the left side larger
        ((0.0, 2.0, 2.5), False, False),
    ],
)
def test_brent_golden_step_into_the_larger_side_where_the_vertex_is_undefined(xs, left_inf, right):
    """An infinite score at an end of the bracket (a compact kernel's CV where windows are
    empty) leaves no parabola: the step is golden section into the larger side."""
    from nadaraya.bandwidth.optimise import brent

    a, b, c = xs
    x_star = b + 0.1 * (c - b) if right else b - 0.1 * (b - a)

    def f(x):
        if (left_inf and x <= a) or (not left_inf and x >= c):
            return math.inf
        return math.cosh(x - x_star)

    fs = (math.inf if left_inf else f(a), f(b), f(c) if left_inf else math.inf)
    g = _Counted(f)
    x, fx, ok = brent(g, xs, fs, 1e-6)
    first = b + _GOLDEN_PLAIN * (c - b) if right else b - _GOLDEN_PLAIN * (b - a)
    assert g.xs[0] == pytest.approx(first, rel=1e-15)
    assert ok and abs(x - x_star) <= 1e-6 and fx == f(x)
    assert all(a < v < c for v in g.xs)


@pytest.mark.parametrize("right", [True, False])
def test_brent_probes_tol_beside_b_on_the_larger_side_when_the_vertex_is_that_close(right):
    """A vertex within tol of b is replaced by a probe tol away from b on the larger side of
    the bracket, so that the bracket shrinks on both sides."""
    from nadaraya.bandwidth.optimise import brent

    tol, b = 2**-10, 0.5
    xs = (0.0, b, 1.25) if right else (-0.25, b, 1.0)
    fs = tuple((x - b - 2**-12) ** 2 for x in xs)  # a parabola with its vertex 2^-12 right of b
    f = _Counted(lambda x: (x - b - 2**-12) ** 2 + 0.5 * (x - b) ** 4)
    brent(f, xs, fs, tol)
    assert f.xs[0] == (b + tol if right else b - tol)


def _level_bracket(s0: float, s1: float, s2: float, sign: float = 1.0):
    """``1 + P(sign x)`` with ``P = (x^3 - x)(s0 + s1 x + s2 x^2)``: the same value 1 at -1, 0 and 1
    (a collinear bracket: Halley starts at b = 0), below 1 on one side of 0 (there the minimum),
    and at 0 the slope ``-sign s0``, curvature ``-2 s1``, third derivative ``6 sign (s0 - s2)``.
    Returns the function with its derivatives and its minimiser (the plain root of P')."""
    p = np.polynomial.Polynomial([0.0, -s0, -s1, s0 - s2, s1, s2])
    if sign < 0:
        p = np.polynomial.Polynomial(p.coef * [1, -1, 1, -1, 1, -1])
    d1, d2, d3 = p.deriv(1), p.deriv(2), p.deriv(3)

    def f(x):
        return 1.0 + float(p(x)), float(d1(x)), float(d2(x)), float(d3(x))  # Python floats, as math

    roots = [r.real for r in d1.roots() if abs(r.imag) < 1e-12 and -1 < r.real < 1 and d2(r.real) > 0]
    return f, min(roots, key=p)


@pytest.mark.parametrize(
    ("coef", "sign", "second"),
    [
        ((1.0, -1.5, 4.0), 1.0, 1 / 3),  # 2 f''^2 = f' f''' at 0: no Halley step, Newton's 1/3
        ((1.0, -1.5, 3.5), 1.0, 1 / 3),  # Halley's step 2 leaves the bracket: Newton's
        ((1.0, -1.5, 3.0), 1.0, 1 / 3),  # Halley's step lands on c = 1 exactly: Newton's
        ((1.0, -1.5, 3.0), -1.0, -1 / 3),  # ... on a = -1 exactly
        ((1.0, -0.5, 2.0), 1.0, 0.5),  # Newton's step lands on c exactly: the midpoint
        ((1.0, -0.5, 2.0), -1.0, -0.5),  # ... on a
    ],
)
def test_halley_falls_back_to_newton_then_to_the_midpoint(coef, sign, second):
    """From b, Halley's step where the curvature is positive, the step is downhill and stays
    strictly inside the bracket; else Newton's where it stays strictly inside; else the
    midpoint towards the descent side. Then on to the minimiser, within tol."""
    from nadaraya.bandwidth.optimise import halley

    f, x_star = _level_bracket(*coef, sign)
    g = _Counted(f)
    x, fx, ok = halley(g, (-1.0, 0.0, 1.0), (1.0, 1.0, 1.0), 1e-6)
    assert g.xs[:2] == [0.0, second]
    assert ok and abs(x - x_star) <= 2e-6 and fx == min(f(v)[0] for v in g.xs)
    assert all(-1.0 < v < 1.0 for v in g.xs)


def test_halley_takes_a_step_exactly_tol_long():
    """It stops on a step shorter than tol: Newton's step 1/3 with tol = 1/3 is still taken."""
    from nadaraya.bandwidth.optimise import halley

    f, _ = _level_bracket(1.0, -1.5, 4.0)
    g = _Counted(f)
    halley(g, (-1.0, 0.0, 1.0), (1.0, 1.0, 1.0), 1.0 / 3.0)
    assert g.xs[:2] == [0.0, 1.0 / 3.0]


def test_brent_does_not_stall_on_a_bracket_rounded_wider_than_2_tol():
    from nadaraya.bandwidth.optimise import brent

    g = _Counted(lambda x: math.cosh(x - 0.3))
    xs = (-1.0, 0.0, 1.0)
    x, _, ok = brent(g, xs, tuple(math.cosh(v - 0.3) for v in xs), 1e-3)
    assert abs(x - 0.3) <= 1e-3
    assert ok and len(set(g.xs)) == len(g.xs) <= 12  # never the same point twice


def test_brent_does_not_stall_when_the_probe_beside_b_rounds_onto_the_bracket_s_left_end():
    from nadaraya.bandwidth.optimise import brent

    # the left side is the larger, but b - tol rounds onto a: a probe there would be a again
    a, b, c, tol = -0.6235733701610537, -0.36876586265455785, -0.113958355148062, 0.25480750750649583
    assert b - a > tol and c - a > 2 * tol and c - b < b - a and b - tol == a
    seen = []

    def f(x):
        seen.append(x)
        return (x - b) ** 2

    x, fx, ok = brent(f, (a, b, c), (f(a), f(b), f(c)), tol)
    assert (x, fx, ok) == (b, 0.0, True)
    assert len(seen) == 3  # the bracket's three values only: it stops at once


# -- the bandwidth search (bandwidth/search.py) -----------------------------------------------

_SMALLER_NOTE = (
    "; a smaller bandwidth fits the noise or, for a compact kernel, leaves points with no neighbour in "
    "their window"
)


def _plain_loo_cv(X, y, h, kernel):
    """Leave-one-out CV of the product-kernel average, written out: inf where a point has no
    neighbour in its window."""
    u = (X[:, None, :] - X[None, :, :]) / h
    if kernel == "gaussian":
        w = np.exp(-0.5 * (u**2).sum(axis=2))
    else:  # epanechnikov
        w = np.prod(np.where(np.abs(u) <= 1, 0.75 * (1 - u**2), 0.0), axis=2)
    np.fill_diagonal(w, 0.0)
    total = w.sum(axis=1)
    if (total == 0).any():
        return math.inf
    return float(np.mean((y - w @ y / total) ** 2))


def _plain_linf_floor(X, direction):
    """The largest L-inf distance from a point to its nearest other one, in units of
    ``direction``: the narrowest window with a neighbour for every point."""
    z = X / direction
    d = np.abs(z[:, None, :] - z[None, :, :]).max(axis=2)
    np.fill_diagonal(d, np.inf)
    return float(d.min(axis=1).max())


def _grid_of(res):
    grid = res.search["stages"] == "grid"
    return res.search["bandwidths"][grid, 0], res.search["scores"][grid]


def _quiet_select(*args, **kwargs):
    from nadaraya.bandwidth import BandwidthWarning, select_bandwidth

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = select_bandwidth(*args, **kwargs)
    assert all(issubclass(w.category, BandwidthWarning) for w in caught), [str(w.message) for w in caught]
    return res, [str(w.message) for w in caught]


@pytest.mark.parametrize(("kernel", "how", "seed"), [("gaussian", "Halley", 0), ("epanechnikov", "Brent", 0),
                                                     ("epanechnikov", "Brent", 2)])
def test_search_refines_from_the_vertex_of_the_grids_best_three(kernel, how, seed):
    """The best grid point and its two neighbours are the first bracket (in log h): the first
    refinement step is the vertex of their parabola, the method is named in the message, and the
    result is the best bandwidth the search evaluated, scored by the plain criterion."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 5, 40))
    y = np.sin(3 * x) + rng.normal(0, 0.002 * seed, 40) if seed else np.sin(x) + rng.normal(0, 0.3, 40)
    res, caught = _quiet_select(x, y, kernel=kernel)
    ts, scores = _grid_of(res)
    best = int(np.argmin(scores))
    assert 0 < best < ts.size - 1 and not caught
    assert seed != 2 or best == ts.size - 2  # the bracket's low end is the grid's last point
    a, b, c = np.log(ts[best + 1]), np.log(ts[best]), np.log(ts[best - 1])
    fa, fb, fc = scores[best + 1], scores[best], scores[best - 1]
    vertex = b - 0.5 * ((b - a) ** 2 * (fb - fc) - (b - c) ** 2 * (fb - fa)) / (
        (b - a) * (fb - fc) - (b - c) * (fb - fa)
    )
    first = res.search["bandwidths"][res.search["stages"] == "refine"][0, 0]
    assert first == pytest.approx(math.exp(vertex), rel=1e-12)
    assert res.message == f"grid of {ts.size} and {how} on log h"
    assert res.score == res.search["scores"].min() <= scores[best]
    assert res.bandwidth[0] == res.search["bandwidths"][np.argmin(res.search["scores"]), 0]
    assert res.score == pytest.approx(_plain_loo_cv(x[:, None], y, res.bandwidth, kernel), rel=1e-10)


@pytest.mark.parametrize("seed", [None, 1])
def test_search_at_the_floor_refines_by_bounded_brent_towards_the_next_grid_point(seed):
    """A compact kernel's grid stops at the floor (every point keeps a neighbour); where the
    best grid point is that floor, scipy's bounded Brent (xatol 1e-3 on log h) runs between it and
    the next grid point: the same steps as that minimiser on the plain criterion, and the
    note of the lower bound where it stays there."""
    from scipy.optimize import minimize_scalar

    if seed is None:
        x = np.linspace(0, 1, 30)
        y = x**2  # no noise: the smallest window fits best
    else:
        rng = np.random.default_rng(seed)
        x = np.sort(rng.uniform(0, 5, 40))
        y = np.sin(3 * x) + rng.normal(0, 0.002, 40)
    res, caught = _quiet_select(x, y, kernel="epanechnikov")
    ts, scores = _grid_of(res)
    assert int(np.argmin(scores)) == ts.size - 1
    assert ts[-1] == pytest.approx(_plain_linf_floor(x[:, None], 1.0) * (1 + 1e-9), rel=1e-12)
    assert res.bounds[0, 0] == ts[-1]
    plain = []

    def plain_cv(lt):
        plain.append(math.exp(lt))
        return _plain_loo_cv(x[:, None], y, math.exp(lt), "epanechnikov")

    want = minimize_scalar(plain_cv, bounds=(math.log(ts[-1]), math.log(ts[-2])), method="bounded",
                           options={"xatol": 1e-3})
    refine = res.search["bandwidths"][res.search["stages"] == "refine"][:, 0]
    np.testing.assert_allclose(refine, plain, rtol=1e-9)
    assert res.converged and res.message == f"grid of {ts.size} and bounded Brent on log h"
    if want.fun < scores[-1]:
        assert seed is not None and not caught
        assert res.bandwidth[0] == pytest.approx(math.exp(want.x), rel=1e-9)
        assert res.score == pytest.approx(want.fun, rel=1e-9)
    else:
        assert seed is None and res.bandwidth[0] == ts[-1] and res.score == scores[-1]
        h = f"{res.bandwidth[0]:.6g}"
        assert caught == [f"cv: the selected bandwidth of feature 0, {h}, is on the lower bound {h} of the "
                          f"search{_SMALLER_NOTE}"]


def test_search_at_the_top_of_the_grid_tries_the_smoothed_out_bandwidth():
    """Noise alone: the best grid point is the largest; one more pass at 10**4 times the range
    (the bandwidth that smooths the feature out) is kept when no worse, without a warning."""
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 5, 40))
    y = rng.normal(size=40)
    res, caught = _quiet_select(x, y)
    ts, scores = _grid_of(res)
    assert int(np.argmin(scores)) == 0 and not caught
    assert res.message == f"grid of {ts.size} and bounded Brent, then smoothed out on log h"
    assert res.bandwidth[0] == pytest.approx(1e4 * np.ptp(x), rel=1e-12) and res.smoothed_out.all()
    assert res.bounds[0, 1] == res.bandwidth[0] and res.bounds[0, 0] == ts[-1]
    assert res.score == pytest.approx(_plain_loo_cv(x[:, None], y, res.bandwidth, "gaussian"), rel=1e-10)


@pytest.mark.parametrize("scale", [1.0, 2.0**-300])
def test_search_in_two_features_at_the_floor_names_the_search_and_uses_linf_distances(scale):
    """In 2-D the windows are boxes: the floor is the L-inf distance to the nearest other point
    (here smaller than the Euclidean one), and a scalar search's note names the search, in the
    units of X (also where X is scaled into range by a power of two)."""
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (30, 2)) * scale
    y = X[:, 0] + X[:, 1]
    res, caught = _quiet_select(X, y, kernel="epanechnikov")
    ts, _ = _grid_of(res)
    floor = _plain_linf_floor(X, 1.0)
    assert ts[-1] == pytest.approx(floor * (1 + 1e-9), rel=1e-12)
    assert res.bandwidth[0] == ts[-1]  # no noise: the smallest window fits best
    h = f"{ts[-1]:.6g}"
    assert caught == [f"cv: the selected bandwidth of the search, {h}, is on the lower bound {h} of the "
                      f"search{_SMALLER_NOTE}"]


@pytest.mark.parametrize("scale", [1.0, 2.0**-300])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_per_feature_search_bounds_and_its_lower_bound_note(kernel, scale):
    """Per feature, L-BFGS-B searches between Scott's rule times 2^-6 (raised to the floor, in
    each feature's units of the rule, for a compact kernel) and the larger of the rule times 2^5
    and 10**4 times the feature's range; a feature left on its lower bound is named in the note,
    in the units of X (also where X is scaled into range by a power of two)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    X = X * scale
    res, caught = _quiet_select(X, y, kernel=kernel, per_feature=True)
    rot = res.rule_of_thumb
    lower = rot * 2.0**-6
    if kernel != "gaussian":
        direction = rot / math.exp(np.mean(np.log(rot)))
        lower = np.maximum(lower, _plain_linf_floor(X, direction) * (1 + 1e-9) * direction)
    upper = np.maximum(rot * 2.0**5, 1e4 * np.ptp(X, axis=0))
    np.testing.assert_allclose(res.bounds, np.stack([lower, upper], axis=1), rtol=1e-12)
    notes = [
        f"cv: the selected bandwidth of feature {j}, {res.bandwidth[j]:.6g}, is on the lower bound "
        f"{lower[j]:.6g} of the search{_SMALLER_NOTE}"
        for j in range(2)
        if abs(math.log(res.bandwidth[j] / lower[j])) < 1e-6
    ]
    assert caught == (["; ".join(notes)] if notes else [])
    assert kernel == "gaussian" or notes  # the compact kernel's feature 0 sits on its floor


def test_per_feature_search_tries_useful_features_smoothed_out_one_at_a_time():
    """The coordinate sweeps try each feature at its upper bound (smoothed out), one feature at a
    time; two useful features are tried there and kept below their range."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(6 * X[:, 0]) + np.cos(5 * X[:, 1]) + rng.normal(0, 0.1, 40)
    res, _ = _quiet_select(X, y, per_feature=True)
    assert (res.bandwidth < np.ptp(X, axis=0)).all() and not res.smoothed_out.any()
    at_upper = np.isclose(res.search["bandwidths"], res.bounds[:, 1], rtol=1e-12)
    assert (at_upper.sum(axis=0) >= 1).all() and (at_upper.sum(axis=1) <= 1).all()


@pytest.mark.parametrize("method", ["cv", "aicc"])
@pytest.mark.parametrize("e", [-700, -300, 300, 600])
def test_search_on_y_scaled_by_a_power_of_two_scales_the_score_back(method, e):
    """Outside the safe range y is brought to unit scale by a power of two, searched, and the
    scores put back: CV times 4^e (inf or 0 quietly where beyond float64's range), AICc plus
    e log 4; the bandwidths are those of the unscaled data (y is brought to its own unit scale, so
    to rounding)."""
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 5, 40))
    y = np.sin(x) + rng.normal(0, 0.3, 40)
    base, _ = _quiet_select(x, y, method=method)
    from nadaraya.bandwidth import select_bandwidth

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = select_bandwidth(x, np.ldexp(y, e), method=method)
    np.testing.assert_allclose(got.bandwidth, base.bandwidth, rtol=1e-9)
    np.testing.assert_allclose(got.search["bandwidths"], base.search["bandwidths"], rtol=1e-9)
    scores = np.append(base.search["scores"], base.score)
    if method == "cv":

        def times_4e(s):
            try:
                return float(Fraction(s) * Fraction(4) ** e)
            except OverflowError:
                return math.inf

        want = [times_4e(s) for s in scores]
    else:
        want = scores + 2.0 * e * math.log(2.0)
    np.testing.assert_allclose(np.append(got.search["scores"], got.score), want, rtol=1e-9)


def _plain_softmax_loo_cv(x, y, h):
    """Leave-one-out CV of the Gaussian average, each point's weights normalised by their largest
    in the log domain (so points hundreds of bandwidths apart still get their nearest's value)."""
    u2 = (((x[:, None, :] - x[None, :, :]) / h) ** 2).sum(axis=2) / 2
    np.fill_diagonal(u2, np.inf)
    w = np.exp(-(u2 - u2.min(axis=1, keepdims=True)))
    return float(np.mean((y - w @ y / w.sum(axis=1, keepdims=True)) ** 2))


@pytest.mark.parametrize(
    "x",
    [
        # a mirror pair and a point off their line: each point's old neighbour is its mirror
        # (or, for the third, a point at right angles), so a first-guess shift |z_i + z_j|^2 is 0
        # for the pair, below every squared distance (all >= 2e4): their weights all underflow
        [[100.0, -100.0], [-100.0, 100.0], [400.0, 400.0]],
        # three points on a line at 45 degrees: each difference to the old neighbour is (a, -a),
        # so a first guess summing cubes is 0 for every point, again underflowing all weights
        [[100.0, -100.0], [-100.0, 100.0], [250.0, -250.0]],
    ],
)
def test_a_new_directions_first_guess_shift_keeps_every_points_nearest_weight(x):
    """The gradient pass in a new direction takes each point's old nearest neighbour's squared
    distance as its shift: that neighbour then weighs exactly 1, so no point's weights can all
    underflow (and where a shift overflows some weight the pass is redone exactly). The score
    equals the plain leave-one-out CV, computed with each point's weights normalised."""
    x = np.array(x)
    y = np.array([[0.0], [1.0], [3.0]])
    h1, h2 = np.array([1.0, 1.5]), np.array([1.0, 1.0])
    obj = _objective(x, y)
    obj.with_gradient(h1)  # the nearest neighbours of the first direction
    score, grad = obj.with_gradient(h2)
    assert score == pytest.approx(_plain_softmax_loo_cv(x, y, h2), rel=1e-9)
    assert np.isfinite(grad).all()


def test_select_bandwidth_passes_every_option_on_and_warns_once():
    """The public call validates and passes on degree, var_types, categorical_kernel, tol and
    progress, names the kernel, and warns once."""
    from nadaraya.bandwidth import BandwidthWarning, score_bandwidth, select_bandwidth

    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 5, 30))
    y = np.sin(x) + rng.normal(0, 0.3, 30)
    res = select_bandwidth(x, y, degree=1)
    assert res.score == pytest.approx(score_bandwidth(x, y, res.bandwidth, degree=1), rel=1e-9)
    assert res.score != pytest.approx(score_bandwidth(x, y, res.bandwidth), rel=1e-6)
    X = np.column_stack([x, rng.integers(0, 3, 30)])
    y2 = y + X[:, 1]
    for ck in ("classic", "li-racine"):
        res = select_bandwidth(X, y2, var_types="cu", categorical_kernel=ck)
        want = score_bandwidth(X, y2, res.bandwidth, var_types="cu", categorical_kernel=ck)
        assert res.score == pytest.approx(want, rel=1e-9)
    with pytest.raises(ValueError, match="tol"):
        select_bandwidth(x, y, tol=-1.0)
    with pytest.raises(ValueError, match="var_types"):
        select_bandwidth(x, y, var_types="cc")
    with pytest.raises(ValueError, match="categorical_kernel"):
        select_bandwidth(x, y, categorical_kernel="nope")
    calls = []
    res = select_bandwidth(x, y, kernel="epanechnikov", progress=lambda *a: calls.append(a))
    assert res.kernel == "epanechnikov" and res.n_passes == calls[-1][2] > 0
    assert [c[1] for c in calls] == list(range(1, len(res.search["stages"]) + 1))
    from nadaraya.bandwidth.search import reporting

    outer = []
    with reporting(lambda *a: outer.append(a)):  # no progress= of its own: the block's is kept
        res = select_bandwidth(x, y)
    assert len(outer) == len(res.search["stages"])
    # a feature on its floor: one warning (where it points is not checked here: mutmut's
    # trampolines add frames, so such a test would fail in every mutant run)
    X2 = np.random.default_rng(0).uniform(0, 1, (40, 2))
    with pytest.warns(BandwidthWarning, match="feature 0") as caught:
        select_bandwidth(X2, np.sin(6 * X2[:, 0]) + X2[:, 1], kernel="epanechnikov", per_feature=True)
    assert len(caught) == 1


@pytest.mark.parametrize("per_feature", [False, True])
def test_constant_y_returns_scotts_rule_as_the_whole_result(per_feature):
    """Every column of y constant (at different values): no search, Scott's rule (its geometric
    mean for a scalar bandwidth), one grid pass recorded, bounds [h, h], converged, the warning
    and the message whole."""
    from nadaraya.bandwidth import rule_of_thumb

    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (25, 2)) * [1.0, 8.0]
    Y = np.column_stack([np.full(25, 2.5), np.full(25, -1.0)])
    res, caught = _quiet_select(X, Y, per_feature=per_feature)
    rot = rule_of_thumb(X, "scott")
    h = rot if per_feature else np.full(2, np.exp(np.mean(np.log(rot))))
    np.testing.assert_allclose(res.bandwidth, h, rtol=1e-12)
    np.testing.assert_array_equal(res.bounds, np.column_stack([res.bandwidth, res.bandwidth]))
    assert res.converged is True and res.message == "constant y: rule of thumb"
    assert list(res.search["stages"]) == ["grid"] and abs(res.score) < 1e-28
    assert caught == ["y is constant, so every bandwidth fits it exactly and cv cannot choose; "
                      "returning Scott's rule of thumb"]


def test_constant_kernel_search_smooths_every_feature_out():
    """Average pooling ignores the bandwidth: the search ends smoothed out in every feature, as
    a boolean array of one entry per feature."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (20, 2))
    res, _ = _quiet_select(X, X[:, 0] + rng.normal(0, 0.1, 20), kernel="constant")
    assert res.smoothed_out.dtype == np.bool_ and res.smoothed_out.shape == (2,) and res.smoothed_out.all()


@pytest.mark.parametrize(("per_feature", "degree"), [(False, 0), (True, 0), (False, 1)])
def test_search_grid_steps_from_scotts_rule_past_three_ranges(per_feature, degree):
    """The grid runs along h = t * rot / geo (per feature; 1 for a scalar search) in steps of
    sqrt 2 (2 for local fits, each of whose points costs a pass), from at least 2^5 times geo
    (Scott's rule's geometric mean) up to the first step past 3 times the widest reach (range
    over direction): an outlier makes the reach hundreds of rules, so the reach sets the top.
    The per-feature Gaussian's one-pass grid stops at 2^1.5 times geo instead, unless its best
    point is that top (then the whole grid is scored)."""
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (30, 2))
    X[0, 0] = 60.0  # the IQR keeps Scott's rule small; the range is 60
    y = np.sin(4 * X[:, 1]) + rng.normal(0, 0.1, 30)
    res, _ = _quiet_select(X, y, per_feature=per_feature, degree=degree)
    grid = res.search["stages"] == "grid"
    hs = res.search["bandwidths"][grid]
    rot = res.rule_of_thumb
    geo = float(np.exp(np.mean(np.log(rot))))
    direction = rot / geo if per_feature else np.ones(2)
    ts = hs[:, 0] / direction[0]
    np.testing.assert_allclose(hs, ts[:, None] * direction, rtol=1e-12)
    step = 2.0 if degree else math.sqrt(2.0)
    np.testing.assert_allclose(ts[:-1] / ts[1:], step, rtol=1e-12)
    reach = np.max(np.ptp(X, axis=0) / direction)
    k = math.ceil(2 * math.log2(3 * reach / geo))
    assert k > 10  # the reach, not the 2^5 minimum, sets the top here
    if per_feature and int(np.argmin(res.search["scores"][grid])) > 0:
        k = 3  # the short grid, whose best is below its top
    assert ts[0] == pytest.approx(geo * 2.0 ** (k / 2), rel=1e-12)


def test_per_feature_search_records_its_steps_as_per_feature():
    """A compact kernel's per-feature search records the grid and then only "per_feature"
    passes (its L-BFGS-B steps and the smoothing-out trials)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(6 * X[:, 0]) + np.cos(5 * X[:, 1]) + rng.normal(0, 0.1, 40)
    res, _ = _quiet_select(X, y, kernel="epanechnikov", per_feature=True)
    stages = list(res.search["stages"])
    n_grid = stages.count("grid")
    assert stages[:n_grid] == ["grid"] * n_grid
    assert stages[n_grid:] == ["per_feature"] * (len(stages) - n_grid)
    assert len(stages) > n_grid + 4


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_per_feature_search_is_the_same_for_y_times_1024(kernel):
    """L-BFGS-B runs on the criterion divided by the best grid score (and its gradient by the
    same): y times 2^10 multiplies every CV exactly by 2^20 and leaves the steps as they were,
    so the bandwidths agree."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(6 * X[:, 0]) + np.cos(5 * X[:, 1]) + rng.normal(0, 0.1, 40)
    res, _ = _quiet_select(X, y, kernel=kernel, per_feature=True)
    big, _ = _quiet_select(X, 1024.0 * y, kernel=kernel, per_feature=True)
    np.testing.assert_allclose(big.bandwidth, res.bandwidth, rtol=1e-9)
    assert big.score == pytest.approx(2.0**20 * res.score, rel=1e-9)
    assert big.converged and res.converged


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_per_feature_search_returns_its_best_evaluation_and_says_how(kernel):
    """The per-feature result is the best bandwidth it evaluated (L-BFGS-B's end kept when it
    improves on the start), its score the plain leave-one-out CV there, and its message names
    the grid and L-BFGS-B's own message."""
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(6 * X[:, 0]) + np.cos(5 * X[:, 1]) + rng.normal(0, 0.1, 40)
    res, _ = _quiet_select(X, y, kernel=kernel, per_feature=True)
    assert res.score == pytest.approx(float(np.min(res.search["scores"])), rel=1e-9)
    assert res.score == pytest.approx(_plain_loo_cv(X, y, res.bandwidth, kernel), rel=1e-9)
    n_grid = int(np.sum(res.search["stages"] == "grid"))
    assert res.message.startswith(f"grid of {n_grid}, coordinate sweep, L-BFGS-B: CONVERGENCE")


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_per_feature_search_in_one_feature_is_the_scalar_search(kernel):
    """With one feature there is nothing to weigh between features: per_feature=True runs the
    scalar search (the grid, then Halley or Brent), with the same result."""
    rng = np.random.default_rng(2)
    x = np.sort(rng.uniform(0, 5, 40))
    y = np.sin(x) + rng.normal(0, 0.2, 40)
    one, _ = _quiet_select(x, y, kernel=kernel)
    per, _ = _quiet_select(x, y, kernel=kernel, per_feature=True)
    assert per.message == one.message and "L-BFGS-B" not in per.message
    np.testing.assert_allclose(per.bandwidth, one.bandwidth, rtol=1e-12)


def test_per_feature_search_where_the_best_grid_cv_is_zero():
    """Two clusters far apart, y constant within each: the boxcar kernel's leave-one-out fits
    (averages of equal weights) are exact at small bandwidths, so the best grid CV is exactly 0;
    the search still ends finite, quietly, at a CV of 0 (L-BFGS-B then runs on the criterion
    itself, not divided by 0)."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.uniform(0, 1, (15, 2)), rng.uniform(0, 1, (15, 2)) + np.array([20.0, 30.0])])
    y = np.repeat([1.0, 3.0], 15)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res, _ = _quiet_select(X, y, kernel="boxcar", per_feature=True)
    grid = res.search["scores"][res.search["stages"] == "grid"]
    assert grid.min() == 0.0 and res.score == 0.0 and np.isfinite(res.bandwidth).all()
    inside = (np.abs(X[:, None, :] - X[None, :, :]) <= res.bandwidth).all(axis=2)
    np.fill_diagonal(inside, False)
    assert all((y[row] == y[i]).all() and row.any() for i, row in enumerate(inside))


def test_search_refuses_data_whose_aicc_is_infinite_on_the_whole_grid():
    """Three points: tr(H) + 2 >= n at every bandwidth, so AICc is past its pole everywhere; the
    refusal names the method and says why."""
    from nadaraya.bandwidth import select_bandwidth

    with pytest.raises(ValueError) as err:
        select_bandwidth(np.array([0.0, 1.0, 2.5]), np.array([0.0, 1.0, 0.3]), method="aicc")
    assert str(err.value) == "aicc is infinite at every bandwidth on the grid; the data are degenerate"


def test_scalar_search_bounds_are_the_grids_ends_and_the_smoothed_out_pass_is_a_refinement():
    """An interior minimum: the bounds are the grid's smallest and largest bandwidths. At the top
    of the grid the extra pass at 10**4 ranges is recorded as a refinement step, and becomes the
    upper bound."""
    rng = np.random.default_rng(2)
    x = np.sort(rng.uniform(0, 5, 40))
    res, _ = _quiet_select(x, np.sin(x) + rng.normal(0, 0.2, 40))
    ts, scores = _grid_of(res)
    assert 0 < int(np.argmin(scores)) < ts.size - 1
    np.testing.assert_array_equal(res.bounds, [[ts[-1], ts[0]]])
    x = np.sort(rng.uniform(0, 5, 40))
    res, _ = _quiet_select(x, rng.normal(size=40))
    ts, scores = _grid_of(res)
    assert int(np.argmin(scores)) == 0
    last = len(res.search["stages"]) - 1
    assert res.search["stages"][last] == "refine" and res.search["bandwidths"][last, 0] == res.bounds[0, 1]


def test_per_feature_search_with_both_features_on_their_floor_warns_once_with_both_notes():
    """Two features left on their lower bounds: one warning, the two notes joined by "; "."""
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (30, 2))
    res, caught = _quiet_select(X, np.sin(6 * X[:, 0]) + np.sin(6 * X[:, 1]), kernel="epanechnikov",
                                per_feature=True)
    assert np.allclose(res.bandwidth, res.bounds[:, 0], rtol=1e-6, atol=0.0)  # the case
    notes = [f"cv: the selected bandwidth of feature {j}, {res.bandwidth[j]:.6g}, is on the lower bound "
             f"{res.bounds[j, 0]:.6g} of the search{_SMALLER_NOTE}" for j in range(2)]
    assert caught == ["; ".join(notes)]


@pytest.mark.parametrize(("method", "degree", "var_types"),
                         [("cv", 0, None), ("aicc", 0, None), ("aicc", 1, None), ("cv", 0, "cu")])
def test_select_bandwidth_uses_the_sample_weights_at_any_scale(method, degree, var_types):
    """Sample weights reach Scott's rule, the criterion (plain, local and mixed) and AICc's
    weight sum: the selection's score is score_bandwidth's with the same weights, and weights
    times 2^300 (scaled into range inside) score as score_bandwidth scores them."""
    from nadaraya.bandwidth import rule_of_thumb, score_bandwidth

    rng = np.random.default_rng(5)
    x = np.sort(rng.uniform(0, 5, 40))
    y = np.sin(x) + rng.normal(0, 0.2, 40)
    sw = rng.uniform(0.1, 3.0, 40)
    X = x if var_types is None else np.column_stack([x, rng.integers(0, 3, 40)])
    if var_types is not None:
        y = y + X[:, 1]
    kw = dict(method=method, degree=degree, var_types=var_types)
    res, _ = _quiet_select(X, y, sample_weight=sw, **kw)
    assert res.score == pytest.approx(score_bandwidth(X, y, res.bandwidth, sample_weight=sw, **kw), rel=1e-9)
    assert res.score != pytest.approx(score_bandwidth(X, y, res.bandwidth, **kw), rel=1e-6)
    if var_types is None:
        np.testing.assert_allclose(res.rule_of_thumb, rule_of_thumb(x, sample_weight=sw), rtol=1e-12)
    big, _ = _quiet_select(X, y, sample_weight=sw * 2.0**300, **kw)
    want = score_bandwidth(X, y, big.bandwidth, sample_weight=sw * 2.0**300, **kw)
    assert big.score == pytest.approx(want, rel=1e-9)


def test_mixed_search_reports_its_progress():
    """With categorical features the search (select_mixed) reports each pass to progress= too."""
    rng = np.random.default_rng(0)
    X = np.column_stack([np.sort(rng.uniform(0, 5, 30)), rng.integers(0, 3, 30)])
    y = np.sin(X[:, 0]) + X[:, 1] + rng.normal(0, 0.3, 30)
    calls = []
    res, _ = _quiet_select(X, y, var_types="cu", progress=lambda *a: calls.append(a))
    assert len(calls) == len(res.search["stages"]) > 0


def test_select_bandwidth_passes_tol_to_every_criterion(monkeypatch):
    """`tol` reaches the plain and local CV and AICc passes: the series runs, with the tolerance
    asked for (dropping it would run the exact sums: the same answer, slower)."""
    from nadaraya.backends import taylor

    rng = np.random.default_rng(40)
    x = rng.uniform(0, 5, 4000)
    y = np.sin(2 * x) + rng.normal(0, 0.3, x.size)
    calls = []
    real = taylor.partials

    def counted(*args, **kwargs):
        calls.append(kwargs.get("tol"))
        return real(*args, **kwargs)

    monkeypatch.setattr(taylor, "partials", counted)
    for kw in ({}, {"degree": 1}, {"method": "aicc"}, {"method": "aicc", "degree": 1}):
        calls.clear()
        nadaraya.select_bandwidth(x, y, tol=1e-6, **kw)
        assert calls and set(calls) == {1e-6}, kw
