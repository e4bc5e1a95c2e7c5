"""The truncated backend: exact Gaussian sums in 1-3 features over only the keys that can change the sum.

The Gaussian weight of key ``i`` for query ``q`` is ``s_i exp(-u_i^2 / 2)`` with ``u_i = (q - k_i)
/ h`` and ``s_i`` its sample weight; in the log domain ``l_i = log s_i - u_i^2 / 2``. Let ``M`` be
the query's largest log weight. A key with ``l_i < M - L``, where

    ``L = 60 ln 2 + ln n``  (:func:`log_ratio`, :data:`BITS` = 60),

weighs less than ``2^-60 / n`` of the largest term, so all such keys together weigh less than
``2^-60`` of it: they cannot change a float64 sum (whose rounding is ``2^-53`` of it), and they are
skipped. That is still exact. In one feature the keys are sorted (below); in two and three
they are sorted by the cells of a grid, and each query sums the rows of cells that meet its
window's ball (``nadaraya.backends._truncated_grid``, with its own text; the moments of local fits
of degree 1 and 2 there too).

**The window.** Keys are sorted once (not when they already are; keys of zero weight are dropped
first, they add nothing). For each query the nearest keys on each side (two on each side, the
left-out key of leave-one-out never among them) give a lower bound ``b = l_best <= M`` of the
largest log weight and the distance ``u_near`` to the nearest key. A key at distance ``|u|``
has ``l <= log s_max - u^2 / 2``, so no key beyond the radius ``R`` with

    ``R^2 = 2 (log s_max - b + L) = u_best^2 + 2 (L + log(s_max / s_best))``

reaches ``b - L >= M - L``: the window is the sorted keys within ``R h`` of the query (two
galloping searches outward from its position). Without sample weights ``s_max = s_best = 1`` and
``u_best = u_near``. With sample weights ``s_max`` is first the largest of all; then the largest
inside that window (read from a table of maxima of blocks of 32 keys), which bounds every key
the window still holds, and the radius shrinks to it: one heavy key does not widen every window.
With the moments of local polynomial fits (``moments = r``) a skipped key's term
``w |k - q|^j`` (``j <= 2 r``) carries ``|u|^j`` too, and ``R`` grows until
``R^2 / 2 - j ln R >= log s_max - b + L``: every skipped moment term is then below
``2^-60 / n`` of ``w_max h^j`` (the slack is first rounded up to a multiple of 1/64, so that
neighbouring queries share one radius and its logarithms).

**The shift.** The partials' ``shift`` must be at or above the largest log weight. Without sample
weights the nearest key's log weight is that maximum, computed exactly as the reference computes
it (``u = (q - k) * (1 / h)``, ``-0.5 * u * u``), so the nearest term is exactly 1. With sample
weights ``log s_max - u_near^2 / 2`` bounds it; where that bound exceeds ``b`` by more than
``708 - L`` (terms under ``exp(-708)`` of the shift are flushed to zero by
:func:`nadaraya._support.jit.exp_flushed`) the window's exact maximum is taken instead, so a flushed term
is always below ``2^-60 / n`` of the largest.

**Far queries.** A query far from every key keeps its nearest keys' weights: the window holds the
keys whose log weights are within ``L`` of the nearest's, and the shift follows the nearest key
(``-u_near^2 / 2``, which may be ``-1e12``), exactly as the reference's running maximum does. Only
where ``u^2`` overflows to infinity for the nearest key is every log weight ``-inf``, as in the
reference; then the query gets empty partials (``shift = -inf``, weight 0), and pooling's far rule
takes over, as for every backend.

**Leave-one-out** (``exclude``): the left-out key never gives the bound ``b`` nor the shift, and
its window is summed in two parts around it (its term is never added and subtracted).

**Dense cells.** Where keys and queries are dense (with or without the moments of a local fit of
degree 1 or 2), pairs of cells ``1.5 h`` wide share one series of the cross term of the Gaussian,
cut where its remainder is under ``2^-60`` of each term: exact as well, with one exponential per
key and per query and pair of cells instead of one per pair of points
(``nadaraya.backends._truncated_cells``, with its own text; a cost model chooses per cell of
queries). At a million keys and queries on ``[0, 5]`` this makes every bandwidth take about 0.35 s
on two cores. With sample weights whose ``log(s_max / s_min)`` is at most ``CELLS_SPREAD``,
each key's factor carries ``s / s_max`` and the cells' ``L`` is ``log(s_max / s_min)`` wider
(their module text); their queries' shift is ``log s_max - u_near^2 / 2``, at or above every log
weight, and the windows keep the radius of ``s_max`` (not shrunk: reading the largest weight inside
cost more than the cells' sums). Wider spreads are split into bands of keys by weight, each
summed so, with the ``L`` of all the keys, and merged exactly; a query skips a band whose terms
are all below ``2^-60 / n`` of one it holds (``nadaraya.backends._truncated_bands``).

Complexity: O(n log n) to sort the keys (O(n) when sorted), O(m log n) to find the windows, and
O(sum of the window sizes) for the sums (times ``1 + p``, and ``2 r + r p`` more with moments), in
parallel over queries on :func:`nadaraya._support.jit.run_ranges`'s threads, in ranges of equal work.
Above :data:`SORT_QUERIES_ABOVE` keys the queries are visited in the order of a radix sort into
2^16 cells (O(m)), so that neighbouring queries read the same window from the cache, and each
search starts from the previous query's position. The sums cost about 1 ns per pair and thread
(a vectorised exponential per pair, as in the fused backend). With keys of a smooth density and no sample
weights a window holds about ``2 sqrt(2 L) h`` times the density of keys near the query:
``2 R`` = 21 bandwidths at n = 1e6. :func:`pairs` estimates the total from a sample.

Accuracy: float64 results equal the reference backend's to rounding (tests hold 1e-13 relative on
every query); float32 inputs are computed in float64 and rounded once at the end, the weight's
binary exponent moved into the shift first (as the fused backend does).

Examples
--------
>>> import numpy as np
>>> from nadaraya.kernels import get
>>> from nadaraya.backends import reference, truncated
>>> rng = np.random.default_rng(0)
>>> x = rng.uniform(size=(500, 1)); v = rng.normal(size=(500, 2))
>>> a = truncated.partials(x, x, v, kernel=get("gaussian"), bandwidth=np.array([0.01]))
>>> b = reference.partials(x, x, v, kernel=get("gaussian"), bandwidth=np.array([0.01]))
>>> bool(np.allclose(a.finalize(), b.finalize(), rtol=1e-13, atol=1e-14))
True
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numpy.typing import NDArray

from nadaraya._support import threads as _threads
from nadaraya._support.jit import run_ranges, threads_for
from nadaraya.backends import _truncated_bands as _bands
from nadaraya.backends import _truncated_cells as _cells
from nadaraya.backends import _truncated_grid as _grid
from nadaraya.backends._rows import assemble
from nadaraya.backends._sorted import scatter_rows, sorted_exclude, sorted_order
from nadaraya.backends._truncated_grid import BITS, log_ratio
from nadaraya.backends._truncated_sums import MAX_BLOCK as _MAX_BLOCK
from nadaraya.backends._truncated_sums import bound as _bound
from nadaraya.backends._truncated_sums import gallop as _gallop
from nadaraya.backends._truncated_sums import near_windows, nearest, range_max, window_max
from nadaraya.backends._truncated_sums import sums as _sums
from nadaraya.backends.laplace import SORT_QUERIES_ABOVE
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

__all__ = ["BITS", "MAX_DEGREE", "SORT_QUERIES_ABOVE", "cells_shares", "log_ratio", "pairs", "pairs_1d",
           "partials", "priced", "supports"]

#: the largest local polynomial degree (``moments=``) this backend computes
MAX_DEGREE = 2
#: terms at or below ``exp(-708)`` of the shift are flushed to zero
#: (:func:`nadaraya._support.jit.exp_flushed`)
_FLUSH = 708.0
#: the dense cells serve sample weights whose ``log(s_max / s_min)`` is at most this (it widens
#: their reach and cut, as it widens ``L``); wider spreads are split into bands of keys by weight
#: (``_truncated_bands``). One band this wide costs less than two (n = m = 2e5, h = 0.01, one
#: thread, weights over 1e40: one band 0.19 s, bands of 64 of log 0.42 s, of 30 0.51 s)
CELLS_SPREAD = 128.0


def supports(kernel: Kernel, d: int) -> bool:
    """The Gaussian kernel in one to three features (sorted keys in one, a grid of cells in two
    and three: ``nadaraya.backends._truncated_grid``).

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("gaussian"), 1), supports(get("gaussian"), 3), supports(get("gaussian"), 4)
    (True, True, False)
    >>> supports(get("laplacian"), 1)
    False
    """
    return kernel.name == "gaussian" and 1 <= d <= _grid.MAX_D


# -- the jitted pieces ------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _radius2(slack, jp):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The smallest convenient ``x = R^2`` with ``x / 2 - (jp / 2) ln x >= slack`` (``slack >= 40``):
    ``2 slack`` without moments, else ``2 slack + 2 jp ln(2 slack)``, checked and grown if needed."""
    x = 2.0 * slack
    if jp == 0:
        return x
    x += 2.0 * jp * math.log(x)
    while 0.5 * x - 0.5 * jp * math.log(x) < slack:
        x *= 1.0625
    return x


