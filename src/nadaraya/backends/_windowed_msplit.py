"""Windowed moment sums in 1-D: the sweep split at the query (tricube, triangular), and one without.

Also serves the kernels even in ``u`` whose expansions the even sweep's fixed guards fail
(biweight at degree 2, triweight; see :data:`EVEN_SWEEP_MAX_POWERS`), without the split
(:func:`._windowed_meven.even_sweep`): one part per window, the same pivot tables and per-query
loss test, each moment's natural size bounded below by the even moment at or above it, as the
even sweep bounds it; at degree 2 cells of ``h / 2`` (``|Q| <= 1/4``): with cells of ``h`` the
test fails about 0.2% of biweight's queries and 40% of triweight's (n = 2e5, h = 0.01), each
then summed over its whole window; at degree 1 (triweight) cells of ``h``, where none fails
there (measured: 18% faster than cells of ``h / 2``, whose tables tabulate each key 5 times).

A kernel that is one polynomial in ``|u|``, ``K(u) = sum_d c_d |u|^d``, is a polynomial in
``u`` on each side of the query: ``u = t - Q`` (``t = (k - centre) / h``, ``Q = (q - centre) /
h`` about the centre of the query's cell) and ``|u| = -u`` left of it. So the sweep of
:mod:`._windowed_msweep` (compensated prefix moments ``sum sw t^j (1, v, |v|)`` of the keys of a
cell and its two neighbours, window edges walked over sorted queries) serves them with a third
edge walked along, the first key past the query, and each side's sums read apart: the
moments about the query ``mu_k = sum w (t - Q)^k`` of each side from the binomial shift of its
``t^j`` moments, then ``S_a = sum_d c_d s^d mu_(d + a)`` with ``s = -1`` on the left.

**The loss test, per query.** Each side's ``t^j`` moment is a difference of table rows whose
rounding is a few ulps of ``B_j = sum sw |t|^j`` over the table's keys up to the window's end
(read from the even powers; an odd one is bounded by the mean of its neighbours,
``|t|^j <= (|t|^(j - 1) + |t|^(j + 1)) / 2``), so ``S_a`` is within a few ulps of
``E_a = 2 sum_d |c_d| sum_j C(d + a, j) |Q|^(d + a - j) B_j``. Its natural size, ``sum w |u|^a
[|v|]``, is known exactly from the split: ``|S_a^left| + |S_a^right|`` (``u`` has one sign on
each side). A query whose natural size of any moment is below ``_LOSS`` of ``E_a`` (the same
``2^-12`` as the sweep's) is left for the exact pair sums, as are windows of at most
:data:`~._windowed_common.DIRECT_MAX_KEYS` keys: a rounding of ``k`` ulps of ``E_a`` is then
at most ``k 2^-41`` of a served moment's natural size (the tests hold 1e-12; measured at
queries planted at the test's edge, ``tests/backends/test_windowed_moment_loss.py``: 1.1e-14).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from numba import njit
from numpy.typing import NDArray

from nadaraya.backends._windowed_jit import _bounds, _csx, _first_at, _triage
from nadaraya.backends._windowed_meven import cell_bound, even_sweep, fold_even, horner_rows
from nadaraya.backends._windowed_msweep import _LOSS, run
from nadaraya.backends._windowed_sweep import _scatter, _sort_bucket, _walk
from nadaraya.kernels import Kernel

__all__ = ["split_coefficients", "split_moments"]


#: kernels even in ``u`` whose expansion has at most this many powers of ``t`` take the even
#: sweep (:mod:`._windowed_msweep`: boxcar, epanechnikov, biweight at degree 1); above it its
#: fixed guards fail most queries (biweight at degree 2, triweight), and this route serves them
EVEN_SWEEP_MAX_POWERS = 7


def split_coefficients(kernel: Kernel, degree: int) -> NDArray[np.float64] | None:
    """The kernel's coefficients ``c_d`` in powers of ``|u|`` where this route serves its fits of
    ``degree``, else None: a kernel that is one polynomial with an odd power, or an even one with
    more than :data:`EVEN_SWEEP_MAX_POWERS` powers in its expansion.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> split_coefficients(get("triangular"), 1).tolist(), split_coefficients(get("epanechnikov"), 2)
    ([1.0, -1.0], None)
    >>> split_coefficients(get("triweight"), 1) is not None
    True
    """
    if kernel.polynomial is None:
        return None
    c = np.asarray(kernel.polynomial, dtype=float)
    if not np.any(c[1::2] != 0.0) and c.size + 2 * degree <= EVEN_SWEEP_MAX_POWERS:
        return None
    return c


@njit(cache=True, inline="always")
def _past(q, xs, i):  # pragma: no cover - compiled
    """From ``i``, the first key strictly greater than ``q`` (sorted keys, ``i`` not past it)."""
    n = xs.shape[0]
    while i + 8 <= n:
        f = 0
        for k in range(8):
            f += xs[i + k] <= q
        i += f
        if f < 8:
            return i
    while i < n and xs[i] <= q:
        i += 1
    return i


@njit(cache=True, inline="always")
def _pivot_table(T, comp, xs, k0, k1, piv, centre, inv_h, sw, values, nf, p):  # pragma: no cover - compiled
    """Rows ``0 .. k1 - k0`` of ``T``: the sums of ``sw t^j (1, v, |v|)`` (``t`` about ``centre``)
    from the pivot key ``piv`` outwards, those of ``1`` and ``v`` compensated (Kahan):
    ``T[i - k0]`` is the sum over the keys ``[piv, i)`` for ``i >= piv`` and minus the sum over
    ``[i, piv)`` below it, so the sum over ``[a, z)`` is ``T[z - k0] - T[a - k0]`` and its
    rounding is that of the keys between the pivot and the farther end, never of keys outside
    a window that holds the pivot. ``nf``, ``p``: the caller's compile-time constants."""
    has_sw = sw.shape[0] > 0
    for j in range(nf):
        for cc in range(1 + 2 * p):
            T[piv - k0, j, cc] = 0.0
    for step in range(2):
        for j in range(nf):
            for cc in range(1 + 2 * p):
                comp[j, cc] = 0.0
        sign = 1.0 if step == 0 else -1.0
        count = k1 - piv if step == 0 else piv - k0
        for s in range(count):
            i = piv + s if step == 0 else piv - 1 - s  # the key added
            row = i + 1 - k0 if step == 0 else i - k0  # the row it completes
            was = row - 1 if step == 0 else row + 1
            t = (np.float64(xs[i]) - centre) * inv_h
            gj = sign * (sw[i] if has_sw else 1.0)
            for j in range(nf):
                for cc in range(1 + p):
                    y = gj if cc == 0 else gj * values[i, cc - 1]
                    y -= comp[j, cc]
                    tot = T[was, j, cc] + y
                    comp[j, cc] = (tot - T[was, j, cc]) - y
                    T[row, j, cc] = tot
                for cc in range(p):  # |v|: only the loss test reads these, plain sums serve
                    T[row, j, 1 + p + cc] = T[was, j, 1 + p + cc] + gj * abs(values[i, cc])
                gj *= t


