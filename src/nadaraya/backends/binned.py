"""The binned backend: sums in 1 or 2 features within a stated tolerance, by linear binning and FFT.

**The guarantee.** For every query and every value column ``c``, the prediction ``f_c(q)`` is
within ``tol * max_i |v_ic|`` of the exact Nadaraya-Watson prediction (the mathematically exact
sums of the given keys, values and weights). A query whose certificate (below) does not show
that is computed exactly by the fused backend, with its own shift. The grid only decides how
many queries it serves; the bound holds on every one.

**How.** In units of each feature's bandwidth (``u_k = x_k / h_k``), a grid of spacing
``a`` per feature (the same number of bandwidths for each, :func:`grid_spacing`) covers the keys
and the queries that lie within :data:`REACH` bandwidths of the keys' box. Each key's weight
``s_i`` (times each value) is split linearly (bilinearly in 2-D) between the ``2^d`` corners of
its cell; the binned sums are convolved (``scipy.signal.fftconvolve``) with the product kernel
``K(o_1) ... K(o_d)`` sampled at every offset of the grid (nothing is cut); each query reads its
sums by linear (bilinear) interpolation between the corners of its cell. Queries outside the
grid are computed exactly. O(n + m + G log G) for ``G`` grid points, whatever the bandwidth
(KDEpy's FFTKDE and R's KernSmooth bin the same way, without a bound).

**The bound, per key.** The grid's value of one key's term is the tensor-product linear
interpolation of ``F(x, q) = prod_k K(q_k - x_k)`` in the 2 d variables (key and query
coordinates) at the corners of their cells. Linear interpolation ``I`` is a convex combination,
so writing ``F - I_1 ... I_2d F`` as ``(F - I_1 F) + I_1 (F - I_2 F) + ...``, each step errs by at
most ``a^2 / 8`` times the second derivative of ``F`` along its variable, whose other
variables are the true coordinates or corners of their cells. Along key or query coordinate
``k`` that derivative is ``K''(u_k) prod_{j != k} K(u_j)``, taken where every ``u_j`` is within
``2 a`` of the true ``u_j = q_j - x_j`` (the key and the query each move by ``a`` at most). With
``M`` a bound of ``|K''|`` decreasing in ``|u|`` (:func:`_envelope`) and ``K`` decreasing in
``|u|`` (both kernels), the error of one key's term is at most

    ``sum_k a^2 / 4 * M(|u_k| - 2 a) prod_{j != k} K(|u_j| - 2 a)``   (arguments below 0 read as 0)

In 2-D: ``a^2 / 4 (M(|u_1| - 2a) K(|u_2| - 2a) + K(|u_1| - 2a) M(|u_2| - 2a))``, the envelopes of
``|K_xx|`` and ``|K_yy|`` near the pair (``(dx^2 / 8) |K_xx| + (dy^2 / 8) |K_yy|`` for the key's
binning and as much for the query's interpolation).

**Summed over keys, on the grid.** The bound's kernel ``B(o) = sum_k a^2 / 4 M(|o_k| - 4a)
prod_{j != k} K(|o_j| - 4a)`` at a grid offset ``o`` is at least that per-key bound for every pair
of corners the key and the query use (their offset is within ``2a`` of ``u`` per feature, and
both functions decrease). So the error of each sum ``S_g = sum_i s_i K_i g_i`` (``g = 1`` or a
value column) is at most the binned convolution of ``|s g|`` with ``B``, read as the largest of
the query's corners: the grid computes it by a second FFT. Added to it:

- the FFT's rounding, ``8 log2(N) eps ||k||_2 sum_i |s_i g_i|`` for each of the two convolutions
  of ``N`` padded points with sampled kernel ``k`` (Higham's bound, with a margin);
- the rounding of the binned sums (at most ``c`` terms per grid point: ``c eps`` of the sum of
  their absolute values, carried through the convolution with ``K <= 1``) and of the keys' and
  queries' positions in the grid (each off by at most ``4 (P + 2) eps`` cells for ``P`` points
  per feature, so a pair's ``u_k`` moves by ``D = 8 (P + 2) eps a`` and its term by at most ``D``
  times ``|K'(u_k)| prod_{j != k} K(u_j)``). Since ``M >= K`` and ``M >= |K'|``, ``B`` is at least
  ``d a^2 / 4 prod_k K`` and each of its ``d`` parts is ``a^2 / 4`` times a bound of that
  derivative, so both are covered by multiplying the bound by ``1 + 4 c eps / (d a^2) +
  4 D / a^2`` (plus ``2 c eps + 1e-9`` for the bound's own rounding).

**Every prediction within ``tol * max|v|``.** With ``E_g`` those bounds, ``|S_v / S_0 - (S_v +
e_v) / (S_0 + e_0)| <= (E_v + |f| E_0) / (S_0 - E_0)`` bounds each query's error after the fact;
a query whose bound (plus ``4 eps |f|`` for the division's rounding) is above ``tol * max|v|`` in
any column (sparse regions, far queries, where ``S_0`` is small) is computed exactly instead.
The spacing ``a`` is chosen from ``tol`` and ``d`` alone (:func:`grid_spacing`: a query whose
sum is one key at its own place is certified); a grid of more than :data:`GRID_MAX` points
(times ``3^(d - 1)``: the padded FFT's extra size in 2-D) is not built, and every query is
then exact.

Kernels: the Gaussian and the logistic, in 1 or 2 features. Both are product kernels here
(:mod:`nadaraya.kernels`), ``K(u) = prod_k K(u_k)``, which the argument above needs; both
profiles decrease in ``|u|``, and ``|K''|`` has a decreasing envelope ``M`` with ``M >= K``,
``M >= |K'|``. ``auto`` offers it for the logistic kernel with ``tol`` in 1 and 2 features,
where its grid is built and its modelled cost is under half the exact sums'; the Gaussian (for
comparison with its series) is used when named. Plain pooling only (no moments, no
leave-one-out).

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

import itertools
import math
from functools import reduce

import numpy as np
from numpy.typing import NDArray

from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

__all__ = ["GRID_MAX", "REACH", "SECOND_DERIVATIVE", "grid_points", "grid_spacing", "partials", "supports"]

#: ``max |K''(u)|`` of the kernels it serves (profiles as :mod:`nadaraya.kernels` defines them:
#: ``exp(-u^2 / 2)``, largest at ``u = 0``; ``1 / (e^u + 2 + e^-u)``, ``1/8`` at ``u = 0``)
SECOND_DERIVATIVE = {"gaussian": 1.0, "logistic": 0.125}
#: ``M(0) / K(0)``: the bound's kernel over the kernel at the centre (see :func:`grid_spacing`)
_CENTRE = {"gaussian": 2.0 * math.exp(-0.5), "logistic": 1.0}
#: the most grid points in 1-D (about 1 GiB of convolution buffers at two value columns); in
#: 2-D, ``GRID_MAX / 3`` (each feature's padded FFT is 3 times its points)
GRID_MAX = 2**23
#: how far beyond the keys' extent, in bandwidths per feature, the grid reaches for queries;
#: queries beyond it are computed exactly
REACH = 8.0
_EPS = 2.0**-52


def supports(kernel: Kernel, d: int) -> bool:
    """The Gaussian and logistic kernels in one or two features.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("logistic"), 2), supports(get("logistic"), 3), supports(get("epanechnikov"), 1)
    (True, False, False)
    """
    return kernel.name in SECOND_DERIVATIVE and d in (1, 2)


def _profile(kernel: Kernel, u: NDArray[np.float64]) -> NDArray[np.float64]:
    """The kernel's weights on the scale of the other backends' partials (``exp`` of the log
    profile: ``exp(-u^2 / 2)``, not the normalised density)."""
    return np.exp(kernel.log_profile(u))  # type: ignore[misc]


def grid_spacing(h: float, span: float, tol: float, kernel: str = "logistic", d: int = 1) -> float:
    """The spacing ``h a`` of the grid along a feature of bandwidth ``h``, in ``d`` features: the
    bound of a query whose sum is one key at its own place, ``d a^2 / 4 * M(0) / K(0)`` times
    ``|v| + |f| <= 2 max|v|``, stays under ``0.9 tol max|v|`` (``M(0) / K(0)``: 1 for the logistic
    kernel, ``2 e^-1/2`` for the Gaussian), and so does that of a query whose keys are anywhere,
    for the logistic kernel: there the bound's kernel, ``4 a`` closer per feature, is at most
    ``e^(4 d a)`` times ``d a^2 / 4`` the kernel (``log K`` has slope ``-1`` at least), so ``a``
    is also divided by ``e^(2 d a)``. ``span`` is not used (kept for existing callers).

    Examples
    --------
    >>> round(grid_spacing(0.1, 5.0, 1e-4) / 0.1, 5), round(grid_spacing(0.1, 5.0, 1e-4, d=2) / 0.1, 5)
    (0.01306, 0.00913)
    """
    a = math.sqrt(1.8 * tol / (d * _CENTRE[kernel]))
    return max(h * a * math.exp(-2.0 * d * a), 1e-300)


def _layout(q: NDArray[np.float64], x: NDArray[np.float64], h: NDArray[np.float64], step: float
            ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per feature, the grid's first point (in the data's units) and its number of points (a float,
    possibly huge): the keys' extent, widened to the queries' up to :data:`REACH` bandwidths."""
    d = x.shape[1]
    lo, points = np.empty(d), np.empty(d)
    for k in range(d):
        xlo, xhi = float(x[:, k].min()), float(x[:, k].max())
        start = max(min(float(q[:, k].min()), xlo), xlo - REACH * float(h[k]))
        stop = min(max(float(q[:, k].max()), xhi), xhi + REACH * float(h[k]))
        lo[k], points[k] = start, (stop - start) / (float(h[k]) * step) + 3.0
    return lo, points


