"""CV and AICc for local polynomial fits and mixed data, and the search over h and lambda.

The criteria are those of :func:`nadaraya.score_bandwidth`, computed from one leave-one-out
pass of the moment sums (each point's own term masked inside them) and the per-query solve of
:mod:`nadaraya.local.solve`:

- the leave-one-out prediction ``f_{-i}`` is the local fit at ``x_i`` from the other points
  (a singular system falls back to a lower degree, as in prediction);
- AICc's hat-matrix diagonal is ``H_ii = w_ii [M_i^-1]_00``, ``w_ii`` the point's own weight
  and ``M_i`` its local moment matrix *with* the own term. From the leave-one-out matrix
  ``M_{-i}`` (Sherman-Morrison, the own term being ``w_ii e_0 e_0^T``):
  ``H_ii = t / (1 + t)``, ``t = w_ii [M_{-i}^-1]_00``; the in-sample residual is
  ``(1 - H_ii)`` times the leave-one-out one, as for degree 0.

Categorical columns multiply each weight by their factor (:mod:`nadaraya.local.mixed`), the own
term's factor included. The search with categorical columns (one bandwidth or lambda per
column, as statsmodels' and np's ``cv_ls``): a coarse grid of a common factor on the
continuous rule of thumb times three common levels of lambda; L-BFGS-B on ``(log h, lambda)``
within bounds from the grid's best point and from the rule of thumb (statsmodels' start),
the best kept (CV of a Gaussian local constant fit: the exact gradient from one pass,
:meth:`LocalObjective.value_grad`; else finite differences); a coordinate sweep from there
(each column in turn to the best point of its grid, the others held), and L-BFGS-B again if
it moved; then each column tried at the end of its range that smooths it out (the upper bound; for Wang-van
Ryzin's ordered kernel, whose weights vanish as lambda -> 1, the indicator lambda = 0 is tried
as well), kept where the score is no worse, and L-BFGS-B once more if anything moved. A
column is reported smoothed out only where its end scores no higher than every finite value
of its profile (:func:`nadaraya.bandwidth._multistart.settle`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._core.call import Call
from nadaraya.backends.reference import _moment_sums, block_weights
from nadaraya.bandwidth._multistart import _OUT, Memo, best_of, log_grid, settle, sweep
from nadaraya.bandwidth._objective import BandwidthSelection, _Objective
from nadaraya.bandwidth.rules import _pow2_scale, _rule_of_thumb, _span
from nadaraya.kernels import Kernel
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job
from nadaraya.local.mixed import Categorical, lambda_bounds
from nadaraya.local.solve import hat_diagonal, solve
from nadaraya.partials import Partials

__all__ = ["LocalObjective", "select_mixed"]

#: with categorical columns and at most this many points, each pass is one dense (n, n) pass
DENSE_MAX = 2048

#: how far below an open upper end of lambda (Wang-van Ryzin's 1) the search stays
_OPEN = 1e-6


class LocalObjective(_Objective):
    """The CV or AICc criterion of a local polynomial fit of ``degree`` with columns of ``var_types``.

    The bandwidth passed to :meth:`at` holds one entry per column: ``h`` for continuous
    columns, ``lambda`` for categorical ones.
    """

    fast = False
    #: the scalar search's grid has ratio 2, not sqrt(2): each point is a pass of its own here
    coarse_grid = True

    def __init__(
        self,
        X: NDArray[np.float64],
        Y: NDArray[np.float64],
        sw: NDArray[np.float64] | None,
        kernel: Kernel,
        method: str,
        backend: str,
        weight_exp: int = 0,
        *,
        degree: int = 0,
        var_types: str | None = None,
        categorical_kernel: str = "classic",
        tol: float | None = None,
    ) -> None:
        super().__init__(X, Y, sw, kernel, method, backend, weight_exp, tol=tol)
        self.var_types = var_types or "c" * self.d
        self.cont = np.array([j for j, c in enumerate(self.var_types) if c == "c"], dtype=np.intp)
        self.catc = np.array([j for j, c in enumerate(self.var_types) if c != "c"], dtype=np.intp)
        self.degree = degree if self.cont.size else 0
        self.categorical_kernel = categorical_kernel
        self.kinds = "".join(self.var_types[j] for j in self.catc)
        self.Xc = np.ascontiguousarray(self.X[:, self.cont])
        # the passes' coordinates: a column of extreme spread multiplied by a power of two
        # (exact), so that the moment sums stay in range (see nadaraya.local.job.scaled)
        spread = np.ptp(self.Xc, axis=0) if self.n else np.ones(self.cont.size)
        spread = np.where(spread > 0, spread, np.abs(self.Xc).max(axis=0, initial=0.0))
        self._xs, self._hx = self.Xc, np.ones(self.cont.size)
        if self.cont.size and np.isfinite(spread).all() and (spread > 0).all():
            _, xs, _, x_exp = _job.scaled(self.Xc, self.Xc, spread)
            if x_exp is not None:
                self._xs, self._hx = xs, np.ldexp(1.0, -x_exp)
        self.Xk = np.ascontiguousarray(self.X[:, self.catc])
        self.levels = np.array([np.unique(self.Xk[:, j]).size for j in range(self.catc.size)], dtype=np.int64)
        zero = np.zeros(1)
        log0 = kernel.log_profile(zero) if kernel.log_domain else np.log(kernel.profile(zero))  # type: ignore[misc]
        self._pairs: tuple[NDArray[np.float64], NDArray[np.int32]] | None = None
        #: each lambda's upper end (an open end: just below it), where a difference steps down
        self._lam_high = np.array([
            high if closed else high - _OPEN
            for _, high, closed in (lambda_bounds(kind, int(c), categorical_kernel)
                                    for kind, c in zip(self.kinds, self.levels))
        ])
        self.own_cont = self.cont.size * float(log0[0]) + np.log(self.s)

    def job(self, h: NDArray[np.float64]) -> _job.Job:
        """The pooling job of the training points at bandwidth (and lambdas) ``h``."""
        h = np.asarray(h, dtype=np.float64)
        call = Call(self._xs, self._xs, self.Y, False, self.kernel, h[self.cont] * self._hx, self.sw)
        cat = None
        if self.catc.size:
            cat = Categorical(
                self.kinds, self.Xk, self.Xk, h[self.catc], self.levels, self.categorical_kernel
            )
        return _job.Job(call, cat, self.degree, self.cont, self.d, tol=self.tol)

    def _own(self, h: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each point's own log weight, categorical factors included."""
        out = self.own_cont
        for j in self.catc:
            lam = float(h[j])
            if self.categorical_kernel == "classic":
                out = out + math.log1p(-lam) if lam < 1 else out - math.inf
        return out

    def _groups(self) -> tuple[NDArray[np.float64], NDArray[np.int32]]:
        """The distinct category tuples and each pair's (query group, key group) index, with
        each point's group and the points ordered by it, made once (no pass)."""
        if self._pairs is None:
            cats, group = np.unique(self.Xk, axis=0, return_inverse=True)
            group = group.reshape(-1)
            self._group = group.astype(np.int64)
            self._order = np.argsort(self._group, kind="stable")
            self._pairs = (cats, (group[:, None] * cats.shape[0] + group[None, :]).astype(np.int32))
            with np.errstate(divide="ignore"):
                self._log_sw = np.zeros(self.n) if self.sw is None else np.log(self.sw)
            self._table = (b"", np.zeros(0))
        return self._pairs

    def _dense(self, h: NDArray[np.float64]) -> Partials:
        """The leave-one-out partials of mixed data in one dense (n, n) pass: the categorical
        factors of every pair read from a (groups x groups) table, no pass per group. The
        same sums as :func:`nadaraya.local.fit.partials` (the reference backend's arithmetic)."""
        cats, pairs = self._groups()
        k, n = self.kernel, self.n
        cat = Categorical(self.kinds, self.Xk, self.Xk, h[self.catc], self.levels, self.categorical_kernel)
        if k.name == "gaussian" and self.degree <= 1 and self.cont.size:
            from nadaraya.bandwidth._mixed_pass import mixed_loo

            lam = h[self.catc].tobytes()  # a gradient's steps in h keep the lambdas: the table too
            if self._table[0] != lam:
                with np.errstate(divide="ignore"):
                    self._table = (lam, cat.log_factor(cats, cats))
            hc = h[self.cont] * self._hx
            return mixed_loo(self._xs, hc, self._log_sw, self._group, self._table[1], self.Y, self.degree,
                             self._order)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            log_f = cat.log_factor(cats, cats).ravel()[pairs]
            if self.cont.size:  # the reference backend's weights of every pair, log in the log domain
                log_sw = None if self.sw is None or not k.log_domain else np.log(self.sw)
                w = block_weights(self._xs, self._xs, k, 1.0 / (h[self.cont] * self._hx), log_sw, self.sw)
            else:
                w = np.broadcast_to(np.zeros(n) if self.sw is None else np.log(self.sw), (n, n)).copy()
            if k.log_domain or not self.cont.size:
                w += log_f
                w[np.arange(n), np.arange(n)] = -np.inf
                shift = w.max(axis=1)
                w -= np.where(np.isfinite(shift), shift, 0.0)[:, None]
                np.exp(w, out=w)
            else:
                w *= np.exp(log_f)
                w[np.arange(n), np.arange(n)] = 0.0
                shift = np.zeros(n)
        extra = _moment_sums(w, self._xs, self._xs, self.Y, self.degree) if self.degree else ()
        return Partials(shift, w.sum(axis=1), w @ self.Y, extra)

    @property
    def has_gradient(self) -> bool:
        """Whether :meth:`value_grad` serves: CV of a Gaussian local constant fit with
        continuous and categorical columns, one dense pass."""
        return (self.method == "cv" and self.kernel.name == "gaussian" and self.degree == 0
                and self.cont.size > 0 and self.catc.size > 0 and self.n <= DENSE_MAX)

    def value_grad(
        self, h: NDArray[np.float64], stage: str = "per_feature"
    ) -> tuple[float, NDArray[np.float64]]:
        """CV at ``h`` and its gradient along ``log h`` (continuous columns) and ``lambda``
        (categorical ones), from one leave-one-out pass
        (:func:`nadaraya.bandwidth._mixed_pass.mixed_loo_grad`); a lambda whose factor's
        derivative is not finite there (0 where a factor is ``lambda / (c - 1)``) takes a
        forward difference of one more pass instead."""
        from nadaraya.bandwidth._mixed_pass import mixed_loo_grad

        h = np.asarray(h, dtype=np.float64)
        cats = self._groups()[0]
        cat = Categorical(self.kinds, self.Xk, self.Xk, h[self.catc], self.levels, self.categorical_kernel)
        with np.errstate(divide="ignore"):
            table = cat.log_factor(cats, cats)
        D = np.stack(_dlog_factor(cat, cats))
        finite = np.isfinite(D).all(axis=(1, 2))
        parts, A, B, E, EY = mixed_loo_grad(self._xs, h[self.cont] * self._hx, self._log_sw, self._group,
                                            table, np.where(np.isfinite(D), D, 0.0), self.Y, self._order)
        self.n_passes += 1
        ok = parts.weight > 0
        f = np.full(self.Y.shape, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            f[ok] = parts.value[ok] / parts.weight[ok, None]
        score = self._record(h, self.criterion(f, np.zeros(self.n)), stage)
        grad = np.zeros(self.d)
        if not np.isfinite(score):
            return score, grad
        p = self.Y.shape[1]
        # d f_i = sum_j w_ij dl_ij (y_j - f_i) / W_i; CV = sum_i s_i mean_c (y_ic - f_ic)^2 / total
        coef = (2.0 / p) * self.s[:, None] * (f - self.Y) / (self.total * parts.weight[:, None])  # (n, p)
        grad[self.cont] = np.einsum("ic,iac->a", coef, B) - np.einsum("ic,ic,ia->a", coef, f, A)
        grad[self.catc] = np.einsum("ic,iac->a", coef, EY) - np.einsum("ic,ic,ia->a", coef, f, E)
        for c in np.flatnonzero(~finite):
            j = int(self.catc[c])
            step = 1.4901161193847656e-08 * max(1.0, abs(float(h[j])))
            trial = h.copy()
            trial[j] = h[j] + step if h[j] + step <= self._lam_high[c] else h[j] - step
            grad[j] = (self.at(trial, stage) - score) / (trial[j] - h[j])
        return score, grad

    def at(self, h: NDArray[np.float64], stage: str = "refine") -> float:
        """The criterion at one bandwidth, from one leave-one-out pass of the moment sums."""
        from nadaraya._support.jit import threads_for

        h = np.asarray(h, dtype=np.float64)
        job = self.job(h)
        if self.catc.size and self.n <= DENSE_MAX:
            parts = self._dense(h)
        else:
            with threads_for(self.n**2 * max(1, self.cont.size)):
                parts = _fit.partials(job, self.exclude, self.backend)
        self.n_passes += 1
        fit = solve(parts, job.degree, job.call.bandwidth)
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.log(parts.weight) + parts.shift - self._own(h) - np.log(fit.inverse00)
        hat = None
        if self.method == "aicc" and job.degree > 0 and (fit.degree < job.degree).any():
            # some leave-one-out fit fell back to a lower degree: H_ii and the in-sample fit of
            # the fit actually used at x_i
            values = np.ldexp(self.Y, -job.call.value_exp)
            h_ii, fits = hat_diagonal(parts, fit, self._own(h), values, job.degree, job.call.bandwidth)
            hat = (h_ii, np.ldexp(fits, job.call.value_exp))
        return self._record(h, self.criterion(fit.estimate, rho, hat), stage)


def _dlog_factor(cat: Categorical, cats: NDArray[np.float64]) -> list[NDArray[np.float64]]:
    """Per categorical column, the derivative along its lambda of the log factor of each
    (query group, key group) pair (G, G): the derivatives of :meth:`Categorical.log_factor`'s
    terms, ``inf`` where a factor ``lambda`` or ``lambda / (c - 1)`` is at ``lambda = 0``."""
    out = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for j, kind in enumerate(cat.kinds):
            lam = np.float64(cat.lambdas[j])  # 1 / 0 = inf, as NumPy divides
            diff = np.abs(cats[:, j, None] - cats[None, :, j])
            equal = diff == 0
            if cat.kernel == "li-racine":
                same, other = 0.0, (diff / lam if kind == "o" else np.full(diff.shape, 1.0 / lam))
            elif kind == "o":
                same = -1.0 / (1.0 - lam)
                other = -1.0 / (1.0 - lam) + np.where(equal, 0.0, diff) / lam
            else:
                same = -1.0 / (1.0 - lam)
                other = np.full(diff.shape, 1.0 / lam if int(cat.levels[j]) > 1 else 0.0)
            D = np.where(equal, same, other)
            out.append(np.where(np.isnan(D), np.inf, D))
    return out


def _starts(
    obj: LocalObjective, rot: NDArray[np.float64], hi: NDArray[np.float64]
) -> list[NDArray[np.float64]]:
    """The coarse grid: a common factor on the continuous rule of thumb times lambda levels."""
    out = []
    for t in 2.0 ** np.arange(-4.0, 4.5, 1.0):
        for frac in (0.1, 0.4, 0.8):
            h = np.empty(obj.d)
            h[obj.cont] = t * rot
            h[obj.catc] = frac * hi
            out.append(h)
    return out


def select_mixed(
    x: NDArray[np.float64],
    Y: NDArray[np.float64],
    sw: NDArray[np.float64] | None,
    k: Kernel,
    method: str,
    backend: str,
    degree: int,
    var_types: str,
    categorical_kernel: str,
    progress: Any = None,
) -> BandwidthSelection:
    """The joint search of continuous bandwidths and lambdas for data with categorical columns."""
    cont = [j for j, c in enumerate(var_types) if c == "c"]
    scale = np.where([c == "c" for c in var_types], _span(x), 0.0)
    x, x_exp = _pow2_scale(x, scale)
    Y, y_exp = _pow2_scale(Y, np.full(Y.shape[1], np.abs(Y).max()))
    obj = LocalObjective(
        x,
        Y,
        sw,
        k,
        method,
        backend,
        degree=degree,
        var_types=var_types,
        categorical_kernel=categorical_kernel,
    )
    obj.progress = progress
    kinds = obj.kinds
    his = []
    for j, kind in enumerate(kinds):
        _, high, closed = lambda_bounds(kind, int(obj.levels[j]), categorical_kernel)
        his.append(high if closed else high - _OPEN)
    hi = np.array(his)
    rot = _rule_of_thumb(obj.Xc, "scott", k, obj.sw) if cont else np.zeros(0)
    span = np.ptp(obj.Xc, axis=0) if cont else np.zeros(0)
    lower = np.empty(obj.d)
    upper = np.empty(obj.d)
    lower[obj.cont], upper[obj.cont] = rot * 2.0**-3, np.maximum(rot * 2.0**3, _OUT * span)
    lower[obj.catc], upper[obj.catc] = 0.0, hi
    if k.compact and method == "cv" and cont:
        from nadaraya.bandwidth._objective import _nn_linf

        lower[obj.cont] = np.maximum(lower[obj.cont], _nn_linf(obj.Xc / rot) * rot * (1.0 + 1e-9))
    starts = [np.clip(h, lower, upper) for h in _starts(obj, rot, hi)]
    scores = [obj.at(h, "grid") for h in starts]
    best = int(np.argmin(scores))
    if not np.isfinite(scores[best]):
        raise ValueError(f"{method} is infinite at every bandwidth on the grid; the data are degenerate")
    h, s = starts[best], float(scores[best])
    is_cont = np.zeros(obj.d, dtype=bool)
    is_cont[obj.cont] = True
    h, s, smoothed, res = _polish_and_settle(obj, h, s, lower, upper, is_cont, rot, span, np.std(x, axis=0))
    unit = np.where(is_cont, np.ldexp(1.0, x_exp), 1.0)
    rule = np.full(obj.d, np.nan)
    rule[obj.cont] = rot
    return _result(
        obj,
        h,
        s,
        unit,
        int(y_exp[0]),
        smoothed,
        rule,
        np.stack([lower, upper], axis=1),
        bool(res.success),
        f"grid of {len(starts)} (h factor x lambda), L-BFGS-B on (log h, lambda): {res.message}",
    )


def _polish_and_settle(
    obj: LocalObjective,
    h: NDArray[np.float64],
    s: float,
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    is_cont: NDArray[np.bool_],
    rot: NDArray[np.float64],
    span: NDArray[np.float64],
    std: NDArray[np.float64],
) -> tuple[NDArray[np.float64], float, NDArray[np.bool_], Any]:
    """From the grid's best point ``h`` (score ``s``): L-BFGS-B on ``(log h, lambda)`` from it
    and from the rule of thumb, a coordinate sweep, each column tried at its smoothing-out end,
    and the columns left there settled against their profiles: ``(h, score, smoothed, the last
    L-BFGS-B result)``."""
    from scipy.optimize import minimize

    k = obj.kernel

    def to_v(h: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.where(is_cont, np.log(np.where(is_cont, h, 1.0)), h)

    def from_v(v: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.where(is_cont, np.exp(np.where(is_cont, v, 0.0)), v)

    norm = abs(s) if obj.method == "cv" and s > 0 else 1.0
    bounds = list(zip(to_v(lower), to_v(upper)))

    # every (h, lambda) scored once: a polish's start, a grid point a sweep or a profile has
    # visited cost no pass again
    # the gradient's pass (where the objective has one) serves L-BFGS-B; the sweeps and
    # profiles take the value's pass, which costs less
    f = Memo(lambda h: obj.at(h, "per_feature"), obj.value_grad if obj.has_gradient else None,
             values_by_gradient=False)
    f.values[np.asarray(h, dtype=np.float64).tobytes()] = s  # the grid's best point

    def run(h0: NDArray[np.float64]) -> tuple[NDArray[np.float64], float, Any]:
        h0 = np.asarray(h0, dtype=np.float64)
        v0 = to_v(h0)

        def at(v: NDArray[np.float64]) -> NDArray[np.float64]:
            return h0 if np.array_equal(v, v0) else from_v(v)

        def with_grad(v: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
            h = at(v)
            value, grad = f.with_gradient(h)
            # d/dv: along log h for the continuous columns (as computed), lambda for the others
            return value / norm, grad / norm

        with np.errstate(invalid="ignore"):
            res = minimize(
                with_grad if f.value_grad is not None else (lambda v: f(at(v)) / norm),
                v0,
                jac=f.value_grad is not None,
                method="L-BFGS-B",
                bounds=bounds,
                options={"ftol": 1e-10, "gtol": 1e-7, "maxiter": 200},
            )
        h1 = at(np.asarray(res.x, dtype=np.float64))
        return h1, f(h1), res

    status: list[Any] = []

    def polish(h0: NDArray[np.float64]) -> tuple[NDArray[np.float64], float]:
        h1, s1, res = run(h0)
        status.append(res)
        return h1, s1

    # each column's profile: bandwidths of ratio 2 from the lower bound to three times the
    # range, lambdas evenly spaced over their range; the sweep's grids take every other one
    # and the upper end
    finite = [
        log_grid(lower[j], max(3.0 * span[list(obj.cont).index(j)], 2.0 * lower[j]))
        if is_cont[j] else np.linspace(0.0, upper[j], 9)[:-1]
        for j in range(obj.d)
    ]
    grids = [np.append(g[::2], upper[j]) for j, g in enumerate(finite)]
    # statsmodels' start: the continuous rule of thumb, and its lambdas clipped
    h_rule = np.where(is_cont, 0.0, 1.06 * std * obj.n ** (-1.0 / (4 + obj.d)))
    h_rule = np.clip(h_rule, lower, upper)
    h_rule[obj.cont] = np.clip(rot, lower[obj.cont], upper[obj.cont])
    # L-BFGS-B from the grid's best point and from the rule; then a coordinate sweep from the
    # better end, which leaves a basin where one column's grid holds a lower score
    h, s = best_of(polish, [h, h_rule], h, s)
    h, s, moved = sweep(f, h, s, grids, patience=2)
    if moved:
        h, s = best_of(polish, [h], h, s)
    moved = False
    for j in range(obj.d):
        tries = [upper[j]] + ([0.0] if not is_cont[j] and obj.var_types[j] == "o" else [])
        for value in tries:
            trial = h.copy()
            trial[j] = value
            st = f(trial)
            if st <= s:
                h, s, moved = trial, st, True
    if moved:
        h, s = best_of(polish, [h], h, s)
    # a column stays smoothed out only where no finite value of its profile scores lower
    from nadaraya.bandwidth._objective import _smoothed_out

    can = np.array([is_cont[j] or obj.categorical_kernel == "li-racine" or obj.var_types[j] == "u"
                    for j in range(obj.d)])

    def candidates(h: NDArray[np.float64]) -> NDArray[np.intp]:
        flat = np.isclose(h, upper)
        if obj.cont.size:
            flat[obj.cont] |= _smoothed_out(k, h[obj.cont], span)
        return np.flatnonzero(flat & can)

    h, s, smoothed, moved = settle(f, h, s, candidates(h), upper, finite, is_cont)
    if moved:
        h, s = best_of(polish, [h], h, s)
        h, s, smoothed, _ = settle(f, h, s, candidates(h), upper, finite, is_cont)
    return h, s, smoothed, status[-1]


def _result(
    obj: LocalObjective,
    h: NDArray[np.float64],
    s: float,
    unit: NDArray[np.float64],
    y_exp: int,
    smoothed: NDArray[np.bool_],
    rule: NDArray[np.float64],
    bounds: NDArray[np.float64],
    converged: bool,
    message: str,
) -> BandwidthSelection:
    """The selection in the data's units (the search ran on ``x``, ``y`` scaled by powers of two)."""
    from nadaraya.bandwidth.rules import _unscaled_score

    record = obj.record()
    with np.errstate(over="ignore"):  # bounds beyond float64 (a range near 1e308) are inf
        record["bandwidths"] = record["bandwidths"] * unit
        bounds = bounds * unit[:, None]
    score = s
    if y_exp:
        score = float(_unscaled_score(np.array([s]), obj.method, y_exp)[0])
        record["scores"] = _unscaled_score(record["scores"], obj.method, y_exp)
    return BandwidthSelection(
        bandwidth=h * unit,
        score=score,
        method=obj.method,
        kernel=obj.kernel.name,
        per_feature=True,
        smoothed_out=smoothed,
        rule_of_thumb=rule * unit,
        bounds=bounds,
        search=record,
        n_passes=obj.n_passes,
        converged=converged,
        message=message,
    )
