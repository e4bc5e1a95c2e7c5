"""The leave-one-out loss of MLKR and its gradient, from row-blocked partial sums (numba, NumPy).

For a linear map ``A`` (k, d), centred inputs ``X`` (n, d), ``Z = X A^T`` and targets ``Y``
(n, p), the Gaussian Nadaraya-Watson weights of point ``i`` on the others are

    P_ij = exp(-|z_i - z_j|^2) / W_i,  W_i = sum_{j != i} exp(-|z_i - z_j|^2),  P_ii = 0

(the softmax of ``-|z_i - z_j|^2`` over ``j``, its own term masked), the leave-one-out fit is
``yhat_i = sum_j P_ij y_j``, and the loss is ``L(A) = (1/n) sum_i |yhat_i - y_i|^2``. With
``r_i = yhat_i - y_i`` and ``c_ij = P_ij r_i . (y_j - yhat_i)``, its gradient is

    dL/dA = -(4/n) A M,   M = sum_ij c_ij (x_i - x_j)(x_i - x_j)^T
                            = X^T diag(rs + cs) X - X^T C X - (C X)^T X,

with ``rs``, ``cs`` the row and column sums of ``C`` and ``C X`` (n, d); or, when ``2k < d``,
``A M = Z^T diag(rs + cs) X - (C^T Z)^T X - (C Z)^T X`` (2k sums per pair instead of d). One
pass over the pairs gives all of it: O(n^2 (k + min(d, 2k) + p)) work and O(n (d + k + p))
memory, never the n x n matrix. The kernel takes rows a few at a time (:data:`ROWS`, so that
each key column is read once for several rows) against all keys in tiles of :data:`TILE`; per
row, the log weights are shifted by their largest (the nearest other point) before the
exponential, which is ``exp_flushed`` (vectorised; relative terms below ``e^-708`` are 0).
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import exp_flushed, run_ranges, threads_for

__all__ = ["ROWS", "TILE", "loo_loss_grad"]

#: rows of queries handled together (each key column read once for all of them)
ROWS = 4
#: keys per tile (the tile's scratch stays in the first-level cache)
TILE = 256

_FASTMATH = {"reassoc", "contract", "nsz", "arcp"}


# The inner loops run over 0-based slices of a tile (``for j in range(width)``): numba's
# ``range(j0, j1)`` over whole arrays does not vectorise.


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _distances(Zt, i0, nr, dist, best):  # pragma: no cover - compiled
    """Squared distances of rows ``i0 .. i0 + nr`` to every key (own pair +inf) and each row's smallest."""
    k, n = Zt.shape
    for r in range(nr):
        best[r] = np.inf
    for j0 in range(0, n, TILE):
        j1 = min(n, j0 + TILE)
        width = j1 - j0
        for l in range(k):
            zrow = Zt[l, j0:j1]
            for r in range(nr):
                zl = Zt[l, i0 + r]
                drow = dist[r, j0:j1]
                if l == 0:
                    for j in range(width):
                        u = zl - zrow[j]
                        drow[j] = u * u
                else:
                    for j in range(width):
                        u = zl - zrow[j]
                        drow[j] += u * u
        for r in range(nr):
            if j0 <= i0 + r < j1:
                dist[r, i0 + r] = np.inf
            drow = dist[r, j0:j1]
            m = best[r]
            for j in range(width):
                v = drow[j]
                m = v if v < m else m
            best[r] = m


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _weights(Yt, nr, dist, best, w, wsum, yh):  # pragma: no cover - compiled
    """Weights ``exp(best - dist)`` into ``w``, their sums and the weighted sums of the targets."""
    p, n = Yt.shape
    for r in range(nr):
        wsum[r] = 0.0
        for l in range(p):
            yh[r, l] = 0.0
    for j0 in range(0, n, TILE):
        j1 = min(n, j0 + TILE)
        width = j1 - j0
        for r in range(nr):
            m = best[r]
            drow = dist[r, j0:j1]
            wrow = w[r, j0:j1]
            s = 0.0
            if p == 1:  # one output: its weighted sum in the same pass
                yrow = Yt[0, j0:j1]
                acc = 0.0
                for j in range(width):
                    e = exp_flushed(m - drow[j])
                    wrow[j] = e
                    s += e
                    acc += e * yrow[j]
                yh[r, 0] += acc
            else:
                for j in range(width):
                    e = exp_flushed(m - drow[j])
                    wrow[j] = e
                    s += e
            wsum[r] += s
        for l in range(p if p > 1 else 0):
            yrow = Yt[l, j0:j1]
            for r in range(nr):
                wrow = w[r, j0:j1]
                acc = 0.0
                for j in range(width):
                    acc += wrow[j] * yrow[j]
                yh[r, l] += acc


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _pair_terms(Yt, Ft, Ht, i0, nr, w, wsum, yh, res, c, cf, rs, acc):  # pragma: no cover - compiled
    """``c_ij`` into ``c``; rows of ``C F`` into ``cf`` and row sums into ``rs``; the columns of
    ``C`` weighted by each row of ``Ht`` (at the query) added to ``acc`` (``acc[l, j] += c_ij H_il``)."""
    p, n = Yt.shape
    f = Ft.shape[0]
    h = Ht.shape[0]
    for r in range(nr):
        rs[i0 + r] = 0.0
        for l in range(f):
            cf[i0 + r, l] = 0.0
    for j0 in range(0, n, TILE):
        j1 = min(n, j0 + TILE)
        width = j1 - j0
        for r in range(nr):
            ry = 0.0
            for l in range(p):
                ry += res[r, l] * yh[r, l]
            crow = c[r, j0:j1]
            wrow = w[r, j0:j1]
            cs = acc[0, j0:j1]
            inv = 1.0 / wsum[r]
            s = 0.0
            if p == 1:  # one output: c_ij in one pass
                rl = res[r, 0]
                yrow = Yt[0, j0:j1]
                for j in range(width):
                    v = (rl * yrow[j] - ry) * wrow[j] * inv
                    crow[j] = v
                    s += v
                    cs[j] += v
            else:
                for j in range(width):
                    crow[j] = -ry
                for l in range(p):
                    rl = res[r, l]
                    yrow = Yt[l, j0:j1]
                    for j in range(width):
                        crow[j] += rl * yrow[j]
                for j in range(width):
                    v = crow[j] * wrow[j] * inv
                    crow[j] = v
                    s += v
                    cs[j] += v
            rs[i0 + r] += s
            for l in range(1, h):  # row 0 of Ht is ones: the column sums, added above
                hl = Ht[l, i0 + r]
                atile = acc[l, j0:j1]
                for j in range(width):
                    atile[j] += hl * crow[j]
        for l in range(f):
            frow = Ft[l, j0:j1]
            for r in range(nr):
                crow = c[r, j0:j1]
                total = 0.0
                for j in range(width):
                    total += crow[j] * frow[j]
                cf[i0 + r, l] += total


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _part(Zt, Yt, Ft, Ht, edges, t0, t1, cf, rs, acc_parts, losses):  # pragma: no cover - compiled
    """Rows ``edges[t] .. edges[t + 1]`` for each part ``t`` in ``t0 .. t1``: the part's loss,
    its rows of ``C F`` and row sums, and its weighted column sums in ``acc_parts[t]``."""
    n = Zt.shape[1]
    p = Yt.shape[0]
    dist = np.empty((ROWS, n))
    w = np.empty((ROWS, n))
    best = np.empty(ROWS)
    wsum = np.empty(ROWS)
    yh = np.empty((ROWS, p))
    res = np.empty((ROWS, p))
    for t in range(t0, t1):
        loss = 0.0
        for i0 in range(edges[t], edges[t + 1], ROWS):
            nr = min(ROWS, edges[t + 1] - i0)
            _distances(Zt, i0, nr, dist, best)
            _weights(Yt, nr, dist, best, w, wsum, yh)
            for r in range(nr):
                for l in range(p):
                    yh[r, l] /= wsum[r]
                    res[r, l] = yh[r, l] - Yt[l, i0 + r]
                    loss += res[r, l] * res[r, l]
            _pair_terms(Yt, Ft, Ht, i0, nr, w, wsum, yh, res, dist, cf, rs, acc_parts[t])
        losses[t] = loss


