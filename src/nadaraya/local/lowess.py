"""LOWESS: statsmodels' ``lowess``, same arguments and outputs, in O((n + m) log n) per pass.

The public :func:`lowess` takes statsmodels' arguments and returns its shapes; the passes run in
:mod:`._lowess_jit` (sliding tricube moments with a rounding bound, statsmodels' own formula
where the bound is loose). :func:`_smooth` is one call of the smoother on sorted data with given
robustness weights, and returns the weights of its last pass and the next ones too.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya.local import _lowess_jit as jit
from nadaraya.local._lowess_jit import regressions

__all__ = ["lowess"]

_F = NDArray[np.float64]


def _span(frac: float, n: int) -> int:
    """statsmodels' number of neighbours: ``int(frac n + 1e-10)``, at least 2, at most n."""
    return min(max(int(frac * n + 1e-10), 2), n)


def _bisquare(y: NDArray[np.float64], fit: NDArray[np.float64]) -> NDArray[np.float64]:
    """Robustness weights ``(1 - s^2)^2`` with ``s = min(1, |e| / (6 median|e|))`` (statsmodels':
    with a zero median, 1 where the residual is 0 and 0 elsewhere)."""
    res = np.abs(y - fit)
    median = float(np.median(res))
    s = (res > 0).astype(float) if median == 0 else res / (6.0 * median)
    s = np.where(s > 1, 1.0, s)
    t = 1.0 - s * s
    return t * t  # type: ignore[no-any-return]


class _Windows:
    """What does not change from pass to pass at sorted points ``xv``: the points ``q`` where
    statsmodels' loop runs a regression for ``delta``, their windows (``lo``, split ``mid``,
    radius ``rad``) and the chunks of queries (``starts``)."""

    def __init__(self, x: _F, xv: _F, k: int, delta: float) -> None:
        self.k = k
        self.delta = float(delta)
        self.xv = xv
        self.q = np.ascontiguousarray(xv[jit.fit_points(xv, self.delta)])
        self.lo, self.mid, self.rad, self.starts = jit.plan_windows(x, self.q, k)


def _regressions(x: _F, y: _F, r: _F, win: _Windows, tol: float = jit.FIT_TOL,
                 sums: _F | None = None) -> tuple[_F, NDArray[np.int8]]:
    """The local fits at the windows' queries with robustness weights ``r``, and each one's
    route (:func:`._lowess_jit.fits`: 0 moments, 1 fewer than two weights, 2 summed directly,
    4 from the blocks' moments of :mod:`._lowess_blocks`); those of routes 0 and 4 within
    ``tol`` of ``max|y|``, their sums ``S0, S1, S2, T0, T1`` in ``sums`` (m, 5) when given."""
    return regressions(x, y, r, win.q, win.lo, win.mid, win.rad, win.k, win.starts, tol, sums)


def _pass(x: _F, y: _F, r: _F, win: _Windows, given: bool) -> _F:
    """One pass: the fits at ``win.xv`` with robustness weights ``r`` (statsmodels' loop,
    ``delta`` included; a regression with fewer than two weights gives ``y[i]``, or NaN when
    ``given``)."""
    out, state = _regressions(x, y, r, win)
    fallback = np.full(win.xv.shape[0], np.nan) if given else y
    return jit.assemble(win.xv, win.delta, out, state == 1, fallback)  # type: ignore[no-any-return]


def _smooth(x: _F, y: _F, xv: _F, r: _F, frac: float, it: int, delta: float,
            given: bool) -> tuple[_F, _F, _F]:
    """statsmodels' ``_lowess`` on sorted ``x`` (and sorted ``xv``): ``it + 1`` passes starting
    from robustness weights ``r``, new weights after each pass unless ``given``. Returns the
    fits, the robustness weights of the last pass and those after it (equal when ``given``)."""
    win = _Windows(x, xv, _span(frac, x.shape[0]), delta)
    used = r
    fit = np.empty(0)
    for _ in range(it + 1):
        used = r
        fit = _pass(x, y, r, win, given)
        if not given:
            r = _bisquare(y, fit)
    return fit, used, r


