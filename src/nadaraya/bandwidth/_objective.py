"""The bandwidth objective's base (leave-one-out CV and AICc, local constant), its result and warning."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya._support.validation import as_points, as_sample_weight, as_values
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel
from nadaraya.partials import Partials


class BandwidthWarning(UserWarning):
    """The bandwidth search ended on a bound that does not smooth the feature out, or had
    nothing to search (constant ``y``)."""


@dataclass
class BandwidthSelection:
    """The outcome of :func:`select_bandwidth`.

    Attributes
    ----------
    bandwidth : ndarray of shape (d,)
        The selected bandwidth per feature (equal entries for a scalar search).
    score : float
        The criterion at ``bandwidth`` (CV: the mean squared leave-one-out residual; AICc: see
        :func:`score_bandwidth`).
    method : {"cv", "aicc"}
    kernel : str
    per_feature : bool
    smoothed_out : ndarray of bool, shape (d,)
        Features whose kernel weights no longer vary with them at the selected bandwidth (by
        at most 1 % over the feature's range; for an unordered column, the lambda that weighs
        every category alike), where removing them scores no higher than any finite bandwidth
        the search tried for them: the local-constant fit ignores them (they do not help
        predict ``y``); a local polynomial fit is then a global polynomial in them.
    rule_of_thumb : ndarray of shape (d,)
        Scott's rule, the centre of the search.
    bounds : ndarray of shape (d, 2)
        The search interval of each bandwidth.
    search : dict of ndarray
        Every bandwidth evaluated, in order: ``"bandwidths"`` (k, d), ``"scores"`` (k,) and
        ``"stages"`` (k,) among ``"grid"``, ``"refine"``, ``"per_feature"``.
    n_passes : int
        Passes over the (n, n) pairs (a pass of the coarse grid computes all its bandwidths).
    converged : bool
        Whether the last stage met its tolerance.
    message : str
        What happened, in words.

    Examples
    --------
    >>> import numpy as np
    >>> import nadaraya
    >>> x = np.linspace(0, 5, 60); y = np.sin(x) + 0.2 * np.cos(7 * x)
    >>> res = nadaraya.select_bandwidth(x, y)
    >>> res.bandwidth.shape, bool(res.score < np.var(y)), res.search["stages"][0]
    ((1,), True, 'grid')
    """

    bandwidth: NDArray[np.float64]
    score: float
    method: str
    kernel: str
    per_feature: bool
    smoothed_out: NDArray[np.bool_]
    rule_of_thumb: NDArray[np.float64]
    bounds: NDArray[np.float64]
    search: dict[str, NDArray[Any]] = field(repr=False)
    n_passes: int = 0
    converged: bool = True
    message: str = ""

    def __repr__(self) -> str:
        """A short summary: the method, kernel, bandwidth (abridged past six features), score,
        the features smoothed out, passes and convergence; never the search's arrays.

        Examples
        --------
        >>> import numpy as np
        >>> import nadaraya
        >>> x = np.linspace(0, 5, 60)
        >>> r = repr(nadaraya.select_bandwidth(x, np.sin(x) + 0.2 * np.cos(7 * x)))
        >>> r.startswith("BandwidthSelection(method='cv', kernel='gaussian', bandwidth=["), len(r) < 200
        (True, True)
        """
        def short(a: NDArray[Any]) -> str:
            return np.array2string(np.asarray(a), precision=4, threshold=6, edgeitems=3, separator=", ")

        out = np.flatnonzero(np.asarray(self.smoothed_out))
        smoothed = f", smoothed_out={short(out)}" if out.size else ""
        per = ", per_feature=True" if self.per_feature else ""
        k = np.size(self.search.get("scores", ())) if isinstance(self.search, dict) else 0
        return (
            f"BandwidthSelection(method={self.method!r}, kernel={self.kernel!r}, "
            f"bandwidth={short(self.bandwidth)}, score={self.score:.6g}{per}{smoothed}, "
            f"n_evaluated={k}, n_passes={self.n_passes}, converged={self.converged})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The result as a plain dict (arrays included), e.g. for a DataFrame of the search.

        Examples
        --------
        >>> import numpy as np
        >>> import nadaraya
        >>> x = np.linspace(0, 3, 30)
        >>> res = nadaraya.select_bandwidth(x, np.sin(2 * x) + 0.3 * np.cos(37 * x))
        >>> sorted(res.to_dict())[:3]
        ['bandwidth', 'bounds', 'converged']
        """
        return {
            "bandwidth": self.bandwidth,
            "score": self.score,
            "method": self.method,
            "kernel": self.kernel,
            "per_feature": self.per_feature,
            "smoothed_out": self.smoothed_out,
            "rule_of_thumb": self.rule_of_thumb,
            "bounds": self.bounds,
            "search": self.search,
            "n_passes": self.n_passes,
            "converged": self.converged,
            "message": self.message,
        }


