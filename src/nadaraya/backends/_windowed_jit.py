"""Compiled loops of the windowed backend: query buckets, exact window bounds and prefix-moment sums (numba).

Imported on first use by :mod:`nadaraya.backends.windowed`, never by ``import nadaraya``.
Everything here works on sorted 1-D keys. Two grids share the origin ``x0`` (the first key):

* the *moment cells* of width ``h``: each carries its own anchor (its centre), and the
  moments of the keys are summed *within* a cell only (a prefix and a suffix restarted at
  every cell), so no sum ever mixes keys far apart and nothing cancels when ``|x| >> h``;
* the *buckets* of width ``g = s h`` (``s >= 1`` a whole number, 1 unless the keys are so
  sparse that cells of width ``h`` would outnumber the points): the queries are sorted into
  them by a counting sort, O(m), and a query's window lies within its bucket and the two
  neighbours, which bounds its binary searches.

One task takes a run of consecutive buckets: it builds the moment tables of the keys
of those buckets and one neighbour on each side (they stay in cache), then reads each of its
queries' window sums from them and writes them straight to the query's row (no sort of the
queries, no scatter back afterwards).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: route kinds: polynomial moments ``t^j``, or the cosine pair ``cos(pi t / 2), sin(pi t / 2)``
POLYNOMIAL = 0
COSINE = 1


@njit(cache=True)
def _cell(v, x0, inv_g, ncell):  # pragma: no cover - compiled
    """Bucket cell of a float64 value: ``floor((v - x0) / g)`` clamped to ``[-1, ncell]``."""
    c = np.floor((v - x0) * inv_g)
    if not c >= -1.0:  # also NaN
        return -1
    if c >= ncell:
        return ncell
    return int(c)


@njit(cache=True)
def buckets(xs, qs, excl, x0, inv_g, ncell, qb, qsort, qidx, esort):  # pragma: no cover - compiled
    """Cell starts of the sorted keys and a counting sort of the queries into buckets.

    Returns ``cs`` (``cs[k]``: first key of cell ``>= k``, ``k = 0 .. ncell``) and ``start``
    (bucket ``b``, i.e. cell ``b - 1``, holds the sorted positions ``start[b]:start[b + 1]``;
    buckets 0 and ``ncell + 1`` hold the queries below and above the keys); fills ``qidx``
    (the query at each sorted position, int32 or int64) and ``qsort``, ``esort`` (the queries
    and their excluded keys in bucket order; ``esort`` empty when ``excl`` is). ``qb`` (m,)
    int32 is scratch. The large arrays come from the caller: NumPy backs them with huge pages,
    numba's allocator with 4 KiB pages that each fault on first touch. Each bucket is written
    sequentially, so the scatter stays in cache while buckets are few.
    """
    n = xs.shape[0]
    cs = np.empty(ncell + 1, np.int64)
    k = 0
    for i in range(n):
        c = _cell(np.float64(xs[i]), x0, inv_g, ncell)
        while k <= c:
            cs[k] = i
            k += 1
    while k <= ncell:
        cs[k] = n
        k += 1
    m = qs.shape[0]
    nbucket = ncell + 2
    start = np.zeros(nbucket + 1, np.int64)
    for j in range(m):
        b = _cell(np.float64(qs[j]), x0, inv_g, ncell) + 1
        qb[j] = b
        start[b + 1] += 1
    for b in range(nbucket):
        start[b + 1] += start[b]
    fill = start[:-1].copy()
    has_excl = excl.shape[0] > 0
    for j in range(m):
        b = qb[j]
        k = fill[b]
        qsort[k] = qs[j]
        qidx[k] = j
        if has_excl:
            esort[k] = excl[j]
        fill[b] = k + 1
    return cs, start


@njit(cache=True, nogil=True)
def unbucket(qidx, res, lo_s, hi_s, k0, k1, weight, value, flag, lo, hi):  # pragma: no cover - compiled
    """Results ``k0:k1`` from bucket order back to the queries' order (read in sequence,
    scattered: stores need not wait for their cache lines); ``flag`` and the bounds for the
    queries whose weight is NaN (left for a direct sum). Ranges are independent (each query
    is at one position), so threads take one each."""
    p = value.shape[1]
    for k in range(k0, k1):
        j = qidx[k]
        w = res[k, 0]
        weight[j] = w
        for c in range(p):
            value[j, c] = res[k, c + 1]
        if w != w:
            flag[j] = True
            lo[j] = lo_s[k]
            hi[j] = hi_s[k]


@njit(cache=True)
def plan(cs, start, ncell, target):  # pragma: no cover - compiled
    """Runs of consecutive buckets of about ``target`` keys plus queries each (task bounds)."""
    nbucket = ncell + 2
    bounds = np.empty(nbucket + 1, np.int64)
    bounds[0] = 0
    nt = 0
    acc = 0
    for b in range(nbucket):
        if 1 <= b <= ncell:
            acc += cs[b] - cs[b - 1] if b < ncell else cs[ncell] - cs[ncell - 1]
        acc += start[b + 1] - start[b]
        if acc >= target or b == nbucket - 1:
            nt += 1
            bounds[nt] = b + 1
            acc = 0
    return bounds[: nt + 1].copy()


@njit(cache=True)
def _csx(cs, k, ncell):  # pragma: no cover - compiled
    return cs[min(max(k, 0), ncell)]


@njit(cache=True, inline="always")
def _reached(q, x, inv, out):  # pragma: no cover - compiled
    """Whether the key ``x`` is inside or past the query's window (``out`` False:
    ``(q - x) * inv <= 1``, the reference's test) or past it (``out`` True: ``(q - x) * inv < -1``).
    Inlined with ``out`` a constant at every call, so the test costs no branch."""
    t = (q - x) * inv
    return t < -1.0 if out else t <= 1.0


@njit(cache=True, inline="always")
def _first(q, xs, inv, a, b, out):  # pragma: no cover - compiled
    """First ``i`` in ``[a, b)`` whose key has :func:`_reached` the window's start (``out``
    False) or its end (``out`` True), else ``b``: a binary search over sorted keys."""
    while a < b:
        mid = (a + b) >> 1
        if _reached(q, xs[mid], inv, out):
            b = mid
        else:
            a = mid + 1
    return a


@njit(cache=True)
def _first_at(target, xs, a, b, strict):  # pragma: no cover - compiled
    """First ``i`` in ``[a, b)`` with ``xs[i] > target`` (``strict``) or ``>= target``, else ``b``."""
    while a < b:
        mid = (a + b) >> 1
        v = np.float64(xs[mid])
        if v > target or (not strict and v >= target):
            b = mid
        else:
            a = mid + 1
    return a


@njit(cache=True, inline="always")
def _ok(q, xs, inv, r, out):  # pragma: no cover - compiled
    """Whether ``r`` is the first key that has :func:`_reached` the window's start or end among all keys."""
    n = xs.shape[0]
    return (r == 0 or not _reached(q, xs[r - 1], inv, out)) and (r == n or _reached(q, xs[r], inv, out))


