"""The sums under a conditional density: pool's partials with unit values, and the x-weights.

``f(y | x) = sum_i K_x(x - X_i) K_y(y - Y_i) / sum_i K_x(x - X_i)``, the ratio of the joint and
the marginal kernel densities. Both are the engine's partial sums with unit values
(:func:`log_sums` over ``log_kde``), kept in the log domain. The CDF and the quantiles need,
per query, the x-weights of every key (the factor in ``y`` changes with the query):
:func:`x_log_weights` gives them in blocks of queries, from the reference backend's block
weights and the categorical factors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.config import get_config
from nadaraya.backends.reference import block_weights
from nadaraya.density._cdf import categorical_cdf, kernel_cdf
from nadaraya.density._constants import Categories, log_kde
from nadaraya.kernels import Kernel
from nadaraya.local.mixed import Categorical

__all__ = ["Sample", "log_constant", "log_sums", "x_log_weights", "y_cdf", "y_log_kernel"]


def log_constant(kernel: Kernel) -> float:
    """``log K(u) - log_profile(u)`` for a log-domain kernel (its log-profile drops the
    normalising constant), 0 for the others (their profile is normalised).

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> round(log_constant(get("gaussian")), 6) == round(-0.5 * math.log(2 * math.pi), 6)
    True
    """
    if kernel.log_profile is None:
        return 0.0
    return float(math.log(float(kernel.profile(np.zeros(1))[0])) - float(kernel.log_profile(np.zeros(1))[0]))


@dataclass
class Sample:
    """The training data of a conditional density, validated: x (n, dx), y (n, dy), their
    types, the bandwidths (x's then y's), the kernels, the sample weights and the levels of the
    categorical columns (x's then y's)."""

    x: NDArray[np.float64]
    y: NDArray[np.float64]
    var_types: str
    dep_types: str
    bandwidth: NDArray[np.float64]
    kernel: Kernel
    categorical_kernel: str
    sample_weight: NDArray[np.float64] | None
    backend: str = "auto"
    tol: float | None = None

    @property
    def dx(self) -> int:
        return self.x.shape[1]

    @property
    def hx(self) -> NDArray[np.float64]:
        return self.bandwidth[: self.dx]

    @property
    def hy(self) -> NDArray[np.float64]:
        return self.bandwidth[self.dx :]

    def levels(self, j: int, of_y: bool) -> NDArray[np.float64]:
        """The distinct training values of column ``j`` of y (or x)."""
        return np.unique((self.y if of_y else self.x)[:, j])

    def y_constant(self) -> float:
        """``sum over continuous y columns of (log c_K - log h)``."""
        cont = [j for j, t in enumerate(self.dep_types) if t == "c"]
        return len(cont) * log_constant(self.kernel) - float(np.log(self.hy[cont]).sum())


def log_sums(
    s: Sample, qx: NDArray[np.float64] | None, qy: NDArray[np.float64] | None, loo: bool = False
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The log joint density of (x, y) at (qx, qy) and the log marginal density of x at qx
    (:func:`log_kde`: pool's partial sums with unit values, constants kept); ``None`` queries
    mean the training points, each left out of its own sums when ``loo``."""
    joint_keys = np.hstack([s.x, s.y])
    jq = None if qx is None or qy is None else np.hstack([qx, qy])
    if qx is None and not loo:
        jq, qx = joint_keys, s.x
    ck, sw, be = s.categorical_kernel, s.sample_weight, s.backend
    types = s.var_types + s.dep_types
    joint = log_kde(jq, joint_keys, kernel=s.kernel, bandwidth=s.bandwidth, var_types=types,
                    categorical_kernel=ck, sample_weight=sw, backend=be, tol=s.tol)
    marg = log_kde(qx, s.x, kernel=s.kernel, bandwidth=s.hx, var_types=s.var_types, categorical_kernel=ck,
                   sample_weight=sw, backend=be, tol=s.tol)
    return joint, marg


