"""Orders shared by the backends that sort: keys sorted once, left-out keys among them, counting sorts."""

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = ["argsort_spread", "counting_order", "counting_pairs", "runs", "scatter_rows", "sorted_exclude",
           "sorted_order", "sorted_pairs", "sorted_weighted", "unsort_rows"]


def sorted_order(x: NDArray[np.float64]) -> NDArray[np.intp]:
    """The indices that sort ``x`` (no sort when it already is; buckets where the values are
    spread, :func:`argsort_spread`).

    Examples
    --------
    >>> sorted_order(np.array([3.0, 1.0, 2.0])).tolist(), sorted_order(np.arange(3.0)).tolist()
    ([1, 2, 0], [0, 1, 2])
    """
    if x.size < 2 or bool(np.all(x[1:] >= x[:-1])):
        return np.arange(x.size)
    return argsort_spread(x)


def sorted_weighted(
    k: NDArray[np.float64], sample_weight: NDArray[np.floating] | None
) -> tuple[NDArray[np.intp], NDArray[np.float64], float]:
    """The keys of positive weight in sorted order (their original indices ``kept``), their
    sample weights scaled by a power of two (exact) so that the largest is in ``[0.5, 1)``,
    and the log of that power (for the partials' shift).

    Examples
    --------
    >>> kept, s, log_scale = sorted_weighted(np.array([3.0, 1.0, 2.0]), np.array([4.0, 0.0, 2.0]))
    >>> kept.tolist(), s.tolist(), round(log_scale, 6)
    ([2, 0], [0.25, 0.5], 2.079442)
    """
    if sample_weight is None:
        return sorted_order(k), np.ones(k.size), 0.0
    sw = np.asarray(sample_weight, dtype=np.float64)
    pos = np.nonzero(sw > 0)[0]
    kept = pos[sorted_order(k[pos])]
    s = sw[kept]
    if not s.size:
        return kept, s, 0.0
    top = int(np.frexp(s.max())[1])
    return kept, np.ldexp(s, -top), top * math.log(2.0)


def sorted_exclude(
    exclude: NDArray[np.integer] | None, n: int, kept: NDArray[np.intp], m: int
) -> NDArray[np.int64]:
    """Each query's left-out key as a position among the sorted kept keys ``kept`` (original
    indices in sorted order): -1 for none, for -1 and for a key that was not kept.

    Examples
    --------
    >>> sorted_exclude(np.array([2, -1, 0]), 3, np.array([2, 1]), 3).tolist()
    [0, -1, -1]
    """
    if exclude is None:
        return np.full(m, -1, dtype=np.int64)
    where = np.full(n, -1, dtype=np.int64)
    where[kept] = np.arange(kept.size)
    ex = np.asarray(exclude, dtype=np.int64)
    inside = (ex >= 0) & (ex < n)
    return np.where(inside, where[np.where(inside, ex, 0)], -1)


@numba.njit(cache=True, nogil=True)
def counting_order(ids, count):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The stable order of the integers ``ids`` in ``[0, count)``, by counting: O(n + count).

    Examples
    --------
    >>> counting_order(np.array([2, 0, 2, 1]), 3).tolist()
    [1, 3, 0, 2]
    """
    start = np.zeros(count + 1, dtype=np.int64)
    for i in range(ids.size):
        start[ids[i] + 1] += 1
    for b in range(count):
        start[b + 1] += start[b]
    out = np.empty(ids.size, dtype=np.int64)
    for i in range(ids.size):
        out[start[ids[i]]] = i
        start[ids[i]] += 1
    return out


@numba.njit(cache=True, nogil=True)
def counting_pairs(ids, count, x):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """:func:`counting_order` and ``x`` in that order (float64), in the same pass.

    Examples
    --------
    >>> o, xs = counting_pairs(np.array([2, 0, 2, 1]), 3, np.array([5.0, 6.0, 7.0, 8.0]))
    >>> o.tolist(), xs.tolist()
    ([1, 3, 0, 2], [6.0, 8.0, 5.0, 7.0])
    """
    start = np.zeros(count + 1, dtype=np.int64)
    for i in range(ids.size):
        start[ids[i] + 1] += 1
    for b in range(count):
        start[b + 1] += start[b]
    out = np.empty(ids.size, dtype=np.int64)
    xs = np.empty(ids.size, dtype=np.float64)
    for i in range(ids.size):
        j = start[ids[i]]
        out[j] = i
        xs[j] = x[i]
        start[ids[i]] += 1
    return out, xs


@numba.njit(cache=True, nogil=True)
def unsort_rows(rows, order):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The rows back in their first order: ``out[order[i]] = rows[i]`` (NumPy's fancy assignment
    of rows takes several times as long).

    Examples
    --------
    >>> unsort_rows(np.array([[1.0], [2.0], [3.0]]), np.array([2, 0, 1]))[:, 0].tolist()
    [2.0, 3.0, 1.0]
    """
    out = np.empty_like(rows)
    for i in range(order.size):
        out[order[i]] = rows[i]
    return out


