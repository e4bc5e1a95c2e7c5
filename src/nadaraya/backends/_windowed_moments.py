"""The windowed backend's moment sums of local polynomial fits: exact sums over each window's pairs.

Used by :func:`nadaraya.backends.windowed.partials` for ``moments > 0`` only (``moments = 0``
keeps the plain routes untouched). In 1-D the sorted keys' prefix moments serve the kernels
polynomial in ``|u|`` first (:mod:`._windowed_msplit` for tricube, triangular and the even
kernels of long expansions, :mod:`._windowed_msweep` for the other even ones), then the cosine
and parzen (:mod:`._windowed_mtrig`); the queries they cannot serve, and every query of
the other kernels, are summed here pair by pair over their windows -- in 1-D the reference's
test ``|(q - x) * inv| <= 1`` by a binary search over the sorted keys (one compiled loop per
registered kernel, degree and outputs), above 1-D the k-d tree's candidate pairs. The weight
is the product of the kernel's profiles times the sample weight (as the reference makes it),
and each pair's difference ``u = k - q`` is made exactly, in float64, never about a far
origin, so nothing cancels when ``|x| >> h``. The sums are ``sum w``, ``sum w v``, ``sum w
u^(x)j`` (``j = 1 .. 2r``) and ``sum w u^(x)j (x) v`` (``j = 1 .. r``) in the order and shapes
of :func:`nadaraya.backends.reference.moment_shapes`, full tensors (symmetric entries
repeated). Cost O(pairs within the windows) (times ``d^(2r)``), plus O(m log n) for the 1-D
windows.

Examples
--------
>>> import numpy as np
>>> from nadaraya.kernels import get
>>> from nadaraya.backends import windowed
>>> x = np.array([[0.0], [1.0], [2.0]]); v = np.array([[1.0], [2.0], [4.0]])
>>> p = windowed.partials(x, x, v, kernel=get("boxcar"), bandwidth=np.array([1.0]), moments=1)
>>> [s.ravel().tolist() for s in p.moments[:2]]  # the boxcar is 1/2 on its window
[[0.5, 0.0, -0.5], [0.5, 1.0, 0.5]]
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
from numba import njit
from numpy.typing import NDArray

from nadaraya.backends import _windowed_common as _w
from nadaraya.backends import fused as _fused
from nadaraya.backends._sorted import argsort_spread
from nadaraya.backends._windowed_jit import _first
from nadaraya.backends._windowed_msplit import split_moments
from nadaraya.backends._windowed_msweep import prefix_moments
from nadaraya.backends._windowed_mtrig import trig_moments
from nadaraya.backends.reference import moment_shapes
from nadaraya.kernels import REGISTRY, Kernel
from nadaraya.partials import Partials

__all__ = ["moment_partials"]


def _columns(degree: int, d: int, p: int) -> int:
    """Columns of one query's sums: weight, values, then the moments flattened."""
    return 1 + p + sum(math.prod(s) for s in moment_shapes(degree, d, p))


@njit(cache=True, nogil=True)
def _windows(qs, xs, inv, a, b, lo, hi):  # pragma: no cover - compiled
    """The keys ``[lo, hi)`` of the windows of queries ``a:b``: the reference's test, by binary
    search over the sorted keys ``xs`` (queries, keys and ``inv`` in the data's dtype)."""
    n = xs.shape[0]
    for j in range(a, b):
        s = _first(qs[j], xs, inv, 0, n, False)
        lo[j] = s
        hi[j] = _first(qs[j], xs, inv, s, n, True)


