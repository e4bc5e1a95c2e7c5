"""Leave-one-out Gaussian sums at several bandwidths, each changing one feature's, in one pass (numba).

A per-feature search scores bandwidths that differ from the current one in a single feature:
a coordinate sweep walks each feature's grid, the profile that decides whether a feature is
smoothed out scores its grid and its end, and each feature is tried smoothed out. With the
Gaussian product kernel ``g_ij = sum_k t_ijk`` (feature ``k``'s share ``t_ijk``), setting
feature ``c``'s bandwidth from ``h_c`` to ``v`` turns the exponent into
``g_ij + (f - 1) t_ijc`` with ``f = (h_c / v)^2`` (``f = 0``: smoothed out). Each such level
costs a multiply-add, an exponential and two sums per pair, on top of the ``d`` differences
of the pair that every level shares (:func:`loo_column`).

The exponents are taken relative to the row's reference point ``r`` (each feature's share a
difference of squares, as in :func:`nadaraya.bandwidth._passes._distances`), so that a point
far from all others keeps its accuracy. Each level of a row is shifted by the least exponent
of the row's own tile of keys (its nearest points are usually there; the search sorts the
points by their first feature), so that point's weight is one. Where some other tile holds a
point nearer by more than ``_OVER`` at some level (its weight would overflow), the row is
computed again with each level's own running shift: the least exponent seen so far, as in an
online softmax, the sums so far multiplied by the ratio where a tile brings a smaller one (a
product, never a subtraction). The own term is masked (its exponent is ``inf``), never
subtracted. Weights below ``exp(-_CUT)`` of the shift's are taken as zero, and a tile whose
bounding box is that far from the row at some level is skipped at that level.

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
def _shares(zt, i, r, j0, m, tt, tot):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``tt[k, j]``: feature ``k``'s share of ``g(i, j0 + j)`` less the reference's (a
    difference of squares, see ``_passes._distances``), ``tot[j]`` their sum (``inf`` for the
    own term)."""
    for j in range(m):
        tot[j] = 0.0
    for k in range(zt.shape[0]):
        zs = zt[k, j0 : j0 + m]
        zi = zt[k, i]
        zr = zt[k, r]
        tr = zr - zi
        tk = tt[k]
        for j in range(m):
            v = (zs[j] - zr) * ((zs[j] - zi) + tr)
            tk[j] = v
            tot[j] += v
    if j0 <= i < j0 + m:
        tot[i - j0] = np.inf


@numba.njit(inline="always", cache=True)
def _box(zt, i, r, lo, hi, tb, gaps):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``gaps[k]``: a lower bound of feature ``k``'s share (see :func:`_shares`) over the keys
    of tile ``tb`` (its bounding box's distance less the reference's, less their rounding);
    returns their sum."""
    total = 0.0
    for k in range(zt.shape[0]):
        zi = zt[k, i]
        gap = lo[k, tb] - zi if zi < lo[k, tb] else (zi - hi[k, tb] if zi > hi[k, tb] else 0.0)
        tr = zt[k, r] - zi
        g2 = gap * gap
        r2 = tr * tr
        gaps[k] = g2 - r2 - 1e-13 * (g2 + r2)
        total += gaps[k]
    return total


@numba.njit(inline="always", cache=True)
def _bound(total, gaps, cols, mult, lev):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """A lower bound of level ``lev``'s exponent over a tile."""
    c = cols[lev]
    return total + (mult[lev] - 1.0) * gaps[c]


@numba.njit(cache=True, nogil=True, fastmath=_FAST, inline="always")
def _level(tot, tc, f, c, ss, ys, e, m, watch, store):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """One level's weights ``exp(c - (tot + f tc))`` over a tile (0 past ``_CUT``), their sums
    against ``ss`` and ``ys``; with ``store``, the weights into ``e``; with ``watch``, how many
    exceed ``exp(_OVER)`` (then wrong: the row is computed again). Inlined with ``watch`` and
    ``store`` constants at each call, so each caller's loop compiles as if written out."""
    acc = 0.0
    acc0 = 0.0
    big = 0.0
    for j in range(m):
        x = (tot[j] + f * tc[j]) - c
        w = exp_flushed(-x) if x < _CUT else 0.0
        if watch:
            big += 1.0 if x < -_OVER else 0.0
        if store:
            e[j] = w
        acc += w * ss[j]
        acc0 += w * ys[j]
    return acc, acc0, big


