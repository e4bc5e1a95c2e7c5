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

**Moments** (``moments = r``, the sums of a local polynomial fit): each key also carries the
columns ``u^beta`` (every multi-index up to ``2 r``) and ``u^beta v`` (up to ``r``), ``u`` from the
box's centre, summed by the same series; :mod:`nadaraya.backends._moment_shift` moves them to
each query binomially and lays them out as tensors. With ``j = 2 r``, ``p`` is the fewest terms
with ``S max_{r <= R} g_p(r) max(1, r)^j <= eps3 W_0`` (``|u^beta| <= max(1, r)^j``), the drop
radius grows until ``exp(-(R - A)^2 / 2) (R + A)^j <= eps3 W_0 / S`` (a dropped key's
``|x - q|^gamma``, in bandwidths, is at most ``(r + A)^j``), and the rounding check weighs each
key's share by ``max(1, r)^j``. So each moment sum ``sum_i s_i w_i (x_i - q)^gamma g_i`` (``g`` = 1
or a value column, ``|gamma| = k``) is within ``tol (1 + rho)^k h^gamma max|g| W`` of the exact
one (the move to the query multiplies the centre's bound by ``prod_k (1 + |a_k|)^gamma_k``,
``|a_k| <= rho``). A local fit's prediction then moves by that error times its local system's
conditioning: the bound is on the sums, as in 1-D. A query left to the exact sums takes the
fused loop's moments.

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

from nadaraya._support.jit import run_ranges
from nadaraya.backends._fallback import exact_rows
from nadaraya.backends._moment_shift import about_queries, tree
from nadaraya.backends._rows import assemble
from nadaraya.backends._sorted import counting_order, sorted_exclude
from nadaraya.backends._truncated_grid import ball_slices, key_cells
from nadaraya.backends.reference import moment_shapes
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

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
    alphas, parent, dim = tree(d, max(p - 1, 0))
    inv = [1.0] + [1.0 / a[k] for a, k in zip(alphas[1:], dim[1:], strict=True)]
    count = [0] + [sum(1 for a in alphas if sum(a) < g) for g in range(1, p + 1)]
    return (np.array(parent, dtype=np.int64), np.array(dim, dtype=np.int64), np.array(inv),
            np.array(count, dtype=np.int64))


def _third(tol: float) -> float:
    """``eps3``: a third of the error each sum may carry, ``eps = tol / 2.1`` (module text)."""
    return tol / 2.1 / 3.0


def _n_terms(d: int, p: int) -> int:
    return math.comb(p - 1 + d, d) if p > 0 else 0


@numba.njit(cache=True, nogil=True)
def _log_g(p, jp, big_a, radius):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``log max_{r <= radius} g_p(r) r^jp`` (module text): the maximum of this unimodal function
    is at ``r = (A + sqrt(A^2 + 4 (p + jp))) / 2`` or at ``radius``."""
    r = min(0.5 * (big_a + math.sqrt(big_a * big_a + 4.0 * (p + jp))), radius)
    over = max(r - big_a, 0.0)
    return (-0.5 * over * over + p * math.log(max(big_a * r, 1e-300)) - math.lgamma(p + 1.0)
            + jp * math.log(max(r, 1e-300)))


@numba.njit(cache=True, nogil=True)
def _power(log_target, big_a, radius, max_power, jp=0):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The fewest terms ``p`` with ``log max_{r <= radius} g_p(r) max(1, r)^jp <= log_target``
    (module text; ``jp``: the moments' highest power); ``max_power + 1``: none."""
    for p in range(1, max_power + 1):
        log_g = _log_g(p, 0, big_a, radius)
        if jp:  # max(1, r)^jp: r^jp where r >= 1, 1 below
            log_g = max(log_g, _log_g(p, jp, big_a, radius))
        if log_g <= log_target:
            return p
    return max_power + 1


