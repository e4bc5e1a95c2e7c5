"""The choice behind backend="auto": the exact backend of lowest modelled cost; data-aware choices."""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import NDArray

from nadaraya.backends._capabilities import FUSED_MOMENTS, WINDOWED_MAX_D, cost, fused_compact_cost, why_not
from nadaraya.backends._registry import SMALL_PAIRS, Choice, available, get
from nadaraya.kernels import Kernel


def choose(
    kernel: Kernel,
    *,
    n: int,
    m: int,
    d: int,
    backend: str = "auto",
    moments: int = 0,
    loo: bool = False,
    tol: float | None = None,
) -> Choice:
    """Pick a backend for a call of ``m`` queries against ``n`` keys in ``d`` features (with the
    moments of a local fit of degree ``moments``, leaving keys out when ``loo``).

    The rule behind ``backend="auto"`` (all backends give the same sums):

    1. fewer than :data:`SMALL_PAIRS` pairs ``m n``: ``reference`` (no compiled code to load);
    2. otherwise the exact backend that serves the call (:data:`CAPABILITIES`) at the lowest
       modelled cost (:func:`cost`): the Laplacian's running sums in 1-D, the windowed sums of a
       compact kernel, the fused multi-core loop over all pairs. The backends whose cost depends
       on the data (truncated, taylor, binned) are weighed by :func:`choose_for_data` first.

    A backend named explicitly is used as it is, after checking that it is installed and
    serves the call (:func:`why_not`).

    Raises
    ------
    ValueError
        When the named backend does not serve the call (the message says why).

    Examples
    --------
    >>> from nadaraya.kernels import get as kernel
    >>> choose(kernel("gaussian"), n=10, m=10, d=1).name
    'reference'
    >>> choose(kernel("laplacian"), n=10**5, m=10**5, d=1).name
    'laplace'
    """
    if backend != "auto":
        get(backend)
        why = why_not(backend, kernel, d=d, degree=moments, loo=loo, tol=tol)
        if why is not None:
            raise ValueError(f"backend={backend!r} {why}; use backend='auto' or 'reference'")
        return Choice(backend, "named explicitly by the caller")
    pairs = n * m
    if pairs < SMALL_PAIRS:
        return Choice("reference", f"{pairs} pairs: too few to pay for loading compiled code")
    return _by_size(kernel, n, m, d, moments)


@functools.lru_cache(maxsize=256)
def _by_size(kernel: Kernel, n: int, m: int, d: int, moments: int) -> Choice:
    """:func:`choose` from the sizes alone, kept per kernel and sizes (the ranking costs about 10 us, a
    twentieth of the Laplacian's sums at n = m = 2e3); the cost model's constants, read once per key."""
    have = available()
    ranked = sorted((cost(name, kernel, n=n, m=m, d=d, degree=moments), name)
                    for name in _BY_SIZE if name in have)
    best, name = ranked[0]
    if not math.isfinite(best):
        return Choice("reference", f"no compiled backend serves the {kernel.name!r} kernel here")
    others = ", ".join(f"{other} {c / 1e9:.3g} s" for c, other in ranked[1:] if math.isfinite(c))
    said = f"{_WHY[name](kernel, d)}; modelled {best / 1e9:.3g} s"
    return Choice(name, said + (f" (vs {others})" if others else ""))


#: the exact backends that ``auto`` ranks by the sizes alone, and what each does, in words
_BY_SIZE = ("constant", "laplace", "windowed", "fused", "reference")


_WHY = {
    "constant": lambda k, d: (f"constant kernel in d={d}: every sum is a global sum over the keys, moved to "
                              "each query (leave-one-out: prefix and suffix sums), O(n + m)"),
    "laplace": lambda k, d: "Laplacian kernel in 1-D: exact running sums over the sorted keys",
    "windowed": lambda k, d: (f"compact {k.name!r} kernel in d={d}: only keys inside each window are "
                              "visited (" + ("sorted prefix moments" if d == 1 else "a k-d tree") + ")"),
    "fused": lambda k, d: f"the {k.name!r} kernel in d={d}: compiled multi-core loop over key blocks",
    "reference": lambda k, d: f"the {k.name!r} kernel in d={d}: NumPy blocks",
}


