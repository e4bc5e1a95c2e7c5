"""The windowed backend's moment sums of local polynomial fits against the reference backend.

Each moment sum ``S = sum_i w_i u_i^(x)j [(x) v_i]`` is compared entry by entry against
``reference.partials(..., moments=r)`` with the tolerance ``rtol * N``, where ``N = sum_i |w_i|
|u_i|^(x)j [(x) |v_i|]`` is the natural size of that entry, written plainly here: float64
rounding of a sum of terms of that size is a few ulps of ``N``, never of ``S`` (an odd moment
may cancel to nearly zero). rtol is 1e-12 in float64 (the sums are exact pair by pair, so only
the order of summation differs); float32 is held to 2e-5 of ``N`` against the float32 reference
(which sums in float32, about 1e-6 here).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nadaraya import backends
from nadaraya.backends import reference, windowed
from nadaraya.kernels import REGISTRY, get

COMPACT = [name for name, k in REGISTRY.items() if k.compact]


def _natural(q, k, v, kernel, h, sw=None, exclude=None, degree=1):
    """``sum |w| |u|^(x)j`` and ``sum |w| |u|^(x)j (x) |v|`` per query, dense and plain."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    m, d = q.shape
    inv = 1.0 / np.asarray(h, dtype=np.float64)
    w = np.ones((m, k.shape[0]))
    for j in range(d):
        w *= kernel.profile((q[:, None, j] - k[None, :, j]) * inv[j])
    if sw is not None:
        w *= sw[None, :]
    if exclude is not None:
        rows = np.nonzero(exclude >= 0)[0]
        w[rows, exclude[rows]] = 0.0
    u = np.abs(k[None, :, :] - q[:, None, :])
    term, sums, with_values = np.abs(w), [], []
    for j in range(1, 2 * degree + 1):
        term = term[..., None] * u.reshape(u.shape[:2] + (1,) * (j - 1) + (d,))
        sums.append(term.sum(axis=1))
        if j <= degree:
            with_values.append(np.einsum("qk...,kp->q...p", term, np.abs(v)))
    return np.abs(w).sum(axis=1), np.abs(w) @ np.abs(v), [*sums, *with_values]


def _compare(q, k, v, kernel, h, degree, sw=None, exclude=None, rtol=1e-12):
    h = np.asarray(h, dtype=q.dtype if q.dtype == np.float32 else np.float64)
    kw = dict(kernel=get(kernel), bandwidth=np.asarray(h, dtype=np.float64), sample_weight=sw,
              exclude=exclude, moments=degree)
    ref = reference.partials(q, k, v, **kw)
    got = windowed.partials(q, k, v, **kw)
    nw, nv, nat = _natural(q, k, v, get(kernel), h, sw, exclude, degree)
    d, p = q.shape[1], v.shape[1]
    shapes = reference.moment_shapes(degree, d, p)
    assert [s.shape for s in got.moments] == [(q.shape[0], *s) for s in shapes]
    assert all(s.dtype == q.dtype for s in (got.shift, got.weight, got.value, *got.moments))
    np.testing.assert_array_equal(got.shift, 0.0)
    tiny = 1e-300
    assert np.all(np.abs(got.weight - ref.weight) <= rtol * nw + tiny)
    assert np.all(np.abs(got.value - ref.value) <= rtol * nv + tiny)
    for j, (a, b, n) in enumerate(zip(got.moments, ref.moments, nat)):
        bad = np.abs(a.astype(float) - b.astype(float)) > rtol * n + tiny
        assert not bad.any(), f"moment {j} (shape {shapes[j]}): {np.argwhere(bad)[:3].tolist()}"
    return got


def _data(rng, n, m, d, p, lo=0.0, hi=5.0):
    keys = rng.uniform(lo, hi, (n, d))
    values = np.sin(keys.sum(axis=1))[:, None] + rng.normal(0, 0.3, (n, p)) + 2.0
    queries = rng.uniform(lo - 0.3, hi + 0.3, (m, d))
    return queries, keys, values


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("degree", [1, 2])
def test_one_d_every_kernel(kernel, degree):
    rng = np.random.default_rng(degree)
    n = 300
    q, k, v = _data(rng, n, 97, 1, 3)
    sw = rng.uniform(0.2, 3.0, n)
    sw[::7] = 0.0
    _compare(q, k, v, kernel, [0.4], degree, sw=sw)
    # leave-one-out over unsorted keys (the backend sorts them and maps the left-out index)
    _compare(k, k, v[:, :1], kernel, [0.4], degree, sw=sw, exclude=np.arange(n))


