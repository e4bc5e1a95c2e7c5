"""Nearest-neighbour bandwidths' compiled loops (numba): k-th distances on sorted keys, the CV walk.

:func:`kth_radius` is R np's rule (``kth_observation_radius_sorted_generalized`` in np's
``statmods.c``): the ``k``-th smallest of ``|q - x_i|`` over the sorted keys, duplicates counted
one by one, found by bisecting how many of the ``k`` come from the left of ``q``; a radius of 0
(duplicates fill ``k``) becomes the distance to the nearest key that differs from ``q``.

:func:`cv_walk` scores the leave-one-out fits of every ``k`` at once in one dimension for a
kernel that is a polynomial in ``|u|`` on ``[-1, 1]``: from each point it walks outwards over the
other points in order of distance, one tie group at a time, keeping power sums ``sum s d^p``,
``sum s d^p (x - x_i)``, ``sum s d^p (x - x_i)^2``, ``sum s d^p y`` and ``sum s d^p (x - x_i) y``
of the points closer than the group (``d = |x - x_i|``). The ``k`` whose ``k``-th distance is the
group's ``h`` weight those points by ``K(d / h) = sum_p c_p d^p / h^p`` and the group itself by
``K(1)`` (exact: 0 for most compact kernels), so each group costs O(powers) and a point's walk
O(n): O(n^2) for every ``k`` from 1 to ``n - 1``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: a local linear system whose 2-norm condition number passes this falls back to degree 0
COND_MAX = 1e10


@njit(cache=True)
def _bounds(s, q):  # pragma: no cover - compiled
    """``(lower, upper)``: the first sorted key >= q and the first > q."""
    n = s.shape[0]
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if s[mid] < q:
            lo = mid + 1
        else:
            hi = mid
    a = lo
    hi = n
    while lo < hi:
        mid = (lo + hi) // 2
        if not (q < s[mid]):
            lo = mid + 1
        else:
            hi = mid
    return a, lo


@njit(cache=True)
def _kth(s, split, q, k):  # pragma: no cover - compiled
    """The k-th smallest distance from ``q`` to the sorted keys ``s`` (``split``: the first key
    >= q), and +1 where it lies left of ``q`` (``q - x``), -1 right; np's bisection."""
    n = s.shape[0]
    left_n, right_n = split, n - split
    lo = k - right_n if k > right_n else 0
    hi = k if k < left_n else left_n
    while lo <= hi:
        tl = lo + (hi - lo) // 2
        tr = k - tl
        lb = q - s[split - tl] if tl > 0 else -np.inf
        la = q - s[split - 1 - tl] if tl < left_n else np.inf
        rb = s[split + tr - 1] - q if tr > 0 else -np.inf
        ra = s[split + tr] - q if tr < right_n else np.inf
        if lb > ra:
            hi = tl - 1
        elif rb > la:
            lo = tl + 1
        else:
            if lb > rb:
                return lb, 1.0
            return rb, -1.0
    return np.nan, 0.0


@njit(cache=True)
def kth_radius(s, q, k, out, side):  # pragma: no cover - compiled
    """np's generalized k-th nearest distance of each query ``q[j]`` to the sorted keys ``s``,
    into ``out[j]`` (``side[j]``: d radius / d q), with np's zero rule; ``k[j]`` per query."""
    n = s.shape[0]
    for j in range(q.shape[0]):
        v = q[j]
        a, b = _bounds(s, v)
        kk = min(max(k[j], 1), n)
        r, sg = _kth(s, a, v, kk)
        if not (r > 0.0):  # duplicates fill k: the nearest key that differs from q
            dl = v - s[a - 1] if a > 0 else np.inf
            dr = s[b] - v if b < n else np.inf
            if dl <= dr:
                r, sg = dl, 1.0
            else:
                r, sg = dr, -1.0
        out[j] = r
        side[j] = sg


