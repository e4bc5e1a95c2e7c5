"""The leave-one-out pass of mixed data for the bandwidth search: Gaussian, degree 0 or 1 (numba).

One task per point, in ranges of the points ordered by category tuple, on the shared thread pool
(:func:`nadaraya._support.jit.run_ranges`) above :data:`nadaraya._support.jit.SERIAL_WORK`; below
it (at n = 500, say) the pass runs on the calling thread, with no thread woken. For each group of
points that share their categories, the log sample weight plus the categorical factor of the pair
(read from a (groups x groups) table of log factors) of every key, once per group; for each point
of the group, the log weights of every other point (that row minus the continuous columns'
Gaussian terms) into a scratch row with their maximum, then one sweep of exponentials that sums
the weight, the weighted values and, for degree 1, the moments ``sum w u``, ``sum w u u^T``,
``sum w u v`` with ``u = x_j - x_i`` exact (one continuous column and one value column, the
common case, in registers). The same sums as :func:`nadaraya.local.fit.partials` with
``exclude = arange(n)``: each point's own term is masked (its log weight set to ``-inf``), never
subtracted.

:func:`mixed_loo_grad` (degree 0) adds the sums of the CV's exact
gradient along each ``log h`` and each lambda, so that L-BFGS-B takes one pass per step where
finite differences take one per column more.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from nadaraya._support.jit import exp_flushed, run_ranges
from nadaraya.partials import Partials

__all__ = ["mixed_loo"]


@njit(cache=True, nogil=True, inline="always", fastmath={"contract", "reassoc"})
def _weigh(buf, sh, yt, i, weight, value):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The log weights ``buf`` to weights under the shift ``sh`` (in place), and point ``i``'s
    weight and weighted values from them."""
    sw = 0.0
    for j in range(buf.size):
        e = exp_flushed(buf[j] - sh)
        buf[j] = e
        sw += e
    weight[i] = sw
    for c in range(yt.shape[0]):
        yc = yt[c]
        acc = 0.0
        for j in range(buf.size):
            acc += buf[j] * yc[j]
        value[i, c] = acc


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def _sums(xt, i, buf, ua, sh, yt, degree, weight, value, s1, s2, t1):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Point ``i``'s sums from its log weights ``buf`` (its own masked) under the shift ``sh``."""
    dc, n = xt.shape
    p = yt.shape[0]
    if p == 1 and (degree == 0 or dc == 1):
        y0 = yt[0]
        sw = 0.0
        sv = 0.0
        if degree == 0:
            for j in range(n):
                e = exp_flushed(buf[j] - sh)
                sw += e
                sv += e * y0[j]
        else:
            xa = xt[0, i]
            x0 = xt[0]
            m1 = 0.0
            m2 = 0.0
            mv = 0.0
            for j in range(n):
                e = exp_flushed(buf[j] - sh)
                u = x0[j] - xa
                eu = e * u
                sw += e
                sv += e * y0[j]
                m1 += eu
                m2 += eu * u
                mv += eu * y0[j]
            s1[i, 0] = m1
            s2[i, 0, 0] = m2
            t1[i, 0, 0] = mv
        weight[i] = sw
        value[i, 0] = sv
        return
    _weigh(buf, sh, yt, i, weight, value)
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


