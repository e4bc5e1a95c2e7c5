"""Rules of thumb for the bandwidth: the robust scale, and Scott's and Silverman's factors."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya._support.validation import as_points, as_sample_weight
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel

__all__ = ["RULES", "check_rule_input", "robust_scale", "rule_factor", "rule_of_thumb", "scott", "silverman"]

_F64 = np.dtype(np.float64)


def scott(n: float, d: int) -> float:
    """Scott's factor for the Gaussian kernel, ``n^(-1/(d+4))``.

    Examples
    --------
    >>> round(scott(100.0, 1), 4)
    0.3981
    """
    return float(n ** (-1.0 / (d + 4)))


def silverman(n: float, d: int) -> float:
    """Silverman's factor for the Gaussian kernel, ``(n (d + 2) / 4)^(-1/(d+4))``.

    Examples
    --------
    >>> round(silverman(100.0, 1), 4)
    0.4217
    """
    return float((n * (d + 2) / 4.0) ** (-1.0 / (d + 4)))


#: the rules of thumb by name: each maps the (effective) sample size and the number of
#: features to the factor of the robust scale, for the Gaussian kernel
RULES: dict[str, Callable[[float, int], float]] = {"scott": scott, "silverman": silverman}


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
    x = as_points("X", X, _F64)
    return _robust_scale(x, as_sample_weight(sample_weight, x.shape[0], _F64))


def _robust_scale(x: NDArray[np.float64], w: NDArray[np.float64] | None) -> NDArray[np.float64]:
    """:func:`robust_scale` of validated input, which it trusts: ``x`` (n, d) finite float64,
    ``w`` (n,) finite non-negative float64 or None."""
    # features far from unit scale are scaled by a power of two first (exact), so that
    # squared deviations neither underflow nor overflow
    x, x_exp = _pow2_scale(x, _span(x))
    if x_exp.any():
        return np.ldexp(_robust_scale(x, w), x_exp)  # type: ignore[no-any-return]
    n = x.shape[0]
    if w is None:
        w = np.ones(n)
    total = w.sum()
    mean = (w[:, None] * x).sum(axis=0) / total
    squares = (w[:, None] * (x - mean) ** 2).sum(axis=0) if total > 1 else np.zeros(x.shape[1])
    q75, q25 = (np.quantile(x, qq, axis=0, weights=w, method="inverted_cdf") for qq in (0.75, 0.25))
    return scale_from(total, squares, q25, q75)


def scale_from(
    total: float, squares: NDArray[np.float64], q25: NDArray[np.float64], q75: NDArray[np.float64]
) -> NDArray[np.float64]:
    """The robust scale ``min(std, IQR / 1.349)`` per feature from its ingredients: the total
    weight, the weighted sums of squared deviations from the mean, and the quartiles (the
    single-machine and the Dask paths compute these their own way and share this formula).

    Examples
    --------
    >>> import numpy as np
    >>> scale_from(5.0, np.array([10.0]), np.array([1.0]), np.array([3.0])).round(4).tolist()
    [1.4826]
    """
    denom = total - 1.0
    var = squares / denom if denom > 0 else np.zeros_like(squares)
    std = np.sqrt(np.maximum(var, 0.0))
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
    k = get_kernel(kernel)
    x = as_points("X", X, _F64)
    check_rule_input(method, x.shape[0])
    return _rule_of_thumb(x, method, k, as_sample_weight(sample_weight, x.shape[0], _F64))


def _rule_of_thumb(
    x: NDArray[np.float64], method: str, kernel: Kernel, w: NDArray[np.float64] | None
) -> NDArray[np.float64]:
    """:func:`rule_of_thumb` of validated input, which it trusts: ``x`` (n, d) finite float64,
    ``kernel`` a :class:`~nadaraya.kernels.Kernel`, ``w`` (n,) finite non-negative float64 or
    None. It checks what depends on the data: the rule's name, at least 2 rows, and no
    feature without spread."""
    check_rule_input(method, x.shape[0])
    return from_scale(_robust_scale(x, w), method, kernel, x.shape[0], None if w is None else w.sum(), x[0])


def from_scale(
    scale: NDArray[np.float64],
    method: str,
    kernel: Kernel,
    n_rows: int,
    total_weight: float | None = None,
    first_row: Any = None,
) -> NDArray[np.float64]:
    """The rule's bandwidth per feature from the robust ``scale`` of ``n_rows`` points (of total
    weight ``total_weight`` with sample weights), after refusing a feature without spread
    (shared by the single-machine and the Dask rules).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> from_scale(np.array([1.0]), "scott", get("gaussian"), 32).round(4).tolist()
    [0.5]
    """
    check_rule_input(method, n_rows, scale, first_row)
    n = float(n_rows if total_weight is None else total_weight)
    return np.asarray(scale * rule_factor(method, n, scale.shape[0], kernel), dtype=np.float64)


def check_rule_input(
    method: str, n_rows: int, scale: NDArray[np.floating] | None = None, first_row: Any = None
) -> None:
    """Raise a clear error where a rule of thumb cannot be computed.

    An unknown ``method``, fewer than 2 samples, or (given the per-feature ``scale``) a
    feature with zero spread, named with its value when ``first_row`` is given.

    Examples
    --------
    >>> check_rule_input("scott", 1)
    Traceback (most recent call last):
    ...
    ValueError: bandwidth='scott' needs at least 2 samples to measure the spread; got n_samples = 1. \
