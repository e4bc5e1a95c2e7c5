"""Conditional quantiles: a monotone CDF inverted per query, vectorised, to a stated precision.

:func:`invert` finds, for each query ``j``, the quantile ``inf {y : F_j(y) >= alpha_j}`` of a
non-decreasing function ``F_j`` given as one vectorised callable (all the queries still
searching are evaluated together, as R np's ``npqreg`` inverts its conditional CDF). It keeps a
bracket ``F(lo) < alpha <= F(hi)`` and narrows it by safeguarded regula falsi (the Illinois
variant, superlinear where ``F`` is smooth) alternating with bisection (so the bracket at
least halves every two steps, also across the flat stretches that compact kernels leave), until
``hi - lo <= xtol * max(|lo|, |hi|, scale)``. It returns ``hi``: ``F`` there is at least
``alpha``, and the true quantile lies in ``[lo, hi]``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["XTOL", "bracket", "invert"]

#: the default precision of a quantile, relative to ``max(|q|, scale)``
XTOL = 1e-10

#: ``F(rows, y)``: the CDF of the queries ``rows`` at the points ``y`` (both (k,)), non-decreasing in y
Cdf = Callable[[NDArray[np.intp], NDArray[np.float64]], NDArray[np.float64]]


def bracket(
    cdf: Cdf, alpha: NDArray[np.float64], lo: NDArray[np.float64], hi: NDArray[np.float64], step: float,
    max_doublings: int = 64,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Move ``lo`` down and ``hi`` up, by steps ``step`` doubling each time, until
    ``F(lo) < alpha <= F(hi)`` for every query (or ``max_doublings`` is reached: then the
    ends are where a kernel's CDF has long rounded to 0 and 1).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import ndtr
    >>> f = lambda rows, y: ndtr(y)
    >>> lo, hi = bracket(f, np.array([1e-6, 0.5]), np.zeros(2), np.zeros(2), 1.0)
    >>> bool(ndtr(lo[0]) < 1e-6 <= ndtr(hi[0])), bool(ndtr(lo[1]) < 0.5 <= ndtr(hi[1]))
    (True, True)
    """
    lo, hi = lo.astype(np.float64).copy(), hi.astype(np.float64).copy()
    for end, below in ((lo, True), (hi, False)):
        rows = np.arange(alpha.size)
        s = step
        for _ in range(max_doublings):
            f = cdf(rows, end[rows])
            bad = (f >= alpha[rows]) if below else (f < alpha[rows])
            rows = rows[bad & np.isfinite(f)]
            if rows.size == 0:
                break
            end[rows] += -s if below else s
            s *= 2.0
    return lo, hi


def invert(
    cdf: Cdf, alpha: NDArray[np.float64], lo: NDArray[np.float64], hi: NDArray[np.float64], *,
    scale: float = 1.0, xtol: float = XTOL, max_iter: int = 400,
) -> NDArray[np.float64]:
    """The quantiles ``inf {y : F_j(y) >= alpha_j}`` within ``xtol * max(|q|, scale)``.

    Parameters
    ----------
    cdf : callable
        ``cdf(rows, y)``: the CDF of the queries ``rows`` at the points ``y``.
    alpha : ndarray of shape (m,)
        Levels in (0, 1).
    lo, hi : ndarray of shape (m,)
        A bracket: ``F(lo) < alpha <= F(hi)`` (see :func:`bracket`). A query whose bracket
        does not hold (a NaN CDF: no data near it) gets NaN.
    scale : float, default 1.0
        The scale of ``y`` below which the precision is absolute.
    xtol : float, default 1e-10
    max_iter : int, default 400

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
    flo = cdf(everyone, lo) - alpha
    fhi = cdf(everyone, hi) - alpha
    out = np.full(m, np.nan)
    ok = (flo < 0) & (fhi >= 0)
    side = np.zeros(m, dtype=np.int8)  # which end moved last (-1 lo, +1 hi): Illinois halving
    rows = everyone[ok]
    for it in range(max_iter):
        width = hi[rows] - lo[rows]
        done = width <= xtol * np.maximum(np.maximum(np.abs(lo[rows]), np.abs(hi[rows])), scale)
        out[rows[done]] = hi[rows[done]]
        rows = rows[~done]
        if rows.size == 0:
            break
        a, b, fa, fb = lo[rows], hi[rows], flo[rows], fhi[rows]
        mid = a + 0.5 * (b - a)
        if it % 2 == 0:
            with np.errstate(invalid="ignore", divide="ignore"):
                c = b - fb * (b - a) / (fb - fa)
            inside = np.isfinite(c) & (c > a) & (c < b)
            c = np.where(inside, c, mid)
        else:
            c = mid
        fc = cdf(rows, c) - alpha[rows]
        up = fc >= 0  # the quantile is at or below c: c is the new hi
        new_lo, new_hi = np.where(up, a, c), np.where(up, c, b)
        # Illinois: an end kept twice in a row has its residual halved, so the next secant
        # step lands on its side of the root
        kept = np.where(up, -1, 1).astype(np.int8)
        halve = side[rows] == -kept
        new_flo = np.where(up, np.where(halve, 0.5 * fa, fa), fc)
        new_fhi = np.where(up, fc, np.where(halve, 0.5 * fb, fb))
        lo[rows], hi[rows], flo[rows], fhi[rows] = new_lo, new_hi, new_flo, new_fhi
        side[rows] = np.where(up, 1, -1)
    else:  # pragma: no cover - the bracket halves every two steps
        out[rows] = hi[rows]
    return out
