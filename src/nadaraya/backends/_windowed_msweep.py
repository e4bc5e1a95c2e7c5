"""The windowed backend's moment sums in 1-D from prefix moments: the sweep with more powers (numba).

For a kernel that is one polynomial even in ``u`` (boxcar, epanechnikov, biweight, triweight)
``K(u) (k - q)^a = h^a sum_d c_d (t - Q)^(d + a)`` with ``t = (k - centre) / h`` and ``Q = (q -
centre) / h`` about the centre of the query's cell: a polynomial in ``t`` whose coefficients
are polynomials in ``Q``. So the sweep of :mod:`._windowed_sweep` (prefix moments of the keys of
a cell and its two neighbours, ``|t| <= 3/2``, ``|Q| <= 1/2``, window edges walked over sorted
queries) serves the moment sums with ``2 r`` more powers of ``t``. The expansion loses digits
when a sum is small against the prefix it is read from; besides the weight's test of the plain
sweep, each moment is checked against a lower bound of its *natural size* (``sum w |u|^a [|v|]``,
bounded below by the even power ``sum w u^(a + a mod 2) [|v|] / h``, read from the same
tables with ``|v|`` columns) and the query is left for the exact pair sums when the bound
says the expansion could lose more than ``_LOSS`` of it. Queries are triaged as in the sweep.
The tables are compensated (Kahan) running sums, so their rounding does not grow with the
number of keys in a cell. What the test guarantees: a served moment's natural size is at least
``_LOSS = 2^-12`` of the bound on the terms it is computed from, so a rounding of ``k`` ulps
of that bound is at most ``k 2^-53 / 2^-12 = k 2^-41`` (``k`` times 4.5e-13) of its natural
size. The tests hold every served moment to 1e-12 of it, which the arithmetic's measured
rounding meets: 2e4 to 2e5 keys, up to 2000 keys a cell, keys near 0 and near 1e6, within
5e-14; at queries planted at the test's edge (``tests/backends/test_windowed_moment_loss.py``),
within 1.2e-13.
(Biweight and triweight moments of degree 2, and about 60% of triweight's of degree 1, fail
the test: those kernels and degrees go to :mod:`._windowed_msplit`'s even sweep, whose tables
are summed outwards from the cell's centre and whose bound is the query's own.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from numba import njit
from numpy.typing import NDArray

from nadaraya.backends._windowed_jit import _bounds, _csx, _triage
from nadaraya.backends._windowed_sweep import _scatter, _sort_bucket, _store, _walk
from nadaraya.kernels import Kernel

__all__ = ["expansion", "prefix_moments"]

#: a moment whose lower bound of natural size is below this part of the worst-case size of its
#: expansion's terms is summed pair by pair: the plain route's rule (:data:`.windowed._LOSS`),
#: so a rounding of ``k`` ulps of those terms is at most ``k 2^-41`` of the natural size (the
#: module docstring says what is measured)
_LOSS = 2.0**-12


def expansion(kernel: Kernel, degree: int) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """``coef[a, j, s]``: the weight of ``t^j`` in ``K(u) (t - Q)^a`` is ``sum_s coef[a, j, s] Q^s``
    (``a = 0 .. 2 degree``), and the guard factors ``g[a]`` (the expansion's worst factor,
    ``max_Q sum_j |coef_j(Q)| (3/2)^j``, times :data:`_LOSS`); None unless the kernel is one
    polynomial even in ``u``.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> coef, g = expansion(get("boxcar"), 1)
    >>> coef[1, :2, :2].tolist()  # (t - Q) / 2
    [[0.0, -0.5], [0.5, 0.0]]
    """
    if kernel.polynomial is None:
        return None
    found = _expansion(tuple(kernel.polynomial), degree)
    return None if found is None else found[:2]


@functools.cache
def _expansion(polynomial: tuple[float, ...], degree: int) -> tuple[NDArray[np.float64], ...] | None:
    """:func:`expansion`'s tables and the weight's threshold of the sweep, made once per kernel
    and degree (a call reads them, never writes)."""
    from nadaraya.backends._windowed_common import _sweep_threshold

    c = np.asarray(polynomial, dtype=float)
    if np.any(c[1::2] != 0.0):
        return None
    nf = c.size + 2 * degree
    coef = np.zeros((2 * degree + 1, nf, nf))
    for a in range(2 * degree + 1):
        for deg, cd in enumerate(c):
            k = deg + a  # (t - Q)^k = sum_j C(k, j) t^j (-Q)^(k - j)
            for j in range(k + 1):
                coef[a, j, k - j] += cd * math.comb(k, j) * (-1.0) ** (k - j)
    qgrid = np.linspace(-0.5, 0.5, 101)
    powers = qgrid[:, None] ** np.arange(nf)[None, :]
    bound = 1.5 ** np.arange(nf)
    worst = np.array([np.max(np.abs(powers @ coef[a].T) @ bound) for a in range(2 * degree + 1)])
    return coef, worst * _LOSS, np.array(_sweep_threshold(coef[0]))


@njit(cache=True, inline="always")
def _table(T, comp, xs, k0, k1, centre, inv_h, sw, values, nf, p, nv, na):  # pragma: no cover - compiled
    """Rows ``1 .. k1 - k0`` of ``T``: running sums of ``sw t^j (1, v, |v|)`` over the keys
    ``k0 .. k1 - 1`` (``t`` about ``centre``), those of ``1`` and ``v`` compensated (Kahan), so
    their rounding does not grow with the keys (the ``|v|`` sums only size the guards); row 0
    zero; ``nf`` powers of the weight, ``nv`` of each ``v``, ``na`` of each ``|v|`` (the others
    unset: never read). ``comp`` (nf, 1 + 2 p) is scratch; ``nf``, ``p``, ``nv``, ``na`` are the
    callers' compile-time constants (the function is inlined), so the loops over them unroll."""
    has_sw = sw.shape[0] > 0
    for j in range(nf):
        for cc in range(1 + 2 * p):
            T[0, j, cc] = 0.0
            comp[j, cc] = 0.0
    for i in range(k1 - k0):
        t = (np.float64(xs[k0 + i]) - centre) * inv_h
        gj = sw[k0 + i] if has_sw else 1.0
        for j in range(nf):
            for cc in range(1 + p):
                if cc == 0 or j < nv:
                    y = gj if cc == 0 else gj * values[k0 + i, cc - 1]
                    y -= comp[j, cc]
                    tot = T[i, j, cc] + y
                    comp[j, cc] = (tot - T[i, j, cc]) - y
                    T[i + 1, j, cc] = tot
            if j < na:
                for cc in range(p):
                    T[i + 1, j, 1 + p + cc] = T[i, j, 1 + p + cc] + gj * abs(values[k0 + i, cc])
            gj *= t


