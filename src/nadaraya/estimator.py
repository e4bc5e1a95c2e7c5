"""NadarayaWatson: the scikit-learn regressor around the attention-pooling primitive."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from . import backends
from ._validation import as_bandwidth, as_empty, as_real, check_some_weight, is_dask
from .bandwidth import RULES
from .kernels import get as get_kernel
from .pooling import compute_partials, finish, prepare

__all__ = ["NadarayaWatson"]


def _bandwidth_hint(text: str) -> str:
    """What to pass instead of an unknown bandwidth string: the number it spells, or the
    closest rule name, then what is allowed."""
    import difflib

    from .bandwidth import METHODS, RULES

    names = (*METHODS, *RULES)
    allowed = f"pass a positive number, one per feature, or one of {', '.join(map(repr, names))}"
    try:
        number = float(text)
    except ValueError:
        close = difflib.get_close_matches(text.strip().lower(), names, n=1, cutoff=0.6)
        return f"did you mean {close[0]!r}? ({allowed})" if close else allowed
    return f"it is a string; pass the number {number!r} itself ({allowed})"


def _cv_results(selection: Any, names: list[str] | None = None) -> dict[str, NDArray[Any]] | None:
    """A :class:`~nadaraya.bandwidth.BandwidthSelection`'s search as a dict of 1-d arrays, one
    entry per bandwidth evaluated (what ``pd.DataFrame`` reads); None for no search."""
    if selection is None:
        return None
    from scipy.stats import rankdata

    tried = np.asarray(selection.search["bandwidths"], dtype=np.float64)
    scores = np.asarray(selection.search["scores"], dtype=np.float64)
    d = tried.shape[1]
    if d == 1:
        out: dict[str, NDArray[Any]] = {"bandwidth": tried[:, 0].copy()}
    else:
        labels = names if names is not None and len(names) == d else [str(j) for j in range(d)]
        out = {f"bandwidth_{label}": tried[:, j].copy() for j, label in enumerate(labels)}
    out["score"] = scores.copy()
    # 1 for the best (lowest) score; NaN would rank last, ties share the smaller rank
    out["rank"] = rankdata(np.where(np.isnan(scores), np.inf, scores), method="min").astype(np.int64)
    out["stage"] = np.asarray(selection.search["stages"], dtype=object).copy()
    return out


class NadarayaWatson(RegressorMixin, BaseEstimator):  # type: ignore[misc]
    r"""Nadaraya-Watson kernel regression: attention pooling of the training targets.

    The prediction at ``q`` is ``sum_i alpha(q, x_i) y_i`` with attention weights
    ``alpha`` from a kernel of ``(q - x_i) / h``, normalised to sum to one (a softmax of
    ``-|q - x_i|^2 / (2 h^2)`` for the Gaussian). See :func:`nadaraya.pool`.

    Parameters
    ----------
    kernel : str, default "gaussian"
        Any name from :mod:`nadaraya.kernels`; ``"constant"`` is average pooling.
    bandwidth : float, array-like of shape (n_features,), or {"cv", "aicc", "scott", "silverman"}, \
