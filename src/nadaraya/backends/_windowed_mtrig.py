"""Windowed moment sums in 1-D for the cosine and parzen kernels: the split sweep, cos/sin tables or pieces.

Both ride the sweep of :mod:`._windowed_msplit` (query buckets of width ``h / div``, each
tabulating the keys within ``h`` of it outwards from a pivot at its centre, compensated, with
``t = (k - centre) / h``; window edges walked over the sorted queries; ``Q = (q - centre) / h``):

* **parzen** is a polynomial in ``|u|`` on ``|u| <= 1/2`` and another on ``1/2 <= |u| <= 1``, so
  the window is cut into four parts, at the query and at ``q -+ h/2`` (two more edges walked
  along), each part a polynomial in ``u = t - Q`` of one sign: the power table ``sum sw t^j
  (1, v, |v|)`` read apart for each part, shifted to the query and weighted by its piece's
  coefficients.
* **cosine**: ``cos(pi (t - Q) / 2) = cos(pi t / 2) cos(pi Q / 2) + sin(pi t / 2) sin(pi Q /
  2)``, and ``(t - Q)^a`` by the binomial shift, so the tables are ``sum sw t^j cos(pi t / 2)
  (1, v, |v|)`` and the same with the sine (``j <= 2 degree``), read apart on each side of the
  query (one more edge) so that each side's sums have one sign; a value column's sums span the
  window at once. Its cells are ``h`` wide, so a key's ``t`` in a neighbouring cell's table is
  its own cell's plus or minus 1 (and the centres' rounding): its cos and sin are computed once,
  about its own cell, and turned by exact quarter turns for the neighbours' tables. The power
  table feeds only the loss test: its even powers of ``1`` and ``|v|``, plain sums.

**The loss test, per query**, as the split sweep's: each part's natural size ``sum w |u|^a
[|v|]`` is the absolute value of its sum (``u`` and the kernel have one sign on a part), and
its rounding is a few ulps of ``E_a = sum_j C(a, j) |Q|^(a - j) B_j`` times the largest
weight of the expansion (``B_j = sum sw |t|^j`` over the table's keys up to the window's end;
``|cos| + |sin|`` of ``pi Q / 2`` times ``pi / 4`` for the cosine; for parzen each of the four
parts bounded apart, by its own table rows and its own piece's coefficients). A query whose
natural size of any moment is below :data:`._windowed_msweep._LOSS` of that bound is left for
the exact pair sums, as are windows of at most :data:`~._windowed_common.DIRECT_MAX_KEYS` keys:
a rounding of ``k`` ulps of the bound is then at most ``k 2^-41`` of a served moment's natural
size (the tests hold 1e-12).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from numba import njit
from numpy.typing import NDArray

from nadaraya.backends._windowed_jit import _bounds, _csx, _first_at, _triage
from nadaraya.backends._windowed_msplit import _combine, _loss_ok, _part, _past, _pivot_table, _shift
from nadaraya.backends._windowed_msweep import _LOSS, run
from nadaraya.backends._windowed_sweep import _scatter, _sort_bucket, _walk
from nadaraya.kernels import Kernel

__all__ = ["trig_coefficients", "trig_moments"]

#: parzen's pieces in powers of ``|u|``: ``|u| <= 1/2``, then ``1/2 <= |u| <= 1``
_PARZEN = ((4.0 / 3.0, 0.0, -8.0, 8.0), (8.0 / 3.0, -8.0, 8.0, -8.0 / 3.0))
#: the buckets per bandwidth, ``div``, for parzen then the cosine, by degree (1, 2): small
#: enough that the loss test serves nearly every query of evenly spread keys with a margin
#: (|Q| and |t| shrink with it, and so do the expansion's cancellations: parzen's worst error
#: is about 3x smaller than at half the ``div``), the tables growing as ``2 + 1 / div``
#: bandwidths of keys per bucket
_DIV = ((2, 4), (1, 1))


def trig_coefficients(kernel: Kernel) -> NDArray[np.float64] | None:
    """The coefficients this route weights its tables with, or None where it does not serve the
    kernel: for parzen ``c[0]``, ``c[1]`` the pieces in powers of ``|u|`` (inner, outer); for
    the cosine ``[[K(0)]]``.
    Each is checked against the kernel's profile.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> trig_coefficients(get("parzen"))[0].tolist()
    [1.3333333333333333, 0.0, -8.0, 8.0]
    >>> trig_coefficients(get("tricube")) is None
    True
    """
    u = np.linspace(0.0, 1.0, 2001)
    ref = kernel.profile(u)
    if kernel.name == "cosine":
        amp = float(kernel.profile(np.zeros(1))[0])
        got, c = amp * np.cos(0.5 * np.pi * u), np.array([[amp]])
    elif kernel.name == "parzen":
        inner, outer = (np.array(p) for p in _PARZEN)
        got = np.where(u <= 0.5, np.polynomial.polynomial.polyval(u, inner),
                       np.polynomial.polynomial.polyval(u, outer))
        c = np.stack([inner, outer])
    else:
        return None
    if not np.max(np.abs(got - ref)) <= 1e-13 * max(1.0, float(np.max(np.abs(ref)))):
        return None
    return c


@njit(cache=True, inline="always")
def _own_phases(kt, kc, ks, done, xs, cbk, kbase, x0, g, inv_h, cs, ncell):  # pragma: no cover - compiled
    """Each key of the cells ``cbk - 1 .. cbk + 1`` past ``done`` (the keys filled so far, the
    cells rising bucket by bucket): ``kt[i - kbase]`` its ``t`` about its own cell's centre,
    ``kc``, ``ks`` the cos and sin of ``pi t / 2``; the new ``done``."""
    for cell in range(cbk - 1, cbk + 2):
        z = _csx(cs, cell + 1, ncell)
        if z <= done:
            continue
        own = x0 + (cell + 0.5) * g
        for i in range(max(_csx(cs, cell, ncell), done), z):
            t = (np.float64(xs[i]) - own) * inv_h
            kt[i - kbase] = t
            kc[i - kbase] = np.cos(0.5 * np.pi * t)
            ks[i - kbase] = np.sin(0.5 * np.pi * t)
        done = z
    return done


@njit(cache=True, inline="always")
def _phase(t, m, i, kt, kc, ks):  # pragma: no cover - compiled
    """``cos``, ``sin`` of ``pi t / 2`` for the key ``i`` (``kbase`` off) of the cell ``m``
    (-1, 0, 1) off the table's: its own cell's phase turned by ``m`` exact quarter turns
    (``cos(a + pi / 2) = -sin a``) and by the tiny ``d = (t - m) - t_own`` (the centres'
    rounding) to second order, within an ulp or two of the plain ``cos`` for ``|d| <= 2^-20``;
    past it (a key whose cell is not where its ``t`` says) the plain ``cos`` and ``sin``."""
    d = (t - m) - kt[i]
    if not abs(d) <= 2.0**-20:
        return np.cos(0.5 * np.pi * t), np.sin(0.5 * np.pi * t)
    a = 0.5 * np.pi * d
    r = 1.0 - 0.5 * a * a
    c0 = kc[i] * r - ks[i] * a
    s0 = ks[i] * r + kc[i] * a
    if m == 0:
        return c0, s0
    if m > 0:
        return -s0, c0
    return s0, -c0


@njit(cache=True, inline="always")
def _cos_tables(Tc, Ts, Tb, cc_, cs_, xs, k0, k1, piv, centre, inv_h, sw, values, ph, nf, p):
    # pragma: no cover - compiled
    """The cosine's tables in one pass over the keys from the pivot outwards (rows as
    :func:`._windowed_msplit._pivot_table`'s): ``Tc``, ``Ts`` the sums of ``sw t^j cos(pi t / 2)
    (1, v, |v|)`` and the same with the sine (those of ``1`` and ``v`` compensated), ``Tb``
    only what the loss test reads, plain: the even powers of ``sw t^j (1, |v|)``. ``cc_``,
    ``cs_`` (nf, 1 + p): scratch for the compensations; ``ph``: the keys' own phases
    (:func:`_own_phases`: ``kt``, ``kc``, ``ks``, ``kbase``) and the first keys of the table's
    middle cell and of the one after it."""
    kt, kc, ks, kbase, kb0, kb1 = ph
    has_sw = sw.shape[0] > 0
    for j in range(nf):
        for cc in range(1 + 2 * p):
            Tc[piv - k0, j, cc] = 0.0
            Ts[piv - k0, j, cc] = 0.0
            Tb[piv - k0, j, cc] = 0.0
    for step in range(2):
        for j in range(nf):
            for cc in range(1 + p):
                cc_[j, cc] = 0.0
                cs_[j, cc] = 0.0
        sign = 1.0 if step == 0 else -1.0
        count = k1 - piv if step == 0 else piv - k0
        for s in range(count):
            i = piv + s if step == 0 else piv - 1 - s  # the key added
            row = i + 1 - k0 if step == 0 else i - k0  # the row it completes
            was = row - 1 if step == 0 else row + 1
            t = (np.float64(xs[i]) - centre) * inv_h
            gj = sign * (sw[i] if has_sw else 1.0)
            co, si = _phase(t, -1 if i < kb0 else (1 if i >= kb1 else 0), i - kbase, kt, kc, ks)
            gc = gj * co
            gs = gj * si
            for j in range(nf):
                for cc in range(1 + p):
                    v = 1.0 if cc == 0 else values[i, cc - 1]
                    y = gc * v - cc_[j, cc]
                    tot = Tc[was, j, cc] + y
                    cc_[j, cc] = (tot - Tc[was, j, cc]) - y
                    Tc[row, j, cc] = tot
                    y = gs * v - cs_[j, cc]
                    tot = Ts[was, j, cc] + y
                    cs_[j, cc] = (tot - Ts[was, j, cc]) - y
                    Ts[row, j, cc] = tot
                for cc in range(p):  # |v|: only the loss test reads these, plain sums serve
                    av = abs(values[i, cc])
                    Tc[row, j, 1 + p + cc] = Tc[was, j, 1 + p + cc] + gc * av
                    Ts[row, j, 1 + p + cc] = Ts[was, j, 1 + p + cc] + gs * av
                if j % 2 == 0:
                    Tb[row, j, 0] = Tb[was, j, 0] + gj
                    for cc in range(p):
                        Tb[row, j, 1 + p + cc] = Tb[was, j, 1 + p + cc] + gj * abs(values[i, cc])
                gj *= t
                gc *= t
                gs *= t


@njit(cache=True, inline="always")
def _emit(res, rr, S, h, p, r):  # pragma: no cover - compiled
    """Query ``jq``'s row of ``res`` from the two sides' sums ``S[side, column, moment]``."""
    res[rr, 0] = S[0, 0, 0] + S[1, 0, 0]
    for cc in range(p):
        res[rr, 1 + cc] = S[0, 1 + cc, 0] + S[1, 1 + cc, 0]
    ha = 1.0
    for aa in range(1, 2 * r + 1):
        ha *= h
        res[rr, p + aa] = (S[0, 0, aa] + S[1, 0, aa]) * ha
        if aa <= r:
            for cc in range(p):
                res[rr, 1 + p + 2 * r + (aa - 1) * p + cc] = (S[0, 1 + cc, aa] + S[1, 1 + cc, aa]) * ha


@njit(cache=True, inline="always")
def _parzen_loss(Sa, Sb, cc, T, edges, piv, k0, B, E, bound, binom, aq, c, nd, top, na):
    # pragma: no cover - compiled
    """Whether every moment ``a < na`` of column ``cc`` has a natural size (the four parts'
    ``|S|``, ``Sa`` the inner piece's, ``Sb`` the outer's, by side) of at least
    :data:`_LOSS` of its rounding bound: per part, ``B_j`` from the table's even powers over
    the rows from the pivot to the part's farther end (the odd ones by the mean of their
    neighbours), shifted to the query with ``|Q|`` (``aq[i] = |Q|^i``) and weighted by the
    part's ``|c_d|``."""
    for aa in range(na):
        bound[aa] = 0.0
    for part in range(4):
        lo_row = min(edges[part], piv) - k0
        hi_row = max(edges[part + 1], piv) - k0
        for j in range(0, top, 2):
            B[j] = T[hi_row, j, cc] - T[lo_row, j, cc]
        for j in range(1, top, 2):
            B[j] = 0.5 * (B[j - 1] + B[j + 1]) if j + 1 < top else 1.5 * B[j - 1]
        for k in range(top):
            s = 0.0
            for j in range(k + 1):
                s += binom[k, j] * aq[k - j] * B[j]
            E[k] = s
        piece = 0 if part == 1 or part == 2 else 1
        for aa in range(na):
            s = 0.0
            for d in range(nd):
                s += abs(c[piece, d]) * E[d + aa]
            bound[aa] += s
    for aa in range(na):
        size = abs(Sa[0, cc, aa]) + abs(Sa[1, cc, aa]) + abs(Sb[0, cc, aa]) + abs(Sb[1, cc, aa])
        if not size >= _LOSS * bound[aa]:
            return False
    return True


