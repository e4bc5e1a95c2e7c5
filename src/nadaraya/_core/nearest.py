"""Nearest keys and the far-query limit: exact neighbour search in ``x / h``, and the weights of
queries so far from every key that their log weights lose digits or overflow."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.config import get_config

if TYPE_CHECKING:
    from nadaraya._core.call import Call

__all__ = ["FAR_LOG_WEIGHT"]


def _unit_coords(
    q: NDArray[np.floating], k: NDArray[np.floating], h: NDArray[np.floating]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Queries and keys in ``x / h`` coordinates times one common factor that brings the
    largest to magnitude one: distances in them compare as in ``x / h`` and never overflow."""
    q, k, h = q.astype(np.float64), k.astype(np.float64), h.astype(np.float64)
    with np.errstate(divide="ignore"):
        reach = np.log2(np.maximum(np.abs(q).max(axis=0), np.abs(k).max(axis=0))) - np.log2(h)
    top = float(reach[np.isfinite(reach)].max()) if np.isfinite(reach).any() else 0.0
    factor = np.exp2(-np.log2(h) - top)
    return q * factor, k * factor


def _nearest(
    call: Call, rows: NDArray[np.intp], exclude: NDArray[np.integer] | None, power: float = 2.0
) -> list[NDArray[np.intp]]:
    """For each query in ``rows``, the keys nearest to it in the Minkowski ``power``-distance
    of ``x / h``, ties included, skipping keys of zero weight and the excluded key (an empty
    array where no key is left).

    Exact for any finite input: a k-d tree on coordinates brought to magnitude at most one
    (one factor per feature, so nothing overflows) proposes every key within rounding of the
    nearest distance, and where it proposes several, their distances are compared in exact
    rational arithmetic from the original numbers.
    """
    from scipy.spatial import cKDTree

    n, d = call.keys.shape
    ok = np.arange(n) if call.sample_weight is None else np.nonzero(call.sample_weight > 0)[0]
    if ok.size == 0 or rows.size == 0:
        return [np.empty(0, dtype=np.intp) for _ in rows]
    zq, zk = _unit_coords(call.queries[rows], call.keys[ok], call.bandwidth)
    tree = cKDTree(zk)
    kq = min(2 if exclude is not None else 1, ok.size)
    dist, idx = tree.query(zq, k=kq, p=power)
    dist, idx = dist.reshape(rows.size, kq), ok[np.minimum(idx, ok.size - 1).reshape(rows.size, kq)]
    dmin = dist[:, 0].copy()
    if exclude is not None:
        own = idx[:, 0] == exclude[rows]
        dmin[own] = dist[own, 1] if kq == 2 else np.inf
    # every coordinate is at most one in magnitude: each distance is within this of its value
    slack = 16.0 * (d + 2) * np.finfo(np.float64).eps
    found = np.isfinite(dmin)
    cand = np.empty(rows.size, dtype=object)
    cand[found] = tree.query_ball_point(zq[found], r=dmin[found] + slack, p=power)
    out: list[NDArray[np.intp]] = []
    for i in range(rows.size):
        near = ok[np.asarray(cand[i], dtype=np.intp)] if found[i] else np.empty(0, dtype=np.intp)
        if exclude is not None:
            near = near[near != exclude[rows[i]]]
        if near.size > 1:
            near = _exactly_nearest(call.queries[rows[i]], call.keys, near, call.bandwidth, power)
        out.append(np.sort(near))
    return out


def exact_distance(q: NDArray[Any], k: NDArray[Any], h: NDArray[Any], power: float = 2.0) -> Fraction:
    """``sum_j |(q_j - k_j) / h_j| ** power`` in exact rational arithmetic (to break near ties).

    Examples
    --------
    >>> float(exact_distance(np.array([1.0, 0.0]), np.array([0.0, 2.0]), np.array([1.0, 2.0]), 1.0))
    2.0
    """
    p = int(power)
    return sum((abs((Fraction(float(a)) - Fraction(float(b))) / Fraction(float(c))) ** p
                for a, b, c in zip(q, k, h)), Fraction(0))


def _exactly_nearest(
    q: NDArray[np.floating], keys: NDArray[np.floating], cand: NDArray[np.intp], h: NDArray[np.floating],
    power: float,
) -> NDArray[np.intp]:
    """The candidates at the smallest distance, compared in exact rational arithmetic."""
    uniq, inverse = np.unique(keys[cand], axis=0, return_inverse=True)
    if uniq.shape[0] == 1:
        return cand
    dists = [exact_distance(q, row, h, power) for row in uniq]
    best = min(dists)
    keep = np.array([dd == best for dd in dists])
    return cand[keep[inverse.ravel()]]


