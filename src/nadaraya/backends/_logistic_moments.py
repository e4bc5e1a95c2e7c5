"""The logistic backend's local-fit moments: its near windows and tails' series carrying ``sum w u^j``.

Each term of the tails' series is a Laplacian weight at bandwidth ``h / k``; its running sums
carry the moments about their anchor key and move them by the binomial expansion, as the laplace
backend does (:func:`nadaraya.backends.laplace._carry`: on one side every term of the expansion
has one sign). A state row holds ``M_j = sum w (k - a)^j`` for ``j = 0 .. 2r``, then
``MV_j = sum w (k - a)^j v`` for ``j = 0 .. r``, ``p`` columns each. The near windows sum
``w u^j`` key by key (``u = k - q``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from nadaraya.backends.laplace import _carry, _factor

__all__ = ["far_side", "near"]


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
        kq = min(kmax, math.ceil((lead + 2.0 * math.log1p(math.exp(-x))) / x))
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
def near(ks, terms_, qs, lo, hi, ex, d0, big, inv_h, r, p, first, last, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """For the queries ``first .. last - 1``: ``out[i]`` += the moments of each query's near
    window (every key where ``big[i]``) but ``ex[i]``, relative to ``e^-d0[i]``, key by key."""
    nm = 2 * r + 1
    for i in range(first, last):
        if d0[i] == np.inf:
            continue
        a, b = (0, ks.size) if big[i] else (lo[i], hi[i])
        for j in range(a, b):
            if j == ex[i]:
                continue
            u = ks[j] - qs[i]
            au = abs(u) * inv_h
            w = math.exp(-(au - d0[i])) / (1.0 + math.exp(-au)) ** 2
            power = w
            for t in range(nm):
                out[i, t] += power * terms_[j, 0]
                if t <= r:
                    for cc in range(p):
                        out[i, nm + t * p + cc] += power * terms_[j, nm + cc]
                power *= u