def grid_points(queries: NDArray[np.floating], keys: NDArray[np.floating], bandwidth: NDArray[np.floating],
                tol: float, kernel: str = "logistic") -> tuple[float, bool]:
    """The grid's number of points for such a call, and whether it is built (within
    :data:`GRID_MAX`; else every query is computed exactly). The cost of the binned sums is
    about this many points times their log, for both convolutions, plus the keys and queries.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).uniform(0, 1, (1000, 2))
    >>> points, built = grid_points(x, x, np.array([0.1, 0.1]), 1e-3)  # 10 by 10 bandwidths
    >>> 1e5 < points < 2e5, built
    (True, True)
    """
    d = keys.shape[1]
    step = grid_spacing(1.0, 0.0, tol, kernel, d)
    f64 = np.float64
    _, points = _layout(np.asarray(queries, f64), np.asarray(keys, f64), np.asarray(bandwidth, f64), step)
    total = float(np.prod(points))
    return total, total * 3.0 ** (d - 1) <= GRID_MAX


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
    """Partial sums in 1 or 2 features within ``tol``: every prediction within ``tol * max|v|``
    of the exact one, per value column, on every query (see the module's text).

    Raises
    ------
    ValueError
        For a kernel it does not serve or ``d`` not 1 or 2, ``moments``, ``exclude``, or a
        ``tol`` outside ``[1e-12, 0.1]``.
    """
    # kernel, features, degree and leave-one-out are checked against CAPABILITIES by backends.compute
    if not (isinstance(tol, float | int) and 1e-12 <= tol <= 0.1):
        raise ValueError(f"tol must be a number from 1e-12 to 0.1 for backend='binned'; got {tol!r}")
    f64 = np.float64
    m, p = queries.shape[0], values.shape[1]
    q = np.asarray(queries, dtype=f64)
    x = np.asarray(keys, dtype=f64)
    s = np.ones(x.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=f64)
    cols = np.column_stack([s, s[:, None] * np.asarray(values, dtype=f64)])  # weight, then values
    h = np.asarray(bandwidth, dtype=f64)
    weight, value = np.zeros(m), np.zeros((m, p))
    ok = np.zeros(m, dtype=np.bool_)
    if m and x.shape[0] and grid_points(q, x, h, float(tol), kernel.name)[1]:  # else all exact
        vmax = np.abs(np.asarray(values, dtype=f64)).max(axis=0)
        _binned_sums(q, x, cols, vmax, kernel, h, float(tol), weight, value, ok)
    shift = np.zeros(m)
    if not ok.all():  # computed exactly, each with its own shift (a far query's weights underflow at 0)
        from nadaraya.backends import fused

        rows = np.flatnonzero(~ok)
        exact = fused.partials(queries[rows].astype(f64), keys.astype(f64), np.asarray(values, dtype=f64),
                               kernel=kernel, bandwidth=h, sample_weight=None if sample_weight is None else s)
        shift[rows], weight[rows], value[rows] = exact.shift, exact.weight, exact.value
    from nadaraya.backends._rows import assemble

    return assemble(shift, np.column_stack([weight, value]), values.dtype, m, p, 0)


