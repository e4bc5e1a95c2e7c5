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
def cell_starts(kc: np.ndarray, ncells: int) -> np.ndarray:  # pragma: no cover - compiled
    """``starts[c]``: index of the first key whose cell is ``>= c``, for ``c`` in ``0..ncells``."""
    starts = np.empty(ncells + 1, np.int64)
    i = 0
    n = kc.shape[0]
    for c in range(ncells + 1):
        while i < n and kc[i] < c:
            i += 1
        starts[c] = i
    return starts


@njit(cache=True)
def _first_cell_geq(kc, c):  # pragma: no cover - compiled
    lo, hi = 0, kc.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if kc[mid] >= c:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def window_bounds(
    qs, xs, qs64, xs64, inv_h, breaks, h, x0, kc, starts, ncells
):  # pragma: no cover - compiled
    """Per query the key indices ``[lo, L_{P-1}, .., L_1, iq, R_1, .., R_{P-1}, hi]``.

    ``lo``/``hi`` use exactly the reference's test ``|(q - x) * inv_h| <= 1`` in the data's
    dtype (``qs``, ``xs``, ``inv_h`` share it), so a key at ``|u| = 1`` is in or out exactly as
    there. ``iq`` splits at the query (keys ``<= q`` on the left), the inner bounds split at
    ``|u| = breaks[k]`` (where a piecewise kernel changes polynomial; it is continuous there).
    Each search only looks at the keys of cells ``c - 2 .. c + 2`` around the query's cell.
    """
    m = qs.shape[0]
    nbreak = breaks.shape[0]  # inner breaks, strictly between 0 and 1
    nb = 2 * nbreak + 3
    out = np.empty((m, nb), np.int64)
    inv_h64 = 1.0 / h
    dense = starts.shape[0] > 0
    for j in range(m):
        q = qs[j]
        q64 = qs64[j]
        cf = np.floor((q64 - x0) * inv_h64)
        cf = min(max(cf, -4.0), ncells + 4.0)
        c = np.int64(cf)
        if dense:
            a = starts[min(max(c - 2, 0), ncells)]
            b = starts[min(max(c + 3, 0), ncells)]
        else:
            a = _first_cell_geq(kc, c - 2)
            b = _first_cell_geq(kc, c + 3)
        # lo: first key with (q - x) * inv_h <= 1
        lo, hi_ = a, b
        while lo < hi_:
            mid = (lo + hi_) >> 1
            if (q - xs[mid]) * inv_h <= 1.0:
                hi_ = mid
            else:
                lo = mid + 1
        out[j, 0] = lo
        # hi: first key with (q - x) * inv_h < -1
        lo2, hi2 = a, b
        while lo2 < hi2:
            mid = (lo2 + hi2) >> 1
            if (q - xs[mid]) * inv_h < -1.0:
                hi2 = mid
            else:
                lo2 = mid + 1
        out[j, nb - 1] = lo2
        # inner bounds, left (first key >= q - b h, outermost first), iq (first key > q), right
        # (first key > q + b h); the kernel is continuous there, so float64 is exact enough
        for p in range(1, nb - 1):
            if p <= nbreak:
                target = q64 - breaks[nbreak - p] * h
            elif p == nbreak + 1:
                target = q64
            else:
                target = q64 + breaks[p - nbreak - 2] * h
            left = p <= nbreak
            s0, s1 = a, b
            while s0 < s1:
                mid = (s0 + s1) >> 1
                beyond = xs64[mid] >= target if left else xs64[mid] > target
                if beyond:
                    s1 = mid
                else:
                    s0 = mid + 1
            out[j, p] = s0
        for k in range(1, nb):  # non-decreasing, all within [lo, hi]
            if out[j, k] < out[j, k - 1]:
                out[j, k] = out[j, k - 1]
        for k in range(nb - 2, -1, -1):
            if out[j, k] > out[j, k + 1]:
                out[j, k] = out[j, k + 1]
    return out


@njit(cache=True)
def _features(g, t, kind):  # pragma: no cover - compiled
    if kind == COSINE:
        g[0] = np.cos(0.5 * np.pi * t)
        g[1] = np.sin(0.5 * np.pi * t)
    else:
        p = 1.0
        for j in range(g.shape[0]):
            g[j] = p
            p *= t


