"""The logistic backend's local-fit moments: its near windows and tails' series carrying ``sum w u^j``.

Each term ``k`` of the tails' series is a Laplacian weight at bandwidth ``h / k``; its running
sums carry the moments about their last key and move them by the binomial expansion, as the
laplace backend does (:func:`nadaraya.backends.laplace._carry`: on one side every term of the
expansion has one sign). The state holds, for every term (the last axis, so that a key's step
runs over the terms in vector registers), ``M_j = sum w (k - a)^j`` for ``j = 0 .. 2r`` then
``MV_j = sum w (k - a)^j v`` for ``j = 0 .. r``, ``p`` columns each.

**A key's step** moves every term's moments by the same gap ``g`` and scales term ``k`` by
``e^(-k x)`` (``x`` the gap in bandwidths). The factors take no ``exp`` per term
(:func:`factors`, the scheme of the degree-0 sums): ``m_k = e^(-k x) - 1`` by
``m_(k+1) = m_k + m_1 + m_k m_1`` (all of one sign; applied as ``S + m S`` while ``k x`` is under
``SMALL``), then one ``exp`` and ``f_(k+1) = f_k e^-x``. Each product or sum rounds once, so term
``k``'s factor carries at most about ``k`` roundings (under ``2^-45`` relative for the 193
terms of the narrowest window) where an ``exp`` each would carry one; the first rounding (of
``m_1`` or ``e^-x``) is shared by every term, the same as a gap changed in its last bit. Each
key's weight in the series is then within a few hundred roundings of the one carried with an
``exp`` per term: the ``2^-60`` cut stays the far keys' truncation, the rest is rounding
(``tests/backends/test_logistic_powers.py`` holds the factors to ``k`` ulps against 50 digits).

**A query** combines its terms first, ``sum_k (-1)^(k+1) k e^(-k x) S_k`` about the last key
``a`` left of its window (that is the moments of the series' weights, each positive, of the far
keys), then moves that once to the query: one binomial move per query and side, not one per term.

The near windows (:func:`near`, for degree 0 too) sum ``w u^j`` key by key (``u = k - q``),
their weights an ``exp`` per block of keys; the sums are reductions that LLVM vectorises
(reassociated: the same error bound, ``eps sum |w u^j|``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["SMALL", "cut_terms", "factors", "far_side", "near", "window_weights"]

#: below this scaled gap ``x`` a running sum's factor ``exp(-x)`` is applied as ``S + expm1(-x) S``
SMALL = 0.25
#: reassociated sums (vectorised); no "nnan"/"ninf": masked weights are exact zeros
_REASSOC = {"reassoc", "contract"}


@numba.njit(cache=True, nogil=True, inline="always")
def cut_terms(x, lead, kmax):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The series' terms a query takes when its nearest far key is ``x`` bandwidths away: the
    least ``K`` (at most ``kmax``) with ``K >= (lead + 2 log1p(e^-x)) / x``, the cut of
    :func:`nadaraya.backends.logistic.terms` with ``log(K + 1)`` bounded by ``log(kmax + 1)``
    inside ``lead``."""
    return min(kmax, math.ceil((lead + 2.0 * math.log1p(math.exp(-x))) / x))


@numba.njit(cache=True, nogil=True)
def factors(x, mul, one):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """For terms ``k = 1 .. K`` (index ``k - 1``; ``K = mul.size``) of a gap ``x >= 0``
    bandwidths: ``one[k-1] = 1`` and ``mul[k-1] = e^(-k x) - 1`` while ``k x < SMALL`` (the factor
    applied as ``S + m S``), else ``one[k-1] = 0`` and ``mul[k-1] = e^(-k x)``; ``S one + S mul`` is
    ``S e^(-k x)`` either way. No ``exp`` per term (see the module text)."""
    kmax = mul.size
    m1 = math.expm1(-x)
    mk = m1
    k = 0
    while k < kmax and (k + 1) * x < SMALL:
        one[k] = 1.0
        mul[k] = mk
        mk = mk + m1 + mk * m1
        k += 1
    if k < kmax:
        f1 = math.exp(-x)  # not 1 + m1: that loses e^-x's digits at large x
        fk = f1 if k == 0 else math.exp(-(k + 1) * x)
        while k < kmax:
            one[k] = 0.0
            mul[k] = fk
            fk *= f1
            k += 1