@njit(cache=True, inline="always")
def _part(M, T, a, z, e, k0, nf, nc):  # pragma: no cover - compiled
    """``M``: the table's sums over the keys ``[a, z)``, the key ``e`` left out (two
    differences around it, never subtracted afterwards); ``nf``, ``nc`` its shape."""
    for j in range(nf):
        for cc in range(nc):
            if a <= e < z:
                M[j, cc] = (T[e - k0, j, cc] - T[a - k0, j, cc]) + (T[z - k0, j, cc] - T[e - k0 + 1, j, cc])
            else:
                M[j, cc] = T[z - k0, j, cc] - T[a - k0, j, cc]


@njit(cache=True, inline="always")
def _shift(mu, M, binom, nq, top, cc):  # pragma: no cover - compiled
    """``mu[k] = sum_j C(k, j) (-Q)^(k - j) M[j, cc]`` for ``k < top`` (``nq[i] = (-Q)^i``)."""
    for k in range(top):
        s = 0.0
        for j in range(k + 1):
            s += binom[k, j] * nq[k - j] * M[j, cc]
        mu[k] = s


@njit(cache=True, inline="always")
def _combine(S, side, cc, mu, c, nd, na):  # pragma: no cover - compiled
    """``S[side, cc, a] = sum_d c_d s^d mu[d + a]`` (``s = -1`` on the left side, 0; ``nd`` terms)."""
    for aa in range(na):
        s = 0.0
        for d in range(nd):
            cd = -c[d] if side == 0 and d % 2 == 1 else c[d]
            s += cd * mu[d + aa]
        S[side, cc, aa] = s