@njit(cache=True, inline="always")
def _parzen_sums(S, Sa, Sb, M, T, edges, piv, e, k0, c, binom, nq, aq, mu, B, E, bound, nf, nc, nv, p, r):
    # pragma: no cover - compiled
    """``S[side, cc, a]``: parzen's sums over the four parts ``edges[i]:edges[i + 1]`` (left
    outer, left inner, right inner, right outer; ``M`` (4, nf, nc) scratch), ``Sa``, ``Sb`` the
    inner and outer pieces'; whether every moment passes the loss test."""
    nd = nf - 2 * r
    for part in range(4):
        _part(M[part], T, edges[part], edges[part + 1], e, k0, nf, nc)
    ok = True
    for cc in range(nc):
        top = nf if cc == 0 else nv
        na = 2 * r + 1 if cc == 0 else r + 1
        for side in range(2):
            _shift(mu, M[1 + side], binom, nq, top, cc)  # the inner piece: parts 1, 2
            _combine(Sa, side, cc, mu, c[0], nd, na)
            _shift(mu, M[3 * side], binom, nq, top, cc)  # the outer piece: parts 0, 3
            _combine(Sb, side, cc, mu, c[1], nd, na)
            for aa in range(na):
                S[side, cc, aa] = Sa[side, cc, aa] + Sb[side, cc, aa]
        if cc == 0 or cc > p:
            ok = ok and _parzen_loss(Sa, Sb, cc, T, edges, piv, k0, B, E, bound, binom, aq, c, nd, top, na)
    return ok


