"""Plug-in bandwidths (MSE/IMSE, DPI/ROT) of 1-D local polynomial fits, as nprobust's lpbwselect.

``"mse-dpi"`` (Calonico, Cattaneo and Farrell, 2018): at a point ``c``, the MSE-optimal
``h = (V / (2 (p + 1) B^2 n))^(1 / (2p + 3))`` (degree ``p`` odd; for even ``p`` the bias has two
terms and ``h`` minimises ``H^(2p+2) (B1 + H B2)^2 + V / (n H)``), the variance ``V`` from a
pilot fit at the rule-of-thumb ``c_bw = C_K min(sd, IQR / 1.349) n^(-1/5)`` with nprobust's
residuals, the bias from derivatives estimated by higher-order fits whose own bandwidths come
from the same rule one and two orders up, and a regularisation ``3 B^2 Var(B)`` (``bwregul``).
The bias bandwidth ``b`` is the same rule for the degree-``p + 1`` fit's ``(p + 1)``-th
derivative. ``"imse-dpi"`` averages ``V`` and ``B^2`` over ``imsegrid`` (30) evenly spaced points
of the data's range. ``"mse-rot"``/``"imse-rot"`` take ``V = sigma^2 / f(c)`` and the bias from a
global polynomial of degree ``p + 3`` and a density estimate (averaged over 37 quantiles for
``imse``). Every step, constant and search (``scipy.optimize.minimize_scalar``, bounded) is
nprobust's; the local fits share :mod:`nadaraya.local.sandwich` with the robust variances.

Kernels: nprobust's ``epa``, ``uni``, ``tri`` and ``gau`` are nadaraya's ``"epanechnikov"``,
``"boxcar"``, ``"triangular"`` and ``"gaussian"``, with the same scaled distance
``u = (x - c) / h``: the bandwidths mean the same in both.
"""

from __future__ import annotations

from math import factorial
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from nadaraya.kernels import get as get_kernel
from nadaraya.local.sandwich import RULES, duplicates, leverage, point_fit, residuals, sandwich, window

__all__ = ["PLUGINS", "Plugin", "plugin_bandwidth"]

PLUGINS = ("mse-dpi", "imse-dpi", "mse-rot", "imse-rot")
_NAMES = {"epanechnikov": "epa", "boxcar": "uni", "triangular": "tri", "gaussian": "gau"}


class Plugin(NamedTuple):
    """A plug-in choice: the bandwidth ``h`` of the degree-``p`` fit and ``b`` of its bias estimate."""

    h: Any
    b: Any


class _Data:
    """Sorted data, its duplicates, clusters and the constants every step reads."""

    def __init__(self, x: Any, y: Any, clusters: Any, kernel: Any, rule: str, nnmatch: int) -> None:
        order = np.argsort(x, kind="stable")
        self.x, self.y = x[order], y[order]
        self.clusters = None if clusters is None else clusters[order]
        self.dups, self.dupsid = duplicates(self.x)
        self.kernel, self.rule, self.nnmatch = kernel, rule, nnmatch
        self.n = x.shape[0]
        self.range = float(self.x[-1] - self.x[0])


def _minimise(f: Any, upper: float) -> float:
    from scipy.optimize import minimize_scalar

    return float(minimize_scalar(f, bounds=(np.finfo(float).eps, upper), method="bounded").x)


def _variance(d: _Data, fit: Any, order: int, nu: int, h: float, with_hii: bool = True) -> float:
    """``Var`` of coefficient ``nu`` of ``fit`` in nprobust's raw units (its sandwich)."""
    hii = leverage(fit) if d.rule in ("hc2", "hc3") and with_hii else None
    res = residuals(d.rule, fit, d.x, d.y, d.dups, d.dupsid, d.nnmatch, hii)
    C = None if d.clusters is None else d.clusters[fit.idx]
    V = fit.invG @ sandwich(fit.R * fit.W[:, None], res, C) @ fit.invG
    return float(V[nu, nu]) / h ** (2 * nu)


def _fit(d: _Data, c: float, h: float, order: int) -> Any:
    idx, W = window(d.x, c, h, d.kernel)
    return point_fit(d.x, d.y, idx, W, c, h, order)


