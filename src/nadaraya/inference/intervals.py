"""Conformal prediction intervals of a fitted NadarayaWatson: jackknife+, CV+ and split conformal.

A prediction interval covers a new ``y`` at ``x`` (the noise included), where a confidence
band covers the regression function ``E[y | x]``. The order statistics follow MAPIE's rules
exactly (``ceil((1 - alpha)(n + 1))``-th of ``n`` values, ``alpha = 1 - level`` computed in
decimal). How the leave-one-out models are computed, and their accuracy: docs/intervals.md.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.config import get_config
from nadaraya.inference.training import training

__all__ = ["METHODS", "order_indices", "prediction_interval", "queries"]

METHODS = ("jackknife+", "cv+", "split")


def order_indices(level: float, n: int) -> tuple[int, int]:
    """The positions (from 0, ascending) of the lower and upper bounds among ``n`` values,
    as MAPIE's ``_compute_regression_quantile`` reads them (numpy's ``method="lower"``).

    Examples
    --------
    >>> order_indices(0.9, 300)
    (29, 270)
    """
    alpha = float(Decimal("1") - Decimal(str(level)))
    positions = np.arange(n, dtype=np.float64)
    out = []
    for ref in ((1 - 2 * alpha) * True + alpha, 1 - alpha):  # the lower side is MAPIE's reverse=True
        cor = np.ceil(ref * (n + 1)) / n
        if cor > 1.0:
            need = int(np.ceil(ref * (n + 1)))
            raise ValueError(f"level={level!r} needs at least {need} conformity scores; this interval has "
                             f"{n} "
                             "(MAPIE's rule: the ceil(level (n + 1))-th of n values must exist)")
        out.append(int(np.quantile(positions, cor, method="lower")))
    return n - 1 - out[0], out[1]


def queries(model: Any, X: Any) -> NDArray[np.float64]:
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


def _check(level: Any, method: Any, adaptive: Any, cv: Any) -> None:
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not known; valid methods are: {', '.join(METHODS)}")
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0 < level < 1:
        raise ValueError(f"level must be a number strictly between 0 and 1; got {level!r}")
    if not isinstance(adaptive, (bool, np.bool_)):
        raise TypeError(f"adaptive must be True or False; got {adaptive!r}")
    if isinstance(cv, (bool, np.bool_)) or (isinstance(cv, (int, np.integer)) and cv < 2):
        raise ValueError(f"cv={cv!r}: cv must be an integer >= 2 or a scikit-learn splitter")
    if isinstance(cv, str) or (not isinstance(cv, (int, np.integer)) and not hasattr(cv, "split")):
        raise TypeError(f"cv={cv!r}: cv must be an integer >= 2 or a scikit-learn splitter")


def _subset_pool(model: Any, Q: NDArray[np.float64], keep: NDArray[np.bool_]) -> NDArray[np.float64]:
    """The fitted model's predictions at ``Q`` from the training rows ``keep`` only."""
    keys, values, sw = model._training_data()
    keys, values = np.asarray(keys, dtype=np.float64), np.asarray(values, dtype=np.float64)
    s = None if sw is None else np.asarray(sw, dtype=np.float64)[keep]
    return np.asarray(model._pool(Q, keys[keep], values[keep], s), dtype=np.float64)


