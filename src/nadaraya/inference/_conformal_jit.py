"""The numba loops of jackknife+: each query's leave-one-out predictions and their order statistics."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

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
    """Fill ``w`` with the kernel weights of query ``q`` (relative to the largest for the
    log-domain kernels; constants dropped, as they cancel)."""
    n, d = X.shape
    if code < 10:
        lmax = -np.inf
        for j in range(n):
            acc = 0.0
            if code != 2:
                for k in range(d):
                    u = (q[k] - X[j, k]) / h[k]
                    acc -= 0.5 * u * u if code == 0 else abs(u)
            w[j] = acc
            if s[j] > 0.0 and acc > lmax:
                lmax = acc
        for j in range(n):
            w[j] = s[j] * math.exp(w[j] - lmax) if s[j] > 0.0 else 0.0
        return
    w[:] = 0.0
    # the window of the first feature (the keys are sorted by it), a little wider than the
    # support so that the test |u| <= 1 below decides each key
    lo = np.searchsorted(X[:, 0], q[0] - h[0] * (1.0 + 1e-12), side="left")
    hi = np.searchsorted(X[:, 0], q[0] + h[0] * (1.0 + 1e-12), side="right")
    for j in range(lo, hi):
        if s[j] <= 0.0:
            continue
        acc = s[j]
        for k in range(d):
            acc *= _profile(code, (q[k] - X[j, k]) / h[k])
            if acc == 0.0:
                break
        w[j] = acc


@njit(cache=True, nogil=True)
def _select(v, k, center, dmax, buf):  # pragma: no cover - compiled
    """The ``k``-th smallest (from 0) of ``v``, knowing that it lies within ``dmax`` of
    ``center``: the values below the bracket are counted, those inside selected from."""
    n = v.size
    slack = dmax + 1e-13 * (abs(center) + dmax) + 1e-300
    lo_b, hi_b = center - slack, center + slack
    below = 0
    m = 0
    for i in range(n):
        x = v[i]
        if x < lo_b:
            below += 1
        elif x <= hi_b:
            buf[m] = x
            m += 1
    if below <= k < below + m:
        return np.partition(buf[:m], k - below)[k - below]
    return np.partition(v.copy(), k)[k]  # not reached with exact brackets; kept as the safe path


@njit(cache=True, nogil=True)
def _row_bounds(w, y, R, Rs, scale, kl, ku, forced, hi, lo, buf):  # pragma: no cover - compiled
    """Jackknife+ bounds of one query from its weights ``w``: ``(lower, upper, top)``, ``top``
    >= 0 when the model without the heaviest key must be refitted (NaN bounds then).

    Each leave-one-out prediction is ``mu + w_i (mu - y_i) / (W - w_i)`` except for the
    heaviest key, whose model is the masked sum of the others: ``W - w_i >= W / 2`` for every
    other key, so no subtraction loses more than a bit."""
    n = w.size
    W = 0.0
    S = 0.0
    Wm = 0.0
    Sm = 0.0
    top = -1
    wtop = 0.0
    for j in range(n):
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
    for i in range(n):
        if i == top:
            mi = mtop
        elif w[i] == 0.0:
            mi = mu
        else:
            mi = mu + w[i] * (mu - y[i]) / (W - w[i])
        r = scale * R[i]
        hi[i] = mi + r
        lo[i] = mi - r
        dm = abs(mi - mu)
        if dm > dmax:
            dmax = dm
    upper = _select(hi, ku, mu + scale * Rs[ku], dmax, buf)
    lower = _select(lo, kl, mu - scale * Rs[n - 1 - kl], dmax, buf)
    return lower, upper, -1


@njit(cache=True, nogil=True)
def jackknife_queries(Q, X, h, s, code, y, R, Rs, scales, kl, ku, forced, a, b, lower, upper, tops):  # pragma: no cover
    """Rows ``a:b`` of the queries ``Q``: weights computed here (a kernel of
    :data:`KERNEL_CODES`); ``tops[q]`` -2 for an empty window, >= 0 for a refit, else -1."""
    n = X.shape[0]
    w = np.empty(n)
    hi = np.empty(n)
    lo = np.empty(n)
    buf = np.empty(n)
    for q in range(a, b):
        _weights(Q[q], X, h, s, code, w)
        lower[q], upper[q], tops[q] = _row_bounds(w, y, R, Rs, scales[q], kl, ku, forced[q], hi, lo, buf)


@njit(cache=True, nogil=True)
def jackknife_rows(A, y, R, Rs, scales, kl, ku, forced, a, b, lower, upper, tops):  # pragma: no cover
    """As :func:`jackknife_queries`, from given rows of weights ``A`` (the primitive's)."""
    n = A.shape[1]
    hi = np.empty(n)
    lo = np.empty(n)
    buf = np.empty(n)
    for q in range(a, b):
        lower[q], upper[q], tops[q] = _row_bounds(A[q], y, R, Rs, scales[q], kl, ku, forced[q], hi, lo, buf)
