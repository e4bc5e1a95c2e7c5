"""Bandwidth selection: rules of thumb, exact leave-one-out CV and AICc, scalar and per-feature search."""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import as_points, as_real, as_sample_weight
from .kernels import Kernel
from .kernels import get as get_kernel
from .partials import Partials

__all__ = [
    "METHODS",
    "RULES",
    "BandwidthSelection",
    "BandwidthWarning",
    "check_rule_input",
    "robust_scale",
    "rule_factor",
    "rule_of_thumb",
    "score_bandwidth",
    "select_bandwidth",
]

RULES: tuple[str, ...] = ("scott", "silverman")


def robust_scale(X: ArrayLike, sample_weight: ArrayLike | None = None) -> NDArray[np.float64]:
    """Per-feature ``min(std, IQR / 1.349)``, with sample weights as frequencies.

    The standard deviation uses ``ddof=1`` (``sum(w) - 1`` with weights) and the quartiles the
    inverted-CDF definition, so that integer weights give exactly the scale of repeated rows.
    Where the IQR is zero (heavily tied data) the standard deviation is used alone.

    Examples
    --------
    >>> import numpy as np
    >>> robust_scale(np.arange(10.0)).round(3).tolist()
    [3.028]
    """
    x = as_points("X", X, np.dtype(np.float64))
    # features far from unit scale are scaled by a power of two first (exact), so that
    # squared deviations neither underflow nor overflow
    x, x_exp = _pow2_scale(x, np.ptp(x, axis=0))
    if x_exp.any():
        return np.ldexp(robust_scale(x, sample_weight), x_exp)  # type: ignore[no-any-return]
    n = x.shape[0]
    w = as_sample_weight(sample_weight, n, np.dtype(np.float64))
    if w is None:
        w = np.ones(n)
    total = w.sum()
    mean = (w[:, None] * x).sum(axis=0) / total
    denom = total - 1.0
    var = (w[:, None] * (x - mean) ** 2).sum(axis=0) / denom if denom > 0 else np.zeros(x.shape[1])
    std = np.sqrt(np.maximum(var, 0.0))
    q75, q25 = (np.quantile(x, qq, axis=0, weights=w, method="inverted_cdf") for qq in (0.75, 0.25))
    iqr = (q75 - q25) / 1.349
    return np.where(iqr > 0, np.minimum(std, iqr), std)  # type: ignore[no-any-return]


def rule_of_thumb(
    X: ArrayLike,
    method: str = "scott",
    *,
    kernel: str | Kernel = "gaussian",
    sample_weight: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Normal-reference bandwidth per feature, rescaled to the kernel.

    With ``A_j = min(std_j, IQR_j / 1.349)`` and (effective) sample size ``n``, in ``d``
    features, for the Gaussian kernel:

    - ``"scott"``: ``h_j = A_j n^(-1/(d+4))``;
    - ``"silverman"``: ``h_j = A_j (n (d + 2) / 4)^(-1/(d+4))``

    (the factors of :class:`scipy.stats.gaussian_kde`). For another kernel ``K`` the
    bandwidth is multiplied by ``delta_K / delta_gaussian``, the ratio of canonical
    bandwidths, so that both kernels smooth alike. With sample weights, ``n = sum(w)``.

    Parameters
    ----------
    X : array-like of shape (n, d) or (n,)
    method : {"scott", "silverman"}
    kernel : str or Kernel, default "gaussian"
    sample_weight : array-like of shape (n,), optional

    Returns
    -------
    ndarray of shape (d,)

    Raises
    ------
    ValueError
        When a feature has zero spread (the message names it and says to pass a bandwidth).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=1000)
    >>> h = rule_of_thumb(x, "scott")
    >>> bool(0.2 < h[0] < 0.3)
    True
    """
    k = get_kernel(kernel)
    x = as_points("X", X, np.dtype(np.float64))
    n_rows, d = x.shape
    check_rule_input(method, n_rows)
    scale = robust_scale(x, sample_weight)
    check_rule_input(method, n_rows, scale, x[0])
    n = float(n_rows if sample_weight is None else np.sum(sample_weight))
    return np.asarray(scale * rule_factor(method, n, d, k), dtype=np.float64)


def check_rule_input(
    method: str, n_rows: int, scale: NDArray[np.floating] | None = None, first_row: Any = None
) -> None:
    """Raise a clear error where a rule of thumb cannot be computed.

    An unknown ``method``, fewer than 2 samples, or (given the per-feature ``scale``) a
    feature with zero spread, named with its value when ``first_row`` is given.

    Examples
    --------
    >>> check_rule_input("scott", 1)
    Traceback (most recent call last):
    ...
    ValueError: bandwidth='scott' needs at least 2 samples to measure the spread; got n_samples = 1. \