def _envelope(kernel: Kernel, r: NDArray[np.float64]) -> NDArray[np.float64]:
    """A decreasing bound ``M(r)`` of ``|K''(u)|`` over ``|u| >= r``, with ``M >= K`` and
    ``M >= |K'|``: ``sup (u^2 + 1) e^(-u^2 / 2)`` for the Gaussian (``|K''| = |u^2 - 1| e^(-u^2 / 2)``,
    ``|K'| = |u| e^(-u^2 / 2)``); the logistic profile itself for the logistic (with ``s`` the
    sigmoid, ``K = s (1 - s) <= 1/4``, ``K' = K (1 - 2 s)`` and ``K'' = K (1 - 6 K)``, both at most
    ``K`` in size)."""
    if kernel.name == "gaussian":
        rr = np.maximum(r, 1.0)
        return (rr * rr + 1.0) * np.exp(-0.5 * rr * rr)
    return _profile(kernel, r)


def _corners(pos: NDArray[np.float64], shape: tuple[int, ...]
             ) -> list[tuple[NDArray[np.int64], NDArray[np.float64]]]:
    """For points at grid positions ``pos`` (k, d): each of the ``2^d`` corners of their cells as
    (flat index, interpolation weight)."""
    d = pos.shape[1]
    j = np.clip(np.floor(pos).astype(np.int64), 0, np.array(shape) - 2)
    t = pos - j
    out = []
    for corner in itertools.product((0, 1), repeat=d):
        idx = np.ravel_multi_index(tuple(j[:, k] + corner[k] for k in range(d)), shape)
        w = reduce(np.multiply, [t[:, k] if corner[k] else 1.0 - t[:, k] for k in range(d)])
        out.append((idx, w))
    return out


