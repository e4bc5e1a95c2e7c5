"""Density bandwidths by cross-validation: the cv_ml and cv_ls objectives and their search.

Both objectives are sums of leave-one-out densities from pool's partials (:func:`log_kde`):

- ``cv_ml``: the leave-one-out log likelihood per unit weight,
  ``sum_i s_i log f_{-i}(x_i) / sum_i s_i`` (maximised);
- ``cv_ls``: ``integral f^2 - 2 sum_i s_i f_{-i}(x_i) / sum_i s_i`` (minimised), the integral
  in closed form for the Gaussian kernel (the convolved kernel's sums at the keys), and by
  Gauss-Legendre quadrature of ``f^2`` between the breakpoints of the kernel (exact for the
  polynomial kernels) in one continuous column for the others, and for the others in several
  or mixed columns as the pairs' products of the self-convolutions ``K * K``
  (:mod:`nadaraya.density._convolution`).

With unit weights these are statsmodels' ``KDEMultivariate.loo_likelihood`` (up to ``n log(n -
1)`` and the sign) and ``imse``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import optimize
from threadpoolctl import ThreadpoolController

from nadaraya import backends
from nadaraya._core import call as _call
from nadaraya._core.nearest import FAR_LOG_WEIGHT
from nadaraya.density._constants import log_density, log_kde, log_kernel_constant
from nadaraya.density._convolution import integral_sq
from nadaraya.kernels import Kernel
from nadaraya.local.mixed import lambda_bounds

__all__ = ["CVProblem", "select"]

#: below this many (point, point) pairs a search picks its backend from the sizes alone
SIZES_ONLY = 4_000_000

#: a search keeps each log bandwidth within this of its start (e^25 ~ 7e10: duplicated points
#: send the leave-one-out likelihood to infinity as h -> 0)
REACH = 25.0

#: Gauss-Legendre nodes per piece of the quadrature of ``f^2`` (exact to degree 19)
NODES = 10


@dataclass
class CVProblem:
    """The data of a bandwidth search: validated float64 columns, their types, the kernel."""

    X: NDArray[np.float64]
    kernel: Kernel
    var_types: str
    categorical_kernel: str = "classic"
    sample_weight: NDArray[np.float64] | None = None
    backend: str = "auto"

    def _kw(self) -> dict[str, Any]:
        return dict(kernel=self.kernel, var_types=self.var_types, categorical_kernel=self.categorical_kernel,
                    sample_weight=self.sample_weight, backend=self.backend)

    def weights(self) -> NDArray[np.float64]:
        return np.ones(self.X.shape[0]) if self.sample_weight is None else self.sample_weight

    def cv_ml(self, bandwidth: NDArray[np.float64]) -> float:
        """``sum_i s_i log f_{-i}(x_i) / sum_i s_i`` (``-inf`` where a point has no neighbour)."""
        w = self.weights()
        ll = log_kde(None, self.X, bandwidth=bandwidth, **self._kw())
        pos = w > 0
        return float((w[pos] * ll[pos]).sum() / w.sum())

    def cv_ls(self, bandwidth: NDArray[np.float64]) -> float:
        """``integral f^2 - 2 sum_i s_i f_{-i}(x_i) / sum_i s_i``."""
        w = self.weights()
        loo = np.exp(log_kde(None, self.X, bandwidth=bandwidth, **self._kw()))
        return self.integral_sq(bandwidth) - 2.0 * float((w * loo).sum() / w.sum())

    def integral_sq(self, bandwidth: NDArray[np.float64]) -> float:
        """``integral f(x)^2 dx`` (summed over the categorical levels)."""
        w = self.weights()
        if self.kernel.name == "gaussian":
            conv = np.exp(log_kde(self.X, self.X, bandwidth=bandwidth, convolved=True, **self._kw()))
            return float((w * conv).sum() / w.sum())
        if self.var_types != "c":  # a product kernel: the pairs' products of K * K (and M)
            return integral_sq(self.X, np.asarray(bandwidth, dtype=np.float64), self.kernel, self.var_types,
                               self.categorical_kernel, self.sample_weight)
        nodes, weights = _quadrature(self.X[:, 0], float(np.asarray(bandwidth).reshape(-1)[0]), self.kernel)
        f = np.exp(log_kde(nodes[:, None], self.X, bandwidth=bandwidth, **self._kw()))
        return float((weights * f * f).sum())


def _gaussian_sums(
    problem: CVProblem, h: NDArray[np.float64], convolved: bool
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gaussian kernel, continuous columns: ``log S_i`` with ``S_i = sum_j s_j K_h(x_i - x_j)``
    (the normalised kernel; leave-one-out, or ``convolved``: ``K * K`` with no key left out)
    and ``R_ik = sum_j s_j K_h u_ijk^2 / S_i`` (``u = (x_j - x_i) / h``): the derivative of
    ``log S_i`` in ``log h_k`` is ``R_ik - 1``. One pass of pool's partials with the moment
    sums of degree 1 (whose second moments are ``sum w (x_j - x_i)^2``)."""
    hh = h * math.sqrt(2.0) if convolved else h
    n, d = problem.X.shape
    call = _call.prepare(None, problem.X, np.ones(n), kernel=problem.kernel, bandwidth=hh,
                           sample_weight=problem.sample_weight)
    exclude = None if convolved else np.arange(n)
    parts, choice = _call.compute_partials(call, exclude=exclude, backend=problem.backend, moments=1)
    far = np.nonzero(~(parts.shift >= FAR_LOG_WEIGHT))[0]
    if far.size and choice.name != "reference":
        sub = _call.Call(call.queries[far], call.keys, call.values, False, call.kernel, call.bandwidth,
                           call.sample_weight)
        fix, _ = _call.compute_partials(sub, exclude=None if exclude is None else exclude[far],
                                          backend="reference", moments=1)
        parts.shift[far], parts.weight[far] = fix.shift, fix.weight
        parts.moments[1][far] = fix.moments[1]
    sw = call.sample_weight
    const = log_kernel_constant(problem.kernel, d) - float(np.log(hh).sum())
    factor = 1.0 if sw is None else float(sw.sum()) / problem.weights().sum()  # a power of two
    log_s = log_density(parts, const) - math.log(factor)
    with np.errstate(invalid="ignore", divide="ignore"):
        second = np.diagonal(parts.moments[1], axis1=1, axis2=2) / parts.weight[:, None]
    return log_s, second / hh**2