@numba.njit(cache=True, nogil=True)
def _step(st, one, mul, g, s, sv, j, r, p):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Every term's running sums moved from their anchor to ``anchor - g`` (the next key),
    scaled by its factor (:func:`factors`), then key ``j``'s own row added (weight ``s[j]``,
    values ``sv[:, j]``; its moments about itself 0)."""
    kmax = st.shape[1]
    nm = 2 * r + 1
    g2 = g * g
    if r == 1:
        for k in range(kmax):
            a, b = one[k], mul[k]
            m0, m1, m2 = st[0, k], st[1, k], st[2, k]
            y2 = m2 + 2.0 * g * m1 + g2 * m0
            y1 = m1 + g * m0
            st[2, k] = a * y2 + b * y2
            st[1, k] = a * y1 + b * y1
            st[0, k] = a * m0 + b * m0 + s[j]
    else:
        g3 = g2 * g
        g4 = g3 * g
        for k in range(kmax):
            a, b = one[k], mul[k]
            m0, m1, m2, m3, m4 = st[0, k], st[1, k], st[2, k], st[3, k], st[4, k]
            y4 = m4 + 4.0 * g * m3 + 6.0 * g2 * m2 + 4.0 * g3 * m1 + g4 * m0
            y3 = m3 + 3.0 * g * m2 + 3.0 * g2 * m1 + g3 * m0
            y2 = m2 + 2.0 * g * m1 + g2 * m0
            y1 = m1 + g * m0
            st[4, k] = a * y4 + b * y4
            st[3, k] = a * y3 + b * y3
            st[2, k] = a * y2 + b * y2
            st[1, k] = a * y1 + b * y1
            st[0, k] = a * m0 + b * m0 + s[j]
    for c in range(p):
        v0, v1, v2 = nm + c, nm + p + c, nm + 2 * p + c
        sj = sv[c, j]
        if r == 1:
            for k in range(kmax):
                a, b = one[k], mul[k]
                x0, x1 = st[v0, k], st[v1, k]
                y1 = x1 + g * x0
                st[v1, k] = a * y1 + b * y1
                st[v0, k] = a * x0 + b * x0 + sj
        else:
            for k in range(kmax):
                a, b = one[k], mul[k]
                x0, x1, x2 = st[v0, k], st[v1, k], st[v2, k]
                y2 = x2 + 2.0 * g * x1 + g2 * x0
                y1 = x1 + g * x0
                st[v2, k] = a * y2 + b * y2
                st[v1, k] = a * y1 + b * y1
                st[v0, k] = a * x0 + b * x0 + sj


@numba.njit(cache=True, nogil=True, fastmath=_REASSOC)
def _combine(st, coef, kq, acc):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``acc[t] = sum_(k < kq) coef[k] st[t, k]`` for every row ``t`` (reassociated)."""
    for t in range(st.shape[0]):
        z = 0.0
        for k in range(kq):
            z += coef[k] * st[t, k]
        acc[t] = z


@numba.njit(cache=True, nogil=True)
def _move(acc, g, r, p):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """In place: moments about ``a`` moved to ``a - g`` (``M'_j = sum_t C(j, t) g^(j-t) M_t``)."""
    nm = 2 * r + 1
    g2 = g * g
    if r == 2:
        g3 = g2 * g
        g4 = g3 * g
        m0, m1, m2, m3, m4 = acc[0], acc[1], acc[2], acc[3], acc[4]
        acc[4] = m4 + 4.0 * g * m3 + 6.0 * g2 * m2 + 4.0 * g3 * m1 + g4 * m0
        acc[3] = m3 + 3.0 * g * m2 + 3.0 * g2 * m1 + g3 * m0
    else:
        m0, m1, m2 = acc[0], acc[1], acc[2]
    acc[2] = m2 + 2.0 * g * m1 + g2 * m0
    acc[1] = m1 + g * m0
    for c in range(p):
        x0, x1 = acc[nm + c], acc[nm + p + c]
        if r == 2:
            acc[nm + 2 * p + c] = acc[nm + 2 * p + c] + 2.0 * g * x1 + g2 * x0
        acc[nm + p + c] = x1 + g * x0


