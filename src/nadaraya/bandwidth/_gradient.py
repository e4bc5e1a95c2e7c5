"""The gradient pass: leave-one-out Gaussian sums and their per-feature bandwidth moments (numba)."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import exp_flushed, generated, run_ranges
from nadaraya.bandwidth._passes import _CUT, _FAST, _OVER, _TILE, _beyond, _dot, _tile_boxes, _weigh

__all__ = ["loo_gradient"]


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _gradient_rows(zt, shift, ref, s, sy, lo, hi, i0, i1, S, T, A, B):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Rows ``i0:i1`` of :func:`loo_gradient` (far tiles skipped)."""
    d, n = zt.shape
    p = sy.shape[0]
    dz = np.empty(_TILE)
    e = np.empty(_TILE)
    u2 = np.empty(_TILE)
    tt = np.empty((d, _TILE))  # each feature's squared differences, kept for the moments
    for i in range(i0, i1):
        c = shift[i]
        r = ref[i]
        for j0 in range(0, n, _TILE):
            if _beyond(zt, i, lo, hi, j0 // _TILE, c) >= _CUT:
                continue  # every weight of the tile is flushed to zero
            m = min(n, j0 + _TILE) - j0
            for j in range(m):
                dz[j] = 0.0
            for k in range(d):
                zs = zt[k, j0 : j0 + m]
                zi = zt[k, i]
                zr = zt[k, r]
                tr = zr - zi
                tk = tt[k]
                for j in range(m):
                    v = (zs[j] - zr) * ((zs[j] - zi) + tr)  # g_ijk - g_irk (see _distances)
                    tk[j] = v
                    dz[j] += v
            if j0 <= i < j0 + m:
                dz[i - j0] = np.inf
            ss = s[j0 : j0 + m]
            y0 = sy[0, j0 : j0 + m]
            acc, acc0, over = _weigh(dz, 1.0, ss, y0, e, m, True)
            # a shift far above this row's nearest (see loo_gradient) would overflow: say so
            S[i] += acc if over == 0.0 else np.inf
            T[i, 0] += acc0
            for q in range(1, p):
                T[i, q] += _dot(e, sy[q, j0 : j0 + m], m)
            for k in range(d):
                tk = tt[k]
                acc = 0.0
                acc0 = 0.0
                for j in range(m):
                    v = 2.0 * tk[j] * e[j]
                    u2[j] = v
                    acc += v * ss[j]
                    acc0 += v * y0[j]
                A[i, k] += acc
                B[i, k, 0] += acc0
                for q in range(1, p):
                    B[i, k, q] += _dot(u2, sy[q, j0 : j0 + m], m)


#: the most features whose gradient sums a generated loop keeps in registers
_MAX_GENERATED = 8

_GRADIENT_TILE = """
def gradient_tile(nf, zt, i, j0, m, r, s, sy, S, T, A, B):
    ss = s[j0 : j0 + m]
    ys = sy[0, j0 : j0 + m]
    jm = i - j0  # the own term's place in the tile (masked), if it is there
    {views}
    s0 = 0.0
    t0 = 0.0
    over = 0.0
    {init}
    for j in range(m):
        {terms}
        x = {total}
        w = exp_flushed(-x) if (x < CUT and j != jm) else 0.0
        over += 1.0 if (x < -OVER and j != jm) else 0.0  # the own term (distance 0) is left out
        a = w * ss[j]
        b = w * ys[j]
        s0 += a
        t0 += b
        {moments}
    S[i] += s0 if over == 0.0 else np.inf
    T[i, 0] += t0
    {store}
"""


def _key(nf: int, moments: int) -> int:
    """The generated sweep's key: ``nf`` features, the moments of those whose bits are set in
    ``moments`` (all of them: the key is ``nf``)."""
    return nf if moments == (1 << nf) - 1 else nf | (moments << 4)


def _gradient_source(key: int) -> str:
    """Python source of one row's sweep over one key tile for ``nf`` features and one output
    (``key`` from :func:`_key`): each feature's coordinates a 1-D view named in the source (a
    unit-stride load), its squared difference, and the sums (two, and two per feature whose
    moments are asked for), all in registers."""
    nf = key & 15
    moments = key >> 4 if key >> 4 else (1 << nf) - 1
    f = range(nf)
    kept = [k for k in f if moments >> k & 1]
    return _GRADIENT_TILE.format(
        views="\n    ".join(
            f"k_{k} = zt[{k}, j0 : j0 + m]; z_{k} = zt[{k}, i]; r_{k} = zt[{k}, r]; tr_{k} = r_{k} - z_{k}"
            for k in f
        ),
        init="\n    ".join(f"a_{k} = 0.0; b_{k} = 0.0" for k in kept),
        terms="\n        ".join(f"t = k_{k}[j]; g_{k} = (t - r_{k}) * ((t - z_{k}) + tr_{k})" for k in f),
        total=" + ".join(f"g_{k}" for k in f),
        moments="\n        ".join(f"a_{k} += a * g_{k}; b_{k} += b * g_{k}" for k in kept) or "pass",
        store="\n    ".join(f"A[i, {k}] += 2.0 * a_{k}; B[i, {k}, 0] += 2.0 * b_{k}" for k in kept) or "pass",
    )


_GENERATED: dict[int, dict[str, Any]] = {}


def _gradient_tile(nf, zt, i, j0, m, r, s, sy, S, T, A, B):  # type: ignore[no-untyped-def]
    """One row's sweep over one key tile (generated per number of features); compiled only."""
    raise NotImplementedError("only callable from jitted code")


@numba.extending.overload(
    _gradient_tile, inline="never", prefer_literal=True, jit_options={"fastmath": _FAST}
)
def _gradient_tile_impl(nf, zt, i, j0, m, r, s, sy, S, T, A, B):  # type: ignore[no-untyped-def]
    names = {"np": np, "exp_flushed": exp_flushed, "CUT": _CUT, "OVER": _OVER}
    namespace = generated(_GENERATED, nf, _gradient_source, "gradient sweep", names)
    return None if namespace is None else namespace["gradient_tile"]


def _gradient_kernel(nf: int) -> Any:
    """The gradient pass over rows ``i0:i1`` for the key ``nf`` (:func:`_key`: the number of
    features, and whose moments) and one output: ``nf`` is a frozen closure constant (numba
    keys its on-disk cache on it), so the tile sweep is the one generated for it."""

    @numba.njit(cache=True, nogil=True)
    def rows(zt, shift, ref, s, sy, lo, hi, i0, i1, S, T, A, B):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        n = zt.shape[1]
        for i in range(i0, i1):
            c = shift[i]
            for j0 in range(0, n, _TILE):
                if _beyond(zt, i, lo, hi, j0 // _TILE, c) >= _CUT:
                    continue  # every weight of the tile is flushed to zero
                _gradient_tile(nf, zt, i, j0, min(n, j0 + _TILE) - j0, ref[i], s, sy, S, T, A, B)

    return rows


_KERNELS: dict[int, Any] = {}


def loo_gradient(
    zt: NDArray[np.float64], shift: NDArray[np.float64], ref: NDArray[np.int64], s: NDArray[np.float64],
    sy: NDArray[np.float64], moments: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Leave-one-out sums and their bandwidth moments at one (per-feature) bandwidth.

    With one output and at most eight features the sweep is generated for the number of
    features (and the features whose moments are asked for), which keeps every feature's
    squared difference and all the sums in registers (the general loop is
    :func:`_gradient_rows`, which sums every feature's moments).

    Parameters
    ----------
    zt, shift, ref, s, sy
        As for :func:`~nadaraya.bandwidth._passes.loo_levels`.
    moments : ndarray of bool, shape (d,), optional
        The features whose moments ``A``, ``B`` are needed (default all): a search that holds
        some features fixed needs no derivative along them, and a feature's moments cost two
        sums per pair. The others' columns of ``A`` and ``B`` may be left at zero.

    Returns
    -------
    S : ndarray of shape (n,)
    T : ndarray of shape (n, p)
    A : ndarray of shape (n, d)
        ``sum_{j != i} s_j w_ij (u_ijk^2 - u_irk^2)`` (shifted like ``S``; ``r = ref_i``): the
        derivatives of the leave-one-out predictions do not change when each feature's
        ``u_ijk^2`` moves by the same amount over ``j``, and these moments keep their
        accuracy where ``u_irk^2`` is huge. ``sum_j s_j w_ij u_ijk^2`` is ``A + u_irk^2 S``.
    B : ndarray of shape (n, d, p)
        ``sum_{j != i} s_j w_ij (u_ijk^2 - u_irk^2) y_j``.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.bandwidth._passes import shifts
    >>> z = np.array([[0.0, 0.5, 2.0], [0.0, 0.0, 1.0]]); y = np.array([[1.0, 2.0, 4.0]])
    >>> c, nearest = shifts(z)
    >>> S, T, A, B = loo_gradient(z, c, nearest, np.ones(3), y)
    >>> g = np.array([[0.25, 4.0], [0.0, 1.0]]); w = np.exp(0.25 - g.sum(axis=0))  # row 0
    >>> gr = g[:, :1]  # row 0's nearest is point 1, the first of its others
    >>> bool(np.allclose(A[0], 2 * (g - gr) @ w) and np.isclose(T[0, 0], w @ [2.0, 4.0]))
    True
    """
    d, n = zt.shape
    p = sy.shape[0]
    S = np.zeros(n)
    T = np.zeros((n, p))
    A = np.zeros((n, d))
    B = np.zeros((n, d, p))
    lo, hi = _tile_boxes(zt)
    if p == 1 and d <= _MAX_GENERATED:
        keep = np.ones(d, dtype=bool) if moments is None else np.asarray(moments, dtype=bool)
        key = _key(d, int(keep @ (1 << np.arange(d))))
        if key not in _KERNELS:
            _KERNELS[key] = _gradient_kernel(key)
        rows = _KERNELS[key]
    else:
        rows = _gradient_rows
    run_ranges(rows, (zt, shift, np.ascontiguousarray(ref, dtype=np.int64), s, sy, lo, hi), n, (S, T, A, B))
    return S, T, A, B