@njit(cache=True)
def _fit_at(acc, grp, h, coef, powers, k1, degree, first_y, first_w):  # pragma: no cover - compiled
    """The local fit at offset 0 from the sums ``acc`` of the points closer than ``h`` and the
    sums ``grp`` of the group at distance ``h`` (weight ``K(1)``): degree 0 or 1, a singular
    linear system falls back to degree 0, an empty window to the nearest points' mean."""
    S0 = k1 * grp[0]
    S1 = k1 * grp[1]
    S2 = k1 * grp[2]
    T0 = k1 * grp[3]
    T1 = k1 * grp[4]
    ih = 1.0 / h
    ipw = 1.0
    p = 0
    for t in range(powers.shape[0]):
        while p < powers[t]:  # h^-p by running products (powers increase)
            ipw *= ih
            p += 1
        f = coef[t] * ipw
        S0 += f * acc[t, 0]
        S1 += f * acc[t, 1]
        S2 += f * acc[t, 2]
        T0 += f * acc[t, 3]
        T1 += f * acc[t, 4]
    if not (S0 > 0.0):
        return first_y / first_w if first_w > 0 else np.nan
    if degree == 1:
        a = S0
        b = S1 / h
        c = S2 / (h * h)
        mid = 0.5 * (a + c)
        rad = np.sqrt(0.25 * (a - c) * (a - c) + b * b)
        lmin = mid - rad
        if lmin > 0 and (mid + rad) / lmin < COND_MAX:
            det = a * c - b * b
            return (c * T0 - b * T1 / h) / det
    return T0 / S0


@njit(cache=True)
def cv_walk(x, y, s, coef, powers, k1, degree, score):  # pragma: no cover - compiled
    """``score[k - 1]`` += ``s_i (y_i - f_ik)^2`` over the sorted points, ``f_ik`` the leave-one-out
    fit at ``x[i]`` whose bandwidth is the distance to its ``k``-th nearest other point (np's
    rule), for every ``k`` from 1 to ``n - 1``."""
    n = x.shape[0]
    P = powers.shape[0]
    acc = np.zeros((P, 5))
    grp = np.zeros(5)
    for i in range(n):
        acc[:, :] = 0.0
        xi = x[i]
        lo, hi = i - 1, i + 1
        count = 0
        pending = 0  # ks whose k-th distance is 0: they take the first positive group's fit
        first_y = 0.0
        first_w = 0.0
        first = True
        while lo >= 0 or hi < n:
            dl = xi - x[lo] if lo >= 0 else np.inf
            dr = x[hi] - xi if hi < n else np.inf
            d = dl if dl <= dr else dr
            grp[:] = 0.0
            c0 = count
            gy = 0.0
            gw = 0.0
            while lo >= 0 and xi - x[lo] == d:
                j = lo
                u = x[j] - xi
                grp[0] += s[j]
                grp[1] += s[j] * u
                grp[2] += s[j] * u * u
                grp[3] += s[j] * y[j]
                grp[4] += s[j] * u * y[j]
                gy += s[j] * y[j]
                gw += s[j]
                lo -= 1
                count += 1
            while hi < n and x[hi] - xi == d:
                j = hi
                u = x[j] - xi
                grp[0] += s[j]
                grp[1] += s[j] * u
                grp[2] += s[j] * u * u
                grp[3] += s[j] * y[j]
                grp[4] += s[j] * u * y[j]
                gy += s[j] * y[j]
                gw += s[j]
                hi += 1
                count += 1
            if first:  # the nearest other points: the fill of an empty window
                first_y, first_w = gy, gw
                if gw == 0.0:
                    first_y, first_w = gy, 0.0
                first = False
            if d == 0.0:
                pending = count
            else:
                f = _fit_at(acc, grp, d, coef, powers, k1, degree, first_y, first_w)
                e = s[i] * (y[i] - f) ** 2
                for kk in range(0 if pending > 0 else c0, count):
                    score[kk] += e
                pending = 0
            w = 1.0
            p = 0
            for t in range(P):  # the group joins the points closer than the next one
                while p < powers[t]:
                    w *= d
                    p += 1
                acc[t, 0] += w * grp[0]
                acc[t, 1] += w * grp[1]
                acc[t, 2] += w * grp[2]
                acc[t, 3] += w * grp[3]
                acc[t, 4] += w * grp[4]
        if pending > 0:  # every other point at x[i]: no positive distance
            f = first_y / first_w if first_w > 0 else np.nan
            e = s[i] * (y[i] - f) ** 2
            for kk in range(pending):
                score[kk] += e
