"""ConditionalDensity.cdf / quantile on the engine's sums: against plainly written sums, on every
exact backend, within tol on the fast ones."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import ConditionalDensity, backends, kernels
from nadaraya.density._cdf import kernel_cdf
from nadaraya.density._series import Series

KERNELS = ["gaussian", "epanechnikov", "boxcar", "triangular", "biweight", "triweight", "tricube", "cosine",
           "parzen", "laplacian", "logistic"]


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    return x, np.sin(2 * np.pi * x) + (0.1 + 0.6 * x) * rng.standard_normal(n)


def _plain_cdf(name: str, x, y, w, hx, hy, qx, qy) -> np.ndarray:
    """F(qy | qx) = sum_i w_i K((qx - x_i)/hx) G((qy - y_i)/hy) / sum_i w_i K((qx - x_i)/hx), written out."""
    k = kernels.get(name)
    kx = w[None, :] * k.profile((qx[:, None] - x[None, :]) / hx)
    g = kernel_cdf(name, (qy[:, None] - y[None, :]) / hy)
    return (kx * g).sum(axis=1) / kx.sum(axis=1)


@pytest.mark.parametrize("name", KERNELS)
def test_series_is_the_cdf_on_its_cell(name: str) -> None:
    sr = Series.of(name)
    rng = np.random.default_rng(1)
    u = rng.uniform(-3, 3, 4000)
    if sr.breaks.size:  # the series holds away from the breakpoints (those keys are summed exactly)
        u = u[np.min(np.abs(u[:, None] - sr.breaks[None, :]), axis=1) > sr.rho]
    d = rng.uniform(-1, 1, u.size)
    series = (sr.coefficients(u) * d[:, None] ** np.arange(sr.terms)).sum(axis=1)
    assert np.max(np.abs(series - kernel_cdf(name, u + sr.rho * d))) <= 2e-15


@pytest.mark.parametrize("name", KERNELS)
def test_cdf_is_the_plain_sum_and_quantile_inverts_it(name: str) -> None:
    x, y = _data(150, 2)
    w = np.random.default_rng(3).uniform(0.2, 2.0, x.size)
    cd = ConditionalDensity(kernel=name, bandwidth=[0.2, 0.3]).fit(x, y, sample_weight=w)
    rng = np.random.default_rng(4)
    qx, qy = rng.uniform(0, 1, 60), np.r_[rng.uniform(-2.5, 2.5, 57), -40.0, 40.0, y[0]]
    want = _plain_cdf(name, x, y, w, 0.2, 0.3, qx, qy)
    assert np.max(np.abs(cd.cdf(qx, qy) - want)) <= 1e-12
    alpha = np.array([0.02, 0.5, 0.9])
    q = cd.quantile(qx[:20], alpha)
    step = 1e-10 * np.maximum(np.abs(q), np.std(y))
    for k, lev in enumerate(alpha):
        assert np.all(cd.cdf(qx[:20], q[:, k]) >= lev)
        assert np.all(cd.cdf(qx[:20], q[:, k] - 2 * step[:, k]) < lev)


def test_mixed_x_against_the_dense_reference() -> None:
    from nadaraya.density._conditional import _dense_cdf, _dense_quantile

    x, y = _data(120, 5)
    cat = np.random.default_rng(6).integers(0, 3, x.size).astype(float)
    X = np.column_stack([x, cat])
    cd = ConditionalDensity(kernel="epanechnikov", bandwidth=[0.3, 0.4, 0.3], var_types="cu").fit(X, y)
    rng = np.random.default_rng(7)
    qX = np.column_stack([rng.uniform(0, 1, 40), rng.integers(0, 3, 40)])
    qy = rng.uniform(-2, 2, 40)
    np.testing.assert_allclose(cd.cdf(qX, qy), _dense_cdf(cd.sample_, qX, qy[:, None]), rtol=0, atol=1e-12)
    alpha = np.array([0.1, 0.5])
    got, want = cd.quantile(qX, alpha), _dense_quantile(cd.sample_, qX, alpha)
    assert np.max(np.abs(got - want)) <= 2e-10 * max(1.0, float(np.std(y)))


@pytest.mark.parametrize("name", ["gaussian", "epanechnikov", "laplacian"])
def test_every_exact_backend_gives_the_same_cdf(name: str) -> None:
    x, y = _data(100, 8)
    rng = np.random.default_rng(9)
    qx, qy = rng.uniform(0, 1, 30), rng.uniform(-2, 2, 30)
    want = _plain_cdf(name, x, y, np.ones(x.size), 0.15, 0.25, qx, qy)
    tried = 0
    for be in ("reference", "fused", "windowed", "truncated", "laplace"):
        if backends.why_not(be, kernels.get(name), d=1) is not None:
            continue
        cd = ConditionalDensity(kernel=name, bandwidth=[0.15, 0.25], backend=be).fit(x, y)
        assert np.max(np.abs(cd.cdf(qx, qy) - want)) <= 1e-12, be
        tried += 1
    assert tried >= 2


def test_tol_bounds_the_cdf_on_every_query() -> None:
    x, y = _data(3000, 10)
    rng = np.random.default_rng(11)
    qx, qy = rng.uniform(-0.2, 1.2, 400), rng.uniform(-2.5, 2.5, 400)
    exact = ConditionalDensity(bandwidth=[0.02, 0.1]).fit(x, y)
    want = exact.cdf(qx, qy)
    for tol in (1e-4, 1e-8):
        fast = ConditionalDensity(bandwidth=[0.02, 0.1], tol=tol, backend="taylor").fit(x, y)
        assert np.max(np.abs(fast.cdf(qx, qy) - want)) <= tol
        q = fast.quantile(qx[:50], 0.3)
        assert np.max(np.abs(exact.cdf(qx[:50], q) - 0.3)) <= 2 * tol
