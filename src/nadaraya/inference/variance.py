"""Standard errors of local polynomial fits: the exact variance sum_i a_i(x)^2 sigma^2(x_i).

A local polynomial fit is linear in the values: ``f(x) = sum_i a_i(x) y_i`` with the effective
weights ``a_i(x) = e_0^T M^-1 b(z_i) w_i`` (``a_i = w_i / sum w`` for degree 0). Given the
design, its variance is ``sum_i a_i^2 sigma_i^2 = e_0^T M^-1 V M^-1 e_0`` with
``V = sum_i w_i^2 sigma_i^2 b(z_i) b(z_i)^T``: the moment sums of a second pass whose weights
are the squares of the first's (the kernel squared: for the Gaussian the same kernel at
``h / sqrt 2``, exactly, in the log domain; for the others the squared profile, on the
reference backend) with the sample weights ``s_i^2 sigma_i^2``. The two passes carry their own
shifts; the variance is assembled in logs, so nothing overflows where the weights are tiny.
The slopes' variances come from the same two matrices (``e_a`` instead of ``e_0``); for degree
0 with the Gaussian, the derivative of the ratio has effective weights
``c_i = w_i (u_i / h^2 - D / sum w) / sum w`` (``D = sum w u / h^2``), whose squares are again
moments of the second pass.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.typing import NDArray

from nadaraya.kernels import Kernel
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job
from nadaraya.local.solve import _systems, monomials, used_degree
from nadaraya.partials import Partials

__all__ = ["squared_kernel", "variances"]


def squared_kernel(kernel: Kernel) -> tuple[Kernel, float]:
    """A kernel whose weights are the squares of ``kernel``'s, and the bandwidth factor to use.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> k, f = squared_kernel(get("gaussian")); k.name, round(f, 6)
    ('gaussian', 0.707107)
    >>> k, f = squared_kernel(get("epanechnikov")); float(k.profile(np.array([0.5]))[0]), f
    (0.31640625, 1.0)
    """
    if kernel.name == "gaussian":  # exp(-u^2/2)^2 = exp(-(u sqrt 2)^2 / 2): the same kernel at h / sqrt 2
        return kernel, 1.0 / math.sqrt(2.0)
    profile, log_profile = kernel.profile, kernel.log_profile
    square = dataclasses.replace(
        kernel,
        name=f"{kernel.name} squared",
        profile=lambda u, xp=np: profile(u, xp) ** 2,
        log_profile=None if log_profile is None else (lambda u, xp=np: 2.0 * log_profile(u, xp)),
        polynomial=None,
        aliases=(),
    )
    return square, 1.0


def _second_pass(job: _job.Job, sigma2: NDArray[np.float64], backend: str, moments: int) -> Partials:
    """Partials of the squared weights with the sample weights ``s^2 sigma^2`` (one output column)."""
    call = job.call
    kernel, factor = squared_kernel(call.kernel)
    sw = np.ones(call.keys.shape[0]) if call.sample_weight is None else call.sample_weight.astype(np.float64)
    sw2 = sw**2 * sigma2
    top = float(sw2.max()) if sw2.size else 0.0
    scale = 1.0 if top == 0 or not np.isfinite(top) else 2.0 ** -np.frexp(top)[1]  # exact, in range
    sq_call = dataclasses.replace(
        call,
        kernel=kernel,
        bandwidth=call.bandwidth * factor,
        sample_weight=(sw2 * scale).astype(call.values.dtype),
        values=np.zeros((call.keys.shape[0], 1), dtype=call.values.dtype),
        value_exp=0,
    )
    sq = dataclasses.replace(job, call=sq_call, degree=moments)  # the job's device and tol
    engine = backend if kernel is call.kernel else "reference"
    parts = _fit.partials(sq, None, engine, log_factor_power=2.0)
    parts.shift = parts.shift - math.log(scale)
    return parts


def variances(
    job: _job.Job, parts: Partials, sigma2: NDArray[np.float64], backend: str = "auto", slopes: bool = False,
    used: NDArray[np.integer] | None = None,
) -> NDArray[np.float64]:
    """``Var f(x)`` per query and output column, (m, p); with ``slopes`` the variances of the
    slopes too, (m, 1 + d_continuous, p), the fit's first.

    ``parts`` are the first pass's partials (with the moments of the degree), ``sigma2`` the
    variance of each key's value, (n, p) (or (n,) for every output alike). ``used``, the
    degree each query's fit used (:attr:`nadaraya.local.solve.LocalFit.degree`), makes each variance
    that of the fit actually used: the leading block of the same sums where a query's system of
    the job's degree was singular (its slopes' are NaN where it used degree 0; all NaN where -1).
    Without it, the degree is decided from ``parts`` by the solve's rule
    (:func:`nadaraya.local.solve.used_degree`): the degree the fit from ``parts`` uses.
    """
    call = job.call
    m = call.queries.shape[0]
    sigma2 = np.asarray(sigma2, dtype=np.float64)
    if sigma2.ndim == 1:
        sigma2 = sigma2[:, None]
    p = sigma2.shape[1]
    dc = job.cont.size
    out = np.full((m, 1 + dc, p), np.nan)
    h = call.bandwidth.astype(np.float64)
    moments = job.degree
    if slopes and job.degree == 0:
        if call.kernel.name != "gaussian" or len(parts.moments) < 3:
            raise ValueError("the slopes' standard errors of a degree-0 fit need the Gaussian kernel "
                             "(and first moments in the partials); use degree=1 for the others")
        moments = 1
    for c in range(p):
        second = _second_pass(job, sigma2[:, c], backend, moments)
        out[:, :, c] = _assemble(job, parts, second, h, slopes, used)
    return out if slopes else out[:, 0, :]


def _assemble(
    job: _job.Job, first: Partials, second: Partials, h: NDArray[np.float64], slopes: bool,
    used: NDArray[np.integer] | None = None,
) -> NDArray[np.float64]:
    """``[e_a^T M^-1 V M^-1 e_a]`` for the fit (a = 0) and, with ``slopes``, each slope."""
    m = first.weight.shape[0]
    dc = job.cont.size
    out = np.full((m, 1 + dc), np.nan)
    ok = (first.weight > 0) & (second.weight >= 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # V_true / M_true^2 carries exp(shift2 - 2 shift1) * S0_2 / S0_1^2 (both normalised below)
        log_ratio = second.shift.astype(np.float64) - 2.0 * first.shift.astype(np.float64)
        ratio = np.exp(log_ratio) * second.weight / first.weight.astype(np.float64) ** 2
    ok &= np.isfinite(ratio)
    if not ok.any():
        return out
    rows = np.nonzero(ok)[0]
    degree = job.degree
    if degree == 0:
        out[rows, 0] = ratio[rows]
        if slopes and dc:
            out[rows, 1:] = _nw_slope_variance(first[rows], second[rows], h, ratio[rows])
        return out
    M, _ = _systems(first[rows], degree, h)
    V, _ = _systems(second[rows], degree, h)
    take = 1 + dc if slopes else 1
    # the degree the fit used: given, or the solve's own decision on the same sums
    level = used_degree(first[rows], degree, h) if used is None else np.asarray(used)[rows]
    for r in range(degree, 0, -1):  # each query's system: the leading block of the degree it used
        now = level == r
        if not now.any():
            continue
        size = len(monomials(r, dc))
        Mr, Vr = M[now][:, :size, :size], V[now][:, :size, :size]
        Mi = np.linalg.inv(Mr)
        cov = np.einsum("mij,mjk,mlk->mil", Mi, Vr, Mi) * ratio[rows[now], None, None]
        diag = np.full((int(now.sum()), take), np.nan)
        k = min(take, size)
        diag[:, :k] = np.einsum("mii->mi", cov)[:, :k]
        if slopes:
            diag[:, 1:] /= h[None, :] ** 2
        out[rows[now], :take] = diag
    flat = level == 0  # degree 0: the ratio of the two passes' weights
    out[rows[flat], 0] = ratio[rows[flat]]
    return out


def _nw_slope_variance(
    first: Partials, second: Partials, h: NDArray[np.float64], ratio: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Degree 0, Gaussian: the variance of ``d f / d x_a`` from the two passes' first moments.

    ``c_i = w_i (u_i / h^2 - D / S0) / S0``; ``sum c_i^2 sigma_i^2`` in terms of the second
    pass's normalised moments ``E[u]``, ``E[u^2]`` (under ``w^2 sigma^2``)."""
    s0 = first.weight.astype(np.float64)
    d_over = first.moments[0].astype(np.float64) / s0[:, None] / h**2  # D / S0
    w2 = second.weight.astype(np.float64)[:, None]
    e_u = second.moments[0].astype(np.float64) / w2
    e_uu = np.einsum("mii->mi", second.moments[1].astype(np.float64)) / w2
    inner = e_uu / h**4 - 2.0 * d_over * e_u / h**2 + d_over**2
    return np.asarray(ratio[:, None] * inner)