#: the cost model of ``tol=``: nanoseconds per (query, key) pair of the exact fused loop in 1-D,
#: and per (key, box) visit and series term, per visit (its exponential) and per point sorted
#: of the taylor backend, on two cores (measured on the 2-core machine, 2026-11)
EXACT_NS_PER_PAIR = 0.45


TAYLOR_NS = {"term": 0.16, "visit": 2.2, "point": 60.0}


def choose_within(
    kernel: Kernel, *, n: int, m: int, d: int, tol: float | None, span: float, moments: int = 0,
    loo: bool = False,
) -> Choice | None:
    """The backend for a call that allows an error of ``tol`` (each prediction within
    ``tol * max|y|``), when a method faster than the exact sums meets it; ``None`` otherwise
    (the exact choice of :func:`choose` then meets any ``tol``).

    ``span``: the extent of the queries and keys together, in bandwidths. The taylor backend
    (the Gaussian in 1-D, with the moments of local fits up to degree 2) is chosen when its
    modelled cost is under half the exact loop's (:data:`EXACT_NS_PER_PAIR`, :data:`TAYLOR_NS`);
    the binned backend (the logistic kernel in 1-D, plain pooling; not with ``loo``, which also
    stands for partials that will be merged, since its certificate is per prediction) likewise
    (:data:`BINNED_NS`), where its grid for ``tol`` fits in :data:`nadaraya.backends.binned.GRID_MAX`.

    Examples
    --------
    >>> from nadaraya.kernels import get as kernel
    >>> choose_within(kernel("gaussian"), n=10**6, m=10**6, d=1, tol=1e-10, span=5000.0).name
    'taylor'
    >>> choose_within(kernel("gaussian"), n=300, m=300, d=1, tol=1e-10, span=50.0) is None
    True
    """
    if tol is None or moments > 2 or d != 1 or n * m < SMALL_PAIRS:
        return None
    if kernel.name == "logistic" and not moments and not loo:
        return _choose_binned(n, m, tol, span)
    if kernel.name != "gaussian":
        return None
    import nadaraya.backends.taylor as taylor

    if tol < taylor.MIN_TOL:
        return None
    plan = taylor.plan(n, m, tol, span, moments)
    columns = 1 + 3 * moments  # the columns each term carries besides the weight and one value
    cost = (plan["visits"] * (plan["terms"] * TAYLOR_NS["term"] * columns + TAYLOR_NS["visit"])
            + (n + m) * TAYLOR_NS["point"])
    exact = n * m * EXACT_NS_PER_PAIR * columns
    if cost > exact / 2:
        return None
    return Choice("taylor", (
        f"Gaussian kernel in 1-D with tol={tol:g}: Taylor series about boxes {2 * plan['rho']:.2g} "
        f"bandwidths wide, {plan['terms']} terms, keys beyond {plan['radius']:.1f} bandwidths dropped; "
        f"each prediction within tol * max|y|; about {exact / cost:.0f}x less work than the exact sums"))


#: the binned backend's cost: nanoseconds per key or query binned or read, per grid point of its
#: convolutions in 1-D and in 2-D (the sums and their bound, weight and one value column), and the
#: exact fused loop's per pair and feature for the logistic kernel (a log1p each), on two cores
#: (measured 2026-11)
BINNED_NS = {"point": 100.0, "grid": 1600.0, "grid2": 4400.0, "logistic_pair": 8.0}


def _choose_binned(n: int, m: int, tol: float, span: float) -> Choice | None:
    """The binned backend for the logistic kernel in 1-D, where its grid fits and pays."""
    import nadaraya.backends.binned as binned

    if tol < 1e-12 or span <= 0:
        return None
    size = span / binned.grid_spacing(1.0, span, tol, "logistic")
    if size > binned.GRID_MAX:
        return None
    cost = (n + m) * BINNED_NS["point"] + size * BINNED_NS["grid"] * max(1.0, math.log2(size) / 20)
    exact = n * m * BINNED_NS["logistic_pair"]
    if cost > exact / 2:
        return None
    return Choice("binned", (
        f"logistic kernel in 1-D with tol={tol:g}: linear binning on {size:.0f} grid points and FFT "
        f"convolution; each prediction certified within tol * max|y| (else computed exactly); about "
        f"{exact / cost:.0f}x less work than the exact sums"))


