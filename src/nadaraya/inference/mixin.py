"""Inference for fitted NadarayaWatson models: standard errors, confidence bands, significance tests.

Every method here rests on one fact: with the bandwidth fixed, a local polynomial fit is a
linear smoother, ``f(x) = sum_i a_i(x) y_i``. So

- its variance given the design is ``sum_i a_i(x)^2 sigma^2(x_i)``, computed exactly by
  :mod:`nadaraya.inference.variance` (one more pass, of squared weights);
- a bootstrap replicate on new responses ``y*`` is the same smoother applied to ``y*``: all
  ``n_boot`` replicates are output columns of ONE pooling pass (in blocks of columns, so memory
  stays within the working-memory setting), never ``n_boot`` refits;
- a replicate's derivative is the same derivative applied to ``y*`` (significance tests).

**Units.** Everything here is scale-equivariant in ``y``: the responses are divided by a power
of two (exact; one per output) that brings their largest magnitude into ``[1/2, 1)``
(:func:`unit_exponent`), every variance, replicate and statistic is computed in those units,
and the results are multiplied back. So squares of residuals neither overflow nor underflow,
and the bootstrap's single-precision replicates stay within single precision's range, at any
finite scale of ``y``.

``sigma^2`` comes from the residuals: ``"homoscedastic"`` is ``sum s_i e_i^2 / (N - tr H)``
(``e_i`` the in-sample residuals, ``N = sum s_i``, ``H_ii`` the hat-matrix diagonal);
``"heteroscedastic"`` is a Nadaraya-Watson smooth of the squared leave-one-out residuals, its
bandwidth chosen by least-squares cross-validation, read at the training points.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya.inference.bands import Band, confidence_band
from nadaraya.inference.prediction import IntervalMixin

__all__ = ["Band", "InferenceMixin"]


class InferenceMixin(IntervalMixin):
    """Confidence bands and significance tests of :class:`nadaraya.NadarayaWatson`."""

    def confidence_band(
        self,
        X: Any,
        level: float = 0.95,
        method: str = "asymptotic",
        kind: str = "pointwise",
        n_boot: int = 999,
        random_state: Any = None,
        variance: str = "heteroscedastic",
        clusters: Any = None,
        bias_bandwidth: Any = None,
    ) -> Band:
        """A confidence band for the regression function at the rows of ``X``.

        What each method covers, with the design held fixed:

        - ``"asymptotic"``: ``f(x) -+ z sd(x)``, ``sd`` the exact standard error of
          ``predict(X, return_std=True)``. It covers the *smoothed* function
          ``E[f(x) | design] = sum_i a_i(x) m(x_i)`` at the stated rate (the fit's bias is not
          in it).
        - ``"bootstrap"``: the wild bootstrap (Mammen's multipliers on the leverage-corrected
          residuals ``e_i / sqrt(1 - H_ii)``, design and bandwidth fixed); every replicate is the
          same linear smoother applied to new responses, so all ``n_boot`` are output columns
          of one pass. It covers the smoothed function too, without the normal approximation.
        - ``"rbc"``: robust bias correction (Calonico, Cattaneo and Farrell, 2018; R's
          nprobust with ``rho = h / b = 1``): the bias of the degree-``p`` fit is estimated by
          the degree ``p + 1`` fit at the same bandwidth, and the interval is centred on the
          corrected estimate (which equals that fit) and studentised by its standard error.
          It covers the *true* regression function at the CV bandwidth, where the plain
          bands under-cover; ``estimate`` is still the model's own prediction. With
          ``bias_bandwidth=b`` (or one of nprobust's variances) it is nprobust's ``lprobust``
          with ``rho = h / b``: ``center`` and ``se`` are its ``tau.bc`` and ``se.rb``
          (:mod:`nadaraya.inference.rbc`).

        ``kind="simultaneous"`` widens the band so that it covers the whole curve over the rows
        of ``X`` at once: the ``level`` quantile of the largest studentised deviation over the
        points (sup-t), from ``n_boot`` replicates (Gaussian ones for ``"asymptotic"`` and
        ``"rbc"``, the wild bootstrap's for ``"bootstrap"``).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        level : float, default 0.95
        method : {"asymptotic", "bootstrap", "rbc"}, default "asymptotic"
        kind : {"pointwise", "simultaneous"}, default "pointwise"
        n_boot : int, default 999
            Replicates for the bootstrap and for simultaneous bands (19 to 1,000,000, and within
            an hour's work and half the machine's memory; unused by the other bands).
        random_state : int, numpy Generator or None
        variance : {"heteroscedastic", "homoscedastic", "hc0", "hc1", "hc2", "hc3", "nn"}, \
default "heteroscedastic"
            How the noise variance ``sigma^2(x_i)`` is estimated (see
            :meth:`~nadaraya.NadarayaWatson.predict`), or one of nprobust's sandwich estimators:
            ``"hc0"``..``"hc3"`` (the local fit's residuals, ``hc1`` with ``n / (n - p - 1)``,
            ``hc2``/``hc3`` with the local leverage) and ``"nn"`` (nearest-neighbour residuals,
            3 matches); these are for one continuous feature, no sample weights, pointwise bands
            (:mod:`nadaraya.inference.robust`).
        clusters : array-like of shape (n_samples,), optional
            Cluster labels of the training rows (in the order given to ``fit``): the sandwich
            sums the residuals per cluster (nprobust's ``cluster=``, with its small-sample factor).
        bias_bandwidth : float or "auto", optional
            ``method="rbc"`` only: the bandwidth ``b`` of the bias estimate (``rho = h / b``);
            ``"auto"`` takes nprobust's plug-in ``b``
            (:func:`nadaraya.bandwidth.plugin.plugin_bandwidth`). Default: ``b = h``.

        Returns
        -------
        Band
            ``(estimate, lower, upper)``, each of shape (n_queries,) or (n_queries, n_outputs);
            ``band.center`` and ``band.se`` are the centre and standard error it is built on.

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import NadarayaWatson
        >>> rng = np.random.default_rng(0)
        >>> x = rng.uniform(0, 5, 200); y = np.sin(x) + rng.normal(0, 0.3, 200)
        >>> model = NadarayaWatson(bandwidth=0.4, degree=1).fit(x[:, None], y)
        >>> band = model.confidence_band([[1.0], [2.5]], variance="homoscedastic")
        >>> bool(np.all(band.lower < band.estimate) and np.all(band.estimate < band.upper))
        True
        """
        Xv = _queries(self, X)
        return confidence_band(self, Xv, level, method, kind, n_boot, random_state, variance,
                               clusters=clusters, bias_bandwidth=bias_bandwidth)

    def significance_test(
        self, X: Any, y: Any, features: Any = None, n_boot: int = 399, random_state: Any = None
    ) -> Any:
        """Test, per feature (or per group), whether the regression depends on it.

        The statistic (Racine, 1997; Racine, Hart and Li, 2006, as R np's ``npsigtest``) is the
        mean over the sample of the squared partial derivative of the fit (continuous features,
        :meth:`gradient`), or of the squared change of the fit when the feature is set to each
        of its categories (categorical ones); a group sums its features' statistics. The null
        distribution comes from the wild bootstrap: responses ``g(x_i) + e_i v_i`` with ``g``
        the fit without the feature(s) under test (same bandwidths for the others), ``e_i``
        the full fit's residuals and Mammen's multipliers ``v_i``. The bandwidths are the fitted
        model's; each replicate's statistic is the same linear map of its responses, so the
        replicates are output columns of one pass per block.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data to test on (usually the training data).
        y : array-like of shape (n_samples,)
        features : sequence of int or of sequences of int, optional
            The features to test, each alone (an int) or jointly (a sequence); default every
            feature alone.
        n_boot : int, default 399
            19 to 1,000,000, and within an hour's work (a ValueError says the cost otherwise).
        random_state : int, numpy Generator or None

        Returns
        -------
        SignificanceTest
            Statistics and p-values per test (:class:`nadaraya.SignificanceTest`); ``print``
            shows a table.

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import NadarayaWatson
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(0, 1, (150, 2)); y = np.sin(6 * X[:, 0]) + rng.normal(0, 0.2, 150)
        >>> model = NadarayaWatson(bandwidth=[0.1, 0.3]).fit(X, y)
        >>> res = model.significance_test(X, y, n_boot=99, random_state=0)
        >>> bool(res.p_value[0] < 0.05)
        True
        """
        from sklearn.utils.validation import check_is_fitted

        from nadaraya._support.validation import as_values

        check_is_fitted(self)
        if getattr(self, "bandwidth_type", "fixed") != "fixed":
            kind = self.bandwidth_type  # type: ignore[attr-defined]
            raise NotImplementedError(f"significance_test needs a fixed bandwidth; this model's "
                                      f"bandwidth_type is {kind!r}")
        Xv = _queries(self, X)
        Y, _ = as_values(y, Xv.shape[0], np.dtype(np.float64), name="y", keys="X")
        names = getattr(self, "feature_names_in_", None)
        labels = (
            tuple(str(v) for v in names) if names is not None else tuple(f"x{j}" for j in range(Xv.shape[1]))
        )
        from nadaraya.inference.sigtest import significance_test

        return significance_test(self, Xv, Y, None, features, n_boot, random_state, labels)


def _queries(model: Any, X: Any) -> NDArray[np.float64]:
    """``X`` validated as the estimator's ``predict`` validates it."""
    from sklearn.utils.validation import check_is_fitted, validate_data

    from nadaraya._support.validation import as_real, is_dask
    from nadaraya.local.encode import encode_queries

    check_is_fitted(model)
    if is_dask(X):
        X = X.compute()
    X = encode_queries(model, X)
    if np.asarray(X).dtype.kind in "cmMUS":
        as_real("X", X)
    return validate_data(model, X, reset=False, dtype=np.float64)
