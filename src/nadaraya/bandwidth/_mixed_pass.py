"""The leave-one-out pass of mixed data for the bandwidth search: Gaussian, degree 0 or 1 (numba).

One task per point, in ranges on the shared thread pool (:func:`nadaraya._support.jit.run_ranges`)
above :data:`nadaraya._support.jit.SERIAL_WORK` (below it, serially: at n = 500 waking threads cost
more than the pass): the log weights of every other point (the continuous columns'
Gaussian terms, the log sample weight, and the categorical factor of the pair read from a
(groups x groups) table of log factors) into a scratch row with their maximum, then one
sweep of exponentials that sums the weight, the weighted values and, for degree 1, the
moments ``sum w u``, ``sum w u u^T``, ``sum w u v`` with ``u = x_j - x_i`` exact. The same
sums as :func:`nadaraya.local.fit.partials` with ``exclude = arange(n)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from nadaraya._support.jit import exp_flushed, run_ranges, threads_for
from nadaraya.partials import Partials

__all__ = ["mixed_loo"]


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def _loo(xt, inv_h, lsw, gid, table, yt, degree, a0, a1, shift, weight, value, s1, s2, t1):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The points ``a0 .. a1 - 1`` (a range of :func:`nadaraya._support.jit.run_ranges`)."""
    dc, n = xt.shape
    p = yt.shape[0]
    buf = np.empty(n)
    ua = np.empty(n)
    for i in range(a0, a1):
        row = table[gid[i]]
        for j in range(n):
            buf[j] = lsw[j] + row[gid[j]]
        for a in range(dc):
            xa, ha = xt[a, i], inv_h[a]
            for j in range(n):
                u = (xa - xt[a, j]) * ha
                buf[j] -= 0.5 * u * u
        buf[i] = -np.inf
        top = -np.inf
        for j in range(n):
            top = max(top, buf[j])
        sh = top if top > -np.inf else 0.0
        shift[i] = top
        sw = 0.0
        for j in range(n):
            e = exp_flushed(buf[j] - sh)
            buf[j] = e
            sw += e
        weight[i] = sw
        for c in range(p):
            acc = 0.0
            for j in range(n):
                acc += buf[j] * yt[c, j]
            value[i, c] = acc
        if degree:
            for a in range(dc):
                xa = xt[a, i]
                acc = 0.0
                for j in range(n):
                    ua[j] = buf[j] * (xt[a, j] - xa)
                    acc += ua[j]
                s1[i, a] = acc
                for b in range(dc):
                    xb = xt[b, i]
                    acc = 0.0
                    for j in range(n):
                        acc += ua[j] * (xt[b, j] - xb)
                    s2[i, a, b] = acc
                for c in range(p):
                    acc = 0.0
                    for j in range(n):
                        acc += ua[j] * yt[c, j]
                    t1[i, a, c] = acc


def mixed_loo(
    xc: NDArray[np.float64], h: NDArray[np.float64], log_sw: NDArray[np.float64], group: NDArray[np.intp],
    table: NDArray[np.float64], Y: NDArray[np.float64], degree: int,
) -> Partials:
    """Leave-one-out partials of every point over the others, Gaussian kernel, degree 0 or 1.

    ``xc`` (n, dc) continuous columns, ``h`` (dc,), ``log_sw`` (n,) log sample weights,
    ``group`` (n,) each point's category tuple, ``table`` (G, G) the log categorical factor of
    a (query group, key group) pair, ``Y`` (n, p).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0], [1.0], [2.0]]); y = np.array([[1.0], [2.0], [4.0]])
    >>> p = mixed_loo(x, np.ones(1), np.zeros(3), np.zeros(3, np.intp), np.zeros((1, 1)), y, 0)
    >>> p.finalize()[:, 0].round(4).tolist()
    [2.3649, 2.5, 1.8176]
    """
    n, dc = xc.shape
    p = Y.shape[1]
    shift, weight, value = np.empty(n), np.empty(n), np.zeros((n, p))
    s1, s2, t1 = np.zeros((n, dc)), np.zeros((n, dc, dc)), np.zeros((n, dc, p))
    xt, yt = np.ascontiguousarray(xc.T), np.ascontiguousarray(Y.T)
    args = (xt, 1.0 / h, log_sw, group.astype(np.int64), table, yt, degree)
    with threads_for(float(n) * n * (dc + 3 + p + degree * (dc + 1) * (dc + p))):
        run_ranges(_loo, args, n, (shift, weight, value, s1, s2, t1), grain=16)
    return Partials(shift, weight, value, (s1, s2, t1) if degree else ())
