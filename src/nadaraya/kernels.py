"""Kernel registry: each kernel's profile, support, log-profile and constants, as data.

A kernel is a symmetric function ``K(u)`` of the scaled distance ``u = (q - k) / h``.
Multivariate kernels are product kernels, ``prod_j K(u_j)``, as in R's ``np`` package and
statsmodels. Normalising constants cancel in the attention weights, so they never change a
prediction; they are kept so that rules of thumb can rescale bandwidths between kernels.

============  =============================  =======  ============================  ====================
name          K(u)                           support  log-profile                   aliases
============  =============================  =======  ============================  ====================
gaussian      ``exp(-u^2/2) / sqrt(2 pi)``   inf      ``-u^2/2``                    normal, rbf
epanechnikov  ``3/4 (1 - u^2)``              1
boxcar        ``1/2``                        1                                      uniform, tophat
triangular    ``1 - |u|``                    1
biweight      ``15/16 (1 - u^2)^2``          1                                      quartic
triweight     ``35/32 (1 - u^2)^3``          1
tricube       ``70/81 (1 - |u|^3)^3``        1
cosine        ``pi/4 cos(pi u / 2)``         1
parzen        cubic B-spline on [-1, 1]      1
constant      ``1 (average pooling)``        inf      ``0``                         average, mean
laplacian     ``exp(-|u|) / 2``              inf      ``-|u|``                      laplace, exponential
logistic      ``1 / (e^u + 2 + e^-u)``       inf      ``-|u| - 2 log(1 + e^-|u|)``
============  =============================  =======  ============================  ====================

Note: the function that the Dive into Deep Learning chapter on Nadaraya-Watson regression
calls ``epanechikov``, ``max(1 - |u|, 0)``, is the *triangular* kernel. The Epanechnikov
kernel is ``3/4 (1 - u^2)`` on ``|u| <= 1``.

Examples
--------
>>> from nadaraya import kernels
>>> k = kernels.get("quartic")
>>> k.name, k.support
('biweight', 1.0)
>>> float(k(0.0))
0.9375
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["REGISTRY", "Kernel", "get", "names"]

#: ``profile(u, xp=numpy)``: elementwise on an array of the namespace ``xp``.
Profile = Callable[..., Any]


@dataclass(frozen=True)
class Kernel:
    """One univariate kernel and its constants.

    Parameters
    ----------
    name : str
        Canonical name.
    profile : callable
        ``K(u, xp=numpy)`` on an array of scaled distances; zero outside the support. ``xp``
        is the array namespace (``numpy`` or ``torch``): the maths is written once.
    support : float
        ``1.0`` for compact kernels (zero for ``|u| > 1``), ``inf`` otherwise.
    log_profile : callable or None
        ``log K(u, xp=numpy)`` up to an additive constant, for kernels computed in the log
        domain.
    integral, second_moment, roughness : float
        The integrals of ``K``, ``u^2 K`` and ``K^2`` over the real line (NaN for the
        constant kernel, which is not integrable).
    aliases : tuple of str
        Other names accepted by :func:`get`.
    polynomial : tuple of float or None
        For kernels that are a polynomial in ``u^2`` (or ``|u|``) on their support, the
        coefficients in increasing powers of ``u`` (``|u|`` for odd powers); used by the
        windowed backend to sum from prefix moments.
    far_power : float
        The power ``p`` with which ``-log K(u)`` grows far from zero (``u^2 / 2``: 2 for the
        Gaussian; ``|u|``: 1 for the Laplacian and the logistic). A query so far from every
        key that its log weights overflow gets their limit: the key nearest in the Minkowski
        ``p``-distance of ``x / h`` (for a product kernel the log weight is a sum over
        features of ``-|u_j|^p``). Compact kernels' ``empty="nearest"`` uses 2.
    log_ratio : callable or None
        ``log K(a + d) - log K(a)`` computed without cancellation, ``log_ratio(a, d, xp)``:
        the log weight of a key relative to an anchor key at scaled distance ``a`` from the
        query, ``d`` being the difference of the two keys' scaled distances (computed from the
        keys alone). Far queries are recomputed this way (see :func:`nadaraya.pool`), where
        ``log K`` itself is too large to keep the differences between keys.
    derivative : callable or None
        ``d log K / du`` for log-domain kernels (``-u`` for the Gaussian), ``dK / du`` for the
        others (0 where ``K`` has a jump, as for the boxcar's edges): the derivative of a
        Nadaraya-Watson fit with respect to its query (``NadarayaWatson.gradient``).

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> g = get("gaussian")
    >>> round(float(g(1.0)), 6)
    0.241971
    >>> g.canonical_bandwidth > 0
    True
    """

    name: str
    profile: Profile
    support: float
    log_profile: Profile | None
    integral: float
    second_moment: float
    roughness: float
    aliases: tuple[str, ...] = ()
    polynomial: tuple[float, ...] | None = field(default=None)
    far_power: float = 2.0
    log_ratio: Profile | None = field(default=None)
    derivative: Profile | None = field(default=None)

    def __call__(self, u: ArrayLike) -> NDArray[np.floating]:
        """Evaluate the profile ``K(u)``."""
        return self.profile(np.asarray(u, dtype=float))

    @property
    def compact(self) -> bool:
        """Whether the kernel vanishes for ``|u| > 1``."""
        return math.isfinite(self.support)

    @property
    def log_domain(self) -> bool:
        """Whether weights are computed as ``exp(log K - running max)``."""
        return self.log_profile is not None

    @property
    def canonical_bandwidth(self) -> float:
        """``(R(K) / mu_2(K)^2) ** (1/5)``: scales a bandwidth between kernels.

        Two kernels give (asymptotically) the same amount of smoothing when their
        bandwidths are in the ratio of their canonical bandwidths (Marron and Nolan, 1988).
        """
        return float((self.roughness / self.second_moment**2) ** 0.2)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r})"


# Each profile takes the array namespace ``xp`` (NumPy by default, ``torch`` for the layers
# in nadaraya.nn), so that the kernel maths is written once for every backend.


def _gaussian(u: Any, xp: Any = np) -> Any:
    return xp.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)


def _epanechnikov(u: Any, xp: Any = np) -> Any:
    return xp.where(xp.abs(u) <= 1.0, 0.75 * (1.0 - u * u), 0.0)


def _boxcar(u: Any, xp: Any = np) -> Any:
    return xp.where(xp.abs(u) <= 1.0, 0.5 + 0.0 * u, 0.0)


def _triangular(u: Any, xp: Any = np) -> Any:
    a = xp.abs(u)
    return xp.where(a <= 1.0, 1.0 - a, 0.0)


def _biweight(u: Any, xp: Any = np) -> Any:
    return xp.where(xp.abs(u) <= 1.0, 15.0 / 16.0 * (1.0 - u * u) ** 2, 0.0)


def _triweight(u: Any, xp: Any = np) -> Any:
    return xp.where(xp.abs(u) <= 1.0, 35.0 / 32.0 * (1.0 - u * u) ** 3, 0.0)


def _tricube(u: Any, xp: Any = np) -> Any:
    a = xp.abs(u)
    return xp.where(a <= 1.0, 70.0 / 81.0 * (1.0 - a**3) ** 3, 0.0)


def _cosine(u: Any, xp: Any = np) -> Any:
    return xp.where(xp.abs(u) <= 1.0, math.pi / 4.0 * xp.cos(math.pi / 2.0 * u), 0.0)


def _parzen(u: Any, xp: Any = np) -> Any:
    a = xp.clip(xp.abs(u), 0.0, 2.0)  # no inf - inf for |u| near the float range (0 there)
    inner = 4.0 / 3.0 - 8.0 * a * a + 8.0 * a**3
    outer = 8.0 / 3.0 * (1.0 - a) ** 3
    return xp.where(a <= 0.5, inner, xp.where(a <= 1.0, outer, 0.0))


def _constant(u: Any, xp: Any = np) -> Any:
    return xp.ones_like(u)


def _constant_log(u: Any, xp: Any = np) -> Any:
    return xp.zeros_like(u)


def _gaussian_log(u: Any, xp: Any = np) -> Any:
    return -0.5 * u * u


def _gaussian_ratio(a: Any, d: Any, xp: Any = np) -> Any:
    # -((a + d)^2 - a^2) / 2 = -d (a + d / 2); zero where the keys coincide (also for a = inf)
    return xp.where(d == 0, 0.0, -d * (a + 0.5 * d))


def _laplacian_ratio(a: Any, d: Any, xp: Any = np) -> Any:
    # |a| - |a + d|: -d sign(a) where a and a + d are on one side of zero (no cancellation)
    b = a + d
    same = (a >= 0) == (b >= 0)
    return xp.where(d == 0, 0.0, xp.where(same, xp.where(a >= 0, -d, d), xp.abs(a) - xp.abs(b)))


def _logistic_ratio(a: Any, d: Any, xp: Any = np) -> Any:
    tail = 2.0 * (xp.log1p(xp.exp(-xp.abs(a))) - xp.log1p(xp.exp(-xp.abs(a + d))))
    return _laplacian_ratio(a, d, xp) + xp.where(d == 0, 0.0, tail)


def _constant_ratio(a: Any, d: Any, xp: Any = np) -> Any:
    return xp.zeros_like(a + d)


def _laplacian(u: Any, xp: Any = np) -> Any:
    return 0.5 * xp.exp(-xp.abs(u))


def _laplacian_log(u: Any, xp: Any = np) -> Any:
    return -xp.abs(u)


def _logistic(u: Any, xp: Any = np) -> Any:
    a = xp.exp(-xp.abs(u))
    return a / (1.0 + a) ** 2


def _logistic_log(u: Any, xp: Any = np) -> Any:
    a = xp.abs(u)
    return -a - 2.0 * xp.log1p(xp.exp(-a))


def _inside(u: Any, value: Any, xp: Any = np) -> Any:
    return xp.where(xp.abs(u) <= 1.0, value, 0.0)


# Derivatives: d log K / du for the log-domain kernels, dK / du for the others. Named functions,
# not lambdas, so that a kernel pickles (estimators holding one are cloned and saved).


def _d_gaussian(u: Any, xp: Any = np) -> Any:
    return -u


def _d_laplacian(u: Any, xp: Any = np) -> Any:
    return -xp.sign(u)


def _d_logistic(u: Any, xp: Any = np) -> Any:
    return -xp.tanh(0.5 * u)


def _d_flat(u: Any, xp: Any = np) -> Any:
    return xp.zeros_like(u)


def _d_epanechnikov(u: Any, xp: Any = np) -> Any:
    return _inside(u, -1.5 * u, xp)


def _d_triangular(u: Any, xp: Any = np) -> Any:
    return _inside(u, -xp.sign(u), xp)


def _d_biweight(u: Any, xp: Any = np) -> Any:
    return _inside(u, -15.0 / 4.0 * u * (1.0 - u * u), xp)


def _d_triweight(u: Any, xp: Any = np) -> Any:
    return _inside(u, -105.0 / 16.0 * u * (1.0 - u * u) ** 2, xp)


def _d_tricube(u: Any, xp: Any = np) -> Any:
    a = xp.abs(u)
    return _inside(u, -70.0 / 9.0 * u * a * (1.0 - a**3) ** 2, xp)


def _d_cosine(u: Any, xp: Any = np) -> Any:
    return _inside(u, -(math.pi**2) / 8.0 * xp.sin(math.pi / 2.0 * u), xp)


def _d_parzen(u: Any, xp: Any = np) -> Any:
    a = xp.abs(u)
    return xp.sign(u) * xp.where(a <= 0.5, -16.0 * a + 24.0 * u * u, _inside(u, -8.0 * (1.0 - a) ** 2, xp))


_DERIVATIVES: dict[str, Profile] = {
    "gaussian": _d_gaussian, "laplacian": _d_laplacian, "logistic": _d_logistic, "constant": _d_flat,
    "epanechnikov": _d_epanechnikov, "boxcar": _d_flat, "triangular": _d_triangular,
    "biweight": _d_biweight, "triweight": _d_triweight, "tricube": _d_tricube, "cosine": _d_cosine,
    "parzen": _d_parzen,
}

_NAN = float("nan")

#: every kernel by its canonical name (:func:`get` also accepts the aliases)
REGISTRY: dict[str, Kernel] = {
    k.name: k
    for k in (
        Kernel("gaussian", _gaussian, math.inf, _gaussian_log, 1.0, 1.0, 0.5 / math.sqrt(math.pi),
               aliases=("normal", "rbf"), log_ratio=_gaussian_ratio),
        Kernel("epanechnikov", _epanechnikov, 1.0, None, 1.0, 0.2, 0.6,
               polynomial=(0.75, 0.0, -0.75)),
        Kernel("boxcar", _boxcar, 1.0, None, 1.0, 1.0 / 3.0, 0.5, aliases=("uniform", "tophat"),
               polynomial=(0.5,)),
        Kernel("triangular", _triangular, 1.0, None, 1.0, 1.0 / 6.0, 2.0 / 3.0,
               polynomial=(1.0, -1.0)),
        Kernel("biweight", _biweight, 1.0, None, 1.0, 1.0 / 7.0, 5.0 / 7.0, aliases=("quartic",),
               polynomial=(15 / 16, 0.0, -30 / 16, 0.0, 15 / 16)),
        Kernel("triweight", _triweight, 1.0, None, 1.0, 1.0 / 9.0, 350.0 / 429.0,
               polynomial=(35 / 32, 0.0, -105 / 32, 0.0, 105 / 32, 0.0, -35 / 32)),
        Kernel("tricube", _tricube, 1.0, None, 1.0, 35.0 / 243.0, 175.0 / 247.0,
               polynomial=tuple(70 / 81 * c for c in (1, 0, 0, -3, 0, 0, 3, 0, 0, -1))),
        Kernel("cosine", _cosine, 1.0, None, 1.0, 1.0 - 8.0 / math.pi**2, math.pi**2 / 16.0),
        Kernel("parzen", _parzen, 1.0, None, 1.0, 1.0 / 12.0, 302.0 / 315.0),
        Kernel("constant", _constant, math.inf, _constant_log, _NAN, _NAN, _NAN,
               aliases=("average", "mean"), log_ratio=_constant_ratio),
        Kernel("laplacian", _laplacian, math.inf, _laplacian_log, 1.0, 2.0, 0.25,
               aliases=("laplace", "exponential"), far_power=1.0, log_ratio=_laplacian_ratio),
        Kernel("logistic", _logistic, math.inf, _logistic_log, 1.0, math.pi**2 / 3.0, 1.0 / 6.0,
               far_power=1.0, log_ratio=_logistic_ratio),
    )
}

REGISTRY = {name: replace(k, derivative=_DERIVATIVES[name]) for name, k in REGISTRY.items()}

_ALIASES: dict[str, str] = {a: k.name for k in REGISTRY.values() for a in (k.name, *k.aliases)}


def names(*, aliases: bool = False) -> list[str]:
    """Canonical names of the registered kernels; with ``aliases``, every name :func:`get`
    accepts (lower case; :func:`get` also takes any case and surrounding spaces).

    Examples
    --------
    >>> from nadaraya.kernels import names
    >>> "gaussian" in names(), "tophat" in names(), "tophat" in names(aliases=True)
    (True, False, True)
    """
    return list(_ALIASES) if aliases else list(REGISTRY)


def get(kernel: str | Kernel) -> Kernel:
    """Look up a kernel by name or alias (case-insensitive).

    Parameters
    ----------
    kernel : str or Kernel
        A name such as ``"gaussian"`` or ``"uniform"``, or a :class:`Kernel` (returned as is).

    Returns
    -------
    Kernel

    Raises
    ------
    ValueError
        If the name is unknown; the message lists the valid names.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> get("tophat").name
    'boxcar'
    """
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, str):
        key = kernel.strip().lower()
        if key in _ALIASES:
            return REGISTRY[_ALIASES[key]]
    valid = ", ".join(sorted(_ALIASES))
    raise ValueError(f"kernel={kernel!r} is not a known kernel; valid names are: {valid}")
