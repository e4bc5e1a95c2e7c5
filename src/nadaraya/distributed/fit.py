"""The estimator's fit on Dask input: the training data gathered, the bandwidth chosen on it."""

from __future__ import annotations

from typing import Any

import numpy as np

from nadaraya._support.validation import check_some_weight, is_dask
from nadaraya.bandwidth import RULES
from nadaraya.bandwidth.resolve import _default_lambdas, _mixed_bandwidth, resolve_bandwidth
from nadaraya.local.mixed import as_categorical_kernel, as_var_types


def fit_dask(model: Any, X: Any, y: Any, sample_weight: Any, notes: list[str]) -> None:
    """``NadarayaWatson.fit`` on Dask input: the arrays stay lazy (checked chunk by chunk when
    computed, by :func:`nadaraya.distributed.pool.training_data`); a rule of thumb is computed with Dask
    reductions (:mod:`nadaraya.distributed.rules`), the levels of categorical columns with
    ``dask.array.unique``. Selectors ("cv", "aicc") search over exact leave-one-out passes
    of the single-machine engine: the training data are gathered to this process for the
    search (they must fit in its memory)."""
    import dask
    import dask.array as da

    from nadaraya.distributed.pool import training_data
    from nadaraya.distributed.rules import rule_of_thumb as dask_rule_of_thumb

    X_fit, y_fit, sw = training_data(X, y, sample_weight)
    n, d = X_fit.shape
    vt = as_var_types(model.var_types, d)
    ck = as_categorical_kernel(model.categorical_kernel)
    cat = [j for j, t in enumerate(vt) if t != "c"]
    levels = np.zeros(d, dtype=np.int64)
    if cat:
        levels[cat] = [u.size for u in dask.compute(*[da.unique(X_fit[:, j]) for j in cat])]
    plain = model.degree == 0 and not cat
    bw = model.bandwidth
    if isinstance(bw, str) and bw in RULES:
        model.selection_ = None
        cont = [j for j, t in enumerate(vt) if t == "c"]
        bandwidth = _default_lambdas(vt, levels, ck, int(n))
        if cont:
            Xc = X_fit if plain else X_fit[:, cont]
            bandwidth[cont] = dask_rule_of_thumb(Xc, bw, kernel=model.kernel, sample_weight=sw)
    elif isinstance(bw, str):  # computed, the chunks are checked; float64 for the search
        Xc, yc, swc = dask.compute(X_fit, y_fit, sw)
        swn = None if swc is None else np.ascontiguousarray(swc, dtype=np.float64)
        if swn is not None:
            check_some_weight(swn)
        bandwidth = resolve_bandwidth(model, np.ascontiguousarray(Xc, dtype=np.float64), swn,
                                            np.ascontiguousarray(yc, dtype=np.float64), notes, vt, levels)
    else:
        model.selection_ = None
        bandwidth = bw
    model.n_features_in_ = d
    model.bandwidth_ = _mixed_bandwidth(bandwidth, vt, levels, ck)
    model.var_types_, model.levels_ = vt, levels
    model.X_fit_, model.y_fit_, model.sample_weight_ = X_fit, y_fit, sw
    model.fit_order_ = None  # kept in the given order
    model.backend_, model.backend_reason_ = "dask", "the training data are Dask arrays"


def gather(*arrays: Any) -> tuple[Any, ...]:
    """The arrays in memory: Dask arrays computed together in one pass, the others as they are."""
    import dask

    return tuple(dask.compute(*arrays))


def predict_lazy(model: Any, X: Any) -> Any:
    """The estimator's ``predict`` when the model or ``X`` is on Dask: a lazy Dask array."""
    from nadaraya.distributed.pool import pool as lazy_pool

    d = model.n_features_in_
    X = X if is_dask(X) else np.asarray(X)
    if X.ndim != 2 or X.shape[1] != d:
        raise ValueError(f"X has shape {X.shape}, but this NadarayaWatson was fitted with {d} features")
    extra: dict[str, Any] = {}
    if not model._plain():  # the Dask pool counts the categories over all the keys, X_fit_, as fit did
        extra = dict(degree=model.degree, var_types=model.var_types_,
                     categorical_kernel=model.categorical_kernel)
    return lazy_pool(X, model.X_fit_, model.y_fit_, kernel=model.kernel, bandwidth=model.bandwidth_,
                     empty=model.empty, sample_weight=model.sample_weight_, **extra)


def map_rows(fn: Any, X: Any, y: Any, k: int | None = None) -> Any:
    """Dask queries: one task per chunk of rows of X (y's rows chunked alike), each evaluated
    against the fitted data; ``k`` output columns per row (None: one value per row)."""
    import dask.array as da

    X = da.asarray(X)
    X = (X if X.ndim == 2 else X[:, None]).rechunk({1: -1})
    out = {"drop_axis": 1} if k is None else {"chunks": (X.chunks[0], (k,))}
    if y is None:
        return X.map_blocks(fn, dtype=np.float64, **out)
    y = da.asarray(y)
    y = (y if y.ndim == 2 else y[:, None]).rechunk((X.chunks[0], -1))
    return da.map_blocks(fn, X, y, dtype=np.float64, **out)
