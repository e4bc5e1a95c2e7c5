"""The taylor backend: Gaussian sums in 1-D within a stated tolerance, by Taylor series about box centres.

**What it guarantees.** Called with ``tol``, every prediction ``value / weight`` it returns is
within ``tol * max_i |v_i|`` of the exact one (per value column ``v``), on every query. To get
there, each of its sums ``S_v = sum_i s_i w_i v_i`` (and the weight, ``v = 1``) is within
``eps W max|v|`` of the exact sum, ``eps = tol / 2.1`` and ``W = sum_i s_i w_i``; then
``|S_v / W_hat - S_v / W| <= 2 eps max|v| / (1 - eps) < tol max|v|``. The bound covers the
two approximations below; floating-point rounding comes on top, as for every backend (the
method keeps it near a direct sum's: see the amplification below), and ``tol`` below
:data:`MIN_TOL` is refused.

**How.** In units of the bandwidth, the queries are cut into boxes of half-width :data:`RHO`.
For a query at ``a`` from its box's centre ``c`` (``|a| <= RHO``) and a key at ``u`` from it,

    exp(-(a - u)^2 / 2) = exp(-a^2 / 2) * exp(-u^2 / 2) * sum_k (a u)^k / k!,

so the box's queries share the sums ``T_k = sum_i s_i v_i exp(-u_i^2 / 2) u_i^k / k!`` over its
keys, and each query costs one polynomial in ``a``. Per box:

1. keys farther than ``R`` bandwidths from every query of the box are dropped. They weigh at
   most ``exp(-R^2 / 2) s_i`` each; ``R^2 = D^2 + 2 log(3 sum_i s_i / (eps s_j))`` with ``s_j``
   a key at most ``D`` bandwidths from every query of the box (the best of the two keys next
   to its centre), so that all of them together stay below ``eps / 3`` of ``W`` (``W >= s_j
   exp(-D^2 / 2)``);
2. the series stops after ``p`` terms. With ``Z = RHO (RHO + R)`` bounding ``|a u|`` over the
   kept keys, the remainder of each key's term is at most ``Z^p / p! e^Z`` times the term
   itself (Lagrange's remainder of ``exp(x)``, ``e^xi x^p / p!`` with ``xi`` between 0 and
   ``x``, is at most ``|x|^p / p!`` times ``e^x`` for ``x >= 0`` and times ``e^|x|`` below);
   ``p`` is the smallest with that below ``eps / 3``.

**Rounding.** A key's share of the series is computed to within a few ulps of
``exp(-(|a| - |u|)^2 / 2)``, which exceeds its weight by up to ``e^(2 Z)`` for keys on the far
side of the box centre. So the boxes are made narrow enough (at most :data:`RHO`) that a box next
to its keys has ``e^(2 Z)`` times ``MAX_TERMS / 2 + 8`` ulps under ``eps / 3``; a box whose ``Z``
passes that (queries far from every key), or whose ``p`` would pass :data:`MAX_TERMS`, goes to
the exact truncated backend (:mod:`nadaraya.backends.truncated`: only the keys in each query's
window, in the log domain, so a far query keeps its nearest key, as everywhere).

**Moments** (``moments = r``, the sums of a local polynomial fit): each key also carries the
columns ``u^l`` and ``u^l v`` (``u`` from the box's centre), summed by the same series, and the
moments about the query follow binomially, ``sum w (u - a)^j = sum_l C(j, l) (-a)^(j - l) sum w
u^l``. The series' remainder bounds each key's term relative to itself, so each moment sum
``sum_i w_i (x_i - q)^j g_i`` (``g`` = 1 or a value column) is within
``tol h^j max|g| sum_i w_i (|x_i - q| / h + 1)^j`` (``|u| + |a| <= |u - a| + 2 RHO``); the drop
radius grows until a dropped key's ``w d^j`` (``d >= R`` bandwidths) stays within the same
share. The predictions of a local fit then move by that error times its local system's
conditioning: the bound is on the sums.

**Leave-one-out** (``exclude``): the left-out key's share of the box's series is recomputed the
same way and subtracted; where that share's terms are so large against the rest of the sum that
their rounding could pass ``eps / 3``, the query is computed exactly instead.

Cost: sorting the keys and the queries, then ``O(p)`` per query and ``O(p)`` per (key, box)
visit, about ``(1 + R / RHO) n p`` in all, whatever the bandwidth; parallel over ranges of a
box's keys and over the queries.

Examples
--------
>>> import numpy as np
>>> from nadaraya.kernels import get
>>> from nadaraya.backends import reference, taylor
>>> rng = np.random.default_rng(0)
>>> x = rng.uniform(0, 5, (2000, 1)); v = np.sin(x)
>>> a = taylor.partials(x, x, v, kernel=get("gaussian"), bandwidth=np.array([0.05]), tol=1e-10)
>>> b = reference.partials(x, x, v, kernel=get("gaussian"), bandwidth=np.array([0.05]))
>>> bool(np.abs(a.finalize() - b.finalize()).max() <= 1e-10 * np.abs(v).max())
True
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import exp_flushed, run_ranges
from nadaraya.backends._fallback import exact_rows
from nadaraya.backends._rows import assemble
from nadaraya.backends._sorted import counting_pairs, sorted_exclude, sorted_pairs, unsort_rows
from nadaraya.backends.truncated import _radius2
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

__all__ = ["MAX_DEGREE", "MAX_TERMS", "MIN_TOL", "RHO", "partials", "plan", "supports"]

#: the boxes' half-width, in bandwidths
RHO = 0.4
#: the highest local polynomial degree whose moment sums it computes
MAX_DEGREE = 2
#: the most series terms a box takes; a box that would need more goes to the exact truncated sums
MAX_TERMS = 64
#: the smallest tolerance offered (below it rounding, not the series, would set the error)
MIN_TOL = 1e-12
#: keys per chunk of a box's window (their powers stay in cache)
CHUNK = 512
#: the most keys one task sums (a wide box's window is split so that every core has work)
SEGMENT = 65536
#: the bytes of series sums held at once (boxes are taken in batches within it)
BATCH = 32 * 2**20
_ROUND = 2.0**-53


def supports(kernel: Kernel, d: int) -> bool:
    """The Gaussian kernel in 1 to 3 features (in 2 and 3 by :mod:`nadaraya.backends._taylor_nd`).

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("gaussian"), 1), supports(get("gaussian"), 3), supports(get("gaussian"), 4)
    (True, True, False)
    >>> supports(get("epanechnikov"), 1)
    False
    """
    return kernel.name == "gaussian" and 1 <= d <= 3


@numba.njit(cache=True, nogil=True)
def _terms(z: float, bound: float) -> int:  # pragma: no cover - compiled
    """The fewest terms ``p`` with ``z^p / p! e^z <= bound`` (``MAX_TERMS + 1``: none)."""
    b = math.exp(z)
    for p in range(MAX_TERMS + 1):
        if b <= bound:
            return p
        b *= z / (p + 1)
    return MAX_TERMS + 1


def plan(n: int, m: int, tol: float, span: float, moments: int = 0) -> dict[str, float]:
    """What the method expects for ``n`` keys and ``m`` queries spread over ``span`` bandwidths
    (unit sample weights, keys next to every box; the moments of a local polynomial of degree
    ``moments``): the drop radius ``R``, the terms ``p`` and the (key, box) visits, for the cost
    model and :func:`nadaraya.backends.explain`.

    Examples
    --------
    >>> p = plan(10**6, 10**6, 1e-10, 5 / 0.001)
    >>> 25 <= p["terms"] <= 40 and 8 < p["radius"] < 11
    True
    """
    eps3 = tol / 2.1 / 3.0
    rho, _ = _box_size(float(n), eps3, 2 * moments)
    radius = math.sqrt(rho**2 + _radius2(math.log(n / eps3), 2 * moments))
    terms = _terms(rho * (rho + radius), eps3)
    boxes = min(m, max(1.0, span / (2 * rho)))
    per_box = min(n, n * (2 * (rho + radius)) / max(span, 2 * (rho + radius)))
    return {"rho": rho, "radius": radius, "terms": terms, "visits": boxes * per_box}


@numba.njit(cache=True, nogil=True)
def _plan_boxes(xs, ss, inv_h, centres, rho, zmax, lc, eps3, jp, b0, b1, lo, hi, terms):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Per box ``b0:b1``: the window of kept keys ``lo:hi`` and the series' terms (0: the box is
    far from the keys and is summed directly); with moments up to ``jp`` the radius grows until
    a dropped key's ``w d^jp`` stays below what its weight alone may be."""
    n = xs.size
    for b in range(b0, b1):
        c = centres[b]
        j = np.searchsorted(xs, c)
        best = -np.inf
        best_d = 0.0
        for t in (j - 1, j):
            if 0 <= t < n:
                dist = abs(xs[t] - c) * inv_h + rho
                score = math.log(ss[t]) - 0.5 * dist * dist
                if score > best:
                    best, best_d = score, dist
        radius2 = max(best_d * best_d + 2.0 * (lc - (best + 0.5 * best_d * best_d)), 0.0)
        radius = math.sqrt(_radius2(0.5 * radius2, jp) if jp else radius2)
        reach = (rho + radius) / inv_h
        lo[b] = np.searchsorted(xs, c - reach)
        hi[b] = np.searchsorted(xs, c + reach, side="right")
        z = rho * (rho + radius)
        p = _terms(z, eps3)
        terms[b] = 0 if z > zmax or p > MAX_TERMS else p