@njit(cache=True, inline="always")
def _cosine_sums(S, M, Tb, Tc, Ts, edges, piv, e, k0, cq, sq, cb, binom, nq, aq, B, E, nf, nc, nv, p):
    # pragma: no cover - compiled
    """``S[side, cc, a]``: the cosine's sums on each side of the query (a value column's whole
    window on side 0, side 1 zero: only the |v| columns size it), ``cq``, ``sq`` the
    kernel's amplitude times ``cos``, ``sin`` of ``pi Q / 2``; whether every moment passes the
    loss test (bounds from the power table ``Tb``, weighted by ``cb[0]``)."""
    ie = e - k0
    for side in range(2):  # the two tables read apart and weighted at once: M[side] = cq Tc + sq Ts
        for cc in range(nc):
            whole = 1 <= cc <= p  # a value column: only the window's sum is emitted, on side 0
            if whole and side == 1:
                continue
            a = edges[side] - k0
            z = (edges[2] if whole else edges[side + 1]) - k0
            inside = a <= ie < z
            for j in range(nf):
                if inside:
                    dc = (Tc[ie, j, cc] - Tc[a, j, cc]) + (Tc[z, j, cc] - Tc[ie + 1, j, cc])
                    ds = (Ts[ie, j, cc] - Ts[a, j, cc]) + (Ts[z, j, cc] - Ts[ie + 1, j, cc])
                else:
                    dc = Tc[z, j, cc] - Tc[a, j, cc]
                    ds = Ts[z, j, cc] - Ts[a, j, cc]
                M[side, j, cc] = cq * dc + sq * ds
    ok = True
    for cc in range(nc):
        top = nf if cc == 0 else nv
        for side in range(2):
            if 1 <= cc <= p and side == 1:
                for k in range(top):
                    S[1, cc, k] = 0.0
                continue
            for k in range(top):  # the binomial shift to the query, as _shift
                s = 0.0
                for j in range(k + 1):
                    s += binom[k, j] * nq[k - j] * M[side, j, cc]
                S[side, cc, k] = s
        if cc == 0 or cc > p:
            hi_row, lo_row = max(edges[2], piv) - k0, min(edges[0], piv) - k0
            ok = ok and _loss_ok(S, cc, Tb, hi_row, lo_row, B, E, binom, aq, cb, 1, top, top)
    return ok


