"""Conditional quantiles: a monotone CDF inverted per query, vectorised, to a stated precision.

:func:`invert` finds, for each query ``j``, the quantile ``inf {y : F_j(y) >= alpha_j}`` of a
non-decreasing function ``F_j`` given as one vectorised callable (all the queries still
searching are evaluated together, as R np's ``npqreg`` inverts its conditional CDF). It keeps a
bracket ``F(lo) < alpha <= F(hi)`` and narrows it by safeguarded Newton steps where the density
``F'`` is given (else regula falsi, the Illinois variant), falling back to bisection whenever
a step leaves the bracket or is not under half the step before the last (so it also crosses
the flat stretches that compact kernels leave), until ``hi - lo <= xtol * max(|lo|, |hi|,
scale)``. It returns ``hi``: ``F`` there is at least ``alpha``, and the true quantile lies in
``[lo, hi]``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["XTOL", "bracket", "invert"]

#: the default precision of a quantile, relative to ``max(|q|, scale)``
XTOL = 1e-10

#: ``F(rows, y)``: the CDF of the queries ``rows`` at the points ``y`` (both (k,)), non-decreasing
#: in y; or the pair ``(F, F')`` of the CDF and its density
Cdf = Callable[[NDArray[np.intp], NDArray[np.float64]], object]


def _value(out: object) -> NDArray[np.float64]:
    return out[0] if isinstance(out, tuple) else out  # type: ignore[return-value]


def bracket(
    cdf: Cdf,
    alpha: NDArray[np.float64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    step: float,
    max_doublings: int = 64,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Move ``lo`` down and ``hi`` up, by steps ``step`` doubling each time, until
    ``F(lo) < alpha <= F(hi)`` for every query (or ``max_doublings`` is reached: then the
    ends are where a kernel's CDF has long rounded to 0 and 1). Returns the ends and ``F``
    at them.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import ndtr
    >>> f = lambda rows, y: ndtr(y)
    >>> lo, hi, f_lo, f_hi = bracket(f, np.array([1e-6, 0.5]), np.zeros(2), np.zeros(2), 1.0)
    >>> bool(np.all(f_lo < [1e-6, 0.5])), bool(np.all(f_hi >= [1e-6, 0.5])), f_lo[1] == ndtr(lo[1])
    (True, True, np.True_)
    """
    ends = [lo.astype(np.float64).copy(), hi.astype(np.float64).copy()]
    values = [np.full(alpha.size, np.nan), np.full(alpha.size, np.nan)]
    for end, value, below in ((ends[0], values[0], True), (ends[1], values[1], False)):
        rows = np.arange(alpha.size)
        s = step
        for _ in range(max_doublings):
            f = _value(cdf(rows, end[rows]))
            value[rows] = f
            bad = (f >= alpha[rows]) if below else (f < alpha[rows])
            rows = rows[bad & np.isfinite(f)]
            if rows.size == 0:
                break
            end[rows] += -s if below else s
            s *= 2.0
    return ends[0], ends[1], values[0], values[1]