@pytest.mark.parametrize("kernel", ["epanechnikov", "boxcar", "tricube", "parzen"])
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("degree", [1, 2])
def test_several_features(kernel, d, degree):
    rng = np.random.default_rng(10 * d + degree)
    n = 250
    q, k, v = _data(rng, n, 60, d, 3)
    h = np.linspace(0.8, 1.4, d)
    sw = rng.uniform(0.0, 2.0, n)
    sw[::5] = 0.0
    _compare(q, k, v, kernel, h, degree, sw=sw)
    exclude = rng.integers(-1, n, 60)
    _compare(q, k, v[:, :1], kernel, h, degree, exclude=exclude)


def test_five_features_degree_one():
    rng = np.random.default_rng(5)
    q, k, v = _data(rng, 200, 30, 5, 2, hi=2.0)
    _compare(q, k, v, "biweight", np.full(5, 1.2), 1, exclude=np.arange(30))


@pytest.mark.parametrize("n, m", [(1, 1), (1, 3), (2, 1), (3, 2), (4, 4097)])
@pytest.mark.parametrize("d", [1, 2])
def test_awkward_sizes(n, m, d):
    rng = np.random.default_rng(n + m)
    q, k, v = _data(rng, n, m, d, 1, hi=1.0)
    _compare(q, k, v, "triangular", np.full(d, 0.7), 1)
    _compare(q, k, v, "epanechnikov", np.full(d, 0.7), 2, sw=rng.uniform(0, 1, n))


def test_many_keys_and_queries_one_d():
    rng = np.random.default_rng(4097)
    q, k, v = _data(rng, 4097, 4097, 1, 1)
    _compare(q, k, v, "biweight", [0.02], 1, exclude=rng.integers(-1, 4097, 4097))


@pytest.mark.parametrize("kernel", ["epanechnikov", "triangular", "cosine", "boxcar"])
def test_keys_far_from_the_origin_small_bandwidth(kernel):
    """Keys near 1e6, h = 1e-3: differences are exact per pair, so nothing cancels."""
    rng = np.random.default_rng(6)
    k = 1e6 + np.sort(rng.uniform(0.0, 0.05, (400, 1)), axis=0)
    q = 1e6 + rng.uniform(0.0, 0.05, (80, 1))
    v = rng.normal(size=(400, 2))
    got = _compare(q, k, v, kernel, [1e-3], 2, sw=rng.uniform(0.5, 1.5, 400))
    # the first moment is of the size of h, not of |k| = 1e6
    assert np.abs(got.moments[0]).max() <= 1e-3 * got.weight.max()


@pytest.mark.parametrize("kernel", ["biweight", "parzen"])
def test_keys_far_from_the_origin_two_features(kernel):
    rng = np.random.default_rng(7)
    origin = np.array([1e6, -3e5])
    k = origin + rng.uniform(0.0, 0.02, (500, 2))
    q = origin + rng.uniform(0.0, 0.02, (60, 2))
    v = rng.normal(size=(500, 1))
    _compare(q, k, v, kernel, [1e-3, 2e-3], 2, exclude=rng.integers(-1, 500, 60))


def test_empty_windows_give_zero_weight_and_moments():
    rng = np.random.default_rng(8)
    k = rng.uniform(0, 1, (50, 2))
    v = rng.normal(size=(50, 1))
    q = np.array([[5.0, 5.0], [0.5, 0.5], [-3.0, 0.5]])
    sw = np.ones(50)
    got = windowed.partials(q, k, v, kernel=get("biweight"), bandwidth=np.full(2, 0.3),
                            sample_weight=sw, moments=2)
    assert got.weight[0] == 0.0 and got.weight[2] == 0.0 and got.weight[1] > 0
    for s in (got.value, *got.moments):
        assert not s[[0, 2]].any()
    # a window whose keys all have sample weight zero (1-D)
    k1 = np.array([[0.0], [0.1], [3.0]])
    got = windowed.partials(np.array([[0.05]]), k1, np.ones((3, 1)), kernel=get("epanechnikov"),
                            bandwidth=np.array([0.5]), sample_weight=np.array([0.0, 0.0, 1.0]), moments=1)
    assert got.weight[0] == 0.0 and all(not s.any() for s in got.moments)
    # leave-one-out of the only key in the window
    got = windowed.partials(np.array([[3.0]]), k1, np.ones((3, 1)), kernel=get("boxcar"),
                            bandwidth=np.array([0.5]), exclude=np.array([2]), moments=1)
    assert got.weight[0] == 0.0 and all(not s.any() for s in got.moments)


@pytest.mark.parametrize("kernel", ["epanechnikov", "boxcar", "cosine"])
@pytest.mark.parametrize("d", [1, 2])
def test_float32(kernel, d):
    rng = np.random.default_rng(32 + d)
    q, k, v = (a.astype(np.float32) for a in _data(rng, 300, 80, d, 2))
    _compare(q, k, v, kernel, np.full(d, 0.6), 1, rtol=2e-5)
    _compare(k, k, v, kernel, np.full(d, 0.6), 2, exclude=np.arange(300), rtol=2e-5)


