"""The constant kernel's local fits of degree 1 and 2 in one feature: one polynomial, each query's degree.

With constant weights every query's local system is the keys' one weighted least-squares
problem, written about the query: the fit at ``q`` is the keys' global polynomial evaluated at
``q``. The jitted pieces here take each query's moment row about the centre ``c`` (scaled by
``t``, the layout of :mod:`nadaraya.backends.constant`: ``sum s a^j``, ``j <= 2r``, then
``sum s a^j v``, ``j <= r``, ``p`` columns each, ``a = (k - c) / t``) and give the fit in the
orthogonal polynomials of the keys' distribution (well conditioned wherever the query is).

**Degrees.** The general rule (:mod:`nadaraya.local.solve`) uses degree ``r`` where the system
about ``q``, scaled to a unit diagonal, has reciprocal condition ``rcond >= RCOND``, else the
highest lower degree that does. In standard units ``z = (q - mean) / sd`` (``k3``, ``k4`` the
keys' standardised third and fourth central moments, ``D = k4 - k3^2 - 1``):

- degree 1: ``rcond_1 = 1 / (sqrt(1 + z^2) + |z|)^2`` exactly;
- degree 2: ``det = D / ((1 + z^2) m4)``, ``m4 = k4 - 4 z k3 + 6 z^2 + z^4``, and
  ``max(4 / 27, 1 / (3 e2)) det <= rcond_2 <= det / lambda_1`` (trace 3; ``e2`` the sum of the
  principal 2 x 2 minors, at least the product of the two largest eigenvalues; eigenvalue
  interlacing with the degree-1 block, whose smallest eigenvalue is ``lambda_1 = 1 / (R (R +
  |z|))``, ``R = sqrt(1 + z^2)``).

The general rule's own rcond is computed from moments moved to the query, whose rounding is
bounded by ``eps`` times moments of ``|k - c| + |c - q|``: at most ``O(eps k4)`` on the scaled
system where the centre is within a standard deviation of the mean (checked). A query is
decided here only where these bounds, widened by :data:`NOISE` ``eps (1 + k4)``, lie on one
side of ``RCOND`` at every degree tried; the others (within that band of the threshold, keys of
no spread, a weight sum of zero) are marked ``-2`` for the general rule.

**float32.** Everything here is float64: float32 calls arrive widened to float64 and are
rounded once by their caller (:func:`nadaraya.local.job.prepare`). The general rule on float32
moments would decide a far query's degree on rounding noise (``1 - rho^2`` of about ``1e-7``),
and a degree 1 there is a huge extrapolation, where float64 takes degree 0.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["NOISE", "at_degree", "fit_rows", "loo_rows", "loo_rows1"]

#: the band about RCOND, in units of ``eps (1 + k4)``, where a query's degree is left to the general rule
NOISE = 1e5

_EPS = 2.0**-52


# Every helper takes and returns scalars only: a call with an array argument costs an atomic
# reference count each time, which is most of the cost of a query here.


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _stats(w0, w1, w2, w3, w4, degree):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The keys' distribution from its weight moments about the centre: ``(ok, 1 / w0, mean,
    var, 1 / var, C3, k4, D, 1 / D)`` (``C3`` the third central moment, ``k4`` the standardised
    fourth, ``D = k4 - k3^2 - 1``); ``ok``: a positive weight sum, the mean within a standard
    deviation of the centre, finite moments."""
    if not w0 > 0:
        return False, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0
    iw = 1.0 / w0
    mu1 = w1 * iw
    mu2 = w2 * iw
    var = mu2 - mu1 * mu1
    ok = var > 0.5 * mu2 and math.isfinite(var)
    ivar = 1.0 / var
    c3, k4, dd, idd = 0.0, 1.0, 0.0, 0.0
    if degree == 2:
        mu3 = w3 * iw
        mu4 = w4 * iw
        c3 = mu3 - 3.0 * mu1 * mu2 + 2.0 * mu1 * mu1 * mu1
        c4 = mu4 - 4.0 * mu1 * mu3 + 6.0 * mu1 * mu1 * mu2 - 3.0 * mu1 * mu1 * mu1 * mu1
        k4 = c4 * ivar * ivar
        dd = k4 - c3 * c3 * ivar * ivar * ivar - 1.0
        idd = 1.0 / dd
        ok = ok and math.isfinite(k4) and math.isfinite(dd)
    return ok, iw, mu1, var, ivar, c3, k4, dd, idd


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _coef(v0, v1, v2, iw, mu1, var, ivar, c3, idd, degree):  # type: ignore[no-untyped-def]  # pragma: no cover
    """One value column's coefficients on the orthogonal polynomials ``1``, ``w``, ``w^2 - b w -
    var`` (``w = a - mean``, ``b = C3 / var``) from its value moments ``v0``, ``v1``, ``v2``."""
    ybar = v0 * iw
    ey1 = v1 * iw
    wy = ey1 - mu1 * ybar
    g2 = 0.0
    if degree == 2:
        w2y = v2 * iw - 2.0 * mu1 * ey1 + mu1 * mu1 * ybar
        g2 = (w2y - c3 * ivar * wy - var * ybar) * ivar * ivar * idd
    return ybar, wy * ivar, g2


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _degree(ok, u, ivar, c3, k4, dd, degree, rcond, wide):  # type: ignore[no-untyped-def]  # pragma: no cover
    """A query's degree at ``u = a_q - mean`` by the bounds of the module text (``-2``: left
    to the general rule; ``-3``: so are its fits, the keys' distribution being degenerate);
    ``wide``: a widening of the band (0 from ``constant.local_fit``)."""
    if not ok:
        return -3
    z2 = u * u * ivar
    noise = (NOISE * _EPS + wide) * (1.0 + k4)
    rel = 1e3 * _EPS * (1.0 + k4)
    if degree == 2:
        k3sq = c3 * c3 * ivar * ivar * ivar
        m4 = k4 - 4.0 * u * c3 * ivar * ivar + 6.0 * z2 + z2 * z2
        z = math.sqrt(z2)
        big = math.sqrt(1.0 + z2)
        lam1 = 1.0 / (big * (big + z))
        err = noise * (1.0 + k3sq)
        det = 1.0 / ((1.0 + z2) * m4)
        # lambda_min >= det / e2 (e2 = lambda_1 lambda_2 + ... >= lambda_2 lambda_3, the sum of the
        # principal 2 x 2 minors of the scaled system, each 1 - S_ab^2 written without cancellation)
        zs = u * math.sqrt(ivar)
        k3 = c3 * ivar * math.sqrt(ivar)
        g01 = 1.0 / (1.0 + z2)
        g02 = (k4 - 1.0 - 4.0 * zs * k3 + 4.0 * z2) / m4
        g12 = (k4 - k3sq + 2.0 * zs * k3 + (k4 - 3.0) * z2 - 2.0 * z2 * zs * k3 + z2 * z2) * det
        e2 = max(g01, 0.0) + min(max(g02, 0.0), 1.0) + min(max(g12, 0.0), 1.0)
        e2 = e2 * (1.0 + rel) + noise * (1.0 + k4 + k3sq)
        low = max(4.0 / 27.0, 1.0 / (3.0 * e2)) if e2 > 0 else 4.0 / 27.0
        if low * (dd - err) * det * (1.0 - rel) - noise >= rcond:
            return 2
        if not (dd + err) * det / lam1 * (1.0 + rel) + noise < rcond:
            return -2
    z = math.sqrt(z2)
    r1 = 1.0 / ((math.sqrt(1.0 + z2) + z) ** 2)
    if r1 * (1.0 - rel) - noise >= rcond:
        return 1
    if r1 * (1.0 + rel) + noise < rcond:
        return 0
    return -2


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _at(deg, g0, g1, g2, u, p2):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The fit of degree ``deg`` at ``u`` (``p2`` the second orthogonal polynomial there); the
    terms above ``deg`` are not added (their coefficients may be undefined)."""
    out = g0
    if deg >= 1:
        out += g1 * u
    if deg == 2:
        out += g2 * p2
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _slope(deg, g1, g2, u, b):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The derivative of the fit of degree ``deg`` along ``a`` (NaN at degree 0 and below)."""
    if deg == 2:
        return g1 + g2 * (2.0 * u - b)
    return g1 if deg == 1 else np.nan


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _corner(deg, z2, p2, ivar, idd):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``(M / sum w)^-1 [0, 0]`` at degree ``deg``: the sum of the squared orthonormal polynomials."""
    out = 1.0
    if deg >= 1:
        out += z2
    if deg == 2:
        out += p2 * p2 * ivar * ivar * idd
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _reach(rcond, wide):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``z^2`` up to which :func:`_degree` gives degree 1 at the full degree 1 (``k4 = 1``):
    ``r1 = 1 / (R + z)^2 >= t`` where ``z <= (1 / t - 1) sqrt(t) / 2``."""
    noise = (NOISE * _EPS + wide) * 2.0
    need = (rcond + noise) / (1.0 - 2e3 * _EPS) * (1.0 + 1e-12)
    reach = (1.0 / need - 1.0) * math.sqrt(need) / 2.0 * (1.0 - 1e-12) if need < 1.0 else 0.0
    return reach * reach


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _shared1(rows, q, centre, degree, rcond, wide, inv, reach, lo, hi, est, used):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`fit_rows` for one shared row, one value column, estimates only: a loop without
    branches over the queries (the full degree's bound of :func:`_degree` without divisions;
    SIMD), then :func:`_degree` for the few it does not clear."""
    nk = 2 * degree + 1
    w3 = rows[0, 3] if degree == 2 else 0.0
    w4 = rows[0, 4] if degree == 2 else 0.0
    ok, iw, mu1, var, ivar, c3, k4, dd, idd = _stats(rows[0, 0], rows[0, 1], rows[0, 2], w3, w4, degree)
    v2 = rows[0, nk + 2] if degree == 2 else 0.0
    g0, g1, g2 = _coef(rows[0, nk], rows[0, nk + 1], v2, iw, mu1, var, ivar, c3, idd, degree)
    noise = (NOISE * _EPS + wide) * (1.0 + k4)
    rel = 1e3 * _EPS * (1.0 + k4)
    room = 4.0 / 27.0 * (dd - noise * (1.0 + c3 * c3 * ivar * ivar * ivar)) * (1.0 - rel) * (1.0 - 1e-12)
    tight = (rcond + noise) * (1.0 + 1e-12)
    b = c3 * ivar
    c4 = 4.0 * c3 * ivar * ivar
    lim = reach * var if ok else -1.0
    if degree == 2 and not ok:
        room = -1.0
    for i in range(lo, hi):
        u = (q[i] - centre) * inv - mu1
        if degree == 2:
            z2 = u * u * ivar
            m4 = k4 - u * c4 + 6.0 * z2 + z2 * z2
            est[i, 0] = g0 + g1 * u + g2 * (u * u - b * u - var)
            used[i] = 2 if (1.0 + z2) * m4 * tight <= room else -2
        else:
            est[i, 0] = g0 + g1 * u
            used[i] = 1 if u * u <= lim else -2
    for i in range(lo, hi):
        if used[i] == -2:  # the bounds at the full degree do not clear it: all of them
            u = (q[i] - centre) * inv - mu1
            deg = _degree(ok, u, ivar, c3, k4, dd, degree, rcond, wide)
            used[i] = deg
            est[i, 0] = _at(deg, g0, g1, g2, u, u * u - b * u - var)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fit_rows(rows, q, centre, degree, rcond, wide, inv, lo, hi, est, slope, used, inv00):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Queries ``lo:hi``: ``rows`` (m, c) their moment rows, or (1, c) one row shared by all;
    ``q`` (m,) the queries (``(q - centre) inv`` in the units of the rows); outputs ``est``,
    ``slope`` (m, p) per unit of ``q``, ``used`` (``-2``: left to the general rule), ``inv00``
    (``(M / sum w)^-1 [0, 0]``); slopes and ``inv00`` are not computed where ``inv00`` is empty.
    ``wide``: a widening of the band (0 from ``constant.local_fit``)."""
    p = est.shape[1]
    nk = 2 * degree + 1
    full = inv00.size > 0
    shared = rows.shape[0] == 1
    g = np.zeros((3, p))
    ok, iw, mu1, var, ivar, c3, k4, dd, idd = False, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0
    reach = _reach(rcond, wide)
    if shared and p == 1 and not full and hi > lo:
        _shared1(rows, q, centre, degree, rcond, wide, inv, reach, lo, hi, est, used)
        return
    for i in range(lo, hi):
        if not shared or i == lo:
            r = 0 if shared else i
            w3 = rows[r, 3] if degree == 2 else 0.0
            w4 = rows[r, 4] if degree == 2 else 0.0
            ok, iw, mu1, var, ivar, c3, k4, dd, idd = _stats(rows[r, 0], rows[r, 1], rows[r, 2], w3, w4,
                                                             degree)
            for col in range(p):
                v2 = rows[r, nk + 2 * p + col] if degree == 2 else 0.0
                g[0, col], g[1, col], g[2, col] = _coef(rows[r, nk + col], rows[r, nk + p + col], v2, iw, mu1,
                                                        var, ivar, c3, idd, degree)
        u = (q[i] - centre) * inv - mu1
        z2 = u * u * ivar
        deg = -2
        if ok and degree == 1 and u * u <= reach * var:
            deg = 1
        elif ok and degree == 2:
            # the degree-2 bound of _degree without divisions:
            # (1 + z^2) m4 (rcond + noise) <= 4 (D - err) (1 - rel) / 27
            noise = (NOISE * _EPS + wide) * (1.0 + k4)
            rel = 1e3 * _EPS * (1.0 + k4)
            err = noise * (1.0 + c3 * c3 * ivar * ivar * ivar)
            room = 4.0 / 27.0 * (dd - err) * (1.0 - rel) * (1.0 - 1e-12)
            m4 = k4 - 4.0 * u * c3 * ivar * ivar + 6.0 * z2 + z2 * z2
            if (1.0 + z2) * m4 * (rcond + noise) * (1.0 + 1e-12) <= room:
                deg = 2
        if deg == -2:
            deg = _degree(ok, u, ivar, c3, k4, dd, degree, rcond, wide)
        used[i] = deg
        b = c3 * ivar
        p2 = u * u - b * u - var
        for col in range(p):
            est[i, col] = _at(deg, g[0, col], g[1, col], g[2, col], u, p2)
        if full:
            for col in range(p):
                slope[i, col] = _slope(deg, g[1, col], g[2, col], u, b) * inv
            inv00[i] = _corner(deg, z2, p2, ivar, idd)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def at_degree(rows, q, centre, degree, inv, idx, degs, est, slope, inv00):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The fits of queries ``idx`` at the degrees ``degs`` (the general rule's) from the
    polynomial of their rows, as :func:`fit_rows` writes them."""
    p = est.shape[1]
    nk = 2 * degree + 1
    for j in range(idx.size):
        i = idx[j]
        r = 0 if rows.shape[0] == 1 else i
        w3 = rows[r, 3] if degree == 2 else 0.0
        w4 = rows[r, 4] if degree == 2 else 0.0
        _, iw, mu1, var, ivar, c3, _, _, idd = _stats(rows[r, 0], rows[r, 1], rows[r, 2], w3, w4, degree)
        u = (q[i] - centre) * inv - mu1
        b = c3 * ivar
        p2 = u * u - b * u - var
        for col in range(p):
            v2 = rows[r, nk + 2 * p + col] if degree == 2 else 0.0
            g0, g1, g2 = _coef(rows[r, nk + col], rows[r, nk + p + col], v2, iw, mu1, var, ivar, c3, idd,
                               degree)
            est[i, col] = _at(degs[j], g0, g1, g2, u, p2)
            if inv00.size:
                slope[i, col] = _slope(degs[j], g1, g2, u, b) * inv
        if inv00.size:
            inv00[i] = _corner(degs[j], u * u * ivar, p2, ivar, idd)


@numba.njit(cache=True, nogil=True, inline="always")
def _term(a, s, v, e, power, col):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Key ``e``'s term ``s a^power`` (times ``v[e, col]`` where ``col >= 0``), the powers
    multiplied in from the left as :mod:`nadaraya.backends.constant` does."""
    x = s[e]
    for _ in range(power):
        x *= a[e]
    return x * v[e, col] if col >= 0 else x


@numba.njit(cache=True, nogil=True)
def by_left_out(ex, n):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The queries that leave a key out, by that key (a counting sort): queries
    ``order[start[e]:start[e + 1]]`` leave out key ``e`` of ``n``; ``ex[i] < 0`` leaves none."""
    start = np.zeros(n + 1, dtype=np.int64)
    for i in range(ex.size):
        if ex[i] >= 0:
            start[ex[i] + 1] += 1
    for j in range(n):
        start[j + 1] += start[j]
    order = np.empty(start[n], dtype=np.int64)
    fill = start[:-1].copy()
    for i in range(ex.size):
        if ex[i] >= 0:
            order[fill[ex[i]]] = i
            fill[ex[i]] += 1
    return start, order


@numba.njit(cache=True, nogil=True)
def loo_rows(a, s, v, degree, ex):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Each query's moment row (m, c) over every key but ``ex[i]`` (all keys where ``ex[i] < 0``):
    the compensated sum over the keys before it (a pass up the keys) plus the compensated sum
    over the keys after it (a pass down), each rounded once, added once: the left-out term is
    masked, never subtracted. ``a`` (n,) the keys as ``(k - c) / t``, ``s`` their weights.
    Column by column, so that each running sum and its error stay in registers."""
    n, p, m = a.size, v.shape[1], ex.size
    nk = 2 * degree + 1
    c = nk + (degree + 1) * p
    # the queries by left-out key (a counting sort); those that leave none out take the total
    start, order = by_left_out(ex, n)
    rows = np.empty((m, c))
    before = np.empty(n)
    for t in range(c):
        power, col = (t, -1) if t < nk else ((t - nk) // p, (t - nk) % p)
        acc, comp = 0.0, 0.0
        for e in range(n):
            before[e] = acc + comp
            x = _term(a, s, v, e, power, col)
            y = acc + x
            zz = y - acc
            comp += (acc - (y - zz)) + (x - zz)
            acc = y
        total = acc + comp
        for i in range(m):
            if ex[i] < 0:
                rows[i, t] = total
        acc, comp = 0.0, 0.0
        for e in range(n - 1, -1, -1):
            for j in range(start[e], start[e + 1]):
                rows[order[j], t] = before[e] + (acc + comp)
            x = _term(a, s, v, e, power, col)
            y = acc + x
            zz = y - acc
            comp += (acc - (y - zz)) + (x - zz)
            acc = y
    return rows


@numba.njit(cache=True, nogil=True, inline="always")
def _two(acc, comp, x):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``acc + x`` and the running error with this rounding's added (Knuth's TwoSum)."""
    y = acc + x
    zz = y - acc
    return y, comp + ((acc - (y - zz)) + (x - zz))


@numba.njit(cache=True, nogil=True, inline="always")
def _terms(s, k, centre, inv, v, e, group):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Key ``e``'s five terms of ``group`` (``a = (k - centre) inv``): 0 ``s, s a, s a^2, s v,
    s a v``; 1 ``s a^3, s a^4, s a^2 v`` (and two zeros)."""
    w, x, y = s[e], (k[e, 0] - centre) * inv, v[e, 0]
    w1 = w * x
    w2 = w1 * x
    if group == 0:
        return w, w1, w2, w * y, w1 * y
    w3 = w2 * x
    return w3, w3 * x, w2 * y, 0.0, 0.0


@numba.njit(cache=True, nogil=True)
def _group(s, k, centre, inv, v, start, order, group, cols, rows):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The columns ``cols`` of the rows of :func:`loo_rows1` (``-1``: none) from the terms of
    ``group``: a pass up the keys writing each prefix to the queries that leave that key out, a
    pass down adding each suffix (the queries leaving out key ``e``: ``order[start[e]:start[e + 1]]``,
    or query ``e`` alone where ``order`` is empty); five running sums and their errors in
    registers. Returns the totals."""
    n = k.shape[0]
    nc = cols.size
    ident = order.size == 0
    a0 = a1 = a2 = a3 = a4 = 0.0
    c0 = c1 = c2 = c3 = c4 = 0.0
    for e in range(n):
        head = (a0 + c0, a1 + c1, a2 + c2, a3 + c3, a4 + c4)
        for j in range(e, e + 1) if ident else range(start[e], start[e + 1]):
            o = rows[j if ident else order[j]]
            for t in range(nc):
                o[cols[t]] = head[t]
        x0, x1, x2, x3, x4 = _terms(s, k, centre, inv, v, e, group)
        a0, c0 = _two(a0, c0, x0)
        a1, c1 = _two(a1, c1, x1)
        a2, c2 = _two(a2, c2, x2)
        a3, c3 = _two(a3, c3, x3)
        a4, c4 = _two(a4, c4, x4)
    total = (a0 + c0, a1 + c1, a2 + c2, a3 + c3, a4 + c4)
    a0 = a1 = a2 = a3 = a4 = 0.0
    c0 = c1 = c2 = c3 = c4 = 0.0
    for e in range(n - 1, -1, -1):
        tail = (a0 + c0, a1 + c1, a2 + c2, a3 + c3, a4 + c4)
        for j in range(e, e + 1) if ident else range(start[e], start[e + 1]):
            o = rows[j if ident else order[j]]
            for t in range(nc):
                o[cols[t]] += tail[t]
        x0, x1, x2, x3, x4 = _terms(s, k, centre, inv, v, e, group)
        a0, c0 = _two(a0, c0, x0)
        a1, c1 = _two(a1, c1, x1)
        a2, c2 = _two(a2, c2, x2)
        a3, c3 = _two(a3, c3, x3)
        a4, c4 = _two(a4, c4, x4)
    return total


@numba.njit(cache=True, nogil=True)
def loo_rows1(k, s, v, centre, inv, degree, ex):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """:func:`loo_rows` for one value column (the same sums, term by term; ``k`` (n, 1) the keys,
    ``a = (k - centre) inv``), five columns of a key at a time (:func:`_group`); the queries
    leaving out key ``i`` in turn (``ex`` is ``0, 1, ..., n - 1``) take no sort."""
    n, m = k.shape[0], ex.size
    nk = 2 * degree + 1
    c = nk + degree + 1
    ident = m == n
    for i in range(m):
        if ex[i] != i:
            ident = False
            break
    start = np.zeros(0 if ident else n + 1, dtype=np.int64)
    order = np.empty(0, dtype=np.int64)
    if not ident:
        start, order = by_left_out(ex, n)
        if order.size == 0:  # no query leaves a key out: an empty order must not read as the identity
            start = np.zeros(n + 1, dtype=np.int64)
            order = np.empty(1, dtype=np.int64)
    rows = np.empty((m, c))
    low = np.array([0, 1, 2, nk, nk + 1])
    total = _group(s, k, centre, inv, v, start, order, 0, low, rows)
    for i in range(m):
        if ex[i] < 0:
            for t in range(5):
                rows[i, low[t]] = total[t]
    if degree == 2:
        high = np.array([3, 4, 7])
        total = _group(s, k, centre, inv, v, start, order, 1, high, rows)
        for i in range(m):
            if ex[i] < 0:
                for t in range(3):
                    rows[i, high[t]] = total[t]
    return rows