def _bw(
    d: _Data, c: float, o: int, nu: int, o_B: int, h_V: float, h_B1: float, h_B2: float, scale: float
) -> dict[str, float]:
    """nprobust's ``lprobust_bw``: variance and bias constants of coefficient ``nu`` of an order-``o`` fit."""
    fv = _fit(d, c, h_V, o)
    V_V = _variance(d, fv, o, nu, h_V)
    BConst1 = float((fv.invG @ fv.S[o + 1 : 2 * o + 2])[nu])  # sum W R u^(o+1) = S[o+1+i]
    BConst2 = float((fv.invG @ fv.S[o + 2 : 2 * o + 3])[nu])
    f1 = _fit(d, c, h_B1, o_B)
    R = 0.0
    if scale > 0:
        R = 3.0 * BConst1**2 * _variance(d, f1, o_B, o + 1, h_B1)
    f2 = _fit(d, c, h_B2, o_B + 1)
    B1 = BConst1 * float(f1.beta[o + 1]) / h_B1 ** (o + 1)
    B2 = BConst2 * float(f2.beta[o + 2]) / h_B2 ** (o + 2)
    V = d.n * h_V ** (2 * nu + 1) * V_V
    r, rB, rV = 1.0 / (2 * o + 3), 2.0 * (o + 1 - nu), 2.0 * nu + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        bw = ((rV * V) / (d.n * rB * (B1**2 + scale * R))) ** r
    return {"V": V, "B1": B1, "B2": B2, "R": R, "rV": rV, "rB": rB, "bw": bw}


def _mse_dpi(
    d: _Data, c: float, p: int, bwcheck: int | None, bwregul: float, interior: bool
) -> dict[str, float]:
    """nprobust's ``lpbwselect_mse_dpi`` at ``c`` (derivative 0)."""
    q, N, x = p + 1, d.n, d.x
    odd = p % 2 == 1 or interior
    C_c = {"epa": 2.34, "uni": 1.843, "tri": 2.576, "gau": 1.06}[_NAMES[d.kernel.name]]
    iq = float(np.percentile(x, 75) - np.percentile(x, 25))
    bw_max = max(abs(c - x[0]), abs(c - x[-1]))
    c_bw = min(C_c * min(float(np.std(x, ddof=1)), iq / 1.349) * N ** (-0.2), bw_max)
    bw_min = 0.0
    if bwcheck is not None:
        bw_min = float(np.sort(np.abs(x - c))[min(bwcheck - 1, N - 1)])
        c_bw = max(c_bw, bw_min)

    def pilot(o: int) -> float:
        C = _bw(d, c, o, o, o + 1, c_bw, d.range, d.range, 0.0)
        if odd:
            return C["bw"]
        return _minimise(
            lambda H: abs(H**2 * (C["B1"] + H * C["B2"]) ** 2 + C["V"] / (N * H ** (1 + 2 * o))), d.range
        )

    def clip(v: float) -> float:
        v = min(v, bw_max)
        return max(v, bw_min) if bwcheck is not None else v

    mp2, mp3 = clip(pilot(q + 1)), clip(pilot(q + 2))
    C_b = _bw(d, c, q, p + 1, q + 1, c_bw, mp2, mp3, bwregul)
    if odd:
        b = C_b["bw"]
    else:
        b = _minimise(
            lambda H: abs(
                H ** (2 * q + 2 - 2 * (p + 1)) * (C_b["B1"] + H * C_b["B2"] + bwregul * C_b["R"]) ** 2
                + C_b["V"] / (N * H ** (1 + 2 * (p + 1)))
            ),
            d.range,
        )
    b = clip(b)
    C_h = _bw(d, c, p, 0, q, c_bw, b, mp2, bwregul)
    if odd:
        h = C_h["bw"]
    else:
        h = _minimise(
            lambda H: abs(
                H ** (2 * p + 2) * (C_h["B1"] + H * C_h["B2"] + bwregul * C_h["R"]) ** 2 + C_h["V"] / (N * H)
            ),
            d.range,
        )
    h = clip(h)
    if odd:
        return {
            "h": h,
            "b": b,
            "V_h": C_h["rV"] * C_h["V"],
            "B_h": C_h["rB"] * C_h["B1"] ** 2,
            "V_b": C_b["rV"] * C_b["V"],
            "B_b": C_b["rB"] * C_b["B1"] ** 2,
        }
    return {
        "h": h,
        "b": b,
        "V_h": C_h["V"],
        "B_h": (C_h["B1"] + h * C_h["B2"]) ** 2,
        "V_b": C_b["V"],
        "B_b": (C_b["B1"] + b * C_b["B2"]) ** 2,
    }