def _choose_binned_2d(queries: NDArray[np.floating], keys: NDArray[np.floating],
                      bandwidth: NDArray[np.floating], tol: float) -> Choice | None:
    """The binned backend for the logistic kernel in 2-D, where its grid is built and pays
    (:data:`BINNED_NS`: per grid point of the 2-D convolutions, and the exact loop's per pair,
    a ``log1p`` per feature)."""
    import nadaraya.backends.binned as binned

    if tol < 1e-12:
        return None
    m, n = queries.shape[0], keys.shape[0]
    points, built = binned.grid_points(queries, keys, bandwidth, tol, "logistic")
    if not built:
        return None
    cost = (n + m) * BINNED_NS["point"] + points * BINNED_NS["grid2"] * max(1.0, math.log2(9 * points) / 20)
    exact = n * m * 2 * BINNED_NS["logistic_pair"]
    if cost > exact / 2:
        return None
    return Choice("binned", (
        f"logistic kernel in 2-D with tol={tol:g}: bilinear binning on {points:.0f} grid points and a 2-D "
        f"FFT convolution; each prediction certified within tol * max|y| (else computed exactly); about "
        f"{exact / cost:.0f}x less work than the exact sums"))


#: nanoseconds per visited pair of the truncated backend, and per key or query sorted, on two cores
TRUNCATED_NS = {"pair": 0.55, "point": 60.0}
#: in 1-D, the time of a local fit of degree r over that of degree 0 is about ``1 + r`` on the
#: fused loop and ``1 + 0.45 r`` on the truncated sums (measured at n = m = 1e3 and 2e3, leave-one-out,
#: h from 0.03 to 1 on U(0, 5), 2026-12: fused 1.3-2x and 2.4-5x, truncated 1.4x and 1.9x)
MOMENT_COST = {"fused": 1.0, "truncated": 0.45}
#: in 2 and 3 features, the grid's time with the moments of degree 0, 1, 2 over degree 0 (the
#: fused loop's: ``FUSED_MOMENTS``); measured one thread, leave-one-out, U(0, 1)^d, 2026-12-06:
#: 2-D n = 5e4 at h = 0.01 and 2e4 at 0.03: 1.52-1.56x and 1.71-1.97x; 3-D n = 2e4 at h = 0.05 and
#: 0.02, 4e4 at 0.01: 1.31-1.65x and 2.69-3.51x
GRID_MOMENTS = {2: (1.0, 1.6, 1.9), 3: (1.0, 1.6, 3.1)}


def window_moments(d: int, moments: int) -> float:
    """The truncated sums' work per pair with the moments of degree ``moments`` (up to 2) in ``d``
    features, against degree 0 (``MOMENT_COST`` in 1-D, ``GRID_MOMENTS`` in 2-3).

    Examples
    --------
    >>> window_moments(1, 2), window_moments(2, 0), window_moments(3, 2)
    (1.9, 1.0, 3.1)
    """
    if d == 1:
        return 1 + MOMENT_COST["truncated"] * moments
    return GRID_MOMENTS[min(max(d, 2), 3)][moments]


def _loop_moments(d: int, moments: int) -> float:
    """The fused loop's work per pair with the moments of degree ``moments`` (up to 2) against degree 0
    (``MOMENT_COST`` in 1-D, ``FUSED_MOMENTS`` in 2-3): what the truncated sums and the series face."""
    return 1 + MOMENT_COST["fused"] * moments if d == 1 else FUSED_MOMENTS[moments]