def loo_loss_grad(
    A: NDArray[np.float64], X: NDArray[np.float64], Y: NDArray[np.float64]
) -> tuple[float, NDArray[np.float64]]:
    """The leave-one-out MSE of Gaussian Nadaraya-Watson on ``X A^T`` and its gradient in ``A``.

    Parameters
    ----------
    A : ndarray of shape (k, d)
        The linear map; the kernel is ``exp(-|A (x_i - x_j)|^2)``.
    X : ndarray of shape (n, d)
        Inputs (n >= 2); the loss does not change when they are shifted, and they are centred here.
    Y : ndarray of shape (n, p)
        Targets.

    Returns
    -------
    loss : float
        ``(1/n) sum_i |yhat_i - y_i|^2``, ``yhat_i`` the fit at ``x_i`` from the other points.
    grad : ndarray of shape (k, d)

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(8.0).reshape(4, 2)
    >>> loss, grad = loo_loss_grad(np.eye(2), X, X[:, :1])
    >>> round(loss, 6), grad.shape
    (2.0, (2, 2))
    """
    A = np.ascontiguousarray(A, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    n, d = X.shape
    k = A.shape[0]
    Xc = X - X.mean(axis=0)
    Z = Xc @ A.T
    Zt = np.ascontiguousarray(Z.T)
    Yt = np.ascontiguousarray(Y.T)
    by_z = 2 * k < d  # 2k + 1 passes over the pairs instead of d + 1
    ones = np.ones((1, n))
    Ft = Zt if by_z else np.ascontiguousarray(Xc.T)
    Ht = np.vstack([ones, Zt]) if by_z else ones
    work = float(n) * n * (k + Ft.shape[0] + Ht.shape[0] + Y.shape[1] + 20)
    parts = max(1, min(-(-n // ROWS), 4 * numba.get_num_threads()))
    edges = np.linspace(0, n, parts + 1).astype(np.int64)
    cf = np.empty((n, Ft.shape[0]))
    rs = np.empty(n)
    acc_parts = np.zeros((parts, *Ht.shape))
    losses = np.zeros(parts)
    with threads_for(work):
        run_ranges(_part, (Zt, Yt, Ft, Ht, edges), parts, (cf, rs, acc_parts, losses), grain=1)
    acc = acc_parts.sum(axis=0)
    cs = acc[0]
    if by_z:  # A M = Z^T diag(rs + cs) X - (C^T Z)^T X - (C Z)^T X
        AM = (Z * (rs + cs)[:, None]).T @ Xc - (acc[1:] + cf.T) @ Xc
    else:  # M = X^T diag(rs + cs) X - X^T C X - (C X)^T X
        xcx = Xc.T @ cf
        AM = A @ ((Xc * (rs + cs)[:, None]).T @ Xc - xcx - xcx.T)
    return float(losses.sum()) / n, (-4.0 / n) * AM
