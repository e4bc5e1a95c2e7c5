"""The binned backend: 1-D sums within a stated tolerance by linear binning and an FFT convolution.

**How.** On a grid of spacing ``delta`` over the queries and keys, each key's weight (times each
value) is split linearly between its two grid points; the binned sums are convolved with the
kernel sampled at the grid's offsets (by FFT); each query reads its sums by linear interpolation
between its two grid points (KDEpy's FFTKDE and R's KernSmooth bin the same way, without a
bound). O(n + m + G log G) for a grid of ``G`` points, whatever the bandwidth.

**The bound.** Binning replaces a key's term ``K((q - x) / h)`` by the linear interpolation of
``y -> K((q - y) / h)`` between its grid points, within ``(delta / h)^2 / 8`` times ``|K''|``
somewhere between them; interpolating the sums between the query's two grid points errs by the
same amount per key. The kernel is sampled over the whole grid (nothing is cut). So each sum
``S_g = sum_i s_i K_i g_i`` is within

    ``E_g(q) = (delta / h)^2 / 4 * sum_i s_i |g_i| M((q - x_i) / h) + (FFT rounding)``

of the exact one, ``M(u)`` a decreasing bound of ``|K''|`` over every point within ``3 delta /
h`` of ``u`` (``_envelope``). That sum is itself a binned convolution (of the ``|g|``
columns with ``M``), read as the larger of the query's two grid points, which bounds it from
above. The FFT's rounding is bounded by ``8 log2(N) eps ||k||_2 sum_i s_i |g_i|`` for a
convolution of length ``N`` with the sampled kernel ``k`` (Higham's bound, with a margin). The
spacing ``delta`` is chosen before anything is computed, from ``tol`` alone
(:func:`grid_spacing`: small enough that a query whose sum is one key at its own place is
certified); a grid of more than :data:`GRID_MAX` points is not
built (every query is then exact).

**Every prediction within ``tol * max|v|``.** From ``|S_v / S_0 - (S_v + e_v) / (S_0 + e_0)|
<= (E_v + |f| E_0) / (S_0 - E_0)`` each query's error is bounded after the fact; a query whose
bound is above ``tol * max|v|`` (sparse regions, far queries, where ``S_0`` is small) is
computed exactly by the fused backend instead. The guarantee holds on every query; the grid only
decides how many queries it serves.

Kernels: those twice differentiable with a known ``max|K''|`` (:data:`SECOND_DERIVATIVE`) that
have no faster exact or series method in 1-D: ``auto`` offers it for the logistic kernel
with ``tol``; the Gaussian (for comparison with the Taylor series) when named. Plain pooling
only (no moments, no leave-one-out).

Examples
--------
>>> import numpy as np
>>> from nadaraya.kernels import get
>>> from nadaraya.backends import binned, reference
>>> rng = np.random.default_rng(0)
>>> x = rng.uniform(0, 5, (4000, 1)); v = np.sin(x)
>>> a = binned.partials(x, x, v, kernel=get("logistic"), bandwidth=np.array([0.05]), tol=1e-6)
>>> b = reference.partials(x, x, v, kernel=get("logistic"), bandwidth=np.array([0.05]))
>>> bool(np.abs(a.finalize() - b.finalize()).max() <= 1e-6)
True
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from ..kernels import Kernel
from ..partials import Partials

__all__ = ["GRID_MAX", "SECOND_DERIVATIVE", "grid_spacing", "partials", "supports"]

#: ``max |K''(u)|`` of the kernels it serves (profiles as :mod:`nadaraya.kernels` defines them:
#: ``exp(-u^2 / 2)``, largest at ``u = 0``; ``1 / (e^u + 2 + e^-u)``, ``1/8`` at ``u = 0``)
SECOND_DERIVATIVE = {"gaussian": 1.0, "logistic": 0.125}
#: ``M(0) / K(0)``: the bound's kernel over the kernel at the centre (see :func:`grid_spacing`)
_CENTRE = {"gaussian": 2.0 * math.exp(-0.5), "logistic": 4.0}
#: the most grid points (about 1 GiB of convolution buffers at two value columns)
GRID_MAX = 2**23
_EPS = 2.0**-52


def supports(kernel: Kernel, d: int) -> bool:
    """Twice-differentiable kernels with a known ``max|K''|`` in one feature.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("logistic"), 1), supports(get("logistic"), 2), supports(get("epanechnikov"), 1)
    (True, False, False)
    """
    return kernel.name in SECOND_DERIVATIVE and d == 1


def _profile(kernel: Kernel, u: NDArray[np.float64]) -> NDArray[np.float64]:
    """The kernel's weights on the scale of the other backends' partials (``exp`` of the log
    profile: ``exp(-u^2 / 2)``, not the normalised density)."""
    return np.exp(kernel.log_profile(u))  # type: ignore[misc]


def grid_spacing(h: float, span: float, tol: float, kernel: str = "logistic") -> float:
    """The spacing ``delta`` of the grid for a bandwidth ``h`` over ``span``: the bound of a
    query whose sum is one key at its own place, ``(delta / h)^2 / 4 * M(0) / K(0)`` times
    ``|v| + |f| <= 2 max|v|``, stays under ``0.9 tol max|v|`` (``M(0) / K(0)``: 4 for the logistic
    kernel, ``2 e^-1/2`` for the Gaussian; where many keys share the sum the bound is smaller).
    A grid of more than :data:`GRID_MAX` points is not built: every query is then exact.

    Examples
    --------
    >>> round(grid_spacing(0.1, 5.0, 1e-4) / 0.1, 5)
    0.00671
    """
    return max(h * math.sqrt(1.8 * tol / _CENTRE[kernel]), 1e-300)


def partials(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    *,
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None = None,
    exclude: NDArray[np.integer] | None = None,
    moments: int = 0,
    tol: float = 1e-6,
) -> Partials:
    """Partial sums in 1-D within ``tol``: every prediction within ``tol * max|v|`` (see the
    module's text).

    Raises
    ------
    ValueError
        For a kernel it does not serve or ``d != 1``, ``moments``, ``exclude``, or a ``tol``
        outside ``[1e-12, 0.1]``.
    """
    if not supports(kernel, keys.shape[1]):
        raise ValueError(f"backend='binned' computes the {sorted(SECOND_DERIVATIVE)} kernels in 1-D; got "
                         f"kernel={kernel.name!r} with d={keys.shape[1]}")
    if moments or exclude is not None:
        raise ValueError("backend='binned' computes plain pooling: no moments (degree 0) and no "
                         "leave-one-out (exclude); use backend='auto'")
    if not (isinstance(tol, float | int) and 1e-12 <= tol <= 0.1):
        raise ValueError(f"tol must be a number from 1e-12 to 0.1 for backend='binned'; got {tol!r}")
    f64 = np.float64
    m, p = queries.shape[0], values.shape[1]
    q = np.asarray(queries[:, 0], dtype=f64)
    x = np.asarray(keys[:, 0], dtype=f64)
    s = np.ones(x.size) if sample_weight is None else np.asarray(sample_weight, dtype=f64)
    cols = np.column_stack([s, s[:, None] * np.asarray(values, dtype=f64)])  # weight, then values
    h = float(bandwidth[0])
    weight, value = np.zeros(m), np.zeros((m, p))
    ok = np.zeros(m, dtype=np.bool_)
    lo = min(float(q.min()), float(x.min())) if m and x.size else 0.0
    span = max(float(q.max()), float(x.max())) - lo if m and x.size else 0.0
    if m and x.size and span / grid_spacing(h, span, tol, kernel.name) < GRID_MAX:  # else all exact
        vmax = np.abs(np.asarray(values, dtype=f64)).max(axis=0)
        _binned_sums(q, x, cols, vmax, kernel, h, float(tol), weight, value, ok)
    shift = np.zeros(m)
    if not ok.all():  # computed exactly, each with its own shift (a far query's weights underflow at 0)
        from . import fused

        rows = np.flatnonzero(~ok)
        exact = fused.partials(queries[rows].astype(f64), keys.astype(f64), np.asarray(values, dtype=f64),
                               kernel=kernel, bandwidth=np.asarray(bandwidth, dtype=f64),
                               sample_weight=None if sample_weight is None else s)
        shift[rows], weight[rows], value[rows] = exact.shift, exact.weight, exact.value
    from ._rows import assemble

    return assemble(shift, np.column_stack([weight, value]), values.dtype, m, p, 0)


def _envelope(kernel: Kernel, r: NDArray[np.float64]) -> NDArray[np.float64]:
    """A decreasing bound of ``|K''(u)|`` over ``|u| >= r``: ``sup (u^2 + 1) e^(-u^2 / 2)`` for the
    Gaussian (``|K''| = |u^2 - 1| e^(-u^2 / 2)``), ``e^-r`` for the logistic (``|K''| = K |1 - 6 K|
    <= K <= e^-|u|``)."""
    if kernel.name == "gaussian":
        rr = np.maximum(r, 1.0)
        return (rr * rr + 1.0) * np.exp(-0.5 * rr * rr)
    return np.exp(-r)


def _binned_sums(q: NDArray[np.float64], x: NDArray[np.float64], cols: NDArray[np.float64],
                 vmax: NDArray[np.float64], kernel: Kernel, h: float, tol: float, weight: NDArray[np.float64],
                 value: NDArray[np.float64], ok: NDArray[np.bool_]) -> None:
    """The grid's sums at the queries, and which of them its bound certifies (in place)."""
    from scipy.signal import fftconvolve

    lo = min(float(q.min()), float(x.min()))
    span = max(float(q.max()), float(x.max())) - lo
    delta = grid_spacing(h, span, tol, kernel.name) if span > 0 else h
    size = int(span / delta) + 3
    pos = (x - lo) / delta
    j = np.minimum(np.floor(pos).astype(np.int64), size - 2)
    t = pos - j
    grid = np.zeros((size, 2 * cols.shape[1]))  # the columns, then their absolute values
    for c in range(cols.shape[1]):
        for k, col in ((c, cols[:, c]), (cols.shape[1] + c, np.abs(cols[:, c]))):
            grid[:, k] = np.bincount(j, col * (1.0 - t), minlength=size) + np.bincount(j + 1, col * t,
                                                                                        minlength=size)
    offsets = np.arange(-(size - 1), size) * (delta / h)  # the whole grid: no tail to cut
    kern = _profile(kernel, offsets)
    # the bound's kernel: |K''| over every point within 3 delta of the offset (a key's binning
    # moves it by delta at most, the query's two grid points are within delta of it)
    bound_kern = _envelope(kernel, np.maximum(np.abs(offsets) - 3.0 * delta / h, 0.0))
    ncol = cols.shape[1]
    sums_grid = fftconvolve(grid[:, :ncol], kern[:, None], mode="same", axes=0)
    abs_grid = fftconvolve(grid[:, ncol:], bound_kern[:, None], mode="same", axes=0)
    qpos = (q - lo) / delta
    qj = np.minimum(np.floor(qpos).astype(np.int64), size - 2)
    qt = (qpos - qj)[:, None]
    sums = sums_grid[qj] * (1.0 - qt) + sums_grid[qj + 1] * qt
    local = np.maximum(abs_grid[qj], abs_grid[qj + 1])  # sum |g| max|K''| near each key, from above
    total = np.abs(cols).sum(axis=0)
    nfft = 2.0 * (size + kern.size)
    fft = 8.0 * math.log2(nfft) * _EPS * (float(np.sqrt((kern * kern).sum())) * total
                                          + float(np.sqrt((bound_kern * bound_kern).sum())) * total)
    err = (delta / h) ** 2 / 4.0 * (local * (1.0 + 1e-9) + fft) + fft  # E_g per query and column
    weight[:] = sums[:, 0]
    value[:] = sums[:, 1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        f = value / weight[:, None]
        bound = (err[:, 1:] + np.abs(f) * err[:, :1]) / (weight - err[:, 0])[:, None]
    ok[:] = (weight - err[:, 0] > 0) & np.all(bound <= tol * vmax, axis=1)
