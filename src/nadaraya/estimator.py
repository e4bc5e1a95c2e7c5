"""NadarayaWatson: the scikit-learn regressor around the attention-pooling primitive."""

from __future__ import annotations

from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from nadaraya import backends
from nadaraya._core.call import Trusted, compute_partials, prepare, trust
from nadaraya._core.finish import finish
from nadaraya._support.params import Letters, Names, Number, Torch, fold_case, fold_name
from nadaraya._support.validation import EMPTY_POLICIES, as_real, check_some_weight, is_dask, warn_at_caller
from nadaraya.backends import check_device
from nadaraya.bandwidth.resolve import BANDWIDTH_NAMES, _cv_results, _mixed_bandwidth, resolve_bandwidth
from nadaraya.distributed.fit import fit_dask, gather, predict_lazy
from nadaraya.inference import neighbours as nn_fit
from nadaraya.inference.mixin import InferenceMixin
from nadaraya.inference.neighbours import uses_neighbours
from nadaraya.inference.robustness import MAX_ITERATIONS, check_robust, robustify
from nadaraya.inference.training import VARIANCES, _check, forget
from nadaraya.inference.weights import WeightsMixin
from nadaraya.kernels import Kernel, names
from nadaraya.kernels import get as get_kernel
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job
from nadaraya.local.encode import encode_fit, encode_queries
from nadaraya.local.mixed import CATEGORICAL_KERNELS, _levels, as_categorical_kernel, as_var_types
from nadaraya.local.neighbours import TYPES

if TYPE_CHECKING:
    from nadaraya.inference.summary import FitSummary

__all__ = ["NadarayaWatson"]