@numba.njit(cache=True, nogil=True)
def _columns(v, u, p, r, out):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """A key's columns besides its weight: its values ``v``, then ``u^l`` for ``l = 1 .. 2 r``,
    then ``u^l v`` for ``l = 1 .. r`` (``u`` from the box's centre, in bandwidths)."""
    for col in range(p):
        out[col] = v[col]
    ul = 1.0
    for j in range(1, 2 * r + 1):
        ul *= u
        out[p + j - 1] = ul
        if j <= r:
            for col in range(p):
                out[p + 2 * r + (j - 1) * p + col] = ul * v[col]
    if out.size > p + 2 * r + r * p:  # the dummy column of a call without values
        out[out.size - 1] = 0.0


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"}, inline="always")
def _unit_sums(eu, uu, nb, p, Tt):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``Tt[k, 0] += sum_t eu_t uu_t^k`` for ``k < p``, four powers per pass over the chunk
    (each key's ``eu`` read and written once per four terms); ``eu`` left at ``eu uu^p``."""
    k = 0
    while k + 4 <= p:
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        for t in range(nb):
            u = uu[t]
            e0 = eu[t]
            e1 = e0 * u
            e2 = e1 * u
            e3 = e2 * u
            a0 += e0
            a1 += e1
            a2 += e2
            a3 += e3
            eu[t] = e3 * u
        Tt[k, 0] += a0
        Tt[k + 1, 0] += a1
        Tt[k + 2, 0] += a2
        Tt[k + 3, 0] += a3
        k += 4
    while k < p:
        acc = 0.0
        for t in range(nb):
            e = eu[t]
            acc += e
            eu[t] = e * uu[t]
        Tt[k, 0] += acc
        k += 1


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})  # reordered sums vectorise
def _moments(xs, ss, vs, inv_h, centres, terms, task_box, task_lo, task_hi, r, unit,  # type: ignore[no-untyped-def]
             t0, t1, T):  # pragma: no cover - compiled
    """Tasks ``t0:t1``, each a range of one box's keys: their sums
    ``T[t, k] = sum s e^(-u^2 / 2) u^k / k! g`` for ``k < terms[box]`` and the columns ``g`` of
    :func:`_columns` (1, the values, and with moments ``u^l`` and ``u^l v``). The powers are
    summed as ``s e^(-u^2 / 2) u^k`` (one product per key and term) and the sums divided by
    ``k!`` at the end (the same relative rounding); ``unit``: one value column of ones, whose
    sums are the weight's."""
    nv = vs.shape[1]
    ncol = T.shape[2] - 1
    eu = np.empty(CHUNK)
    uu = np.empty(CHUNK)
    vv = np.empty((ncol, CHUNK))
    for task in range(t0, t1):
        b = task_box[task]
        p = terms[b]
        c = centres[b]
        Tt = T[task]
        for k0 in range(task_lo[task], task_hi[task], CHUNK):
            nb = min(CHUNK, task_hi[task] - k0)
            for t in range(nb):
                u = (xs[k0 + t] - c) * inv_h
                uu[t] = u
                eu[t] = ss[k0 + t] * exp_flushed(-0.5 * u * u)
            if unit:
                _unit_sums(eu, uu, nb, p, Tt)
                continue
            for t in range(nb):
                for col in range(nv):
                    vv[col, t] = vs[k0 + t, col]
            if ncol > nv:  # the moments' columns (see _columns), or the dummy column
                for t in range(nb):
                    _columns(vs[k0 + t], uu[t], nv, r, vv[:, t])
            v0 = vv[0]
            for k in range(p):  # T_k += sum e u^k (1, v_0); then the powers move one step
                acc_w = 0.0
                acc_v = 0.0
                for t in range(nb):
                    e = eu[t]
                    acc_w += e
                    acc_v += e * v0[t]
                    eu[t] = e * uu[t]
                Tt[k, 0] += acc_w
                Tt[k, 1] += acc_v
            if ncol > 1:  # the other value columns: the powers again, one column at a time
                for t in range(nb):
                    eu[t] = ss[k0 + t] * exp_flushed(-0.5 * uu[t] * uu[t])
                for k in range(p):
                    for col in range(1, ncol):
                        vc = vv[col]
                        acc = 0.0
                        for t in range(nb):
                            acc += eu[t] * vc[t]
                        Tt[k, col + 1] += acc
                    for t in range(nb):
                        eu[t] *= uu[t]
        inv_fact = 1.0
        for k in range(p):  # the 1 / k! of every sum
            if unit:
                Tt[k, 1] = Tt[k, 0]
            for col in range(ncol + 1):
                Tt[k, col] *= inv_fact
            inv_fact /= k + 1