default "cv"
        A data-driven choice: ``"cv"`` (exact leave-one-out least-squares cross-validation,
        the default, as in statsmodels' ``KernelReg`` and R's np) or ``"aicc"`` (the
        corrected AIC of Hurvich, Simonoff and Tsai), chosen at ``fit`` by
        :func:`nadaraya.select_bandwidth` with one bandwidth per feature when there are
        several features, the search kept in ``selection_`` and ``cv_results_``; or a number, one number per
        feature, or a normal-reference rule computed from the training data (per feature,
        with the robust scale ``min(std, IQR / 1.349)`` and rescaled to the kernel; see
        :func:`nadaraya.bandwidth.rule_of_thumb`). The search costs a few passes over the
        pairs of training points, O(n^2) each (several features: about 25 passes): for
        larger data, or to keep Dask
        arrays lazy (the search gathers them), pass a number or ``"scott"``. With
        ``"cv"``, integer sample weights are not the same as repeated rows (leaving a row
        out keeps its copies); the constant kernel ignores the bandwidth, and takes Scott's
        rule without a search.
    empty : {"nearest", "nan", "mean", "raise"}, default "nearest"
        What a query with no training point in a compact kernel's window predicts: the
        (weighted) mean of its nearest training points, the limit of the weights as the window
        widens, which is what the Gaussian kernel gives far from the data; ``"nan"`` (the
        default of :func:`nadaraya.pool`, with one warning per call), the weighted mean of all
        targets, or a ValueError. The estimator predicts by default, as scikit-learn's and
        statsmodels' regressors do, so that model selection over compact kernels
        (``GridSearchCV`` over ``kernel``) scores every fold; pass ``empty="nan"`` to see
        where a window is empty.
    backend : str, default "auto"
        How the sums are computed; see :func:`nadaraya.backends.available`.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features_in_,)
        The bandwidth used, per feature.
    selection_ : BandwidthSelection or None
        For ``bandwidth="cv"`` or ``"aicc"``: the search's outcome
        (:class:`nadaraya.bandwidth.BandwidthSelection`): the score, every bandwidth tried,
        the bounds, and ``smoothed_out``, the features the fit ignores (a normal outcome,
        not a warning); None otherwise.
    cv_results_ : dict of ndarray or None
        The same search as scikit-learn's searches keep theirs, one entry per bandwidth
        evaluated, in the order evaluated (``pd.DataFrame(model.cv_results_)`` reads it):
        ``"bandwidth"`` (one feature) or ``"bandwidth_<name>"`` per feature (the names of
        ``feature_names_in_``, else the feature numbers), ``"score"`` (the criterion: the
        leave-one-out MSE for ``"cv"``, AICc for ``"aicc"``; lower is better), ``"rank"``
        (1 for the best) and ``"stage"`` (``"grid"``, ``"refine"`` or ``"per_feature"``).
        None without a search.
    backend_ : str
        The backend chosen at the last ``fit`` for predicting on the training data's size,
        with the reason in ``backend_reason_``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had string column names.

    Notes
    -----
    Complexity: ``fit`` stores the data and resolves the bandwidth: O(n d) for a number or a
    rule, a few O(n^2 d) passes for ``"cv"`` and ``"aicc"``; ``predict`` on m rows is
    O(m n d) for the exact sums, in memory bounded by
    ``nadaraya.get_config()["working_memory"]``. Unlike statsmodels' ``KernelReg``, nothing
    is searched in ``__init__`` and a bandwidth you give is never replaced.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya import NadarayaWatson
    >>> X = np.linspace(0, 5, 50)[:, None]; y = 2 * np.sin(X[:, 0]) + X[:, 0]
    >>> model = NadarayaWatson(bandwidth=0.3).fit(X, y)
    >>> bool(model.score(X, y) > 0.95)
    True

    Model selection over kernels, and the search as a table:

    >>> from sklearn.model_selection import GridSearchCV
    >>> y = y + np.random.default_rng(0).normal(0, 0.5, 50)
    >>> grid = GridSearchCV(NadarayaWatson(), {"kernel": ["gaussian", "epanechnikov"]}, cv=3)
    >>> bool(np.isfinite(grid.fit(X, y).cv_results_["mean_test_score"]).all())
    True
    >>> cv = NadarayaWatson().fit(X, y).cv_results_
    >>> sorted(cv)
    ['bandwidth', 'rank', 'score', 'stage']
    """

    #: the training data: NumPy arrays, or lazy Dask arrays when fitted on Dask input
    X_fit_: Any
    y_fit_: Any
    sample_weight_: Any

    def __init__(
        self,
        *,
        kernel: str = "gaussian",
        bandwidth: Any = "cv",
        empty: str = "nearest",
        backend: str = "auto",
    ) -> None:
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.empty = empty
        self.backend = backend

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.regressor_tags.poor_score = False
        return tags

    @property
    def cv_results_(self) -> dict[str, NDArray[Any]] | None:
        """The bandwidth search as a dict of arrays, one entry per bandwidth evaluated (see the
        class's Attributes); None when the bandwidth was not searched."""
        check_is_fitted(self, "selection_")
        names = getattr(self, "feature_names_in_", None)
        return _cv_results(self.selection_, None if names is None else [str(v) for v in names])

    def _resolve_bandwidth(
        self,
        X: NDArray[np.float64],
        sample_weight: NDArray[np.float64] | None,
        y: NDArray[np.float64],
        notes: list[str],
    ) -> NDArray[np.float64]:
        """The bandwidth per feature, and ``selection_``, from validated training data that it
        trusts (the bandwidth package's private entry points do not validate again): ``X``
        (n, d) and ``y`` (n,) or (n, p) finite float64, ``sample_weight`` non-negative or None.
        What the search finds worth a warning goes to ``notes`` (``fit`` warns once)."""
        from .bandwidth import METHODS
        from .bandwidth.rules import _rule_of_thumb
        from .bandwidth.search import _select_bandwidth

        bw = self.bandwidth
        kernel = get_kernel(self.kernel)
        self.selection_ = None
        if isinstance(bw, str):
            if bw in METHODS and kernel.name != "constant":
                Y = np.ascontiguousarray(y.reshape(y.shape[0], -1))
                backend = self.backend if self.backend != "dask" else "auto"
                self.selection_ = _select_bandwidth(
                    X, Y, sample_weight, kernel, bw, X.shape[1] > 1, backend, notes=notes
                )
                return self.selection_.bandwidth
            if bw in METHODS:  # the constant kernel: every bandwidth gives the same fit
                bw = "scott"
            if bw not in RULES:
                raise ValueError(f"bandwidth={bw!r} is not valid; {_bandwidth_hint(bw)}")
            return _rule_of_thumb(X, bw, kernel, sample_weight)
        return as_bandwidth(bw, X.shape[1])

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> NadarayaWatson:
        """Store the training data and resolve the bandwidth.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative; integer weights act as repeated rows.

        Returns
        -------
        self

        Warns
        -----
        BandwidthWarning
            At most once per call, pointing at the caller's line, when the bandwidth search
            ends on a bound that does not smooth a feature out, or ``y`` is constant. A
            feature smoothed out is recorded in ``selection_.smoothed_out`` instead.

        Examples
        --------
        >>> from nadaraya import NadarayaWatson
        >>> NadarayaWatson(bandwidth=1.0).fit([[0.0], [1.0]], [0.0, 1.0]).bandwidth_.tolist()
        [1.0]
        """
        get_kernel(self.kernel)
        as_empty(self.empty)
        if self.backend not in backends.NAMES:
            raise ValueError(
                f"backend={self.backend!r} is not known; valid names are: {', '.join(backends.NAMES)}"
            )
        notes: list[str] = []
        if is_dask(X, y, sample_weight):  # keep the Dask arrays, lazily
            self._fit_dask(X, y, sample_weight, notes)
        else:
            self._fit_numpy(X, y, sample_weight, notes)
        if notes:  # one warning per fit, at the caller's line
            from .bandwidth import BandwidthWarning

            warnings.warn("; ".join(notes), BandwidthWarning, stacklevel=2)
        return self

    def _fit_numpy(self, X: Any, y: Any, sample_weight: Any, notes: list[str]) -> None:
        """``fit`` on NumPy-like input: validated once, sorted once, the bandwidth resolved."""
        for name, a in (("X", X), ("y", y)):  # complex, dates and durations refused, not converted
            if np.asarray(a).dtype.kind in "cmMUS":
                as_real(name, a)
        # validated once, by scikit-learn (its errors; n_features_in_, feature_names_in_); what it
        # leaves (weights zero everywhere) as the primitive checks it, so fit fails where predict would
        Xv, yv = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        sw = None
        if sample_weight is not None:
            sw = _check_sample_weight(sample_weight, Xv, dtype=np.float64, ensure_non_negative=True)
            check_some_weight(sw)
        # sorted once, by the first feature: the estimate does not depend on the order of the
        # training points, and window searches for compact kernels and the bandwidth search skip
        # their sort on sorted points
        order = np.argsort(Xv[:, 0], kind="stable")
        Xs = np.ascontiguousarray(Xv[order], dtype=np.float64)
        ys = np.ascontiguousarray(yv[order], dtype=np.float64)
        sw = None if sw is None else sw[order]
        # a rule's result is checked as predict will check it (it can underflow to zero)
        self.bandwidth_ = as_bandwidth(self._resolve_bandwidth(Xs, sw, ys, notes), Xs.shape[1])
        self.X_fit_, self.y_fit_, self.sample_weight_ = Xs, ys, sw
        n, d = Xs.shape
        choice = backends.choose(get_kernel(self.kernel), n=n, m=n, d=d, backend=self.backend)
        self.backend_, self.backend_reason_ = choice.name, choice.reason

    def _fit_dask(self, X: Any, y: Any, sample_weight: Any, notes: list[str]) -> None:
        """``fit`` on Dask input: the arrays stay lazy (checked chunk by chunk when computed, by
        :func:`nadaraya._dask_pool.training_data`); a rule of thumb is computed with Dask
        reductions (:mod:`nadaraya.bandwidth._dask`). Selectors ("cv", "aicc") search over exact
        leave-one-out passes of the single-machine engine: the training data are gathered to
        this process for the search (they must fit in its memory)."""
        import dask

        from ._dask_pool import training_data
        from .bandwidth._dask import rule_of_thumb as dask_rule_of_thumb

        X_fit, y_fit, sw = training_data(X, y, sample_weight)
        d = X_fit.shape[1]
        bw = self.bandwidth
        if isinstance(bw, str) and bw in RULES:
            self.selection_ = None
            bandwidth = dask_rule_of_thumb(X_fit, bw, kernel=self.kernel, sample_weight=sw)
        elif isinstance(bw, str):  # computed, the chunks are checked; float64 for the search
            Xc, yc, swc = dask.compute(X_fit, y_fit, sw)
            swn = None if swc is None else np.ascontiguousarray(swc, dtype=np.float64)
            if swn is not None:
                check_some_weight(swn)
            bandwidth = self._resolve_bandwidth(np.ascontiguousarray(Xc, dtype=np.float64), swn,
                                                np.ascontiguousarray(yc, dtype=np.float64), notes)
        else:
            self.selection_ = None
            bandwidth = as_bandwidth(bw, d)
        self.n_features_in_, self.bandwidth_ = d, bandwidth
        self.X_fit_, self.y_fit_, self.sample_weight_ = X_fit, y_fit, sw
        self.backend_, self.backend_reason_ = "dask", "the training data are Dask arrays"

    def _predict_dask(self, X: Any) -> Any:
        """``predict`` when the model or ``X`` is on Dask: a lazy Dask array."""
        from ._dask_pool import pool as lazy_pool

        d = self.n_features_in_
        X = X if is_dask(X) else np.asarray(X)
        if X.ndim != 2 or X.shape[1] != d:
            raise ValueError(f"X has shape {X.shape}, but this NadarayaWatson was fitted with {d} features")
        return lazy_pool(X, self.X_fit_, self.y_fit_, kernel=self.kernel, bandwidth=self.bandwidth_,
                         empty=self.empty, sample_weight=self.sample_weight_)

    def predict(self, X: ArrayLike) -> NDArray[np.floating]:
        """Attention-pool the training targets at each row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)

        Returns
        -------
        ndarray of shape (n_queries,) or (n_queries, n_outputs)

        Examples
        --------
        >>> from nadaraya import NadarayaWatson
        >>> m = NadarayaWatson(kernel="constant", bandwidth=1.0).fit([[0.0], [1.0]], [0.0, 2.0])
        >>> m.predict([[5.0]]).tolist()
        [1.0]
        """
        check_is_fitted(self)
        if is_dask(X, self.X_fit_):  # a lazy Dask array out
            return self._predict_dask(X)
        if np.asarray(X).dtype.kind in "cmMUS":  # complex, dates, durations, text, as in fit
            as_real("X", X)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        call = prepare(
            X,
            self.X_fit_,
            self.y_fit_,
            kernel=self.kernel,
            bandwidth=self.bandwidth_,
            sample_weight=self.sample_weight_,
        )
        parts, _ = compute_partials(call, backend=self.backend)
        return finish(parts, call, self.empty)

    def attention_weights(
        self, X: ArrayLike, *, sparse: bool = False, max_bytes: float | None = None
    ) -> Any:
        """The attention weights of each row of ``X`` over the training points, with the fitted
        settings: :func:`nadaraya.attention_weights` with the kernel, ``bandwidth_``, the sample
        weights and ``empty`` of this model.

        The columns follow ``X_fit_`` (the training rows sorted by their first feature, as
        ``fit`` stores them), so that ``model.attention_weights(X) @ model.y_fit_`` equals
        ``model.predict(X)``. Each row sums to one (an empty window follows ``empty``).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        sparse : bool, default False
            Return a ``scipy.sparse.csr_array`` of the positive weights (cheap for compact
            kernels).
        max_bytes : float, optional
            The largest result allowed; see :func:`nadaraya.attention_weights`.

        Returns
        -------
        ndarray of shape (n_queries, n_samples_fit), or scipy.sparse.csr_array

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import NadarayaWatson
        >>> model = NadarayaWatson(bandwidth=0.5).fit([[2.0], [0.0], [1.0]], [4.0, 0.0, 1.0])
        >>> W = model.attention_weights([[0.5], [1.5]])
        >>> W.shape, np.allclose(W.sum(axis=1), 1.0)
        ((2, 3), True)
        >>> bool(np.allclose(W @ model.y_fit_, model.predict([[0.5], [1.5]])))
        True
        """
        from .pooling import attention_weights

        check_is_fitted(self)
        if is_dask(X):
            X = X.compute()  # type: ignore[union-attr]
        if np.asarray(X).dtype.kind in "cmMUS":  # complex, dates, durations, text, as in predict
            as_real("X", X)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        keys, sw = self.X_fit_, self.sample_weight_
        if is_dask(keys, sw):  # the matrix is dense in memory anyway: gather the training points
            import dask

            keys, sw = dask.compute(keys, sw)
        return attention_weights(X, keys, kernel=self.kernel, bandwidth=self.bandwidth_, sample_weight=sw,
                                 empty=self.empty, sparse=sparse, max_bytes=max_bytes)

    def save(self, path: Any) -> Any:
        """Save the fitted model in the safe format (numbers in .npz, settings in JSON).

        Load it back with :func:`nadaraya.load`; see :mod:`nadaraya.persist`.

        Parameters
        ----------
        path : path-like
            Written atomically, exactly as named (``.npz`` is conventional).

        Returns
        -------
        pathlib.Path

        Examples
        --------
        >>> import pathlib, tempfile
        >>> import nadaraya
        >>> m = nadaraya.NadarayaWatson(bandwidth=0.5).fit([[0.0], [1.0]], [0.0, 1.0])
        >>> p = m.save(pathlib.Path(tempfile.mkdtemp()) / "model.npz")
        >>> bool(nadaraya.load(p).predict([[0.25]]) == m.predict([[0.25]]))
        True
        """
        from .persist import save

        return save(self, path)
