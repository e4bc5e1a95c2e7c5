"""Bandwidths of a conditional density: the normal reference rule, and the leave-one-out
likelihood (``cv_ml``) and least-squares (``cv_ls``) criteria as statsmodels'
``KDEMultivariateConditional`` and R np's ``npcdensbw`` define them, minimised over all
bandwidths (x's then y's).

``cv_ml`` maximises ``sum_i s_i log f_{-i}(Y_i | X_i)``, each term floored at
``log(DBL_MIN)`` as np does (a compact kernel may leave a point no neighbour), from the
engine's leave-one-out partial sums. ``cv_ls`` minimises

    CV = 1/n sum_l [ sum_{i,j != l} a_li a_lj K2(Y_i, Y_j) - 2 sum_{i != l} a_li K_y(Y_i, Y_l) ]

with ``a_l`` the x-weights of point ``l`` normalised over the other points, ``K_y`` the y
kernel (constants and ``1/h`` kept) and ``K2`` its convolution (the integral over y of the
product of two kernels): dense, O(n^2) memory and O(n^3) time, for n up to a few thousand.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from numpy.typing import NDArray
from scipy import optimize

from nadaraya.density._cdf import category_term
from nadaraya.density._cond_sums import Sample, log_sums, normalised, x_log_weights, y_log_kernel
from nadaraya.density._cv import CVProblem, resolve_backend
from nadaraya.kernels import Kernel
from nadaraya.local.mixed import lambda_bounds

__all__ = ["LOG_DBL_MIN", "convolution", "cv_ls_score", "cv_ml_score", "normal_reference", "select"]

#: np's floor for a leave-one-out log density
LOG_DBL_MIN = math.log(sys.float_info.min)

_GL_X, _GL_W = np.polynomial.legendre.leggauss(24)


def _logistic_conv(t: NDArray[np.float64]) -> NDArray[np.float64]:
    a = np.abs(t)
    small = a < 0.5
    k = np.arange(3, 40)
    fact = np.array([math.factorial(int(j)) for j in k], dtype=np.float64)
    # t(e^t + 1) - 2(e^t - 1) over t^3, and (e^t - 1) / t: both series, finite at t = 0
    series = ((a[small, None] ** (k - 3)) * ((k - 2) / fact)).sum(axis=1)
    ratio = ((a[small, None] ** (k - 3)) * (k * (k - 1) / fact)).sum(axis=1)  # 1 / (k - 2)!
    out = np.empty_like(a)
    with np.errstate(over="ignore", invalid="ignore"):
        big = a[~small]
        e = np.exp(-big)  # in e^-t: e^-t ((t - 2) + (t + 2) e^-t) / (1 - e^-t)^3
        out[~small] = e * ((big - 2.0) + (big + 2.0) * e) / (-np.expm1(-big)) ** 3
    es = np.exp(a[small])
    out[small] = es * series / ratio**3
    return out


def convolution(kernel: Kernel, t: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(K * K)(t)``, the integral of ``K(s) K(s - t)`` over s: closed form for the Gaussian,
    Laplacian and logistic kernels, 24-point Gauss-Legendre on each smooth piece (exact for the
    polynomial kernels) for the compact ones.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> float(convolution(get("boxcar"), np.array([0.5]))[0])
    0.375
    """
    t = np.abs(np.asarray(t, dtype=np.float64))
    if kernel.name == "gaussian":
        return np.exp(-0.25 * t * t) / math.sqrt(4.0 * math.pi)  # type: ignore[no-any-return]
    if kernel.name == "laplacian":
        return 0.25 * (1.0 + t) * np.exp(-t)  # type: ignore[no-any-return]
    if kernel.name == "logistic":
        return _logistic_conv(t)
    if not kernel.compact:
        raise ValueError(f"cv_ls has no convolution for kernel={kernel.name!r}")
    out = np.zeros(t.shape)
    flat = t.reshape(-1)
    res = out.reshape(-1)
    for c0 in range(0, flat.size, 20000):
        tt = flat[c0 : c0 + 20000, None]
        lo, hi = tt - 1.0, np.ones_like(tt)  # the overlap [t - 1, 1] of the two supports (t >= 0)
        cuts = np.hstack(
            [
                lo,
                np.clip(
                    np.hstack(
                        [
                            np.zeros_like(tt),
                            tt,
                            tt - 0.5,
                            tt + 0.5,
                            np.full_like(tt, -0.5),
                            np.full_like(tt, 0.5),
                        ]
                    ),
                    lo,
                    hi,
                ),
                hi,
            ]
        )
        cuts.sort(axis=1)
        a, b = cuts[:, :-1, None], cuts[:, 1:, None]
        s = 0.5 * (a + b) + 0.5 * (b - a) * _GL_X
        vals = kernel.profile(s) * kernel.profile(s - tt[:, :, None])
        res[c0 : c0 + 20000] = (0.5 * (b - a)[..., 0] * (vals @ _GL_W)).sum(axis=1) * (
            flat[c0 : c0 + 20000] < 2
        )
    return out