@numba.njit(cache=True, nogil=True)
def _evaluate(qs, xs, ss, vs, inv_h, centres, rho, kappa, qbox, lo, hi, terms, T, tb0, r,  # type: ignore[no-untyped-def]
              unit, ex, off, i0, i1, out, ok):  # pragma: no cover - compiled
    """Queries ``off + i0 : off + i1`` (sorted; ``qbox`` their box, whose sums are
    ``T[box - tb0]``): the series in ``a`` of every column, the left-out key's share taken off,
    then the moments about the query from the powers about the box's centre (binomially); a
    query of a far box is left to the caller (``ok`` False). ``unit``: the one value column is
    ones, its series the weight's."""
    p = vs.shape[1]
    ncol = T.shape[2]
    h = 1.0 / inv_h
    S = np.empty(ncol)
    g = np.empty(max(ncol - 1, 1))
    for i in range(off + i0, off + i1):
        b = qbox[i]
        nt = terms[b]
        Tb = T[b - tb0]
        if nt == 0:  # far from the keys: the exact truncated sums take it (see _rows.exact_rows)
            ok[i] = False
            continue
        c = centres[b]
        a = (qs[i] - c) * inv_h
        pref = math.exp(-0.5 * a * a)
        for col in range(1 if unit else ncol):
            acc = Tb[nt - 1, col]
            for k in range(nt - 2, -1, -1):
                acc = acc * a + Tb[k, col]
            S[col] = pref * acc
        if unit:
            S[1] = S[0]
        e = ex[i]
        if e >= 0 and lo[b] <= e < hi[b]:  # the left-out key's share, its series term by term
            u = (xs[e] - c) * inv_h
            term = ss[e] * exp_flushed(-0.5 * u * u)
            share = 0.0
            size = 0.0  # the share's terms in magnitude: what its rounding scales with
            ak = 1.0
            for k in range(nt):
                share += term * ak
                size += abs(term * ak)
                term *= u / (k + 1)
                ak *= a
            share *= pref
            _columns(vs[e], u, p, r, g)
            S[0] -= share
            for col in range(1, ncol):
                S[col] -= share * g[col - 1]
            if not pref * size * max(1.0, rho + abs(u)) ** (2 * r) <= kappa * S[0]:
                ok[i] = False
        if not S[0] > 0.0:
            ok[i] = False
        for col in range(1 + p):
            out[i, col] = S[col]
        hj = 1.0
        for j in range(1, 2 * r + 1):  # sum w (u - a)^j = sum_l C(j, l) (-a)^(j - l) sum w u^l
            hj *= h
            mom = 0.0
            binom = 1.0
            for ell in range(j, -1, -1):  # l = j, j - 1, ..., 0; binom = C(j, l), (-a)^(j - l)
                col = 0 if ell == 0 else p + ell
                mom += binom * S[col]
                binom *= -a * ell / (j - ell + 1)
            out[i, p + j] = mom * hj
            if j <= r:
                for vc in range(p):
                    mv = 0.0
                    binom = 1.0
                    for ell in range(j, -1, -1):
                        col = 1 + vc if ell == 0 else 1 + p + 2 * r + (ell - 1) * p + vc
                        mv += binom * S[col]
                        binom *= -a * ell / (j - ell + 1)
                    out[i, 1 + p + 2 * r + (j - 1) * p + vc] = mv * hj