@njit(cache=True, inline="always")
def _loss_ok(S, cc, T, hi_row, lo_row, B, E, binom, aq, c, nd, top, na):  # pragma: no cover - compiled
    """Whether every moment ``a < na`` of column ``cc`` has a natural size ``|S_left| + |S_right|``
    of at least :data:`_LOSS` of its rounding bound: ``B_j`` from the table's even powers over
    the rows ``lo_row .. hi_row`` (the odd ones by the mean of their neighbours), shifted to the
    query with ``|Q|`` (``aq[i] = |Q|^i``), weighted by ``|c_d|``, for both sides."""
    for j in range(0, top, 2):
        B[j] = T[hi_row, j, cc] - T[lo_row, j, cc]
    for j in range(1, top, 2):
        B[j] = 0.5 * (B[j - 1] + B[j + 1]) if j + 1 < top else 1.5 * B[j - 1]
    for k in range(top):
        s = 0.0
        for j in range(k + 1):
            s += binom[k, j] * aq[k - j] * B[j]
        E[k] = s
    for aa in range(na):
        s = 0.0
        for d in range(nd):
            s += abs(c[d]) * E[d + aa]
        if not abs(S[0, cc, aa]) + abs(S[1, cc, aa]) >= 2.0 * _LOSS * s:
            return False
    return True