class NadarayaWatson(WeightsMixin, InferenceMixin, RegressorMixin, BaseEstimator):  # type: ignore[misc]
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
        where a window is empty. "Nearest" is in the continuous columns' ``x / h`` (ties: the
        sample-weighted mean of the tied keys); with no continuous column, a query whose
        category no training key has (``lambda = 0``) takes the keys at the smallest
        categorical distance (unordered columns that differ, plus the ordered columns'
        absolute differences), and ``"mean"`` the weighted mean of y, with one warning that
        says so. The standard errors and bands of a filled query are those of the fill
        (:mod:`nadaraya.local.fills`).
    backend : str, default "auto"
        How the sums are computed; see :func:`nadaraya.backends.available`.
    device : str, optional
        A torch device (``"cpu"``, ``"cuda"``): predictions and their standard errors run
        their sums on ``backend="torch"`` there (``backend`` must be ``"auto"`` or
        ``"torch"``); the bandwidth search runs on the CPU backends.
    tol : float, optional
        The error allowed in the sums, as for :func:`nadaraya.pool`: ``predict`` and the
        ``"cv"``/``"aicc"`` search may take a faster method whose every prediction is within
        ``tol * max|y|`` of the exact one (which kernels, features and degrees it serves, and
        the bound on the moment sums of local fits: :func:`nadaraya.pool`; the search:
        :func:`nadaraya.select_bandwidth`). The standard
        errors of ``predict(..., return_std=True)`` (and of the asymptotic bands) take the same sums
        for both of their passes (the weights and the squared weights): for ``degree=0`` each
        standard error is then within ``tol`` of the exact one, relative. ``None`` (default):
        exact. The noise variance's estimate, the bootstrap's replicates and gradients stay exact.
    degree : int, default 0
        The degree of the local polynomial fitted around each query by weighted least
        squares on the continuous columns: 0 is Nadaraya-Watson (local constant), 1 local
        linear (no boundary bias on a linear truth: it reproduces any linear function), 2
        local quadratic, 3 local cubic. A query whose local system is singular gets the
        highest regular lower degree, with one :class:`~nadaraya.SingularFitWarning`
        per call; see :func:`nadaraya.pool`.
    var_types : str, optional
        One letter per column, as in statsmodels and R's np: ``"c"`` continuous, ``"o"``
        ordered, ``"u"`` unordered (e.g. ``"cuo"``); None means all continuous. A
        categorical column's entry of ``bandwidth`` (and ``bandwidth_``) is its ``lambda``
        (see :mod:`nadaraya.local.mixed` for the kernels and the ranges). Its values are numbers
        (category codes); ordered columns use their differences. A category not seen in
        training is "different" from every training category, and its weights follow the
        kernel's formula (with the unordered kernels at ``lambda = 0`` it has no key of
        positive weight: ``empty`` applies). With a rule of thumb (``"scott"``,
        ``"silverman"``) the rule sets the continuous bandwidths and each categorical column
        gets ``lambda = high * min(n ** (-2 / (4 + q)), 1/2)``, ``high`` the top of its
        range, ``n`` the training rows, ``q`` the continuous columns: the rate of the
        MSE-optimal lambda (Li and Racine), so that the categories borrow a little strength
        from each other and less as ``n`` grows (``lambda = 0``, separate cells, would leave
        unseen combinations empty; the middle of the range smooths far too much).
        ``"cv"`` and ``"aicc"`` choose the lambdas jointly with the bandwidths.
    categorical_kernel : {"classic", "li-racine"}, default "classic"
        ``"classic"``: Wang-van Ryzin for ordered columns and Aitchison-Aitken for unordered
        ones (``c`` = the distinct training values of the column, kept in ``levels_``);
        ``"li-racine"``: Li and Racine's kernels for both.
    bandwidth_type : {"fixed", "generalized_nn", "adaptive_nn"}, default "fixed"
        R np's bandwidth types. With a nearest-neighbour type the bandwidth of each feature is
        the distance to the ``k``-th nearest training point in that feature, at each query
        (``"generalized_nn"``) or at each training point (``"adaptive_nn"``, whose weights are
        divided by it), and ``bandwidth`` is ``k``: an integer, a fraction of n in (0, 1] (the
        span of LOWESS), one per feature, or ``"cv"``/``"aicc"`` choosing one ``k``. Continuous
        columns and NumPy input only; the fits are exact, from dense rows (O(m n) per call).
        Rules, ties and costs: the user guide's page on nearest-neighbour bandwidths.
    robust_iterations : int, default 0
        statsmodels' ``it``: after the fit, this many times, the bisquare ``(1 - u^2)^2`` of
        ``u = min(1, |e_i| / (6 median|e|))`` of the in-sample residuals multiplies the sample
        weights and the model is refitted (the bandwidth kept). With ``kernel="tricube"``,
        ``degree=1``, ``bandwidth_type="generalized_nn"`` and ``bandwidth=frac`` the model is
        statsmodels' ``lowess(y, x, frac, it)``. One output only.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features_in_,)
        The bandwidth used, per feature (with a nearest-neighbour type: ``k``, whole numbers).
    robustness_weights_ : ndarray of shape (n_samples_fit,) or None
        The last robustness weights (in the order of ``X_fit_``); ``sample_weight_`` holds the
        given sample weights times them. None without robustness iterations.
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
        None without a search. A search over ``k`` (nearest-neighbour types): ``"k"``, ``"score"``,
        ``"rank"``, ``"stage"``.
    backend_ : str
        The backend chosen at the last ``fit`` for predicting on the training data's size,
        with the reason in ``backend_reason_``.
    var_types_ : str
        ``var_types`` with one lower-case letter per column.
    levels_ : ndarray of int of shape (n_features_in_,)
        The number of distinct training values of each categorical column (0 for continuous
        columns): the ``c`` of Aitchison-Aitken, kept so that predictions use the training
        data's count.
    fit_order_ : ndarray of int of shape (n_samples_fit,) or None
        ``fit`` keeps the training rows sorted by their first feature (``X_fit_``, ``y_fit_``,
        ``sample_weight_``); row ``i`` there is row ``fit_order_[i]`` of the data given to
        ``fit``. None where they are kept in the given order (Dask input), and for models
        loaded from files written before it was kept.
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
    _summary_cache: FitSummary | None  # summary(), until the next fit

    #: what each parameter accepts, checked once per fit by scikit-learn; rules across them stay in fit
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "kernel": [Names(names(aliases=True), fold=fold_case), Kernel],
        "bandwidth": [Number(Real, 0, np.inf, closed="neither"), "array-like", Names(BANDWIDTH_NAMES)],
        "empty": [Names(EMPTY_POLICIES)],
        "backend": [Names(backends.NAMES)],
        "degree": [Number(Integral, 0, _job.MAX_DEGREE, closed="both")],
        "var_types": [Letters("cou"), None],
        "categorical_kernel": [Names(CATEGORICAL_KERNELS, fold=fold_name)],
        "device": [str, Number(Integral, 0, None, closed="left"), Torch("device"), None],
        "tol": [Number(Real, 0, 0.1, closed="right"), None],
        "bandwidth_type": [Names(TYPES)],
        "robust_iterations": [Number(Integral, 0, MAX_ITERATIONS, closed="both")],
    }

    def __init__(
        self,
        *,
        kernel: str = "gaussian",
        bandwidth: Any = "cv",
        empty: str = "nearest",
        backend: str = "auto",
        degree: int = 0,
        var_types: str | None = None,
        categorical_kernel: str = "classic",
        device: str | None = None,
        tol: float | None = None,
        bandwidth_type: str = "fixed",
        robust_iterations: int = 0,
    ) -> None:
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.empty = empty
        self.backend = backend
        self.degree = degree
        self.var_types = var_types
        self.categorical_kernel = categorical_kernel
        self.device = device
        self.tol = tol
        self.bandwidth_type = bandwidth_type
        self.robust_iterations = robust_iterations

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
        if self.__dict__.get("_nn_search") is not None:  # k chosen by a nearest-neighbour search
            return nn_fit.cv_results(self._nn_search)
        names = getattr(self, "feature_names_in_", None)
        return _cv_results(self.selection_, None if names is None else [str(v) for v in names])

    def _validate_params(self) -> None:  # scikit-learn's check; a bandwidth string it refuses gets a hint
        try:
            super()._validate_params()
        except InvalidParameterError as err:
            from nadaraya.bandwidth.resolve import _bandwidth_hint

            hint = _bandwidth_hint(self.bandwidth, allowed=False) if isinstance(self.bandwidth, str) else ""
            if hint and str(err).startswith("The 'bandwidth'"):
                raise InvalidParameterError(f"{err} ({hint})") from None
            raise

    def _plain(self) -> bool:
        """Whether the fit is today's Nadaraya-Watson: degree 0, every column continuous."""
        vt = getattr(self, "var_types_", None)
        return self.degree == 0 and (vt is None or set(vt) <= {"c"})

    @_fit_context(prefer_skip_nested_validation=True)
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
        check_device(self.device, self.backend)  # the parameters one by one: _parameter_constraints
        check_robust(self, X, y)
        notes: list[str] = []
        if is_dask(X, y, sample_weight):  # keep the Dask arrays, lazily
            self._fit_dask(X, y, sample_weight, notes)
        else:
            self._fit_numpy(X, y, sample_weight, notes)
            self._trusted()  # kept validated: predict checks only X
        if notes:  # one warning per fit, at the caller's line
            from nadaraya.bandwidth import BandwidthWarning

            warn_at_caller("; ".join(notes), BandwidthWarning)
        return self

    def _fit_numpy(self, X: Any, y: Any, sample_weight: Any, notes: list[str]) -> None:
        """``fit`` on NumPy-like input: validated once, sorted once, the bandwidth resolved."""
        X = encode_fit(self, X)  # text and Categorical columns declared categorical: codes
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
        vt = as_var_types(self.var_types, Xs.shape[1])
        levels = _levels(Xs, vt)
        # a rule's result is checked as predict will check it (it can underflow to zero)
        if uses_neighbours(self):  # k per feature
            self.bandwidth_ = nn_fit.resolve(self, Xs, sw, ys, vt)
        else:
            h = resolve_bandwidth(self, Xs, sw, ys, notes, vt, levels)
            self.bandwidth_ = _mixed_bandwidth(h, vt, levels, as_categorical_kernel(self.categorical_kernel),
                                               getattr(self, "feature_names_in_", None))
        self.var_types_, self.levels_ = vt, levels
        self.X_fit_, self.y_fit_, self.sample_weight_ = Xs, ys, sw
        self.fit_order_ = order.astype(np.int64)
        self._summary_cache = None
        forget(self)
        n, d = Xs.shape
        backend = "torch" if self.device is not None and self.backend == "auto" else self.backend
        choice = backends.choose(get_kernel(self.kernel), n=n, m=n, d=d, backend=backend,
                                 moments=self.degree, tol=self.tol)
        self.backend_, self.backend_reason_ = choice.name, choice.reason
        robustify(self)

    def _fit_dask(self, X: Any, y: Any, sample_weight: Any, notes: list[str]) -> None:
        """``fit`` on Dask input: see :func:`nadaraya.distributed.fit.fit_dask`."""
        fit_dask(self, X, y, sample_weight, notes)
        self._summary_cache = None
        forget(self)

    def _predict_dask(self, X: Any) -> Any:
        """``predict`` when the model or ``X`` is on Dask: a lazy Dask array."""
        return predict_lazy(self, X)

    def _cat_levels(self) -> NDArray[np.int64] | None:
        """``levels_`` of the categorical columns (what :func:`nadaraya.local.job.prepare` takes)."""
        cat = [j for j, t in enumerate(self.var_types_) if t != "c"]
        return self.levels_[cat] if cat else None

    def _trusted(self) -> Trusted:
        """The training data validated once per fit (``_core.call.trust``): predict checks only X."""
        if self.__dict__.get("_trusted_fit", (None,))[0] is not self.X_fit_:  # fit's arrays, validated there
            self._trusted_fit = (self.X_fit_,
                                 trust(self.X_fit_, self.y_fit_, self.sample_weight_, checked=True))
        return self._trusted_fit[1]

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_trusted_fit", None)  # rebuilt on the first call after loading
        return state

    def _job(self, X: Any, keys: Any, values: Any, sample_weight: Any, trusted: bool = False) -> _job.Job:
        """A local or mixed call at ``X`` (``trusted``: ``X`` validated, the model's own training data)."""
        job = _job.prepare(X, keys, values, kernel=self.kernel, bandwidth=self.bandwidth_,
                           sample_weight=sample_weight, degree=self.degree, var_types=self.var_types_,
                           categorical_kernel=self.categorical_kernel, levels=self._cat_levels(),
                           trusted=self._trusted() if trusted else None)
        job.device = self.device
        return job

    def _pool(
        self, X: Any, keys: Any, values: Any, sample_weight: Any, trusted: bool = False
    ) -> NDArray[np.floating]:
        """Predictions at validated NumPy queries from NumPy training data (``trusted``: the
        model's own, validated once per fit)."""
        if uses_neighbours(self):
            return nn_fit.pool(self, X, values, sample_weight)
        if not self._plain():
            job = self._job(X, keys, values, sample_weight, trusted)
            job.tol = self.tol
            return _fit.pool(job, self.empty, backend=self.backend)
        call = prepare(X, keys, values, kernel=self.kernel, bandwidth=self.bandwidth_,
                       sample_weight=sample_weight, trusted=self._trusted() if trusted else None)
        parts, _ = compute_partials(call, backend=self.backend, device=self.device, tol=self.tol)
        return finish(parts, call, self.empty)

    def _own_band(self, *args: Any) -> Any:
        """:meth:`confidence_band` of a nearest-neighbour model (None for a fixed bandwidth)."""
        return nn_fit.band(self, *args) if uses_neighbours(self) else None

    def _training_data(self) -> tuple[Any, Any, Any]:
        """``X_fit_``, ``y_fit_`` and ``sample_weight_`` in memory (Dask arrays are computed)."""
        data = (self.X_fit_, self.y_fit_, self.sample_weight_)
        if is_dask(*data):
            data = gather(*data)
        return data

    def predict(
        self, X: ArrayLike, return_std: bool = False, variance: str = "heteroscedastic", clusters: Any = None
    ) -> Any:
        """Attention-pool the training targets at each row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        return_std : bool, default False
            Also return the standard error of each prediction given the design: the exact
            ``sqrt(sum_i a_i(x)^2 sigma^2(x_i))``, ``a_i`` the fit's effective weights (the
            attention weights for degree 0), from one more pass of squared weights. It is always
            that of the prediction returned: of the far limit, of an ``empty=`` fill (one
            nearest key: ``sigma(x_nearest) / sqrt(s)``; ``"mean"``: the SE of the weighted
            mean of y) or of the lower degree a singular local system fell back to.
        variance : str, default "heteroscedastic"
            ``sigma^2(x_i)``: a smooth of the squared LOO residuals (CV bandwidth); ``"homoscedastic"``:
            ``sum s_i e_i^2 / (N - tr H)``; nprobust's ``"hc0"``..``"hc3"``, ``"nn"``, ``clusters=``.

        Returns
        -------
        ndarray of shape (n_queries,) or (n_queries, n_outputs)
            With ``return_std``, a tuple ``(mean, std)`` of two such arrays. A model fitted on
            Dask arrays, or Dask ``X``, gives a lazy Dask array; with ``return_std``, NumPy
            arrays (the training data and ``X`` are computed, as for ``confidence_band``).

        Examples
        --------
        >>> from nadaraya import NadarayaWatson
        >>> m = NadarayaWatson(kernel="constant", bandwidth=1.0).fit([[0.0], [1.0]], [0.0, 2.0])
        >>> m.predict([[5.0]]).tolist()
        [1.0]
        """
        check_is_fitted(self)
        _check("variance", variance, VARIANCES)
        if is_dask(X, self.X_fit_) and not return_std and not uses_neighbours(self):  # a lazy Dask array out
            return self._predict_dask(X)
        if is_dask(X):  # standard errors need the training data in memory, as confidence_band does
            X = X.compute()  # type: ignore[union-attr]
        X = encode_queries(self, X)
        if np.asarray(X).dtype.kind in "cmMUS":  # complex, dates, durations, text, as in fit
            as_real("X", X)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        if return_std:
            from nadaraya.inference.bands import predict_std

            mean, std = (nn_fit.predict_std(self, X, variance, clusters=clusters) if uses_neighbours(self)
                         else predict_std(self, X, variance, clusters=clusters))
            return (mean[:, 0], std[:, 0]) if np.ndim(self.y_fit_) == 1 else (mean, std)
        return self._pool(X, self.X_fit_, self.y_fit_, self.sample_weight_, trusted=True)

    def gradient(self, X: ArrayLike, return_std: bool = False, variance: str = "heteroscedastic") -> Any:
        """The derivative of the fitted mean with respect to each feature, at each row of ``X``.

        With ``degree=0`` it is the analytic derivative of the Nadaraya-Watson ratio
        ``f(q) = sum_i w_i y_i / sum_i w_i``, ``(sum_i w_i (k_i - q) y_i - f(q) sum_i w_i (k_i -
        q)) / (h^2 sum_i w_i)`` per feature for the Gaussian kernel, computed from moment sums
        of the same pass (other kernels: the same ratio rule with their derivative). With
        ``degree >= 1`` it is the local polynomial's slope at the query (statsmodels'
        ``KernelReg`` marginal effects, R np's gradients): NaN for a query whose local system
        was singular and fell back to degree 0. Categorical columns have no derivative: NaN.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        return_std, variance
            As for :meth:`predict`: also the standard errors of the derivatives (degree >= 1,
            or degree 0 with the Gaussian kernel).

        Returns
        -------
        ndarray of shape (n_queries, n_features) or (n_queries, n_features, n_outputs)
            With ``return_std``, a tuple ``(gradient, std)`` of two such arrays.

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import NadarayaWatson
        >>> X = np.linspace(0, 1, 30)[:, None]
        >>> model = NadarayaWatson(bandwidth=0.2, degree=1).fit(X, 3 * X[:, 0] - 1)
        >>> model.gradient([[0.0], [0.5]]).round(12).tolist()
        [[3.0], [3.0]]
        """
        check_is_fitted(self)
        if is_dask(X):
            X = X.compute()  # type: ignore[union-attr]
        X = encode_queries(self, X)
        if np.asarray(X).dtype.kind in "cmMUS":
            as_real("X", X)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        keys, values, sw = self._training_data()
        if return_std:
            from nadaraya.inference.bands import predict_std

            std_of = nn_fit.predict_std if uses_neighbours(self) else predict_std
            g, std = std_of(self, X, variance, slopes=True)
            return (g[:, :, 0], std[:, :, 0]) if np.ndim(values) == 1 else (g, std)
        backend = self.backend if self.backend != "dask" else "auto"
        g = (nn_fit.gradient(self, X) if uses_neighbours(self) else
             _fit.gradient(self._job(X, keys, values, sw, trusted=not is_dask(self.X_fit_)), self.empty,
                           backend=backend))
        return g[:, :, 0] if np.ndim(values) == 1 else g

    def summary(self) -> FitSummary:
        """A summary of the fit: n, kernel, degree, variable types, bandwidths and lambdas, the
        selection criterion, the residual variance and R squared (see
        :class:`nadaraya.inference.summary.FitSummary`); prints as a fixed-width table.

        The in-sample fits it needs are computed on the first call (one pass over the pairs
        of training points, O(n^2 d)) and kept until the next ``fit``.

        Returns
        -------
        FitSummary

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import NadarayaWatson
        >>> X = np.linspace(0, 1, 30)[:, None]
        >>> s = NadarayaWatson(bandwidth=0.1, degree=1).fit(X, X[:, 0] ** 2).summary()
        >>> s.degree, s.n, bool(s.r_squared > 0.99)
        (1, 30, True)
        """
        from nadaraya.inference.summary import summarize

        check_is_fitted(self)
        cached: FitSummary | None = getattr(self, "_summary_cache", None)
        if cached is None:
            keys, values, sw = self._training_data()
            trusted = not is_dask(self.X_fit_)
            fits = self._pool(np.asarray(keys, dtype=np.float64), keys, values, sw, trusted=trusted)
            cached = summarize(self, values, fits, sw)
            self._summary_cache = cached
        return cached

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
        from nadaraya.persist import save

        return save(self, path)

