"""The estimator's prediction intervals and average marginal effects, as a mixin."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya.inference.intervals import prediction_interval
from nadaraya.inference.margins import AverageGradient, average_gradient

__all__ = ["IntervalMixin"]


class IntervalMixin:
    """Adds :meth:`prediction_interval` and :meth:`average_gradient` to NadarayaWatson."""

    def prediction_interval(
        self, X: ArrayLike, level: float = 0.9, method: str = "jackknife+", adaptive: bool = False,
        cv: Any = 5, random_state: Any = None,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Conformal prediction intervals: where a new ``y`` at each row of ``X`` will fall.

        A confidence band (:meth:`confidence_band`) covers the regression function
        ``E[y | x]``; a prediction interval covers a new observation, noise included, with
        probability at least ``level`` (marginally over the training data and the new point),
        under exchangeability.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        level : float, default 0.9
            The coverage, strictly between 0 and 1.
        method : {"jackknife+", "cv+", "split"}, default "jackknife+"
            ``"jackknife+"`` (Barber, Candès, Ramdas and Tibshirani, 2021): the ``n``
            leave-one-out models at the fitted bandwidth, computed in one pass from the full
            sums (not refitted); each query's bounds are order statistics over the ``n``
            models, in memory O(n) per thread. ``"cv+"``: the same with the ``cv``
            leave-fold-out models. ``"split"``: split conformal, the model on all but the
            first fold of ``cv`` and the residuals of that fold.
        adaptive : bool, default False
            Locally weighted conformal (Lei et al., 2018): residuals divided by a smoothed
            spread ``s(x)`` (a Nadaraya-Watson smooth of the absolute leave-one-out
            residuals, bandwidth by CV, estimated once on all ``n``), bounds
            ``+- s(q)`` times the order statistic, so that intervals widen where the noise does.
        cv : int or scikit-learn splitter, default 5
            The folds of ``"cv+"`` and ``"split"``, over the rows in the order given to fit
            (an integer: ``KFold(cv)``, shuffled when ``random_state`` is given).
        random_state : int, numpy RandomState or None
            Shuffles the folds of an integer ``cv`` (scikit-learn's ``KFold(shuffle=True)``);
            None keeps the rows' order.

        Returns
        -------
        lower, upper : ndarray of shape (n_queries,)

        Notes
        -----
        The order statistics are MAPIE's: with ``alpha = 1 - level``, the upper bound is the
        ``ceil((1 - alpha)(n + 1))``-th smallest of ``mu_{-i}(q) + R_i`` and the lower one the
        matching order statistic of ``mu_{-i}(q) - R_i``, so that the result equals MAPIE's
        ``CrossConformalRegressor(..., cv=LeaveOneOut(), method="plus")`` on this estimator
        with its ``bandwidth_`` fixed. With a data-driven bandwidth (``"cv"``, ``"aicc"``) the
        bandwidth is the one chosen on all ``n`` points and held fixed in every left-out
        model: the interval conditions on it (see docs/intervals.md).

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import NadarayaWatson
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(0, 1, (200, 1)); y = np.sin(6 * X[:, 0]) + rng.normal(0, 0.2, 200)
        >>> lo, hi = NadarayaWatson(bandwidth=0.05).fit(X, y).prediction_interval([[0.5]], level=0.9)
        >>> bool(lo[0] < np.sin(3.0) < hi[0])
        True
        """
        return prediction_interval(self, X, level, method, adaptive, cv, random_state)

    def average_gradient(
        self, X: ArrayLike | None = None, method: str = "delta", variance: str = "heteroscedastic",
        n_boot: int = 999, random_state: Any = None,
    ) -> AverageGradient:
        """The average marginal effect of each feature: the mean of :meth:`gradient` over the
        evaluation points (Stata's ``margins, dydx(*)``), with its standard error.

        With ``degree=0`` it is the mean of the fitted curve's derivative; with ``degree >= 1``
        the mean of the local slopes (as :meth:`gradient` defines them).

        Parameters
        ----------
        X : array-like of shape (n_points, n_features), optional
            Where the gradient is averaged; default: the training points.
        method : {"delta", "bootstrap"}, default "delta"
            The standard error. ``"delta"``: the average gradient is linear in ``y``,
            ``c @ y`` with ``c`` from the fit's exact weights, so its variance given the
            design is ``sum_i c_i^2 sigma^2(x_i)`` (``sigma^2`` by ``variance``, as for
            :meth:`predict`). ``"bootstrap"``: a wild bootstrap (Rademacher signs on the
            leave-one-out residuals around the fit), ``n_boot`` replicates, each ``c @ y*``
            exactly (no refits). Both condition on the design and on the evaluation points.
        variance : {"heteroscedastic", "homoscedastic"}, default "heteroscedastic"
        n_boot : int, default 999
        random_state : int, numpy Generator or None
            Seeds the bootstrap.

        Returns
        -------
        AverageGradient
            ``estimate`` and ``se``, arrays of shape (n_features,) (NaN for categorical
            columns), and ``method``.

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import NadarayaWatson
        >>> X = np.linspace(0, 1, 50)[:, None]
        >>> y = 2 * X[:, 0] + np.random.default_rng(0).normal(0, 0.1, 50)
        >>> ame = NadarayaWatson(bandwidth=0.2, degree=1).fit(X, y).average_gradient()
        >>> bool(abs(ame.estimate[0] - 2) < 3 * ame.se[0] + 0.05)
        True
        """
        return average_gradient(self, X, method, variance, n_boot, random_state)