@functools.cache
def split_sweep(nf: int, p: int, degree: int, div: int) -> Callable[..., None]:
    """The split sweep for ``nf`` powers of ``t`` (the kernel's degree + 1 + 2 ``degree``),
    ``p`` outputs and a polynomial ``degree`` (closure constants); arguments and results as
    :func:`._windowed_msweep.moment_sweep`'s, with the kernel's coefficients ``c`` and the
    binomials ``binom[k, j]`` in place of the expansion and its guards; the queries' cells are
    ``h / div`` wide (``|Q| <= 1 / (2 div)``), each tabulating the keys within ``h`` of it."""
    NF = nf
    DIV = div
    P = p
    R = degree
    NV = nf - degree  # powers a value column needs: the kernel's degree + 1 + degree
    ND = nf - 2 * degree  # the kernel's terms
    NC = 1 + 2 * p

    @njit(cache=True, nogil=True)
    def sweep(t0, t1, qs, xs, inv, x0, h, inv_h, cs, ncell, start, tasks, values, sw, excl, c, binom,
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
        comp = np.empty((NF, NC))
        ML = np.empty((NF, NC))
        MR = np.empty((NF, NC))
        mu = np.empty(NF)
        nq = np.empty(NF)
        aq = np.empty(NF)
        B = np.empty(NF)
        E = np.empty(NF)
        S = np.empty((2, NC, 2 * R + 1))  # side, column, moment
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
            _pivot_table(T, comp, xs, k0, k1, piv, centre, inv_h, sw, values, NF, P)
            lo = k0
            hi = k0
            mid = k0
            prev = lq[0]
            for r in range(j1 - j0):
                q = lq[r]
                jq = lp[r]
                if not q >= prev:
                    lo = k0
                    hi = k0
                    mid = k0
                prev = q
                lo = _walk(q, xs, inv, lo, False)
                hi = _walk(q, xs, inv, hi, True)
                mid = _past(q, xs, mid)
                glo = lo
                ghi = hi
                if lo == k0 and k0 > 0 and (q - xs[k0 - 1]) * inv <= 1.0:
                    glo, ghi = _bounds(q, xs, inv, cb, cs, ncell)
                e = excl[jq] if has_excl else -1
                Q = (np.float64(q) - centre) * inv_h
                if not _triage(res, lo_out, hi_out, r, glo, ghi, e, direct_max, k0, k1,
                               abs(Q) <= 0.5 / DIV + 2.0**-20):
                    continue
                gm = min(max(mid, glo), ghi)
                _part(ML, T, glo, gm, e, k0, NF, NC)
                _part(MR, T, gm, ghi, e, k0, NF, NC)
                nq[0] = 1.0
                aq[0] = 1.0
                for k in range(1, NF):
                    nq[k] = -nq[k - 1] * Q
                    aq[k] = aq[k - 1] * abs(Q)
                ok = True
                for cc in range(NC):
                    top = NF if cc == 0 else NV
                    na = 2 * R + 1 if cc == 0 else R + 1
                    for side in range(2):
                        _shift(mu, ML if side == 0 else MR, binom, nq, top, cc)
                        _combine(S, side, cc, mu, c, ND, na)
                    if cc == 0 or cc > P:  # the loss test: natural size against the rounding bound
                        ok = ok and _loss_ok(S, cc, T, max(ghi, piv) - k0, min(glo, piv) - k0, B, E, binom,
                                             aq, c, ND, top, na)
                if not (ok and S[0, 0, 0] + S[1, 0, 0] > 0.0):
                    res[r, 0] = np.nan
                    lo_out[r] = glo
                    hi_out[r] = ghi
                    continue
                res[r, 0] = S[0, 0, 0] + S[1, 0, 0]
                for cc in range(P):
                    res[r, 1 + cc] = S[0, 1 + cc, 0] + S[1, 1 + cc, 0]
                ha = 1.0
                for aa in range(1, 2 * R + 1):
                    ha *= h
                    res[r, P + aa] = (S[0, 0, aa] + S[1, 0, aa]) * ha
                    if aa <= R:
                        for cc in range(P):
                            both = S[0, 1 + cc, aa] + S[1, 1 + cc, aa]
                            res[r, 1 + P + 2 * R + (aa - 1) * P + cc] = both * ha
            _scatter(out, res, lp, qidx, j1 - j0)

    return sweep  # type: ignore[no-any-return]


def split_moments(
    q: NDArray[np.floating],
    xs: NDArray[np.floating],
    inv: np.floating,
    values: NDArray[np.float64],
    sw: NDArray[np.float64],
    excl: NDArray[np.int64],
    kernel: Kernel,
    h: float,
    degree: int,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]] | None:
    """The moment columns of every query from prefix moments split at the query, or None where
    this route does not apply; arguments and result as
    :func:`._windowed_msweep.prefix_moments`'s.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.linspace(0.0, 1.0, 2001)
    >>> out, flag = split_moments(np.array([0.5]), x, 1.0 / 0.1, x[:, None], np.empty(0),
    ...                           np.empty(0, dtype=np.int64), get("tricube"), 0.1, 1)
    >>> bool(flag[0]), abs(float(out[2, 0])) < 1e-12  # the first moment of a symmetric window
    (False, True)
    """
    from nadaraya.backends._windowed_common import DIRECT_MAX_KEYS

    c = split_coefficients(kernel, degree)
    if c is None or xs.shape[0] <= DIRECT_MAX_KEYS:
        return None
    nf = c.size + 2 * degree
    binom = np.array([[math.comb(k, j) for j in range(nf)] for k in range(nf)], dtype=float)
    if not np.any(c[1::2] != 0.0) and nf % 2:  # even: no split; degree 2: cells of h / 2 (|Q| <= 1/4)
        # (nf odd: each odd power's bound reads the even powers on both sides of it)
        div = 1 if degree == 1 else 2
        loop = even_sweep(nf, values.shape[1], degree, div)
        return run(q, xs, inv, values, sw, excl, h, degree, nf, loop,
                   (*horner_rows(c), fold_even(cell_bound(c, degree, div)), DIRECT_MAX_KEYS), div)
    div = 1 if nf <= 6 else 2
    loop = split_sweep(nf, values.shape[1], degree, div)
    return run(q, xs, inv, values, sw, excl, h, degree, nf, loop, (c, binom, DIRECT_MAX_KEYS), div)
