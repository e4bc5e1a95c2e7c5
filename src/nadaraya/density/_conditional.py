"""ConditionalDensity: the kernel estimate of f(y | x), its CDF, quantiles and prediction intervals."""

from __future__ import annotations

from numbers import Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, _fit_context

from nadaraya._support.params import Letters, Names, Number, fold_case, fold_name
from nadaraya._support.validation import as_points, as_real, as_sample_weight, as_tol, is_dask
from nadaraya.backends import NAMES as BACKENDS
from nadaraya.density import _cond_cdf
from nadaraya.density._cdf import categorical_cdf, has_cdf, kernel_cdf
from nadaraya.density._cond_select import cv_ls_score, cv_ml_score, select
from nadaraya.density._cond_sums import Sample, block_size, log_sums, normalised, x_log_weights, y_cdf
from nadaraya.density._quantile import XTOL, bracket, invert
from nadaraya.distributed.fit import map_rows
from nadaraya.kernels import Kernel, names
from nadaraya.kernels import get as get_kernel
from nadaraya.local.mixed import CATEGORICAL_KERNELS, as_categorical_kernel, as_var_types

__all__ = ["ConditionalDensity"]

_F64 = np.dtype(np.float64)
_METHODS = ("normal_reference", "cv_ml", "cv_ls")