@numba.njit(cache=True, nogil=True)
def _buckets(qs, lo, hi, nb):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Each query's cell among ``nb`` equal cells over ``[lo, hi]`` (those outside: the end cells)."""
    out = np.empty(qs.size, dtype=np.uint16)
    scale = nb / (hi - lo) if hi > lo else 0.0
    for i in range(qs.size):
        x = (qs[i] - lo) * scale
        out[i] = 0 if not x > 0.0 else (nb - 1 if x >= nb - 1 else int(x))
    return out


@numba.njit(cache=True, nogil=True)
def _windows(ks, ls, ls_max, block_max, qs, ex, h, inv_h, big_l, jp, shrink, a, b, lo, hi, top, tu):  # type: ignore[no-untyped-def]  # pragma: no cover
    """For the queries ``a .. b - 1``: each window ``lo .. hi - 1`` of sorted keys and its shift
    ``top`` (``-inf`` and an empty window where no key has a finite log weight); with sample
    weights, ``tu`` the nearest key's ``-u^2 / 2`` (the dense cells' shift), and the windows shrink to
    the largest weight inside them where ``shrink``."""
    weighted = ls.size > 0
    pos = 0
    grid, x_grid = -1.0, 0.0  # the last slack rounded up to 1/64 and its radius (logs once per step)
    for i in range(a, b):
        q = qs[i]
        e = ex[i]
        pos = _gallop(ks, q, min(pos, ks.size - 1), False)  # from the previous query's position
        best, u2min = _bound(ks, ls, q, e, inv_h, pos)
        if weighted:
            tu[i] = -0.5 * u2min
        if best == -np.inf:
            lo[i] = pos
            hi[i] = pos
            top[i] = -np.inf
            continue
        lead = ls_max if weighted else 0.0
        for again in range(2 if weighted and shrink else 1):
            slack = lead - best + big_l
            if jp == 0:
                r2 = 2.0 * slack
            else:
                # the radius of the slack rounded up holds for the slack (x / 2 - (jp / 2) ln x grows
                # with x past jp): one radius for the queries of one step, whatever their order
                up = np.ceil(slack * 64.0) / 64.0
                if up != grid:
                    grid, x_grid = up, _radius2(up, jp)
                r2 = x_grid
            dist = math.sqrt(r2) * h * (1.0 + 2.0**-40)
            # a window past either end of the keys takes that end without a search (wide bandwidths)
            lo[i] = 0 if q - dist < ks[0] else _gallop(ks, q - dist, pos, False)
            hi[i] = ks.size if q + dist >= ks[-1] else _gallop(ks, q + dist, pos, True)
            if weighted and shrink and again == 0:
                # every key left out already has l < b - L; the largest sample weight inside the
                # window bounds the others, so the radius may shrink to it
                local = range_max(ls, block_max, lo[i], hi[i])
                if not local < lead:
                    break
                lead = local
        if not weighted:
            top[i] = best
        else:
            t = lead - 0.5 * u2min
            top[i] = t if t - best <= _FLUSH - big_l - 1.0 else window_max(ks, ls, q, e, inv_h, lo[i], hi[i])


