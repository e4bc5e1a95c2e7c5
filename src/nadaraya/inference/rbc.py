"""Robust bias-corrected bands with a bias bandwidth of their own (rho = h / b), as nprobust's lprobust.

At a query ``c`` with the fit's degree ``p``, bandwidth ``h`` and bias bandwidth ``b``
(``q = p + 1``, ``u = (x - c) / h``, ``v = (x - c) / b``):

- ``G_p = sum W_h R_p R_p^T`` and ``G_q = sum W_b R_q R_q^T`` (``W_h = K(u)``, ``W_b = K(v)``);
- ``L = sum W_h R_p u^(p+1)``, and the bias-corrected weights
  ``Q_i = W_h,i R_p,i - rho^(p+1) L [G_q^-1 W_b,i R_q,i]_(p+1)``;
- ``center = e_0^T G_p^-1 sum_i Q_i y_i`` (``tau.bc``) and
  ``se = sqrt(e_0^T G_p^-1 (sum_i r_i^2 Q_i Q_i^T) G_p^-1 e_0)`` (``se.rb``), ``r_i`` the
  residuals of the degree-``q`` fit at ``b`` (``"hc*"``; ``"hc2"``/``"hc3"`` with the
  degree-``p`` fit's leverages, as nprobust) or the nearest-neighbour ones, over the points of
  the wider window; with ``clusters`` the cluster sums of :mod:`nadaraya.local.sandwich`.

The band is ``center -+ z se``. nprobust's ``lprobust`` also raises ``h`` and ``b`` to the
distance of the 21st nearest neighbour (``bwcheck``); here ``h`` and ``b`` are used as given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya.inference.robust import ROBUST, Training1D, check_clusters, conventional, training_1d
from nadaraya.local.sandwich import leverage, point_fit, residuals, sandwich, window

__all__ = ["bias_corrected", "rbc_band"]


def bias_corrected(
    tr: Training1D,
    y: NDArray[np.float64],
    c: float,
    b: float,
    rule: str,
    nnmatch: int = 3,
    sigma: NDArray[np.float64] | None = None,
) -> tuple[float, float, float, float]:
    """``(tau_bc, se_rb, tau, se)`` at ``c``: nprobust's ``tau.bc``, ``se.rb``, ``tau.us``, ``se.us``.

    ``rule`` names the residuals (one of :data:`~nadaraya.inference.robust.ROBUST`) unless
    ``sigma``, the noise's standard deviation at each training point, is given.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya import NadarayaWatson
    >>> from nadaraya.inference.robust import training_1d
    >>> x = np.linspace(0, 1, 60); y = x**2
    >>> m = NadarayaWatson(bandwidth=0.3, degree=1, kernel="epanechnikov").fit(x[:, None], y)
    >>> tau_bc, se_rb, tau, se = bias_corrected(training_1d(m, "hc0"), y, 0.5, 0.45, "hc0")
    >>> round(tau_bc, 10)  # a quadratic: the bias correction is exact
    0.25
    """
    h, p, x = tr.h, tr.degree, tr.x
    q = p + 1
    idx_h, _ = window(x, c, h, tr.kernel)
    idx_b, _ = window(x, c, b, tr.kernel)
    idx = idx_h if h > b else idx_b
    nan4 = (np.nan, np.nan, np.nan, np.nan)
    if idx.shape[0] <= q:
        return nan4
    u = (x[idx] - c) / h
    W_h = np.asarray(tr.kernel.profile(u), dtype=np.float64)
    W_b = np.asarray(tr.kernel.profile((x[idx] - c) / b), dtype=np.float64)
    fp = point_fit(x, y, idx, W_h, c, h, p)
    fq = point_fit(x, y, idx, W_b, c, b, q)
    if not (np.all(np.isfinite(fp.invG)) and np.all(np.isfinite(fq.invG))):
        return nan4
    Ap = fp.R * W_h[:, None]
    L = Ap.T @ u ** (p + 1)
    row = (fq.invG @ (fq.R * W_b[:, None]).T)[p + 1]
    Q = Ap - (h / b) ** (p + 1) * row[:, None] * L[None, :]
    tau_bc = float((fp.invG @ (Q.T @ y[idx]))[0])
    C = None if tr.clusters is None else tr.clusters[idx]
    if sigma is not None:
        res_h = res_b = sigma[idx]
    else:
        hii = leverage(fp) if rule in ("hc2", "hc3") else None
        res_h = residuals(rule, fp, x, y, tr.dups, tr.dupsid, nnmatch, hii)
        res_b = res_h if rule == "nn" else residuals(rule, fq, x, y, tr.dups, tr.dupsid, nnmatch, hii)
    V_cl = fp.invG @ sandwich(Ap, res_h, C) @ fp.invG
    V_bc = fp.invG @ sandwich(Q, res_b, C) @ fp.invG
    se = float(np.sqrt(V_cl[0, 0])) if V_cl[0, 0] >= 0 else np.nan
    se_rb = float(np.sqrt(V_bc[0, 0])) if V_bc[0, 0] >= 0 else np.nan
    return tau_bc, se_rb, float(fp.beta[0]), se


def resolve_bias_bandwidth(model: Any, bias_bandwidth: Any, variance: str, clusters: Any) -> float:
    """``bias_bandwidth`` as a positive number; ``"auto"``: the plug-in ``b`` (the model's own
    when its bandwidth is a plug-in, else ``"imse-dpi"``'s), with this variance and clusters."""
    if isinstance(bias_bandwidth, str):
        if bias_bandwidth != "auto":
            raise ValueError(
                f"bias_bandwidth={bias_bandwidth!r} is not valid; pass a positive number or 'auto'"
            )
        stored = getattr(model, "bias_bandwidth_", None)
        if stored is not None and (variance, clusters) == ("nn", None):
            return float(stored)
        from nadaraya.bandwidth.plugin import PLUGINS, plugin_bandwidth

        method = model.bandwidth if model.bandwidth in PLUGINS else "imse-dpi"
        x = np.asarray(model.X_fit_, dtype=np.float64)
        if x.shape[1] != 1:
            raise ValueError(
                "bias_bandwidth='auto' (nprobust's plug-in) is for one continuous feature; "
                f"this model has {x.shape[1]}: pass a number"
            )
        at = float(np.median(x[:, 0])) if method.startswith("mse") else None
        sel = plugin_bandwidth(
            x[:, 0],
            np.asarray(model.y_fit_, dtype=np.float64),
            method=method,
            degree=model.degree,
            kernel=model.kernel,
            at=at,
            variance=variance if variance in ROBUST else "nn",
            clusters=check_clusters(model, clusters),  # in the order of X_fit_, as x and y
        )
        return float(sel.b)
    try:
        b = float(bias_bandwidth)
    except (TypeError, ValueError):
        raise TypeError(
            f"bias_bandwidth={bias_bandwidth!r} is not valid; pass a positive number or 'auto'"
        ) from None
    if not (np.isfinite(b) and b > 0):
        raise ValueError(
            f"bias_bandwidth={bias_bandwidth!r} is not valid; pass a positive finite number or 'auto'"
        )
    return b


def rbc_band(
    model: Any,
    X: NDArray[np.float64],
    z: float,
    method: str,
    kind: str,
    variance: str,
    clusters: Any,
    bias_bandwidth: Any,
    sigma2: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], ...]:
    """``(estimate, lower, upper, center, se)``, each (m, p), for ``method`` ``"asymptotic"``
    (``center`` the fit) or ``"rbc"`` (``center`` the bias-corrected fit) with nprobust's
    variances or a bias bandwidth of its own; ``sigma2`` (n, p) the noise variances for
    ``"heteroscedastic"``/``"homoscedastic"``."""
    if kind != "pointwise":
        raise ValueError(
            f"kind={kind!r} with variance={variance!r}, clusters= or bias_bandwidth= is not available: "
            "nprobust's bands are pointwise; use kind='pointwise'"
        )
    if method not in ("asymptotic", "rbc"):
        raise ValueError(
            f"method={method!r} takes variance='heteroscedastic' or 'homoscedastic' and no clusters= "
            "or bias_bandwidth=; nprobust's variances go with method='asymptotic' or 'rbc'"
        )
    if method == "asymptotic" and bias_bandwidth is not None:
        raise ValueError(
            "bias_bandwidth= is the bandwidth of method='rbc'; method='asymptotic' has no bias correction"
        )
    tr = training_1d(model, variance, clusters)
    b = tr.h if bias_bandwidth is None else resolve_bias_bandwidth(model, bias_bandwidth, variance, clusters)
    m, k_out = X.shape[0], tr.Y.shape[1]
    estimate = np.asarray(model._pool(X, model.X_fit_, model.y_fit_, None), dtype=np.float64).reshape(m, -1)
    center, se = np.full((m, k_out), np.nan), np.full((m, k_out), np.nan)
    for k in range(k_out):
        y = np.ascontiguousarray(tr.Y[:, k])
        sigma = None if sigma2 is None else np.sqrt(np.maximum(sigma2[:, k], 0.0))
        for i, c in enumerate(X[:, 0]):
            if method == "rbc":
                center[i, k], se[i, k] = bias_corrected(tr, y, float(c), b, variance, sigma=sigma)[:2]
            else:
                center[i, k], se[i, k] = conventional(tr, y, float(c), variance, sigma=sigma)
    lower, upper = center - z * se, center + z * se
    if method == "asymptotic":
        center = estimate
    return estimate, lower, upper, center, se