def _vector(value: Any, name: str) -> NDArray[np.float64]:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be an array of real numbers, got {type(value).__name__}") from err
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a vector (1-D), got shape {arr.shape}")
    return arr


def _check_options(frac: Any, it: Any, delta: Any, missing: Any,
                   level: Any = None) -> tuple[float, int, float, float | None]:
    if isinstance(frac, bool) or not isinstance(frac, numbers.Real) or not 0.0 <= float(frac) <= 1.0:
        raise ValueError(f"frac must be a number in [0, 1], got {frac!r}")
    if isinstance(it, bool) or not isinstance(it, numbers.Integral) or it < 0:
        raise ValueError(f"it must be a non-negative integer, got {it!r}")
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0.0 <= float(delta) < math.inf:
        raise ValueError(f"delta must be a finite number >= 0, got {delta!r}")
    if missing not in ("none", "drop", "raise"):
        raise ValueError(f"missing must be 'none', 'drop' or 'raise', got {missing!r}")
    return float(frac), int(it), float(delta), _check_level(level)


def _sorted_check(values: NDArray[np.float64], name: str) -> None:
    if values.size > 1 and bool(np.any(values[1:] < values[:-1])):  # NaN (missing="none") passes
        raise ValueError(f"is_sorted=True but {name} is not sorted in increasing order")


