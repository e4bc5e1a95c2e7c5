"""The taylor backend in 2 and 3 features: Gaussian sums within a tolerance, by series about box centres.

**What it guarantees** (the same as in 1-D, :mod:`nadaraya.backends.taylor`): every sum
``S_v = sum_i s_i w_i v_i`` (and the weight, ``v = 1``) is within ``eps W max|v|`` of the exact
one, ``eps = tol / 2.1`` and ``W = sum_i s_i w_i``, so every prediction is within
``tol * max|v|`` of the exact one, per value column, on every query. Rounding comes on top, as for
every backend; a box whose rounding could come near the bound is computed exactly instead.

**How.** In units of the bandwidth of each feature, the queries are cut into cubic boxes of
half-width ``rho`` per feature (one of :data:`RHO`, the cheapest by the cost model: wide boxes
need more terms, narrow ones more boxes), so a query is at most ``A = rho sqrt(d)`` from its
box's centre. For a query at ``a`` and a key at ``u`` from the centre (``r = |u|``),

    exp(-|a - u|^2 / 2) = exp(-|a|^2 / 2) exp(-r^2 / 2) sum_alpha a^alpha u^alpha / alpha!,

the sum over every multi-index ``alpha`` (the multinomial expansion of ``exp(a . u)``), cut to
total degree below ``p``: the box's queries share the sums
``T_alpha = sum_i s_i v_i exp(-r_i^2 / 2) u_i^alpha / alpha!`` over its keys, and each query costs
one polynomial in ``a``. Per box, before its sums:

1. a lower bound ``W_0 <= W`` for every query of the box: the sum of ``s_j exp(-(r_j + A)^2 /
   2)`` over the keys read (the first few of each cell) in the nearest cells that hold any and
   the ring of cells around them;
2. keys farther than ``R`` from the centre are dropped, ``(R - A)^2 = 2 log(S / (eps3 W_0))``
   (``S = sum_i s_i``, ``eps3 = eps / 3``): each weighs at most ``s_i exp(-(R - A)^2 / 2)``, all
   together at most ``eps3 W``;
3. Lagrange's remainder of ``exp(x)`` after ``p`` terms is at most ``|x|^p / p! e^|x|``; with
   ``x = a . u``, ``|x| <= |a| r``, a key's error is at most
   ``s_i exp(-(|a| - r)^2 / 2) (|a| r)^p / p! <= s_i g_p(r)``, ``g_p(r) = exp(-(r - A)_+^2 / 2)
   (A r)^p / p!`` (the left side grows with ``|a|`` up to ``A``). ``p`` is the fewest terms with
   ``S max_{r <= R} g_p(r) <= eps3 W_0``; the maximum is at ``r = (A + sqrt(A^2 + 4 p)) / 2``
   or at ``R``.

During the sums, the box also adds ``sum_i s_i exp(-r^2 / 2 + A r)``, the largest its series
terms can add up to, and ``W_1 = sum_i s_i exp(-(r + A)^2 / 2) <= W``. The series' rounding is a
few ulps of the first per term and degree: where ``(2 p + 8) 2^-53`` times it passes
``eps3 W_1``, the box's queries are computed exactly instead. So are the queries of a box with
no key near, whose ``p`` passes :data:`MAX_POWER` or whose terms pass :data:`MAX_TERMS`, and of
a box where the series would cost more than summing its keys directly (per region: the series
pays where many queries share a box): they go to the exact truncated sums over a grid
(:mod:`nadaraya.backends._truncated_grid`), where a far query keeps its nearest key, as
everywhere.

**Leave-one-out** (``exclude``): the lower bound ``W_0`` leaves out its largest term (a query
may leave out any one key), and each query subtracts its own key's share of the series (one
more polynomial, in ``u``); where twice the box's rounding bound passes ``eps3`` times what
remains of ``W_1``, the query is computed exactly instead.

Cost: sorting the keys by cell and the queries by box, then for every box about ``T (2 + c)``
multiply-adds per key within ``R`` (``T = C(p - 1 + d, d)`` terms, ``c`` value columns) and
``T (1 + c)`` per query.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numpy.typing import NDArray

from .._jit import run_ranges
from ..kernels import Kernel
from ..partials import Partials
from ._sorted import counting_order, sorted_exclude
from ._truncated_grid import ball_slices, key_cells

__all__ = ["MAX_POWER", "MAX_TERMS", "NS", "RHO", "estimate", "multi_indices", "partials", "plan"]

#: the boxes' half-widths per feature, in bandwidths, that a call chooses from
RHO = (0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8)
#: the highest total degree (plus one) a box's series takes
MAX_POWER = 40
#: the most terms a box's series takes
MAX_TERMS = 2500
#: the cost model (nanoseconds on two cores, measured 2026-11): per term and column for a key
#: of a box, per key visited, per term and column for a query, and per (query, key) pair summed
#: directly by the exact grid
NS = {"term": 0.12, "visit": 6.0, "query_term": 0.5, "pair": 0.55}
#: a key read for the lower bound per cell (the first few of each)
_FIRST = 32
#: cells searched outward from a box for its lower bound, at most (beyond: the exact sums)
_RINGS = 8
_CHUNK = 128
_ROUND = 2.0**-53


@functools.lru_cache(maxsize=64)
def multi_indices(
    d: int, p: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
    """The multi-indices of ``d`` features with total degree below ``p``, by degree: for each its
    parent (the same with one less in feature ``dim``), that feature, ``1 / alpha_dim`` and, per
    degree ``g``, the count of those of degree below ``g`` (``u^alpha / alpha!`` is the parent's
    times ``u_dim / alpha_dim``).

    Examples
    --------
    >>> parent, dim, inv, count = multi_indices(2, 3)
    >>> parent.tolist(), dim.tolist(), inv.tolist(), count.tolist()
    ([-1, 0, 0, 1, 1, 2], [0, 0, 1, 0, 1, 1], [1.0, 1.0, 1.0, 0.5, 1.0, 0.5], [0, 1, 3, 6])
    """
    alphas, parent, dim, inv, last = [(0,) * d], [-1], [0], [1.0], [0]
    count, start = [0, 1], 0
    for _ in range(1, p):
        end = len(alphas)
        for i in range(start, end):
            for k in range(last[i], d):
                a = list(alphas[i])
                a[k] += 1
                alphas.append(tuple(a))
                parent.append(i)
                dim.append(k)
                inv.append(1.0 / a[k])
                last.append(k)
        start = end
        count.append(len(alphas))
    return (np.array(parent, dtype=np.int64), np.array(dim, dtype=np.int64), np.array(inv),
            np.array(count[:p + 1], dtype=np.int64))


def _third(tol: float) -> float:
    """``eps3``: a third of the error each sum may carry, ``eps = tol / 2.1`` (module text)."""
    return tol / 2.1 / 3.0


def _n_terms(d: int, p: int) -> int:
    return math.comb(p - 1 + d, d) if p > 0 else 0


@numba.njit(cache=True, nogil=True)
def _power(log_target, big_a, radius, max_power):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The fewest terms ``p`` with ``log max_{r <= radius} g_p(r) <= log_target`` (module text);
    ``max_power + 1``: none."""
    for p in range(1, max_power + 1):
        r = min(0.5 * (big_a + math.sqrt(big_a * big_a + 4.0 * p)), radius)
        over = max(r - big_a, 0.0)
        log_g = -0.5 * over * over + p * math.log(max(big_a * r, 1e-300)) - math.lgamma(p + 1.0)
        if log_g <= log_target:
            return p
    return max_power + 1


