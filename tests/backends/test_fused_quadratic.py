"""The fused backend's generated degree-2 moment loop (1 to 3 features, every sum in registers).

Against sums written out plainly here (one NumPy product per moment entry over every pair) and
against a plainly written weighted least squares (one ``lstsq`` per query): sample weights,
leave-one-out, several value columns (the further columns' loop), float32.

Tolerances: the moment sums within 1e-12 of their natural size ``sum w |u|^j |v|`` (the same
exact differences, the sums in another order: a few times n eps); the local quadratic fit within
1e-9 of the plain weighted least squares (its conditioning, a few hundred here, times the sums'
1e-12); float32 inputs within 5e-6 (the float32 rounding of the result, 6e-8 of values up to
2, plus the moments' rounding to float32, 6e-8, times the conditioning), on every query.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("numba")

import nadaraya
from nadaraya.backends import _fused_moments, fused
from nadaraya.kernels import get

#: the kernels' profiles written out (their constant factors as the registry's: the sums carry them)
PROFILES = {
    "gaussian": lambda z: np.exp(-0.5 * z * z),
    "epanechnikov": lambda z: 0.75 * np.clip(1.0 - z * z, 0.0, None),
    "laplacian": lambda z: np.exp(-np.abs(z)),
}


def _data(seed, n, d, p=1):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (n, d))
    y = np.sin(4 * x[:, :1]) + x[:, -1:] ** 2 + rng.normal(0.0, 0.1, (n, p))
    sw = rng.uniform(0.2, 3.0, n)
    return x, y, sw


def _weights(q, x, kernel, h, sw):
    """(m, n) plain kernel weights, sample weights included."""
    z = (q[:, None, :] - x[None, :, :]) / h
    return np.prod(PROFILES[kernel](z), axis=2) * sw[None, :]


def _plain_wls(q, x, y, kernel, h, sw, exclude=None):
    """The local quadratic fit's intercept at each query, one lstsq each over every key."""
    d = x.shape[1]
    w = _weights(q, x, kernel, h, sw)
    if exclude is not None:
        w[np.arange(len(q)), exclude] = 0.0
    out = np.empty((len(q), y.shape[1]))
    pairs = [(a, b) for a in range(d) for b in range(a, d)]
    for i in range(len(q)):
        u = x - q[i]
        design = np.column_stack([np.ones(len(x)), u] + [u[:, a] * u[:, b] for a, b in pairs])
        root = np.sqrt(w[i])
        out[i] = np.linalg.lstsq(design * root[:, None], y * root[:, None], rcond=None)[0][0]
    return out


@pytest.mark.parametrize("d", [1, 2, 3])
def test_generated_key_names_the_quadratic_loop_up_to_three_features(d):
    assert _fused_moments.generated_key(2, d) > _fused_moments.MAX_GENERATED
    assert _fused_moments.generated_key(2, d + 3) == 0  # the walk past MAX_QUADRATIC
    assert _fused_moments.generated_key(1, d) == d


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "laplacian"])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_quadratic_sums_match_sums_written_out(kernel, d):
    """Every moment entry (orders 1-4, and 1-2 with each of 3 value columns), weights, a left-out
    key per query, two key blocks (KEY_BLOCK = 2048)."""
    n, m, p = 2100, 17, 3
    x, y, sw = _data(d, n, d, p)
    rng = np.random.default_rng(10 + d)
    q = rng.uniform(0.0, 1.0, (m, d))
    h = np.array([0.3, 0.45, 0.6][:d])
    ex = rng.integers(-1, n, m)
    got = fused.partials(q, x, y, kernel=get(kernel), bandwidth=h, sample_weight=sw, exclude=ex, moments=2)
    w = _weights(q, x, kernel, h, sw)
    rows = ex >= 0
    w[np.nonzero(rows)[0], ex[rows]] = 0.0
    # the fused shift is an upper bound: compare each sum over the weight sum
    scale = np.exp(got.shift)[:, None] if get(kernel).log_domain else np.ones((m, 1))
    np.testing.assert_allclose(got.weight * scale[:, 0], w.sum(axis=1), rtol=1e-12)
    u = x[None, :, :] - q[:, None, :]  # (m, n, d)
    size = {j: (w * np.abs(u).max(axis=2) ** j).sum(axis=1) for j in range(1, 5)}
    vmax = np.abs(y).max()
    for j in range(1, 5):
        mom = got.moments[j - 1] * scale.reshape((m,) + (1,) * j)
        for idx in itertools.product(range(d), repeat=j):
            want = (w * np.prod([u[:, :, a] for a in idx], axis=0)).sum(axis=1)
            assert np.all(np.abs(mom[(slice(None), *idx)] - want) <= 1e-12 * size[j] + 1e-300), (j, idx)
    for j in range(1, 3):
        mom = got.moments[4 + j - 1] * scale.reshape((m,) + (1,) * (j + 1))
        for idx in itertools.product(range(d), repeat=j):
            want = np.einsum("mn,mn,nc->mc", w, np.prod([u[:, :, a] for a in idx], axis=0), y)
            bound = 1e-12 * size[j][:, None] * vmax
            assert np.all(np.abs(mom[(slice(None), *idx)] - want) <= bound), (j, idx)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "laplacian"])