def lowess(endog: ArrayLike, exog: ArrayLike, frac: float = 2.0 / 3.0, it: int = 3, delta: float = 0.0,
           xvals: ArrayLike | None = None, is_sorted: bool = False, missing: str = "drop",
           return_sorted: bool = True, return_band: float | None = None) -> NDArray[np.float64]:
    """LOWESS (locally weighted scatterplot smoothing), a drop-in for statsmodels' ``lowess``.

    At each point the local linear fit to the ``k = int(frac n)`` nearest observations, weighted
    by the tricube of the distance over the distance to the farthest of them; then ``it``
    robustness passes, each weighting the observations also by the bisquare of their residual
    over six times the median absolute residual (Cleveland, 1979). Each pass costs O((n + m)
    log n) (sliding prefix moments of the tricube's polynomial pieces) instead of O(n k).

    Parameters
    ----------
    endog : array_like
        The 1-D responses ``y``.
    exog : array_like
        The 1-D predictors ``x``, as long as ``endog``.
    frac : float, default 2/3
        The span: the part of the observations in each local fit, in [0, 1] (``k = int(frac n +
        1e-10)``, at least 2 and at most n).
    it : int, default 3
        The number of robustness passes after the first fit.
    delta : float, default 0.0
        Fit only at points more than ``delta`` apart and interpolate linearly in between
        (statsmodels' rule; points tied in ``x`` share one fit). Not with ``xvals``.
    xvals : array_like, optional
        Points at which to evaluate the fit (robustness weights from ``it`` passes over the
        data, then one fit at these points). Then the result is 1-D, in ``xvals``' order.
    is_sorted : bool, default False
        Whether ``exog`` (and ``xvals``) are sorted in increasing order already.
    missing : {"drop", "none", "raise"}, default "drop"
        What to do with non-finite values: drop those observations (and points of ``xvals``),
        nothing, or raise a ValueError.
    return_sorted : bool, default True
        Return the sorted ``x`` beside the fits, as an ``(n, 2)`` array; else the fits alone in
        the input's order (NaN where an observation was dropped).
    return_band : float, optional
        A level in (0, 1), e.g. 0.95: also a pointwise band ``fit -+ z se``, two more columns
        (see Returns): ``se`` the exact standard error of the smoother with the final robustness
        weights, one noise variance (:func:`_band_se`; the user guide's page on nearest-neighbour
        bandwidths). It covers the smoothed curve, not its bias; O(n (n + m)).

    Returns
    -------
    ndarray
        ``(n, 2)`` sorted ``x`` and fits when ``return_sorted`` and no ``xvals``; else the 1-D
        fits. With ``return_band``: ``(n, 4)`` sorted ``x``, fits, lower, upper; ``(n, 3)``
        fits, lower, upper (``return_sorted=False``); ``(m, 3)`` with ``xvals``. A fit with
        fewer than two positive weights is the observation's own ``y`` (NaN at ``xvals``).

    Raises
    ------
    ValueError
        For shapes that differ, ``frac`` outside [0, 1], a negative ``it`` or ``delta``, ``delta >
        0`` with ``xvals``, an unknown ``missing`` or ``return_band``, non-finite values with
        ``missing="raise"``, no observation left, or ``is_sorted=True`` with unsorted data.

    Notes
    -----
    The results equal statsmodels' to rounding (1e-10 of ``max|y|`` is tested, the differences
    are of order 1e-14). The rules are statsmodels', ties included: the window at a point is
    ``k`` consecutive observations in the order of ``np.argsort(exog)`` (statsmodels' sort), so
    observations tied in ``x`` at the window's far end are in or out by that order, not all in
    as in a textbook "every point within the k-th distance" rule; the radius is the distance to
    the farther end of the window; the first of a run of tied points is fitted and the fit is
    copied to the others. Where ``|x|`` is large against the span (``x`` in ``1e6 + [0, 1]``)
    statsmodels' sums about 0 lose digits (1e-8 of ``max|y|`` measured); these sums are taken
    about each point and keep them.

    Each fit is exact: where the sliding moments' rounding bound could exceed 3e-11 of ``max|y|``
    (under 0.1% of the fits on uniform ``x``, 2% on Cauchy ``x``) the fit comes from moments of
    key blocks about their own centres (:mod:`._lowess_blocks`), else a direct O(k) sum.

    References
    ----------
    Cleveland, W. S. (1979). Robust locally weighted regression and smoothing scatterplots.
    Journal of the American Statistical Association 74(368), 829-836.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya import lowess
    >>> x = np.linspace(0.0, 1.0, 50)
    >>> out = lowess(2.0 * x + 1.0, x, frac=0.3)
    >>> out.shape, bool(np.allclose(out[:, 1], 2.0 * x + 1.0))  # a line is reproduced
    ((50, 2), True)
    >>> lowess(2.0 * x + 1.0, x, xvals=[0.25, 0.5]).round(12).tolist()
    [1.5, 2.0]
    """
    frac, it, delta, level = _check_options(frac, it, delta, missing, return_band)
    y_in = _vector(endog, "endog")
    x_in = _vector(exog, "exog")
    if y_in.shape[0] != x_in.shape[0]:
        raise ValueError(f"exog and endog must have the same length, got {x_in.shape[0]} and {y_in.shape[0]}")
    given = xvals is not None
    if given and delta != 0.0:
        raise ValueError(f"delta must be 0 with xvals, got delta={delta!r}")
    valid = np.ones(x_in.shape[0], dtype=bool) if missing == "none" else np.isfinite(x_in) & np.isfinite(y_in)
    if missing == "raise" and not valid.all():
        raise ValueError("nan or inf found in endog or exog with missing='raise'")
    x, y = x_in[valid], y_in[valid]
    if x.shape[0] == 0:
        raise ValueError("endog and exog hold no observation" + (" with finite values" if x_in.size else ""))
    order = None
    if is_sorted:
        _sorted_check(x, "exog")
    else:
        order = np.argsort(x)
        x, y = x[order], y[order]
    x = np.ascontiguousarray(x)
    y = np.ascontiguousarray(y)
    if given:
        at, r = _at(x, y, xv_all := _vector(xvals, "xvals"), frac, it, is_sorted, missing)
        return at if level is None else _band_at(x, y, r, _span(frac, x.shape[0]), at, xv_all, level)
    fit, used, _ = _smooth(x, y, x, np.ones_like(x), frac, it, delta, False)
    if level is None:
        return np.array([x, fit]).T if return_sorted else _unsorted(fit, order, valid)
    se, z = _band_se(x, y, used, _span(frac, x.shape[0]), x, level)
    cols = (fit, fit - z * se, fit + z * se)
    return np.array([x, *cols]).T if return_sorted else np.array([_unsorted(a, order, valid) for a in cols]).T


def _band_at(x: _F, y: _F, r: _F, k: int, at: _F, xv_all: _F, level: float) -> _F:
    """``(m, 3)``: the fits at ``xvals`` and their band (NaN where a point was dropped)."""
    fin = np.isfinite(xv_all)
    pos = fin if at.shape == xv_all.shape else np.ones(at.shape, dtype=bool)  # shorter: dropped
    lo, hi = np.full_like(at, np.nan), np.full_like(at, np.nan)
    se, z = _band_se(x, y, r, k, xv_all[fin], level)
    lo[pos], hi[pos] = at[pos] - z * se, at[pos] + z * se
    return np.array([at, lo, hi]).T


