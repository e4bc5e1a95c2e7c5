"""Leave-one-out Gaussian sums at several bandwidths of one feature, the others held, in one pass (numba).

A per-feature search scores one feature's grid with the other bandwidths held: a coordinate
sweep and the profile that decides whether a feature is smoothed out. With the Gaussian
product kernel ``g_ij = a_ij + b_ij``, where ``b_ij`` is the feature's share and ``a_ij``
the others', and at the feature's bandwidth ``v`` its share is ``b_ij (h / v)^2``: each
level of the grid costs a multiply-add, an exponential and two sums per pair, on top of the
``d`` differences of the pair that every level shares (:func:`loo_column`).

Each row's levels keep their own shift (the least exponent seen so far, as an online
softmax): where a tile brings a smaller one, the sums so far are multiplied by the ratio
(never a subtraction), so no level can overflow or underflow whatever its bandwidth, and
each row's largest weight is one at every level. The exponents are taken relative to the
row's reference point ``r`` (a difference of squares per feature, as in
:func:`nadaraya.bandwidth._passes._distances`), so that a point far from all others keeps
its accuracy. The own term is masked (its exponent is ``inf``), never subtracted. Weights
below ``exp(-_CUT)`` of the row's largest are taken as zero, and a tile whose bounding box is
that far from the row at some level is skipped at that level; each row starts at its own tile.

numba is imported here; import this module lazily.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import exp_flushed, run_ranges
from nadaraya.bandwidth._passes import _CUT, _FAST, _OVER, _TILE, _dot, _tile_boxes

__all__ = ["loo_column"]


@numba.njit(inline="always", cache=True, fastmath=_FAST)
def _split(zt, i, r, j0, m, col, a, b):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``a[j]``, ``b[j]``: the other features' and feature ``col``'s share of ``g(i, j0 + j)``
    less the reference's, each a difference of squares (see ``_passes._distances``); the own
    term's ``a`` is ``inf``."""
    for j in range(m):
        a[j] = 0.0
    for k in range(zt.shape[0]):
        zs = zt[k, j0 : j0 + m]
        zi = zt[k, i]
        zr = zt[k, r]
        tr = zr - zi
        if k == col:
            for j in range(m):
                b[j] = (zs[j] - zr) * ((zs[j] - zi) + tr)
        else:
            for j in range(m):
                a[j] += (zs[j] - zr) * ((zs[j] - zi) + tr)
    if j0 <= i < j0 + m:
        a[i - j0] = np.inf


@numba.njit(inline="always", cache=True)
def _box(zt, i, r, lo, hi, tb, col):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Lower bounds of ``a`` and ``b`` (see :func:`_split`) over the keys of tile ``tb``: its
    bounding box's distance in the other features and in feature ``col``, each less the
    reference's, less their rounding."""
    ga = 0.0
    gb = 0.0
    ra = 0.0
    rb = 0.0
    for k in range(zt.shape[0]):
        zi = zt[k, i]
        gap = lo[k, tb] - zi if zi < lo[k, tb] else (zi - hi[k, tb] if zi > hi[k, tb] else 0.0)
        tr = zt[k, r] - zi
        if k == col:
            gb = gap * gap
            rb = tr * tr
        else:
            ga += gap * gap
            ra += tr * tr
    return ga - ra - 1e-13 * (ga + ra), gb - rb - 1e-13 * (gb + rb)


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _exact_rows(zt, ref, s, sy, col, mult, lo, hi, rows, i0, i1, S, T, C):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Rows ``rows[i0:i1]`` of :func:`loo_column`, each level with its own running shift."""
    d, n = zt.shape
    p = sy.shape[0]
    G = mult.size
    n_tiles = (n + _TILE - 1) // _TILE
    a = np.empty(_TILE)
    b = np.empty(_TILE)
    x = np.empty(_TILE)
    for i in rows[i0:i1]:
        r = ref[i]
        for lev in range(G):
            C[lev, i] = np.inf
            S[lev, i] = 0.0
            for q in range(p):
                T[lev, i, q] = 0.0
        first = i // _TILE
        for step in range(n_tiles):
            tb = (first + step) % n_tiles
            j0 = tb * _TILE
            m = min(n, j0 + _TILE) - j0
            ga, gb = _box(zt, i, r, lo, hi, tb, col)
            near = False
            for lev in range(G):
                if ga + mult[lev] * gb - C[lev, i] < _CUT:
                    near = True
            if not near:
                continue
            _split(zt, i, r, j0, m, col, a, b)
            ss = s[j0 : j0 + m]
            for lev in range(G):
                f = mult[lev]
                c = C[lev, i]
                if ga + f * gb - c >= _CUT:
                    continue
                low = np.inf
                for j in range(m):
                    v = a[j] + f * b[j]
                    x[j] = v
                    low = min(low, v)
                if low < c:
                    # a smaller shift: the sums so far are rescaled (a product, no subtraction)
                    scale = math.exp(low - c) if c < np.inf else 0.0
                    S[lev, i] *= scale
                    for q in range(p):
                        T[lev, i, q] *= scale
                    C[lev, i] = low
                    c = low
                acc = 0.0
                acc0 = 0.0
                ys = sy[0, j0 : j0 + m]
                for j in range(m):
                    e = x[j] - c
                    w = exp_flushed(-e) if e < _CUT else 0.0
                    x[j] = w
                    acc += w * ss[j]
                    acc0 += w * ys[j]
                S[lev, i] += acc
                T[lev, i, 0] += acc0
                for q in range(1, p):
                    ys = sy[q, j0 : j0 + m]
                    acc0 = 0.0
                    for j in range(m):
                        acc0 += x[j] * ys[j]
                    T[lev, i, q] += acc0



@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _fast_rows(zt, ref, s, sy, col, mult, lo, hi, i0, i1, S, T, over):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Rows ``i0:i1`` of :func:`loo_column` with every level shifted by the reference's
    exponent (its weight one): ``over[i]`` counts the terms above ``exp(_OVER)``, rows that
    :func:`_exact_rows` computes again."""
    d, n = zt.shape
    p = sy.shape[0]
    G = mult.size
    n_tiles = (n + _TILE - 1) // _TILE
    a = np.empty(_TILE)
    b = np.empty(_TILE)
    e = np.empty(_TILE)
    f_lo = mult.min()
    f_hi = mult.max()
    for i in range(i0, i1):
        r = ref[i]
        for tb in range(n_tiles):
            j0 = tb * _TILE
            m = min(n, j0 + _TILE) - j0
            ga, gb = _box(zt, i, r, lo, hi, tb, col)
            if ga + f_lo * gb >= _CUT and ga + f_hi * gb >= _CUT:
                continue  # (a + f b is monotone in f: the ends bound every level)
            _split(zt, i, r, j0, m, col, a, b)
            ss = s[j0 : j0 + m]
            y0 = sy[0, j0 : j0 + m]
            for lev in range(G):
                f = mult[lev]
                if ga + f * gb >= _CUT:
                    continue
                acc = 0.0
                acc0 = 0.0
                big = 0.0
                for j in range(m):
                    x = a[j] + f * b[j]
                    w = exp_flushed(-x) if x < _CUT else 0.0
                    big += 1.0 if x < -_OVER else 0.0
                    e[j] = w
                    acc += w * ss[j]
                    acc0 += w * y0[j]
                S[lev, i] += acc
                T[lev, i, 0] += acc0
                over[i] += big
                for q in range(1, p):
                    T[lev, i, q] += _dot(e, sy[q, j0 : j0 + m], m)