def choose_window(kernel: Kernel, *, n: int, m: int, d: int, moments: int, pairs: float,
                  cells: bool = False) -> Choice | None:
    """The exact truncated backend for the Gaussian kernel in 1 to 3 features (``moments`` up to 2:
    ``MOMENT_COST`` in 1-D, ``GRID_MOMENTS`` against ``FUSED_MOMENTS`` in 2-3) when the
    ``pairs`` its windows hold
    (:func:`nadaraya.backends.truncated.pairs`) make it cheaper than the exact loop over all
    ``m n`` pairs by half; ``None`` otherwise. ``cells``: in 1-D, ``pairs`` is the work of the
    dense cells' series, which serve most queries (local fits of degree 1 and 2 too).

    Examples
    --------
    >>> from nadaraya.kernels import get as kernel
    >>> choose_window(kernel("gaussian"), n=10**5, m=10**5, d=1, moments=0, pairs=2.1e6).name
    'truncated'
    >>> choose_window(kernel("gaussian"), n=10**5, m=10**5, d=1, moments=0, pairs=9e9) is None
    True
    >>> choose_window(kernel("gaussian"), n=10**5, m=10**5, d=2, moments=2, pairs=2.1e8).name
    'truncated'
    """
    if not 1 <= d <= 3 or kernel.name != "gaussian" or n * m < SMALL_PAIRS or moments > 2:
        return None
    cost = pairs * TRUNCATED_NS["pair"] * window_moments(d, moments) + (n + m) * TRUNCATED_NS["point"]
    exact = n * m * EXACT_NS_PER_PAIR * _loop_moments(d, moments)
    if cost > exact / 2:
        return None
    if cells:
        return Choice("truncated", (
            f"Gaussian kernel in d=1: exact sums where dense cells of keys and queries share one series "
            f"of the Gaussian's cross term, whose remainder is under 2^-60 of each term (the work of about "
            f"{pairs / max(m, 1):.0f} pairs per query; elsewhere each query's window of sorted keys); about "
            f"{exact / cost:.0f}x less work than all pairs"))
    where = "the sorted keys" if d == 1 else "the cells of a grid that meet"
    return Choice("truncated", (
        f"Gaussian kernel in d={d}: exact sums over {where} each query's window "
        f"(about {pairs / max(m, 1):.0f} of {n} keys per query; the keys left out weigh under 2^-60 "
        f"of its largest term together); about {exact / cost:.0f}x less work than all pairs"))


