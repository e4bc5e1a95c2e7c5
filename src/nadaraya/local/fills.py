"""The effective weights of the answers that are not a query's own local fit: ``empty=`` fills
and the far limit, so that their standard errors and bootstrap replicates belong to them.

Every prediction of a fitted model is linear in the training values, ``f(x) = sum_i a_i y_i``;
its standard error is ``sqrt(sum_i a_i^2 sigma_i^2 / s_i)`` (``s`` the sample weights). Where
the window of a query is empty, or (log-domain kernels) the query lies so far from every key
that pooling takes the far limit, the effective weights ``a`` are those of the fallback
actually returned:

- the far limit (log-domain kernels without categorical columns, every ``empty=``): the exact
  limit of the attention weights (:func:`nadaraya._core.nearest._far_weights`), degree 0 whatever
  the model's degree;
- ``empty="nearest"``: the nearest keys, their sample weights normalised -- one key (the SE is
  then that observation's, ``sigma(x_nearest) / sqrt(s)``) unless several are equally near
  (their sample-weighted mean). Nearest means in the continuous columns' ``x / h``; with no
  continuous column, under the categorical distance :func:`categorical_distance`;
- ``empty="mean"``: the constant kernel on the continuous columns with the categorical factors
  kept, times the sample weights, normalised; where every categorical factor is 0 (a category
  never seen in training, at ``lambda = 0``) the sample-weighted mean of all of ``y`` (its SE
  ``sqrt(sum s_i sigma_i^2) / sum s_i``);
- ``empty="nan"``: NaN, and NaN standard errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from nadaraya._core.nearest import FAR_LOG_WEIGHT, _far_weights, _nearest
from nadaraya._support.config import get_config

if TYPE_CHECKING:
    from nadaraya.local.job import Job
    from nadaraya.local.mixed import Categorical
    from nadaraya.partials import Partials

__all__ = ["categorical_distance", "fallback_rows", "fallback_variances", "fallback_weights", "fill_values"]


def categorical_distance(
    cat: Categorical, queries: NDArray[np.float64], keys: NDArray[np.float64]
) -> NDArray[np.float64]:
    """The distance of categories, queries (m, dk) by keys (G, dk): the number of unordered
    columns that differ plus the absolute differences of the ordered ones, the power of
    ``lambda`` in the Li-Racine weight (so the nearest keys are those whose weight vanishes
    slowest as every ``lambda`` goes to 0).

    Examples
    --------
    >>> from nadaraya.local.mixed import Categorical
    >>> c = Categorical("uo", np.zeros((1, 2)), np.zeros((1, 2)), np.zeros(2), np.array([3, 3]), "classic")
    >>> keys = np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 3.0]])
    >>> categorical_distance(c, np.array([[0.0, 1.0]]), keys).tolist()
    [[0.0, 1.0, 2.0]]
    """
    out = np.zeros((queries.shape[0], keys.shape[0]))
    for j, kind in enumerate(cat.kinds):
        diff = np.abs(queries[:, j, None] - keys[None, :, j])
        out += diff if kind == "o" else (diff != 0)
    return out


def _usable(job: Job, exclude_row: int) -> NDArray[np.bool_]:
    """Keys of positive sample weight, less the left-out key (-1: none)."""
    sw = job.call.sample_weight
    ok = np.ones(job.call.keys.shape[0], dtype=bool) if sw is None else sw > 0
    if exclude_row >= 0:
        ok = ok.copy()
        ok[exclude_row] = False
    return ok


def nearest_sets(
    job: Job, rows: NDArray[np.intp], exclude: NDArray[np.integer] | None = None
) -> list[NDArray[np.intp]]:
    """Each row's nearest keys (ties included; an empty array where no usable key is left):
    in the continuous columns' ``x / h``, or under :func:`categorical_distance` without them."""
    call = job.call
    if call.keys.shape[1] > 0 or job.cat is None:
        return _nearest(call, rows, exclude, 2.0)
    cats, group = job.cat.groups()
    if exclude is not None:  # leave-one-out: each row its own usable keys
        dist = categorical_distance(job.cat, job.cat.queries[rows], cats)  # (r, G)
        out = []
        for i, row in enumerate(rows):
            d = np.where(_usable(job, int(exclude[row])), dist[i, group], np.inf)
            best = d.min() if d.size else np.inf
            out.append(np.nonzero(d == best)[0] if np.isfinite(best) else np.empty(0, dtype=np.intp))
        return out
    usable = _usable(job, -1)
    members = [np.nonzero((group == g) & usable)[0] for g in range(cats.shape[0])]
    uq, inverse = np.unique(job.cat.queries[rows], axis=0, return_inverse=True)
    dist = categorical_distance(job.cat, uq, cats)  # (u, G): rows with equal categories share
    dist[:, [mem.size == 0 for mem in members]] = np.inf
    answers = []
    for du in dist:
        best = du.min() if du.size else np.inf
        near = [members[g] for g in np.nonzero(du == best)[0]] if np.isfinite(best) else []
        answers.append(np.sort(np.concatenate(near)) if near else np.empty(0, dtype=np.intp))
    return [answers[u] for u in inverse.reshape(-1)]