@functools.cache
def trig_sweep(cosine: bool, nf: int, p: int, degree: int, div: int) -> Callable[..., None]:
    """The sweep of the cosine (``cosine``) or parzen kernel for ``nf`` powers of ``t`` (``2
    degree + 1``, or the pieces' 4 + ``2 degree``), ``p`` outputs and a polynomial ``degree``
    (closure constants); arguments and results as :func:`._windowed_msplit.split_sweep`'s, with
    :func:`trig_coefficients` for ``c``."""
    if cosine and div != 1:  # the keys' phases turn by quarter turns only between cells of h
        raise ValueError(f"div: the cosine's sweep takes cells of one bandwidth, not {div}")
    COS = cosine
    NF = nf
    DIV = div
    P = p
    R = degree
    NV = nf - degree  # powers a value column needs
    NC = 1 + 2 * p

    @njit(cache=True, nogil=True)
    def sweep(t0, t1, qs, xs, inv, x0, h, inv_h, cs, ncell, start, tasks, values, sw, excl, c, binom,
              direct_max, qidx, out):  # type: ignore[no-untyped-def]  # pragma: no cover
        has_excl = excl.shape[0] > 0
        nqmax = nkmax = 1
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
        nt = nkmax + 1 if COS else 1
        kbase = _csx(cs, tasks[t0] - 2, ncell)
        nown = _csx(cs, tasks[t1], ncell) - kbase if COS else 0
        kt, kc, ks = np.empty(nown), np.empty(nown), np.empty(nown)
        done = kbase
        Tc, Ts = np.empty((nt, NF, NC)), np.empty((nt, NF, NC))
        comp = np.empty((NF, NC))
        M = np.empty((4, NF, NC))
        mu, nq, aq = np.empty(NF), np.empty(NF), np.empty(NF)
        B, E = np.empty(NF), np.empty(NF)
        cb = np.empty(1)
        bound = np.empty(2 * R + 1)
        S = np.empty((2, NC, 2 * R + 1))  # side, column, moment
        Sa = np.empty((2, NC, 2 * R + 1))
        Sb = np.empty((2, NC, 2 * R + 1))
        edges = np.empty(5, np.int64)
        for b in range(tasks[t0], tasks[t1]):
            j0, j1 = start[b], start[b + 1]
            if j0 == j1:
                continue
            cbk = b - 1
            _sort_bucket(qs, j0, j1, x0 + cbk * g, inv_g, lq, lp, cnt)
            k0 = _csx(cs, cbk - DIV, ncell)
            k1 = _csx(cs, cbk + 1 + DIV, ncell)
            centre = x0 + (cbk + 0.5) * g
            piv = _first_at(centre, xs, k0, k1, False)
            if COS:
                done = _own_phases(kt, kc, ks, done, xs, cbk, kbase, x0, g, inv_h, cs, ncell)
                ph = (kt, kc, ks, kbase, _csx(cs, cbk, ncell), _csx(cs, cbk + 1, ncell))
                _cos_tables(Tc, Ts, T, comp, M[0], xs, k0, k1, piv, centre, inv_h, sw, values, ph, NF, P)
            else:
                _pivot_table(T, comp, xs, k0, k1, piv, centre, inv_h, sw, values, NF, P)
            lo = hi = mid = ml = mr = k0
            prev = lq[0]
            for rr in range(j1 - j0):
                q = lq[rr]
                jq = lp[rr]
                if not q >= prev:
                    lo = hi = mid = ml = mr = k0
                prev = q
                lo = _walk(q, xs, inv, lo, False)
                hi = _walk(q, xs, inv, hi, True)
                mid = _past(q, xs, mid)
                glo = lo
                ghi = hi
                if lo == k0 and k0 > 0 and (q - xs[k0 - 1]) * inv <= 1.0:
                    glo, ghi = _bounds(q, xs, inv, cbk, cs, ncell)
                e = excl[jq] if has_excl else -1
                q64 = np.float64(q)
                Q = (q64 - centre) * inv_h
                if not _triage(res, lo_out, hi_out, rr, glo, ghi, e, direct_max, k0, k1,
                               abs(Q) <= 0.5 / DIV + 2.0**-20):
                    continue
                nq[0] = 1.0
                aq[0] = 1.0
                for k in range(1, NF):
                    nq[k] = -nq[k - 1] * Q
                    aq[k] = aq[k - 1] * abs(Q)
                gm = min(max(mid, glo), ghi)
                edges[0] = glo
                if COS:
                    edges[1] = gm
                    edges[2] = ghi
                    cq = c[0, 0] * np.cos(0.5 * np.pi * Q)
                    sq = c[0, 0] * np.sin(0.5 * np.pi * Q)
                    cb[0] = abs(cq) + abs(sq)
                    ok = _cosine_sums(S, M, T, Tc, Ts, edges, piv, e, k0, cq, sq, cb, binom, nq, aq, B, E, NF,
                                      NC, NV, P)
                else:
                    ml = _past(q64 - 0.5 * h, xs, ml)
                    mr = _past(q64 + 0.5 * h, xs, mr)
                    edges[1] = min(max(ml, glo), gm)
                    edges[2] = gm
                    edges[3] = min(max(mr, gm), ghi)
                    edges[4] = ghi
                    ok = _parzen_sums(S, Sa, Sb, M, T, edges, piv, e, k0, c, binom, nq, aq, mu, B, E, bound,
                                      NF, NC, NV, P, R)
                if not (ok and S[0, 0, 0] + S[1, 0, 0] > 0.0):
                    res[rr, 0] = np.nan
                    lo_out[rr] = glo
                    hi_out[rr] = ghi
                    continue
                _emit(res, rr, S, h, P, R)
            _scatter(out, res, lp, qidx, j1 - j0)

    return sweep  # type: ignore[no-any-return]


