"""LOWESS's compiled loops (numba): nearest-neighbour windows, sliding tricube moments, exact sums.

Every fit is the weighted local linear fit of statsmodels' ``lowess`` at a query ``q``: the
window is the ``k`` consecutive sorted keys ``[l, l + k)`` that statsmodels' slide rule picks
(move right while ``q > (x[l] + x[l + k]) / 2``), the radius ``h = max(q - x[l], x[l + k - 1] -
q)``, the weight of key ``j`` the tricube ``(1 - |u|^3)^3`` of ``u = (x_j - q) / h`` times its
robustness weight ``r_j``, and a fit needs at least two weights above ``1e-12`` (checked here
exactly, key by key, from the query outwards, skipping keys whose ``r_j`` is 0).

**Sliding moments.** On each side of ``q`` the tricube is one polynomial in ``u``:
``(1 + u^3)^3`` left of it, ``(1 - u^3)^3`` right of it, so the sums the fit needs (``sum w u^a``,
``a <= 2``; ``sum w u^a y``, ``a <= 1``) are combinations of ``sum r u^i`` (``i <= 11``) and
``sum r y u^i`` (``i <= 10``) over the two halves ``[l, m)`` and ``[m, l + k)`` of the window.
The sorted queries are cut into *chunks* whose windows' union ``[X0, X1]`` lies within
:data:`RHO` radii of every query of the chunk. Per chunk, with ``t = (x - c) / H`` about the
union's centre ``c`` and half-width ``H`` (``|t| <= 1``), three prefix sums of ``r t^j`` and
``r y t^j`` (plain sums over blocks of 16 keys, folded into compensated (Kahan) totals) walk
forward to each query's ``l``, ``m`` and ``l + k``; the two halves are differences of them,
taken to the query's ``u = alpha + beta t`` by the binomial shift (``alpha = (c - q) / h``,
``beta = H / h``, ``|alpha| + beta <= RHO``; :mod:`._lowess_shift`). Cost per chunk: one window
plus the chunk's own keys, so O(n + m) per pass for the whole sweep and O(1) per query (the
windows and chunks are found once per call, by forward pointers over the sorted keys).

**Accuracy.** Moment ``j`` of a prefix is off by at most ``(20 + j) eps sum r |t|^j`` over the
keys it walked (``eps`` the float64 unit; times ``max|y|`` for the ``y`` moments), the shift
adds ``32 eps`` of the window's own sums, and the shift's weights ``|C(i, j) alpha^(i - j)
beta^j|`` carry the bounds to the query's ``u`` (first with every ``j``'s bound at ``j = 0``'s,
then, where that is too loose, term by term). The bounds are carried through the fit's formula
(first order), and a query whose fit could be off by
more than :data:`FIT_TOL` of ``max|y|`` -- a small weight sum against the window's ``r``, a nearly
singular spread, a variance near statsmodels' floor ``1e-12`` -- is taken from the blocks'
moments of :mod:`._lowess_blocks` (windows of at least four blocks) where their bound allows it
(the heavy tails' fits), else summed directly. So is every
query of a chunk of fewer than :data:`MIN_CHUNK` queries and of windows of at most
:data:`DIRECT_K` keys. The direct sum is statsmodels' formula (the weighted mean of ``x``, then
the weighted spread and covariance about it, the spread floored at 1e-12), in two passes, with
``x`` relative to the query: statsmodels' ``sum w x`` about 0 loses ``log10(|x| / h)``
digits (measured: 1e-8 of ``max|y|`` for ``x`` in ``1e6 + [0, 1]``, where these sums agree
with a long-double reference to 1e-12).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from nadaraya._support.jit import run_ranges, threads_for
from nadaraya.local._lowess_blocks import BLOCK, SUPER, block_fit, block_moments
from nadaraya.local._lowess_shift import tricube_bounds, tricube_sums

__all__ = ["DIRECT_K", "FIT_TOL", "MIN_CHUNK", "RHO", "assemble", "fit_points", "fits", "neighbours", "plan",
           "plan_windows", "regressions", "windows"]

#: the chunks' bound on ``|u|`` over their windows' union (the shift's magnification is RHO^11)
RHO = 1.25
#: windows of at most this many keys are summed directly (the shift costs about as much)
DIRECT_K = 48
#: chunks of fewer queries are summed directly (a chunk costs about one window of walking)
MIN_CHUNK = 6
#: a fast fit whose rounding bound exceeds this part of ``max|y|`` is taken from the blocks
#: (:mod:`._lowess_blocks`) where their bound allows, else summed directly
FIT_TOL = 3e-11
_EPS = 2.0**-52
_NR = 12  # powers of t in the r moments (0 .. 11)
_NY = 11  # powers of t in the r y moments (0 .. 10)
_BLOCK = 4.0  # keys summed plainly before a compensated (Kahan) step


@njit(cache=True, error_model="numpy")
def windows(x, q, k, lo, mid, rad):  # pragma: no cover - compiled
    """For sorted queries ``q``: window starts ``lo`` (statsmodels' slide rule), the split ``mid``
    (first key of the window at or right of the query) and the radius ``rad``."""
    n = x.shape[0]
    left = 0
    first = 0  # the first key >= the query, over all keys
    for j in range(q.shape[0]):
        v = q[j]
        while left + k < n and v > (x[left] + x[left + k]) / 2.0:
            left += 1
        while first < n and x[first] < v:
            first += 1
        lo[j] = left
        mid[j] = min(max(first, left), left + k)
        rad[j] = max(v - x[left], x[left + k - 1] - v)


@njit(cache=True, error_model="numpy")
def neighbours(r):  # pragma: no cover - compiled
    """``nxt[j]``: the first key at or after ``j`` with ``r > 0`` (``n`` if none; ``n + 1``
    entries), ``prv[j]``: the last at or before ``j`` (-1 if none)."""
    n = r.shape[0]
    nxt = np.empty(n + 1, np.int64)
    prv = np.empty(n, np.int64)
    nxt[n] = n
    for j in range(n - 1, -1, -1):
        nxt[j] = j if r[j] > 0 else nxt[j + 1]
    last = -1
    for j in range(n):
        if r[j] > 0:
            last = j
        prv[j] = last
    return nxt, prv


@njit(cache=True, error_model="numpy")
def fit_points(xv, delta):  # pragma: no cover - compiled
    """The indices of ``xv`` (sorted) where statsmodels' loop runs a regression for ``delta``."""
    out_n = xv.shape[0]
    idx = np.empty(out_n, np.int64)
    c = 0
    i = 0
    while True:
        idx[c] = i
        c += 1
        last = i
        kk = last
        cut = xv[last] + delta
        t = last + 1
        while t < out_n:
            kk = t
            if xv[t] > cut:
                break
            if xv[t] == xv[last]:
                last = t
            t += 1
        i = max(kk - 1, last + 1)
        if last >= out_n - 1:
            break
    return idx[:c]


@njit(cache=True, error_model="numpy")
def assemble(xv, delta, val, bad, fallback):  # pragma: no cover - compiled
    """statsmodels' loop over ``xv`` with the regressions' values ``val`` (in the order of
    :func:`fit_points`): a failed regression (``bad``) takes ``fallback[i]``; points skipped for
    ``delta`` are interpolated, ties copied."""
    out_n = xv.shape[0]
    y_fit = np.zeros(out_n)
    i = 0
    last = -1
    c = 0
    while True:
        y_fit[i] = fallback[i] if bad[c] else val[c]
        c += 1
        if last < i - 1:
            denom = xv[i] - xv[last]
            for j in range(last + 1, i):
                a = (xv[j] - xv[last]) / denom
                y_fit[j] = a * y_fit[i] + (1.0 - a) * y_fit[last]
        last = i
        kk = last
        cut = xv[last] + delta
        t = last + 1
        while t < out_n:
            kk = t
            if xv[t] > cut:
                break
            if xv[t] == xv[last]:
                y_fit[t] = y_fit[last]
                last = t
            t += 1
        i = max(kk - 1, last + 1)
        if last >= out_n - 1:
            break
    return y_fit


@njit(cache=True, error_model="numpy")
def plan(x, q, lo, rad, k, rho):  # pragma: no cover - compiled
    """Chunk starts over the sorted queries (last entry ``m``): a chunk grows while its
    windows' union stays within ``rho`` radii of each of its queries."""
    m = q.shape[0]
    starts = np.empty(m + 1, np.int64)
    nc = 0
    a = 0
    while a < m:
        x0 = x[lo[a]]
        g = q[a] + rho * rad[a]
        b = a + 1
        while b < m:
            x1 = x[lo[b] + k - 1]
            hb = rad[b]
            if not (x1 <= g and q[b] - x0 <= rho * hb and x1 - q[b] <= rho * hb):
                break
            g = min(g, q[b] + rho * hb)
            b += 1
        starts[nc] = a
        nc += 1
        a = b
    starts[nc] = m
    return starts[: nc + 1]


@njit(cache=True, error_model="numpy", inline="always")
def _tricube(d):  # pragma: no cover - compiled
    d3 = d * d * d
    t = 1.0 - d3
    return t * t * t


@njit(cache=True, error_model="numpy", inline="always")
def _counts(x, r, j, v, h):  # pragma: no cover - compiled
    """Whether key ``j``'s weight is above 1e-12 as statsmodels computes it; 2 when its tricube
    alone is not (so no key farther out on that side is either). Within ``0.9 h`` the tricube is
    above 0.0199, so ``r > 1e-10`` decides without the division."""
    dist = abs(x[j] - v)
    if dist <= 0.9 * h:
        return 1 if r[j] > 1e-10 or _tricube(dist / h) * r[j] > 1e-12 else 0
    t = _tricube(dist / h)
    if not t > 1e-12:
        return 2
    return 1 if t * r[j] > 1e-12 else 0


@njit(cache=True, error_model="numpy")
def _enough(x, r, nxt, prv, v, l0, m0, r0, h):  # pragma: no cover - compiled
    """Whether at least two keys of the window carry a weight above 1e-12 (statsmodels' test),
    scanning outwards from the query over keys with ``r > 0`` until two are found. A zero
    radius makes every weight NaN in statsmodels (0 / 0): none counts."""
    if not h > 0.0:
        return False
    found = 0
    j = nxt[m0] if m0 < r0 else r0
    while j < r0:
        c = _counts(x, r, j, v, h)
        if c == 2:
            break
        found += c
        if found >= 2:
            return True
        j = nxt[j + 1]
    j = prv[m0 - 1] if m0 > l0 else -1
    while j >= l0:
        c = _counts(x, r, j, v, h)
        if c == 2:
            break
        found += c
        if found >= 2:
            return True
        j = prv[j - 1] if j > 0 else -1
    return False


@njit(cache=True, error_model="numpy")
def _direct(x, y, r, v, l0, r0, h, buf):  # pragma: no cover - compiled
    """statsmodels' regression at ``v`` over the window ``[l0, r0)``: the weighted mean of ``x``,
    then the spread and covariance about it (floored at 1e-12 as there), with ``x`` taken
    relative to ``v`` (statsmodels' ``sum w x`` loses digits when ``|x| >> h``); two passes."""
    sw = 0.0
    s1 = 0.0
    for j in range(l0, r0):
        w = _tricube(abs(x[j] - v) / h) * r[j]
        buf[j - l0] = w
        sw += w
        s1 += w * (x[j] - v)
    xbar = s1 / sw
    var = 0.0
    cov = 0.0
    sy = 0.0
    for j in range(l0, r0):
        w = buf[j - l0]
        d = (x[j] - v) - xbar
        var += w * d * d
        cov += w * d * y[j]
        sy += w * y[j]
    var = max(var / sw, 1e-12)
    return sy / sw + (0.0 - xbar) * (cov / sw) / var


@njit(cache=True, error_model="numpy", inline="always")
def _walk(acc, pos, to, x, y, r, c, ih):  # pragma: no cover - compiled
    """Advance the prefix sums of ``r t^j`` and ``r y t^j`` in ``acc`` (rows: Kahan total, its
    compensation, a plain partial sum of at most :data:`_BLOCK` keys, folded into the total when
    full; the keys in the partial sum in ``acc[3, 0]``) to key ``to``."""
    cnt = acc[3, 0]
    for j in range(pos, to):
        t = (x[j] - c) * ih
        p = r[j]
        py = p * y[j]
        for e in range(_NR):
            acc[2, e] += p
            p *= t
        for e in range(_NY):
            acc[2, _NR + e] += py
            py *= t
        cnt += 1.0
        if cnt == _BLOCK:
            for e in range(_NR + _NY):
                z = acc[2, e] - acc[1, e]
                s = acc[0, e] + z
                acc[1, e] = (s - acc[0, e]) - z
                acc[0, e] = s
                acc[2, e] = 0.0
            cnt = 0.0
    acc[3, 0] = cnt
    return to


@njit(cache=True, error_model="numpy", inline="always")
def _checked(S0, S1, S2, T0, T1, e0, e1, e2, ymax, h, tol):  # pragma: no cover - compiled
    """The fit ``ybar - xbar slope`` from the window's sums (in units of ``h``), or NaN where
    the sums' error bounds ``e0, e1, e2`` (of ``S0, S1, S2``; ``ymax`` times them for ``T0,
    T1``), carried through to first order, allow an error above ``tol`` of ``ymax``, or
    the spread of ``x`` is near statsmodels' floor 1e-12."""
    if not (64.0 * e0 + 1e-300) < S0:  # NaN too
        return np.nan
    ybar = T0 / S0
    xbar = S1 / S0
    m2 = S2 / S0
    var = m2 - xbar * xbar
    cov = T1 / S0 - xbar * ybar
    dy = (e0 * ymax + abs(ybar) * e0) / S0
    dx = (e1 + abs(xbar) * e0) / S0
    dv = (e2 + m2 * e0) / S0 + 2.0 * abs(xbar) * dx
    dc = (e1 * ymax + abs(T1 / S0) * e0) / S0 + abs(xbar) * dy + abs(ybar) * dx
    if not (var > 8.0 * dv and var * h * h > 2e-12):
        return np.nan
    slope = cov / var
    ds = (dc + abs(slope) * dv) / var
    if not dy + abs(xbar) * ds + abs(slope) * dx <= tol * ymax:
        return np.nan
    return ybar - xbar * slope


@njit(cache=True, error_model="numpy")
def _fast_chunk(x, y, r, q, lo, mid, rad, k, a, b, ymax, tol, out, state, sums):  # pragma: no cover
    """The fits of queries ``a:b`` (one chunk) by the sliding moments; a query whose rounding
    bound is too loose keeps ``state`` 3 (summed directly by the caller); ``sums[j]`` the sums
    ``S0, S1, S2, T0, T1`` of an accepted fit."""
    x0 = x[lo[a]]
    x1 = x[lo[b - 1] + k - 1]
    c = 0.5 * (x0 + x1)
    H = 0.5 * (x1 - x0)
    if not H > 0.0:
        for j in range(a, b):
            if state[j] == 0:
                state[j] = 3
        return
    ih = 1.0 / H
    ne = _NR + _NY
    acl = np.zeros((4, ne))
    acm = np.zeros((4, ne))
    acr = np.zeros((4, ne))
    P = np.empty(ne)
    Q = np.empty(ne)
    bp = np.empty(_NR)
    g = np.empty(_NR)
    win = np.empty(_NR)
    base = lo[a]
    pl = base
    pm = base
    pr = base
    for j in range(a, b):
        if state[j] != 0:
            continue
        l0 = lo[j]
        m0 = mid[j]
        pl = _walk(acl, pl, l0, x, y, r, c, ih)
        pm = _walk(acm, pm, m0, x, y, r, c, ih)
        if pr < pm:
            acr[:] = acm
            pr = pm
        pr = _walk(acr, pr, l0 + k, x, y, r, c, ih)
        h = rad[j]
        alpha = (c - q[j]) / h
        beta = H / h
        bp[0] = 1.0
        for e in range(1, _NR):
            bp[e] = bp[e - 1] * beta
        for e in range(ne):  # the window's halves, as P = L + R and Q = L - R, times beta^j
            vl = (acl[0, e] - acl[1, e]) + acl[2, e]
            vm = (acm[0, e] - acm[1, e]) + acm[2, e]
            vr = (acr[0, e] - acr[1, e]) + acr[2, e]
            f = bp[e] if e < _NR else bp[e - _NR]
            if e < _NR:
                win[e] = vr - vl
            P[e] = (vr - vl) * f
            Q[e] = ((vm - vl) - (vr - vm)) * f
        S0, S1, S2, T0, T1 = tricube_sums(P, Q, alpha)
        # the rounding bound, carried through the fit to first order. Moment j of a prefix is off
        # by at most (4 + B + j) eps sum r |t|^j over the keys it walked (B = _BLOCK keys summed
        # plainly, then Kahan; the powers' own rounding; |t|^j <= t^(j - 1) for odd j), times 4
        # for P and Q, plus 32 eps of the window's own sum for the shift; then through the shift's
        # |C(i, j) alpha^(i-j) beta^j|. First the bound with every j's error at j = 0's (the
        # largest) and sum_j |C(i, j) alpha^(i-j) beta^j| = rho^i; where it is too loose, the
        # bound term by term.
        walked = abs(acr[0, 0]) + abs(acr[2, 0])
        gmax = (4.0 * (4.0 + _BLOCK + _NR) * walked + 32.0 * abs(win[0])) * _EPS
        rho = abs(alpha) + beta
        r3 = rho * rho * rho
        e0 = gmax * (1.0 + r3 * (3.0 + r3 * (3.0 + r3)))
        fit = _checked(S0, S1, S2, T0, T1, e0, e0 * rho, e0 * rho * rho, ymax, h, tol)
        if fit != fit:
            for e in range(_NR):
                ev = e - (e & 1)
                walked = abs(acr[0, ev]) + abs(acr[2, ev])
                g[e] = (4.0 * (4.0 + _BLOCK + e) * walked + 32.0 * abs(win[ev])) * _EPS * bp[e]
            e0, e1, e2 = tricube_bounds(g, abs(alpha))
            fit = _checked(S0, S1, S2, T0, T1, e0, e1, e2, ymax, h, tol)
        if fit != fit:
            state[j] = 3
        else:
            out[j] = fit
            sums[j, 0], sums[j, 1], sums[j, 2], sums[j, 3], sums[j, 4] = S0, S1, S2, T0, T1


@njit(cache=True, error_model="numpy", nogil=True)
def fits(x, y, r, nxt, prv, q, lo, mid, rad, k, starts, ymax, tol, bc, bH, bM, bN, sc, sH, sM, sN, ca, cb,
         out, state, sums):  # pragma: no cover
    """Chunks ``ca:cb``: each query's fit in ``out`` and ``state`` (0 fast, 1 fewer than two
    weights, 2 summed directly, 4 from the blocks' moments ``bc, bH, bM, bN`` and the
    superblocks' ``sc, sH, sM, sN``); a fit from moments or blocks is within ``tol`` of ``ymax``
    and keeps its sums in ``sums[j]``."""
    buf = np.empty(k)
    for ch in range(ca, cb):
        a = starts[ch]
        b = starts[ch + 1]
        for j in range(a, b):
            h = rad[j]
            state[j] = 0 if _enough(x, r, nxt, prv, q[j], lo[j], mid[j], lo[j] + k, h) else 1
        if k > DIRECT_K and b - a >= MIN_CHUNK:
            _fast_chunk(x, y, r, q, lo, mid, rad, k, a, b, ymax, tol, out, state, sums)
        else:
            for j in range(a, b):
                if state[j] == 0:
                    state[j] = 3
        for j in range(a, b):
            if state[j] == 3 and k >= 4 * BLOCK and bc.shape[0] > 0:
                S0, S1, S2, T0, T1, e0, e1, e2 = block_fit(x, y, r, q[j], lo[j], mid[j], lo[j] + k, rad[j],
                                                           bc, bH, bM, bN, sc, sH, sM, sN)
                fit = _checked(S0, S1, S2, T0, T1, e0, e1, e2, ymax, rad[j], tol)
                if fit == fit:
                    out[j] = fit
                    state[j] = 4
                    sums[j, 0], sums[j, 1], sums[j, 2], sums[j, 3], sums[j, 4] = S0, S1, S2, T0, T1
            if state[j] == 3:
                out[j] = _direct(x, y, r, q[j], lo[j], lo[j] + k, rad[j], buf)
                state[j] = 2


_NO_BLOCKS = (np.empty(0), np.empty(0), np.empty((0, 12)), np.empty((0, 11))) * 2


def plan_windows(x, q, k):
    """For sorted keys ``x`` and sorted queries ``q``: the windows of ``k`` keys (:func:`windows`:
    ``lo``, ``mid``, ``rad``) and the chunks' starts (:func:`plan`)."""
    m = q.shape[0]
    lo = np.empty(m, dtype=np.int64)
    mid = np.empty(m, dtype=np.int64)
    rad = np.empty(m)
    windows(x, q, k, lo, mid, rad)
    return lo, mid, rad, plan(x, q, lo, rad, k, RHO)


def regressions(x, y, r, q, lo, mid, rad, k, starts, tol=FIT_TOL, sums=None):
    """:func:`fits` over every chunk (on the shared threads): the fits at the sorted queries
    ``q`` with robustness weights ``r`` and their routes; the sums of routes 0 and 4 in
    ``sums`` (m, 5) when given."""
    n, m = x.shape[0], q.shape[0]
    nxt, prv = neighbours(r)
    out = np.empty(m)
    state = np.zeros(m, dtype=np.int8)
    room = np.empty((m, 5)) if sums is None else sums
    ymax = float(np.max(np.abs(y))) if n else 0.0
    blocks = _NO_BLOCKS
    if k >= 4 * BLOCK:
        blocks = (*block_moments(x, y, r, BLOCK), *block_moments(x, y, r, SUPER))
    args = (x, y, r, nxt, prv, q, lo, mid, rad, k, starts, ymax, tol, *blocks)
    with threads_for(60.0 * (n + m) + 300.0 * m):
        run_ranges(fits, args, starts.shape[0] - 1, (out, state, room), grain=1)
    return out, state
