"""Average marginal effects of a fitted NadarayaWatson (Stata's ``margins, dydx``) with standard errors."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.config import get_config
from nadaraya.inference.intervals import queries
from nadaraya.inference.training import VARIANCES, _check, _rng, noise_variance, training
from nadaraya.local import fit as _fit

__all__ = ["AverageGradient", "average_gradient", "gradient_coefficients"]

MARGIN_METHODS = ("delta", "bootstrap")


class AverageGradient(NamedTuple):
    """The average of the fitted mean's gradient over the evaluation points, per feature."""

    estimate: NDArray[np.float64]  #: (n_features,)
    se: NDArray[np.float64]  #: (n_features,), the standard error
    method: str  #: "delta" or "bootstrap"


def gradient_coefficients(model: Any, P: NDArray[np.float64]) -> NDArray[np.float64]:
    """``c`` of shape (n_features, n_samples_fit) with ``mean_j gradient(P_j) = c @ y_fit_``:
    the fit's derivative is linear in ``y``, so ``c`` is the average gradient of unit
    responses, computed in blocks of columns within the working memory."""
    keys, _, sw = model._training_data()
    keys = np.asarray(keys, dtype=np.float64)
    n, d = keys.shape
    m = P.shape[0]
    block = max(1, int(get_config()["working_memory"] * 2**20) // (8 * 4 * max(m * d, 1)))
    c = np.empty((d, n))
    backend = model.backend if model.backend != "dask" else "auto"
    for a in range(0, n, block):
        b = min(n, a + block)
        E = np.zeros((n, b - a))
        E[np.arange(a, b), np.arange(b - a)] = 1.0
        g = _fit.gradient(model._job(P, keys, E, sw), model.empty, backend=backend)  # (m, d, b - a)
        c[:, a:b] = g.mean(axis=0)
    return c


def average_gradient(
    model: Any, X: Any = None, method: str = "delta", variance: str = "heteroscedastic", n_boot: int = 999,
    random_state: Any = None,
) -> AverageGradient:
    """See :meth:`nadaraya.NadarayaWatson.average_gradient`."""
    _check("method", method, MARGIN_METHODS)
    _check("variance", variance, VARIANCES)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer >= 2; got {n_boot!r}")
    _, values, _ = model._training_data()
    if np.ndim(values) != 1:
        raise ValueError("average_gradient is computed for one output; this model was fitted on y of shape "
                         f"{np.shape(values)}: fit one model per output")
    P = np.asarray(model._training_data()[0], dtype=np.float64) if X is None else queries(model, X)
    if P.shape[0] == 0:
        raise ValueError("X has no rows: the average gradient needs at least one evaluation point")
    y = np.asarray(values, dtype=np.float64)
    c = gradient_coefficients(model, P)
    estimate = c @ y
    if method == "delta":
        sigma2 = noise_variance(model, variance)[:, 0]
        se = np.sqrt((c**2) @ sigma2)
        return AverageGradient(estimate, se, "delta")
    # wild bootstrap (Rademacher signs) of the leave-one-out residuals: each replicate's average
    # gradient is c @ y*, exact, no refits
    tr = training(model)
    fits = tr.fits[:, 0]
    resid = y - tr.loo[:, 0]
    resid = np.where(np.isfinite(resid), resid, 0.0)
    rng = _rng(random_state)
    reps = np.empty((n_boot, c.shape[0]))
    for a in range(0, n_boot, 256):
        b = min(n_boot, a + 256)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(y.size, b - a))
        reps[a:b] = ((fits[:, None] + resid[:, None] * signs).T @ c.T)
    return AverageGradient(estimate, reps.std(axis=0, ddof=1), "bootstrap")