def loo_column(
    zt: NDArray[np.float64],
    ref: NDArray[np.int64],
    s: NDArray[np.float64],
    sy: NDArray[np.float64],
    col: int,
    mult: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Leave-one-out sums at ``len(mult)`` bandwidths of feature ``col``, one pass over the pairs.

    Parameters
    ----------
    zt : ndarray of shape (d, n)
        ``X / (sqrt(2) h)`` at the held bandwidths, transposed, C-contiguous.
    ref : ndarray of int64, shape (n,)
        Each point's reference point (any other point; its nearest at ``h`` is best): the
        exponents are taken relative to it.
    s : ndarray of shape (n,)
        Sample weights of the keys.
    sy : ndarray of shape (p, n)
        ``s_j y_j``, transposed.
    col : int
        The feature whose bandwidth varies.
    mult : ndarray of shape (G,)
        ``(h[col] / v_l)^2`` for the feature's bandwidths ``v_l`` (0 for ``v_l = inf``).

    Returns
    -------
    S : ndarray of shape (G, n)
        ``sum_{j != i} s_j exp(C_li - x_lij)`` with ``x_lij = g_l(i, j) - g_l(i, ref_i)``.
    T : ndarray of shape (G, n, p)
        The same with ``s_j y_j``.
    C : ndarray of shape (G, n)
        Each row's shift at each level: ``min_{j != i} x_lij`` (the row's largest weight is one).

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([[0.0, 0.5, 2.0], [0.0, 1.0, 1.0]]); y = np.array([[1.0, 2.0, 4.0]])
    >>> S, T, C = loo_column(z, np.array([1, 0, 1]), np.ones(3), y, 1, np.array([1.0, 0.0]))
    >>> g = np.array([[0.25 + 1.0, 4.0 + 1.0], [0.25, 4.0]])  # row 0 at each level
    >>> w = np.exp(-(g - g.min(axis=1, keepdims=True)))
    >>> bool(np.allclose(S[:, 0], w.sum(axis=1)) and np.allclose(T[:, 0, 0], w @ [2.0, 4.0]))
    True
    """
    n = zt.shape[1]
    G = mult.size
    S = np.zeros((G, n))
    T = np.zeros((G, n, sy.shape[0]))
    lo, hi = _tile_boxes(zt)
    ref = np.ascontiguousarray(ref, dtype=np.int64)
    mult = np.ascontiguousarray(mult, dtype=np.float64)
    over = np.zeros(n)
    run_ranges(_fast_rows, (zt, ref, s, sy, int(col), mult, lo, hi), n, (S, T, over))
    C = np.zeros((G, n))
    rows = np.flatnonzero(over > 0)
    if rows.size:  # a point nearer than the reference by more than _OVER at some level
        run_ranges(_exact_rows, (zt, ref, s, sy, int(col), mult, lo, hi, rows), rows.size, (S, T, C))
    return S, T, C