class ConditionalDensity(BaseEstimator):  # type: ignore[misc]
    r"""Kernel estimate of the conditional density ``f(y | x)``, its CDF and quantiles.

    .. math::

        \hat f(y \mid x) = \frac{\sum_i s_i K_h(x - X_i)\, L_g(y - Y_i)}{\sum_i s_i K_h(x - X_i)},
        \qquad
        \hat F(y \mid x) = \frac{\sum_i s_i K_h(x - X_i)\, G\!\left(\frac{y - Y_i}{g}\right)}
                               {\sum_i s_i K_h(x - X_i)}

    with product kernels over the columns (``K_h``: x's; ``L_g``: y's, normalised), ``G`` the
    y kernel's CDF in closed form, and the categorical kernels of statsmodels and R np
    (Aitchison-Aitken, Wang-van Ryzin, or Li-Racine) on categorical columns. The same estimator
    as statsmodels' ``KDEMultivariateConditional`` and np's ``npcdens`` / ``npcdist``;
    :meth:`quantile` inverts the CDF per query as np's ``npqreg``. The density is a ratio of
    the engine's partial sums with unit values (joint over marginal), in the log domain.

    Parameters
    ----------
    kernel : str, default "gaussian"
        Any kernel of :mod:`nadaraya.kernels` but ``constant``.
    bandwidth : {"cv_ml", "cv_ls", "normal_reference"}, float or array-like, default "cv_ml"
        One entry per column, **x's columns first, then y's** (a categorical column's entry is
        its lambda); a float for all-continuous data. ``"cv_ml"``: the leave-one-out
        conditional likelihood (np's ``cv.ml`` for ``npcdens``); ``"cv_ls"``: least-squares
        cross-validation (statsmodels' ``imse``); ``"normal_reference"``: ``1.06 sd
        n^(-1/(4+d))``.
    var_types : str, optional
        The types of x's columns: ``c`` continuous, ``o`` ordered, ``u`` unordered (default
        all continuous).
    dep_types : str, optional
        The types of y's columns, likewise.
    categorical_kernel : {"classic", "li-racine"}, default "classic"
    backend : str, default "auto"
        The engine backend for the density's sums (:func:`nadaraya.backends.available`).
    tol : float, optional
        Where given, the sums may be computed by a faster method within it (the Gaussian
        kernel's Taylor series; :func:`nadaraya.pool`'s ``tol``): :meth:`log_pdf` within
        ``2 log(1 + tol)`` of the exact one and :meth:`cdf` within ``tol``, on every query.
        ``None``: exact sums.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (dx + dy,)
        The bandwidths used, x's columns then y's.
    n_features_in_ : int
    n_targets_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya import ConditionalDensity
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 1, 200)
    >>> y = x + 0.1 * rng.standard_normal(200)
    >>> cd = ConditionalDensity(bandwidth=[0.1, 0.05]).fit(x, y)
    >>> float(cd.cdf([0.5], [0.5])[0]).__round__(1)
    0.5
    >>> lo, hi = cd.predict_interval([0.5], level=0.9)[0]
    >>> bool(lo < 0.5 < hi)
    True
    """

    #: what each parameter accepts, checked once per ``fit`` by scikit-learn (InvalidParameterError);
    #: rules against the data (one bandwidth per column, lambdas in range) stay in ``fit``
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "kernel": [Names([a for a in names(aliases=True) if has_cdf(a)], fold=fold_case), Kernel],
        "bandwidth": [Number(Real, 0, np.inf, closed="neither"), "array-like", Names(_METHODS)],
        "var_types": [Letters("cou"), None],
        "dep_types": [Letters("cou"), None],
        "categorical_kernel": [Names(CATEGORICAL_KERNELS, fold=fold_name)],
        "backend": [Names(BACKENDS)],
        "tol": [Number(Real, 0, 0.1, closed="right"), None],
    }

    def __init__(
        self,
        kernel: str = "gaussian",
        bandwidth: Any = "cv_ml",
        var_types: str | None = None,
        dep_types: str | None = None,
        categorical_kernel: str = "classic",
        backend: str = "auto",
        tol: float | None = None,
    ) -> None:
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.var_types = var_types
        self.dep_types = dep_types
        self.categorical_kernel = categorical_kernel
        self.backend = backend
        self.tol = tol

    # ----------------------------------------------------------------------------------- fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> ConditionalDensity:
        """Fit to x (n, dx) or (n,) and y (n, dy) or (n,); choose the bandwidths.

        Parameters
        ----------
        X : array-like of shape (n, dx) or (n,)
        y : array-like of shape (n, dy) or (n,)
        sample_weight : array-like of shape (n,), optional
            Non-negative weights; integer weights act as repeated rows.

        Returns
        -------
        self
        """
        k = get_kernel(self.kernel)
        if not has_cdf(k):  # a Kernel given as an object (its names are in _parameter_constraints)
            raise ValueError(f"kernel={self.kernel!r} is not integrable; a density needs another kernel")
        X, y, sample_weight = (_computed(a) for a in (X, y, sample_weight))
        x = as_points("X", X, _F64).astype(np.float64, copy=False)
        yy = as_points("y", y, _F64).astype(np.float64, copy=False)
        if yy.shape[0] != x.shape[0]:
            raise ValueError(f"X has {x.shape[0]} rows but y has {yy.shape[0]}; give one y row per X row")
        if x.shape[0] < 2:
            raise ValueError(f"X has {x.shape[0]} row; a conditional density needs at least 2")
        vt = as_var_types(self.var_types, x.shape[1])
        dt = as_var_types(self.dep_types, yy.shape[1])
        ck = as_categorical_kernel(self.categorical_kernel)
        w = as_sample_weight(sample_weight, x.shape[0], _F64)
        sw = None if w is None else w.astype(np.float64, copy=False)
        s = Sample(x, yy, vt, dt, np.ones(x.shape[1] + yy.shape[1]), k, ck, sw, self.backend)
        bw = self.bandwidth
        if isinstance(bw, str):  # one of _METHODS: _parameter_constraints
            s.bandwidth = select(s, bw)
        else:
            s.bandwidth = _as_bandwidth(bw, vt + dt)
        _check_lambdas(s)
        s.tol = as_tol(self.tol)
        self.sample_ = s
        self.bandwidth_ = s.bandwidth.copy()
        self.n_features_in_ = x.shape[1]
        self.n_targets_ = yy.shape[1]
        return self

    # ------------------------------------------------------------------------------- queries
    def _queries(
        self, X: ArrayLike, y: ArrayLike | None = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
        if not hasattr(self, "sample_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this ConditionalDensity is not fitted yet; call fit(X, y) first")
        s = self.sample_
        qx = as_points("X", X, _F64).astype(np.float64, copy=False)
        if qx.shape[1] != s.dx:
            if np.ndim(X) == 1 and qx.shape[0] == s.dx:  # one query of several columns, given flat
                qx = qx.T
            else:
                raise ValueError(f"X has {qx.shape[1]} columns, but the model was fitted on {s.dx}")
        if y is None:
            return qx, None
        qy = as_points("y", y, _F64).astype(np.float64, copy=False)
        if qy.shape[1] != s.y.shape[1]:
            raise ValueError(f"y has {qy.shape[1]} columns, but the model was fitted on {s.y.shape[1]}")
        if qy.shape[0] != qx.shape[0]:
            raise ValueError(f"X has {qx.shape[0]} rows but y has {qy.shape[0]}; give one y per query")
        return qx, qy

    def log_pdf(self, X: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
        """``log f(y | x)`` at each pair (X[j], y[j]): finite also far from the data
        (Gaussian, Laplacian, logistic kernels); ``-inf`` where a compact kernel gives 0; NaN
        where no training x is near (a compact kernel's empty window).

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import ConditionalDensity
        >>> cd = ConditionalDensity(bandwidth=[1.0, 1.0]).fit([0.0, 1.0], [0.0, 1.0])
        >>> bool(np.isfinite(cd.log_pdf([0.5], [1e4])[0]))
        True
        """
        if is_dask(X, y):
            return map_rows(self.log_pdf, X, y)  # type: ignore[no-any-return]
        qx, qy = self._queries(X, y)
        joint, marg = log_sums(self.sample_, qx, qy)
        with np.errstate(invalid="ignore"):
            return joint - marg  # type: ignore[no-any-return]

    def pdf(self, X: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
        """``f(y | x)`` at each pair (X[j], y[j]) (a probability for categorical y).

        Examples
        --------
        >>> from nadaraya import ConditionalDensity
        >>> cd = ConditionalDensity(bandwidth=[1.0, 1.0]).fit([0.0, 1.0], [0.0, 1.0])
        >>> round(float(cd.pdf([0.0], [0.0])[0]), 4)
        0.3397
        """
        return np.exp(self.log_pdf(X, y))  # type: ignore[no-any-return]

    def cdf(self, X: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
        """``F(y | x)`` at each pair (X[j], y[j]): the y kernel's CDF (exact) under the x-weights;
        for several y columns, the joint CDF (every column at or below y's).

        Examples
        --------
        >>> from nadaraya import ConditionalDensity
        >>> cd = ConditionalDensity(bandwidth=[1.0, 1.0]).fit([0.0, 1.0], [0.0, 1.0])
        >>> round(float(cd.cdf([0.5], [0.5])[0]), 12)
        0.5
        """
        if is_dask(X, y):
            return map_rows(self.cdf, X, y)  # type: ignore[no-any-return]
        qx, qy = self._queries(X, y)
        assert qy is not None
        s = self.sample_
        if s.dep_types == "c":
            return _cond_cdf.cdf(s, qx, qy[:, 0], s.tol)
        return _dense_cdf(s, qx, qy)

    def quantile(self, X: ArrayLike, alpha: ArrayLike = 0.5) -> NDArray[np.float64]:
        """Conditional quantiles ``inf {y : F(y | x) >= alpha}`` of a single y column.

        Continuous y: the CDF inverted per query to ``1e-10 * max(|q|, sd(y))`` (vectorised
        over the queries, as np's ``npqreg``). Ordered y: the smallest training category whose
        CDF reaches ``alpha`` (the largest if none does: Wang-van Ryzin's CDF stays below 1).

        Parameters
        ----------
        X : array-like of shape (m, dx) or (m,)
        alpha : float or array-like of shape (k,), default 0.5
            Levels in (0, 1).

        Returns
        -------
        ndarray of shape (m,) for a scalar ``alpha``, else (m, k)

        Examples
        --------
        >>> from nadaraya import ConditionalDensity
        >>> cd = ConditionalDensity(bandwidth=[1.0, 1.0]).fit([0.0, 1.0], [0.0, 1.0])
        >>> round(float(cd.quantile([0.5], 0.5)[0]), 9)
        0.5
        """
        if is_dask(X):
            k = np.size(alpha)
            one = np.ndim(alpha) == 0
            return map_rows(lambda b: self.quantile(b, alpha), X, None, None if one else k)  # type: ignore[no-any-return]
        qx, _ = self._queries(X)
        s = self.sample_
        a = as_real("alpha", alpha).astype(np.float64)
        if not (np.all(a > 0) and np.all(a < 1)) or a.ndim > 1:
            raise ValueError(f"alpha must be a level or a 1-D array of levels in (0, 1); got {alpha!r}")
        if s.y.shape[1] != 1 or s.dep_types == "u":
            raise ValueError(
                f"quantile needs one continuous or ordered y column; the model has dep_types={s.dep_types!r}"
            )
        levels = np.atleast_1d(a)
        if s.dep_types == "c":
            out, left = _cond_cdf.quantile(s, qx, levels, s.tol)
            for j, k in zip(*np.nonzero(left), strict=True):  # beyond the ladder: the dense inversion
                out[j, k] = _dense_quantile(s, qx[j : j + 1], levels[k : k + 1])[0, 0]
        else:
            out = _dense_quantile(s, qx, levels)
        return out[:, 0] if a.ndim == 0 else out

    def predict_interval(self, X: ArrayLike, level: float = 0.9) -> NDArray[np.float64]:
        """Prediction intervals from the conditional quantiles ``(1 - level)/2`` and ``(1 + level)/2``:
        they widen where y spreads more given x.

        Returns
        -------
        ndarray of shape (m, 2): the lower and upper ends

        Examples
        --------
        >>> from nadaraya import ConditionalDensity
        >>> cd = ConditionalDensity(bandwidth=[1.0, 1.0]).fit([0.0, 1.0], [0.0, 1.0])
        >>> lo, hi = cd.predict_interval([0.5], 0.5)[0]
        >>> round(float(lo + hi), 9)
        1.0
        """
        lev = float(as_real("level", level))
        if not 0.0 < lev < 1.0:
            raise ValueError(f"level must lie in (0, 1); got {level!r}")
        return self.quantile(X, np.array([(1.0 - lev) / 2.0, (1.0 + lev) / 2.0]))

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """The total ``log f(y | x)`` over the pairs (as ``KernelDensity.score`` sums its log densities)."""
        return float(np.sum(self.log_pdf(X, y)))

    def loo_log_likelihood(self, bandwidth: ArrayLike | None = None) -> float:
        """``sum_i log f_{-i}(Y_i | X_i)`` (each term floored at ``log(DBL_MIN)``): what
        ``"cv_ml"`` maximises, at the fitted or the given bandwidths (x's then y's)."""
        return cv_ml_score(self._at(bandwidth))

    def cv_ls_criterion(self, bandwidth: ArrayLike | None = None) -> float:
        """The least-squares cross-validation criterion that ``"cv_ls"`` minimises."""
        return cv_ls_score(self._at(bandwidth))

    def _at(self, bandwidth: ArrayLike | None) -> Sample:
        self._queries(np.zeros((1, self.n_features_in_)) if hasattr(self, "sample_") else [[0.0]])
        s = self.sample_
        if bandwidth is None:
            return s
        t = Sample(**{**s.__dict__, "bandwidth": _as_bandwidth(bandwidth, s.var_types + s.dep_types)})
        _check_lambdas(t)
        return t


def _dense_cdf(s: Sample, qx: NDArray[np.float64], qy: NDArray[np.float64]) -> NDArray[np.float64]:
    """``F(qy_j | qx_j)`` from dense x-weights per block of queries (any y columns and types)."""
    m, n = qx.shape[0], s.x.shape[0]
    out = np.empty(m)
    step = block_size(m, n)
    for q0 in range(0, m, step):
        w = normalised(x_log_weights(s, qx[q0 : q0 + step]))  # as quantile() sums: F(q) >= alpha
        out[q0 : q0 + step] = (w * y_cdf(s, qy[q0 : q0 + step])).sum(axis=1)
    return out


def _dense_quantile(s: Sample, qx: NDArray[np.float64], levels: NDArray[np.float64]) -> NDArray[np.float64]:
    """The conditional quantiles (m, k) from dense x-weights per block of queries."""
    m, n = qx.shape[0], s.x.shape[0]
    out = np.empty((m, levels.size))
    step = block_size(m, n, 6)
    for q0 in range(0, m, step):
        w = normalised(x_log_weights(s, qx[q0 : q0 + step]))
        for k, lev in enumerate(levels):
            out[q0 : q0 + step, k] = _invert(s, w, float(lev))
    return out


def _invert(s: Sample, w: NDArray[np.float64], level: float) -> NDArray[np.float64]:
    """The quantile at ``level`` of each row of the normalised x-weights ``w`` (b, n)."""
    y = s.y[:, 0]
    b = w.shape[0]
    alpha = np.full(b, level)
    if s.dep_types == "o":
        cats = s.levels(0, True)
        f = np.stack(
            [
                (
                    w * categorical_cdf("o", s.categorical_kernel, y, np.full(b, c), float(s.hy[0]), cats)
                ).sum(axis=1)
                for c in cats
            ],
            axis=1,
        )
        first = np.argmax(f >= level, axis=1)
        first = np.where((f >= level).any(axis=1), first, cats.size - 1)
        return np.where(np.isnan(f).any(axis=1), np.nan, cats[first])
    h = float(s.hy[0])

    def cdf(
        rows: NDArray[np.intp], at: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        u = (at[:, None] - y[None, :]) / h
        wr = w[rows]
        return (wr * kernel_cdf(s.kernel, u)).sum(axis=1), (wr * s.kernel.profile(u)).sum(axis=1) / h

    reach = h * (s.kernel.support if s.kernel.compact else 10.0)  # F(lo) is then ~0
    lo, hi, f_lo, f_hi = bracket(cdf, alpha, np.full(b, y.min() - reach), np.full(b, y.max() + reach), h)
    scale = float(np.std(y)) or h
    # the first guess: the weighted quantile of the keys' y (within about h of the answer)
    order = np.argsort(y, kind="stable")
    reached = np.cumsum(w[:, order], axis=1) >= level
    first = np.where(reached.any(axis=1), y[order][np.argmax(reached, axis=1)], np.nan)
    return invert(cdf, alpha, lo, hi, scale=scale, xtol=XTOL, f_lo=f_lo, f_hi=f_hi, start=first)


def _computed(a: Any) -> Any:
    """A Dask array's values (the training data are gathered), anything else as it is."""
    return np.asarray(a.compute()) if is_dask(a) else a


def _as_bandwidth(bw: Any, types: str) -> NDArray[np.float64]:
    h = as_real("bandwidth", bw).astype(np.float64)
    d = len(types)
    if h.ndim == 0 and set(types) == {"c"}:
        h = np.full(d, float(h))
    if h.shape != (d,):
        raise ValueError(
            f"bandwidth must have one entry per column, x's then y's ({d}: types {types!r}); got {bw!r}"
        )
    cont = np.array([t == "c" for t in types])
    if not (np.isfinite(h[cont]).all() and (h[cont] > 0).all()):
        raise ValueError(f"the continuous columns' bandwidths must be positive and finite; got {bw!r}")
    return h


def _check_lambdas(s: Sample) -> None:
    from nadaraya.local.mixed import Categorical

    data, types = np.hstack([s.x, s.y]), s.var_types + s.dep_types
    cat = np.array([j for j, t in enumerate(types) if t != "c"], dtype=np.intp)
    if cat.size:
        Categorical.build(
            "".join(types[j] for j in cat),
            data[:, cat],
            data[:1, cat],
            s.bandwidth[cat],
            s.categorical_kernel,
            columns=cat,
        )
