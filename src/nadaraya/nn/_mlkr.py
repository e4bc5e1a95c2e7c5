"""MLKR: metric learning for kernel regression, a transformer trained on the leave-one-out error."""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from nadaraya._support.params import Names, Number, Torch

__all__ = ["INITS", "MLKR"]

#: the named initialisations of ``components_``
INITS: tuple[str, ...] = ("pca", "identity", "random")

Evaluator = Callable[[NDArray[np.float64]], tuple[float, NDArray[np.float64]]]


class MLKR(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """Metric Learning for Kernel Regression (Weinberger and Tesauro, 2007): a learned linear map.

    ``fit`` learns ``components_`` (``A``, shape (k, d)) that minimises the exact leave-one-out
    mean squared error of Gaussian Nadaraya-Watson regression on ``X A^T``: the attention
    weights of a point on the others are ``softmax(-|A (x - x_j)|^2)``, its own term left out.
    The map's scale is the bandwidth (the kernel is the Gaussian of bandwidth ``1/sqrt(2)`` on
    ``X A^T``), its row space the directions that matter. ``transform(X)`` returns ``X A^T``.

    The loss and its analytic gradient come from one pass over all pairs in blocks of rows
    (O(n^2 (d + k)) work, O(n d) memory: never the n x n matrix), and L-BFGS (scipy) minimises
    it. Multi-output ``y`` is allowed: the loss sums the squared errors over the outputs.

    The recommended use is a Pipeline, the learned features feeding
    :class:`~nadaraya.NadarayaWatson` whose bandwidth is selected again on them::

        make_pipeline(MLKR(n_components=2), NadarayaWatson(bandwidth="cv"))

    Parameters
    ----------
    n_components : int, optional
        ``k``, the number of learned directions, 1 to ``n_features``; default all features.
    init : {"pca", "identity", "random"} or array-like of shape (k, d), default "pca"
        The starting map. The named ones are computed on the standardised features: the
        leading principal directions ("pca"), the first ``k`` features ("identity") or
        Gaussian random directions ("random"), each direction scaled so that the kernel starts
        with a bandwidth of one standard deviation of the data along it (a wide start: the
        loss has fewer local minima there than at a rule-of-thumb bandwidth). An array is
        taken as it is, in the units of X.
    max_iter : int, default 100
        Most L-BFGS iterations.
    tol : float, default 1e-5
        scipy's ``tol`` of L-BFGS-B: the relative decrease of the loss (scaled by the variance
        of y) and the largest gradient entry under which it stops.
    random_state : int, RandomState instance or None
        For ``init="random"``.
    device : str or torch.device, optional
        None computes with NumPy and numba (no torch). A torch device ("cpu", "cuda",
        "cuda:1", ...) computes the loss and gradient with torch there, in float64, blocked to
        the working memory (:func:`nadaraya.get_config`).

    Attributes
    ----------
    components_ : ndarray of shape (k, n_features_in_)
        The learned map ``A``.
    n_iter_ : int
        L-BFGS iterations run.
    loss_curve_ : list of float
        The leave-one-out mean squared error (units of y squared) at the start and after each
        iteration.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        When X has feature names.

    See Also
    --------
    sklearn.neighbors.NeighborhoodComponentsAnalysis : the same idea for classification.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.nn import MLKR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5))
    >>> y = np.sin(X[:, 0] + X[:, 1])
    >>> mlkr = MLKR(n_components=1, random_state=0).fit(X, y)
    >>> mlkr.transform(X).shape
    (200, 1)
    >>> bool(mlkr.loss_curve_[-1] < mlkr.loss_curve_[0])
    True
    """

    #: what each parameter accepts, checked once per ``fit`` by scikit-learn (InvalidParameterError);
    #: rules against the data (``n_components`` at most n_features, ``init``'s shape) stay in ``fit``
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Number(Integral, 1, None, closed="left"), None],
        "init": [Names(INITS), "array-like"],
        "max_iter": [Number(Integral, 1, None, closed="left")],
        "tol": [Number(Real, 0, np.inf, closed="left")],
        "random_state": ["random_state"],
        "device": [str, Number(Integral, 0, None, closed="left"), Torch("device"), None],
    }

    def __init__(
        self,
        n_components: int | None = None,
        init: str | ArrayLike = "pca",
        max_iter: int = 100,
        tol: float = 1e-5,
        random_state: Any = None,
        device: Any = None,
    ) -> None:
        self.n_components = n_components
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.device = device

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike) -> MLKR:
        """Learn ``components_`` on the leave-one-out error of Nadaraya-Watson.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            At least 2 samples.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self : MLKR
        """
        Xv, yv = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64,
                               ensure_min_samples=2)
        Xa: NDArray[np.float64] = np.asarray(Xv, dtype=np.float64)
        n, d = Xa.shape
        k = self._check_params(d)
        Y = np.asarray(yv, dtype=np.float64).reshape(n, -1)
        Y = Y - Y.mean(axis=0)  # the leave-one-out fit of a shifted y shifts with it
        spread = float(np.sum(Y * Y)) / n
        scale = spread if spread > 0 else 1.0
        centre = Xa.mean(axis=0)
        sd = Xa.std(axis=0)
        sd = np.where(sd > 0, sd, 1.0)
        Xs = (Xa - centre) / sd
        A0 = self._initial(Xs, sd, k)
        evaluate = _evaluator(Xs, Y, self.device)
        curve: list[float] = []

        def fun(a: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
            loss, grad = evaluate(a.reshape(k, d))
            if not curve:
                curve.append(loss)
            return loss / scale, grad.ravel() / scale

        def callback(intermediate_result: Any) -> None:
            curve.append(float(intermediate_result.fun) * scale)

        result = minimize(fun, A0.ravel(), jac=True, method="L-BFGS-B", tol=self.tol,
                          callback=callback, options={"maxiter": self.max_iter})
        self.components_ = result.x.reshape(k, d) / sd
        self.n_iter_ = int(result.nit)
        self.loss_curve_ = curve
        return self

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """``X A^T``: the inputs in the learned coordinates.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in_)

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self, "components_")
        Xv = np.asarray(validate_data(self, X, reset=False, dtype=np.float64), dtype=np.float64)
        return np.asarray(Xv @ self.components_.T)

    @property
    def _n_features_out(self) -> int:
        return int(self.components_.shape[0])

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    # ----------------------------------------------------------------------------------------

    def _check_params(self, d: int) -> int:
        """The number of components, after checking the parameters against the data (each one
        alone: ``_parameter_constraints``)."""
        k = self.n_components
        if k is not None and k > d:
            raise ValueError(f"n_components must be an int from 1 to n_features={d}; got {k!r}")
        init = self.init
        if isinstance(init, str):  # one of INITS
            return d if k is None else int(k)
        A = np.asarray(init)
        if A.ndim != 2 or A.shape[1] != d or not np.issubdtype(A.dtype, np.number) \
                or np.iscomplexobj(A) or not np.all(np.isfinite(A)):
            raise ValueError(f"init must be one of {INITS} or a finite real array of shape (k, {d}); "
                             f"got an array of shape {A.shape} and dtype {A.dtype}")
        if k is not None and A.shape[0] != k:
            raise ValueError(f"init has {A.shape[0]} rows but n_components={k!r}")
        return int(A.shape[0])

    def _initial(self, Xs: NDArray[np.float64], sd: NDArray[np.float64], k: int) -> NDArray[np.float64]:
        """The starting map on the standardised features ``Xs``."""
        d = Xs.shape[1]
        if not isinstance(self.init, str):
            return np.asarray(self.init, dtype=np.float64) * sd
        if self.init == "pca":
            _, _, vt = np.linalg.svd(Xs, full_matrices=False)
            directions = np.zeros((k, d))
            directions[: min(k, vt.shape[0])] = vt[:k]
            directions[vt.shape[0]:] = np.eye(k, d)[vt.shape[0]:]  # fewer samples than k
        elif self.init == "identity":
            directions = np.eye(k, d)
        else:
            directions = check_random_state(self.random_state).standard_normal((k, d))
            directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        spread = (Xs @ directions.T).std(axis=0)
        h = np.where(spread > 0, spread, 1.0)  # wide: the loss is smoother there, fewer local minima
        return directions / (np.sqrt(2.0) * h[:, None])


def _evaluator(Xs: NDArray[np.float64], Y: NDArray[np.float64], device: Any) -> Evaluator:
    """``A -> (loss, grad)`` on the CPU with numba, or with torch on ``device``."""
    if device is None:
        from nadaraya.nn._mlkr_loss import loo_loss_grad

        return lambda A: loo_loss_grad(A, Xs, Y)
    from nadaraya.nn._mlkr_torch import torch_evaluator

    return torch_evaluator(Xs, Y, device)
