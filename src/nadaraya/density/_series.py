"""The kernels' CDFs as Taylor series: ``G(u + s) = sum_r c_r(u) s^r`` about each key, per kernel.

A conditional CDF at a point ``y`` near a cell centre ``t`` is then a polynomial in ``y - t``
whose coefficients are weighted sums over the keys of ``c_r((t - Y_i) / h)``: the engine's sums
with these as value columns (:mod:`nadaraya.density._cond_cdf`). :class:`Series` gives, per
kernel, the cell half-width ``RHO`` (in bandwidths) and the number of terms that make the
series exact there, and the breakpoints of its CDF (where it is not analytic): a key with a
breakpoint within the cell is summed exactly instead.

- polynomial kernels (Epanechnikov, boxcar, triangular, biweight, triweight, tricube, Parzen):
  ``G`` is a polynomial of degree at most 10 on each piece; the series of that degree is exact.
- Gaussian: ``c_0 = Phi(u)``, ``c_r = (-1)^(r-1) He_(r-1)(u) phi(u) / r!``; by Cramer's
  inequality ``|He_k(u) phi(u)| <= 1.09 sqrt(k!) / sqrt(2 pi)``, so with ``|s| <= 1/2`` the
  terms past ``r = 22`` sum below ``1e-18``.
- logistic: the series of ``1 / (1 + e^-(u + s))`` by power-series division (its poles at
  ``+-i pi`` make the terms fall like ``(|s| / pi)^r``; past ``r = 26``, below ``1e-20``).
- Laplacian (breakpoint 0) and cosine (breakpoints +-1): closed-form derivatives, terms
  ``(1/4)^r / r!`` and ``(pi / 16)^r / r!``.

Examples
--------
>>> import numpy as np
>>> from nadaraya.density._cdf import kernel_cdf
>>> sr = Series.of("epanechnikov")
>>> c = sr.coefficients(np.array([-0.3]))
>>> s = 0.05
>>> bool(abs(np.polynomial.polynomial.polyval(s / sr.rho, c[0]) - kernel_cdf("epanechnikov", -0.25)) < 1e-15)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

import numpy as np
from numpy.polynomial import Polynomial as P
from numpy.typing import NDArray
from scipy import special

__all__ = ["Series"]

_ONE = P([1.0])
_U = P([0.0, 1.0])

#: the normalised kernels' polynomial pieces (left end, right end, K on the piece)
_PIECES: dict[str, list[tuple[float, float, P]]] = {
    "epanechnikov": [(-1.0, 1.0, 0.75 * (1 - _U**2))],
    "boxcar": [(-1.0, 1.0, 0.5 * _ONE)],
    "triangular": [(-1.0, 0.0, 1 + _U), (0.0, 1.0, 1 - _U)],
    "biweight": [(-1.0, 1.0, 15.0 / 16.0 * (1 - _U**2) ** 2)],
    "triweight": [(-1.0, 1.0, 35.0 / 32.0 * (1 - _U**2) ** 3)],
    "tricube": [(-1.0, 0.0, 70.0 / 81.0 * (1 + _U**3) ** 3), (0.0, 1.0, 70.0 / 81.0 * (1 - _U**3) ** 3)],
    "parzen": [
        (-1.0, -0.5, 8.0 / 3.0 * (1 + _U) ** 3),
        (-0.5, 0.0, 4.0 / 3.0 - 8 * _U**2 - 8 * _U**3),
        (0.0, 0.5, 4.0 / 3.0 - 8 * _U**2 + 8 * _U**3),
        (0.5, 1.0, 8.0 / 3.0 * (1 - _U) ** 3),
    ],
}


@dataclass
class Series:
    """A kernel CDF's Taylor series: cell half-width ``rho`` (bandwidths), ``terms`` per series,
    ``breaks`` (where ``G`` is not analytic), ``reach`` (``G`` is 0 below ``-reach`` and 1 above
    ``reach`` to double precision, or by its support)."""

    name: str
    rho: float
    terms: int
    breaks: NDArray[np.float64]
    reach: float
    pieces: list[tuple[float, float, list[P]]] = field(default_factory=list)

    @classmethod
    def of(cls, name: str) -> Series:
        """The series of the kernel ``name`` (any kernel with a CDF)."""
        return _series(name)

    def coefficients(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        """``c_r(u) rho^r``, shape (n, terms): the series in ``s / rho`` of ``G(u + s)``, valid
        for ``|s| <= rho`` where no breakpoint lies within ``rho`` of ``u``."""
        u = np.asarray(u, dtype=np.float64)
        if self.pieces:
            out = self._polynomial(u)
        else:
            out = getattr(self, "_" + self.name)(u)
        return out * self.rho ** np.arange(self.terms)[None, :]  # type: ignore[no-any-return]

    def _polynomial(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        out = np.zeros((u.size, self.terms))
        out[u >= 1.0, 0] = 1.0
        for a, b, taylor in self.pieces:
            on = (u > a) & (u < b) if a > -1.0 else (u > -1.0) & (u < b)
            if not on.any():
                continue
            for r, q in enumerate(taylor):
                out[on, r] = q(u[on])
        return out

    def _gaussian(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        out = np.empty((u.size, self.terms))
        out[:, 0] = special.ndtr(u)
        v = np.clip(u, -60.0, 60.0)  # phi is 0 there: no inf * 0 in the Hermite polynomials
        prev, cur = np.zeros_like(v), np.exp(-0.5 * v * v) / math.sqrt(2.0 * math.pi)  # He_-1, He_0 phi
        for r in range(1, self.terms):  # c_r = (-1)^(r-1) He_(r-1) phi / r!
            out[:, r] = (-1.0) ** (r - 1) * cur / math.factorial(r)
            prev, cur = cur, v * cur - (r - 1) * prev
        return out

    def _logistic(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        # for v = |u|: 1 / D(s), D(s) = 1 + e^-v e^-s, by the power-series division q D = 1
        v = np.abs(u)
        e = np.exp(-v)
        d = [1.0 + e] + [e * (-1.0) ** k / math.factorial(k) for k in range(1, self.terms)]
        q = [1.0 / d[0]]
        for k in range(1, self.terms):
            q.append(-sum(d[j] * q[k - j] for j in range(1, k + 1)) / d[0])
        out = np.stack(q, axis=1)
        neg = u < 0  # G(u + s) = 1 - G(-u - s): flip the odd powers and take 1 - c_0
        sign = (-1.0) ** np.arange(2, self.terms + 1)  # c_k = (-1)^(k+1) q_k(|u|)
        out[neg, 1:] = out[neg, 1:] * sign[None, :]
        out[:, 0] = special.expit(u)
        return out

    def _laplacian(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        r = np.arange(self.terms)
        fact = np.array([math.factorial(k) for k in r], dtype=np.float64)
        neg = u < 0
        half = 0.5 * np.exp(-np.abs(u))[:, None]
        # u < 0: every derivative of e^u / 2 is e^u / 2; u >= 0: G = 1 - e^-u / 2
        out = np.where(neg[:, None], half, -((-1.0) ** r)[None, :] * half) / fact[None, :]
        out[:, 0] = np.where(neg, half[:, 0], 1.0 - half[:, 0])
        return out  # type: ignore[no-any-return]

    def _cosine(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        out = np.zeros((u.size, self.terms))
        inside = np.abs(u) < 1.0
        w = u[inside]
        out[u >= 1.0, 0] = 1.0
        out[inside, 0] = np.sin(math.pi / 4.0 * (1.0 + w)) ** 2
        for r in range(1, self.terms):  # G^(r) = (pi/2)^r sin(pi u / 2 + r pi / 2) / 2
            out[inside, r] = 0.5 * (math.pi / 2.0) ** r * np.sin(math.pi / 2.0 * w + r * math.pi / 2.0)
            out[inside, r] /= math.factorial(r)
        return out


@cache
def _series(name: str) -> Series:
    if name == "gaussian":
        return Series(name, 0.5, 23, np.empty(0), 10.0)
    if name == "logistic":
        return Series(name, 0.5, 27, np.empty(0), 45.0)
    if name == "laplacian":
        return Series(name, 0.25, 16, np.array([0.0]), 45.0)
    if name == "cosine":
        return Series(name, 0.125, 16, np.array([-1.0, 1.0]), 1.0)
    if name not in _PIECES:
        raise ValueError(f"kernel={name!r} has no CDF series")
    pieces, below = [], 0.0
    for a, b, k in _PIECES[name]:
        g = k.integ(lbnd=a) + below  # G on the piece: G(a) plus the integral of K from a
        taylor = [g.deriv(r) / math.factorial(r) if r else g for r in range(12)]
        pieces.append((a, b, taylor))
        below = float(g(b))
    breaks = np.unique(np.array([e for a, b, _ in _PIECES[name] for e in (a, b)]))
    return Series(name, 0.125, 12, breaks, 1.0, pieces)