Pass a numeric bandwidth instead
    """
    if method not in RULES:
        raise ValueError(f"method={method!r} is not a rule of thumb; choose one of {', '.join(RULES)}")
    if n_rows < 2:
        raise ValueError(
            f"bandwidth={method!r} needs at least 2 samples to measure the spread; got n_samples = "
            f"{n_rows}. Pass a numeric bandwidth instead"
        )
    if scale is None:
        return
    flat = np.nonzero(~(np.asarray(scale) > 0))[0]
    if flat.size:
        j = int(flat[0])
        value = "" if first_row is None else f" (every value is {float(first_row[j])!r})"
        raise ValueError(
            f"feature {j} has zero spread: it is constant{value}, so no rule can choose its "
            "bandwidth (scott and silverman scale with the spread, and cv and aicc score every "
            "bandwidth of a constant feature alike); drop the feature, or pass a numeric bandwidth "
            "(a float or one per feature)"
        )


def rule_factor(method: str, n: float, d: int, kernel: str | Kernel = "gaussian") -> float:
    """The factor a rule of thumb multiplies the robust scale by (see :func:`rule_of_thumb`).

    Parameters
    ----------
    method : {"scott", "silverman"}
    n : float
        The (effective) sample size.
    d : int
        The number of features.
    kernel : str or Kernel

    Examples
    --------
    >>> round(rule_factor("scott", 100.0, 1), 4)
    0.3981
    """
    if method not in RULES:
        raise ValueError(f"method={method!r} is not a rule of thumb; choose one of {', '.join(RULES)}")
    if method == "scott":
        factor = n ** (-1.0 / (d + 4))
    else:
        factor = (n * (d + 2) / 4.0) ** (-1.0 / (d + 4))
    k = get_kernel(kernel)
    if k.name != "constant":
        factor *= k.canonical_bandwidth / get_kernel("gaussian").canonical_bandwidth
    return float(factor)


# --------------------------------------------------------------------------------------------
# Data-driven selection: leave-one-out cross-validation and AICc
# --------------------------------------------------------------------------------------------

#: criteria that :func:`select_bandwidth` minimises
METHODS: tuple[str, ...] = ("cv", "aicc")

#: the coarse grid: ratio sqrt(2) between neighbours, from 2**-6 to at least 2**5 times the
#: rule of thumb (and up to 3 times the data's range), over three decades
_GRID_BELOW = 12
_GRID_ABOVE = 10
#: the refinement's tolerance on log h: the bandwidth to a relative 1e-3
_XATOL = 1e-3
#: a feature counts as smoothed out when its kernel weights vary by at most 1 % over its range
_FLAT = 0.99


class BandwidthWarning(UserWarning):
    """The bandwidth search ended on a bound, or had nothing to search (constant ``y``)."""


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
        Features whose kernel weights vary by at most 1 % over the feature's range at the
        selected bandwidth: the fit ignores them (they do not help predict ``y``).
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


def _as_targets(y: ArrayLike, n: int) -> NDArray[np.float64]:
    """``y`` as a finite (n, p) float64 array, with errors that name ``y``."""
    v = as_real("y", y).astype(np.float64)
    if v.ndim not in (1, 2) or v.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) or ({n}, p) to match X; got shape {v.shape}")
    bad = ~np.isfinite(v)
    if bad.any():
        row = int(np.argwhere(bad)[0, 0])
        raise ValueError(f"y contains NaN or inf ({int(bad.sum())} entries; the first at row {row})")
    return np.ascontiguousarray(v.reshape(n, -1))


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
    ) -> None:
        # the weights were multiplied by 2**-weight_exp: AICc's sample size is their true sum
        self.weight_exp = weight_exp
        if sw is not None:
            keep = sw > 0
            X, Y, sw = X[keep], Y[keep], sw[keep]
        # sorted by the first feature (the criteria do not depend on the order): tiles of
        # neighbouring points let the grid pass skip far tiles at its finer levels
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
        self._nearest: tuple[NDArray[np.float64], NDArray[np.float64], float, NDArray[np.int64]] | None = None

    def _two(self) -> float:
        """AICc's 2 in ``(n + tr) / (n - tr - 2)``, in the units of the (scaled) weights."""
        if not self.weight_exp:
            return 2.0
        with np.errstate(over="ignore", under="ignore"):  # n = inf: the 2 vanishes
            return float(2.0 * (self.total / np.ldexp(self.total, self.weight_exp)))

    # -- the criterion from leave-one-out predictions ---------------------------------------
    def criterion(self, pred: NDArray[np.float64], rho: NDArray[np.float64]) -> float:
        """CV or AICc from leave-one-out predictions ``pred`` (n, p), NaN where a window is
        empty, and ``rho = log(leave-one-out weight / own weight)`` per point (n,)."""
        return float(self.criteria(pred[None], rho[None])[0])

    def criteria(self, pred: NDArray[np.float64], rho: NDArray[np.float64]) -> NDArray[np.float64]:
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
        return score

    # -- one bandwidth, through the primitive -------------------------------------------------
    def at(self, h: NDArray[np.float64], stage: str = "refine") -> float:
        """The criterion at one bandwidth, from one leave-one-out pass of the primitive."""
        from .backends._multibw import threads_for
        from .pooling import Call, compute_partials

        call = Call(self.X, self.X, self.Y, False, self.kernel, np.asarray(h, np.float64), self.sw)
        with threads_for(self.n**2 * self.d):
            parts, _ = compute_partials(call, exclude=self.exclude, backend=self.backend)
        self.n_passes += 1
        return self._record(h, self.from_partials(parts), stage)

    def from_partials(self, parts: Partials) -> float:
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.log(parts.weight) + parts.shift - self.own_log
        return self.criterion(parts.finalize(), rho)

    # -- Gaussian: many bandwidths per pass, and gradients -----------------------------------
    def _scaled(
        self, h: NDArray[np.float64], exact: bool = True
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``X / (sqrt(2) h)`` transposed, and each point's shift (its nearest neighbour's
        ``g``). Along one direction of ``h`` the nearest neighbours stay the same and the
        shifts scale as ``1 / t^2``: the k-d tree runs once per direction. Not ``exact``, a
        new direction takes the distance to the neighbour that was nearest in the last one (a
        valid shift, see :func:`~nadaraya.backends._multibw.loo_levels`; the caller checks
        the sums and asks again exactly if one overflowed)."""
        from .backends._multibw import shifts

        zt = np.ascontiguousarray((self.X / (math.sqrt(2.0) * h)).T)
        cached = self._nearest
        if cached is not None and np.allclose(h / h[0], cached[0], rtol=1e-12, atol=0.0):
            return zt, cached[1] * (cached[2] / h[0]) ** 2
        if not exact and cached is not None:
            return zt, np.sum((zt - zt[:, cached[3]]) ** 2, axis=0)
        c, nearest = shifts(zt)
        self._nearest = (h / h[0], c, float(h[0]), nearest)
        return zt, c

    def levels(self, h_top: NDArray[np.float64], n_levels: int, stage: str = "grid") -> NDArray[np.float64]:
        """The criterion at ``h_top * 2**(-l/2)``, l = 0 .. n_levels - 1, in one pass (Gaussian)."""
        from .backends._multibw import loo_levels, threads_for

        zt, c = self._scaled(h_top)
        with threads_for(self.n**2 * (1 + n_levels / 4)):
            S, T = loo_levels(zt, c, self.s, np.ascontiguousarray((self.s[:, None] * self.Y).T), n_levels)
        self.n_passes += 1
        with np.errstate(divide="ignore", invalid="ignore"):
            pred = T / S[:, :, None]
            rho = np.log(S) - np.outer(2.0 ** np.arange(n_levels), c) - np.log(self.s)
        out = self.criteria(pred, rho)
        for lev in range(n_levels):
            self._record(h_top * 2.0 ** (-lev / 2), float(out[lev]), stage)
        return out

    def with_gradient(self, h: NDArray[np.float64], stage: str = "per_feature") -> tuple[float, NDArray]:
        """The criterion and its gradient with respect to ``log h`` (Gaussian, one pass)."""
        from .backends._multibw import loo_gradient, threads_for

        sy = np.ascontiguousarray((self.s[:, None] * self.Y).T)
        zt, c = self._scaled(h, exact=False)
        with threads_for(self.n**2 * (1 + self.d)):
            S, T, A, B = loo_gradient(zt, c, self.s, sy)
            if not np.isfinite(S).all():  # a shift far from the minimum: again, exactly
                zt, c = self._scaled(h)
                S, T, A, B = loo_gradient(zt, c, self.s, sy)
        self.n_passes += 1
        pred = T / S[:, None]  # S >= 1: the shift's neighbour has weight one
        # d pred_i / d log h_k = (B_ik - pred_i A_ik) / S_i, shape (n, d, p)
        dpred = (B - pred[:, None, :] * A[:, :, None]) / S[:, None, None]
        resid = self.Y - pred
        p = self.Y.shape[1]
        rho = np.log(S) - c - np.log(self.s)
        score = self.criterion(pred, rho)
        if self.method == "cv":
            grad = -2.0 * np.einsum("i,ip,ikp->k", self.s, resid, dpred) / (self.total * p)
        else:
            from scipy.special import expit

            h_ii = expit(-rho)
            dh = -(h_ii * (1.0 - h_ii))[:, None] * A / S[:, None]  # d H_ii / d log h_k
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
        return score, grad

    def curvature(self, h: NDArray[np.float64], stage: str = "refine") -> tuple[float, float, float, float]:
        """The criterion at ``h`` and its first three derivatives along ``log h`` (all
        features scaled together), from one pass (Gaussian).

        The weights' derivatives are those of :func:`~nadaraya.backends._multibw.loo_curvature`;
        the sums' follow, and from ``T = pred S`` by Leibniz's rule:
        ``pred' = (T' - pred S') / S``, ``pred'' = (T'' - 2 pred' S' - pred S'') / S``,
        ``pred''' = (T''' - 3 pred'' S' - 3 pred' S'' - pred S''') / S``. With
        ``r = y - pred``: ``CV' = -2 mean(r pred')``, ``CV'' = 2 mean(pred'^2 - r pred'')``,
        ``CV''' = 2 mean(3 pred' pred'' - r pred''')`` (weighted means). AICc follows the
        same way through ``H_ii = s_i / (s_i + S_i)``, a function of ``log S_i``, the
        in-sample residual ``(1 - H_ii) r`` and ``g(tr) = (N + tr) / (N - tr - 2)``.
        """
        from .backends._multibw import loo_curvature, threads_for

        zt, c = self._scaled(h)
        with threads_for(self.n**2 * (1 + self.d)):
            M, N = loo_curvature(zt, c, self.s, np.ascontiguousarray((self.s[:, None] * self.Y).T))
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
        # AICc = log sigma2 + g(tr), g(t) = (N + t) / (N - t - 2); H_ii = s_i / (s_i + S_i)
        # (unshifted S_i) is a function of L = log S_i, and the in-sample residual is
        # e = (1 - H_ii) r with r the leave-one-out residual
        q1 = Sd[1] / Sd[0]
        q2 = Sd[2] / Sd[0]
        q3 = Sd[3] / Sd[0]
        L1, L2, L3 = q1, q2 - q1**2, q3 - 3.0 * q1 * q2 + 2.0 * q1**3  # derivatives of log S
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
    Y = _as_targets(y, x.shape[0])
    sw = as_sample_weight(sample_weight, x.shape[0], np.dtype(np.float64))
    n_live = x.shape[0] if sw is None else int((sw > 0).sum())
    if n_live < 3:
        raise ValueError(
            f"bandwidth selection needs at least 3 samples (with positive weight); got n_samples = {n_live}. "
            "Pass a numeric bandwidth instead"
        )
    return x, Y, sw, k


def score_bandwidth(
    X: ArrayLike,
    y: ArrayLike,
    bandwidth: ArrayLike,
    *,
    method: str = "cv",
    kernel: str | Kernel = "gaussian",
    sample_weight: ArrayLike | None = None,
    gradient: bool = False,
    backend: str = "auto",
) -> float | tuple[float, NDArray[np.float64]]:
    r"""The leave-one-out CV score or the AICc of a bandwidth; exact, one pass over the pairs.

    With ``f_{-i}`` the prediction at ``x_i`` from all the *other* points (its own term
    masked inside the sums, never subtracted afterwards), sample weights ``s_i`` (default 1),
    ``N = sum_i s_i`` and ``p`` outputs:

    - ``"cv"``: ``CV(h) = sum_i s_i |y_i - f_{-i}(x_i)|^2 / (N p)``; without weights and with
      one output this is statsmodels' ``KernelReg.cv_loo`` and R np's ``cv.ls``. A compact
      kernel that leaves some point with no neighbour in its window scores ``inf`` (CV is
      undefined there), so the search never selects such a bandwidth.
    - ``"aicc"``: the corrected AIC of Hurvich, Simonoff and Tsai (1998) in the form R's np
      and statsmodels use for the local-constant estimator,
      ``log(sigma^2) + (1 + tr(H) / N) / (1 - (tr(H) + 2) / N)``, where ``H_ii`` is a point's
      own weight over its total weight and ``sigma^2`` the mean squared in-sample residual;
      both come from the same leave-one-out pass (the in-sample residual is
      ``(1 - H_ii)`` times the leave-one-out one). ``inf`` when ``tr(H) + 2 >= N``.

    Parameters
    ----------
    X : array-like of shape (n, d) or (n,)
    y : array-like of shape (n,) or (n, p)
    bandwidth : float or array-like of shape (d,)
    method : {"cv", "aicc"}, default "cv"
    kernel : str or Kernel, default "gaussian"
    sample_weight : array-like of shape (n,), optional
    gradient : bool, default False
        Also return the gradient with respect to ``log h`` per feature (Gaussian kernel only;
        computed analytically in the same pass).
    backend : str, default "auto"
        The backend of the leave-one-out pass (without ``gradient``).

    Returns
    -------
    float, or (float, ndarray of shape (d,)) with ``gradient=True``

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(0, 1, 20); y = x**2
    >>> cv = score_bandwidth(x, y, 0.1)
    >>> def loo(i):
    ...     w = np.exp(-0.5 * ((x[i] - np.delete(x, i)) / 0.1) ** 2)
    ...     return np.average(np.delete(y, i), weights=w)
    >>> loo = np.array([loo(i) for i in range(20)])
    >>> bool(abs(cv - np.mean((y - loo) ** 2)) < 1e-12)
    True
    """
    from ._validation import as_bandwidth

    x, Y, sw, k = _validate(X, y, method, kernel, sample_weight)
    h = as_bandwidth(bandwidth, x.shape[1])
    obj = _Objective(x, Y, sw, k, method, backend)
    if gradient:
        if k.name != "gaussian":
            raise ValueError(
                f"gradient=True is available for the Gaussian kernel only; got kernel={k.name!r}"
            )
        return obj.with_gradient(h)
    return obj.at(h)


def _nn_linf(x: NDArray[np.float64]) -> float:
    """The largest L-inf distance from a point to its nearest other point (in units of ``x``):
    any window at least this wide holds a neighbour of every point."""
    from scipy.spatial import cKDTree

    dist, _ = cKDTree(x).query(x, k=2, p=np.inf)
    return float(dist[:, 1].max())


def _warn_bound(j: int | None, h: float, side: str, bound: float, method: str) -> None:
    where = "the search" if j is None else f"feature {j}"
    extra = (
        "; the feature is smoothed out (it does not help predict y)"
        if side == "upper"
        else "; a smaller bandwidth fits the noise or, for a compact kernel, leaves points with no "
        "neighbour in their window"
    )
    warnings.warn(
        f"{method}: the selected bandwidth of {where}, {h:.6g}, is on the {side} bound {bound:.6g} of "
        f"the search{extra}",
        BandwidthWarning,
        stacklevel=3,
    )


_GOLDEN = 0.3819660112501051  # (3 - sqrt 5) / 2


def _halley(
    f: Any, xs: tuple[float, float, float], fs: tuple[float, float, float], tol: float, max_eval: int = 30
) -> tuple[float, float, bool]:
    """Safeguarded Halley minimisation from a bracket whose three values are known already.

    ``xs = (a, b, c)`` ascending with ``f(b) <= f(a), f(c)``; ``f(x)`` returns the value and
    its first three derivatives. The first point is the vertex of the parabola through the
    three (``b`` when it is not inside). Each evaluation shrinks the bracket on the side its
    slope points away from. The next point is Halley's step for a zero of the slope,
    ``-2 f' f'' / (2 f''^2 - f' f''')`` (cubic convergence), where the curvature is positive
    and the step goes downhill and stays inside the bracket; Newton's ``-f' / f''`` where only
    Halley's fails; else the midpoint towards the descent side. Stops when a step is shorter
    than ``tol`` (the minimiser is then within about that of the point, which has been
    evaluated) or the bracket is narrower than ``2 tol``. From the vertex of the grid's
    parabola this takes two or three evaluations. Returns the best point seen, its value and
    whether it converged.

    Examples
    --------
    >>> import math
    >>> f = lambda x: (math.cosh(x - 0.3), math.sinh(x - 0.3), math.cosh(x - 0.3), math.sinh(x - 0.3))
    >>> x, fx, ok = _halley(f, (-1.0, 0.0, 1.0), (f(-1.0)[0], f(0.0)[0], f(1.0)[0]), 1e-6)
    >>> round(x, 4), ok
    (0.3, True)
    """
    (a, b, c), (fa, fb, fc) = xs, fs
    x = b
    if math.isfinite(fa) and math.isfinite(fc):
        num = (b - a) ** 2 * (fb - fc) - (b - c) ** 2 * (fb - fa)
        den = (b - a) * (fb - fc) - (b - c) * (fb - fa)
        if den != 0.0 and a < b - 0.5 * num / den < c:
            x = b - 0.5 * num / den
    best_x, best_f = b, fb
    for _ in range(max_eval):
        fx, g1, g2, g3 = f(x)
        if fx < best_f:
            best_x, best_f = x, fx
        if g1 > 0:
            c = x
        else:
            a = x
        step = math.nan
        if g2 > 0:
            den = 2.0 * g2 * g2 - g1 * g3
            halley = -2.0 * g1 * g2 / den if den > 0 else math.nan
            step = halley if a < x + halley < c and halley * g1 <= 0 else -g1 / g2
        if math.isfinite(step) and abs(step) < tol:
            return best_x, best_f, True
        if c - a <= 2.0 * tol:
            return best_x, best_f, True
        if math.isfinite(step) and a < x + step < c:
            x = x + step
        else:
            x = 0.5 * (x + (a if g1 > 0 else c))
    return best_x, best_f, False


def _brent(
    f: Any, xs: tuple[float, float, float], fs: tuple[float, float, float], tol: float, max_eval: int = 40
) -> tuple[float, float, bool]:
    """Brent's minimisation from a bracket whose three values are known already.

    ``xs = (a, b, c)`` ascending with ``f(b) <= f(a), f(c)`` (the best grid point and its
    neighbours), so no evaluation is spent on the bracket. Each step is the vertex of the
    parabola through the three points, safeguarded by a golden-section step into the larger
    side when the vertex falls outside the bracket, and kept ``tol`` inside its ends; a vertex
    within ``tol`` of ``b`` is replaced by a probe ``tol`` away from ``b`` on the larger side,
    so that the bracket shrinks on both sides. Stops when ``c - a <= 2 tol``: the minimiser
    is then within ``tol`` of ``b`` (for a function unimodal on the bracket); a last parabola
    step inside that bracket is kept when it scores lower. Returns ``(x, f(x), converged)``.
    """
    (a, b, c), (fa, fb, fc) = xs, fs

    def vertex() -> float:
        if not (math.isfinite(fa) and math.isfinite(fc)):
            return math.nan
        num = (b - a) ** 2 * (fb - fc) - (b - c) ** 2 * (fb - fa)
        den = (b - a) * (fb - fc) - (b - c) * (fb - fa)
        return b - 0.5 * num / den if den != 0.0 else math.nan

    for _ in range(max_eval):
        if c - a <= 2.0 * tol:
            # one last parabola step inside the final bracket: the score to (nearly) its
            # minimum, not only the bandwidth to tol
            x = vertex()
            if a < x < c and x != b:
                fx = f(x)
                if fx < fb:
                    return x, fx, True
            return b, fb, True
        x = vertex()
        right = (c - b) >= (b - a)
        if not a < x < c:
            x = b + _GOLDEN * (c - b) if right else b - _GOLDEN * (b - a)
        elif abs(x - b) < tol:
            x = b + tol if right else b - tol
        else:
            x = min(max(x, a + tol), c - tol)
        fx = f(x)
        if fx < fb:
            if x > b:
                a, fa = b, fb
            else:
                c, fc = b, fb
            b, fb = x, fx
        elif x > b:
            c, fc = x, fx
        else:
            a, fa = x, fx
    return b, fb, False


def _smoothed_out(kernel: Kernel, h: NDArray[np.float64], span: NDArray[np.float64]) -> NDArray[np.bool_]:
    if kernel.name == "constant":
        return np.ones(h.shape, dtype=bool)
    ratio = kernel.profile(span / h) / kernel.profile(np.zeros_like(h))
    return np.asarray(ratio >= _FLAT)


def select_bandwidth(
    X: ArrayLike,
    y: ArrayLike,
    *,
    method: str = "cv",
    kernel: str | Kernel = "gaussian",
    per_feature: bool = False,
    sample_weight: ArrayLike | None = None,
    backend: str = "auto",
) -> BandwidthSelection:
    r"""Choose the bandwidth by exact leave-one-out cross-validation or by AICc.

    The criteria are those of :func:`score_bandwidth`. The leave-one-out predictions are
    exact: each point's own term is masked inside the sums of one pass over the pairs per
    bandwidth; nothing is refitted n times.

    **Scalar search** (one bandwidth for every feature): a coarse log-spaced grid, ratio
    ``sqrt(2)``, from ``2**-6`` to at least ``2**5`` times Scott's rule of thumb (over three
    decades, extended up to three times the data's range so that "ignore x" is on the grid),
    then a bounded refinement on ``log h`` between the grid neighbours of the best grid
    point, to a relative 1e-3. The criterion has local minima; the grid is there for them. For
    the Gaussian kernel the whole grid costs one pass over the pairs: in the shifted log
    domain ``w(h / sqrt 2) = w(h)**2``, so each further grid point is a multiplication per
    pair (:mod:`nadaraya.backends._multibw`). The refinement with the Gaussian takes
    safeguarded Halley steps from the vertex of the grid's parabola: one pass gives the
    criterion (CV or AICc) and its first three derivatives along ``log h`` exactly, and two
    passes usually suffice. With the other kernels it is Brent's method, each step one
    leave-one-out pass of the primitive (:func:`nadaraya.pooling.compute_partials` with
    ``exclude=arange(n)``) on ``backend``.

    **Per feature** (``per_feature=True``): from the best point of the same coarse grid along
    Scott's per-feature rule (``h = t * rule``), L-BFGS-B on ``log h_k`` within data-derived bounds (``2**-6``
    times the rule below; above, the larger of ``2**5`` times the rule and 100 times the
    feature's range), with the analytic gradient of the criterion for the Gaussian kernel
    (from the same pass; finite differences through the primitive for other kernels). A
    feature that does not help ends with a large bandwidth: before L-BFGS-B (and after it,
    where the bandwidth has grown past the feature's range), each feature is tried at its
    upper bound (the criterion flattens out there, so its gradient vanishes long before the
    bound and L-BFGS-B would crawl) and kept there when the score is no worse;
    ``smoothed_out`` says which features the fit ignores. This favours smoothing a noise
    feature out: where such a feature also has an interior CV minimum, it
    may be missed (in our trials those minima were lower by less than 0.1 %). An optimum on a
    bound raises a :class:`BandwidthWarning` naming the feature and the bound.

    For compact kernels the search for ``"cv"`` stays above the smallest bandwidth at which
    every point has a neighbour in its window; a bandwidth below it scores ``inf``.

    **The textbook's learnable w is this problem.** The attention-pooling model of Dive into
    Deep Learning, ``f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i``, trained by minimising
    the leave-one-out squared loss over ``w``, is Gaussian Nadaraya-Watson with ``h = 1 / |w|``,
    and its loss is ``CV(h)``: the trained ``w`` is ``1 / h`` of ``method="cv"`` (at its
    global minimum; gradient descent may stop in a local one).

    Parameters
    ----------
    X : array-like of shape (n, d) or (n,)
    y : array-like of shape (n,) or (n, p)
    method : {"cv", "aicc"}, default "cv"
    kernel : str or Kernel, default "gaussian"
    per_feature : bool, default False
        One bandwidth per feature instead of one for all.
    sample_weight : array-like of shape (n,), optional
        Weights of the points in the sums and in the criterion (zero-weight points are left
        out altogether).
    backend : str, default "auto"
        The backend of the single-bandwidth passes.

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
        When ``y`` is constant (every bandwidth fits it equally well: Scott's rule of thumb is
        returned), or when the optimum is on a bound of the search.

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
    # Exact powers of two bring X, y and the weights to a safe range: the search then runs as
    # at unit scale (no squared residual overflows or underflows, no spread is lost), and the
    # result is scaled back. Data already in range are left as they are.
    x, x_exp = _pow2_scale(x, np.ptp(x, axis=0))
    Y, y_exp = _pow2_scale(Y, np.full(Y.shape[1], np.abs(Y).max()))
    w_exp = 0
    if sw is not None:
        sw, w_exps = _pow2_scale(sw[:, None], np.array([sw.max()]))
        sw, w_exp = sw[:, 0], int(w_exps[0])
    unit = np.ldexp(1.0, x_exp)
    res = _search(x, Y, sw, k, method, per_feature, backend, unit, w_exp)
    if not (x_exp.any() or y_exp.any()):
        return res
    search = dict(res.search)
    search["bandwidths"] = search["bandwidths"] * unit
    search["scores"] = _unscaled_score(search["scores"], method, int(y_exp[0]))
    return dataclasses.replace(
        res,
        bandwidth=res.bandwidth * unit,
        score=float(_unscaled_score(np.array([res.score]), method, int(y_exp[0]))[0]),
        rule_of_thumb=res.rule_of_thumb * unit,
        bounds=res.bounds * unit[:, None],
        search=search,
    )


#: data whose scale (spread of a feature, largest |y|, largest weight) lies outside
#: 2**-SAFE_EXP .. 2**SAFE_EXP are scaled by a power of two for the search
SAFE_EXP = 256


def _pow2_scale(
    a: NDArray[np.float64], scale: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[Any]]:
    """``a`` with each column multiplied by ``2**-e`` (exact) where its ``scale`` is outside
    the safe range, and the exponents ``e`` (0 where it is inside or zero)."""
    exp = np.frexp(scale)[1].astype(np.int64)
    out_of_range = (scale > 0) & ((scale < 2.0**-SAFE_EXP) | (scale > 2.0**SAFE_EXP))
    exp = np.where(out_of_range, exp, 0)
    return (np.ldexp(a, -exp[None, :]) if exp.any() else a), exp


def _unscaled_score(score: NDArray[np.float64], method: str, y_exp: int) -> NDArray[np.float64]:
    """A criterion computed on ``y * 2**-y_exp`` in the units of ``y``."""
    if y_exp == 0:
        return score
    if method == "cv":  # inf where the true score is beyond float64's range
        with np.errstate(over="ignore", under="ignore"):
            return np.ldexp(score, 2 * y_exp)
    return score + 2.0 * y_exp * math.log(2.0)  # AICc: log(sigma^2) moves by log(4**y_exp)


def _search(
    x: NDArray[np.float64],
    Y: NDArray[np.float64],
    sw: NDArray[np.float64] | None,
    k: Kernel,
    method: str,
    per_feature: bool,
    backend: str,
    unit: NDArray[np.float64],
    w_exp: int,
) -> BandwidthSelection:
    """:func:`select_bandwidth` on validated data; ``unit`` scales bandwidths back for messages."""
    from scipy.optimize import minimize, minimize_scalar
    from threadpoolctl import threadpool_limits

    rot = rule_of_thumb(x, "scott", kernel=k, sample_weight=sw)
    d = x.shape[1]
    obj = _Objective(x, Y, sw, k, method, backend, w_exp)
    span = np.ptp(obj.X, axis=0)
    geo = float(np.exp(np.mean(np.log(rot))))
    direction = rot / geo if per_feature else np.ones(d)

    def result(h: NDArray[np.float64], score: float, bounds: NDArray, converged: bool, msg: str) -> Any:
        return BandwidthSelection(
            bandwidth=np.asarray(h, dtype=np.float64),
            score=float(score),
            method=method,
            kernel=k.name,
            per_feature=per_feature,
            smoothed_out=_smoothed_out(k, h, span),
            rule_of_thumb=rot,
            bounds=bounds,
            search=obj.record(),
            n_passes=obj.n_passes,
            converged=converged,
            message=msg,
        )

    if np.ptp(obj.Y, axis=0).max() == 0:
        warnings.warn(
            f"y is constant, so every bandwidth fits it exactly and {method} cannot choose; "
            "returning Scott's rule of thumb",
            BandwidthWarning,
            stacklevel=2,
        )
        h = rot if per_feature else np.full(d, geo)
        return result(h, obj.at(h, "grid"), np.stack([h, h], axis=1), True, "constant y: rule of thumb")

    # -- the coarse grid in t, h = t * direction ------------------------------------------------
    t_floor = 0.0
    if k.compact and method == "cv":
        t_floor = _nn_linf(obj.X / direction) * (1.0 + 1e-9)
    reach = float(np.max(span / direction))
    n_above = max(_GRID_ABOVE, math.ceil(2.0 * math.log2(max(1.0, 3.0 * reach / geo))))
    ts = geo * 2.0 ** (np.arange(n_above, -_GRID_BELOW - 1, -1) / 2.0)  # descending
    if t_floor > 0:
        ts = ts[ts > t_floor]
        if ts.size == 0 or ts[-1] > t_floor * 1.01:
            ts = np.append(ts, t_floor)
    if k.name == "gaussian":
        grid = obj.levels(ts[0] * direction, ts.size)
    else:
        grid = np.array([obj.at(t * direction, "grid") for t in ts])
    best = int(np.argmin(grid))
    if not np.isfinite(grid[best]):
        raise ValueError(f"{method} is infinite at every bandwidth on the grid; the data are degenerate")

    # -- refinement on log t between the neighbours of the best grid point ----------------------
    # (per feature, L-BFGS-B refines every direction from the best grid point instead)
    lo = ts[min(best + 1, ts.size - 1)]
    hi = ts[max(best - 1, 0)]
    t_best, s_best = float(ts[best]), float(grid[best])
    converged = True
    how = "no refinement"
    inner = 0 < best < ts.size - 1
    if inner and (not per_feature or d == 1):
        # the grid's three values around its best point are the first bracket: no evaluation
        # is spent on it (in log t, ascending); the Gaussian takes Halley steps with exact
        # derivatives, the other kernels Brent's parabolas
        bracket = (math.log(lo), math.log(ts[best]), math.log(hi))
        values = (float(grid[best + 1]), float(grid[best]), float(grid[best - 1]))
        if k.name == "gaussian":
            how = "Halley"
            x_best, s_brent, converged = _halley(
                lambda lt: obj.curvature(math.exp(lt) * direction), bracket, values, _XATOL
            )
        else:
            how = "Brent"
            x_best, s_brent, converged = _brent(
                lambda lt: obj.at(math.exp(lt) * direction), bracket, values, _XATOL
            )
        if s_brent < s_best:
            t_best, s_best = math.exp(x_best), s_brent
    elif hi > lo and (not per_feature or d == 1):
        how = "bounded Brent"
        res = minimize_scalar(
            lambda lt: obj.at(math.exp(lt) * direction),
            bounds=(math.log(lo), math.log(hi)),
            method="bounded",
            options={"xatol": _XATOL},
        )
        converged = bool(res.success)
        if res.fun < s_best:
            t_best, s_best = math.exp(float(res.x)), float(res.fun)
    scalar_bounds = np.stack([ts[-1] * direction, ts[0] * direction], axis=1)
    if not per_feature or d == 1:
        h = t_best * direction
        if best == 0 or best == ts.size - 1:
            side, bound = ("upper", ts[0]) if best == 0 else ("lower", ts[-1])
            if abs(math.log(t_best / bound)) < 2 * _XATOL:
                _warn_bound(None if d > 1 else 0, t_best * unit[0], side, bound * unit[0], method)
        return result(h, s_best, scalar_bounds, converged, f"grid of {ts.size} and {how} on log h")

    # -- per feature: L-BFGS-B on log h with analytic gradients -------------------------------
    lower = rot * 2.0 ** (-_GRID_BELOW / 2)
    if t_floor > 0:
        lower = np.maximum(lower, t_floor * direction)
    upper = np.maximum(rot * 2.0 ** (_GRID_ABOVE / 2), 100.0 * span)
    v0 = np.clip(np.log(t_best * direction), np.log(lower), np.log(upper))
    # the score is scaled to order one so that L-BFGS-B's tolerances mean the same on any data
    scale = abs(s_best) if method == "cv" and s_best > 0 else 1.0
    if k.name == "gaussian":

        def fun(v: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
            f, g = obj.with_gradient(np.exp(v))
            return f / scale, g / scale

        jac: Any = True
    else:

        def fun(v: NDArray[np.float64]) -> float:  # type: ignore[misc]
            return obj.at(np.exp(v), "per_feature") / scale

        jac = None
    bounds = list(zip(np.log(lower), np.log(upper)))
    # stop when a step gains less than 1e-10 of the (order-one) score, or the projected
    # gradient is below 1e-6: the bandwidths are then well inside a relative 1e-3
    options = {"ftol": 1e-10, "gtol": 1e-6, "maxiter": 200}

    def lbfgsb(start: NDArray[np.float64]) -> Any:
        # the criterion is inf where some window is empty (compact kernels, or AICc past its
        # pole): L-BFGS-B's finite differences there are inf - inf, which it steps back from
        with np.errstate(invalid="ignore"):
            return minimize(fun, start, jac=jac, method="L-BFGS-B", bounds=bounds, options=options)

    def smooth_out(
        h: NDArray[np.float64], score: float, wide: bool = False
    ) -> tuple[NDArray[np.float64], float, bool]:
        """Try each feature at its upper bound (smoothed out); keep what is no worse. With
        ``wide``, only the features whose bandwidth is at least their range (where the
        criterion has flattened out: the others shape the weights, and an optimiser that
        stopped there found them useful)."""
        moved = False
        for j in range(d):
            if h[j] < upper[j] and (not wide or h[j] >= span[j]):
                trial = h.copy()
                trial[j] = upper[j]
                s_trial = obj.at(trial, "per_feature")
                if s_trial <= score:
                    h, score, moved = trial, s_trial, True
        return h, score, moved

    # The criterion flattens out as a useless feature's bandwidth grows, so its gradient
    # vanishes long before the bound and L-BFGS-B would crawl there: each feature is tried
    # smoothed out (at its upper bound) before L-BFGS-B, and again after it where its
    # bandwidth has grown past its range, and kept there when the score is no worse.
    # L-BFGS-B's BLAS calls on a few numbers: OpenBLAS's thread pool only fights numba's
    # for the cores there (measured: 10 ms per step on 2 busy cores, instead of microseconds)
    with threadpool_limits(limits=1, user_api="blas"):
        h, s_final, _ = smooth_out(np.exp(v0), s_best)
        res = lbfgsb(np.log(h))
        if float(res.fun) * scale <= s_final:
            h, s_final = np.exp(res.x), float(res.fun) * scale
        h, s_final, moved = smooth_out(h, s_final, wide=True)
        if moved:
            res = lbfgsb(np.log(h))
            if float(res.fun) * scale <= s_final:
                h, s_final = np.exp(res.x), float(res.fun) * scale
        if k.name == "gaussian":
            # the score reported is the criterion at the returned bandwidth, from one exact
            # leave-one-out pass of the primitive: the gradient pass borrows its shifts and can
            # misjudge rows whose every weight is near the flush limit (issue 12 fuzzing)
            s_final = obj.at(h, "per_feature")
    for j in range(d):
        if abs(math.log(h[j] / upper[j])) < 1e-6:
            _warn_bound(j, float(h[j] * unit[j]), "upper", float(upper[j] * unit[j]), method)
        elif abs(math.log(h[j] / lower[j])) < 1e-6:
            _warn_bound(j, float(h[j] * unit[j]), "lower", float(lower[j] * unit[j]), method)
    return result(
        h,
        s_final,
        np.stack([lower, upper], axis=1),
        bool(res.success),
        f"grid of {ts.size}, L-BFGS-B: {res.message}",
    )
