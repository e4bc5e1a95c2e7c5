"""Leave-one-out Gaussian sums at several bandwidths per pass, and their bandwidth derivatives (numba).

The generic primitive (:func:`nadaraya._core.call.compute_partials` with ``exclude=arange(n)``)
computes leave-one-out sums at one bandwidth per pass. Bandwidth selection needs more, and
this module gives it for the Gaussian product kernel:

- :func:`loo_levels`: the sums at the bandwidths ``h, h / sqrt(2), h / 2, ...`` from one pass
  over the pairs. In the shifted log domain ``w(h / sqrt 2) = w(h) ** 2``: each level costs a
  multiplication per pair instead of an exponential. Squaring amplifies the relative rounding
  error of a weight by two per level, so the exponential is recomputed every
  ``_REFRESH`` levels (error below ``2**_REFRESH`` ulp, about 3e-14). The levels go in groups
  of four whose eight sums stay in registers (each key's numbers are loaded once per group,
  not once per level), and a tile of keys whose bounding box is so far from a point that its
  weights would be flushed to zero skips those levels (the search sorts the points by their
  first feature, so that tiles are narrow).
- :func:`~nadaraya.bandwidth._gradient.loo_gradient`: the sums at one bandwidth per feature plus
  the moments
  ``sum_j w_ij u_ijk^2`` and ``sum_j w_ij u_ijk^2 y_j`` that the derivative of the
  leave-one-out predictions with respect to ``log h_k`` needs (``d w_ij / d log h_k =
  w_ij u_ijk^2``).
- :func:`loo_curvature`: for one bandwidth scaling every feature, the moments of
  ``(g - c)^r``, r = 0 .. 3, from which the first three derivatives of the criterion along ``log h`` follow
  (the Halley steps of the scalar search).

All take ``Z = X / (sqrt(2) h)`` transposed to shape (d, n), so that ``sum_k (Z_ki - Z_kj)^2``
is ``g_ij = |u_ij|^2 / 2`` and the kernel is ``exp(-g_ij)``. Row ``i`` is shifted by
``c_i = min_{j != i} g_ij`` (its nearest neighbour gets weight one), so no query
underflows to 0/0; each exponent ``g_ij - c_i`` is a difference of squares against that
neighbour, never ``g_ij`` less ``c_i`` (which a point far from all others would round to
noise). They return, per level (or once), ``S_i = sum_{j != i} s_j exp(c_i - ...)``,
``T_i = sum_{j != i} s_j y_j exp(c_i - ...)`` and the shift ``c_i`` (at the first level; the
shift at level ``l`` is ``c_i 2**l``). The own term is masked inside the sums, never subtracted.
Weights below ``exp(-_CUT)`` (about 1e-38) of the nearest neighbour's are taken as zero: they
change a sum by less than ``n * 1e-38`` relative.

The passes run over ranges of rows as jitted functions that release the GIL, on the shared
thread pool (:func:`nadaraya._support.jit.run_ranges`). Each costs O(n^2 d) per pass (times the levels
for :func:`loo_levels`, less the far tiles it skips) and O(n) memory besides its outputs.

numba is imported here; import this module lazily.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support import threads as _threads
from nadaraya._support.jit import exp_flushed, run_ranges

_threads.configure()  # numba's pool shares the cores politely (see nadaraya._support.threads)

__all__ = ["loo_curvature", "loo_levels", "shifts"]

#: recompute the exponential every this many levels (squarings amplify rounding by 2 each)
_REFRESH = 8
#: keys per tile: the loops' working set stays in L1, and a tile far from a point (its
#: weights all below exp(-_CUT)) is skipped, which with points sorted by the first feature is
#: most tiles when that feature's bandwidth is small
_TILE = 256
#: weights below exp(-_CUT) ~ 1e-38 of the nearest neighbour's are set to zero: they change a
#: sum by less than n * 1e-38 relative (nothing, in float64), and left alone the squarings
#: would turn them into subnormal numbers, whose arithmetic is a hundred times slower. A
#: weight kept is at least 1e-38, so its next three squares (down to 1e-304) are normal
#: numbers: the levels are computed in groups of _GROUP with a flush at the end of each.
_CUT = 87.0
_TINY = 1e-38
_GROUP = 4
#: a weight above exp(_OVER) relative to the shift's is reported as an overflow (inf)
_OVER = 700.0
#: reassociation lets LLVM vectorise the reductions; no "nnan"/"ninf", the loops rely on
#: ``exp(-inf) == 0`` for the masked own term
_FAST = {"reassoc", "contract", "nsz", "arcp"}


def shifts(zt: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """``c_i = min_{j != i} sum_k (zt[k, i] - zt[k, j])^2`` and the nearest ``j`` of each
    point, O(n log n): in 1-D from the gaps between the sorted points, else by a k-d tree.

    Examples
    --------
    >>> import numpy as np
    >>> c, nearest = shifts(np.array([[0.0, 1.0, 3.0]]))
    >>> c.tolist(), nearest.tolist()
    ([1.0, 1.0, 4.0], [1, 0, 1])
    """
    if zt.shape[0] == 1 and zt.shape[1] > 1:  # 1-D: the nearer of the two sorted neighbours
        z = zt[0]
        order = np.argsort(z, kind="stable")
        gaps = np.diff(z[order])
        left = np.concatenate([[np.inf], gaps])
        right = np.concatenate([gaps, [np.inf]])
        pos = np.arange(z.size)
        near = np.where(right < left, pos + 1, pos - 1)
        index = np.empty(z.size, dtype=np.int64)
        index[order] = order[near]
        c = np.empty(z.size)
        c[order] = np.minimum(left, right) ** 2
        return c, index
    from scipy.spatial import cKDTree

    z = np.ascontiguousarray(zt.T)
    dist, index = cKDTree(z).query(z, k=2)
    return np.ascontiguousarray(dist[:, 1] ** 2), np.ascontiguousarray(index[:, 1], dtype=np.int64)


@numba.njit(cache=True)
def _tile_boxes(zt):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Each key tile's bounding box: ``lo``, ``hi`` of shape (d, tiles)."""
    d, n = zt.shape
    n_tiles = (n + _TILE - 1) // _TILE
    lo = np.empty((d, n_tiles))
    hi = np.empty((d, n_tiles))
    for b in range(n_tiles):
        for k in range(d):
            zs = zt[k, b * _TILE : min(n, (b + 1) * _TILE)]
            lo[k, b] = zs.min()
            hi[k, b] = zs.max()
    return lo, hi