def _imse_dpi(d: _Data, p: int, bwcheck: int | None, bwregul: float, imsegrid: int, interior: bool) -> Plugin:
    """nprobust's ``lpbwselect_imse_dpi``: ``V`` and ``B^2`` averaged over ``imsegrid`` points."""
    q, N = p + 1, d.n
    grid = np.linspace(d.x[0], d.x[-1], imsegrid)
    est = [_mse_dpi(d, float(c), p, bwcheck, bwregul, interior) for c in grid]
    V_h, B_h, V_b, B_b = (np.mean([e[k] for e in est]) for k in ("V_h", "B_h", "V_b", "B_b"))
    if p % 2 == 1 or interior:
        return Plugin(
            float((V_h / (N * B_h)) ** (1 / (2 * p + 3))), float((V_b / (N * B_b)) ** (1 / (2 * q + 3)))
        )
    b = _minimise(
        lambda H: abs(H ** (2 * q + 2 - 2 * (p + 1)) * B_b + V_b / (N * H ** (1 + 2 * (p + 1)))), d.range
    )
    h = _minimise(lambda H: abs(H ** (2 * p + 2) * B_h + V_h / (N * H)), d.range)
    return Plugin(h, b)


def _kernel_constants(d: _Data, p: int, v: int) -> tuple[float, float]:
    """nprobust's ``lp_bw_fun`` constants ``C1 = (Gamma^-1 nu)_v`` and ``C2 = (Gamma^-1 Psi Gamma^-1)_vv``."""
    from scipy.integrate import quad

    k = d.kernel.profile
    top = np.inf if d.kernel.name == "gaussian" else 1.0

    def m(i: int, j: int, power: int) -> float:
        return float(quad(lambda t: t**i * t**j * float(k(np.asarray(t))) ** power, 0, top)[0])

    G = np.array([[m(i, j, 1) for j in range(p + 1)] for i in range(p + 1)])
    nu = np.array([m(i, p + 1, 1) for i in range(p + 1)])
    Psi = np.array([[m(i, j, 2) for j in range(p + 1)] for i in range(p + 1)])
    Gi = np.linalg.inv(G)
    return float((Gi @ nu)[v]), float((Gi @ Psi @ Gi)[v, v])


def _mse_rot(
    d: _Data, c: float, p: int, v: int, consts: tuple[float, float], fit: Any
) -> tuple[float, float, float]:
    """nprobust's ``lpbwselect_mse_rot`` at ``c`` for derivative ``v``: ``(h, V, B)``."""
    x, N = d.x, d.n
    even = (p - v) % 2 == 0
    C_c = {"epa": 2.34, "uni": 1.843, "tri": 2.576, "gau": 2.34}[_NAMES[d.kernel.name]]
    iq = float(np.percentile(x, 75) - np.percentile(x, 25))
    c_bw = C_c * min(float(np.std(x, ddof=1)), iq / 1.349) * N ** (-0.2)
    f_hat = max(np.sum(np.abs(x - c) <= c_bw) / (2 * N * c_bw), 1e-10)
    s2, lp = fit
    beta = lp(c)
    m1 = factorial(p + 1) * beta[p + 1] / d.range ** (p + 1)
    m2 = factorial(p + 2) * beta[p + 2] / d.range ** (p + 2)
    C1, C2 = consts
    B1, B2, V = C1 * m1 / factorial(p + 1), C1 * m2 / factorial(p + 2), C2 * s2 / f_hat
    if not even:
        Bsq = (m1 / factorial(p + 1)) ** 2
        return (
            float(
                ((2 * v + 1) * C2 * (s2 / f_hat) / (2 * (p + 1 - v) * C1**2 * Bsq * N)) ** (1 / (2 * p + 3))
            ),
            V,
            B1,
        )
    h = _minimise(
        lambda H: abs(H ** (2 * p + 2 - 2 * v) * (B1 + H * B2) ** 2 + V / (N * H ** (1 + 2 * v))), d.range
    )
    return h, V, B1 + h * B2