@njit(cache=True)
def _bounds(q, xs, inv, c, cs, ncell):  # pragma: no cover - compiled
    """``lo, hi``: the keys of the query's window, searched within its bucket's neighbours and
    checked at both ends (a search over every key when rounding put the window elsewhere)."""
    n = xs.shape[0]
    lo = _first(q, xs, inv, _csx(cs, c - 1, ncell), _csx(cs, c + 1, ncell), False)
    if not _ok(q, xs, inv, lo, False):
        lo = _first(q, xs, inv, 0, n, False)
    hi = _first(q, xs, inv, max(lo, _csx(cs, c, ncell)), max(lo, _csx(cs, c + 2, ncell)), True)
    if not _ok(q, xs, inv, hi, True):
        hi = _first(q, xs, inv, lo, n, True)
    return lo, hi


@njit(cache=True)
def _near(v, base, inv_gs, look):  # pragma: no cover - compiled
    """Local key range ``[a, b)`` where the first key ``>= v`` lies, from the lookup grid (one
    grid step of slack on each side; the callers check the answer)."""
    top = look.shape[0] - 1
    f = np.floor((v - base) * inv_gs)
    if not f >= 1.0:  # also NaN
        return look[0], look[min(2, top)]
    if f >= top - 1:
        return look[top - 2 if top >= 2 else 0], look[top]
    k = int(f)
    return look[k - 1], look[k + 2]