@numba.njit(cache=True, nogil=True, fastmath=_FAST, inline="always")
def _moments(tt, e, ss, sy, j0, m, A, B, i, u, v):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Row ``i``'s bandwidth moments over a tile of weights ``e``: ``A[i, k] += 2 sum_j tt[k, j]
    e_j s_j``, ``B[i, k, q] += 2 sum_j tt[k, j] e_j sy[q, j]`` (the gradient pass's, see
    :func:`nadaraya.bandwidth._gradient.loo_gradient`); ``u``, ``v`` scratch."""
    y0 = sy[0, j0 : j0 + m]
    for j in range(m):
        u[j] = e[j] * ss[j]
        v[j] = e[j] * y0[j]
    for k in range(tt.shape[0]):
        tk = tt[k]
        acc = 0.0
        acc0 = 0.0
        for j in range(m):
            acc += tk[j] * u[j]
            acc0 += tk[j] * v[j]
        A[i, k] += 2.0 * acc
        B[i, k, 0] += 2.0 * acc0
        for q in range(1, sy.shape[0]):
            yq = sy[q, j0 : j0 + m]
            acc = 0.0
            for j in range(m):
                acc += tk[j] * e[j] * yq[j]
            B[i, k, q] += 2.0 * acc


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _fast_rows(zt, ref, s, sy, cols, mult, lo, hi, grad, i0, i1, S, T, C, over, A, B):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Rows ``i0:i1`` of :func:`loo_column`, each level shifted by the least exponent of the
    row's own tile (its nearest points are usually there; that point's weight is one):
    ``over[i]`` counts the terms above ``exp(_OVER)`` elsewhere, rows that
    :func:`_exact_rows` computes again. Level ``grad`` (if any) also sums its moments
    (:func:`_moments`)."""
    d, n = zt.shape
    p = sy.shape[0]
    G = mult.size
    n_tiles = (n + _TILE - 1) // _TILE
    tt = np.empty((d, _TILE))
    tot = np.empty(_TILE)
    e = np.empty(_TILE)
    u = np.empty(_TILE)
    v = np.empty(_TILE)
    gaps = np.empty(d)
    for i in range(i0, i1):
        r = ref[i]
        first = i // _TILE
        for step in range(n_tiles):
            tb = (first + step) % n_tiles
            j0 = tb * _TILE
            m = min(n, j0 + _TILE) - j0
            total = _box(zt, i, r, lo, hi, tb, gaps)
            if step == 0:
                _shares(zt, i, r, j0, m, tt, tot)
                for lev in range(G):
                    f = mult[lev] - 1.0
                    tc = tt[cols[lev]]
                    low = np.inf
                    for j in range(m):
                        low = min(low, tot[j] + f * tc[j])
                    C[lev, i] = low if low < np.inf else 0.0  # (a tile of the own point alone)
            else:
                near = False
                for lev in range(G):
                    near |= _bound(total, gaps, cols, mult, lev) - C[lev, i] < _CUT
                if not near:
                    continue
                _shares(zt, i, r, j0, m, tt, tot)
            ss = s[j0 : j0 + m]
            y0 = sy[0, j0 : j0 + m]
            for lev in range(G):
                c = C[lev, i]
                bound = _bound(total, gaps, cols, mult, lev) - c
                if bound >= _CUT:
                    continue
                f = mult[lev] - 1.0
                tc = tt[cols[lev]]
                # a tile whose bound is above -_OVER cannot overflow: no watch there
                if lev == grad:
                    acc, acc0, big = _level(tot, tc, f, c, ss, y0, e, m, True, True)
                    over[i] += big
                    _moments(tt, e, ss, sy, j0, m, A, B, i, u, v)
                elif bound >= -_OVER and p == 1:
                    acc, acc0, _ = _level(tot, tc, f, c, ss, y0, e, m, False, False)
                elif bound >= -_OVER:
                    acc, acc0, _ = _level(tot, tc, f, c, ss, y0, e, m, False, True)
                else:
                    acc, acc0, big = _level(tot, tc, f, c, ss, y0, e, m, True, True)
                    over[i] += big
                S[lev, i] += acc
                T[lev, i, 0] += acc0
                for q in range(1, p):
                    T[lev, i, q] += _dot(e, sy[q, j0 : j0 + m], m)


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _exact_rows(zt, ref, s, sy, cols, mult, lo, hi, grad, rows, i0, i1, S, T, C, A, B):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Rows ``rows[i0:i1]`` of :func:`loo_column`, each level with its own running shift
    (the row's own tile first, where its nearest points usually are); level ``grad``'s
    moments too."""
    d, n = zt.shape
    p = sy.shape[0]
    G = mult.size
    n_tiles = (n + _TILE - 1) // _TILE
    tt = np.empty((d, _TILE))
    tot = np.empty(_TILE)
    x = np.empty(_TILE)
    mu = np.empty(_TILE)
    mv = np.empty(_TILE)
    gaps = np.empty(d)
    for i in rows[i0:i1]:
        r = ref[i]
        for lev in range(G):
            C[lev, i] = np.inf
            S[lev, i] = 0.0
            for q in range(p):
                T[lev, i, q] = 0.0
        if grad >= 0:
            for k in range(d):
                A[i, k] = 0.0
                for q in range(p):
                    B[i, k, q] = 0.0
        first = i // _TILE
        for step in range(n_tiles):
            tb = (first + step) % n_tiles
            j0 = tb * _TILE
            m = min(n, j0 + _TILE) - j0
            total = _box(zt, i, r, lo, hi, tb, gaps)
            near = False
            for lev in range(G):
                near |= _bound(total, gaps, cols, mult, lev) - C[lev, i] < _CUT
            if not near:
                continue
            _shares(zt, i, r, j0, m, tt, tot)
            ss = s[j0 : j0 + m]
            for lev in range(G):
                c = C[lev, i]
                if _bound(total, gaps, cols, mult, lev) - c >= _CUT:
                    continue
                f = mult[lev] - 1.0
                tc = tt[cols[lev]]
                low = np.inf
                for j in range(m):
                    v = tot[j] + f * tc[j]
                    x[j] = v
                    low = min(low, v)
                if low < c:
                    # a smaller shift: the sums so far are rescaled (a product, no subtraction)
                    scale = math.exp(low - c) if c < np.inf else 0.0
                    S[lev, i] *= scale
                    for q in range(p):
                        T[lev, i, q] *= scale
                    if lev == grad:
                        for k in range(d):
                            A[i, k] *= scale
                            for q in range(p):
                                B[i, k, q] *= scale
                    C[lev, i] = low
                    c = low
                acc = 0.0
                for j in range(m):
                    u = x[j] - c
                    w = exp_flushed(-u) if u < _CUT else 0.0
                    x[j] = w
                    acc += w * ss[j]
                S[lev, i] += acc
                for q in range(p):
                    T[lev, i, q] += _dot(x, sy[q, j0 : j0 + m], m)
                if lev == grad:
                    _moments(tt, x, ss, sy, j0, m, A, B, i, mu, mv)


def loo_column(
    zt: NDArray[np.float64],
    ref: NDArray[np.int64],
    s: NDArray[np.float64],
    sy: NDArray[np.float64],
    cols: NDArray[np.int64],
    mult: NDArray[np.float64],
    grad: int = -1,
) -> tuple[NDArray[np.float64], ...]:
    """Leave-one-out sums at ``len(mult)`` bandwidths, level ``l`` changing feature ``cols[l]``'s
    alone, in one pass over the pairs; and level ``grad``'s bandwidth moments (none for ``grad <
    0``) in the same pass: a level at the current bandwidth (``mult`` 1) gives the gradient
    pass's moments there at the cost of its sums.

    Parameters
    ----------
    zt : ndarray of shape (d, n)
        ``X / (sqrt(2) h)`` at the current bandwidths, transposed, C-contiguous.
    ref : ndarray of int64, shape (n,)
        Each point's reference point (any other point; its nearest at ``h`` is best): the
        exponents are taken relative to it.
    s : ndarray of shape (n,)
        Sample weights of the keys.
    sy : ndarray of shape (p, n)
        ``s_j y_j``, transposed.
    cols : ndarray of int64, shape (G,)
        The feature each level changes.
    mult : ndarray of shape (G,)
        ``(h[cols[l]] / v_l)^2`` for the feature's new bandwidth ``v_l`` (0 for ``v_l = inf``).
    grad : int, default -1
        The level whose moments ``A``, ``B`` are summed too (none where negative).

    Returns
    -------
    S : ndarray of shape (G, n)
        ``sum_{j != i} s_j exp(C_li - x_lij)`` with ``x_lij = g_l(i, j) - g_l(i, ref_i)``.
    T : ndarray of shape (G, n, p)
        The same with ``s_j y_j``.
    C : ndarray of shape (G, n)
        Each row's shift at each level: the least ``x_lij`` of its own tile of keys, or, for a
        row where that would overflow, ``min_{j != i} x_lij``.
    A : ndarray of shape (n, d)
        ``sum_{j != i} s_j w_ij (u_ijk^2 - u_irk^2)`` at level ``grad`` (``w`` shifted by its
        ``C``, ``r = ref_i``), as :func:`nadaraya.bandwidth._gradient.loo_gradient`'s ``A``;
        shape (0, d) for ``grad < 0``.
    B : ndarray of shape (n, d, p)
        The same with ``s_j y_j``; shape (0, d, p) for ``grad < 0``.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([[0.0, 0.5, 2.0], [0.0, 1.0, 1.0]]); y = np.array([[1.0, 2.0, 4.0]])
    >>> S, T, C, A, B = loo_column(z, np.array([1, 0, 1]), np.ones(3), y, np.array([1, 1]),
    ...                            np.array([1.0, 0.0]), 0)
    >>> g = np.array([[0.25 + 1.0, 4.0 + 1.0], [0.25, 4.0]])  # row 0 at each level
    >>> w = np.exp(-(g - g.min(axis=1, keepdims=True)))  # its nearest has weight one
    >>> bool(np.allclose(S[:, 0], w.sum(axis=1)) and np.allclose(T[:, 0, 0], w @ [2.0, 4.0]))
    True
    >>> shares = np.array([[0.25, 4.0], [1.0, 1.0]])  # row 0's (features by keys 1, 2)
    >>> u = 2 * (shares - shares[:, :1])  # less the reference's (key 1)
    >>> bool(np.allclose(A[0], u @ w[0]) and np.allclose(B[0, :, 0], u @ (w[0] * [2.0, 4.0])))
    True
    """
    n, d, p = zt.shape[1], zt.shape[0], sy.shape[0]
    G = mult.size
    S = np.zeros((G, n))
    T = np.zeros((G, n, p))
    A = np.zeros((n, d) if grad >= 0 else (0, d))
    B = np.zeros((n, d, p) if grad >= 0 else (0, d, p))
    lo, hi = _tile_boxes(zt)
    ref = np.ascontiguousarray(ref, dtype=np.int64)
    cols = np.ascontiguousarray(cols, dtype=np.int64)
    args = (zt, ref, s, sy, cols, np.ascontiguousarray(mult, dtype=np.float64), lo, hi, int(grad))
    over = np.zeros(n)
    C = np.zeros((G, n))
    run_ranges(_fast_rows, args, n, (S, T, C, over, A, B))
    rows = np.flatnonzero(over > 0)
    if rows.size:  # a point nearer than the reference by more than _OVER at some level
        run_ranges(_exact_rows, (*args, rows), rows.size, (S, T, C, A, B))
    return S, T, C, A, B
