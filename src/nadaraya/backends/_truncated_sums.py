"""The truncated backend's 1-D sums: each query's window key by key, and the dense cells' Horner passes."""

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import exp_flushed

__all__ = ["BITS", "BLOCK", "FASTMATH", "MAX_BLOCK", "bound", "emit", "gallop", "horner", "horner_each",
           "near_windows", "nearest", "pair_terms", "part", "range_max", "sums", "terms", "window_max"]

#: the dense cells' series: the remainder is at most ``2^-BITS`` of each cross term
BITS = 60

#: keys per block of the inner loop (its scratch rows stay in L1)
BLOCK = 512
#: keys per block of the truncated backend's table of block maxima of the log sample weights
MAX_BLOCK = 32
#: reductions may be reordered (so they vectorise) and products fused with sums (the exponential's
#: polynomial; 1.3x faster); each log weight ``-0.5 u^2`` is stored before it is used, so that it is
#: rounded exactly as the reference rounds it (``nnan``/``nsz`` cost the tests' 1e-13 agreement)
FASTMATH = {"reassoc", "contract"}


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def part(ks, ls, vt, q, inv_h, t, s0, s1, r, buf, du, pw, acc):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Add the keys ``s0 .. s1 - 1`` to ``acc`` = (weight, values (p), moments (2 r), value
    moments (r p)), each term ``exp(l - t)``."""
    p = vt.shape[0]
    weighted = ls.size > 0
    for k0 in range(s0, s1, BLOCK):
        nb = min(BLOCK, s1 - k0)
        kb = ks[k0:k0 + nb]  # slices: contiguous views of known length, which LLVM vectorises
        for j in range(nb):  # -0.5 u^2 rounded and stored, so that no FMA fuses it with what follows
            u = (q - kb[j]) * inv_h
            buf[j] = -0.5 * u * u
        wsum = 0.0
        vsum = 0.0
        v0 = vt[0, k0:k0 + nb]  # the first output rides along (p >= 1)
        if weighted:
            lb = ls[k0:k0 + nb]
            for j in range(nb):
                w = exp_flushed((buf[j] + lb[j]) - t)
                buf[j] = w
                wsum += w
                vsum += w * v0[j]
        else:
            for j in range(nb):
                w = exp_flushed(buf[j] - t)
                buf[j] = w
                wsum += w
                vsum += w * v0[j]
        acc[0] += wsum
        acc[1] += vsum
        for c in range(1, p):
            vb = vt[c, k0:k0 + nb]
            s = 0.0
            for j in range(nb):
                s += buf[j] * vb[j]
            acc[1 + c] += s
        if r == 0:
            continue
        if r == 1:  # local linear: its three moment sums in one pass over the block's weights
            m1 = 0.0
            m2 = 0.0
            mv = 0.0
            for j in range(nb):
                d = kb[j] - q
                wd = buf[j] * d
                m1 += wd
                m2 += wd * d
                mv += wd * v0[j]
            acc[p + 1] += m1
            acc[p + 2] += m2
            acc[p + 3] += mv
            for c in range(1, p):
                vb = vt[c, k0:k0 + nb]
                s = 0.0
                for j in range(nb):
                    s += buf[j] * (kb[j] - q) * vb[j]
                acc[p + 3 + c] += s
            continue
        for j in range(nb):
            du[j] = kb[j] - q
            pw[j] = buf[j]
        for power in range(1, 2 * r + 1):
            s = 0.0
            for j in range(nb):
                pw[j] *= du[j]
                s += pw[j]
            acc[p + power] += s
            if power <= r:
                for c in range(p):
                    vb = vt[c, k0:k0 + nb]
                    s = 0.0
                    for j in range(nb):
                        s += pw[j] * vb[j]
                    acc[p + 2 * r + 1 + (power - 1) * p + c] += s


# -- the dense cells' series (nadaraya.backends._truncated_cells): Horner's passes over queries --


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def horner(mom, nt, c, jmax, aq, nq, pd):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``pd[j, i]``, ``j = 0 .. jmax``: the ``j``-th derivative over ``j!`` of the series
    ``sum_k mom[k, c] a^k`` at ``a = aq[i]`` (Horner's scheme carrying its derivatives: the
    ``j``-th derivative of ``sum_x G_x exp(a b)`` is ``sum_x G_x b^j exp(a b)``); four terms
    per pass over the queries, every derivative in it (``jmax`` 0, 1, 2 or 4), so that the
    rows are read and written once per four terms."""
    p0, p1, p2, p3, p4 = pd[0], pd[min(1, jmax)], pd[min(2, jmax)], pd[min(3, jmax)], pd[min(4, jmax)]
    last = mom[nt - 1, c]
    for i in range(nq):
        p0[i] = last
    for j in range(1, jmax + 1):
        for i in range(nq):
            pd[j, i] = 0.0
    k = nt - 2
    while k >= 0 and (k + 1) % 4:
        mk = mom[k, c]
        _steps1(jmax, aq, nq, mk, p0, p1, p2, p3, p4)
        k -= 1
    while k >= 0:
        _steps4(jmax, aq, nq, mom[k, c], mom[k - 1, c], mom[k - 2, c], mom[k - 3, c], p0, p1, p2, p3, p4)
        k -= 4


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def _steps1(jmax, aq, nq, mk, p0, p1, p2, p3, p4):  # type: ignore[no-untyped-def]  # pragma: no cover
    """One term of :func:`horner`."""
    if jmax == 0:
        for i in range(nq):
            p0[i] = p0[i] * aq[i] + mk
    elif jmax == 1:
        for i in range(nq):
            a = aq[i]
            x0 = p0[i]
            p1[i] = p1[i] * a + x0
            p0[i] = x0 * a + mk
    elif jmax == 2:
        for i in range(nq):
            a = aq[i]
            x0 = p0[i]
            x1 = p1[i]
            p2[i] = p2[i] * a + x1
            p1[i] = x1 * a + x0
            p0[i] = x0 * a + mk
    else:
        for i in range(nq):
            a = aq[i]
            x0, x1, x2, x3 = p0[i], p1[i], p2[i], p3[i]
            p4[i] = p4[i] * a + x3
            p3[i] = x3 * a + x2
            p2[i] = x2 * a + x1
            p1[i] = x1 * a + x0
            p0[i] = x0 * a + mk


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def _steps4(jmax, aq, nq, m0, m1, m2, m3, p0, p1, p2, p3, p4):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Four terms of :func:`horner` (coefficients ``m0 .. m3``, the highest first) in one pass."""
    if jmax == 0:
        for i in range(nq):
            a = aq[i]
            p0[i] = (((p0[i] * a + m0) * a + m1) * a + m2) * a + m3
    elif jmax == 1:
        for i in range(nq):
            a = aq[i]
            x0, x1 = p0[i], p1[i]
            x1 = x1 * a + x0
            x0 = x0 * a + m0
            x1 = x1 * a + x0
            x0 = x0 * a + m1
            x1 = x1 * a + x0
            x0 = x0 * a + m2
            p1[i] = x1 * a + x0
            p0[i] = x0 * a + m3
    elif jmax == 2:
        for i in range(nq):
            a = aq[i]
            x0, x1, x2 = p0[i], p1[i], p2[i]
            x2 = x2 * a + x1
            x1 = x1 * a + x0
            x0 = x0 * a + m0
            x2 = x2 * a + x1
            x1 = x1 * a + x0
            x0 = x0 * a + m1
            x2 = x2 * a + x1
            x1 = x1 * a + x0
            x0 = x0 * a + m2
            p2[i] = x2 * a + x1
            p1[i] = x1 * a + x0
            p0[i] = x0 * a + m3
    else:
        for i in range(nq):
            a = aq[i]
            x0, x1, x2, x3, x4 = p0[i], p1[i], p2[i], p3[i], p4[i]
            for mk in (m0, m1, m2, m3):
                x4 = x4 * a + x3
                x3 = x3 * a + x2
                x2 = x2 * a + x1
                x1 = x1 * a + x0
                x0 = x0 * a + mk
            p0[i], p1[i], p2[i], p3[i], p4[i] = x0, x1, x2, x3, x4


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def emit(pd, c, jmax, p, r, npf, fm, nq, consts, tmp, acc):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Add column ``c``'s sums to the columns ``acc[:, i]`` of the queries, each times ``fm[i]``
    (0 for a query masked here): the plain sum, and for ``j = 1 .. jmax`` (0, 1, 2 or 4) the
    moment ``sum w (k - q)^j`` (times the value of column ``c``), from ``(k - q) / h = b - s``:
    ``h^j j! sum_i pd[i] (-s)^(j - i) / (j - i)!`` (``npf[e] = (-s)^e / e!``); one pass."""
    hfact = consts[0]
    a0 = acc[c]
    p0 = pd[0]
    if jmax == 0:
        for i in range(nq):
            a0[i] += fm[i] * p0[i]
        return
    base = p + 1 if c == 0 else p + 2 * r + c  # the column of j = 1; then every 1 (weight) or p (values)
    step = 1 if c == 0 else p
    a1 = acc[base]
    p1 = pd[1]
    n1 = npf[1]
    g1 = hfact[1]
    if jmax == 1:
        for i in range(nq):
            f = fm[i]
            a0[i] += f * p0[i]
            a1[i] += f * g1 * (p1[i] + p0[i] * n1[i])
        return
    a2 = acc[base + step]
    p2 = pd[2]
    n2 = npf[2]
    g2 = hfact[2]
    if jmax == 2:
        for i in range(nq):
            f = fm[i]
            a0[i] += f * p0[i]
            a1[i] += f * g1 * (p1[i] + p0[i] * n1[i])
            a2[i] += f * g2 * (p2[i] + p1[i] * n1[i] + p0[i] * n2[i])
        return
    a3 = acc[base + 2 * step]
    a4 = acc[base + 3 * step]
    p3, p4, n3, n4 = pd[3], pd[4], npf[3], npf[4]
    g3, g4 = hfact[3], hfact[4]
    for i in range(nq):
        f = fm[i]
        x0, x1, x2, x3 = p0[i], p1[i], p2[i], p3[i]
        m1, m2, m3 = n1[i], n2[i], n3[i]
        a0[i] += f * x0
        a1[i] += f * g1 * (x1 + x0 * m1)
        a2[i] += f * g2 * (x2 + x1 * m1 + x0 * m2)
        a3[i] += f * g3 * (x3 + x2 * m1 + x1 * m2 + x0 * m3)
        a4[i] += f * g4 * (p4[i] + x3 * m1 + x2 * m2 + x1 * m3 + x0 * n4[i])


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def horner_each(co, i0, nt, jmax, aq, nq, pd):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`horner` with coefficients of their own per query: ``co[k, i0 + i]`` for query
    ``i`` (a leave-one-out walk's keys before and after each query's own key)."""
    p0, p1, p2, p3, p4 = pd[0], pd[min(1, jmax)], pd[min(2, jmax)], pd[min(3, jmax)], pd[min(4, jmax)]
    last = co[nt - 1]
    for i in range(nq):
        p0[i] = last[i0 + i]
    for j in range(1, jmax + 1):
        for i in range(nq):
            pd[j, i] = 0.0
    k = nt - 2
    while k >= 0 and (k + 1) % 4:
        _steps1e(jmax, aq, nq, co[k], i0, p0, p1, p2, p3, p4)
        k -= 1
    while k >= 0:
        _steps4e(jmax, aq, nq, co[k], co[k - 1], co[k - 2], co[k - 3], i0, p0, p1, p2, p3, p4)
        k -= 4


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def _steps1e(jmax, aq, nq, mk, i0, p0, p1, p2, p3, p4):  # type: ignore[no-untyped-def]  # pragma: no cover
    """One term of :func:`horner_each`."""
    if jmax == 0:
        for i in range(nq):
            p0[i] = p0[i] * aq[i] + mk[i0 + i]
    elif jmax == 1:
        for i in range(nq):
            a = aq[i]
            x0 = p0[i]
            p1[i] = p1[i] * a + x0
            p0[i] = x0 * a + mk[i0 + i]
    elif jmax == 2:
        for i in range(nq):
            a = aq[i]
            x0 = p0[i]
            x1 = p1[i]
            p2[i] = p2[i] * a + x1
            p1[i] = x1 * a + x0
            p0[i] = x0 * a + mk[i0 + i]
    else:
        for i in range(nq):
            a = aq[i]
            x0, x1, x2, x3 = p0[i], p1[i], p2[i], p3[i]
            p4[i] = p4[i] * a + x3
            p3[i] = x3 * a + x2
            p2[i] = x2 * a + x1
            p1[i] = x1 * a + x0
            p0[i] = x0 * a + mk[i0 + i]


@numba.njit(cache=True, nogil=True, fastmath=FASTMATH)
def _steps4e(jmax, aq, nq, c0, c1, c2, c3, i0, p0, p1, p2, p3, p4):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Four terms of :func:`horner_each` (coefficient rows ``c0 .. c3``, the highest first)."""
    if jmax == 0:
        for i in range(nq):
            a = aq[i]
            j = i0 + i
            p0[i] = (((p0[i] * a + c0[j]) * a + c1[j]) * a + c2[j]) * a + c3[j]
    elif jmax == 1:
        for i in range(nq):
            a = aq[i]
            j = i0 + i
            x0, x1 = p0[i], p1[i]
            x1 = x1 * a + x0
            x0 = x0 * a + c0[j]
            x1 = x1 * a + x0
            x0 = x0 * a + c1[j]
            x1 = x1 * a + x0
            x0 = x0 * a + c2[j]
            p1[i] = x1 * a + x0
            p0[i] = x0 * a + c3[j]
    elif jmax == 2:
        for i in range(nq):
            a = aq[i]
            j = i0 + i
            x0, x1, x2 = p0[i], p1[i], p2[i]
            x2 = x2 * a + x1
            x1 = x1 * a + x0
            x0 = x0 * a + c0[j]
            x2 = x2 * a + x1
            x1 = x1 * a + x0
            x0 = x0 * a + c1[j]
            x2 = x2 * a + x1
            x1 = x1 * a + x0
            x0 = x0 * a + c2[j]
            p2[i] = x2 * a + x1
            p1[i] = x1 * a + x0
            p0[i] = x0 * a + c3[j]
    else:
        for i in range(nq):
            a = aq[i]
            j = i0 + i
            x0, x1, x2, x3, x4 = p0[i], p1[i], p2[i], p3[i], p4[i]
            for mk in (c0[j], c1[j], c2[j], c3[j]):
                x4 = x4 * a + x3
                x3 = x3 * a + x2
                x2 = x2 * a + x1
                x1 = x1 * a + x0
                x0 = x0 * a + mk
            p0[i], p1[i], p2[i], p3[i], p4[i] = x0, x1, x2, x3, x4