@njit(cache=True, nogil=True)
def _pair_sums(w, q, k, v, ki, indptr, degree, a, b, out):  # pragma: no cover - compiled
    """Rows ``a:b`` of ``out`` (block queries, (B, C)): the sums over each query's pairs
    ``indptr[r]:indptr[r + 1]`` (keys ``ki``, weights ``w``) laid out as :func:`_columns` says;
    ``u = k - q`` made per pair in float64, ``w u^(x)j`` built as the reference builds it (the
    newest factor on the last axis)."""
    d = q.shape[1]
    p = v.shape[1]
    top = 2 * degree
    pw = np.empty((top + 1, d**top))
    u = np.empty(d)
    ncol = out.shape[1]
    for r in range(a, b):
        for c in range(ncol):
            out[r, c] = 0.0
        for t in range(indptr[r], indptr[r + 1]):
            wt = w[t]
            if wt == 0.0:
                continue
            i = ki[t]
            for j in range(d):
                u[j] = k[i, j] - q[r, j]
            out[r, 0] += wt
            for c in range(p):
                out[r, 1 + c] += wt * v[i, c]
            pw[0, 0] = wt
            off = 1 + p
            size = 1
            for j in range(1, top + 1):
                for e in range(size):
                    base = pw[j - 1, e]
                    for f in range(d):
                        pw[j, e * d + f] = base * u[f]
                size *= d
                for e in range(size):
                    out[r, off + e] += pw[j, e]
                off += size
            size = 1
            for j in range(1, degree + 1):
                size *= d
                for e in range(size):
                    base = pw[j, e]
                    for c in range(p):
                        out[r, off + e * p + c] += base * v[i, c]
                off += size * p


# The compact kernels' expressions of :mod:`nadaraya.backends.fused`, compiled here without
# fastmath (so they round as the registry's profiles) and chosen by a runtime ``kind``: one
# compilation, cached on disk, serves every kernel, degree and number of outputs.
_EPANECHNIKOV = njit(cache=True)(_fused._epanechnikov)
_BOXCAR = njit(cache=True)(_fused._boxcar)
_TRIANGULAR = njit(cache=True)(_fused._triangular)
_BIWEIGHT = njit(cache=True)(_fused._biweight)
_TRIWEIGHT = njit(cache=True)(_fused._triweight)
_TRICUBE = njit(cache=True)(_fused._tricube)
_COSINE = njit(cache=True)(_fused._cosine)
_PARZEN = njit(cache=True)(_fused._parzen)
#: the kernels the compiled 1-D loop knows, by name: the constant that selects each
COMPILED = {name: _fused.KINDS[name] for name in
            ("epanechnikov", "boxcar", "triangular", "biweight", "triweight", "tricube", "cosine", "parzen")}
_K_EPA, _K_BOX, _K_TRI, _K_BI, _K_TRIW, _K_TRIC, _K_COS, _K_PARZEN = COMPILED.values()


@njit(cache=True, inline="always")
def _profile(kind, u):  # pragma: no cover - compiled
    """``K(u)`` of the compact kernel ``kind`` (one of :data:`COMPILED`)."""
    if kind == _K_EPA:
        return _EPANECHNIKOV(u)
    if kind == _K_BOX:
        return _BOXCAR(u)
    if kind == _K_TRI:
        return _TRIANGULAR(u)
    if kind == _K_BI:
        return _BIWEIGHT(u)
    if kind == _K_TRIW:
        return _TRIWEIGHT(u)
    if kind == _K_TRIC:
        return _TRICUBE(u)
    if kind == _K_COS:
        return _COSINE(u)
    return _PARZEN(u)