Pass a numeric bandwidth instead
    """
    if method not in RULES:
        raise ValueError(f"method={method!r} is not a rule of thumb; choose one of {', '.join(RULES)}")
    if n_rows < 2:
        raise ValueError(
            f"bandwidth={method!r} needs at least 2 samples to measure the spread; got n_samples = "
            f"{n_rows}. Pass a numeric bandwidth instead"
        )
    if scale is None:
        return
    flat = np.nonzero(~(np.asarray(scale) > 0))[0]
    if flat.size:
        j = int(flat[0])
        value = "" if first_row is None else f" (every value is {float(first_row[j])!r})"
        raise ValueError(
            f"feature {j} has zero spread: it is constant{value}, so no rule can choose its "
            "bandwidth (scott and silverman scale with the spread, and cv and aicc score every "
            "bandwidth of a constant feature alike); drop the feature, or pass a numeric bandwidth "
            "(a float or one per feature)"
        )


def rule_factor(method: str, n: float, d: int, kernel: str | Kernel = "gaussian") -> float:
    """The factor a rule of thumb multiplies the robust scale by (see :func:`rule_of_thumb`).

    Parameters
    ----------
    method : {"scott", "silverman"}
    n : float
        The (effective) sample size.
    d : int
        The number of features.
    kernel : str or Kernel

    Examples
    --------
    >>> round(rule_factor("scott", 100.0, 1), 4)
    0.3981
    """
    if method not in RULES:
        raise ValueError(f"method={method!r} is not a rule of thumb; choose one of {', '.join(RULES)}")
    factor = RULES[method](n, d)
    k = get_kernel(kernel)
    if k.name != "constant":
        factor *= k.canonical_bandwidth / get_kernel("gaussian").canonical_bandwidth
    return float(factor)


#: 2**-SAFE_EXP .. 2**SAFE_EXP are scaled by a power of two for the search
SAFE_EXP = 256


def _span(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """The range of each column of finite ``x``, ``max - min``; a range beyond float64 (columns
    spanning -1e308..1e308) is the largest float instead of inf, which :func:`_pow2_scale`
    brings into range like any other.

    Examples
    --------
    >>> _span(np.array([[-1e308], [1e308]])).tolist() == [np.finfo(np.float64).max]
    True
    """
    with np.errstate(over="ignore"):
        span = np.ptp(x, axis=0)
    return np.minimum(span, np.finfo(np.float64).max)


def _pow2_scale(
    a: NDArray[np.float64], scale: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[Any]]:
    """``a`` with each column multiplied by ``2**-e`` (exact) where its ``scale`` is outside
    the safe range, and the exponents ``e`` (0 where it is inside or zero; at most 1023, so
    that ``2**e`` is a float64)."""
    exp = np.minimum(np.frexp(scale)[1].astype(np.int64), 1023)
    out_of_range = (scale > 0) & ((scale < 2.0**-SAFE_EXP) | (scale > 2.0**SAFE_EXP))
    exp = np.where(out_of_range, exp, 0)
    return (np.ldexp(a, -exp[None, :]) if exp.any() else a), exp


def _unscaled_score(score: NDArray[np.float64], method: str, y_exp: int) -> NDArray[np.float64]:
    """A criterion computed on ``y * 2**-y_exp`` in the units of ``y``."""
    if y_exp == 0:
        return score
    if method == "cv":  # inf where the true score is beyond float64's range
        with np.errstate(over="ignore", under="ignore"):
            return np.ldexp(score, 2 * y_exp)
    return score + 2.0 * y_exp * math.log(2.0)  # AICc: log(sigma^2) moves by log(4**y_exp)
