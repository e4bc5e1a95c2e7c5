"""Leave-one-out Gaussian sums at several bandwidths per pass, and their bandwidth gradients (numba).

The generic primitive (:func:`nadaraya.pooling.compute_partials` with ``exclude=arange(n)``)
computes leave-one-out sums at one bandwidth per pass. Bandwidth selection needs two things it
cannot give, and this module gives them for the Gaussian product kernel:

- :func:`loo_levels`: the sums at the bandwidths ``h, h / sqrt(2), h / 2, ...`` from one pass
  over the pairs. In the shifted log domain ``w(h / sqrt 2) = w(h) ** 2``: each level costs a
  multiplication per pair instead of an exponential. Squaring amplifies the relative rounding
  error of a weight by two per level, so the exponential is recomputed every
  ``_REFRESH`` levels (error below ``2**_REFRESH`` ulp, about 3e-14).
- :func:`loo_gradient`: the sums at one bandwidth per feature plus the moments
  ``sum_j w_ij u_ijk^2`` and ``sum_j w_ij u_ijk^2 y_j`` that the derivative of the
  leave-one-out predictions with respect to ``log h_k`` needs (``d w_ij / d log h_k =
  w_ij u_ijk^2``).

Both take ``Z = X / (sqrt(2) h)`` transposed to shape (d, n), so that ``sum_k (Z_ki - Z_kj)^2``
is ``|u_ij|^2 / 2`` and the kernel is ``exp(-that)``. Row ``i`` is shifted by
``c_i = min_{j != i} |u_ij|^2 / 2`` (its nearest neighbour gets weight one), so no query
underflows to 0/0. They return, per level (or once), ``S_i = sum_{j != i} s_j exp(c_i - ...)``,
``T_i = sum_{j != i} s_j y_j exp(c_i - ...)`` and the shift ``c_i`` (at the first level; the
shift at level ``l`` is ``c_i 2**l``). The own term is masked inside the sums, never subtracted.

numba is imported here; import this module lazily.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numba
import numpy as np
from numpy.typing import NDArray

from .. import _threads
from ._numba_exp import exp_fast

_threads.configure()  # numba's pool shares the cores politely (see nadaraya._threads)

__all__ = ["loo_gradient", "loo_levels", "shifts", "threads_for"]

#: recompute the exponential every this many levels (squarings amplify rounding by 2 each)
_REFRESH = 8
#: keys processed per tile (fits the level loop's working set in L1/L2)
_TILE = 1024
#: rows per parallel task
_ROWS = 32
#: weights below exp(-_CUT) ~ 1e-150 of the nearest neighbour's are set to zero: they change a
#: sum by less than n * 1e-150 relative (nothing, in float64), and left alone the squarings
#: would turn them into subnormal numbers, whose arithmetic is a hundred times slower
_CUT = 345.0
_TINY = 1e-150
#: reassociation lets LLVM vectorise the reductions; no "nnan"/"ninf", the loops rely on
#: ``exp(-inf) == 0`` for the masked own term
_FAST = {"reassoc", "contract", "nsz", "arcp"}


#: below this much work (pairs times operations) a pass runs on one thread: waking the thread
#: pool costs more than it saves (tens of milliseconds on a busy machine)
SERIAL_WORK = 4e6


@contextlib.contextmanager
def threads_for(work: float) -> Iterator[None]:
    """Run the enclosed passes on one numba thread when ``work`` is small.

    Examples
    --------
    >>> with threads_for(100):
    ...     numba.get_num_threads()
    1
    """
    if work >= SERIAL_WORK:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)


def shifts(zt: NDArray[np.float64]) -> NDArray[np.float64]:
    """``c_i = min_{j != i} sum_k (zt[k, i] - zt[k, j])^2`` by a k-d tree, O(n log n).

    Examples
    --------
    >>> import numpy as np
    >>> shifts(np.array([[0.0, 1.0, 3.0]])).tolist()
    [1.0, 1.0, 4.0]
    """
    from scipy.spatial import cKDTree

    z = np.ascontiguousarray(zt.T)
    dist, _ = cKDTree(z).query(z, k=2)
    return np.ascontiguousarray(dist[:, 1] ** 2)


@numba.njit(cache=True, fastmath=_FAST)
def _levels_rows(
    zt: NDArray[np.float64],
    shift: NDArray[np.float64],
    s: NDArray[np.float64],
    sy: NDArray[np.float64],
    n_levels: int,
    i0: int,
    i1: int,
    S: NDArray[np.float64],
    T: NDArray[np.float64],
) -> None:  # pragma: no cover - compiled
    """Rows ``i0:i1`` of :func:`loo_levels` (a plain loop, so that LLVM vectorises it)."""
    d, n = zt.shape
    p = sy.shape[0]
    dz = np.empty(_TILE)
    e = np.empty(_TILE)
    y0 = sy[0]
    for i in range(i0, i1):
        c = shift[i]
        for j0 in range(0, n, _TILE):
            m = min(n, j0 + _TILE) - j0
            zs = zt[0, j0 : j0 + m]
            zi = zt[0, i]
            for j in range(m):
                t = zs[j] - zi
                dz[j] = t * t - c
            for k in range(1, d):
                zs = zt[k, j0 : j0 + m]
                zi = zt[k, i]
                for j in range(m):
                    t = zs[j] - zi
                    dz[j] += t * t
            if j0 <= i < j0 + m:
                dz[i - j0] = np.inf
            ss = s[j0 : j0 + m]
            ys = y0[j0 : j0 + m]
            scale = 1.0
            for lev in range(n_levels):
                acc = 0.0
                acc0 = 0.0
                if lev % _REFRESH == 0:
                    for j in range(m):
                        x = dz[j] * scale
                        w = exp_fast(-x) if x < _CUT else 0.0
                        e[j] = w
                        acc += w * ss[j]
                        acc0 += w * ys[j]
                else:
                    for j in range(m):
                        w = e[j] * e[j]
                        w = w if w > _TINY else 0.0
                        e[j] = w
                        acc += w * ss[j]
                        acc0 += w * ys[j]
                S[lev, i] += acc
                T[lev, i, 0] += acc0
                for q in range(1, p):
                    yq = sy[q, j0 : j0 + m]
                    acc = 0.0
                    for j in range(m):
                        acc += e[j] * yq[j]
                    T[lev, i, q] += acc
                scale *= 2.0


@numba.njit(cache=True, parallel=True)
def loo_levels(
    zt: NDArray[np.float64],
    shift: NDArray[np.float64],
    s: NDArray[np.float64],
    sy: NDArray[np.float64],
    n_levels: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:  # pragma: no cover
    """Leave-one-out sums at ``n_levels`` bandwidths ``h 2**(-l/2)``, one pass over the pairs.

    Parameters
    ----------
    zt : ndarray of shape (d, n)
        ``X / (sqrt(2) h)``, transposed, C-contiguous.
    shift : ndarray of shape (n,)
        ``c_i``: the squared distance in ``Z`` from each point to its nearest other point
        (:func:`shifts`).
    s : ndarray of shape (n,)
        Sample weights of the keys (ones when unweighted).
    sy : ndarray of shape (p, n)
        ``s_j y_j``, transposed.
    n_levels : int

    Returns
    -------
    S : ndarray of shape (n_levels, n)
    T : ndarray of shape (n_levels, n, p)
    """
    n = zt.shape[1]
    S = np.zeros((n_levels, n))
    T = np.zeros((n_levels, n, sy.shape[0]))
    n_blocks = (n + _ROWS - 1) // _ROWS
    for b in numba.prange(n_blocks):
        _levels_rows(zt, shift, s, sy, n_levels, b * _ROWS, min(n, (b + 1) * _ROWS), S, T)
    return S, T


@numba.njit(cache=True, fastmath=_FAST)
def _gradient_rows(
    zt: NDArray[np.float64],
    shift: NDArray[np.float64],
    s: NDArray[np.float64],
    sy: NDArray[np.float64],
    i0: int,
    i1: int,
    S: NDArray[np.float64],
    T: NDArray[np.float64],
    A: NDArray[np.float64],
    B: NDArray[np.float64],
) -> None:  # pragma: no cover - compiled
    """Rows ``i0:i1`` of :func:`loo_gradient`."""
    d, n = zt.shape
    p = sy.shape[0]
    dz = np.empty(_TILE)
    e = np.empty(_TILE)
    u2 = np.empty(_TILE)
    for i in range(i0, i1):
        c = shift[i]
        for j0 in range(0, n, _TILE):
            m = min(n, j0 + _TILE) - j0
            for j in range(m):
                dz[j] = -c
            for k in range(d):
                zs = zt[k, j0 : j0 + m]
                zi = zt[k, i]
                for j in range(m):
                    t = zs[j] - zi
                    dz[j] += t * t
            if j0 <= i < j0 + m:
                dz[i - j0] = np.inf
            ss = s[j0 : j0 + m]
            acc = 0.0
            for j in range(m):
                x = dz[j]
                w = exp_fast(-x) if x < _CUT else 0.0
                e[j] = w
                acc += w * ss[j]
            S[i] += acc
            for q in range(p):
                yq = sy[q, j0 : j0 + m]
                acc = 0.0
                for j in range(m):
                    acc += e[j] * yq[j]
                T[i, q] += acc
            for k in range(d):
                zs = zt[k, j0 : j0 + m]
                zi = zt[k, i]
                acc = 0.0
                for j in range(m):
                    t = zs[j] - zi
                    v = 2.0 * t * t * e[j]
                    u2[j] = v
                    acc += v * ss[j]
                A[i, k] += acc
                for q in range(p):
                    yq = sy[q, j0 : j0 + m]
                    acc = 0.0
                    for j in range(m):
                        acc += u2[j] * yq[j]
                    B[i, k, q] += acc


@numba.njit(cache=True, parallel=True)
def loo_gradient(
    zt: NDArray[np.float64], shift: NDArray[np.float64], s: NDArray[np.float64], sy: NDArray[np.float64]
) -> tuple[  # pragma: no cover
    NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]
]:
    """Leave-one-out sums and their bandwidth moments at one (per-feature) bandwidth.

    Parameters
    ----------
    zt, shift, s, sy
        As for :func:`loo_levels`.

    Returns
    -------
    S : ndarray of shape (n,)
    T : ndarray of shape (n, p)
    A : ndarray of shape (n, d)
        ``sum_{j != i} s_j w_ij u_ijk^2`` (shifted like ``S``).
    B : ndarray of shape (n, d, p)
        ``sum_{j != i} s_j w_ij u_ijk^2 y_j``.
    """
    d, n = zt.shape
    p = sy.shape[0]
    S = np.zeros(n)
    T = np.zeros((n, p))
    A = np.zeros((n, d))
    B = np.zeros((n, d, p))
    n_blocks = (n + _ROWS - 1) // _ROWS
    for b in numba.prange(n_blocks):
        _gradient_rows(zt, shift, s, sy, b * _ROWS, min(n, (b + 1) * _ROWS), S, T, A, B)
    return S, T, A, B
