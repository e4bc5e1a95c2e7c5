"""The number of neighbours ``k`` of a nearest-neighbour bandwidth chosen by CV or AICc.

One dimension, ``generalized_nn``, one output, degree 0 or 1, a kernel polynomial in ``|u|`` on its
support (Epanechnikov, tricube, biweight, triweight, triangular, boxcar) and ``empty="nearest"``:
every ``k`` from 1 to ``n - 1`` is scored by leave-one-out CV in one walk per point
(:func:`nadaraya.local._nn_jit.cv_walk`, O(n^2) for all of them). Otherwise each candidate ``k``
costs one exact pass of the smoother's rows (O(n^2 d P^2)): every ``k`` up to :data:`ALL_K`
candidates, else :data:`GRID` values spread evenly in ``log k``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya.kernels import Kernel
from nadaraya.local import _nn_jit
from nadaraya.local.neighbours import Geometry, rows

__all__ = ["choose_k", "score_k"]

#: every k is a candidate up to this many; beyond it, a grid even in log k
ALL_K = 60
GRID = 40


def _fast(X: NDArray[np.float64], Y: NDArray[np.float64], kernel: Kernel, degree: int, kind: str,
          method: str, empty: str) -> bool:
    return (kind == "generalized_nn" and X.shape[1] == 1 and Y.shape[1] == 1 and degree <= 1
            and kernel.polynomial is not None and method == "cv" and empty == "nearest")


def walk_scores(x: NDArray[np.float64], y: NDArray[np.float64], sw: NDArray[np.float64] | None,
                kernel: Kernel, degree: int) -> NDArray[np.float64]:
    """The CV score of every ``k`` from 1 to ``n - 1`` (entry ``k - 1``) at sorted ``x``: the
    weighted mean squared leave-one-out residual."""
    n = x.shape[0]
    s = np.ones(n) if sw is None else np.asarray(sw, dtype=np.float64)
    coef = np.asarray(kernel.polynomial, dtype=np.float64)
    powers = np.flatnonzero(coef).astype(np.int64)
    k1 = float(np.asarray(kernel.profile(np.array([1.0])))[0])
    score = np.zeros(max(n - 1, 0))
    xs, ys = np.ascontiguousarray(x), np.ascontiguousarray(y)
    _nn_jit.cv_walk(xs, ys, s, coef[coef != 0], powers, k1, degree, score)
    return score / s.sum()


def score_k(X: NDArray[np.float64], Y: NDArray[np.float64], sw: NDArray[np.float64] | None, kernel: Kernel,
            degree: int, kind: str, k: int, method: str = "cv", empty: str = "nearest") -> float:
    """The CV score (weighted mean squared leave-one-out residual) or the AICc of one ``k``
    (the same for every feature), from the smoother's exact rows."""
    n, d = X.shape
    s = np.ones(n) if sw is None else np.asarray(sw, dtype=np.float64)
    geom = Geometry(X, np.full(d, k, dtype=np.int64), kind)
    loo = method == "cv"
    fits = np.empty_like(Y)
    tr = 0.0
    for sl, A, _, _ in rows(geom, X, sw, kernel, degree, loo=loo, empty=empty):
        fits[sl] = A @ Y
        tr += float(np.trace(A[:, sl.start:sl.stop]))
    res2 = ((Y - fits) ** 2).sum(axis=1)
    N = s.sum()
    if loo:
        return float(s @ res2 / N) if np.isfinite(res2).all() else np.inf
    sigma2 = s @ res2 / N
    if not (N - tr - 2 > 0) or not sigma2 > 0:
        return np.inf
    return float(np.log(sigma2) + (N + tr) / (N - tr - 2))


def candidates(n: int, kind: str) -> NDArray[np.int64]:
    """The ``k`` a search scores: 1 to the largest leave-one-out allows, or a grid in log k."""
    top = n - 1 if kind == "generalized_nn" else n - 2
    if top < 1:
        raise ValueError(f"choosing k by cross-validation needs at least {3 if kind == 'adaptive_nn' else 2} "
                         f"training points; got {n}")
    if top <= ALL_K:
        return np.arange(1, top + 1, dtype=np.int64)
    return np.unique(np.round(np.geomspace(1, top, GRID)).astype(np.int64))


def choose_k(X: NDArray[np.float64], Y: NDArray[np.float64], sw: NDArray[np.float64] | None, kernel: Kernel,
             degree: int, kind: str, method: str, empty: str = "nearest") -> dict[str, Any]:
    """The ``k`` (one for every feature) minimising CV or AICc: ``{"k", "ks", "scores"}``.

    ``X`` (n, d) sorted by its first column (as the estimator keeps it), ``Y`` (n, p).
    """
    n = X.shape[0]
    if _fast(X, Y, kernel, degree, kind, method, empty):
        ks = np.arange(1, n, dtype=np.int64)
        if ks.size == 0:
            raise ValueError(f"choosing k by cross-validation needs at least 2 training points; got {n}")
        scores = walk_scores(X[:, 0], Y[:, 0], sw, kernel, degree)
        scores = np.where(np.isfinite(scores), scores, np.inf)
    else:
        ks = candidates(n, kind)
        scores = np.array([score_k(X, Y, sw, kernel, degree, kind, int(k), method, empty) for k in ks])
    best = int(ks[int(np.argmin(scores))])
    return {"k": best, "ks": ks, "scores": scores}