def trig_moments(
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
    """The moment columns of every query for the cosine and parzen kernels, or None where this
    route does not apply; arguments and result as :func:`._windowed_msweep.prefix_moments`'s.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.linspace(0.0, 1.0, 2001)
    >>> out, flag = trig_moments(np.array([0.5]), x, 1.0 / 0.1, x[:, None], np.empty(0),
    ...                          np.empty(0, dtype=np.int64), get("cosine"), 0.1, 1)
    >>> bool(flag[0]), abs(float(out[2, 0])) < 1e-12  # the first moment of a symmetric window
    (False, True)
    """
    from nadaraya.backends._windowed_common import DIRECT_MAX_KEYS

    c = trig_coefficients(kernel)
    if c is None or xs.shape[0] <= DIRECT_MAX_KEYS:
        return None
    cosine = kernel.name == "cosine"
    nf = 2 * degree + (1 if cosine else c.shape[1])
    binom = np.array([[math.comb(k, j) for j in range(nf)] for k in range(nf)], dtype=float)
    div = _DIV[cosine][degree - 1]
    loop = trig_sweep(cosine, nf, values.shape[1], degree, div)
    return run(q, xs, inv, values, sw, excl, h, degree, 3 * nf if cosine else nf, loop,
               (c, binom, DIRECT_MAX_KEYS), div)