def _box_size(total: float, eps3: float, jp: int = 0) -> tuple[float, float]:
    """The boxes' half-width and the largest ``Z`` a box may have: its rounding amplification
    ``e^(2 Z)`` times ``(MAX_TERMS / 2 + 8)`` ulps stays below ``eps3``; boxes are as wide as
    that allows for a key next to them (at most :data:`RHO`), whose radius grows with the
    moments' power ``jp``."""
    zmax = 0.5 * math.log(eps3 / ((MAX_TERMS / 2 + 8) * _ROUND))
    radius = math.sqrt(_radius2(math.log(max(total, 1.0) / eps3), jp))
    return min(RHO, 0.9 * zmax / (radius + RHO)), zmax


def partials(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    *,
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None = None,
    exclude: NDArray[np.integer] | None = None,
    moments: int = 0,
    tol: float = 1e-10,
) -> Partials:
    """Partial sums of the Gaussian kernel within ``tol`` (see the module's text; in 2 and 3
    features :mod:`nadaraya.backends._taylor_nd`, the same guarantee).

    ``moments`` up to :data:`MAX_DEGREE` (a local polynomial's degree); ``tol`` at least
    :data:`MIN_TOL`.

    Raises
    ------
    ValueError
        For a kernel other than the Gaussian or ``d`` above 3, ``moments`` above
        :data:`MAX_DEGREE`, or a ``tol`` outside ``[MIN_TOL, 0.1]``.
    """
    d = keys.shape[1]
    r = int(moments)  # kernel, features and degree checked against CAPABILITIES by backends.compute
    if not (isinstance(tol, float | int) and MIN_TOL <= tol <= 0.1):
        raise ValueError(f"tol must be a number from {MIN_TOL:g} to 0.1 for backend='taylor'; got {tol!r}")
    if d > 1:
        from nadaraya.backends import _taylor_nd

        return _taylor_nd.partials(queries, keys, values, kernel=kernel, bandwidth=bandwidth,
                                   sample_weight=sample_weight, tol=float(tol), exclude=exclude, moments=r)
    dtype = values.dtype
    m, n, p = queries.shape[0], keys.shape[0], values.shape[1]
    if sample_weight is None:  # every weight 1 = 2^1 * 0.5: the sums are relative to 2^1
        sw, live, scale_exp, key_col, total = None, np.arange(0), 1, keys[:, 0], 0.5 * n
    else:
        sw = np.asarray(sample_weight, dtype=np.float64)
        live = np.flatnonzero(sw > 0)
        scale_exp = int(np.frexp(sw[live].max())[1]) if live.size else 0
        key_col = keys[live, 0] if live.size < n else keys[:, 0]
        total = float(np.ldexp(sw[live], -scale_exp).sum())
    inv_h = 1.0 / float(bandwidth[0])
    eps3 = tol / 2.1 / 3.0
    rho, zmax = _box_size(total, eps3, 2 * r)
    origin = float(min(queries[:, 0].min(), key_col.min())) if m and key_col.size else 0.0
    with ThreadPoolExecutor(2) as sorter:  # the keys' sort and the queries' grouping side by side
        pending = sorter.submit(_by_box, queries[:, 0], origin, inv_h / (2 * rho))
        order, xs = sorted_pairs(np.asarray(key_col, dtype=np.float64))  # the keys moved with their order
        qorder, qs = pending.result()
    if sw is not None and live.size < n:
        order = live[order]
    # exact: the largest in [0.5, 1)
    ss = np.full(n, 0.5) if sw is None else np.ldexp(sw[order], -scale_exp)
    if r == 0 and p == 1 and bool(np.all(values == 1)):  # a density's unit values: in any order
        vs = np.ones((order.size, 1))
    else:
        vs = np.ascontiguousarray(values[order], dtype=np.float64)
    ex = np.full(m, -1, dtype=np.int64) if exclude is None else sorted_exclude(exclude, n, order, m)[qorder]
    lc = math.log(max(float(ss.sum()), 1e-300) / eps3)
    kappa = eps3 / (8.0 * (MAX_TERMS + 8) * _ROUND)
    width = 1 + p + 2 * r + r * p
    out = np.zeros((m, width))  # weight, values, moments, moments of the values (sorted queries)
    ok = np.ones(m, dtype=np.bool_)
    if xs.size and m:
        _series(qs, xs, ss, vs, ex, inv_h, origin, (rho, zmax, lc, eps3, kappa), r, (out, ok))
    else:
        ok[:] = False
    back = unsort_rows(out, qorder)
    good = np.empty_like(ok)
    good[qorder] = ok
    shift = np.full(m, scale_exp * math.log(2.0))  # the series' sums are relative to 2^scale_exp
    if not good.all():  # the queries computed exactly instead, in their own order
        exact_rows(np.flatnonzero(~good), queries, keys, values, kernel, bandwidth, sample_weight, exclude, r,
                   shift, back)
    return assemble(shift, back, dtype, m, p, r)