@numba.njit(cache=True, nogil=True)
def _plan(kt, ls, starts, shape, side, centres, big_a, log_s, log_eps3, nq, max_power, max_terms, counts,
          ns, loo, a, b, radius, terms):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Boxes ``a:b``: the drop radius and the terms of each (0: its queries are summed exactly)."""
    d = kt.shape[0]
    z = np.zeros(3)
    cz = np.zeros(3, dtype=np.int64)
    slices = np.empty((shape[1] * (shape[2] if d == 3 else 1), 2), dtype=np.int64)
    for bi in range(a, b):
        for j in range(d):
            z[j] = centres[bi, j]
        for j in range(d):
            cz[j] = min(max(int(z[j] / side), 0), shape[j] - 1)
        best = -np.inf
        total = 0.0
        found = -1
        for ring in range(_RINGS + 1):
            if found >= 0 and ring > found + 1:
                break
            lo2, hi2 = (cz[2] - ring, cz[2] + ring) if d == 3 else (0, 0)
            for c2 in range(max(lo2, 0), min(hi2, shape[2] - 1 if d == 3 else 0) + 1):
                for c1 in range(max(cz[1] - ring, 0), min(cz[1] + ring, shape[1] - 1) + 1):
                    for c0 in range(max(cz[0] - ring, 0), min(cz[0] + ring, shape[0] - 1) + 1):
                        if max(abs(c0 - cz[0]), abs(c1 - cz[1]), abs(c2 - cz[2]) if d == 3 else 0) != ring:
                            continue
                        cell = (c2 * shape[1] + c1) * shape[0] + c0
                        s0 = starts[cell]
                        s1 = min(starts[cell + 1], s0 + _FIRST)
                        for k in range(s0, s1):
                            r2 = 0.0
                            for j in range(d):
                                du = kt[j, k] - z[j]
                                r2 += du * du
                            lw = ls[k] - 0.5 * (math.sqrt(r2) + big_a) ** 2
                            if lw > best:  # a sum of exp(lw), as exp(best) total
                                total = total * math.exp(best - lw) + 1.0 if best > -np.inf else 1.0
                                best = lw
                            else:
                                total += math.exp(lw - best)
                            if found < 0:
                                found = ring
        radius[bi] = 0.0
        terms[bi] = 0
        if loo:  # a query may leave out any one key: the largest term of the bound
            total -= 1.0
        if not (best > -600.0 and total > 1e-300):
            continue
        log_ratio = log_s - log_eps3 - (best + math.log(total))
        rad = big_a + math.sqrt(2.0 * log_ratio)
        p = _power(-log_ratio, big_a, rad, max_power)
        if p > max_power or counts[min(p, max_power)] > max_terms:
            continue
        t = counts[p]
        keys = 0  # the keys in the cells that meet the ball: the cost model's count
        for k in range(ball_slices(z, rad, side, shape, starts, d, slices)):
            keys += slices[k, 1] - slices[k, 0]
        series = keys * (t * ns[0] + ns[1]) + nq[bi] * t * ns[2]
        if series < nq[bi] * keys * ns[3]:
            radius[bi] = rad
            terms[bi] = p


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _boxes(kt, ss, vt, starts, shape, side, centres, radius, terms, counts, parent, dim, inv, big_a, eps3,
           qt, qstart, ex, a, b, out, half_a2, ok):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Boxes ``a:b``: the series sums over their keys, then their queries' polynomials (queries
    sorted by box, ``qstart``), less the series' share of each query's left-out key ``ex``
    (its place among the sorted keys, -1: none); ``ok`` false where the query is left to the
    exact sums (its box, or its own rounding check)."""
    d = kt.shape[0]
    p_cols = vt.shape[0]
    tmax = counts[counts.size - 1]
    ncol = 2 * ((2 + p_cols) // 2)  # the weight and the values, and a dummy to make pairs
    acc = np.zeros((tmax, ncol))
    mono = np.empty((tmax, _CHUNK))
    e = np.zeros((ncol, _CHUNK))
    u = np.empty((3, _CHUNK))
    z = np.zeros(3)
    ma = np.empty(tmax)
    mu = np.empty(tmax)
    av = np.empty(3)
    uv = np.empty(3)
    slices = np.empty((shape[1] * (shape[2] if d == 3 else 1), 2), dtype=np.int64)
    for bi in range(a, b):
        q0, q1 = qstart[bi], qstart[bi + 1]
        if terms[bi] == 0:
            for qi in range(q0, q1):
                ok[qi] = False
            continue
        t_n = counts[terms[bi]]
        rad = radius[bi]
        rad2 = rad * rad
        for j in range(d):
            z[j] = centres[bi, j]
        acc[:t_n, :] = 0.0
        amp = 0.0
        low = 0.0
        for sl in range(ball_slices(z, rad, side, shape, starts, d, slices)):
            s0, s1 = slices[sl, 0], slices[sl, 1]
            for k0 in range(s0, s1, _CHUNK):
                cnt = min(_CHUNK, s1 - k0)
                for kk in range(cnt):
                    r2 = 0.0
                    for j in range(d):
                        du = kt[j, k0 + kk] - z[j]
                        u[j, kk] = du
                        r2 += du * du
                    w = 0.0
                    if r2 <= rad2:
                        r = math.sqrt(r2)
                        w = ss[k0 + kk] * math.exp(-0.5 * r2)
                        grow = math.exp(big_a * r)
                        amp += w * grow
                        low += w / grow
                    e[0, kk] = w
                    for c in range(p_cols):
                        e[1 + c, kk] = w * vt[c, k0 + kk]
                for kk in range(cnt):
                    mono[0, kk] = 1.0
                for c in range(1 + p_cols):
                    s = 0.0
                    for kk in range(cnt):
                        s += e[c, kk]
                    acc[0, c] += s
                for t in range(1, t_n):  # the columns in pairs, the first pair with the powers
                    pt, dt, it = parent[t], dim[t], inv[t]
                    a0 = 0.0
                    a1 = 0.0
                    for kk in range(cnt):
                        mv = mono[pt, kk] * u[dt, kk] * it
                        mono[t, kk] = mv
                        a0 += mv * e[0, kk]
                        a1 += mv * e[1, kk]
                    acc[t, 0] += a0
                    acc[t, 1] += a1
                    for c in range(2, ncol, 2):  # ncol is even: a last dummy column of zeros
                        a0 = 0.0
                        a1 = 0.0
                        for kk in range(cnt):
                            mv = mono[t, kk]
                            a0 += mv * e[c, kk]
                            a1 += mv * e[c + 1, kk]
                        acc[t, c] += a0
                        acc[t, c + 1] += a1
        low *= math.exp(-0.5 * big_a * big_a)
        rounding = (2 * terms[bi] + 8) * _ROUND * amp
        if not rounding <= eps3 * low:
            for qi in range(q0, q1):
                ok[qi] = False
            continue
        for qi in range(q0, q1):
            a2 = 0.0
            for j in range(d):
                av[j] = qt[j, qi] - z[j]
                a2 += av[j] * av[j]
            ma[0] = 1.0
            for t in range(1, t_n):
                ma[t] = ma[parent[t]] * av[dim[t]]
            for c in range(1 + p_cols):
                s = 0.0
                for t in range(t_n):
                    s += ma[t] * acc[t, c]
                out[qi, c] = s
            half_a2[qi] = 0.5 * a2
            ok[qi] = out[qi, 0] > 0.0
            k = ex[qi]
            if k < 0:
                continue
            r2 = 0.0
            for j in range(d):
                uv[j] = kt[j, k] - z[j]
                r2 += uv[j] * uv[j]
            if r2 > rad2:  # dropped from the box's sums already
                continue
            r = math.sqrt(r2)
            # the rest weighs at least low less the key's own share of it, and the key's series
            # is rounded twice (in the sums and here)
            rest = low - ss[k] * math.exp(-0.5 * (r + big_a) ** 2)
            if not 2.0 * rounding <= eps3 * rest:
                ok[qi] = False
                continue
            mu[0] = 1.0
            for t in range(1, t_n):
                mu[t] = mu[parent[t]] * uv[dim[t]] * inv[t]
            own = 0.0
            for t in range(t_n):
                own += ma[t] * mu[t]
            own *= ss[k] * math.exp(-0.5 * r2)
            out[qi, 0] -= own
            for c in range(p_cols):
                out[qi, 1 + c] -= own * vt[c, k]
            ok[qi] = out[qi, 0] > 0.0


def _setup(queries, keys, sample_weight, bandwidth, tol, rho):  # type: ignore[no-untyped-def]
    """The scaled points, the key grid and the query boxes shared by :func:`partials` and :func:`plan`."""
    f64 = np.float64
    n, d = keys.shape
    inv_h = 1.0 / np.asarray(bandwidth, dtype=f64)
    sw = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=f64)
    live = np.flatnonzero(sw > 0)
    k = np.asarray(keys, dtype=f64)[live]
    q = np.asarray(queries, dtype=f64)
    corner = np.minimum(k.min(axis=0), q.min(axis=0))
    zk, zq = (k - corner) * inv_h, (q - corner) * inv_h
    span = np.maximum(zk.max(axis=0), zq.max(axis=0))
    scale_exp = int(np.frexp(sw[live].max())[1])
    ss = np.ldexp(sw[live], -scale_exp)  # exact: the largest in [0.5, 1)
    eps3 = _third(tol)
    log_s = math.log(float(ss.sum()))
    side, shape, order, starts = key_cells(zk, span, log_s - math.log(eps3))
    box = np.floor(zq / (2.0 * rho)).astype(np.int64)
    ids, qbox = np.unique(box, axis=0, return_inverse=True)
    qbox = qbox.reshape(-1)
    qorder = counting_order(qbox, ids.shape[0])
    qstart = np.zeros(ids.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(qbox, minlength=ids.shape[0]), out=qstart[1:])
    centres = np.ascontiguousarray((ids + 0.5) * (2.0 * rho))
    return dict(live=live, order=order, kt=np.ascontiguousarray(zk[order].T), ss=ss[order], starts=starts,
                shape=shape, side=side, zq=zq, qorder=qorder, qstart=qstart, centres=centres,
                big_a=rho * math.sqrt(d), log_s=log_s, eps3=eps3, scale_exp=scale_exp)