def choose_for_data(
    kernel: Kernel, queries: NDArray[np.floating], keys: NDArray[np.floating],
    bandwidth: NDArray[np.floating], *, moments: int = 0, tol: float | None = None, loo: bool = False,
    merged: bool = False, shares: tuple[tuple[float, float], ...] = ((1.0, 1.0),),
    sample_weight: NDArray[np.floating] | None = None,
) -> Choice | None:
    """The data-aware part of ``backend="auto"``: within ``tol`` in 1-D, the Taylor series of the
    Gaussian or the binned sums of the logistic kernel (:func:`choose_within`; ``loo``: the call
    leaves keys out; ``merged``: the partials will be merged with others, so only a method whose
    bound holds per sum, not the binned certificate per prediction); else, for the Gaussian in 1
    to 3 features, the exact truncated sums where the windows hold few of the pairs
    (:func:`choose_window`, from a sampled estimate; ``shares``: in 1-D, the bands of keys by
    sample weight a query takes, ``truncated.cells_shares``, priced by ``truncated.priced``; or
    the call's ``sample_weight``, whose bands are then found only where that estimate is taken); for
    a compact kernel in 2-3 features, the fused loop where the windows hold too many keys for the k-d tree
    (:func:`_choose_tree`); for the logistic kernel in 1-D (degree up to 2), its exact near
    windows and tails' series (:func:`nadaraya.backends.logistic.choice`); ``None`` where none
    pays (then :func:`choose` decides from the sizes alone).

    The estimate of the truncated sums' pairs is not taken where it would cost more than those
    sums could save (``worth_estimating``), nor where every key lies within every query's
    window (``all_near``: all ``m n`` pairs, which the cells of 1-D may still serve); in 2-3
    features it samples fewer queries in a small call (``sample_queries``).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get as kernel
    >>> x = np.linspace(0.0, 5.0, 20000)[:, None]
    >>> choose_for_data(kernel("gaussian"), x, x, np.array([0.001])).name
    'truncated'
    >>> choose_for_data(kernel("gaussian"), x, x, np.array([0.001]), tol=1e-8).name
    'taylor'
    >>> choose_for_data(kernel("gaussian"), x, x, np.array([10.0])).name  # dense cells, one series
    'truncated'
    >>> x2 = np.random.default_rng(0).uniform(0, 5, (20000, 2))
    >>> choose_for_data(kernel("gaussian"), x2, x2, np.array([10.0, 10.0])) is None
    True
    """
    m, n, d = queries.shape[0], keys.shape[0], keys.shape[1]
    if kernel.compact and 2 <= d <= WINDOWED_MAX_D and m * n >= SMALL_PAIRS:
        return _choose_tree(kernel, queries, keys, bandwidth, moments)
    if kernel.name not in ("gaussian", "logistic") or d > 3 or m * n < SMALL_PAIRS:
        return None
    import nadaraya.backends.truncated as truncated

    if tol is not None and d == 1:
        points = (queries, keys)
        lo, hi = min(float(a.min()) for a in points), max(float(a.max()) for a in points)
        span = (hi - lo) / float(bandwidth[0])
        fast = choose_within(kernel, n=n, m=m, d=1, tol=tol, span=span, moments=moments, loo=loo or merged)
        if fast is not None:
            return fast
    if tol is not None and d == 2 and kernel.name == "logistic" and not moments and not (loo or merged):
        return _choose_binned_2d(queries, keys, bandwidth, tol)
    if kernel.name == "logistic" and d == 1:  # the near windows and the tails' series
        import nadaraya.backends.logistic as logistic

        return logistic.choice(queries, keys, bandwidth, moments)
    if kernel.name != "gaussian" or moments > 2:
        return None  # the truncated sums and the series carry the moments up to degree 2
    if not worth_estimating(kernel, n=n, m=m, d=d, moments=moments):
        return None  # the estimate would cost more than the truncated sums could save: the sizes decide
    # the dense cells (1-D) take sample weights in bands of keys by weight, each priced
    cells_serve = d == 1 and moments <= truncated.MAX_DEGREE
    if d == 1 and sample_weight is not None:
        shares = truncated.cells_shares(sample_weight)
    if all_near(queries, keys, bandwidth):  # the windows hold all pairs: no need to count them
        windows = float(m) * n
        with_cells = _cells_pairs(queries, keys, bandwidth) if cells_serve else windows
        pairs = truncated.priced(windows, with_cells, shares) if d == 1 else windows
    elif d == 1:
        windows, with_cells = truncated.pairs_1d(queries, keys, bandwidth)
        pairs = truncated.priced(windows, with_cells if cells_serve else windows, shares)
    else:
        pairs = _sampled_pairs(queries, keys, bandwidth)
    if tol is not None and d > 1:
        series = _choose_series(queries, keys, bandwidth, tol, pairs, moments)
        if series is not None:
            return series
    cells = d == 1 and pairs < 0.9 * windows
    return choose_window(kernel, n=n, m=m, d=d, moments=moments, pairs=pairs, cells=cells)


#: the data-aware estimate's own cost, nanoseconds (measured 2026-12 on a shared 2-core machine:
#: 0.2-0.3 ms at n = 2e3 and 0.6 ms from 1e4 on in 1-D; 0.35-0.7 ms at n = 2e3 and 1.5-1.7 ms from
#: 4e3 on in 2-3 features): in 1-D (``truncated.pairs_1d``) per key sorted, of at most 8192 sampled,
#: and a part for its 512 sampled queries; in 2-3 features per key put in a k-d tree, of at most
#: 4096 sampled, and per sampled query (``sample_queries``)
ESTIMATE_NS = {"key_1d": 60.0, "queries_1d": 1e5, "key_tree": 200.0, "query_tree": 1000.0}