def _nearest_values(
    call: Call, rows: NDArray[np.intp], exclude: NDArray[np.integer] | None, power: float
) -> tuple[NDArray[np.floating], NDArray[np.bool_]]:
    """The (sample-weighted) mean value of each row's nearest keys, and where there were any."""
    sets = _nearest(call, rows, exclude, power)
    vals = np.full((rows.size, call.values.shape[1]), np.nan, dtype=call.values.dtype)
    found = np.array([s.size > 0 for s in sets], dtype=bool)
    for i, near in enumerate(sets):
        if near.size == 1:
            vals[i] = call.values[near[0]]
        elif near.size > 1:
            sw = call.sample_weight
            w = np.ones(near.size) if sw is None else sw[near].astype(np.float64)
            vals[i] = (w @ call.values[near].astype(np.float64)) / w.sum()
    return vals, found


def own_positions(
    ok: NDArray[np.intp], exclude: NDArray[np.integer]
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Where each query's left-out key sits among the usable keys ``ok`` (sorted indices):
    ``(query rows, positions in ok)`` for the queries whose left-out key is usable.

    Examples
    --------
    >>> rows, pos = own_positions(np.array([0, 2, 3]), np.array([2, 1, 3]))
    >>> rows.tolist(), pos.tolist()
    ([0, 2], [1, 2])
    """
    own = np.searchsorted(ok, exclude)
    mine = (own < ok.size) & (ok[np.minimum(own, ok.size - 1)] == exclude)
    return np.nonzero(mine)[0], own[mine]


#: A query whose largest log weight is below this (a Gaussian query more than about 45
#: bandwidths from every key) holds log weights so large that their differences between keys
#: lose digits: it is recomputed relative to its nearest key (see :func:`_far_weights`).
FAR_LOG_WEIGHT = -(2.0**10)


def _far_weights(
    call: Call, rows: NDArray[np.intp], exclude: NDArray[np.integer] | None
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Attention weights of far queries, in float64, with full relative precision.

    Each query's log weights are taken relative to an anchor key (its nearest in the kernel's
    ``far_power`` distance of ``x / h``) through the kernel's ``log_ratio``, whose arguments
    are the anchor's scaled distance and differences of keys: no difference of two huge log
    weights is ever formed, so a query any finite distance away gets its exact weights
    (the Gaussian's tend to one-hot at the nearest key, the Laplacian's do not) and never
    0/0. Returns the keys with positive sample weight and a (len(rows), len(keys)) array of
    weights summing to one per row, or zero where leave-one-out leaves no key.
    """
    k = call.kernel
    n, d = call.keys.shape
    ok = np.arange(n) if call.sample_weight is None else np.nonzero(call.sample_weight > 0)[0]
    keys = call.keys[ok].astype(np.float64)
    h = call.bandwidth.astype(np.float64)
    log_sw = None if call.sample_weight is None else np.log(call.sample_weight[ok].astype(np.float64))
    out = np.zeros((rows.size, ok.size))
    entries = max(1, int(get_config()["working_memory"] * 2**20) // (8 * 8 * d * max(ok.size, 1)))
    with np.errstate(all="ignore"):
        for r0 in range(0, rows.size, entries):
            rr = rows[r0 : r0 + entries]
            q = call.queries[rr].astype(np.float64)
            # the anchor: a nearest key, found exactly (also where floats cannot tell keys apart)
            near = _nearest(call, rr, exclude, k.far_power)
            pos = np.searchsorted(ok, np.array([s[0] if s.size else ok[0] for s in near]))
            alone = np.array([s.size == 0 for s in near], dtype=bool)
            anchor = pos
            blocked = np.zeros((rr.size, ok.size), dtype=bool)  # the left-out key; all if alone
            if exclude is not None:
                blocked[own_positions(ok, exclude[rr])] = True
            blocked[alone] = True
            for _ in range(3):  # the anchor should hold the largest weight; move it if not
                a = (q - keys[anchor]) / h  # (b, d)
                delta = (keys[anchor][:, None, :] - keys[None, :, :]) / h  # (b, n, d)
                lr = k.log_ratio(a[:, None, :], delta).sum(axis=2)  # type: ignore[misc]
                if log_sw is not None:
                    lr += log_sw[None, :] - log_sw[anchor][:, None]
                lr[np.isnan(lr)] = -np.inf
                lr[blocked] = -np.inf
                best = np.argmax(lr, axis=1)
                if (lr[np.arange(rr.size), best] <= 0).all():
                    break
                anchor = np.where(lr[np.arange(rr.size), best] > 0, best, anchor)
            top_lr = lr.max(axis=1, keepdims=True)
            w = np.exp(lr - np.where(np.isfinite(top_lr), top_lr, 0.0))
            total = w.sum(axis=1, keepdims=True)
            out[r0 : r0 + rr.size] = np.divide(w, total, out=np.zeros_like(w), where=total > 0)
    return ok, out
