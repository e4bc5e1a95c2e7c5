"""The conditional CDF and its quantiles on the engine's sums: a series per cell of y as value columns.

For one continuous y column, ``F(y | x) = sum_i w_i(x) G((y - Y_i) / h) / sum_i w_i(x)``. The
y axis is cut into cells of width ``2 rho h`` (:class:`~nadaraya.density._series.Series`). For
``y`` in the cell about ``t``, each key's ``G((y - Y_i) / h)`` is the series
``sum_r c_r((t - Y_i) / h) ((y - t) / (rho h))^r``, exact there (the polynomial kernels) or with
a remainder under ``1e-18`` (the others), unless one of the CDF's breakpoints falls within the
cell: so ``F`` at every ``y`` of the cell is a polynomial whose coefficients are the engine's
ratios ``sum_i w_i c_r / sum_i w_i`` (:func:`ratios`: pool's partial sums with the ``c_r`` as
value columns, one pass over the pairs for all of them, on any backend, within ``tol``), plus,
for the keys with a breakpoint in the cell (a band a few ``rho h`` wide: none for the
Gaussian and logistic kernels), their share of the weight (one more value column) times
their exact weighted mean of ``G``.

The quantiles first locate each query's cell on a ladder of cell edges (``F`` at the edges:
``G`` at shared points, value columns again; a coarse ladder, then the edges inside the coarse
step found), then invert the cell's polynomial by safeguarded Newton steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from nadaraya.density._cdf import kernel_cdf
from nadaraya.density._cond_sums import Sample, normalised, x_log_weights
from nadaraya.density._constants import Categories, _continuous_partials
from nadaraya.density._cv import _blas
from nadaraya.density._quantile import XTOL, invert
from nadaraya.density._series import Series
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job

__all__ = ["Cell", "cdf", "quantile", "ratios"]

#: the smallest tolerance the fast backends take; below it, the sums are exact
_MIN_TOL = 1e-12

#: above this many value columns, backend="auto" takes exact sums rather than a series within tol
_FEW_COLUMNS = 4

#: the quantile is moved up by this much of its precision's scale, inside its precision: ``F``
#: there exceeds ``alpha`` by more than the sums' rounding
_NUDGE = 1e-12


def ratios(
    s: Sample, qx: NDArray[np.float64], values: NDArray[np.float64], tol: float | None
) -> NDArray[np.float64]:
    """``sum_i w_i(q) v_ij / sum_i w_i(q)`` per query and value column: pool's partials of the
    x-kernel (categorical factors and sample weights included), each within ``tol max_i |v_ij|``
    on the backends that take ``tol`` (named, or ``"auto"`` for a few columns); NaN where no
    key weighs."""
    job = _job.prepare(qx, s.x, values, kernel=s.kernel, bandwidth=s.hx, sample_weight=s.sample_weight,
                       degree=0, var_types=s.var_types, categorical_kernel=s.categorical_kernel)
    # exact sums are within any tol; the fast series cost grows with the value columns (the
    # cost model ranks backends by pairs alone), so "auto" keeps them exact for many columns
    many = values.shape[1] > _FEW_COLUMNS and s.backend == "auto"
    job.tol = tol if tol is not None and tol >= _MIN_TOL and not many else None
    if job.cat is None:
        parts = _continuous_partials(job, None, s.backend)
    else:
        job.cat = Categories.of(job.cat)
        parts = _fit.partials(job, None, s.backend)
    weight = np.asarray(parts.weight, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.asarray(parts.value, dtype=np.float64).reshape(qx.shape[0], -1) / weight[:, None]
    if job.call.value_exp:
        out = np.ldexp(out, job.call.value_exp)
    return out  # type: ignore[no-any-return]


@dataclass
class Cell:
    """``F(. | x)`` of a block of queries on the cell about ``t``: the series' coefficients
    (b, terms), the band keys' share of the weight (b,), their y (nb,) and normalised weights (b, nb)."""

    t: float
    half: float  # rho h
    h: float
    coef: NDArray[np.float64]
    share: NDArray[np.float64]
    band_y: NDArray[np.float64]
    band_w: NDArray[np.float64]
    cdf_of: Callable[[NDArray[np.float64]], NDArray[np.float64]]
    pdf_of: Callable[[NDArray[np.float64]], NDArray[np.float64]]

    @classmethod
    def sums(cls, s: Sample, sr: Series, qx: NDArray[np.float64], t: float, tol: float | None) -> Cell:
        """The engine's sums for the queries ``qx`` on the cell about ``t``."""
        y, h = s.y[:, 0], float(s.hy[0])
        u = (t - y) / h
        band = np.zeros(y.size, dtype=bool)
        for b in sr.breaks:
            band |= np.abs(u - b) <= sr.rho * (1.0 + 1e-9)
        coef = sr.coefficients(u)
        coef[band] = 0.0
        values = np.column_stack([band.astype(np.float64), coef])
        if tol is not None:  # each column within tol max|v| of its ratio: F within tol in all
            tol = tol / (1.0 + float(np.abs(coef).max(axis=0).sum()))
        r = ratios(s, qx, values, tol)
        share, co = r[:, 0], r[:, 1:]
        idx = np.nonzero(band)[0]
        if idx.size:
            bw = normalised(x_log_weights(s, qx, idx))
            bw[~np.isfinite(bw)] = 0.0  # no band key weighs: its share is 0 too
        else:
            bw = np.zeros((qx.shape[0], 0))
        kernel = s.kernel
        return cls(t, sr.rho * h, h, co, np.where(idx.size, share, 0.0), y[idx], bw,
                   lambda v: kernel_cdf(kernel, v), lambda v: kernel.profile(v))

    def at(
        self, rows: NDArray[np.intp], y: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``F`` and ``F'`` of the queries ``rows`` at ``y`` (within the cell)."""
        d = (y - self.t) / self.half
        c = self.coef[rows]
        f = c[:, -1].copy()
        df = np.zeros_like(f)
        for r in range(c.shape[1] - 2, -1, -1):  # Horner, with the derivative alongside
            df = df * d + f
            f = f * d + c[:, r]
        df /= self.half
        if self.band_y.size:
            v = (y[:, None] - self.band_y[None, :]) / self.h
            w = self.band_w[rows]
            f = f + self.share[rows] * (w * self.cdf_of(v)).sum(axis=1)
            df = df + self.share[rows] * (w * self.pdf_of(v)).sum(axis=1) / self.h
        return f, df


def _grid(s: Sample, sr: Series) -> tuple[float, float]:
    """The cells' origin and width: cell ``k`` is ``y0 + k w +- w / 2``."""
    return float(np.min(s.y[:, 0])), 2.0 * sr.rho * float(s.hy[0])


def cdf(
    s: Sample, qx: NDArray[np.float64], qy: NDArray[np.float64], tol: float | None
) -> NDArray[np.float64]:
    """``F(qy_j | qx_j)`` for one continuous y column, grouped by the cell of ``qy_j``."""
    sr = Series.of(s.kernel.name)
    y, h = s.y[:, 0], float(s.hy[0])
    y0, width = _grid(s, sr)
    # beyond reach, G is 0 or 1 (to double precision): the point moves to the last cell's edge
    room = sr.reach * h + width
    at = np.clip(qy, y.min() - room, y.max() + room)
    cell = np.rint((at - y0) / width)
    out = np.full(at.size, np.nan)
    ok = ~np.isnan(at)
    keys, group = np.unique(cell[ok], return_inverse=True)
    rows_ok = np.nonzero(ok)[0]
    with _blas().limit(limits=1, user_api="blas"):  # BLAS threads on the cells' small products cost more
        for g, k in enumerate(keys):
            rows = rows_ok[group == g]
            c = Cell.sums(s, sr, qx[rows], y0 + k * width, tol)
            out[rows] = c.at(np.arange(rows.size), at[rows])[0]
    return out


def _first_reaching(f: NDArray[np.float64], alpha: NDArray[np.float64]) -> NDArray[np.intp]:
    """The first column where ``f >= alpha`` per row; -1 where none does or the row is NaN."""
    reached = f >= alpha[:, None]
    first = np.argmax(reached, axis=1)
    return np.where(reached.any(axis=1) & ~np.isnan(f).any(axis=1), first, -1)


def quantile(
    s: Sample, qx: NDArray[np.float64], levels: NDArray[np.float64], tol: float | None
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """The conditional quantiles (m, k) of one continuous y column, and the (query, level)
    pairs left to the caller (their quantile lies beyond the ladder: a level within about
    ``G(-reach)`` of 0 or 1)."""
    with _blas().limit(limits=1, user_api="blas"):  # BLAS threads on the cells' small products cost more
        return _quantile(s, qx, levels, tol)


def _quantile(
    s: Sample, qx: NDArray[np.float64], levels: NDArray[np.float64], tol: float | None
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    sr = Series.of(s.kernel.name)
    y, h = s.y[:, 0], float(s.hy[0])
    y0, width = _grid(s, sr)
    k_lo = math.floor((y.min() - sr.reach * h - y0) / width)
    k_hi = math.ceil((y.max() + sr.reach * h - y0) / width)
    edges = y0 + (np.arange(k_lo - 1, k_hi + 1) + 0.5) * width  # edge i is cell (k_lo - 1 + i)'s top
    step = max(2, math.ceil(math.sqrt(edges.size)))
    coarse = np.unique(np.r_[np.arange(0, edges.size, step), edges.size - 1])
    m, nl = qx.shape[0], levels.size

    def ladder(q: NDArray[np.float64], at: NDArray[np.float64]) -> NDArray[np.float64]:
        return ratios(s, q, kernel_cdf(s.kernel, (at[None, :] - y[:, None]) / h), tol)

    fc = ladder(qx, edges[coarse])
    qrow = np.repeat(np.arange(m), nl)
    alpha = np.tile(levels, m)
    jc = _first_reaching(fc[qrow], alpha)
    empty = np.isnan(fc[qrow]).any(axis=1)
    left = ~empty & (jc <= 0)
    out = np.full(m * nl, np.nan)
    edge = np.full(m * nl, -1)
    for j in np.unique(jc[jc > 0]):  # the edges inside each coarse step
        rows = np.nonzero(jc == j)[0]
        inner = np.arange(coarse[j - 1] + 1, coarse[j] + 1)
        f = ladder(qx[qrow[rows]], edges[inner[:-1]]) if inner.size > 1 else np.empty((rows.size, 0))
        f = np.column_stack([f, np.ones(rows.size)])  # F at the coarse step's top reaches alpha
        edge[rows] = inner[_first_reaching(f, alpha[rows])]
    cells = k_lo - 1 + edge
    for k in np.unique(cells[edge >= 0]):
        rows = np.nonzero((cells == k) & (edge >= 0))[0]
        c = Cell.sums(s, sr, qx[qrow[rows]], y0 + k * width, tol)
        lo, hi = np.full(rows.size, c.t - c.half), np.full(rows.size, c.t + c.half)
        local = np.arange(rows.size)
        f_lo, f_hi = c.at(local, lo)[0], c.at(local, hi)[0]
        a = alpha[rows]
        scale = float(np.std(y)) or h
        q = invert(c.at, a, lo, hi, scale=scale, xtol=XTOL - _NUDGE, f_lo=f_lo, f_hi=f_hi)
        # rounding between the ladder and the series (1e-16): the quantile is at an end
        q = np.where(f_hi < a, hi, np.where(f_lo >= a, lo, q))
        # F(q) >= alpha by a margin over the rounding of sums taken for other blocks of queries
        q = q + _NUDGE * np.maximum(np.abs(q), scale)
        out[rows] = q
    return out.reshape(m, nl), left.reshape(m, nl)