@functools.cache
def moment_sweep(nf: int, p: int, degree: int) -> Callable[..., None]:
    """The sweep for ``nf`` powers of ``t``, ``p`` outputs and a polynomial ``degree`` (closure
    constants). Results per query in ``out`` (m, columns), in the queries' order (``qidx``: the
    query at each bucket position; ``qs`` and ``excl`` in the buckets' order): ``1 + p + 2
    degree + degree p`` columns as :func:`nadaraya.backends._windowed_moments._columns` lays
    them out for d = 1, a NaN weight for a query left to the pair sums."""
    NF = nf
    P = p
    R = degree
    NC = 1 + 2 * p  # the tables' columns: 1, v, |v|
    D = nf - 1 - 2 * degree  # the kernel's degree (even)
    TRIM = degree == 1  # only the powers read: v to the degree, |v| the guards' (measured faster at 1 only)
    NV, NS = (D + R + 1, min(NF, D + 3)) if TRIM else (NF, NF)

    @njit(cache=True, nogil=True)
    def sweep(t0, t1, qs, xs, inv, x0, h, inv_h, cs, ncell, start, tasks, values, sw, excl, coef, guard,
              direct_max, threshold, qidx, out):  # type: ignore[no-untyped-def]  # pragma: no cover
        has_excl = excl.shape[0] > 0
        nqmax = 1
        nkmax = 1
        for b in range(tasks[t0], tasks[t1]):
            nqmax = max(nqmax, start[b + 1] - start[b])
            nkmax = max(nkmax, _csx(cs, b + 1, ncell) - _csx(cs, b - 2, ncell))
        lq = np.empty(nqmax, qs.dtype)
        res = np.empty((nqmax, out.shape[1]))  # a bucket's rows, then scattered
        lo_out = np.empty(nqmax, np.int64)
        hi_out = np.empty(nqmax, np.int64)
        lp = np.empty(nqmax, np.int64)
        cnt = np.empty(nqmax + 1, np.int64)
        T = np.empty((nkmax + 1, NF, NC))
        M = np.empty((NF, NC))
        comp = np.empty((NF, NC))
        A = np.empty((2 * R + 1, NF))
        S = np.empty((2 * R + 1, NC))
        for b in range(tasks[t0], tasks[t1]):
            j0 = start[b]
            j1 = start[b + 1]
            if j0 == j1:
                continue
            c = b - 1
            _sort_bucket(qs, j0, j1, x0 + c * h, inv_h, lq, lp, cnt)
            k0 = _csx(cs, c - 1, ncell)
            k1 = _csx(cs, c + 2, ncell)
            centre = x0 + (c + 0.5) * h
            _table(T, comp, xs, k0, k1, centre, inv_h, sw, values, NF, P, NV, NS)
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
                    glo, ghi = _bounds(q, xs, inv, c, cs, ncell)
                e = excl[jq] if has_excl else -1
                Q = (np.float64(q) - centre) * inv_h
                if not _triage(res, lo_out, hi_out, r, glo, ghi, e, direct_max, k0, k1,
                               abs(Q) <= 0.5 + 2.0**-20):
                    continue
                a = glo - k0
                z = ghi - k0
                ea = e - k0
                if not TRIM:
                    inside = glo <= e < ghi
                    for j in range(NF):
                        for cc in range(NC):
                            if inside:
                                M[j, cc] = (T[ea, j, cc] - T[a, j, cc]) + (T[z, j, cc] - T[ea + 1, j, cc])
                            else:
                                M[j, cc] = T[z, j, cc] - T[a, j, cc]
                elif glo <= e < ghi:
                    for j in range(NF):
                        for cc in range(NC):
                            if cc == 0 or (cc <= P and j < NV) or (cc > P and j < NS):
                                M[j, cc] = (T[ea, j, cc] - T[a, j, cc]) + (T[z, j, cc] - T[ea + 1, j, cc])
                else:
                    for j in range(NF):
                        for cc in range(NC):
                            if cc == 0 or (cc <= P and j < NV) or (cc > P and j < NS):
                                M[j, cc] = T[z, j, cc] - T[a, j, cc]
                Q2 = Q * Q
                for aa in range(2 * R + 1):
                    # t^jj's weight in K(u) (t - Q)^aa: powers Q^(d + aa - jj), d even, so a
                    # Horner in Q^2 of the terms of one parity (the others are zero)
                    for jj in range(min(NF, D + aa + 1)):
                        p0 = (aa - jj) & 1
                        sa = 0.0
                        for ss in range((D + aa - jj - p0) // 2, -1, -1):
                            sa = sa * Q2 + coef[aa, jj, p0 + 2 * ss]
                        A[aa, jj] = sa * Q if p0 else sa
                    for cc in range(NC if TRIM or aa <= R + 1 else 1):  # value columns only as far as used
                        if not TRIM or cc == 0 or (cc <= P and aa <= R) or (cc > P and (aa == 0 or aa == 2)):
                            sa = 0.0
                            for jj in range(min(NF, D + aa + 1)):
                                sa += A[aa, jj] * M[jj, cc]
                            S[aa, cc] = sa
                # guards: the weight as the plain sweep's, then each moment against the even
                # power at or above it (a lower bound of its natural size, in units of h)
                ok = S[0, 0] > threshold * T[z, 0, 0]
                for aa in range(1, 2 * R + 1):
                    ok = ok and S[aa + (aa & 1), 0] >= guard[aa] * T[z, 0, 0]
                for aa in range(R + 1):
                    for cc in range(P):
                        ok = ok and S[aa + (aa & 1), 1 + P + cc] >= guard[aa] * T[z, 0, 1 + P + cc]
                if not ok:
                    res[r, 0] = np.nan
                    lo_out[r] = glo
                    hi_out[r] = ghi
                    continue
                _store(res, r, S, h, P, R)
            _scatter(out, res, lp, qidx, j1 - j0)

    return sweep  # type: ignore[no-any-return]


def prefix_moments(
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
    """The moment columns of every query from prefix moments, or None where this route does not
    apply (see the module docstring): ``(out, flag)``, ``out`` (columns, m) one row per column
    of :func:`nadaraya.backends._windowed_moments._columns`, ``flag`` the queries left for the
    pair sums (their entries of ``out`` unset). ``xs`` sorted; ``sw``, ``excl`` may be empty.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.linspace(0.0, 1.0, 2001)
    >>> out, flag = prefix_moments(np.array([0.5]), x, 1.0 / 0.1, x[:, None], np.empty(0),
    ...                            np.empty(0, dtype=np.int64), get("epanechnikov"), 0.1, 1)
    >>> bool(flag[0]), abs(float(out[2, 0])) < 1e-12  # the first moment of a symmetric window
    (False, True)
    """
    from nadaraya.backends._windowed_common import DIRECT_MAX_KEYS

    found = None if kernel.polynomial is None else _expansion(tuple(kernel.polynomial), degree)
    if found is None or xs.shape[0] <= DIRECT_MAX_KEYS:
        return None
    coef, guard, threshold = found
    loop = moment_sweep(coef.shape[1], values.shape[1], degree)
    return run(q, xs, inv, values, sw, excl, h, degree, coef.shape[1], loop,
               (coef, guard, DIRECT_MAX_KEYS, float(threshold)))


def run(
    q: NDArray[np.floating],
    xs: NDArray[np.floating],
    inv: np.floating,
    values: NDArray[np.float64],
    sw: NDArray[np.float64],
    excl: NDArray[np.int64],
    h: float,
    degree: int,
    nf: int,
    loop: Callable[..., None],
    middle: tuple[object, ...],
    div: int = 1,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]] | None:
    """The driver of a moment sweep ``loop`` over ``nf`` powers of ``t``: query buckets of
    width ``h / div``, tasks run by threads, each bucket's results scattered to their queries'
    columns, as :func:`prefix_moments` returns them; ``middle``: the loop's own arguments
    between ``excl`` and ``qidx``. None where the keys are too sparse for cells of width ``h``."""
    import numba

    from nadaraya.backends import _windowed_jit as jit
    from nadaraya.backends._windowed_common import _TABLE_BYTES, _working_bytes

    m, n, p = q.shape[0], xs.shape[0], values.shape[1]
    inv_h = 1.0 / h
    x0 = float(xs[0])
    span = (float(xs[-1]) - x0) * inv_h
    if not span < 2.0**50 or math.ceil(span / (2.0 * (n + m))) > 1:  # as the plain sweep: cells of h
        return None
    ncell = math.floor(span * div) + 1
    qsort = np.empty_like(q)
    qidx = np.empty(m, dtype=np.int32 if m < 2**31 else np.int64)
    esort = np.empty_like(excl)
    cs, start = jit.buckets(xs, q, excl, x0, inv_h * div, ncell, np.empty(m, dtype=np.int32), qsort, qidx,
                            esort)
    ncol = 1 + p + 2 * degree + degree * p
    per_key = 8 * (nf * (1 + 2 * p) + 6)
    keys_per_task = max(64, min(_working_bytes(), _TABLE_BYTES) // per_key)
    threads = numba.get_num_threads()
    target = int(min(keys_per_task * (1.0 + m / max(n, 1)), max(256, (n + m) // (4 * threads))))
    tasks = jit.plan(cs, start, ncell, max(1, target))
    out = np.empty((m, ncol))  # a row per query, each written once
    args = (qsort, xs, inv, x0, h, inv_h, cs, ncell, start, tasks, values, sw, esort, *middle, qidx, out)
    from nadaraya._support.jit import run_ranges

    # the shared pool, as the plain sweep; a small pass stays on the calling thread (SERIAL_WORK):
    # the plain sweep's measured work per key, query and column, times the moment columns
    work = 16.0 * (n + m) * ncol * math.log2(n + 2)
    run_ranges(lambda t0, t1: loop(t0, t1, *args), (), tasks.size - 1, (), grain=1, work=work)
    # the columns are views of the rows (no transposed copy: the local fit reads each query's
    # row, one cache line, in sequence)
    cols = out.T
    flag = np.isnan(cols[0])
    return cols, flag
