"""Robustness iterations of the estimator (statsmodels' ``it``, Cleveland 1979): bisquare weights
on the residuals multiply the sample weights, the bandwidth fixed."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from nadaraya._support.validation import is_dask
from nadaraya.inference.training import forget

__all__ = ["as_robust_iterations", "check_robust", "robustify"]

#: the most robustness iterations offered (statsmodels' default is 3; each one is a full fit)
MAX_ITERATIONS = 100


def as_robust_iterations(value: Any) -> int:
    """``robust_iterations`` checked: an integer from 0 to :data:`MAX_ITERATIONS`.

    Examples
    --------
    >>> as_robust_iterations(3)
    3
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value <= MAX_ITERATIONS:
        raise ValueError(f"robust_iterations must be an integer from 0 to {MAX_ITERATIONS} (statsmodels' "
                         f"it); got {value!r}")
    return int(value)


def check_robust(model: Any, X: Any, y: Any) -> None:
    """``robust_iterations`` and ``bandwidth_type`` (each valid: the estimator's
    ``_parameter_constraints``) checked against the input before ``fit`` works."""
    it, kind = int(model.robust_iterations), model.bandwidth_type
    if is_dask(X, y) and (it or kind != "fixed"):
        raise ValueError(f"robust_iterations={it} and bandwidth_type={kind!r} need NumPy input (they refit "
                         "in memory); compute the Dask arrays first")
    if it and np.ndim(y) == 2 and np.shape(y)[1] > 1:
        raise ValueError(f"robust_iterations={it} weighs the residuals of one output; y has {np.shape(y)[1]} "
                         "columns: fit one model per output")


def robustify(model: Any) -> None:
    """After ``fit``: ``robust_iterations`` times, fit the training points, take the bisquare
    ``B(e_i / (6 median|e|))`` of the residuals and set ``sample_weight_`` to the given sample
    weights times it; the last weights are kept in ``robustness_weights_`` (None without
    iterations). The bandwidth (or ``k``) stays the one ``fit`` resolved."""
    from nadaraya.local.lowess import _bisquare  # numba: loaded on first use

    it = int(model.robust_iterations)  # valid: checked at fit's start by _parameter_constraints
    model.robustness_weights_ = None
    if it == 0:
        return
    X, y, sw0 = model.X_fit_, np.asarray(model.y_fit_).reshape(-1), model.sample_weight_
    sw = sw0
    r = np.ones(X.shape[0])
    for _ in range(it):
        fit = np.asarray(model._pool(X, X, y, sw)).reshape(-1)
        r = _bisquare(y, fit)
        sw = r if sw0 is None else sw0 * r
    if not (sw > 0).any():  # every residual far out: keep the last fit's weights where all vanish
        sw = np.ones_like(r) if sw0 is None else sw0
    model.robustness_weights_ = r
    model.sample_weight_ = np.ascontiguousarray(sw, dtype=np.float64)
    model._summary_cache = None
    forget(model)
