"""The general local polynomial solve, one query at a time in compiled code (any ``d``, any degree).

The rule of :mod:`nadaraya.local.solve`, query by query, with no ``(m, P, P)`` temporaries: each
query's normal equations ``M / sum w`` and ``R / sum w`` are read from the moment sums (the
same operations, in the same order, as :func:`nadaraya.local.solve._systems`), then for the
asked degree and down through the leading blocks:

1. the block is singular if a diagonal entry is not positive or an entry is not finite;
2. it is scaled to a unit diagonal, ``S = D^-1/2 M D^-1/2``, and factored ``S = L L^T``
   (Cholesky);
3. its reciprocal condition number ``ev_min(S) / ev_max(S)`` is compared with ``rcond_min``.
   Where the factorisation succeeded, ``1 / (tr(S^-1) min(tr S, max_a sum_b |S_ab|))`` is a
   lower bound on it (``tr(S^-1) >= 1 / ev_min``; the trace and Gershgorin bound ``ev_max``);
   where that bound clears twice ``rcond_min`` (and ``1e-12``, so that the rounding of
   ``tr(S^-1)``, ``eps`` times the condition, is far below the factor two) the block is
   regular. Otherwise the eigenvalues of ``S`` decide, from a cyclic Jacobi iteration: each
   rotation is backward stable, so the computed eigenvalues are those of ``S + E`` with
   ``||E|| <= c(P) eps ||S||``, and by Weyl's inequality every one is within ``c(P) eps ||S||``
   of the exact one, the accuracy of LAPACK's ``eigvalsh``. The decision is thus the eigenvalue
   ratio's, as in the NumPy rule, up to rounding where the ratio sits within a few ``eps``
   of the threshold;
4. a regular block is solved with its Cholesky factor (LU with partial pivoting where the
   factorisation failed but the eigenvalues say regular, which takes a threshold below about
   ``P eps``), for the values and for ``e_0`` (the inverse's corner).

Rows with no positive weight are not written. A query whose every block is singular gets
degree 0: ``R_0 / M_00``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["rows"]

_EPS = float(np.finfo(np.float64).eps)
#: the lower bound certifies regular only above this (its rounding is ``eps`` times the condition)
_CERTAIN = 1e-12


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _cholesky(S, L, n):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``L L^T = S[:n, :n]`` (lower triangle of ``L``); False where a pivot is not positive."""
    for a in range(n):
        for b in range(a + 1):
            acc = S[a, b]
            for k in range(b):
                acc -= L[a, k] * L[b, k]
            if a == b:
                if not acc > 0:
                    return False
                L[a, a] = math.sqrt(acc)
            else:
                L[a, b] = acc / L[b, b]
    return True


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _inverse_trace(L, T, n):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``tr(S^-1) = ||L^-1||_F^2``, with ``L^-1`` built column by column in ``T``."""
    total = 0.0
    for c in range(n):
        for a in range(c, n):
            acc = 1.0 if a == c else 0.0
            for k in range(c, a):
                acc -= L[a, k] * T[k, c]
            T[a, c] = acc / L[a, a]
            total += T[a, c] * T[a, c]
    return total


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _jacobi_rcond(S, A, n):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``ev_min / ev_max`` of the symmetric ``S[:n, :n]`` by cyclic Jacobi rotations (on a copy in
    ``A``), rotating every off-diagonal entry above ``eps ||S||_F / n`` until none is left."""
    norm = 0.0
    for a in range(n):
        for b in range(n):
            A[a, b] = S[a, b]
            norm += S[a, b] * S[a, b]
    tol = _EPS * math.sqrt(norm) / n
    for _sweep in range(60):
        rotated = False
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = A[p, q]
                if not abs(apq) > tol:
                    continue
                rotated = True
                theta = (A[q, q] - A[p, p]) / (2.0 * apq)
                if abs(theta) > 1e150:
                    t = 0.5 / theta
                else:
                    t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                    if theta < 0:
                        t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                A[p, p] -= t * apq
                A[q, q] += t * apq
                A[p, q] = A[q, p] = 0.0
                for r in range(n):
                    if r != p and r != q:
                        arp, arq = A[r, p], A[r, q]
                        A[r, p] = A[p, r] = c * arp - s * arq
                        A[r, q] = A[q, r] = s * arp + c * arq
        if not rotated:
            break
    lo, hi = A[0, 0], A[0, 0]
    for a in range(1, n):
        lo = min(lo, A[a, a])
        hi = max(hi, A[a, a])
    return lo / hi


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _lu_solve(S, A, X, n, cols):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``X[:n, :cols] <- S[:n, :n]^-1 X[:n, :cols]`` by LU with partial pivoting (on a copy in ``A``)."""
    for a in range(n):
        for b in range(n):
            A[a, b] = S[a, b]
    for k in range(n):
        piv = k
        for a in range(k + 1, n):
            if abs(A[a, k]) > abs(A[piv, k]):
                piv = a
        if piv != k:
            for b in range(n):
                A[k, b], A[piv, b] = A[piv, b], A[k, b]
            for c in range(cols):
                X[k, c], X[piv, c] = X[piv, c], X[k, c]
        for a in range(k + 1, n):
            f = A[a, k] / A[k, k]
            for b in range(k + 1, n):
                A[a, b] -= f * A[k, b]
            for c in range(cols):
                X[a, c] -= f * X[k, c]
    for c in range(cols):
        for a in range(n - 1, -1, -1):
            acc = X[a, c]
            for b in range(a + 1, n):
                acc -= A[a, b] * X[b, c]
            X[a, c] = acc / A[a, a]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _cholesky_solve(L, X, n, cols):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``X[:n, :cols] <- (L L^T)^-1 X[:n, :cols]``."""
    for c in range(cols):
        for a in range(n):
            acc = X[a, c]
            for k in range(a):
                acc -= L[a, k] * X[k, c]
            X[a, c] = acc / L[a, a]
        for a in range(n - 1, -1, -1):
            acc = X[a, c]
            for k in range(a + 1, n):
                acc -= L[k, a] * X[k, c]
            X[a, c] = acc / L[a, a]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _regular(M, S, L, T, n, scl, rcond_min, exact):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Whether the leading ``n x n`` block of ``M`` is regular (the module's steps 1-3); fills its
    scaling ``scl``, the scaled block ``S`` and, where the second value is True, its factor ``L``."""
    for a in range(n):
        if not M[a, a] > 0:
            return False, False
        for b in range(n):
            if not math.isfinite(M[a, b]):
                return False, False
    for a in range(n):
        scl[a] = 1.0 / math.sqrt(M[a, a])
    for a in range(n):
        for b in range(n):
            S[a, b] = M[a, b] * scl[a] * scl[b]
    factored = _cholesky(S, L, n)
    if factored and not exact:
        trace, row_max = 0.0, 0.0
        for a in range(n):
            trace += S[a, a]
            row = 0.0
            for b in range(n):
                row += abs(S[a, b])
            row_max = max(row_max, row)
        bound = 1.0 / (_inverse_trace(L, T, n) * min(trace, row_max))
        if bound >= 2.0 * rcond_min and bound >= _CERTAIN:
            return True, True
    return _jacobi_rcond(S, T, n) >= rcond_min, factored


@numba.njit(cache=True, nogil=True, error_model="numpy")
def rows(w, mom, vmom, morder, mflat, mscale, rorder, rflat, rscale, sizes, inv_h, rcond_min,  # type: ignore[no-untyped-def]  # pragma: no cover
         exact, a0, b0, estimate, slope, used, inv00):
    """The fits of queries ``a0:b0``. ``mom[j]`` (m, d^j) holds the sums of order ``j`` (``mom[0]``
    the weights), ``vmom[j]`` (m, d^j p) those with the values; ``M[a, b]`` is
    ``mom[morder[a, b]][i, mflat[a, b]] / w * mscale[a, b]``, ``R[a, c]`` likewise from
    ``vmom``; ``sizes[r]`` the number of monomials of degree at most ``r``. ``exact``: decide
    every block by its eigenvalues (no lower bound)."""
    P = sizes[sizes.size - 1]
    p = vmom[0].shape[1]
    d = inv_h.size
    M, S, L, T = np.empty((P, P)), np.empty((P, P)), np.zeros((P, P)), np.zeros((P, P))
    R, X = np.empty((P, p)), np.empty((P, p + 1))
    scl = np.empty(P)
    for i in range(a0, b0):
        s0 = w[i]
        if not s0 > 0:
            continue
        for a in range(P):
            for b in range(a + 1):
                M[a, b] = M[b, a] = mom[morder[a, b]][i, mflat[a, b]] / s0 * mscale[a, b]
            j, base = rorder[a], rflat[a] * p
            for c in range(p):
                R[a, c] = vmom[j][i, base + c] / s0 * rscale[a]
        done = False
        for r in range(sizes.size - 1, 0, -1):
            n = sizes[r]
            regular, factored = _regular(M, S, L, T, n, scl, rcond_min, exact)
            if not regular:
                continue
            for a in range(n):
                for c in range(p):
                    X[a, c] = R[a, c] * scl[a]
                X[a, p] = 1.0 if a == 0 else 0.0
            if factored:
                _cholesky_solve(L, X, n, p + 1)
            else:
                _lu_solve(S, T, X, n, p + 1)
            for c in range(p):
                estimate[i, c] = X[0, c] * scl[0]
                for a in range(d):
                    slope[i, a, c] = X[1 + a, c] * scl[1 + a] * inv_h[a]
            inv00[i] = X[0, p] * scl[0] * scl[0]
            used[i] = r
            done = True
            break
        if not done:
            for c in range(p):
                estimate[i, c] = R[0, c] / M[0, 0]
            inv00[i] = 1.0 / M[0, 0]
            used[i] = 0