def invert(
    cdf: Cdf,
    alpha: NDArray[np.float64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    *,
    scale: float = 1.0,
    xtol: float = XTOL,
    max_iter: int = 400,
    f_lo: NDArray[np.float64] | None = None,
    f_hi: NDArray[np.float64] | None = None,
    start: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """The quantiles ``inf {y : F_j(y) >= alpha_j}`` within ``xtol * max(|q|, scale)``.

    Parameters
    ----------
    cdf : callable
        ``cdf(rows, y)``: the CDF of the queries ``rows`` at the points ``y``, or the pair
        ``(F, F')`` with its density (then the steps are Newton's).
    alpha : ndarray of shape (m,)
        Levels in (0, 1).
    lo, hi : ndarray of shape (m,)
        A bracket: ``F(lo) < alpha <= F(hi)`` (see :func:`bracket`). A query whose bracket
        does not hold (a NaN CDF: no data near it) gets NaN.
    scale : float, default 1.0
        The scale of ``y`` below which the precision is absolute.
    xtol : float, default 1e-10
    max_iter : int, default 400
    f_lo, f_hi : ndarray of shape (m,), optional
        ``F(lo)`` and ``F(hi)`` when known (:func:`bracket` returns them): not evaluated again.
    start : ndarray of shape (m,), optional
        A first guess (inside the bracket), evaluated first.

    Returns
    -------
    ndarray of shape (m,)

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import ndtr, ndtri
    >>> q = invert(lambda rows, y: ndtr(y), np.array([0.05, 0.5, 0.975]), np.full(3, -10.0), np.full(3, 10.0))
    >>> bool(np.all(np.abs(q - ndtri([0.05, 0.5, 0.975])) < 1e-9))
    True
    """
    m = alpha.size
    lo, hi = lo.astype(np.float64).copy(), hi.astype(np.float64).copy()
    everyone = np.arange(m)
    flo = (_value(cdf(everyone, lo)) if f_lo is None else f_lo) - alpha
    fhi = (_value(cdf(everyone, hi)) if f_hi is None else f_hi) - alpha
    out = np.full(m, np.nan)
    ok = (flo < 0) & (fhi >= 0)
    # the last point evaluated, its residual and slope (NaN: none yet, take a secant step)
    at, f_at, d_at = np.full(m, np.nan), np.full(m, np.nan), np.full(m, np.nan)
    side = np.zeros(m, dtype=np.int8)  # which end moved last (-1 lo, +1 hi): Illinois halving
    # the last two step lengths: a step not under half the one before last bisects (as
    # Numerical Recipes' rtsafe), so the steps shrink at least geometrically
    steps = np.repeat((hi - lo)[:, None], 2, axis=1)
    rows = everyone[ok]
    for it in range(max_iter):
        a, b = lo[rows], hi[rows]
        tol = xtol * np.maximum(np.maximum(np.abs(a), np.abs(b)), scale)
        done = b - a <= tol
        out[rows[done]] = b[done]
        rows, a, b, tol = rows[~done], a[~done], b[~done], tol[~done]
        if rows.size == 0:
            break
        fa, fb = flo[rows], fhi[rows]
        mid = a + 0.5 * (b - a)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            newton = at[rows] - f_at[rows] / d_at[rows]
            secant = b - fb * (b - a) / (fb - fa)
        c = np.where(np.isfinite(newton), newton, secant)
        # a step below the precision would not shrink the bracket: step just past the root by
        # half the precision, so that the next bracket is within it
        small = np.abs(c - at[rows]) < 0.5 * tol
        c = np.where(small, at[rows] + np.where(f_at[rows] >= 0, -0.5, 0.5) * tol, c)
        slow = np.abs(c - at[rows]) > 0.5 * steps[rows, 0]
        good = np.isfinite(c) & (c > a) & (c < b) & ~slow
        c = np.where(good, c, mid)
        if it == 0 and start is not None:
            first = start[rows]
            c = np.where(np.isfinite(first) & (first > a) & (first < b), first, mid)
        res = cdf(rows, c)
        fc = _value(res) - alpha[rows]
        dc = res[1] if isinstance(res, tuple) else np.full(rows.size, np.nan)  # type: ignore[index]
        up = fc >= 0  # the quantile is at or below c: c is the new hi
        new_lo, new_hi = np.where(up, a, c), np.where(up, c, b)
        halve = side[rows] == np.where(up, 1, -1)  # one end kept twice: halve its residual
        flo[rows] = np.where(up, np.where(halve, 0.5 * fa, fa), fc)
        fhi[rows] = np.where(up, fc, np.where(halve, 0.5 * fb, fb))
        moved = np.abs(c - at[rows])
        steps[rows] = np.column_stack([steps[rows, 1], np.where(np.isfinite(moved), moved, b - a)])
        lo[rows], hi[rows] = new_lo, new_hi
        at[rows], f_at[rows], d_at[rows] = c, fc, np.where(dc > 0, dc, np.nan)
        side[rows] = np.where(up, 1, -1)
    else:  # pragma: no cover - the bracket halves at least every four steps
        out[rows] = hi[rows]
    return out
