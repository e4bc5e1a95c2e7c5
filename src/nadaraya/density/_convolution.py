"""The kernels' self-convolutions ``K * K`` and the integral of a product-kernel density's square.

``integral f^2 = sum_ij s_i s_j prod_c (K * K)((x_ic - x_jc) / h_c) / h_c prod_k M_k(a_ik, a_jk)
/ (sum_i s_i)^2`` for a product kernel: continuous columns ``c`` with the 1-D convolution
``(K * K)(t) = integral K(s) K(t - s) ds``, categorical columns ``k`` with
``M(a, b) = sum_l L(l | a) L(l | b)`` over the training levels.

``K * K`` per kernel:

- the polynomial kernels: a polynomial on each piece between the sums of two of the kernel's
  breakpoints (degree at most 19), tabulated as its Chebyshev interpolant of degree 24 on the
  piece (exact: the values at the nodes are Gauss-Legendre sums over the pieces of
  ``K(s) K(t - s)``, 20 nodes, exact for polynomials of degree up to 39); the cosine kernel
  likewise (analytic on each piece: the interpolant is within rounding);
- Laplacian: ``(1 + |t|) e^-|t| / 4``; logistic: ``e^-a ((a - 2) + (a + 2) e^-a) / (1 - e^-a)^3``
  with ``a = |t|``, its Taylor series below ``a = 1/2`` (no cancellation);
- Gaussian: ``phi(t / sqrt 2) / sqrt 2`` (the engine sums it directly: the Gaussian at
  ``sqrt 2 h``).

The double sum runs over all pairs in a compiled loop (compact kernels skip a pair as soon as one
column is beyond the support), ``O(n^2 d)`` per evaluation.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache
from itertools import pairwise

import numpy as np
from numba import njit
from numpy.typing import NDArray

from nadaraya.density._constants import log_probability
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel

__all__ = ["convolution", "integral_sq"]

#: the Chebyshev degree of each piece of a tabulated convolution
DEGREE = 24

#: the kernels' breakpoints (where the profile is not analytic) within the support [-1, 1]
_BREAKS = {
    "epanechnikov": [-1.0, 1.0], "boxcar": [-1.0, 1.0], "biweight": [-1.0, 1.0], "triweight": [-1.0, 1.0],
    "cosine": [-1.0, 1.0], "triangular": [-1.0, 0.0, 1.0], "tricube": [-1.0, 0.0, 1.0],
    "parzen": [-1.0, -0.5, 0.0, 0.5, 1.0],
}

# Taylor coefficients of the logistic self-convolution at 0 (even powers t^0, t^2, ... t^20)
_LOGISTIC_SERIES = np.array([float(Fraction(a, b)) for a, b in [
    (1, 6), (-1, 60), (1, 1008), (-1, 21600), (1, 532224), (-691, 9906624000), (1, 410572800),
    (-3617, 44460928512000), (43867, 16696386330624000), (-174611, 2112783322890240000),
    (77683, 30521861557125120000)]])

_KIND = {"laplacian": 1, "logistic": 2, "gaussian": 3}


def _exact_at(kernel: Kernel, t: float) -> float:
    """``integral K(s) K(t - s) ds`` by Gauss-Legendre between the breakpoints of both factors."""
    br = np.array(_BREAKS[kernel.name])
    cuts = np.unique(np.r_[br, t - br])
    cuts = cuts[(cuts >= max(-1.0, t - 1.0)) & (cuts <= min(1.0, t + 1.0))]
    nodes, weights = np.polynomial.legendre.leggauss(20)
    total = 0.0
    for a, b in pairwise(cuts):
        s = 0.5 * (a + b) + 0.5 * (b - a) * nodes
        total += 0.5 * (b - a) * float((weights * kernel.profile(s) * kernel.profile(t - s)).sum())
    return total


@cache
def _table(name: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The pieces of ``K * K`` on ``[0, 2]`` (even): their ends (P + 1,) and Chebyshev
    coefficients (P, DEGREE + 1)."""
    k = get_kernel(name)
    br = np.array(_BREAKS[name])
    ends = np.unique(np.abs(br[:, None] + br[None, :]).ravel())
    ends = ends[ends <= 2.0]
    x = np.cos(np.pi * (np.arange(DEGREE + 1) + 0.5) / (DEGREE + 1))  # Chebyshev points of the first kind
    coefs = []
    for a, b in pairwise(ends):
        vals = [_exact_at(k, 0.5 * (a + b) + 0.5 * (b - a) * z) for z in x]
        coefs.append(np.polynomial.chebyshev.chebfit(x, vals, DEGREE))
    return ends, np.array(coefs)