def _category_conv(
    kind: str, ck: str, yi: NDArray[np.float64], lam: float, levels: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``sum over training categories c of L(Y_i, c) L(Y_j, c)`` (statsmodels' convolution)."""
    out = np.zeros((yi.size, yi.size))
    for level in levels:
        term = category_term(kind, ck, yi, float(level), lam, levels)
        out += term[:, None] * term[None, :]
    return out


def cv_ml_score(s: Sample) -> float:
    """``sum_i s_i max(log f_{-i}(Y_i | X_i), log DBL_MIN)`` (unit ``s_i`` without weights)."""
    joint, marg = log_sums(s, None, None, loo=True)
    with np.errstate(invalid="ignore"):
        terms = joint - marg
    terms = np.where(terms >= LOG_DBL_MIN, terms, LOG_DBL_MIN)  # NaN (no neighbour at all) too
    w = np.ones(terms.size) if s.sample_weight is None else s.sample_weight
    return float((w * terms).sum())


def cv_ls_score(s: Sample) -> float:
    """The conditional least-squares cross-validation criterion (see the module's text)."""
    n = s.x.shape[0]
    lw = x_log_weights(s, s.x)
    np.fill_diagonal(lw, -np.inf)
    a = np.nan_to_num(normalised(lw))
    k2 = np.ones((n, n))
    for j, t in enumerate(s.dep_types):
        h = float(s.hy[j])
        if t == "c":
            k2 *= convolution(s.kernel, (s.y[:, j, None] - s.y[None, :, j]) / h) / h
        else:
            k2 *= _category_conv(t, s.categorical_kernel, s.y[:, j], h, s.levels(j, True))
    ky = np.exp(y_log_kernel(s, s.y))
    terms = ((a @ k2) * a).sum(axis=1) - 2.0 * (a * ky).sum(axis=1)
    w = np.ones(n) if s.sample_weight is None else s.sample_weight / s.sample_weight.mean()
    return float((w * terms).mean())


def normal_reference(s: Sample) -> NDArray[np.float64]:
    """``1.06 sd n^(-1/(4 + d))`` per continuous column (d all columns; rescaled from the
    Gaussian to the kernel by the canonical bandwidths), a tenth of each categorical lambda's
    range."""
    data = np.hstack([s.x, s.y])
    types = s.var_types + s.dep_types
    n, d = data.shape
    out = np.empty(d)
    ratio = 1.0
    if s.kernel.name != "gaussian" and math.isfinite(s.kernel.roughness):
        from nadaraya.kernels import get

        ratio = s.kernel.canonical_bandwidth / get("gaussian").canonical_bandwidth
    for j, t in enumerate(types):
        if t == "c":
            sd = float(np.std(data[:, j]))
            out[j] = 1.06 * (sd if sd > 0 else 1.0) * n ** (-1.0 / (4 + d)) * ratio
        else:
            levels = np.unique(data[:, j]).size
            out[j] = 0.1 * lambda_bounds(t, levels, s.categorical_kernel)[1]
    return out


def _to_theta(s: Sample, h: NDArray[np.float64]) -> NDArray[np.float64]:
    theta = np.empty(h.size)
    for j, (t, top) in enumerate(_tops(s)):
        theta[j] = math.log(h[j]) if t == "c" else math.log(h[j] / (top - h[j])) if top > 0 else 0.0
    return theta


def _from_theta(s: Sample, theta: NDArray[np.float64]) -> NDArray[np.float64]:
    h = np.empty(theta.size)
    for j, (t, top) in enumerate(_tops(s)):
        z = float(np.clip(theta[j], -700.0, 700.0))
        h[j] = math.exp(z) if t == "c" else top / (1.0 + math.exp(-z))
    return h


def _tops(s: Sample) -> list[tuple[str, float]]:
    data = np.hstack([s.x, s.y])
    return [
        (t, 0.0 if t == "c" else lambda_bounds(t, np.unique(data[:, j]).size, s.categorical_kernel)[1])
        for j, t in enumerate(s.var_types + s.dep_types)
    ]


def select(s: Sample, method: str) -> NDArray[np.float64]:
    """The bandwidths (x's then y's) by ``"normal_reference"``, ``"cv_ml"`` or ``"cv_ls"``:
    Nelder-Mead over log bandwidths (logits of the lambdas) from the normal reference rule."""
    start = normal_reference(s)
    if method == "normal_reference":
        return start
    score = cv_ml_score if method == "cv_ml" else cv_ls_score
    sign = -1.0 if method == "cv_ml" else 1.0

    def objective(theta: NDArray[np.float64]) -> float:
        s.bandwidth = _from_theta(s, theta)
        if not np.all(s.bandwidth[[t == "c" for t, _ in _tops(s)]] > 0):
            return math.inf
        value = sign * score(s)
        return value if math.isfinite(value) else math.inf

    theta0 = _to_theta(s, start)
    saved = s.backend
    if method == "cv_ml":  # backend="auto" decided once for the search, on the joint columns
        problem = CVProblem(np.hstack([s.x, s.y]), s.kernel, s.var_types + s.dep_types, s.categorical_kernel,
                            s.sample_weight, s.backend)
        s.backend = resolve_backend(problem, start)
    try:
        res = optimize.minimize(
            objective, theta0, method="Nelder-Mead",
            options={"xatol": 1e-6, "fatol": 1e-10, "maxiter": 400 * theta0.size},
        )
        best = res.x if res.fun <= objective(theta0) else theta0
    finally:
        s.backend = saved
    return _from_theta(s, best)