def _planned(g, d, loo=False):  # type: ignore[no-untyped-def]
    """Each box's drop radius and terms (0: exact); ``loo``: queries leave a key out."""
    nbox = g["centres"].shape[0]
    radius, terms = np.zeros(nbox), np.zeros(nbox, dtype=np.int64)
    counts = multi_indices(d, MAX_POWER)[3]
    ns = np.array([NS["term"], NS["visit"], NS["query_term"], NS["pair"]])
    args = (g["kt"], np.log(g["ss"]), g["starts"], g["shape"], g["side"], g["centres"], g["big_a"],
            g["log_s"], math.log(g["eps3"]), np.diff(g["qstart"]), MAX_POWER, MAX_TERMS, counts, ns, loo)
    run_ranges(_plan, args, nbox, (radius, terms))
    return radius, terms


def plan(queries: NDArray[np.floating], keys: NDArray[np.floating], bandwidth: NDArray[np.floating],
         tol: float, rho: float | None = None) -> dict[str, float]:
    """What the series would do for these points: the boxes' half-width (``rho``, or the one
    :func:`estimate` picks), the boxes, the share of queries in boxes that take the series (the
    others: exact sums), their mean terms and drop radius.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).uniform(0, 1, (20000, 2))
    >>> out = plan(x, x, np.array([0.5, 0.5]), 1e-8)
    >>> out["series"] > 0.9 and out["terms"] < 400
    True
    """
    d = keys.shape[1]
    rho = estimate(queries, keys, bandwidth, tol)[2] if rho is None else rho
    g = _setup(queries, keys, None, bandwidth, tol, rho)
    radius, terms = _planned(g, d)
    nq = np.diff(g["qstart"])
    on = terms > 0
    counts = multi_indices(d, MAX_POWER)[3]
    return {"rho": rho, "boxes": float(on.size), "series": float(nq[on].sum() / max(nq.sum(), 1)),
            "terms": float(counts[terms[on]].mean()) if on.any() else 0.0,
            "radius": float(radius[on].mean()) if on.any() else 0.0}