def _spread(model: Any, r: NDArray[np.float64], Q: NDArray[np.float64]) -> tuple[NDArray, NDArray]:
    """The smoothed spread ``s(x)`` (Lei et al. 2018): a Nadaraya-Watson smooth of the absolute
    leave-one-out residuals ``r`` (bandwidth by least-squares CV), at the training points and
    at ``Q``, floored at ``1e-6`` of their mean."""
    import warnings

    from nadaraya.bandwidth import BandwidthWarning, select_bandwidth
    from nadaraya.local import fit as _fit
    from nadaraya.local import job as _job

    keys, _, sw = model._training_data()
    X = np.asarray(keys, dtype=np.float64)
    known = np.isfinite(r)
    Xk, swk = X[known], None if sw is None else np.asarray(sw, dtype=np.float64)[known]
    vt = getattr(model, "var_types_", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        sel = select_bandwidth(Xk, r[known], kernel=model.kernel, sample_weight=swk, var_types=vt,
                               categorical_kernel=model.categorical_kernel, per_feature=X.shape[1] > 1)
    job = _job.prepare(np.vstack([X, Q]), Xk, r[known], kernel=model.kernel, bandwidth=sel.bandwidth,
                       sample_weight=swk, degree=0, var_types=vt, categorical_kernel=model.categorical_kernel,
                       levels=model._cat_levels())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = np.asarray(_fit.pool(job, "nearest"), dtype=np.float64)
    mean = float(np.mean(r[known])) if known.any() else 0.0
    s = np.maximum(s, 1e-6 * mean) if mean > 0 else np.ones_like(s)
    return s[: X.shape[0]], s[X.shape[0]:]


def _loo_fits(model: Any) -> NDArray[np.float64]:
    """The exact leave-one-out fits at the training points (X_fit_ order); a point whose
    leave-one-out sums are empty or underflow is refitted without it (the model's ``empty`` fill)."""
    keys, values, sw = model._training_data()
    X = np.ascontiguousarray(keys, dtype=np.float64)
    n = X.shape[0]
    code = _kernel_code(model)
    if code >= 0:
        from nadaraya._support.jit import run_ranges, threads_for
        from nadaraya.inference import _conformal_jit as cj

        loo = np.empty(n)
        s = np.ones(n) if sw is None else np.ascontiguousarray(sw, dtype=np.float64)
        h = np.ascontiguousarray(model.bandwidth_, dtype=np.float64)
        with threads_for(float(n) * n * 8):
            yv = np.ascontiguousarray(values, dtype=np.float64)
            run_ranges(cj.loo_fits, (X, h, s, code, yv), n, (loo,), grain=16)
    else:
        loo = np.array(training(model).loo[:, 0], dtype=np.float64)
    for i in np.flatnonzero(~np.isfinite(loo)):
        keep = np.ones(n, dtype=bool)
        keep[i] = False
        loo[i] = _subset_pool(model, X[i : i + 1], keep)[0]
    return loo


def _kernel_code(model: Any) -> int:
    """The kernel's code in the jitted loops, -1 where they do not compute its weights (other
    kernels, degree >= 1, categorical columns)."""
    from nadaraya.inference._conformal_jit import KERNEL_CODES
    from nadaraya.kernels import get as get_kernel

    code = KERNEL_CODES.get(get_kernel(model.kernel).name, -1) if model._plain() else -1
    if code >= 10:  # a compact window needs the keys sorted by the first feature, as fit keeps them
        first = np.asarray(model._training_data()[0], dtype=np.float64)[:, 0]
        code = code if bool(np.all(first[1:] >= first[:-1])) else -1
    return code


def _block(n: int) -> int:
    """Queries per block of (queries, n) scratch arrays within the working memory."""
    return max(1, int(get_config()["working_memory"] * 2**20) // (8 * 4 * max(n, 1)))


def _bounds_from_matrix(M: Any, R: NDArray, scales: NDArray, kl: int, ku: int) -> tuple[NDArray, NDArray]:
    """Order statistics of ``M[q, i] -+ scales[q] R_i`` per query, ``M`` a function of a block
    of query rows returning its (rows, n) predictions."""
    m = scales.size
    n = R.size
    lower, upper = np.empty(m), np.empty(m)
    b = _block(n)
    for q0 in range(0, m, b):
        q1 = min(m, q0 + b)
        P = M(q0, q1)
        r = scales[q0:q1, None] * R[None, :]
        upper[q0:q1] = np.partition(P + r, ku, axis=1)[:, ku]
        lower[q0:q1] = np.partition(P - r, kl, axis=1)[:, kl]
    return lower, upper


def _jackknife_plus(
    model: Any, Q: NDArray, R: NDArray, scales: NDArray, kl: int, ku: int
) -> tuple[NDArray, NDArray]:
    """Jackknife+ bounds: the computed leave-one-out models of a degree-0 continuous model,
    else one fit per left-out point."""
    keys, values, sw = model._training_data()
    X = np.ascontiguousarray(keys, dtype=np.float64)
    y = np.ascontiguousarray(values, dtype=np.float64)
    n, m = X.shape[0], Q.shape[0]
    if not model._plain():
        if m * n * 8 > 4 * get_config()["working_memory"] * 2**20:
            raise ValueError(f"jackknife+ of a model with degree={model.degree} or categorical columns fits "
                             f"one model per training point and keeps ({m}, {n}) predictions; pass fewer "
                             "queries, raise nadaraya.set_config(working_memory=...), or use method='cv+'")
        P = np.empty((m, n))
        for i in range(n):
            keep = np.ones(n, dtype=bool)
            keep[i] = False
            P[:, i] = _subset_pool(model, Q, keep)
        return _bounds_from_matrix(lambda a, b: P[a:b], R, scales, kl, ku)
    from nadaraya._support.jit import run_ranges, threads_for
    from nadaraya.inference import _conformal_jit as cj

    code = _kernel_code(model)
    h = np.ascontiguousarray(model.bandwidth_, dtype=np.float64)
    s = np.ones(n) if sw is None else np.ascontiguousarray(sw, dtype=np.float64)
    order = np.argsort(R, kind="stable")
    Rs = np.ascontiguousarray(R[order])
    lower, upper = np.full(m, np.nan), np.full(m, np.nan)
    tops = np.full(m, -2, dtype=np.int64)
    forced = np.full(m, np.nan)
    if code >= 0:
        with threads_for(float(m) * n * 8):
            run_ranges(cj.jackknife_queries, (Q, X, h, s, code, y, R, Rs, order, scales, kl, ku, forced), m,
                       (lower, upper, tops), grain=4)
    todo = np.flatnonzero(tops == -2)  # weights from the primitive: other kernels, empty windows
    if todo.size:
        _rows_pass(model, Q, X, s, y, R, Rs, order, scales, kl, ku, forced, todo, (lower, upper, tops))
    for q in np.flatnonzero(tops >= 0):  # the model without the heaviest key is an underflow or empty
        keep = np.ones(n, dtype=bool)
        keep[tops[q]] = False
        forced[q] = _subset_pool(model, Q[q : q + 1], keep)[0]
    redo = np.flatnonzero(tops >= 0)
    if redo.size:
        _rows_pass(model, Q, X, s, y, R, Rs, order, scales, kl, ku, forced, redo, (lower, upper, tops))
    return lower, upper


def _rows_pass(model: Any, Q: NDArray, X: NDArray, s: NDArray, y: NDArray, R: NDArray, Rs: NDArray,
               order: NDArray, scales: NDArray, kl: int, ku: int, forced: NDArray, rows: NDArray,
               out: tuple) -> None:
    """Jackknife+ bounds of the queries ``rows`` from the primitive's attention weights
    (their ``empty`` fill included), in blocks within the working memory."""
    import warnings

    from nadaraya._core.attention import attention_weights
    from nadaraya.inference import _conformal_jit as cj

    b = _block(X.shape[0])
    for r0 in range(0, rows.size, b):
        idx = rows[r0 : r0 + b]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            A = attention_weights(Q[idx], X, kernel=model.kernel, bandwidth=model.bandwidth_,
                                  sample_weight=None if model.sample_weight_ is None else s,
                                  empty=model.empty, max_bytes=np.inf)
        lo, up, tp = np.empty(idx.size), np.empty(idx.size), np.empty(idx.size, dtype=np.int64)
        cj.jackknife_rows(np.ascontiguousarray(A, dtype=np.float64), y, R, Rs, order, scales[idx], kl, ku,
                          forced[idx], 0, idx.size, lo, up, tp)
        out[0][idx], out[1][idx], out[2][idx] = lo, up, tp


def _folds(model: Any, cv: Any, random_state: Any, n: int) -> list[NDArray[np.intp]]:
    """The folds (positions in ``X_fit_``) of ``cv`` applied to the rows in the order given to fit."""
    from sklearn.model_selection import KFold

    splitter = cv
    if isinstance(cv, (int, np.integer)):
        if cv > n:
            raise ValueError(f"cv={cv!r} folds need at least {cv} training points; this model has {n}")
        splitter = KFold(int(cv), shuffle=random_state is not None, random_state=random_state)
    order = getattr(model, "fit_order_", None)
    order = np.arange(n) if order is None else np.asarray(order)
    position = np.empty(n, dtype=np.intp)
    position[order] = np.arange(n)  # given row g sits at X_fit_ position position[g]
    return [position[np.asarray(test)] for _, test in splitter.split(np.zeros((n, 1)))]


def prediction_interval(
    model: Any, X: Any, level: float = 0.9, method: str = "jackknife+", adaptive: bool = False,
    cv: Any = 5, random_state: Any = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Lower and upper prediction bounds at ``X``: see
    :meth:`nadaraya.NadarayaWatson.prediction_interval`."""
    _check(level, method, adaptive, cv)
    Q = queries(model, X)
    keys, values, _ = model._training_data()
    if np.ndim(values) != 1:
        raise ValueError("prediction_interval is computed for one output; this model was fitted on "
                         f"y of shape {np.shape(values)}: fit one model per output")
    X_fit = np.asarray(keys, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    n = X_fit.shape[0]
    if method == "jackknife+":
        fits = _loo_fits(model)
    else:
        folds = _folds(model, cv, random_state, n)
        if method == "split":
            folds = folds[:1]
        fits = np.full(n, np.nan)
        preds: list[NDArray[np.float64]] = []
        for test in folds:
            keep = np.ones(n, dtype=bool)
            keep[test] = False
            fits[test] = _subset_pool(model, X_fit[test], keep)
            preds.append(_subset_pool(model, Q, keep))
    resid = np.abs(y - fits)
    if adaptive:
        s_fit, scales = _spread(model, resid, Q)
        resid = resid / s_fit
    else:
        scales = np.ones(Q.shape[0])
    if method == "jackknife+":
        kl, ku = order_indices(level, n)
        return _jackknife_plus(model, Q, np.ascontiguousarray(resid), np.ascontiguousarray(scales), kl, ku)
    if method == "split":
        test = folds[0]
        _, ku = order_indices(level, test.size)
        qhat = np.sort(resid[test])[ku]  # MAPIE's symmetric split rule: the upper order statistic
        return preds[0] - scales * qhat, preds[0] + scales * qhat
    P = np.column_stack(preds)  # (m, folds)
    fold_of = np.empty(n, dtype=np.intp)
    for k, test in enumerate(folds):
        fold_of[test] = k
    kl, ku = order_indices(level, n)
    return _bounds_from_matrix(lambda a, b: P[a:b][:, fold_of], resid, scales, kl, ku)