@numba.njit(cache=True, nogil=True)
def scatter_rows(out, rows, at):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``out[at[i]] = rows[i]`` in place.

    Examples
    --------
    >>> out = np.zeros((3, 1))
    >>> scatter_rows(out, np.array([[1.0], [2.0]]), np.array([2, 0]))
    >>> out[:, 0].tolist()
    [2.0, 0.0, 1.0]
    """
    for i in range(at.size):
        out[at[i]] = rows[i]


@numba.njit(cache=True, nogil=True)
def _bucket_pairs(x, lo, scale, nbins, limit):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The order that sorts ``x`` by a counting sort into ``nbins`` equal bins, then a stable
    insertion sort within them, and ``x`` in it (the values move with their indices, so the
    insertion sort compares neighbours in memory); empty arrays when a bin holds more than
    ``limit`` keys."""
    n = x.size
    ids = np.empty(n, dtype=np.int64)
    count = np.zeros(nbins + 1, dtype=np.int64)
    for i in range(n):
        b = min(max(int((x[i] - lo) * scale), 0), nbins - 1)
        ids[i] = b
        count[b + 1] += 1
    for b in range(nbins):
        if count[b + 1] > limit:
            return np.empty(0, dtype=np.int64), np.empty(0)
        count[b + 1] += count[b]
    out = np.empty(n, dtype=np.int64)
    xs = np.empty(n)
    for i in range(n):
        j = count[ids[i]]
        out[j] = i
        xs[j] = x[i]
        count[ids[i]] += 1
    for i in range(1, n):
        j = i
        k = out[i]
        v = xs[i]
        while j > 0 and xs[j - 1] > v:
            out[j] = out[j - 1]
            xs[j] = xs[j - 1]
            j -= 1
        out[j] = k
        xs[j] = v
    return out, xs


def sorted_pairs(x: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`sorted_order` and the sorted values (float64), the values moved with the order
    rather than gathered after it (the same order as :func:`sorted_order`).

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=5000)
    >>> o, xs = sorted_pairs(x)
    >>> bool(np.array_equal(o, sorted_order(x))), bool(np.array_equal(xs, x[o]))
    (True, True)
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.size < 2 or bool(np.all(x[1:] >= x[:-1])):
        return np.arange(x.size), x
    if x.size >= 4096 and np.isfinite(x).all():
        lo, hi = float(x.min()), float(x.max())
        out, xs = _bucket_pairs(x, lo, x.size / (hi - lo), x.size, 32)
        if out.size == x.size:
            return out, xs
    order = np.argsort(x)
    return order, x[order]


def argsort_spread(x: NDArray[np.float64]) -> NDArray[np.int64]:
    """The indices that sort ``x``: by buckets in O(n) where the values are spread (no bucket of
    ``n`` equal ones holds more than 32), else :func:`numpy.argsort`. The same sorted values
    either way (ties may come in another order).

    Examples
    --------
    >>> x = np.random.default_rng(0).uniform(size=1000)
    >>> bool(np.array_equal(x[argsort_spread(x)], np.sort(x)))
    True
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.size < 4096 or not np.isfinite(x).all():
        return np.argsort(x)
    lo, hi = float(x.min()), float(x.max())
    if not hi > lo:
        return np.arange(x.size)
    out = _bucket_pairs(x, lo, x.size / (hi - lo), x.size, 32)[0]
    return out if out.size == x.size else np.argsort(x)


def runs(ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The distinct values of the sorted ``ids`` and where each run starts (and the end).

    Examples
    --------
    >>> [a.tolist() for a in runs(np.array([3, 3, 5, 8, 8, 8]))]
    [[3, 5, 8], [0, 2, 3, 6]]
    """
    first = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
    return np.ascontiguousarray(ids[first]), np.append(first, ids.size).astype(np.int64)