@njit(cache=True)
def _conv1(kind: int, t: float, ends: NDArray[np.float64], coefs: NDArray[np.float64]) -> float:
    a = abs(t)
    if kind == 1:
        return (1.0 + a) * math.exp(-a) / 4.0
    if kind == 2:
        if a < 0.5:
            t2, out, p = a * a, 0.0, 1.0
            for c in _LOGISTIC_SERIES:
                out += c * p
                p *= t2
            return out
        e = math.exp(-a)
        return e * ((a - 2.0) + (a + 2.0) * e) / (1.0 - e) ** 3
    if kind == 3:
        return math.exp(-0.25 * a * a) / math.sqrt(4.0 * math.pi)
    if a >= ends[-1]:
        return 0.0
    j = 0
    while a >= ends[j + 1]:
        j += 1
    z = (2.0 * a - ends[j] - ends[j + 1]) / (ends[j + 1] - ends[j])
    b1, b2 = 0.0, 0.0  # Clenshaw
    c = coefs[j]
    for r in range(c.size - 1, 0, -1):
        b1, b2 = 2.0 * z * b1 - b2 + c[r], b1
    return z * b1 - b2 + c[0]


@njit(cache=True)
def _pair_sum(
    x: NDArray[np.float64], inv_h: NDArray[np.float64], kind: int, ends: NDArray[np.float64],
    coefs: NDArray[np.float64], codes: NDArray[np.int64], mats: NDArray[np.float64], w: NDArray[np.float64],
) -> float:
    """``sum_ij w_i w_j prod_c (K * K)((x_ic - x_jc) / h_c) prod_k M_k[a_ik, a_jk]`` (no ``1 / h``)."""
    n, dc = x.shape
    dk = codes.shape[1]
    total = 0.0
    for i in range(n):
        row = 0.0
        for j in range(n):
            p = w[j]
            for c in range(dc):
                if p == 0.0:
                    break
                p *= _conv1(kind, (x[i, c] - x[j, c]) * inv_h[c], ends, coefs)
            for k in range(dk):
                p *= mats[k, codes[i, k], codes[j, k]]
            row += p
        total += w[i] * row
    return total


def convolution(kernel: str | Kernel, t: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(K * K)(t)``, elementwise (any kernel with a density).

    Examples
    --------
    >>> import numpy as np
    >>> round(float(convolution("epanechnikov", np.array([0.0]))[0]), 12)  # integral of K^2: 3/5
    0.6
    """
    k = get_kernel(kernel)
    kind, ends, coefs = _parts(k)
    return np.array([_conv1(kind, float(v), ends, coefs) for v in np.ravel(t)]).reshape(np.shape(t))


def _parts(k: Kernel) -> tuple[int, NDArray[np.float64], NDArray[np.float64]]:
    if k.name in _KIND:
        return _KIND[k.name], np.zeros(2), np.zeros((1, 1))
    if k.name not in _BREAKS:
        raise ValueError(f"kernel={k.name!r} has no self-convolution (not a density)")
    ends, coefs = _table(k.name)
    return 0, ends, coefs


def integral_sq(
    x: NDArray[np.float64], bandwidth: NDArray[np.float64], kernel: Kernel, var_types: str,
    categorical_kernel: str, sample_weight: NDArray[np.float64] | None,
) -> float:
    """``integral f^2`` of the product-kernel density of ``x`` (n, d): continuous columns
    integrated, categorical ones summed over their training levels."""
    n = x.shape[0]
    cont = [j for j, t in enumerate(var_types) if t == "c"]
    cat = [j for j, t in enumerate(var_types) if t != "c"]
    h = np.asarray(bandwidth, dtype=np.float64).reshape(-1)
    codes = np.zeros((n, len(cat)), dtype=np.int64)
    size = max([np.unique(x[:, j]).size for j in cat], default=1)
    mats = np.zeros((len(cat), size, size))
    for k, j in enumerate(cat):
        lv, codes[:, k] = np.unique(x[:, j], return_inverse=True)
        p = np.exp(log_probability(var_types[j], categorical_kernel, float(h[j]), lv, lv, lv))  # (l, a)
        mats[k, : lv.size, : lv.size] = p.T @ p
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    kind, ends, coefs = _parts(kernel)
    hc = h[cont]
    total = _pair_sum(np.ascontiguousarray(x[:, cont]), 1.0 / hc, kind, ends, coefs, codes, mats, w)
    return float(total / float(np.prod(hc)) / w.sum() ** 2)
