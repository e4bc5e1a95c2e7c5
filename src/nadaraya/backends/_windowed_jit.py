"""Compiled loops of the windowed backend: cells, exact window bounds and prefix-moment sums (numba).

Imported on first use by :mod:`nadaraya.backends.windowed`, never by ``import nadaraya``.
Everything here works on sorted 1-D keys split into *cells* of width ``h`` on the grid
``x0 + c h``. Each cell carries its own anchor (its centre), and the moments of the keys are
summed *within* a cell only (a prefix and a suffix restarted at every cell), so no sum ever
mixes keys far apart and nothing cancels when ``|x| >> h``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: route kinds: polynomial moments ``t^j``, or the cosine pair ``cos(pi t / 2), sin(pi t / 2)``
POLYNOMIAL = 0
COSINE = 1


@njit(cache=True)
def cells(xs: np.ndarray, x0: float, inv_h: float) -> np.ndarray:  # pragma: no cover - compiled
    """Cell of each sorted key: ``floor((x - x0) / h)``, non-decreasing."""
    out = np.empty(xs.shape[0], np.int64)
    for i in range(xs.shape[0]):
        out[i] = np.int64(np.floor((xs[i] - x0) * inv_h))
    return out


@njit(cache=True)
def sweep_bounds(qs, xs, qs64, xs64, inv_h, breaks, h):  # pragma: no cover - compiled
    """For *sorted* queries, the key indices ``[lo, L_{P-1}, .., L_1, iq, R_1, .., R_{P-1}, hi]``.

    ``lo``/``hi`` use exactly the reference's test ``|(q - x) * inv_h| <= 1`` in the data's
    dtype (``qs``, ``xs``, ``inv_h`` share it; the test is monotone in ``q`` and in ``x``), so a
    key at ``|u| = 1`` is in or out exactly as there. ``iq`` splits at the query (keys
    ``<= q`` on its left), the inner bounds at ``|u| = breaks[k]`` (where a piecewise kernel
    changes polynomial; it is continuous there, so float64 is exact enough). Every bound only
    moves forward as the queries grow: one merge-like sweep, O(n + m).
    """
    m = qs.shape[0]
    n = xs.shape[0]
    nbreak = breaks.shape[0]  # inner breaks, strictly between 0 and 1
    nb = 2 * nbreak + 3
    out = np.empty((m, nb), np.int64)
    ptr = np.zeros(nb, np.int64)
    for j in range(m):
        q = qs[j]
        q64 = qs64[j]
        i = ptr[0]
        while i < n and not (q - xs[i]) * inv_h <= 1.0:
            i += 1
        ptr[0] = i
        for p in range(1, nb - 1):
            i = max(ptr[p], ptr[p - 1])
            if p <= nbreak:  # left inner bound: first key >= q - b h
                target = q64 - breaks[nbreak - p] * h
                while i < n and xs64[i] < target:
                    i += 1
            else:  # iq (first key > q), then right inner bounds (first key > q + b h)
                target = q64 if p == nbreak + 1 else q64 + breaks[p - nbreak - 2] * h
                while i < n and xs64[i] <= target:
                    i += 1
            ptr[p] = i
        i = max(ptr[nb - 1], ptr[nbreak + 1])
        while i < n and not (q - xs[i]) * inv_h < -1.0:
            i += 1
        ptr[nb - 1] = i
        for k in range(nb):
            out[j, k] = ptr[k]
        for k in range(nb - 2, 0, -1):  # inner bounds within [lo, hi]
            if out[j, k] > out[j, k + 1]:
                out[j, k] = out[j, k + 1]
    return out


@njit(cache=True)
def tables(xs64, sv, kc, x0, h, inv_h, AB, kind):  # pragma: no cover - compiled
    """Moments of the keys summed within cells: ``AB[0]`` inclusive prefixes, ``AB[1]`` suffixes.

    ``AB[0, i, j, c] = sum of sv[i', c] g_j(t_i')`` over the keys ``i'`` of key ``i``'s cell
    with ``i' <= i``; ``AB[1]`` likewise over ``i' >= i``; ``t = (x - centre of the cell) / h``
    lies in ``[-1/2, 1/2]`` and ``g_j(t) = t^j`` (or the cosine pair). Also returns each key's
    cell start and end (exclusive) indices. ``AB`` is a scratch buffer of shape
    ``(2, >= n, J, ncol)``, filled in its first ``n`` rows.
    """
    n, ncol = sv.shape
    nfeat = AB.shape[2]
    G = np.empty((n, nfeat))
    seg_start = np.empty(n, np.int64)
    seg_end = np.empty(n, np.int64)
    for i in range(n):
        t = (xs64[i] - (x0 + (kc[i] + 0.5) * h)) * inv_h
        if kind == COSINE:
            G[i, 0] = np.cos(0.5 * np.pi * t)
            G[i, 1] = np.sin(0.5 * np.pi * t)
        else:
            g = 1.0
            for j in range(nfeat):
                G[i, j] = g
                g *= t
        first = i == 0 or kc[i] != kc[i - 1]
        seg_start[i] = i if first else seg_start[i - 1]
        for j in range(nfeat):
            for c in range(ncol):
                term = G[i, j] * sv[i, c]
                AB[0, i, j, c] = term if first else AB[0, i - 1, j, c] + term
    for i in range(n - 1, -1, -1):
        last = i == n - 1 or kc[i] != kc[i + 1]
        seg_end[i] = i + 1 if last else seg_end[i + 1]
        for j in range(nfeat):
            for c in range(ncol):
                term = G[i, j] * sv[i, c]
                AB[1, i, j, c] = term if last else AB[1, i + 1, j, c] + term
    return seg_start, seg_end


@njit(cache=True)
def window_sums(
    qs64, bounds, excl, k0, kc, seg_start, seg_end, AB, coef, kind, amp, x0, h, inv_h, cum_sw,
    direct_max, threshold, out, flag,
):  # pragma: no cover - compiled
    """Per query the sums ``sum_i K(u_i) sv[i, c]`` over its window, from the cell moments.

    Each part of the window between two consecutive ``bounds`` (one side of the query, one
    polynomial piece; split once more around the excluded key) is cut at cell boundaries;
    the keys of one cell are a suffix ``AB[1]`` or a prefix ``AB[0]`` of the cell, read
    without subtraction (only a range strictly inside one cell subtracts, and then the
    shorter of the two tails). The moments are weighted by ``a_j(Q)``,
    ``Q = (q - centre) / h``: a Horner evaluation of ``coef[r, j]`` (or the cosine pair).

    The tables hold the keys from ``k0`` on (``seg_start``, ``seg_end`` count from there).
    Writes ``out`` (zeroed by the caller) and ``flag``: ``flag[j]`` marks the queries left
    for an exact direct sum: windows of at most ``direct_max`` keys, and windows whose weight sum is below
    ``threshold * sum of sample weights`` (there the expansion could lose digits).
    """
    m, nb = bounds.shape
    nf = AB.shape[2]
    ncol = AB.shape[3]
    acoef = np.empty(nf)
    which = np.empty(2, np.int64)
    index = np.empty(2, np.int64)
    sign = np.empty(2)
    for j in range(m):
        lo = bounds[j, 0]
        hi = bounds[j, nb - 1]
        e = excl[j]
        inside = lo <= e < hi
        count = hi - lo - (1 if inside else 0)
        if count <= 0:
            continue
        if count <= direct_max:
            flag[j] = True
            continue
        q = qs64[j]
        for r in range(nb - 1):
            a = bounds[j, r]
            b = bounds[j, r + 1]
            split = a <= e < b  # leave-one-out: the parts [a, e) and (e, b)
            for part in range(2 if split else 1):
                pos = a if part == 0 else e + 1
                end = e if split and part == 0 else b
                while pos < end:
                    c = kc[pos]
                    rel = pos - k0
                    Q = (q - (x0 + (c + 0.5) * h)) * inv_h
                    if kind == COSINE:
                        acoef[0] = amp * np.cos(0.5 * np.pi * Q)
                        acoef[1] = amp * np.sin(0.5 * np.pi * Q)
                    else:
                        for jj in range(nf):
                            s = 0.0
                            for rr in range(nf - 1 - jj, -1, -1):  # Horner in Q
                                s = s * Q + coef[r, jj, rr]
                            acoef[jj] = s
                    s0 = seg_start[rel] + k0
                    s1 = seg_end[rel] + k0
                    stop = min(end, s1)
                    nt = 1
                    sign[0] = 1.0
                    if stop == s1:  # a suffix of the cell
                        which[0], index[0] = 1, pos
                    elif pos == s0:  # a prefix of the cell
                        which[0], index[0] = 0, stop - 1
                    elif stop - s0 <= s1 - pos:  # strictly inside: subtract the shorter tail
                        nt = 2
                        which[0], index[0], which[1], index[1], sign[1] = 0, stop - 1, 0, pos - 1, -1.0
                    else:
                        nt = 2
                        which[0], index[0], which[1], index[1], sign[1] = 1, pos, 1, stop, -1.0
                    for t in range(nt):
                        w_, i_ = which[t], index[t] - k0
                        for cc in range(ncol):
                            s = 0.0
                            for jj in range(nf):
                                s += acoef[jj] * AB[w_, i_, jj, cc]
                            out[j, cc] += sign[t] * s
                    pos = stop
        total = cum_sw[hi] - cum_sw[lo]
        if not out[j, 0] > threshold * total:
            flag[j] = True


@njit(cache=True)
def unsort_rows(out, perm):  # pragma: no cover - compiled
    """``res[perm[j]] = out[j]``: rows computed in sorted query order back to the caller's order."""
    res = np.empty_like(out)
    for j in range(out.shape[0]):
        for c in range(out.shape[1]):
            res[perm[j], c] = out[j, c]
    return res