def _sample_weights(job: Job) -> NDArray[np.float64]:
    sw = job.call.sample_weight
    return np.ones(job.call.keys.shape[0]) if sw is None else sw.astype(np.float64)


def mean_weights(
    job: Job, rows: NDArray[np.intp], exclude: NDArray[np.integer] | None = None
) -> NDArray[np.float64]:
    """The ``empty="mean"`` weights of the rows, (r, n), each row summing to one (zero where no
    usable key is left): the sample weights times the categorical factors, or the sample
    weights alone where those factors are all 0."""
    n = job.call.keys.shape[0]
    s = _sample_weights(job)
    W = np.repeat(s[None, :], rows.size, axis=0)
    if job.cat is not None:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            log_f = job.cat.log_factor(job.cat.queries[rows], job.cat.keys)  # (r, n)
            top = log_f.max(axis=1, keepdims=True)
            f = np.exp(log_f - np.where(np.isfinite(top), top, 0.0))
        some = np.isfinite(top[:, 0])
        W[some] *= f[some]
    if exclude is not None:  # the left-out key weighs nothing
        ex = exclude[rows]
        mine = (ex >= 0) & (ex < n)
        W[np.nonzero(mine)[0], ex[mine]] = 0.0
    total = W.sum(axis=1, keepdims=True)
    return np.divide(W, total, out=np.zeros_like(W), where=total > 0)


def _chunk(n: int) -> int:
    """Rows of (rows, n) float64 scratch within the working memory."""
    return max(1, int(get_config()["working_memory"] * 2**20) // (8 * max(n, 1)))


def fill_values(
    job: Job, rows: NDArray[np.intp], empty: str, exclude: NDArray[np.integer] | None = None
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """The ``empty="nearest"`` or ``"mean"`` fill of the rows (in the values' units) and where
    there was one (a usable key)."""
    call = job.call
    values = call.values.astype(np.float64)
    vals = np.full((rows.size, values.shape[1]), np.nan)
    s = _sample_weights(job)
    if empty == "nearest":
        for i, near in enumerate(nearest_sets(job, rows, exclude)):
            if near.size:
                vals[i] = (s[near] @ values[near]) / s[near].sum()
    else:
        step = _chunk(values.shape[0])
        for r0 in range(0, rows.size, step):
            W = mean_weights(job, rows[r0 : r0 + step], exclude)
            got = W.sum(axis=1) > 0
            vals[r0 : r0 + step][got] = W[got] @ values
    return vals, ~np.isnan(vals).all(axis=1) if vals.shape[1] else np.zeros(rows.size, dtype=bool)


def unseen(job: Job, rows: NDArray[np.intp]) -> NDArray[np.bool_]:
    """The rows whose categories give every training key a factor of 0 (a category, or a
    combination, never seen in training where ``lambda = 0``)."""
    if job.cat is None or rows.size == 0:
        return np.zeros(rows.size, dtype=bool)
    cats, _ = job.cat.groups()
    with np.errstate(divide="ignore", invalid="ignore"):
        log_f = job.cat.log_factor(job.cat.queries[rows], cats)
    return np.asarray(~(log_f > -np.inf).any(axis=1))


def fallback_rows(job: Job, parts: Partials) -> NDArray[np.intp]:
    """The queries whose prediction is not their own local fit: the far limit (log-domain
    kernels without categorical columns) or an ``empty=`` fill (an empty window)."""
    if job.cat is None and job.call.kernel.log_domain:
        return np.nonzero(~(parts.shift >= FAR_LOG_WEIGHT))[0]
    return np.nonzero(parts.empty)[0]


def fallback_weights(job: Job, rows: NDArray[np.intp], empty: str) -> NDArray[np.float64]:
    """The effective weights of the fallback answers of ``rows`` (see :func:`fallback_rows`),
    (r, n), in the order of the job's keys; NaN rows where the answer is NaN."""
    call = job.call
    n = call.keys.shape[0]
    W = np.zeros((rows.size, n))
    if rows.size == 0:
        return W
    if job.cat is None and call.kernel.log_domain:
        ok, w = _far_weights(call, rows, None)
        W[:, ok] = w
        W[~(w.sum(axis=1) > 0)] = np.nan
        return W
    if empty == "nearest":
        s = _sample_weights(job)
        for i, near in enumerate(nearest_sets(job, rows)):
            if near.size:
                W[i, near] = s[near] / s[near].sum()
            else:
                W[i] = np.nan
        return W
    if empty == "mean":
        W = mean_weights(job, rows)
        W[~(W.sum(axis=1) > 0)] = np.nan
        return W
    W[:] = np.nan
    return W


def fallback_variances(
    job: Job, parts: Partials, empty: str, per_key: NDArray[np.float64], var: NDArray[np.float64]
) -> None:
    """Overwrite ``var`` (m, p) at the fallback rows with ``sum_i a_i^2 per_key_i`` of their
    effective weights ``a`` (:func:`fallback_weights`), in blocks within the working memory."""
    rows = fallback_rows(job, parts)
    step = _chunk(job.call.keys.shape[0])
    for r0 in range(0, rows.size, step):
        rr = rows[r0 : r0 + step]
        var[rr] = fallback_weights(job, rr, empty) ** 2 @ per_key