def _check_level(level: Any) -> float | None:
    if level is None:
        return None
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"return_band must be None or a level in (0, 1), e.g. 0.95; got {level!r}")
    return float(level)


def _band_se(x: _F, y: _F, r: _F, k: int, points: _F, level: float) -> tuple[_F, float]:
    """The standard errors at ``points`` of the local linear tricube fit with ``k`` neighbours
    and sample weights ``r``, and the normal quantile of ``level``: ``se(q)^2 = sigma^2 sum_j
    a_j(q)^2 / r_j`` (``a`` the fit's weights over the observations), ``sigma^2 = sum_i r_i e_i^2
    / (sum_i r_i - tr H)``, as :meth:`nadaraya.NadarayaWatson.confidence_band` gives with
    ``variance="homoscedastic"`` for ``kernel="tricube", degree=1,
    bandwidth_type="generalized_nn", bandwidth=k, robust_iterations=it``."""
    from scipy.stats import norm

    from nadaraya.kernels import get as get_kernel
    from nadaraya.local.neighbours import Geometry, rows

    geom = Geometry(x[:, None], np.array([k]), "generalized_nn")
    tricube = get_kernel("tricube")
    n = x.shape[0]
    fits, hat = np.empty(n), np.empty(n)
    for sl, A, _, _ in rows(geom, x[:, None], r, tricube, 1):
        fits[sl] = A @ y
        hat[sl] = A[np.arange(A.shape[0]), np.arange(sl.start, sl.stop)]
    sigma2 = float(r @ (y - fits) ** 2) / max(float(r.sum() - hat.sum()), 1.0)
    inv = 1.0 / np.where(r > 0, r, 1.0)
    var = np.empty(points.shape[0])
    for sl, A, _, _ in rows(geom, np.ascontiguousarray(points)[:, None], r, tricube, 1):
        var[sl] = (A**2) @ inv * sigma2
    return np.sqrt(var), float(norm.ppf(0.5 + level / 2))


def _unsorted(fit: _F, order: NDArray[np.intp] | None, valid: NDArray[np.bool_]) -> _F:
    """The fits back in the input's order (``order`` the sort's, when it sorted), NaN where an
    observation was dropped (``valid`` False)."""
    out = fit
    if order is not None:
        out = np.full(fit.shape[0], np.nan)
        out[order] = fit
    if not valid.all():
        full = np.full(valid.shape[0], np.nan)
        full[valid] = out
        out = full
    return out


def _at(x: NDArray[np.float64], y: NDArray[np.float64], xv_in: NDArray[np.float64], frac: float, it: int,
        is_sorted: bool, missing: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The fits at ``xvals`` in their order: weights from ``it`` passes over the data, then one
    pass at the points (statsmodels' shapes, NaN at dropped points); and those weights."""
    ok = np.ones(xv_in.shape[0], dtype=bool) if missing == "none" else np.isfinite(xv_in)
    if missing == "raise" and not ok.all():
        raise ValueError("nan or inf found in xvals with missing='raise'")
    xv = xv_in[ok]
    order = None
    if is_sorted:
        _sorted_check(xv, "xvals")
    else:
        order = np.argsort(xv)
        xv = xv[order]
    if it > 0:
        _, _, r = _smooth(x, y, x, np.ones_like(x), frac, it - 1, 0.0, False)
    else:
        r = np.ones_like(x)
    if xv.shape[0] == 0:
        fit = np.empty(0)
    else:
        fit, _, _ = _smooth(x, y, np.ascontiguousarray(xv), r, frac, 0, 0.0, True)
    if order is not None:
        out = np.full(xv.shape[0], np.nan)
        out[order] = fit
        fit = out
    if is_sorted or ok.all():  # statsmodels returns the shorter array when is_sorted
        return fit, r
    full = np.full(xv_in.shape[0], np.nan)
    full[ok] = fit
    return full, r
