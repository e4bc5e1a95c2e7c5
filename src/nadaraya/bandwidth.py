"""Bandwidth selection: normal-reference rules of thumb (Scott, Silverman) per feature."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import as_points, as_sample_weight
from .kernels import Kernel
from .kernels import get as get_kernel

__all__ = ["RULES", "robust_scale", "rule_of_thumb"]

RULES: tuple[str, ...] = ("scott", "silverman")


def robust_scale(X: ArrayLike, sample_weight: ArrayLike | None = None) -> NDArray[np.float64]:
    """Per-feature ``min(std, IQR / 1.349)``, with sample weights as frequencies.

    The standard deviation uses ``ddof=1`` (``sum(w) - 1`` with weights) and the quartiles the
    inverted-CDF definition, so that integer weights give exactly the scale of repeated rows.
    Where the IQR is zero (heavily tied data) the standard deviation is used alone.

    Examples
    --------
    >>> import numpy as np
    >>> robust_scale(np.arange(10.0)).round(3).tolist()
    [3.028]
    """
    x = as_points("X", X, np.dtype(np.float64))
    n = x.shape[0]
    w = as_sample_weight(sample_weight, n, np.dtype(np.float64))
    if w is None:
        w = np.ones(n)
    total = w.sum()
    mean = (w[:, None] * x).sum(axis=0) / total
    denom = total - 1.0
    var = (w[:, None] * (x - mean) ** 2).sum(axis=0) / denom if denom > 0 else np.zeros(x.shape[1])
    std = np.sqrt(np.maximum(var, 0.0))
    q75, q25 = (np.quantile(x, qq, axis=0, weights=w, method="inverted_cdf") for qq in (0.75, 0.25))
    iqr = (q75 - q25) / 1.349
    return np.where(iqr > 0, np.minimum(std, iqr), std)  # type: ignore[no-any-return]


def rule_of_thumb(
    X: ArrayLike,
    method: str = "scott",
    *,
    kernel: str | Kernel = "gaussian",
    sample_weight: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Normal-reference bandwidth per feature, rescaled to the kernel.

    With ``A_j = min(std_j, IQR_j / 1.349)`` and (effective) sample size ``n``, in ``d``
    features, for the Gaussian kernel:

    - ``"scott"``: ``h_j = A_j n^(-1/(d+4))``;
    - ``"silverman"``: ``h_j = A_j (n (d + 2) / 4)^(-1/(d+4))``

    (the factors of :class:`scipy.stats.gaussian_kde`). For another kernel ``K`` the
    bandwidth is multiplied by ``delta_K / delta_gaussian``, the ratio of canonical
    bandwidths, so that both kernels smooth alike. With sample weights, ``n = sum(w)``.

    Parameters
    ----------
    X : array-like of shape (n, d) or (n,)
    method : {"scott", "silverman"}
    kernel : str or Kernel, default "gaussian"
    sample_weight : array-like of shape (n,), optional

    Returns
    -------
    ndarray of shape (d,)

    Raises
    ------
    ValueError
        When a feature has zero spread (the message names it and says to pass a bandwidth).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=1000)
    >>> h = rule_of_thumb(x, "scott")
    >>> bool(0.2 < h[0] < 0.3)
    True
    """
    if method not in RULES:
        raise ValueError(f"method={method!r} is not a rule of thumb; choose one of {', '.join(RULES)}")
    k = get_kernel(kernel)
    x = as_points("X", X, np.dtype(np.float64))
    n_rows, d = x.shape
    if n_rows < 2:
        raise ValueError(
            f"bandwidth={method!r} needs at least 2 samples to measure the spread; got n_samples = "
            f"{n_rows}. Pass a numeric bandwidth instead"
        )
    scale = robust_scale(x, sample_weight)
    flat = np.nonzero(~(scale > 0))[0]
    if flat.size:
        j = int(flat[0])
        raise ValueError(
            f"feature {j} has zero spread (all values equal {x[0, j]!r}), so bandwidth={method!r} "
            "cannot be computed; pass a numeric bandwidth (a float or one per feature)"
        )
    n = float(n_rows if sample_weight is None else np.sum(sample_weight))
    if method == "scott":
        factor = n ** (-1.0 / (d + 4))
    else:
        factor = (n * (d + 2) / 4.0) ** (-1.0 / (d + 4))
    ratio = 1.0
    if k.name != "constant":
        ratio = k.canonical_bandwidth / get_kernel("gaussian").canonical_bandwidth
    return np.asarray(scale * factor * ratio, dtype=np.float64)