@njit(cache=True, inline="always")
def _defer(res, lo_out, hi_out, jq, lo, hi):  # pragma: no cover - compiled
    """Leave query ``jq`` to the direct sums over its window ``[lo, hi)``: marked NaN, bounds kept."""
    res[jq, 0] = np.nan
    lo_out[jq] = lo
    hi_out[jq] = hi


@njit(cache=True, inline="always")
def _triage(res, lo_out, hi_out, jq, lo, hi, e, direct_max, k0, k1, ok):  # pragma: no cover - compiled
    """Settle query ``jq`` where its prefix moments cannot serve it, and say whether they still
    must: no key but the left-out ``e`` in ``[lo, hi)`` gives zero sums; few keys, a window
    reaching outside the tables ``[k0, k1)`` or ``ok`` False leave it to the direct sums."""
    count = hi - lo - (1 if lo <= e < hi else 0)
    if count <= 0:
        for cc in range(res.shape[1]):
            res[jq, cc] = 0.0
        return False
    if count <= direct_max or lo < k0 or hi > k1 or not ok:
        _defer(res, lo_out, hi_out, jq, lo, hi)
        return False
    return True


@njit(cache=True, inline="always")
def _running(T, i, prev, fresh, G, values, row):  # pragma: no cover - compiled
    """Row ``i`` of a running sum of the moment rows ``G`` and their value columns: ``G[i]``
    alone where a cell starts (``fresh``), else added to row ``prev`` (the prefix sums run
    forwards, the suffix sums backwards)."""
    for j in range(G.shape[1]):
        gw = G[i, j]
        base = 0.0 if fresh else T[prev, j, 0]
        T[i, j, 0] = base + gw
        for cc in range(values.shape[1]):
            base = 0.0 if fresh else T[prev, j, cc + 1]
            T[i, j, cc + 1] = base + gw * values[row, cc]


@njit(cache=True)
def _tables(xs, k0, k1, x0, h, inv_h, values, sw, nf, kind):  # pragma: no cover - compiled
    """The moment tables of keys ``k0 .. k1 - 1``: ``A`` inclusive prefixes and ``B`` inclusive
    suffixes of ``g_j(t) sw (1, v)`` within each cell, (nk, nf, 1 + p); per key the first
    (``gs``) and one past the last (``ge``) local index of its cell, its cell's centre
    (``cen``), and the running sum of the sample weights (``cw``, nk + 1)."""
    nk = k1 - k0
    p = values.shape[1]
    ncol = p + 1
    has_sw = sw.shape[0] > 0
    A = np.empty((nk, nf, ncol))
    B = np.empty((nk, nf, ncol))
    G = np.empty((nk, nf))  # g_j(t) times the sample weight
    gs = np.empty(nk, np.int64)
    ge = np.empty(nk, np.int64)
    cen = np.empty(nk)
    cw = np.empty(nk + 1)
    cw[0] = 0.0
    prev = np.nan
    centre = 0.0
    for i in range(nk):
        x = np.float64(xs[k0 + i])
        mc = np.floor((x - x0) * inv_h)
        first = i == 0 or mc != prev
        if first:
            centre = x0 + (mc + 0.5) * h
            prev = mc
        gs[i] = i if first else gs[i - 1]
        cen[i] = centre
        t = (x - centre) * inv_h
        w = sw[k0 + i] if has_sw else 1.0
        cw[i + 1] = cw[i] + w
        if kind == COSINE:
            G[i, 0] = np.cos(0.5 * np.pi * t) * w
            G[i, 1] = np.sin(0.5 * np.pi * t) * w
        else:
            gj = w
            for j in range(nf):
                G[i, j] = gj
                gj *= t
        _running(A, i, i - 1, first, G, values, k0 + i)
    for i in range(nk - 1, -1, -1):
        last = i == nk - 1 or gs[i + 1] != gs[i]
        ge[i] = i + 1 if last else ge[i + 1]
        _running(B, i, i + 1, last, G, values, k0 + i)
    return A, B, gs, ge, cen, cw


