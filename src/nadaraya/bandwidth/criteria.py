"""The bandwidth criteria: exact leave-one-out CV and AICc, and the selection's result type."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya.bandwidth._objective import (
    METHODS,
    BandwidthSelection,
    BandwidthWarning,
    _check_enough,
    _Objective,
    _validate,
)
from nadaraya.kernels import Kernel

__all__ = ["METHODS", "BandwidthSelection", "BandwidthWarning", "score_bandwidth"]



def score_bandwidth(
    X: ArrayLike,
    y: ArrayLike,
    bandwidth: ArrayLike,
    *,
    method: str = "cv",
    kernel: str | Kernel = "gaussian",
    sample_weight: ArrayLike | None = None,
    gradient: bool = False,
    backend: str = "auto",
    degree: int = 0,
    var_types: str | None = None,
    categorical_kernel: str = "classic",
) -> float | tuple[float, NDArray[np.float64]]:
    r"""The leave-one-out CV score or the AICc of a bandwidth; exact, one pass over the pairs.

    With ``f_{-i}`` the prediction at ``x_i`` from all the *other* points (its own term
    masked inside the sums, never subtracted afterwards), sample weights ``s_i`` (default 1),
    ``N = sum_i s_i`` and ``p`` outputs:

    - ``"cv"``: ``CV(h) = sum_i s_i |y_i - f_{-i}(x_i)|^2 / (N p)``; without weights and with
      one output this is statsmodels' ``KernelReg.cv_loo`` and R np's ``cv.ls``. A compact
      kernel that leaves some point with no neighbour in its window scores ``inf`` (CV is
      undefined there), so the search never selects such a bandwidth.
    - ``"aicc"``: the corrected AIC of Hurvich, Simonoff and Tsai (1998) in the form R's np
      and statsmodels use for the local-constant estimator,
      ``log(sigma^2) + (1 + tr(H) / N) / (1 - (tr(H) + 2) / N)``, where ``H_ii`` is a point's
      own weight over its total weight and ``sigma^2`` the mean squared in-sample residual;
      both come from the same leave-one-out pass (the in-sample residual is
      ``(1 - H_ii)`` times the leave-one-out one). ``inf`` when ``tr(H) + 2 >= N``.

    Parameters
    ----------
    X : array-like of shape (n, d) or (n,)
    y : array-like of shape (n,) or (n, p)
    bandwidth : float or array-like of shape (d,)
    method : {"cv", "aicc"}, default "cv"
    kernel : str or Kernel, default "gaussian"
    sample_weight : array-like of shape (n,), optional
    gradient : bool, default False
        Also return the gradient with respect to ``log h`` per feature (Gaussian kernel only;
        computed analytically in the same pass).
    backend : str, default "auto"
        The backend of the leave-one-out pass (without ``gradient``).
    degree, var_types, categorical_kernel
        The local polynomial fit and the column types, as for :func:`nadaraya.pool` (a
        categorical column's ``bandwidth`` entry is its ``lambda``); how the criteria read
        them: the guide's local-fits page.

    Returns
    -------
    float, or (float, ndarray of shape (d,)) with ``gradient=True``

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(0, 1, 20); y = x**2
    >>> cv = score_bandwidth(x, y, 0.1)
    >>> def loo(i):
    ...     w = np.exp(-0.5 * ((x[i] - np.delete(x, i)) / 0.1) ** 2)
    ...     return np.average(np.delete(y, i), weights=w)
    >>> loo = np.array([loo(i) for i in range(20)])
    >>> bool(abs(cv - np.mean((y - loo) ** 2)) < 1e-12)
    True
    """
    from nadaraya._support.validation import as_bandwidth

    x, Y, sw, k = _validate(X, y, method, kernel, sample_weight)
    _check_enough(x.shape[0], sw)
    if degree != 0 or var_types is not None:
        return _score_local(x, Y, sw, k, method, backend, bandwidth, gradient, degree, var_types,
                            categorical_kernel)
    h = as_bandwidth(bandwidth, x.shape[1])
    obj = _Objective(x, Y, sw, k, method, backend)
    if gradient:
        if k.name != "gaussian":
            raise ValueError(
                f"gradient=True is available for the Gaussian kernel only; got kernel={k.name!r}"
            )
        return obj.with_gradient(h)
    return obj.at(h)


def _score_local(
    x: NDArray[np.float64], Y: NDArray[np.float64], sw: NDArray[np.float64] | None, k: Kernel, method: str,
    backend: str, bandwidth: ArrayLike, gradient: bool, degree: Any, var_types: str | None,
    categorical_kernel: str,
) -> float:
    """:func:`score_bandwidth` of a local polynomial fit or mixed data (validated ``x``, ``Y``, ``sw``)."""
    from nadaraya.bandwidth.local import LocalObjective
    from nadaraya.local.job import _bandwidth, as_degree
    from nadaraya.local.mixed import Categorical, as_categorical_kernel, as_var_types

    if gradient:
        raise ValueError("gradient=True is available for degree=0 with continuous columns only")
    deg, vt = as_degree(degree), as_var_types(var_types, x.shape[1])
    ck = as_categorical_kernel(categorical_kernel)
    h = _bandwidth(bandwidth, vt)
    obj = LocalObjective(x, Y, sw, k, method, backend, degree=deg, var_types=vt, categorical_kernel=ck)
    if obj.catc.size:  # lambdas in range for these data's categories
        Categorical.build(obj.kinds, obj.Xk, obj.Xk, h[obj.catc], ck, columns=obj.catc)
    return obj.at(h)


# Both are public as nadaraya.bandwidth.*: saved models, pickles and warning filters name them so.
BandwidthWarning.__module__ = "nadaraya.bandwidth"
BandwidthSelection.__module__ = "nadaraya.bandwidth"