@njit(cache=True, nogil=True)
def _one_d_loop(kind, degree, qs, xs, inv, sw, v, excl, a, b, out):  # pragma: no cover - compiled
    """1-D, a kernel of :data:`COMPILED`: rows ``a:b``, the reference's window by binary search,
    then each pair summed into the columns of :func:`_columns` (d = 1); ``sw``, ``excl`` may be
    empty."""
    n = xs.shape[0]
    p = v.shape[1]
    top = 2 * degree
    nc = out.shape[1]
    has_sw = sw.shape[0] > 0
    has_excl = excl.shape[0] > 0
    acc = np.empty(nc)
    for r in range(a, b):
        for c in range(nc):
            acc[c] = 0.0
        q = qs[r]
        lo = _first(q, xs, inv, 0, n, False)
        hi = _first(q, xs, inv, lo, n, True)
        e = excl[r] if has_excl else -1
        q64 = np.float64(q)
        for i in range(lo, hi):
            wt = _profile(kind, np.float64((q - xs[i]) * inv))
            if has_sw:
                wt *= sw[i]
            if wt == 0.0 or i == e:
                continue
            u = np.float64(xs[i]) - q64
            acc[0] += wt
            for c in range(p):
                acc[1 + c] += wt * v[i, c]
            pw = wt
            for j in range(1, top + 1):
                pw *= u
                acc[p + j] += pw
                if j <= degree:
                    for c in range(p):
                        acc[1 + p + top + (j - 1) * p + c] += pw * v[i, c]
        for c in range(nc):
            out[r, c] = acc[c]


def _block(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    k64: NDArray[np.float64],
    v64: NDArray[np.float64],
    sw: NDArray[np.float64] | None,
    kernel: Kernel,
    inv_h: NDArray[np.floating],
    local: NDArray[np.intp],
    ki: NDArray[np.intp],
    indptr: NDArray[np.intp],
    excl: NDArray[np.int64] | None,
    degree: int,
    out: NDArray[np.float64],
) -> None:
    """The sums of one block of queries (``queries`` already the block's) into ``out``."""
    from nadaraya._support.jit import run_ranges

    w = _w._pair_weights(queries, keys, kernel, inv_h, local, ki)
    if sw is not None:
        w *= sw[ki]
    if excl is not None:
        w[ki == excl[local]] = 0.0
    q64 = np.ascontiguousarray(queries, dtype=np.float64)
    run_ranges(_pair_sums, (w, q64, k64, v64, ki, indptr, degree), out.shape[0], (out,),
               work=float(ki.size) * out.shape[1])