def _by_box(
    q: NDArray[np.floating], origin: float, per_unit: float
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """An order of the queries ``q`` that groups them by box (boxes ``1 / per_unit`` wide from
    ``origin``) in increasing order, and ``q`` in it (float64): a counting sort, O(m), where the
    boxes are not many more than the queries; a sort otherwise."""
    if q.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    q64 = np.ascontiguousarray(q, dtype=np.float64)
    top = (float(q.max()) - origin) * per_unit
    if not top < 4 * q.size + 1024:
        order = np.argsort(q64)
        return order, q64[order]
    ids = np.floor((q64 - origin) * per_unit).astype(np.int64)
    return counting_pairs(ids, int(ids.max()) + 1, q64)  # type: ignore[no-any-return]


#: the work of planning one box (a binary search and its terms), in the units of
#: :data:`nadaraya._support.jit.SERIAL_WORK` (each pass below that runs on the calling thread)
_PLAN_WORK = 200.0


def _series(
    qs: NDArray[np.float64], xs: NDArray[np.float64], ss: NDArray[np.float64], vs: NDArray[np.float64],
    ex: NDArray[np.int64], inv_h: float, origin: float, params: tuple[float, ...], r: int,
    outputs: tuple[Any, ...],
) -> None:
    """Sorted queries against sorted keys, in batches of boxes whose sums fit in :data:`BATCH`
    bytes: plan each box, sum its keys in ranges of at most :data:`SEGMENT` (so that a few wide
    boxes still keep every core busy), add the ranges of a box, evaluate its queries."""
    rho, zmax, lc, eps3, kappa = params
    m = qs.size
    unit = r == 0 and vs.shape[1] == 1 and bool(np.all(vs == 1.0))  # a density's sums: no value column
    qid = np.floor((qs - origin) * inv_h / (2 * rho)).astype(np.int64)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(qid)) + 1, [m]]).astype(np.int64)
    ids = qid[starts[:-1]]
    nbox = ids.size
    lo, hi, terms = np.zeros(nbox, np.int64), np.zeros(nbox, np.int64), np.zeros(nbox, np.int64)
    # every kernel reads the same rounded centres (an expression recomputed in each, where some are
    # compiled with contraction, could round differently: a and u would then disagree by an ulp of c)
    centres = origin + (ids + 0.5) * (2.0 * rho / inv_h)
    run_ranges(_plan_boxes, (xs, ss, inv_h, centres, rho, zmax, lc, eps3, 2 * r), nbox, (lo, hi, terms),
               work=_PLAN_WORK * nbox)
    qbox = np.repeat(np.arange(nbox), np.diff(starts))
    p = vs.shape[1]
    ncol = 1 + max(1, p + 2 * r + r * p)  # the weight and every other column (one dummy at least)
    pmax = max(1, int(terms.max()))
    per_batch = max(1, BATCH // (8 * pmax * ncol * max(1, -(-int((hi - lo).max()) // SEGMENT))))
    for b0 in range(0, nbox, per_batch):
        b1 = min(nbox, b0 + per_batch)
        span = np.where(terms[b0:b1] > 0, hi[b0:b1] - lo[b0:b1], 0)
        count = np.maximum(1, -(-span // SEGMENT))  # every box gets a task, empty or not
        first = np.concatenate([[0], np.cumsum(count)[:-1]])
        task_box = np.repeat(np.arange(b0, b1), count)
        within = np.arange(task_box.size) - np.repeat(first, count)
        task_lo = lo[task_box] + within * SEGMENT
        task_hi = np.minimum(task_lo + SEGMENT, np.where(terms[task_box] > 0, hi[task_box], lo[task_box]))
        T = np.zeros((task_box.size, pmax, ncol))
        run_ranges(_moments, (xs, ss, vs, inv_h, centres, terms, task_box, task_lo, task_hi, r, unit),
                   task_box.size, (T,), work=float(((task_hi - task_lo) * terms[task_box]).sum()) * ncol)
        box_T = np.add.reduceat(T, first, axis=0) if task_box.size > b1 - b0 else T
        q0, q1 = int(starts[b0]), int(starts[b1])
        run_ranges(_evaluate, (qs, xs, ss, vs, inv_h, centres, rho, kappa, qbox, lo, hi, terms,
                               box_T, b0, r, unit, ex, q0), q1 - q0, outputs,
                   work=8.0 * (q1 - q0) * pmax * ncol)