@numba.njit(inline="always", cache=True)
def _gap(zt, i, lo, hi, b):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The smallest ``g`` from point ``i`` to tile ``b``'s bounding box (a lower bound of
    ``g_ij`` over the tile's keys)."""
    g = 0.0
    for k in range(zt.shape[0]):
        zi = zt[k, i]
        gap = lo[k, b] - zi if zi < lo[k, b] else (zi - hi[k, b] if zi > hi[k, b] else 0.0)
        g += gap * gap
    return g


@numba.njit(inline="always", cache=True, fastmath=_FAST)
def _distances(zt, i, j0, m, r, dz):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``dz[j] = g(i, j0 + j) - g(i, r)`` for the ``m`` keys of a tile, the own term ``inf``.

    Each feature's difference of squares is taken as the product
    ``(z_j - z_r) ((z_j - z_i) + (z_r - z_i))``: exact to a few ulp of its terms, where
    ``t_j^2 - t_r^2`` loses everything once ``g`` exceeds about 1e16 (a point far from all
    others, whose reference ``r`` is its nearest neighbour, gets ``dz = 0`` for it exactly)."""
    for j in range(m):
        dz[j] = 0.0
    for k in range(zt.shape[0]):
        zs = zt[k, j0 : j0 + m]
        zi = zt[k, i]
        zr = zt[k, r]
        tr = zr - zi
        for j in range(m):
            dz[j] += (zs[j] - zr) * ((zs[j] - zi) + tr)
    if j0 <= i < j0 + m:
        dz[i - j0] = np.inf


@numba.njit(inline="always", cache=True)
def _beyond(zt, i, lo, hi, b, c):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """A lower bound of ``g_ij - c`` over the keys of tile ``b`` (``c`` the row's shift): the
    distance to the tile's box less ``c``, less their rounding (both may be huge and close)."""
    g = _gap(zt, i, lo, hi, b)
    return g - c - 1e-13 * (g + c)


@numba.njit(inline="always", cache=True, fastmath=_FAST)
def _dot(e, y, m):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``sum_j e[j] y[j]`` over the first ``m``."""
    acc = 0.0
    for j in range(m):
        acc += e[j] * y[j]
    return acc


@numba.njit(inline="always", cache=True, fastmath=_FAST)
def _flush(w: float) -> float:  # pragma: no cover - compiled
    """``w``, or 0 below ``_TINY`` (so that no later square is a subnormal number)."""
    return w if w > _TINY else 0.0


@numba.njit(cache=True, fastmath=_FAST)
def _four_levels(e, ss, ys, m, advance):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``sum_j ss_j w_j`` and ``sum_j ys_j w_j`` for ``w = e, e**2, e**4, e**8``, the eight sums
    held in registers (each key's numbers loaded once for four levels instead of four times);
    when ``advance``, ``e`` becomes ``e**16``, the next group's first level. ``e`` is 0 or at
    least ``_TINY`` = 1e-38, so ``e**8`` is a normal number; it is flushed, and so is ``e**16``."""
    s0 = s1 = s2 = s3 = 0.0
    t0 = t1 = t2 = t3 = 0.0
    for j in range(m):
        a = ss[j]
        b = ys[j]
        w = e[j]
        s0 += w * a
        t0 += w * b
        w = w * w
        s1 += w * a
        t1 += w * b
        w = w * w
        s2 += w * a
        t2 += w * b
        w = _flush(w * w)
        s3 += w * a
        t3 += w * b
        if advance:
            e[j] = _flush(w * w)
    return (s0, s1, s2, s3), (t0, t1, t2, t3)


@numba.njit(cache=True, nogil=True, fastmath=_FAST, inline="always")
def _weigh(dz, scale, ss, ys, e, m, watch):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The weights ``exp(-scale dz)`` of a tile of ``m`` keys into ``e`` (0 past ``_CUT``), and
    their sums against ``ss`` and ``ys``; with ``watch``, also how many terms exceed
    ``exp(_OVER)`` (an overflow to report). Inlined with ``scale`` and ``watch`` constants at
    each call, so each caller's loop compiles as if written out."""
    acc = 0.0
    acc0 = 0.0
    over = 0.0
    for j in range(m):
        x = dz[j] * scale
        w = exp_flushed(-x) if x < _CUT else 0.0
        e[j] = w
        acc += w * ss[j]
        acc0 += w * ys[j]
        if watch:
            over += 1.0 if x < -_OVER else 0.0  # (a sum vectorises; a min would not here)
    return acc, acc0, over


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _levels_rows(zt, shift, ref, s, sy, lo, hi, n_levels, i0, i1, S, T):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Rows ``i0:i1`` of :func:`loo_levels` (plain loops, so that LLVM vectorises them).

    A tile of keys whose bounding box is far from the row's point weighs nothing at the finer
    levels: with ``gmin`` the squared distance to the box, every weight of the tile at level
    ``l`` is at most ``exp(-(gmin - c) 2**l)``, so the levels where that is below
    ``exp(-_CUT)`` are skipped (their terms would be flushed to zero). With the points
    sorted by the first feature the tiles are narrow in it and most fine levels skip most
    tiles."""
    n = zt.shape[1]
    p = sy.shape[0]
    dz = np.empty(_TILE)
    e = np.empty(_TILE)
    for i in range(i0, i1):
        c = shift[i]
        for j0 in range(0, n, _TILE):
            m = min(n, j0 + _TILE) - j0
            gmin = _beyond(zt, i, lo, hi, j0 // _TILE, c)
            levels = n_levels
            if gmin > 0.0:
                if gmin >= _CUT:
                    continue
                levels = min(n_levels, math.floor(math.log2(_CUT / gmin)) + 1)
            _distances(zt, i, j0, m, ref[i], dz)
            ss = s[j0 : j0 + m]
            lev = 0
            while lev < levels:
                grouped = levels - lev >= _GROUP and lev % _REFRESH + _GROUP <= _REFRESH
                if lev % _REFRESH == 0 and not grouped:
                    # a lone level at a refresh: its exponentials and sums in one sweep
                    acc, acc0, _ = _weigh(dz, 2.0**lev, ss, sy[0, j0 : j0 + m], e, m, False)
                    S[lev, i] += acc
                    T[lev, i, 0] += acc0
                    for q in range(1, p):
                        T[lev, i, q] += _dot(e, sy[q, j0 : j0 + m], m)
                elif lev % _REFRESH == 0:
                    scale = 2.0**lev
                    for j in range(m):
                        x = dz[j] * scale
                        e[j] = exp_flushed(-x) if x < _CUT else 0.0
                # e holds level lev's weights, each 0 or at least _TINY
                if grouped:
                    # _GROUP levels in one sweep, their sums in registers; e moves on to the
                    # next group's first level
                    for q in range(p):
                        ys = sy[q, j0 : j0 + m]
                        sums, tsums = _four_levels(e, ss, ys, m, q == p - 1)
                        for k in range(_GROUP):
                            if q == 0:
                                S[lev + k, i] += sums[k]
                            T[lev + k, i, q] += tsums[k]
                    lev += _GROUP
                    continue
                if lev % _REFRESH != 0:
                    S[lev, i] += _dot(e, ss, m)
                    for q in range(p):
                        T[lev, i, q] += _dot(e, sy[q, j0 : j0 + m], m)
                if lev + 1 < levels:
                    for j in range(m):
                        w = e[j] * e[j]
                        e[j] = w if w > _TINY else 0.0
                lev += 1


def loo_levels(
    zt: NDArray[np.float64],
    shift: NDArray[np.float64],
    ref: NDArray[np.int64],
    s: NDArray[np.float64],
    sy: NDArray[np.float64],
    n_levels: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Leave-one-out sums at ``n_levels`` bandwidths ``h 2**(-l/2)``, one pass over the pairs.

    Parameters
    ----------
    zt : ndarray of shape (d, n)
        ``X / (sqrt(2) h)``, transposed, C-contiguous.
    shift : ndarray of shape (n,)
        ``c_i``: the squared distance in ``Z`` from each point to its nearest other point
        (:func:`shifts`), so that each row's largest weight is one. The distance to any other
        point also works (every row's sum is then at least one), unless some point is nearer
        by more than 700 in ``g``: that row's ``S`` is then ``inf``, and the caller must ask
        again with the exact shift.
    ref : ndarray of int64, shape (n,)
        The point whose distance ``shift`` is (``c_i = g(i, ref_i)``): each weight's exponent
        ``g_ij - c_i`` is computed as a difference of squares against it, so that a point far
        from all others (``c_i`` beyond 1e16, where ``g_ij - c_i`` would be rounding noise)
        still gets its nearest neighbours' exact limit.
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
    lo, hi = _tile_boxes(zt)
    run_ranges(_levels_rows, (zt, shift, np.ascontiguousarray(ref, dtype=np.int64), s, sy, lo, hi, n_levels),
               n, (S, T))
    return S, T


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _curvature_rows(zt, shift, ref, s, sy, lo, hi, i0, i1, M, N):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Rows ``i0:i1`` of :func:`loo_curvature`: two sweeps per key tile, the sums in
    registers (far tiles skipped)."""
    n = zt.shape[1]
    p = sy.shape[0]
    dz = np.empty(_TILE)
    e = np.empty(_TILE)
    for i in range(i0, i1):
        c = shift[i]
        for j0 in range(0, n, _TILE):
            if _beyond(zt, i, lo, hi, j0 // _TILE, c) >= _CUT:
                continue  # every weight of the tile is flushed to zero
            m = min(n, j0 + _TILE) - j0
            _distances(zt, i, j0, m, ref[i], dz)  # g - c: the moments are taken of it
            ss = s[j0 : j0 + m]
            ys = sy[0, j0 : j0 + m]
            # two sweeps of four sums each: eight sums and the exponential in one loop would
            # not fit the vector registers
            m0 = m1 = n0 = n1 = 0.0
            for j in range(m):
                g = dz[j]
                x = g
                near = x < _CUT
                w = exp_flushed(-x) if near else 0.0
                g = g if near else 0.0  # (the masked own term: no inf * 0)
                dz[j] = g
                e[j] = w
                a = w * ss[j]
                b = w * ys[j]
                m0 += a
                n0 += b
                m1 += a * g
                n1 += b * g
            m2 = m3 = n2 = n3 = 0.0
            for j in range(m):
                g = dz[j]
                gg = g * g
                a = e[j] * ss[j] * gg
                b = e[j] * ys[j] * gg
                m2 += a
                n2 += b
                m3 += a * g
                n3 += b * g
            M[0, i] += m0
            M[1, i] += m1
            M[2, i] += m2
            M[3, i] += m3
            N[0, i, 0] += n0
            N[1, i, 0] += n1
            N[2, i, 0] += n2
            N[3, i, 0] += n3
            for q in range(1, p):
                ys = sy[q, j0 : j0 + m]
                n0 = n1 = n2 = n3 = 0.0
                for j in range(m):
                    g = dz[j]  # (0 for the masked own term)
                    b = e[j] * ys[j]
                    n0 += b
                    b *= g
                    n1 += b
                    b *= g
                    n2 += b
                    n3 += b * g
                N[0, i, q] += n0
                N[1, i, q] += n1
                N[2, i, q] += n2
                N[3, i, q] += n3


def loo_curvature(
    zt: NDArray[np.float64], shift: NDArray[np.float64], ref: NDArray[np.int64], s: NDArray[np.float64],
    sy: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Leave-one-out sums and the moments of their first three derivatives along ``log h``.

    For the Halley steps of the scalar search: with ``g_ij = |u_ij|^2 / 2`` (one bandwidth
    scaling every feature), ``w_ij = exp(-g_ij)`` and ``d g_ij / d log h = -2 g_ij``, so
    ``w' = 2 g w``, ``w'' = (4 g^2 - 4 g) w`` and ``w''' = (8 g^3 - 24 g^2 + 8 g) w``.

    Parameters
    ----------
    zt, shift, ref, s, sy
        As for :func:`loo_levels`.

    Returns
    -------
    M : ndarray of shape (4, n)
        ``M[r, i] = sum_{j != i} s_j w_ij (g_ij - c_i)^r``, r = 0 .. 3 (shifted like ``S``):
        the leave-one-out predictions do not change when every ``g_ij`` of a row moves by the
        same ``c_i``, and the moments of ``g_ij - c_i`` keep their accuracy where ``c_i`` is
        huge (``log S``'s derivatives gain ``2 c_i``, ``-4 c_i``, ``8 c_i``).
    N : ndarray of shape (4, n, p)
        The same with ``s_j y_j``.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([[0.0, 0.5, 2.0]]); y = np.array([[1.0, 2.0, 4.0]])
    >>> c, nearest = shifts(z)
    >>> M, N = loo_curvature(z, c, nearest, np.ones(3), y)
    >>> g = np.array([0.25, 4.0]); w = np.exp(0.25 - g)  # row 0, shifted by its nearest
    >>> bool(np.allclose(M[:, 0], [w @ (g - 0.25)**r for r in range(4)]))
    True
    """
    n = zt.shape[1]
    p = sy.shape[0]
    M = np.zeros((4, n))
    N = np.zeros((4, n, p))
    lo, hi = _tile_boxes(zt)
    ref = np.ascontiguousarray(ref, dtype=np.int64)
    run_ranges(_curvature_rows, (zt, shift, ref, s, sy, lo, hi), n, (M, N))
    return M, N
