"""Windowed moment sums in 1-D for even kernels of long expansions: the pivot sweep without a split (numba).

Serves the kernels even in ``u`` (``K(u) = sum_d c_d u^d``, odd ``c_d`` zero) whose expansions
the even sweep of :mod:`._windowed_msweep` cannot serve with its fixed guards (biweight at
degree 2, triweight; :data:`._windowed_msplit.EVEN_SWEEP_MAX_POWERS`). The queries' cells are
``h / div`` wide (``|Q| <= 1 / (2 div)``, ``Q = (q - centre) / h`` about the cell's centre); each
cell tabulates the compensated sums ``sum sw t^j (1, v, |v|)`` of the keys within ``h`` of it
from the key at its centre outwards (:func:`_pivot_cols`: ``t = (k - centre) / h``), and a
window ``[lo, hi)``, walked over the sorted queries, is the difference of two rows.

**The sums.** ``K(u) (t - Q)^a`` is a polynomial in ``t`` whose coefficients ``A[a, j]`` are
polynomials in ``Q``: ``A[0, j] = sum_d c_d C(d, j) (-Q)^(d - j)`` by Horner's rule, then
``A[a + 1, j] = A[a, j - 1] - Q A[a, j]`` (``K(u) u^(a + 1) = (t - Q) K(u) u^a``), one product a
coefficient, made once per query and shared by every column. A moment ``S[a] = sum_j A[a, j]
M[j]`` reads only the powers it needs: ``a <= 2 r`` for the weight, ``a <= r`` for each value
column (``j <= D + r``, ``D`` the kernel's degree), and ``a = 0, 2`` for the ``|v|`` columns,
which only size the loss test (``j <= D + 2``).

**The loss test, per query** (the rule of :mod:`._windowed_msplit`, unchanged). Each table
difference rounds by a few ulps of ``B_j = sum sw |t|^j`` over the rows from the pivot to the
window's far end (the even powers read from the table; an odd one bounded by the mean of its
neighbours), so ``S[a]`` is within a few ulps of ``E_a = sum_j Ã[a, j] B_j`` with ``Ã`` the same
recurrence in ``|Q|`` and ``|c_d|`` (``Ã[a, j] = sum_d |c_d| C(d + a, j) |Q|^(d + a - j)``). A
moment is served where the even moment at or above it (a lower bound of its natural size
``sum w |u|^a [|v|]``, ``|u| <= 1``) is at least ``2 _LOSS`` of ``E_a``; else the query goes to the
pair sums. ``E_a`` is made only where the larger bound with ``Ã`` at the largest ``|Q|`` of a
cell (:func:`cell_bound`, folded onto the even powers by :func:`fold_even`: a handful of products
a moment) fails; the decisions are those of the query's own ``E_a``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from numba import njit
from numpy.typing import NDArray

from nadaraya.backends._windowed_jit import _bounds, _csx, _first_at, _triage
from nadaraya.backends._windowed_msweep import _LOSS
from nadaraya.backends._windowed_sweep import _scatter, _sort_bucket, _store, _walk

__all__ = ["cell_bound", "even_sweep", "fold_even", "horner_rows"]


@njit(cache=True, inline="always")
def _pivot_cols(T, comp, xs, k0, k1, piv, centre, inv_h, sw, values, nf, p, nv, na):  # pragma: no cover
    """:func:`._windowed_msplit._pivot_table`'s rows with only the powers each column is read at:
    ``nf`` of the weight, ``nv`` of each value column (both compensated), ``na`` of each ``|v|``
    column (plain sums: they only size the loss test); the other entries are left unset.
    ``T[i - k0]``: the sum over ``[piv, i)`` for ``i >= piv``, minus that over ``[i, piv)`` below.
    Keys are taken two at a time: the second row is the compensated add of the pair's sum (one
    compensation chain step per two keys), the first the running sum plus the first key's term
    less the compensation, rounded once. ``nf``, ``p``, ``nv``, ``na``: the caller's compile-time
    constants (the loops unroll)."""
    has_sw = sw.shape[0] > 0
    for j in range(nf):
        for cc in range(1 + 2 * p):
            T[piv - k0, j, cc] = 0.0
    for step in range(2):
        for j in range(nf):
            for cc in range(1 + p):
                comp[j, cc] = 0.0
        sign = 1.0 if step == 0 else -1.0
        dr = 1 if step == 0 else -1
        count = k1 - piv if step == 0 else piv - k0
        was = piv - k0
        i = piv if step == 0 else piv - 1  # the next key added
        for _ in range(count // 2):
            r1 = was + dr
            r2 = r1 + dr
            t1 = (np.float64(xs[i]) - centre) * inv_h
            t2 = (np.float64(xs[i + dr]) - centre) * inv_h
            g1 = sign * (sw[i] if has_sw else 1.0)
            g2 = sign * (sw[i + dr] if has_sw else 1.0)
            for j in range(nf):
                for cc in range(1 + p):
                    if cc == 0 or j < nv:
                        y1 = g1 if cc == 0 else g1 * values[i, cc - 1]
                        y2 = g2 if cc == 0 else g2 * values[i + dr, cc - 1]
                        base = T[was, j, cc]
                        c = comp[j, cc]
                        T[r1, j, cc] = base + (y1 - c)
                        y = (y1 + y2) - c
                        tot = base + y
                        comp[j, cc] = (tot - base) - y
                        T[r2, j, cc] = tot
                if j < na:
                    for cc in range(p):
                        a1 = T[was, j, 1 + p + cc] + g1 * abs(values[i, cc])
                        T[r1, j, 1 + p + cc] = a1
                        T[r2, j, 1 + p + cc] = a1 + g2 * abs(values[i + dr, cc])
                g1 *= t1
                g2 *= t2
            was = r2
            i += 2 * dr
        if count % 2:
            row = was + dr
            t = (np.float64(xs[i]) - centre) * inv_h
            gj = sign * (sw[i] if has_sw else 1.0)
            for j in range(nf):
                for cc in range(1 + p):
                    if cc == 0 or j < nv:
                        y = gj if cc == 0 else gj * values[i, cc - 1]
                        y -= comp[j, cc]
                        tot = T[was, j, cc] + y
                        comp[j, cc] = (tot - T[was, j, cc]) - y
                        T[row, j, cc] = tot
                if j < na:
                    for cc in range(p):
                        T[row, j, 1 + p + cc] = T[was, j, 1 + p + cc] + gj * abs(values[i, cc])
                gj *= t


@njit(cache=True, inline="always")
def _coefficients(A, H, Q, d, na):  # pragma: no cover - compiled
    """``A[a, j]`` (``a < na``, ``j <= d + a``): the weight of ``t^j`` in ``K(u) (t - Q)^a``, from
    ``H[j, s]`` (``A[0, j] = sum_s H[j, s] Q^s``, Horner's rule) and the recurrence ``A[a + 1, j]
    = A[a, j - 1] - Q A[a, j]``. With ``|c_d|`` in ``H`` and ``-|Q|`` for ``Q``, the same makes
    the rounding bound's ``Ã`` (all terms positive)."""
    Q2 = Q * Q
    for j in range(d + 1):  # H[j, s] is zero unless s has the parity of j (c_d even): Horner in Q^2
        p0 = j & 1
        s = 0.0
        for ss in range((d - j - p0) // 2, -1, -1):
            s = s * Q2 + H[j, p0 + 2 * ss]
        A[0, j] = s * Q if p0 else s
    for aa in range(1, na):
        top = d + aa
        A[aa, top] = A[aa - 1, top - 1]
        for j in range(top - 1, 0, -1):
            A[aa, j] = A[aa - 1, j - 1] - Q * A[aa - 1, j]
        A[aa, 0] = -Q * A[aa - 1, 0]


@njit(cache=True, inline="always")
def _dot(A, M, aa, cc, top):  # pragma: no cover - compiled
    """``sum_j A[aa, j] M[j, cc]`` over ``j < top``."""
    s = 0.0
    for j in range(top):
        s += A[aa, j] * M[j, cc]
    return s


@njit(cache=True, inline="always")
def _own_bound(S, B, Ab, Hb, aq, d, nf, na, p, nr, ns):  # pragma: no cover - compiled
    """The loss test with the query's own rounding bound ``Eb[a, x] = sum_j Ã[a, j] B[j, x]``
    (``x = 0``: the weight, its ``na`` moments; ``x >= 1``: the ``|v|`` column ``x``, its first
    ``nr`` moments, read at its ``ns`` powers): whether every moment's lower bound of natural size
    (the even moment at or above it) is at least ``2 _LOSS`` of it. ``B``'s even powers are
    :func:`_bound_rows`'; its odd ones are filled here."""
    for j in range(1, nf, 2):
        B[j, 0] = 0.5 * (B[j - 1, 0] + B[j + 1, 0])
        if j < ns:
            for x in range(1, 1 + p):
                B[j, x] = 0.5 * (B[j - 1, x] + B[j + 1, x])
    _coefficients(Ab, Hb, -aq, d, na)
    ok = S[0, 0] > 0.0
    for aa in range(na):
        ok = ok and S[aa + (aa & 1), 0] >= 2.0 * _LOSS * _dot(Ab, B, aa, 0, d + aa + 1)
    for aa in range(nr):
        for x in range(1, 1 + p):
            ok = ok and S[aa + (aa & 1), p + x] >= 2.0 * _LOSS * _dot(Ab, B, aa, x, d + aa + 1)
    return ok


@njit(cache=True, inline="always")
def _bound_rows(B, M, same, T, hi_row, lo_row, nf, p, ns):  # pragma: no cover - compiled
    """``B[j, x]`` at the even powers: the table's sums of ``sw t^j`` (``x = 0``) and ``sw t^j
    |v|`` (``x >= 1``) over the rows ``lo_row .. hi_row`` (from the pivot to the window's far
    end), read from the window's sums ``M`` where ``same`` (the same rows and no key left out:
    the same differences)."""
    for j in range(0, nf, 2):
        B[j, 0] = M[j, 0] if same else T[hi_row, j, 0] - T[lo_row, j, 0]
        if j < ns:
            for x in range(1, 1 + p):
                B[j, x] = M[j, p + x] if same else T[hi_row, j, p + x] - T[lo_row, j, p + x]


@njit(cache=True, inline="always")
def _cell_test(S, B, Ge, d, nf, na, p, nr, ns):  # pragma: no cover - compiled
    """The loss test against the bound at the cell's largest ``|Q|``, ``sum_j G[a, j] B_j`` (at
    least the query's own): ``Ge`` is ``G`` folded onto the even powers (an odd power's ``B_j``
    is the mean of its neighbours'), so it reads ``B``'s even powers only. Arguments as
    :func:`_own_bound`'s."""
    ok = S[0, 0] > 0.0
    for aa in range(na):
        s = 0.0
        for j in range(0, min(nf, d + aa + 2), 2):
            s += Ge[aa, j] * B[j, 0]
        ok = ok and S[aa + (aa & 1), 0] >= 2.0 * _LOSS * s
    for aa in range(nr):
        for x in range(1, 1 + p):
            s = 0.0
            for j in range(0, min(ns, d + aa + 2), 2):
                s += Ge[aa, j] * B[j, x]
            ok = ok and S[aa + (aa & 1), p + x] >= 2.0 * _LOSS * s
    return ok


@functools.cache
def even_sweep(nf: int, p: int, degree: int, div: int) -> Callable[..., None]:
    """The sweep for a kernel even in ``u`` of ``nf`` powers of ``t`` (its degree + 1 + 2
    ``degree``), ``p`` outputs and a polynomial ``degree`` (closure constants), queries' cells
    ``h / div`` wide; arguments and results as :func:`._windowed_msweep.moment_sweep`'s, with the
    coefficient rows ``H`` and ``Hb`` of :func:`horner_rows` and the cell's bound of
    :func:`cell_bound` folded by :func:`fold_even` in place of the expansion and its guards."""
    NF = nf
    DIV = div
    P = p
    R = degree
    D = nf - 1 - 2 * degree  # the kernel's degree
    NA = 2 * R + 1  # the weight's moments
    NV = D + R + 1  # powers a value column is read at
    NS = min(NF, D + 3)  # powers a |v| column is read at (its moments 0 and 2)
    NC = 1 + 2 * p

    @njit(cache=True, nogil=True)
    def sweep(t0, t1, qs, xs, inv, x0, h, inv_h, cs, ncell, start, tasks, values, sw, excl, H, Hb, Ge,
              direct_max, qidx, out):  # type: ignore[no-untyped-def]  # pragma: no cover
        has_excl = excl.shape[0] > 0
        nqmax = 1
        nkmax = 1
        for b in range(tasks[t0], tasks[t1]):
            nqmax = max(nqmax, start[b + 1] - start[b])
            nkmax = max(nkmax, _csx(cs, b + DIV, ncell) - _csx(cs, b - 1 - DIV, ncell))
        g = h / DIV
        inv_g = inv_h * DIV
        lq = np.empty(nqmax, qs.dtype)
        res = np.empty((nqmax, out.shape[1]))  # a bucket's rows, then scattered
        lo_out = np.empty(nqmax, np.int64)
        hi_out = np.empty(nqmax, np.int64)
        lp = np.empty(nqmax, np.int64)
        cnt = np.empty(nqmax + 1, np.int64)
        T = np.empty((nkmax + 1, NF, NC))
        comp = np.empty((NF, 1 + P))
        M = np.empty((NF, NC))
        A = np.empty((NA, NF))
        Ab = np.empty((NA, NF))
        B = np.empty((NF, 1 + P))
        S = np.empty((NA, NC))  # moment, column
        for b in range(tasks[t0], tasks[t1]):
            j0 = start[b]
            j1 = start[b + 1]
            if j0 == j1:
                continue
            cb = b - 1
            _sort_bucket(qs, j0, j1, x0 + cb * g, inv_g, lq, lp, cnt)
            k0 = _csx(cs, cb - DIV, ncell)
            k1 = _csx(cs, cb + 1 + DIV, ncell)
            centre = x0 + (cb + 0.5) * g
            piv = _first_at(centre, xs, k0, k1, False)
            _pivot_cols(T, comp, xs, k0, k1, piv, centre, inv_h, sw, values, NF, P, NV, NS)
            lo = k0
            hi = k0
            prev = lq[0]
            for r in range(j1 - j0):
                q = lq[r]
                jq = lp[r]
                if not q >= prev:
                    lo = k0
                    hi = k0
                prev = q
                lo = _walk(q, xs, inv, lo, False)
                hi = _walk(q, xs, inv, hi, True)
                glo = lo
                ghi = hi
                if lo == k0 and k0 > 0 and (q - xs[k0 - 1]) * inv <= 1.0:
                    glo, ghi = _bounds(q, xs, inv, cb, cs, ncell)
                e = excl[jq] if has_excl else -1
                Q = (np.float64(q) - centre) * inv_h
                if not _triage(res, lo_out, hi_out, r, glo, ghi, e, direct_max, k0, k1,
                               abs(Q) <= 0.5 / DIV + 2.0**-20):
                    continue
                a = glo - k0
                z = ghi - k0
                inside = glo <= e < ghi
                if inside:
                    ea = e - k0
                    for j in range(NF):
                        for cc in range(NC):
                            if cc == 0 or (cc <= P and j < NV) or (cc > P and j < NS):
                                M[j, cc] = (T[ea, j, cc] - T[a, j, cc]) + (T[z, j, cc] - T[ea + 1, j, cc])
                else:
                    for j in range(NF):
                        for cc in range(NC):
                            if cc == 0 or (cc <= P and j < NV) or (cc > P and j < NS):
                                M[j, cc] = T[z, j, cc] - T[a, j, cc]
                _coefficients(A, H, Q, D, NA)
                for aa in range(NA):
                    S[aa, 0] = _dot(A, M, aa, 0, D + aa + 1)
                    for cc in range(P):
                        if aa <= R:
                            S[aa, 1 + cc] = _dot(A, M, aa, 1 + cc, D + aa + 1)
                        if aa == 0 or aa == 2:
                            S[aa, 1 + P + cc] = _dot(A, M, aa, 1 + P + cc, D + aa + 1)
                hi_row = max(ghi, piv) - k0
                lo_row = min(glo, piv) - k0
                _bound_rows(B, M, hi_row == z and lo_row == a and not inside, T, hi_row, lo_row, NF, P, NS)
                ok = _cell_test(S, B, Ge, D, NF, NA, P, R + 1, NS)
                if not ok:
                    ok = _own_bound(S, B, Ab, Hb, abs(Q), D, NF, NA, P, R + 1, NS)
                if not ok:
                    res[r, 0] = np.nan
                    lo_out[r] = glo
                    hi_out[r] = ghi
                    continue
                _store(res, r, S, h, P, R)
            _scatter(out, res, lp, qidx, j1 - j0)

    return sweep  # type: ignore[no-any-return]


def horner_rows(c: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``H[j, s] = c_(j + s) C(j + s, j) (-1)^s`` (``A[0, j] = sum_s H[j, s] Q^s``, the weight of
    ``t^j`` in ``K(t - Q)``) and ``Hb`` the same with ``|c_d|`` and ``(-1)^s`` dropped, for the
    rounding bound with ``-|Q|`` in place of ``Q``.

    Examples
    --------
    >>> H, Hb = horner_rows(np.array([1.0, 0.0, -1.0]))  # 1 - (t - Q)^2 = 1 - Q^2 + 2 Q t - t^2
    >>> H.tolist()
    [[1.0, 0.0, -1.0], [0.0, 2.0, 0.0], [-1.0, 0.0, 0.0]]
    >>> Hb.tolist()
    [[1.0, 0.0, 1.0], [0.0, -2.0, 0.0], [1.0, 0.0, 0.0]]
    """
    nd = c.size
    H = np.zeros((nd, nd))
    Hb = np.zeros((nd, nd))
    for j in range(nd):
        for s in range(nd - j):
            H[j, s] = c[j + s] * math.comb(j + s, j) * (-1.0) ** s
            Hb[j, s] = abs(c[j + s]) * math.comb(j + s, j) * (-1.0) ** s
    return H + 0.0, Hb + 0.0  # no negative zeros


def cell_bound(c: NDArray[np.float64], degree: int, div: int) -> NDArray[np.float64]:
    """``G[a, j] = sum_d |c_d| C(d + a, j) q^(d + a - j)``, ``a = 0 .. 2 degree``, at ``q`` the
    largest ``|Q|`` of a cell ``h / div`` wide (and the triage's slack): ``sum_j G[a, j] B_j`` is at
    least the query's own rounding bound (its terms grow with ``|Q|``).

    Examples
    --------
    >>> cell_bound(np.array([1.0, 0.0, -1.0]), 1, 1)[0].round(3).tolist()  # 1 + (|t| + q)^2
    [1.25, 1.0, 1.0, 0.0, 0.0]
    """
    nf = c.size + 2 * degree
    q = 0.5 / div + 2.0**-20
    G = np.zeros((2 * degree + 1, nf))
    for a in range(2 * degree + 1):
        for d in range(0, c.size, 2):
            for j in range(d + a + 1):
                G[a, j] += abs(c[d]) * math.comb(d + a, j) * q ** (d + a - j)
    return G


def fold_even(G: NDArray[np.float64]) -> NDArray[np.float64]:
    """``G`` folded onto the even powers: ``sum_j Ge[a, j] B_j = sum_j G[a, j] B_j`` where every
    odd ``B_j`` is the mean of its neighbours (as the loss test bounds it); odd columns zero.

    Examples
    --------
    >>> fold_even(np.array([[1.0, 2.0, 3.0]])).tolist()
    [[2.0, 0.0, 4.0]]
    """
    Ge = np.zeros_like(G)
    Ge[:, 0::2] = G[:, 0::2]
    Ge[:, 0:-1:2] += 0.5 * G[:, 1::2]
    Ge[:, 2::2] += 0.5 * G[:, 1::2][:, : Ge[:, 2::2].shape[1]]
    return Ge
