"""Local polynomial fits at one point, in 1-D, with nprobust's residuals and sandwich variances.

The building blocks of :mod:`nadaraya.inference.robust`, :mod:`nadaraya.inference.rbc` and
:mod:`nadaraya.bandwidth.plugin`, written as R's and Python's ``nprobust`` (Calonico, Cattaneo
and Farrell) define them:

- a fit of order ``o`` at ``c`` with bandwidth ``h`` uses the points where the kernel weight
  ``K((x_i - c) / h)`` is positive (its *window*); its design has columns ``((x_i - c) / h)^j``
  (nprobust's raw powers ``(x_i - c)^j`` give the same fit; the scaled ones are better
  conditioned, and every quantity used here is invariant to the change);
- the residuals ``"hc0"``..``"hc3"`` are those of the local fit itself, at the window's points
  (``hc1`` scaled by ``sqrt(n_w / (n_w - o - 1))``, ``n_w`` the window's size; ``hc2``/``hc3``
  by the local leverage); ``"nn"`` are nearest-neighbour residuals
  ``sqrt(J / (J + 1)) (y_i - mean of its J >= nnmatch nearest neighbours)`` within the window,
  ties in x matched as one group;
- the sandwich is ``sum_i r_i^2 a_i a_i^T`` or, with clusters, ``w sum_g s_g s_g^T`` with
  ``s_g = sum_{i in g} r_i a_i`` and ``w = (n_w - 1) / (n_w - k) * G / (G - 1)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["PointFit", "duplicates", "point_fit", "residuals", "sandwich", "window"]

RULES = ("hc0", "hc1", "hc2", "hc3", "nn")


def duplicates(x: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """For sorted ``x``: how many points share each point's value, and its rank among them (from 1).

    Examples
    --------
    >>> d, i = duplicates(np.array([0.0, 1.0, 1.0, 2.0]))
    >>> d.tolist(), i.tolist()
    ([1, 2, 2, 1], [1, 1, 2, 1])
    """
    n = x.shape[0]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
    counts = np.diff(np.r_[starts, n])
    dups = np.repeat(counts, counts).astype(np.int64)
    rank = (np.arange(n) - np.repeat(starts, counts) + 1).astype(np.int64)
    return dups, rank


@njit(cache=True, error_model="numpy")
def _nn_residuals(x: Any, y: Any, dups: Any, dupsid: Any, matches: int) -> Any:  # pragma: no cover - jitted
    """nprobust's ``lprobust_res`` for ``vce="nn"`` on sorted ``x`` (the window's points)."""
    n = y.shape[0]
    res = np.zeros(n)
    for pos in range(n):
        rpos = dups[pos] - dupsid[pos]
        lpos = dupsid[pos] - 1
        while lpos + rpos < min(matches, n - 1):
            if pos - lpos - 1 < 0:
                if pos + rpos + 1 < n:
                    rpos += dups[pos + rpos + 1]
                else:  # nothing left on either side (cannot happen with n - 1 >= matches)
                    break
            elif pos + rpos + 1 >= n:
                lpos += dups[pos - lpos - 1]
            elif (x[pos] - x[pos - lpos - 1]) > (x[pos + rpos + 1] - x[pos]):
                rpos += dups[pos + rpos + 1]
            elif (x[pos] - x[pos - lpos - 1]) < (x[pos + rpos + 1] - x[pos]):
                lpos += dups[pos - lpos - 1]
            else:
                rpos += dups[pos + rpos + 1]
                lpos += dups[pos - lpos - 1]
        start = max(0, pos - lpos)
        end = min(n, pos + rpos + 1)
        total = 0.0
        for j in range(start, end):
            total += y[j]
        ji = end - start - 1
        if ji > 0:
            res[pos] = np.sqrt(ji / (ji + 1.0)) * (y[pos] - (total - y[pos]) / ji)
    return res


def window(
    x: NDArray[np.float64], c: float, h: float, kernel: Any
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """The indices of the points of sorted ``x`` with positive weight ``K((x - c) / h)``, and those weights.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> idx, w = window(np.array([0.0, 0.5, 1.0, 2.0]), 0.5, 0.5, get("epanechnikov"))
    >>> idx.tolist(), w.tolist()
    ([1], [0.75])
    """
    if np.isfinite(kernel.support):
        lo = int(np.searchsorted(x, c - 1.0001 * h * kernel.support, "left"))
        hi = int(np.searchsorted(x, c + 1.0001 * h * kernel.support, "right"))
    else:
        lo, hi = 0, x.shape[0]
    w = np.asarray(kernel.profile((x[lo:hi] - c) / h), dtype=np.float64)
    keep = np.flatnonzero(w > 0)
    return keep + lo, w[keep]


class PointFit:
    """A local polynomial fit of order ``order`` at ``c``: its window, weights, inverse Gram
    matrix, coefficients, the moments ``S_k = sum W u^k`` (k <= 2 order + 2) and (on first use)
    its design ``R``."""

    __slots__ = ("S", "W", "_R", "beta", "idx", "invG", "order", "u")

    def __init__(self, idx: Any, W: Any, invG: Any, beta: Any, u: Any, S: Any, order: int) -> None:
        self.idx, self.W, self.invG, self.beta, self.u, self.S = idx, W, invG, beta, u, S
        self.order = order
        self._R: NDArray[np.float64] | None = None

    @property
    def R(self) -> NDArray[np.float64]:
        """The design, columns ``u^0 .. u^order``."""
        if self._R is None:
            self._R = powers(self.u, self.order)
        return self._R


@njit(cache=True, error_model="numpy")
def _moments(u: Any, W: Any, y: Any, n_s: int, n_t: int) -> Any:  # pragma: no cover - jitted
    """``S_k = sum W u^k`` (k < n_s) and ``T_k = sum W u^k y`` (k < n_t), in one pass."""
    S = np.zeros(n_s)
    T = np.zeros(n_t)
    for i in range(u.shape[0]):
        p = W[i]
        for k in range(n_s):
            S[k] += p
            if k < n_t:
                T[k] += p * y[i]
            p *= u[i]
    return S, T


def _inverse(G: NDArray[np.float64]) -> NDArray[np.float64]:
    try:
        L = np.linalg.cholesky(G)
    except np.linalg.LinAlgError:
        return np.full_like(G, np.nan)
    Li = np.linalg.solve(L, np.eye(G.shape[0]))
    return Li.T @ Li


def point_fit(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    idx: NDArray[np.intp],
    W: NDArray[np.float64],
    c: float,
    h: float,
    order: int,
) -> PointFit:
    """The weighted least-squares fit of order ``order`` on the points ``idx`` (weights ``W``),
    design columns ``((x - c) / h)^j``: its coefficients are nprobust's times ``h^j``.

    Examples
    --------
    >>> x = np.linspace(0, 1, 5); f = point_fit(x, 2 * x, np.arange(5), np.ones(5), 0.5, 1.0, 1)
    >>> np.round(f.beta, 12).tolist()
    [1.0, 2.0]
    """
    u = (x[idx] - c) / h
    S, T = _moments(u, W, y[idx], 2 * order + 3, order + 1)
    k = np.arange(order + 1)
    invG = _inverse(S[k[:, None] + k[None, :]])
    return PointFit(idx, W, invG, invG @ T, u, S, order)


def powers(u: NDArray[np.float64], order: int) -> NDArray[np.float64]:
    """The columns ``u^0 .. u^order`` (products, not ``pow``)."""
    R = np.empty((u.shape[0], order + 1))
    R[:, 0] = 1.0
    for j in range(1, order + 1):
        np.multiply(R[:, j - 1], u, out=R[:, j])
    return R


def residuals(
    rule: str,
    fit: PointFit,
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    dups: Any,
    dupsid: Any,
    nnmatch: int,
    hii: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """nprobust's residuals ``rule`` of ``fit`` at its window's points (``hii``: the leverages
    that ``"hc2"`` and ``"hc3"`` use, by default the fit's own).

    Examples
    --------
    >>> x = np.linspace(0, 1, 6); y = np.array([0.0, 1, 0, 1, 0, 1])
    >>> f = point_fit(x, y, np.arange(6), np.ones(6), 0.5, 1.0, 0)
    >>> np.round(residuals("hc0", f, x, y, None, None, 3), 12).tolist()
    [-0.5, 0.5, -0.5, 0.5, -0.5, 0.5]
    """
    idx = fit.idx
    if rule == "nn":
        return np.asarray(_nn_residuals(x[idx], y[idx], dups[idx], dupsid[idx], int(nnmatch)))
    e = y[idx] - fit.R @ fit.beta
    if rule == "hc0":
        return e
    if rule == "hc1":
        n, d = idx.shape[0], fit.R.shape[1]
        return np.sqrt(n / (n - d)) * e if n > d else np.full_like(e, np.nan)
    if hii is None:
        hii = leverage(fit)
    with np.errstate(divide="ignore", invalid="ignore"):
        return e * (np.sqrt(1.0 / (1.0 - hii)) if rule == "hc2" else 1.0 / (1.0 - hii))


def leverage(fit: PointFit) -> NDArray[np.float64]:
    """The local hat matrix's diagonal ``W_i R_i^T G^-1 R_i`` of ``fit``."""
    return np.asarray(np.einsum("ij,jk,ik->i", fit.R, fit.invG, fit.R) * fit.W)


def sandwich(
    A: NDArray[np.float64], res: NDArray[np.float64], clusters: NDArray[Any] | None = None
) -> NDArray[np.float64]:
    """``sum_i res_i^2 A_i A_i^T``, or nprobust's cluster sums of ``res_i A_i`` (rows ``A_i``).

    Examples
    --------
    >>> A = np.array([[1.0], [1.0], [1.0]]); r = np.array([1.0, -1.0, 2.0])
    >>> sandwich(A, r).tolist(), sandwich(A, r, np.array([0, 0, 1])).tolist()
    ([[6.0]], [[8.0]])
    """
    S = A * res[:, None]
    if clusters is None:
        return np.asarray(S.T @ S)
    n, k = A.shape
    _, group = np.unique(clusters, return_inverse=True)
    g = int(group.max()) + 1 if n else 0
    sums = np.zeros((g, k))
    np.add.at(sums, group.ravel(), S)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = ((n - 1) / (n - k)) * (g / (g - 1)) if g > 1 and n > k else np.nan
    return np.asarray(w * (sums.T @ sums))