class _Objective:
    """The CV or AICc criterion of one data set as a function of the bandwidth, with a record.

    Zero-weight rows are dropped first: they add nothing to the sums and nothing to the score.
    """

    def __init__(
        self,
        X: NDArray[np.float64],
        Y: NDArray[np.float64],
        sw: NDArray[np.float64] | None,
        kernel: Kernel,
        method: str,
        backend: str,
        weight_exp: int = 0,
        tol: float | None = None,
    ) -> None:
        # the weights were multiplied by 2**-weight_exp: AICc's sample size is their true sum
        self.weight_exp = weight_exp
        #: the error allowed in each leave-one-out pass (``tol=`` of :func:`nadaraya.pool`)
        self.tol = tol
        if sw is not None:
            keep = sw > 0
            X, Y, sw = X[keep], Y[keep], sw[keep]
        # sorted by the first feature (the criteria do not depend on the order): tiles of
        # neighbouring points let the grid pass skip far tiles at its finer levels. Points
        # sorted already (the estimator's) are kept as they are: a stable sort would not move them
        if not (X[1:, 0] >= X[:-1, 0]).all():
            order = np.argsort(X[:, 0], kind="stable")
            X, Y = X[order], Y[order]
            sw = None if sw is None else sw[order]
        self.X, self.Y, self.sw, self.kernel, self.method, self.backend = X, Y, sw, kernel, method, backend
        self.n, self.d = X.shape
        self.s = np.ones(self.n) if sw is None else sw
        self.total = float(self.s.sum())
        self.exclude = np.arange(self.n)
        zero = np.zeros(1)
        log0 = kernel.log_profile(zero) if kernel.log_domain else np.log(kernel.profile(zero))  # type: ignore[misc]
        # log of each point's own (left-out) weight, on the scale the partial sums use
        self.own_log = self.d * float(log0[0]) + np.log(self.s)
        self.tried: list[NDArray[np.float64]] = []
        self.scores: list[float] = []
        self.stages: list[str] = []
        self.n_passes = 0
        #: called as ``progress(stage, n_evaluated, n_passes)`` after each bandwidth evaluated
        self.progress: Callable[[str, int, int], None] | None = None
        self._nearest: tuple[NDArray[np.float64], NDArray[np.float64], float, NDArray[np.int64]] | None = None
        #: the truncated sums' sorted keys, shared by every pass where the cells pay (:meth:`_cells_pass`)
        self._prepared: Any = None

    @property
    def fast(self) -> bool:
        """Whether the compiled Gaussian passes serve this criterion (several bandwidths per pass,
        exact derivatives); otherwise every bandwidth is one pass of the primitive (with
        ``tol``, where the Taylor series pays: :meth:`_series_pays`; exactly, in 1-D where the
        truncated sums' dense cells pay: :meth:`_cells_pay`)."""
        return self.kernel.name == "gaussian" and not (self._series_pays or self._cells_pay)

    @functools.cached_property
    def _cells_pay(self) -> bool:
        """Whether, exactly (no ``tol``), a search of leave-one-out passes of the truncated sums
        (one per bandwidth, about 40; in 1-D without sample weights their dense cells share exact
        series) costs less than the exact Gaussian passes over all pairs (about four), by the
        cost model of :func:`nadaraya.backends.choose_window` at four bandwidths from the data's
        range down to a thousandth of it (the dearest counts)."""
        from nadaraya import backends
        from nadaraya.backends import truncated

        if (self.tol is not None or self.d != 1 or self.kernel.name != "gaussian" or self.backend != "auto"
                or self.sw is not None or self.n**2 < backends.SMALL_PAIRS):
            return False
        x = self.X[:, 0]
        span = float(x[-1] - x[0])  # sorted
        exact = 4 * self.n**2 * backends.EXACT_NS_PER_PAIR
        fixed = 40 * 2 * self.n * backends.TRUNCATED_NS["point"]
        if not span > 0 or not fixed < exact:  # (below about 2700 points, before any estimate)
            return False
        worst = max(truncated.pairs(x, x, span * f) for f in (1.0, 0.1, 0.01, 0.001))
        return 40 * worst * backends.TRUNCATED_NS["pair"] + fixed < exact

    @functools.cached_property
    def _series_pays(self) -> bool:
        """Whether, with ``tol``, a search of leave-one-out passes of the Taylor series (one per
        bandwidth, about 32) costs less than the exact Gaussian passes (about four over all
        pairs), by the cost model of :func:`nadaraya.backends.choose_within`."""
        from nadaraya import backends
        from nadaraya.backends import taylor

        if self.tol is None or self.d != 1 or self.tol < taylor.MIN_TOL or self.n**2 < backends.SMALL_PAIRS:
            return False
        plan = taylor.plan(self.n, self.n, self.tol, 1.0)
        visits = self.n * ((plan["rho"] + plan["radius"]) / plan["rho"] + 1)  # each key in that many boxes
        ns = backends.TAYLOR_NS
        one = visits * (plan["terms"] * ns["term"] + ns["visit"]) + 2 * self.n * ns["point"]
        return 32 * one < 4 * self.n**2 * backends.EXACT_NS_PER_PAIR

    def _two(self) -> float:
        """AICc's 2 in ``(n + tr) / (n - tr - 2)``, in the units of the (scaled) weights."""
        if not self.weight_exp:
            return 2.0
        with np.errstate(over="ignore", under="ignore"):  # n = inf: the 2 vanishes
            return float(2.0 * (self.total / np.ldexp(self.total, self.weight_exp)))

    # -- the criterion from leave-one-out predictions ---------------------------------------
    def criterion(self, pred: NDArray[np.float64], rho: NDArray[np.float64], hat: tuple | None = None
                  ) -> float:
        """CV or AICc from leave-one-out predictions ``pred`` (n, p), NaN where a window is
        empty, and ``rho = log(leave-one-out weight / own weight)`` per point (n,); ``hat``:
        the hat diagonal and in-sample fits where they are not those of ``rho`` (a local fit
        whose leave-one-out system fell back to a lower degree, see
        :func:`nadaraya.local.solve.hat_diagonal`)."""
        return float(self.criteria(pred[None], rho[None], hat)[0])

    def criteria(self, pred: NDArray[np.float64], rho: NDArray[np.float64], hat: tuple | None = None
                 ) -> NDArray[np.float64]:
        """:meth:`criterion` for a stack of bandwidths: ``pred`` (k, n, p), ``rho`` (k, n)."""
        resid = self.Y - pred
        if self.method == "cv":
            score = (resid**2).mean(axis=2) @ self.s / self.total
            # where some point has no neighbour, CV is undefined: inf
            return np.where(np.isnan(pred).any(axis=(1, 2)), math.inf, score)
        # AICc: H_ii = own / (own + rest); the in-sample residual is (1 - H_ii) times the
        # leave-one-out residual (an identity of the ratio, not an approximation)
        from scipy.special import expit

        h_ii = expit(-rho)
        fit_resid = np.where(h_ii[..., None] < 1.0, (1.0 - h_ii)[..., None] * resid, 0.0)
        if hat is not None:
            h_ii, fit_resid = hat[0][None], (self.Y - hat[1])[None]
        sigma2 = (fit_resid**2).mean(axis=2) @ self.s / self.total
        trace = h_ii @ self.s
        denom = 1.0 - (trace + self._two()) / self.total
        ok = (denom > 0) & (sigma2 > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.log(sigma2) + (1.0 + trace / self.total) / denom
        return np.where(ok, score, math.inf)

    def _record(self, h: NDArray[np.float64], score: float, stage: str) -> float:
        self.tried.append(np.array(h, dtype=np.float64))
        self.scores.append(score)
        self.stages.append(stage)
        if self.progress is not None:
            self.progress(stage, len(self.scores), self.n_passes)
        return score

    # -- one bandwidth, through the primitive -------------------------------------------------
    def at(self, h: NDArray[np.float64], stage: str = "refine") -> float:
        """The criterion at one bandwidth, from one leave-one-out pass of the primitive."""
        from nadaraya._core.call import Call, compute_partials
        from nadaraya._support.jit import threads_for

        h = np.asarray(h, np.float64)
        with threads_for(self.n**2 * self.d):
            if self._cells_pay:
                parts = self._cells_pass(h)
            else:
                call = Call(self.X, self.X, self.Y, False, self.kernel, h, self.sw)
                parts, _ = compute_partials(call, exclude=self.exclude, backend=self.backend, tol=self.tol)
        self.n_passes += 1
        return self._record(h, self.from_partials(parts), stage)

    def _cells_pass(self, h: NDArray[np.float64]) -> Partials:
        """One leave-one-out pass of the truncated sums, which ``auto`` runs where the cells pay
        (:attr:`_cells_pay`), on the parts no bandwidth changes (the sorted keys, each one's
        nearest other key), prepared once for the search."""
        from nadaraya.backends import truncated

        if self._prepared is None:
            self._prepared = truncated.prepare_loo(self.X, self.Y)
        return truncated.partials(self.X, self.X, self.Y, kernel=self.kernel, bandwidth=h,
                                  exclude=self.exclude, _prepared=self._prepared)

    def from_partials(self, parts: Partials) -> float:
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.log(parts.weight) + parts.shift - self.own_log
        return self.criterion(parts.finalize(), rho)

    # -- Gaussian: many bandwidths per pass, and gradients -----------------------------------
    @functools.cached_property
    def _middle(self) -> NDArray[np.float64]:
        """Each feature's median, which the passes' scaled keys are taken about (not the
        midrange: one far key would move it, and the bulk's differences would lose its digits)."""
        return np.median(self.X, axis=0)

    def _scaled(
        self, h: NDArray[np.float64], exact: bool = True
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
        """``X / (sqrt(2) h)`` transposed, each point's shift (its nearest neighbour's
        ``g``) and that neighbour. Along one direction of ``h`` the nearest neighbours stay the same and the
        shifts scale as ``1 / t^2``: the k-d tree runs once per direction. Not ``exact``, a
        new direction takes the distance to the neighbour that was nearest in the last one (a
        valid shift, see :func:`~nadaraya.bandwidth._passes.loo_levels`; the caller checks
        the sums and asks again exactly if one overflowed)."""
        from nadaraya.bandwidth._passes import shifts

        # about the data's middle: keys far from 0 (1e6 apart from differences of 1e-2) would
        # lose the differences' digits to the rounding of each scaled key
        zt = np.ascontiguousarray(((self.X - self._middle) / (math.sqrt(2.0) * h)).T)
        cached = self._nearest
        if cached is not None and np.allclose(h / h[0], cached[0], rtol=1e-12, atol=0.0):
            return zt, cached[1] * (cached[2] / h[0]) ** 2, cached[3]
        if not exact and cached is not None:
            return zt, np.sum((zt - zt[:, cached[3]]) ** 2, axis=0), cached[3]
        c, nearest = shifts(zt)
        self._nearest = (h / h[0], c, float(h[0]), nearest)
        return zt, c, nearest

    def levels(self, h_top: NDArray[np.float64], n_levels: int, stage: str = "grid") -> NDArray[np.float64]:
        """The criterion at ``h_top * 2**(-l/2)``, l = 0 .. n_levels - 1, in one pass (Gaussian)."""
        from nadaraya._support.jit import threads_for
        from nadaraya.bandwidth._passes import loo_levels

        zt, c, ref = self._scaled(h_top)
        with threads_for(self.n**2 * (1 + n_levels / 4)):
            sy = np.ascontiguousarray((self.s[:, None] * self.Y).T)
            S, T = loo_levels(zt, c, ref, self.s, sy, n_levels)
        self.n_passes += 1
        with np.errstate(divide="ignore", invalid="ignore"):
            pred = T / S[:, :, None]
            rho = np.log(S) - np.outer(2.0 ** np.arange(n_levels), c) - np.log(self.s)
        out = self.criteria(pred, rho)
        for lev in range(n_levels):
            self._record(h_top * 2.0 ** (-lev / 2), float(out[lev]), stage)
        return out

    def with_gradient(self, h: NDArray[np.float64], stage: str = "per_feature", gauss_newton: bool = False,
                      held: NDArray[np.bool_] | None = None) -> tuple[Any, ...]:
        """The criterion and its gradient with respect to ``log h`` (Gaussian, one pass). With
        ``gauss_newton``, also CV's Gauss-Newton matrix ``2 sum_i w_i J_i J_i^T`` (``J_i`` the
        leave-one-out prediction's gradient along ``log h``, from the same pass; None for AICc).
        ``held``: the features a search holds fixed at ``h``, whose entries (of the gradient,
        and the matrix's rows and columns) are NaN: the pass skips their moments."""
        from nadaraya._support.jit import threads_for
        from nadaraya.bandwidth._gradient import loo_gradient

        sy = np.ascontiguousarray((self.s[:, None] * self.Y).T)
        zt, c, ref = self._scaled(h, exact=False)
        moments = None if held is None else ~np.asarray(held, dtype=bool)
        with threads_for(self.n**2 * (1 + self.d)):
            S, T, A, B = loo_gradient(zt, c, ref, self.s, sy, moments)
            if not np.isfinite(S).all():  # a shift far from the minimum: again, exactly
                zt, c, ref = self._scaled(h)
                S, T, A, B = loo_gradient(zt, c, ref, self.s, sy, moments)
        self.n_passes += 1
        out = self._graded(h, S, T, A, B, np.log(S) - c - np.log(self.s), zt, ref, stage, gauss_newton)
        if held is not None and np.any(held):
            out[1][held] = np.nan
            if gauss_newton and out[2] is not None:
                out[2][held, :] = np.nan
                out[2][:, held] = np.nan
        return out

    def _graded(self, h: NDArray[np.float64], S: NDArray[np.float64], T: NDArray[np.float64],
                A: NDArray[np.float64], B: NDArray[np.float64], rho: NDArray[np.float64],
                zt: NDArray[np.float64], ref: NDArray[np.int64], stage: str, gauss_newton: bool
                ) -> tuple[Any, ...]:
        """:meth:`with_gradient`'s results from one pass's sums and moments at ``h`` (shifted
        alike; ``rho`` the log of each row's own weight, unshifted)."""
        pred = T / S[:, None]  # S >= 1: the shift's neighbour has weight one
        # d pred_i / d log h_k = (B_ik - pred_i A_ik) / S_i, shape (n, d, p)
        dpred = (B - pred[:, None, :] * A[:, :, None]) / S[:, None, None]
        resid = self.Y - pred
        p = self.Y.shape[1]
        score = self.criterion(pred, rho)
        if self.method == "cv":
            grad = -2.0 * np.einsum("i,ip,ikp->k", self.s, resid, dpred) / (self.total * p)
        elif not math.isfinite(score):  # AICc undefined (no residual left, or tr(H) too large): no slope
            grad = np.zeros(self.d)
        else:
            from scipy.special import expit

            h_ii = expit(-rho)
            # d log S_i / d log h_k: A holds the moments of u_ijk^2 less the reference's u_irk^2
            dlog = A / S[:, None] + 2.0 * ((zt - zt[:, ref]) ** 2).T
            dh = -(h_ii * (1.0 - h_ii))[:, None] * dlog  # d H_ii / d log h_k
            e = (1.0 - h_ii)[:, None] * resid
            de = -dh[:, :, None] * resid[:, None, :] - (1.0 - h_ii)[:, None, None] * dpred
            sigma2 = float(self.s @ (e**2).mean(axis=1) / self.total)
            dsigma2 = 2.0 * np.einsum("i,ip,ikp->k", self.s, e, de) / (self.total * p)
            trace = float(self.s @ h_ii)
            dtrace = self.s @ dh
            a = 1.0 + trace / self.total
            b = 1.0 - (trace + self._two()) / self.total
            grad = dsigma2 / sigma2 + dtrace / self.total * (a + b) / b**2
        self._record(h, score, stage)
        if not gauss_newton:
            return score, grad
        gn = None
        if self.method == "cv":
            gn = 2.0 * np.einsum("i,ikp,ilp->kl", self.s, dpred, dpred) / (self.total * p)
        return score, grad, gn

    def column(
        self, h: NDArray[np.float64], cols: NDArray[np.int64], values: NDArray[np.float64],
        stage: str = "per_feature", gradient: bool = False,
    ) -> Any:
        """The criterion at ``h`` with feature ``cols[l]``'s bandwidth set to ``values[l]`` (the
        others held), every ``l`` in one pass (Gaussian,
        :func:`~nadaraya.bandwidth._column.loo_column`). With ``gradient``, also
        ``with_gradient(h, gauss_newton=True)``'s results from the same pass: ``(scores, those)``."""
        from nadaraya._support.jit import threads_for
        from nadaraya.bandwidth._column import loo_column

        cols = np.asarray(cols, dtype=np.int64)
        values = np.asarray(values, dtype=np.float64)
        if gradient:  # one level more, at ``h`` itself, with its moments
            cols, values = np.append(cols, 0), np.append(values, h[0])
        zt, _, ref = self._scaled(h, exact=False)
        with np.errstate(divide="ignore"):
            mult = (h[cols] / values) ** 2  # 0 at v = inf
        sy = np.ascontiguousarray((self.s[:, None] * self.Y).T)
        with threads_for(self.n**2 * (self.d + 2 * values.size)):
            grad = cols.size - 1 if gradient else -1
            S, T, C, A, B = loo_column(zt, ref, self.s, sy, cols, mult, grad)
        self.n_passes += 1
        # each row's exponents are relative to its reference point's g at each level
        share = (zt - zt[:, ref]) ** 2
        g_ref = share.sum(axis=0)[None, :] + (mult - 1.0)[:, None] * share[cols]
        with np.errstate(divide="ignore", invalid="ignore"):
            pred = T / S[:, :, None]
            rho = np.log(S) - C - g_ref - np.log(self.s)
        if gradient:
            graded = self._graded(h, S[-1], T[-1], A, B, rho[-1], zt, ref, stage, True)
            pred, rho, cols, values = pred[:-1], rho[:-1], cols[:-1], values[:-1]
        out = self.criteria(pred, rho)
        for lev, (j, v) in enumerate(zip(cols, values)):
            trial = np.array(h, dtype=np.float64)
            trial[j] = v
            self._record(trial, float(out[lev]), stage)
        return (out, graded) if gradient else out

    def curvature(self, h: NDArray[np.float64], stage: str = "refine") -> tuple[float, float, float, float]:
        """The criterion at ``h`` and its first three derivatives along ``log h`` (all
        features scaled together), from one pass (Gaussian).

        The weights' derivatives are those of :func:`~nadaraya.bandwidth._passes.loo_curvature`;
        the sums' follow, and from ``T = pred S`` by Leibniz's rule:
        ``pred' = (T' - pred S') / S``, ``pred'' = (T'' - 2 pred' S' - pred S'') / S``,
        ``pred''' = (T''' - 3 pred'' S' - 3 pred' S'' - pred S''') / S``. With
        ``r = y - pred``: ``CV' = -2 mean(r pred')``, ``CV'' = 2 mean(pred'^2 - r pred'')``,
        ``CV''' = 2 mean(3 pred' pred'' - r pred''')`` (weighted means). AICc follows the
        same way through ``H_ii = s_i / (s_i + S_i)``, a function of ``log S_i``, the
        in-sample residual ``(1 - H_ii) r`` and ``g(tr) = (N + tr) / (N - tr - 2)``.
        """
        from nadaraya._support.jit import threads_for
        from nadaraya.bandwidth._passes import loo_curvature

        zt, c, ref = self._scaled(h)
        with threads_for(self.n**2 * (1 + self.d)):
            M, N = loo_curvature(zt, c, ref, self.s, np.ascontiguousarray((self.s[:, None] * self.Y).T))
        self.n_passes += 1
        # the sums' derivatives from the moments of g: w, 2 g w, (4 g^2 - 4 g) w, ...
        basis = np.array([[1, 0, 0, 0], [0, 2, 0, 0], [0, -4, 4, 0], [0, 8, -24, 8]], dtype=np.float64)
        Sd = basis @ M  # (4, n): S, S', S'', S'''
        Td = np.einsum("rk,knp->rnp", basis, N)  # (4, n, p)
        S = Sd[0][:, None]
        s1, s2, s3 = Sd[1][:, None], Sd[2][:, None], Sd[3][:, None]
        pred = Td[0] / S
        p1 = (Td[1] - pred * s1) / S
        p2 = (Td[2] - 2.0 * p1 * s1 - pred * s2) / S
        p3 = (Td[3] - 3.0 * p2 * s1 - 3.0 * p1 * s2 - pred * s3) / S
        resid = self.Y - pred
        w = self.s / (self.total * self.Y.shape[1])
        score = self._record(h, self.criterion(pred, np.log(Sd[0]) - c - np.log(self.s)), stage)
        if self.method == "cv":
            d1 = float(-2.0 * w @ (resid * p1).sum(axis=1))
            d2 = float(2.0 * w @ (p1**2 - resid * p2).sum(axis=1))
            d3 = float(2.0 * w @ (3.0 * p1 * p2 - resid * p3).sum(axis=1))
            return score, d1, d2, d3
        if not math.isfinite(score):  # AICc undefined (no residual left, or tr(H) too large): no slope
            return score, 0.0, 0.0, 0.0
        # AICc = log sigma2 + g(tr), g(t) = (N + t) / (N - t - 2); H_ii = s_i / (s_i + S_i)
        # (unshifted S_i) is a function of L = log S_i, and the in-sample residual is
        # e = (1 - H_ii) r with r the leave-one-out residual
        q1 = Sd[1] / Sd[0]
        q2 = Sd[2] / Sd[0]
        q3 = Sd[3] / Sd[0]
        # derivatives of log S, the unshifted sum: the moments are of g - c, and the shift's
        # -c e^(-2t) along t = log h adds 2c, -4c, 8c
        L1, L2, L3 = q1 + 2.0 * c, q2 - q1**2 - 4.0 * c, q3 - 3.0 * q1 * q2 + 2.0 * q1**3 + 8.0 * c
        from scipy.special import expit

        H = expit(-(np.log(Sd[0]) - c - np.log(self.s)))
        f1 = -H * (1.0 - H)  # dH / dL and its derivatives in L
        f2 = H * (1.0 - H) * (1.0 - 2.0 * H)
        f3 = -H * (1.0 - H) * (1.0 - 6.0 * H + 6.0 * H * H)
        H1 = f1 * L1
        H2 = f2 * L1**2 + f1 * L2
        H3 = f3 * L1**3 + 3.0 * f2 * L1 * L2 + f1 * L3
        G, G1, G2, G3 = (1.0 - H)[:, None], H1[:, None], H2[:, None], H3[:, None]
        e0 = G * resid
        e1 = -G1 * resid - G * p1
        e2 = -G2 * resid + 2.0 * G1 * p1 - G * p2
        e3 = -G3 * resid + 3.0 * G2 * p1 + 3.0 * G1 * p2 - G * p3
        u0 = float(w @ (e0**2).sum(axis=1))
        u1 = float(2.0 * w @ (e0 * e1).sum(axis=1))
        u2 = float(2.0 * w @ (e1**2 + e0 * e2).sum(axis=1))
        u3 = float(2.0 * w @ (3.0 * e1 * e2 + e0 * e3).sum(axis=1))
        l1 = u1 / u0
        l2 = u2 / u0 - l1**2
        l3 = u3 / u0 - 3.0 * l1 * u2 / u0 + 2.0 * l1**3
        n, tr = self.total, float(self.s @ H)
        t1, t2, t3 = float(self.s @ H1), float(self.s @ H2), float(self.s @ H3)
        two = self._two()
        k = n - tr - two
        g1, g2, g3 = (2.0 * n - two) / k**2, 2.0 * (2.0 * n - two) / k**3, 6.0 * (2.0 * n - two) / k**4
        d1 = l1 + g1 * t1
        d2 = l2 + g2 * t1**2 + g1 * t2
        d3 = l3 + g3 * t1**3 + 3.0 * g2 * t1 * t2 + g1 * t3
        return score, d1, d2, d3

    def record(self) -> dict[str, NDArray[Any]]:
        return {
            "bandwidths": np.array(self.tried).reshape(-1, self.d),
            "scores": np.array(self.scores),
            "stages": np.array(self.stages, dtype=object),
        }


def _validate(
    X: ArrayLike, y: ArrayLike, method: str, kernel: str | Kernel, sample_weight: ArrayLike | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None, Kernel]:
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not valid; choose one of {', '.join(map(repr, METHODS))}")
    k = get_kernel(kernel)
    x = as_points("X", X, np.dtype(np.float64))
    Y, _ = as_values(y, x.shape[0], np.dtype(np.float64), name="y", keys="X")
    sw = as_sample_weight(sample_weight, x.shape[0], np.dtype(np.float64))
    return x, Y, sw, k


def _check_enough(n: int, sw: NDArray[np.float64] | None) -> None:
    """Raise where fewer than 3 of the ``n`` points have a positive weight."""
    n_live = n if sw is None else int((sw > 0).sum())
    if n_live < 3:
        raise ValueError(
            f"bandwidth selection needs at least 3 samples (with positive weight); got n_samples = {n_live}. "
            "Pass a numeric bandwidth instead"
        )


#: a feature counts as smoothed out when its kernel weights vary by at most 1 % over its range
_FLAT = 0.99


def _nn_linf(x: NDArray[np.float64]) -> float:
    """The largest L-inf distance from a point to its nearest other point (in units of ``x``):
    any window at least this wide holds a neighbour of every point."""
    from scipy.spatial import cKDTree

    dist, _ = cKDTree(x).query(x, k=2, p=np.inf)
    return float(dist[:, 1].max())


def _smoothed_out(kernel: Kernel, h: NDArray[np.float64], span: NDArray[np.float64]) -> NDArray[np.bool_]:
    if kernel.name == "constant":
        return np.ones(h.shape, dtype=bool)
    ratio = kernel.profile(span / h) / kernel.profile(np.zeros_like(h))
    return np.asarray(ratio >= _FLAT)


#: criteria that :func:`select_bandwidth` minimises
METHODS: tuple[str, ...] = ("cv", "aicc")