@numba.njit(cache=True, nogil=True)
def sums(ks, ls, vt, qs, ex, inv_h, lo, hi, top, r, edges, a, b, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Rows of ``out`` = (weight, values, moments) for the queries of the ranges ``a .. b - 1``
    (range ``c`` holds the queries ``edges[c] .. edges[c + 1] - 1``)."""
    buf = np.empty(BLOCK)
    du = np.empty(BLOCK)
    pw = np.empty(BLOCK)
    width = out.shape[1]
    acc = np.empty(width)
    for c in range(a, b):
        for i in range(edges[c], edges[c + 1]):
            for s in range(width):
                acc[s] = 0.0
            t = top[i]
            if t > -np.inf:
                e = ex[i]
                if lo[i] <= e < hi[i]:
                    part(ks, ls, vt, qs[i], inv_h, t, lo[i], e, r, buf, du, pw, acc)
                    part(ks, ls, vt, qs[i], inv_h, t, e + 1, hi[i], r, buf, du, pw, acc)
                else:
                    part(ks, ls, vt, qs[i], inv_h, t, lo[i], hi[i], r, buf, du, pw, acc)
            for s in range(width):
                out[i, s] = acc[s]


@numba.njit(cache=True, nogil=True)
def bound(ks, ls, q, e, inv_h, pos):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``(b, u2)``: the largest log weight among the two nearest keys on each side of position
    ``pos`` (key ``e`` left out), and the smallest ``u^2`` (the nearest key's)."""
    n = ks.size
    weighted = ls.size > 0
    best = -np.inf
    u2min = np.inf
    for side in (-1, 1):
        j = pos - 1 if side < 0 else pos
        found = 0
        while 0 <= j < n and found < 2:
            if j != e:
                u = (q - ks[j]) * inv_h
                lw = -0.5 * u * u
                if weighted:
                    lw = lw + ls[j]
                best = max(best, lw)
                u2min = min(u2min, u * u)
                found += 1
            j += side
    return best, u2min


@numba.njit(cache=True, nogil=True)
def range_max(ls, block_max, a, b):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The largest of ``ls[a:b]`` (``-inf`` if empty), whole blocks of :data:`MAX_BLOCK` read
    from ``block_max``."""
    top = -np.inf
    j = a
    while j < b and j % MAX_BLOCK:
        top = max(top, ls[j])
        j += 1
    while j + MAX_BLOCK <= b:
        top = max(top, block_max[j // MAX_BLOCK])
        j += MAX_BLOCK
    while j < b:
        top = max(top, ls[j])
        j += 1
    return top


@numba.njit(cache=True, nogil=True)
def window_max(ks, ls, q, e, inv_h, a, b):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The largest log weight of the keys ``a .. b - 1`` but ``e``."""
    top = -np.inf
    for j in range(a, b):
        if j != e:
            u = (q - ks[j]) * inv_h
            top = max(top, -0.5 * u * u + ls[j])
    return top


@numba.njit(cache=True, nogil=True)
def _search(ks, x, a, b, strict):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The first index ``j`` in ``[a, b)`` with ``ks[j] >= x`` (``> x`` if ``strict``), else ``b``."""
    while a < b:
        mid = (a + b) >> 1
        if ks[mid] < x or (strict and ks[mid] == x):
            a = mid + 1
        else:
            b = mid
    return a


@numba.njit(cache=True, nogil=True)
def gallop(ks, x, start, strict):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`_search` over all of ``ks``, in steps doubling outward from ``start``: O(log distance)."""
    n = ks.size
    step = 1
    if start < n and (ks[start] < x or (strict and ks[start] == x)):  # the answer is right of start
        a = start + 1
        while True:
            b = start + step
            if b >= n:
                return _search(ks, x, a, n, strict)
            if not (ks[b] < x or (strict and ks[b] == x)):
                return _search(ks, x, a, b, strict)
            a = b + 1
            step *= 2
    b = start  # the answer is at or left of start
    while True:
        a = start - step
        if a < 0:
            return _search(ks, x, 0, b, strict)
        if ks[a] < x or (strict and ks[a] == x):
            return _search(ks, x, a + 1, b, strict)
        b = a
        step *= 2


@numba.njit(cache=True, nogil=True)
def nearest(ks, qs, ex):  # type: ignore[no-untyped-def]  # pragma: no cover
    """For each query: its position among the sorted keys ``ks`` (the first key at or above it)
    and the key nearest to it of the two on each side, its left-out key ``ex`` not among them
    (-1 where there is none). The largest log weight ``-u^2 / 2`` of those four keys is that
    key's at every bandwidth: ``(q - k) * (1 / h)`` rounds monotonically in ``q - k``."""
    n = ks.size
    pos_of = np.empty(qs.size, dtype=np.int64)
    near = np.full(qs.size, -1, dtype=np.int64)
    pos = 0
    for i in range(qs.size):
        q = qs[i]
        pos = gallop(ks, q, min(pos, n - 1), False)
        pos_of[i] = pos
        best = np.inf
        for side in (-1, 1):
            j = pos - 1 if side < 0 else pos
            found = 0
            while 0 <= j < n and found < 2:
                if j != ex[i]:
                    d = abs(q - ks[j])
                    if d < best:
                        best = d
                        near[i] = j
                    found += 1
                j += side
    return pos_of, near


@numba.njit(cache=True, nogil=True)
def near_windows(ks, qs, pos_of, near, h, inv_h, big_l, i0, i1, lo, hi, top):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The truncated backend's windows and shifts without sample weights or moments, from each
    query's nearest key (:func:`nearest`), for the queries ``i0 .. i1 - 1``: the same ``lo``,
    ``hi`` and ``top``, each search starting from the last query's end (neighbouring queries'
    windows end close together)."""
    n = ks.size
    a = 0
    b = 0
    for i in range(i0, i1):
        q = qs[i]
        best = -np.inf
        if near[i] >= 0:
            u = (q - ks[near[i]]) * inv_h
            best = -0.5 * u * u
        if best == -np.inf:
            lo[i] = pos_of[i]
            hi[i] = pos_of[i]
            top[i] = -np.inf
            continue
        slack = 0.0 - best + big_l
        dist = math.sqrt(2.0 * slack) * h * (1.0 + 2.0**-40)
        a = 0 if q - dist < ks[0] else gallop(ks, q - dist, min(a, n - 1), False)
        b = n if q + dist >= ks[-1] else gallop(ks, q + dist, min(b, n - 1), True)
        lo[i] = a
        hi[i] = b
        top[i] = best


def terms(t: float) -> int:
    """The number of terms ``K`` of the series of ``exp(z)``, ``|z| <= t``, whose remainder is at
    most ``2^-BITS exp(-t)`` (so at most ``2^-BITS`` of ``exp(z)``): the bound ``t^K / K! / (1 -
    t / (K + 1))`` of the remainder.

    Examples
    --------
    >>> terms(1.5**2 / 4), terms(1.0)
    (17, 21)
    """
    k = 1
    while True:
        if t < k + 1 and t**k / math.factorial(k) / (1.0 - t / (k + 1)) * math.exp(t) <= 2.0**-BITS:
            return k
        k += 1


def pair_terms(half: float, big_l: float, r: int, rho: float, near: float) -> NDArray[np.int64]:
    """The terms of the series (:func:`terms`, plus ``2 r`` for the derivatives) of each pair of
    dense cells (``nadaraya.backends._truncated_cells``, ``rho`` bandwidths wide) ``o = 0, 1, ...``
    cells apart, up to the last pair whose terms can change a sum.

    ``|a|, |b| <= half``, so a query and a key of cells ``o`` apart are at least ``dmin = o rho - 2
    half`` bandwidths apart and at most ``umax = o rho + 2 half``; the query's shift is at least
    ``-near^2 / 2`` (the cells' queries), so each weight is at most ``exp(-dmin^2 / 2 + near^2 /
    2)`` of the largest, and its moment terms ``umax^j`` (``j <= 2 r``) times that, in units of
    ``h^j``. Where that is under ``2^-BITS / n`` (``exp(-big_l)``) the pair is left out, as the
    windows leave out such keys; otherwise its series is cut after ``K`` terms where either bound holds: the
    remainder under ``2^-BITS`` of each term (:func:`terms`), or the error of each term (its
    ``exp(-a b) <= exp(t)`` times the remainder) under ``2^-BITS / n`` of the largest. The
    skipped terms then weigh at most ``2^-BITS`` of the largest together, as the windows'.

    Examples
    --------
    >>> pair_terms(0.75, 53.8, 0, 1.5, 1.0).tolist()
    [17, 17, 17, 17, 17, 16, 12, 8]
    """
    t = half * half
    k0 = terms(t)
    out = []
    o = 0
    while True:
        dmin = max(0.0, o * rho - 2.0 * half)
        umax = o * rho + 2.0 * half
        lead = -0.5 * dmin * dmin + 0.5 * near**2 + 2 * r * math.log(max(umax, 1.0))
        if lead <= -big_l:
            return np.array(out, dtype=np.int64)
        k = 2
        while k < k0 and (lead + t + k * math.log(t) - math.lgamma(k + 1.0) - math.log1p(-t / (k + 1))
                          > -big_l):
            k += 1
        out.append(k + 2 * r)  # the 2 r-th derivative's remainder stays under either bound too
        o += 1