def _rot(d: _Data, p: int, v: int, points: NDArray[np.float64], integrated: bool) -> Any:
    """``mse-rot`` at ``points`` (an array of h) or ``imse-rot`` over them (one h)."""
    N, x = d.n, d.x
    k = p + 3
    Rk = x[:, None] ** np.arange(k + 1)
    gamma = np.linalg.lstsq(Rk, d.y, rcond=None)[0]
    s2 = float(np.sum((d.y - Rk @ gamma) ** 2) / (N - k - 1))

    def lp(c: float) -> NDArray[np.float64]:  # lprobust(p=p+3, h=range) at c: its scaled coefficients
        idx, W = window(x, c, max(d.range, float(np.sort(np.abs(x - c))[min(20, N - 1)])), d.kernel)
        return point_fit(x, d.y, idx, W, c, d.range, p + 3).beta

    consts = _kernel_constants(d, p, v)
    out = [_mse_rot(d, float(c), p, v, consts, (s2, lp)) for c in points]
    if not integrated:
        return np.array([o[0] for o in out])
    V, B = np.array([o[1] for o in out]), np.array([o[2] for o in out])
    if (p - v) % 2 == 1:
        return float((np.mean((1 + 2 * v) * V) / (N * np.mean(2 * (p + 1 - v) * B**2))) ** (1 / (2 * p + 3)))
    return _minimise(
        lambda H: abs(H ** (2 * p + 2 - 2 * v) * np.mean(B**2) + np.mean(V) / (N * H ** (1 + 2 * v))), d.range
    )


def _check(
    x: Any, y: Any, method: str, degree: int, kernel: Any, variance: str, clusters: Any
) -> tuple[Any, ...]:
    if method not in PLUGINS:
        raise ValueError(f"method={method!r} is not valid; choose one of {', '.join(map(repr, PLUGINS))}")
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or not 0 <= degree <= 2:
        raise ValueError(f"degree={degree!r} is not valid for a plug-in bandwidth; choose 0, 1 or 2")
    k = get_kernel(kernel)
    if k.name not in _NAMES:
        raise ValueError(
            f"kernel={kernel!r} has no plug-in bandwidth (nprobust's kernels): choose one of "
            f"{', '.join(map(repr, _NAMES))}"
        )
    if variance not in RULES:
        raise ValueError(f"variance={variance!r} is not valid; choose one of {', '.join(map(repr, RULES))}")
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xa.ndim == 2 and xa.shape[1] == 1:
        xa = xa[:, 0]
    if xa.ndim != 1:
        raise ValueError(
            f"x has shape {xa.shape}: plug-in bandwidths are for one feature (nprobust's lpbwselect)"
        )
    if ya.ndim == 2 and ya.shape[1] == 1:
        ya = ya[:, 0]
    if ya.shape != xa.shape:
        raise ValueError(
            f"y has shape {ya.shape}; plug-in bandwidths need one response per x, shape {xa.shape}"
        )
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(ya))):
        raise ValueError("x and y must be finite for a plug-in bandwidth")
    if np.unique(xa).size < degree + 9:
        raise ValueError(
            f"a plug-in bandwidth of degree {degree} fits pilot polynomials of degree {degree + 6}: "
            f"it needs at least {degree + 9} distinct x; got {np.unique(xa).size}"
        )
    c = None
    if clusters is not None:
        c = np.asarray(clusters)
        if c.shape != xa.shape:
            raise ValueError(f"clusters has shape {c.shape}; give one label per x, shape {xa.shape}")
    return xa, ya, k, c


