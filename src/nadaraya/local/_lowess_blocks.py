"""LOWESS's block sums (numba): a window's tricube sums from per-block moments about each block's centre.

A fit whose sliding moments (:mod:`._lowess_jit`) could round too much is the heavy tail's:
the window's observations sit where the tricube is small (a query far out in Cauchy ``x`` has the
bulk of the data near the far end of its window), and moments of ``r t^j`` over all of them
cancel to a weighted sum a hundred times smaller. Here the sorted keys are cut into blocks of
:data:`BLOCK` keys, each with its moments ``M_i = sum r t^i``, ``N_i = sum r y t^i`` (``t = (x -
c_b) / H_b`` about its own centre, ``|t| <= 1``; computed once per pass). A window's blocks on
one side of the query contribute ``sum_i g_i beta^i M_i`` with ``g_i`` the Taylor coefficients
of ``w(u) u^a`` at the block's centre ``alpha = (c_b - q) / h`` (``beta = H_b / h``): ``g_0``
and ``g_1`` evaluated directly (no cancellation however small the tricube there), the others by
the Taylor shift of the polynomial, times ``beta^i`` (small: a block is narrow against the
window). The keys of blocks cut by the window's ends or by the query are summed directly.
Cost: O(k / BLOCK + BLOCK) per fit instead of O(k).

**Accuracy.** A block's moments are plain sums of at most ``BLOCK`` terms of one sign pattern
``|r t^i| <= r``, off by at most ``BLOCK eps sum r``; the Taylor terms ``i >= 2`` are off by
``4 (deg + 1) eps sum_k |p_k| C(k, i) |alpha|^(k - i)`` (the same shift on the coefficients'
absolute values); ``g_0, g_1`` by 16 eps of their size. The bound of each sum ``S_a`` is carried
to the fit by ``_lowess_jit._checked`` as the sliding moments' is, against the same
:data:`._lowess_jit.FIT_TOL`; a fit it refuses is summed directly.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["BLOCK", "SUPER", "block_fit", "block_moments"]

#: keys per block
BLOCK = 256
#: keys per superblock (whole blocks of these first, then of BLOCK keys)
SUPER = 16 * BLOCK
_EPS = 2.0**-52
_NM = 12  # powers of t in M (0 .. 11: u^2 w has degree 11)
_NN = 11  # powers of t in N (0 .. 10: u w has degree 10)


@njit(cache=True, error_model="numpy")
def block_moments(x, y, r, size):  # pragma: no cover - compiled
    """Per block of ``size`` sorted keys (a multiple of :data:`BLOCK`): its centre, half-width
    and the moments ``M``, ``N``, summed plainly over each :data:`BLOCK` keys, then those added."""
    n = x.shape[0]
    nb = n // size
    c = np.empty(nb)
    H = np.empty(nb)
    M = np.zeros((nb, _NM))
    N = np.zeros((nb, _NN))
    pm = np.empty(_NM)
    pn = np.empty(_NN)
    for b in range(nb):
        a = b * size
        e = a + size - 1
        c[b] = 0.5 * (x[a] + x[e])
        hb = 0.5 * (x[e] - x[a])
        H[b] = hb if hb > 0.0 else 1.0
        ih = 1.0 / H[b]
        for s in range(a, a + size, BLOCK):
            pm[:] = 0.0
            pn[:] = 0.0
            for j in range(s, s + BLOCK):
                t = (x[j] - c[b]) * ih
                p = r[j]
                py = p * y[j]
                for i in range(_NM):
                    pm[i] += p
                    p *= t
                for i in range(_NN):
                    pn[i] += py
                    py *= t
            for i in range(_NM):
                M[b, i] += pm[i]
            for i in range(_NN):
                N[b, i] += pn[i]
    return c, H, M, N


@njit(cache=True, error_model="numpy", inline="always")
def _taylor(alpha, side, g, gb, p, pa):  # pragma: no cover - compiled
    """``g[a, i]`` (a = 0, 1, 2): the Taylor coefficients at ``alpha`` of ``w(u) u^a`` with ``w =
    (1 - side u^3)^3`` (side +1 right of the query, -1 left); ``gb[a, i]``: bounds of their
    rounding, over ``eps`` (``p``, ``pa``: room for 10 coefficients)."""
    p[:] = 0.0  # w = 1 - 3 s u^3 + 3 u^6 - s u^9
    p[0] = 1.0
    p[3] = -3.0 * side
    p[6] = 3.0
    p[9] = -side
    for i in range(10):
        pa[i] = abs(p[i])
    b = abs(alpha)
    for i in range(10):  # the shift: p(alpha + t) = sum_i p[i] t^i
        for j in range(8, i - 1, -1):
            p[j] += alpha * p[j + 1]
            pa[j] += b * pa[j + 1]
    s3 = 1.0 - side * alpha * alpha * alpha
    p[0] = s3 * s3 * s3  # w(alpha) and w'(alpha) directly: no cancellation near the window's end
    p[1] = -9.0 * side * alpha * alpha * s3 * s3
    for i in range(12):
        w = p[i] if i < 10 else 0.0
        wb = (40.0 * pa[i] if i >= 2 else 16.0 * abs(p[i])) if i < 10 else 0.0
        wl = p[i - 1] if 1 <= i <= 10 else 0.0
        wlb = (40.0 * pa[i - 1] if i >= 3 else 16.0 * abs(p[i - 1])) if 1 <= i <= 10 else 0.0
        g[0, i] = w
        gb[0, i] = wb
        g[1, i] = alpha * w + wl  # (alpha + t) w
        gb[1, i] = b * wb + wlb + abs(g[1, i])
    for i in range(12):
        g[2, i] = alpha * g[1, i] + (g[1, i - 1] if i >= 1 else 0.0)
        gb[2, i] = b * gb[1, i] + (gb[1, i - 1] if i >= 1 else 0.0) + abs(g[2, i])


@njit(cache=True, error_model="numpy", inline="always")
def _direct_part(x, y, r, v, ih, a, b, acc, err):  # pragma: no cover - compiled
    """Add keys ``a:b`` to the sums ``acc = (S0, S1, S2, T0, T1)`` in units of ``h`` directly."""
    for j in range(a, b):
        u = (x[j] - v) * ih
        d = abs(u)
        d3 = 1.0 - d * d * d
        w = d3 * d3 * d3 * r[j]
        acc[0] += w
        acc[1] += w * u
        acc[2] += w * u * u
        acc[3] += w * y[j]
        acc[4] += w * u * y[j]
        err[0] += w
        err[1] += w * d
        err[2] += w * d * d
    return b - a


@njit(cache=True, error_model="numpy", inline="always")
def _level(v, ih, side, a, e, c, H, M, N, size, acc, eb, g, gb, bp, p, pa):  # pragma: no cover
    """Add the whole blocks of ``size`` keys within keys ``[a, e)`` to ``acc`` (their bounds to
    ``eb``, over eps); returns the keys they cover, ``(A, E)``, or ``(a, a)`` for none."""
    b0 = (a + size - 1) // size
    b1 = min(e // size, c.shape[0])
    if b1 <= b0:
        return a, a
    gamma = size / BLOCK + BLOCK + 16.0  # the moments' plain sums, then the Taylor terms' products
    for b in range(b0, b1):
        alpha = (c[b] - v) * ih
        beta = H[b] * ih
        _taylor(alpha, side, g, gb, p, pa)
        bp[0] = 1.0
        for i in range(1, 12):
            bp[i] = bp[i - 1] * beta
        for q in range(3):
            s = 0.0
            sb = 0.0
            for i in range(12):
                s += g[q, i] * bp[i] * M[b, i]
                sb += (gb[q, i] + gamma * abs(g[q, i])) * bp[i]
            acc[q] += s
            eb[q] += sb * M[b, 0]
        s0 = 0.0
        s1 = 0.0
        for i in range(11):
            s0 += g[0, i] * bp[i] * N[b, i]
            s1 += g[1, i] * bp[i] * N[b, i]
        acc[3] += s0
        acc[4] += s1
    return b0 * size, b1 * size


@njit(cache=True, error_model="numpy")
def block_fit(x, y, r, v, l0, m0, r0, h, c, H, M, N, c2, H2, M2, N2):  # pragma: no cover - compiled
    """``(S0, S1, S2, T0, T1, e0, e1, e2)``: the window ``[l0, r0)``'s sums at ``v`` (split at
    ``m0``, radius ``h``) from whole blocks of :data:`SUPER` keys (``c2, H2, M2, N2``), then of
    :data:`BLOCK` keys (``c, H, M, N``), and direct sums of the rest; and their error bounds."""
    acc = np.zeros(5)
    err = np.zeros(3)  # sum w |u|^a of the direct keys
    eb = np.zeros(3)  # the blocks' bounds, over eps
    g = np.empty((3, 12))
    gb = np.empty((3, 12))
    bp = np.empty(12)
    p = np.empty(10)
    pa = np.empty(10)
    seg = np.empty(4, np.int64)
    ih = 1.0 / h
    count = 0
    for part in range(2):
        a, e = (l0, m0) if part == 0 else (m0, r0)
        side = -1.0 if part == 0 else 1.0
        A2, E2 = _level(v, ih, side, a, e, c2, H2, M2, N2, SUPER, acc, eb, g, gb, bp, p, pa)
        seg[0], seg[1], seg[2], seg[3] = a, A2, E2, e
        if A2 == E2:
            seg[1], seg[2] = e, e
        for t in range(2):
            s0, s1 = seg[2 * t], seg[2 * t + 1]
            A1, E1 = _level(v, ih, side, s0, s1, c, H, M, N, BLOCK, acc, eb, g, gb, bp, p, pa)
            if A1 == E1:
                count += _direct_part(x, y, r, v, ih, s0, s1, acc, err)
            else:
                count += _direct_part(x, y, r, v, ih, s0, A1, acc, err)
                count += _direct_part(x, y, r, v, ih, E1, s1, acc, err)
    f = (count + 8.0) * _EPS
    return (acc[0], acc[1], acc[2], acc[3], acc[4], eb[0] * _EPS + f * err[0], eb[1] * _EPS + f * err[1],
            eb[2] * _EPS + f * err[2])
