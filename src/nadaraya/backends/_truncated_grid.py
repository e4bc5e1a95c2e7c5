"""Exact Gaussian sums in 2 and 3 features over a grid of cells: only the keys that can change a float64 sum.

The rule is the one-feature truncated backend's (:mod:`nadaraya.backends.truncated`): with ``M``
a query's largest log weight and ``L = 60 ln 2 + ln n``, keys whose log weight is below
``M - L`` weigh less than ``2^-60`` of the largest term together and are skipped; what remains
is summed exactly, in the log domain.

**The grid.** In units of the bandwidth (per feature), the box holding the queries and the keys
is cut into cubic cells of side ``c = sqrt(2 L) / CELLS_PER_RADIUS`` (wider where the keys are
sparse, or where the grid would need more than :data:`CELLS_PER_KEY` cells per key), and the keys
are sorted by cell (a counting sort), ``x`` fastest: a run of cells along ``x`` is one contiguous
slice of the sorted keys.

**Per query.** A lower bound ``b <= M`` is the largest log weight among the first keys of the
query's own cell, or else of the smallest cube of cells around it that holds a key (the
left-out key of leave-one-out never counts). Every key with ``l >= b - L`` lies within

    ``R^2 = 2 (log s_max - b + L)``

bandwidths of the query (``s_max`` the largest sample weight; ``R^2 = u_b^2 + 2 L`` without
sample weights, ``u_b`` the distance to the key that gave ``b``). The query visits the rows of
cells that meet that ball, each row's ``x`` range cut to the ball: one slice per row. The
sums are taken relative to ``b``; the shift is then ``b + e ln 2`` with ``2^(e-1) <= weight <
2^e``, an upper bound of ``M`` (the weight, at least ``exp(M - b)``, is scaled by the exact power
``2^-e``).

**Moments** (local polynomial fits of degree ``r`` = 1 or 2). Each chunk of a slice has its
weights computed as above (the left-out key's set to 0: masked, never subtracted) and passes
them to the fused backend's generated sums of a key block
(:func:`nadaraya.backends._fused_moments.block_moments`: ``sum w u_a1 ... u_at`` for ``t <= 2 r``
and ``sum w u_a1 ... u_at v`` for ``t <= r``, ``u = k - q`` exact in the data's units, the unique
entries only), under the same ``b``. A skipped key's term ``w |u|^j`` carries ``|u|^j`` too, so
the radius grows until ``R^2 / 2 - j ln R >= log s_max - b + L`` with ``j = 2 r``
(:func:`_radius2`): every skipped moment term is then below ``2^-60 / n`` of ``w_max h^j``
(``w_max`` the query's largest weight, ``h^j`` the product of the bandwidths along the term's
features), as in one feature (:mod:`nadaraya.backends.truncated`). That bound is relative to
``w_max h^j``, not to the moment sum itself: a moment whose kept terms cancel, or whose keys all
sit much nearer than a bandwidth, can be far smaller, and then carries that absolute error.

**Far queries.** A query with no key within :data:`FAR` bandwidths' worth of cells, or whose
``b`` is far from ``M``, is computed by the exact fused backend instead (every key, in the log
domain), so that the far-query rules of every backend hold unchanged.

Cost: O(n + m) to sort by cell, then per query the keys of the cells that meet its ball: about
``(1 + 1.6 / CELLS_PER_RADIUS)^d`` times the keys within ``R`` bandwidths. The moments of degree 1
and 2 take about 1.3-1.65x and 1.7-3.5x the time of degree 0 (their wider radius included;
one thread, 2-D and 3-D).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support.jit import exp_flushed, run_ranges, threads_for
from nadaraya.backends import _fused_moments
from nadaraya.backends._fused_moments import block_moments, generated_key, scratch
from nadaraya.backends._sorted import counting_order, sorted_exclude
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

__all__ = ["CELLS_PER_KEY", "CELLS_PER_RADIUS", "FAR", "KEYS_PER_CELL", "MAX_D", "ball_slices", "key_cells",
           "pairs", "partials", "sums"]

#: the most features the grid serves
MAX_D = 3
#: cells across the radius ``sqrt(2 L)`` of a query next to a key
CELLS_PER_RADIUS = 4.0
#: the keys a cell holds on average, at least (sparse keys get wider cells)
KEYS_PER_CELL = 16.0
#: the grid holds at most this many cells per key (plus 4096); wider cells beyond
CELLS_PER_KEY = 8
#: a query whose bound comes from keys this many bandwidths away, or farther, is summed by the
#: fused backend (its shift would be far from its largest log weight)
FAR = 24.0
#: keys read for the bound ``b`` in the query's own cell
_FIRST = 32
_CHUNK = 256


def _cell_side(span: NDArray[np.float64], n: int, big_l: float) -> tuple[float, NDArray[np.int64]]:
    """The cells' side (in bandwidths) and the grid's shape for a box ``span`` bandwidths wide:
    :data:`CELLS_PER_RADIUS` across a query's radius, or wider where the keys are sparse (about
    :data:`KEYS_PER_CELL` keys in a cell on average: a row of nearly empty cells costs its
    bookkeeping and sums nothing)."""
    volume = float(np.prod(np.maximum(span, 1e-300)))
    sparse = (KEYS_PER_CELL * volume / max(n, 1)) ** (1.0 / span.size)
    side = max(math.sqrt(2.0 * big_l) / CELLS_PER_RADIUS, sparse)
    limit = CELLS_PER_KEY * n + 4096
    while True:
        shape = np.floor(span / side).astype(np.int64) + 1
        if float(np.prod(shape.astype(np.float64))) <= limit:
            return side, shape
        side *= 1.25


def key_cells(
    zk: NDArray[np.float64], span: NDArray[np.float64], big_l: float
) -> tuple[float, NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """The grid for keys ``zk`` (bandwidth units from the grid's corner) in a box ``span`` wide:
    the cells' side and shape (``_cell_side``), the keys' order by cell (a counting sort)
    and where each cell's keys start in that order (``starts[c]:starts[c + 1]``)."""
    side, shape = _cell_side(span, zk.shape[0], big_l)
    ncell = int(np.prod(shape))
    kid = _cell_ids(zk, side, shape)
    starts = np.zeros(ncell + 1, dtype=np.int64)
    np.cumsum(np.bincount(kid, minlength=ncell), out=starts[1:])
    return side, shape, counting_order(kid, ncell), starts


@numba.njit(cache=True, nogil=True)
def _cell_ids(z, side, shape):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The linear cell of every row of ``z`` (bandwidth units from the grid's corner), ``x`` fastest."""
    n, d = z.shape
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        cell = 0
        for j in range(d - 1, -1, -1):
            c = int(z[i, j] / side)
            c = min(max(c, 0), shape[j] - 1)
            cell = cell * shape[j] + c
        out[i] = cell
    return out


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _slice(qv, kt, ls, vt, inv_h, s0, s1, skip, base, buf, acc):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Add the keys ``s0:s1`` (all but ``skip``) to ``acc`` (weight, then values), relative to
    ``base``: one pass for the weights and the first value column (1-D views of each feature's
    keys, so that the loads vectorise), one more per further column over the stored weights."""
    d = kt.shape[0]
    p = vt.shape[0]
    q0, q1, q2 = qv[0], qv[1], qv[d - 1]
    h0, h1, h2 = inv_h[0], inv_h[1], inv_h[d - 1]
    for c0 in range(s0, s1, _CHUNK):
        c1 = min(s1, c0 + _CHUNK)
        nb = c1 - c0
        k0 = kt[0, c0:c1]
        k1 = kt[1, c0:c1]
        k2 = kt[d - 1, c0:c1]
        lv = ls[c0:c1]
        v0 = vt[0, c0:c1] if p else lv
        w = 0.0
        a0 = 0.0
        if d == 2:
            for t in range(nb):
                u0 = (q0 - k0[t]) * h0
                u1 = (q1 - k1[t]) * h1
                e = exp_flushed((lv[t] - 0.5 * (u0 * u0 + u1 * u1)) - base)
                buf[t] = e
                w += e
                a0 += e * v0[t]
        else:
            for t in range(nb):
                u0 = (q0 - k0[t]) * h0
                u1 = (q1 - k1[t]) * h1
                u2 = (q2 - k2[t]) * h2
                e = exp_flushed((lv[t] - 0.5 * (u0 * u0 + u1 * u1 + u2 * u2)) - base)
                buf[t] = e
                w += e
                a0 += e * v0[t]
        if c0 <= skip < c1:  # the left-out key: the chunk summed again without it (no cancellation)
            buf[skip - c0] = 0.0
            w = 0.0
            a0 = 0.0
            for t in range(nb):
                w += buf[t]
                a0 += buf[t] * v0[t]
        acc[0] += w
        if p:
            acc[1] += a0
        for j in range(1, p):
            vj = vt[j, c0:c1]
            sj = 0.0
            for t in range(nb):
                sj += buf[t] * vj[t]
            acc[1 + j] += sj


@numba.njit(cache=True, nogil=True)
def _bound(qv, z, kt, ls, inv_h, starts, shape, side, skip, rings, cell, lo, hi):  # type: ignore[no-untyped-def]  # pragma: no cover
    """A lower bound of the query's largest log weight: the best of the first keys of its own cell,
    else of the smallest cube of cells around it holding a key; ``-inf`` when none within ``rings``."""
    d = kt.shape[0]
    for j in range(d):
        cell[j] = min(max(int(z[j] / side), 0), shape[j] - 1)
    best = -np.inf
    for r in range(rings + 1):
        lo[:] = 0
        hi[:] = 0
        for j in range(3):
            if j < d:
                lo[j] = max(cell[j] - r, 0)
                hi[j] = min(cell[j] + r, shape[j] - 1)
        read = 0
        for c2 in range(lo[2], hi[2] + 1):
            for c1 in range(lo[1], hi[1] + 1):
                row = (c2 * shape[1] + c1) * shape[0] if d == 3 else c1 * shape[0]
                for t in range(starts[row + lo[0]], starts[row + hi[0] + 1]):
                    if t == skip:
                        continue
                    s = 0.0
                    for j in range(d):
                        u = (qv[j] - kt[j, t]) * inv_h[j]
                        s += u * u
                    lw = ls[t] - 0.5 * s
                    if lw > best:
                        best = lw
                    read += 1
                    if r == 0 and read >= _FIRST:
                        return best
        if best > -np.inf:
            return best
    return best


@numba.njit(cache=True, nogil=True, inline="always")
def _cell_range(z, radius, side, count):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The cells (along one feature, ``count`` of them) that meet ``[z - radius, z + radius]``."""
    return max(math.floor((z - radius) / side), 0), min(math.floor((z + radius) / side), count - 1)


@numba.njit(cache=True, nogil=True, inline="always")
def _gap(c, side, z):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The distance from ``z`` to cell ``c`` along one feature (0 inside it)."""
    return max(c * side - z, z - (c + 1) * side, 0.0)


@numba.njit(cache=True, nogil=True, inline="always")
def ball_slices(z, radius, side, shape, starts, d, slices):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The slices of the sorted keys (``slices[:k]``, start and stop) for the rows of cells that
    meet the ball of ``radius`` about ``z`` (grid units, ``x`` fastest), each row cut to the
    ball's ``x`` range; returns ``k``. ``slices`` holds a row per row of cells at least."""
    r2 = radius * radius
    k = 0
    z2lo, z2hi = _cell_range(z[2], radius, side, shape[2]) if d == 3 else (0, 0)
    for c2 in range(z2lo, z2hi + 1):
        g2 = _gap(c2, side, z[2]) if d == 3 else 0.0
        rem2 = r2 - g2 * g2
        if rem2 < 0.0:
            continue
        c1lo, c1hi = _cell_range(z[1], math.sqrt(rem2), side, shape[1])
        for c1 in range(c1lo, c1hi + 1):
            g1 = _gap(c1, side, z[1])
            rem1 = rem2 - g1 * g1
            if rem1 < 0.0:
                continue
            c0lo, c0hi = _cell_range(z[0], math.sqrt(rem1), side, shape[0])
            row = (c2 * shape[1] + c1) * shape[0]
            slices[k, 0] = starts[row + c0lo]
            slices[k, 1] = starts[row + c0hi + 1]
            k += 1
    return k


@numba.njit(cache=True, nogil=True)
def _radius2(slack, jp):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The squared radius ``x = R^2`` (bandwidths) beyond which no key's moment term
    ``w |u|^jp`` reaches ``exp(-slack)`` of the bound: ``x / 2 - (jp / 2) ln x >= slack``;
    ``2 slack`` without moments (``jp = 0``)."""
    x = 2.0 * slack
    if jp == 0:
        return x
    for _ in range(4):  # the fixed point x = 2 slack + jp ln x, approached from below
        x = 2.0 * slack + jp * math.log(x)
    x *= 1.0 + 1e-9
    while 0.5 * x - 0.5 * jp * math.log(x) < slack:
        x *= 1.001
    return x


def _compile(degree: int, md: int):  # type: ignore[no-untyped-def]
    """The loop over queries, with the moment sums of a local polynomial of ``degree`` (``md``:
    :func:`nadaraya.backends._fused_moments.generated_key`; both frozen closure constants, so that
    degree 0 compiles without them)."""

    @numba.njit(cache=True, nogil=True)
    def task(qt, zq, kt, ls, vt, inv_h, starts, shape, side, slack, ls_max, ex, rings, walk,  # type: ignore[no-untyped-def]
             a, b, out, top, far):  # pragma: no cover - compiled
        """Queries ``a:b``: their sums over the cells that meet their balls (``slack = log s_max + L``)
        into ``out`` (weight, values, then the flat moment sums); ``far`` marks those left to the
        caller (no key near, or the bound too far below the largest weight)."""
        d = kt.shape[0]
        p = vt.shape[0]
        buf = np.empty(_CHUNK)
        acc = np.empty(1 + p)
        qv = np.empty(d)
        z = np.empty(3)
        cell = np.zeros(3, dtype=np.int64)  # _bound's scratch, allocated once per range of queries
        lo = np.zeros(3, dtype=np.int64)
        hi = np.zeros(3, dtype=np.int64)
        slices = np.empty((shape[1] * (shape[2] if d == 3 else 1), 2), dtype=np.int64)
        width = out.shape[1] - 1 - p
        if degree > 0:  # the moment sums' scratch, one chunk's flat sums and the query's
            us, ps, msum = scratch(d, degree, width, _CHUNK)
            mom = np.empty(width)
            q1 = np.empty((1, d))
        for i in range(a, b):
            for j in range(d):
                qv[j] = qt[j, i]
            z[:] = 0.0
            for j in range(d):
                z[j] = zq[i, j]
            best = _bound(qv, z, kt, ls, inv_h, starts, shape, side, ex[i], rings, cell, lo, hi)
            if not best > -np.inf or ls_max - best > 0.5 * FAR * FAR:
                far[i] = True
                continue
            radius = math.sqrt(_radius2(slack - best, 2 * degree))
            acc[:] = 0.0
            if degree > 0:
                mom[:] = 0.0
                for j in range(d):
                    q1[0, j] = qv[j]
            for k in range(ball_slices(z, radius, side, shape, starts, d, slices)):
                if degree == 0:
                    _slice(qv, kt, ls, vt, inv_h, slices[k, 0], slices[k, 1], ex[i], best, buf, acc)
                else:  # chunk by chunk: the chunk's weights (own key masked) feed its moment sums
                    for c0 in range(slices[k, 0], slices[k, 1], _CHUNK):
                        c1 = min(slices[k, 1], c0 + _CHUNK)
                        _slice(qv, kt, ls, vt, inv_h, c0, c1, ex[i], best, buf, acc)
                        block_moments(md, buf, kt, vt, q1, 0, c0, c1 - c0, us, ps, walk, msum)
                        for t in range(width):
                            mom[t] += msum[t]
            w = acc[0]
            e = math.frexp(w)[1] if w > 1.0 else 0  # 2^(e-1) <= w < 2^e: w * 2^-e is exact
            scale = 2.0 ** (-e)
            top[i] = best + e * math.log(2.0)
            out[i, 0] = w * scale
            for j in range(p):
                out[i, 1 + j] = acc[1 + j] * scale
            if degree > 0:
                for t in range(width):
                    out[i, 1 + p + t] = mom[t] * scale

    return task


_LOOPS: dict[tuple[int, int], Any] = {}


def _loop(degree: int, d: int) -> Any:
    """The compiled loop over queries for ``degree`` in ``d`` features (compiled once)."""
    key = (degree, generated_key(degree, d) if degree else 0)
    if key not in _LOOPS:
        _LOOPS[key] = _compile(*key)
    return _LOOPS[key]


def sums(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None,
    exclude: NDArray[np.integer] | None,
    big_l: float,
    moments: int = 0,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Every query's shift, its sums (weight, then the value columns, then the flat moment sums of
    a local polynomial of degree ``moments``, :func:`nadaraya.backends._fused_moments.layout`) in
    float64, and whether it is far (left to the caller: shift ``-inf``, sums 0), for 2 or 3 features.

    ``big_l``: the log ratio ``L`` below which keys are skipped (see the module's text).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0], [1.0, 0.0], [50.0, 50.0]]); v = np.array([[1.0], [3.0], [9.0]])
    >>> top, out, far = sums(np.array([[0.5, 0.0], [1e6, 0.0]]), x, v, np.ones(2), None, None, 40.0)
    >>> float(out[0, 1] / out[0, 0]), bool(far[0]), bool(far[1])  # the key at (50, 50) is skipped
    (2.0, False, True)
    """
    f64 = np.float64
    m, n, p, d = queries.shape[0], keys.shape[0], values.shape[1], queries.shape[1]
    inv_h = 1.0 / np.asarray(bandwidth, dtype=f64)
    kept = np.arange(n) if sample_weight is None else np.flatnonzero(np.asarray(sample_weight) > 0)
    cols = 1 + p + (_fused_moments.width(moments, d, p) if moments else 0)
    out = np.zeros((m, cols))
    top = np.full(m, -np.inf)
    far = np.ones(m, dtype=np.bool_)
    if kept.size == 0 or m == 0:
        return top, out, far
    k = np.asarray(keys, dtype=f64)[kept]
    q = np.asarray(queries, dtype=f64)
    corner = np.minimum(k.min(axis=0), q.min(axis=0))
    span = (np.maximum(k.max(axis=0), q.max(axis=0)) - corner) * inv_h
    side, shape, order, starts = key_cells((k - corner) * inv_h, span, big_l)
    ncell = int(np.prod(shape))
    zq = (q - corner) * inv_h
    qorder = counting_order(_cell_ids(zq, side, shape), ncell)
    ls = (np.zeros(kept.size) if sample_weight is None
          else np.log(np.asarray(sample_weight, dtype=f64)[kept][order]))
    ex = sorted_exclude(exclude, n, kept[order], m)[qorder]
    ls_max = float(ls.max())
    vt = np.ascontiguousarray(np.asarray(values, dtype=f64)[kept[order]].T)
    qt, kt = np.ascontiguousarray(q[qorder].T), np.ascontiguousarray(k[order].T)
    args = (qt, np.ascontiguousarray(zq[qorder]), kt, ls, vt, inv_h, starts, shape, side, ls_max + big_l,
            ls_max, ex, math.ceil(FAR / side) + 1, _fused_moments.table(moments, d, p))
    s_out, s_top, s_far = np.zeros((m, cols)), np.full(m, -np.inf), np.zeros(m, dtype=np.bool_)
    run_ranges(_loop(moments, d), args, m, (s_out, s_top, s_far))
    out[qorder], top[qorder], far[qorder] = s_out, s_top, s_far
    top[far] = -np.inf
    out[far] = 0.0
    return top, out, far


def pairs(queries: NDArray[np.floating], keys: NDArray[np.floating], bandwidth: NDArray[np.floating],
          big_l: float) -> float:
    """An estimate of the (query, key) pairs :func:`sums` visits: the keys within ``sqrt(2 L)``
    bandwidths of 512 sampled queries, counted in a sample of at most 4096 keys and scaled up,
    times the grid's overhead ``(1 + 1.6 / CELLS_PER_RADIUS)^d``; at least one key per query.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).uniform(size=(4000, 2))
    >>> 0 < pairs(x, x, np.array([0.01, 0.01]), 40.0) < 4000 * 4000 / 10
    True
    """
    q = np.asarray(queries, dtype=np.float64)
    k = np.asarray(keys, dtype=np.float64)
    m, n, d = q.shape[0], k.shape[0], q.shape[1]
    if m == 0 or n == 0:
        return 0.0
    rng = np.random.default_rng(0)
    inv_h = 1.0 / np.asarray(bandwidth, dtype=np.float64)
    qs = (q if m <= 512 else q[rng.integers(0, m, 512)]) * inv_h
    ks = (k if n <= 4096 else k[rng.integers(0, n, 4096)]) * inv_h
    from scipy.spatial import cKDTree

    # a k-d tree counts the sampled keys within the radius (all pairs in NumPy cost 0.1 s at n = 2e3)
    near = np.asarray(cKDTree(ks).query_ball_point(qs, math.sqrt(2.0 * big_l), return_length=True),
                      dtype=float)
    per = np.maximum(near * (n / ks.shape[0]) * (1.0 + 1.6 / CELLS_PER_RADIUS) ** d, 1.0)
    return float(min(m * float(per.mean()), float(m) * n))


def partials(queries: NDArray[np.floating], keys: NDArray[np.floating], values: NDArray[np.floating],
             kernel: Kernel, bandwidth: NDArray[np.floating], sample_weight: NDArray[np.floating] | None,
             exclude: NDArray[np.integer] | None, moments: int = 0) -> Partials:
    """The grid's partials in 2 or 3 features (what :func:`nadaraya.backends.truncated.partials`
    returns there), with the moments of a local polynomial of degree ``moments`` (up to 2); its
    far queries from the exact fused backend."""
    from nadaraya.backends._rows import assemble

    r = int(moments)
    m, p, d = queries.shape[0], values.shape[1], queries.shape[1]
    if r and p == 0:  # the moment loops carry the first value column along: give it one, and drop it
        part = partials(queries, keys, np.zeros((keys.shape[0], 1), dtype=values.dtype), kernel, bandwidth,
                        sample_weight, exclude, r)
        return Partials(part.shift, part.weight, part.value[:, :0],
                        part.moments[:2 * r] + tuple(x[..., :0] for x in part.moments[2 * r:]))
    n_kept = keys.shape[0] if sample_weight is None else int(np.count_nonzero(np.asarray(sample_weight) > 0))
    columns = 1 + p + (_fused_moments.width(r, d, p) if r else 0)
    work = float(pairs(queries, keys, bandwidth, log_ratio(n_kept))) * columns * 8
    with threads_for(work):
        shift, flat, far = sums(queries, keys, values, bandwidth, sample_weight, exclude, log_ratio(n_kept),
                                r)
    out = flat if not r else _full_rows(flat, r, d, p)
    if far.any():
        from nadaraya.backends import fused

        rows = np.flatnonzero(far)
        f64 = np.float64
        sw = None if sample_weight is None else np.asarray(sample_weight, dtype=f64)
        ex = None if exclude is None else np.asarray(exclude)[rows]
        part = fused.partials(np.asarray(queries, dtype=f64)[rows], np.asarray(keys, dtype=f64),
                              np.asarray(values, dtype=f64), kernel=kernel,
                              bandwidth=np.asarray(bandwidth, dtype=f64), sample_weight=sw, exclude=ex,
                              moments=r)
        out[rows] = np.concatenate([part.weight[:, None], part.value,
                                    *(x.reshape(rows.size, -1) for x in part.moments)], axis=1)
        shift[rows] = part.shift
    return assemble(shift, out, queries.dtype, m, p, r, d)



def _full_rows(flat: NDArray[np.float64], r: int, d: int, p: int) -> NDArray[np.float64]:
    """The rows ``flat`` (weight, values, the unique moment sums of :func:`_fused_moments.layout`)
    with the moments' full tensors, flattened in the order of ``reference.moment_shapes`` (as
    ``_rows.assemble`` takes them), gathered straight into one array (no copy per tensor)."""
    gathers = [g.ravel() for g in _fused_moments._gathers(r, d, p)]
    out = np.empty((flat.shape[0], 1 + p + sum(g.size for g in gathers)))
    out[:, :1 + p] = flat[:, :1 + p]
    at = 1 + p
    for g in gathers:
        np.take(flat, g + 1 + p, axis=1, out=out[:, at:at + g.size], mode="clip")
        at += g.size
    return out

#: skipped keys weigh less than ``2^-BITS`` of a query's largest term, all together
BITS = 60


def log_ratio(n: int) -> float:
    """``L = BITS ln 2 + ln n``: keys whose log weight is below the largest minus ``L`` are skipped.

    Examples
    --------
    >>> round(log_ratio(10**6), 2)
    55.4
    """
    return BITS * math.log(2.0) + math.log(max(int(n), 1))