def _one_d_blocks(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    inv_h: NDArray[np.floating],
) -> Iterator[tuple[int, int, NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]]:
    """1-D, sorted keys: blocks of queries with the pairs of their windows, as
    :func:`nadaraya.backends._w._tree_blocks` yields them."""
    from nadaraya._support.jit import run_ranges

    m = queries.shape[0]
    lo = np.empty(m, dtype=np.int64)
    hi = np.empty(m, dtype=np.int64)
    qs = np.ascontiguousarray(queries[:, 0])
    run_ranges(_windows, (qs, np.ascontiguousarray(keys[:, 0]), inv_h[0]), m, (lo, hi),
               work=m * (np.log2(keys.shape[0] + 1.0) + 4.0) * 8.0)
    for b0, b1 in _w._blocks(hi - lo, max(1, _w._working_bytes() // _w._PAIR_BYTES)):
        cnt = hi[b0:b1] - lo[b0:b1]
        indptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.intp)
        if indptr[-1] == 0:
            continue
        local = np.repeat(np.arange(b1 - b0), cnt).astype(np.intp)
        ki = (np.repeat(lo[b0:b1] - indptr[:-1], cnt) + np.arange(indptr[-1])).astype(np.intp)
        yield b0, b1, local, ki, indptr


def moment_partials(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None,
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    inv_h: NDArray[np.floating],
    exclude: NDArray[np.integer] | None,
    degree: int,
) -> Partials:
    """The windowed partials with the moment sums of a local polynomial of ``degree`` >= 1.

    Arguments as :func:`nadaraya.backends.windowed.partials` (``inv_h = 1 / bandwidth`` in the
    data's dtype); the sums are made in float64 and returned in the data's dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.array([[0.0, 0.0], [1.0, 0.0]]); v = np.ones((2, 1))
    >>> p = moment_partials(x[:1], x, v, None, get("boxcar"), np.ones(2), np.ones(2), None, 1)
    >>> p.moments[1][0].tolist()  # the key at (1, 0), with weight 1/2 * 1/2
    [[0.25, 0.0], [0.0, 0.0]]
    """
    from nadaraya._support import threads as _threads

    _threads.configure()
    m, d = queries.shape
    p = values.shape[1]
    dtype = queries.dtype
    sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    excl = None if exclude is None else np.asarray(exclude, dtype=np.int64)
    if d == 1:
        x = keys[:, 0]
        if keys.shape[0] > 1 and not bool(np.all(x[1:] >= x[:-1])):
            order = argsort_spread(x)  # O(n) where the keys are spread
            keys, values = keys[order], values[order]
            sw = None if sw is None else sw[order]
            if excl is not None:
                rank = np.empty(order.size, dtype=np.int64)
                rank[order] = np.arange(order.size)
                excl = np.where(excl >= 0, rank[np.maximum(excl, 0)], -1)
        if kernel.name in COMPILED and REGISTRY.get(kernel.name) is kernel:
            from nadaraya._support.jit import run_ranges

            qs, xs = np.ascontiguousarray(queries[:, 0]), np.ascontiguousarray(keys[:, 0])
            sw1 = np.empty(0) if sw is None else np.ascontiguousarray(sw)
            v64 = np.ascontiguousarray(values, dtype=np.float64)
            ex = np.empty(0, dtype=np.int64) if excl is None else excl
            head = (COMPILED[kernel.name], degree)
            found = split_moments(qs, xs, inv_h[0], v64, sw1, ex, kernel, float(bandwidth[0]), degree)
            if found is None:
                found = prefix_moments(qs, xs, inv_h[0], v64, sw1, ex, kernel, float(bandwidth[0]), degree)
            if found is None:
                found = trig_moments(qs, xs, inv_h[0], v64, sw1, ex, kernel, float(bandwidth[0]), degree)
            if found is None:
                out = np.zeros((m, _columns(degree, d, p)))
                run_ranges(_one_d_loop, (*head, qs, xs, inv_h[0], sw1, v64, ex), m, (out,))
                return _unpack(out.T, degree, d, p, dtype)
            cols, flag = found  # (columns, m)
            rows = np.nonzero(flag)[0]
            if rows.size:  # the queries the prefix moments could not serve: pair by pair
                sub = np.empty((rows.size, cols.shape[0]))
                ex_rows = ex[rows] if ex.size else ex
                args = (*head, qs[rows], xs, inv_h[0], sw1, v64, ex_rows)
                run_ranges(_one_d_loop, args, rows.size, (sub,))
                cols[:, rows] = sub.T
            return _unpack(cols, degree, d, p, dtype)
        blocks = _one_d_blocks(queries, keys, inv_h)
    else:
        blocks = _w._tree_blocks(queries, keys, bandwidth)
    out = np.zeros((m, _columns(degree, d, p)))
    k64 = np.ascontiguousarray(keys, dtype=np.float64)
    v64 = np.ascontiguousarray(values, dtype=np.float64)
    for b0, b1, local, ki, indptr in blocks:
        _block(queries[b0:b1], keys, k64, v64, sw, kernel, inv_h, local, ki, indptr,
               None if excl is None else excl[b0:b1], degree, out[b0:b1])
    return _unpack(out.T, degree, d, p, dtype)


def _unpack(cols: NDArray[np.float64], degree: int, d: int, p: int, dtype: np.dtype) -> Partials:
    """The columns of :func:`_columns`, ``cols`` (columns, m), as Partials in the data's dtype
    (views of ``cols`` where it is float64: no copy per field)."""
    m = cols.shape[1]
    fields, off = [], 0
    for shape in [(), (p,), *moment_shapes(degree, d, p)]:
        size = math.prod(shape)
        fields.append(np.asarray(cols[off:off + size].T.reshape((m, *shape)), dtype=dtype))
        off += size
    return Partials(np.zeros(m, dtype=dtype), fields[0], fields[1], tuple(fields[2:]))
