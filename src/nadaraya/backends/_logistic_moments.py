"""The logistic backend's local-fit moments: its near windows and tails' series carrying ``sum w u^j``.

Each term of the tails' series is a Laplacian weight at bandwidth ``h / k``; its running sums
carry the moments about their anchor key and move them by the binomial expansion, as the laplace
backend does (:func:`nadaraya.backends.laplace._carry`: on one side every term of the expansion
has one sign). A state row holds ``M_j = sum w (k - a)^j`` for ``j = 0 .. 2r``, then
``MV_j = sum w (k - a)^j v`` for ``j = 0 .. r``, ``p`` columns each. The near windows sum
``w u^j`` key by key (``u = k - q``), their weights an ``exp`` per block of keys.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from nadaraya.backends.laplace import _carry, _factor

__all__ = ["cut_terms", "far_side", "near", "window_weights"]


@numba.njit(cache=True, nogil=True, inline="always")
def cut_terms(x, lead, kmax):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The series' terms a query takes when its nearest far key is ``x`` bandwidths away: the
    least ``K`` (at most ``kmax``) with ``K >= (lead + 2 log1p(e^-x)) / x``, the cut of
    :func:`nadaraya.backends.logistic.terms` with ``log(K + 1)`` bounded by ``log(kmax + 1)``
    inside ``lead``."""
    return min(kmax, math.ceil((lead + 2.0 * math.log1p(math.exp(-x))) / x))


@numba.njit(cache=True, nogil=True)
def far_side(ks, terms_, qs, lo, d0, inv_h, kmax, lead, r, p, binom, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """:func:`nadaraya.backends.logistic._far_side` with the moments of degree ``r``: each
    term's running sums about the last key, moved to the query before they are added."""
    c = terms_.shape[1]
    state = np.zeros((kmax, c))
    tmp = np.empty(c)
    j = 0
    for i in range(qs.size):
        while j < lo[i]:
            if j > 0:
                gap = (ks[j] - ks[j - 1]) * inv_h
                for k in range(kmax):
                    x = (k + 1) * gap
                    _carry(state[k], ks[j - 1] - ks[j], x, _factor(x), r, p, binom)
                    for t in range(c):
                        state[k, t] += terms_[j, t]
            else:
                for k in range(kmax):
                    for t in range(c):
                        state[k, t] = terms_[0, t]
            j += 1
        if lo[i] == 0 or d0[i] == np.inf:
            continue
        a = lo[i] - 1
        x = (qs[i] - ks[a]) * inv_h
        kq = cut_terms(x, lead, kmax)
        coef = math.exp(-(x - d0[i]))
        b = math.exp(-x)
        for k in range(kq):
            if coef == 0.0:
                break
            for t in range(c):
                tmp[t] = state[k, t]
            _carry(tmp, ks[a] - qs[i], 0.0, 0.0, r, p, binom)  # about the query, no factor
            sgn = (k + 1) * (1.0 if k % 2 == 0 else -1.0)
            for t in range(c):
                out[i, t] += sgn * coef * tmp[t]
            coef *= b


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


@numba.njit(cache=True, nogil=True)
def near(  # type: ignore[no-untyped-def]  # pragma: no cover
    ks, anchor, up, down, terms_, qs, lo, mid, hi, ex, d0, big, inv_h, r, p, first, last, out,
):
    """For the queries ``first .. last - 1``: ``out[i]`` += the moments of each query's near
    window (:func:`window_weights`; every key, an ``exp`` each, where ``big[i]``) but ``ex[i]``,
    relative to ``e^-d0[i]``."""
    nm = 2 * r + 1
    c = terms_.shape[1]
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
        acc[:] = 0.0
        for j in range(a, b):
            u = ks[j] - q
            power = w[j - a]
            s0 = terms_[j, 0]
            for t in range(nm):
                acc[t] += power * s0
                if t <= r:
                    for cc in range(p):
                        acc[nm + t * p + cc] += power * terms_[j, nm + cc]
                power *= u
        for t in range(c):
            out[i, t] += acc[t]
