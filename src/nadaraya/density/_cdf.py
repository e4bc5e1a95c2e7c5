"""The kernels' cumulative distribution functions, exactly, and the categorical kernels' CDFs.

For each kernel ``K`` of :mod:`nadaraya.kernels` (normalised to integrate to one), its CDF
``G(u) = integral of K(t) dt from -inf to u``, in closed form:

============  =================================================================
gaussian      ``Phi(u)`` (``scipy.special.ndtr``)
epanechnikov  ``(2 + 3u - u^3) / 4`` on ``|u| <= 1``
boxcar        ``(1 + u) / 2`` on ``|u| <= 1``
triangular    ``(1 + u)^2 / 2`` for ``u <= 0``, ``1 - (1 - u)^2 / 2`` for ``0 < u <= 1``
biweight      ``1/2 + 15/16 (u - 2u^3/3 + u^5/5)`` on ``|u| <= 1``
triweight     ``1/2 + 35/32 (u - u^3 + 3u^5/5 - u^7/7)`` on ``|u| <= 1``
tricube       ``1/2 + sign(u) 70/81 (a - 3a^4/4 + 3a^7/7 - a^10/10)``, ``a = |u| <= 1``
cosine        ``(1 + sin(pi u / 2)) / 2`` on ``|u| <= 1``
parzen        ``1/2 + sign(u) H(|u|)``, ``H`` the integral of the cubic B-spline
laplacian     ``e^u / 2`` for ``u < 0``, ``1 - e^-u / 2`` for ``u >= 0``
logistic      ``1 / (1 + e^-u)``
============  =================================================================

(0 left of the support, 1 right of it.) The lower half is computed in forms without cancellation
(factored polynomials, ``sin^2``), the upper half as ``1 - G(-u)``.
The ``constant`` kernel is not integrable and has no CDF.

The CDF of a categorical kernel ``L(y | Y_i)`` is, as in statsmodels and R's np, the sum of
``L(c | Y_i)`` over the categories ``c <= y`` seen in training (:func:`categorical_cdf`).

Examples
--------
>>> from nadaraya.density._cdf import kernel_cdf
>>> float(kernel_cdf("epanechnikov", 0.0)), float(kernel_cdf("triangular", -0.5))
(0.5, 0.125)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from nadaraya.density._constants import log_probability
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel

__all__ = ["categorical_cdf", "category_term", "has_cdf", "kernel_cdf"]

_Half = Callable[[NDArray[np.float64]], NDArray[np.float64]]


# Each ``_lower`` function gives G(u) for u <= 0 (where G <= 1/2, computed without cancellation);
# G(u) = 1 - G(-u) for u > 0 by symmetry.


def _gaussian(u: NDArray[np.float64]) -> NDArray[np.float64]:
    return special.ndtr(u)  # type: ignore[no-any-return]


def _epanechnikov(u: NDArray[np.float64]) -> NDArray[np.float64]:
    v = np.clip(u, -1.0, 0.0)
    return 0.25 * (1.0 + v) ** 2 * (2.0 - v)  # (2 + 3v - v^3)/4 factored: no cancellation at -1


def _boxcar(u: NDArray[np.float64]) -> NDArray[np.float64]:
    return 0.5 * (1.0 + np.clip(u, -1.0, 0.0))


def _triangular(u: NDArray[np.float64]) -> NDArray[np.float64]:
    return 0.5 * (1.0 + np.clip(u, -1.0, 0.0)) ** 2


def _biweight(u: NDArray[np.float64]) -> NDArray[np.float64]:
    v = np.clip(u, -1.0, 0.0)
    # 1/2 + 15/16 (v - 2v^3/3 + v^5/5) = (1 + v)^3 (8 - 9v + 3v^2) / 16
    return (1.0 + v) ** 3 * (8.0 - 9.0 * v + 3.0 * v * v) / 16.0


def _triweight(u: NDArray[np.float64]) -> NDArray[np.float64]:
    v = np.clip(u, -1.0, 0.0)
    # 1/2 + 35/32 (v - v^3 + 3v^5/5 - v^7/7) = (1 + v)^4 (16 - 29v + 20v^2 - 5v^3) / 32
    return (1.0 + v) ** 4 * (16.0 - 29.0 * v + 20.0 * v * v - 5.0 * v**3) / 32.0


def _tricube(u: NDArray[np.float64]) -> NDArray[np.float64]:
    a = np.clip(-u, 0.0, 1.0)
    inner = a - 0.75 * a**4 + 3.0 / 7.0 * a**7 - 0.1 * a**10
    return np.maximum(0.5 - 70.0 / 81.0 * inner, 0.0)


def _cosine(u: NDArray[np.float64]) -> NDArray[np.float64]:
    v = np.clip(u, -1.0, 0.0)
    # (1 + sin(pi v / 2)) / 2 = sin^2(pi (1 + v) / 4): no cancellation near v = -1
    return np.sin(math.pi / 4.0 * (1.0 + v)) ** 2  # type: ignore[no-any-return]


def _parzen(u: NDArray[np.float64]) -> NDArray[np.float64]:
    a = np.clip(-u, 0.0, 1.0)
    outer = (2.0 / 3.0) * (1.0 - a) ** 4  # the tail integral of 8/3 (1 - t)^3 from a to 1
    inner = 0.5 - (4.0 / 3.0 * a - 8.0 / 3.0 * a**3 + 2.0 * a**4)
    return np.where(a <= 0.5, inner, outer)


def _laplacian(u: NDArray[np.float64]) -> NDArray[np.float64]:
    return 0.5 * np.exp(np.minimum(u, 0.0))


def _logistic(u: NDArray[np.float64]) -> NDArray[np.float64]:
    return special.expit(np.minimum(u, 0.0))  # type: ignore[no-any-return]


_LOWER: dict[str, _Half] = {
    "gaussian": _gaussian,
    "epanechnikov": _epanechnikov,
    "boxcar": _boxcar,
    "triangular": _triangular,
    "biweight": _biweight,
    "triweight": _triweight,
    "tricube": _tricube,
    "cosine": _cosine,
    "parzen": _parzen,
    "laplacian": _laplacian,
    "logistic": _logistic,
}


def has_cdf(kernel: str | Kernel) -> bool:
    """Whether the kernel is integrable (every kernel but ``constant``).

    Examples
    --------
    >>> has_cdf("gaussian"), has_cdf("constant")
    (True, False)
    """
    return get_kernel(kernel).name in _LOWER


def kernel_cdf(kernel: str | Kernel, u: ArrayLike) -> NDArray[np.float64]:
    """The kernel's CDF ``G(u)``, elementwise, in closed form.

    Parameters
    ----------
    kernel : str or Kernel
        Any kernel of :mod:`nadaraya.kernels` but ``constant`` (not integrable).
    u : array-like
        Scaled distances ``(y - Y_i) / h``; ``+-inf`` give 1 and 0.

    Returns
    -------
    ndarray of float64, the shape of ``u``

    Raises
    ------
    ValueError
        For the ``constant`` kernel.

    Examples
    --------
    >>> from nadaraya.density._cdf import kernel_cdf
    >>> kernel_cdf("gaussian", [-float("inf"), 0.0, float("inf")]).tolist()
    [0.0, 0.5, 1.0]
    >>> float(kernel_cdf("laplacian", 1.0)) == 1 - 0.5 * float(__import__("math").exp(-1.0))
    True
    """
    k = get_kernel(kernel)
    if k.name not in _LOWER:
        raise ValueError(f"kernel={k.name!r} is not integrable (no density, no CDF); choose another kernel")
    lower = _LOWER[k.name]
    x = np.asarray(u, dtype=np.float64)
    g = lower(-np.abs(x))
    out = np.where(x <= 0.0, g, 1.0 - g)
    out[np.isnan(x)] = np.nan
    return out  # type: ignore[no-any-return]


def categorical_cdf(
    kind: str,
    kernel: str,
    keys: NDArray[np.float64],
    y: NDArray[np.float64],
    lam: float,
    levels: NDArray[np.float64],
) -> NDArray[np.float64]:
    """``sum over training categories c <= y of L(Y_i, c)``: queries (m,) by keys (n,).

    ``kind`` is ``"o"`` or ``"u"``, ``kernel`` ``"classic"`` (Wang-van Ryzin, Aitchison-Aitken)
    or ``"li-racine"``, ``levels`` the distinct training values of the column (their count is
    Aitchison-Aitken's ``c``). The unordered kernel is summed over the codes' order, as
    statsmodels does.

    Examples
    --------
    >>> import numpy as np
    >>> lv = np.array([0.0, 1.0, 2.0])
    >>> categorical_cdf("u", "classic", lv, np.array([2.0]), 0.2, lv).round(12).tolist()
    [[1.0, 1.0, 1.0]]
    """
    out = np.zeros((y.shape[0], keys.shape[0]))
    for level in levels:
        out += (level <= y)[:, None] * category_term(kind, kernel, keys, float(level), lam, levels)[None, :]
    return out


def category_term(
    kind: str, kernel: str, keys: NDArray[np.float64], level: float, lam: float, levels: NDArray[np.float64]
) -> NDArray[np.float64]:
    """The categorical kernel ``L(level | Y_i)`` of each key (n,), as the densities define it
    (:func:`nadaraya.density._constants.log_probability`).

    Examples
    --------
    >>> import numpy as np
    >>> category_term("o", "classic", np.array([0.0, 2.0]), 0.0, 0.5, np.arange(3.0)).tolist()
    [0.5, 0.0625]
    """
    with np.errstate(divide="ignore"):
        return np.exp(log_probability(kind, kernel, lam, levels, np.array([level]), keys)[0])  # type: ignore[no-any-return]