@numba.njit(cache=True, nogil=True)
def _drop_radius(log_ratio, big_a, jp):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The drop radius ``R``: a key beyond it weighs at most ``exp(-(r - A)^2 / 2) (r + A)^jp``,
    decreasing in ``r`` there, and at most ``exp(-log_ratio)`` (module text)."""
    rad = big_a + math.sqrt(2.0 * log_ratio)
    for _ in range(60 if jp else 0):  # R = A + sqrt(2 (log_ratio + jp log(R + A))): rises to its fixed point
        grown = max(big_a + math.sqrt(2.0 * (log_ratio + jp * math.log(rad + big_a))),
                    math.sqrt(big_a * big_a + jp))
        if grown <= rad * (1.0 + 1e-12):
            break
        rad = grown
    return rad * (1.0 + 1e-9) if jp else rad


@numba.njit(cache=True, nogil=True)
def _plan(kt, ls, starts, shape, side, centres, big_a, log_s, log_eps3, nq, max_power, max_terms, counts,
          ns, loo, jp, cols, exact_keys, a, b, radius, terms):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Boxes ``a:b``: the drop radius and the terms of each (0: its queries are summed exactly);
    ``jp``: the moments' highest power, ``cols``: the columns summed, ``exact_keys``: the keys
    each query's exact sums visit (0: those in the cells that meet its box's ball)."""
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
        rad = _drop_radius(log_ratio, big_a, jp)
        p = _power(-log_ratio, big_a, rad, max_power, jp)
        if p > max_power or counts[min(p, max_power)] > max_terms:
            continue
        t = counts[p]
        keys = 0  # the keys in the cells that meet the ball: the cost model's count
        for k in range(ball_slices(z, rad, side, shape, starts, d, slices)):
            keys += slices[k, 1] - slices[k, 0]
        series = keys * (t * ns[0] * cols / 2 + ns[1]) + nq[bi] * t * ns[2] * cols / 2
        if series < nq[bi] * (exact_keys if exact_keys > 0 else keys) * ns[3] * cols / 2:
            radius[bi] = rad
            terms[bi] = p


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _boxes(kt, ss, vt, starts, shape, side, centres, radius, terms, counts, parent, dim, inv, big_a, eps3,
           qt, qstart, ex, cb, cv, jp, a, b, out, half_a2, ok):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Boxes ``a:b``: the series sums over their keys, then their queries' polynomials (queries
    sorted by box, ``qstart``), less the series' share of each query's left-out key ``ex``
    (its place among the sorted keys, -1: none); ``ok`` false where the query is left to the
    exact sums (its box, or its own rounding check). With moments, column ``c`` sums ``u^beta``
    (monomial ``cb[c]``) times value ``cv[c]`` (-1: none, -2: a dummy column of zeros); ``jp``:
    the highest power of the moments. ``cb`` None: plain pooling, the weight and the values
    (numba compiles that variant on its own, without the moments' indirections)."""
    d = kt.shape[0]
    nout = out.shape[1]
    if cb is None:
        ncol = 2 * ((1 + nout) // 2)  # the columns are summed in pairs: a last dummy of zeros
        nmono = 1
        n_w = 1
    else:
        ncol = 2 * (cb.size // 2)
        nmono = cb.max() + 1
        n_w = 0  # the weight's columns come first (cv = -1)
        while n_w < ncol and cv[n_w] == -1:
            n_w += 1
    tmax = counts[counts.size - 1]
    acc = np.zeros((tmax, ncol))
    mono = np.empty((tmax, _CHUNK))
    cm = np.empty((nmono, _CHUNK))
    e = np.zeros((ncol, _CHUNK))
    u = np.empty((3, _CHUNK))
    z = np.zeros(3)
    ma = np.empty(tmax)
    mu = np.empty(tmax)
    mk = np.empty(nmono)
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
                        amp += w * grow * (max(r, 1.0) ** jp if jp else 1.0)
                        low += w / grow
                    if cb is None:
                        e[0, kk] = w
                        for c in range(1, nout):
                            e[c, kk] = w * vt[c - 1, k0 + kk]
                    else:
                        cm[0, kk] = 1.0
                        for t in range(1, nmono):
                            cm[t, kk] = cm[parent[t], kk] * u[dim[t], kk]
                        for c in range(n_w):  # the weight's columns, then the values' (the dummy stays 0)
                            e[c, kk] = w * cm[c, kk]
                        for c in range(n_w, nout):
                            e[c, kk] = w * cm[cb[c], kk] * vt[cv[c], k0 + kk]
                for kk in range(cnt):
                    mono[0, kk] = 1.0
                for c in range(ncol):
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
                    for c in range(2, ncol, 2):
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
            for c in range(nout):
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
            if cb is None:
                out[qi, 0] -= own
                for c in range(1, nout):
                    out[qi, c] -= own * vt[c - 1, k]
            else:
                mk[0] = 1.0
                for t in range(1, nmono):
                    mk[t] = mk[parent[t]] * uv[dim[t]]
                for c in range(nout):
                    g = cv[c]
                    out[qi, c] -= own * mk[cb[c]] * (vt[g, k] if g >= 0 else 1.0)
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
                shape=shape, side=side, zq=zq, qorder=qorder, qstart=qstart, centres=centres, qbox=qbox,
                big_a=rho * math.sqrt(d), log_s=log_s, eps3=eps3, scale_exp=scale_exp)


#: the work of planning one box (its drop radius and terms), in the units of
#: :data:`nadaraya._support.jit.SERIAL_WORK` (each pass below that runs on the calling thread)
_PLAN_WORK = 400.0


def _planned(g, d, loo=False, jp=0, cols=2, exact_keys=0.0):  # type: ignore[no-untyped-def]
    """Each box's drop radius and terms (0: exact); ``loo``: queries leave a key out; ``jp``,
    ``cols``, ``exact_keys``: the moments' highest power, the columns and the keys an exact query
    visits (0: those near it), as in :func:`_plan`."""
    nbox = g["centres"].shape[0]
    radius, terms = np.zeros(nbox), np.zeros(nbox, dtype=np.int64)
    counts = multi_indices(d, MAX_POWER)[3]
    ns = np.array([NS["term"], NS["visit"], NS["query_term"], NS["pair"]])
    args = (g["kt"], np.log(g["ss"]), g["starts"], g["shape"], g["side"], g["centres"], g["big_a"],
            g["log_s"], math.log(g["eps3"]), np.diff(g["qstart"]), MAX_POWER, MAX_TERMS, counts, ns, loo, jp,
            float(cols), float(exact_keys))
    run_ranges(_plan, args, nbox, (radius, terms), work=_PLAN_WORK * nbox)
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
             tol: float, exclude: NDArray[np.integer] | None = None, rho: float | None = None,
             moments: int = 0) -> Partials:
    """The series' partials in 2 or 3 features, with the moments of a local polynomial of degree
    ``moments`` (the caller checks it), each query's left-out key ``exclude`` (-1: none)
    subtracted, boxes of half-width ``rho`` (or the one :func:`estimate` picks); the queries of
    boxes left to the exact sums, and those whose own key's share could not be certified, from
    the exact grid (with moments: the exact fused loop)."""
    m, d, p = queries.shape[0], keys.shape[1], values.shape[1]
    r, jp = moments, 2 * moments
    n_w, n_v = (int(c) for c in multi_indices(d, jp + 1)[3][[jp + 1, r + 1]])
    cb = list(range(n_w)) + [b for b in range(n_v) for _ in range(p)]
    cv = [-1] * n_w + [c for _ in range(n_v) for c in range(p)]
    nout = len(cb)
    if nout % 2:  # the columns are summed in pairs: a dummy column of zeros
        cb, cv = [*cb, 0], [*cv, -2]
    out = np.zeros((m, nout))
    shift = np.zeros(m)
    good = np.zeros(m, dtype=np.bool_)
    if m and (sample_weight is None or np.any(np.asarray(sample_weight) > 0)):
        rho = estimate(queries, keys, bandwidth, tol, moments=r, p=p)[2] if rho is None else rho
        g = _setup(queries, keys, sample_weight, bandwidth, tol, rho)
        radius, terms = _planned(g, d, exclude is not None, jp, len(cb), keys.shape[0] if r else 0)
        parent, dim, inv, counts = multi_indices(d, max(jp + 1, int(terms.max())))
        vt = np.ascontiguousarray(np.asarray(values, dtype=np.float64)[g["live"][g["order"]]].T)
        qo = g["qorder"]
        qt = np.ascontiguousarray(g["zq"][qo].T)
        ex = sorted_exclude(exclude, keys.shape[0], g["live"][g["order"]], m)[qo]
        s_out, half_a2, ok = np.zeros((m, nout)), np.zeros(m), np.zeros(m, dtype=np.bool_)
        run_ranges(_boxes, (g["kt"], g["ss"], vt, g["starts"], g["shape"], g["side"], g["centres"], radius,
                            terms, counts, parent, dim, inv, g["big_a"], g["eps3"], qt, g["qstart"], ex,
                            np.array(cb, dtype=np.int64) if r else None,
                            np.array(cv, dtype=np.int64) if r else None, jp),
                   g["centres"].shape[0], (s_out, half_a2, ok), grain=1,
                   work=float(keys.shape[0] + m) * max(1, int(terms.max())) * nout)
        out[qo], good[qo] = s_out, ok
        shift[qo] = g["scale_exp"] * math.log(2.0) - half_a2
        if r:
            offset = g["zq"] - g["centres"][g["qbox"]]
            tensors = about_queries(out[:, :n_w], out[:, n_w:].reshape(m, n_v, p), offset,
                                    np.asarray(bandwidth, dtype=np.float64), r)
            flat = [x.reshape(m, -1) for x in tensors]
            out = np.concatenate([out[:, :1], out[:, n_w:n_w + p], *flat], axis=1)
    elif r:  # no key weighs: every query is exact (and empty)
        out = np.zeros((m, 1 + p + sum(math.prod(s) for s in moment_shapes(r, d, p))))
    if not good.all():
        exact_rows(np.flatnonzero(~good), queries, keys, values, kernel, bandwidth, sample_weight, exclude, r,
                   shift, out)
    return assemble(shift, out, values.dtype, m, p, r, d)


def estimate(queries: NDArray[np.floating], keys: NDArray[np.floating], bandwidth: NDArray[np.floating],
             tol: float, pairs: float | None = None, moments: int = 0, p: int = 1
             ) -> tuple[float, int, float]:
    """The modelled cost of the series (nanoseconds, :data:`NS`), its terms and the boxes'
    half-width for unit sample weights: the cheapest of :data:`RHO`, from the queries' extent and
    ``pairs``, the (query, key) pairs within the truncated sums' radius
    (:func:`nadaraya.backends.truncated.pairs`, estimated here if not given): about the keys a
    box reaches; with the moments of a local polynomial of degree ``moments`` and ``p`` value
    columns.

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
        from nadaraya.backends.truncated import pairs as count

        pairs = count(queries, keys, bandwidth)
    q = np.asarray(queries, dtype=np.float64) / np.asarray(bandwidth, dtype=np.float64)
    span = q.max(axis=0) - q.min(axis=0) if m else np.zeros(d)
    per_box = min(float(n), pairs / max(m, 1))
    jp = 2 * moments
    cols = math.comb(jp + d, d) + p * math.comb(moments + d, d)
    best = (math.inf, 0, RHO[0])
    for rho in RHO:
        big_a = rho * math.sqrt(d)
        boxes = min(float(m), float(np.prod(np.floor(span / (2 * rho)) + 1)))
        log_ratio = math.log(max(n, 1) / _third(tol)) + 0.5 * big_a * big_a
        power = _power(-log_ratio, big_a, _drop_radius(log_ratio, big_a, jp), MAX_POWER, jp)
        terms = _n_terms(d, power)
        if power > MAX_POWER or terms > MAX_TERMS:
            continue
        cost = (boxes * per_box * (cols * terms * NS["term"] + NS["visit"])
                + m * terms * NS["query_term"] * cols / 2)
        if cost + (n + m) * 60.0 < best[0]:
            best = (cost + (n + m) * 60.0, terms, rho)
    return best
