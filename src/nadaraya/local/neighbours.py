"""Nearest-neighbour bandwidths (R np's ``generalized_nn`` and ``adaptive_nn``): the k-th distances
and the exact local fits they give, as rows of the linear smoother.

The rules (np's C code, ``kernelb.c`` and ``statmods.c``; docs/local.md says more):

- Each continuous feature ``l`` has its own ``k_l`` and its own bandwidth, the distance to the
  ``k_l``-th nearest key *in that feature alone* (np's product kernel). Duplicates count one by
  one; a distance of 0 (duplicates fill ``k``) becomes the distance to the nearest key that
  differs.
- ``generalized_nn``: the bandwidth belongs to the query, ``h_l(q)``; the weight of key ``j`` is
  ``s_j prod_l K((x_jl - q_l) / h_l(q))``. Leave-one-out at ``x_i``: the ``k``-th nearest of the
  *other* keys.
- ``adaptive_nn``: the bandwidth belongs to the key, ``h_jl`` the distance from ``x_jl`` to its
  ``k``-th nearest other key; the weight is ``s_j prod_l K((x_jl - q_l) / h_jl) / h_jl``.
  Leave-one-out at ``x_i``: each other key's bandwidth is recomputed without ``x_i`` (np's exact
  delete-one rule: its ``(k + 1)``-th distance where ``x_i`` was among its ``k`` nearest).

The fit at ``q`` is the weighted local polynomial of the degree, solved exactly per query from
the weights (a singular system falls back to degree 0, an empty window follows ``empty``); its
row ``a(q)`` over the keys gives the prediction ``a(q) @ y``, the variance ``sum a^2 sigma^2 / s``
and the hat diagonal. Cost: O(m n d P^2) for m queries (``P`` the polynomial's terms), in blocks;
:func:`predictions` in one dimension with a kernel of bounded support takes each query's window
of keys only (:func:`window_rows`), O(m k P^2).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya.kernels import Kernel
from nadaraya.local.solve import monomials

__all__ = ["TYPES", "Geometry", "as_bandwidth_type", "as_k", "predictions", "rows", "window_rows"]

#: np's names: a fixed bandwidth, or the k-th nearest neighbour's distance per query or per key
TYPES = ("fixed", "generalized_nn", "adaptive_nn")

_F = NDArray[np.float64]
_BLOCK_BYTES = 32 * 2**20


def as_bandwidth_type(value: Any) -> str:
    """``bandwidth_type`` checked: one of ``"fixed"``, ``"generalized_nn"``, ``"adaptive_nn"`` (``TYPES``).

    Examples
    --------
    >>> as_bandwidth_type("adaptive_nn")
    'adaptive_nn'
    """
    if not isinstance(value, str) or value not in TYPES:
        names = ", ".join(map(repr, TYPES))
        raise ValueError(f"bandwidth_type={value!r} is not valid; choose one of {names}")
    return value


def as_k(bandwidth: Any, n: int, d: int, kind: str) -> NDArray[np.int64]:
    """The number of neighbours per feature from ``bandwidth``: an integer ``k`` (1 to ``n``;
    ``n - 1`` for ``adaptive_nn``, whose keys count only the others), or a fraction of ``n`` in
    (0, 1] (``k = int(frac n + 1e-10)``, at least 1, statsmodels' span), one value or one per
    feature.

    Examples
    --------
    >>> as_k(0.3, 100, 1, "generalized_nn").tolist(), as_k(7, 100, 2, "adaptive_nn").tolist()
    ([30], [7, 7])
    """
    top = n if kind == "generalized_nn" else n - 1
    raw = bandwidth if isinstance(bandwidth, (list, tuple, np.ndarray)) else [bandwidth] * d
    if len(raw) != d:
        raise ValueError(f"bandwidth must be one value or {d} (one per feature) with "
                         f"bandwidth_type={kind!r}; got {len(raw)}")
    out = np.empty(d, dtype=np.int64)
    for j, v in enumerate(raw):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or not np.isfinite(v) or v <= 0:
            raise ValueError(f"bandwidth with bandwidth_type={kind!r} is a number of neighbours k (an "
                             f"integer from 1 to {top}), a fraction of n in (0, 1], 'cv' or 'aicc'; "
                             f"got {v!r}")
        if isinstance(v, numbers.Integral):
            k = int(v)
        elif float(v) <= 1.0:
            k = max(int(float(v) * n + 1e-10), 1)
        elif float(v).is_integer():
            k = int(v)
        else:
            raise ValueError(f"bandwidth={v!r} with bandwidth_type={kind!r}: a fraction must be in (0, 1] "
                             "and a number of neighbours a whole number")
        if k > top:
            raise ValueError(f"bandwidth={v!r} with bandwidth_type={kind!r} asks for {k} neighbours of {n} "
                             f"training points; at most {top}")
        out[j] = k
    return out


def _radius(s: _F, q: _F, k: NDArray[np.int64]) -> tuple[_F, _F]:
    from nadaraya.local import _nn_jit  # numba: loaded on first use, not by ``import nadaraya``

    out = np.empty(q.shape[0])
    side = np.empty(q.shape[0])
    _nn_jit.kth_radius(s, np.ascontiguousarray(q, dtype=np.float64), k, out, side)
    return out, side


@dataclass
class Geometry:
    """The nearest-neighbour bandwidths of training keys ``X`` (n, d) with ``k`` per feature."""

    X: _F
    k: NDArray[np.int64]
    kind: str

    def __post_init__(self) -> None:
        self.X = np.ascontiguousarray(self.X, dtype=np.float64)
        self.sorted = [np.sort(self.X[:, j]) for j in range(self.X.shape[1])]
        if self.kind == "adaptive_nn":  # each key's k-th and (k+1)-th nearest other key, raw
            self.primary = self._at_keys(1, zero_rule=False)
            self.successor = self._at_keys(2, zero_rule=False)
            self.nearest = self._at_keys(-1, zero_rule=True)  # the zero rule's distance

    def _at_keys(self, extra: int, zero_rule: bool) -> _F:
        """Per key and feature: its (k + extra)-th distance counting itself (its k-th other for
        ``extra=1``), or with ``extra=-1`` the distance to the nearest key that differs."""
        n, d = self.X.shape
        out = np.empty((n, d))
        for j in range(d):
            s, x = self.sorted[j], self.X[:, j]
            if extra < 0:
                out[:, j], _ = _radius(s, x, np.ones(n, dtype=np.int64))  # 1st is itself: zero rule
                continue
            from nadaraya.local import _nn_jit

            kk = np.full(n, min(int(self.k[j]) + extra, n), dtype=np.int64)
            a = np.searchsorted(s, x, side="left")
            r = np.empty(n)
            for i in range(n):  # np's bisection without the zero rule
                r[i] = _nn_jit._kth(s, a[i], x[i], kk[i])[0]
            out[:, j] = r
        return out

    def query_h(self, Q: _F, loo: bool = False) -> tuple[_F, _F]:
        """``generalized_nn``: the bandwidth at each query (m, d) and its derivative in ``q``
        (+1 or -1); ``loo``: the queries are the keys, each one's own row left out."""
        m, d = Q.shape
        h, side = np.empty((m, d)), np.empty((m, d))
        for j in range(d):
            k = np.full(m, int(self.k[j]) + (1 if loo else 0), dtype=np.int64)
            h[:, j], side[:, j] = _radius(self.sorted[j], Q[:, j], k)
        return h, side

    def key_h(self) -> _F:
        """``adaptive_nn``: each key's bandwidth (n, d), with the zero rule."""
        return np.where(self.primary > 0, self.primary, self.nearest)

    def donor_h(self, rows: NDArray[np.intp]) -> _F:
        """``adaptive_nn`` leave-one-out: the keys' bandwidths (len(rows), n, d) with key
        ``rows[b]`` left out (np's delete-one rule, then the zero rule)."""
        dist = np.abs(self.X[None, :, :] - self.X[rows][:, None, :])
        h = np.where(dist <= self.primary[None], self.successor[None], self.primary[None])
        return np.where(h > 0, h, self.nearest[None])


def _kernel_parts(kernel: Kernel, U: _F, slopes: bool) -> tuple[_F, _F | None]:
    """``K(u)`` and (``slopes``) ``dK / du`` elementwise; a compact kernel is evaluated on its
    support only."""
    if np.isfinite(kernel.support):
        inside = np.abs(U) <= kernel.support
        K = np.zeros_like(U)
        K[inside] = kernel.profile(U[inside])
    else:
        inside = None
        K = np.asarray(kernel.profile(U), dtype=np.float64)
    if not slopes:
        return K, None
    if kernel.derivative is None:
        return K, np.zeros_like(U)
    if inside is not None:
        dK = np.zeros_like(U)
        dK[inside] = kernel.derivative(U[inside])
    else:
        dK = np.asarray(kernel.derivative(U), dtype=np.float64)
    return K, dK * K if kernel.log_domain else dK


def rows(
    geom: Geometry, Q: _F, sw: _F | None, kernel: Kernel, degree: int, *, loo: bool = False,
    slopes: bool = False, empty: str = "nearest", own: NDArray[np.intp] | None = None,
) -> Iterator[tuple[slice, _F, _F | None, int]]:
    """The smoother's rows at the queries ``Q`` (m, d) in blocks: ``(rows, A, G, singular)``
    with ``A`` (B, n) the effective weights of the fit, ``G`` (B, d, n) those of its slopes
    (``slopes``; NaN where the fit fell back to degree 0 at degree >= 1) and the count of
    singular systems. ``loo``: ``Q`` is the keys and each row leaves its own key out (or the
    queries are the keys ``own`` and each leaves that one out)."""
    X = geom.X
    n, d = X.shape
    s = np.ones(n) if sw is None else np.asarray(sw, dtype=np.float64)
    basis = monomials(degree, d)
    P = len(basis)
    B = max(1, min(Q.shape[0], _BLOCK_BYTES // (8 * n * max(P, d) * 4)))
    adaptive = geom.kind == "adaptive_nn"
    kh = geom.key_h() if adaptive else None
    scale = np.median(kh, axis=0) if adaptive else None
    own = np.arange(Q.shape[0]) if own is None else own
    for start in range(0, Q.shape[0], B):
        sl = slice(start, min(start + B, Q.shape[0]))
        q = Q[sl]
        if adaptive:
            H = geom.donor_h(own[sl]) if loo else np.broadcast_to(kh, (q.shape[0], n, d))
            side = None
            Z = (X[None] - q[:, None, :]) / scale
        else:
            hq, side = geom.query_h(q, loo=loo)
            H = np.broadcast_to(hq[:, None, :], (q.shape[0], n, d))
            Z = (X[None] - q[:, None, :]) / hq[:, None, :]
        U = (X[None] - q[:, None, :]) / H
        K, dK = _kernel_parts(kernel, U, slopes and degree == 0)
        if adaptive:
            K, dK = K / H, None if dK is None else dK / H
        W = s * np.prod(K, axis=2)
        if loo:
            W[np.arange(q.shape[0]), own[sl]] = 0.0
        A, G, bad = _solve(W, Z, basis, degree, slopes, scale, H[:, 0, :] if not adaptive else None)
        if slopes and degree == 0:
            G = _nw_slopes(W, K, dK, s, U, H, side, A, loo, own[sl])
        _fill_empty(A, G, W, U, s, empty, loo, own[sl])
        yield sl, A, G, bad


def _solve(W: _F, Z: _F, basis: list[tuple[int, ...]], degree: int, slopes: bool, scale: _F | None,
           hq: _F | None) -> tuple[_F, _F | None, int]:
    """Rows of the fits (and slopes) of the local polynomial with weights ``W`` (B, n)."""
    from nadaraya.local._nn_jit import COND_MAX
    Bq, n, d = Z.shape
    tot = W.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        A0 = W / tot[:, None]
    G = np.full((Bq, d, n), np.nan) if slopes else None
    if degree == 0:
        return A0, G, 0
    Phi = np.empty((Bq, n, len(basis)))
    for t, mono in enumerate(basis):
        Phi[:, :, t] = 1.0
        for f in mono:
            Phi[:, :, t] *= Z[:, :, f]
    R = Phi * W[:, :, None]
    M = np.matmul(R.transpose(0, 2, 1), Phi)
    ok = tot > 0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        cond = np.full(Bq, np.inf)
        if ok.any():
            cond[ok] = np.linalg.cond(M[ok])
    good = ok & (cond < COND_MAX)
    A = A0.copy()
    if good.any():
        Minv = np.linalg.inv(M[good])
        Rg = R[good]
        A[good] = np.matmul(Rg, Minv[:, :, :1])[:, :, 0]
        if slopes:
            per = (1.0 / scale)[None, :] if scale is not None else 1.0 / hq[good]  # type: ignore[index]
            for f in range(d):
                G[good, f, :] = np.matmul(Rg, Minv[:, :, 1 + f : 2 + f])[:, :, 0] * np.reshape(  # type: ignore[index]
                    np.broadcast_to(per, (int(good.sum()), d))[:, f], (-1, 1))
    return A, G, int((ok & ~good).sum())


def _nw_slopes(W: _F, K: _F, dK: Any, s: _F, U: _F, H: _F, side: _F | None, A: _F, loo: bool,
               own: NDArray[np.intp]) -> _F:
    """Rows of the derivative of the Nadaraya-Watson ratio in ``q``: ``sum_j dw_j (y_j - f) / sum w``
    (``generalized_nn``: ``h(q)`` moves with ``q`` too, ``dh/dq = side``)."""
    Bq, n, d = U.shape
    tot = W.sum(axis=1)
    G = np.empty((Bq, d, n))
    for f in range(d):
        others = np.prod(np.delete(K, f, axis=2), axis=2) if d > 1 else np.ones((Bq, n))
        du = -1.0 / H[:, :, f] if side is None else (-1.0 - U[:, :, f] * side[:, None, f]) / H[:, :, f]
        dw = s * others * dK[:, :, f] * du
        if loo:
            dw[np.arange(Bq), own] = 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            G[:, f, :] = (dw - A * dw.sum(axis=1, keepdims=True)) / tot[:, None]
    return G


def _fill_empty(A: _F, G: _F | None, W: _F, U: _F, s: _F, empty: str, loo: bool,
                own: NDArray[np.intp]) -> None:
    """Rows with no key of positive weight: ``empty`` (the nearest keys in ``u``, NaN, the mean)."""
    rows_ = np.flatnonzero(~(W.sum(axis=1) > 0))
    if rows_.size == 0:
        return
    if empty == "raise":
        raise ValueError(f"{rows_.size} queries have no training point of positive weight in their window "
                         "(empty='raise')")
    for b in rows_:
        if empty == "nan":
            A[b] = np.nan
        elif empty == "mean":
            A[b] = s / s.sum()
        else:
            dist = np.sqrt((U[b] ** 2).sum(axis=1))
            if loo:
                dist[own[b]] = np.inf
            near = (dist == dist.min()).astype(float)
            w = near * s
            A[b] = w / w.sum() if w.sum() > 0 else near / near.sum()
            if loo:
                A[b, own[b]] = 0.0
        if G is not None:
            G[b] = np.nan if empty == "nan" else 0.0


def _windows(geom: Geometry, Q: _F, loo: bool, support: float) -> tuple[NDArray[np.intp], NDArray[np.intp],
                                                                       NDArray[np.intp]]:
    """One dimension, a kernel of bounded ``support``: each query's keys of possibly positive
    weight, ``order[lo:hi]`` (``order`` sorts the keys). ``generalized_nn``: the keys within
    ``support h(q)`` of the query. ``adaptive_nn``: the keys ``j`` with ``|x_j - q| <= support
    h_j``, bounded by running extremes of ``x_j -+ support h_j`` over the sorted keys (with the
    delete-one rule's larger ``h_j`` for ``loo``). The bounds are widened by 1e-9 of the radius:
    a key in them but outside the support gets the exact 0 the dense rows give it."""
    x = geom.X[:, 0]
    order = np.argsort(x, kind="stable")
    xs = x[order]
    q = Q[:, 0]
    c = support * (1.0 + 1e-9)
    if geom.kind == "generalized_nn":
        h = geom.query_h(Q, loo=loo)[0][:, 0] * c
        return order, np.searchsorted(xs, q - h, side="left"), np.searchsorted(xs, q + h, side="right")
    hk = geom.key_h()[:, 0]
    if loo:
        hk = np.maximum(hk, np.maximum(geom.successor[:, 0], geom.nearest[:, 0]))
    hk = hk[order] * c
    right = np.maximum.accumulate(xs + hk)  # the first key reaching q from the left
    left = np.minimum.accumulate((xs - hk)[::-1])[::-1]  # the last key reaching q from the right
    return order, np.searchsorted(right, q, side="left"), np.searchsorted(left, q, side="right")


def window_rows(
    geom: Geometry, Q: _F, sw: _F | None, kernel: Kernel, degree: int, *, loo: bool = False,
) -> Iterator[tuple[slice, _F, NDArray[np.intp], int, NDArray[np.intp]]] | None:
    """:func:`rows` in one dimension for a kernel of bounded support, over each query's window of
    keys only: ``(rows, A, idx, singular, empty)`` with ``A`` (B, L) the weights of keys ``idx``
    (B, L; padding carries weight 0) and ``empty`` the rows whose window holds no positive
    weight (the caller takes those from :func:`rows`). The same arithmetic as :func:`rows` on
    the keys whose weight can be positive: O(m k P^2) instead of O(m n P^2). None where it does
    not apply (more features, an unbounded kernel, windows over half the keys).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> geom = Geometry(np.linspace(0.0, 1.0, 50)[:, None], np.array([5]), "generalized_nn")
    >>> sl, A, idx, singular, empty = next(window_rows(geom, np.array([[0.51]]), None, get("tricube"), 1))
    >>> A.shape, sorted(idx[0].tolist()), singular, empty.size  # the 5 nearest keys
    ((1, 5), [23, 24, 25, 26, 27], 0, 0)
    """
    X = geom.X
    n, d = X.shape
    if d != 1 or not np.isfinite(kernel.support) or Q.shape[0] == 0:
        return None
    order, lo, hi = _windows(geom, Q, loo, float(kernel.support))
    width = hi - lo
    widest = int(width.max())
    if widest > n // 2:
        return None
    return _window_blocks(geom, Q, sw, kernel, degree, loo, order, lo, width, max(widest, 1))


def _window_blocks(geom: Geometry, Q: _F, sw: _F | None, kernel: Kernel, degree: int, loo: bool,
                   order: NDArray[np.intp], lo: NDArray[np.intp], width: NDArray[np.intp],
                   L: int) -> Iterator[tuple[slice, _F, NDArray[np.intp], int, NDArray[np.intp]]]:
    X = geom.X
    n = X.shape[0]
    s = np.ones(n) if sw is None else np.asarray(sw, dtype=np.float64)
    basis = monomials(degree, 1)
    adaptive = geom.kind == "adaptive_nn"
    kh = geom.key_h()[:, 0] if adaptive else None
    scale = np.median(geom.key_h(), axis=0) if adaptive else None
    B = max(1, min(Q.shape[0], _BLOCK_BYTES // (8 * L * len(basis) * 4)))
    offs = np.arange(L)
    for start in range(0, Q.shape[0], B):
        sl = slice(start, min(start + B, Q.shape[0]))
        q = Q[sl, 0]
        pos = lo[sl, None] + offs[None, :]
        pad = offs[None, :] >= width[sl, None]
        idx = order[np.minimum(pos, n - 1)]
        xw = X[idx, 0]
        dx = xw - q[:, None]
        if adaptive:
            H = kh[idx]  # type: ignore[index]
            if loo:  # np's delete-one rule for the window's keys, then the zero rule
                own = np.arange(sl.start, sl.stop)[:, None]
                dist = np.abs(xw - X[own, 0])
                H = np.where(dist <= geom.primary[idx, 0], geom.successor[idx, 0], geom.primary[idx, 0])
                H = np.where(H > 0, H, geom.nearest[idx, 0])
            Z = dx / scale[0]  # type: ignore[index]
        else:
            hq = geom.query_h(Q[sl], loo=loo)[0][:, 0]
            H = np.broadcast_to(hq[:, None], dx.shape)
            Z = dx / hq[:, None]
        K, _ = _kernel_parts(kernel, (dx / H)[:, :, None], False)
        K = K[:, :, 0] / H if adaptive else K[:, :, 0]
        W = s[idx] * K
        W[pad] = 0.0
        if loo:
            W[idx == np.arange(sl.start, sl.stop)[:, None]] = 0.0
        A, _, bad = _solve(W, Z[:, :, None], basis, degree, False, scale, None if adaptive else hq[:, None])
        yield sl, A, idx, bad, np.flatnonzero(~(W.sum(axis=1) > 0))


#: LOWESS's sliding moments serve a nearest-neighbour fit whose rounding bound is within this
#: part of ``max|v|`` (LOWESS's own ``FIT_TOL``; the differences measured are of order 1e-14)
NN_TOL = 3e-11


def _lowess_route(geom: Geometry, Q: _F, sw: _F | None, kernel: Kernel, degree: int,
                  V: _F) -> tuple[_F, NDArray[np.bool_]] | None:
    """``generalized_nn``, one dimension, tricube, degree 1 (LOWESS's fit): the fits from
    LOWESS's sliding moments (:mod:`._lowess_jit`, O((n + m) log n)) and where they serve:
    a moment or block fit within :data:`NN_TOL` of ``max|v|`` whose system is regular (the
    dense rows' condition number below ``COND_MAX``); None where the route does not apply.
    The window of ``k`` consecutive sorted keys nearest the query holds every key within the
    ``k``-th distance (those at it weigh ``K(1) = 0``); a zero ``k``-th distance (np's zero
    rule) and windows with fewer than two weights are left to the caller."""
    from nadaraya.local import _lowess_jit as jit
    from nadaraya.local._nn_jit import COND_MAX

    k = int(geom.k[0])
    if (geom.kind != "generalized_nn" or geom.X.shape[1] != 1 or degree != 1 or kernel.name != "tricube"
            or k <= jit.DIRECT_K or Q.shape[0] == 0):
        return None
    x = geom.X[:, 0]
    order = np.argsort(x, kind="stable")
    xs = np.ascontiguousarray(x[order])
    uq, inv = np.unique(Q[:, 0], return_inverse=True)
    lo, mid, rad, starts = jit.plan_windows(xs, uq, k)
    r = np.ones(xs.size) if sw is None else np.ascontiguousarray(np.asarray(sw, dtype=np.float64)[order])
    out = np.empty((uq.size, V.shape[1]))
    ok = np.ones(uq.size, dtype=bool)
    sums = np.zeros((uq.size, 5))
    for c in range(V.shape[1]):
        ys = np.ascontiguousarray(V[order, c])
        out[:, c], state = jit.regressions(xs, ys, r, uq, lo, mid, rad, k, starts, NN_TOL, sums)
        good = (state == 0) | (state == 4)
        a, b, cc = sums[:, 0], sums[:, 1], sums[:, 2]
        half = 0.5 * (a + cc)
        spread = np.sqrt(0.25 * (a - cc) ** 2 + b * b)
        with np.errstate(divide="ignore", invalid="ignore"):
            regular = (half - spread > 0) & ((half + spread) / (half - spread) < COND_MAX)
        ok &= good & regular
    return out[inv], ok[inv]


def predictions(geom: Geometry, Q: _F, sw: _F | None, kernel: Kernel, degree: int, V: _F, *,
                loo: bool = False, empty: str = "nearest", moments: bool = True) -> tuple[_F, int]:
    """``A @ V`` over :func:`rows`' rows at the queries ``Q`` and the count of singular systems:
    from LOWESS's sliding moments for its own fit (``generalized_nn``, tricube, degree 1, one
    dimension; ``moments``), else from :func:`window_rows` where it applies (the dense rows
    only for queries with an empty window), else from :func:`rows`.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.linspace(0.0, 1.0, 50)[:, None]
    >>> geom = Geometry(x, np.array([10]), "generalized_nn")
    >>> out, singular = predictions(geom, np.array([[0.5]]), None, get("tricube"), 1, 2.0 * x + 1.0)
    >>> round(float(out[0, 0]), 12), singular  # a line is reproduced
    (2.0, 0)
    """
    fast = None if loo or not moments else _lowess_route(geom, Q, sw, kernel, degree, V)
    if fast is not None:
        out, ok = fast
        rest = np.flatnonzero(~ok)
        if not rest.size:
            return out, 0
        out[rest], bad = predictions(geom, Q[rest], sw, kernel, degree, V, empty=empty, moments=False)
        return out, bad
    out = np.empty((Q.shape[0], V.shape[1]))
    blocks = window_rows(geom, Q, sw, kernel, degree, loo=loo)
    bad = 0
    if blocks is None:
        for sl, A, _, b in rows(geom, Q, sw, kernel, degree, loo=loo, empty=empty):
            out[sl] = A @ V
            bad += b
        return out, bad
    redo: list[NDArray[np.intp]] = []
    for sl, A, idx, b, hollow in blocks:
        out[sl] = np.einsum("bl,blp->bp", A, V[idx])
        bad += b
        redo.append(hollow + sl.start)
    left = np.concatenate(redo)
    if left.size:
        for sl, A, _, _ in rows(geom, Q[left], sw, kernel, degree, loo=loo, empty=empty, own=left):
            out[left[sl]] = A @ V
    return out, bad


def pool_neighbours(queries: Any, keys: Any, values: Any, kernel: Any, bandwidth: Any, bandwidth_type: str,
                    degree: int, sample_weight: Any, empty: str) -> NDArray[np.float64]:
    """:func:`nadaraya.pool` (``queries`` given) or :func:`nadaraya.loo_pool` (``queries`` None)
    with a nearest-neighbour bandwidth: ``bandwidth`` is ``k`` or a fraction of n, per feature."""
    from nadaraya._support.validation import as_points, as_sample_weight, as_values
    from nadaraya.kernels import get as get_kernel

    kind = as_bandwidth_type(bandwidth_type)
    f8 = np.dtype(np.float64)
    X = as_points("keys", keys, f8)
    n, d = X.shape
    Q = X if queries is None else as_points("queries", queries, f8, d=d)
    V, one_d = as_values(values, n, f8)
    sw = as_sample_weight(sample_weight, n, f8)
    kern = kernel if isinstance(kernel, Kernel) else get_kernel(kernel)
    geom = Geometry(X, as_k(bandwidth, n, d, kind), kind)
    out = np.empty((Q.shape[0], V.shape[1]))
    if isinstance(degree, bool) or not isinstance(degree, numbers.Integral) or not 0 <= degree <= 3:
        raise ValueError(f"degree must be an integer from 0 to 3; got {degree!r}")
    out, _ = predictions(geom, Q, sw, kern, int(degree), V, loo=queries is None, empty=empty)
    return out[:, 0] if one_d else out
