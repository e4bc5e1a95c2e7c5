"""cv_ls with every kernel in several and mixed columns: the integral of f^2 from the kernels'
self-convolutions, against quadrature of f^2 and a plain pairwise sum."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from nadaraya import KernelDensity
from nadaraya.density._convolution import convolution
from nadaraya.density._cv import CVProblem
from nadaraya.kernels import get

KERNELS = ["gaussian", "epanechnikov", "boxcar", "triangular", "biweight", "triweight", "tricube", "cosine",
           "parzen", "laplacian", "logistic"]
BREAKS = {"triangular": [0.0], "tricube": [0.0], "parzen": [-0.5, 0.0, 0.5], "laplacian": [0.0]}


def _nodes(x: np.ndarray, h: float, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [min - R h, max + R h], cut at every x_i + b h (b a
    breakpoint of the kernel) (exact for the polynomial kernels), and into steps of at most h
    for the others (f^2 beyond R h: below 1e-16 of the integral)."""
    k = get(name)
    compact = math.isfinite(k.support)
    reach = 1.0 if compact else {"gaussian": 9.0}.get(name, 22.0)
    br = [-1.0, 1.0, *BREAKS.get(name, [])] if compact else BREAKS.get(name, [])
    lo, hi = x.min() - reach * h, x.max() + reach * h
    steps = np.arange(lo, hi, h) if name in ("gaussian", "laplacian", "logistic", "cosine") else []
    cuts = np.unique(np.r_[[xi + b * h for xi in x for b in br], steps, lo, hi])
    cuts = cuts[(cuts >= lo) & (cuts <= hi)]
    g, gw = np.polynomial.legendre.leggauss(10)
    mid, half = 0.5 * (cuts[1:] + cuts[:-1]), 0.5 * np.diff(cuts)
    return (mid[:, None] + half[:, None] * g).ravel(), (half[:, None] * gw).ravel()


@pytest.mark.parametrize("name", KERNELS)
def test_integral_of_f_squared_in_2d(name: str) -> None:
    X = np.random.default_rng(1).normal(size=(6, 2))
    h = np.array([0.5, 0.8])
    problem = CVProblem(X, get(name), "cc")
    t1, w1 = _nodes(X[:, 0], h[0], name)
    t2, w2 = _nodes(X[:, 1], h[1], name)
    f = KernelDensity(kernel=name, bandwidth=h).fit(X).pdf
    grid = np.column_stack([np.repeat(t1, t2.size), np.tile(t2, t1.size)])
    want = float(np.repeat(w1, t2.size) * np.tile(w2, t1.size) @ f(grid) ** 2)
    assert problem.integral_sq(h) == pytest.approx(want, rel=1e-8)


def _conv_quad(name: str, t: float) -> float:
    k = get(name)
    lim = 1.0 if math.isfinite(k.support) else 50.0
    pts = [p for p in (-1.0, -0.5, 0.0, 0.5, 1.0, t - 1, t - 0.5, t, t + 0.5, t + 1) if -lim < p < lim]
    return integrate.quad(lambda s: float(k.profile(np.array([s]))[0] * k.profile(np.array([t - s]))[0]),
                          -lim, lim, points=pts, limit=400, epsabs=1e-15, epsrel=1e-13)[0]


@pytest.mark.parametrize("name", ["epanechnikov", "tricube", "parzen", "cosine", "laplacian", "logistic"])
def test_cv_ls_in_mixed_columns_is_the_plain_pairwise_sum(name: str) -> None:
    rng = np.random.default_rng(2)
    n = 7
    X = np.column_stack([rng.normal(size=n), rng.normal(size=n), rng.integers(0, 3, n)]).astype(float)
    w = rng.uniform(0.5, 2.0, n)
    h = np.array([0.7, 0.9, 0.3])
    k = get(name)
    lam, levels = h[2], np.unique(X[:, 2])

    def aa(a, b):  # Aitchison-Aitken P(a | b), 3 levels
        return np.where(a == b, 1 - lam, lam / 2)

    conv = np.ones((n, n))
    for c in range(2):
        for i in range(n):
            for j in range(n):
                conv[i, j] *= _conv_quad(name, (X[i, c] - X[j, c]) / h[c]) / h[c]
    conv *= sum(aa(lv, X[:, None, 2]) * aa(lv, X[None, :, 2]) for lv in levels)
    W = w.sum()
    integral = float(w @ conv @ w) / W**2
    K = np.ones((n, n))
    for c in range(2):
        K *= k.profile((X[:, None, c] - X[None, :, c]) / h[c]) / h[c]
    K *= aa(X[:, None, 2], X[None, :, 2])
    np.fill_diagonal(K, 0.0)
    loo = (K * w[None, :]).sum(axis=1) / (W - w)
    problem = CVProblem(X, k, "ccu", sample_weight=w)
    assert problem.integral_sq(h) == pytest.approx(integral, rel=1e-10)
    assert problem.cv_ls(h) == pytest.approx(integral - 2 * float((w * loo).sum() / W), rel=1e-10)
    assert float(convolution(name, np.array([0.0]))[0]) == pytest.approx(k.roughness, rel=1e-12)


def test_cv_ls_search_with_another_kernel_in_2d() -> None:
    X = np.random.default_rng(3).normal(size=(60, 2)) * [1.0, 2.0]
    model = KernelDensity(kernel="epanechnikov", bandwidth="cv_ls").fit(X)
    problem = CVProblem(X, get("epanechnikov"), "cc")
    best = problem.cv_ls(model.bandwidth_)
    for c in range(2):
        for factor in (0.9, 1.1):
            h = model.bandwidth_.copy()
            h[c] *= factor
            assert best <= problem.cv_ls(h) + 1e-12