def sample_queries(m: int) -> int:
    """The queries the estimates in 2-3 features sample for a call of ``m`` queries: a sixteenth
    of them, at least 64 and at most 512 (all 512 from ``m = 8192`` on), so that a small call's
    estimate costs a small part of the call.

    Examples
    --------
    >>> sample_queries(2000), sample_queries(10**4), sample_queries(100)
    (125, 512, 64)
    """
    return min(512, max(64, m // 16))


def estimate_ns(n: int, m: int, d: int) -> float:
    """The modelled cost of the sampled estimate of the truncated sums' pairs, in nanoseconds
    (:data:`ESTIMATE_NS`).

    Examples
    --------
    >>> estimate_ns(2000, 2000, 1) / 1e6  # milliseconds
    0.22
    """
    if d == 1:
        return min(n, 8192) * ESTIMATE_NS["key_1d"] + ESTIMATE_NS["queries_1d"]
    return min(n, 4096) * ESTIMATE_NS["key_tree"] + min(m, sample_queries(m)) * ESTIMATE_NS["query_tree"]


def worth_estimating(kernel: Kernel, *, n: int, m: int, d: int, moments: int = 0) -> bool:
    """Whether the data-aware estimate can pay for itself: the most the truncated sums can save on
    the fused loop (its modelled cost, less the truncated sums' sort of the keys and queries,
    :data:`TRUNCATED_NS`) is more than the estimate costs (:func:`estimate_ns`). Where not, the
    sizes alone decide (:func:`choose`).

    Examples
    --------
    >>> from nadaraya.kernels import get as kernel
    >>> worth_estimating(kernel("gaussian"), n=600, m=600, d=1)
    False
    >>> worth_estimating(kernel("gaussian"), n=2000, m=2000, d=1)
    True
    """
    exact = cost("fused", kernel, n=n, m=m, d=d, degree=moments)
    return estimate_ns(n, m, d) < exact - (n + m) * TRUNCATED_NS["point"]


def all_near(queries: NDArray[np.floating], keys: NDArray[np.floating],
             bandwidth: NDArray[np.floating]) -> bool:
    """Whether every key lies within ``sqrt(2 L)`` bandwidths of every query (``L``:
    :func:`nadaraya.backends.truncated.log_ratio` of the keys): the box holding both is no wider
    on its diagonal. The truncated sums' windows, each at least that wide, then hold every pair,
    and their sampled estimate counts all ``m n`` (O(n + m), without sampling).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(0.0, 1.0, 2000)[:, None]
    >>> all_near(x, x, np.array([0.15])), all_near(x, x, np.array([0.05]))
    (True, False)
    """
    from nadaraya.backends.truncated import log_ratio

    if queries.shape[0] == 0 or keys.shape[0] == 0:
        return True
    d = keys.shape[1]
    h = np.asarray(bandwidth, dtype=np.float64).reshape(-1)
    h = h.tolist() * d if h.size == 1 else h.tolist()
    both = (keys,) if queries is keys else (queries, keys)  # a call on its own keys: one pass
    square = 0.0
    for j in range(d):  # column by column: min(axis=0) of a narrow array is 30x slower
        cols = [a[:, j] for a in both]
        hi, lo = max(float(c.max()) for c in cols), min(float(c.min()) for c in cols)
        square += ((hi - lo) / h[j]) ** 2
    return bool(square <= 2.0 * log_ratio(keys.shape[0]))


def _cells_pairs(queries: NDArray[np.floating], keys: NDArray[np.floating],
                 bandwidth: NDArray[np.floating]) -> float:
    """In 1-D where every window holds every key (:func:`all_near`): the second count of
    :func:`nadaraya.backends.truncated.pairs_1d` (the pairs the dense cells' work is worth, from the
    same 512 sampled queries) without counting the windows, which hold ``n`` keys each."""
    import nadaraya.backends._truncated_cells as cells
    from nadaraya.backends.truncated import log_ratio

    q = np.asarray(queries, dtype=np.float64).reshape(-1)
    k = np.asarray(keys, dtype=np.float64).reshape(-1)
    m, n = q.size, k.size
    sampled = q if m <= 512 else q[_draws((m, 512))[0]]
    per = np.full(sampled.size, float(n))
    worth = np.minimum(per, cells.worth(sampled, q, k, float(np.asarray(bandwidth).reshape(-1)[0]), per,
                                        log_ratio(n)))
    return min(m * float(worth.mean()), float(m) * n)


@functools.lru_cache(maxsize=64)
def _draws(*ranges: tuple[int, int]) -> tuple[NDArray[np.int64], ...]:
    """Per ``(high, size)``, ``size`` indices below ``high`` drawn in turn from one ``default_rng(0)``,
    read-only: the same every call, kept per sizes (10-20 us, a tenth of the estimate at n = 2e3)."""
    rng = np.random.default_rng(0)
    out = tuple(rng.integers(0, high, size) for high, size in ranges)
    for index in out:
        index.flags.writeable = False
    return out


def _sampled_pairs(queries: NDArray[np.floating], keys: NDArray[np.floating],
                   bandwidth: NDArray[np.floating]) -> float:
    """In 2-3 features, :func:`nadaraya.backends.truncated.pairs` from :func:`sample_queries`
    queries (the same sample as its own where that is 512), scaled to all ``m``. In a smaller
    call, a coarse count first: the share of (query, key) pairs within ``sqrt(2 L)`` bandwidths
    among :data:`COARSE` sampled queries and keys, all pairs compared (no grid overhead counted: a
    low count); where it finds over :data:`COARSE_MARGIN` times the pairs at which the truncated
    sums stop paying (:func:`choose_window`), that count is the estimate."""
    import nadaraya.backends.truncated as truncated

    m, n = queries.shape[0], keys.shape[0]
    s = sample_queries(m)
    if s >= min(m, 512):
        return truncated.pairs(queries, keys, bandwidth)
    few_q, few_k = COARSE
    at_q, at_k, at_s = _draws((m, few_q), (n, few_k), (m, s))  # those of one generator, in turn
    inv_h = 1.0 / np.asarray(bandwidth, dtype=np.float64)
    qs = np.asarray(queries[at_q], dtype=np.float64) * inv_h
    ks = np.asarray(keys[at_k], dtype=np.float64) * inv_h
    square = np.zeros((few_q, few_k))
    for j in range(qs.shape[1]):
        square += np.subtract.outer(qs[:, j], ks[:, j]) ** 2
    coarse = float(np.count_nonzero(square <= 2.0 * truncated.log_ratio(n))) * (m / few_q) * (n / few_k)
    stops = (EXACT_NS_PER_PAIR * m * n / 2 - (n + m) * TRUNCATED_NS["point"]) / TRUNCATED_NS["pair"]
    if coarse > COARSE_MARGIN * stops:
        return coarse
    return truncated.pairs(queries[at_s], keys, bandwidth) * (m / s)


#: the queries and keys the coarse count of :func:`_sampled_pairs` samples, and how far over the
#: pairs where the truncated sums stop paying its count must be to stand
COARSE = (32, 512)
COARSE_MARGIN = 2.0


#: nanoseconds per (query, key) pair inside the windows of the windowed backend's k-d tree (2-3
#: features: the candidate lists, the profile per pair, a sparse product; measured 2026-12 at 600-1100
#: on a shared 2-core machine, taken at about half of that), times ``1 + TREE_PAIR_MOMENTS degree``
#: with moments (its degree 1 and 2 measured at 1.0-1.35x and 1.2-2x its degree 0, 2026-12-06)
TREE_PAIR_NS = 400.0
TREE_PAIR_MOMENTS = 0.5


def _choose_tree(kernel: Kernel, queries: NDArray[np.floating], keys: NDArray[np.floating],
                 bandwidth: NDArray[np.floating], moments: int) -> Choice | None:
    """A compact kernel in 2-3 features: the fused loop where the windows hold so many keys that the
    k-d tree's pairs (:data:`TREE_PAIR_NS`, counted for :func:`sample_queries` sampled queries in
    at most 4096 sampled keys) cost more than the fused loop's: all pairs, or, where its tree of key
    boxes takes the call (:func:`_compact_share`), the pairs near each query and its walk
    (``fused_compact_cost``: the share of the keys' box a support covers, then the sampled pairs);
    ``None`` otherwise (the sizes' choice stands)."""
    from scipy.spatial import cKDTree

    m, n, d = queries.shape[0], keys.shape[0], keys.shape[1]
    tree = cost("windowed", kernel, n=n, m=m, d=d, degree=moments)
    loop = cost("fused", kernel, n=n, m=m, d=d, degree=moments)
    if loop <= tree or not (math.isfinite(tree) and math.isfinite(loop)):
        return None  # the sizes pick the fused loop already
    inv_h = 1.0 / np.asarray(bandwidth, dtype=np.float64)
    share = _compact_share(kernel, keys, inv_h, m, moments)
    if share is not None:  # the fused loop walks its tree of key boxes: the pairs near each query
        loop = fused_compact_cost(n=n, m=m, d=d, degree=moments, pairs=share * m * n)
        if loop <= tree:  # under the k-d tree's cost before its pairs
            return _compact_choice(kernel, d, share * n, n, loop, tree)
    if loop >= tree + m * n * TREE_PAIR_NS * (1 + TREE_PAIR_MOMENTS * moments):
        return None  # the tree wins with every pair in a window
    rng = np.random.default_rng(0)
    s = sample_queries(m)
    qs = np.asarray(queries if m <= s else queries[rng.integers(0, m, s)], dtype=np.float64) * inv_h
    ks = np.asarray(keys if n <= 4096 else keys[rng.integers(0, n, 4096)], dtype=np.float64) * inv_h
    near = cKDTree(ks).query_ball_point(qs, 1.0 + 1e-9, p=np.inf, return_length=True)
    pairs = m * float(np.mean(near)) * n / ks.shape[0]
    tree += pairs * TREE_PAIR_NS * (1 + TREE_PAIR_MOMENTS * moments)
    if share is not None:
        loop = fused_compact_cost(n=n, m=m, d=d, degree=moments, pairs=pairs)
    if tree <= loop:
        return None
    if share is not None:
        return _compact_choice(kernel, d, pairs / max(m, 1), n, loop, tree)
    return Choice("fused", (
        f"compact {kernel.name!r} kernel in d={d}: its windows hold about {pairs / max(m, 1):.0f} of {n} "
        f"keys per query, which the k-d tree visits pair by pair; the compiled multi-core loop over all "
        f"pairs costs less (modelled {loop / 1e9:.3g} s vs {tree / 1e9:.3g} s)"))


def _compact_share(kernel: Kernel, keys: NDArray[np.floating], inv_h: NDArray[np.float64], m: int,
                   moments: int) -> float | None:
    """The share of the keys' bounding box one support covers where the fused backend takes the call
    on its tree of key boxes (:func:`nadaraya.backends._fused_compact.serves` and ``MAX_COVER``, the
    rule ``fused.partials`` applies); ``None`` where it takes its loop over all pairs."""
    from nadaraya.backends import _fused_compact

    d = keys.shape[1]
    if not _fused_compact.serves(kernel.log_domain, d, moments, m, n=keys.shape[0]):
        return None
    share = _fused_compact.covers(np.ascontiguousarray(keys.T, dtype=np.float64), inv_h)
    return share if share <= _fused_compact.MAX_COVER else None


def _compact_choice(kernel: Kernel, d: int, near: float, n: int, loop: float, tree: float) -> Choice:
    return Choice("fused", (
        f"compact {kernel.name!r} kernel in d={d}: the compiled loop walks a tree of key boxes, each query "
        f"visiting the about {near:.0f} of {n} keys near it (modelled {loop / 1e9:.3g} s vs the k-d tree's "
        f"{tree / 1e9:.3g} s)"))


def _choose_series(queries: NDArray[np.floating], keys: NDArray[np.floating], bandwidth: NDArray[np.floating],
                   tol: float, pairs: float, moments: int = 0) -> Choice | None:
    """The taylor backend in 2 or 3 features where its modelled cost is under half the cheaper
    exact method's (the truncated sums over ``pairs``, or every pair)."""
    import nadaraya.backends._taylor_nd as _taylor_nd
    import nadaraya.backends.taylor as taylor

    if tol < taylor.MIN_TOL or moments > taylor.MAX_DEGREE:
        return None
    m, n, d = queries.shape[0], keys.shape[0], keys.shape[1]
    cost, terms, rho = _taylor_nd.estimate(queries, keys, bandwidth, tol, pairs, moments)
    # the fused loop's moments (FUSED_MOMENTS), the truncated grid's (GRID_MOMENTS)
    exact = n * m * EXACT_NS_PER_PAIR * _loop_moments(d, moments)
    grid = pairs * TRUNCATED_NS["pair"] * window_moments(d, moments) + (n + m) * TRUNCATED_NS["point"]
    exact = min(grid, exact)
    if not cost < exact / 2:
        return None
    return Choice("taylor", (
        f"Gaussian kernel in d={d} with tol={tol:g}: Taylor series about boxes "
        f"{2 * rho:.2g} bandwidths wide, about {terms} terms, in the boxes where it pays "
        f"(exact sums elsewhere); "
        + ("each prediction within tol * max|y|" if not moments else
           f"the moment sums of a degree-{moments} local fit within their stated bound")
        + f"; about {exact / cost:.0f}x less work than the exact sums"))