def _convolve(cols: NDArray[np.float64], keys_at: list[tuple[NDArray[np.int64], NDArray[np.float64]]],
              queries_at: list[tuple[NDArray[np.int64], NDArray[np.float64]]], shape: tuple[int, ...],
              kern: NDArray[np.float64], bound_kern: NDArray[np.float64]
              ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The columns binned at the keys' corners and convolved with the kernel, read at the queries'
    corners by interpolation; their absolute values convolved with the bound's kernel, read as the
    largest corner."""
    from scipy.signal import fftconvolve

    size, ncol = math.prod(shape), cols.shape[1]
    grid = np.zeros((size, 2 * ncol))  # the columns, then their absolute values
    for idx, w in keys_at:
        for c in range(ncol):
            grid[:, c] += np.bincount(idx, cols[:, c] * w, minlength=size)
            grid[:, ncol + c] += np.bincount(idx, np.abs(cols[:, c]) * w, minlength=size)
    axes = tuple(range(len(shape)))
    cube = grid.reshape((*shape, 2 * ncol))
    sums_grid = fftconvolve(cube[..., :ncol], kern[..., None], mode="same", axes=axes).reshape(size, -1)
    abs_grid = fftconvolve(cube[..., ncol:], bound_kern[..., None], mode="same", axes=axes).reshape(size, -1)
    del grid, cube
    m = queries_at[0][0].size
    sums, local = np.zeros((m, ncol)), np.full((m, ncol), -np.inf)
    for idx, w in queries_at:
        sums += sums_grid[idx] * w[:, None]
        local = np.maximum(local, abs_grid[idx])  # the bound's sum at one corner, any of them
    return sums, local


def _binned_sums(q: NDArray[np.float64], x: NDArray[np.float64], cols: NDArray[np.float64],
                 vmax: NDArray[np.float64], kernel: Kernel, h: NDArray[np.float64], tol: float,
                 weight: NDArray[np.float64], value: NDArray[np.float64], ok: NDArray[np.bool_]) -> None:
    """The grid's sums at the queries ``q`` (m, d) over the keys ``x`` (n, d), and which of them its
    bound certifies (in place; the rest are left for the exact sums)."""
    sums, err, inside = _grid_sums(q, x, cols, kernel, h, tol)
    weight[:] = sums[:, 0]
    value[:] = sums[:, 1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        f = value / weight[:, None]
        bound = (err[:, 1:] + np.abs(f) * err[:, :1]) / (weight - err[:, 0])[:, None]
    ok[:] = inside & (weight - err[:, 0] > 0) & np.all(bound + 4.0 * _EPS * np.abs(f) <= tol * vmax, axis=1)


def _grid_sums(q: NDArray[np.float64], x: NDArray[np.float64], cols: NDArray[np.float64], kernel: Kernel,
               h: NDArray[np.float64], tol: float
               ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """The sums ``sum_i K_i cols_i`` from the grid at the queries ``q`` (m, d) over the keys ``x``
    (n, d), the bound ``E`` of each one's error (m, columns), and which queries lie on the grid."""
    d, ncol = x.shape[1], cols.shape[1]
    a = grid_spacing(1.0, 0.0, tol, kernel.name, d)  # the spacing, in bandwidths
    lo, points = _layout(q, x, h, a)
    shape = tuple(int(s) for s in points)
    size = math.prod(shape)
    scale = h * a
    kpos, qpos = (x - lo) / scale, (q - lo) / scale
    inside = np.all((qpos >= 0.0) & (qpos <= np.array(shape) - 1.0), axis=1)
    keys_at = _corners(kpos, shape)
    crowd = 2**d * int(np.bincount(keys_at[0][0]).max()) + 2**d + 8  # terms per grid point, and margin
    queries_at = _corners(np.clip(qpos, 0.0, np.array(shape) - 1.0), shape)
    offsets = [np.arange(-(s - 1), s, dtype=np.float64) * a for s in shape]  # the whole grid: no tail to cut
    near = [np.maximum(np.abs(o) - 4.0 * a, 0.0) for o in offsets]
    kern = reduce(np.multiply.outer, [_profile(kernel, o) for o in offsets])
    far_k = [_profile(kernel, r) for r in near]
    far_m = [_envelope(kernel, r) for r in near]
    bound_kern: NDArray[np.float64] = np.zeros(kern.shape)
    for k in range(d):
        factors = [far_m[j] if j == k else far_k[j] for j in range(d)]  # |K''| along k, K along the others
        bound_kern += a * a / 4.0 * reduce(np.multiply.outer, factors)
    sums, local = np.zeros((q.shape[0], ncol)), np.zeros((q.shape[0], ncol))
    group = max(1, 6 * GRID_MAX // (size * 3**d))  # columns per pass: about 1 GiB of buffers at most
    for first in range(0, ncol, group):
        part = slice(first, min(first + group, ncol))
        sums[:, part], local[:, part] = _convolve(cols[:, part], keys_at, queries_at, shape, kern, bound_kern)
    total = np.abs(cols).sum(axis=0)
    nfft = math.prod(3 * s for s in shape)
    fft_k = 8.0 * math.log2(nfft) * _EPS * float(np.sqrt((kern * kern).sum())) * total
    fft_b = 8.0 * math.log2(nfft) * _EPS * float(np.sqrt((bound_kern * bound_kern).sum())) * total
    # the binned sums' rounding and the positions' (see the module's text), relative to the bound
    rounding = (1e-9 + 2.0 * crowd * _EPS + 4.0 * crowd * _EPS / (d * a * a)
                + 32.0 * (max(shape) + 2) * _EPS / a)
    err = (np.maximum(local, 0.0) + fft_b) * (1.0 + rounding) + fft_k  # E_g per query and column
    return sums, err, inside