@pytest.mark.parametrize("d", [2, 3])
def test_local_quadratic_fit_matches_plain_weighted_least_squares(kernel, d):
    """``pool`` and ``loo_pool`` with ``backend="fused"``, ``degree=2``, sample weights, two
    outputs: within 1e-9 of one lstsq per query, on every query."""
    n = 500
    x, y, sw = _data(20 + d, n, d, 2)
    h = np.array([0.25, 0.35, 0.45][:d])
    q = x[:60] + 0.01
    got = nadaraya.pool(q, x, y, kernel=kernel, bandwidth=h, degree=2, sample_weight=sw, backend="fused")
    np.testing.assert_allclose(got, _plain_wls(q, x, y, kernel, h, sw), rtol=0, atol=1e-9)
    loo = nadaraya.loo_pool(x, y, kernel=kernel, bandwidth=h, degree=2, sample_weight=sw, backend="fused")
    want = _plain_wls(x[:60], x, y, kernel, h, sw, exclude=np.arange(60))
    np.testing.assert_allclose(loo[:60], want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("d", [2, 3])
def test_float32_local_quadratic_fit(d):
    """float32 keys, values and weights: a float32 result within 5e-6 of the float64 fit of the
    same (rounded) inputs, on every query."""
    n = 500
    x, y, sw = _data(30 + d, n, d)
    x32, y32, sw32 = x.astype(np.float32), y[:, 0].astype(np.float32), sw.astype(np.float32)
    h = np.array([0.25, 0.35, 0.45][:d], dtype=np.float32)
    got = nadaraya.pool(x32[:80], x32, y32, kernel="gaussian", bandwidth=h, degree=2, sample_weight=sw32,
                        backend="fused")
    assert got.dtype == np.float32
    want = _plain_wls(x32[:80].astype(np.float64), x32.astype(np.float64), y32.astype(np.float64)[:, None],
                      "gaussian", h.astype(np.float64), sw32.astype(np.float64))[:, 0]
    assert np.all(np.abs(got - want) <= 5e-6), float(np.max(np.abs(got - want)))


@pytest.mark.parametrize("d", [1, 2, 3])
def test_loop_parts_sum_each_entry_once_with_its_parent_and_few_live_sums(d):
    """Each unique entry in exactly one loop, its parent in the same loop (no product computed
    twice), at most MAX_LIVE sums a loop (those with the value column count)."""
    parts = _fused_moments.loop_parts(2, d)
    nodes = [seq for seq, _ in _fused_moments.layout(2, d)]
    assert sorted(s for part in parts for s in part) == sorted(nodes)
    for part in parts:
        assert all(len(s) == 1 or s[:-1] in part for s in part)
        assert len(part) + sum(len(s) <= 2 for s in part) <= _fused_moments.MAX_LIVE
    assert len(parts) == (2 if d == 3 else 1)


def test_quadratic_source_computes_each_product_once():
    """In 3 features: 34 products in the loops over the block with the first value column, and 9
    in the further columns' loop."""
    source = _fused_moments._quadratic_source(3)
    products = [line.split("=")[0].strip() for line in source.splitlines() if line.strip().startswith("t_")]
    assert len(products) == 34 + 9
    assert len(set(products)) == 34
