"""The bandwidth search: a coarse grid, a scalar refinement, and per-feature steps."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya._support.validation import as_tol
from nadaraya.bandwidth._multistart import _OUT
from nadaraya.bandwidth._objective import (
    BandwidthSelection,
    BandwidthWarning,
    _check_enough,
    _nn_linf,
    _Objective,
    _smoothed_out,
    _validate,
)
from nadaraya.bandwidth._progress import _PROGRESS, Progress, reporting
from nadaraya.bandwidth.optimise import brent, fill_in, halley, rival_minima
from nadaraya.bandwidth.rules import _pow2_scale, _rule_of_thumb, _span, _unscaled_score
from nadaraya.kernels import Kernel
from nadaraya.local.job import as_degree
from nadaraya.local.mixed import as_categorical_kernel, as_var_types

__all__ = ["reporting", "select_bandwidth"]

# --------------------------------------------------------------------------------------------
# Data-driven selection: leave-one-out cross-validation and AICc
# --------------------------------------------------------------------------------------------

#: the coarse grid: ratio sqrt(2) between neighbours, from 2**-6 to at least 2**5 times the
#: rule of thumb (and up to 3 times the data's range), over three decades
_GRID_BELOW = 12
_GRID_ABOVE = 10
#: the refinement's tolerance on log h: the bandwidth to a relative 1e-3
_XATOL = 1e-3
#: a ratio-2 grid adds the ratio-sqrt(2) points next to those within this of its best
_FILL = 5e-3
#: the per-feature search's one-pass grid (the Gaussian's) stops at 2**(this / 2) times the rule
#: of thumb: it only picks the polishes' first start, the starts with features smoothed out
#: stand for the wider bandwidths, and each level above costs a pass over every pair (no
#: far tile to skip). Where its best point is its top, the whole grid is scored after all
_PF_ABOVE = 3
#: L-BFGS-B's upper bound per feature, in units of the feature's range
_CAP = 10.0


def _bound_note(j: int | None, h: float, side: str, bound: float, method: str) -> str:
    """What a selection on a bound of the search means, for the one warning of a search."""
    where = "the search" if j is None else f"feature {j}"
    extra = (
        ", where the feature is not smoothed out yet: a larger bandwidth may score better"
        if side == "upper"
        else "; a smaller bandwidth fits the noise or, for a compact kernel, leaves points with no "
        "neighbour in their window"
    )
    return (f"{method}: the selected bandwidth of {where}, {h:.6g}, is on the {side} bound {bound:.6g} "
            f"of the search{extra}")


def _emit(notes: list[str], stacklevel: int) -> None:
    """One :class:`BandwidthWarning` for a search's notes (none when there are none), at
    ``stacklevel`` counted from the caller of this function."""
    if notes:
        warnings.warn("; ".join(notes), BandwidthWarning, stacklevel=stacklevel + 1)


def select_bandwidth(
    X: ArrayLike,
    y: ArrayLike,
    *,
    method: str = "cv",
    kernel: str | Kernel = "gaussian",
    per_feature: bool = False,
    sample_weight: ArrayLike | None = None,
    backend: str = "auto",
    progress: Progress | None = None,
    degree: int = 0,
    var_types: str | None = None,
    categorical_kernel: str = "classic",
    tol: float | None = None,
) -> BandwidthSelection:
    r"""Choose the bandwidth by exact leave-one-out cross-validation or by AICc.

    The criteria are those of :func:`score_bandwidth`. The leave-one-out predictions are
    exact: each point's own term is masked inside the sums of one pass over the pairs per
    bandwidth; nothing is refitted n times.

    **Scalar search** (one bandwidth for every feature): a coarse log-spaced grid, ratio
    ``sqrt(2)``, from ``2**-6`` to at least ``2**5`` times Scott's rule of thumb (over three
    decades, extended up to three times the data's range so that "ignore x" is on the grid),
    then a bounded refinement on ``log h`` between the grid neighbours of the best grid
    point, to a relative 1e-3; an optimum at the top of the grid is tried once more at 10**4
    times the data's range, where every feature is smoothed out, and kept there when no worse.
    The criterion has local minima; the grid is there for them. For the Gaussian kernel the
    whole grid costs one pass over the pairs: in the shifted log domain ``w(h / sqrt 2) =
    w(h)**2``, so each further grid point is a multiplication per pair
    (:mod:`nadaraya.bandwidth._passes`), and the refinement takes safeguarded Halley steps
    from the vertex of the grid's parabola: one pass gives the criterion (CV or AICc) and its
    first three derivatives along ``log h`` exactly, and two passes usually suffice. Else each
    bandwidth is one leave-one-out pass on ``backend`` and the refinement is Brent's method
    (no probes once three close points agree); the Gaussian's grid then has ratio 2, with the
    ``sqrt(2)`` points added next to those within 0.5 % of its best, and there and in local
    fits a second basin whose grid parabola may beat the best is refined too.

    **Per feature** (``per_feature=True``), within ``2**-6`` times Scott's per-feature rule
    and the larger of ``2**5`` times it and ``10**4`` times the feature's range: L-BFGS-B on
    ``log h_k`` from several starts (the grid's best point along the rule, the same with
    features smoothed out where that costs nothing, the rule itself, where statsmodels' search
    starts), loosely from each and tightly from the best, then a coordinate sweep on a grid per
    feature (:mod:`nadaraya.bandwidth._multistart`; the design page says how each step pays).
    The Gaussian's criterion gives L-BFGS-B its analytic gradient; other kernels take finite
    differences, and compact ones polish every start tightly (their criterion has kinks). A
    feature is in ``smoothed_out`` only where its upper bound scores no higher than every
    finite bandwidth of its profile (the others held).

    **Warnings.** A feature smoothed out is a normal outcome: it is recorded in
    ``smoothed_out``, not warned about. An optimum on any other bound (the lower one, or the
    top of the scalar grid where the features are not smoothed out yet) and a constant ``y``
    raise one :class:`BandwidthWarning` per call, pointing at the caller's line.

    For compact kernels ``"cv"`` stays above the least bandwidth giving every point a neighbour.

    **The textbook's learnable w is this problem**: Dive into Deep Learning's attention pooling,
    trained on the leave-one-out loss, learns ``w = 1 / h`` of ``method="cv"`` (the README).

    Parameters
    ----------
    X : array-like of shape (n, d) or (n,)
    y : array-like of shape (n,) or (n, p)
    method : {"cv", "aicc"}, default "cv"
    kernel : str or Kernel, default "gaussian"
    per_feature : bool, default False
        One bandwidth per feature instead of one for all.
    sample_weight : array-like of shape (n,), optional
        Weights of the points in the sums and the criterion (zero-weight points left out).
    backend : str, default "auto"
        The backend of the single-bandwidth passes.
    progress : callable, optional
        Called as ``progress(stage, n_evaluated, n_passes)`` after each bandwidth evaluated
        (``stage`` among ``"grid"``, ``"refine"``, ``"per_feature"``), e.g. for a progress
        bar; see :func:`reporting` for searches run by ``NadarayaWatson.fit``.
    degree, var_types, categorical_kernel
        As for :func:`nadaraya.pool`. Categorical columns get their own bandwidth or
        ``lambda``, chosen jointly with the others (the guide's local-fits page).
    tol : float, optional
        Per leave-one-out pass, as in :func:`nadaraya.pool`; the Gaussian's passes take the series where they
        pay: at ``degree=0`` in 1-D, at ``degree`` 1 or 2 in 1 to 3 continuous features. Else exact.

    Returns
    -------
    BandwidthSelection

    Raises
    ------
    ValueError
        Fewer than 3 points, NaN or inf in ``X`` or ``y``, a feature with zero spread, an
        unknown method or kernel.

    Warns
    -----
    BandwidthWarning
        At most once per call: when ``y`` is constant (every bandwidth fits it equally well:
        Scott's rule of thumb is returned), or when the optimum is on a bound of the search
        that does not smooth the feature out.

    Examples
    --------
    >>> import numpy as np
    >>> import nadaraya
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 5, 200); y = 2 * np.sin(x) + x + rng.normal(0, 0.5, 200)
    >>> res = nadaraya.select_bandwidth(x, y)
    >>> bool(0.1 < res.bandwidth[0] < 1.0), res.n_passes < 20
    (True, True)
    """
    x, Y, sw, k = _validate(X, y, method, kernel, sample_weight)
    tol = as_tol(tol)
    deg = as_degree(degree)
    vt = as_var_types(var_types, x.shape[1])
    ck = as_categorical_kernel(categorical_kernel)
    notes: list[str] = []
    with contextlib.nullcontext() if progress is None else reporting(progress):
        res = _select_bandwidth(x, Y, sw, k, method, per_feature, backend, notes=notes, degree=deg,
                                var_types=vt, categorical_kernel=ck, tol=tol)
    _emit(notes, stacklevel=2)  # at the caller's line
    return res


def _select_bandwidth(
    x: NDArray[np.float64],
    Y: NDArray[np.float64],
    sw: NDArray[np.float64] | None,
    k: Kernel,
    method: str,
    per_feature: bool,
    backend: str = "auto",
    *,
    notes: list[str] | None = None,
    degree: int = 0,
    var_types: str | None = None,
    categorical_kernel: str = "classic",
    tol: float | None = None,
) -> BandwidthSelection:
    """:func:`select_bandwidth` on validated input, which it trusts: ``x`` (n, d) and ``Y``
    (n, p) finite float64, ``sw`` (n,) finite and non-negative float64 or None, ``k`` a
    :class:`~nadaraya.kernels.Kernel` and ``method`` one of :data:`METHODS`. It checks only
    what depends on the data (at least 3 points of positive weight, no feature without
    spread). Points sorted by their first feature are not sorted again.

    What is worth a warning goes to ``notes`` when given, for the public caller to warn once
    at its own caller's line; without ``notes``, one :class:`BandwidthWarning` is raised here,
    pointing at the caller of this function."""
    _check_enough(x.shape[0], sw)
    if var_types is not None and set(var_types) - {"c"}:
        from nadaraya._support.threads import one_blas_thread
        from nadaraya.bandwidth.local import select_mixed

        # L-BFGS-B's and the small solves' BLAS calls on a few numbers: OpenBLAS's threads only
        # fight numba's passes and other processes for the cores there
        with one_blas_thread():
            res = select_mixed(x, Y, sw, k, method, backend, degree, var_types, categorical_kernel,
                               _PROGRESS.get())
        return _representable(res, x)
    # Exact powers of two bring X, y and the weights to a safe range: the search then runs as
    # at unit scale (no squared residual overflows or underflows, no spread is lost), and the
    # result is scaled back. Data already in range are left as they are.
    x_in = x
    x, x_exp = _pow2_scale(x, _span(x))
    Y, y_exp = _pow2_scale(Y, np.full(Y.shape[1], np.abs(Y).max()))
    w_exp = 0
    if sw is not None:
        sw, w_exps = _pow2_scale(sw[:, None], np.array([sw.max()]))
        sw, w_exp = sw[:, 0], int(w_exps[0])
    unit = np.ldexp(1.0, x_exp)
    rot = _rule_of_thumb(x, "scott", k, sw)
    if degree:
        from nadaraya.bandwidth.local import LocalObjective

        obj: _Objective = LocalObjective(x, Y, sw, k, method, backend, w_exp, degree=degree, tol=tol)
    else:
        obj = _Objective(x, Y, sw, k, method, backend, w_exp, tol=tol)
    obj.progress = _PROGRESS.get()
    state = _Search.start(obj, rot, per_feature, unit)
    res = _search(state)
    if notes is None:
        _emit(state.notes, stacklevel=2)
    else:
        notes.extend(state.notes)
    if not (x_exp.any() or y_exp.any()):
        return res
    search = dict(res.search)
    with np.errstate(over="ignore"):  # bounds beyond float64 (a range near 1e308) are inf
        search["bandwidths"] = search["bandwidths"] * unit
        bandwidth, bounds = res.bandwidth * unit, res.bounds * unit[:, None]
    search["scores"] = _unscaled_score(search["scores"], method, int(y_exp[0]))
    return _representable(dataclasses.replace(
        res,
        bandwidth=bandwidth,
        score=float(_unscaled_score(np.array([res.score]), method, int(y_exp[0]))[0]),
        rule_of_thumb=res.rule_of_thumb * unit,
        bounds=bounds,
        search=search,
    ), x_in)


def _representable(res: BandwidthSelection, x: NDArray[np.float64]) -> BandwidthSelection:
    """``res``, or a ValueError naming the column of ``X`` whose chosen bandwidth is beyond
    float64's range (a column whose range is near 1e308, where the search scores a bandwidth
    it cannot return)."""
    bad = np.flatnonzero(~np.isfinite(res.bandwidth))
    if bad.size:
        j = int(bad[0])
        with np.errstate(over="ignore"):
            lo, hi = float(np.min(x[:, j])), float(np.max(x[:, j]))
        if res.smoothed_out[j]:
            what = "the search smooths it out (the fit does not depend on it) at a bandwidth"
            fix = "drop it, or "
        else:
            what, fix = "the bandwidth the search chose for it is", ""
        raise ValueError(
            f"X column {j} spans {lo:.3g} to {hi:.3g}: {what} beyond float64's range (about 1.8e308); "
            f"{fix}rescale the column (divide it by a power of ten) and select again"
        )
    return res


@dataclasses.dataclass
class _Search:
    """One search's fixed parts: the criterion, Scott's rule, and the direction ``h = t * direction``
    along which the grid and the scalar refinement run; ``unit`` scales bandwidths back for
    messages."""

    obj: _Objective
    kernel: Kernel
    method: str
    per_feature: bool
    rot: NDArray[np.float64]
    geo: float
    direction: NDArray[np.float64]
    span: NDArray[np.float64]
    unit: NDArray[np.float64]
    #: what the search found worth a warning (a bound that is not the smoothing-out one, constant y)
    notes: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def start(
        cls, obj: _Objective, rot: NDArray[np.float64], per_feature: bool, unit: NDArray[np.float64]
    ) -> _Search:
        geo = float(np.exp(np.mean(np.log(rot))))
        direction = rot / geo if per_feature else np.ones(obj.d)
        return cls(obj, obj.kernel, obj.method, per_feature, rot, geo, direction, np.ptp(obj.X, axis=0), unit)

    @property
    def d(self) -> int:
        return self.obj.d

    def result(
        self, h: NDArray[np.float64], score: float, bounds: NDArray[np.float64], converged: bool, msg: str,
        smoothed: NDArray[np.bool_] | None = None,
    ) -> BandwidthSelection:
        """The selection; ``smoothed`` defaults to the features whose weights hardly vary."""
        return BandwidthSelection(
            bandwidth=np.asarray(h, dtype=np.float64),
            score=float(score),
            method=self.method,
            kernel=self.kernel.name,
            per_feature=self.per_feature,
            smoothed_out=_smoothed_out(self.kernel, h, self.span) if smoothed is None else smoothed,
            rule_of_thumb=self.rot,
            bounds=bounds,
            search=self.obj.record(),
            n_passes=self.obj.n_passes,
            converged=converged,
            message=msg,
        )


def _search(s: _Search) -> BandwidthSelection:
    """The grid, then the scalar refinement or the per-feature steps."""
    d, method = s.d, s.method
    if np.ptp(s.obj.Y, axis=0).max() == 0:
        s.notes.append(
            f"y is constant, so every bandwidth fits it exactly and {method} cannot choose; "
            "returning Scott's rule of thumb"
        )
        h = s.rot if s.per_feature else np.full(d, s.geo)
        return s.result(h, s.obj.at(h, "grid"), np.stack([h, h], axis=1), True, "constant y: rule of thumb")
    ts, grid, t_floor = _grid(s)
    best = int(np.argmin(grid))
    if not np.isfinite(grid[best]):
        raise ValueError(f"{method} is infinite at every bandwidth on the grid; the data are degenerate")
    if s.per_feature and d > 1:
        # L-BFGS-B refines every direction from the best grid point instead
        return _per_feature(s, ts, float(ts[best]), float(grid[best]), t_floor)
    t_best, s_best, converged, how = _refine(s, ts, grid, best)
    top, bottom = float(ts[0]), float(ts[-1])
    if best == 0:
        # the top of the grid (a few times the data's range) may not smooth every feature out
        # yet; the criterion flattens out beyond it, so one more pass at the bandwidth that does
        # (the per-feature search's upper bound) settles it: kept when no worse
        t_out = float(np.max(_OUT * s.span / s.direction))
        if t_out > top:
            s_out = s.obj.at(t_out * s.direction, "refine")
            top = t_out  # the search's upper bound
            if s_out <= s_best:
                t_best, s_best, how = t_out, s_out, f"{how}, then smoothed out"
    if getattr(s.obj, "coarse_grid", False) or _filled(s):
        for i in rival_minima(np.log(ts), grid, best):  # another basin that may win, refined
            t_i, s_i, converged_i, how_i = _refine(s, ts, grid, i)
            if s_i < s_best:
                best, t_best, s_best, converged, how = i, t_i, s_i, converged_i, f"{how_i} in a second basin"
    if best == 0 or best == ts.size - 1:
        side, bound = ("upper", top) if best == 0 else ("lower", bottom)
        # the top of the search smooths the features out, a normal outcome that ``smoothed_out``
        # records; it is worth a warning only where the features are not smoothed out there
        flat = side == "upper" and _smoothed_out(s.kernel, t_best * s.direction, s.span).all()
        if abs(math.log(t_best / bound)) < 2 * _XATOL and not flat:
            j0 = None if d > 1 else 0
            s.notes.append(_bound_note(j0, t_best * s.unit[0], side, bound * s.unit[0], method))
    bounds = np.stack([bottom * s.direction, top * s.direction], axis=1)
    h = t_best * s.direction
    # a feature whose weights hardly vary is smoothed out only where its removal (its
    # bandwidth at the per-feature search's upper bound) scores no higher
    smoothed = _smoothed_out(s.kernel, h, s.span)
    for j in np.flatnonzero(smoothed):
        trial = h.copy()
        trial[j] = max(h[j], _OUT * s.span[j])
        if trial[j] > h[j] and not s.obj.at(trial, "refine") <= s_best + 1e-12 * abs(s_best):
            smoothed[j] = False
    return s.result(h, s_best, bounds, converged, f"grid of {ts.size} and {how} on log h", smoothed)


def _filled(s: _Search) -> bool:
    """Whether the scalar grid has ratio 2, filled in near its best (``fill_in``): the Gaussian's
    smooth criterion where each point costs a pass (the cells, the series: not the fast passes)."""
    return not (s.obj.fast or getattr(s.obj, "coarse_grid", False)) and s.kernel.name == "gaussian"


def _grid(s: _Search) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """The coarse grid in ``t`` (descending) and its scores; ``t_floor`` > 0 where a compact
    kernel's CV needs every point to have a neighbour in its window. The per-feature search's
    one-pass grid (the Gaussian's) stops at ``2**(_PF_ABOVE / 2)`` times the rule of thumb, and
    is scored whole only where its best point is that top."""
    t_floor = 0.0
    if s.kernel.compact and s.method == "cv":
        t_floor = _nn_linf(s.obj.X / s.direction) * (1.0 + 1e-9)
    reach = float(np.max(s.span / s.direction))
    n_above = max(_GRID_ABOVE, math.ceil(2.0 * math.log2(max(1.0, 3.0 * reach / s.geo))))
    # ratio sqrt(2); 2 where each point costs a pass of its own (local fits: Brent refines), and
    # for the Gaussian's per-pass search that grid keeps both ends of the fine one and is filled in
    ks = np.arange(n_above, -_GRID_BELOW - 1, -(2 if getattr(s.obj, "coarse_grid", False) else 1))
    if _filled(s):
        ks = np.unique(np.append(np.arange(-_GRID_BELOW, n_above + 1, 2), n_above))[::-1]
    ts = s.geo * 2.0 ** (ks / 2.0)  # descending
    if t_floor > 0:
        ts = ts[ts > t_floor]
        if ts.size == 0 or ts[-1] > t_floor * 1.01:
            ts = np.append(ts, t_floor)
    if s.obj.fast and s.per_feature and s.d > 1 and ks[0] > _PF_ABOVE:
        # the levels from _PF_ABOVE down; those above only where the best is that top (ts is cut
        # at t_floor from below only, so its first levels are ks's first)
        above = int(np.count_nonzero(ks > _PF_ABOVE))
        grid = s.obj.levels(ts[above] * s.direction, ts.size - above)
        if int(np.argmin(grid)) > 0:
            return ts[above:], grid, t_floor
        grid = np.concatenate([s.obj.levels(ts[0] * s.direction, above), grid])
    elif s.obj.fast:
        grid = s.obj.levels(ts[0] * s.direction, ts.size)
    else:
        grid = np.array([s.obj.at(t * s.direction, "grid") for t in ts])
        if _filled(s):
            # the fine grid's points next to each point within _FILL of the best (relative
            # for CV; absolute for AICc, whose differences are relative ones of the variance)
            margin = _FILL * (abs(float(np.min(grid))) if s.method == "cv" else 1.0)
            ts, grid = fill_in(lambda t: s.obj.at(t * s.direction, "grid"), ts, grid, margin)
    return ts, grid, t_floor


def _refine(
    s: _Search, ts: NDArray[np.float64], grid: NDArray[np.float64], best: int
) -> tuple[float, float, bool, str]:
    """The scalar refinement on ``log t`` between the neighbours of the best grid point:
    ``(t, score, converged, how)``."""
    lo = ts[min(best + 1, ts.size - 1)]
    hi = ts[max(best - 1, 0)]
    t_best, s_best = float(ts[best]), float(grid[best])
    obj, direction = s.obj, s.direction
    if 0 < best < ts.size - 1:
        # the grid's three values around its best point are the first bracket: no evaluation
        # is spent on it (in log t, ascending); the Gaussian takes Halley steps with exact
        # derivatives, the other kernels Brent's parabolas
        bracket = (math.log(lo), math.log(ts[best]), math.log(hi))
        values = (float(grid[best + 1]), float(grid[best]), float(grid[best - 1]))
        if s.obj.fast:
            how = "Halley"
            x_best, s_new, converged = halley(lambda lt: obj.curvature(math.exp(lt) * direction),
                                              bracket, values, _XATOL)
        else:  # no probes where three close points promise under 1e-10 (of CV; AICc's is relative)
            how, gain = "Brent", 1e-10 * (abs(s_best) if s.method == "cv" else 1.0)
            x_best, s_new, converged = brent(lambda lt: obj.at(math.exp(lt) * direction), bracket, values,
                                             _XATOL, settled=gain)
        if s_new < s_best:
            t_best, s_best = math.exp(x_best), s_new
        return t_best, s_best, converged, how
    if not hi > lo:
        return t_best, s_best, True, "no refinement"
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(lambda lt: obj.at(math.exp(lt) * direction), bounds=(math.log(lo), math.log(hi)),
                          method="bounded", options={"xatol": _XATOL})
    if res.fun < s_best:
        t_best, s_best = math.exp(float(res.x)), float(res.fun)
    return t_best, s_best, bool(res.success), "bounded Brent"


def _per_feature(
    s: _Search, ts: NDArray[np.float64], t_best: float, s_best: float, t_floor: float
) -> BandwidthSelection:
    """From the best grid point and from Scott's rule per feature: a coordinate sweep on a
    log grid per feature, L-BFGS-B from the best points found, each feature tried smoothed
    out, and the features left smoothed out checked against their own profiles
    (:mod:`nadaraya.bandwidth._multistart`)."""
    from nadaraya._support.threads import one_blas_thread
    from nadaraya.bandwidth._multistart import (
        Memo,
        better,
        explore_kinked,
        explore_smooth,
        log_grid,
        settle,
        smooth_out,
    )
    from nadaraya.bandwidth._polish import gauss_newton, lbfgsb

    obj, d, method = s.obj, s.d, s.method
    lower = s.rot * 2.0 ** (-_GRID_BELOW / 2)
    if t_floor > 0:
        lower = np.maximum(lower, t_floor * s.direction)
    upper = np.maximum(s.rot * 2.0 ** (_GRID_ABOVE / 2), _OUT * s.span)
    # the score is scaled to order one so that L-BFGS-B's tolerances mean the same on any data
    scale = abs(s_best) if method == "cv" and s_best > 0 else 1.0
    # every bandwidth scored once: the Gaussian's gradient pass is the cheapest pass that
    # scores one bandwidth, and L-BFGS-B takes its gradient. CV is a sum of squared
    # leave-one-out residuals: that pass gives its Gauss-Newton matrix too, on which the loose
    # polishes from the starts take Levenberg-Marquardt steps (three of them reach about as far
    # as L-BFGS-B's five to eight; near the minimum, where the residuals' own curvature counts,
    # Gauss-Newton slows down, so the tight polish stays L-BFGS-B)
    newton = obj.fast and method == "cv"
    # (the features at their upper bound are held there by every polish: no moments for them)
    def value_grad(h: NDArray[np.float64]) -> tuple[Any, ...]:
        return obj.with_gradient(h, gauss_newton=newton, held=h >= upper)

    f = Memo(lambda h: obj.at(h, "per_feature"), value_grad if obj.fast else None,
             column=obj.column if obj.fast else None, graded=newton)
    # L-BFGS-B stays below ten times each feature's range, where its weights vary by less than
    # 1 % and the criterion is flat: a feature past its range is tried smoothed out instead
    # (a compact kernel's search keeps the whole range)
    cap = upper if s.kernel.compact else np.clip(_CAP * s.span, 2.0 * lower, upper)
    tight = lbfgsb(f, scale, lower, cap, upper)
    loose = gauss_newton(f, scale, lower, cap, upper) if newton else tight
    status: list[Any] = []

    def polish(h0: NDArray[np.float64], tolerance: str = "tight") -> tuple[NDArray[np.float64], float]:
        if tolerance == "loose":
            h1, s1, res = loose(h0, tolerance)
        else:
            if newton:  # Gauss-Newton's steps ahead: they cross flat profiles where L-BFGS-B crawls
                h0, _, _ = loose(h0, "lead")
            h1, s1, res = tight(h0, tolerance)
        status.append(res)
        return h1, s1

    # each feature's grid: ratio 4 from the lower bound to a few times its range, and the
    # upper bound, where it is smoothed out; its profile (to settle whether it is smoothed
    # out) is that grid's finite part
    finite = [log_grid(lower[j], max(3.0 * s.span[j], 2.0 * lower[j]), 4.0) for j in range(d)]
    grids = [np.append(g, upper[j]) for j, g in enumerate(finite)]
    h_grid = np.clip(t_best * s.direction, lower, upper)
    h_rot = np.clip(s.rot, lower, upper)
    # L-BFGS-B's BLAS calls on a few numbers: OpenBLAS's thread pool only fights numba's
    # for the cores there
    with one_blas_thread():
        f.values[h_grid.tobytes()] = s_best  # scored on the grid
        # loose polishes from distinct starts find a smooth criterion's basins; a compact
        # kernel's kinks stall them, and its search sweeps and polishes tightly from each start
        if s.kernel.compact:
            h, sc = explore_kinked(f, polish, h_grid, s_best, h_rot, grids)
        else:
            h, sc = explore_smooth(f, polish, h_grid, s_best, h_rot, grids, upper, s.span)
        # The criterion flattens out as a useless feature's bandwidth grows, so its gradient
        # vanishes long before the bound and L-BFGS-B would crawl there: each feature whose
        # bandwidth has grown past its range is tried smoothed out (at its upper bound)
        h, sc, moved = smooth_out(f, h, sc, upper, s.span)
        if moved:
            h, sc = better(polish(h), (h, sc))
        # a feature stays smoothed out only where no finite bandwidth of its profile scores lower
        flat = np.flatnonzero(_smoothed_out(s.kernel, h, s.span) | (h >= upper))
        h, sc, smoothed, moved = settle(f, h, sc, flat, upper, finite, [True] * d, refine_moves=False)
        if moved:
            h, sc = better(polish(h), (h, sc))
            flat = np.flatnonzero(_smoothed_out(s.kernel, h, s.span) | (h >= upper))
            h, sc, smoothed, _ = settle(f, h, sc, flat, upper, finite, [True] * d, refine_moves=False)
        if obj.fast and h.tobytes() not in f.exact:
            # the score reported: one exact pass at the returned bandwidth (the gradient pass
            # borrows its shifts and can misjudge rows whose every weight is near the flush limit)
            sc = obj.at(h, "per_feature")
        elif obj.fast:
            sc = f.values[h.tobytes()]  # scored exactly (the column pass's own shifts) before
    res = status[-1]
    # a feature on its upper bound is smoothed out (``smoothed_out`` says so): no warning for
    # that normal outcome, only for a bound that is not the smoothing-out one
    for j in range(d):
        hj, unit = float(h[j]), float(s.unit[j])
        if abs(math.log(hj / upper[j])) < 1e-6 and not smoothed[j]:
            s.notes.append(_bound_note(j, hj * unit, "upper", float(upper[j]) * unit, method))
        elif abs(math.log(hj / lower[j])) < 1e-6:
            s.notes.append(_bound_note(j, hj * unit, "lower", float(lower[j]) * unit, method))
    bounds = np.stack([lower, upper], axis=1)
    how = f"grid of {ts.size}, coordinate sweep, L-BFGS-B: {res.message}"
    if newton:
        how += "; loose polishes from the starts: Levenberg-Marquardt"
    return s.result(h, sc, bounds, bool(res.success), how, smoothed)