# -- the driver ---------------------------------------------------------------------------------


class _Sorted:
    """The kept keys (positive weight) in sorted order, their log weights and values, and the
    queries in the order they are visited."""

    def __init__(self, queries, keys, values, sample_weight, exclude, big_l=None):  # type: ignore[no-untyped-def]
        f64 = np.float64
        m, n = queries.shape[0], keys.shape[0]
        #: the dense cells' sample weights over the largest and their logs (empty: none)
        self.sw = self.lw = np.empty(0)
        k = np.asarray(keys[:, 0], dtype=f64)
        if sample_weight is None:
            kept = sorted_order(k)
            self.ls = np.empty(0)
            self.ls_max = 0.0
            self.spread = 0.0
        else:
            sw = np.asarray(sample_weight, dtype=f64)
            pos = np.nonzero(sw > 0)[0]
            kept = pos[sorted_order(k[pos])]
            self.ls = np.ascontiguousarray(np.log(sw[kept]))
            self.ls_max = float(self.ls.max()) if kept.size else 0.0
            #: ``log(s_max / s_min)``, which widens the dense cells' ``L`` (``CELLS_SPREAD``)
            self.spread = self.ls_max - float(self.ls.min()) if kept.size else 0.0
            if self.spread <= CELLS_SPREAD and kept.size:  # the cells' factors and logs: over the largest
                self.sw = np.ascontiguousarray(sw[kept] / float(sw[kept].max()))
                self.lw = np.ascontiguousarray(self.ls - self.ls_max)
        full = self.ls.size // _MAX_BLOCK * _MAX_BLOCK
        self.block_max = np.ascontiguousarray(self.ls[:full].reshape(-1, _MAX_BLOCK).max(axis=1)
                                              if full else np.empty(0))
        self.ks = np.ascontiguousarray(k[kept])
        #: the ``L`` of the skipped keys (a band's is that of all the kept keys: ``_truncated_bands``)
        self.big_l = log_ratio(kept.size) if big_l is None else big_l
        self.vt = np.ascontiguousarray(np.asarray(values, dtype=f64)[kept].T)
        qs = np.asarray(queries[:, 0], dtype=f64)
        ex = sorted_exclude(exclude, n, kept, m)
        # above this many keys, queries are visited in the order of their buckets (a radix sort of
        # 2^16 equal cells between the keys' 0.1 % quantiles): neighbours share windows in the cache
        self.order = None
        if kept.size > SORT_QUERIES_ABOVE and m > 1:
            cut = kept.size // 1000
            edge = (float(self.ks[cut]), float(self.ks[kept.size - 1 - cut]))
            self.order = np.argsort(_buckets(qs, *edge, 2**16), kind="stable")
        if self.order is not None:
            qs, ex = qs[self.order], ex[self.order]
        self.qs = np.ascontiguousarray(qs)
        self.ex = np.ascontiguousarray(ex)
        #: each query's position among the keys and nearest key (``prepare_loo`` only)
        self.near: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None


