"""The kernel density estimator: :class:`KernelDensity`, a scikit-learn estimator on pool's sums."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from nadaraya._support.params import Letters, Names, Number, fold_case, fold_name
from nadaraya._support.validation import as_sample_weight, as_tol, is_dask
from nadaraya.backends import NAMES as BACKENDS
from nadaraya.bandwidth.rules import rule_of_thumb
from nadaraya.density._constants import log_kde, log_kernel_constant, log_probability
from nadaraya.density._cv import CVProblem, select
from nadaraya.kernels import Kernel, names
from nadaraya.kernels import get as get_kernel
from nadaraya.local.mixed import (
    CATEGORICAL_KERNELS,
    Categorical,
    as_categorical_kernel,
    as_var_types,
    lambda_bounds,
)

__all__ = ["KernelDensity"]

RULES = ("scott", "silverman", "normal_reference")
SEARCHES = ("cv_ml", "cv_ls", "cv_ml_scalar", "cv_ls_scalar")
#: the kernel names a density takes: those of the kernels that integrate to one (all but "constant")
DENSITY_KERNELS = tuple(a for a in names(aliases=True) if math.isfinite(get_kernel(a).integral))


class KernelDensity(BaseEstimator):  # type: ignore[misc]
    """Kernel density estimate, exact or within ``tol``, on the sums of :func:`nadaraya.pool`.

    .. math::

        \\hat f(x) = \\frac{1}{\\sum_i s_i} \\sum_i s_i \\prod_{c} \\frac{1}{h_c}
        K\\Big(\\frac{x_c - X_{ic}}{h_c}\\Big) \\prod_{j \\in o, u} L(x_j \\mid X_{ij}, \\lambda_j)

    Product kernels over the continuous columns, and categorical probabilities over the ordered
    and unordered ones, as statsmodels' ``KDEMultivariate`` defines them.

    Parameters
    ----------
    kernel : str, default "gaussian"
        Any kernel of :mod:`nadaraya.kernels` but ``"constant"``, with its normalising constant.
    bandwidth : float, array-like or str, default "cv_ml"
        A float (every column continuous), one per column (a categorical column's entry is its
        ``lambda``), a rule of thumb (``"scott"``, ``"silverman"``: the rule of
        :func:`nadaraya.bandwidth.rules.rule_of_thumb` for the continuous columns;
        ``"normal_reference"``: statsmodels' ``1.06 sd n^(-1/(4+d))``; categorical lambdas
        ``1.06 sd n^(-1/(4+d))`` kept inside their range), or a cross-validation:
        ``"cv_ml"`` (leave-one-out likelihood, maximised) or ``"cv_ls"`` (least-squares CV,
        minimised), per column; ``"cv_ml_scalar"``, ``"cv_ls_scalar"``: one common factor of
        the rule-of-thumb bandwidths.
    var_types : str, optional
        One letter per column: ``"c"`` continuous, ``"o"`` ordered, ``"u"`` unordered
        (numeric codes). Default all continuous.
    categorical_kernel : {"classic", "li-racine"}, default "classic"
        Wang-van Ryzin (ordered) and Aitchison-Aitken (unordered), or Li-Racine's (divided by
        their sum over the training levels, so that they are probabilities).
    tol : float, optional
        ``None``: exact sums. A number in ``(0, 0.1]``: every log density within
        ``log(1 + tol)`` of the exact one, on every query, by a faster method where one applies
        (the Gaussian kernel's Taylor series; :func:`nadaraya.pool`'s ``tol``).
    backend : str, default "auto"
        The engine's backend (:func:`nadaraya.backends.available`).

    Attributes
    ----------
    bandwidth_ : ndarray of shape (d,)
        The bandwidth (continuous columns) or lambda (categorical ones) in use.
    var_types_ : str
    n_features_in_ : int
    X_fit_ : ndarray of shape (n, d)
    sample_weight_ : ndarray of shape (n,) or None

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya import KernelDensity
    >>> x = np.random.default_rng(0).normal(size=(200, 1))
    >>> kde = KernelDensity(bandwidth=0.4).fit(x)
    >>> kde.score_samples([[0.0]]).round(2)
    array([-0.99])
    """

    #: what each parameter accepts, checked once per ``fit`` by scikit-learn (InvalidParameterError);
    #: rules against the data (one bandwidth per column, lambdas in range) stay in ``fit``
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "kernel": [Names(DENSITY_KERNELS, fold=fold_case), Kernel],
        "bandwidth": [Number(Real, 0, np.inf, closed="neither"), "array-like",
                      Names(RULES + SEARCHES, fold=fold_case)],
        "var_types": [Letters("cou"), None],
        "categorical_kernel": [Names(CATEGORICAL_KERNELS, fold=fold_name)],
        "tol": [Number(Real, 0, 0.1, closed="right"), None],
        "backend": [Names(BACKENDS)],
    }

    def __init__(
        self,
        kernel: str = "gaussian",
        bandwidth: float | ArrayLike | str = "cv_ml",
        var_types: str | None = None,
        categorical_kernel: str = "classic",
        tol: float | None = None,
        backend: str = "auto",
    ) -> None:
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.var_types = var_types
        self.categorical_kernel = categorical_kernel
        self.tol = tol
        self.backend = backend

    # -- fit -------------------------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: Any = None, sample_weight: ArrayLike | None = None) -> KernelDensity:
        """Keep the data and choose the bandwidth.

        Parameters
        ----------
        X : array-like of shape (n, d)
            A Dask array is computed first.
        y : ignored
        sample_weight : array-like of shape (n,), optional
            Non-negative weights; integer weights act as repeated rows.

        Returns
        -------
        self
        """
        if is_dask(X, sample_weight):
            X, sample_weight = _computed(X), None if sample_weight is None else _computed(sample_weight)
        kernel = self._kernel()
        data: NDArray[np.floating] = np.asarray(
            validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=2))
        n, d = data.shape
        vt = as_var_types(self.var_types, d)
        ck = as_categorical_kernel(self.categorical_kernel)
        given = as_sample_weight(sample_weight, n, np.dtype(np.float64))
        sw = None if given is None else given.astype(np.float64)
        self.X_fit_, self.sample_weight_, self.var_types_ = data, sw, vt
        self.n_features_in_ = d
        self.bandwidth_ = self._choose(data.astype(np.float64), kernel, vt, ck, sw)
        cat = np.array([c != "c" for c in vt])
        if cat.any():  # lambdas inside their ranges (a clear error now, not at the first score)
            kinds = "".join(c for c in vt if c != "c")
            Categorical.build(kinds, data[:, cat], data[:1, cat], self.bandwidth_[cat], ck,
                              columns=np.nonzero(cat)[0])
        return self

    def _kernel(self) -> Kernel:
        k = get_kernel(self.kernel)
        log_kernel_constant(k, 1)  # refuses a kernel that is no density
        return k

    def _choose(self, X: NDArray[np.float64], kernel: Kernel, vt: str, ck: str,
                sw: NDArray[np.float64] | None) -> NDArray[np.float64]:
        bw = self.bandwidth
        d = X.shape[1]
        cont = np.array([c == "c" for c in vt])
        if not isinstance(bw, str):
            h = np.asarray(bw, dtype=np.float64) if np.ndim(bw) else np.full(d, float(bw))  # type: ignore[arg-type]
            if np.ndim(bw) == 0 and not cont.all():
                raise ValueError(f"bandwidth={bw!r} is a scalar, but var_types={vt!r} has categorical "
                                 "columns; give one entry per column (lambdas for the categorical ones)")
            if h.shape != (d,) or not (np.isfinite(h).all() and (h[cont] > 0).all()):
                raise ValueError(f"bandwidth must be positive and finite, a scalar or one per column ({d}); "
                                 f"got {bw!r}")
            return h
        name = fold_case(bw)  # one of RULES + SEARCHES: _parameter_constraints
        start = _rule(X, name if name in RULES else "normal_reference", kernel, vt, ck, sw)
        if name in RULES:
            return start
        problem = CVProblem(X, kernel, vt, ck, sw, self.backend)
        method = name.removesuffix("_scalar")
        return select(problem, method, start, per_feature=not name.endswith("_scalar"))

    # -- use -------------------------------------------------------------------------------

    def score_samples(self, X: ArrayLike) -> NDArray[np.float64]:
        """The log density at each row of ``X``, shape (m,); ``-inf`` outside a compact
        kernel's reach. A Dask array gives a lazy Dask array (one task per chunk of rows)."""
        self._check_fitted()
        if is_dask(X):
            return _lazy(self, X)
        Q: NDArray[np.floating] = np.asarray(
            validate_data(self, X, reset=False, dtype=[np.float64, np.float32]))
        if Q.dtype != self.X_fit_.dtype:
            Q = Q.astype(np.float64)
        keys = self.X_fit_ if Q.dtype == self.X_fit_.dtype else self.X_fit_.astype(Q.dtype)
        return log_kde(Q, keys, kernel=self._kernel(), bandwidth=self.bandwidth_, var_types=self.var_types_,
                       categorical_kernel=as_categorical_kernel(self.categorical_kernel),
                       sample_weight=self.sample_weight_, backend=self.backend, tol=as_tol(self.tol))

    def score(self, X: ArrayLike, y: Any = None) -> float:
        """The total log likelihood of ``X`` (the sum of :meth:`score_samples`)."""
        return float(np.sum(self.score_samples(X)))

    def pdf(self, X: ArrayLike) -> NDArray[np.float64]:
        """The density at each row of ``X`` (``exp`` of :meth:`score_samples`)."""
        return np.exp(self.score_samples(X))  # type: ignore[no-any-return]

    def sample(self, n_samples: int = 1, random_state: Any = None) -> NDArray[np.float64]:
        """Draw rows from the estimated density: a training row by its weight, then each
        continuous column moved by ``h`` times a draw of the kernel, each categorical column
        drawn from its probabilities over the training levels given the row's.

        Returns
        -------
        ndarray of shape (n_samples, d)
        """
        self._check_fitted()
        if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer) or n_samples < 0:
            raise ValueError(f"n_samples must be a non-negative integer; got {n_samples!r}")
        rng = check_random_state(random_state)
        X = self.X_fit_.astype(np.float64)
        w = self.sample_weight_
        rows = rng.choice(X.shape[0], size=n_samples, p=None if w is None else w / w.sum())
        out = X[rows].copy()
        kernel = self._kernel()
        ck = as_categorical_kernel(self.categorical_kernel)
        for j, kind in enumerate(self.var_types_):
            if kind == "c":
                out[:, j] += self.bandwidth_[j] * _draw(kernel, n_samples, rng)
            else:
                out[:, j] = _draw_levels(kind, ck, float(self.bandwidth_[j]), X[:, j], out[:, j], rng)
        return out

    def _check_fitted(self) -> None:
        if not hasattr(self, "X_fit_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("This KernelDensity instance is not fitted yet; call fit(X) first")

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def _computed(a: Any) -> NDArray[Any]:
    return np.asarray(a.compute())


def _lazy(model: KernelDensity, X: Any) -> Any:
    """Dask queries: one task per chunk of rows, each scored against the fitted data."""
    X = X if X.ndim == 2 else X[:, None]
    X = X.rechunk({1: -1})
    return X.map_blocks(lambda b: model.score_samples(b), drop_axis=1, dtype=np.float64)


def _rule(X: NDArray[np.float64], name: str, kernel: Kernel, vt: str, ck: str,
          sw: NDArray[np.float64] | None) -> NDArray[np.float64]:
    """A rule of thumb per column: the continuous ones by ``name``; categorical lambdas by
    statsmodels' normal reference, kept inside their range."""
    n, d = X.shape
    cont = np.array([c == "c" for c in vt])
    ref = 1.06 * X.std(axis=0) * n ** (-1.0 / (4 + d))
    h = ref.copy()
    if cont.any():
        if name == "normal_reference":
            bad = cont & (ref == 0)
            if bad.any():
                raise ValueError(f"column {int(np.argmax(bad))} of X has no spread; pass a bandwidth")
        else:
            h[cont] = rule_of_thumb(X[:, cont], name, kernel=kernel, sample_weight=sw)
    for j in np.nonzero(~cont)[0]:
        lo, hi, _ = lambda_bounds(vt[j], np.unique(X[:, j]).size, ck)
        h[j] = min(max(ref[j], lo + 0.01 * (hi - lo)), lo + 0.5 * (hi - lo))
    return h


def _draw(kernel: Kernel, size: int, rng: np.random.RandomState) -> NDArray[np.float64]:
    """``size`` draws from the kernel's density."""
    name = kernel.name
    betas = {"epanechnikov": 2.0, "biweight": 3.0, "triweight": 4.0}
    if name == "gaussian":
        return rng.standard_normal(size)
    if name == "laplacian":
        return rng.laplace(size=size)
    if name == "logistic":
        return rng.logistic(size=size)
    if name == "boxcar":
        return rng.uniform(-1.0, 1.0, size)
    if name == "triangular":
        return rng.uniform(size=size) - rng.uniform(size=size)
    if name in betas:
        return 2.0 * rng.beta(betas[name], betas[name], size) - 1.0
    if name == "parzen":  # the cubic B-spline: a sum of four uniforms, halved
        return (rng.uniform(size=(size, 4)).sum(axis=1) - 2.0) / 2.0
    top = float(kernel(0.0))  # tricube, cosine: rejection from the uniform
    out = np.empty(0)
    while out.size < size:
        u = rng.uniform(-1.0, 1.0, 2 * (size - out.size) + 8)
        out = np.concatenate([out, u[rng.uniform(0.0, top, u.size) < kernel(u)]])
    return out[:size]


def _draw_levels(kind: str, ck: str, lam: float, train: NDArray[np.float64], given: NDArray[np.float64],
                 rng: np.random.RandomState) -> NDArray[np.float64]:
    """Categories drawn from ``L(. | given)`` over the training levels (normalised over them)."""
    levels = np.unique(train)
    out = given.copy()
    for b in np.unique(given):
        at = np.nonzero(given == b)[0]
        p = np.exp(log_probability(kind, ck, lam, levels, levels, np.array([b]))[:, 0])
        out[at] = rng.choice(levels, size=at.size, p=p / p.sum())
    return out