@pytest.mark.parametrize("d", [1, 3])
def test_degree_zero_unchanged_and_consistent(d):
    """moments=0 is the plain path, bit for bit; with moments the weight and values agree."""
    rng = np.random.default_rng(9)
    q, k, v = _data(rng, 500, 120, d, 2)
    kw = dict(kernel=get("epanechnikov"), bandwidth=np.full(d, 0.5), exclude=rng.integers(-1, 500, 120))
    plain = windowed.partials(q, k, v, **kw)
    zero = windowed.partials(q, k, v, moments=0, **kw)
    assert zero.moments == ()
    np.testing.assert_array_equal(zero.weight, plain.weight)
    np.testing.assert_array_equal(zero.value, plain.value)
    one = windowed.partials(q, k, v, moments=1, **kw)
    np.testing.assert_allclose(one.weight, plain.weight, rtol=1e-12, atol=1e-12 * plain.weight.max())
    np.testing.assert_allclose(one.value, plain.value, rtol=1e-12, atol=1e-12 * np.abs(plain.value).max())


@pytest.mark.parametrize("bad", [-1, 1.0, True, "1", None])
def test_bad_moments(bad):
    x = np.zeros((2, 1))
    with pytest.raises(ValueError, match="moments must be a non-negative int") as info:
        backends.compute("windowed", x, x, x, kernel=get("boxcar"), bandwidth=np.ones(1), moments=bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("d", [1, 2])
def test_a_kernel_outside_the_registry(d):
    """A compact kernel the compiled 1-D loop does not know goes through the NumPy pair path."""
    custom = dataclasses.replace(get("tricube"), name="my_tricube", aliases=())
    rng = np.random.default_rng(11)
    q, k, v = _data(rng, 300, 90, d, 2)
    sw = rng.uniform(0.0, 2.0, 300)
    sw[::4] = 0.0
    _compare(q, k, v, custom, np.full(d, 0.7), 2, sw=sw, exclude=rng.integers(-1, 300, 90))


@pytest.mark.parametrize("kernel", ["boxcar", "epanechnikov", "biweight"])
@pytest.mark.parametrize("origin", [0.0, 1e6])
def test_prefix_moments_serve_large_windows(kernel, origin):
    """1-D sweep kernels read degree-1 moments from compensated prefix moments (no query left to
    the pair sums here), still within 1e-12 of each entry's natural size, with leave-one-out
    and zero sample weights."""
    from nadaraya.backends._windowed_msweep import prefix_moments

    rng = np.random.default_rng(12)
    n, m, h = 6000, 200, 0.02  # about 240 keys a window
    k = origin + np.sort(rng.uniform(0.0, 1.0, (n, 1)), axis=0)
    q = k[rng.integers(0, n, m)]
    v = rng.normal(size=(n, 2)) + 3.0 * rng.integers(0, 2, (n, 1))
    sw = rng.uniform(0.0, 2.0, n)
    sw[::3] = 0.0
    exclude = rng.integers(-1, n, m)
    _, flag = prefix_moments(np.ascontiguousarray(q[:, 0]), np.ascontiguousarray(k[:, 0]), 1.0 / h, v, sw,
                             exclude, get(kernel), h, 1)
    assert not flag.any()
    _compare(q, k, v, kernel, [h], 1, sw=sw, exclude=exclude)


def test_prefix_moments_leave_small_moments_to_the_pairs():
    """Keys bunched within 1e-6 h of a query, behind a crowd of keys in the cell before: the
    moments are tiny against the prefix they would be read from, so the query is summed pair
    by pair (the expansion would lose their digits) and stays within 1e-12 of natural size."""
    from nadaraya.backends._windowed_msweep import prefix_moments

    rng = np.random.default_rng(13)
    h = 1.0
    crowd = rng.uniform(2.0, 2.69, 3000)  # the cell before the query's, outside its window
    bunch = 3.7 + rng.uniform(-1e-6, 1e-6, 40)
    k = np.sort(np.concatenate([crowd, bunch, [10.0]]))[:, None]
    q = np.array([[3.7], [2.5]])
    v = rng.normal(size=(k.shape[0], 1))
    _, flag = prefix_moments(np.ascontiguousarray(q[:, 0]), np.ascontiguousarray(k[:, 0]), 1.0 / h, v,
                             np.empty(0), np.empty(0, dtype=np.int64), get("epanechnikov"), h, 1)
    assert flag.tolist() == [True, False]
    _compare(q, k, v, "epanechnikov", [h], 1)