def prepare_loo(keys: NDArray[np.float64], values: NDArray[np.float64]) -> _Sorted:
    """The parts of a leave-one-out pass over ``keys`` (1-D, float64, no sample weights: each key
    a query that leaves itself out) that no bandwidth changes, for ``partials(keys, keys,
    values, exclude=arange(n), _prepared=...)`` at many bandwidths: the keys sorted, the queries'
    order (none where it is theirs) and each one's nearest other key, which gives its window."""
    n = keys.shape[0]
    st = _Sorted(keys, keys, values, None, np.arange(n))
    if st.order is not None and bool((st.order == np.arange(n)).all()):
        st.order = None  # the same rows in the same order, without moving them
    st.near = nearest(st.ks, st.qs, st.ex)
    return st


def _windows_of(st: _Sorted, h: float, jp: int
                ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Every query's window (``lo``, ``hi`` in the sorted kept keys) and shift, in visiting order."""
    return _windows_near(st, h, jp)[:3]


def _windows_near(st: _Sorted, h: float, jp: int) -> tuple[NDArray[np.int64], NDArray[np.int64],
                                                           NDArray[np.float64], NDArray[np.float64]]:
    """:func:`_windows_of` and, with sample weights, each query's nearest key's ``-u^2 / 2``
    (the dense cells' shift; empty without)."""
    m, ne = st.qs.size, st.ks.size
    lo = np.zeros(m, dtype=np.int64)
    hi = np.zeros(m, dtype=np.int64)
    top = np.full(m, -np.inf)
    tu = np.full(m if st.ls.size else 0, -np.inf)
    if ne == 0:
        return lo, hi, top, tu
    with threads_for(m * (math.log2(ne) + 4) * 8):
        if st.near is not None and jp == 0 and st.ls.size == 0:
            run_ranges(near_windows, (st.ks, st.qs, *st.near, h, 1.0 / h, st.big_l), m, (lo, hi, top))
            return lo, hi, top, tu
        # where the dense cells may serve sample weights, the windows keep the radius of the largest
        # (reading the largest weight inside each costs more than the cells' sums; the shift stays
        # within log(s_max / s_min) <= CELLS_SPREAD of the bound, far from the flush)
        shrink = st.spread > CELLS_SPREAD
        args = (st.ks, st.ls, st.ls_max, st.block_max, st.qs, st.ex, h, 1.0 / h, st.big_l, jp, shrink)
        run_ranges(_windows, args, m, (lo, hi, top, tu))
    return lo, hi, top, tu


def _equal_work(cost: NDArray[np.int64], parts: int) -> NDArray[np.int64]:
    """Edges of ``parts`` consecutive ranges of queries of about equal total ``cost`` (each non-empty)."""
    m = cost.size
    if m == 0:
        return np.zeros(1, dtype=np.int64)
    parts = max(1, min(parts, m))
    cum = np.cumsum(cost)
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, parts) / parts, side="right")
    edges = np.unique(np.concatenate([[0], cuts, [m]]))
    return edges.astype(np.int64)


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
    _prepared: _Sorted | None = None,
) -> Partials:
    """Exact partial sums of the Gaussian kernel in 1-3 features over the keys that can change them.

    Same arguments and result as :func:`nadaraya.backends.reference.partials` (the skipped keys
    weigh less than ``2^-60`` of each query's largest term, together; see the module docstring);
    ``moments`` up to :data:`MAX_DEGREE`. ``_prepared``: ``prepare_loo`` of these keys
    and values (a search's leave-one-out passes at many bandwidths).

    Raises
    ------
    ValueError
        For another kernel or more than three features, or ``moments`` above :data:`MAX_DEGREE`.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.array([[1.0], [2.0], [3.0]]); v = np.array([[3.0], [5.0], [4.0]])
    >>> p = partials(np.array([[2.5], [1e9]]), x, v, kernel=get("gaussian"), bandwidth=np.ones(1))
    >>> p.finalize()[:, 0].round(4).tolist()  # far away: only the nearest key counts
    [4.267, 4.0]
    >>> float(p.shift[1]) == -0.5 * (1e9 - 3.0) ** 2  # its log weight, exactly
    True
    """
    moments = int(moments)  # checked against CAPABILITIES by nadaraya.backends.compute
    d = queries.shape[1]
    _threads.configure()
    if d > 1:
        return _grid.partials(queries, keys, values, kernel, bandwidth, sample_weight, exclude, moments)
    dtype = queries.dtype
    r = moments
    m, p = queries.shape[0], values.shape[1]
    if p == 0:  # the loop carries the first output along: give it one, and drop it
        part = partials(queries, keys, np.zeros((keys.shape[0], 1), dtype=values.dtype), kernel=kernel,
                        bandwidth=bandwidth, sample_weight=sample_weight, exclude=exclude, moments=moments)
        return Partials(part.shift, part.weight, part.value[:, :0],
                        part.moments[:2 * r] + tuple(x[..., :0] for x in part.moments[2 * r:]))
    h = float(np.asarray(bandwidth, dtype=np.float64)[0])
    if _prepared is None and _spread(sample_weight) > CELLS_SPREAD:
        shift, out = _banded(queries, keys, values, sample_weight, exclude, h, r)
    else:
        st = _Sorted(queries, keys, values, sample_weight, exclude) if _prepared is None else _prepared
        shift, out = _rows(st, h, r, p)
    return assemble(shift, out, dtype, m, p, r)