@njit(cache=True)
def tables(xs64, sv, kc, x0, h, inv_h, nfeat, kind):  # pragma: no cover - compiled
    """Moments of the keys summed within cells: inclusive prefix ``A`` and suffix ``B``.

    ``A[i, j, c] = sum of sv[i', c] g_j(t_i')`` over the keys ``i'`` of key ``i``'s cell with
    ``i' <= i``; ``B`` likewise over ``i' >= i``. ``t = (x - centre of the cell) / h`` lies in
    ``[-1/2, 1/2]``. Also returns each key's cell start and end (exclusive) indices.
    """
    n, ncol = sv.shape
    A = np.empty((n, nfeat, ncol))
    B = np.empty((n, nfeat, ncol))
    G = np.empty((n, nfeat))
    seg_start = np.empty(n, np.int64)
    seg_end = np.empty(n, np.int64)
    for i in range(n):
        centre = x0 + (kc[i] + 0.5) * h
        _features(G[i], (xs64[i] - centre) * inv_h, kind)
        seg_start[i] = i if i == 0 or kc[i] != kc[i - 1] else seg_start[i - 1]
        for j in range(nfeat):
            for c in range(ncol):
                term = G[i, j] * sv[i, c]
                A[i, j, c] = term if seg_start[i] == i else A[i - 1, j, c] + term
    for i in range(n - 1, -1, -1):
        last = i == n - 1 or kc[i] != kc[i + 1]
        seg_end[i] = i + 1 if last else seg_end[i + 1]
        for j in range(nfeat):
            for c in range(ncol):
                term = G[i, j] * sv[i, c]
                B[i, j, c] = term if last else B[i + 1, j, c] + term
    return A, B, seg_start, seg_end


@njit(cache=True)
def _coefficients(acoef, coef, rng, Q, kind, amp):  # pragma: no cover - compiled
    """``acoef[j]``: the weight of moment ``j`` for a cell at scaled offset ``Q = (q - centre) / h``."""
    if kind == COSINE:
        acoef[0] = amp * np.cos(0.5 * np.pi * Q)
        acoef[1] = amp * np.sin(0.5 * np.pi * Q)
        return
    nf = acoef.shape[0]
    for j in range(nf):
        s = 0.0
        for r in range(nf - 1 - j, -1, -1):  # Horner in Q
            s = s * Q + coef[rng, j, r]
        acoef[j] = s


@njit(cache=True)
def _add(out, T, i, sign, acoef):  # pragma: no cover - compiled
    for c in range(out.shape[0]):
        s = 0.0
        for j in range(acoef.shape[0]):
            s += acoef[j] * T[i, j, c]
        out[c] += sign * s


@njit(cache=True)
def _add_range(out, a, b, rng, q, kc, seg_start, seg_end, A, B, coef, kind, amp, x0, h, inv_h, acoef):
    # pragma: no cover - compiled
    """Add the keys ``[a, b)`` (all on one side of the query, one polynomial piece)."""
    pos = a
    while pos < b:
        c = kc[pos]
        centre = x0 + (c + 0.5) * h
        _coefficients(acoef, coef, rng, (q - centre) * inv_h, kind, amp)
        s0 = seg_start[pos]
        s1 = seg_end[pos]
        stop = min(b, s1)
        if stop == s1:
            _add(out, B, pos, 1.0, acoef)  # suffix of the cell: no subtraction
        elif pos == s0:
            _add(out, A, stop - 1, 1.0, acoef)  # prefix of the cell: no subtraction
        elif stop - s0 <= s1 - pos:  # inside one cell: subtract the smaller of the two tails
            _add(out, A, stop - 1, 1.0, acoef)
            _add(out, A, pos - 1, -1.0, acoef)
        else:
            _add(out, B, pos, 1.0, acoef)
            _add(out, B, stop, -1.0, acoef)
        pos = stop


@njit(cache=True)
def window_sums(
    qs64, bounds, excl, kc, seg_start, seg_end, A, B, coef, kind, amp, x0, h, inv_h, cum_sw,
    direct_max, threshold,
):  # pragma: no cover - compiled
    """Per query the sums ``sum_i K(u_i) sv[i, c]`` over its window, from the cell moments.

    Returns ``(out, flag)``: ``flag[j]`` marks the queries left for an exact direct sum:
    windows of at most ``direct_max`` keys, and windows whose weight sum is below
    ``threshold * sum of sample weights`` (there the expansion could lose digits).
    """
    m, nb = bounds.shape
    ncol = A.shape[2]
    out = np.zeros((m, ncol))
    flag = np.zeros(m, np.bool_)
    acoef = np.empty(A.shape[1])
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
        row = out[j]
        for r in range(nb - 1):
            a = bounds[j, r]
            b = bounds[j, r + 1]
            if a >= b:
                continue
            if a <= e < b:  # leave-one-out: split the range around the excluded key
                _add_range(row, a, e, r, q, kc, seg_start, seg_end, A, B, coef, kind, amp, x0, h, inv_h,
                           acoef)
                _add_range(row, e + 1, b, r, q, kc, seg_start, seg_end, A, B, coef, kind, amp, x0, h,
                           inv_h, acoef)
            else:
                _add_range(row, a, b, r, q, kc, seg_start, seg_end, A, B, coef, kind, amp, x0, h, inv_h,
                           acoef)
        total = cum_sw[hi] - cum_sw[lo]
        if not row[0] > threshold * total:
            flag[j] = True
    return out, flag