def _ml_gradient(problem: CVProblem, theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """``-cv_ml`` and its gradient in ``log h`` (Gaussian kernel, continuous columns)."""
    h = np.exp(theta)
    w = problem.weights()
    W = w.sum()
    log_s, r = _gaussian_sums(problem, h, False)
    pos = w > 0
    ll = log_s[pos] - np.log(W - w[pos])
    value = float((w[pos] * ll).sum() / W)
    grad = (w[pos, None] * (r[pos] - 1.0)).sum(axis=0) / W
    return -value, -grad


def _ls_gradient(problem: CVProblem, theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """``cv_ls`` and its gradient in ``log h`` (Gaussian kernel, continuous columns)."""
    h = np.exp(theta)
    w = problem.weights()
    W = w.sum()
    log_c, rc = _gaussian_sums(problem, h, True)
    log_s, r = _gaussian_sums(problem, h, False)
    sc = w * np.exp(log_c) / W**2
    with np.errstate(divide="ignore", invalid="ignore"):
        sl = np.where(w > 0, w * np.exp(log_s) / ((W - w) * W), 0.0)
    value = float(sc.sum() - 2.0 * sl.sum())
    grad = (sc[:, None] * (rc - 1.0)).sum(axis=0) - 2.0 * (sl[:, None] * np.nan_to_num(r - 1.0)).sum(axis=0)
    return value, grad


def _quadrature(
    x: NDArray[np.float64], h: float, kernel: Kernel
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gauss-Legendre nodes and weights on pieces between the kernel's breakpoints around
    the data (``x_i``, ``x_i +- h/2``, ``x_i +- h``), each at most ``h`` wide; tails of
    non-compact kernels to 40 bandwidths."""
    reach = 1.0 if kernel.compact else 40.0
    cuts = np.concatenate([x + o * h for o in (-1.0, -0.5, 0.0, 0.5, 1.0)])
    lo, hi = float(x.min() - reach * h), float(x.max() + reach * h)
    cuts = np.unique(np.concatenate([cuts, np.arange(lo, hi, h), [lo, hi]]))
    cuts = cuts[(cuts >= lo) & (cuts <= hi)]
    a, b = cuts[:-1], cuts[1:]
    t, g = np.polynomial.legendre.leggauss(NODES)
    mid, half = (a + b) / 2, (b - a) / 2
    return (mid[:, None] + half[:, None] * t).ravel(), (half[:, None] * g).ravel()


def _bounds(problem: CVProblem) -> list[tuple[float, float, bool]]:
    """The lambda range of each categorical column."""
    out = []
    for j, kind in enumerate(problem.var_types):
        if kind != "c":
            levels = np.unique(problem.X[:, j]).size
            out.append(lambda_bounds(kind, levels, problem.categorical_kernel))
    return out


_CONTROLLER: list[ThreadpoolController] = []


def _blas() -> ThreadpoolController:
    """One controller of the loaded thread pools per process (building one scans the loaded
    libraries: milliseconds, as much as a small search's pass)."""
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0]


def resolve_backend(problem: CVProblem, bandwidth: NDArray[np.float64], moments: int = 0) -> str:
    """``backend="auto"`` decided once for a search (at its start), not at every evaluation:
    the data-aware choice measures the data, which costs more than a small pass. ``moments``:
    the passes carry the moment sums of that degree (the Gaussian search's gradient)."""
    cont = np.array([c == "c" for c in problem.var_types])
    if problem.backend != "auto" or not cont.any() or not cont.all():
        return problem.backend
    X = problem.X[:, cont]
    h = np.asarray(bandwidth, dtype=np.float64)[cont]
    n, d = X.shape
    if n * n <= SIZES_ONLY:  # measuring the data would cost more than a pass
        return backends.choose(problem.kernel, n=n, m=n, d=d, moments=moments, loo=True).name
    choice = backends.choose_for_data(problem.kernel, X, X, h, moments=moments, loo=True, merged=True)
    return (choice or backends.choose(problem.kernel, n=n, m=n, d=d, moments=moments, loo=True)).name


def select(
    problem: CVProblem, method: str, start: NDArray[np.float64], per_feature: bool = True
) -> NDArray[np.float64]:
    """The bandwidth (one per column; lambdas for the categorical ones) that optimises
    ``method`` ("cv_ml" or "cv_ls"), from ``start``: a search over one common factor of the
    continuous bandwidths (a grid, then Brent's method), then, ``per_feature``, Nelder-Mead over
    ``log h`` and the lambdas (in the logit of their range)."""
    cont = np.array([c == "c" for c in problem.var_types])
    smooth_path = problem.kernel.name == "gaussian" and cont.all() and per_feature and start.size > 1
    plain = resolve_backend(problem, start)
    if smooth_path and resolve_backend(problem, start, 1) != plain:
        smooth_path = False  # the gradient's moment sums would lose the data-aware backend (truncated)
    problem = replace(problem, backend=resolve_backend(problem, start, 1) if smooth_path else plain)
    bounds = _bounds(problem)
    sign = -1.0 if method == "cv_ml" else 1.0
    score = problem.cv_ml if method == "cv_ml" else problem.cv_ls
    k, log_start = int(cont.sum()), np.log(start[cont])

    def unpack(theta: NDArray[np.float64]) -> NDArray[np.float64]:
        h = np.empty(start.size)
        h[cont] = np.exp(theta[: cont.sum()])
        for z, j, (lo, hi, _) in zip(theta[cont.sum():], np.nonzero(~cont)[0], bounds):
            h[j] = lo + (hi - lo) * 0.999999 / (1.0 + math.exp(-z))
        return h

    def objective(theta: NDArray[np.float64]) -> float:
        if not np.isfinite(theta).all() or (cont.any() and np.abs(theta[:k] - log_start).max() > REACH):
            return 1e300
        value = sign * score(unpack(theta))
        return value if math.isfinite(value) else 1e300

    lam0 = [math.log((s - lo + 1e-12) / max(hi - s, 1e-12)) for s, (lo, hi, _) in zip(start[~cont], bounds)]
    theta = np.concatenate([np.log(start[cont]), lam0])
    if cont.any() and not smooth_path:
        theta = _common_factor(objective, theta, int(cont.sum()))
    if smooth_path:
        fun = _ml_gradient if method == "cv_ml" else _ls_gradient

        def smooth(t: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
            value, grad = fun(problem, t)
            ok = math.isfinite(value) and np.isfinite(grad).all()
            return (value, grad) if ok else (1e300, np.zeros_like(t))

        with _blas().limit(limits=1, user_api="blas"):  # BLAS threads on a small vector cost more
            res = optimize.minimize(smooth, theta, jac=True, method="L-BFGS-B",
                                    bounds=[(t - REACH, t + REACH) for t in theta],
                                    options=dict(ftol=1e-13, gtol=1e-9, maxiter=200))
        if res.fun <= objective(theta):
            theta = res.x
    elif (per_feature and theta.size > 1) or not cont.any():
        simplex = np.vstack([theta, theta + 0.5 * np.eye(theta.size)])  # steps of e^0.5 in h, 0.5 in logit
        res = optimize.minimize(objective, theta, method="Nelder-Mead",
                                options=dict(xatol=1e-5, fatol=1e-13, maxfev=300 * theta.size,
                                             initial_simplex=simplex))
        if res.fun <= objective(theta):
            theta = res.x
    return unpack(theta)


def _common_factor(objective: Any, theta: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """The first ``k`` entries (log bandwidths) moved by one common log factor: the best of a
    grid from 1/16 to 4 times, refined by Brent's method in the grid's bracket."""
    grid = np.log(2.0) * np.arange(-4.0, 2.01, 0.5)

    def at(t: float) -> NDArray[np.float64]:
        out = theta.copy()
        out[:k] += t
        return out

    vals = np.array([objective(at(t)) for t in grid])
    i = int(np.argmin(vals))
    while (i == 0 and grid[0] > -REACH) or (i == grid.size - 1 and grid[-1] < REACH):  # past the edge
        step = -2.0 if i == 0 else 2.0
        t = grid[i] + step
        grid = np.insert(grid, 0, t) if i == 0 else np.append(grid, t)
        vals = np.insert(vals, 0, objective(at(t))) if i == 0 else np.append(vals, objective(at(t)))
        i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(lambda t: objective(at(t)), bounds=(lo, hi), method="bounded",
                                   options=dict(xatol=1e-6))
    best = float(res.x) if res.fun <= vals[i] else float(grid[i])
    return at(best)