def partials(queries: NDArray[np.floating], keys: NDArray[np.floating], values: NDArray[np.floating], *,
             kernel: Kernel, bandwidth: NDArray[np.floating], sample_weight: NDArray[np.floating] | None,
             tol: float, exclude: NDArray[np.integer] | None = None, rho: float | None = None) -> Partials:
    """The series' partials in 2 or 3 features (no moments: the caller checks), each query's
    left-out key ``exclude`` (-1: none) subtracted, boxes of half-width ``rho`` (or the one
    :func:`estimate` picks); the queries of boxes left to the exact sums, and those whose own
    key's share could not be certified, from the exact grid."""
    from . import _truncated_grid
    from ._rows import assemble

    m, d, p = queries.shape[0], keys.shape[1], values.shape[1]
    out = np.zeros((m, 1 + p))
    shift = np.zeros(m)
    good = np.zeros(m, dtype=np.bool_)
    if m and (sample_weight is None or np.any(np.asarray(sample_weight) > 0)):
        rho = estimate(queries, keys, bandwidth, tol)[2] if rho is None else rho
        g = _setup(queries, keys, sample_weight, bandwidth, tol, rho)
        radius, terms = _planned(g, d, exclude is not None)
        parent, dim, inv, counts = multi_indices(d, max(1, int(terms.max())))
        vt = np.ascontiguousarray(np.asarray(values, dtype=np.float64)[g["live"][g["order"]]].T)
        qo = g["qorder"]
        qt = np.ascontiguousarray(g["zq"][qo].T)
        ex = sorted_exclude(exclude, keys.shape[0], g["live"][g["order"]], m)[qo]
        s_out, half_a2, ok = np.zeros((m, 1 + p)), np.zeros(m), np.zeros(m, dtype=np.bool_)
        run_ranges(_boxes, (g["kt"], g["ss"], vt, g["starts"], g["shape"], g["side"], g["centres"], radius,
                            terms, counts, parent, dim, inv, g["big_a"], g["eps3"], qt, g["qstart"], ex),
                   g["centres"].shape[0], (s_out, half_a2, ok), grain=1)
        out[qo], good[qo] = s_out, ok
        shift[qo] = g["scale_exp"] * math.log(2.0) - half_a2
    if not good.all():
        rows = np.flatnonzero(~good)
        f64 = np.float64
        part = _truncated_grid.partials(
            np.asarray(queries, dtype=f64)[rows], np.asarray(keys, dtype=f64), np.asarray(values, dtype=f64),
            kernel, np.asarray(bandwidth, dtype=f64),
            None if sample_weight is None else np.asarray(sample_weight, dtype=f64),
            None if exclude is None else np.asarray(exclude)[rows])
        shift[rows], out[rows, 0], out[rows, 1:] = part.shift, part.weight, part.value.reshape(rows.size, p)
    return assemble(shift, out, values.dtype, m, p, 0)


