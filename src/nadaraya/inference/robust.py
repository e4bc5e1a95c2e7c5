"""HC0-HC3, nearest-neighbour and cluster-robust standard errors of local fits, as nprobust defines them.

At a query ``c`` the degree-``p`` fit is ``beta = G^-1 sum_i W_i R_i y_i`` over the points of its
window (``W_i = K((x_i - c) / h)``, ``R_i`` the powers of ``(x_i - c) / h``), and its variance
``e_0^T G^-1 (sum_i W_i^2 r_i^2 R_i R_i^T) G^-1 e_0`` with nprobust's residuals ``r_i``
(:mod:`nadaraya.local.sandwich`); with ``clusters`` the middle sum is over clusters. These are
the ``se.us`` of ``nprobust.lprobust(y, x, eval=c, h=h, p=p, vce=...)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel
from nadaraya.local.sandwich import RULES, duplicates, point_fit, residuals, sandwich, window

__all__ = ["ROBUST", "Training1D", "conventional", "robust_predict_std", "training_1d"]

ROBUST = RULES


class Training1D:
    """A fitted model's 1-D training data as the robust variances read them (sorted by x)."""

    __slots__ = ("Y", "clusters", "degree", "dups", "dupsid", "h", "kernel", "x")

    def __init__(self, x: Any, Y: Any, clusters: Any, kernel: Kernel, h: float, degree: int) -> None:
        self.x, self.Y, self.clusters = x, Y, clusters
        self.dups, self.dupsid = duplicates(x)
        self.kernel, self.h, self.degree = kernel, h, degree


def check_clusters(model: Any, clusters: Any) -> NDArray[Any] | None:
    """``clusters`` (one label per row given to ``fit``) in the order of ``X_fit_``, checked."""
    if clusters is None:
        return None
    c = np.asarray(clusters)
    n = model.X_fit_.shape[0]
    if c.ndim != 1 or c.shape[0] != n:
        raise ValueError(f"clusters= needs one label per training row, shape ({n},); got shape {c.shape}")
    if c.dtype.kind == "f" and not np.all(np.isfinite(c)):
        raise ValueError("clusters= has NaN or infinite labels; give every training row a finite label")
    if c.dtype.kind == "O":
        c = c.astype(str)
    order = getattr(model, "fit_order_", None)
    return c if order is None else c[order]


def training_1d(model: Any, variance: str, clusters: Any = None) -> Training1D:
    """The model's training data for nprobust's variances; a ValueError where they do not apply."""
    if variance not in ROBUST and clusters is not None:
        raise ValueError(
            f"clusters= sums the residuals of variance='hc0', 'hc1', 'hc2', 'hc3' or 'nn' per "
            f"cluster; variance={variance!r} has no residuals to sum: choose one of those"
        )
    X = np.asarray(model.X_fit_, dtype=np.float64)
    vt = getattr(model, "var_types_", None) or "c" * X.shape[1]
    if X.shape[1] != 1 or vt != "c":
        raise ValueError(
            f"variance={variance!r} (nprobust's estimators) is for one continuous feature; this "
            f"model has {X.shape[1]} feature(s) of types {vt!r}: use variance='heteroscedastic'"
        )
    if model.sample_weight_ is not None:
        raise ValueError(
            f"variance={variance!r} (nprobust's estimators) has no sample weights; this model was "
            f"fitted with sample_weight: refit without, or use variance='heteroscedastic'"
        )
    kernel = get_kernel(model.kernel)
    if kernel.name == "constant":
        raise ValueError(f"variance={variance!r} needs a kernel that localises; kernel='constant' does not")
    x = np.ascontiguousarray(X[:, 0])
    Y = np.asarray(model.y_fit_, dtype=np.float64).reshape(x.shape[0], -1)
    h = float(np.ravel(model.bandwidth_)[0])
    return Training1D(x, Y, check_clusters(model, clusters), kernel, h, int(model.degree))


def conventional(
    tr: Training1D,
    y: NDArray[np.float64],
    c: float,
    rule: str,
    nnmatch: int = 3,
    sigma: NDArray[np.float64] | None = None,
) -> tuple[float, float]:
    """The degree-``p`` fit at ``c`` and its standard error (``rule`` one of :data:`ROBUST`, or
    ``sigma`` the noise's standard deviation at each training point).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya import NadarayaWatson
    >>> x = np.linspace(0, 1, 50); y = np.sin(3 * x) + np.cos(40 * x) / 10
    >>> m = NadarayaWatson(bandwidth=0.3, degree=1, kernel="epanechnikov").fit(x[:, None], y)
    >>> tau, se = conventional(training_1d(m, "hc0"), y, 0.5, "hc0")
    >>> bool(abs(tau - m.predict([[0.5]])[0]) < 1e-12 and se > 0)
    True
    """
    idx, W = window(tr.x, c, tr.h, tr.kernel)
    p = tr.degree
    if idx.shape[0] <= p:
        return np.nan, np.nan
    fit = point_fit(tr.x, y, idx, W, c, tr.h, p)
    res = sigma[idx] if sigma is not None else residuals(rule, fit, tr.x, y, tr.dups, tr.dupsid, nnmatch)
    C = None if tr.clusters is None else tr.clusters[idx]
    V = fit.invG @ sandwich(fit.R * W[:, None], res, C) @ fit.invG
    return float(fit.beta[0]), float(np.sqrt(V[0, 0])) if V[0, 0] >= 0 else np.nan


def robust_predict_std(
    model: Any,
    X: NDArray[np.float64],
    variance: str,
    clusters: Any = None,
    slopes: bool = False,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``predict(X, return_std=True, variance=..., clusters=...)`` for nprobust's variances: the
    model's predictions (m, p) and the sandwich standard errors of its local fits."""
    if slopes:
        raise ValueError(
            f"variance={variance!r} gives the standard errors of predictions; the gradient's take "
            "variance='heteroscedastic' or 'homoscedastic'"
        )
    tr = training_1d(model, variance, clusters)
    if variance not in ROBUST:
        raise ValueError(
            f"variance={variance!r} is not valid; choose one of "
            f"{', '.join(map(repr, ('heteroscedastic', 'homoscedastic', *ROBUST)))}"
        )
    mean = np.asarray(model._pool(X, model.X_fit_, model.y_fit_, None), dtype=np.float64).reshape(
        X.shape[0], -1
    )
    std = np.full(mean.shape, np.nan)
    for k in range(tr.Y.shape[1]):
        y = np.ascontiguousarray(tr.Y[:, k])
        for i, c in enumerate(X[:, 0]):
            std[i, k] = conventional(tr, y, float(c), variance)[1]
    std[np.isnan(mean)] = np.nan
    return mean, std