def plugin_bandwidth(
    x: Any,
    y: Any,
    method: str = "imse-dpi",
    *,
    degree: int = 1,
    kernel: str = "epanechnikov",
    at: Any = None,
    variance: str = "nn",
    clusters: Any = None,
    bwcheck: int | None = 21,
    bwregul: float = 1.0,
    imsegrid: int = 30,
    nnmatch: int = 3,
    interior: bool = False,
) -> Plugin:
    """nprobust's plug-in bandwidths ``(h, b)`` for a local polynomial fit of ``y`` on ``x`` (1-D).

    Parameters
    ----------
    x, y : array-like of shape (n_samples,)
    method : {"imse-dpi", "mse-dpi", "imse-rot", "mse-rot"}, default "imse-dpi"
        Integrated (one pair for the whole range) or pointwise MSE, direct plug-in or rule of
        thumb, as ``nprobust.lpbwselect(bwselect=...)``.
    degree : int, default 1
        The fit's degree ``p`` (0, 1 or 2); the bias fit has degree ``p + 1``.
    kernel : {"epanechnikov", "boxcar", "triangular", "gaussian"}, default "epanechnikov"
        nprobust's ``epa``, ``uni``, ``tri``, ``gau`` (the same functions of ``(x - c) / h``).
    at : float or array-like, optional
        The points of the pointwise methods (default: the median of ``x``).
    variance : {"nn", "hc0", "hc1", "hc2", "hc3"}, default "nn"
        The residuals of the DPI pilot variances (nprobust's ``vce``); ``clusters`` its ``cluster``.
    bwcheck, bwregul, imsegrid, nnmatch, interior
        nprobust's settings of the same names, with its defaults.

    Returns
    -------
    Plugin
        ``(h, b)``: floats, or arrays over ``at`` for the pointwise methods given an array.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 1, 300); y = np.sin(6 * x) + rng.normal(0, 0.3, 300)
    >>> h, b = plugin_bandwidth(x, y, "imse-dpi")
    >>> bool(0 < h < b < 1)
    True
    """
    xa, ya, k, c = _check(x, y, method, degree, kernel, variance, clusters)
    d = _Data(xa, ya, c, k, variance, int(nnmatch))
    p = int(degree)
    if method == "imse-dpi":
        return _imse_dpi(d, p, bwcheck, float(bwregul), int(imsegrid), bool(interior))
    if method == "imse-rot":
        pts = np.percentile(xa, np.linspace(5, 95, 37))
        return Plugin(_rot(d, p, 0, pts, True), _rot(d, p + 1, p + 1, pts, True))
    pts = np.atleast_1d(np.asarray(float(np.median(xa)) if at is None else at, dtype=np.float64))
    if method == "mse-dpi":
        est = [_mse_dpi(d, float(c0), p, bwcheck, float(bwregul), bool(interior)) for c0 in pts]
        h, b = np.array([e["h"] for e in est]), np.array([e["b"] for e in est])
    else:
        h, b = _rot(d, p, 0, pts, False), _rot(d, p + 1, p + 1, pts, False)
    if np.ndim(at) == 0:
        return Plugin(float(h[0]), float(b[0]))
    return Plugin(h, b)


def resolve_plugin(
    model: Any, X: NDArray[np.float64], y: NDArray[np.float64], sample_weight: Any, vt: str
) -> Any:
    """The estimator's ``bandwidth="mse-dpi"`` etc.: ``h`` (``bias_bandwidth_`` keeps ``b``)."""
    if X.shape[1] != 1 or vt != "c" or sample_weight is not None:
        raise ValueError(
            f"bandwidth={model.bandwidth!r} (nprobust's plug-in) is for one continuous feature "
            f"without sample weights; got {X.shape[1]} feature(s) of types {vt!r}"
            + (" with sample_weight" if sample_weight is not None else "")
        )
    if y.ndim == 2 and y.shape[1] != 1:
        raise ValueError(
            f"bandwidth={model.bandwidth!r} (nprobust's plug-in) is for one output; y has {y.shape[1]}"
        )
    h, b = plugin_bandwidth(X[:, 0], y.reshape(-1), model.bandwidth, degree=model.degree, kernel=model.kernel)
    model.bias_bandwidth_ = float(b)
    return np.array([h], dtype=np.float64)