@numba.njit(cache=True, nogil=True)
def far_side(ks, s, sv, qs, lo, d0, inv_h, kmax, lead, r, p, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`nadaraya.backends.logistic._far_side` with the moments of degree ``r`` (1 or 2):
    add to ``out[i]`` the moments about the query of the series' sums over the keys
    ``0 .. lo[i] - 1``, queries in the order of ``qs`` with ``lo`` nondecreasing."""
    c = 2 * r + 1 + (r + 1) * p
    st = np.zeros((c, kmax))
    one = np.empty(kmax)
    mul = np.empty(kmax)
    coef = np.empty(kmax)
    acc = np.empty(c)
    j = 0
    for i in range(qs.size):
        while j < lo[i]:
            if j > 0:
                factors((ks[j] - ks[j - 1]) * inv_h, mul, one)
                _step(st, one, mul, ks[j - 1] - ks[j], s, sv, j, r, p)
            else:
                for k in range(kmax):
                    st[0, k] = s[0]
                    for cc in range(p):
                        st[2 * r + 1 + cc, k] = sv[cc, 0]
            j += 1
        if lo[i] == 0 or d0[i] == np.inf:
            continue
        a = lo[i] - 1
        x = (qs[i] - ks[a]) * inv_h
        kq = cut_terms(x, lead, kmax)
        f = math.exp(-(x - d0[i]))  # e^(d0 - x) <= 1: the nearest key's distance d0 <= x
        b = math.exp(-x)
        for k in range(kq):
            coef[k] = (k + 1) * (1.0 if k % 2 == 0 else -1.0) * f
            f *= b
        _combine(st, coef, kq, acc)
        _move(acc, ks[a] - qs[i], r, p)
        for t in range(c):
            out[i, t] += acc[t]


@numba.njit(cache=True, nogil=True)
def window_weights(ks, anchor, up, down, q, a, mid, b, ex, d0, inv_h):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The weights ``e^(d0 - |u|) / (1 + e^-|u|)^2`` of the keys ``a .. b - 1`` of a query's near
    window, its left-out key ``ex`` masked (0): ``e^-|u| = e^(-(q - k_c) / h) e^((k_j - k_c) / h)``
    left of the query (up to ``mid``, its first key right of it) and
    ``e^((q - k_c) / h) e^(-(k_j - k_c) / h)`` from there, ``k_c`` the key's block anchor (keys
    ``up``, ``down``: :func:`nadaraya.backends.logistic._blocks`), an ``exp`` per block."""
    e0 = math.exp(min(d0, 700.0))  # a kept near key has d0 <= |u| <= T
    m_ = max(min(mid, b), a)
    w = np.empty(b - a)
    cur = -1
    f = 0.0
    for j in range(a, b):
        if anchor[j] != cur or j == m_:
            cur = anchor[j]
            f = math.exp(-(q - ks[cur]) * inv_h) if j < m_ else math.exp((q - ks[cur]) * inv_h)
        z = f * up[j] if j < m_ else f * down[j]
        w[j - a] = z * e0 / ((1.0 + z) * (1.0 + z))
    if a <= ex < b:
        w[ex - a] = 0.0  # masked, not subtracted
    return w


@numba.njit(cache=True, nogil=True, fastmath=_REASSOC)
def _sums0(w, s, sv, a, b, p, acc):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``acc`` = the window's ``sum w s`` and ``sum w sv`` over the keys ``a .. b - 1`` (degree 0)."""
    z = 0.0
    for j in range(a, b):
        z += w[j - a] * s[j]
    acc[0] = z
    for c in range(p):
        z = 0.0
        for j in range(a, b):
            z += w[j - a] * sv[c, j]
        acc[1 + c] = z


@numba.njit(cache=True, nogil=True, fastmath=_REASSOC)
def _moments(ks, w, s, sv, a, b, q, r, p, acc):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``acc`` = the window's sums ``sum w s u^j`` (``j <= 2r``), ``sum w sv u^j`` (``j <= r``)
    over the keys ``a .. b - 1`` (``w`` from index ``a``, ``u = k - q``), reassociated."""
    nm = 2 * r + 1
    m0 = m1 = m2 = m3 = m4 = 0.0
    for j in range(a, b):
        u = ks[j] - q
        z = w[j - a] * s[j]
        zu = z * u
        zu2 = zu * u
        m0 += z
        m1 += zu
        m2 += zu2
        if r == 2:
            zu3 = zu2 * u
            m3 += zu3
            m4 += zu3 * u
    acc[0], acc[1], acc[2] = m0, m1, m2
    if r == 2:
        acc[3], acc[4] = m3, m4
    for c in range(p):
        v0 = v1 = v2 = 0.0
        for j in range(a, b):
            u = ks[j] - q
            z = w[j - a] * sv[c, j]
            zu = z * u
            v0 += z
            v1 += zu
            if r == 2:
                v2 += zu * u
        acc[nm + c] = v0
        acc[nm + p + c] = v1
        if r == 2:
            acc[nm + 2 * p + c] = v2


@numba.njit(cache=True, nogil=True)
def near(  # type: ignore[no-untyped-def]  # pragma: no cover
    ks, anchor, up, down, s, sv, qs, lo, mid, hi, ex, d0, big, inv_h, r, p, first, last, out,
):
    """For the queries ``first .. last - 1``: ``out[i]`` += the sums of degree ``r`` (0: the
    weight and values only) of each query's near window (:func:`window_weights`; every key, an
    ``exp`` each, where ``big[i]``) but ``ex[i]``, relative to ``e^-d0[i]``; keys' weights
    ``s``, values ``sv`` (``p`` rows)."""
    c = out.shape[1]
    acc = np.zeros(c)
    for i in range(first, last):
        if d0[i] == np.inf:
            continue
        q = qs[i]
        a, b = (0, ks.size) if big[i] else (lo[i], hi[i])
        if big[i]:
            w = np.empty(b)
            for j in range(b):
                au = abs(ks[j] - q) * inv_h
                w[j] = 0.0 if j == ex[i] else math.exp(-(au - d0[i])) / (1.0 + math.exp(-au)) ** 2
        else:
            w = window_weights(ks, anchor, up, down, q, a, mid[i], b, ex[i], d0[i], inv_h)
        if r == 0:
            _sums0(w, s, sv, a, b, p, acc)
        else:
            _moments(ks, w, s, sv, a, b, q, r, p, acc)
        for t in range(c):
            out[i, t] += acc[t]
