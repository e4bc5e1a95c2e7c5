"""The windowed backend: compact kernels summed without visiting keys outside a query's window.

A compact kernel vanishes for ``|u| > 1``, so a query only needs the keys within one
bandwidth of it. This backend never looks at the others:

* **1-D, prefix moments.** Keys are sorted (checked in O(n); sorted only when they are
  not, by buckets in O(n) where they are spread) and cut into *cells* of width ``h``, each
  with its own anchor, its centre. Every kernel with a route -- the polynomial ones of
  :attr:`Kernel.polynomial` (boxcar, epanechnikov, triangular, biweight, triweight,
  tricube), ``parzen`` piece by piece (split at ``|u| = 1/2``) and ``cosine`` through
  ``cos(a - b) = cos a cos b + sin a sin b`` -- is a sum of products of a function of the
  query and a function of the key offset ``t = (x - centre) / h``, so the sum over a
  window is a handful of moment sums
  ``sum s_i v_i t_i^j``. These are kept as prefix and suffix sums *restarted at every cell*:
  ``|t| <= 1/2`` and ``|q - centre| <= 3h/2`` wherever they are used, so nothing cancels when
  ``|x| >> h``. The queries are never sorted: a counting sort puts them into buckets of
  whole cells (O(m)); one task (on the shared thread pool; a small pass on the calling
  thread) per run of buckets builds the moment tables of its keys, which stay in cache, and
  finds each query's window ``[q - h, q + h]`` by a short search from a lookup grid of about
  one key per step, with exactly the reference's test ``|(q - x) / h| <= 1`` at the edges (and a check of both
  ends). Each window is split at the query (odd powers of ``|u|``; kernels even in ``u``
  need no split) and at the kernel's breakpoints; each part is the suffix of one cell plus
  the prefix of the next, read in O(1). Leave-one-out splits the part around the excluded
  key (never subtracting its term afterwards). **The sweep** (kernels that are one
  polynomial even in ``u``: boxcar, epanechnikov, biweight, triweight; buckets of width
  ``h``) does without the split and the searches: each bucket's queries are sorted (a
  counting sort into about one sub-cell per query, then an insertion sort), the prefix
  moments of the keys of the bucket's cell and its two neighbours are tabulated about the
  *bucket's* centre (``|t| <= 3/2``, ``|Q| <= 1/2``), and both window edges are walked
  forward query by query, eight keys per vector compare, with the same exact test; a
  window is then two rows of the table, O(1) per query. The loop is compiled per number
  of moments and outputs (closure constants, so LLVM unrolls it). The results are
  scattered back into the queries' order through the query index of the bucket order.
  Windows of at most :data:`DIRECT_MAX_KEYS` keys, and windows whose weight sum is so small
  against the sample weights that the expansion could lose more than ~12 bits, are summed
  directly, pair by pair, with the kernel's own profile.
* **d > 1, neighbour pairs.** A scipy ``cKDTree`` on ``keys / h`` finds, for blocks of
  queries sized to the working memory, the keys within the Chebyshev radius 1 (product
  kernels vanish outside the unit cube); the weights are evaluated on those pairs only, with
  the registry's profiles, and summed per query. Exact.
* **Moments** (``moments = r > 0``, local polynomial fits; :mod:`._windowed_moments`): in 1-D,
  for the sweep's kernels, the sweep with ``2 r`` more powers of ``t`` read from compensated
  prefix tables (:mod:`._windowed_msweep`), each moment checked against a lower bound of its
  natural size ``sum w |k - q|^a [|v|]``; for the kernels with odd powers of ``|u|`` (tricube,
  triangular) the same sweep with a third edge at the query, each side's sums read apart from
  tables summed outwards from the cell's centre and each moment checked against its exact
  natural size and a per-query rounding bound (:mod:`._windowed_msplit`); biweight at degree 2
  and triweight, whose expansions fail the even sweep's fixed checks, take those tables and
  that bound without the split (the even moment at or above each one its lower bound of
  natural size); for ``cosine`` and ``parzen`` the split sweep (:mod:`._windowed_mtrig`), the
  cosine's tables of ``t^j cos(pi t / 2)`` and ``t^j sin(pi t / 2)`` combined by the addition
  formula, parzen's window cut at ``q -+ h/2`` as well, each part weighted by its piece; every
  other window (``d > 1``, queries that fail the check) is summed pair by pair with the exact
  differences ``k - q`` in float64: O(pairs in windows). ``moments = 0`` takes none of this.

Complexity: 1-D O(n) to check that the keys are sorted (when they are not, O(n) where spread,
O(n log n) at worst) +
O(n + m) for the buckets + O((n + m) J (1 + p)) for the tables and the sums, whatever the
bandwidth, with J the number of moments (the kernel's degree + 1; 2 for the cosine); scratch
memory: O(m) for the buckets and the results in bucket order, plus tables of about
:data:`_TABLE_BYTES` per running task (or one cell's keys and its neighbours', if larger).
d > 1: O(n log n) for the tree, O(m log n + pairs) for the searches and sums, where
``pairs`` is the number of (query, key) pairs within the support.

Accuracy (float64, against the reference backend): windows summed directly agree to rounding;
prefix-moment windows lose a little, a relative error of order 1e-14 per prediction. Tests
hold 1e-12 (1e-9 for keys near 1e6 with ``h = 1e-3``).
float32 inputs are summed in float64 and returned as float32, with the reference's float32
window test, so they are at least as accurate as the float32 reference.

Examples
--------
>>> import numpy as np
>>> from nadaraya.kernels import get
>>> from nadaraya.backends import windowed
>>> x = np.linspace(0.0, 1.0, 101)[:, None]
>>> p = windowed.partials(np.array([[0.5]]), x, x, kernel=get("epanechnikov"), bandwidth=np.array([0.3]))
>>> round(float(p.finalize()[0, 0]), 12)
0.5
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np
from numpy.typing import NDArray

from nadaraya.backends._sorted import argsort_spread
from nadaraya.backends._windowed_common import (
    _LOSS,
    _PAIR_BYTES,
    _TABLE_BYTES,
    DIRECT_MAX_KEYS,
    _blocks,
    _pair_weights,
    _sweep_threshold,
    _tree_blocks,
    _working_bytes,
)
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

__all__ = ["DIRECT_MAX_KEYS", "Route", "partials", "route", "supports"]


#: kernels that are polynomial piece by piece in |u|: inner breakpoints and the degree
_PIECEWISE: dict[str, tuple[tuple[float, ...], int]] = {"parzen": ((0.5,), 3)}


@dataclass(frozen=True)
class Route:
    """How a kernel's window sums are read from cell moments (see the module docstring).

    Parameters
    ----------
    kind : int
        0: the moments are ``t^j``; 1 (cosine): ``cos(pi t / 2)`` and ``sin(pi t / 2)``.
    breaks : ndarray
        Inner breakpoints in ``|u|`` (strictly between 0 and 1) where the polynomial changes.
    coef : ndarray of shape (2 P, J, J)
        For each part of the window (left pieces from the outside in, then right pieces from
        the inside out), ``coef[r, j, s]``: the weight of moment ``j`` is
        ``sum_s coef[r, j, s] Q^s`` with ``Q = (q - centre) / h``.
    amp : float
        The cosine kernel's ``K(0)``.
    threshold : float
        Windows whose weight sum is below ``threshold`` times their sum of sample weights are
        summed directly.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> route(get("epanechnikov")).coef.shape
    (2, 3, 3)
    """

    kind: int
    breaks: NDArray[np.float64]
    coef: NDArray[np.float64]
    amp: float
    threshold: float


def supports(kernel: Kernel, d: int) -> bool:
    """Whether this backend computes ``kernel`` in ``d`` features: every compact kernel.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("epanechnikov"), 3), supports(get("gaussian"), 1)
    (True, False)
    """
    return bool(kernel.compact) and d >= 1


def _pieces(kernel: Kernel) -> tuple[tuple[float, ...], list[NDArray[np.float64]]] | None:
    """Breakpoints and per-piece coefficients in powers of ``|u|``, or None."""
    if kernel.polynomial is not None:
        return (), [np.asarray(kernel.polynomial, dtype=float)]
    if kernel.name in _PIECEWISE:
        breaks, degree = _PIECEWISE[kernel.name]
        edges = (0.0, *breaks, 1.0)
        pieces = []
        for lo, hi in itertools.pairwise(edges):
            # a least-squares fit of the registry's own profile on Chebyshev points: exact for
            # a polynomial of this degree (checked below)
            k = np.arange(4 * (degree + 1))
            u = lo + (hi - lo) * 0.5 * (1.0 - np.cos(np.pi * (k + 0.5) / k.size))
            pieces.append(np.polynomial.polynomial.polyfit(u, kernel.profile(u), degree))
        return breaks, pieces
    return None


def _check(kernel: Kernel, values: NDArray[np.float64], u: NDArray[np.float64]) -> bool:
    ref = kernel.profile(u)
    return bool(np.max(np.abs(values - ref)) <= 1e-13 * max(1.0, float(np.max(np.abs(ref)))))


def route(kernel: Kernel) -> Route | None:
    """The prefix-moment route of a kernel, or None when it has none (then windows are summed
    directly). Each route is checked against the kernel's profile before it is used.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> route(get("parzen")).breaks.tolist()
    [0.5]
    >>> route(get("cosine")).kind
    1
    """
    if not kernel.compact:
        return None
    u = np.linspace(0.0, 1.0, 2001)
    qgrid = np.linspace(-1.5, 1.5, 301)
    if kernel.name == "cosine":
        amp = float(kernel.profile(np.zeros(1))[0])
        if not _check(kernel, amp * np.cos(0.5 * np.pi * u), u):
            return None
        coef = np.zeros((2, 2, 2))
        size = amp * float(np.max(np.abs(np.cos(0.5 * np.pi * qgrid)) + np.abs(np.sin(0.5 * np.pi * qgrid))))
        return Route(1, np.empty(0), coef, amp, size * _LOSS)
    found = _pieces(kernel)
    if found is None:
        return None
    breaks, pieces = found
    edges = np.array([0.0, *breaks, 1.0])
    for c, lo, hi in zip(pieces, edges[:-1], edges[1:]):
        uu = u[(u >= lo) & (u <= hi)]
        if not _check(kernel, np.polynomial.polynomial.polyval(uu, c), uu):
            return None
    nf = max(len(c) for c in pieces)
    P = len(pieces)
    coef = np.zeros((2 * P, nf, nf))
    # left of the query u = Q - t >= 0 (outermost piece first); right of it |u| = t - Q
    sides = [(pieces[P - 1 - r], 1.0) for r in range(P)] + [(pieces[r], -1.0) for r in range(P)]
    for r, (c, sign) in enumerate(sides):
        for deg, cr in enumerate(c):
            cr = cr * sign**deg  # (t - Q)^deg = (-1)^deg (Q - t)^deg
            for j in range(deg + 1):  # (Q - t)^deg = sum_j C(deg, j) Q^(deg - j) (-t)^j
                coef[r, j, deg - j] += cr * math.comb(deg, j) * (-1.0) ** j
    powers = qgrid[:, None] ** np.arange(nf)[None, :]
    size = max(
        float(np.max(np.abs(powers @ coef[r].T) @ (0.5 ** np.arange(nf)))) for r in range(2 * P)
    )
    return Route(0, np.asarray(breaks, dtype=float), coef, 0.0, size * _LOSS)


def _jit() -> ModuleType:
    from nadaraya.backends import _windowed_jit

    return _windowed_jit


@functools.cache
def _sweep(nf: int, p: int) -> Callable[..., None]:
    """The sweep loop compiled for ``nf`` moments and ``p`` outputs (one per pair, cached)."""
    from nadaraya.backends._windowed_sweep import sweep_loop

    return sweep_loop(nf, p)  # type: ignore[no-any-return]


def _direct(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    sv: NDArray[np.float64],
    kernel: Kernel,
    inv_h: NDArray[np.floating],
    qi: NDArray[np.intp],
    ki: NDArray[np.intp],
    indptr: NDArray[np.intp],
    excl: NDArray[np.integer] | None,
) -> NDArray[np.float64]:
    """Sums over the given (query, key) pairs, grouped by query (``indptr``), with the kernel's
    profile per feature exactly as the reference evaluates it; shape (len(indptr) - 1, C)."""
    from scipy.sparse import csr_matrix

    w = _pair_weights(queries, keys, kernel, inv_h, qi, ki)
    if excl is not None:
        w[ki == excl[qi]] = 0.0
    mat = csr_matrix((w, ki, indptr), shape=(indptr.size - 1, keys.shape[0]))
    return np.asarray(mat @ sv)


def _direct_windows(
    rows: NDArray[np.intp],
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    sv: NDArray[np.float64],
    kernel: Kernel,
    inv_h: NDArray[np.floating],
    excl: NDArray[np.int64] | None,
    out: NDArray[np.float64],
) -> None:
    """1-D: sum the windows ``[lo, hi)`` of the queries ``rows`` pair by pair into ``out[rows]``."""
    counts = hi - lo
    max_pairs = max(1, _working_bytes() // _PAIR_BYTES)
    for b0, b1 in _blocks(counts, max_pairs):
        cnt = counts[b0:b1]
        indptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.intp)
        local = np.repeat(np.arange(b1 - b0), cnt)
        ki = (np.repeat(lo[b0:b1] - indptr[:-1], cnt) + np.arange(indptr[-1])).astype(np.intp)
        r = rows[b0:b1]
        out[b0:b1] = _direct(queries[r], keys, sv, kernel, inv_h, local, ki, indptr,
                             None if excl is None else excl[r])


def _split(kernel: Kernel, rt: Route) -> bool:
    """Whether windows must be split at the query: not for kernels even in ``u`` on one piece."""
    if rt.kind == 1:  # cos(a - b) = cos a cos b + sin a sin b: even
        return False
    return rt.breaks.size > 0 or not np.array_equal(rt.coef[0], rt.coef[1])


def _one_d_work(n: int, m: int, p: int) -> float:
    """The 1-D windowed pass's work in the units of :data:`nadaraya._support.jit.SERIAL_WORK`:
    about 16 operations per key and query and value column, times ``log2 n`` (its cost model, 3 ns
    a point and ``log2 n``). Measured 2026-12 (Epanechnikov, h = 0.05, a shared 2-core machine):
    one thread beat two 1.6-1.9x at n = m = 500-2000 (0.45 ms), 1.3x at 5000; the threshold
    falls near n = m = 5000."""
    return 16.0 * (n + m) * (p + 1) * math.log2(n + 2)


def _one_d(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None,
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    inv_h: NDArray[np.floating],
    exclude: NDArray[np.integer] | None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    import numba

    from nadaraya._support import threads as _threads
    from nadaraya._support.jit import run_ranges

    _threads.configure()
    jit = _jit()

    m, n, p = queries.shape[0], keys.shape[0], values.shape[1]
    x = keys[:, 0]
    sw = np.empty(0) if sample_weight is None else np.ascontiguousarray(sample_weight, dtype=np.float64)
    excl = np.empty(0, dtype=np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64)
    if n > 1 and not bool(np.all(x[1:] >= x[:-1])):
        order = argsort_spread(x)
        x, values = x[order], values[order]
        if sample_weight is not None:
            sw = sw[order]
        if exclude is not None:
            rank = np.empty(n, dtype=np.int64)
            rank[order] = np.arange(n)
            excl = np.where(excl >= 0, rank[np.maximum(excl, 0)], -1)
    xs = np.ascontiguousarray(x)
    q = np.ascontiguousarray(queries[:, 0])
    h = float(bandwidth[0])
    inv_h64 = 1.0 / h
    x0 = float(xs[0])
    span = (float(xs[-1]) - x0) * inv_h64
    rt = route(kernel)
    direct_max = DIRECT_MAX_KEYS
    if rt is None or not span < 2.0**50:  # no route, or cells too fine to place a centre in
        rt = Route(0, np.empty(0), np.zeros((2, 1, 1)), 0.0, 0.0)
        direct_max = n + 1
    split = _split(kernel, rt)
    coef = np.ascontiguousarray(rt.coef if split else rt.coef[:1])
    # buckets of s whole cells, never many more than there are points
    s = max(1.0, math.ceil(span / (2.0 * (n + m))))
    inv_g = inv_h64 / s
    ncell = math.floor((float(xs[-1]) - x0) * inv_g) + 1
    qsort = np.empty_like(q)
    esort = np.empty_like(excl)
    qidx = np.empty(m, dtype=np.int32 if m < 2**31 else np.int64)
    cs, start = jit.buckets(xs, q, excl, x0, inv_g, ncell, np.empty(m, dtype=np.int32), qsort, qidx, esort)
    nf = coef.shape[1]
    per_key = 8 * (2 * nf * (p + 1) + nf + 6)
    keys_per_task = max(64, min(_working_bytes(), _TABLE_BYTES) // per_key)
    threads = numba.get_num_threads()
    target = int(min(keys_per_task * (1.0 + m / max(n, 1)), max(256, (n + m) // (4 * threads))))
    tasks = jit.plan(cs, start, ncell, max(1, target))
    res = np.empty((m, p + 1))  # bucket order
    lo_s = np.empty(m, dtype=np.int64)
    hi_s = np.empty(m, dtype=np.int64)
    args = (qsort, xs, inv_h[0], x0, h, inv_h64, cs, ncell, start, tasks, values, sw, esort, coef, split,
            rt.kind, rt.amp, rt.breaks, direct_max, rt.threshold, res, lo_s, hi_s)
    loop = jit.window_sums
    if not split and rt.kind == 0 and s == 1.0 and direct_max <= n:  # one even polynomial: a sweep
        loop = _sweep(coef.shape[1], p)
        args = (qsort, xs, inv_h[0], x0, h, inv_h64, cs, ncell, start, tasks, values, sw, esort, coef,
                direct_max, _sweep_threshold(coef[0]), res, lo_s, hi_s)
    # the compiled loop releases the GIL: the shared pool's threads take runs of tasks as they free
    # up; a small pass stays on the calling thread (SERIAL_WORK, measured: _one_d_work)
    run_ranges(lambda t0, t1: loop(t0, t1, *args), (), tasks.size - 1, (), grain=1, work=_one_d_work(n, m, p))
    weight = np.empty(m)
    value = np.empty((m, p))
    flag = np.zeros(m, dtype=bool)
    lo = np.empty(m, dtype=np.int64)  # written only where flagged
    hi = np.empty(m, dtype=np.int64)
    run_ranges(jit.unbucket, (qidx, res, lo_s, hi_s), m, (weight, value, flag, lo, hi),
               work=8.0 * m * (p + 1))
    rows = np.nonzero(flag)[0]
    if rows.size:
        sv = _weighted_values(values, None if sample_weight is None else sw)
        res = np.empty((rows.size, p + 1))
        _direct_windows(rows, lo[rows], hi[rows], queries, xs[:, None], sv, kernel, inv_h,
                        None if exclude is None else excl, res)
        weight[rows] = res[:, 0]
        value[rows] = res[:, 1:]
    return weight, value


def _weighted_values(values: NDArray[np.floating], sample_weight: NDArray[np.floating] | None
                     ) -> NDArray[np.float64]:
    """``(sw, sw v)`` per key in float64, shape (n, 1 + p)."""
    sv = np.empty((values.shape[0], 1 + values.shape[1]))
    sv[:, 0] = 1.0 if sample_weight is None else sample_weight
    np.multiply(values, sv[:, :1], out=sv[:, 1:])
    return sv


def _tree(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    sv: NDArray[np.float64],
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    inv_h: NDArray[np.floating],
    exclude: NDArray[np.integer] | None,
) -> NDArray[np.float64]:
    out = np.zeros((queries.shape[0], sv.shape[1]))
    excl = None if exclude is None else np.asarray(exclude, dtype=np.int64)
    for b0, b1, local, ki, indptr in _tree_blocks(queries, keys, bandwidth):
        out[b0:b1] = _direct(queries[b0:b1], keys, sv, kernel, inv_h, local, ki, indptr,
                             None if excl is None else excl[b0:b1])
    return out


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
) -> Partials:
    """Exact partial sums of every query over the keys inside its window (compact kernels).

    Same arguments and result as :func:`nadaraya.backends.reference.partials`; ``shift`` is
    zero (these kernels are not computed in the log domain). See the module docstring for
    the method, its complexity and its accuracy.

    Parameters
    ----------
    queries : ndarray of shape (m, d)
    keys : ndarray of shape (n, d)
        In 1-D they need not be sorted, but sorted keys (as the estimator stores them) skip a
        sort.
    values : ndarray of shape (n, p)
    kernel : Kernel
        A compact kernel (finite support).
    bandwidth : ndarray of shape (d,)
    sample_weight : ndarray of shape (n,), optional
    exclude : ndarray of shape (m,), optional
        For each query the index of one key left out of its sums (``-1`` for none).
    moments : int, default 0
        The degree ``r`` of a local polynomial fit whose moment sums to carry too, in the order
        and shapes of :func:`nadaraya.backends.reference.moment_shapes`: each window is then
        summed pair by pair with exact differences ``k - q`` (see
        :mod:`nadaraya.backends._windowed_moments`); 0 leaves the method above untouched.

    Returns
    -------
    Partials

    Raises
    ------
    ValueError
        If the kernel is not compact, or ``moments`` is not a non-negative int.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.array([[0.0], [1.0], [2.0]]); v = np.array([[1.0], [2.0], [4.0]])
    >>> p = partials(x, x, v, kernel=get("boxcar"), bandwidth=np.array([1.0]), exclude=np.arange(3))
    >>> p.finalize()[:, 0].tolist()
    [2.0, 2.5, 2.0]
    """
    m, d = queries.shape
    dtype = queries.dtype
    inv_h = (1.0 / bandwidth).astype(dtype)
    if type(moments) is not int or moments:  # the default 0 skips even the check
        from nadaraya.backends._windowed_moments import moment_partials

        if int(moments):
            return moment_partials(queries, keys, values, sample_weight, kernel, bandwidth, inv_h, exclude,
                                   int(moments))
    if d == 1:
        weight, value = _one_d(queries, keys, values, sample_weight, kernel, bandwidth, inv_h, exclude)
    else:
        out = _tree(queries, keys, _weighted_values(values, sample_weight), kernel, bandwidth, inv_h, exclude)
        weight, value = np.ascontiguousarray(out[:, 0]), np.ascontiguousarray(out[:, 1:])
    cast = dict(dtype=dtype, copy=False)
    return Partials(np.zeros(m, dtype=dtype), weight.astype(**cast), value.astype(**cast))