def estimate(queries: NDArray[np.floating], keys: NDArray[np.floating], bandwidth: NDArray[np.floating],
             tol: float, pairs: float | None = None) -> tuple[float, int, float]:
    """The modelled cost of the series (nanoseconds, :data:`NS`), its terms and the boxes'
    half-width for unit sample weights: the cheapest of :data:`RHO`, from the queries' extent and
    ``pairs``, the (query, key) pairs within the truncated sums' radius
    (:func:`nadaraya.backends.truncated.pairs`, estimated here if not given): about the keys a
    box reaches.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).uniform(0, 5, (1000, 2))
    >>> ns, terms, rho = estimate(x, x, np.array([1.0, 1.0]), 1e-10, 1e6)
    >>> 100 < terms < 600 and rho in RHO
    True
    """
    m, n, d = queries.shape[0], keys.shape[0], keys.shape[1]
    if pairs is None:
        from .truncated import pairs as count

        pairs = count(queries, keys, bandwidth)
    q = np.asarray(queries, dtype=np.float64) / np.asarray(bandwidth, dtype=np.float64)
    span = q.max(axis=0) - q.min(axis=0) if m else np.zeros(d)
    per_box = min(float(n), pairs / max(m, 1))
    best = (math.inf, 0, RHO[0])
    for rho in RHO:
        big_a = rho * math.sqrt(d)
        boxes = min(float(m), float(np.prod(np.floor(span / (2 * rho)) + 1)))
        log_ratio = math.log(max(n, 1) / _third(tol)) + 0.5 * big_a * big_a
        p = _power(-log_ratio, big_a, big_a + math.sqrt(2.0 * log_ratio), MAX_POWER)
        terms = _n_terms(d, p)
        if p > MAX_POWER or terms > MAX_TERMS:
            continue
        cost = boxes * per_box * (2 * terms * NS["term"] + NS["visit"]) + m * terms * NS["query_term"]
        if cost + (n + m) * 60.0 < best[0]:
            best = (cost + (n + m) * 60.0, terms, rho)
    return best