def _blocks(m: int, n: int, arrays: int = 4) -> range:
    entries = max(1, int(get_config()["working_memory"] * 2**20) // (8 * arrays))
    return range(0, m, max(1, min(m, entries // max(n, 1))))


def block_size(m: int, n: int, arrays: int = 4) -> int:
    """Queries per block so that ``arrays`` (block, n) float64 arrays fit the working memory."""
    r = _blocks(m, n, arrays)
    return r.step


def x_log_weights(
    s: Sample, qx: NDArray[np.float64], keys: NDArray[np.intp] | None = None
) -> NDArray[np.float64]:
    """``log (s_i K_x(q - X_i))`` up to a constant per row, queries (b, dx) by keys (n,) (or
    by the keys ``keys`` only)."""
    cont = [j for j, t in enumerate(s.var_types) if t == "c"]
    cat = [j for j, t in enumerate(s.var_types) if t != "c"]
    x = s.x if keys is None else s.x[keys]
    lw = np.zeros((qx.shape[0], x.shape[0]))
    if cont:
        inv_h = 1.0 / s.hx[cont]
        w = block_weights(
            np.ascontiguousarray(qx[:, cont]), np.ascontiguousarray(x[:, cont]), s.kernel, inv_h
        )
        if s.kernel.log_domain:
            lw += w
        else:
            with np.errstate(divide="ignore"):
                lw += np.log(w)
    if cat:
        kinds = "".join(s.var_types[j] for j in cat)
        levels = np.array([s.levels(j, False).size for j in cat], dtype=np.int64)
        c = Categories.of(
            Categorical(kinds, s.x[:, cat], qx[:, cat], s.hx[cat], levels, s.categorical_kernel)
        )
        lw += c.log_factor(qx[:, cat], x[:, cat])
    if s.sample_weight is not None:
        sw = s.sample_weight if keys is None else s.sample_weight[keys]
        with np.errstate(divide="ignore"):
            lw += np.log(sw)[None, :]
    return lw


def normalised(lw: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rows of ``exp(lw)`` over their sum (NaN rows where every weight is zero)."""
    top = lw.max(axis=1, keepdims=True)
    w = np.exp(lw - np.where(np.isfinite(top), top, 0.0))
    total = w.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return w / total


def y_cdf(
    s: Sample, qy: NDArray[np.float64], rows: slice | NDArray[np.intp] = slice(None)
) -> NDArray[np.float64]:
    """The product over y columns of each key's CDF factor at the queries' y: (b, n)."""
    out = np.ones((qy.shape[0], s.y.shape[0]))
    for j, t in enumerate(s.dep_types):
        if t == "c":
            out *= kernel_cdf(s.kernel, (qy[:, j, None] - s.y[None, :, j]) / s.hy[j])
        else:
            out *= categorical_cdf(
                t, s.categorical_kernel, s.y[:, j], qy[:, j], float(s.hy[j]), s.levels(j, True)
            )
    return out


def y_log_kernel(s: Sample, qy: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log`` of the product over y columns of each key's kernel factor, constants and
    ``1 / h`` included: (b, n)."""
    cont = [j for j, t in enumerate(s.dep_types) if t == "c"]
    cat = [j for j, t in enumerate(s.dep_types) if t != "c"]
    out = np.zeros((qy.shape[0], s.y.shape[0]))
    if cont:
        w = block_weights(
            np.ascontiguousarray(qy[:, cont]), np.ascontiguousarray(s.y[:, cont]), s.kernel, 1.0 / s.hy[cont]
        )
        with np.errstate(divide="ignore"):
            out += w if s.kernel.log_domain else np.log(w)
        out += s.y_constant()
    if cat:
        kinds = "".join(s.dep_types[j] for j in cat)
        levels = np.array([s.levels(j, True).size for j in cat], dtype=np.int64)
        c = Categories.of(
            Categorical(kinds, s.y[:, cat], qy[:, cat], s.hy[cat], levels, s.categorical_kernel)
        )
        out += c.log_factor(qy[:, cat], s.y[:, cat])
    return out