@njit(cache=True, nogil=True, inline="always", fastmath={"contract", "reassoc"})
def _log_row(xt, inv_h, lsw, gid, table, i, g, g_row, base, buf):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Point ``i``'s log weights into ``buf``: its group's row ``base`` (each key's log sample
    weight plus the pair's log categorical factor, made again only where the group differs from
    ``g_row``) less the continuous columns' Gaussian terms, its own term masked (``-inf``).
    Returns the row's maximum."""
    dc, n = xt.shape
    if g != g_row:
        row = table[g]
        for j in range(n):
            base[j] = lsw[j] + row[gid[j]]
    for a in range(dc - 1):
        xa, ha = xt[a, i], inv_h[a]
        xr = xt[a]
        src = base if a == 0 else buf
        for j in range(n):
            u = (xa - xr[j]) * ha
            buf[j] = src[j] - 0.5 * u * u
    # the last column, with the maximum over every key but the point's own (masked after)
    xa, ha = xt[dc - 1, i], inv_h[dc - 1]
    xr = xt[dc - 1]
    src = base if dc == 1 else buf
    top = -np.inf
    for j in range(i):
        u = (xa - xr[j]) * ha
        v = src[j] - 0.5 * u * u
        buf[j] = v
        top = max(top, v)
    for j in range(i + 1, n):
        u = (xa - xr[j]) * ha
        v = src[j] - 0.5 * u * u
        buf[j] = v
        top = max(top, v)
    buf[i] = -np.inf  # the point's own term, masked
    return top


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def _loo(xt, inv_h, lsw, gid, order, table, yt, degree, a0, a1, shift, weight, value, s1, s2, t1):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The points ``order[a0 .. a1 - 1]`` (a range of :func:`nadaraya._support.jit.run_ranges`)."""
    n = xt.shape[1]
    base = np.empty(n)  # the log sample weight and categorical factor of each key, for one group
    buf = np.empty(n)
    ua = np.empty(n)
    g_row = -1
    for r in range(a0, a1):
        i = order[r]
        top = _log_row(xt, inv_h, lsw, gid, table, i, gid[i], g_row, base, buf)
        g_row = gid[i]
        shift[i] = top
        _sums(xt, i, buf, ua, top if top > -np.inf else 0.0, yt, degree, weight, value, s1, s2, t1)


def mixed_loo(
    xc: NDArray[np.float64], h: NDArray[np.float64], log_sw: NDArray[np.float64], group: NDArray[np.intp],
    table: NDArray[np.float64], Y: NDArray[np.float64], degree: int, order: NDArray[np.int64] | None = None,
) -> Partials:
    """Leave-one-out partials of every point over the others, Gaussian kernel, degree 0 or 1.

    ``xc`` (n, dc) continuous columns (dc >= 1), ``h`` (dc,), ``log_sw`` (n,) log sample weights,
    ``group`` (n,) each point's category tuple, ``table`` (G, G) the log categorical factor of
    a (query group, key group) pair, ``Y`` (n, p); ``order`` (n,), the points sorted by group
    (``argsort(group, kind="stable")``, computed when not given: a search passes it once).

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
    gid = np.ascontiguousarray(group, dtype=np.int64)
    if order is None:
        order = np.argsort(gid, kind="stable")  # a group's key row is made once per range
    args = (xt, 1.0 / h, log_sw, gid, order, table, yt, degree)
    work = float(n) * n * (dc + 3 + p + degree * (dc + 1) * (dc + p))
    run_ranges(_loo, args, n, (shift, weight, value, s1, s2, t1), grain=16, work=work)
    return Partials(shift, weight, value, (s1, s2, t1) if degree else ())


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def _loo_grad(xt, inv_h, lsw, gid, order, table, dtab, yt, a0, a1, shift, weight, value, A, B, E, EY):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Degree 0 with the sums of the criterion's gradient, for the points ``order[a0 .. a1 - 1]``:
    besides the weight and the values, per continuous column ``a`` the sums ``sum w u_a^2`` and
    ``sum w u_a^2 y`` (``u_a`` in bandwidths: the derivatives along ``log h_a``), and per
    categorical column ``c`` the sums ``sum w D_c`` and ``sum w D_c y``, ``D_c`` the derivative
    of the pair's log factor along its lambda (``dtab[c]``, by (query group, key group))."""
    dc, n = xt.shape
    p = yt.shape[0]
    C = dtab.shape[0]
    base = np.empty(n)
    drow = np.empty((C, n))
    buf = np.empty(n)
    wu = np.empty(n)
    g_row = -1
    for r in range(a0, a1):
        i = order[r]
        g = gid[i]
        if g != g_row:
            for c in range(C):
                dr = dtab[c, g]
                for j in range(n):
                    drow[c, j] = dr[gid[j]]
        top = _log_row(xt, inv_h, lsw, gid, table, i, g, g_row, base, buf)
        g_row = g
        shift[i] = top
        _weigh(buf, top if top > -np.inf else 0.0, yt, i, weight, value)
        for a in range(dc + C):
            acc = 0.0
            if a < dc:
                xa, ha = xt[a, i], inv_h[a]
                xr = xt[a]
                for j in range(n):
                    u = (xa - xr[j]) * ha
                    q = buf[j] * u * u
                    wu[j] = q
                    acc += q
                A[i, a] = acc
            else:
                dr = drow[a - dc]
                for j in range(n):
                    q = buf[j] * dr[j]
                    wu[j] = q
                    acc += q
                E[i, a - dc] = acc
            for c in range(p):
                yc = yt[c]
                acc = 0.0
                for j in range(n):
                    acc += wu[j] * yc[j]
                if a < dc:
                    B[i, a, c] = acc
                else:
                    EY[i, a - dc, c] = acc


def mixed_loo_grad(
    xc: NDArray[np.float64], h: NDArray[np.float64], log_sw: NDArray[np.float64], group: NDArray[np.intp],
    table: NDArray[np.float64], dtab: NDArray[np.float64], Y: NDArray[np.float64],
    order: NDArray[np.int64] | None = None,
) -> tuple[Partials, NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """:func:`mixed_loo` of degree 0 with the sums of the leave-one-out fit's derivatives:
    ``(partials, A, B, E, EY)``, all relative to each point's shift: ``A`` (n, dc)
    ``sum_j w_ij u_ija^2`` and ``B`` (n, dc, p) the same times ``y_j`` (``u = (x_i - x_j) / h``),
    ``E`` (n, C) ``sum_j w_ij D_c[g_i, g_j]`` and ``EY`` (n, C, p) the same times ``y_j``, for
    the (C, G, G) finite derivatives ``dtab`` of the categorical columns' log factors.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0], [1.0], [2.0]]); y = np.array([[1.0], [2.0], [4.0]])
    >>> p, A, B, E, EY = mixed_loo_grad(x, np.ones(1), np.zeros(3), np.zeros(3, np.intp),
    ...                                 np.zeros((1, 1)), np.ones((1, 1, 1)), y)
    >>> p.finalize()[:, 0].round(4).tolist(), bool(np.allclose(E[:, 0], p.weight))
    ([2.3649, 2.5, 1.8176], True)
    """
    n, dc = xc.shape
    p = Y.shape[1]
    C = dtab.shape[0]
    gid = np.ascontiguousarray(group, dtype=np.int64)
    if order is None:
        order = np.argsort(gid, kind="stable")
    shift, weight, value = np.empty(n), np.empty(n), np.zeros((n, p))
    A, B, E, EY = np.zeros((n, dc)), np.zeros((n, dc, p)), np.zeros((n, C)), np.zeros((n, C, p))
    xt, yt = np.ascontiguousarray(xc.T), np.ascontiguousarray(Y.T)
    args = (xt, 1.0 / h, log_sw, gid, order, table, np.ascontiguousarray(dtab, dtype=np.float64), yt)
    work = float(n) * n * (3 * dc + 3 + p + (dc + C) * (1 + p))
    run_ranges(_loo_grad, args, n, (shift, weight, value, A, B, E, EY), grain=16, work=work)
    return Partials(shift, weight, value), A, B, E, EY
