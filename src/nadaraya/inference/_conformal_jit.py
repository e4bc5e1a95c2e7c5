"""The numba loops of jackknife+: each query's leave-one-out predictions and their order statistics."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from nadaraya._support.jit import exp_fast

__all__ = ["KERNEL_CODES", "jackknife_queries", "jackknife_rows"]

#: kernels whose weights the loops compute themselves (others come as rows from the primitive);
#: codes below 10 are log-domain kernels, the rest compact (zero for |u| > 1)
KERNEL_CODES = {"gaussian": 0, "laplacian": 1, "constant": 2, "epanechnikov": 10, "boxcar": 11,
                "triangular": 12, "biweight": 13, "triweight": 14, "tricube": 15}

#: a masked sum of weights below this (relative to the largest weight, 1 or less) has lost its
#: relative precision to underflow: that query's model without its heaviest key is refitted
_TINY = 1e-280


@njit(cache=True, nogil=True)
def _profile(code: int, u: float) -> float:  # pragma: no cover - compiled
    a = abs(u)
    if a > 1.0:
        return 0.0
    if code == 10:
        return 1.0 - u * u
    if code == 11:
        return 1.0
    if code == 12:
        return 1.0 - a
    if code == 13:
        return (1.0 - u * u) ** 2
    if code == 14:
        return (1.0 - u * u) ** 3
    return (1.0 - a * a * a) ** 3


@njit(cache=True, nogil=True)
def _weights(q, X, h, s, code, w):  # pragma: no cover - compiled
    """Fill ``w[a:b]`` with the kernel weights of query ``q`` and return ``(a, b)``: every key
    for the log-domain kernels (weights relative to the largest), the window of the first
    feature for the compact ones (the keys are sorted by it; zero weight outside).
    Constants are dropped: they cancel."""
    n, d = X.shape
    if code < 10:
        # relative to the largest log weight over all keys (weight 0 included: no overflow)
        if code == 2:
            w[:n] = s
            return 0, n
        if d == 1:  # one feature: a loop the compiler vectorises
            q0 = q[0]
            ih = 1.0 / h[0]
            x0 = X[:, 0]
            for j in range(n):
                u = (q0 - x0[j]) * ih
                w[j] = -0.5 * u * u if code == 0 else -abs(u)
        else:
            for j in range(n):
                acc = 0.0
                for k in range(d):
                    u = (q[k] - X[j, k]) / h[k]
                    acc -= 0.5 * u * u if code == 0 else abs(u)
                w[j] = acc
        lmax = w[0]
        for j in range(1, n):
            lmax = max(lmax, w[j])
        for j in range(n):
            w[j] = s[j] * exp_fast(w[j] - lmax)
        return 0, n
    # a little wider than the support, so that the test |u| <= 1 below decides each key
    lo = np.searchsorted(X[:, 0], q[0] - h[0] * (1.0 + 1e-12), side="left")
    hi = np.searchsorted(X[:, 0], q[0] + h[0] * (1.0 + 1e-12), side="right")
    for j in range(lo, hi):
        acc = s[j]
        for k in range(d):
            if acc == 0.0:
                break
            acc *= _profile(code, (q[k] - X[j, k]) / h[k])
        w[j] = acc
    return lo, hi


@njit(cache=True, nogil=True)
def _first_at_least(mu, scale, Rs, x, strict):  # pragma: no cover - compiled
    """The first position ``j`` of the ascending ``Rs`` with ``mu + scale Rs[j] >= x``
    (``> x`` when ``strict``): the sums are monotone in ``j``."""
    a, b = 0, Rs.size
    while a < b:
        c = (a + b) // 2
        t = mu + scale * Rs[c]
        if t > x or (t == x and not strict):
            b = c
        else:
            a = c + 1
    return a


@njit(cache=True, nogil=True)
def _kth(mw, sign, k, mu, scale, R, Rs, order, wlo, whi, dmax, buf):  # pragma: no cover - compiled
    """The ``k``-th smallest (from 0) of ``m_i + scale R_i`` over all keys, ``m_i = sign mw[i - wlo]``
    in the window ``wlo:whi`` and ``mu`` outside it. It lies within ``dmax`` of
    ``mu + scale Rs[k]``: the values below that bracket are counted, those inside selected from."""
    n = Rs.size
    center = mu + scale * Rs[k]
    slack = dmax + 1e-13 * (abs(center) + dmax) + 1e-300
    lo_b, hi_b = center - slack, center + slack
    j0 = _first_at_least(mu, scale, Rs, lo_b, False)
    j1 = _first_at_least(mu, scale, Rs, hi_b, True)
    below = j0
    m = 0
    for j in range(j0, j1):  # the keys outside the window: mu + scale R_i exactly
        i = order[j]
        if i < wlo or i >= whi:
            buf[m] = mu + scale * Rs[j]
            m += 1
    for i in range(wlo, whi):
        if mu + scale * R[i] < lo_b:
            below -= 1  # counted above as a key outside the window
        v = sign * mw[i - wlo] + scale * R[i]
        if v < lo_b:
            below += 1
        elif v <= hi_b:
            buf[m] = v
            m += 1
    if below <= k < below + m:
        return np.partition(buf[:m], k - below)[k - below]
    for i in range(n):  # the safe path: every value (not reached with exact brackets)
        buf[i] = sign * mw[i - wlo] + scale * R[i] if wlo <= i < whi else mu + scale * R[i]
    return np.partition(buf[:n], k)[k]


@njit(cache=True, nogil=True)
def _row_bounds(w, wlo, whi, y, R, Rs, order, scale, kl, ku, forced, mw, buf):  # pragma: no cover - compiled
    """Jackknife+ bounds of one query from its weights ``w[wlo:whi]`` (zero elsewhere):
    ``(lower, upper, top)``, ``top`` >= 0 when the model without the heaviest key must be
    refitted, -2 when no key has weight (NaN bounds then).

    Each leave-one-out prediction is ``mu + w_i (mu - y_i) / (W - w_i)`` except for the
    heaviest key, whose model is the masked sum of the others: ``W - w_i >= W / 2`` for every
    other key, so no subtraction loses more than a bit."""
    W = 0.0
    S = 0.0
    Wm = 0.0
    Sm = 0.0
    top = -1
    wtop = 0.0
    for j in range(wlo, whi):
        a = w[j]
        if a == 0.0:
            continue
        W += a
        S += a * y[j]
        if a > wtop:
            if top >= 0:
                Wm += wtop
                Sm += wtop * y[top]
            top = j
            wtop = a
        else:
            Wm += a
            Sm += a * y[j]
    if top < 0:
        return np.nan, np.nan, -2
    mu = S / W
    if not math.isnan(forced):
        mtop = forced
    elif Wm > _TINY * wtop:
        mtop = Sm / Wm
    else:
        return np.nan, np.nan, top
    dmax = 0.0
    for i in range(wlo, whi):
        if i == top:
            mi = mtop
        elif w[i] == 0.0:
            mi = mu
        else:
            mi = mu + w[i] * (mu - y[i]) / (W - w[i])
        mw[i - wlo] = mi
        dm = abs(mi - mu)
        if dm > dmax:
            dmax = dm
    n = Rs.size
    upper = _kth(mw, 1.0, ku, mu, scale, R, Rs, order, wlo, whi, dmax, buf)
    # the lower bound: the (n - 1 - kl)-th smallest of -(m_i - scale R_i) = -m_i + scale R_i
    lower = -_kth(mw, -1.0, n - 1 - kl, -mu, scale, R, Rs, order, wlo, whi, dmax, buf)
    return lower, upper, -1


@njit(cache=True, nogil=True)
def jackknife_queries(Q, X, h, s, code, y, R, Rs, order, scales, kl, ku, forced, a, b,
                      lower, upper, tops):  # pragma: no cover - compiled
    """Rows ``a:b`` of the queries ``Q``: weights computed here (a kernel of
    :data:`KERNEL_CODES`); ``tops[q]`` -2 for an empty window, >= 0 for a refit, else -1."""
    n = X.shape[0]
    w = np.empty(n)
    mw = np.empty(n)
    buf = np.empty(n)
    for q in range(a, b):
        wlo, whi = _weights(Q[q], X, h, s, code, w)
        lower[q], upper[q], tops[q] = _row_bounds(w, wlo, whi, y, R, Rs, order, scales[q], kl, ku, forced[q],
                                                  mw, buf)


@njit(cache=True, nogil=True)
def jackknife_rows(A, y, R, Rs, order, scales, kl, ku, forced, a, b, lower, upper, tops):  # pragma: no cover
    """As :func:`jackknife_queries`, from given rows of weights ``A`` (the primitive's)."""
    n = A.shape[1]
    mw = np.empty(n)
    buf = np.empty(n)
    for q in range(a, b):
        lower[q], upper[q], tops[q] = _row_bounds(A[q], 0, n, y, R, Rs, order, scales[q], kl, ku, forced[q],
                                                  mw, buf)


@njit(cache=True, nogil=True)
def loo_fits(X, h, s, code, y, a, b, out):  # pragma: no cover - compiled
    """Leave-one-out fits at the training points ``a:b``: each point's own term masked from the
    sums (never subtracted); NaN where the others' weights are empty or underflow (refitted)."""
    n = X.shape[0]
    w = np.empty(n)
    for i in range(a, b):
        wlo, whi = _weights(X[i], X, h, s, code, w)
        W = 0.0
        S = 0.0
        big = 0.0
        for j in range(wlo, min(i, whi)):  # every key but i: two ranges, no test per key
            W += w[j]
            S += w[j] * y[j]
            big = max(big, w[j])
        for j in range(max(i + 1, wlo), whi):
            W += w[j]
            S += w[j] * y[j]
            big = max(big, w[j])
        out[i] = S / W if W > 0.0 and _TINY * max(big, w[i]) < W else np.nan
