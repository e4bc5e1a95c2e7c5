"""Orders shared by the backends that sort: keys sorted once, left-out keys among them, counting sorts."""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = ["counting_order", "sorted_exclude", "sorted_order"]


def sorted_order(x: NDArray[np.float64]) -> NDArray[np.intp]:
    """The indices that sort ``x`` (no sort when it already is).

    Examples
    --------
    >>> sorted_order(np.array([3.0, 1.0, 2.0])).tolist(), sorted_order(np.arange(3.0)).tolist()
    ([1, 2, 0], [0, 1, 2])
    """
    if x.size < 2 or bool(np.all(x[1:] >= x[:-1])):
        return np.arange(x.size)
    return np.argsort(x)


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