@njit(cache=True)
def _lookup(xs, k0, k1):  # pragma: no cover - compiled
    """A lookup grid over keys ``k0 .. k1 - 1``, about one key per step: ``look[k]`` is the
    first local key at or past grid line ``k`` (lines at ``base + k / inv_gs``), so a search
    starts within a few keys of its answer."""
    nk = k1 - k0
    base = np.float64(xs[k0]) if nk > 0 else 0.0
    width = np.float64(xs[k1 - 1]) - base if nk > 0 else 0.0
    nl = max(1, nk)
    inv_gs = nl / width if width > 0.0 else 0.0
    look = np.empty(nl + 2, np.int64)
    kk = 0
    for i in range(nk):
        f = np.floor((np.float64(xs[k0 + i]) - base) * inv_gs)
        gk = nl if f >= nl else int(f)
        while kk <= gk:
            look[kk] = i
            kk += 1
    while kk <= nl + 1:
        look[kk] = nk
        kk += 1
    return base, inv_gs, look


@njit(cache=True)
def _task(
    b0, b1, qs, xs, inv, x0, h, inv_h, cs, ncell, start, values, sw, excl, coef, split, kind, amp,
    breaks, direct_max, threshold, res, lo_out, hi_out,
):  # pragma: no cover - compiled
    """One run of buckets ``[b0, b1)``: moment tables of its keys (:func:`_tables`, :func:`_lookup`),
    then its queries' sums."""
    if start[b1] == start[b0]:
        return
    k0 = _csx(cs, b0 - 2, ncell)  # keys of cells b0 - 2 .. b1 (buckets b0 - 1 .. b1)
    k1 = _csx(cs, b1, ncell)
    nf = coef.shape[1]
    ncol = values.shape[1] + 1
    A, B, gs, ge, cen, cw = _tables(xs, k0, k1, x0, h, inv_h, values, sw, nf, kind)
    base, inv_gs, look = _lookup(xs, k0, k1)
    # ---- the queries
    nbreak = breaks.shape[0]
    nb = 2 * nbreak + 3 if split else 2
    bnd = np.empty(nb, np.int64)
    acc = np.empty(ncol)
    acoef = np.empty(nf)
    has_excl = excl.shape[0] > 0
    for b in range(b0, b1):
        c = b - 1
        for jq in range(start[b], start[b + 1]):
            q = qs[jq]
            q64 = np.float64(q)
            a, z = _near(q64 - h, base, inv_gs, look)
            lo = _first(q, xs, inv, k0 + a, k0 + z, False)
            a, z = _near(q64 + h, base, inv_gs, look)
            hi = _first(q, xs, inv, max(lo, k0 + a), max(lo, k0 + z), True)
            if not (_ok(q, xs, inv, lo, False) and _ok(q, xs, inv, hi, True)):
                lo, hi = _bounds(q, xs, inv, c, cs, ncell)
            e = excl[jq] if has_excl else -1
            if not _triage(res, lo_out, hi_out, jq, lo, hi, e, direct_max, k0, k1, True):
                continue
            bnd[0] = lo
            bnd[nb - 1] = hi
            if split:
                for r in range(1, nbreak + 1):  # first key >= q - b h, outermost break first
                    bnd[r] = _first_at(q64 - breaks[nbreak - r] * h, xs, lo, hi, False)
                bnd[nbreak + 1] = _first_at(q64, xs, lo, hi, True)  # first key > q
                for r in range(nbreak):  # first key > q + b h
                    bnd[nbreak + 2 + r] = _first_at(q64 + breaks[r] * h, xs, lo, hi, True)
            for cc in range(ncol):
                acc[cc] = 0.0
            for r in range(nb - 1):
                a = bnd[r]
                z = bnd[r + 1]
                cut = a <= e < z  # leave-one-out: the parts [a, e) and (e, z)
                for part in range(2 if cut else 1):
                    pos = a if part == 0 else e + 1
                    end = e if cut and part == 0 else z
                    while pos < end:
                        li = pos - k0
                        Q = (q64 - cen[li]) * inv_h
                        if kind == COSINE:
                            acoef[0] = amp * np.cos(0.5 * np.pi * Q)
                            acoef[1] = amp * np.sin(0.5 * np.pi * Q)
                        else:
                            for jj in range(nf):
                                sa = 0.0
                                for rr in range(nf - 1 - jj, -1, -1):  # Horner in Q
                                    sa = sa * Q + coef[r, jj, rr]
                                acoef[jj] = sa
                        s0 = gs[li]
                        s1 = ge[li]
                        stop = min(end - k0, s1)
                        i2 = -1  # a second row to subtract, when strictly inside a cell
                        if stop == s1:  # a suffix of the cell
                            T, i1 = B, li
                        elif li == s0:  # a prefix of the cell
                            T, i1 = A, stop - 1
                        elif stop - s0 <= s1 - li:  # strictly inside: subtract the shorter tail
                            T, i1, i2 = A, stop - 1, li - 1
                        else:
                            T, i1, i2 = B, li, stop
                        for cc in range(ncol):
                            sa = 0.0
                            for jj in range(nf):
                                mom = T[i1, jj, cc]
                                if i2 >= 0:
                                    mom -= T[i2, jj, cc]
                                sa += acoef[jj] * mom
                            acc[cc] += sa
                        pos = stop + k0
            total = cw[hi - k0] - cw[lo - k0]
            if not acc[0] > threshold * total:
                _defer(res, lo_out, hi_out, jq, lo, hi)
                continue
            for cc in range(ncol):
                res[jq, cc] = acc[cc]