def _rows(st: _Sorted, h: float, r: int, p: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every query's shift and row (weight, ``p`` values, the moments of degree ``r``), in float64
    and the queries' own order."""
    m = st.qs.size
    inv_h = 1.0 / h
    lo, hi, top, tu = _windows_near(st, h, 2 * r)
    width = 1 + p + 2 * r + r * p
    # column-major rows: assemble takes each column as it stands (no copy per column)
    out = np.empty((width, m)).T
    rest: slice | NDArray[np.intp] = slice(None)
    # dense cells share series (exact): _truncated_cells, their rows in query order; with sample
    # weights, each key's factor times s / s_max, L widened by log(s_max / s_min), and the rows'
    # shift log s_max above the nearest key's -u^2 / 2 (the module text)
    served = None
    if st.ls.size == 0:
        served = _cells.sums(st.ks, st.vt, st.qs, st.ex, lo, hi, top, h, st.big_l, out, r,
                             dest=st.order)
    elif st.spread <= CELLS_SPREAD and st.ks.size:
        wide_l = st.big_l + st.spread
        served = _cells.sums(st.ks, st.vt, st.qs, st.ex, lo, hi, tu, h, wide_l, out, r, dest=st.order,
                             sw=st.sw, lw=st.lw)
        top = np.where(served, st.ls_max + tu, top)
    if served is not None and served.any():
        rest = np.flatnonzero(~served)
    cost = hi[rest] - lo[rest] + 8
    work = float(cost.sum()) * (1 + p) * (1 + 2 * r) * 4
    whole = isinstance(rest, slice)
    rows = out if whole else np.empty((cost.size, width))
    with threads_for(work):
        edges = _equal_work(cost, 16 * 64 * numba.get_num_threads())
        args = (st.ks, st.ls, st.vt, st.qs[rest], st.ex[rest], inv_h, lo[rest], hi[rest], top[rest], r, edges)
        run_ranges(_sums, args, edges.size - 1, (rows,))
    if not whole:  # out holds the cells' rows, in query order where the queries were sorted
        if st.order is None:
            out[rest] = rows
        else:
            scatter_rows(out, rows, st.order[rest])
    shift = top
    if st.order is not None:
        if whole:
            final = np.empty((width, m)).T
            scatter_rows(final, out, st.order)
            out = final
        shift = np.empty_like(top)
        shift[st.order] = top
    return shift, out


def _banded(queries: NDArray[np.floating], keys: NDArray[np.floating], values: NDArray[np.floating],
            sample_weight: NDArray[np.floating], exclude: NDArray[np.integer] | None, h: float,
            r: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """:func:`_rows` for sample weights spread over more than ``exp(CELLS_SPREAD)``: bands of keys
    by weight, each summed as one call, merged exactly (``nadaraya.backends._truncated_bands``)."""
    p = values.shape[1]

    def rows_of(qs, ks, vals, sw, ex, big_l):  # type: ignore[no-untyped-def]
        return _rows(_Sorted(qs[:, None], ks[:, None], vals, sw, ex, big_l=big_l), h, r, p)

    order_of = functools.partial(_buckets, nb=2**16)
    return _bands.banded(queries, keys, values, sample_weight, exclude, h, r, CELLS_SPREAD, rows_of, order_of)


def _spread(sample_weight: NDArray[np.floating] | None) -> float:
    """``log(s_max / s_min)`` over the positive sample weights (0 without)."""
    if sample_weight is None:
        return 0.0
    sw = np.asarray(sample_weight, dtype=np.float64)
    pos = sw[sw > 0]
    return float(np.log(pos.max()) - np.log(pos.min())) if pos.size else 0.0


def cells_shares(sample_weight: NDArray[np.floating] | None) -> tuple[tuple[float, float], ...]:
    """The dense cells' work (1-D) with these sample weights, for the cost model: per band of keys a
    query may take, ``(share, reach)`` (``nadaraya.backends._truncated_bands.shares``); ``((1.0,
    1.0),)`` without sample weights. :func:`pairs` prices each band as ``reach`` times the least of the
    cells' work and its share of the windows' pairs.

    Examples
    --------
    >>> import numpy as np
    >>> cells_shares(None), cells_shares(np.array([0.5, 0.5, 0.0]))
    (((1.0, 1.0),), ((1.0, 1.0),))
    >>> len(cells_shares(np.r_[1e-60, np.ones(9)]))  # log spread 138: two bands
    2
    """
    return _bands.shares(sample_weight, CELLS_SPREAD)


def priced(windows: float, with_cells: float, shares: tuple[tuple[float, float], ...]) -> float:
    """The pairs the 1-D work is worth with sample weights in bands (``cells_shares``), from the
    two counts of :func:`pairs_1d`: per band, ``reach`` times the least of the cells' work and its
    share of the windows' pairs.

    Examples
    --------
    >>> priced(1e6, 1e5, ((1.0, 1.0),)), priced(1e6, 1e5, ((0.9, 1.5), (0.01, 1.5)))
    (100000.0, 165000.0)
    """
    return sum(reach * min(with_cells, windows * share) for share, reach in shares)


#: queries and keys that :func:`pairs` samples
_SAMPLE_QUERIES = 512
_SAMPLE_KEYS = 8192


def pairs(queries: NDArray[np.floating], keys: NDArray[np.floating], bandwidth: float | NDArray[np.floating],
          moments: int = 0, sample_weight: NDArray[np.floating] | None = None) -> float:
    """An estimate of the (query, key) pairs :func:`partials` visits, for a cost model.

    From at most 512 queries: with at most 8192 keys, their windows exactly (no sample weights,
    no moments); with more, the keys within ``sqrt(2 L) h`` of each query (the window's radius
    where the nearest key is close) counted in a sample of 8192 keys and scaled up, and at least
    one per query. O(n) at most, about 1 ms at a million keys. In 1-D (``moments`` up to 2), a
    query where dense cells share a series (``nadaraya.backends._truncated_cells``) counts the
    pairs its cells' work is worth, where that is less. In 2 and 3 features:
    ``nadaraya.backends._truncated_grid.pairs``.

    Parameters
    ----------
    queries : ndarray of shape (m,) or (m, d)
    keys : ndarray of shape (n,) or (n, d)
    bandwidth : float or ndarray of shape (1,) or (d,)
    moments : int, default 0
        The local polynomial degree (the cells serve degrees 0 to :data:`MAX_DEGREE`).
    sample_weight : ndarray of shape (n,), optional
        In 1-D, the work of the bands of keys by weight (``cells_shares``, ``priced``).

    Returns
    -------
    float
        The estimated number of pairs (at most ``m n``, at least ``m`` when there are keys).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(0.0, 1.0, 1001)
    >>> est = pairs(x, x, 1e-3)  # windows of about 2 sqrt(2 L) = 21 bandwidths: 21 keys
    >>> 15 * 1001 < est < 25 * 1001
    True
    """
    if np.ndim(queries) == 2 and np.shape(queries)[1] > 1:
        h_all = np.asarray(bandwidth, dtype=np.float64)
        return _grid.pairs(queries, keys, h_all, log_ratio(np.shape(keys)[0]))
    windows, with_cells = pairs_1d(queries, keys, bandwidth)
    return priced(windows, with_cells if moments <= MAX_DEGREE else windows, cells_shares(sample_weight))


def pairs_1d(queries: NDArray[np.floating], keys: NDArray[np.floating],
             bandwidth: float | NDArray[np.floating]) -> tuple[float, float]:
    """In one feature, :func:`pairs` both ways from one sample: ``(windows, with cells)``, the
    pairs the windows visit and those the work is worth where dense cells serve.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(0.0, 5.0, 200_000)
    >>> windows, with_cells = pairs_1d(x, x, 0.05)
    >>> with_cells < windows / 10
    True
    """
    q = np.asarray(queries, dtype=np.float64).reshape(-1)
    k = np.asarray(keys, dtype=np.float64).reshape(-1)
    h = float(np.asarray(bandwidth, dtype=np.float64).reshape(-1)[0])
    m, n = q.size, k.size
    if m == 0 or n == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(0)
    qs = q if m <= _SAMPLE_QUERIES else q[rng.integers(0, m, _SAMPLE_QUERIES)]
    if n <= _SAMPLE_KEYS:
        ks = np.sort(k)
        lo = np.zeros(qs.size, dtype=np.int64)
        hi = np.zeros(qs.size, dtype=np.int64)
        none = np.empty(0)
        _windows(ks, none, 0.0, none, np.ascontiguousarray(qs), np.full(qs.size, -1, dtype=np.int64), h,
                 1.0 / h, log_ratio(n), 0, False, 0, qs.size, lo, hi, np.empty(qs.size), none)
        per = np.maximum(hi - lo, 1).astype(np.float64)
    else:
        ks = np.sort(k[rng.integers(0, n, _SAMPLE_KEYS)])
        rad = math.sqrt(2.0 * log_ratio(n)) * h
        cnt = np.searchsorted(ks, qs + rad, side="right") - np.searchsorted(ks, qs - rad, side="left")
        per = np.maximum(cnt * (n / _SAMPLE_KEYS), 1.0)
    cells = np.minimum(per, _cells.worth(qs, q, k, h, per, log_ratio(n)))
    return min(m * float(per.mean()), float(m) * n), min(m * float(cells.mean()), float(m) * n)