@njit(cache=True, nogil=True)
def window_sums(
    t0, t1, qs, xs, inv, x0, h, inv_h, cs, ncell, start, tasks, values, sw, excl, coef, split, kind, amp,
    breaks, direct_max, threshold, res, lo_out, hi_out,
):  # pragma: no cover - compiled
    """Per query the sums ``sum_i K(u_i) sw_i (1, v_i)`` over its window, from the cell moments,
    for the tasks ``t0 .. t1 - 1`` (runs of buckets ``tasks[t] .. tasks[t + 1] - 1``). Runs
    without the GIL: threads take disjoint runs of tasks.

    The queries ``qs`` (and ``excl``, the sorted key left out of each, or empty) come in
    bucket order (see :func:`buckets`), and so do the results. ``qs``, the sorted keys ``xs``
    and ``inv = 1 / h`` share the data's dtype: the window is exactly the reference's
    ``|(q - x) * inv| <= 1``. Each part of a window (one side of the query and one
    polynomial piece, only when ``split``: kernels even in ``u`` need no split; cut once more
    around the excluded key) is cut at cell boundaries; the keys of one cell are a suffix or
    a prefix of the cell, read without subtraction (only a range strictly inside one cell
    subtracts, and then the shorter of the two tails). The moments are weighted by
    ``a_j(Q)``, ``Q = (q - centre) / h``: a Horner evaluation of ``coef[r, j]`` (or the
    cosine pair). ``sw`` may be empty (unit sample weights).

    Writes ``res`` (m, 1 + p): the weight sum then the weighted value sums, with a NaN weight
    for the queries left for an exact direct sum and their bounds in ``lo_out``/``hi_out``: windows
    of at most ``direct_max`` keys, and windows whose weight sum is below ``threshold * sum
    of sample weights`` (there the expansion could lose digits).
    """
    for t in range(t0, t1):
        _task(tasks[t], tasks[t + 1], qs, xs, inv, x0, h, inv_h, cs, ncell, start, values, sw, excl,
              coef, split, kind, amp, breaks, direct_max, threshold, res, lo_out, hi_out)
